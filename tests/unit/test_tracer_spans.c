/* Unit tests for src/tracer/spans.c (probe nesting, ids, the bounded ring, drops) and
 * src/tracer/otlp.c (the exact OTLP JSON line). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/platform.h"
#include "tracer/otlp.h"
#include "tracer/spans.h"

#if defined(_WIN32)
/* Windows has no open_memstream: a private temporary file (clrmux_tmpstream) read back into
 * *buf at fclose, as open_memstream's buffer is complete after fclose */
static FILE *ms_file;
static char **ms_buf;
static size_t *ms_len;
static FILE *win_open_memstream(char **buf, size_t *len)
{
    ms_buf = buf, ms_len = len;
    return ms_file = clrmux_tmpstream();
}
static int win_fclose(FILE *f)
{
    if (f == ms_file && f) {
        ms_file = NULL;
        if (clrmux_tmpstream_read(f, ms_buf, ms_len) != 0)
            return fclose(f), EOF;
    }
    return fclose(f);
}
#define open_memstream win_open_memstream
#define fclose win_fclose
#endif

static int is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void test_nesting_and_ids(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    int64_t before = clrmux_now_ns();
    assert_int_equal(clrmux_span_depth(), 0);
    int64_t a = clrmux_span_enter(7);
    int64_t b = clrmux_span_enter(8);
    int64_t c = clrmux_span_enter(9);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(c, 2);
    assert_int_equal(clrmux_span_depth(), 3);
    clrmux_span_exit(c);
    clrmux_span_exit(b);
    clrmux_span_exit(a);
    assert_int_equal(clrmux_span_depth(), 0);
    int64_t after = clrmux_now_ns();

    struct clrmux_span s[8];
    assert_int_equal(clrmux_spans_drain(s, 8), 3);
    assert_int_equal(clrmux_spans_drain(s + 3, 5), 0);
    /* closed innermost first */
    assert_int_equal(s[0].method, 9);
    assert_int_equal(s[1].method, 8);
    assert_int_equal(s[2].method, 7);
    assert_true(s[0].parent_id == s[1].span_id);
    assert_true(s[1].parent_id == s[2].span_id);
    assert_true(s[2].parent_id == 0);
    assert_true(s[0].span_id && s[1].span_id && s[2].span_id);
    assert_true(s[0].span_id != s[1].span_id && s[1].span_id != s[2].span_id && s[0].span_id != s[2].span_id);
    assert_false(is_zero(s[0].trace_id, 16));
    assert_memory_equal(s[0].trace_id, s[1].trace_id, 16);
    assert_memory_equal(s[1].trace_id, s[2].trace_id, 16);
    /* ticks are mapped to Unix time through calibration points: allow for their jitter */
    const int64_t slack = 100000;
    for (int i = 0; i < 3; i++) {
        assert_true(s[i].start_ns >= before - slack && s[i].end_ns <= after + slack && s[i].start_ns <= s[i].end_ns);
        assert_int_equal(s[i].tid, (uint32_t)clrmux_thread_id());
        assert_int_equal(s[i].flags, 0);
    }
    assert_true(s[2].start_ns <= s[1].start_ns && s[1].start_ns <= s[0].start_ns);
    assert_true(s[0].end_ns <= s[1].end_ns && s[1].end_ns <= s[2].end_ns);

    /* a new root span starts a new trace */
    clrmux_span_exit(clrmux_span_enter(1));
    clrmux_span_exit(clrmux_span_enter(2));
    assert_int_equal(clrmux_spans_drain(s, 8), 2);
    assert_true(s[0].parent_id == 0 && s[1].parent_id == 0);
    assert_memory_not_equal(s[0].trace_id, s[1].trace_id, 16);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.finished, 5);
    assert_int_equal(st.dropped, 0);
    clrmux_spans_fini();
}

/* Spans drained in different batches, long after they started: the tick -> time mapping is
 * monotonic (a child stays within its parent) and close to the wall clock. */
