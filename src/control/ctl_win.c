/* The control channel over a named pipe (Windows; ctl_server.h): \\.\pipe\clrmux-ctl-PID, a
 * message pipe (the request is read as bytes up to its LF; the reply is one message, which a
 * client reads in PIPE_READMODE_MESSAGE, then closes), created first (FILE_FLAG_FIRST_PIPE_INSTANCE: a name someone else holds is refused), with a
 * DACL that admits this process's user, SYSTEM and Administrators only, remote clients
 * rejected; each client's token is checked the same way (ImpersonateNamedPipeClient), reads
 * and writes bounded in time (overlapped I/O), one client at a time on a thread of its own. */
#include "control/ctl_server.h"

#if defined(_WIN32)
#include <windows.h>
#include <sddl.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/ctl_path.h"
#include "control/ctl_pipe_win.h"
#include "control/ctl_perfmap.h"
#include "control/ctl_proto.h"

#define PIPE_BUF_BYTES 65536

static struct {
    int perf_map, control;
    _Atomic int stop, listening;
    HANDLE stop_event;
    struct clrmux_ctl_rate rate;
    wchar_t name[64];
} g;

static int64_t now_ns(void)
{
    static LARGE_INTEGER f;
    LARGE_INTEGER c;
    if (!f.QuadPart)
        QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (int64_t)((double)c.QuadPart * 1e9 / (double)f.QuadPart);
}

/* This process's user SID (LocalFree it), or NULL. */
static PSID own_sid(void)
{
    HANDLE tok = NULL;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok))
        return NULL;
    BYTE buf[512];
    DWORD len = 0;
    PSID copy = NULL;
    if (GetTokenInformation(tok, TokenUser, buf, sizeof buf, &len)) {
        PSID s = ((TOKEN_USER *)buf)->User.Sid;
        DWORD n = GetLengthSid(s);
        copy = LocalAlloc(LPTR, n);
        if (copy && !CopySid(n, copy, s)) {
            LocalFree(copy);
            copy = NULL;
        }
    }
    CloseHandle(tok);
    return copy;
}

/* The pipe's security: its owner's user, SYSTEM and Administrators; nobody else. */
static int pipe_security(SECURITY_ATTRIBUTES *sa, PSID user)
{
    LPWSTR user_str = NULL;
    if (!ConvertSidToStringSidW(user, &user_str))
        return -1;
    wchar_t sddl[256];
    _snwprintf(sddl, sizeof sddl / sizeof sddl[0], L"D:P(A;;GA;;;%ls)(A;;GA;;;SY)(A;;GA;;;BA)", user_str);
    sddl[sizeof sddl / sizeof sddl[0] - 1] = 0;
    LocalFree(user_str);
    PSECURITY_DESCRIPTOR sd = NULL;
    if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl, SDDL_REVISION_1, &sd, NULL))
        return -1;
    sa->nLength = sizeof *sa;
    sa->lpSecurityDescriptor = sd;
    sa->bInheritHandle = FALSE;
    return 0;
}

/* Whether the connected client is this process's user, SYSTEM or an administrator; its
 * process id and account into who. */
static int client_allowed(HANDLE pipe, PSID user, char *who, size_t whosz)
{
    ULONG cpid = 0;
    GetNamedPipeClientProcessId(pipe, &cpid);
    snprintf(who, whosz, "pid %lu", (unsigned long)cpid);
    if (!ImpersonateNamedPipeClient(pipe))
        return 0;
    HANDLE tok = NULL;
    int ok = 0;
    if (OpenThreadToken(GetCurrentThread(), TOKEN_QUERY, TRUE, &tok)) {
        BYTE buf[512];
        DWORD len = 0;
        if (GetTokenInformation(tok, TokenUser, buf, sizeof buf, &len)) {
            PSID s = ((TOKEN_USER *)buf)->User.Sid;
            LPWSTR str = NULL;
            if (ConvertSidToStringSidW(s, &str)) {
                snprintf(who, whosz, "pid %lu (%ls)", (unsigned long)cpid, str);
                LocalFree(str);
            }
            BYTE sys[SECURITY_MAX_SID_SIZE], adm[SECURITY_MAX_SID_SIZE];
            DWORD n1 = sizeof sys, n2 = sizeof adm;
            BOOL member = FALSE;
            ok = EqualSid(s, user) ||
                 (CreateWellKnownSid(WinLocalSystemSid, NULL, sys, &n1) && EqualSid(s, (PSID)sys)) ||
                 (CreateWellKnownSid(WinBuiltinAdministratorsSid, NULL, adm, &n2) &&
                  CheckTokenMembership(tok, (PSID)adm, &member) && member);
        }
        CloseHandle(tok);
    }
    RevertToSelf();
    return ok;
}

