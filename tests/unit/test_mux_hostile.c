/* Children that cannot be loaded, each skipped with one logged reason while a good child
 * beside them loads (src/loader/children.c), on every platform (Linux; Windows under Wine,
 * where these are what the POSIX ownership and mode checks of test_loader_safety.c leave to
 * test): a file that is no library, a factory that fails CreateInstance, a DllGetClassObject
 * that answers S_OK without a factory, a factory whose CreateInstance answers S_OK without an
 * object, clrmux's own library listed as a child (a loader loop). */
#include "mux_fixture.h"

static void test_bad_children_skipped_good_one_loads(void **state)
{
    (void)state;
    char garbage[PATH_MAX], conf[8192];
    tmp_path(garbage, sizeof garbage, "libgarbage" FAKE_EXT);
    write_file(garbage, "this is not a shared library\n");
    FMT_OK(conf, "[child garbage]\npath = %s\nclsid = {C0000001-0000-4000-8000-000000000001}\n\n"
                 "[child self]\npath = %s/../libclrmux" FAKE_EXT "\nclsid = " CLRMUX_CLSID_STRING "\n\n",
           garbage, g_fake_dir);
    conf_child(conf, sizeof conf, "nofactory", "hostile", "C1000001");
    conf_child(conf, sizeof conf, "noobject", "hostile", "C1000002");
    conf_child(conf, sizeof conf, "noclass", "hostile", "C1000009");
    conf_child(conf, sizeof conf, "nocreate", "failcreate", "C2000001");
    conf_child(conf, sizeof conf, "good", "recorder", "C3000001");
    set_env_hex("RECORDER_MASK", "C3000001", COR_PRF_MONITOR_MODULE_LOADS);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    clrmux_the_mux = NULL;
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    if (hr != S_OK)
        log_dump();
    assert_int_equal(hr, S_OK);
    assert_logged("child 'garbage'", "cannot load", "libgarbage" FAKE_EXT, "child skipped");
    assert_logged("child 'self'", "is a build of clrmux", "loader loop", "child skipped");
    assert_logged("child 'nofactory'", "DllGetClassObject({C1000001-", "HRESULT S_OK", "child skipped");
    assert_logged("child 'noobject'", "CreateInstance(IID_ICorProfilerCallback2) failed", "child skipped");
    assert_logged("child 'noclass'", "DllGetClassObject({C1000009-", "0x80040111", "child skipped");
    assert_logged("child 'nocreate'", "CreateInstance(IID_ICorProfilerCallback2) failed", "E_OUTOFMEMORY",
                  "child skipped");
    assert_logged("child 'good'", "loaded");
    assert_int_equal(active_children(m), 1);
    assert_non_null(child_named(m, "good"));
    assert_int_equal(atomic_load(&child_named(m, "good")->active), 1);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS, 0);
    assert_ptr_equal(clrmux_the_mux, m); /* the loop child did not take over */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_children_skipped_good_one_loads),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
