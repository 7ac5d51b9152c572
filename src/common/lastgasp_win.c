/* The last gasp on Windows (lastgasp.h): the flush functions run at exit (atexit: exit() and
 * a return from main that skipped Shutdown), on a console control event (Ctrl+C,
 * Ctrl+Break, the console closing, log-off, shut-down: SetConsoleCtrlHandler, whose handler
 * runs on a thread of its own, so the flush runs there and the event then goes on to the
 * next handler, normally the process's end) and for an unhandled managed exception
 * (clrmux_lastgasp_now). Windows has no POSIX signals: a crash (an access violation that no
 * one handles) or TerminateProcess ends the process without a flush. Built only for Windows;
 * lastgasp.c is the POSIX counterpart. */
#if defined(_WIN32)
#include "common/lastgasp.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "common/log.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the table; held while flushing */
static struct {
    clrmux_lastgasp_fn fn;
    void *ctx;
} g_fns[CLRMUX_LASTGASP_MAX];
static int g_started;
static _Atomic int g_final_done;

int64_t clrmux_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Runs every flush function once on this thread; final: the process is ending. */
static void run_flushes(const char *cause, int final)
{
    if (final && atomic_exchange(&g_final_done, 1))
        return;
    int64_t t0 = clrmux_mono_ns(), deadline = t0 + (int64_t)CLRMUX_LASTGASP_BUDGET_MS * 1000000;
    pthread_mutex_lock(&g_lock);
    int n = 0;
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++)
        n += g_fns[i].fn != NULL;
    if (n)
        LOG_WARN("the process is ending (%s) without the runtime's Shutdown: writing what clrmux holds", cause);
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++) {
        if (!g_fns[i].fn)
            continue;
        g_fns[i].fn(g_fns[i].ctx, cause, deadline, final);
        if (final)
            g_fns[i].fn = NULL; /* at most once */
    }
    if (n)
        LOG_INFO("last gasp (%s) done in %.1f ms", cause, (double)(clrmux_mono_ns() - t0) / 1e6);
    pthread_mutex_unlock(&g_lock);
}

static void at_exit(void) { run_flushes("exit", 1); }

static BOOL WINAPI on_console_event(DWORD type)
{
    run_flushes(type == CTRL_C_EVENT       ? "Ctrl+C"
                : type == CTRL_BREAK_EVENT ? "Ctrl+Break"
                : type == CTRL_CLOSE_EVENT ? "console closed"
                                           : "log-off or shut-down",
                1);
    return FALSE; /* the next handler (the runtime's, or the default: the process ends) */
}

int clrmux_lastgasp_registered(void)
{
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++)
        n += g_fns[i].fn != NULL;
    pthread_mutex_unlock(&g_lock);
    return n;
}

void clrmux_lastgasp_now(void)
{
    static __thread int seen; /* this thread's exception was seen already (another hook) */
    if (!g_started || seen)
        return;
    seen = 1;
    run_flushes("unhandled exception", 0);
}

int clrmux_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx)
{
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    if (!g_started) {
        g_started = 1;
        atexit(at_exit);
        if (!SetConsoleCtrlHandler(on_console_event, TRUE))
            LOG_WARN("SetConsoleCtrlHandler failed: a console event ends the process without a flush");
    }
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++) {
        if (!g_fns[i].fn) {
            g_fns[i].fn = fn;
            g_fns[i].ctx = ctx;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void clrmux_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++)
        if (g_fns[i].fn == fn && g_fns[i].ctx == ctx)
            g_fns[i].fn = NULL;
    pthread_mutex_unlock(&g_lock);
}

int clrmux_lastgasp_fire(const char *cause)
{
    if (!g_started)
        return 0;
    run_flushes(cause ? cause : "exit", 0);
    return 1;
}
#endif
