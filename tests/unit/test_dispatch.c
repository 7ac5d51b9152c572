/* Dispatch tables (src/loader/dispatch.c) against the fake runtime: each callback's route
 * holds exactly its subscribers, is rebuilt when a child's mask changes or a child detaches
 * or fails, a child that did not ask gets nothing, routes are interned (a mask toggled back
 * reuses the earlier route object), only a sole subscriber that can never detach is
 * called directly (without evacuation counting), and the JIT routes lose their direct
 * pointer while compose has JIT work (their gates, dispatch.h) and get it back after. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "common/log.h"
#include "fake_runtime.h"
#include "loader/compose_int.h"

static const struct clrmux_route *route(struct clrmux_mux *m, enum clrmux_route_id id)
{
    return atomic_load(&m->routes[id]);
}

static ICorProfilerCallback11 *direct(struct clrmux_mux *m, enum clrmux_route_id id)
{
    return atomic_load(&m->direct[id]);
}

static HRESULT set_mask(struct clrmux_child *c, DWORD low, DWORD high)
{
    ICorProfilerInfo15 *p = fake_child_info(c);
    return p->lpVtbl->SetEventMask2(p, low, high);
}

static void test_table_rebuilt_on_set_event_mask(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    const struct child_spec spec[] = {{"a", 11, COR_PRF_MONITOR_THREADS, 0, NULL},
                                      {"b", 11, COR_PRF_MONITOR_MODULE_LOADS, 0, NULL}};
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    const struct clrmux_route *r1 = route(m, CLRMUX_ROUTE_ThreadCreated);
    assert_int_equal(r1->n, 1);
    assert_ptr_equal(r1->e[0].child, ca);
    assert_int_equal(route(m, CLRMUX_ROUTE_ModuleLoadFinished)->n, 1);
    assert_ptr_equal(route(m, CLRMUX_ROUTE_ModuleLoadFinished)->e[0].child, cb);
    assert_int_equal(route(m, CLRMUX_ROUTE_GarbageCollectionStarted)->n, 0);
    mux->lpVtbl->ThreadCreated(mux, 1);
    assert_int_equal(FC_CALLS(a, ThreadCreated), 1);
    assert_int_equal(FC_CALLS(b, ThreadCreated), 0);

    /* b asks for threads too: a new table, both receive */
    assert_int_equal(set_mask(cb, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS, 0), S_OK);
    const struct clrmux_route *r2 = route(m, CLRMUX_ROUTE_ThreadCreated);
    assert_ptr_not_equal(r2, r1);
    assert_int_equal(r2->n, 2);
    assert_ptr_equal(r2->e[0].child, ca); /* loader.conf order */
    assert_ptr_equal(r2->e[1].child, cb);
    assert_ptr_equal(route(m, CLRMUX_ROUTE_ThreadDestroyed), r2); /* same subscribers: one object */
    mux->lpVtbl->ThreadCreated(mux, 2);
    assert_int_equal(FC_CALLS(a, ThreadCreated), 2);
    assert_int_equal(FC_CALLS(b, ThreadCreated), 1);

    /* a leaves threads: only b */
    assert_int_equal(set_mask(ca, 0, 0), S_OK);
    const struct clrmux_route *r3 = route(m, CLRMUX_ROUTE_ThreadCreated);
    assert_int_equal(r3->n, 1);
    assert_ptr_equal(r3->e[0].child, cb);
    mux->lpVtbl->ThreadCreated(mux, 3);
    mux->lpVtbl->ThreadDestroyed(mux, 3);
    assert_int_equal(FC_CALLS(a, ThreadCreated), 2);
    assert_int_equal(FC_CALLS(a, ThreadDestroyed), 0);
    assert_int_equal(FC_CALLS(b, ThreadCreated), 2);
    assert_int_equal(FC_CALLS(b, ThreadDestroyed), 1);

    /* toggled back: the interned tables are reused, nothing new is built */
    assert_int_equal(set_mask(ca, COR_PRF_MONITOR_THREADS, 0), S_OK);
    assert_ptr_equal(route(m, CLRMUX_ROUTE_ThreadCreated), r2);
    assert_int_equal(set_mask(ca, 0, 0), S_OK);
    assert_ptr_equal(route(m, CLRMUX_ROUTE_ThreadCreated), r3);
    int pooled = 0;
    for (struct clrmux_route *r = m->route_pool; r; r = r->next)
        pooled++;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(set_mask(ca, i & 1 ? COR_PRF_MONITOR_THREADS : 0, 0), S_OK);
        assert_int_equal(set_mask(cb, COR_PRF_MONITOR_MODULE_LOADS | (i & 2 ? COR_PRF_MONITOR_THREADS : 0), 0), S_OK);
    }
    int after = 0;
    for (struct clrmux_route *r = m->route_pool; r; r = r->next)
        after++;
    assert_true(after <= pooled + 1); /* at most the one set not seen before ({a} alone after b left) */
    mux->lpVtbl->Shutdown(mux);
    fake_mux_free(m);
}

