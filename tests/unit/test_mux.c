/* Unit tests for the mux (src/loader/mux.c), the per-child ICorProfilerInfo proxy
 * (src/loader/proxy.c), child loading (src/loader/children.c) and the COM exports
 * (src/loader/exports.c).
 *
 * Two kinds of tests:
 *   - in-process: a fake runtime and fake children (tests/unit/fake_runtime.h) wired into a
 *     mux by hand, as mux_Initialize / clrmux_load_children do;
 *   - end to end: the mux's real Initialize with CLRMUX_CONFIG pointing at a temporary
 *     loader.conf that lists the fake child libraries of build/fake (CLRMUX_FAKE_DIR). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clrmux/clrmux.h"
#include "common/log.h"
#include "common/utf16.h"
#include "fake_runtime.h"
#include "loader/mux.h"

/* The fake libraries allocate their objects with calloc and never free them (a profiler
 * is never unloaded); the v1-only one is dropped by the loader after CreateInstance. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libv1only.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }

/* clrmux's CLSID spelled out here, so that a slip in the header is caught. */
static const CLSID k_clrmux_clsid = {0xEE712634, 0x5BBB, 0x4C28, {0x8E, 0x6A, 0x45, 0x18, 0x0A, 0x97, 0xAD, 0x0B}};

/* ---- fixtures ---------------------------------------------------------------------- */

static char g_tmpdir[PATH_MAX];
static char g_fake_dir[PATH_MAX];
static int g_fake_dir_ok;
static char g_files[64][PATH_MAX];
static int g_nfiles;

/* Muxes that loaded real libraries: kept reachable (a mux is never freed in production;
 * the children's objects hang off it). */
static struct clrmux_mux *g_kept[64];
static int g_nkept;

/* Captured log lines (message part, without the "clrmux[pid] time LEVEL" prefix). */
#define MAX_LOG 512
static char g_log[MAX_LOG][600];
static int g_log_level[MAX_LOG];
static int g_nlog;

static void log_sink(int level, const char *line, void *ctx)
{
    (void)ctx;
    if (g_nlog < MAX_LOG) {
        snprintf(g_log[g_nlog], sizeof g_log[0], "%s", line);
        g_log_level[g_nlog] = level;
        g_nlog++;
    }
}

static void log_clear(void) { g_nlog = 0; }

/* A captured line containing every one of the NULL-terminated substrings. */
static const char *log_find(const char *first, ...)
{
    for (int i = 0; i < g_nlog; i++) {
        int ok = strstr(g_log[i], first) != NULL;
        va_list ap;
        va_start(ap, first);
        for (const char *s = va_arg(ap, const char *); ok && s; s = va_arg(ap, const char *))
            ok = strstr(g_log[i], s) != NULL;
        va_end(ap);
        if (ok)
            return g_log[i];
    }
    return NULL;
}

static void log_dump(void)
{
    for (int i = 0; i < g_nlog; i++)
        print_message("  log: %s", g_log[i]);
}

#define assert_logged(...)                                                      \
    do {                                                                        \
        if (!log_find(__VA_ARGS__, (const char *)NULL)) {                       \
            log_dump();                                                         \
            fail_msg("no log line contains all of: %s", #__VA_ARGS__);         \
        }                                                                       \
    } while (0)

static void tmp_path(char *out, size_t outsz, const char *name)
{
    snprintf(out, outsz, "%s/%s", g_tmpdir, name);
    if (g_nfiles < 64)
        snprintf(g_files[g_nfiles++], PATH_MAX, "%s", out);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole file (static buffer), or NULL when it does not exist. */
static const char *read_file(const char *path)
{
    static char buf[16384];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Whether `text` has `line` as a whole line. */
static int has_line(const char *text, const char *line)
{
    size_t len = strlen(line);
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && strncmp(p, line, len) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* Whether `text` has a line starting with `prefix`. */
static int has_line_prefix(const char *text, const char *prefix)
{
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, prefix, len) == 0)
            return 1;
        const char *e = strchr(p, '\n');
        p = e ? e + 1 : NULL;
    }
    return 0;
}

#define assert_has_line(text, line)                                                      \
    do {                                                                                 \
        const char *t_ = (text);                                                         \
        if (!t_ || !has_line(t_, line))                                                  \
            fail_msg("expected line '%s' in:\n%s", line, t_ ? t_ : "(no file)");         \
    } while (0)
#define assert_no_line_prefix(text, prefix)                                              \
    do {                                                                                 \
        const char *t_ = (text);                                                         \
        if (!t_ || has_line_prefix(t_, prefix))                                          \
            fail_msg("unexpected line '%s...' in:\n%s", prefix, t_ ? t_ : "(no file)"); \
    } while (0)

/* snprintf into an array, failing the test on truncation. */
#define FMT_OK(buf, ...) assert_true(snprintf(buf, sizeof buf, __VA_ARGS__) < (int)sizeof buf)

static void self_exe_name(char *out, size_t outsz)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = 0;
    snprintf(out, outsz, "%s", basename(buf));
}

static void set_env_hex(const char *name, const char *tag, unsigned value)
{
    char key[128], val[32];
    snprintf(key, sizeof key, "%s_%s", name, tag);
    snprintf(val, sizeof val, "%x", value);
    setenv(key, val, 1);
}

