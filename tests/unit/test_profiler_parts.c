/* Unit tests for the built-in profiler's parts that need no runtime: EventPipe payload
 * parsing (src/profiler/events.c), the raw sample queue (rawq.c), the thread registry
 * (threads.c), the section's keys and the output file names (config.c), the name cache
 * (names.c: its growth, native frames' module names). */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "profiler/prof.h"

/* ---- EventPipe payloads ---------------------------------------------------------------- */

struct payload {
    uint8_t b[512];
    size_t n;
};
static void put(struct payload *p, const void *v, size_t n)
{
    memcpy(p->b + p->n, v, n);
    p->n += n;
}
static void put_u16(struct payload *p, uint16_t v) { put(p, &v, 2); }
static void put_u32(struct payload *p, uint32_t v) { put(p, &v, 4); }
static void put_u64(struct payload *p, uint64_t v) { put(p, &v, 8); }
static void put_wstr(struct payload *p, const char *ascii)
{
    for (; *ascii; ascii++)
        put_u16(p, (uint16_t)*ascii);
    put_u16(p, 0);
}

/* GCAllocationTick_V4 as the runtime writes it: packed, no padding. */
static struct payload alloc_tick_v4(uint32_t amount, uint64_t amount64, const char *type)
{
    struct payload p = {.n = 0};
    put_u32(&p, amount);         /* AllocationAmount */
    put_u32(&p, 1);              /* AllocationKind: large */
    put_u16(&p, 7);              /* ClrInstanceID */
    put_u64(&p, amount64);       /* AllocationAmount64 */
    put_u64(&p, 0x1122334455ull); /* TypeID */
    put_wstr(&p, type);          /* TypeName */
    put_u32(&p, 3);              /* HeapIndex */
    put_u64(&p, 0xABCDull);      /* Address */
    put_u64(&p, 24);             /* ObjectSize */
    return p;
}

static void test_alloc_tick_v4(void **state)
{
    (void)state;
    struct payload p = alloc_tick_v4(100123, 5000000000ull, "Shapes.Blob");
    struct prof_alloc_tick a;
    assert_int_equal(prof_parse_alloc_tick(p.b, p.n, 4, 8, &a), 0);
    assert_true(a.bytes == 5000000000ull); /* the 64-bit amount wins */
    assert_int_equal(a.kind, 1);
    assert_true(a.type_id == 0x1122334455ull);
    assert_string_equal(a.type_name, "Shapes.Blob");
}

static void test_alloc_tick_v1_has_no_type(void **state)
{
    (void)state;
    struct payload p = {.n = 0};
    put_u32(&p, 102400);
    put_u32(&p, 0);
    put_u16(&p, 1);
    struct prof_alloc_tick a;
    assert_int_equal(prof_parse_alloc_tick(p.b, p.n, 1, 8, &a), 0);
    assert_true(a.bytes == 102400);
    assert_string_equal(a.type_name, "");
}

static void test_alloc_tick_truncated(void **state)
{
    (void)state;
    struct payload p = alloc_tick_v4(1, 2, "T");
    struct prof_alloc_tick a;
    /* cut inside AllocationAmount64 / TypeID: an error, never a read past the end */
    assert_int_equal(prof_parse_alloc_tick(p.b, 14, 4, 8, &a), -1);
    assert_int_equal(prof_parse_alloc_tick(p.b, 25, 4, 8, &a), -1);
    assert_int_equal(prof_parse_alloc_tick(p.b, 3, 0, 8, &a), -1);
    assert_int_equal(prof_parse_alloc_tick(NULL, 0, 4, 8, &a), -1);
    /* a type name without its terminating NUL inside the payload: read up to the end */
    struct payload q = {.n = 0};
    put_u32(&q, 1);
    put_u32(&q, 0);
    put_u16(&q, 0);
    put_u64(&q, 9);
    put_u64(&q, 0);
    put_u16(&q, 'A');
    put_u16(&q, 'B');
    assert_int_equal(prof_parse_alloc_tick(q.b, q.n, 2, 8, &a), 0);
    assert_string_equal(a.type_name, "AB");
    /* 32-bit pointers */
    struct payload r = {.n = 0};
    put_u32(&r, 1);
    put_u32(&r, 0);
    put_u16(&r, 0);
    put_u64(&r, 9);
    put_u32(&r, 0x55);
    put_wstr(&r, "X");
    assert_int_equal(prof_parse_alloc_tick(r.b, r.n, 2, 4, &a), 0);
    assert_true(a.type_id == 0x55);
    assert_string_equal(a.type_name, "X");
}

