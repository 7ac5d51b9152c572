/* The unhandled-exception watch (src/common/unhandled.c, clrmux_unhandled_exception_event):
 * the exception callbacks of .NET 8 (the last SearchFunctionLeave of the outermost frame) and
 * of .NET 9/10 (the second pass starts) call an exception unhandled only when its first pass
 * ends without a catcher at the thread's outermost managed frame; caught exceptions, ones
 * caught in native code (reflection), recursion of the outermost method, a filter that throws
 * and catches, a failed stack walk and a thread whose outermost frame changed. The stacks come
 * from a fake ICorProfilerInfo2::DoStackSnapshot. Each case runs on its own thread (the
 * watch's state is per thread).
 * The hook's token (clrmux_unhandled_is_hook, clrmux_unhandled_prefetch): looked up ahead of
 * the callbacks in the runtime's System.Private.CoreLib.dll laid out as mapped
 * (corelib.h: CLRMUX_TEST_CORELIB, or the SDK's newest; skipped without one, failing under CI),
 * no lookup of their own; a prefetch that cannot read the tables leaves the lookup to them. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corelib.h"

#include "common/mdtables.h"
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

/* ---- the hook's token ------------------------------------------------------------------ */

#define CORELIB ((ModuleID)0xC0)
#define OTHER ((ModuleID)0xD0)
static const uint8_t *g_base;   /* CoreLib's base, as GetModuleInfo gives it */
static int g_modinfo_calls, g_metadata_calls;

/* fid = module << 32 | token */
static HRESULT STDMETHODCALLTYPE fake_function_info(ICorProfilerInfo2 *This, FunctionID fid, ClassID *cls,
                                                    ModuleID *mod, mdToken *tok)
{
    (void)This;
    *cls = 0;
    *mod = (ModuleID)(fid >> 32);
    *tok = (mdToken)(fid & 0xffffffffu);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fake_module_info(ICorProfilerInfo2 *This, ModuleID mod, LPCBYTE *base, ULONG cch,
                                                  ULONG *len, WCHAR *name, AssemblyID *asm_id)
{
    (void)This;
    g_modinfo_calls++;
    const char *n = mod == CORELIB ? "/dotnet/shared/System.Private.CoreLib.dll" : "/app/app.dll";
    ULONG i = 0;
    for (; n[i] && i + 1 < cch; i++)
        name[i] = (WCHAR)n[i];
    name[i] = 0;
    *len = i + 1;
    *base = mod == CORELIB ? g_base : NULL;
    *asm_id = 1;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fake_metadata(ICorProfilerInfo2 *This, ModuleID mod, DWORD flags, REFIID riid,
                                               IUnknown **out)
{
    (void)This, (void)mod, (void)flags, (void)riid;
    g_metadata_calls++;
    *out = NULL;
    return E_FAIL;
}

static uint8_t *g_file, *g_img;
static size_t g_len, g_img_len;

/* CoreLib's file laid out as mapped (corelib.h), or NULL: the tests skip (fail under CI). */
static uint8_t *corelib_image(void)
{
    static int tried;
    if (!tried++ && (g_file = corelib_read("test_unhandled", &g_len)))
        g_img = corelib_map(g_file, g_len, &g_img_len);
    if (!g_img && corelib_required())
        fail_msg("no System.Private.CoreLib.dll under CI");
    return g_img;
}

static int hook_of(struct clrmux_unhandled_hook *h, ModuleID mod, uint32_t tok)
{
    return clrmux_unhandled_is_hook(h, (ICorProfilerInfo *)&g_info, (FunctionID)mod << 32 | tok);
}

/* Prefetched: the callbacks answer from the token, with no GetModuleInfo or importer. */
static void test_hook_prefetched(void **s)
{
    (void)s;
    const uint8_t *img = corelib_image();
    if (!img)
        skip();
    uint32_t want = 0;
    assert_int_equal(clrmux_md_find_method(img, g_img_len, 1, "System", "AppContext", "OnUnhandledException", &want), 0);
    struct clrmux_unhandled_hook h = {0};
    g_base = img;
    g_modinfo_calls = g_metadata_calls = 0;
    assert_int_equal(clrmux_unhandled_prefetch(&h, (uintptr_t)CORELIB, img), 1);
    assert_int_equal(clrmux_unhandled_prefetch(&h, (uintptr_t)CORELIB, img), 0); /* known already */
    assert_int_equal(hook_of(&h, OTHER, 0x06000001), 0);
    if (want) { /* .NET 10; 8 and 9 have no such method (0: nothing is the hook) */
        assert_int_equal(hook_of(&h, CORELIB, want), 1);
        assert_int_equal(hook_of(&h, OTHER, want), 0);
    }
    assert_int_equal(hook_of(&h, CORELIB, want + 1), 0);
    assert_int_equal(g_modinfo_calls, 0);
    assert_int_equal(g_metadata_calls, 0);
}

/* Not prefetched: the first CoreLib callback looks it up itself (GetModuleInfo, the tables). */
static void test_hook_looked_up_by_the_callback(void **s)
{
    (void)s;
    const uint8_t *img = corelib_image();
    if (!img)
        skip();
    uint32_t want = 0;
    assert_int_equal(clrmux_md_find_method(img, g_img_len, 1, "System", "AppContext", "OnUnhandledException", &want), 0);
    if (!want)
        skip();
    struct clrmux_unhandled_hook h = {0};
    g_base = img;
    g_modinfo_calls = g_metadata_calls = 0;
    assert_int_equal(hook_of(&h, OTHER, want), 0);
    assert_int_equal(hook_of(&h, CORELIB, want), 1);
    assert_int_equal(g_modinfo_calls, 2); /* each module once */
    assert_int_equal(hook_of(&h, CORELIB, want), 1);
    assert_int_equal(g_modinfo_calls, 2);
    assert_int_equal(g_metadata_calls, 0);
}

/* A prefetch that cannot read the tables claims nothing: the callback looks it up, importer
 * included (here it fails: no token, nothing is the hook). */
static void test_hook_prefetch_unreadable(void **s)
{
    (void)s;
    static uint8_t junk[4096];
    struct clrmux_unhandled_hook h = {0};
    g_base = junk;
    g_modinfo_calls = g_metadata_calls = 0;
    assert_int_equal(clrmux_unhandled_prefetch(&h, (uintptr_t)CORELIB, NULL), 0);
    assert_int_equal(clrmux_unhandled_prefetch(&h, (uintptr_t)CORELIB, junk), 0);
    assert_int_equal(hook_of(&h, CORELIB, 0x06000aef), 0);
    assert_int_equal(g_modinfo_calls, 1);
    assert_int_equal(g_metadata_calls, 1);
    assert_int_equal(hook_of(&h, CORELIB, 0x06000aef), 0); /* looked up once */
    assert_int_equal(g_metadata_calls, 1);
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
    g_vtbl.GetFunctionInfo = fake_function_info;
    g_vtbl.GetModuleInfo = fake_module_info;
    g_vtbl.GetModuleMetaData = fake_metadata;
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
        cmocka_unit_test(test_hook_prefetched),
        cmocka_unit_test(test_hook_looked_up_by_the_callback),
        cmocka_unit_test(test_hook_prefetch_unreadable),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(g_img);
    free(g_file);
    return rc;
}
