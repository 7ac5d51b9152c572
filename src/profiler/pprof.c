/*
 * pprof profile builder: interning tables and sample aggregation. The
 * protobuf-c serialisation, gzip compression and atomic file output are in
 * pprof_write.c; the shared layout in pprof_internal.h. See pprof.h.
 *
 * Internals
 *  - Strings live in one byte buffer (NUL-terminated, addressed by offset)
 *    with a parallel entry array; functions are keyed by their name's
 *    string index (str_ent.func), so no separate function hash is needed.
 *  - Hash tables are chained through entry indices with insertion at the
 *    chain head. Because the newest entry is always at the head of its
 *    chain (rehashing re-inserts in index order), entries added after a
 *    mark can be removed again by popping them in reverse order. add_sample
 *    uses this to be all-or-nothing: whatever it interned is rolled back
 *    when the sample is dropped, so a dropped sample never consumes
 *    capacity. reset() is the same rollback to the configuration mark.
 *  - Samples keep their location ids (uint64, the wire type) and values in
 *    flat arrays that the protobuf-c message points into directly.
 */
#include "profiler/pprof_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

static uint32_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return (uint32_t)mix64(h ^ len);
}

/* Ensures v can hold need elements of size elem, growing geometrically but
 * never past limit elements (need <= limit is the caller's job). */