static void test_contention_stop(void **state)
{
    (void)state;
    struct payload p = {.n = 0};
    uint8_t flags = 0;
    put(&p, &flags, 1);
    put_u16(&p, 9);
    double d = 1234567.0;
    put(&p, &d, 8);
    double out = -1;
    assert_int_equal(prof_parse_contention_stop(p.b, p.n, 1, &out), 0);
    assert_true(out == 1234567.0);
    assert_int_equal(prof_parse_contention_stop(p.b, p.n, 0, &out), 0); /* v0: no duration */
    assert_true(out == 0);
    assert_int_equal(prof_parse_contention_stop(p.b, 5, 1, &out), -1);
    double nan = 0.0 / 0.0;
    memcpy(p.b + 3, &nan, 8);
    assert_int_equal(prof_parse_contention_stop(p.b, p.n, 1, &out), 0);
    assert_true(out == 0);
}

static void test_event_stack_is_a_byte_count(void **state)
{
    (void)state;
    /* the runtime passes bytes (frames * sizeof(UINT_PTR)): never read past them */
    assert_int_equal(prof_event_stack_frames(0, 256), 0);
    assert_int_equal(prof_event_stack_frames(3 * sizeof(UINT_PTR), 256), 3);
    assert_int_equal(prof_event_stack_frames(7, 256), 0);
    assert_int_equal(prof_event_stack_frames(1000 * sizeof(UINT_PTR), 256), 256);
}

/* ---- raw queue ------------------------------------------------------------------------- */

static void test_rawq_double_buffer_and_drops(void **state)
{
    (void)state;
    struct prof_rawq q;
    assert_int_equal(prof_rawq_init(&q, 4, 10), 0);
    struct prof_raw r;
    memset(&r, 0, sizeof r);
    uint64_t f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    r.tid = 1;
    assert_int_equal(prof_rawq_push(&q, &r, f, 4), 0);
    r.tid = 2;
    assert_int_equal(prof_rawq_push(&q, &r, f + 4, 4), 0);
    r.tid = 3;
    assert_int_equal(prof_rawq_push(&q, &r, f, 4), -ENOSPC); /* 12 frames > 10 */
    assert_int_equal(prof_rawq_push(&q, &r, f, 2), 0);
    assert_int_equal(prof_rawq_push(&q, &r, NULL, 0), 0);
    assert_int_equal(prof_rawq_push(&q, &r, NULL, 0), -ENOSPC); /* 5 records > 4 */
    struct prof_rawbuf *b = prof_rawq_swap(&q);
    assert_int_equal(b->nrecs, 4);
    assert_int_equal(b->recs[1].tid, 2);
    assert_int_equal(b->recs[1].first, 4);
    assert_int_equal(b->recs[1].nframes, 4);
    assert_true(b->frames[b->recs[1].first] == 5);
    assert_int_equal(b->recs[2].nframes, 2);
    /* pushes after the swap go to the other buffer */
    assert_int_equal(prof_rawq_push(&q, &r, f, 8), 0);
    prof_rawbuf_clear(b);
    struct prof_rawbuf *b2 = prof_rawq_swap(&q);
    assert_ptr_not_equal(b, b2);
    assert_int_equal(b2->nrecs, 1);
    assert_int_equal(b2->recs[0].nframes, 8);
    assert_int_equal(prof_rawq_take_dropped(&q), 2);
    assert_int_equal(prof_rawq_take_dropped(&q), 0);
    prof_rawq_close(&q);
    assert_int_equal(prof_rawq_push(&q, &r, f, 1), -EPIPE);
    prof_rawq_free(&q);
}

