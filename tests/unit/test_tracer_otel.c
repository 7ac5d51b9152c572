/* Unit tests for the tracer's OpenTelemetry parts: head sampling, per-method metrics that
 * count every call (sampled, unsampled, dropped, too deep), the Activity join (W3C Id),
 * the high-water wake, the profiler's span context, the resource and its
 * OTEL_RESOURCE_ATTRIBUTES parser, the metrics JSON line. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer/otlp.h"
#include "tracer/spans.h"

static void test_metrics_count_every_call(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    /* 40 calls of method 5 into a ring of 16: 16 recorded, 24 dropped; 3 of them errors */
    for (int i = 0; i < 40; i++) {
        int64_t s = clrmux_span_enter(5);
        if (i % 13 == 0)
            clrmux_span_exception(s);
        clrmux_span_exit(s);
    }
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(5, &m);
    assert_int_equal(m.calls, 24); /* the dropped ones, counted by the probe */
    struct clrmux_span out[64];
    assert_int_equal(clrmux_spans_drain(out, 64), 16);
    clrmux_method_metrics_get(5, &m);
    assert_int_equal(m.calls, 40);
    assert_int_equal(m.count, 40);
    assert_int_equal(m.errors, 4); /* i = 0, 13, 26, 39 */
    uint64_t b = 0;
    for (int i = 0; i <= CLRMUX_HIST_BOUNDS; i++)
        b += m.buckets[i];
    assert_int_equal(b, 40);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.dropped, 24);
    clrmux_method_metrics_get(CLRMUX_SPAN_MAX_METHODS, &m); /* out of range: zeros */
    assert_int_equal(m.calls, 0);
    clrmux_spans_fini();
}

static void test_metrics_duration(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    int64_t s = clrmux_span_enter(1), t0 = clrmux_now_ns();
    while (clrmux_now_ns() < t0 + 2000000) /* 2 ms: bucket (1 ms, 5 ms] */
        ;
    clrmux_span_exit(s);
    struct clrmux_span out[4];
    assert_int_equal(clrmux_spans_drain(out, 4), 1);
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(1, &m);
    assert_int_equal(m.count, 1);
    assert_true(m.sum_ns >= 1900000);
    /* the one call is in the bucket of its duration: bounds[b-1] < d <= bounds[b] (>= 2 ms:
     * b >= 7, bounds[6] = 1e-3; more when a loaded machine descheduled the loop) */
    int b = 0;
    while (b <= CLRMUX_HIST_BOUNDS && !m.buckets[b])
        b++;
    assert_true(b >= 7 && b <= CLRMUX_HIST_BOUNDS && m.buckets[b] == 1);
    double d = (double)m.sum_ns / 1e9;
    assert_true(d > clrmux_hist_bounds_s[b - 1] * 0.99 && (b == CLRMUX_HIST_BOUNDS || d <= clrmux_hist_bounds_s[b] * 1.01));
    clrmux_spans_fini();
}

static void *unsampled_calls(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        int64_t s = clrmux_span_enter(70 + i % 100); /* 100 methods: more than a thread's 64 slots */
        if (i % 10 == 0)
            clrmux_span_exception(s);
        clrmux_span_exit(s);
    }
    return NULL;
}

/* Unsampled calls are counted per thread (and in the globals when slots collide); the
 * counts survive their threads' exit. */
static void test_metrics_threads(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    clrmux_spans_set_sample_ratio(0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, unsampled_calls, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    unsampled_calls(NULL); /* and this live thread */
    struct clrmux_method_metrics m[200];
    clrmux_metrics_snapshot(m, 200);
    uint64_t calls = 0, errors = 0, count = 0, buckets = 0;
    for (int i = 0; i < 200; i++) {
        calls += m[i].calls, errors += m[i].errors, count += m[i].count;
        for (int b = 0; b <= CLRMUX_HIST_BOUNDS; b++)
            buckets += m[i].buckets[b];
        if (i >= 70 && i < 170)
            assert_int_equal(m[i].calls, 50);
    }
    assert_int_equal(calls, 5000);
    assert_int_equal(count, 5000);
    assert_int_equal(buckets, 5000);
    assert_int_equal(errors, 500);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.unsampled, 5000);
    clrmux_spans_set_sample_ratio(1);
    clrmux_spans_fini();
}

