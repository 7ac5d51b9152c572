/* Unit tests for src/tracer/spans_async.c (async spans: detach on one thread, finish on
 * another; the thread's async context and the trace segments it starts) and the profiler's
 * view of a thread that runs in an async context. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "common/spanctx.h"
#include "tracer/spans.h"

static struct clrmux_span spans[64];

static size_t drain(void)
{
    return clrmux_spans_drain(spans, 64);
}

static const struct clrmux_span *by_method(size_t n, uint32_t m)
{
    for (size_t i = 0; i < n; i++)
        if (spans[i].method == m)
            return &spans[i];
    return NULL;
}

struct finisher {
    struct clrmux_async_span s;
    uint32_t exc;
    int error;
};

static void *finish_thread(void *arg)
{
    struct finisher *f = arg;
    clrmux_span_finish(&f->s, f->exc, f->error);
    return NULL;
}

/* A span detached at its method's return and finished on another thread, later: its ids,
 * parent and start from the stack, its end from the finish, the starting thread's id; the
 * stack goes on without it. */
static void test_detach_finish(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    int64_t root = clrmux_span_enter(1);
    int64_t a = clrmux_span_enter(2);
    assert_int_equal(a, 1);
    struct clrmux_span_ctx c;
    assert_int_equal(clrmux_span_peek(a, &c), 1);
    struct finisher f = {.exc = 3, .error = 1};
    assert_int_equal(clrmux_span_detach(a, &f.s), 1);
    assert_int_equal(clrmux_span_depth(), 1);
    assert_int_equal(clrmux_span_detach(a, &f.s), 0); /* no longer open */
    int64_t b = clrmux_span_enter(4);                 /* the caller goes on */
    clrmux_span_exit(b);
    clrmux_span_exit(root);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, finish_thread, &f), 0);
    pthread_join(th, NULL);
    size_t n = drain();
    assert_int_equal(n, 3);
    const struct clrmux_span *r = by_method(n, 1), *sa = by_method(n, 2), *sb = by_method(n, 4);
    assert_non_null(r), assert_non_null(sa), assert_non_null(sb);
    assert_true(sa->span_id == c.span_id && sa->parent_id == r->span_id && sb->parent_id == r->span_id);
    assert_memory_equal(sa->trace_id, r->trace_id, 16);
    assert_memory_equal(c.trace_id, r->trace_id, 16);
    assert_int_equal(c.local_root, r->span_id);
    assert_true(sa->flags & CLRMUX_SPAN_ERROR);
    assert_int_equal(sa->exc, 3);
    assert_int_equal(sa->tid, r->tid);                      /* the thread it started on */
    assert_true(sa->end_ns >= r->end_ns && sa->start_ns >= r->start_ns);
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(2, &m);
    assert_int_equal(m.calls, 1);
    assert_int_equal(m.errors, 1);
    clrmux_spans_fini();
}

/* A span opened with no span open under it continues the thread's async context; one opened
 * under a span of the same context nests; the async context of the top span itself nests. */
/* An async context whose method an exception left before it returned its task is
 * remembered as failed (its id), so that the agent's readers of the flow's context skip it; a
 * span never made a context, or one that returned, is not. */
static void test_failed_context(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    int64_t a = clrmux_span_enter(1);
    int64_t b = clrmux_span_enter(2);
    struct clrmux_span_ctx ca, cb;
    assert_int_equal(clrmux_span_async_enter(a, &ca), 1);
    assert_int_equal(clrmux_span_async_enter(b, &cb), 1);
    assert_int_equal(clrmux_span_async_enter(7, &cb), 0); /* not open */
    int64_t c = clrmux_span_enter(3); /* never a context */
    struct clrmux_span_ctx cc;
    assert_int_equal(clrmux_span_peek(c, &cc), 1);
    clrmux_span_unwind_enter(3);
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_failed(cc.span_id), 0);
    clrmux_span_unwind_enter(2);
    clrmux_span_unwind_leave();
    assert_int_equal(clrmux_span_failed(cb.span_id), 1);
    assert_int_not_equal(*clrmux_span_failed_any(), 0);
    assert_int_equal(clrmux_span_failed(ca.span_id), 0);
    clrmux_span_exit(a); /* returned: not failed */
    assert_int_equal(clrmux_span_failed(ca.span_id), 0);
    assert_int_equal(clrmux_span_failed(0), 0);
    assert_int_equal(drain(), 3);
    clrmux_spans_fini();
}