static void set_env_str(const char *name, const char *tag, const char *value)
{
    char key[128];
    snprintf(key, sizeof key, "%s_%s", name, tag);
    setenv(key, value, 1);
}

/* Appends a [child NAME] section for build/fake/lib<lib>.so with CLSID {<tag>-0000-...}. */
static void conf_child(char *conf, size_t confsz, const char *name, const char *lib, const char *tag)
{
    size_t len = strlen(conf);
    snprintf(conf + len, confsz - len, "[child %s]\npath = %s/lib%s.so\nclsid = {%s-0000-4000-8000-000000000001}\n\n",
             name, g_fake_dir, lib, tag);
}

static struct clrmux_mux *mux_of(ICorProfilerCallback11 *cb)
{
    return (struct clrmux_mux *)((char *)cb - offsetof(struct clrmux_mux, iface));
}

/* The runtime's sequence: DllGetClassObject -> CreateInstance(IID_ICorProfilerCallback2)
 * -> Initialize(runtime's Info) with CLRMUX_CONFIG = a file holding `conf` (or `conf_path`
 * itself when conf is NULL). Returns the mux; *hr gets Initialize's HRESULT. */
static struct clrmux_mux *run_initialize(const char *conf, const char *conf_path, struct fake_runtime *rt, HRESULT *hr)
{
    if (!g_fake_dir_ok)
        fail_msg("fake child libraries not found (CLRMUX_FAKE_DIR or build/fake); run `make all` first");
    char path[PATH_MAX];
    if (conf) {
        static int seq;
        char name[64];
        snprintf(name, sizeof name, "loader-%d.conf", ++seq);
        tmp_path(path, sizeof path, name);
        write_file(path, conf);
    } else {
        snprintf(path, sizeof path, "%s", conf_path);
    }
    setenv("CLRMUX_CONFIG", path, 1);
    IClassFactory *cf = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, (void **)&cf), S_OK);
    ICorProfilerCallback11 *cb = NULL;
    assert_int_equal(cf->lpVtbl->CreateInstance(cf, NULL, &IID_ICorProfilerCallback2, (void **)&cb), S_OK);
    assert_non_null(cb);
    cf->lpVtbl->Release(cf);
    struct clrmux_mux *m = mux_of(cb);
    if (g_nkept < 64)
        g_kept[g_nkept++] = m;
    log_clear();
    if (!rt->no_callback11) { /* what a runtime with ICorProfilerCallback11 does first */
        BOOL notification_only = TRUE;
        assert_int_equal(cb->lpVtbl->LoadAsNotificationOnly(cb, &notification_only), S_OK);
        assert_false(notification_only);
    }
    *hr = cb->lpVtbl->Initialize(cb, fake_runtime_unknown(rt));
    unsetenv("CLRMUX_CONFIG");
    return m;
}

static int active_children(struct clrmux_mux *m)
{
    int n = 0;
    for (int i = 0; i < m->nchildren; i++)
        n += atomic_load(&m->children[i].active) != 0;
    return n;
}

static struct clrmux_child *child_named(struct clrmux_mux *m, const char *name)
{
    for (int i = 0; i < m->nchildren; i++)
        if (strcmp(m->children[i].name, name) == 0)
            return &m->children[i];
    return NULL;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/clrmux-test-mux-XXXXXX");
    if (!mkdtemp(g_tmpdir))
        return -1;
    const char *fd = getenv("CLRMUX_FAKE_DIR");
    if (!fd || !*fd)
        fd = "build/fake";
    g_fake_dir_ok = realpath(fd, g_fake_dir) != NULL;
    /* the recorders fall back to these unsuffixed names: make sure none leaks in */
    unsetenv("RECORDER_MASK");
    unsetenv("RECORDER_MASK_HIGH");
    unsetenv("RECORDER_OUT");
    unsetenv("RECORDER_NO_INLINE");
    unsetenv("CLRMUX_LOG_LEVEL");
    if (!getenv("CLRMUX_TEST_VERBOSE")) {
        setenv("CLRMUX_LOG_FILE", "/dev/null", 0);
        clrmux_log_open(getenv("CLRMUX_LOG_FILE"));
    }
    clrmux_log_set_sink(log_sink, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    clrmux_log_set_sink(NULL, NULL);
    fake_mux_free_all();
    for (int i = 0; i < g_nfiles; i++)
        unlink(g_files[i]);
    rmdir(g_tmpdir);
    return 0;
}

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

/* ---- event masks ------------------------------------------------------------------- */

static void get_mask2(struct clrmux_child *c, DWORD *lo, DWORD *hi)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    *lo = *hi = 0xDEADBEEF;
    assert_int_equal(px->lpVtbl->GetEventMask2(px, lo, hi), S_OK);
}

static HRESULT set_mask2(struct clrmux_child *c, DWORD lo, DWORD hi)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    return px->lpVtbl->SetEventMask2(px, lo, hi);
}

