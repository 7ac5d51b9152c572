/* The last gasp on Windows (src/common/lastgasp_win.c), under Wine: flush functions called
 * with the cause and final 0 by clrmux_lastgasp_fire, none after unregister; in a child
 * process (this program run again), exit() runs the flush once with "exit" and the exit code
 * is kept, and a console control event (Ctrl+C on a console of the child's own) runs the
 * flush with "Ctrl+Break" before the default handler ends the process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <windows.h>

#include "common/lastgasp.h"
#include "common/log.h"

static int calls, last_final = -1;
static char last_cause[64];
static char g_self[MAX_PATH];

static void flush_fn(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    assert_true(deadline_ns > clrmux_mono_ns());
    calls += *(int *)ctx;
    last_final = final;
    snprintf(last_cause, sizeof last_cause, "%s", cause);
}

static void test_fire_and_unregister(void **state)
{
    (void)state;
    static int one = 1;
    assert_int_equal(clrmux_lastgasp_register(flush_fn, &one), 0);
    assert_int_equal(clrmux_lastgasp_registered(), 1);
    assert_int_equal(clrmux_lastgasp_fire("test"), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(last_final, 0); /* not the end: still registered */
    assert_string_equal(last_cause, "test");
    clrmux_lastgasp_now(); /* an unhandled exception: once per thread */
    clrmux_lastgasp_now();
    assert_int_equal(calls, 2);
    assert_string_equal(last_cause, "unhandled exception");
    clrmux_lastgasp_unregister(flush_fn, &one);
    assert_int_equal(clrmux_lastgasp_registered(), 0);
    clrmux_lastgasp_fire("test");
    assert_int_equal(calls, 2);
}

/* ---- the child process ------------------------------------------------------------- */

static char g_out[MAX_PATH];
/* the child's flush: appends "CAUSE FINAL" to its output file */
static void child_flush(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    (void)ctx, (void)deadline_ns;
    FILE *f = fopen(g_out, "a");
    if (f) {
        fprintf(f, "%s %d\n", cause, final);
        fclose(f);
    }
}

static int child_main(const char *mode, const char *out)
{
    snprintf(g_out, sizeof g_out, "%s", out);
    if (clrmux_lastgasp_register(child_flush, NULL) != 0)
        return 90;
    if (strcmp(mode, "child-exit") == 0)
        exit(3);
    /* child-ctrl: a console of its own (Wine's unix console takes no control events), Ctrl+C
     * to every process on it (this one), then wait: the default handler ends the process */
    FreeConsole();
    if (!AllocConsole())
        return 91;
    if (!GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0))
        return 92;
    Sleep(20000);
    return 93;
}

static char g_tmp[MAX_PATH];

/* Runs this program as `mode` with output file `out` (removed first); returns the process. */
static HANDLE spawn(const char *mode, const char *out, DWORD flags)
{
    DeleteFileA(out);
    char cmd[3 * MAX_PATH];
    snprintf(cmd, sizeof cmd, "\"%s\" %s \"%s\"", g_self, mode, out);
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    assert_true(CreateProcessA(NULL, cmd, NULL, NULL, FALSE, flags, NULL, NULL, &si, &pi));
    CloseHandle(pi.hThread);
    return pi.hProcess;
}

static const char *slurp(const char *path)
{
    static char buf[512];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

static void test_exit_flushes_once(void **state)
{
    (void)state;
    char out[MAX_PATH];
    snprintf(out, sizeof out, "%s\\lastgasp-exit.txt", g_tmp);
    HANDLE p = spawn("child-exit", out, 0);
    assert_int_equal(WaitForSingleObject(p, 30000), WAIT_OBJECT_0);
    DWORD code = 0;
    GetExitCodeProcess(p, &code);
    CloseHandle(p);
    assert_int_equal(code, 3);
    assert_string_equal(slurp(out), "exit 1\n");
    DeleteFileA(out);
}

static void test_console_event_flushes(void **state)
{
    (void)state;
    char out[MAX_PATH];
    snprintf(out, sizeof out, "%s\\lastgasp-ctrl.txt", g_tmp);
    HANDLE p = spawn("child-ctrl", out, DETACHED_PROCESS);
    assert_int_equal(WaitForSingleObject(p, 30000), WAIT_OBJECT_0);
    DWORD code = 0;
    GetExitCodeProcess(p, &code);
    CloseHandle(p);
    /* the default handler ended it (STATUS_CONTROL_C_EXIT; Wine 8's exits with 0), not the
     * child's own return (90-93) */
    if (code != STATUS_CONTROL_C_EXIT && code != 0)
        fail_msg("child exit code %lu", (unsigned long)code);
    /* the flush at the event, and none at the exit that follows */
    assert_string_equal(slurp(out), "Ctrl+C 1\n");
    DeleteFileA(out);
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return child_main(argv[1], argv[2]);
    GetModuleFileNameA(NULL, g_self, sizeof g_self);
    const char *t = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s", t && *t ? t : ".");
    clrmux_log_open("NUL");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fire_and_unregister),
        cmocka_unit_test(test_exit_flushes_once),
        cmocka_unit_test(test_console_event_flushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