static void test_sampling(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(1 << 16), 0);
    clrmux_spans_set_sample_ratio(0.0);
    for (int i = 0; i < 100; i++) {
        int64_t a = clrmux_span_enter(2);
        clrmux_span_exit(clrmux_span_enter(3));
        clrmux_span_exit(a);
    }
    struct clrmux_span *out = calloc(1 << 16, sizeof *out);
    assert_int_equal(clrmux_spans_drain(out, 1 << 16), 0);
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(2, &m);
    assert_int_equal(m.calls, 100);
    clrmux_method_metrics_get(3, &m);
    assert_int_equal(m.calls, 100);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.unsampled, 200);
    /* 0.25: about a quarter of the traces, each whole (root and child together) */
    clrmux_spans_set_sample_ratio(0.25);
    for (int i = 0; i < 20000; i++) {
        int64_t a = clrmux_span_enter(2);
        clrmux_span_exit(clrmux_span_enter(3));
        clrmux_span_exit(a);
    }
    size_t n = clrmux_spans_drain(out, 1 << 16);
    assert_true(n % 2 == 0);
    if (n < 2 * 4500 || n > 2 * 5500)
        fail_msg("%zu spans recorded of 40000 at 0.25", n);
    for (size_t i = 0; i < n; i += 2)
        assert_true(out[i].parent_id == out[i + 1].span_id && out[i].method == 3 && out[i + 1].method == 2);
    clrmux_method_metrics_get(2, &m);
    assert_int_equal(m.calls, 20100);
    clrmux_spans_set_sample_ratio(1.0);
    free(out);
    clrmux_spans_fini();
}