static void test_mask_union_and_own_view(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_BASIC_GC);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    assert_int_equal(a.init_mask_hr, S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
    assert_int_equal(rt.mask_high, 0);
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    assert_int_equal(b.init_mask_hr, S_OK);
    fake_mux_end_init(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC);

    /* each child reads back its own mask, not the union the runtime holds */
    DWORD lo, hi;
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    lo = 0xDEADBEEF;
    assert_int_equal(pa->lpVtbl->GetEventMask(pa, &lo), S_OK);
    assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS);
    get_mask2(ca, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS);
    assert_int_equal(hi, 0);
    get_mask2(cb, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_THREADS);
    assert_int_equal(hi, COR_PRF_HIGH_BASIC_GC);

    /* SetEventMask (version 1) changes the low word only */
    ICorProfilerInfo15 *pb = fake_child_info(cb);
    assert_int_equal(pb->lpVtbl->SetEventMask(pb, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC), S_OK);
    get_mask2(cb, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC);
    assert_int_equal(hi, COR_PRF_HIGH_BASIC_GC);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC);
    fake_mux_free(m);
}

static void test_mask_removal_shrinks_union_only_when_unshared(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS,
                    COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE);

    /* a drops THREADS, which b still has: the union keeps it */
    assert_int_equal(set_mask2(ca, COR_PRF_MONITOR_MODULE_LOADS, COR_PRF_HIGH_MONITOR_EVENT_PIPE), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    /* a drops MODULE_LOADS and EVENT_PIPE, which only it had: the union loses them */
    assert_int_equal(set_mask2(ca, 0, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC);
    /* b drops THREADS and BASIC_GC, now nobody's */
    assert_int_equal(set_mask2(cb, COR_PRF_MONITOR_GC, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, 0);
    DWORD lo, hi;
    get_mask2(ca, &lo, &hi);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 0);
    get_mask2(cb, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_GC);
    assert_int_equal(hi, 0);
    fake_mux_free(m);
}

static void test_mask_immutable_flags_after_initialize(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    const DWORD a_low = COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_OBJECT_ALLOCATED;
    struct fake_child a, b;
    fake_child_init(&a, 11, a_low, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    /* while the mux initialises, immutable flags may be set */
    assert_int_equal(a.init_mask_hr, S_OK);
    fake_mux_end_init(m);
    const DWORD union_low = a_low | COR_PRF_MONITOR_THREADS;
    assert_int_equal(rt.mask_low, union_low);

    const int calls = rt.set_mask_calls;
    DWORD lo, hi;
    /* every immutable bit, added or removed, is refused and changes nothing */
    for (int bit = 0; bit < 32; bit++) {
        DWORD f = 1u << bit;
        if (!(f & (DWORD)COR_PRF_MONITOR_IMMUTABLE))
            continue;
        HRESULT hr = set_mask2(ca, a_low ^ f, 0);
        if (hr != E_FAIL)
            fail_msg("toggling immutable bit 0x%08X: hr 0x%08X", (unsigned)f, (unsigned)hr);
        get_mask2(ca, &lo, &hi);
        assert_int_equal(lo, a_low);
        assert_int_equal(hi, 0);
    }
    assert_int_equal(set_mask2(cb, COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_DISABLE_TIERED_COMPILATION),
                     E_FAIL);
    get_mask2(cb, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_THREADS);
    assert_int_equal(hi, 0);
    assert_int_equal(rt.set_mask_calls, calls);
    assert_int_equal(rt.mask_low, union_low);
    assert_int_equal(rt.mask_high, 0);

    /* a mutable change in the same call as an unchanged immutable flag succeeds */
    assert_int_equal(set_mask2(ca, a_low | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC), S_OK);
    get_mask2(ca, &lo, &hi);
    assert_int_equal(lo, a_low | COR_PRF_MONITOR_GC);
    assert_int_equal(hi, COR_PRF_HIGH_BASIC_GC);
    assert_int_equal(rt.mask_low, union_low | COR_PRF_MONITOR_GC);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_BASIC_GC);
    /* .NET 10: DISABLE_INLINING / DISABLE_OPTIMIZATIONS are mutable */
    assert_int_equal(set_mask2(cb, COR_PRF_MONITOR_THREADS | COR_PRF_DISABLE_INLINING | COR_PRF_DISABLE_OPTIMIZATIONS, 0),
                     S_OK);
    assert_true(rt.mask_low & COR_PRF_DISABLE_INLINING);
    fake_mux_free(m);
}

static void test_mask_runtime_refusal(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    rt.refuse_low = COR_PRF_MONITOR_GC;
    rt.refuse_high = COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS;
    rt.refuse_hr = CORPROF_E_INCONSISTENT_WITH_FLAGS;
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, c;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_GC | COR_PRF_MONITOR_THREADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cc = fake_mux_add_child(m, &c, "c");
    /* in Initialize: the child gets the runtime's HRESULT and keeps no mask */
    assert_int_equal(c.init_mask_hr, CORPROF_E_INCONSISTENT_WITH_FLAGS);
    DWORD lo, hi;
    get_mask2(cc, &lo, &hi);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 0);
    fake_mux_end_init(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);

    /* later: same, every time it is asked (the refused union is not taken as applied) */
    for (int i = 0; i < 2; i++)
        assert_int_equal(set_mask2(ca, COR_PRF_MONITOR_MODULE_LOADS, COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS),
                         CORPROF_E_INCONSISTENT_WITH_FLAGS);
    get_mask2(ca, &lo, &hi);
    assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS);
    assert_int_equal(hi, 0);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
    assert_int_equal(rt.mask_high, 0);
    /* and a refused child's later, acceptable mask works (the mux's record of the union
     * was not changed by the refusal) */
    assert_int_equal(set_mask2(cc, COR_PRF_MONITOR_THREADS, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS);
    assert_int_equal(set_mask2(ca, 0, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_THREADS);
    fake_mux_free(m);
}

/* ---- routing ----------------------------------------------------------------------- */

static void test_route_by_own_mask(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b, c, d;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS, 0);
    fake_child_init(&c, 11, 0, COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED);
    fake_child_init(&d, 11, 0, 0);
    fake_mux_add_child(m, &a, "a");
    fake_mux_add_child(m, &b, "b");
    fake_mux_add_child(m, &c, "c");
    fake_mux_add_child(m, &d, "d");
    fake_mux_end_init(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED);

    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK), S_OK);
    assert_int_equal(FC_CALLS(&a, ModuleLoadFinished), 1);
    assert_int_equal(FC_CALLS(&b, ModuleLoadFinished) + FC_CALLS(&c, ModuleLoadFinished) +
                         FC_CALLS(&d, ModuleLoadFinished), 0);
    mux->lpVtbl->ThreadCreated(mux, 0x99);
    mux->lpVtbl->ThreadDestroyed(mux, 0x99);
    assert_int_equal(FC_CALLS(&b, ThreadCreated), 1);
    assert_int_equal(FC_CALLS(&b, ThreadDestroyed), 1);
    assert_int_equal(FC_CALLS(&a, ThreadCreated) + FC_CALLS(&c, ThreadCreated) + FC_CALLS(&d, ThreadCreated), 0);
    mux->lpVtbl->ObjectAllocated(mux, 0x1234, 0x5678);
    assert_int_equal(FC_CALLS(&c, ObjectAllocated), 1);
    assert_int_equal(FC_CALLS(&a, ObjectAllocated) + FC_CALLS(&b, ObjectAllocated) + FC_CALLS(&d, ObjectAllocated), 0);
    /* nobody asked for GC events */
    BOOL gens[3] = {TRUE, FALSE, FALSE};
    mux->lpVtbl->GarbageCollectionStarted(mux, 3, gens, COR_PRF_GC_INDUCED);
    assert_int_equal(FC_CALLS(&a, GarbageCollectionStarted) + FC_CALLS(&b, GarbageCollectionStarted) +
                         FC_CALLS(&c, GarbageCollectionStarted) + FC_CALLS(&d, GarbageCollectionStarted), 0);
    /* lifecycle: everyone */
    mux->lpVtbl->ProfilerAttachComplete(mux);
    assert_int_equal(mux->lpVtbl->Shutdown(mux), S_OK);
    struct fake_child *all[] = {&a, &b, &c, &d};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(FC_CALLS(all[i], Shutdown), 1);
        assert_int_equal(FC_CALLS(all[i], ProfilerAttachComplete), 1);
    }
    /* and nothing else reached anyone */
    assert_int_equal(fake_child_total_calls(&a), 3);
    assert_int_equal(fake_child_total_calls(&b), 4);
    assert_int_equal(fake_child_total_calls(&c), 3);
    assert_int_equal(fake_child_total_calls(&d), 2);
    fake_mux_free(m);
}

