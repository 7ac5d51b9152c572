/* Reaching a process's control channel on Windows (ctl_reach.h), for `clrmux ctl` (ctl.c):
 * the named pipe \\.\pipe\clrmux-ctl-PID (control/ctl_path.h; the server: control/ctl_win.c).
 *
 * It opens the pipe (waiting while its one instance serves another client), for
 * identification only (SECURITY_IDENTIFICATION: whoever holds the name may learn who asks,
 * never act as them), refuses it unless process PID serves it (GetNamedPipeServerProcessId:
 * another process may have taken the name first), reads in message mode, writes the request line and reads the reply,
 * one message, within a deadline (overlapped I/O). When there is no pipe it says why, from
 * the process's modules: no such process, not a .NET process (no coreclr.dll), a .NET
 * process without clrmux (no libclrmux.dll: on Windows clrmux is loaded at start-up; there is
 * no `clrmux attach`), or clrmux there without a channel. */
#if defined(_WIN32)
#include "cli/ctl_reach.h"

#include <windows.h>
#include <tlhelp32.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "control/ctl_path.h"
#include "control/ctl_pipe_win.h"

#define REPLY_TIMEOUT_MS 60000 /* trace add waits for the ReJIT thread, 10 s per module at most */
#define BUSY_WAIT_MS 10000     /* one client at a time, each served within 2 s + 2 s */

/* Windows's text for error e, without its line end, into buf. */
static const char *error_text(DWORD e, char *buf, size_t bufsz)
{
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e, 0, buf, (DWORD)bufsz,
                             NULL);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '.'))
        n--;
    if (n == 0)
        snprintf(buf, bufsz, "error %lu", (unsigned long)e);
    else
        buf[n] = 0;
    return buf;
}

/* Whether process pid runs: 1, 0 (no such process, or it has ended), -1 (it exists but is
 * not ours to look at). */
static int process_runs(DWORD pid)
{
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, pid);
    if (!h)
        return GetLastError() == ERROR_INVALID_PARAMETER ? 0 : -1;
    int runs = WaitForSingleObject(h, 0) == WAIT_TIMEOUT;
    CloseHandle(h);
    return runs;
}

/* Whether process pid has loaded a module of that name (case-insensitive): 1, 0, or -1 (its
 * module list cannot be read). */
static int has_module(DWORD pid, const wchar_t *name)
{
    HANDLE snap = INVALID_HANDLE_VALUE;
    for (int i = 0; i < 5 && snap == INVALID_HANDLE_VALUE; i++) { /* ERROR_BAD_LENGTH: it was loading a module */
        snap = CreateToolhelp32Snapshot(TH32CS_SNAPMODULE | TH32CS_SNAPMODULE32, pid);
        if (snap == INVALID_HANDLE_VALUE && GetLastError() != ERROR_BAD_LENGTH)
            return -1;
    }
    if (snap == INVALID_HANDLE_VALUE)
        return -1;
    MODULEENTRY32W me;
    memset(&me, 0, sizeof me);
    me.dwSize = sizeof me;
    int found = 0;
    for (BOOL more = Module32FirstW(snap, &me); more && !found; more = Module32NextW(snap, &me))
        found = _wcsicmp(me.szModule, name) == 0;
    CloseHandle(snap);
    return found;
}

/* Why process pid's pipe cannot be opened (err: CreateFile's error). */
static void explain(DWORD pid, const char *pipe, DWORD err)
{
    char why[256];
    if (err == ERROR_ACCESS_DENIED) {
        fprintf(stderr, "clrmux ctl: permission denied: only the user of process %lu, SYSTEM or an administrator may "
                        "control it\n", (unsigned long)pid);
        return;
    }
    if (err != ERROR_FILE_NOT_FOUND) {
        fprintf(stderr, "clrmux ctl: cannot open %s: %s\n", pipe, error_text(err, why, sizeof why));
        return;
    }
    if (process_runs(pid) == 0) {
        fprintf(stderr, "clrmux ctl: no process %lu\n", (unsigned long)pid);
        return;
    }
    int clrmux = has_module(pid, L"libclrmux.dll");
    int dotnet = has_module(pid, L"coreclr.dll");
    if (clrmux == 1)
        fprintf(stderr, "clrmux ctl: clrmux runs in process %lu but has no control channel (no %s): its loader.conf "
                        "says enable_control = false, an older clrmux, clrmux still starting, or the channel could not "
                        "start (its log says why)\n", (unsigned long)pid, pipe);
    else if (dotnet == 1)
        fprintf(stderr, "clrmux ctl: process %lu is a .NET process that does not run under clrmux; on Windows clrmux "
                        "is loaded when the process starts (CORECLR_ENABLE_PROFILING, CORECLR_PROFILER and "
                        "CORECLR_PROFILER_PATH_64 naming libclrmux.dll: docs/platforms.md); `clrmux attach` is "
                        "Linux-only\n", (unsigned long)pid);
    else if (dotnet == 0)
        fprintf(stderr, "clrmux ctl: process %lu is not a .NET process (no coreclr.dll in it), so not under clrmux\n",
                (unsigned long)pid);
    else
        fprintf(stderr, "clrmux ctl: no control channel at %s, and process %lu's modules cannot be read to say why: "
                        "is it under clrmux?\n", pipe, (unsigned long)pid);
}