static void test_join_activity(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    const char *id = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert_int_equal(clrmux_span_join_w3c(id, strlen(id)), -1); /* no open span */
    int64_t root = clrmux_span_enter(1);
    assert_int_equal(root, 0);
    assert_int_equal(clrmux_span_join_w3c(id, strlen(id)), 0);
    int64_t child = clrmux_span_enter(2);
    assert_int_equal(clrmux_span_join_w3c(id, strlen(id)), -1); /* depth 2: only the root joins */
    clrmux_span_exit(child);
    clrmux_span_exit(root);
    struct clrmux_span out[8];
    assert_int_equal(clrmux_spans_drain(out, 8), 2);
    static const uint8_t trace[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
                                      0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};
    assert_memory_equal(out[0].trace_id, trace, 16);
    assert_memory_equal(out[1].trace_id, trace, 16);
    assert_true(out[1].parent_id == 0xb7ad6b7169203331ull);
    assert_true(out[0].parent_id == out[1].span_id);
    assert_true(out[0].flags & CLRMUX_SPAN_JOINED);
    /* the next root trace is a new one */
    clrmux_span_exit(clrmux_span_enter(1));
    assert_int_equal(clrmux_spans_drain(out, 8), 1);
    assert_memory_not_equal(out[0].trace_id, trace, 16);
    assert_true(out[0].parent_id == 0 && !(out[0].flags & CLRMUX_SPAN_JOINED));
    /* an Activity that is not sampled: parent-based, the whole local trace is not recorded */
    const char *unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    root = clrmux_span_enter(1);
    assert_int_equal(clrmux_span_join_w3c(unsampled, strlen(unsampled)), 0);
    clrmux_span_exit(clrmux_span_enter(2));
    clrmux_span_exit(root);
    assert_int_equal(clrmux_spans_drain(out, 8), 0);
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(1, &m);
    assert_int_equal(m.calls, 3);
    /* a sampled Activity wins over sample_ratio 0 */
    clrmux_spans_set_sample_ratio(0);
    root = clrmux_span_enter(1);
    assert_int_equal(clrmux_span_join_w3c(id, strlen(id)), 0);
    clrmux_span_exit(root);
    assert_int_equal(clrmux_spans_drain(out, 8), 1);
    clrmux_spans_set_sample_ratio(1);
    /* malformed Ids are ignored */
    static const char *bad[] = {
        "|abc.1.",                                                 /* hierarchical */
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",  /* short */
        "00-0af7651916cd43dd8448eb211c80319x-b7ad6b7169203331-01", /* not hex */
        "00-00000000000000000000000000000000-b7ad6b7169203331-01", /* zero trace id */
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", /* zero span id */
        "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        root = clrmux_span_enter(1);
        assert_int_equal(clrmux_span_join_w3c(bad[i], strlen(bad[i])), -1);
        clrmux_span_exit(root);
    }
    assert_int_equal(clrmux_spans_drain(out, 8), 6);
    for (int i = 0; i < 6; i++)
        assert_true(out[i].parent_id == 0);
    /* the managed-string entry point: CoreCLR layout (length at +8, UTF-16 at +12) */
    unsigned char obj[12 + 2 * 56];
    memset(obj, 0, sizeof obj);
    int32_t len = 55;
    memcpy(obj + 8, &len, 4);
    for (int i = 0; i < 55; i++) {
        uint16_t c = (uint16_t)id[i];
        memcpy(obj + 12 + 2 * i, &c, 2);
    }
    root = clrmux_span_enter(1);
    clrmux_span_join(obj);
    clrmux_span_join(NULL);
    clrmux_span_exit(root);
    assert_int_equal(clrmux_spans_drain(out, 8), 1);
    assert_memory_equal(out[0].trace_id, trace, 16);
    clrmux_spans_fini();
}

static void test_span_context(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    struct clrmux_span_context *c = clrmux_span_context_get();
    assert_non_null(c);
    assert_true(clrmux_span_context_peek() == c);
    assert_true(c == clrmux_span_context_get());
    assert_int_equal(c->depth, 0);
    int64_t a = clrmux_span_enter(1);
    uint64_t root_id = c->span_id;
    assert_true(root_id != 0 && c->local_root_id == root_id && c->depth == 1);
    int64_t b = clrmux_span_enter(2);
    assert_true(c->span_id != root_id && c->local_root_id == root_id && c->depth == 2);
    assert_int_equal(c->seq % 2, 0);
    clrmux_span_exit(b);
    assert_true(c->span_id == root_id);
    clrmux_span_exit(a);
    assert_true(c->span_id == 0 && c->local_root_id == 0 && c->depth == 0);
    struct clrmux_span out[4];
    assert_int_equal(clrmux_spans_drain(out, 4), 2);
    assert_true(out[1].span_id == root_id);
    assert_memory_equal((const void *)c->trace_id, out[1].trace_id, 16);
    clrmux_spans_fini();
}

/* Another thread's context: found by its OS id while the thread lives, read consistently
 * with its owner checked; after the thread exits the record is cleared (a stale pointer
 * reads no span and is rejected for the old tid) and the lookup finds nothing. */
struct ctx_peer {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int stage; /* 1: span open, 2: may leave */
    uint32_t tid;
    uint64_t span_id, root_id;
};

static void *ctx_peer_main(void *arg)
{
    struct ctx_peer *pp = arg;
    int64_t a = clrmux_span_enter(1), b = clrmux_span_enter(2);
    struct clrmux_span_context *c = clrmux_span_context_peek();
    pthread_mutex_lock(&pp->m);
    pp->tid = (uint32_t)syscall(SYS_gettid);
    pp->span_id = c->span_id;
    pp->root_id = c->local_root_id;
    pp->stage = 1;
    pthread_cond_broadcast(&pp->cv);
    while (pp->stage != 2)
        pthread_cond_wait(&pp->cv, &pp->m);
    pthread_mutex_unlock(&pp->m);
    clrmux_span_exit(b);
    clrmux_span_exit(a);
    return NULL;
}