static int vec_reserve(struct vec *v, size_t elem, size_t need, size_t limit)
{
    if (need <= v->cap)
        return 0;
    size_t cap = v->cap ? v->cap : INITIAL_CAP;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    if (cap > limit)
        cap = limit > need ? limit : need;
    if (cap > SIZE_MAX / elem)
        return -ENOMEM;
    void *p = realloc(v->p, cap * elem);
    if (!p)
        return -ENOMEM;
    v->p = p;
    v->cap = cap;
    return 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Rebuilds a chained table of n entries into nb (power of two) buckets.
 * Re-inserting in index order keeps the newest entry at each chain head. */
static void str_rehash(clrmux_pprof_builder *b, uint32_t *buckets, size_t nb)
{
    for (size_t i = 0; i < nb; i++)
        buckets[i] = NIL;
    for (size_t i = 0; i < b->n_strs; i++) {
        struct str_ent *e = str_at(b, i);
        size_t h = e->hash & (nb - 1);
        e->next = buckets[h];
        buckets[h] = (uint32_t)i;
    }
}

static void sample_rehash(clrmux_pprof_builder *b, uint32_t *buckets,
                          size_t nb)
{
    struct sample_ent *s = b->samples.p;
    for (size_t i = 0; i < nb; i++)
        buckets[i] = NIL;
    for (size_t i = 0; i < b->n_samples; i++) {
        size_t h = s[i].hash & (nb - 1);
        s[i].next = buckets[h];
        buckets[h] = (uint32_t)i;
    }
}

/* Grows a bucket array when the load exceeds 1. Failure is harmless
 * (chains get longer), so this cannot fail. */
static void maybe_grow_str_buckets(clrmux_pprof_builder *b)
{
    if (b->n_strs < b->str_nbuckets || b->str_nbuckets > SIZE_MAX / 8)
        return;
    size_t nb = b->str_nbuckets * 2;
    uint32_t *nbk = malloc(nb * sizeof *nbk);
    if (!nbk)
        return;
    str_rehash(b, nbk, nb);
    free(b->str_buckets);
    b->str_buckets = nbk;
    b->str_nbuckets = nb;
}

static void maybe_grow_sample_buckets(clrmux_pprof_builder *b)
{
    if (b->n_samples < b->sample_nbuckets || b->sample_nbuckets > SIZE_MAX / 8)
        return;
    size_t nb = b->sample_nbuckets * 2;
    uint32_t *nbk = malloc(nb * sizeof *nbk);
    if (!nbk)
        return;
    sample_rehash(b, nbk, nb);
    free(b->sample_buckets);
    b->sample_buckets = nbk;
    b->sample_nbuckets = nb;
}

/* ------------------------------------------------------------------ */
/* interning                                                           */

/* Interns s[0..len). Returns 0 and the index in *idx, -ENOSPC when a
 * string limit is hit, -ENOMEM. */
static int str_intern_n(clrmux_pprof_builder *b, const char *s, size_t len,
                        uint32_t *idx)
{
    uint32_t h = hash_bytes(s, len);
    for (uint32_t i = b->str_buckets[h & (b->str_nbuckets - 1)]; i != NIL;
         i = str_at(b, i)->next) {
        const struct str_ent *e = str_at(b, i);
        if (e->hash == h && e->len == len &&
            memcmp(b->bytes + e->off, s, len) == 0) {
            *idx = i;
            return 0;
        }
    }
    if (b->n_strs >= b->lim.max_strings ||
        len >= b->lim.max_string_bytes - b->bytes_len)
        return -ENOSPC;
    if (vec_reserve(&b->strs, sizeof(struct str_ent), b->n_strs + 1,
                    b->lim.max_strings) != 0)
        return -ENOMEM;
    size_t need = b->bytes_len + len + 1;
    if (need > b->bytes_cap) {
        size_t cap = b->bytes_cap ? b->bytes_cap : 4096;
        while (cap < need)
            cap *= 2;
        if (cap > b->lim.max_string_bytes)
            cap = b->lim.max_string_bytes;
        char *p = realloc(b->bytes, cap);
        if (!p)
            return -ENOMEM;
        b->bytes = p;
        b->bytes_cap = cap;
    }
    memcpy(b->bytes + b->bytes_len, s, len);
    b->bytes[b->bytes_len + len] = '\0';

    size_t i = b->n_strs++;
    struct str_ent *e = str_at(b, i);
    e->off = (uint32_t)b->bytes_len;
    e->len = (uint32_t)len;
    e->hash = h;
    e->func = NIL;
    size_t bk = h & (b->str_nbuckets - 1);
    e->next = b->str_buckets[bk];
    b->str_buckets[bk] = (uint32_t)i;
    b->bytes_len = need;
    maybe_grow_str_buckets(b);
    *idx = (uint32_t)i;
    return 0;
}

static int str_intern(clrmux_pprof_builder *b, const char *s, uint32_t *idx)
{
    return str_intern_n(b, s, strlen(s), idx);
}

/* Returns the function index (== location index) for frame name s,
 * creating it if needed. -ENOSPC with *reason set on limits, -ENOMEM. */
static int func_intern(clrmux_pprof_builder *b, const char *s, uint32_t *fidx,
                       clrmux_pprof_drop_reason *reason)
{
    uint32_t si;
    int rc = str_intern(b, s, &si);
    if (rc != 0) {
        *reason = rc == -ENOSPC ? CLRMUX_PPROF_DROP_STRINGS
                                : CLRMUX_PPROF_DROP_NOMEM;
        return rc;
    }
    struct str_ent *e = str_at(b, si);
    if (e->func != NIL) {
        *fidx = e->func;
        return 0;
    }
    if (b->n_funcs >= b->lim.max_functions) {
        *reason = CLRMUX_PPROF_DROP_FUNCTIONS;
        return -ENOSPC;
    }
    if (vec_reserve(&b->funcs, sizeof(uint32_t), b->n_funcs + 1,
                    b->lim.max_functions) != 0) {
        *reason = CLRMUX_PPROF_DROP_NOMEM;
        return -ENOMEM;
    }
    ((uint32_t *)b->funcs.p)[b->n_funcs] = si;
    e->func = (uint32_t)b->n_funcs;
    *fidx = (uint32_t)b->n_funcs++;
    return 0;
}

static struct mark take_mark(const clrmux_pprof_builder *b)
{
    struct mark m = { b->n_strs, b->bytes_len, b->n_funcs };
    return m;
}

/* Removes every function and string added after m (see file comment). */
static void rollback(clrmux_pprof_builder *b, struct mark m)
{
    const uint32_t *fn = b->funcs.p;
    for (size_t j = m.n_funcs; j < b->n_funcs; j++)
        str_at(b, fn[j])->func = NIL;
    b->n_funcs = m.n_funcs;
    while (b->n_strs > m.n_strs) {
        size_t i = --b->n_strs;
        const struct str_ent *e = str_at(b, i);
        b->str_buckets[e->hash & (b->str_nbuckets - 1)] = e->next;
    }
    b->bytes_len = m.bytes_len;
}

/* ------------------------------------------------------------------ */
/* creation                                                            */

static int apply_limit(size_t *v, size_t def)
{
    if (*v == 0)
        *v = def;
    return *v > CLRMUX_PPROF_LIMIT_MAX ? -EINVAL : 0;
}

static bool nonempty(const char *s)
{
    return s && *s;
}

static int intern_config(clrmux_pprof_builder *b,
                         const clrmux_pprof_config *cfg)
{
    uint32_t idx;
    int rc = str_intern(b, "", &idx);
    for (size_t i = 0; rc == 0 && i < cfg->n_sample_types; i++) {
        rc = str_intern(b, cfg->sample_types[i].type, &b->type_str[i]);
        if (rc == 0)
            rc = str_intern(b, cfg->sample_types[i].unit, &b->unit_str[i]);
    }
    if (rc == 0 && b->has_period_type) {
        rc = str_intern(b, cfg->period_type.type, &b->period_type_str);
        if (rc == 0)
            rc = str_intern(b, cfg->period_type.unit, &b->period_unit_str);
    }
    if (rc == 0 && cfg->default_sample_type)
        rc = str_intern(b, cfg->default_sample_type, &b->default_type_str);
    return rc == -ENOSPC ? -EINVAL : rc;
}

int clrmux_pprof_create(const clrmux_pprof_config *cfg,
                        clrmux_pprof_builder **out)
{
    if (!cfg || !out || !cfg->sample_types || cfg->n_sample_types == 0 ||
        cfg->n_sample_types > MAX_SAMPLE_TYPES || cfg->period < 0)
        return -EINVAL;
    for (size_t i = 0; i < cfg->n_sample_types; i++) {
        if (!nonempty(cfg->sample_types[i].type) ||
            !nonempty(cfg->sample_types[i].unit))
            return -EINVAL;
        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->sample_types[i].type,
                       cfg->sample_types[j].type) == 0)
                return -EINVAL;
    }
    bool has_period_type = cfg->period_type.type != NULL;
    if (has_period_type && (!nonempty(cfg->period_type.type) ||
                            !nonempty(cfg->period_type.unit)))
        return -EINVAL;
    if (cfg->default_sample_type) {
        bool found = false;
        for (size_t i = 0; i < cfg->n_sample_types; i++)
            found |= strcmp(cfg->default_sample_type,
                            cfg->sample_types[i].type) == 0;
        if (!found)
            return -EINVAL;
    }
    clrmux_pprof_limits lim = cfg->limits;
    if (apply_limit(&lim.max_samples, DEFAULT_MAX_SAMPLES) ||
        apply_limit(&lim.max_functions, DEFAULT_MAX_FUNCTIONS) ||
        apply_limit(&lim.max_strings, DEFAULT_MAX_STRINGS) ||
        apply_limit(&lim.max_string_bytes, DEFAULT_MAX_STRING_BYTES) ||
        apply_limit(&lim.max_stack_depth, DEFAULT_MAX_STACK_DEPTH))
        return -EINVAL;

    clrmux_pprof_builder *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->lim = lim;
    b->n_types = cfg->n_sample_types;
    b->has_period_type = has_period_type;
    b->period = cfg->period;
    b->str_nbuckets = INITIAL_CAP;
    b->sample_nbuckets = INITIAL_CAP;
    b->str_buckets = malloc(b->str_nbuckets * sizeof *b->str_buckets);
    b->sample_buckets = malloc(b->sample_nbuckets * sizeof *b->sample_buckets);
    if (!b->str_buckets || !b->sample_buckets) {
        clrmux_pprof_destroy(b);
        return -ENOMEM;
    }
    str_rehash(b, b->str_buckets, b->str_nbuckets);
    sample_rehash(b, b->sample_buckets, b->sample_nbuckets);
    int rc = intern_config(b, cfg);
    if (rc != 0) {
        clrmux_pprof_destroy(b);
        return rc;
    }
    b->cfg_n_strs = b->n_strs;
    b->cfg_bytes_len = b->bytes_len;
    *out = b;
    return 0;
}

