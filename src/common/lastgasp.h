/* The last gasp: what clrmux writes when the process ends without ICorProfilerCallback::
 * Shutdown (an unhandled exception, SIGTERM or SIGINT on a plain console app, exit() from
 * native code, a crash).
 *
 * Children that buffer data (the tracer's spans, the profiler's current period) register a
 * flush function. The first registration installs (SIGTERM's and SIGINT's may have been
 * installed ahead of it: clrmux_lastgasp_arm) and starts one thread ("clrmux-lastgasp"):
 *   - an atexit handler (exit() and a return from main that skipped Shutdown);
 *   - handlers for SIGTERM, SIGINT, SIGQUIT, SIGHUP and SIGABRT, chained to whatever was there
 *     before (the runtime's PAL, dotnet/runtime src/coreclr/pal/src/exception/signal.cpp,
 *     installs its own for SIGINT, SIGQUIT, SIGABRT and, in some hosts, SIGTERM): unless the
 *     previous action ignores the signal, the handler wakes the thread, waits for it at most
 *     CLRMUX_LASTGASP_WAIT_MS, then calls the previous handler, or restores the default
 *     action and raises the signal again;
 *   - handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE that first call the previous handler
 *     (the runtime turns faults in managed code into exceptions: NullReferenceException must
 *     keep working) and flush only when it gave up, i.e. when it returned after restoring
 *     the default action (the fault then repeats and ends the process). A fault whose
 *     instruction lies in a native library (an ELF object found by glibc's async-signal-safe
 *     _dl_find_object that is neither the main program, which in a single-file app holds the
 *     runtime, nor libcoreclr.so, whose marked helpers the runtime handles) is flushed
 *     first: the runtime turns only faults in managed code and its own helpers into
 *     exceptions (IsSafeToHandleHardwareException), so this one ends the process, and its
 *     handler's own work on the way out (the debugger transport's clean-up, a crash dump)
 *     can fail with the signal blocked, which would kill the process before the flush.
 * A handler does only async-signal-safe things (an atomic, sem_post, clock_gettime,
 * nanosleep, write); the flush functions run on the last-gasp thread, an ordinary thread.
 * Each is called at most once, with a deadline, and must write what it has, log what was
 * lost, and write nothing more afterwards. Signals already handled by an earlier flush
 * wait for it. SIGKILL cannot be caught: what was not yet written is lost. */
#ifndef CLRMUX_COMMON_LASTGASP_H
#define CLRMUX_COMMON_LASTGASP_H

#include <signal.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

/* How long a signal handler waits for the flush, and the flush functions' deadline. */
#define CLRMUX_LASTGASP_WAIT_MS 3000
#define CLRMUX_LASTGASP_BUDGET_MS 2500
#define CLRMUX_LASTGASP_MAX 8

/* cause: "exit", "SIGTERM", "SIGSEGV", "unhandled exception"...; deadline_ns: CLOCK_MONOTONIC
 * time by which to return. final: 1 when the process is ending (write, then nothing more);
 * 0 for an unhandled exception, after which the runtime normally aborts but may go on
 * (ExceptionHandling.RaiseAppDomainUnhandledExceptionEvent, .NET 10, raises the same event
 * without ending anything): write now and keep working. */
typedef void (*clrmux_lastgasp_fn)(void *ctx, const char *cause, int64_t deadline_ns, int final);

/* Registers fn(ctx) (at most CLRMUX_LASTGASP_MAX; the first call starts the thread and
 * installs the handlers). Returns 0, or -1 (table full, or no thread: logged). */
int clrmux_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx);
/* Installs the SIGTERM and SIGINT handlers now, on the calling thread, without the thread
 * (4 sigaction calls, ~5 us here, where a thread created costs its creator 0.2-0.35 ms: for
 * the runtime's start-up thread), for a registration that another thread makes a little
 * later (it installs the others): a SIGTERM or SIGINT in between waits for it (at most
 * CLRMUX_LASTGASP_WAIT_MS, or until every arm is withdrawn without a thread). Returns 0, then
 * the caller calls clrmux_lastgasp_disarm() once that registration was made or given up;
 * -1 when nothing was installed. (Windows: does nothing, returns 0.) */
int clrmux_lastgasp_arm(void);
void clrmux_lastgasp_disarm(void);

/* Registers fn(ctx) in the table only (counted by clrmux_lastgasp_registered at once, run by
 * a last gasp once some registration started the thread and handlers): for a caller on the
 * app's start-up path, where the thread's creation and the handlers' ~18 sigaction calls cost
 * 0.2-0.9 ms; it then calls clrmux_lastgasp_start from a thread of its own. 0, or -1 (table
 * full). */
