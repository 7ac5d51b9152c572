/* Unit tests for the loader's defences: who may put code or configuration in the process
 * (src/common/trust.c), which files loader.conf may be (FIFO, devices, folders, size) and
 * how much of it is kept (src/loader/config.c), the log file's safe opening
 * (src/common/log.c), and loader loops (src/loader/loop.c, mux Initialize, child loading). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clrmux/clrmux.h"
#include "common/log.h"
#include "common/trust.h"
#include "fake_runtime.h"
#include "loader/config.h"
#include "loader/loop.h"
#include "loader/mux.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libclrmux.so\n"; }

static const CLSID k_clrmux_clsid = CLSID_clrmux;

/* short enough that every path built from them fits in PATH_MAX */
static char g_tmp[1024];
static char g_fake_dir[1024];
static char g_lib[1024]; /* build/libclrmux.so */

/* Captured log lines. */
static char g_log[256][700];
static int g_nlog;
static void log_sink(int level, const char *line, void *ctx)
{
    (void)level, (void)ctx;
    if (g_nlog < 256)
        snprintf(g_log[g_nlog++], sizeof g_log[0], "%s", line);
}
static int log_count(const char *sub)
{
    int n = 0;
    for (int i = 0; i < g_nlog; i++)
        n += strstr(g_log[i], sub) != NULL;
    return n;
}
static void log_dump(void)
{
    for (int i = 0; i < g_nlog; i++)
        print_message("  log: %s", g_log[i]);
}
#define assert_logged_n(sub, n)                                                     \
    do {                                                                            \
        if (log_count(sub) != (n)) {                                                \
            log_dump();                                                             \
            fail_msg("want %d log line(s) containing '%s', got %d", (n), (sub), log_count(sub)); \
        }                                                                           \
    } while (0)

static void path_in(char *out, size_t outsz, const char *name) { snprintf(out, outsz, "%s/%s", g_tmp, name); }

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    assert_int_equal(chmod(to, mode), 0);
}

