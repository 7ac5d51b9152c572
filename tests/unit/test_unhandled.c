/* The unhandled-exception watch (src/common/unhandled.c, clrmux_unhandled_exception_event):
 * the exception callbacks of .NET 8 (the last SearchFunctionLeave of the outermost frame) and
 * of .NET 9/10 (the second pass starts) call an exception unhandled only when its first pass
 * ends without a catcher at the thread's outermost managed frame; caught exceptions, ones
 * caught in native code (reflection), recursion of the outermost method, a filter that throws
 * and catches, a failed stack walk and a thread whose outermost frame changed. The stacks come
 * from a fake ICorProfilerInfo2::DoStackSnapshot. Each case runs on its own thread (the
 * watch's state is per thread). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/unhandled.h"

/* ---- a fake runtime: DoStackSnapshot reports g_stack (innermost first), then native ---- */
static FunctionID g_stack[16];
static int g_depth;
static HRESULT g_walk_hr = S_OK;
static int g_walks;

static HRESULT STDMETHODCALLTYPE fake_snapshot(ICorProfilerInfo2 *This, ThreadID thread, StackSnapshotCallback *cb,
                                               ULONG32 flags, void *data, BYTE *ctx, ULONG32 ctx_size)
{
    (void)This, (void)flags, (void)ctx, (void)ctx_size;
    if (thread != 0) /* the current thread */
        return E_INVALIDARG;
    g_walks++;
    if (FAILED(g_walk_hr))
        return g_walk_hr;
    for (int i = 0; i < g_depth; i++)
        cb(g_stack[i], 0x1000 + (UINT_PTR)i, 0, 0, NULL, data);
    cb(0, 0x42, 0, 0, NULL, data); /* the native frame that called the outermost one */
    return S_OK;
}

static ICorProfilerInfo2Vtbl g_vtbl;
static ICorProfilerInfo2 g_info = {&g_vtbl};

static void stack(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        g_stack[i] = va_arg(ap, FunctionID);
    va_end(ap);
    g_depth = n;
}

#define MAIN ((FunctionID)0x100)
#define A ((FunctionID)0x200)
#define B ((FunctionID)0x300)
#define INVOKE ((FunctionID)0x400)
#define G ((FunctionID)0x500)

static int ev(enum clrmux_exc_event e, FunctionID fid) { return clrmux_unhandled_exception_event(&g_info, e, fid); }

/* A check on the case's own thread (cmocka's asserts jump to the main thread's frame): the
 * first failing line is kept and asserted by on_thread. */
static int g_failed_line;
static long g_failed_got, g_failed_want;
#define CHECK_EQ(got, want)                                                                  \
    do {                                                                                     \
        long got_ = (long)(got), want_ = (long)(want);                                       \
        if (got_ != want_ && !g_failed_line)                                                 \
            g_failed_line = __LINE__, g_failed_got = got_, g_failed_want = want_;            \
    } while (0)

/* runs fn on a new thread (fresh per-thread state) */
static void on_thread(void *(*fn)(void *))
{
    g_walk_hr = S_OK;
    g_walks = 0;
    g_failed_line = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fn, NULL), 0);
    pthread_join(th, NULL);
    if (g_failed_line)
        fail_msg("line %d: got %ld, want %ld", g_failed_line, g_failed_got, g_failed_want);
}

/* ---- cases -------------------------------------------------------------------------------- */

static void *net8_unhandled(void *arg)
{
    (void)arg;
    stack(3, A, B, MAIN);
    CHECK_EQ(ev(CLRMUX_EXC_THROWN, 0), 0);
    CHECK_EQ(g_walks, 1); /* the thread's first exception: its outermost frame */
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, A), 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, B), 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
    CHECK_EQ(g_walks, 1); /* no walk for frames that are not the outermost one */
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, MAIN), 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), CLRMUX_EXC_UNHANDLED);
    CHECK_EQ(g_walks, 2); /* confirmed */
    CHECK_EQ(ev(CLRMUX_EXC_UNWIND, A), 0); /* once */
    return NULL;
}

static void *net10_unhandled(void *arg)
{
    (void)arg;
    stack(2, A, MAIN);
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    ev(CLRMUX_EXC_SEARCH_LEAVE, 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, MAIN), 0);
    CHECK_EQ(ev(CLRMUX_EXC_UNWIND, 0), CLRMUX_EXC_UNHANDLED); /* the orphan UnwindFunctionLeave */
    return NULL;
}

static void *caught_in_main(void *arg)
{
    (void)arg;
    stack(2, A, MAIN);
    for (int i = 0; i < 3; i++) {
        ev(CLRMUX_EXC_THROWN, 0);
        ev(CLRMUX_EXC_SEARCH_ENTER, A);
        CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
        CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, MAIN), 0);
        CHECK_EQ(ev(CLRMUX_EXC_CATCHER_FOUND, MAIN), 0);
        CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
        CHECK_EQ(ev(CLRMUX_EXC_UNWIND, A), 0);
        CHECK_EQ(ev(CLRMUX_EXC_UNWIND, 0), 0);
        CHECK_EQ(ev(CLRMUX_EXC_UNWIND, MAIN), 0);
        CHECK_EQ(ev(CLRMUX_EXC_CATCHER_ENTER, MAIN), 0);
        CHECK_EQ(ev(CLRMUX_EXC_CATCHER_LEAVE, 0), 0);
    }
    CHECK_EQ(g_walks, 1); /* caught exceptions walk nothing after the first */
    return NULL;
}