static void test_span_context_other_thread(void **state)
{
    (void)state;
    clrmux_spans_want_labels(); /* a reader (the profiler) exists: the probes keep the views */
    assert_int_equal(clrmux_spans_init(16), 0);
    struct ctx_peer pp = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ctx_peer_main, &pp), 0);
    pthread_mutex_lock(&pp.m);
    while (pp.stage != 1)
        pthread_cond_wait(&pp.cv, &pp.m);
    pthread_mutex_unlock(&pp.m);
    struct clrmux_span_context *c = clrmux_span_context_find(pp.tid);
    assert_non_null(c);
    assert_null(clrmux_span_context_find(0));
    struct clrmux_span_ids ids = {0};
    assert_int_equal(clrmux_span_context_read(c, pp.tid, &ids, 4), 1);
    assert_true(ids.span_id == pp.span_id && ids.local_root_id == pp.root_id && ids.span_id != ids.local_root_id);
    assert_int_equal(clrmux_span_context_read(c, pp.tid + 1, &ids, 4), 0); /* not that thread's */
    pthread_mutex_lock(&pp.m);
    pp.stage = 2;
    pthread_cond_broadcast(&pp.cv);
    pthread_mutex_unlock(&pp.m);
    pthread_join(th, NULL);
    assert_null(clrmux_span_context_find(pp.tid));
    assert_int_equal(clrmux_span_context_read(c, pp.tid, &ids, 4), 0); /* cleared, still readable */
    assert_int_equal(c->tid, 0);
    assert_int_equal(c->seq % 2, 0);
    /* the calling thread: its own record, no span open */
    struct clrmux_span_context *mine = clrmux_span_context_get();
    assert_true(clrmux_span_context_find((uint32_t)syscall(SYS_gettid)) == mine);
    assert_int_equal(clrmux_span_context_read(mine, 0, &ids, 1), 0);
    int64_t x = clrmux_span_enter(3);
    assert_int_equal(clrmux_span_context_read(mine, (uint32_t)syscall(SYS_gettid), &ids, 1), 1);
    assert_true(ids.span_id == ids.local_root_id);
    clrmux_span_exit(x);
    /* a trace that is not recorded labels nothing (its ids are in no spans file) */
    clrmux_spans_set_sample_ratio(0.0);
    x = clrmux_span_enter(3);
    assert_int_equal(mine->depth, 1);
    assert_int_equal(clrmux_span_context_read(mine, 0, &ids, 1), 0);
    clrmux_span_exit(x);
    clrmux_spans_set_sample_ratio(1.0);
    struct clrmux_span out[4];
    clrmux_spans_drain(out, 4);
    clrmux_spans_fini();
}

/* A reader on another thread while its owner opens and closes spans flat out (root spans, half
 * of them with a nested one: the view's close to no span skips the seqlock, its other changes
 * go through it): every copy the reader accepts is one the view really showed, its span's own
 * trace and local root, as the drained spans say. */
#define RACE_SPANS 150000
#define RACE_SAMPLES 200000
struct ctx_race {
    _Atomic uint32_t tid;
    _Atomic int stop;
};

static void *ctx_race_writer(void *arg)
{
    struct ctx_race *r = arg;
    clrmux_span_exit(clrmux_span_enter(1)); /* its record exists before the reader looks */
    atomic_store(&r->tid, (uint32_t)syscall(SYS_gettid));
    for (int i = 0; i < RACE_SPANS; i++) {
        int64_t a = clrmux_span_enter(1);
        if (i & 1)
            clrmux_span_exit(clrmux_span_enter(2));
        clrmux_span_exit(a);
    }
    atomic_store(&r->stop, 1);
    return NULL;
}