static void test_time_mapping(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    struct clrmux_span s[64];
    int64_t before = clrmux_now_ns();
    int64_t outer = clrmux_span_enter(1);
    int64_t prev_end = 0;
    for (int round = 0; round < 5; round++) {
        int64_t t0 = clrmux_now_ns();
        clrmux_span_exit(clrmux_span_enter(2));
        while (clrmux_now_ns() < t0 + 2000000) /* 2 ms: a new calibration point each drain */
            ;
        assert_int_equal(clrmux_spans_drain(s, 64), 1);
        assert_true(s[0].start_ns <= s[0].end_ns);
        assert_true(s[0].start_ns >= prev_end);
        assert_true(s[0].start_ns >= t0 - 100000 && s[0].end_ns <= t0 + 2000000 + 100000);
        prev_end = s[0].end_ns;
    }
    clrmux_span_exit(outer);
    int64_t after = clrmux_now_ns();
    assert_int_equal(clrmux_spans_drain(s, 64), 1);
    assert_true(s[0].start_ns >= before - 100000 && s[0].start_ns <= before + 1000000);
    assert_true(s[0].end_ns >= prev_end && s[0].end_ns <= after + 100000);
    /* 10 ms of nested work measures 10 ms (+-5%) */
    int64_t a = clrmux_span_enter(3), t0 = clrmux_now_ns();
    while (clrmux_now_ns() < t0 + 10000000)
        ;
    clrmux_span_exit(a);
    assert_int_equal(clrmux_spans_drain(s, 64), 1);
    int64_t d = s[0].end_ns - s[0].start_ns, wall = clrmux_now_ns() - t0;
    if (d < 9500000 || d > wall + 500000)
        fail_msg("10 ms of work measured %lld ns (wall %lld ns)", (long long)d, (long long)wall);
    clrmux_spans_fini();
}

static void test_exception_and_bad_slots(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    int64_t outer = clrmux_span_enter(1);
    int64_t inner = clrmux_span_enter(2);
    /* first pass: both filters run (inner first) before either finally */
    clrmux_span_set_pending_exception(42);
    clrmux_span_exception(inner);
    clrmux_span_exception(outer);
    clrmux_span_exception(-1);
    clrmux_span_exception(5); /* not open: ignored */
    clrmux_span_exit(-1);
    clrmux_span_exit(7);
    assert_int_equal(clrmux_span_depth(), 2);
    clrmux_span_exit(inner);
    clrmux_span_exit(outer);
    struct clrmux_span s[4];
    assert_int_equal(clrmux_spans_drain(s, 4), 2);
    assert_int_equal(s[0].flags, CLRMUX_SPAN_ERROR);
    assert_int_equal(s[0].exc, 42);
    assert_int_equal(s[1].flags, CLRMUX_SPAN_ERROR);
    assert_int_equal(s[1].exc, 42);
    /* the pending exception is forgotten once the thread's stack is empty */
    int64_t x = clrmux_span_enter(3);
    clrmux_span_exception(x);
    clrmux_span_exit(x);
    assert_int_equal(clrmux_spans_drain(s, 4), 1);
    assert_int_equal(s[0].flags, CLRMUX_SPAN_ERROR);
    assert_int_equal(s[0].exc, 0);

    /* exiting an outer slot closes spans left open above it, innermost first */
    int64_t p = clrmux_span_enter(10);
    clrmux_span_enter(11);
    clrmux_span_enter(12);
    clrmux_span_exit(p);
    assert_int_equal(clrmux_span_depth(), 0);
    assert_int_equal(clrmux_spans_drain(s, 4), 3);
    assert_int_equal(s[0].method, 12);
    assert_int_equal(s[1].method, 11);
    assert_int_equal(s[2].method, 10);
    assert_true(s[0].parent_id == s[1].span_id && s[1].parent_id == s[2].span_id);
    clrmux_spans_fini();
}

static void test_full_ring_drops(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(3), 0); /* rounded up to 4 */
    for (int i = 0; i < 6; i++)
        clrmux_span_exit(clrmux_span_enter(i));
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.finished, 6);
    assert_int_equal(st.dropped, 2);
    struct clrmux_span s[8];
    assert_int_equal(clrmux_spans_drain(s, 8), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s[i].method, i); /* the oldest are kept */
    /* room again after draining; the ring wraps */
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 3; i++)
            clrmux_span_exit(clrmux_span_enter(100 + i));
        assert_int_equal(clrmux_spans_drain(s, 2), 2);
        assert_int_equal(clrmux_spans_drain(s + 2, 8), 1);
        assert_int_equal(s[0].method, 100);
        assert_int_equal(s[2].method, 102);
    }
    clrmux_spans_stats(&st);
    assert_int_equal(st.dropped, 2);
    clrmux_spans_fini();
    /* without a ring nothing breaks: spans are counted as dropped */
    clrmux_span_exit(clrmux_span_enter(1));
    assert_int_equal(clrmux_spans_drain(s, 8), 0);
}

