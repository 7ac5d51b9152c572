/* Unit tests for clrmux's COM exports (src/entry/exports.c: DllGetClassObject, the class
 * factory, the mux's QueryInterface) and the per-child ICorProfilerInfo proxy's
 * QueryInterface and forwarding (src/loader/proxy.c), with the fake runtime of
 * tests/unit/fake_runtime.h. */
#include "mux_fixture.h"

/* ---- COM exports ------------------------------------------------------------------- */

static void test_dllgetclassobject(void **state)
{
    (void)state;
    IClassFactory *cf = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, (void **)&cf), S_OK);
    assert_non_null(cf);
    void *unk = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IUnknown, &unk), S_OK);
    assert_ptr_equal(unk, cf);

    CLSID other = k_clrmux_clsid;
    other.Data4[7] ^= 1;
    void *p = (void *)1;
    assert_int_equal(DllGetClassObject(&other, &IID_IClassFactory, &p), CLASS_E_CLASSNOTAVAILABLE);
    assert_null(p);
    p = (void *)1;
    assert_int_equal(DllGetClassObject(&IID_ICorProfilerCallback2, &IID_IClassFactory, &p), CLASS_E_CLASSNOTAVAILABLE);
    assert_null(p);
    p = (void *)1;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_ICorProfilerCallback2, &p), E_NOINTERFACE);
    assert_null(p);
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, NULL), E_POINTER);
    assert_int_equal(DllCanUnloadNow(), S_FALSE);
}

static void test_create_instance_and_query_interface(void **state)
{
    (void)state;
    static const IID *const cb_iids[] = CLRMUX_CALLBACK_IIDS;
    IClassFactory *cf = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, (void **)&cf), S_OK);

    IUnknown outer = {0};
    void *p = (void *)1;
    assert_int_equal(cf->lpVtbl->CreateInstance(cf, &outer, &IID_ICorProfilerCallback2, &p), CLASS_E_NOAGGREGATION);
    assert_null(p);

    ICorProfilerCallback2 *cb2 = NULL;
    assert_int_equal(cf->lpVtbl->CreateInstance(cf, NULL, &IID_ICorProfilerCallback2, (void **)&cb2), S_OK);
    assert_non_null(cb2);
    struct clrmux_mux *m = mux_of((ICorProfilerCallback11 *)cb2);
    assert_ptr_equal(clrmux_the_mux, m);

    void *q = NULL;
    assert_int_equal(cb2->lpVtbl->QueryInterface(cb2, &IID_IUnknown, &q), S_OK);
    assert_ptr_equal(q, cb2);
    for (int v = 1; v <= 11; v++) {
        q = NULL;
        assert_int_equal(cb2->lpVtbl->QueryInterface(cb2, cb_iids[v], &q), S_OK);
        assert_ptr_equal(q, cb2);
    }
    const IID *const refused[] = {&IID_ICorProfilerInfo, &IID_ICorProfilerInfo5, &IID_ICorProfilerInfo15,
                                  &IID_IClassFactory};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        q = (void *)1;
        assert_int_equal(cb2->lpVtbl->QueryInterface(cb2, refused[i], &q), E_NOINTERFACE);
        assert_null(q);
    }
    assert_int_equal(cb2->lpVtbl->QueryInterface(cb2, &IID_IUnknown, NULL), E_POINTER);
    /* clrmux is a full profiler, never notification-only */
    BOOL notif = TRUE;
    assert_int_equal(m->iface.lpVtbl->LoadAsNotificationOnly(&m->iface, &notif), S_OK);
    assert_int_equal(notif, FALSE);
    /* attach with a client data naming no readable config: the application runs unprofiled */
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    static const char nowhere[] = "/nonexistent/clrmux/loader.conf";
    assert_int_equal(m->iface.lpVtbl->InitializeForAttach(&m->iface, fake_runtime_unknown(&rt), (void *)nowhere,
                                                          (UINT)strlen(nowhere)),
                     CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    cf->lpVtbl->Release(cf);
    fake_mux_free(m);
}

/* ---- proxy ------------------------------------------------------------------------- */

static void test_proxy_query_interface_follows_runtime(void **state)
{
    (void)state;
    static const IID *const info_iids[] = CLRMUX_INFO_IIDS;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 12, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    assert_int_equal(m->info_version, 12);
    struct fake_child a;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    struct clrmux_child *c = fake_mux_add_child(m, &a, "a");
    ICorProfilerInfo15 *px = fake_child_info(c);
    /* the child got its proxy, not the runtime */
    assert_ptr_equal(a.info, px);
    assert_ptr_not_equal(a.info, &rt.iface);

    void *q = NULL;
    assert_int_equal(px->lpVtbl->QueryInterface(px, &IID_IUnknown, &q), S_OK);
    assert_ptr_equal(q, px);
    for (int v = 1; v <= 12; v++) {
        q = NULL;
        assert_int_equal(px->lpVtbl->QueryInterface(px, info_iids[v], &q), S_OK);
        assert_ptr_equal(q, px);
    }
    for (int v = 13; v <= 15; v++) {
        q = (void *)1;
        assert_int_equal(px->lpVtbl->QueryInterface(px, info_iids[v], &q), E_NOINTERFACE);
        assert_null(q);
    }
    q = (void *)1;
    assert_int_equal(px->lpVtbl->QueryInterface(px, &IID_ICorProfilerCallback, &q), E_NOINTERFACE);
    assert_null(q);

    /* everything else is forwarded to the runtime */
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    assert_int_equal(px->lpVtbl->GetFunctionInfo(px, 0x500, &cls, &mod, &tok), S_OK);
    assert_int_equal(cls, 0xC1A55);
    assert_int_equal(mod, 0x7000);
    assert_int_equal(tok, 0x06000001);
    assert_int_equal(px->lpVtbl->GetFunctionInfo(px, 0x501, &cls, &mod, &tok), E_INVALIDARG);
    assert_int_equal(px->lpVtbl->ForceGC(px), E_NOTIMPL);
    fake_mux_free(m);

    /* a runtime with every version: the proxy answers all 15 */
    fake_runtime_init(&rt, 15, 10);
    m = fake_mux_new(&rt);
    fake_child_init(&a, 11, 0, 0);
    c = fake_mux_add_child(m, &a, "a");
    px = fake_child_info(c);
    q = NULL;
    assert_int_equal(px->lpVtbl->QueryInterface(px, &IID_ICorProfilerInfo15, &q), S_OK);
    assert_ptr_equal(q, px);
    fake_mux_free(m);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dllgetclassobject),
        cmocka_unit_test(test_create_instance_and_query_interface),
        cmocka_unit_test(test_proxy_query_interface_follows_runtime),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