static int by_span_id(const void *a, const void *b)
{
    uint64_t x = ((const struct clrmux_span *)a)->span_id, y = ((const struct clrmux_span *)b)->span_id;
    return x < y ? -1 : x > y;
}

static void test_span_context_race(void **state)
{
    (void)state;
    clrmux_spans_want_labels();
    assert_int_equal(clrmux_spans_init(1u << 19), 0);
    struct ctx_race r = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ctx_race_writer, &r), 0);
    while (!atomic_load(&r.tid))
        sched_yield();
    struct clrmux_span_ids *got = calloc(RACE_SAMPLES, sizeof *got);
    assert_non_null(got);
    size_t n = 0, reads = 0;
    uint32_t tid = atomic_load(&r.tid);
    while (!atomic_load(&r.stop) && n < RACE_SAMPLES) {
        struct clrmux_span_context *c = clrmux_span_context_find(tid);
        reads++;
        if (c && clrmux_span_context_read(c, tid, &got[n], 1))
            n++;
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    size_t cap = 2 * RACE_SPANS, m = 0, k;
    struct clrmux_span *all = calloc(cap, sizeof *all);
    assert_non_null(all);
    while ((k = clrmux_spans_drain(all + m, cap - m)) > 0)
        m += k;
    assert_true(m >= RACE_SPANS + RACE_SPANS / 2);
    qsort(all, m, sizeof *all, by_span_id);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        struct clrmux_span key = {.span_id = got[i].span_id};
        const struct clrmux_span *s = bsearch(&key, all, m, sizeof *all, by_span_id);
        uint64_t root = s && s->parent_id ? s->parent_id : got[i].span_id;
        if (!s || memcmp(s->trace_id, got[i].trace_id, 16) != 0 || got[i].local_root_id != root)
            bad++;
    }
    printf("# span context race: %zu reads, %zu copies accepted, %zu inconsistent\n", reads, n, bad);
    assert_int_equal(bad, 0);
    assert_true(n > 0);
    free(all);
    free(got);
    clrmux_spans_fini();
}

static void *producer(void *arg)
{
    int n = *(int *)arg;
    for (int i = 0; i < n; i++)
        clrmux_span_exit(clrmux_span_enter(1));
    return NULL;
}

/* A consumer asleep for a long timeout is woken by the high-water mark. */
static void test_high_water_wake(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(1024), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clrmux_spans_wait(10); /* empty ring: sleeps its timeout */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) >= 9000000L);
    int n = 600; /* > a quarter of 1024 */
    pthread_t th;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&th, NULL, producer, &n), 0);
    clrmux_spans_wait(5000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(th, NULL);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
    if (ms > 2000)
        fail_msg("the consumer slept %ld ms: not woken at the high-water mark", ms);
    assert_true(clrmux_spans_pending() == 600);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clrmux_spans_wait(5000); /* above the mark: returns at once */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 2);
    clrmux_spans_fini();
}

static void test_resource(void **state)
{
    (void)state;
    struct clrmux_resource r = {0};
    char bad[256];
    assert_int_equal(clrmux_resource_set(&r, "service.name", "orders", 0), 0);
    int nbad = clrmux_resource_parse(&r, " service.name=ignored , deployment.environment.name=prod,"
                                         "service.version=1%2E2%2C3,noequals,=v,a=%zz,,k=v%20w",
                                     bad, sizeof bad);
    assert_int_equal(nbad, 3);
    assert_string_equal(bad, "noequals,=v,a=%zz");
    assert_string_equal(clrmux_resource_get(&r, "service.name"), "orders"); /* set first: kept */
    assert_string_equal(clrmux_resource_get(&r, "deployment.environment.name"), "prod");
    assert_string_equal(clrmux_resource_get(&r, "service.version"), "1.2,3");
    assert_string_equal(clrmux_resource_get(&r, "k"), "v w");
    assert_null(clrmux_resource_get(&r, "a"));
    assert_int_equal(clrmux_resource_set(&r, "service.name", "b", 0), 0); /* replaces */
    assert_string_equal(clrmux_resource_get(&r, "service.name"), "b");
    assert_int_equal(r.n, 4);
    char longkey[300];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[299] = 0;
    assert_int_equal(clrmux_resource_set(&r, longkey, "v", 0), -1);
    for (int i = 0; r.n < CLRMUX_RESOURCE_MAX; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(clrmux_resource_set(&r, k, "v", 0), 0);
    }
    assert_int_equal(clrmux_resource_set(&r, "one.more", "v", 0), -1);
}

