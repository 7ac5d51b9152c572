/* Unit tests for src/profiler/pprof.c: builds profiles, serialises them,
 * gunzips and decodes them back with protobuf-c and checks the pprof
 * invariants; optionally reads a written file with `go tool pprof`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "profile.pb-c.h"
#include "profiler/pprof.h"

typedef Perftools__Profiles__Profile Profile;

static const clrmux_pprof_value_type k_types[] = {
    { "cpu", "nanoseconds" },        { "wall", "nanoseconds" },
    { "exception", "count" },        { "alloc-samples", "count" },
    { "alloc-size", "bytes" },       { "lock-count", "count" },
    { "lock-time", "nanoseconds" },
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])
enum { CPU, WALL, EXC, ALLOC_N, ALLOC_B, LOCK_N, LOCK_T };

static clrmux_pprof_config base_config(void)
{
    clrmux_pprof_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sample_types = k_types;
    cfg.n_sample_types = N_TYPES;
    cfg.period_type.type = "cpu";
    cfg.period_type.unit = "nanoseconds";
    cfg.period = 10000000;
    cfg.default_sample_type = "cpu";
    return cfg;
}

static clrmux_pprof_builder *new_builder(const clrmux_pprof_limits *lim)
{
    clrmux_pprof_config cfg = base_config();
    if (lim)
        cfg.limits = *lim;
    clrmux_pprof_builder *b = NULL;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), 0);
    assert_non_null(b);
    return b;
}

/* Values with v in slot `type` and zeros elsewhere. */
static void one_value(int64_t *vals, int type, int64_t v)
{
    memset(vals, 0, N_TYPES * sizeof *vals);
    vals[type] = v;
}

static int add1(clrmux_pprof_builder *b, const char *const *frames, size_t n,
                int type, int64_t v, const clrmux_pprof_label *labels,
                size_t n_labels)
{
    int64_t vals[N_TYPES];
    one_value(vals, type, v);
    return clrmux_pprof_add_sample(b, frames, n, vals, N_TYPES, labels,
                                   n_labels);
}

static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    size_t cap = len * 4 + 64, used = 0;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    int rc;
    do {
        if (used == cap) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        zs.next_out = out + used;
        zs.avail_out = (uInt)(cap - used);
        rc = inflate(&zs, Z_NO_FLUSH);
        used = cap - zs.avail_out;
        assert_true(rc == Z_OK || rc == Z_STREAM_END);
    } while (rc != Z_STREAM_END);
    assert_int_equal(zs.avail_in, 0); /* exactly one gzip member */
    inflateEnd(&zs);
    *out_len = used;
    return out;
}

static Profile *decode_bytes(const uint8_t *gz, size_t gz_len)
{
    assert_true(gz_len > 18);
    assert_int_equal(gz[0], 0x1f); /* gzip magic */
    assert_int_equal(gz[1], 0x8b);
    assert_int_equal(gz[2], 8); /* deflate */
    size_t raw_len;
    uint8_t *raw = gunzip(gz, gz_len, &raw_len);
    Profile *p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
    free(raw);
    assert_non_null(p);
    return p;
}

static Profile *decode(const clrmux_pprof_builder *b)
{
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    assert_int_equal(clrmux_pprof_serialize(b, &gz, &gz_len), 0);
    Profile *p = decode_bytes(gz, gz_len);
    free(gz);
    return p;
}

static void str_ok(const Profile *p, int64_t idx)
{
    assert_true(idx >= 0 && (size_t)idx < p->n_string_table);
}

static const char *S(const Profile *p, int64_t idx)
{
    str_ok(p, idx);
    return p->string_table[idx];
}

static const Perftools__Profiles__Function *func_by_id(const Profile *p,
                                                       uint64_t id)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id)
            return p->function[i];
    return NULL;
}