static void test_unsubscribed_child_gets_nothing(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    const struct child_spec spec[] = {{"k0", 11, 0, 0, NULL},
                                      {"k1", 11, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_JIT_COMPILATION, 0, NULL},
                                      {"k2", 11, 0, 0, NULL},
                                      {"k3", 11, 0, 0, NULL}};
    struct fake_child k[4];
    struct clrmux_child *c[4];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 4, k, c);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    for (int id = 0; id < CLRMUX_NROUTES; id++) {
        const struct clrmux_route *r = route(m, (enum clrmux_route_id)id);
        for (uint32_t i = 0; i < r->n; i++)
            if (id != CLRMUX_ROUTE_ProfilerAttachComplete && id != CLRMUX_ROUTE_ReJITError)
                assert_ptr_equal(r->e[i].child, c[1]); /* the only subscriber anywhere */
    }
    for (int i = 0; i < 50; i++) {
        mux->lpVtbl->ThreadCreated(mux, (ThreadID)i);
        BOOL inl = TRUE;
        mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &inl);
        assert_true(inl);
        mux->lpVtbl->JITCompilationStarted(mux, 0x500, TRUE);
        mux->lpVtbl->JITCompilationFinished(mux, 0x500, S_OK, TRUE);
        mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
        mux->lpVtbl->ExceptionThrown(mux, 0x1234);
    }
    assert_int_equal(FC_CALLS(&k[1], ThreadCreated), 50);
    assert_int_equal(FC_CALLS(&k[1], JITInlining), 50);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationStarted), 50);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationFinished), 50);
    assert_int_equal(fake_child_total_calls(&k[1]), 200);
    assert_int_equal(fake_child_total_calls(&k[0]) + fake_child_total_calls(&k[2]) + fake_child_total_calls(&k[3]), 0);
    mux->lpVtbl->Shutdown(mux);
    fake_mux_free(m);
}

static void wait_for(const unsigned long *counter, unsigned long want)
{
    for (int i = 0; i < 2000 && __atomic_load_n(counter, __ATOMIC_ACQUIRE) < want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void test_table_rebuilt_on_detach(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_THREADS | COR_PRF_ENABLE_OBJECT_ALLOCATED, 0, NULL}, /* never detaches */
        {"b", 11, COR_PRF_MONITOR_THREADS, 0, NULL}};
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(route(m, CLRMUX_ROUTE_ThreadCreated)->n, 2);
    assert_null(direct(m, CLRMUX_ROUTE_ThreadCreated));
    assert_int_equal(route(m, CLRMUX_ROUTE_ProfilerAttachComplete)->n, 2);
    mux->lpVtbl->ThreadCreated(mux, 1);
    assert_int_equal(FC_CALLS(b, ThreadCreated), 1);

    ICorProfilerInfo15 *pb = fake_child_info(cb);
    assert_int_equal(pb->lpVtbl->RequestProfilerDetach(pb, 100), S_OK);
    /* the tables are rebuilt before the request returns: b is in no route any more, and a
     * (whose immutable flag means it can never detach) is now called directly */
    const struct clrmux_route *r = route(m, CLRMUX_ROUTE_ThreadCreated);
    assert_int_equal(r->n, 1);
    assert_ptr_equal(r->e[0].child, ca);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_ThreadCreated), ca->cb);
    assert_int_equal(route(m, CLRMUX_ROUTE_ProfilerAttachComplete)->n, 1);
    mux->lpVtbl->ThreadCreated(mux, 2);
    mux->lpVtbl->ProfilerAttachComplete(mux);
    assert_int_equal(FC_CALLS(b, ThreadCreated), 1);
    assert_int_equal(FC_CALLS(b, ProfilerAttachComplete), 0);
    assert_int_equal(FC_CALLS(a, ThreadCreated), 2);
    assert_int_equal(FC_CALLS(a, ProfilerAttachComplete), 1);
    wait_for(&b->counts[FC_ProfilerDetachSucceeded], 1);
    assert_int_equal(FC_CALLS(b, ProfilerDetachSucceeded), 1);
    mux->lpVtbl->Shutdown(mux);
    assert_int_equal(FC_CALLS(b, Shutdown), 0);
    fake_mux_free(m);
}

