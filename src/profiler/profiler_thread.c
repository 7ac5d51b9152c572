/* The built-in profiler's threads: the sampler thread (its first steps: the last gasp's
 * thread, the signal sampler's start, the "started" line; then ticks, drains, periodic files)
 * and the short-lived thread that starts the EventPipe session. See profiler_int.h. */
#include <linux/futex.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "profiler/profiler_int.h"

/* ---- EventPipe session ---------------------------------------------------------------- */

void prof_start_session(struct profiler *p)
{
    static const WCHAR provider[] = {'M', 'i', 'c', 'r', 'o', 's', 'o', 'f', 't', '-', 'W', 'i', 'n', 'd', 'o',
                                     'w', 's', '-', 'D', 'o', 't', 'N', 'E', 'T', 'R', 'u', 'n', 't', 'i', 'm',
                                     'e', 0};
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG pc = {
        .providerName = provider,
        .keywords = (p->cfg.allocations ? PROF_KEYWORD_GC : 0) | (p->cfg.contention ? PROF_KEYWORD_CONTENTION : 0),
        .loggingLevel = p->cfg.allocations ? COR_PRF_EVENTPIPE_VERBOSE : COR_PRF_EVENTPIPE_INFORMATIONAL,
        .filterData = NULL,
    };
    EVENTPIPE_SESSION s = 0;
    HRESULT hr = ICorProfilerInfo12_EventPipeStartSession(p->info12, 1, &pc, FALSE, &s);
    p->session_attempts++;
    if (SUCCEEDED(hr)) {
        p->session = s;
        atomic_store(&p->session_started, 1);
        LOG_INFO("profiler '%s': EventPipe session started %lld ms after Initialize (eventpipe_delay_ms = %d; "
                 "Microsoft-Windows-DotNETRuntime keywords 0x%llX)",
                 p->name, (long long)((mono_ns() - p->session_due) / 1000000 + p->cfg.eventpipe_delay_ms),
                 p->cfg.eventpipe_delay_ms,
                 (unsigned long long)pc.keywords);
    } else {
        LOG_WARN("profiler '%s': EventPipeStartSession failed with HRESULT %s (attempt %d)%s", p->name,
                 HR_STR(hr), p->session_attempts,
                 p->session_attempts < 3 ? "; retried on a later tick" : "; no allocation/contention profile");
    }
}

/* ---- the sampler thread --------------------------------------------------------------- */

void prof_sampler_setup(struct profiler *p)
{
    if (p->lastgasp_entry && !atomic_load(&p->stop)) {
        if (prof_lastgasp_start() != 0)
            LOG_WARN("profiler '%s': no last gasp: a process that ends without Shutdown loses its current period",
                     p->name);
        p->lastgasp_after_ns = mono_ns() - p->init_mono;
    }
    pthread_mutex_lock(&p->work_lock);
    if (p->final || atomic_load(&p->stop)) { /* Shutdown or a last gasp came first */
        pthread_mutex_unlock(&p->work_lock);
        return;
    }
    prof_tables(p);
    if ((p->cfg.cpu || p->cfg.wall) && p->cfg.sampler == PROF_SAMPLER_SIGNAL) {
        char why[256];
        p->sig = prof_sig_start(p->cfg.interval_ms, p->cfg.cpu, p->cfg.wall, p->span_peek, why, sizeof why);
        if (p->sig) {
            atomic_store(&p->mode, PROF_SAMPLER_SIGNAL);
            p->sig_start = mono_ns();
        }
        else
            LOG_WARN("profiler '%s': the signal sampler cannot run here (%s); using the suspend sampler", p->name,
                     why);
    }
    pthread_mutex_unlock(&p->work_lock);
    if ((p->cfg.cpu || p->cfg.wall) && !p->sig && !p->info10)
        LOG_WARN("profiler '%s': the runtime has no ICorProfilerInfo10 (SuspendRuntime, .NET Core 3.0+): no cpu "
                 "or wall profile", p->name);
    int sampling = p->sig || p->info10;
    LOG_INFO("profiler '%s': started for %s[%ld]: output %s every %d s, %s sampler every %d ms; cpu=%d wall=%d "
             "exceptions=%d allocations=%d contention=%d; its ending handlers ready %.0f us after Initialize", p->name,
             p->process, p->pid, p->cfg.output_dir, p->cfg.period_s,
             p->sig ? "signal (SIGPROF, no pause)" : "suspend (SuspendRuntime)", p->cfg.interval_ms,
             p->cfg.cpu && sampling, p->cfg.wall && sampling, p->cfg.exceptions, p->cfg.allocations && p->info12,
             p->cfg.contention && p->info12, (double)p->lastgasp_after_ns / 1e3);
}


/* The sampler thread sleeps until its next tick (CLOCK_MONOTONIC ns) or until p->stop is set:
 * a futex wait on p->stop with an absolute timeout, one system call per tick (a condition
 * variable's timed wait took two, and the tick's own system calls are few). */