void clrmux_pprof_destroy(clrmux_pprof_builder *b)
{
    if (!b)
        return;
    free(b->bytes);
    free(b->strs.p);
    free(b->str_buckets);
    free(b->funcs.p);
    free(b->samples.p);
    free(b->values.p);
    free(b->locs.p);
    free(b->labs.p);
    free(b->sample_buckets);
    free(b->scratch_locs.p);
    free(b);
}

void clrmux_pprof_reset(clrmux_pprof_builder *b)
{
    if (!b)
        return;
    struct mark m = { b->cfg_n_strs, b->cfg_bytes_len, 0 };
    rollback(b, m);
    b->n_samples = 0;
    b->n_locs = 0;
    b->n_labs = 0;
    sample_rehash(b, b->sample_buckets, b->sample_nbuckets);
    b->n_comments = 0;
    b->time_nanos = 0;
    b->duration_nanos = 0;
    memset(b->dropped, 0, sizeof b->dropped);
    b->truncated = 0;
}

/* ------------------------------------------------------------------ */
/* samples                                                             */

static bool label_less(const struct label_ent *a, const struct label_ent *b)
{
    return a->key < b->key;
}

static uint64_t sample_hash(const uint64_t *locs, size_t n_loc,
                            const struct label_ent *labs, size_t n_lab)
{
    uint64_t h = mix64(n_loc * 31 + n_lab + 1);
    for (size_t i = 0; i < n_loc; i++)
        h = mix64(h ^ locs[i]);
    for (size_t i = 0; i < n_lab; i++) {
        h = mix64(h ^ ((uint64_t)labs[i].key << 32 | labs[i].str));
        h = mix64(h ^ (uint64_t)labs[i].num);
        h = mix64(h ^ labs[i].unit);
    }
    return h;
}

