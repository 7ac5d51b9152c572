/* End-to-end unit tests of the mux's Initialize and InitializeForAttach (src/loader/mux.c,
 * children.c): CLRMUX_CONFIG points at a temporary loader.conf listing the fake child
 * libraries of build/fake (CLRMUX_FAKE_DIR); bad children skipped, process filters, the
 * runtime's version, immutable flags by runtime version, routing to library children. */
#include "mux_fixture.h"

static void test_initialize_skips_bad_children(void **state)
{
    (void)state;
    char out_good[PATH_MAX], out_fail[PATH_MAX];
    tmp_path(out_good, sizeof out_good, "good.out");
    tmp_path(out_fail, sizeof out_fail, "failing.out");
    unlink(out_good);
    unlink(out_fail);
    set_env_hex("RECORDER_MASK", "B2000004", COR_PRF_MONITOR_THREADS);
    set_env_str("RECORDER_OUT", "B2000004", out_fail);
    set_env_hex("RECORDER_MASK", "B2000005", COR_PRF_MONITOR_MODULE_LOADS);
    set_env_str("RECORDER_OUT", "B2000005", out_good);
    char conf[8192] = "[loader]\nlog_level = info\n\n";
    conf_child(conf, sizeof conf, "missing", "doesnotexist", "B2000001");
    conf_child(conf, sizeof conf, "noexport", "noexport", "B2000002");
    conf_child(conf, sizeof conf, "old", "v1only", "B2000003");
    conf_child(conf, sizeof conf, "good", "recorder", "B2000005");
    /* last, so that no later child's mask recomputes the union after it is dropped */
    conf_child(conf, sizeof conf, "failing", "failinit", "B2000004");
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    if (hr != S_OK)
        log_dump();
    assert_int_equal(hr, S_OK);

    assert_logged("child 'missing'", "libdoesnotexist" FAKE_EXT, "No such file");
    assert_logged("child 'noexport'", "exports no DllGetClassObject");
    assert_logged("child 'old'", "version 1");
    assert_logged("child 'failing'", "Initialize failed", "0x80004005");
    assert_logged("child 'good'", "loaded", "ICorProfilerCallback11");
    assert_null(log_find("child 'good'", "skipped", (const char *)NULL));

    assert_int_equal(active_children(m), 1);
    struct clrmux_child *good = child_named(m, "good");
    assert_non_null(good);
    assert_int_equal(atomic_load(&good->active), 1);
    assert_int_equal(good->version, 11);
    assert_null(child_named(m, "missing"));
    /* the failed child's THREADS left the runtime's mask */
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
    assert_int_equal(rt.mask_high, 0);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    mux->lpVtbl->ThreadCreated(mux, 0x99);
    mux->lpVtbl->Shutdown(mux);
    const char *out = read_file(out_good);
    assert_has_line(out, "Initialize 1");
    assert_has_line(out, "LoadAsNotificationOnly 1");
    assert_has_line(out, "ModuleLoadFinished 1");
    assert_has_line(out, "Shutdown 1");
    assert_has_line(out, "# SetEventMask2 hr=0x00000000");
    assert_has_line(out, "# GetEventMask2 low=0x00000004 high=0x00000000");
    assert_no_line_prefix(out, "ThreadCreated");
    /* the failed child was never shut down (it writes its file at Shutdown) */
    assert_null(read_file(out_fail));
}

static void test_initialize_without_valid_child_cancels(void **state)
{
    (void)state;
    struct fake_runtime rt;
    HRESULT hr;

    /* children listed, none loads */
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "missing", "doesnotexist", "B3000001");
    conf_child(conf, sizeof conf, "noexport", "noexport", "B3000002");
    conf_child(conf, sizeof conf, "old", "v1only", "B3000003");
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_int_equal(active_children(m), 0);
    assert_logged("no child profiler could be loaded");
    assert_logged("child 'missing'", "skipped");
    assert_int_equal(rt.mask_low, 0);

    /* only a disabled child and an invalid one */
    FMT_OK(conf, "[child off]\npath = %s/librecorder" FAKE_EXT "\nclsid = {B3000004-0000-4000-8000-000000000001}\n"
                                "enabled = false\n\n[child noclsid]\npath = %s/librecorder" FAKE_EXT "\n",
             g_fake_dir, g_fake_dir);
    fake_runtime_init(&rt, 15, 10);
    m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_logged("no enabled child profiler");
    assert_logged("noclsid", "clsid");
    assert_int_equal(rt.set_mask_calls, 0);

    /* no configuration file at all */
    char missing[PATH_MAX];
    FMT_OK(missing, "%s/no-such-loader.conf", g_tmpdir);
    fake_runtime_init(&rt, 15, 10);
    m = run_initialize(NULL, missing, &rt, &hr);
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_logged("no-such-loader.conf");
    assert_int_equal(m->nchildren, 0);
}