static void sleep_until(struct profiler *p, int64_t deadline)
{
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    while (!atomic_load(&p->stop)) {
        /* FUTEX_WAIT_BITSET: an absolute timeout on CLOCK_MONOTONIC; returns at once
         * (EAGAIN) when stop is no longer 0 */
        long r = syscall(SYS_futex, (int *)&p->stop, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts, NULL,
                         FUTEX_BITSET_MATCH_ANY);
        if (r != 0 && errno == ETIMEDOUT)
            return;
        if (r != 0 && errno != EINTR && errno != EAGAIN) { /* no futex: sleep in steps of 1 ms */
            int64_t now = mono_ns();
            if (now >= deadline)
                return;
            int64_t step = deadline - now < 1000000 ? deadline - now : 1000000;
            struct timespec st = {.tv_sec = 0, .tv_nsec = step};
            nanosleep(&st, NULL);
        }
    }
}

/* Sets p->stop and wakes the sampler thread. */
void prof_stop_and_wake(struct profiler *p)
{
    atomic_store(&p->stop, 1);
    syscall(SYS_futex, (int *)&p->stop, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

/* The thread that starts the EventPipe session eventpipe_delay_ms after Initialize, then
 * ends: the runtime's managed EventSource work that the session wakes runs on it. */
static void *session_main(void *arg)
{
    struct profiler *p = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-evpipe");
    atomic_store(&p->own_tid, current_tid());
    if (!atomic_load(&p->stop))
        prof_start_session(p);
    atomic_store(&p->session_thread_done, 1);
    return NULL;
}

void *prof_sampler_main(void *arg)
{
    struct profiler *p = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-prof");
    prof_sampler_setup(p);
    int64_t interval = (int64_t)p->cfg.interval_ms * 1000000;
    int64_t period = (int64_t)p->cfg.period_s * 1000000000;
    int64_t next = mono_ns() + interval;
    int sample = (p->sig || p->info10) && (p->cfg.cpu || p->cfg.wall);
    while (!atomic_load(&p->stop)) {
        sleep_until(p, next);
        if (atomic_load(&p->stop))
            break;
        pthread_mutex_lock(&p->work_lock);
        if (p->final || atomic_load(&p->stop)) { /* Shutdown or a last gasp took over */
            pthread_mutex_unlock(&p->work_lock);
            break;
        }
        if (p->session_thread_started && atomic_load(&p->session_thread_done)) {
            pthread_join(p->session_thread, NULL);
            p->session_thread_started = 0;
        }
        if (p->want_session && !atomic_load(&p->session_started) && p->session_attempts < 3 &&
            !p->session_thread_started && mono_ns() >= p->session_due) {
            atomic_store(&p->session_thread_done, 0);
            if (pthread_create(&p->session_thread, NULL, session_main, p) == 0)
                p->session_thread_started = 1;
            else
                prof_start_session(p); /* no thread for it: from here, this once */
        }
        /* `profile stop|start` (profiler_ctl.c): done here, where the signal sampler's slots live */
        const int paused = atomic_load(&p->want_paused);
        if (paused != atomic_load(&p->paused)) {
            if (paused && p->sig && atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL)
                prof_sig_pause(p->sig, &p->q);
            if (!paused)
                p->views_gen = UINT64_MAX; /* the threads are copied and armed again at this tick */
            atomic_store(&p->paused, paused);
        }
        if (sample && !paused && atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL)
            prof_signal_tick(p);
        else if (sample && !paused && p->info10)
            prof_suspend_tick(p);
        prof_drain(p);
        int64_t now = mono_ns();
        if (now - p->period_start_mono >= period)
            prof_flush(p, NULL);
        /* the pause budget: at most pause_budget_pct of wall time stopped (at most 1 s) */
        int64_t iv = interval;
        if (sample && atomic_load(&p->mode) == PROF_SAMPLER_SUSPEND && p->cfg.pause_budget_pct > 0) {
            int64_t need = p->pause_ewma * 100 / p->cfg.pause_budget_pct;
            iv = need > iv ? (need < 1000000000 ? need : 1000000000) : iv;
        }
        pthread_mutex_unlock(&p->work_lock);
        if (atomic_load(&p->mode) == PROF_SAMPLER_SUSPEND)
            p->interval_sum += (uint64_t)iv;
        next += iv;
        if (next <= now)
            next = now + iv; /* missed ticks are skipped, not bunched */
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        atomic_store(&p->sampler_cpu_ns, (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec);
    return NULL;
}

void prof_retire_sampler(struct profiler *p)
{
    atomic_store(&p->stop, 1);
}

int64_t prof_sampler_cpu_ns(struct profiler *p)
{
    clockid_t cid;
    struct timespec cpu;
    if (p->sampler_started && pthread_getcpuclockid(p->sampler, &cid) == 0 && clock_gettime(cid, &cpu) == 0)
        return (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec;
    return atomic_load(&p->sampler_cpu_ns); /* it ended (or was joined) */
}

void prof_stop_sampler(struct profiler *p)
{
    if (!p->sampler_started)
        return;
    prof_stop_and_wake(p);
    pthread_join(p->sampler, NULL);
    p->sampler_started = 0;
    prof_wait_session_thread(p);
}

void prof_wait_session_thread(struct profiler *p)
{
    if (p->session_thread_started) { /* starting the session: bounded, it is the runtime's call */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_timedjoin_np(p->session_thread, NULL, &ts) != 0) {
            LOG_WARN("profiler '%s': the EventPipe session is still starting at shutdown; not waited for", p->name);
            pthread_detach(p->session_thread);
        }
        p->session_thread_started = 0;
    }
}
