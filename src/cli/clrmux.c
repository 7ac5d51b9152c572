/* The `clrmux` launcher:
 *
 *   clrmux run [--config FILE] [--trace 'Asm!Ns.Type::Method']... [--profile]
 *              [--child PATH=CLSID]... [--output-dir DIR] -- COMMAND [ARGS...]
 *   clrmux check [--config FILE]
 *   clrmux attach PID --config FILE [--timeout-ms N]
 *   clrmux ctl PID COMMAND [ARGS...]          (ctl.c)
 *
 * `run` sets the CORECLR_* variables that register libclrmux.so as the process's profiler,
 * writes a loader.conf into the output folder when --config is not given, runs the command,
 * returns its exit status and then says where the spans, profiles and log went. `check`
 * validates a loader.conf without running anything. Both validate through the library
 * itself (its exported clrmux_check_config: the same parser and child set-up as at
 * Initialize), so a launcher never disagrees with the libclrmux.so it launches.
 *
 * libclrmux.so is looked for beside this executable (the build folder), then in ../lib
 * (an installed tree: bin/clrmux, lib/libclrmux.so, etc/loader.conf). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/ctl.h"
#include "clrmux/clrmux.h"

#define MAX_ITEMS 256

static const char *const usage_text =
    "usage:\n"
    "  clrmux run [--config FILE] [--trace 'Asm!Ns.Type::Method']... [--profile]\n"
    "             [--child PATH=CLSID]... [--output-dir DIR] [--perf-map] -- COMMAND [ARGS...]\n"
    "  clrmux check [--config FILE] [-q|--quiet]\n"
    "  clrmux attach PID --config FILE [--timeout-ms N]\n"
    "  clrmux ctl PID status [--json] | trace add|remove TARGET | trace list [--json]\n"
    "                 | profile flush|start|stop | log-level LEVEL\n"
    "  clrmux --version\n"
    "\n"
    "run    runs COMMAND with clrmux as its .NET profiler. Without --config it writes\n"
    "       DIR/loader.conf (DIR: --output-dir, default ./clrmux-output) from the options:\n"
    "       --trace adds a span for each call of that method (built-in tracer), --profile\n"
    "       the built-in CPU/wall/exception/allocation/lock profiler, --child another\n"
    "       profiler library with the CLSID it answers. With none of these, --profile.\n"
    "       --perf-map: the runtime writes /tmp/perf-PID.map (DOTNET_PerfMapEnabled=1), so\n"
    "       that perf and bpftrace name JIT-compiled methods. Exits with COMMAND's exit status.\n"
    "check  validates a loader.conf (default: $CLRMUX_CONFIG, else the installed\n"
    "       etc/loader.conf, else loader.conf beside libclrmux.so): every problem as\n"
    "       FILE:LINE: error|warning: message; exit status 1 when there are errors.\n"
    "       -q: errors and warnings only (no info notes).\n"
    "attach loads clrmux into the running .NET process PID (its diagnostics port,\n"
    "       DiagnosticsClient.AttachProfiler): clrmux reads FILE as its loader.conf and\n"
    "       attaches every child that implements ICorProfilerCallback3. Needs dotnet and\n"
    "       the tool of tools/attach (`make attach-tool`; $CLRMUX_ATTACH_TOOL overrides).\n"
    "ctl    changes and reads a process running under clrmux, through its control channel:\n"
    "       status (children, tracer targets and counts, profiler, log; --json), trace add\n"
    "       'Asm!Ns.Type::Method' (traced from its next call, through ReJIT), trace remove,\n"
    "       trace list, profile flush (write the current period now), profile stop|start (the\n"
    "       sampler), log-level. Only the process's user or root may; see `clrmux ctl --help`.\n";

static char lib_dir[PATH_MAX];   /* folder of libclrmux.so */
static char lib_path[PATH_MAX];  /* libclrmux.so */
static char home_dir[PATH_MAX];  /* the installed tree's root, or the build folder */