static void test_initialize_process_filters(void **state)
{
    (void)state;
    char exe[256];
    self_exe_name(exe, sizeof exe);
    set_env_hex("RECORDER_MASK", "B4000001", COR_PRF_MONITOR_MODULE_LOADS);
    struct fake_runtime rt;
    HRESULT hr;
    char conf[8192];

    snprintf(conf, sizeof conf, "[loader]\nexclude_processes = someotherapp; %s\n\n", exe);
    conf_child(conf, sizeof conf, "good", "recorder", "B4000001");
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_logged(exe, "exclude_processes");
    assert_int_equal(m->nchildren, 0);
    assert_int_equal(rt.set_mask_calls, 0);

    snprintf(conf, sizeof conf, "[loader]\ninclude_processes = someotherapp\n\n");
    conf_child(conf, sizeof conf, "good", "recorder", "B4000001");
    fake_runtime_init(&rt, 15, 10);
    m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_logged(exe, "include_processes");
    assert_int_equal(m->nchildren, 0);

    snprintf(conf, sizeof conf, "[loader]\ninclude_processes = someotherapp, %s\n\n", exe);
    conf_child(conf, sizeof conf, "good", "recorder", "B4000001");
    fake_runtime_init(&rt, 15, 10);
    m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, S_OK);
    assert_int_equal(active_children(m), 1);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
}

static void test_initialize_runtime_info_version(void **state)
{
    (void)state;
    static const IID *const info_iids[] = CLRMUX_INFO_IIDS;
    set_env_hex("RECORDER_MASK", "B5000001", COR_PRF_MONITOR_MODULE_LOADS);
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "good", "recorder", "B5000001");
    struct fake_runtime rt;
    fake_runtime_init(&rt, 12, 10);
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, S_OK);
    assert_int_equal(m->info_version, 12);
    assert_int_equal(m->runtime_major, 10);
    assert_int_equal(m->immutable_low, (DWORD)COR_PRF_MONITOR_IMMUTABLE);
    assert_int_equal(m->immutable_high, (DWORD)COR_PRF_HIGH_MONITOR_IMMUTABLE);
    struct clrmux_child *c = child_named(m, "good");
    assert_non_null(c);
    ICorProfilerInfo15 *px = fake_child_info(c);
    void *q = NULL;
    assert_int_equal(px->lpVtbl->QueryInterface(px, info_iids[12], &q), S_OK);
    assert_ptr_equal(q, px);
    q = (void *)1;
    assert_int_equal(px->lpVtbl->QueryInterface(px, info_iids[13], &q), E_NOINTERFACE);
    assert_null(q);
    assert_logged("ICorProfilerInfo12");
}

/* After a real Initialize, child 0 changes its mask with DISABLE_INLINING: refused on
 * .NET 8 (immutable there), accepted on .NET 10. */
static void test_initialize_immutable_set_follows_runtime_version(void **state)
{
    (void)state;
    const int majors[2] = {8, 10};
    for (int i = 0; i < 2; i++) {
        char tag[16];
        FMT_OK(tag, "B600000%d", i);
        set_env_hex("RECORDER_MASK", tag, COR_PRF_MONITOR_MODULE_LOADS);
        char conf[8192] = "";
        conf_child(conf, sizeof conf, "good", "recorder", tag);
        struct fake_runtime rt;
        fake_runtime_init(&rt, 15, majors[i]);
        HRESULT hr;
        struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
        assert_int_equal(hr, S_OK);
        assert_int_equal(m->runtime_major, majors[i]);
        assert_int_equal(m->info_version, 15);
        assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
        struct clrmux_child *c = child_named(m, "good");
        assert_non_null(c);
        const DWORD want = COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_DISABLE_INLINING;
        HRESULT h1 = set_mask2(c, want, 0);
        HRESULT h2 = set_mask2(c, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_DISABLE_OPTIMIZATIONS, 0);
        DWORD lo, hi;
        get_mask2(c, &lo, &hi);
        if (majors[i] < 10) {
            assert_int_equal(h1, E_FAIL);
            assert_int_equal(h2, E_FAIL);
            assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS);
            assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
            assert_int_equal(m->immutable_low, CLRMUX_PRF_MONITOR_IMMUTABLE_BEFORE_NET10);
        } else {
            assert_int_equal(h1, S_OK);
            assert_int_equal(h2, S_OK);
            assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_DISABLE_OPTIMIZATIONS);
            assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_DISABLE_OPTIMIZATIONS);
            assert_int_equal(m->immutable_low, (DWORD)COR_PRF_MONITOR_IMMUTABLE);
        }
        /* both: ENABLE_OBJECT_ALLOCATED is immutable */
        assert_int_equal(set_mask2(c, lo | COR_PRF_ENABLE_OBJECT_ALLOCATED, 0), E_FAIL);
        /* a mutable change still works */
        assert_int_equal(set_mask2(c, lo | COR_PRF_MONITOR_THREADS, 0), S_OK);
        assert_true(rt.mask_low & COR_PRF_MONITOR_THREADS);
    }
}

