/* A process that serves the control channel (src/control/ctl_win.c) for `clrmux.exe ctl` to
 * reach under Wine (tests/win/ctl_client.sh): built -DCLRMUX_TESTING with the loader's objects,
 * it starts the pipe server in itself as test_ctl_win.c does, prints "pid N" (its Windows
 * process id, which is the pipe's name and what the client is given), then serves until its
 * standard input closes (or 300 s).
 *   ctl_serve.exe bare   the channel, no mux: every command gets "clrmux has not started"
 *   ctl_serve.exe mux    the channel and a mux of no children (clrmux_ctl_test_mux)
 *   ctl_serve.exe idle   no channel: a process that is not under clrmux
 *   ctl_serve.exe squat PID   no channel, but the pipe name of process PID taken: it answers
 *                        "ok" and "squatted" to whoever connects (a client must not believe it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>

#include "control/ctl_exec.h"
#include "control/ctl_path.h"
#include "control/ctl_server.h"

static wchar_t squat_name[64];

static DWORD WINAPI squat(LPVOID arg)
{
    HANDLE p = (HANDLE)arg;
    for (;;) {
        if (ConnectNamedPipe(p, NULL) || GetLastError() == ERROR_PIPE_CONNECTED) {
            char buf[4096];
            DWORD n = 0;
            ReadFile(p, buf, sizeof buf, &n, NULL);
            WriteFile(p, "ok\nsquatted\n", 12, &n, NULL);
            FlushFileBuffers(p);
        }
        DisconnectNamedPipe(p);
    }
    return 0;
}

static DWORD WINAPI drain_stdin(LPVOID arg)
{
    (void)arg;
    char buf[256];
    while (fgets(buf, sizeof buf, stdin)) {
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int squatting = !strcmp(mode, "squat") && argc > 2;
    if (strcmp(mode, "bare") && strcmp(mode, "mux") && strcmp(mode, "idle") && !squatting) {
        fprintf(stderr, "usage: ctl_serve.exe bare|mux|idle|squat PID\n");
        return 2;
    }
    if (squatting) {
        char name[64];
        clrmux_ctl_pipe_name(strtoul(argv[2], NULL, 10), name, sizeof name);
        MultiByteToWideChar(CP_ACP, 0, name, -1, squat_name, 64);
        HANDLE p = CreateNamedPipeW(squat_name, PIPE_ACCESS_DUPLEX, PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE | PIPE_WAIT,
                                    1, 4096, 4096, 0, NULL);
        if (p == INVALID_HANDLE_VALUE || !CreateThread(NULL, 0, squat, p, 0, NULL)) {
            fprintf(stderr, "ctl_serve: cannot take %s\n", name);
            return 1;
        }
        mode = "idle";
    }
    if (strcmp(mode, "idle") && clrmux_ctl_test_start() != 0) {
        fprintf(stderr, "ctl_serve: the control channel did not start\n");
        return 1;
    }
    if (!strcmp(mode, "mux"))
        clrmux_ctl_test_mux("10.0.test", "C:/clrmux/loader.conf");
    printf("pid %lu\n", (unsigned long)GetCurrentProcessId());
    fflush(stdout);
    HANDLE t = CreateThread(NULL, 0, drain_stdin, NULL, 0, NULL);
    if (t)
        WaitForSingleObject(t, 300000);
    if (strcmp(mode, "idle"))
        clrmux_ctl_shutdown();
    return 0;
}