static void start_session(struct clrmux_child *c, const char *const *providers, int n, EVENTPIPE_SESSION *s)
{
    WCHAR names[4][128];
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg[4];
    memset(cfg, 0, sizeof cfg);
    for (int i = 0; i < n && i < 4; i++) {
        clrmux_utf8_to_utf16(providers[i], names[i], 128);
        cfg[i].providerName = names[i];
        cfg[i].keywords = ~0ull;
        cfg[i].loggingLevel = COR_PRF_EVENTPIPE_VERBOSE;
    }
    ICorProfilerInfo15 *px = fake_child_info(c);
    *s = 0;
    assert_int_equal(px->lpVtbl->EventPipeStartSession(px, (UINT32)n, cfg, FALSE, s), S_OK);
    assert_true(*s != 0);
}

static void deliver_event(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider)
{
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    static const BYTE data[4] = {1, 2, 3, 4};
    assert_int_equal(mux->lpVtbl->EventPipeEventDelivered(mux, provider, 1, 0, 0, NULL, sizeof data, data, NULL, NULL,
                                                          0x99, 0, NULL),
                     S_OK);
}

static HRESULT request_rejit(struct clrmux_child *c, ULONG n, ModuleID *mods, mdMethodDef *methods)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    return px->lpVtbl->RequestReJIT(px, n, mods, methods);
}