/* The reply as one message, then a wait for the client to close its end (it has read the
 * message: a disconnect would discard what it has not), both within the deadline. */
static void write_all(HANDLE pipe, HANDLE ev, const char *p, size_t len, int64_t deadline)
{
    int64_t left = (deadline - now_ns()) / 1000000;
    DWORD e = 0;
    if (left <= 0 || clrmux_ctl_pipe_io(pipe, ev, g.stop_event, (void *)p, (DWORD)len, 1, (DWORD)left, &e) != len || e)
        return;
    char sink[256];
    while ((left = (deadline - now_ns()) / 1000000) > 0
           && clrmux_ctl_pipe_io(pipe, ev, g.stop_event, sink, sizeof sink, 0, (DWORD)left, &e) > 0 && !e) {
    }
}

static void reply_error(HANDLE pipe, HANDLE ev, const char *msg)
{
    char line[512];
    int n = snprintf(line, sizeof line, "error: %s\n", msg);
    write_all(pipe, ev, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, now_ns() + 200000000);
}

static void refuse_log(const char *what, const char *who)
{
    uint64_t skipped = 0;
    if (clrmux_ctl_may_log(now_ns(), &skipped)) {
        if (skipped)
            LOG_WARN("control: %s refused: %s (%llu more refusals not logged)", who, what, (unsigned long long)skipped);
        else
            LOG_WARN("control: %s refused: %s", who, what);
    }
}

static void serve(HANDLE pipe, HANDLE ev, PSID user, char *reply, size_t reply_cap)
{
    char who[256];
    if (!client_allowed(pipe, user, who, sizeof who)) {
        refuse_log("only this process's user, SYSTEM or an administrator may control it", who);
        reply_error(pipe, ev, "permission denied: only the process's user or an administrator may control it");
        return;
    }
    if (!clrmux_ctl_rate_take(&g.rate, now_ns())) {
        refuse_log("more than 20 requests at once or 10 a second (busy)", who);
        reply_error(pipe, ev, "busy: at most 10 requests a second; try again");
        return;
    }
    char req[CLRMUX_CTL_MAX_REQUEST];
    size_t len = 0;
    long line = -1;
    int eof = 0;
    const int64_t deadline = now_ns() + (int64_t)CLRMUX_CTL_IO_MS * 1000000;
    while (line == -1 && !eof) {
        int64_t left = (deadline - now_ns()) / 1000000;
        if (left <= 0)
            break;
        DWORD e = 0, k = clrmux_ctl_pipe_io(pipe, ev, g.stop_event, req + len, (DWORD)(sizeof req - len), 0,
                                            (DWORD)left, &e);
        if (e == WAIT_TIMEOUT)
            break; /* the deadline, or the channel stops */
        if (e || k == 0) {
            eof = 1; /* the client closed its end */
            break;
        }
        len += (size_t)k;
        line = clrmux_ctl_line(req, len);
    }
    if (line == -2) {
        refuse_log("a request longer than 4095 bytes", who);
        reply_error(pipe, ev, "request longer than 4095 bytes");
        return;
    }
    if (line < 0 && !eof) {
        refuse_log("no complete request within 2 s", who);
        reply_error(pipe, ev, "no complete request within 2 s");
        return;
    }
    if (line < 0 && !len)
        return;
    struct clrmux_out out;
    clrmux_out_init(&out, reply, reply_cap);
    clrmux_ctl_handle(req, line >= 0 ? (size_t)line : len, who, &out);
    write_all(pipe, ev, out.p, out.len, now_ns() + (int64_t)CLRMUX_CTL_IO_MS * 1000000);
}