/* ---- thread registry ------------------------------------------------------------------- */

static void test_threads_registry(void **state)
{
    (void)state;
    struct prof_threads *r = malloc(sizeof *r);
    prof_threads_init(r);
    prof_threads_add(r, 0x100, 0); /* created, not started yet */
    prof_threads_add(r, 0x200, 42);
    prof_threads_set_tid(r, 0x100, 41);
    prof_threads_set_name(r, 0x200, "worker");
    prof_threads_set_name(r, 0x300, "early"); /* a name before ThreadCreated registers it */
    assert_int_equal(prof_threads_count(r), 3);
    uint32_t tid = 0;
    char name[PROF_THREAD_NAME];
    assert_int_equal(prof_threads_lookup(r, 0x100, &tid, name, sizeof name), 0);
    assert_int_equal(tid, 41);
    assert_string_equal(name, "");
    assert_int_equal(prof_threads_lookup(r, 0x200, &tid, name, sizeof name), 0);
    assert_int_equal(tid, 42);
    assert_string_equal(name, "worker");
    struct prof_thread_view v[8];
    size_t n = prof_threads_snapshot(r, v, 8);
    assert_int_equal(n, 3);
    prof_threads_set_last(r, v[1].slot, v[1].t.id, 500, 600);
    prof_threads_remove(r, 0x100);
    assert_int_equal(prof_threads_lookup(r, 0x100, &tid, name, sizeof name), -1);
    /* a stale slot is not written: its thread is gone */
    prof_threads_set_last(r, v[0].slot, v[0].t.id, 1, 1);
    n = prof_threads_snapshot(r, v, 8);
    assert_int_equal(n, 2);
    assert_true(v[0].t.id == 0x200 && v[0].t.last_cpu_ns == 500 && v[0].t.last_wall_ns == 600);
    /* the signal sampler's copy: made again only when a thread comes, goes, gets an OS id or
     * a name (not for the suspend sampler's last_* bookkeeping) */
    uint64_t gen = UINT64_MAX;
    size_t nv = 99;
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 1);
    assert_int_equal(nv, 2);
    nv = 99;
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 0);
    prof_threads_set_last(r, v[0].slot, v[0].t.id, 7, 8);
    prof_threads_set_tid(r, 0x200, 42); /* the same OS id */
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 0);
    assert_int_equal(nv, 99); /* untouched */
    prof_threads_set_name(r, 0x200, "renamed");
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 1);
    assert_true(nv == 2 && strcmp(v[0].t.name, "renamed") == 0);
    prof_threads_set_tid(r, 0x300, 43);
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 1);
    prof_threads_add(r, 0x400, 44);
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 1);
    assert_int_equal(nv, 3);
    prof_threads_remove(r, 0x400);
    assert_int_equal(prof_threads_snapshot_changed(r, &gen, v, 8, &nv), 1);
    assert_int_equal(nv, 2);
    /* the slot is reused and the table is bounded */
    for (ThreadID id = 1; id <= PROF_MAX_THREADS + 5; id++)
        prof_threads_add(r, 0x10000 + id, 1);
    assert_int_equal(prof_threads_count(r), PROF_MAX_THREADS);
    assert_true(r->dropped == 7);
    free(r);
}

/* ---- configuration and file names ------------------------------------------------------- */

static char g_log[4096];
static void sink(int level, const char *line, void *ctx)
{
    (void)level, (void)ctx;
    strncat(g_log, line, sizeof g_log - strlen(g_log) - 1);
}