static bool labels_equal(const struct label_ent *a, const struct label_ent *b,
                         size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].key != b[i].key || a[i].str != b[i].str ||
            a[i].num != b[i].num || a[i].unit != b[i].unit)
            return false;
    return true;
}

static int drop(clrmux_pprof_builder *b, struct mark m,
                clrmux_pprof_drop_reason reason, int rc)
{
    rollback(b, m);
    b->dropped[reason]++;
    return rc;
}

int clrmux_pprof_add_sample(clrmux_pprof_builder *b,
                            const char *const *frames, size_t n_frames,
                            const int64_t *values, size_t n_values,
                            const clrmux_pprof_label *labels,
                            size_t n_labels)
{
    if (!b || (n_frames && !frames) || !values || n_values != b->n_types ||
        n_labels > CLRMUX_PPROF_MAX_LABELS || (n_labels && !labels))
        return -EINVAL;
    for (size_t i = 0; i < n_labels; i++)
        if (!nonempty(labels[i].key))
            return -EINVAL;

    struct mark m = take_mark(b);
    clrmux_pprof_drop_reason reason = CLRMUX_PPROF_DROP_NOMEM;
    int rc;

    /* Stack, leaf first; deep stacks keep their leaf-most frames. */
    size_t depth = n_frames;
    bool truncate = n_frames > b->lim.max_stack_depth;
    if (truncate)
        depth = b->lim.max_stack_depth;
    if (vec_reserve(&b->scratch_locs, sizeof(uint64_t), depth,
                    b->lim.max_stack_depth) != 0)
        return drop(b, m, CLRMUX_PPROF_DROP_NOMEM, -ENOMEM);
    uint64_t *locs = b->scratch_locs.p;
    for (size_t i = 0; i < depth; i++) {
        const char *name = truncate && i == depth - 1
                               ? CLRMUX_PPROF_TRUNCATED_FRAME
                               : frames[i];
        if (!nonempty(name))
            name = CLRMUX_PPROF_UNKNOWN_FRAME;
        uint32_t f;
        rc = func_intern(b, name, &f, &reason);
        if (rc != 0)
            return drop(b, m, reason, rc);
        locs[i] = (uint64_t)f + 1; /* location id == function id */
    }

    /* Labels, canonicalised by key string index (insertion sort). */
    struct label_ent labs[CLRMUX_PPROF_MAX_LABELS];
    for (size_t i = 0; i < n_labels; i++) {
        struct label_ent l = { 0, 0, 0, 0 };
        rc = str_intern(b, labels[i].key, &l.key);
        if (rc == 0 && nonempty(labels[i].str)) {
            rc = str_intern(b, labels[i].str, &l.str);
        } else if (rc == 0) {
            l.num = labels[i].num;
            if (nonempty(labels[i].num_unit))
                rc = str_intern(b, labels[i].num_unit, &l.unit);
        }
        if (rc != 0)
            return drop(b, m,
                        rc == -ENOSPC ? CLRMUX_PPROF_DROP_STRINGS
                                      : CLRMUX_PPROF_DROP_NOMEM,
                        rc);
        size_t j = i;
        for (; j > 0 && label_less(&l, &labs[j - 1]); j--)
            labs[j] = labs[j - 1];
        labs[j] = l;
    }
    for (size_t i = 1; i < n_labels; i++) {
        if (labs[i].key == labs[i - 1].key) {
            rollback(b, m);
            return -EINVAL; /* duplicate key: caller error, not a drop */
        }
    }

    /* Aggregate into an existing sample if stack and labels match. */
    uint64_t h = sample_hash(locs, depth, labs, n_labels);
    struct sample_ent *ss = b->samples.p;
    for (uint32_t i = b->sample_buckets[h & (b->sample_nbuckets - 1)];
         i != NIL; i = ss[i].next) {
        const struct sample_ent *s = &ss[i];
        if (s->hash != h || s->n_loc != depth || s->n_lab != n_labels)
            continue;
        const uint64_t *sl = (const uint64_t *)b->locs.p + s->loc_off;
        const struct label_ent *sb =
            (const struct label_ent *)b->labs.p + s->lab_off;
        if (memcmp(sl, locs, depth * sizeof *locs) != 0 ||
            !labels_equal(sb, labs, n_labels))
            continue;
        int64_t *v = (int64_t *)b->values.p + (size_t)i * b->n_types;
        for (size_t k = 0; k < b->n_types; k++)
            v[k] = sat_add(v[k], values[k]);
        if (truncate)
            b->truncated++;
        return 0;
    }

    /* New sample. */
    if (b->n_samples >= b->lim.max_samples)
        return drop(b, m, CLRMUX_PPROF_DROP_SAMPLES, -ENOSPC);
    size_t max_locs = b->lim.max_samples * b->lim.max_stack_depth;
    size_t max_labs = b->lim.max_samples * CLRMUX_PPROF_MAX_LABELS;
    if (vec_reserve(&b->samples, sizeof(struct sample_ent), b->n_samples + 1,
                    b->lim.max_samples) ||
        vec_reserve(&b->values, sizeof(int64_t),
                    (b->n_samples + 1) * b->n_types,
                    b->lim.max_samples * b->n_types) ||
        vec_reserve(&b->locs, sizeof(uint64_t), b->n_locs + depth,
                    max_locs) ||
        vec_reserve(&b->labs, sizeof(struct label_ent), b->n_labs + n_labels,
                    max_labs))
        return drop(b, m, CLRMUX_PPROF_DROP_NOMEM, -ENOMEM);

    size_t si = b->n_samples++;
    struct sample_ent *s = (struct sample_ent *)b->samples.p + si;
    s->hash = h;
    s->loc_off = b->n_locs;
    s->lab_off = b->n_labs;
    s->n_loc = (uint32_t)depth;
    s->n_lab = (uint32_t)n_labels;
    size_t bk = h & (b->sample_nbuckets - 1);
    s->next = b->sample_buckets[bk];
    b->sample_buckets[bk] = (uint32_t)si;
    if (depth)
        memcpy((uint64_t *)b->locs.p + b->n_locs, locs, depth * sizeof *locs);
    b->n_locs += depth;
    if (n_labels)
        memcpy((struct label_ent *)b->labs.p + b->n_labs, labs,
               n_labels * sizeof *labs);
    b->n_labs += n_labels;
    memcpy((int64_t *)b->values.p + si * b->n_types, values,
           b->n_types * sizeof *values);
    if (truncate)
        b->truncated++;
    maybe_grow_sample_buckets(b);
    return 0;
}