static void test_async_context(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    struct clrmux_span_ctx ctx = {.span_id = 0x1111, .local_root = 0x0F0F, .sampled = 1};
    memset(ctx.trace_id, 0xAB, 16);
    clrmux_span_ctx_set(&ctx);
    struct clrmux_span_ctx cur;
    assert_int_equal(clrmux_span_ctx_current(&cur), 1);
    assert_true(cur.span_id == 0x1111);
    int64_t a = clrmux_span_enter(1);
    int64_t b = clrmux_span_enter(2);
    assert_int_equal(clrmux_span_ctx_current(&cur), 1);
    clrmux_span_exit(b);
    clrmux_span_exit(a);
    size_t n = drain();
    assert_int_equal(n, 2);
    const struct clrmux_span *sa = by_method(n, 1), *sb = by_method(n, 2);
    assert_true(sa->parent_id == 0x1111 && sb->parent_id == sa->span_id);
    assert_memory_equal(sa->trace_id, ctx.trace_id, 16);
    assert_memory_equal(sb->trace_id, ctx.trace_id, 16);
    assert_true((sa->flags & CLRMUX_SPAN_JOINED) && (sb->flags & CLRMUX_SPAN_JOINED));
    assert_int_equal(cur.span_id, sb->span_id);
    assert_int_equal(cur.local_root, 0x0F0F); /* the context's local root */
    clrmux_span_ctx_set(NULL);
    assert_int_equal(clrmux_span_ctx_current(&cur), 0);
    clrmux_spans_fini();
}

/* A continuation of another context runs inline inside a traced method: the spans it opens
 * form a segment of that context's trace; back in the method's context, nesting resumes. */
static void test_segments(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    clrmux_span_ctx_set(NULL);
    int64_t a = clrmux_span_enter(1); /* a root of its own trace */
    struct clrmux_span_ctx other = {.span_id = 0x2222, .sampled = 1};
    memset(other.trace_id, 0xCD, 16);
    clrmux_span_ctx_set(&other); /* a continuation of another flow starts inside `a` */
    struct clrmux_span_ctx cur;
    assert_int_equal(clrmux_span_ctx_current(&cur), 1);
    assert_true(cur.span_id == 0x2222); /* a's context is not the thread's now */
    int64_t b = clrmux_span_enter(2);
    int64_t c = clrmux_span_enter(3);
    clrmux_span_exit(c);
    clrmux_span_exit(b);
    clrmux_span_ctx_set(NULL); /* back in a's context */
    int64_t d = clrmux_span_enter(4);
    clrmux_span_exit(d);
    clrmux_span_exit(a);
    size_t n = drain();
    assert_int_equal(n, 4);
    const struct clrmux_span *sa = by_method(n, 1), *sb = by_method(n, 2), *sc = by_method(n, 3), *sd = by_method(n, 4);
    assert_true(sb->parent_id == 0x2222 && sc->parent_id == sb->span_id);
    assert_memory_equal(sb->trace_id, other.trace_id, 16);
    assert_memory_equal(sc->trace_id, other.trace_id, 16);
    assert_true(sd->parent_id == sa->span_id && sa->parent_id == 0);
    assert_memory_equal(sd->trace_id, sa->trace_id, 16);
    assert_memory_not_equal(sa->trace_id, other.trace_id, 16);
    clrmux_spans_fini();
}

/* An async context that is not recorded: its continuations are not sampled either (counted). */
static void test_unsampled_context(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    struct clrmux_span_ctx ctx = {.span_id = 0x3333, .sampled = 0};
    memset(ctx.trace_id, 0x11, 16);
    clrmux_span_ctx_set(&ctx);
    int64_t a = clrmux_span_enter(5);
    clrmux_span_exit(a);
    assert_int_equal(drain(), 0);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    assert_int_equal(st.unsampled, 1);
    struct clrmux_method_metrics m;
    clrmux_method_metrics_get(5, &m);
    assert_int_equal(m.calls, 1);
    clrmux_span_ctx_set(NULL);
    clrmux_spans_fini();
}

/* The profiler's view: a thread with no span open that runs in a recorded async context
 * shows that context's span, local root and trace; none once the context is gone. */
static void test_profiler_view(void **state)
{
    (void)state;
    assert_int_equal(clrmux_spans_init(64), 0);
    struct clrmux_span_context *rec = clrmux_span_context_get();
    assert_non_null(rec);
    struct clrmux_span_ctx ctx = {.span_id = 0x4444, .local_root = 0x5555, .sampled = 1};
    memset(ctx.trace_id, 0x22, 16);
    clrmux_span_ctx_set(&ctx);
    struct clrmux_span_ids ids;
    assert_int_equal(clrmux_span_context_read(rec, 0, &ids, 4), 1);
    assert_true(ids.span_id == 0x4444 && ids.local_root_id == 0x5555);
    assert_memory_equal(ids.trace_id, ctx.trace_id, 16);
    clrmux_span_ctx_set(NULL);
    assert_int_equal(clrmux_span_context_read(rec, 0, &ids, 4), 0);
    clrmux_spans_fini();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detach_finish),
        cmocka_unit_test(test_async_context),
        cmocka_unit_test(test_failed_context),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_unsampled_context),
        cmocka_unit_test(test_profiler_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