static void test_config_defaults_and_keys(void **state)
{
    (void)state;
    struct clrmux_child_conf cc;
    memset(&cc, 0, sizeof cc);
    snprintf(cc.name, sizeof cc.name, "prof");
    struct prof_config pc;
    prof_config_parse(&pc, &cc, "/etc/clrmux");
    assert_string_equal(pc.output_dir, "/etc/clrmux/profiles");
    assert_int_equal(pc.period_s, 60);
    assert_int_equal(pc.interval_ms, 10);
    assert_true(pc.cpu && pc.wall && pc.exceptions && pc.allocations && pc.contention);
    assert_int_equal(pc.sampler, PROF_SAMPLER_SIGNAL);
    assert_int_equal(pc.eventpipe_delay_ms, 1000);

    struct clrmux_kv kvs[] = {
        {"eventpipe_delay_ms", "0", 14}, {"eventpipe_delay_ms", "soon", 15},
        {"sampler", "suspend", 12},     {"sampler", "perf", 13},
        {"output_dir", "/var/prof", 3}, {"period_s", "5", 4},        {"sampling_interval_ms", "20", 5},
        {"cpu", "false", 6},            {"wall", "no", 7},          {"exceptions", "maybe", 8},
        {"period_s", "0", 9},           {"colour", "blue", 10},     {"contention", "off", 11},
    };
    cc.kvs = kvs;
    cc.nkvs = sizeof kvs / sizeof kvs[0];
    g_log[0] = 0;
    clrmux_log_set_sink(sink, NULL);
    prof_config_parse(&pc, &cc, "/etc/clrmux");
    clrmux_log_set_sink(NULL, NULL);
    assert_string_equal(pc.output_dir, "/var/prof");
    assert_int_equal(pc.period_s, 5); /* the bad second value keeps the first */
    assert_int_equal(pc.interval_ms, 20);
    assert_false(pc.cpu);
    assert_false(pc.wall);
    assert_true(pc.exceptions); /* bad value: default kept */
    assert_true(pc.allocations);
    assert_false(pc.contention);
    assert_non_null(strstr(g_log, "line 8: exceptions 'maybe' is not a boolean"));
    assert_non_null(strstr(g_log, "line 9: period_s '0'"));
    assert_non_null(strstr(g_log, "line 10: unknown key 'colour'"));
    assert_int_equal(pc.sampler, PROF_SAMPLER_SUSPEND); /* the bad second value keeps the first */
    assert_non_null(strstr(g_log, "line 13: sampler 'perf' is not signal or suspend; using suspend"));
    assert_int_equal(pc.eventpipe_delay_ms, 0); /* the bad second value keeps the first */
    assert_non_null(strstr(g_log, "line 15: eventpipe_delay_ms 'soon' is not a number of milliseconds"));

    /* the Pyroscope keys are the profiler's: taken, and no "unknown key" warning for them */
    struct clrmux_kv push[] = {
        {"endpoint", "http://127.0.0.1:4040", 16}, {"app_name", "shop{env=test}", 17}, {"headers", "X-Scope-OrgID=t1", 18},
    };
    cc.kvs = push;
    cc.nkvs = sizeof push / sizeof push[0];
    g_log[0] = 0;
    clrmux_log_set_sink(sink, NULL);
    prof_config_parse(&pc, &cc, "/etc/clrmux");
    clrmux_log_set_sink(NULL, NULL);
    assert_string_equal(pc.endpoint, "http://127.0.0.1:4040");
    assert_string_equal(pc.app_name, "shop{env=test}");
    assert_string_equal(pc.headers, "X-Scope-OrgID=t1");
    assert_null(strstr(g_log, "unknown key"));

    struct clrmux_kv rel[] = {{"output_dir", "out/p", 2}};
    cc.kvs = rel;
    cc.nkvs = 1;
    prof_config_parse(&pc, &cc, "/cfg");
    assert_string_equal(pc.output_dir, "/cfg/out/p");
}