static const Perftools__Profiles__Location *loc_by_id(const Profile *p,
                                                      uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

/* Name of the function of a location id. */
static const char *loc_name(const Profile *p, uint64_t loc_id)
{
    const Perftools__Profiles__Location *l = loc_by_id(p, loc_id);
    assert_non_null(l);
    assert_int_equal(l->n_line, 1);
    const Perftools__Profiles__Function *f =
        func_by_id(p, l->line[0]->function_id);
    assert_non_null(f);
    return S(p, f->name);
}

/* Checks the structural invariants every profile must satisfy. */
static void check_invariants(const Profile *p)
{
    assert_true(p->n_string_table >= 1);
    assert_string_equal(p->string_table[0], "");
    assert_int_equal(p->n_sample_type, N_TYPES);
    for (size_t i = 0; i < p->n_sample_type; i++) {
        assert_string_equal(S(p, p->sample_type[i]->type), k_types[i].type);
        assert_string_equal(S(p, p->sample_type[i]->unit), k_types[i].unit);
    }
    assert_non_null(p->period_type);
    assert_string_equal(S(p, p->period_type->type), "cpu");
    assert_string_equal(S(p, p->period_type->unit), "nanoseconds");
    assert_int_equal(p->period, 10000000);
    assert_string_equal(S(p, p->default_sample_type), "cpu");

    /* functions: ids nonzero and unique, names valid and distinct */
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        assert_true(f->id != 0);
        str_ok(p, f->name);
        /* kept empty so pprof does not strip "<...>" from the name */
        assert_int_equal(f->system_name, 0);
        assert_true(f->name != 0);
        for (size_t j = 0; j < i; j++) {
            assert_true(p->function[j]->id != f->id);
            assert_true(strcmp(S(p, p->function[j]->name), S(p, f->name)));
        }
    }
    /* locations: ids nonzero and unique, each refers to existing functions */
    assert_int_equal(p->n_location, p->n_function);
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        assert_true(l->id != 0);
        assert_int_equal(l->address, 0);
        assert_int_equal(l->mapping_id, 0);
        assert_int_equal(l->n_line, 1);
        assert_non_null(func_by_id(p, l->line[0]->function_id));
        for (size_t j = 0; j < i; j++)
            assert_true(p->location[j]->id != l->id);
    }
    /* samples: one value per sample type, existing locations, labels */
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        assert_int_equal(s->n_value, p->n_sample_type);
        for (size_t j = 0; j < s->n_location_id; j++)
            assert_non_null(loc_by_id(p, s->location_id[j]));
        for (size_t j = 0; j < s->n_label; j++) {
            const Perftools__Profiles__Label *lb = s->label[j];
            assert_true(lb->key != 0);
            str_ok(p, lb->key);
            str_ok(p, lb->str);
            str_ok(p, lb->num_unit);
        }
    }
    for (size_t i = 0; i < p->n_comment; i++)
        str_ok(p, p->comment[i]);
}

static int has_comment(const Profile *p, const char *text)
{
    for (size_t i = 0; i < p->n_comment; i++)
        if (strcmp(S(p, p->comment[i]), text) == 0)
            return 1;
    return 0;
}

/* Index of the sample whose stack (leaf first) is frames, or -1. */
static long find_sample(const Profile *p, const char *const *frames, size_t n)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_location_id != n)
            continue;
        size_t j = 0;
        while (j < n && strcmp(loc_name(p, s->location_id[j]), frames[j]) == 0)
            j++;
        if (j == n)
            return (long)i;
    }
    return -1;
}

/* ------------------------------------------------------------------ */

