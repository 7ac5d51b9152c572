/* Unit tests for enter/leave/tailcall hooks and FunctionID mappers under the mux
 * (src/loader/elt.c): every child's own hooks and client data, the fast path, one hooking
 * child set directly on the runtime, the runtime's checks, failed children. */
#include "mux_fixture.h"
#include "elt_jit_call.h"

/* ---- enter/leave hooks and function-ID mappers ------------------------------------- */

/* What the children's hooks saw: per child, calls and the last client data. */
static struct { int enter, leave, tail, enter2, enter1; UINT_PTR last; COR_PRF_ELT_INFO info; } seen[3];
static UINT_PTR STDMETHODCALLTYPE map_a(FunctionID id, BOOL *hook) { *hook = TRUE; return id + 0xA00000; }
static UINT_PTR STDMETHODCALLTYPE map_b(FunctionID id, void *data, BOOL *hook)
{
    *hook = id != 0x7777; /* b does not hook 0x7777 */
    return (UINT_PTR)data + id;
}
static void STDMETHODCALLTYPE leave3_a(FunctionIDOrClientID id) { seen[0].leave++, seen[0].last = id.clientID; }
static void STDMETHODCALLTYPE tail3_a(FunctionIDOrClientID id) { seen[0].tail++, seen[0].last = id.clientID; }
static void STDMETHODCALLTYPE enter3_a(FunctionIDOrClientID id) { seen[0].enter++, seen[0].last = id.clientID; }
static void STDMETHODCALLTYPE enter3i_b(FunctionIDOrClientID id, COR_PRF_ELT_INFO i) { seen[1].enter++, seen[1].last = id.clientID, seen[1].info = i; }
static void STDMETHODCALLTYPE leave3i_b(FunctionIDOrClientID id, COR_PRF_ELT_INFO i) { seen[1].leave++, seen[1].last = id.clientID, seen[1].info = i; }
static void STDMETHODCALLTYPE tail3i_b(FunctionIDOrClientID id, COR_PRF_ELT_INFO i) { seen[1].tail++, seen[1].last = id.clientID, seen[1].info = i; }
static void STDMETHODCALLTYPE enter2_c(FunctionID f, UINT_PTR cd, COR_PRF_FRAME_INFO fr, COR_PRF_FUNCTION_ARGUMENT_INFO *a)
{
    (void)f, (void)fr, (void)a;
    seen[2].enter2++, seen[2].last = cd;
}
static void STDMETHODCALLTYPE enter1_c(FunctionID f) { seen[2].enter1++, seen[2].last = f; }
static void STDMETHODCALLTYPE noop3(FunctionIDOrClientID id) { (void)id; }
static void STDMETHODCALLTYPE noop3i(FunctionIDOrClientID id, COR_PRF_ELT_INFO i) { (void)id, (void)i; }

/* the fast-path dispatchers the stubs in elt_amd64.S call (leave: no register games) */
void clrmux_elt_fast_leave(UINT_PTR id, UINT_PTR caller_sp);

static HRESULT set_hooks_a(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    assert_int_equal(info->lpVtbl->SetEnterLeaveFunctionHooks3(info, enter3_a, leave3_a, tail3_a), S_OK);
    assert_int_equal(info->lpVtbl->SetFunctionIDMapper(info, map_a), S_OK);
    return S_OK;
}
static HRESULT set_hooks_b(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    assert_int_equal(info->lpVtbl->SetEnterLeaveFunctionHooks3WithInfo(info, enter3i_b, leave3i_b, tail3i_b), S_OK);
    assert_int_equal(info->lpVtbl->SetFunctionIDMapper2(info, map_b, (void *)0xB000000), S_OK);
    return S_OK;
}
static HRESULT set_hooks_c(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    assert_int_equal(info->lpVtbl->SetEnterLeaveFunctionHooks2(info, enter2_c, NULL, NULL), S_OK);
    /* an older generation after a newer one is a no-op, as the runtime does */
    assert_int_equal(info->lpVtbl->SetEnterLeaveFunctionHooks(info, enter1_c, NULL, NULL), S_OK);
    return S_OK;
}

/* Every child may set hooks and a mapper; clrmux installs its own once, calls every mapper
 * and gives each child's hooks its own client data, only for the functions it hooked. */