/* The fast entry probe (no GC transition) never allocates: it sends a thread's first span and
 * a span beyond its stack's capacity to the slow probe (CLRMUX_SPAN_SLOW), then works again. */
static void *fast_thread(void *arg)
{
    int *ok = arg;
    *ok = clrmux_span_enter_fast(1) == CLRMUX_SPAN_SLOW && clrmux_span_depth() == 0;
    *ok = *ok && clrmux_span_enter(1) == 0 && clrmux_span_enter_fast(2) == 1;
    for (int i = 2; *ok && i < CLRMUX_SPAN_INLINE_DEPTH; i++)
        *ok = clrmux_span_enter_fast(3) == i;
    *ok = *ok && clrmux_span_enter_fast(4) == CLRMUX_SPAN_SLOW && clrmux_span_depth() == CLRMUX_SPAN_INLINE_DEPTH;
    *ok = *ok && clrmux_span_enter(4) == CLRMUX_SPAN_INLINE_DEPTH &&
          clrmux_span_enter_fast(5) == CLRMUX_SPAN_INLINE_DEPTH + 1;
    clrmux_span_exit(0);
    *ok = *ok && clrmux_span_depth() == 0;
    return NULL;
}

static void test_enter_fast(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(1024), 0);
    pthread_t th;
    int ok = 0;
    assert_int_equal(pthread_create(&th, NULL, fast_thread, &ok), 0);
    pthread_join(th, NULL);
    assert_true(ok);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.finished, CLRMUX_SPAN_INLINE_DEPTH + 2);
    clrmux_spans_fini();
}

/* A recursion deeper than the inline stack grows it: every call gets its span, each the child
 * of the call around it (2009 nested calls, as tests/clr's deep recursion). */
static void test_deep_recursion(void **state)
{
    (void)state;
    enum { DEPTH = 2009 };
    assert_int_equal(clrmux_spans_init(4096), 0);
    for (int i = 0; i < DEPTH; i++)
        assert_int_equal(clrmux_span_enter(i), i);
    assert_int_equal(clrmux_span_depth(), DEPTH);
    for (int i = DEPTH - 1; i >= 0; i--)
        clrmux_span_exit(i);
    assert_int_equal(clrmux_span_depth(), 0);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.too_deep, 0);
    assert_int_equal(st.finished, DEPTH);
    static struct clrmux_span s[DEPTH + 1];
    assert_int_equal(clrmux_spans_drain(s, DEPTH + 1), DEPTH);
    uint64_t id_of[DEPTH] = {0}, parent_of[DEPTH] = {0};
    for (int i = 0; i < DEPTH; i++) {
        assert_true(s[i].method < DEPTH);
        id_of[s[i].method] = s[i].span_id;
        parent_of[s[i].method] = s[i].parent_id;
        assert_memory_equal(s[i].trace_id, s[0].trace_id, 16);
    }
    assert_int_equal(parent_of[0], 0);
    for (int i = 1; i < DEPTH; i++)
        assert_true(parent_of[i] == id_of[i - 1]);
    clrmux_spans_fini();
}

/* The hard limit: CLRMUX_SPAN_MAX_DEPTH open spans; a deeper call is counted, not recorded,
 * and the stack stays consistent. */
/* Exception unwinding (clrmux_span_unwind_*): each frame an exception leaves ends its own
 * span, with the exception of its unwind, and only its own. */