static void test_basic_profile(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st1[] = { "App.Worker.Compute", "App.Worker.Run",
                          "App.Program.Main" };
    const char *st2[] = { "System.Threading.Monitor.Enter", "App.Worker.Run",
                          "App.Program.Main" };
    assert_int_equal(add1(b, st1, 3, CPU, 10000000, NULL, 0), 0);
    assert_int_equal(add1(b, st2, 3, LOCK_T, 5000, NULL, 0), 0);
    assert_int_equal(add1(b, st2, 3, LOCK_N, 1, NULL, 0), 0); /* aggregates */
    assert_int_equal(add1(b, NULL, 0, WALL, 7, NULL, 0), 0);  /* empty stack */
    clrmux_pprof_set_time(b, 1700000000000000000LL, 60000000000LL);
    assert_int_equal(clrmux_pprof_add_comment(b, "clrmux test"), 0);
    assert_int_equal(clrmux_pprof_sample_count(b), 3);
    assert_int_equal(clrmux_pprof_function_count(b), 4);

    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 3);
    assert_int_equal(p->n_function, 4);
    assert_int_equal(p->time_nanos, 1700000000000000000LL);
    assert_int_equal(p->duration_nanos, 60000000000LL);
    assert_true(has_comment(p, "clrmux test"));
    assert_int_equal(p->n_comment, 1);

    long i1 = find_sample(p, st1, 3), i2 = find_sample(p, st2, 3);
    assert_true(i1 >= 0 && i2 >= 0);
    const Perftools__Profiles__Sample *s1 = p->sample[i1], *s2 = p->sample[i2];
    for (size_t t = 0; t < N_TYPES; t++) {
        assert_int_equal(s1->value[t], t == CPU ? 10000000 : 0);
        assert_int_equal(s2->value[t],
                         t == LOCK_T ? 5000 : t == LOCK_N ? 1 : 0);
    }
    /* the shared frames are one function each */
    assert_int_equal(s1->location_id[1], s2->location_id[1]);
    assert_int_equal(s1->location_id[2], s2->location_id[2]);
    long ie = find_sample(p, NULL, 0);
    assert_true(ie >= 0);
    assert_int_equal(p->sample[ie]->value[WALL], 7);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_aggregation(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st[] = { "A.Leaf", "A.Root" };
    const char *rev[] = { "A.Root", "A.Leaf" };
    for (int i = 0; i < 100; i++)
        assert_int_equal(add1(b, st, 2, CPU, 10, NULL, 0), 0);
    assert_int_equal(add1(b, st, 2, ALLOC_B, 4096, NULL, 0), 0);
    assert_int_equal(add1(b, rev, 2, CPU, 1, NULL, 0), 0); /* other order */
    assert_int_equal(add1(b, st, 1, CPU, 1, NULL, 0), 0);  /* prefix */
    /* saturating sum */
    const char *sat[] = { "A.Big" };
    assert_int_equal(add1(b, sat, 1, CPU, INT64_MAX - 1, NULL, 0), 0);
    assert_int_equal(add1(b, sat, 1, CPU, 5, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_sample_count(b), 4);

    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 4);
    long i = find_sample(p, st, 2);
    assert_true(i >= 0);
    assert_int_equal(p->sample[i]->value[CPU], 1000);
    assert_int_equal(p->sample[i]->value[ALLOC_B], 4096);
    assert_int_equal(p->sample[find_sample(p, rev, 2)]->value[CPU], 1);
    assert_int_equal(p->sample[find_sample(p, st, 1)]->value[CPU], 1);
    assert_int_equal(p->sample[find_sample(p, sat, 1)]->value[CPU], INT64_MAX);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_many_samples_rehash(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    char n1[32], n2[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3000; i++) {
            snprintf(n1, sizeof n1, "Ns.T%d.M", i);
            snprintf(n2, sizeof n2, "Ns.Caller%d.M", i % 37);
            const char *st[] = { n1, n2, "Ns.Main" };
            clrmux_pprof_label lb = { "thread id", NULL, i % 5, NULL };
            assert_int_equal(add1(b, st, 3, CPU, i, &lb, 1), 0);
        }
    }
    assert_int_equal(clrmux_pprof_sample_count(b), 3000);
    assert_int_equal(clrmux_pprof_function_count(b), 3000 + 37 + 1);
    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 3000);
    int64_t total = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        total += p->sample[i]->value[CPU];
    assert_int_equal(total, 2 * (2999 * 3000 / 2));
    snprintf(n1, sizeof n1, "Ns.T%d.M", 1234);
    snprintf(n2, sizeof n2, "Ns.Caller%d.M", 1234 % 37);
    const char *st[] = { n1, n2, "Ns.Main" };
    long i = find_sample(p, st, 3);
    assert_true(i >= 0);
    assert_int_equal(p->sample[i]->value[CPU], 2 * 1234);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_labels(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st[] = { "App.Work" };
    clrmux_pprof_label l1[] = {
        { "thread id", NULL, 42, NULL },
        { "thread name", "worker-1", 0, NULL },
        { "allocation size", NULL, 128, "bytes" },
    };
    /* same set, different order: aggregated */
    clrmux_pprof_label l1r[] = { l1[2], l1[0], l1[1] };
    clrmux_pprof_label l2[] = {
        { "thread id", NULL, 43, NULL },
        { "thread name", "worker-2", 0, NULL },
    };
    assert_int_equal(add1(b, st, 1, CPU, 1, l1, 3), 0);
    assert_int_equal(add1(b, st, 1, CPU, 2, l1r, 3), 0);
    assert_int_equal(add1(b, st, 1, CPU, 4, l2, 2), 0);
    assert_int_equal(add1(b, st, 1, CPU, 8, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_sample_count(b), 3);

    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 3);
    int seen = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        int64_t tid = -1, size = -1;
        const char *tname = NULL, *size_unit = NULL;
        for (size_t j = 0; j < s->n_label; j++) {
            const Perftools__Profiles__Label *lb = s->label[j];
            const char *key = S(p, lb->key);
            if (strcmp(key, "thread id") == 0) {
                assert_int_equal(lb->str, 0);
                tid = lb->num;
            } else if (strcmp(key, "thread name") == 0) {
                assert_true(lb->str != 0);
                tname = S(p, lb->str);
            } else if (strcmp(key, "allocation size") == 0) {
                size = lb->num;
                size_unit = S(p, lb->num_unit);
            } else {
                fail_msg("unexpected label %s", key);
            }
        }
        if (s->n_label == 3) {
            assert_int_equal(tid, 42);
            assert_string_equal(tname, "worker-1");
            assert_int_equal(size, 128);
            assert_string_equal(size_unit, "bytes");
            assert_int_equal(s->value[CPU], 3);
            seen |= 1;
        } else if (s->n_label == 2) {
            assert_int_equal(tid, 43);
            assert_string_equal(tname, "worker-2");
            assert_int_equal(s->value[CPU], 4);
            seen |= 2;
        } else {
            assert_int_equal(s->n_label, 0);
            assert_int_equal(s->value[CPU], 8);
            seen |= 4;
        }
    }
    assert_int_equal(seen, 7);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_drop_samples_limit(void **state)
{
    (void)state;
    clrmux_pprof_limits lim = { .max_samples = 2 };
    clrmux_pprof_builder *b = new_builder(&lim);
    const char *a[] = { "F.A" }, *bb[] = { "F.B" }, *c[] = { "F.C" };
    assert_int_equal(add1(b, a, 1, CPU, 1, NULL, 0), 0);
    assert_int_equal(add1(b, bb, 1, CPU, 1, NULL, 0), 0);
    size_t strings = clrmux_pprof_string_count(b);
    for (int i = 0; i < 12; i++)
        assert_int_equal(add1(b, c, 1, CPU, 1, NULL, 0), -ENOSPC);
    /* the dropped sample left nothing behind */
    assert_int_equal(clrmux_pprof_string_count(b), strings);
    assert_int_equal(clrmux_pprof_function_count(b), 2);
    /* existing samples still aggregate */
    assert_int_equal(add1(b, a, 1, CPU, 1, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_SAMPLES), 12);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_REASON_COUNT),
                     12);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_FUNCTIONS), 0);

    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 2);
    assert_int_equal(p->n_function, 2);
    assert_true(has_comment(p, "dropped 12 samples: buffer full"));
    assert_int_equal(p->n_comment, 1);
    assert_int_equal(p->sample[find_sample(p, a, 1)]->value[CPU], 2);
    perftools__profiles__profile__free_unpacked(p, NULL);

    /* reset clears counts and contents */
    clrmux_pprof_reset(b);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_REASON_COUNT),
                     0);
    assert_int_equal(clrmux_pprof_sample_count(b), 0);
    assert_int_equal(add1(b, c, 1, CPU, 5, NULL, 0), 0);
    p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 1);
    assert_int_equal(p->n_function, 1);
    assert_int_equal(p->n_comment, 0);
    assert_int_equal(p->time_nanos, 0);
    assert_string_equal(loc_name(p, p->sample[0]->location_id[0]), "F.C");
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_drop_functions_and_strings(void **state)
{
    (void)state;
    clrmux_pprof_limits lim = { .max_functions = 3 };
    clrmux_pprof_builder *b = new_builder(&lim);
    const char *s1[] = { "F.A", "F.B" };
    const char *s2[] = { "F.C", "F.D", "F.A" }; /* needs 2 new, 1 left */
    assert_int_equal(add1(b, s1, 2, CPU, 1, NULL, 0), 0);
    size_t strings = clrmux_pprof_string_count(b);
    assert_int_equal(add1(b, s2, 3, CPU, 1, NULL, 0), -ENOSPC);
    /* all-or-nothing: F.C was interned then rolled back */
    assert_int_equal(clrmux_pprof_function_count(b), 2);
    assert_int_equal(clrmux_pprof_string_count(b), strings);
    const char *s3[] = { "F.C", "F.A" }; /* fits exactly */
    assert_int_equal(add1(b, s3, 2, CPU, 1, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_FUNCTIONS), 1);
    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_function, 3);
    assert_true(has_comment(p, "dropped 1 sample: too many distinct frames"));
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);

    /* string limit: config strings (17 with "") + 2 */
    size_t cfg_strings;
    {
        clrmux_pprof_builder *t = new_builder(NULL);
        cfg_strings = clrmux_pprof_string_count(t);
        clrmux_pprof_destroy(t);
    }
    clrmux_pprof_limits slim = { .max_strings = cfg_strings + 2 };
    b = new_builder(&slim);
    const char *x[] = { "X.One", "X.Two" };
    assert_int_equal(add1(b, x, 2, CPU, 1, NULL, 0), 0);
    clrmux_pprof_label lb = { "thread name", "main", 0, NULL };
    assert_int_equal(add1(b, x, 2, CPU, 1, &lb, 1), -ENOSPC);
    assert_int_equal(clrmux_pprof_string_count(b), cfg_strings + 2);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_STRINGS), 1);
    assert_int_equal(clrmux_pprof_add_comment(b, "no room"), -ENOSPC);
    p = decode(b);
    check_invariants(p);
    assert_true(has_comment(p, "dropped 1 sample: string table full"));
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);

    /* string byte limit */
    clrmux_pprof_limits blim = { .max_string_bytes = 200 };
    b = new_builder(&blim);
    char longname[300];
    memset(longname, 'L', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *ln[] = { longname };
    assert_int_equal(add1(b, ln, 1, CPU, 1, NULL, 0), -ENOSPC);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_STRINGS), 1);
    clrmux_pprof_destroy(b);
}

