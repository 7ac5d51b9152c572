/* Unit tests for the routing of callbacks (src/loader/dispatch.c, mux.c): each callback reaches
 * the children whose own mask asked for it and whose interface version has it, never an
 * inactive child; out-parameters merged (JITInlining, JITCachedFunctionSearchStarted); ReJIT
 * requests and callbacks only for the children that asked. Fake runtime and children. */
#include <pthread.h>

#include "mux_fixture.h"

/* ---- routing ----------------------------------------------------------------------- */

static HRESULT call_module_load_finished(ICorProfilerCallback11 *mux)
{
    return mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
}
static HRESULT call_thread_created(ICorProfilerCallback11 *mux) { return mux->lpVtbl->ThreadCreated(mux, 0x99); }
static HRESULT call_thread_destroyed(ICorProfilerCallback11 *mux) { return mux->lpVtbl->ThreadDestroyed(mux, 0x99); }
static HRESULT call_object_allocated(ICorProfilerCallback11 *mux)
{
    return mux->lpVtbl->ObjectAllocated(mux, 0x1234, 0x5678);
}
static HRESULT call_gc_started(ICorProfilerCallback11 *mux)
{
    BOOL gens[3] = {TRUE, FALSE, FALSE};
    return mux->lpVtbl->GarbageCollectionStarted(mux, 3, gens, COR_PRF_GC_INDUCED);
}
static HRESULT call_attach_complete(ICorProfilerCallback11 *mux) { return mux->lpVtbl->ProfilerAttachComplete(mux); }
static HRESULT call_shutdown(ICorProfilerCallback11 *mux) { return mux->lpVtbl->Shutdown(mux); }

static void test_route_by_own_mask(void **state)
{
    (void)state;
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_MODULE_LOADS, 0, NULL},
        {"b", 11, COR_PRF_MONITOR_THREADS, 0, NULL},
        {"c", 11, 0, COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED, NULL},
        {"d", 11, 0, 0, NULL},
    };
    /* each callback, in this order, and the children (bit i: spec[i]) it must reach once */
    static const struct {
        const char *name;
        int fc_index; /* FC_<name>: its count in a fake child */
        HRESULT (*call)(ICorProfilerCallback11 *mux);
        unsigned to;
    } cases[] = {
        {"ModuleLoadFinished", FC_ModuleLoadFinished, call_module_load_finished, 1u << 0},
        {"ThreadCreated", FC_ThreadCreated, call_thread_created, 1u << 1},
        {"ThreadDestroyed", FC_ThreadDestroyed, call_thread_destroyed, 1u << 1},
        {"ObjectAllocated", FC_ObjectAllocated, call_object_allocated, 1u << 2},
        {"GarbageCollectionStarted", FC_GarbageCollectionStarted, call_gc_started, 0}, /* nobody asked for GC */
        {"ProfilerAttachComplete", FC_ProfilerAttachComplete, call_attach_complete, 0xF}, /* lifecycle: everyone */
        {"Shutdown", FC_Shutdown, call_shutdown, 0xF},
    };
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct fake_child fc[4];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 4, fc, NULL);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS,
                 COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        HRESULT hr = cases[k].call(mux);
        if (hr != S_OK)
            fail_msg("%s returned 0x%08X", cases[k].name, (unsigned)hr);
        for (int i = 0; i < 4; i++) {
            unsigned long want = (cases[k].to >> i) & 1, got = fc[i].counts[cases[k].fc_index];
            if (got != want)
                fail_msg("%s reached child '%s' %lu times, expected %lu", cases[k].name, spec[i].name, got, want);
        }
    }
    /* and nothing else reached anyone */
    assert_int_equal(fake_child_total_calls(&fc[0]), 3);
    assert_int_equal(fake_child_total_calls(&fc[1]), 4);
    assert_int_equal(fake_child_total_calls(&fc[2]), 3);
    assert_int_equal(fake_child_total_calls(&fc[3]), 2);
    fake_mux_free(m);
}