static void test_unwind(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(16), 0);
    int64_t a = clrmux_span_enter(1);
    clrmux_span_enter(2);
    clrmux_span_enter(3);
    clrmux_span_set_pending_exception(42);
    clrmux_span_unwind_enter(3); /* C is left */
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), 2);
    clrmux_span_unwind_enter(-1); /* an untraced frame */
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), 2);
    clrmux_span_unwind_enter(2); /* B is unwound; its finally calls D, which throws 43 ... */
    clrmux_span_enter(4);
    clrmux_span_set_pending_exception(43);
    clrmux_span_unwind_enter(4);
    clrmux_span_unwind_leave();
    clrmux_span_unwind_enter(-1); /* ... caught in the finally */
    clrmux_span_unwind_caught();
    clrmux_span_unwind_leave(); /* B is left: with 42, the exception of its unwind */
    clrmux_span_unwind_enter(1);
    clrmux_span_unwind_caught(); /* A catches: it stays */
    assert_int_equal(clrmux_span_depth(), 1);
    clrmux_span_unwind_enter(7); /* not the top span's method (a version without probes) */
    clrmux_span_unwind_leave();
    clrmux_span_unwind_enter(1); /* A's frame catches again: it stays */
    clrmux_span_unwind_caught();
    assert_int_equal(clrmux_span_depth(), 1);
    clrmux_span_unwind_leave(); /* nothing entered: ignored */
    clrmux_span_unwind_caught();
    clrmux_span_exit(a);
    struct clrmux_span s[8];
    assert_int_equal(clrmux_spans_drain(s, 8), 4);
    uint32_t want_method[] = {3, 4, 2, 1}, want_exc[] = {42, 43, 42, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s[i].method, want_method[i]);
        assert_int_equal(s[i].flags, i < 3 ? CLRMUX_SPAN_ERROR : 0);
        assert_int_equal(s[i].exc, want_exc[i]);
    }
    assert_true(s[0].parent_id == s[2].span_id && s[1].parent_id == s[2].span_id && s[2].parent_id == s[3].span_id);

    /* more frames entered than remembered (32): the ones beyond are counted, not lost */
    a = clrmux_span_enter(1);
    for (int i = 0; i < 40; i++)
        clrmux_span_unwind_enter(-1);
    clrmux_span_unwind_enter(1);
    clrmux_span_unwind_leave(); /* the 41st frame: counted, so treated as untraced */
    for (int i = 0; i < 40; i++)
        clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), 1);
    clrmux_span_unwind_enter(1);
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), 0);
    assert_int_equal(clrmux_spans_drain(s, 8), 1);
    assert_int_equal(s[0].flags, CLRMUX_SPAN_ERROR);

    /* an abandoned unwind's frames are forgotten when the thread throws with no span open */
    clrmux_span_unwind_enter(-1);
    clrmux_span_unwind_enter(-1);
    clrmux_span_unwind_reset_idle();
    a = clrmux_span_enter(5);
    clrmux_span_unwind_enter(5);
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), 0);
    assert_int_equal(clrmux_spans_drain(s, 8), 1);
    clrmux_spans_fini();
}

static void test_too_deep(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(1024), 0);
    for (uint32_t i = 0; i < CLRMUX_SPAN_MAX_DEPTH; i++)
        if (clrmux_span_enter((int32_t)(i & 0xffff)) != (int64_t)i)
            fail_msg("enter at depth %u", i);
    assert_int_equal(clrmux_span_enter(999), -1);
    assert_int_equal(clrmux_span_enter(999), -1);
    clrmux_span_exit(-1);
    assert_int_equal(clrmux_span_depth(), CLRMUX_SPAN_MAX_DEPTH);
    /* an exception leaves the frame without a span: it ends none; then the top one */
    clrmux_span_unwind_enter(999);
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), CLRMUX_SPAN_MAX_DEPTH);
    clrmux_span_unwind_enter((int32_t)((CLRMUX_SPAN_MAX_DEPTH - 1) & 0xffff));
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_depth(), CLRMUX_SPAN_MAX_DEPTH - 1);
    clrmux_span_exit(0);
    assert_int_equal(clrmux_span_depth(), 0);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.too_deep, 2);
    assert_int_equal(st.finished, CLRMUX_SPAN_MAX_DEPTH);
    assert_int_equal(st.dropped, CLRMUX_SPAN_MAX_DEPTH - 1024); /* the ring holds 1024 */
    static struct clrmux_span s[1025];
    assert_int_equal(clrmux_spans_drain(s, 1025), 1024);
    clrmux_spans_fini();
}

#define THREADS 8
#define PER_THREAD 2000

