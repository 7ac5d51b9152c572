/* The `clrmux` launcher on Windows (clrmux.exe, built by `make windows`): `clrmux ctl PID
 * COMMAND [ARGS...]` (ctl.c, over the process's named pipe: ctl_reach_win.c), --help and
 * --version. `run`, `check` and `attach` are Linux-only (src/cli/clrmux.c): on Windows a
 * process is put under clrmux at its start by the runtime's own variables
 * (CORECLR_ENABLE_PROFILING, CORECLR_PROFILER, CORECLR_PROFILER_PATH_64; docs/platforms.md).
 *
 * The arguments are taken from the wide command line and given to ctl.c as UTF-8 (what the
 * protocol speaks), so that a method name outside the ANSI code page reaches the process
 * whole. */
#if defined(_WIN32)
#include <windows.h>
#include <shellapi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"

static const char *const usage_text =
    "usage:\n"
    "  clrmux ctl PID status [--json] | trace add|remove TARGET | trace list [--json]\n"
    "                 | profile flush|start|stop | log-level LEVEL\n"
    "  clrmux --version\n"
    "\n"
    "ctl    changes and reads a process running under clrmux, through its control channel\n"
    "       (the named pipe \\\\.\\pipe\\clrmux-ctl-PID): status (children, tracer targets and\n"
    "       counts, profiler, log; --json), trace add 'Asm!Ns.Type::Method' (traced from its\n"
    "       next call, through ReJIT), trace remove, trace list, profile flush|stop|start,\n"
    "       log-level. Only the process's user, SYSTEM or an administrator may; see\n"
    "       `clrmux ctl --help`.\n"
    "\n"
    "run, check and attach are Linux-only: on Windows a .NET process runs under clrmux when it\n"
    "starts with CORECLR_ENABLE_PROFILING=1, CORECLR_PROFILER={EE712634-5BBB-4C28-8E6A-45180A97AD0B}\n"
    "and CORECLR_PROFILER_PATH_64 naming libclrmux.dll (docs/platforms.md).\n";

/* argv again, as UTF-8 from the wide command line; NULL when it cannot be had. */
static char **utf8_argv(int *argc)
{
    int n = 0;
    wchar_t **w = CommandLineToArgvW(GetCommandLineW(), &n);
    if (!w)
        return NULL;
    char **a = calloc((size_t)n + 1, sizeof *a);
    for (int i = 0; a && i < n; i++) {
        int len = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        a[i] = len > 0 ? malloc((size_t)len) : NULL;
        if (!a[i] || !WideCharToMultiByte(CP_UTF8, 0, w[i], -1, a[i], len, NULL, NULL)) {
            a = NULL; /* the process ends soon: what was taken is not given back */
            break;
        }
    }
    LocalFree(w);
    if (a)
        *argc = n;
    return a;
}

int main(int argc, char **argv)
{
    char **u = utf8_argv(&argc);
    if (u)
        argv = u;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("clrmux %s (Windows x64: ctl only)\n", CLRMUX_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "ctl") == 0)
        return clrmux_cmd_ctl(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "check") == 0 || strcmp(argv[1], "attach") == 0) {
        fprintf(stderr, "clrmux: '%s' is Linux-only; on Windows clrmux.exe has `ctl` alone\n%s", argv[1], usage_text);
        return 2;
    }
    fprintf(stderr, "clrmux: unknown command '%s'\n%s", argv[1], usage_text);
    return 2;
}
#endif