static void test_direct_only_for_children_that_never_detach(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child imm, old, plain;
    fake_child_init(&imm, 11, COR_PRF_MONITOR_THREADS | COR_PRF_ENABLE_OBJECT_ALLOCATED, 0);
    fake_child_init(&old, 2, COR_PRF_MONITOR_MODULE_LOADS, 0); /* no ICorProfilerCallback3: cannot detach */
    fake_child_init(&plain, 11, COR_PRF_MONITOR_EXCEPTIONS, 0);
    struct clrmux_child *ci = fake_mux_add_child(m, &imm, "imm");
    struct clrmux_child *co = fake_mux_add_child(m, &old, "old");
    fake_mux_add_child(m, &plain, "plain");
    /* during Initialize an immutable flag may still go: not direct yet */
    assert_null(direct(m, CLRMUX_ROUTE_ThreadCreated));
    assert_int_equal(route(m, CLRMUX_ROUTE_ThreadCreated)->n, 1);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_ModuleLoadFinished), co->cb);
    fake_mux_end_init(m);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_ThreadCreated), ci->cb);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_ModuleLoadFinished), co->cb);
    /* a child that may still detach is counted in: no direct route */
    assert_null(direct(m, CLRMUX_ROUTE_ExceptionThrown));
    assert_int_equal(route(m, CLRMUX_ROUTE_ExceptionThrown)->n, 1);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ThreadCreated(mux, 1);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    mux->lpVtbl->ExceptionThrown(mux, 0x1234);
    assert_int_equal(FC_CALLS(&imm, ThreadCreated), 1);
    assert_int_equal(FC_CALLS(&old, ModuleLoadFinished), 1);
    assert_int_equal(FC_CALLS(&plain, ExceptionThrown), 1);
    assert_int_equal(fake_child_total_calls(&imm) + fake_child_total_calls(&old) + fake_child_total_calls(&plain), 3);
    /* two subscribers: never direct */
    assert_int_equal(set_mask(co, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS, 0), S_OK);
    assert_null(direct(m, CLRMUX_ROUTE_ThreadCreated));
    mux->lpVtbl->ThreadCreated(mux, 2);
    assert_int_equal(FC_CALLS(&imm, ThreadCreated), 2);
    assert_int_equal(FC_CALLS(&old, ThreadCreated), 1);
    mux->lpVtbl->Shutdown(mux);
    fake_mux_free(m);
}

/* The JIT routes' gates: while compose has JIT work (a held-back ReJIT request) the four JIT
 * callbacks have no direct pointer, a rebuild does not give it back, the callbacks still
 * reach the child (the long way), and the first one after the work is over reopens it. */
static void test_jit_routes_gated_by_compose_work(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child k;
    /* an immutable flag: it never detaches, its sole routes are direct */
    fake_child_init(&k, 11, COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_CACHE_SEARCHES |
                                COR_PRF_MONITOR_THREADS | COR_PRF_ENABLE_OBJECT_ALLOCATED, 0);
    struct clrmux_child *c = fake_mux_add_child(m, &k, "k");
    fake_mux_end_init(m);
    static const enum clrmux_route_id jit[] = {CLRMUX_ROUTE_JITCompilationStarted, CLRMUX_ROUTE_JITCompilationFinished,
                                                CLRMUX_ROUTE_JITCachedFunctionSearchStarted, CLRMUX_ROUTE_JITInlining};
    for (int i = 0; i < 4; i++)
        assert_ptr_equal(direct(m, jit[i]), c->cb);
    clrmux_compose_count(m, &m->compose->npending, 1); /* as a held-back request does */
    for (int i = 0; i < 4; i++)
        assert_null(direct(m, jit[i]));
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_ThreadCreated), c->cb); /* not gated */
    clrmux_dispatch_update(m);
    for (int i = 0; i < 4; i++)
        assert_null(direct(m, jit[i]));
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    BOOL inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x10, 0x20, &inl);
    mux->lpVtbl->JITCompilationFinished(mux, 0x10, S_OK, TRUE);
    assert_int_equal(FC_CALLS(&k, JITInlining), 1);
    assert_int_equal(FC_CALLS(&k, JITCompilationFinished), 1);
    assert_null(direct(m, CLRMUX_ROUTE_JITInlining));
    /* the work is over: the next callback of each route reopens it */
    clrmux_compose_count(m, &m->compose->npending, -1);
    assert_null(direct(m, CLRMUX_ROUTE_JITInlining));
    mux->lpVtbl->JITInlining(mux, 0x10, 0x20, &inl);
    assert_int_equal(FC_CALLS(&k, JITInlining), 2);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_JITInlining), c->cb);
    mux->lpVtbl->JITCompilationStarted(mux, 0x10, TRUE);
    assert_int_equal(FC_CALLS(&k, JITCompilationStarted), 1);
    for (int i = 0; i < 4; i++)
        assert_ptr_equal(direct(m, jit[i]), c->cb);
    /* an unhandled-exception window closes the started/cache-search routes only */
    atomic_store(&m->windows, 1);
    clrmux_dispatch_gate_closed(m, CLRMUX_GATE_WINDOW);
    assert_null(direct(m, CLRMUX_ROUTE_JITCompilationStarted));
    assert_null(direct(m, CLRMUX_ROUTE_JITCachedFunctionSearchStarted));
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_JITInlining), c->cb);
    atomic_store(&m->windows, 0);
    clrmux_dispatch_update(m);
    assert_ptr_equal(direct(m, CLRMUX_ROUTE_JITCompilationStarted), c->cb);
    mux->lpVtbl->Shutdown(mux);
    fake_mux_free(m);
}

int main(void)
{
    if (!getenv("CLRMUX_TEST_VERBOSE"))
        clrmux_log_set_level(CLRMUX_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rebuilt_on_set_event_mask),
        cmocka_unit_test(test_unsubscribed_child_gets_nothing),
        cmocka_unit_test(test_table_rebuilt_on_detach),
        cmocka_unit_test(test_direct_only_for_children_that_never_detach),
        cmocka_unit_test(test_jit_routes_gated_by_compose_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