static void *worker(void *arg)
{
    uint32_t *tid = arg;
    *tid = (uint32_t)clrmux_thread_id();
    for (int i = 0; i < PER_THREAD / 2; i++) {
        int64_t o = clrmux_span_enter(1);
        clrmux_span_exit(clrmux_span_enter(2));
        clrmux_span_exit(o);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(THREADS * PER_THREAD), 0);
    pthread_t th[THREADS];
    uint32_t tids[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, &tids[i]), 0);
    /* drain concurrently with the producers */
    struct clrmux_span *s = calloc(THREADS * PER_THREAD, sizeof *s);
    size_t got = 0;
    for (int spins = 0; got < THREADS * PER_THREAD && spins < 10000000; spins++)
        got += clrmux_spans_drain(s + got, THREADS * PER_THREAD - got);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    got += clrmux_spans_drain(s + got, THREADS * PER_THREAD - got);
    assert_int_equal(got, THREADS * PER_THREAD);
    int per[THREADS] = {0};
    for (size_t k = 0; k < got; k++) {
        int found = 0;
        for (int i = 0; i < THREADS; i++)
            if (s[k].tid == tids[i]) {
                per[i]++;
                found = 1;
            }
        assert_true(found);
        if (s[k].method == 2)
            assert_true(s[k].parent_id != 0);
        else
            assert_true(s[k].parent_id == 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(per[i], PER_THREAD);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.dropped, 0);
    free(s);
    clrmux_spans_fini();
}

/* A buffer far too small for the threads (64 blocks of 4 spans, 8 threads): spans are
 * dropped, none is lost or duplicated (drained + dropped = finished), each thread's come in
 * the order they closed, and the blocks of the threads that exit are drained. */
#define SMALL_PER_THREAD 5000
static int workers_done;
static void *ordered_worker(void *arg)
{
    uint32_t *tid = arg;
    *tid = (uint32_t)clrmux_thread_id();
    for (int i = 0; i < SMALL_PER_THREAD; i++)
        clrmux_span_exit(clrmux_span_enter(i));
    __atomic_add_fetch(&workers_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_threads_small_buffer(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(256), 0);
    __atomic_store_n(&workers_done, 0, __ATOMIC_RELAXED);
    pthread_t th[THREADS];
    uint32_t tids[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, ordered_worker, &tids[i]), 0);
    struct clrmux_span *s = calloc(THREADS * SMALL_PER_THREAD, sizeof *s);
    size_t got = 0;
    while (__atomic_load_n(&workers_done, __ATOMIC_ACQUIRE) < THREADS)
        got += clrmux_spans_drain(s + got, 7); /* small batches: blocks drained in parts */
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    size_t n;
    while ((n = clrmux_spans_drain(s + got, THREADS * SMALL_PER_THREAD - got)) > 0)
        got += n;
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.finished, THREADS * SMALL_PER_THREAD);
    assert_int_equal(got + st.dropped, THREADS * SMALL_PER_THREAD);
    int last[THREADS];
    for (int i = 0; i < THREADS; i++)
        last[i] = -1;
    for (size_t k = 0; k < got; k++) {
        int i = 0;
        while (i < THREADS && s[k].tid != tids[i])
            i++;
        assert_true(i < THREADS);
        if ((int)s[k].method <= last[i])
            fail_msg("thread %d: span %u after %d", i, s[k].method, last[i]);
        last[i] = (int)s[k].method;
    }
    assert_int_equal(clrmux_spans_pending(), 0);
    free(s);
    clrmux_spans_fini();
}

static const char *mname(void *ctx, uint32_t id)
{
    (void)ctx;
    return id == 0 ? "Tracee.Targets.Add" : id == 1 ? "Odd \"name\"\\\n" : NULL;
}

static const char *ename(void *ctx, uint32_t id)
{
    (void)ctx;
    return id == 3 ? "System.InvalidOperationException" : NULL;
}

static const char *tname(void *ctx, uint32_t tid)
{
    (void)ctx;
    return tid == 1234 ? "worker-1" : NULL;
}

static const char *emsg(void *ctx, uint32_t id)
{
    (void)ctx;
    return id == 3 ? "bad \"state\"" : NULL;
}