int clrmux_lastgasp_register_deferred(clrmux_lastgasp_fn fn, void *ctx);
/* Starts the thread and installs the handlers, unless some registration did already (a
 * no-op then). From any thread. 0, or -1 (no thread: logged). */
int clrmux_lastgasp_start(void);
/* Removes fn(ctx) (at Shutdown, before its data goes away); waits while a flush runs. */
void clrmux_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx);

/* How many flush functions are registered (the loader watches for unhandled exceptions
 * only when some child has something to flush). */
int clrmux_lastgasp_registered(void);

/* The process is about to end in a way no handler sees (an unhandled managed exception:
 * common/unhandled.h): runs the flush functions now (cause "unhandled exception", final 0),
 * waits for them at most CLRMUX_LASTGASP_WAIT_MS, and leaves them registered. Once per
 * thread: the loader's exception callbacks and the tracer's AppContext.OnUnhandledException
 * hook may both see the same exception (.NET 10), and a thread dies of one exception only;
 * a later call from the same thread returns at once. Ordinary thread context. */
void clrmux_lastgasp_now(void);

/* The fault handlers block SIGPROF while they run (sa_mask): the runtime handles a fault on
 * a 16 KB alternate signal stack with about 2.6 KB left, less than the kernel needs to
 * deliver a nested signal with the CPU's extended state (about 3.3 KB with AVX-512), so a
 * profiling signal arriving then (the signal sampler's, src/profiler/sigsampler.c) would end
 * the process with SIGSEGV. A fault the runtime turns into a managed exception
 * (NullReferenceException) resumes in managed code without returning from the handler, so
 * that mask stays: call this on the thread that raised a managed exception
 * (ICorProfilerCallback2::ExceptionThrown, on the thread's own stack) to unblock SIGPROF
 * again. Does nothing (no system call) until a fault was handled in this process; after
 * one, one pthread_sigmask per call. Ordinary thread context. */
#ifdef _WIN32
static inline void clrmux_lastgasp_after_exception(void) {}
#else
void clrmux_lastgasp_after_exception(void);
#endif

/* Runs the flush now as a signal `cause` would (tests). Returns 1 if it finished in time. */
int clrmux_lastgasp_fire(const char *cause);

#if defined(CLRMUX_TESTING) && !defined(_WIN32)
/* Tests: called with each signal number as the handlers are installed, after the previous
 * handler was read and before clrmux's replaces it: what another thread could do meanwhile. */
extern void (*clrmux_lastgasp_test_between)(int sig);
#endif

/* CLOCK_MONOTONIC nanoseconds. */
int64_t clrmux_mono_ns(void);

/* Locks `m` for a flush function: waits at most until deadline_ns (CLOCK_MONOTONIC, the
 * deadline the flush functions get; pthread_mutex_timedlock counts in CLOCK_REALTIME, which
 * may jump). Returns 0 when locked; otherwise `m` is not locked and the result is
 * pthread_mutex_timedlock's error (ETIMEDOUT: the holder did not let go in time). A deadline
 * already past still takes a free lock. */
static inline int clrmux_lastgasp_lock(pthread_mutex_t *m, int64_t deadline_ns)
{
    struct timespec now, abs;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t left_ns = deadline_ns - ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
    clock_gettime(CLOCK_REALTIME, &abs);
    if (left_ns > 0) {
        abs.tv_sec += (time_t)(left_ns / 1000000000);
        abs.tv_nsec += (long)(left_ns % 1000000000);
        if (abs.tv_nsec >= 1000000000) {
            abs.tv_sec++;
            abs.tv_nsec -= 1000000000;
        }
    }
    return pthread_mutex_timedlock(m, &abs);
}

/* Blocks the termination signals a process receives from outside (SIGTERM, SIGINT,
 * SIGQUIT, SIGHUP) in the calling thread, so that the kernel delivers them to an
 * application thread, never to one of clrmux's own threads in the middle of a write. Called
 * first by each thread clrmux starts. */
#if !defined(_WIN32)
/* The same, the calling thread's mask before it stored in *saved (NULL: not kept): a thread
 * created after this call is born with them blocked (pthread_sigmask(SIG_SETMASK, saved)
 * restores the caller's). */
static inline void clrmux_block_termination_signals_saving(sigset_t *saved)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGQUIT);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, saved);
}
#endif

static inline void clrmux_block_termination_signals(void)
{
#if defined(_WIN32)
    /* Windows: no signals; console control events arrive on a thread of their own */
#else
    clrmux_block_termination_signals_saving(NULL);
#endif
}

#endif
