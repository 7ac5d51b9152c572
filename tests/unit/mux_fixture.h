/* Fixtures shared by the mux's unit tests (tests/unit/test_mux_*.c, one binary each): log
 * capture, temporary files and loader.conf sections for the fake child libraries of
 * build/fake (CLRMUX_FAKE_DIR), the runtime's DllGetClassObject -> CreateInstance ->
 * Initialize sequence (run_initialize), the group setup and teardown, and small helpers on a
 * child's proxy (event masks, EventPipe sessions, ReJIT requests). Each test file includes
 * it first; everything here is static to that test binary.
 *
 * The same tests run on Windows (make windows, under Wine): the platform differences live
 * here and in platform_fixture.h, not in the tests: the fake children are
 * build/win-x64/fake/lib<name>.dll (FAKE_EXT), the log goes to NUL, the executable's name
 * comes from GetModuleFileNameA, and tests/win/posix_compat.h supplies setenv, unsetenv and
 * realpath. */
#ifndef CLRMUX_TESTS_MUX_FIXTURE_H
#define CLRMUX_TESTS_MUX_FIXTURE_H

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

#include "platform_fixture.h"

#if defined(_WIN32)
__declspec(dllimport) unsigned long __stdcall GetModuleFileNameA(void *module, char *name, unsigned long size);
#endif

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

static inline void log_sink(int level, const char *line, void *ctx)
{
    (void)ctx;
    if (g_nlog < MAX_LOG) {
        snprintf(g_log[g_nlog], sizeof g_log[0], "%s", line);
        g_log_level[g_nlog] = level;
        g_nlog++;
    }
}

static inline void log_clear(void) { g_nlog = 0; }

/* A captured line containing every one of the NULL-terminated substrings. */
static inline const char *log_find(const char *first, ...)
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

static inline void log_dump(void)
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

static inline void tmp_path(char *out, size_t outsz, const char *name)
{
    int n = snprintf(out, outsz, "%s/%s", g_tmpdir, name);
    assert_true(n >= 0 && (size_t)n < outsz);
    if (g_nfiles < 64)
        snprintf(g_files[g_nfiles++], PATH_MAX, "%s", out);
}

static inline void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole file (static buffer), or NULL when it does not exist. */
static inline const char *read_file(const char *path)
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
static inline int has_line(const char *text, const char *line)
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
static inline int has_line_prefix(const char *text, const char *prefix)
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

static inline void self_exe_name(char *out, size_t outsz)
{
    char buf[PATH_MAX];
#if defined(_WIN32)
    long n = (long)GetModuleFileNameA(NULL, buf, sizeof buf);
    assert_true(n > 0 && n < (long)sizeof buf);
#else
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = 0;
#endif
    snprintf(out, outsz, "%s", basename(buf));
    size_t len = strlen(out); /* the name as clrmux logs it: without Windows's ".exe" */
    if (len > 4 && strcmp(out + len - 4, ".exe") == 0)
        out[len - 4] = 0;
}

static inline void set_env_hex(const char *name, const char *tag, unsigned value)
{
    char key[128], val[32];
    snprintf(key, sizeof key, "%s_%s", name, tag);
    snprintf(val, sizeof val, "%x", value);
    setenv(key, val, 1);
}

static inline void set_env_str(const char *name, const char *tag, const char *value)
{
    char key[128];
    snprintf(key, sizeof key, "%s_%s", name, tag);
    setenv(key, value, 1);
}

/* Appends a [child NAME] section for build/fake/lib<lib>.so (.dll on Windows) with CLSID
 * {<tag>-0000-...}. */
static inline void conf_child(char *conf, size_t confsz, const char *name, const char *lib, const char *tag)
{
    size_t len = strlen(conf);
    snprintf(conf + len, confsz - len, "[child %s]\npath = %s/lib%s" FAKE_EXT "\nclsid = {%s-0000-4000-8000-000000000001}\n\n",
             name, g_fake_dir, lib, tag);
}

static inline struct clrmux_mux *mux_of(ICorProfilerCallback11 *cb)
{
    return (struct clrmux_mux *)((char *)cb - offsetof(struct clrmux_mux, iface));
}