static void test_route_version_gating(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    struct clrmux_mux *m = fake_mux_new(&rt);
    const DWORD low = COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_ENABLE_REJIT;
    const DWORD high = COR_PRF_HIGH_MONITOR_EVENT_PIPE | COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS |
                       COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED;
    struct fake_child old, cur;
    fake_child_init(&old, 3, low, high);
    fake_child_init(&cur, 11, low, high);
    struct clrmux_child *c_old = fake_mux_add_child(m, &old, "old");
    struct clrmux_child *c_cur = fake_mux_add_child(m, &cur, "cur");
    fake_mux_end_init(m);
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

    assert_int_equal(FC_CALLS(&old, JITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&cur, JITCompilationStarted), 1);
    /* the version-3 child asked for all of these through its mask, but cannot take them */
    assert_int_equal(fake_child_total_calls(&old), 1);
    assert_int_equal(FC_CALLS(&cur, DynamicMethodJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&cur, DynamicMethodJITCompilationFinished), 1);
    assert_int_equal(FC_CALLS(&cur, DynamicMethodUnloaded), 1);
    assert_int_equal(FC_CALLS(&cur, ModuleInMemorySymbolsUpdated), 1);
    assert_int_equal(FC_CALLS(&cur, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&cur, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&cur, ReJITCompilationFinished), 1);
    assert_int_equal(FC_CALLS(&cur, ReJITError), 1);
    assert_int_equal(FC_CALLS(&cur, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&cur, EventPipeProviderCreated), 1);
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
    assert_int_equal(rt.mask_low, low);
    assert_int_equal(rt.mask_high, COR_PRF_HIGH_MONITOR_EVENT_PIPE);

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
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b, c;
    fake_child_init(&a, 11, COR_PRF_MONITOR_JIT_COMPILATION, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_THREADS, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0); /* not JIT_COMPILATION */
    a.set_inline = 1, a.inline_answer = FALSE;
    b.set_inline = 1, b.inline_answer = TRUE;
    c.set_inline = 1, c.inline_answer = FALSE;
    fake_mux_add_child(m, &a, "a");
    fake_mux_add_child(m, &b, "b");
    fake_mux_add_child(m, &c, "c");
    fake_mux_end_init(m);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    /* one child says no: no inlining */
    BOOL v = TRUE;
    assert_int_equal(mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v), S_OK);
    assert_int_equal(v, FALSE);
    assert_int_equal(FC_CALLS(&a, JITInlining), 1);
    assert_int_equal(FC_CALLS(&b, JITInlining), 1);
    /* b saw the runtime's value, not a's answer */
    assert_int_equal(b.inline_seen, TRUE);
    assert_int_equal(a.inline_seen, TRUE);
    /* c has no JIT_COMPILATION: not asked, its FALSE does not count */
    assert_int_equal(FC_CALLS(&c, JITInlining), 0);

    /* every asked child allows it: inline */
    a.inline_answer = TRUE;
    v = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(v, TRUE);
    assert_int_equal(FC_CALLS(&c, JITInlining), 0);

    /* the last child saying no is enough too; the first one still saw TRUE */
    b.inline_answer = FALSE;
    b.inline_seen = FALSE;
    v = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(v, FALSE);
    assert_int_equal(b.inline_seen, TRUE);

    /* children see the incoming value as it is */
    v = FALSE;
    mux->lpVtbl->JITInlining(mux, 0x500, 0x501, &v);
    assert_int_equal(a.inline_seen, FALSE);
    assert_int_equal(b.inline_seen, FALSE);
    assert_int_equal(FC_CALLS(&a, JITInlining), 4);
    fake_mux_free(m);
}