/* snprintf into a path buffer; -1 (and "") when the result does not fit */
static int pathf(char *out, size_t outsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pathf(char *out, size_t outsz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outsz, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outsz) {
        out[0] = 0;
        return -1;
    }
    return 0;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int find_library(void)
{
    char exe[PATH_MAX];
    if (!realpath("/proc/self/exe", exe)) {
        fprintf(stderr, "clrmux: cannot find my own path (/proc/self/exe): %s\n", strerror(errno));
        return -1;
    }
    char *slash = strrchr(exe, '/');
    *slash = 0;
    const char *env = getenv("CLRMUX_LIBRARY");
    if (env && *env) {
        if (!realpath(env, lib_path)) {
            fprintf(stderr, "clrmux: CLRMUX_LIBRARY=%s: %s\n", env, strerror(errno));
            return -1;
        }
    } else {
        pathf(lib_path, sizeof lib_path, "%s/libclrmux.so", exe);
        if (!is_file(lib_path)) {
            char up[PATH_MAX];
            pathf(up, sizeof up, "%s/../lib/libclrmux.so", exe);
            if (!realpath(up, lib_path) || !is_file(lib_path)) {
                fprintf(stderr, "clrmux: libclrmux.so is neither in %s nor in %s/../lib (set CLRMUX_LIBRARY)\n", exe,
                        exe);
                return -1;
            }
        }
    }
    snprintf(lib_dir, sizeof lib_dir, "%s", lib_path);
    *strrchr(lib_dir, '/') = 0;
    /* an installed tree: PREFIX/lib/libclrmux.so with PREFIX/etc/loader.conf */
    char up[PATH_MAX + 8];
    snprintf(up, sizeof up, "%s/..", lib_dir);
    if (!realpath(up, home_dir))
        snprintf(home_dir, sizeof home_dir, "%s", lib_dir);
    return 0;
}

/* The configuration the library would read when CLRMUX_CONFIG is not given on the command line. */
static void default_config(char *out, size_t outsz)
{
    const char *env = getenv("CLRMUX_CONFIG");
    if (env && *env) {
        snprintf(out, outsz, "%s", env);
        return;
    }
    if (pathf(out, outsz, "%s/etc/loader.conf", home_dir) != 0 || !is_file(out))
        pathf(out, outsz, "%s/loader.conf", lib_dir);
}

/* ---- check -------------------------------------------------------------------------- */

/* The check's messages, printed in line order once the check is done (the parser's problems
 * come first, then each child's). */
struct message {
    int level, line, seq;
    char *text;
};

struct report_opts {
    int verbose; /* print info notes too */
    struct message *msgs;
    int n, cap;
    char file[PATH_MAX];
};

static void collect(int level, const char *file, int line, const char *message, void *ctx)
{
    struct report_opts *o = ctx;
    if (level >= 2 && !o->verbose)
        return;
    snprintf(o->file, sizeof o->file, "%s", file);
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        struct message *m = realloc(o->msgs, (size_t)cap * sizeof *m);
        if (!m)
            return;
        o->msgs = m;
        o->cap = cap;
    }
    o->msgs[o->n] = (struct message){level, line, o->n, strdup(message)};
    o->n++;
}

static int by_line(const void *a, const void *b)
{
    const struct message *x = a, *y = b;
    unsigned lx = (unsigned)x->line - 1, ly = (unsigned)y->line - 1; /* line 0 (the whole file) last */
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void print_messages(struct report_opts *o)
{
    qsort(o->msgs, (size_t)o->n, sizeof *o->msgs, by_line);
    for (int i = 0; i < o->n; i++) {
        const struct message *m = &o->msgs[i];
        const char *what = m->level <= 0 ? "error" : m->level == 1 ? "warning" : "note";
        if (m->line > 0)
            fprintf(stderr, "%s:%d: %s: %s\n", o->file, m->line, what, m->text ? m->text : "");
        else
            fprintf(stderr, "%s: %s: %s\n", o->file, what, m->text ? m->text : "");
        free(m->text);
    }
    free(o->msgs);
    o->msgs = NULL;
    o->n = o->cap = 0;
}

typedef int (*check_fn)(const char *, clrmux_check_report_fn, void *, struct clrmux_check_result *);

static int run_check(const char *config, int verbose, struct clrmux_check_result *res)
{
    void *lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "clrmux: cannot load %s: %s\n", lib_path, dlerror());
        return -1;
    }
    check_fn check = (check_fn)dlsym(lib, "clrmux_check_config");
    if (!check) {
        fprintf(stderr, "clrmux: %s has no clrmux_check_config (a library from another version?)\n", lib_path);
        return -1;
    }
    struct report_opts o = {.verbose = verbose};
    int rc = check(config, collect, &o, res);
    print_messages(&o);
    return rc;
}