static void test_elt_every_child_gets_its_hooks(void **state)
{
    (void)state;
    memset(seen, 0, sizeof seen);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    const struct child_spec spec[] = {
        {"alpha", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, set_hooks_a},
        {"beta", 11, COR_PRF_MONITOR_ENTERLEAVE | COR_PRF_ENABLE_FUNCTION_ARGS | COR_PRF_ENABLE_FRAME_INFO, 0, set_hooks_b},
        {"gamma", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, set_hooks_c},
    };
    struct fake_child fc[3];
    log_clear();
    struct clrmux_mux *m = mux_with_children(&rt, spec, 3, fc, NULL);
    /* once, at the end of Initialize (test_elt_hooks_checked_like_the_runtime: not before) */
    assert_int_equal(rt.elt_calls, 1);
    assert_int_equal(rt.mapper_calls, 1);
    assert_logged("enter/leave hooks for 3", "WithInfo");
    struct clrmux_elt_installed in;
    clrmux_elt_installed(m, &in);
    assert_false(in.fast); /* beta's slow-path flags are in the union */

    BOOL hook = FALSE;
    UINT_PTR id = in.mapper(0x1000, in.mapper_data, &hook);
    assert_true(hook);
    FunctionIDOrClientID u = {.clientID = id};
    ((FunctionEnter3WithInfo *)in.enter)(u, (COR_PRF_ELT_INFO)0x55);
    assert_int_equal(seen[0].enter, 1);
    assert_int_equal(seen[0].last, 0x1000 + 0xA00000);
    assert_int_equal(seen[1].enter, 1);
    assert_int_equal(seen[1].last, 0xB000000 + 0x1000);
    assert_int_equal(seen[1].info, 0x55); /* the runtime's COR_PRF_ELT_INFO, passed through */
    assert_int_equal(seen[2].enter2, 1);
    assert_int_equal(seen[2].enter1, 0);
    assert_int_equal(seen[2].last, 0x1000); /* no mapper: the FunctionID */
    ((FunctionLeave3WithInfo *)in.leave)(u, 0);
    ((FunctionTailcall3WithInfo *)in.tailcall)(u, 0);
    assert_int_equal(seen[0].leave, 1);
    assert_int_equal(seen[0].tail, 1);
    assert_int_equal(seen[1].leave, 1);
    assert_int_equal(seen[1].tail, 1);

    /* beta does not hook 0x7777: only alpha and gamma are called */
    UINT_PTR id2 = in.mapper(0x7777, in.mapper_data, &hook);
    assert_true(hook);
    u.clientID = id2;
    ((FunctionEnter3WithInfo *)in.enter)(u, 0);
    assert_int_equal(seen[0].enter, 2);
    assert_int_equal(seen[1].enter, 1);
    assert_int_equal(seen[2].enter2, 2);

    /* a child that turns COR_PRF_MONITOR_ENTERLEAVE off is no longer called */
    struct clrmux_child *ca = &m->children[0];
    assert_int_equal(clrmux_set_child_mask(m, ca, 0, 0), S_OK);
    ((FunctionEnter3WithInfo *)in.enter)(u, 0);
    assert_int_equal(seen[0].enter, 2);
    assert_int_equal(seen[2].enter2, 3);
    fake_mux_free(m);
}

/* Without slow-path flags clrmux installs the fast-path stubs. */
static void test_elt_fast_path(void **state)
{
    (void)state;
    memset(seen, 0, sizeof seen);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    const struct child_spec spec[] = {
        {"alpha", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, set_hooks_a},
        {"gamma", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, set_hooks_c},
        {"plain", 11, COR_PRF_MONITOR_MODULE_LOADS, 0, NULL},
    };
    struct fake_child fc[3];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 3, fc, NULL);
    struct clrmux_elt_installed in;
    clrmux_elt_installed(m, &in);
    assert_true(in.fast);
    BOOL hook = FALSE;
    UINT_PTR id = in.mapper(0x2000, in.mapper_data, &hook);
    assert_true(hook);
    clrmux_elt_fast_leave(id, 0);
    assert_int_equal(seen[0].leave, 1);
    assert_int_equal(seen[0].last, 0x2000 + 0xA00000);
    /* the stubs the runtime got, called as JIT-compiled code calls them: each child's hook is
     * reached with its client data, and every register the JIT keeps live survives */
    seen[0].last = 0;
    assert_int_equal(elt_jit_call(in.enter, id), 0);
    assert_int_equal(seen[0].enter, 1);
    assert_int_equal(seen[0].last, 0x2000 + 0xA00000);
    assert_int_equal(seen[2].enter2, 1); /* gamma's FunctionEnter2: the FunctionID, no mapper */
    assert_int_equal(seen[2].last, 0x2000);
    assert_int_equal(elt_jit_call(in.leave, id), 0);
    assert_int_equal(seen[0].leave, 2);
    assert_int_equal(elt_jit_call(in.tailcall, id), 0);
    assert_int_equal(seen[0].tail, 1);
    fake_mux_free(m);
}