static void test_jit_cached_function_search_merge(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b, c;
    fake_child_init(&a, 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_CACHE_SEARCHES, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_JIT_COMPILATION, 0); /* not CACHE_SEARCHES */
    a.set_cache = 1, a.cache_answer = FALSE;
    b.set_cache = 1, b.cache_answer = TRUE;
    c.set_cache = 1, c.cache_answer = FALSE;
    fake_mux_add_child(m, &a, "a");
    fake_mux_add_child(m, &b, "b");
    fake_mux_add_child(m, &c, "c");
    fake_mux_end_init(m);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    BOOL v = TRUE;
    assert_int_equal(mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x500, &v), S_OK);
    assert_int_equal(v, FALSE);
    assert_int_equal(a.cache_seen, TRUE);
    assert_int_equal(b.cache_seen, TRUE);
    assert_int_equal(FC_CALLS(&c, JITCachedFunctionSearchStarted), 0);

    a.cache_answer = TRUE;
    v = TRUE;
    mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x500, &v);
    assert_int_equal(v, TRUE);
    assert_int_equal(FC_CALLS(&a, JITCachedFunctionSearchStarted), 2);
    assert_int_equal(FC_CALLS(&b, JITCachedFunctionSearchStarted), 2);
    assert_int_equal(FC_CALLS(&c, JITCachedFunctionSearchStarted), 0);

    /* CACHE_SEARCHES also routes the Finished callback, only to a and b */
    mux->lpVtbl->JITCachedFunctionSearchFinished(mux, 0x500, COR_PRF_CACHED_FUNCTION_FOUND);
    assert_int_equal(FC_CALLS(&a, JITCachedFunctionSearchFinished), 1);
    assert_int_equal(FC_CALLS(&c, JITCachedFunctionSearchFinished), 0);
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
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_JIT_COMPILATION, 0);
    fake_child_init(&b, 11, COR_PRF_ENABLE_REJIT, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
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
    assert_int_equal(FC_CALLS(&a, GetReJITParameters) + FC_CALLS(&b, GetReJITParameters), 0);

    assert_int_equal(request_rejit(cb, 2, mods, methods), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    assert_int_equal(rt.rejit_last_count, 2);
    assert_int_equal(rt.rejit_mods[1], 0x7000);
    assert_int_equal(rt.rejit_methods[1], 0x06000002);
    ICorProfilerInfo15 *pb = fake_child_info(cb);
    assert_int_equal(pb->lpVtbl->RequestReJITWithInliners(pb, COR_PRF_REJIT_BLOCK_INLINING, 1, mods, methods), S_OK);
    assert_int_equal(rt.rejit_calls, 2);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    assert_int_equal(FC_CALLS(&a, GetReJITParameters), 0);
    assert_int_equal(FC_CALLS(&b, GetReJITParameters), 1);
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
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    /* ReJITCompilation* reach a profiler that monitors JIT compilation (as the runtime) */
    fake_child_init(&a, 11, COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION, 0);
    fake_child_init(&b, 11, COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);

    ModuleID mods[2] = {0x7000, 0x7000};
    mdMethodDef methods[2] = {0x06000001, 0x06000002};
    assert_int_equal(request_rejit(ca, 1, mods, methods), S_OK);

    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    const ReJITID v1 = fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000001); /* a's version */
    assert_int_equal(FC_CALLS(&a, GetReJITParameters), 1);
    assert_int_equal(a.last_module, 0x7000);
    assert_int_equal(a.last_method, 0x06000001);
    mux->lpVtbl->ReJITError(mux, 0x7000, 0x06000001, 0x500, E_FAIL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, v1, TRUE);
    assert_int_equal(a.last_function, 0x500);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x500, v1, S_OK, TRUE);
    assert_int_equal(FC_CALLS(&a, ReJITError), 1);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationFinished), 1);
    assert_int_equal(fake_child_total_calls(&b), 0);

    /* methods nobody requested: another token, the same token in another module, and a
     * FunctionID the runtime cannot resolve */
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000002, NULL);
    mux->lpVtbl->GetReJITParameters(mux, 0x7001, 0x06000001, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x600, 8, TRUE);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x700, 9, TRUE);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x999, 9, S_OK, TRUE);
    assert_int_equal(FC_CALLS(&a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationFinished), 1);
    assert_int_equal(fake_child_total_calls(&b), 0);

    /* b requests method 1 too, and method 2: the new version of method 1 is b's (a's rewrite
     * in it is a's last one, reused: alone, a would see no new version), 2 is b's */
    assert_int_equal(request_rejit(cb, 2, mods, methods), S_OK);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000001, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000001), TRUE);
    assert_int_equal(FC_CALLS(&a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&b, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&b, ReJITCompilationStarted), 1);
    /* a tier-1 compilation of a's version still reaches a alone */
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x500, v1, TRUE);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationStarted), 2);
    assert_int_equal(FC_CALLS(&b, ReJITCompilationStarted), 1);
    mux->lpVtbl->GetReJITParameters(mux, 0x7000, 0x06000002, NULL);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x600, fake_runtime_last_rejit_id(&rt, 0x7000, 0x06000002), TRUE);
    assert_int_equal(FC_CALLS(&a, GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&b, GetReJITParameters), 2);
    assert_int_equal(b.last_method, 0x06000002);
    assert_int_equal(FC_CALLS(&a, ReJITCompilationStarted), 2);
    assert_int_equal(FC_CALLS(&b, ReJITCompilationStarted), 2);
    assert_int_equal(b.last_function, 0x600);
    fake_mux_free(m);
}

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
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b, c;
    fake_child_init(&a, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_ENTERLEAVE | COR_PRF_ENABLE_FUNCTION_ARGS | COR_PRF_ENABLE_FRAME_INFO, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    a.init_hook = set_hooks_a;
    b.init_hook = set_hooks_b;
    c.init_hook = set_hooks_c;
    fake_mux_add_child(m, &a, "alpha");
    fake_mux_add_child(m, &b, "beta");
    fake_mux_add_child(m, &c, "gamma");
    assert_int_equal(rt.elt_calls, 0); /* nothing reaches the runtime before the end of Initialize */
    log_clear();
    fake_mux_end_init(m);
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
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, c, r;
    fake_child_init(&a, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    fake_child_init(&r, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    a.init_hook = set_hooks_a;
    c.init_hook = set_hooks_c;
    fake_mux_add_child(m, &a, "alpha");
    fake_mux_add_child(m, &c, "gamma");
    fake_mux_add_child(m, &r, "plain");
    fake_mux_end_init(m);
    struct clrmux_elt_installed in;
    clrmux_elt_installed(m, &in);
    assert_true(in.fast);
    BOOL hook = FALSE;
    UINT_PTR id = in.mapper(0x2000, in.mapper_data, &hook);
    assert_true(hook);
    clrmux_elt_fast_leave(id, 0);
    assert_int_equal(seen[0].leave, 1);
    assert_int_equal(seen[0].last, 0x2000 + 0xA00000);
    fake_mux_free(m);
}

/* One hooking child: its own mapper and hooks go to the runtime unchanged. */
static void test_elt_one_child_direct(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, r;
    fake_child_init(&a, 11, COR_PRF_MONITOR_ENTERLEAVE, 0);
    fake_child_init(&r, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    a.init_hook = set_hooks_a;
    fake_mux_add_child(m, &a, "alpha");
    fake_mux_add_child(m, &r, "plain");
    log_clear();
    fake_mux_end_init(m);
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

/* ---- EventPipe --------------------------------------------------------------------- */

static void test_eventpipe_session_owner_only(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Microsoft-Windows-DotNETRuntime");
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&b, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    const char *const prov[] = {"Microsoft-Windows-DotNETRuntime"};
    EVENTPIPE_SESSION s;
    start_session(ca, prov, 1, &s);
    assert_int_equal(rt.sessions_started, 1);

    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(a.last_provider, 0x10);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 0);

    /* once a stops its session, its events stop */
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    assert_int_equal(pa->lpVtbl->EventPipeStopSession(pa, s), S_OK);
    assert_int_equal(rt.sessions_stopped, 1);
    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 0);
    fake_mux_free(m);
}

static void test_eventpipe_routes_by_provider_name(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Provider-A");
    fake_runtime_add_provider(&rt, 0x20, "Provider-B");
    fake_runtime_add_provider(&rt, 0x30, "Provider-C");
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b, c;
    fake_child_init(&a, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&b, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    /* a session but no EVENT_PIPE flag: the runtime delivers its events anyway (.NET 10) */
    fake_child_init(&c, 11, COR_PRF_MONITOR_THREADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    struct clrmux_child *cc = fake_mux_add_child(m, &c, "c");
    fake_mux_end_init(m);
    const char *const pa[] = {"Provider-A"};
    const char *const pb[] = {"Provider-B"};
    EVENTPIPE_SESSION s1, s2, s3;
    start_session(ca, pa, 1, &s1);
    start_session(cb, pb, 1, &s2);
    start_session(cc, pa, 1, &s3);
    assert_true(s1 != s2);

    deliver_event(m, 0x20);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 0);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 1);
    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 1);
    deliver_event(m, 0x30); /* nobody's provider */
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&c, EventPipeEventDelivered), 1);
    fake_mux_free(m);
}