void clrmux_pprof_set_time(clrmux_pprof_builder *b, int64_t time_nanos,
                           int64_t duration_nanos)
{
    if (!b)
        return;
    b->time_nanos = time_nanos;
    b->duration_nanos = duration_nanos;
}

int clrmux_pprof_add_comment(clrmux_pprof_builder *b, const char *comment)
{
    if (!b || !comment)
        return -EINVAL;
    if (b->n_comments >= CLRMUX_PPROF_MAX_COMMENTS)
        return -ENOSPC;
    uint32_t idx;
    int rc = str_intern(b, comment, &idx);
    if (rc != 0)
        return rc;
    b->comments[b->n_comments++] = idx;
    return 0;
}

uint64_t clrmux_pprof_dropped(const clrmux_pprof_builder *b,
                              clrmux_pprof_drop_reason reason)
{
    if (!b)
        return 0;
    if ((unsigned)reason < CLRMUX_PPROF_DROP_REASON_COUNT)
        return b->dropped[reason];
    uint64_t total = 0;
    for (size_t i = 0; i < CLRMUX_PPROF_DROP_REASON_COUNT; i++)
        total += b->dropped[i];
    return total;
}

uint64_t clrmux_pprof_truncated_stacks(const clrmux_pprof_builder *b)
{
    return b ? b->truncated : 0;
}

size_t clrmux_pprof_sample_count(const clrmux_pprof_builder *b)
{
    return b ? b->n_samples : 0;
}

size_t clrmux_pprof_function_count(const clrmux_pprof_builder *b)
{
    return b ? b->n_funcs : 0;
}

size_t clrmux_pprof_string_count(const clrmux_pprof_builder *b)
{
    return b ? b->n_strs : 0;
}