static void test_output_path(void **state)
{
    (void)state;
    char out[256];
    /* 2024-03-05T06:07:08Z */
    assert_int_equal(prof_output_path(out, sizeof out, "/p", "MyApp", 1234, 1709618828123456789ll), 0);
    assert_string_equal(out, "/p/MyApp-1234-20240305T060708Z.pb.gz");
    assert_int_equal(prof_output_path(out, sizeof out, "/p", "a b/c", 1, 0), 0);
    assert_string_equal(out, "/p/a_b_c-1-19700101T000000Z.pb.gz");
    assert_int_equal(prof_output_path(out, sizeof out, "/p", "", 1, 0), 0);
    assert_string_equal(out, "/p/process-1-19700101T000000Z.pb.gz");
    assert_int_equal(prof_output_path(out, 20, "/p", "MyApp", 1234, 0), -1);
}

/* The name cache's table grows as it fills (a prefix of its mapping, rehashed in place): names
 * cached before each doubling are still found after it, at the same arena address. */
static void test_names_grow(void **state)
{
    (void)state;
    struct prof_names *n = prof_names_create(NULL, 65536, 8u << 20);
    assert_non_null(n);
    enum { N = 20000 };
    static const char *first[N];
    for (size_t i = 0; i < N; i++) /* one entry per page; no ELF object there: dladdr fails */
        first[i] = prof_names_native(n, (uintptr_t)(0x100000000000ull + (i << 12)));
    for (size_t i = 0; i < N; i++)
        assert_ptr_equal(prof_names_native(n, (uintptr_t)(0x100000000000ull + (i << 12))), first[i]);
    assert_int_equal(prof_names_resets(n), 0);
    prof_names_destroy(n);
}

/* A native frame is named after the object it is in, as dladdr names it: a library linked
 * in, one loaded after the first lookups (dlopen), the main program (no name in its link
 * map: argv[0]), and no object at all. */
static void expect_native(struct prof_names *n, const void *addr, const char *want)
{
    char msg[512];
    const char *got = prof_names_native(n, (uintptr_t)addr);
    snprintf(msg, sizeof msg, "%p: got '%s', want '%s'", addr, got ? got : "(null)", want);
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s", msg);
}

static void test_names_native_objects(void **state)
{
    (void)state;
    struct prof_names *n = prof_names_create(NULL, 1024, 1u << 20);
    assert_non_null(n);
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD); /* linked in */
    assert_non_null(z);
    void *zf = dlsym(z, "inflate");
    assert_non_null(zf);
    expect_native(n, zf, "[native] libz.so.1");
    expect_native(n, (const void *)(uintptr_t)0x100000000000ull, "[native]");
    char path[4096];
    const char *d = getenv("CLRMUX_FAKE_DIR");
    snprintf(path, sizeof path, "%s/libnoop.so", d && *d ? d : "build/fake");
    void *later = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!later)
        fail_msg("%s: %s (run `make all` first)", path, dlerror());
    void *lf = dlsym(later, "DllGetClassObject");
    assert_non_null(lf);
    expect_native(n, lf, "[native] libnoop.so");
    Dl_info di; /* the main program: dladdr's name for it (argv[0]), as before */
    assert_true(dladdr((void *)(uintptr_t)test_names_grow, &di) && di.dli_fname);
    const char *base = strrchr(di.dli_fname, '/');
    char want[600];
    snprintf(want, sizeof want, "[native] %s", base ? base + 1 : di.dli_fname);
    expect_native(n, (const void *)(uintptr_t)test_names_grow, want);
    dlclose(later);
    dlclose(z);
    prof_names_destroy(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_tick_v4),
        cmocka_unit_test(test_alloc_tick_v1_has_no_type),
        cmocka_unit_test(test_alloc_tick_truncated),
        cmocka_unit_test(test_contention_stop),
        cmocka_unit_test(test_event_stack_is_a_byte_count),
        cmocka_unit_test(test_rawq_double_buffer_and_drops),
        cmocka_unit_test(test_threads_registry),
        cmocka_unit_test(test_config_defaults_and_keys),
        cmocka_unit_test(test_output_path),
        cmocka_unit_test(test_names_grow),
        cmocka_unit_test(test_names_native_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