static int cmd_check(int argc, char **argv)
{
    char config[PATH_MAX] = "";
    int quiet = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            snprintf(config, sizeof config, "%s", argv[++i]);
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            snprintf(config, sizeof config, "%s", argv[i] + 9);
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            quiet = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else {
            fprintf(stderr, "clrmux check: unknown argument '%s'\n%s", argv[i], usage_text);
            return 2;
        }
    }
    if (!config[0])
        default_config(config, sizeof config);
    struct clrmux_check_result *res = calloc(1, sizeof *res);
    if (!res)
        return 2;
    int rc = run_check(config, !quiet, res);
    if (rc < 0) {
        free(res);
        return 2;
    }
    fprintf(stderr, "%s: %d error%s, %d warning%s, %d child%s would load\n", config, res->errors,
            res->errors == 1 ? "" : "s", res->warnings, res->warnings == 1 ? "" : "s", res->active_children,
            res->active_children == 1 ? "" : "ren");
    int failed = res->errors > 0;
    free(res);
    return failed;
}

/* ---- run ---------------------------------------------------------------------------- */

static pid_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Writes DIR/loader.conf from the options. Returns 0, or -1 after saying why. */
static int write_config(const char *path, char **traces, int ntraces, int profile, char **children, int nchildren)
{
    /* never through a symbolic link someone else left there */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "clrmux run: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "; written by `clrmux run`; relative paths are from this file's folder\n"
               "[loader]\nlog_level = info\nlog_file = clrmux-%%p.log\n");
    for (int i = 0; i < nchildren; i++) {
        char *eq = strrchr(children[i], '=');
        *eq = 0;
        /* relative to the current folder, as a user means it (the file is elsewhere) */
        char abs[PATH_MAX], cwd[PATH_MAX];
        if (!realpath(children[i], abs)) {
            if (children[i][0] == '/' || !getcwd(cwd, sizeof cwd) ||
                pathf(abs, sizeof abs, "%s/%s", cwd, children[i]) != 0)
                snprintf(abs, sizeof abs, "%s", children[i]);
        }
        fprintf(f, "\n[child child%d]\npath = %s\nclsid = %s\n", i + 1, abs, eq + 1);
        *eq = '=';
    }
    if (ntraces) {
        fprintf(f, "\n[child tracer]\nbuiltin = tracer\noutput = traces-%%p.otlp.jsonl\n");
        for (int i = 0; i < ntraces; i++)
            fprintf(f, "trace = %s\n", traces[i]);
    }
    if (profile)
        fprintf(f, "\n[child profiler]\nbuiltin = profiler\noutput_dir = profiles\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "clrmux run: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int mkdirs(const char *dir)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Prints the files that match `tmpl` ("%p" = any pid) and changed since `since`. */
static int list_outputs(const char *label, const char *tmpl, time_t since)
{
    char dir[PATH_MAX], pat[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", tmpl);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    snprintf(pat, sizeof pat, "%s", base);
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    char *pp = strstr(pat, "%p");
    size_t pre = pp ? (size_t)(pp - pat) : strlen(pat);
    const char *post = pp ? pp + 2 : "";
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (pp) {
            if (len < pre + strlen(post) || strncmp(e->d_name, pat, pre) != 0 ||
                strcmp(e->d_name + len - strlen(post), post) != 0)
                continue;
        } else if (strcmp(e->d_name, pat) != 0) {
            continue;
        }
        char full[PATH_MAX * 2];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime < since)
            continue;
        fprintf(stderr, "clrmux:   %-9s %s (%lld bytes)\n", label, full, (long long)st.st_size);
        n++;
    }
    closedir(d);
    return n;
}