static void test_route_version_gating(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    const DWORD low = COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_ENABLE_REJIT;
    const DWORD high = COR_PRF_HIGH_MONITOR_EVENT_PIPE | COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS |
                       COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED;
    const struct child_spec spec[] = {{"old", 3, low, high, NULL}, {"cur", 11, low, high, NULL}};
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    struct fake_child *old = &fc[0], *cur = &fc[1];
    struct clrmux_child *c_old = c[0], *c_cur = c[1];
    assert_int_equal(c_old->version, 3);
    assert_int_equal(c_cur->version, 11);

    ModuleID mods[1] = {0x7000};
    mdMethodDef methods[1] = {0x06000001};
    assert_int_equal(request_rejit(c_old, 1, mods, methods), S_OK);
    assert_int_equal(request_rejit(c_cur, 1, mods, methods), S_OK);
    const char *const prov[] = {"P"};
    EVENTPIPE_SESSION s1, s2;
    start_session(c_old, prov, 1, &s1);
    start_session(c_cur, prov, 1, &s2);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->JITCompilationStarted(mux, 0x500, TRUE);
    static const BYTE il[2] = {0x2A, 0};
    mux->lpVtbl->DynamicMethodJITCompilationStarted(mux, 0x501, TRUE, il, sizeof il);
    mux->lpVtbl->DynamicMethodJITCompilationFinished(mux, 0x501, S_OK, TRUE);
    mux->lpVtbl->DynamicMethodUnloaded(mux, 0x501);
    mux->lpVtbl->ModuleInMemorySymbolsUpdated(mux, 0x7000);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, 1, TRUE);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x500, 1, S_OK, TRUE);
    mux->lpVtbl->ReJITError(mux, 0x7000, 0x06000001, 0x500, E_FAIL);
    deliver_event(m, 0x10);
    mux->lpVtbl->EventPipeProviderCreated(mux, 0x10);

    assert_int_equal(FC_CALLS(old, JITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(cur, JITCompilationStarted), 1);
    /* the version-3 child asked for all of these through its mask, but cannot take them */
    assert_int_equal(fake_child_total_calls(old), 1);
#define LATER(N) {#N, FC_##N}
    static const struct {
        const char *name;
        int fc_index;
    } later[] = {
        LATER(DynamicMethodJITCompilationStarted), LATER(DynamicMethodJITCompilationFinished),
        LATER(DynamicMethodUnloaded), LATER(ModuleInMemorySymbolsUpdated), LATER(GetReJITParameters),
        LATER(ReJITCompilationStarted), LATER(ReJITCompilationFinished), LATER(ReJITError),
        LATER(EventPipeEventDelivered), LATER(EventPipeProviderCreated),
    };
#undef LATER
    for (size_t k = 0; k < sizeof later / sizeof later[0]; k++)
        if (cur->counts[later[k].fc_index] != 1)
            fail_msg("%s reached the version-11 child %lu times, expected 1", later[k].name,
                     cur->counts[later[k].fc_index]);
    fake_mux_free(m);
}

/* Initialize hook of a child that then fails: it requested a ReJIT, started an EventPipe
 * session and claimed nothing else. */
static HRESULT failing_child_hook(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    ModuleID mods[1] = {0x7000};
    mdMethodDef methods[1] = {0x06000001};
    info->lpVtbl->RequestReJIT(info, 1, mods, methods);
    WCHAR name[8];
    clrmux_utf8_to_utf16("P", name, 8);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, ~0ull, COR_PRF_EVENTPIPE_VERBOSE, NULL};
    EVENTPIPE_SESSION s = 0;
    info->lpVtbl->EventPipeStartSession(info, 1, &cfg, FALSE, &s);
    return S_OK;
}