/* An event's metadata blob as the runtime builds it: id, name (here empty), keywords,
 * version, level, parameter count. */
static ULONG ep_meta(BYTE *b, DWORD id, UINT64 kw, UINT32 level)
{
    UINT32 zero = 0;
    memcpy(b, &id, 4);
    b[4] = b[5] = 0;
    memcpy(b + 6, &kw, 8);
    memcpy(b + 14, &zero, 4);
    memcpy(b + 18, &level, 4);
    memcpy(b + 22, &zero, 4);
    return 26;
}

static void deliver_meta(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider, UINT64 kw, UINT32 level)
{
    static BYTE data[4];
    BYTE meta[32];
    ULONG n = ep_meta(meta, 7, kw, level);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    data[0]++; /* a new event each time */
    mux->lpVtbl->EventPipeEventDelivered(mux, provider, 7, 0, n, meta, sizeof data, data, NULL, NULL, 0, 0, NULL);
}

static EVENTPIPE_SESSION start_kw(struct clrmux_child *c, const char *prov, UINT64 kw, UINT32 level)
{
    WCHAR name[64];
    clrmux_utf8_to_utf16(prov, name, 64);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, kw, level, NULL};
    ICorProfilerInfo15 *px = fake_child_info(c);
    EVENTPIPE_SESSION s = 0;
    assert_int_equal(px->lpVtbl->EventPipeStartSession(px, 1, &cfg, FALSE, &s), S_OK);
    return s;
}

/* Each child gets exactly the keywords and levels its own session asked for; the runtime's
 * session widens (a new one replaces the old) only when a view needs more. */
static void test_eventpipe_views_filter_keywords_and_levels(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    fake_runtime_add_provider(&rt, 0x20, "Q");
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&b, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    EVENTPIPE_SESSION sa = start_kw(ca, "P", 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(rt.sessions_started, 1);
    EVENTPIPE_SESSION sb = start_kw(cb, "P", 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(rt.sessions_started, 2); /* wider keywords and level: replaced */
    assert_int_equal(rt.sessions_stopped, 1);
    assert_true(sa != sb);

    deliver_meta(m, 0x10, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 0);
    deliver_meta(m, 0x10, 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 1);
    deliver_meta(m, 0x10, 0x1, COR_PRF_EVENTPIPE_VERBOSE); /* a asked for Informational */
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 1);
    deliver_meta(m, 0x10, 0, COR_PRF_EVENTPIPE_LOGALWAYS); /* no keywords, LogAlways: both */
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 2);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 2);
    deliver_meta(m, 0x20, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL); /* nobody's provider */
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 2);

    /* a adds Q to its session: added to the runtime's session, no new session */
    WCHAR q[4];
    clrmux_utf8_to_utf16("Q", q, 4);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cq = {q, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL, NULL};
    ICorProfilerInfo15 *pa = fake_child_info(ca), *pb = fake_child_info(cb);
    assert_int_equal(pa->lpVtbl->EventPipeAddProviderToSession(pa, sa, cq), S_OK);
    assert_int_equal(rt.providers_added, 1);
    assert_int_equal(rt.sessions_started, 2);
    deliver_meta(m, 0x20, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 3);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 2);
    /* a child cannot touch another's session */
    assert_int_equal(pb->lpVtbl->EventPipeStopSession(pb, sa), E_INVALIDARG);
    assert_int_equal(pb->lpVtbl->EventPipeAddProviderToSession(pb, sa, cq), E_INVALIDARG);

    /* b stops: only its view; the runtime session runs on for a */
    assert_int_equal(pb->lpVtbl->EventPipeStopSession(pb, sb), S_OK);
    assert_int_equal(rt.sessions_stopped, 1);
    deliver_meta(m, 0x10, 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 2);
    assert_int_equal(pa->lpVtbl->EventPipeStopSession(pa, sa), S_OK);
    assert_int_equal(rt.sessions_stopped, 2); /* the last view: the runtime's session stops */
    fake_mux_free(m);
}