static void test_otlp_line(void **state)
{
    (void)state;
    struct clrmux_span s[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 16; i++)
        s[0].trace_id[i] = (uint8_t)(0x10 + i);
    s[0].span_id = 0x0102030405060708ull;
    s[0].start_ns = 1700000000000000001ll;
    s[0].end_ns = 1700000000000000999ll;
    s[0].method = 0;
    s[0].tid = 1234;
    s[1] = s[0];
    s[1].span_id = 0xA0B0C0D0E0F00011ull;
    s[1].parent_id = 0x0102030405060708ull;
    s[1].method = 1;
    s[1].flags = CLRMUX_SPAN_ERROR;
    s[1].exc = 3;
    s[2] = s[1];
    s[2].method = 77; /* unknown name */
    s[2].exc = 0;     /* error without a known type */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct clrmux_otlp_names names = {mname, ename, NULL, tname, emsg};
    struct clrmux_resource res = {0};
    assert_int_equal(clrmux_resource_set(&res, "service.name", "svc \"x\"", 0), 0);
    assert_int_equal(clrmux_resource_set(&res, "process.pid", "42", 1), 0);
    assert_int_equal(clrmux_resource_set(&res, "telemetry.sdk.name", "clrmux", 0), 0);
    assert_int_equal(clrmux_otlp_write_line(f, &res, s, 3, &names), 0);
    assert_int_equal(clrmux_otlp_write_line(f, &res, s, 0, &names), 0); /* nothing */
    fclose(f);
    const char *exp =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"svc \\\"x\\\"\"}},"
        "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"42\"}},"
        "{\"key\":\"telemetry.sdk.name\",\"value\":{\"stringValue\":\"clrmux\"}}]},"
        "\"scopeSpans\":[{\"scope\":{\"name\":\"clrmux\",\"version\":\"" CLRMUX_VERSION "\"},\"spans\":["
        "{\"traceId\":\"101112131415161718191a1b1c1d1e1f\",\"spanId\":\"0102030405060708\","
        "\"name\":\"Tracee.Targets.Add\",\"kind\":1,\"startTimeUnixNano\":\"1700000000000000001\","
        "\"endTimeUnixNano\":\"1700000000000000999\","
        "\"attributes\":[{\"key\":\"code.function.name\",\"value\":{\"stringValue\":\"Tracee.Targets.Add\"}},"
        "{\"key\":\"thread.id\",\"value\":{\"intValue\":\"1234\"}},"
        "{\"key\":\"thread.name\",\"value\":{\"stringValue\":\"worker-1\"}}]},"
        "{\"traceId\":\"101112131415161718191a1b1c1d1e1f\",\"spanId\":\"a0b0c0d0e0f00011\","
        "\"parentSpanId\":\"0102030405060708\",\"name\":\"Odd \\\"name\\\"\\\\\\n\",\"kind\":1,"
        "\"startTimeUnixNano\":\"1700000000000000001\",\"endTimeUnixNano\":\"1700000000000000999\","
        "\"attributes\":[{\"key\":\"code.function.name\",\"value\":{\"stringValue\":\"Odd \\\"name\\\"\\\\\\n\"}},"
        "{\"key\":\"thread.id\",\"value\":{\"intValue\":\"1234\"}},"
        "{\"key\":\"thread.name\",\"value\":{\"stringValue\":\"worker-1\"}}],"
        "\"events\":[{\"timeUnixNano\":\"1700000000000000999\",\"name\":\"exception\",\"attributes\":["
        "{\"key\":\"exception.type\",\"value\":{\"stringValue\":\"System.InvalidOperationException\"}},"
        "{\"key\":\"exception.message\",\"value\":{\"stringValue\":\"bad \\\"state\\\"\"}}]}],"
        "\"status\":{\"code\":2,\"message\":\"System.InvalidOperationException\"}},"
        "{\"traceId\":\"101112131415161718191a1b1c1d1e1f\",\"spanId\":\"a0b0c0d0e0f00011\","
        "\"parentSpanId\":\"0102030405060708\",\"name\":\"method#77\",\"kind\":1,"
        "\"startTimeUnixNano\":\"1700000000000000001\",\"endTimeUnixNano\":\"1700000000000000999\","
        "\"attributes\":[{\"key\":\"thread.id\",\"value\":{\"intValue\":\"1234\"}},"
        "{\"key\":\"thread.name\",\"value\":{\"stringValue\":\"worker-1\"}}],"
        "\"events\":[{\"timeUnixNano\":\"1700000000000000999\",\"name\":\"exception\",\"attributes\":["
        "{\"key\":\"exception.type\",\"value\":{\"stringValue\":\"System.Exception\"}}]}],"
        "\"status\":{\"code\":2}}"
        "]}]}]}\n";
    assert_string_equal(buf, exp);
    free(buf);
}

/* the thread's name from a buffer that changes in place (as the tracer's cache of names does
 * when a thread renames itself): "w-1" for the first two spans asked about, then "renamed" */
static int tname_calls;
static const char *tname_changing(void *ctx, uint32_t tid)
{
    (void)ctx;
    static char buf[16];
    snprintf(buf, sizeof buf, "%s", tname_calls++ < 2 ? "w-1" : "renamed");
    return tid ? buf : NULL;
}