static void test_route_inactive_child_gets_nothing(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    struct clrmux_mux *m = fake_mux_new(&rt);
    const DWORD low = COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_ENABLE_REJIT;
    struct fake_child a, f;
    fake_child_init(&a, 11, low, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&f, 11, low | COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_MONITOR_EVENT_PIPE | COR_PRF_HIGH_BASIC_GC);
    f.init_hr = E_FAIL;
    f.init_hook = failing_child_hook;
    fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cf = fake_mux_add_child(m, &f, "f");
    fake_mux_end_init(m);
    assert_int_equal(FC_CALLS(&f, Initialize), 1);
    assert_int_equal(atomic_load(&cf->active), 0);
    /* its flags left the runtime's mask */
    assert_union(&rt, low, COR_PRF_HIGH_MONITOR_EVENT_PIPE);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    mux->lpVtbl->ThreadCreated(mux, 0x99);
    BOOL inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &inl);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    deliver_event(m, 0x10);
    mux->lpVtbl->ProfilerAttachComplete(mux);
    mux->lpVtbl->Shutdown(mux);
    assert_int_equal(fake_child_total_calls(&f), 0);
    assert_int_equal(FC_CALLS(&a, ModuleLoadFinished), 1);
    assert_int_equal(FC_CALLS(&a, ThreadCreated), 0);
    assert_int_equal(FC_CALLS(&a, JITInlining), 1);
    assert_int_equal(FC_CALLS(&a, ProfilerAttachComplete), 1);
    assert_int_equal(FC_CALLS(&a, Shutdown), 1);
    fake_mux_free(m);
}

/* ---- out-parameter merges ---------------------------------------------------------- */

static void test_jit_inlining_merge(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL},
        {"b", 11, COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_THREADS, 0, NULL},
        {"c", 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0, NULL}, /* not JIT_COMPILATION */
    };
    struct fake_child fc[3];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 3, fc, NULL);
    struct fake_child *a = &fc[0], *b = &fc[1], *c = &fc[2];
    for (int i = 0; i < 3; i++) /* every child answers: a and c no, b yes */
        fc[i].set_inline = 1, fc[i].inline_answer = i == 1;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    /* one child says no: no inlining */
    BOOL v = TRUE;
    assert_int_equal(mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v), S_OK);
    assert_int_equal(v, FALSE);
    assert_int_equal(FC_CALLS(a, JITInlining), 1);
    assert_int_equal(FC_CALLS(b, JITInlining), 1);
    /* b saw the runtime's value, not a's answer */
    assert_int_equal(b->inline_seen, TRUE);
    assert_int_equal(a->inline_seen, TRUE);
    /* c has no JIT_COMPILATION: not asked, its FALSE does not count */
    assert_int_equal(FC_CALLS(c, JITInlining), 0);

    /* every asked child allows it: inline */
    a->inline_answer = TRUE;
    v = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(v, TRUE);
    assert_int_equal(FC_CALLS(c, JITInlining), 0);

    /* the last child saying no is enough too; the first one still saw TRUE */
    b->inline_answer = FALSE;
    b->inline_seen = FALSE;
    v = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(v, FALSE);
    assert_int_equal(b->inline_seen, TRUE);

    /* children see the incoming value as it is */
    v = FALSE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(a->inline_seen, FALSE);
    assert_int_equal(b->inline_seen, FALSE);
    assert_int_equal(FC_CALLS(a, JITInlining), 4);
    fake_mux_free(m);
}

