/* A process that serves the control channel (src/control/ctl_win.c) for `clrmux.exe ctl` to
 * reach under Wine (tests/win/ctl_client.sh): built -DCLRMUX_TESTING with the loader's objects,
 * it starts the pipe server in itself as test_ctl_win.c does, prints "pid N" (its Windows
 * process id, which is the pipe's name and what the client is given), then serves until its
 * standard input closes (or 300 s).
 *   ctl_serve.exe bare   the channel, no mux: every command gets "clrmux has not started"
 *   ctl_serve.exe mux    the channel and a mux of no children (clrmux_ctl_test_mux)
 *   ctl_serve.exe idle   no channel: a process that is not under clrmux */
#include <stdio.h>
#include <string.h>

#include <windows.h>

#include "control/ctl_exec.h"
#include "control/ctl_server.h"

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
    if (strcmp(mode, "bare") && strcmp(mode, "mux") && strcmp(mode, "idle")) {
        fprintf(stderr, "usage: ctl_serve.exe bare|mux|idle\n");
        return 2;
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