/* The metadata parser: short or malformed blobs are refused. */
static void test_eventpipe_parse_metadata(void **state)
{
    (void)state;
    BYTE b[64];
    UINT64 kw = 0;
    UINT32 level = 0;
    ULONG n = ep_meta(b, 80, 0x8000, 2);
    assert_int_equal(clrmux_ep_parse_metadata(b, n, &kw, &level), 0);
    assert_int_equal(kw, 0x8000);
    assert_int_equal(level, 2);
    assert_int_equal(clrmux_ep_parse_metadata(b, 10, &kw, &level), -1);
    assert_int_equal(clrmux_ep_parse_metadata(NULL, 0, &kw, &level), -1);
    /* a name that never ends */
    memset(b, 0x41, sizeof b);
    assert_int_equal(clrmux_ep_parse_metadata(b, sizeof b, &kw, &level), -1);
}

static void test_eventpipe_provider_added_to_session(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Provider-A");
    fake_runtime_add_provider(&rt, 0x40, "Provider-X");
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    fake_child_init(&b, 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    const char *const pa[] = {"Provider-A"};
    EVENTPIPE_SESSION s1, s2;
    start_session(ca, pa, 1, &s1);
    start_session(cb, pa, 1, &s2);
    /* a adds Provider-X to its session: X's events are a's, not b's */
    WCHAR name[32];
    clrmux_utf8_to_utf16("Provider-X", name, 32);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, ~0ull, COR_PRF_EVENTPIPE_VERBOSE, NULL};
    ICorProfilerInfo15 *px = fake_child_info(ca);
    assert_int_equal(px->lpVtbl->EventPipeAddProviderToSession(px, s1, cfg), S_OK);
    assert_int_equal(rt.providers_added, 1);
    deliver_event(m, 0x40);
    assert_int_equal(FC_CALLS(&a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(&b, EventPipeEventDelivered), 0);
    fake_mux_free(m);
}

/* ---- Initialize with a real loader.conf and the build/fake libraries --------------- */

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

    assert_logged("child 'missing'", "doesnotexist.so", "No such file");
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
    FMT_OK(conf, "[child off]\npath = %s/librecorder.so\nclsid = {B3000004-0000-4000-8000-000000000001}\n"
                                "enabled = false\n\n[child noclsid]\npath = %s/librecorder.so\n",
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

/* The latemask library changes its mask in its first ModuleLoadFinished: an immutable
 * change (refused) and a mutable one (accepted); it writes both HRESULTs at Shutdown. */
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

/* Several real children: routing by each one's own mask, version gating of a
 * Callback3-only library, and the JITInlining veto of one of them. */
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
        cmocka_unit_test(test_dllgetclassobject),
        cmocka_unit_test(test_create_instance_and_query_interface),
        cmocka_unit_test(test_proxy_query_interface_follows_runtime),
        cmocka_unit_test(test_mask_union_and_own_view),
        cmocka_unit_test(test_mask_removal_shrinks_union_only_when_unshared),
        cmocka_unit_test(test_mask_immutable_flags_after_initialize),
        cmocka_unit_test(test_mask_runtime_refusal),
        cmocka_unit_test(test_route_by_own_mask),
        cmocka_unit_test(test_route_version_gating),
        cmocka_unit_test(test_route_inactive_child_gets_nothing),
        cmocka_unit_test(test_jit_inlining_merge),
        cmocka_unit_test(test_jit_cached_function_search_merge),
        cmocka_unit_test(test_rejit_needs_own_flag),
        cmocka_unit_test(test_rejit_callbacks_reach_requesters_only),
        cmocka_unit_test(test_elt_every_child_gets_its_hooks),
        cmocka_unit_test(test_elt_fast_path),
        cmocka_unit_test(test_elt_one_child_direct),
        cmocka_unit_test(test_elt_hooks_checked_like_the_runtime),
        cmocka_unit_test(test_elt_hooks_of_failed_child_are_dropped),
        cmocka_unit_test(test_eventpipe_session_owner_only),
        cmocka_unit_test(test_eventpipe_routes_by_provider_name),
        cmocka_unit_test(test_eventpipe_provider_added_to_session),
        cmocka_unit_test(test_eventpipe_views_filter_keywords_and_levels),
        cmocka_unit_test(test_eventpipe_parse_metadata),
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