/* One hooking child: its own mapper and hooks go to the runtime unchanged. */
static void test_elt_one_child_direct(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    const struct child_spec spec[] = {
        {"alpha", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, set_hooks_a},
        {"plain", 11, COR_PRF_MONITOR_MODULE_LOADS, 0, NULL},
    };
    struct fake_child fc[2];
    log_clear();
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, NULL);
    struct clrmux_elt_installed in;
    clrmux_elt_installed(m, &in);
    assert_true(in.direct);
    assert_int_equal(rt.elt_calls, 1);
    assert_int_equal(rt.mapper_calls, 1);
    assert_logged("enter/leave hooks for 1 child", "own hooks");
    fake_mux_free(m);
}

/* The proxy answers as the runtime would for the child's own flags and timing. */
static void test_elt_hooks_checked_like_the_runtime(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_ENTERLEAVE | COR_PRF_ENABLE_FUNCTION_RETVAL, 0);
    ICorProfilerInfo15 *pa = fake_child_info(fake_mux_add_child(m, &a, "alpha"));
    ICorProfilerInfo15 *pb = fake_child_info(fake_mux_add_child(m, &b, "beta"));
    assert_int_equal(pa->lpVtbl->SetEnterLeaveFunctionHooks3(pa, NULL, NULL, NULL), E_INVALIDARG);
    assert_int_equal(pa->lpVtbl->SetEnterLeaveFunctionHooks3WithInfo(pa, noop3i, noop3i, noop3i),
                     CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(pb->lpVtbl->SetEnterLeaveFunctionHooks3(pb, noop3, noop3, noop3), CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(pa->lpVtbl->SetEnterLeaveFunctionHooks3(pa, noop3, noop3, noop3), S_OK);
    assert_int_equal(pb->lpVtbl->SetEnterLeaveFunctionHooks3WithInfo(pb, noop3i, noop3i, noop3i), S_OK);
    /* Get*3Info for a child's own flags: alpha asked for none, beta for the return value only */
    COR_PRF_FRAME_INFO fr = 0;
    ULONG cb = 0;
    COR_PRF_FUNCTION_ARGUMENT_RANGE rv;
    assert_int_equal(pa->lpVtbl->GetFunctionEnter3Info(pa, 1, 0, &fr, &cb, NULL), CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(pa->lpVtbl->GetFunctionLeave3Info(pa, 1, 0, &fr, &rv), CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(pb->lpVtbl->GetFunctionEnter3Info(pb, 1, 0, &fr, &cb, NULL), CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(pb->lpVtbl->GetFunctionTailcall3Info(pb, 1, 0, &fr), CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_int_equal(rt.elt_calls, 0); /* nothing reaches the runtime before the end of Initialize */
    fake_mux_end_init(m);
    /* after Initialize the runtime refuses hooks */
    assert_int_equal(pa->lpVtbl->SetEnterLeaveFunctionHooks3(pa, noop3, noop3, noop3), CORPROF_E_CALL_ONLY_FROM_INIT);
    assert_int_equal(rt.elt_calls, 1);
    /* nor after an attach */
    m->attaching = 1;
    assert_int_equal(pa->lpVtbl->SetEnterLeaveFunctionHooks3(pa, noop3, noop3, noop3),
                     CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER);
    fake_mux_free(m);
}

/* A child whose Initialize fails after setting hooks is not hooked. */
static void test_elt_hooks_of_failed_child_are_dropped(void **state)
{
    (void)state;
    memset(seen, 0, sizeof seen);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a;
    fake_child_init(&a, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    a.init_hook = set_hooks_a;
    a.init_hr = E_FAIL;
    fake_mux_add_child(m, &a, "alpha");
    fake_mux_end_init(m);
    assert_int_equal(rt.elt_calls, 0);
    assert_int_equal(rt.mapper_calls, 0);
    fake_mux_free(m);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elt_every_child_gets_its_hooks),
        cmocka_unit_test(test_elt_fast_path),
        cmocka_unit_test(test_elt_one_child_direct),
        cmocka_unit_test(test_elt_hooks_checked_like_the_runtime),
        cmocka_unit_test(test_elt_hooks_of_failed_child_are_dropped),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