static void test_stack_truncation(void **state)
{
    (void)state;
    clrmux_pprof_limits lim = { .max_stack_depth = 4 };
    clrmux_pprof_builder *b = new_builder(&lim);
    const char *deep[] = { "D.F0", "D.F1", "D.F2", "D.F3", "D.F4", "D.F5" };
    const char *ok[] = { "D.F0", "D.F1", "D.F2", "D.F3" };
    assert_int_equal(add1(b, deep, 6, CPU, 1, NULL, 0), 0);
    assert_int_equal(add1(b, deep, 5, CPU, 1, NULL, 0), 0); /* same result */
    assert_int_equal(add1(b, ok, 4, CPU, 1, NULL, 0), 0);   /* not cut */
    assert_int_equal(clrmux_pprof_truncated_stacks(b), 2);
    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 2);
    const char *cut[] = { "D.F0", "D.F1", "D.F2", CLRMUX_PPROF_TRUNCATED_FRAME };
    long i = find_sample(p, cut, 4);
    assert_true(i >= 0);
    assert_int_equal(p->sample[i]->value[CPU], 2);
    assert_true(find_sample(p, ok, 4) >= 0);
    assert_true(has_comment(p, "truncated 2 stacks to 4 frames"));
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_unknown_frames_and_name_collision(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    /* a frame named like a config string ("cpu") gets a function; after
     * reset, it must be creatable again */
    const char *st[] = { NULL, "", "cpu" };
    assert_int_equal(add1(b, st, 3, CPU, 1, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_function_count(b), 2);
    Profile *p = decode(b);
    check_invariants(p);
    const char *expect[] = { "[unknown]", "[unknown]", "cpu" };
    assert_true(find_sample(p, expect, 3) >= 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_reset(b);
    assert_int_equal(clrmux_pprof_function_count(b), 0);
    const char *st2[] = { "cpu" };
    assert_int_equal(add1(b, st2, 1, CPU, 1, NULL, 0), 0);
    p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_function, 1);
    assert_true(find_sample(p, st2, 1) >= 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = NULL;
    clrmux_pprof_config cfg = base_config();
    assert_int_equal(clrmux_pprof_create(NULL, &b), -EINVAL);
    assert_int_equal(clrmux_pprof_create(&cfg, NULL), -EINVAL);
    cfg.n_sample_types = 0;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    cfg = base_config();
    cfg.default_sample_type = "nope";
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    cfg = base_config();
    cfg.period = -1;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    cfg = base_config();
    cfg.limits.max_strings = 3;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    cfg = base_config();
    cfg.limits.max_samples = CLRMUX_PPROF_LIMIT_MAX + 1;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    const clrmux_pprof_value_type dup[] = { { "cpu", "nanoseconds" },
                                            { "cpu", "count" } };
    cfg = base_config();
    cfg.sample_types = dup;
    cfg.n_sample_types = 2;
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    const clrmux_pprof_value_type nounit[] = { { "cpu", "" } };
    cfg.sample_types = nounit;
    cfg.n_sample_types = 1;
    assert_null(b);
    assert_int_equal(clrmux_pprof_create(&cfg, &b), -EINVAL);
    assert_null(b);

    b = new_builder(NULL);
    const char *st[] = { "A" };
    int64_t vals[N_TYPES] = { 0 };
    assert_int_equal(clrmux_pprof_add_sample(b, st, 1, vals, N_TYPES - 1,
                                             NULL, 0), -EINVAL);
    assert_int_equal(clrmux_pprof_add_sample(b, NULL, 1, vals, N_TYPES,
                                             NULL, 0), -EINVAL);
    assert_int_equal(clrmux_pprof_add_sample(b, st, 1, NULL, N_TYPES,
                                             NULL, 0), -EINVAL);
    clrmux_pprof_label dupk[] = { { "k", "a", 0, NULL }, { "k", NULL, 1, NULL } };
    size_t strings = clrmux_pprof_string_count(b);
    assert_int_equal(clrmux_pprof_add_sample(b, st, 1, vals, N_TYPES, dupk,
                                             2), -EINVAL);
    assert_int_equal(clrmux_pprof_string_count(b), strings); /* rolled back */
    clrmux_pprof_label nokey = { "", "a", 0, NULL };
    assert_int_equal(clrmux_pprof_add_sample(b, st, 1, vals, N_TYPES, &nokey,
                                             1), -EINVAL);
    clrmux_pprof_label many[CLRMUX_PPROF_MAX_LABELS + 1];
    for (size_t i = 0; i < CLRMUX_PPROF_MAX_LABELS + 1; i++)
        many[i] = (clrmux_pprof_label){ "k", NULL, 0, NULL };
    assert_int_equal(clrmux_pprof_add_sample(b, st, 1, vals, N_TYPES, many,
                                             CLRMUX_PPROF_MAX_LABELS + 1),
                     -EINVAL);
    assert_int_equal(clrmux_pprof_dropped(b, CLRMUX_PPROF_DROP_REASON_COUNT),
                     0);
    assert_int_equal(clrmux_pprof_add_comment(b, NULL), -EINVAL);
    for (int i = 0; i < CLRMUX_PPROF_MAX_COMMENTS; i++)
        assert_int_equal(clrmux_pprof_add_comment(b, "c"), 0);
    assert_int_equal(clrmux_pprof_add_comment(b, "c"), -ENOSPC);
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(clrmux_pprof_serialize(NULL, &out, &len), -EINVAL);
    assert_int_equal(clrmux_pprof_write_file(b, ""), -EINVAL);
    clrmux_pprof_destroy(b);
    clrmux_pprof_destroy(NULL);
}

static void test_empty_profile(void **state)
{
    (void)state;
    clrmux_pprof_builder *b = new_builder(NULL);
    Profile *p = decode(b);
    check_invariants(p);
    assert_int_equal(p->n_sample, 0);
    assert_int_equal(p->n_function, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
    clrmux_pprof_destroy(b);
}

static char *make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/clrmux-pprof-XXXXXX",
             base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 4096, used = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + used, 1, cap - used, f)) > 0) {
        used += n;
        if (used == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(f);
    *len = used;
    return buf;
}

/* The last file of a process is written without waiting for the disk
 * (CLRMUX_PPROF_WRITE_NO_FSYNC): the same bytes as clrmux_pprof_serialize, under the final
 * name, no temporary left, a planted link under the temporary name still refused. */
static void test_write_file_no_fsync(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/last.pb.gz", dir);
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st[] = { "W.Last", "W.Main" };
    assert_int_equal(add1(b, st, 2, CPU, 5, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_write_file_flags(b, path, CLRMUX_PPROF_WRITE_NO_FSYNC), 0);
    uint8_t *want = NULL;
    size_t want_len = 0;
    assert_int_equal(clrmux_pprof_serialize(b, &want, &want_len), 0);
    size_t len;
    uint8_t *data = read_file(path, &len);
    assert_int_equal(len, want_len);
    assert_memory_equal(data, want, len);
    Profile *p = decode_bytes(data, len);
    check_invariants(p);
    assert_int_equal(p->sample[0]->value[CPU], 5);
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(data);
    free(want);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    struct stat st_;
    assert_int_equal(stat(tmp, &st_), -1);
    char victim[PATH_MAX + 16];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *v = fopen(victim, "w");
    fputs("precious", v);
    fclose(v);
    assert_int_equal(link(victim, tmp), 0);
    assert_int_equal(clrmux_pprof_write_file_flags(b, path, CLRMUX_PPROF_WRITE_NO_FSYNC), 0);
    size_t vlen;
    uint8_t *vdata = read_file(victim, &vlen);
    assert_int_equal(vlen, 8);
    assert_memory_equal(vdata, "precious", 8);
    free(vdata);
    assert_int_equal(stat(tmp, &st_), -1);
    unlink(victim);
    unlink(path);
    rmdir(dir);
    free(dir);
    clrmux_pprof_destroy(b);
}

static void test_write_file_atomic(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cpu.pb.gz", dir);
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st[] = { "W.One" };
    assert_int_equal(add1(b, st, 1, CPU, 3, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_write_file(b, path), 0);
    /* overwrite with a second version */
    assert_int_equal(add1(b, st, 1, CPU, 4, NULL, 0), 0);
    assert_int_equal(clrmux_pprof_write_file(b, path), 0);

    size_t len;
    uint8_t *data = read_file(path, &len);
    Profile *p = decode_bytes(data, len);
    check_invariants(p);
    assert_int_equal(p->sample[0]->value[CPU], 7);
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(data);

    /* no temporary left behind */
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    struct stat st_;
    assert_int_equal(stat(tmp, &st_), -1);
    /* a directory that does not exist: error, nothing created */
    char bad[PATH_MAX + 16];
    snprintf(bad, sizeof bad, "%s/nope/x.pb.gz", dir);
    assert_int_equal(clrmux_pprof_write_file(b, bad), -ENOENT);
    /* a hard link planted under the temporary name: the linked file is neither written nor
     * truncated */
    char victim[PATH_MAX + 16];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *v = fopen(victim, "w");
    fputs("precious", v);
    fclose(v);
    assert_int_equal(link(victim, tmp), 0);
    assert_int_equal(clrmux_pprof_write_file(b, path), 0);
    size_t vlen;
    uint8_t *vdata = read_file(victim, &vlen);
    assert_int_equal(vlen, 8);
    assert_memory_equal(vdata, "precious", 8);
    free(vdata);
    assert_int_equal(stat(tmp, &st_), -1);
    assert_int_equal(unlink(victim), 0);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
    clrmux_pprof_destroy(b);
}

static int go_available(void)
{
    FILE *f = popen("command -v go 2>/dev/null", "r");
    if (!f)
        return 0;
    char line[PATH_MAX];
    int found = fgets(line, sizeof line, f) != NULL;
    pclose(f);
    return found;
}

static void test_go_tool_pprof_reads_file(void **state)
{
    (void)state;
    if (!go_available()) {
        print_message("`go` not on PATH: skipping go tool pprof check\n");
        skip();
    }
    if (!getenv("HOME"))
        setenv("HOME", "/tmp", 1);
    setenv("GOTOOLCHAIN", "local", 1);

    char *dir = make_tmpdir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/profile.pb.gz", dir);
    clrmux_pprof_builder *b = new_builder(NULL);
    const char *st[] = { "System.Collections.Generic.List<System.Int32>.Add",
                         "MyApp.Program.Main" };
    const char *st2[] = { "[native] libcoreclr.so", "MyApp.Program.Main" };
    clrmux_pprof_label lb[] = { { "thread id", NULL, 7, NULL },
                                { "thread name", "main", 0, NULL } };
    assert_int_equal(add1(b, st, 2, CPU, 30000000, lb, 2), 0);
    assert_int_equal(add1(b, st2, 2, CPU, 10000000, NULL, 0), 0);
    assert_int_equal(add1(b, st2, 2, WALL, 99, NULL, 0), 0);
    clrmux_pprof_set_time(b, 1700000000000000000LL, 1000000000LL);
    assert_int_equal(clrmux_pprof_write_file(b, path), 0);

    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd,
             "go tool pprof -top -sample_index=cpu '%s' 2>&1", path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[16384];
    size_t used = 0, n;
    while (used < sizeof out - 1 &&
           (n = fread(out + used, 1, sizeof out - 1 - used, f)) > 0)
        used += n;
    out[used] = '\0';
    int status = pclose(f);
    if (status != 0 || !strstr(out, "System.Collections.Generic.List<System.Int32>.Add"))
        print_message("go tool pprof output:\n%s\n", out);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "System.Collections.Generic.List<System.Int32>.Add"));
    assert_non_null(strstr(out, "[native] libcoreclr.so"));
    assert_non_null(strstr(out, "Type: cpu"));
    assert_non_null(strstr(out, "40ms total"));

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
    clrmux_pprof_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_profile),
        cmocka_unit_test(test_aggregation),
        cmocka_unit_test(test_many_samples_rehash),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_drop_samples_limit),
        cmocka_unit_test(test_drop_functions_and_strings),
        cmocka_unit_test(test_stack_truncation),
        cmocka_unit_test(test_unknown_frames_and_name_collision),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_empty_profile),
        cmocka_unit_test(test_write_file_atomic),
        cmocka_unit_test(test_write_file_no_fsync),
        cmocka_unit_test(test_go_tool_pprof_reads_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