/* A runtime without ICorProfilerCallback11 (.NET Core 3.1: ICorProfilerInfo11 at most,
 * GetRuntimeInformation says 4.0.30319) never calls LoadAsNotificationOnly: clrmux does not
 * ask its children either, and still loads them at their highest callback version. */
static void test_initialize_old_runtime_no_notification_question(void **state)
{
    (void)state;
    char out[PATH_MAX];
    tmp_path(out, sizeof out, "old-runtime.out");
    unlink(out);
    set_env_hex("RECORDER_MASK", "B8000001", COR_PRF_MONITOR_MODULE_LOADS);
    set_env_str("RECORDER_OUT", "B8000001", out);
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "rec", "recorder", "B8000001");
    struct fake_runtime rt;
    fake_runtime_init(&rt, 11, 4);
    rt.no_callback11 = 1;
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, S_OK);
    assert_int_equal(m->runtime_asked_notification_only, 0);
    struct clrmux_child *c = child_named(m, "rec");
    assert_non_null(c);
    assert_int_equal(c->version, 11);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->Shutdown(mux);
    const char *text = read_file(out);
    assert_has_line(text, "Initialize 1");
    assert_no_line_prefix(text, "LoadAsNotificationOnly");
}

/* The latemask library changes its mask in its first ModuleLoadFinished: an immutable
 * change (refused) and a mutable one (accepted); it writes both HRESULTs at Shutdown. */
static void test_initialize_late_mask_change(void **state)
{
    (void)state;
    char out[PATH_MAX];
    tmp_path(out, sizeof out, "late.out");
    unlink(out);
    /* an immutable flag (FUNCTION_ARGS) set during Initialize is fine */
    set_env_hex("RECORDER_MASK", "B7000001", COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_FUNCTION_ARGS);
    set_env_str("RECORDER_OUT", "B7000001", out);
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "late", "latemask", "B7000001");
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_FUNCTION_ARGS);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_FUNCTION_ARGS | COR_PRF_MONITOR_THREADS);
    mux->lpVtbl->ThreadCreated(mux, 0x99); /* now the child's */
    mux->lpVtbl->Shutdown(mux);
    const char *text = read_file(out);
    assert_has_line(text, "# SetEventMask2 hr=0x00000000");
    assert_has_line(text, "# GetEventMask2 low=0x02000004 high=0x00000000");
    assert_has_line(text, "# late immutable change hr=0x80004005"); /* E_FAIL, as alone */
    assert_has_line(text, "# late disable-inlining change hr=0x00000000"); /* mutable on 10 */
    assert_has_line(text, "# late mutable change hr=0x00000000");
    assert_has_line(text, "ThreadCreated 1");
    assert_logged("child 'late'", "immutable");
}

/* InitializeForAttach: the client data names the config; children with ICorProfilerCallback3
 * get InitializeForAttach (not Initialize), a version-2 child is skipped with a log line, and
 * ProfilerAttachComplete reaches the attached children. */
static void test_initialize_for_attach(void **state)
{
    (void)state;
    if (!g_fake_dir_ok)
        fail_msg("fake child libraries not found (CLRMUX_FAKE_DIR or build/fake); run `make all` first");
    char out_a[PATH_MAX], path[PATH_MAX];
    tmp_path(out_a, sizeof out_a, "attach-a.out");
    set_env_hex("RECORDER_MASK", "B9000001", COR_PRF_MONITOR_MODULE_LOADS);
    set_env_str("RECORDER_OUT", "B9000001", out_a);
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "a", "recorder", "B9000001");
    conf_child(conf, sizeof conf, "old", "v2only", "B9000002");
    tmp_path(path, sizeof path, "attach.conf");
    write_file(path, conf);
    IClassFactory *cf = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, (void **)&cf), S_OK);
    ICorProfilerCallback11 *cb = NULL;
    assert_int_equal(cf->lpVtbl->CreateInstance(cf, NULL, &IID_ICorProfilerCallback2, (void **)&cb), S_OK);
    cf->lpVtbl->Release(cf);
    struct clrmux_mux *m = mux_of(cb);
    if (g_nkept < 64)
        g_kept[g_nkept++] = m;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    log_clear();
    /* the client data: the path without its NUL, as a tool may send it */
    assert_int_equal(cb->lpVtbl->InitializeForAttach(cb, fake_runtime_unknown(&rt), path, (UINT)strlen(path)), S_OK);
    assert_logged("attaching", path);
    assert_logged("child 'old'", "cannot attach");
    assert_int_equal(active_children(m), 1);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
    cb->lpVtbl->ProfilerAttachComplete(cb);
    cb->lpVtbl->Shutdown(cb);
    const char *t = read_file(out_a);
    assert_non_null(t);
    assert_non_null(strstr(t, "InitializeForAttach 1\n"));
    assert_non_null(strstr(t, "ProfilerAttachComplete 1\n"));
    assert_null(strstr(t, "\nInitialize 1\n"));
}