static void test_jit_cached_function_search_merge(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0, NULL},
        {"b", 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0, NULL},
        {"c", 11, COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL}, /* not CACHE_SEARCHES */
    };
    struct fake_child fc[3];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 3, fc, NULL);
    struct fake_child *a = &fc[0], *b = &fc[1], *c = &fc[2];
    for (int i = 0; i < 3; i++) /* every child answers: a and c no, b yes */
        fc[i].set_cache = 1, fc[i].cache_answer = i == 1;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    BOOL v = TRUE;
    assert_int_equal(mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x500, &v), S_OK);
    assert_int_equal(v, FALSE);
    assert_int_equal(a->cache_seen, TRUE);
    assert_int_equal(b->cache_seen, TRUE);
    assert_int_equal(FC_CALLS(c, JITCachedFunctionSearchStarted), 0);

    a->cache_answer = TRUE;
    v = TRUE;
    mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x500, &v);
    assert_int_equal(v, TRUE);
    assert_int_equal(FC_CALLS(a, JITCachedFunctionSearchStarted), 2);
    assert_int_equal(FC_CALLS(b, JITCachedFunctionSearchStarted), 2);
    assert_int_equal(FC_CALLS(c, JITCachedFunctionSearchStarted), 0);

    /* CACHE_SEARCHES also routes the Finished callback, only to a and b */
    mux->lpVtbl->JITCachedFunctionSearchFinished(mux, 0x500, COR_PRF_CACHED_FUNCTION_FOUND);
    assert_int_equal(FC_CALLS(a, JITCachedFunctionSearchFinished), 1);
    assert_int_equal(FC_CALLS(c, JITCachedFunctionSearchFinished), 0);
    fake_mux_free(m);
}

/* ---- ReJIT ------------------------------------------------------------------------- */

static void test_rejit_needs_own_flag(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001); /* compiled: nothing held back */
    fake_runtime_add_function(&rt, 0x501, 0x7000, 0x06000002);
    const struct child_spec spec[] = {{"a", 11, COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL},
                                      {"b", 11, COR_PRF_ENABLE_REJIT, 0, NULL}};
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    assert_true(rt.mask_low & COR_PRF_ENABLE_REJIT); /* b's flag is in the union */

    ModuleID mods[2] = {0x7000, 0x7000};
    mdMethodDef methods[2] = {0x06000001, 0x06000002};
    assert_int_equal(request_rejit(ca, 1, mods, methods), CORPROF_E_REJIT_NOT_ENABLED);
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    assert_int_equal(pa->lpVtbl->RequestReJITWithInliners(pa, COR_PRF_REJIT_BLOCK_INLINING, 1, mods, methods),
                     CORPROF_E_REJIT_NOT_ENABLED);
    assert_int_equal(rt.rejit_calls, 0);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    assert_int_equal(FC_CALLS(a, GetReJITParameters) + FC_CALLS(b, GetReJITParameters), 0);

    assert_int_equal(request_rejit(cb, 2, mods, methods), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    assert_int_equal(rt.rejit_last_count, 2);
    assert_int_equal(rt.rejit_mods[1], 0x7000);
    assert_int_equal(rt.rejit_methods[1], 0x06000002);
    ICorProfilerInfo15 *pb = fake_child_info(cb);
    assert_int_equal(pb->lpVtbl->RequestReJITWithInliners(pb, COR_PRF_REJIT_BLOCK_INLINING, 1, mods, methods), S_OK);
    assert_int_equal(rt.rejit_calls, 2);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    assert_int_equal(FC_CALLS(a, GetReJITParameters), 0);
    assert_int_equal(FC_CALLS(b, GetReJITParameters), 1);
    fake_mux_free(m);
}