/* The runtime's sequence: DllGetClassObject -> CreateInstance(IID_ICorProfilerCallback2)
 * -> Initialize(runtime's Info) with CLRMUX_CONFIG = a file holding `conf` (or `conf_path`
 * itself when conf is NULL). Returns the mux; *hr gets Initialize's HRESULT. */
static inline struct clrmux_mux *run_initialize(const char *conf, const char *conf_path, struct fake_runtime *rt, HRESULT *hr)
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

static inline int active_children(struct clrmux_mux *m)
{
    int n = 0;
    for (int i = 0; i < m->nchildren; i++)
        n += atomic_load(&m->children[i].active) != 0;
    return n;
}

static inline struct clrmux_child *child_named(struct clrmux_mux *m, const char *name)
{
    for (int i = 0; i < m->nchildren; i++)
        if (strcmp(m->children[i].name, name) == 0)
            return &m->children[i];
    return NULL;
}

static inline int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/clrmux-test-mux-XXXXXX", t && *t ? t : "/tmp");
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
        setenv("CLRMUX_LOG_FILE", NULL_DEVICE, 0);
        clrmux_log_open(getenv("CLRMUX_LOG_FILE"));
    }
    clrmux_log_set_sink(log_sink, NULL);
    return 0;
}

static inline int group_teardown(void **state)
{
    (void)state;
    clrmux_log_set_sink(NULL, NULL);
    fake_mux_free_all();
    for (int i = 0; i < g_nfiles; i++)
        unlink(g_files[i]);
    rmdir(g_tmpdir);
    return 0;
}

/* ---- a child's proxy ------------------------------------------------------------- */

static inline void get_mask2(struct clrmux_child *c, DWORD *lo, DWORD *hi)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    *lo = *hi = 0xDEADBEEF;
    assert_int_equal(px->lpVtbl->GetEventMask2(px, lo, hi), S_OK);
}

static inline HRESULT set_mask2(struct clrmux_child *c, DWORD lo, DWORD hi)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    return px->lpVtbl->SetEventMask2(px, lo, hi);
}

static inline void start_session(struct clrmux_child *c, const char *const *providers, int n, EVENTPIPE_SESSION *s)
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

static inline void deliver_event(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider)
{
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    static const BYTE data[4] = {1, 2, 3, 4};
    assert_int_equal(mux->lpVtbl->EventPipeEventDelivered(mux, provider, 1, 0, 0, NULL, sizeof data, data, NULL, NULL,
                                                          0x99, 0, NULL),
                     S_OK);
}

static inline HRESULT request_rejit(struct clrmux_child *c, ULONG n, ModuleID *mods, mdMethodDef *methods)
{
    ICorProfilerInfo15 *px = fake_child_info(c);
    return px->lpVtbl->RequestReJIT(px, n, mods, methods);
}

/* Child i's own mask, read back through its proxy (GetEventMask2), is lo/hi. */
#define assert_mask(c, lo, hi)                                                                      \
    do {                                                                                            \
        DWORD lo_, hi_;                                                                             \
        get_mask2((c), &lo_, &hi_);                                                                 \
        if (lo_ != (DWORD)(lo) || hi_ != (DWORD)(hi))                                              \
            fail_msg("child '%s': mask low=0x%08X high=0x%08X, expected low=0x%08X high=0x%08X",     \
                     (c)->name, (unsigned)lo_, (unsigned)hi_, (unsigned)(lo), (unsigned)(hi));       \
    } while (0)
/* The runtime holds the union lo/hi. */
#define assert_union(rt, lo, hi)                                                                    \
    do {                                                                                            \
        if ((rt)->mask_low != (DWORD)(lo) || (rt)->mask_high != (DWORD)(hi))                       \
            fail_msg("runtime mask low=0x%08X high=0x%08X, expected low=0x%08X high=0x%08X",        \
                     (unsigned)(rt)->mask_low, (unsigned)(rt)->mask_high, (unsigned)(lo), (unsigned)(hi)); \
    } while (0)

#endif
