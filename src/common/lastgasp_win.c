/* The last gasp on Windows (lastgasp.h): the flush functions run at exit (atexit: exit() and
 * a return from main that skipped Shutdown), on a console control event (Ctrl+C,
 * Ctrl+Break, the console closing, log-off, shut-down: SetConsoleCtrlHandler, whose handler
 * runs on a thread of its own, so the flush runs there and the event then goes on to the
 * next handler, normally the process's end) and for an unhandled managed exception
 * (clrmux_lastgasp_now). Windows has no POSIX signals: a crash (an access violation that no
 * one handles) or TerminateProcess ends the process without a flush. Built only for Windows;
 * lastgasp.c is the POSIX counterpart; the flush functions' table is lastgasp_registry.c's. */
#if defined(_WIN32)
#include "common/lastgasp.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "common/lastgasp_registry.h"
#include "common/log.h"

static _Atomic int g_final_done;

/* Runs every flush function once on this thread; final: the process is ending (once). */
static void run_flushes(const char *cause, int final)
{
    if (final && atomic_exchange(&g_final_done, 1))
        return;
    clrmux_lastgasp_run(cause, final);
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

void clrmux_lastgasp_now(void)
{
    static __thread int seen; /* this thread's exception was seen already (another hook) */
    if (!clrmux_lastgasp_started() || seen)
        return;
    seen = 1;
    run_flushes("unhandled exception", 0);
}

/* The first registration's start (the registry's lock held): atexit and the console handler. */
static int start(void)
{
    atexit(at_exit);
    if (!SetConsoleCtrlHandler(on_console_event, TRUE))
        LOG_WARN("SetConsoleCtrlHandler failed: a console event ends the process without a flush");
    return 0;
}

int clrmux_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx) { return clrmux_lastgasp_add(fn, ctx, start); }
int clrmux_lastgasp_start(void) { return clrmux_lastgasp_add(NULL, NULL, start); }

/* the console handler is installed by the first registration: nothing to arm ahead of it */
int clrmux_lastgasp_arm(void) { return 0; }
void clrmux_lastgasp_disarm(void) {}

int clrmux_lastgasp_fire(const char *cause)
{
    if (!clrmux_lastgasp_started())
        return 0;
    run_flushes(cause ? cause : "exit", 0);
    return 1;
}
#endif