/* The pipe, opened in message mode; INVALID_HANDLE_VALUE after saying why. */
static HANDLE open_pipe(DWORD pid, const char *name, const wchar_t *wname)
{
    ULONGLONG until = GetTickCount64() + BUSY_WAIT_MS;
    for (;;) {
        HANDLE h = CreateFileW(wname, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING,
                               FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, NULL);
        if (h != INVALID_HANDLE_VALUE) {
            /* the name is anyone's to take before the process starts (the process then has no
             * channel): the pipe must be served by that process */
            ULONG server = 0;
            if (GetNamedPipeServerProcessId(h, &server) && server != pid) {
                fprintf(stderr, "clrmux ctl: %s is held by process %lu, not by process %lu: not its control channel; "
                                "nothing sent\n", name, (unsigned long)server, (unsigned long)pid);
                CloseHandle(h);
                return INVALID_HANDLE_VALUE;
            }
            DWORD mode = PIPE_READMODE_MESSAGE; /* the reply is one message */
            if (SetNamedPipeHandleState(h, &mode, NULL, NULL))
                return h;
            char why[256];
            fprintf(stderr, "clrmux ctl: %s is not a message pipe: %s\n", name,
                    error_text(GetLastError(), why, sizeof why));
            CloseHandle(h);
            return INVALID_HANDLE_VALUE;
        }
        DWORD e = GetLastError();
        if (e != ERROR_PIPE_BUSY) {
            explain(pid, name, e);
            return INVALID_HANDLE_VALUE;
        }
        ULONGLONG now = GetTickCount64();
        if (now >= until) {
            fprintf(stderr, "clrmux ctl: process %lu's control channel stayed busy with other clients for %d s\n",
                    (unsigned long)pid, BUSY_WAIT_MS / 1000);
            return INVALID_HANDLE_VALUE;
        }
        if (!WaitNamedPipeW(wname, (DWORD)(until - now))) /* its one instance serves another client */
            Sleep(10);
    }
}

int clrmux_ctl_reach(long pid, const char *req, size_t len, char **out, size_t *out_len)
{
    char name[64], why[256];
    wchar_t wname[64];
    if (pid <= 0 || clrmux_ctl_pipe_name((unsigned long)pid, name, sizeof name) != 0 ||
        !MultiByteToWideChar(CP_ACP, 0, name, -1, wname, (int)(sizeof wname / sizeof wname[0]))) {
        fprintf(stderr, "clrmux ctl: %ld is not a process id\n", pid);
        return 1;
    }
    HANDLE h = open_pipe((DWORD)pid, name, wname);
    if (h == INVALID_HANDLE_VALUE)
        return 1;
    HANDLE ev = CreateEventW(NULL, TRUE, FALSE, NULL);
    size_t cap = 1 << 16, got = 0;
    char *reply = malloc(cap + 1);
    if (!ev || !reply) {
        fprintf(stderr, "clrmux ctl: out of memory\n");
        goto fail;
    }
    DWORD e = 0;
    DWORD n = clrmux_ctl_pipe_io(h, ev, NULL, (void *)req, (DWORD)len, 1, REPLY_TIMEOUT_MS, &e);
    if (e || n != len) {
        fprintf(stderr, "clrmux ctl: process %ld closed the connection: %s\n", pid,
                e == WAIT_TIMEOUT ? "the request was not taken" : error_text(e, why, sizeof why));
        goto fail;
    }
    ULONGLONG until = GetTickCount64() + REPLY_TIMEOUT_MS;
    for (;;) {
        if (got == cap) {
            char *more = realloc(reply, cap * 2 + 1);
            if (!more) {
                fprintf(stderr, "clrmux ctl: out of memory\n");
                goto fail;
            }
            reply = more;
            cap *= 2;
        }
        ULONGLONG now = GetTickCount64();
        n = clrmux_ctl_pipe_io(h, ev, NULL, reply + got, (DWORD)(cap - got), 0, now < until ? (DWORD)(until - now) : 0,
                               &e);
        got += n;
        if (e == ERROR_MORE_DATA)
            continue; /* a part of the message */
        if (e == 0)
            break; /* the message is whole */
        if (e == WAIT_TIMEOUT) {
            fprintf(stderr, "clrmux ctl: no reply from process %ld within %d s\n", pid, REPLY_TIMEOUT_MS / 1000);
            goto fail;
        }
        if ((e == ERROR_BROKEN_PIPE || e == ERROR_PIPE_NOT_CONNECTED) && got == 0)
            break; /* closed without a reply: ctl.c says so */
        fprintf(stderr, "clrmux ctl: reading process %ld's reply%s: %s\n", pid, got ? " (it was cut)" : "",
                error_text(e, why, sizeof why));
        goto fail;
    }
    CloseHandle(ev);
    CloseHandle(h);
    reply[got] = 0;
    *out = reply;
    *out_len = got;
    return 0;
fail:
    if (ev)
        CloseHandle(ev);
    CloseHandle(h);
    free(reply);
    return 1;
}
#endif