static DWORD WINAPI ctl_main(LPVOID arg)
{
    (void)arg;
    if (g.perf_map)
        clrmux_ctl_perfmap_enable();
    if (!g.control || atomic_load(&g.stop))
        return 0;
    char name[64];
    clrmux_ctl_pipe_name((unsigned long)GetCurrentProcessId(), name, sizeof name);
    MultiByteToWideChar(CP_ACP, 0, name, -1, g.name, (int)(sizeof g.name / sizeof g.name[0]));
    PSID user = own_sid();
    SECURITY_ATTRIBUTES sa;
    char *reply = malloc(CLRMUX_CTL_REPLY_MAX);
    HANDLE ev = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (!user || !reply || !ev || pipe_security(&sa, user) != 0) {
        LOG_ERROR("control: cannot set up %s (error %lu); no control channel", name, (unsigned long)GetLastError());
        goto out;
    }
    clrmux_ctl_rate_init(&g.rate, CLRMUX_CTL_BURST, CLRMUX_CTL_RATE, now_ns());
    /* one instance for the channel's life, created first (a name held by someone else is
     * refused) and connected again after each client: the name never goes away meanwhile (a
     * client meets ERROR_PIPE_BUSY and waits with WaitNamedPipe) */
    HANDLE pipe = CreateNamedPipeW(g.name, PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                                   PIPE_TYPE_MESSAGE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1,
                                   PIPE_BUF_BYTES, PIPE_BUF_BYTES, 0, &sa);
    if (pipe == INVALID_HANDLE_VALUE) {
        LOG_ERROR("control: cannot create the pipe %s (error %lu: another process holds the name?); no control "
                  "channel", name, (unsigned long)GetLastError());
        goto out;
    }
    atomic_store(&g.listening, 1);
    LOG_INFO("control: listening on %s", name);
    while (!atomic_load(&g.stop)) {
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.hEvent = ev;
        ResetEvent(ev);
        BOOL connected = ConnectNamedPipe(pipe, &ov);
        DWORD e = connected ? ERROR_PIPE_CONNECTED : GetLastError();
        if (e == ERROR_IO_PENDING) {
            HANDLE hs[2] = {ev, g.stop_event};
            if (WaitForMultipleObjects(2, hs, FALSE, INFINITE) == WAIT_OBJECT_0) {
                DWORD n;
                e = GetOverlappedResult(pipe, &ov, &n, FALSE) ? ERROR_PIPE_CONNECTED : GetLastError();
            } else {
                CancelIo(pipe);
                e = ERROR_OPERATION_ABORTED;
            }
        }
        if (e == ERROR_PIPE_CONNECTED && !atomic_load(&g.stop))
            serve(pipe, ev, user, reply, CLRMUX_CTL_REPLY_MAX);
        else if (e != ERROR_PIPE_CONNECTED && e != ERROR_NO_DATA && !atomic_load(&g.stop))
            Sleep(10); /* not a client: not a busy loop either */
        DisconnectNamedPipe(pipe);
    }
    CloseHandle(pipe);
out:
    atomic_store(&g.listening, 0);
    if (ev)
        CloseHandle(ev);
    if (user)
        LocalFree(user);
    free(reply);
    return 0;
}

void clrmux_ctl_start(void *arg)
{
    (void)arg;
    if (atomic_load(&g.stop))
        return;
    g.stop_event = CreateEventW(NULL, TRUE, FALSE, NULL);
    HANDLE t = g.stop_event ? CreateThread(NULL, 1u << 20, ctl_main, NULL, 0, NULL) : NULL;
    if (!t)
        LOG_ERROR("control: cannot start its thread; no control channel");
    else
        CloseHandle(t);
}

int clrmux_ctl_configure(int control, int perf_map)
{
    g.control = control;
    g.perf_map = perf_map;
    if (!control)
        LOG_INFO("control: off (enable_control = false)");
    return control || perf_map;
}

void clrmux_ctl_shutdown(void)
{
    atomic_store(&g.stop, 1);
    if (g.stop_event)
        SetEvent(g.stop_event);
}


#ifdef CLRMUX_TESTING
int clrmux_ctl_test_start(void)
{
    g.control = 1;
    clrmux_ctl_start(NULL);
    for (int i = 0; i < 400 && !atomic_load(&g.listening); i++)
        Sleep(5);
    return atomic_load(&g.listening) ? 0 : -1;
}
#endif

#endif
