/* The control channel on Windows (src/control/ctl_win.c), under Wine: the named pipe
 * \\.\pipe\clrmux-ctl-PID of this process, one request per connection, what bad clients get
 * (garbage, an oversize line, a slow client, a client that leaves, more than the rate allows),
 * a reply once a (fake) mux is there, a second server refused the name, and the pipe gone
 * after shutdown. (The peer check needs a second user: Wine runs one.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <windows.h>

#include "common/log.h"
#include "control/ctl_path.h"
#include "control/ctl_server.h"
#include "control/ctl_exec.h"

static wchar_t g_pipe[64];

static HANDLE dial(void)
{
    for (int i = 0; i < 200; i++) {
        HANDLE h = CreateFileW(g_pipe, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
        if (h != INVALID_HANDLE_VALUE) {
            DWORD mode = PIPE_READMODE_MESSAGE; /* the reply is one message */
            SetNamedPipeHandleState(h, &mode, NULL, NULL);
            return h;
        }
        if (GetLastError() != ERROR_PIPE_BUSY)
            return INVALID_HANDLE_VALUE;
        WaitNamedPipeW(g_pipe, 50); /* the one instance serves another client */
    }
    return INVALID_HANDLE_VALUE;
}

/* Sends len bytes (then, for a request without LF, nothing more), reads the reply's message. */
static void ask_n(const char *req, size_t len, char *out, size_t outsz)
{
    HANDLE h = dial();
    assert_true(h != INVALID_HANDLE_VALUE);
    DWORD n = 0;
    if (len)
        WriteFile(h, req, (DWORD)len, &n, NULL);
    size_t got = 0;
    for (;;) { /* until the message is whole (ERROR_MORE_DATA: part of it) */
        BOOL whole = ReadFile(h, out + got, (DWORD)(outsz - 1 - got), &n, NULL);
        got += n;
        if (whole || GetLastError() != ERROR_MORE_DATA || got + 1 >= outsz)
            break;
    }
    out[got] = 0;
    CloseHandle(h);
}

static void ask(const char *req, char *out, size_t outsz) { ask_n(req, strlen(req), out, outsz); }

static int setup(void **state)
{
    (void)state;
    char name[64];
    clrmux_ctl_pipe_name((unsigned long)GetCurrentProcessId(), name, sizeof name);
    MultiByteToWideChar(CP_ACP, 0, name, -1, g_pipe, 64);
    assert_int_equal(clrmux_ctl_test_start(), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrmux_ctl_shutdown();
    Sleep(300);
    HANDLE h = CreateFileW(g_pipe, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
    assert_true(h == INVALID_HANDLE_VALUE); /* gone */
    return 0;
}

static void test_without_mux(void **state)
{
    (void)state;
    char r[4096];
    ask("status\n", r, sizeof r);
    assert_string_equal(r, "error: clrmux has not started in this process\n");
}

static void test_name_taken(void **state)
{
    (void)state;
    /* the first instance is the server's: a squatter cannot take the name first, and a
     * second server of the same name is refused (FILE_FLAG_FIRST_PIPE_INSTANCE) */
    HANDLE h = CreateNamedPipeW(g_pipe, PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_TYPE_BYTE, 1, 4096,
                                4096, 0, NULL);
    assert_true(h == INVALID_HANDLE_VALUE);
}

static void test_bad_clients(void **state)
{
    (void)state;
    char r[4096];
    ask_n("sta\x01tus\n", 8, r, sizeof r);
    assert_non_null(strstr(r, "error: control character 0x01 at byte 3"));
    char *big = malloc(5000);
    memset(big, 'a', 5000);
    ask_n(big, 5000, r, sizeof r);
    assert_string_equal(r, "error: request longer than 4095 bytes\n");
    free(big);
    ask_n("sta", 3, r, sizeof r); /* part of a request, then nothing: 2 s */
    assert_string_equal(r, "error: no complete request within 2 s\n");
    HANDLE h = dial(); /* a client that leaves before reading its reply */
    DWORD n;
    WriteFile(h, "status --json\n", 14, &n, NULL);
    CloseHandle(h);
    ask("status\n", r, sizeof r);
    assert_string_equal(r, "error: clrmux has not started in this process\n");
}

static void test_rate(void **state)
{
    (void)state;
    Sleep(2100);
    char r[4096];
    int busy = 0, served = 0;
    for (int i = 0; i < 40; i++) {
        ask("status\n", r, sizeof r);
        if (!strncmp(r, "error: busy", 11))
            busy++;
        else if (!strcmp(r, "error: clrmux has not started in this process\n"))
            served++;
    }
    assert_true(served >= 20 && served <= 32);
    assert_int_equal(busy + served, 40);
}

static void test_with_mux(void **state)
{
    (void)state;
    Sleep(2100);
    clrmux_ctl_test_mux("10.0.test", "C:/clrmux/loader.conf");
    static char r[65536];
    ask("status --json\n", r, sizeof r);
    assert_true(!strncmp(r, "ok\n{\"pid\":", 10));
    assert_non_null(strstr(r, "\"config\":\"C:/clrmux/loader.conf\""));
    int level = clrmux_log_get_level();
    ask("log-level debug\n", r, sizeof r);
    assert_string_equal(r, "ok\nlog level DEBUG (was INFO)\n");
    clrmux_log_set_level(level);
    clrmux_ctl_test_mux(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_mux), cmocka_unit_test(test_name_taken), cmocka_unit_test(test_bad_clients),
        cmocka_unit_test(test_rate),        cmocka_unit_test(test_with_mux),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