/* A line's spans share the JSON of their method and thread (rendered once per run of them):
 * each span still gets its own method, thread id and thread name, a rename in place included. */
static void test_otlp_line_runs(void **state)
{
    (void)state;
    struct clrmux_span s[5];
    memset(s, 0, sizeof s);
    uint32_t method[5] = {0, 0, 0, 1, 0}, tid[5] = {7, 7, 7, 7, 8};
    for (int i = 0; i < 5; i++) {
        s[i].span_id = (uint64_t)i + 1;
        s[i].method = method[i];
        s[i].tid = tid[i];
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct clrmux_otlp_names names = {mname, ename, NULL, tname_changing, emsg};
    struct clrmux_resource res = {0};
    tname_calls = 0;
    assert_int_equal(clrmux_otlp_write_line(f, &res, s, 5, &names), 0);
    fclose(f);
    static const char *const want[5][3] = {
        {"Tracee.Targets.Add", "7", "w-1"},
        {"Tracee.Targets.Add", "7", "w-1"},
        {"Tracee.Targets.Add", "7", "renamed"},
        {"Odd \\\"name\\\"\\\\\\n", "7", "renamed"},
        {"Tracee.Targets.Add", "8", "renamed"},
    };
    const char *p = buf;
    for (int i = 0; i < 5; i++) {
        char id[64], span[1024];
        snprintf(id, sizeof id, "\"spanId\":\"%016x\"", i + 1);
        p = strstr(p, id);
        assert_non_null(p);
        snprintf(span, sizeof span,
                 ",\"name\":\"%s\",\"kind\":1,\"startTimeUnixNano\":\"0\",\"endTimeUnixNano\":\"0\","
                 "\"attributes\":[{\"key\":\"code.function.name\",\"value\":{\"stringValue\":\"%s\"}},"
                 "{\"key\":\"thread.id\",\"value\":{\"intValue\":\"%s\"}},"
                 "{\"key\":\"thread.name\",\"value\":{\"stringValue\":\"%s\"}}]}",
                 want[i][0], want[i][0], want[i][1], want[i][2]);
        assert_ptr_equal(strstr(p, span), p + strlen(id));
    }
    free(buf);
}

static char long_name[9001];
static const char *long_mname(void *ctx, uint32_t id)
{
    (void)ctx, (void)id;
    return long_name;
}

/* A name longer than the per-span stack buffer takes the heap path, byte for byte. */
static void test_otlp_long_name(void **state)
{
    (void)state;
    memset(long_name, 'A', sizeof long_name - 1);
    long_name[100] = '"';
    struct clrmux_span s;
    memset(&s, 0, sizeof s);
    s.span_id = 1;
    s.flags = CLRMUX_SPAN_ERROR;
    s.exc = 1;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct clrmux_otlp_names names = {long_mname, long_mname, NULL, NULL, long_mname};
    struct clrmux_resource res = {0};
    clrmux_resource_set(&res, "service.name", "svc", 0);
    assert_int_equal(clrmux_otlp_write_line(f, &res, &s, 1, &names), 0);
    fclose(f);
    char *esc = malloc(sizeof long_name + 8);
    snprintf(esc, sizeof long_name + 8, "\"%.100s\\\"%s\"", long_name, long_name + 101);
    char *name = strstr(strstr(buf, "\"spanId\""), "\"name\":");
    assert_non_null(name);
    assert_memory_equal(name + 7, esc, strlen(esc));
    assert_non_null(strstr(buf, "\"status\":{\"code\":2,\"message\":\"AAAA"));
    assert_string_equal(buf + len - 8, "}]}]}]}\n");
    free(esc);
    free(buf);
}

static void test_json_escape(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    clrmux_json_string(f, "a\x01\t\r\"é");
    clrmux_json_string(f, NULL);
    fclose(f);
    assert_string_equal(buf, "\"a\\u0001\\t\\r\\\"é\"\"\"");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nesting_and_ids),
        cmocka_unit_test(test_time_mapping),
        cmocka_unit_test(test_exception_and_bad_slots),
        cmocka_unit_test(test_full_ring_drops),
        cmocka_unit_test(test_enter_fast),
        cmocka_unit_test(test_deep_recursion),
        cmocka_unit_test(test_unwind),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_threads_small_buffer),
        cmocka_unit_test(test_otlp_line),
        cmocka_unit_test(test_otlp_line_runs),
        cmocka_unit_test(test_otlp_long_name),
        cmocka_unit_test(test_json_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