static void test_rejit_callbacks_reach_requesters_only(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    fake_runtime_add_function(&rt, 0x600, 0x7000, 0x06000002);
    fake_runtime_add_function(&rt, 0x700, 0x7001, 0x06000001);
    /* ReJITCompilation* reach a profiler that monitors JIT compilation (as the runtime) */
    const struct child_spec spec[] = {{"a", 11, COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL},
                                      {"b", 11, COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL}};
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    ModuleID mods[2] = {0x7000, 0x7000};
    mdMethodDef methods[2] = {0x06000001, 0x06000002};
    assert_int_equal(request_rejit(ca, 1, mods, methods), S_OK);

    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    const ReJITID v1 = fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000001); /* a's version */
    assert_int_equal(FC_CALLS(a, GetReJITParameters), 1);
    assert_int_equal(a->last_module, 0x7000);
    assert_int_equal(a->last_method, 0x06000001);
    mux->lpVtbl->ReJITError(mux, 0x7000, 0x06000001, 0x500, E_FAIL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, v1, TRUE);
    assert_int_equal(a->last_function, 0x500);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x500, v1, S_OK, TRUE);
    assert_int_equal(FC_CALLS(a, ReJITError), 1);
    assert_int_equal(FC_CALLS(a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(a, ReJITCompilationFinished), 1);
    assert_int_equal(fake_child_total_calls(b), 0);

    /* methods nobody requested: another token, the same token in another module, and a
     * FunctionID the runtime cannot resolve */
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000002, NULL);
    mux->lpVtbl->GetReJITParameters(mux, 0x7001, 0x06000001, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x600, 8, TRUE);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x700, 9, TRUE);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x999, 9, S_OK, TRUE);
    assert_int_equal(FC_CALLS(a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(a, ReJITCompilationFinished), 1);
    assert_int_equal(fake_child_total_calls(b), 0);

    /* b requests method 1 too, and method 2: the new version of method 1 is b's (a's rewrite
     * in it is a's last one, reused: alone, a would see no new version), 2 is b's */
    assert_int_equal(request_rejit(cb, 2, mods, methods), S_OK);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000001), TRUE);
    assert_int_equal(FC_CALLS(a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(b, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(b, ReJITCompilationStarted), 1);
    /* a tier-1 compilation of a's version still reaches a alone */
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, v1, TRUE);
    assert_int_equal(FC_CALLS(a, ReJITCompilationStarted), 2);
    assert_int_equal(FC_CALLS(b, ReJITCompilationStarted), 1);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000002, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x600, fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000002), TRUE);
    assert_int_equal(FC_CALLS(a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(b, GetReJITParameters), 2);
    assert_int_equal(b->last_method, 0x06000002);
    assert_int_equal(FC_CALLS(a, ReJITCompilationStarted), 2);
    assert_int_equal(FC_CALLS(b, ReJITCompilationStarted), 2);
    assert_int_equal(b->last_function, 0x600);
    fake_mux_free(m);
}


/* ---- threads a child brings in itself (src/loader/ownthreads.c) ------------------------ */

struct own_thread_arg {
    struct clrmux_mux *m;
    ICorProfilerInfo15 *info; /* NULL: clrmux's own thread */
    ThreadID tid;
};

/* A thread of its own: InitializeCurrentThread, then (as the runtime does when it first needs
 * a Thread object for it, e.g. in RequestReJIT) ThreadCreated and ThreadAssignedToOSThread
 * on that thread. */
static void *own_thread(void *p)
{
    struct own_thread_arg *a = p;
    if (a->info)
        a->info->lpVtbl->InitializeCurrentThread(a->info);
    else
        clrmux_own_thread_initialize(a->m, NULL);
    ICorProfilerCallback11 *mux = fake_mux_cb(a->m);
    mux->lpVtbl->ThreadCreated(mux, a->tid);
    mux->lpVtbl->ThreadAssignedToOSThread(mux, a->tid, 77);
    return NULL;
}

static void run_own_thread(struct clrmux_mux *m, ICorProfilerInfo15 *info, ThreadID tid)
{
    struct own_thread_arg a = {m, info, tid};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, own_thread, &a), 0);
    pthread_join(th, NULL);
}