static const char *mname(void *ctx, uint32_t id)
{
    (void)ctx;
    return id == 0 ? "A.B.C" : id == 1 ? "A.B.D" : NULL;
}

static void test_metrics_line(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    clrmux_spans_set_sample_ratio(0); /* counted by the probes: no drain needed */
    for (int i = 0; i < 3; i++) {
        int64_t s = clrmux_span_enter(1);
        if (i == 1)
            clrmux_span_exception(s);
        clrmux_span_exit(s);
    }
    struct clrmux_resource r = {0};
    clrmux_resource_set(&r, "service.name", "svc", 0);
    struct clrmux_otlp_names names = {mname, NULL, NULL, NULL, NULL};
    struct clrmux_otlp_counter c[1] = {{"clrmux.tracer.spans.dropped", "d", 7}};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(clrmux_otlp_write_metrics(f, &r, 100, 200, 2, &names, c, 1), 0);
    fclose(f);
    assert_non_null(strstr(buf, "{\"resourceMetrics\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\""));
    assert_non_null(strstr(buf, "{\"name\":\"clrmux.method.calls\",\"description\":\"Calls of a traced method, whether "
                                "or not its span was recorded\",\"unit\":\"{call}\",\"sum\":{\"dataPoints\":[{\"attributes\":"
                                "[{\"key\":\"code.function.name\",\"value\":{\"stringValue\":\"A.B.D\"}}],"
                                "\"startTimeUnixNano\":\"100\",\"timeUnixNano\":\"200\",\"asInt\":\"3\"}],"
                                "\"aggregationTemporality\":2,\"isMonotonic\":true}}"));
    assert_non_null(strstr(buf, "\"asInt\":\"1\"}],\"aggregationTemporality\":2,\"isMonotonic\":true}}")); /* errors */
    assert_null(strstr(buf, "A.B.C")); /* never called: no data point */
    assert_non_null(strstr(buf, "\"name\":\"clrmux.method.duration\""));
    assert_non_null(strstr(buf, "\"count\":\"3\",\"sum\":"));
    assert_non_null(strstr(buf, "\"explicitBounds\":[1e-06,5e-06,1e-05,5e-05,0.0001,0.0005,0.001,0.005,0.01,0.05,0.1,"
                                "0.5,1,5,10]"));
    assert_non_null(strstr(buf, "{\"name\":\"clrmux.tracer.spans.dropped\",\"description\":\"d\",\"unit\":\"{span}\","
                                "\"sum\":{\"dataPoints\":[{\"startTimeUnixNano\":\"100\",\"timeUnixNano\":\"200\","
                                "\"asInt\":\"7\"}],\"aggregationTemporality\":2,\"isMonotonic\":true}}]}]}]}\n"));
    free(buf);
    clrmux_spans_set_sample_ratio(1);
    clrmux_spans_fini();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_count_every_call),
        cmocka_unit_test(test_metrics_duration),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_metrics_threads),
        cmocka_unit_test(test_join_activity),
        cmocka_unit_test(test_span_context),
        cmocka_unit_test(test_span_context_other_thread),
        cmocka_unit_test(test_span_context_race),
        cmocka_unit_test(test_high_water_wake),
        cmocka_unit_test(test_resource),
        cmocka_unit_test(test_metrics_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