static uid_t nobody_uid(void)
{
    struct passwd *pw = getpwnam("nobody");
    return pw ? pw->pw_uid : (uid_t)65534;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/clrmux-test-safety-XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    const char *fd = getenv("CLRMUX_FAKE_DIR");
    char real[PATH_MAX], lib[PATH_MAX];
    if (!realpath(fd && *fd ? fd : "build/fake", real) || strlen(real) >= sizeof g_fake_dir)
        return -1;
    memcpy(g_fake_dir, real, strlen(real) + 1);
    snprintf(lib, sizeof lib, "%s/../libclrmux.so", g_fake_dir);
    if (!realpath(lib, real) || strlen(real) >= sizeof g_lib)
        return -1;
    memcpy(g_lib, real, strlen(real) + 1);
    unsetenv("CLRMUX_LOG_LEVEL");
    setenv("CLRMUX_LOG_FILE", "/dev/null", 1);
    clrmux_log_open("/dev/null");
    clrmux_log_set_sink(log_sink, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    clrmux_log_set_sink(NULL, NULL);
    char cmd[2 * sizeof g_tmp + 64];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", g_tmp, g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- trust: ownership and modes ----------------------------------------------------------- */

static void assert_trust(const char *path, int want_ok, const char *why_sub)
{
    char real[PATH_MAX], why[PATH_MAX + 200] = "";
    int rc = clrmux_path_trusted(path, real, sizeof real, why, sizeof why);
    if ((rc == 0) != want_ok || (!want_ok && !strstr(why, why_sub)))
        fail_msg("%s: want %s ('%s'), got rc %d ('%s')", path, want_ok ? "trusted" : "refused", why_sub, rc, why);
}

static void test_trust_modes(void **state)
{
    (void)state;
    char p[PATH_MAX], d[1200], q[1300];
    /* a mktemp -d folder under the sticky, world-writable /tmp */
    path_in(p, sizeof p, "ok.so");
    write_text(p, "x", 0644);
    assert_trust(p, 1, "");
    assert_trust(g_tmp, 1, "");
    write_text(p, "x", 0666);
    assert_trust(p, 0, "ok.so is world-writable (mode 0666)");
    write_text(p, "x", 0664);
    assert_trust(p, 0, "ok.so is group-writable (mode 0664)");
    write_text(p, "x", 0755);
    /* a folder writable by others, without the sticky bit, above the file */
    path_in(d, sizeof d, "open");
    assert_int_equal(mkdir(d, 0777), 0);
    assert_int_equal(chmod(d, 0777), 0);
    snprintf(q, sizeof q, "%s/lib.so", d);
    write_text(q, "x", 0644);
    assert_trust(q, 0, "open is world-writable (mode 0777)");
    /* the same folder with the sticky bit (like /tmp): its own entries decide */
    assert_int_equal(chmod(d, 01777), 0);
    assert_trust(q, 1, "");
    /* a missing file */
    path_in(q, sizeof q, "missing.so");
    assert_trust(q, 0, "cannot resolve");
}

static void test_trust_owner_and_links(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* making a file another user's needs root */
    uid_t nobody = nobody_uid();
    char p[PATH_MAX], d[1200], q[1300], l[1400], want[64];
    snprintf(want, sizeof want, "owned by uid %u", (unsigned)nobody);
    path_in(p, sizeof p, "theirs.so");
    write_text(p, "x", 0644);
    assert_int_equal(chown(p, nobody, (gid_t)-1), 0);
    assert_trust(p, 0, want);
    /* a folder of another user, under a sticky folder, and a symlink into it */
    path_in(d, sizeof d, "sticky");
    assert_int_equal(mkdir(d, 01777), 0);
    assert_int_equal(chmod(d, 01777), 0);
    snprintf(q, sizeof q, "%s/evil", d);
    assert_int_equal(mkdir(q, 0755), 0);
    snprintf(l, sizeof l, "%s/lib.so", q);
    write_text(l, "x", 0644);
    assert_int_equal(chown(q, nobody, (gid_t)-1), 0);
    path_in(p, sizeof p, "link.so");
    assert_int_equal(symlink(l, p), 0);
    assert_trust(p, 0, want);
    /* a symlink planted by another user in a sticky folder, to a trusted file */
    char good[PATH_MAX], planted[1300];
    path_in(good, sizeof good, "good.so");
    write_text(good, "x", 0644);
    snprintf(planted, sizeof planted, "%s/planted.so", d);
    assert_int_equal(symlink(good, planted), 0);
    assert_int_equal(lchown(planted, nobody, (gid_t)-1), 0);
    assert_trust(planted, 0, "is a symlink owned by uid");
    /* the same link made by this user is fine */
    assert_int_equal(lchown(planted, 0, (gid_t)-1), 0);
    assert_trust(planted, 1, "");
}

/* ---- loader.conf: special files, size, key limits, insecure files ------------------------ */

static struct clrmux_config *new_cfg(void)
{
    struct clrmux_config *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    return cfg;
}

static void assert_diag_has(const struct clrmux_config *cfg, const char *sub)
{
    for (size_t i = 0; i < cfg->ndiags; i++)
        if (strstr(cfg->diags[i].msg, sub))
            return;
    for (size_t i = 0; i < cfg->ndiags; i++)
        print_message("  diag: %s\n", cfg->diags[i].msg);
    fail_msg("no diagnostic contains '%s'", sub);
}

static void test_config_special_files(void **state)
{
    (void)state;
    struct clrmux_config *cfg = new_cfg();
    char fifo[PATH_MAX];
    path_in(fifo, sizeof fifo, "fifo.conf");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* a FIFO without a writer: open() must not block, nothing is read */
    clrmux_config_load(fifo, cfg);
    assert_int_equal(cfg->found, 0);
    assert_diag_has(cfg, "is a FIFO, not a regular file; not read");
    clrmux_config_free(cfg);
    clrmux_config_load("/dev/zero", cfg); /* would spin forever if read */
    assert_int_equal(cfg->found, 0);
    assert_diag_has(cfg, "/dev/zero is a character device, not a regular file; not read");
    clrmux_config_free(cfg);
    clrmux_config_load("/dev/urandom", cfg);
    assert_int_equal(cfg->found, 0);
    assert_diag_has(cfg, "is a character device");
    clrmux_config_free(cfg);
    clrmux_config_load(g_tmp, cfg);
    assert_int_equal(cfg->found, 0);
    assert_diag_has(cfg, "is a directory, not a regular file; not read");
    assert_int_equal(cfg->ndiags, 1); /* not also "no [child] section" */
    clrmux_config_free(cfg);
    free(cfg);
}

static void test_config_size_limit(void **state)
{
    (void)state;
    struct clrmux_config *cfg = new_cfg();
    char p[PATH_MAX];
    path_in(p, sizeof p, "big.conf");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    const char *head = "[child a]\nbuiltin = tracer\n";
    assert_int_equal(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    assert_int_equal(ftruncate(fd, CLRMUX_CONFIG_MAX_BYTES + 1), 0);
    close(fd);
    clrmux_config_load(p, cfg);
    assert_int_equal(cfg->found, 0);
    assert_int_equal(cfg->nchildren, 0);
    assert_diag_has(cfg, "bytes a configuration may have; not read");
    clrmux_config_free(cfg);
    /* exactly at the limit: read */
    fd = open(p, O_WRONLY);
    assert_int_equal(ftruncate(fd, CLRMUX_CONFIG_MAX_BYTES), 0);
    close(fd);
    clrmux_config_load(p, cfg);
    assert_int_equal(cfg->found, 1);
    assert_int_equal(cfg->nchildren, 1);
    clrmux_config_free(cfg);
    free(cfg);
}

static void test_config_key_limits(void **state)
{
    (void)state;
    struct clrmux_config *cfg = new_cfg();
    size_t cap = 64 + (size_t)(CLRMUX_MAX_KEYS + 100) * 24;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n = (size_t)snprintf(text, cap, "[child t]\nbuiltin = tracer\n");
    for (int i = 0; i < CLRMUX_MAX_CHILD_KEYS + 50; i++)
        n += (size_t)snprintf(text + n, cap - n, "k%d = v\n", i);
    clrmux_config_load_string(text, "loader.conf", "/etc", cfg);
    assert_int_equal(cfg->children[0].nkvs, CLRMUX_MAX_CHILD_KEYS);
    assert_int_equal(cfg->children[0].keys_dropped, 50);
    assert_int_equal(cfg->ndiags, 1); /* one line, not 50 */
    assert_diag_has(cfg, "more than 1024 keys");
    clrmux_config_free(cfg);
    /* the file-wide bound across many children */
    n = 0;
    for (int c = 0; c < 5; c++) {
        n += (size_t)snprintf(text + n, cap - n, "[child t%d]\nbuiltin = tracer\n", c);
        for (int i = 0; i < CLRMUX_MAX_CHILD_KEYS; i++)
            n += (size_t)snprintf(text + n, cap - n, "k%d = v\n", i);
    }
    clrmux_config_load_string(text, "loader.conf", "/etc", cfg);
    assert_int_equal(cfg->nkvs_total, CLRMUX_MAX_KEYS);
    assert_int_equal(cfg->children[4].nkvs, 0);
    clrmux_config_free(cfg);
    free(text);
    free(cfg);
}

static void test_config_insecure(void **state)
{
    (void)state;
    struct clrmux_config *cfg = new_cfg();
    char p[PATH_MAX];
    path_in(p, sizeof p, "ww.conf");
    write_text(p, "[loader]\nlog_file = /tmp/x.log\n[child a]\nbuiltin = tracer\n", 0666);
    clrmux_config_load(p, cfg);
    assert_int_equal(cfg->found, 0);
    assert_int_equal(cfg->nchildren, 0);
    assert_int_equal(cfg->has_log_file, 0); /* nothing of the file is used */
    assert_diag_has(cfg, "refused: ");
    assert_diag_has(cfg, "ww.conf is world-writable (mode 0666)");
    clrmux_config_free(cfg);
    write_text(p, "[loader]\nallow_insecure_paths = yes\n[child a]\nbuiltin = tracer\n", 0666);
    clrmux_config_load(p, cfg);
    assert_int_equal(cfg->found, 1);
    assert_int_equal(cfg->allow_insecure_paths, 1);
    assert_int_equal(cfg->nchildren, 1);
    assert_diag_has(cfg, "used anyway (allow_insecure_paths = true)");
    assert_int_equal(cfg->diags[0].level, CLRMUX_LOG_WARN);
    clrmux_config_free(cfg);
    clrmux_config_load_string("[loader]\nallow_insecure_paths = maybe\n", "x", "/", cfg);
    assert_int_equal(cfg->allow_insecure_paths, 0);
    assert_diag_has(cfg, "allow_insecure_paths = 'maybe' is not true or false");
    clrmux_config_free(cfg);
    free(cfg);
}

/* ---- the log file --------------------------------------------------------------------------- */

static void test_log_open_safely(void **state)
{
    (void)state;
    char victim[PATH_MAX], lnk[PATH_MAX], fifo[PATH_MAX], fresh[PATH_MAX], hard[PATH_MAX];
    path_in(victim, sizeof victim, "victim");
    write_text(victim, "precious\n", 0644);
    path_in(lnk, sizeof lnk, "link.log");
    assert_int_equal(symlink(victim, lnk), 0);
    errno = 0;
    assert_int_equal(clrmux_log_open(lnk), -1);
    assert_int_equal(errno, ELOOP);
    path_in(fifo, sizeof fifo, "fifo.log");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(clrmux_log_open(fifo), -1); /* no reader: ENXIO, never blocks */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_int_equal(clrmux_log_open(fifo), -1); /* with a reader: not a regular file */
    assert_int_equal(errno, EINVAL);
    close(rd);
    path_in(hard, sizeof hard, "hard.log");
    assert_int_equal(link(victim, hard), 0);
    assert_int_equal(clrmux_log_open(hard), -1);
    assert_int_equal(errno, EMLINK);
    path_in(fresh, sizeof fresh, "fresh-%p.log");
    mode_t old = umask(0);
    assert_int_equal(clrmux_log_open(fresh), 0);
    umask(old);
    clrmux_log(CLRMUX_LOG_ERROR, "a line");
    clrmux_log_open("/dev/null");
    char expanded[PATH_MAX];
    assert_int_equal(clrmux_expand_pid(fresh, expanded, sizeof expanded), 0);
    struct stat st;
    assert_int_equal(stat(expanded, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_true(st.st_size > 0);
    FILE *f = fopen(victim, "r");
    char buf[64] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "precious\n");
}

/* ---- loader loops --------------------------------------------------------------------------- */

static struct clrmux_mux *g_kept[16];
static int g_nkept;

static HRESULT initialize_with(const char *conf_text, struct fake_runtime *rt, struct clrmux_mux **out)
{
    char p[PATH_MAX];
    static int seq;
    char name[32];
    snprintf(name, sizeof name, "loop-%d.conf", ++seq);
    path_in(p, sizeof p, name);
    write_text(p, conf_text, 0644);
    setenv("CLRMUX_CONFIG", p, 1);
    IClassFactory *cf = NULL;
    assert_int_equal(DllGetClassObject(&k_clrmux_clsid, &IID_IClassFactory, (void **)&cf), S_OK);
    ICorProfilerCallback11 *cb = NULL;
    assert_int_equal(cf->lpVtbl->CreateInstance(cf, NULL, &IID_ICorProfilerCallback2, (void **)&cb), S_OK);
    struct clrmux_mux *m = (struct clrmux_mux *)((char *)cb - offsetof(struct clrmux_mux, iface));
    if (g_nkept < 16)
        g_kept[g_nkept++] = m;
    g_nlog = 0;
    HRESULT hr = cb->lpVtbl->Initialize(cb, fake_runtime_unknown(rt));
    unsetenv("CLRMUX_CONFIG");
    *out = m;
    return hr;
}

/* loader.conf lists libclrmux.so itself (another copy of clrmux: the unit test's mux is
 * linked in statically) beside a working child: refused with one line, the other loads. */
static void test_loop_child_is_clrmux(void **state)
{
    (void)state;
    clrmux_the_mux = NULL;
    char conf[4 * PATH_MAX];
    snprintf(conf, sizeof conf,
             "[child self]\npath = %s\nclsid = " CLRMUX_CLSID_STRING "\n"
             "[child good]\npath = %s/libnoop.so\nclsid = {D0000001-0000-0000-0000-000000000001}\n",
             g_lib, g_fake_dir);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = NULL;
    HRESULT hr = initialize_with(conf, &rt, &m);
    if (hr != S_OK)
        log_dump();
    assert_int_equal(hr, S_OK);
    assert_logged_n("is a build of clrmux", 1);
    assert_logged_n("child 'good': loaded", 1);
    assert_logged_n("loader loop: clrmux was loaded", 0);
    assert_ptr_equal(clrmux_the_mux, m);
}

/* A clrmux whose Initialize runs while a clrmux is loading its children (reached through a
 * chaining loader) refuses to start, and the live mux stays the first one. */
static void test_loop_nested_instance_refused(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    clrmux_the_mux = NULL;
    struct clrmux_mux *outer = fake_mux_new(&rt);
    assert_ptr_equal(clrmux_the_mux, outer);
    clrmux_log_set_level(CLRMUX_LOG_TRACE); /* as the outer's loader.conf might have set */
    clrmux_loop_enter(); /* as mux_Initialize does around clrmux_load_children */
    char conf[PATH_MAX + 200];
    snprintf(conf, sizeof conf, "[child good]\npath = %s/libnoop.so\nclsid = {D0000001-0000-0000-0000-000000000001}\n",
             g_fake_dir);
    struct clrmux_mux *nested = NULL;
    HRESULT hr = initialize_with(conf, &rt, &nested);
    clrmux_loop_leave();
    assert_int_equal(hr, CORPROF_E_PROFILER_CANCEL_ACTIVATION);
    assert_logged_n("loader loop: clrmux was loaded as a child profiler while clrmux", 1);
    /* nothing of the nested instance's start: no runtime line, no child, no mask (a line of the
     * outer's own threads may land in between: one CI run under qemu, loaded, logged a second
     * line here, which is printed when it happens) */
    if (g_nlog != 1)
        log_dump();
    assert_logged_n("runtime:", 0);
    assert_logged_n("child 'good'", 0);
    assert_logged_n("child profiler(s) active", 0);
    assert_int_equal(nested->nchildren, 0);
    assert_ptr_equal(clrmux_the_mux, outer);
    assert_int_equal(clrmux_log_get_level(), CLRMUX_LOG_TRACE); /* the outer's logging is untouched */
    clrmux_log_set_level(CLRMUX_LOG_INFO);
    char who[PATH_MAX];
    assert_int_equal(clrmux_loop_detect(who, sizeof who), 0);
    fake_mux_free(outer);
}

/* ---- child libraries: permissions and the logged real path ---------------------------------- */

static void test_child_permissions(void **state)
{
    (void)state;
    char src[1100], ww[PATH_MAX], link[PATH_MAX], conf[4 * PATH_MAX];
    snprintf(src, sizeof src, "%s/libnoop.so", g_fake_dir);
    path_in(ww, sizeof ww, "libww.so");
    copy_file(src, ww, 0666);
    path_in(link, sizeof link, "liblink.so");
    assert_int_equal(symlink(src, link), 0);
    snprintf(conf, sizeof conf,
             "[child ww]\npath = %s\nclsid = {D0000002-0000-0000-0000-000000000002}\n"
             "[child link]\npath = %s\nclsid = {D0000003-0000-0000-0000-000000000003}\n",
             ww, link);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = NULL;
    assert_int_equal(initialize_with(conf, &rt, &m), S_OK);
    assert_logged_n("child 'ww': refused to load", 1);
    assert_logged_n("libww.so is world-writable (mode 0666)", 1);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "child 'link': loaded (%s,", src); /* the real path, not the link */
    assert_logged_n(want, 1);

    char conf2[4 * PATH_MAX + 64];
    snprintf(conf2, sizeof conf2, "[loader]\nallow_insecure_paths = true\n%s", conf);
    assert_int_equal(initialize_with(conf2, &rt, &m), S_OK);
    assert_logged_n("loaded anyway (allow_insecure_paths = true)", 1);
    assert_logged_n("child 'ww': loaded", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_modes),
        cmocka_unit_test(test_trust_owner_and_links),
        cmocka_unit_test(test_config_special_files),
        cmocka_unit_test(test_config_size_limit),
        cmocka_unit_test(test_config_key_limits),
        cmocka_unit_test(test_config_insecure),
        cmocka_unit_test(test_log_open_safely),
        cmocka_unit_test(test_loop_child_is_clrmux),
        cmocka_unit_test(test_loop_nested_instance_refused),
        cmocka_unit_test(test_child_permissions),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