static void test_own_thread_reaches_its_owner_only(void **state)
{
    (void)state;
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_THREADS, 0, NULL},
        {"b", 11, COR_PRF_MONITOR_THREADS, 0, NULL},
    };
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct fake_child fc[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, NULL);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    WCHAR name[] = {'w', 0};

    /* an app thread: both */
    mux->lpVtbl->ThreadCreated(mux, 0x6001);
    assert_int_equal(FC_CALLS(&fc[0], ThreadCreated), 1);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 1);

    /* child a's own thread: a only, from its start to its end (reported on other threads) */
    run_own_thread(m, fc[0].info, 0x5001);
    assert_int_equal(FC_CALLS(&fc[0], ThreadCreated), 2);
    assert_int_equal(FC_CALLS(&fc[0], ThreadAssignedToOSThread), 1);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 1);
    assert_int_equal(FC_CALLS(&fc[1], ThreadAssignedToOSThread), 0);
    mux->lpVtbl->ThreadNameChanged(mux, 0x5001, 1, name);
    mux->lpVtbl->ThreadDestroyed(mux, 0x5001);
    assert_int_equal(FC_CALLS(&fc[0], ThreadNameChanged), 1);
    assert_int_equal(FC_CALLS(&fc[0], ThreadDestroyed), 1);
    assert_int_equal(FC_CALLS(&fc[1], ThreadNameChanged), 0);
    assert_int_equal(FC_CALLS(&fc[1], ThreadDestroyed), 0);

    /* its ThreadID reused by an app thread after its end: both again */
    mux->lpVtbl->ThreadCreated(mux, 0x5001);
    mux->lpVtbl->ThreadDestroyed(mux, 0x6001);
    assert_int_equal(FC_CALLS(&fc[0], ThreadCreated), 3);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 2);
    assert_int_equal(FC_CALLS(&fc[0], ThreadDestroyed), 2);
    assert_int_equal(FC_CALLS(&fc[1], ThreadDestroyed), 1);

    /* clrmux's own thread (the detach thread): no child */
    run_own_thread(m, NULL, 0x7001);
    assert_int_equal(FC_CALLS(&fc[0], ThreadCreated), 3);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 2);
    assert_int_equal(FC_CALLS(&fc[0], ThreadAssignedToOSThread), 1);
    fake_mux_free(m);
}

/* One subscriber that can never detach (an ICorProfilerCallback2 child: its route goes straight
 * to it while no gate is closed) and a thread of the other child, which asked for no thread
 * callbacks: the subscriber is told nothing of that thread. */
static void test_own_thread_of_a_non_subscriber(void **state)
{
    (void)state;
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL},
        {"b", 2, COR_PRF_MONITOR_THREADS, 0, NULL},
    };
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct fake_child fc[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, NULL);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    assert_non_null(atomic_load(&m->direct[CLRMUX_ROUTE_ThreadCreated]));
    mux->lpVtbl->ThreadCreated(mux, 0x6001);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 1);
    run_own_thread(m, fc[0].info, 0x5001);
    mux->lpVtbl->ThreadDestroyed(mux, 0x5001);
    assert_int_equal(FC_CALLS(&fc[1], ThreadCreated), 1);
    assert_int_equal(FC_CALLS(&fc[1], ThreadAssignedToOSThread), 0);
    assert_int_equal(FC_CALLS(&fc[1], ThreadDestroyed), 0);
    assert_int_equal(FC_CALLS(&fc[0], ThreadCreated), 0);
    mux->lpVtbl->ThreadDestroyed(mux, 0x6001);
    assert_int_equal(FC_CALLS(&fc[1], ThreadDestroyed), 1);
    fake_mux_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_by_own_mask),
        cmocka_unit_test(test_own_thread_reaches_its_owner_only),
        cmocka_unit_test(test_own_thread_of_a_non_subscriber),
        cmocka_unit_test(test_route_version_gating),
        cmocka_unit_test(test_route_inactive_child_gets_nothing),
        cmocka_unit_test(test_jit_inlining_merge),
        cmocka_unit_test(test_jit_cached_function_search_merge),
        cmocka_unit_test(test_rejit_needs_own_flag),
        cmocka_unit_test(test_rejit_callbacks_reach_requesters_only),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