/* Several real children: routing by each one's own mask, version gating of a
 * Callback3-only library, and the JITInlining veto of one of them. */
static void test_initialize_routes_to_library_children(void **state)
{
    (void)state;
    char out_a[PATH_MAX], out_b[PATH_MAX], out_c[PATH_MAX];
    tmp_path(out_a, sizeof out_a, "a.out");
    tmp_path(out_b, sizeof out_b, "b.out");
    tmp_path(out_c, sizeof out_c, "c.out");
    set_env_hex("RECORDER_MASK", "B8000001", COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_JIT_COMPILATION);
    set_env_str("RECORDER_NO_INLINE", "B8000001", "1");
    set_env_str("RECORDER_OUT", "B8000001", out_a);
    set_env_hex("RECORDER_MASK", "B8000002", COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_JIT_COMPILATION);
    set_env_str("RECORDER_OUT", "B8000002", out_b);
    set_env_hex("RECORDER_MASK", "B8000003", COR_PRF_MONITOR_JIT_COMPILATION);
    set_env_str("RECORDER_OUT", "B8000003", out_c);
    char conf[8192] = "";
    conf_child(conf, sizeof conf, "a", "recorder", "B8000001");
    conf_child(conf, sizeof conf, "b", "recorder", "B8000002");
    conf_child(conf, sizeof conf, "c", "cb3only", "B8000003");
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    HRESULT hr;
    struct clrmux_mux *m = run_initialize(conf, NULL, &rt, &hr);
    assert_int_equal(hr, S_OK);
    assert_int_equal(active_children(m), 3);
    assert_int_equal(child_named(m, "c")->version, 3);
    assert_logged("child 'c'", "ICorProfilerCallback3");
    assert_int_equal(rt.mask_low,
                     COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_JIT_COMPILATION);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    mux->lpVtbl->ThreadCreated(mux, 0x99);
    mux->lpVtbl->JITCompilationStarted(mux, 0x500, TRUE);
    static const BYTE il[2] = {0x2A, 0};
    mux->lpVtbl->DynamicMethodJITCompilationStarted(mux, 0x501, TRUE, il, sizeof il);
    BOOL inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x502, &inl);
    assert_int_equal(inl, FALSE); /* a vetoes */
    mux->lpVtbl->Shutdown(mux);

    const char *t = read_file(out_a);
    assert_has_line(t, "ModuleLoadFinished 1");
    assert_has_line(t, "JITCompilationStarted 1");
    assert_has_line(t, "DynamicMethodJITCompilationStarted 1");
    assert_has_line(t, "JITInlining 1");
    assert_no_line_prefix(t, "ThreadCreated");
    t = read_file(out_b);
    assert_has_line(t, "ThreadCreated 1");
    assert_has_line(t, "JITInlining 1");
    assert_no_line_prefix(t, "ModuleLoadFinished");
    t = read_file(out_c);
    assert_has_line(t, "JITCompilationStarted 1");
    assert_has_line(t, "JITInlining 1");
    assert_has_line(t, "Shutdown 1");
    assert_no_line_prefix(t, "DynamicMethodJITCompilationStarted");
    assert_no_line_prefix(t, "LoadAsNotificationOnly");
    assert_no_line_prefix(t, "ModuleLoadFinished");
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initialize_skips_bad_children),
        cmocka_unit_test(test_initialize_without_valid_child_cancels),
        cmocka_unit_test(test_initialize_process_filters),
        cmocka_unit_test(test_initialize_runtime_info_version),
        cmocka_unit_test(test_initialize_immutable_set_follows_runtime_version),
        cmocka_unit_test(test_initialize_late_mask_change),
        cmocka_unit_test(test_initialize_old_runtime_no_notification_question),
        cmocka_unit_test(test_initialize_routes_to_library_children),
        cmocka_unit_test(test_initialize_for_attach),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