static void *caught_in_native_code(void *arg)
{
    (void)arg;
    /* .NET 9: reflection's invoke; the first pass stops at the native frame under A */
    stack(3, A, INVOKE, MAIN);
    ev(CLRMUX_EXC_THROWN, 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, A), 0);
    CHECK_EQ(ev(CLRMUX_EXC_UNWIND, 0), 0);
    CHECK_EQ(ev(CLRMUX_EXC_UNWIND, A), 0);
    /* .NET 8: a static constructor's exception, left without a catcher, then the second pass */
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
    CHECK_EQ(ev(CLRMUX_EXC_UNWIND, A), 0);
    CHECK_EQ(g_walks, 1);
    return NULL;
}

static void *recursive_main(void *arg)
{
    (void)arg;
    stack(3, A, MAIN, MAIN); /* Main called itself */
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    ev(CLRMUX_EXC_SEARCH_LEAVE, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, MAIN);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0); /* the inner Main: one more above */
    ev(CLRMUX_EXC_SEARCH_ENTER, MAIN);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), CLRMUX_EXC_UNHANDLED);
    return NULL;
}

static void *filter_throws_and_catches(void *arg)
{
    (void)arg;
    stack(2, A, MAIN);
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    ev(CLRMUX_EXC_SEARCH_LEAVE, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, MAIN);
    ev(CLRMUX_EXC_FILTER_ENTER, MAIN);
    /* the filter throws and catches an exception of its own */
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, B);
    ev(CLRMUX_EXC_CATCHER_FOUND, B);
    ev(CLRMUX_EXC_SEARCH_LEAVE, 0);
    ev(CLRMUX_EXC_UNWIND, B);
    ev(CLRMUX_EXC_CATCHER_ENTER, B);
    ev(CLRMUX_EXC_CATCHER_LEAVE, 0);
    ev(CLRMUX_EXC_FILTER_LEAVE, 0); /* declines: the first exception's search goes on */
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), CLRMUX_EXC_UNHANDLED);
    return NULL;
}

static void *walk_fails(void *arg)
{
    (void)arg;
    g_walk_hr = CORPROF_E_INCONSISTENT_WITH_FLAGS; /* no COR_PRF_ENABLE_STACK_SNAPSHOT */
    stack(1, MAIN);
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, MAIN);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0);
    return NULL;
}

static void *outermost_changed(void *arg)
{
    (void)arg;
    stack(1, A); /* the first exception: A is the outermost frame */
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    ev(CLRMUX_EXC_CATCHER_FOUND, A);
    ev(CLRMUX_EXC_CATCHER_ENTER, A);
    ev(CLRMUX_EXC_CATCHER_LEAVE, 0);
    stack(2, A, G); /* now G calls A */
    ev(CLRMUX_EXC_THROWN, 0);
    ev(CLRMUX_EXC_SEARCH_ENTER, A);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), 0); /* the walk shows G above A */
    ev(CLRMUX_EXC_SEARCH_ENTER, G);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_LEAVE, 0), CLRMUX_EXC_UNHANDLED);
    return NULL;
}

static void *thrown_from_outermost_catch(void *arg)
{
    (void)arg;
    stack(1, MAIN);
    ev(CLRMUX_EXC_THROWN, 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, MAIN), 0); /* no catch block of Main runs */
    ev(CLRMUX_EXC_CATCHER_FOUND, MAIN);
    ev(CLRMUX_EXC_UNWIND, MAIN);
    ev(CLRMUX_EXC_CATCHER_ENTER, MAIN);
    /* Main's catch block throws (.NET 10 raises nothing after this SearchFunctionEnter) */
    ev(CLRMUX_EXC_THROWN, 0);
    CHECK_EQ(ev(CLRMUX_EXC_SEARCH_ENTER, MAIN), CLRMUX_EXC_AT_OUTERMOST);
    return NULL;
}

static void test_unhandled_net8(void **s) { (void)s; on_thread(net8_unhandled); }
static void test_unhandled_net10(void **s) { (void)s; on_thread(net10_unhandled); }
static void test_caught_in_main(void **s) { (void)s; on_thread(caught_in_main); }
static void test_caught_in_native_code(void **s) { (void)s; on_thread(caught_in_native_code); }
static void test_recursive_main(void **s) { (void)s; on_thread(recursive_main); }
static void test_filter(void **s) { (void)s; on_thread(filter_throws_and_catches); }
static void test_walk_fails(void **s) { (void)s; on_thread(walk_fails); }
static void test_outermost_changed(void **s) { (void)s; on_thread(outermost_changed); }
static void test_thrown_from_outermost_catch(void **s) { (void)s; on_thread(thrown_from_outermost_catch); }

int main(void)
{
    g_vtbl.DoStackSnapshot = fake_snapshot;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unhandled_net8),
        cmocka_unit_test(test_unhandled_net10),
        cmocka_unit_test(test_caught_in_main),
        cmocka_unit_test(test_caught_in_native_code),
        cmocka_unit_test(test_recursive_main),
        cmocka_unit_test(test_filter),
        cmocka_unit_test(test_walk_fails),
        cmocka_unit_test(test_outermost_changed),
        cmocka_unit_test(test_thrown_from_outermost_catch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