static int cmd_run(int argc, char **argv)
{
    char config[PATH_MAX] = "", outdir[PATH_MAX] = "clrmux-output";
    static char *traces[MAX_ITEMS], *children[MAX_ITEMS];
    int ntraces = 0, nchildren = 0, profile = 0, perf_map = 0, i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--profile") == 0) {
            profile = 1;
        } else if (strcmp(a, "--perf-map") == 0) {
            perf_map = 1;
        } else if ((strcmp(a, "--config") == 0 || strcmp(a, "--trace") == 0 || strcmp(a, "--child") == 0 ||
                    strcmp(a, "--output-dir") == 0) && !v) {
            fprintf(stderr, "clrmux run: %s needs a value\n", a);
            return 2;
        } else if (strcmp(a, "--config") == 0) {
            snprintf(config, sizeof config, "%s", argv[++i]);
        } else if (strcmp(a, "--output-dir") == 0) {
            snprintf(outdir, sizeof outdir, "%s", argv[++i]);
        } else if (strcmp(a, "--trace") == 0) {
            if (ntraces == MAX_ITEMS) { fprintf(stderr, "clrmux run: too many --trace\n"); return 2; }
            traces[ntraces++] = argv[++i];
        } else if (strcmp(a, "--child") == 0) {
            if (nchildren == MAX_ITEMS) { fprintf(stderr, "clrmux run: too many --child\n"); return 2; }
            if (!strchr(v, '=')) {
                fprintf(stderr, "clrmux run: --child %s: expected PATH=CLSID\n", v);
                return 2;
            }
            children[nchildren++] = argv[++i];
        } else {
            fprintf(stderr, "clrmux run: unknown option '%s' (the command goes after --)\n%s", a, usage_text);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "clrmux run: no command given (clrmux run [options] -- COMMAND ...)\n");
        return 2;
    }
    char **cmd = argv + i;
    if (config[0] && (ntraces || nchildren || profile)) {
        fprintf(stderr, "clrmux run: --config names the children; --trace, --profile and --child write a "
                        "loader.conf instead; use one or the other\n");
        return 2;
    }
    if (mkdirs(outdir) != 0) {
        fprintf(stderr, "clrmux run: cannot create %s: %s\n", outdir, strerror(errno));
        return 2;
    }
    char absout[PATH_MAX];
    if (!realpath(outdir, absout)) {
        fprintf(stderr, "clrmux run: %s: %s\n", outdir, strerror(errno));
        return 2;
    }
    /* the configuration written there decides which libraries the app loads: the folder must
     * be ours and not writable by others */
    struct stat ost;
    if (!config[0] && (stat(absout, &ost) != 0 || ost.st_uid != geteuid() || (ost.st_mode & (S_IWGRP | S_IWOTH)))) {
        fprintf(stderr, "clrmux run: %s is not a folder of yours that only you can write; choose another "
                        "--output-dir\n", absout);
        return 2;
    }
    char conf[PATH_MAX];
    if (config[0]) {
        if (!realpath(config, conf)) {
            fprintf(stderr, "clrmux run: --config %s: %s\n", config, strerror(errno));
            return 2;
        }
    } else {
        if (!ntraces && !nchildren)
            profile = 1;
        if (pathf(conf, sizeof conf, "%s/loader.conf", absout) != 0) {
            fprintf(stderr, "clrmux run: %s: path too long\n", absout);
            return 2;
        }
        if (write_config(conf, traces, ntraces, profile, children, nchildren) != 0)
            return 2;
    }
    struct clrmux_check_result *res = calloc(1, sizeof *res);
    if (!res)
        return 2;
    /* a check in a child process: it loads the children's libraries, which must not stay
     * in this one (it only waits for the command) */
    int pfd[2];
    if (pipe(pfd) != 0)
        return 2;
    pid_t cp = fork();
    if (cp == 0) {
        close(pfd[0]);
        int rc = run_check(conf, 0, res);
        if (rc < 0)
            _exit(2);
        ssize_t w = write(pfd[1], res, sizeof *res);
        _exit(w == (ssize_t)sizeof *res ? 0 : 2);
    }
    close(pfd[1]);
    size_t got = 0;
    while (got < sizeof *res) {
        ssize_t r = read(pfd[0], (char *)res + got, sizeof *res - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(pfd[0]);
    int st = 0;
    waitpid(cp, &st, 0);
    if (got != sizeof *res) {
        free(res);
        return 2;
    }
    if (res->errors)
        fprintf(stderr, "clrmux: %s has %d error%s (above); the command runs anyway, without what they skip\n",
                conf, res->errors, res->errors == 1 ? "" : "s");

    fprintf(stderr, "clrmux: running %s under %s with %s\n", cmd[0], lib_path, conf);
    const char *old = getenv("CORECLR_PROFILER");
    if (old && *old && strcasecmp(old, CLRMUX_CLSID_STRING) != 0)
        fprintf(stderr, "clrmux: replacing CORECLR_PROFILER=%s (list that profiler as a child: --child PATH=%s)\n",
                old, old);
    setenv("CORECLR_ENABLE_PROFILING", "1", 1);
    setenv("CORECLR_PROFILER", CLRMUX_CLSID_STRING, 1);
    setenv("CORECLR_PROFILER_PATH", lib_path, 1);
    setenv("CORECLR_PROFILER_PATH_64", lib_path, 1); /* wins over _PATH on 64-bit runtimes */
    unsetenv("CORECLR_PROFILER_PATH_32");
    setenv("CLRMUX_CONFIG", conf, 1);
    if (perf_map) { /* read by the runtime at its start, before it loads a profiler */
        const char *pm = getenv("DOTNET_PerfMapEnabled");
        if (pm && *pm && strcmp(pm, "0") != 0)
            fprintf(stderr, "clrmux: DOTNET_PerfMapEnabled=%s kept\n", pm);
        else
            setenv("DOTNET_PerfMapEnabled", "1", 1);
        fprintf(stderr, "clrmux: the runtime writes its perf map: /tmp/perf-PID.map (perf report names JIT-compiled "
                        "methods from it)\n");
    }
    time_t start = time(NULL);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    child_pid = fork();
    if (child_pid < 0) {
        fprintf(stderr, "clrmux run: fork: %s\n", strerror(errno));
        free(res);
        return 2;
    }
    if (child_pid == 0) {
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL), signal(SIGQUIT, SIG_DFL);
        execvp(cmd[0], cmd);
        fprintf(stderr, "clrmux run: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(child_pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (WIFSIGNALED(status))
        fprintf(stderr, "clrmux: %s was killed by signal %d\n", cmd[0], WTERMSIG(status));
    else
        fprintf(stderr, "clrmux: %s exited with status %d\n", cmd[0], code);

    int n = 0;
    if (res->traces[0]) n += list_outputs("spans", res->traces, start);
    if (res->profiles_dir[0]) {
        char tmpl[PATH_MAX + 16];
        snprintf(tmpl, sizeof tmpl, "%s/%%p", res->profiles_dir);
        n += list_outputs("profile", tmpl, start);
    }
    if (res->log_file[0]) n += list_outputs("log", res->log_file, start);
    else fprintf(stderr, "clrmux:   log       went to the command's standard error (log_file is not set)\n");
    if (!n)
        fprintf(stderr, "clrmux:   no span, profile or log file was written (was the command a .NET process?)\n");
    free(res);
    return code;
}

/* attach: runs the C# tool (tools/attach, built into <build>/tools/attach or installed into
 * share/clrmux/attach) with dotnet: PID, libclrmux.so, the config's absolute path, timeout. */
static int cmd_attach(int argc, char **argv)
{
    const char *pid = NULL, *config = NULL, *timeout = "10000";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            timeout = argv[++i];
        else if (!pid && argv[i][0] >= '1' && argv[i][0] <= '9' && strspn(argv[i], "0123456789") == strlen(argv[i]))
            pid = argv[i];
        else {
            fprintf(stderr, "clrmux attach: unexpected argument '%s'\n%s", argv[i], usage_text);
            return 2;
        }
    }
    if (!pid || !config) {
        fprintf(stderr, "clrmux attach: PID and --config FILE are required\n%s", usage_text);
        return 2;
    }
    char conf[PATH_MAX], tool[PATH_MAX];
    if (!realpath(config, conf) || !is_file(conf)) {
        fprintf(stderr, "clrmux attach: %s: no such file\n", config);
        return 2;
    }
    const char *env = getenv("CLRMUX_ATTACH_TOOL");
    if (env && *env)
        pathf(tool, sizeof tool, "%s", env);
    else if (pathf(tool, sizeof tool, "%s/tools/attach/clrmux-attach.dll", lib_dir) != 0 || !is_file(tool))
        pathf(tool, sizeof tool, "%s/share/clrmux/attach/clrmux-attach.dll", home_dir);
    if (!is_file(tool)) {
        fprintf(stderr, "clrmux attach: the attach tool %s is missing (make attach-tool)\n", tool);
        return 2;
    }
    char *cmd[] = {"dotnet", tool, (char *)pid, lib_path, conf, (char *)timeout, NULL};
    execvp(cmd[0], cmd);
    fprintf(stderr, "clrmux attach: cannot run dotnet: %s\n", strerror(errno));
    return 127;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("clrmux %s\n", CLRMUX_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "ctl") == 0)
        return clrmux_cmd_ctl(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "check") != 0 && strcmp(argv[1], "attach") != 0) {
        fprintf(stderr, "clrmux: unknown command '%s'\n%s", argv[1], usage_text);
        return 2;
    }
    if (find_library() != 0)
        return 2;
    if (strcmp(argv[1], "check") == 0)
        return cmd_check(argc - 2, argv + 2);
    if (strcmp(argv[1], "attach") == 0)
        return cmd_attach(argc - 2, argv + 2);
    return cmd_run(argc - 2, argv + 2);
}
