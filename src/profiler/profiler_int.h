/* The built-in profiler's private parts, shared by its files: struct profiler (one per
 * `builtin = profiler` child), the sample types, the clocks, and the functions each file
 * gives the others.
 *   profiler.c          the ICorProfilerCallback11 child: callbacks, Initialize, Shutdown,
 *                       last gasp, COM plumbing, clrmux_profiler_create
 *   profiler_thread.c   the sampler thread (its first steps, its ticks, drains and periodic
 *                       files) and the EventPipe session's start
 *   profiler_stacks.c   stack snapshots and the sampler's ticks (suspend and signal)
 *   profiler_profile.c  the period's tables (profile builder, name cache), raw samples ->
 *                       names -> pprof, and writing a period's file
 * Calls go down this list, never up (tests/circles.sh). */
#ifndef CLRMUX_PROFILER_INT_H
#define CLRMUX_PROFILER_INT_H

#define COBJMACROS
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loader/child_base.h"
#include "profiler/framename.h"
#include "profiler/pprof.h"
#include "profiler/prof.h"

#define RAW_RECORDS 8192
#define RAW_FRAMES (128 * 1024)
#define NAME_ENTRIES 65536
#define NAME_ARENA (8u << 20)
/* Distinct samples a period may spend on span-labelled ones (of max_samples = 16384): each
 * span makes its own samples, so a busy service would otherwise fill the profile with them
 * and drop later samples outright; past this, samples keep their stack and values without
 * the span labels (counted, and said in the profile's comments and the log). */
#define SPAN_SAMPLE_CAP 12288
#define NO_FRAMES "[no managed frames]"
#define TRUNCATED "[truncated]"

/* sample types, in this order */
enum { V_CPU, V_WALL, V_EXC, V_ALLOC_N, V_ALLOC_B, V_LOCK_N, V_LOCK_NS, V_COUNT };

struct profiler {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    char name[CLRMUX_NAME_MAX];
    struct prof_config cfg;
    ICorProfilerInfo3 *info;    /* names, stacks, threads */
    ICorProfilerInfo10 *info10; /* SuspendRuntime / ResumeRuntime (NULL: no cpu/wall) */
    ICorProfilerInfo12 *info12; /* EventPipe (NULL: no allocations/contention) */
    struct prof_sig *sig;       /* the signal sampler (NULL: the suspend sampler) */
    _Atomic int mode;           /* PROF_SAMPLER_SIGNAL / _SUSPEND: the sampler in use */
    int64_t sig_start;          /* mono ns when the signal sampler started */
    int64_t init_mono;          /* mono ns at the end of Initialize */
    int lastgasp_entry;         /* the last gasp's table entry is made (Initialize) */
    int tables_failed;          /* prof_tables found no memory */
    int64_t lastgasp_after_ns;  /* its thread and handlers were ready this long after Initialize */
    struct prof_threads threads;
    struct prof_rawq q;
    struct prof_names *names;
    clrmux_pprof_builder *pb;
    char process[128];
    long pid;
    int output_ok;
    struct prof_push *push; /* Pyroscope (endpoint set), or NULL */
    /* the built-in tracer's span contexts (the host's; NULL without a host: no span labels) */
    prof_span_peek_fn span_peek;
    uint64_t span_unlabelled; /* this period: samples whose span labels were left out (cap) */
    struct clrmux_span_context *(*span_find)(uint32_t tid);

    pthread_t sampler;
    int sampler_started;
    /* The EventPipe session is started by a short-lived thread of ours (session_main), and
     * the runtime's managed EventSource side then runs on it: it becomes a runtime thread.
     * It is ours, not the app's: never sampled (its tid and ThreadID kept here, 0 until then).
     * Not the sampler thread itself: a runtime thread cannot SuspendRuntime on .NET 8
     * (CORPROF_E_UNSUPPORTED_CALL_SEQUENCE), which the suspend sampler needs. */
    _Atomic uint32_t own_tid;
    _Atomic ThreadID own_id;
    pthread_t session_thread;
    int session_thread_started;     /* by the sampler thread; joined by it or at Shutdown */
    _Atomic int session_thread_done;
    /* held by the sampler while it works (tick, drain, flush), by Shutdown and by the last
     * gasp (common/lastgasp.h), which sets `final`: no file is written after it */
    pthread_mutex_t work_lock;
    int final;
    _Atomic int stop; /* 1: the sampler thread ends; it sleeps on this word (a futex) */
    /* `profile stop|start` (profiler_ctl.c): what the control channel wants, and what the
     * sampler thread has done (it disarms the signal sampler's timers, then skips its ticks) */
    _Atomic int want_paused, paused;
    _Atomic int shut_down;

    int want_session;
    _Atomic int session_started;
    EVENTPIPE_SESSION session;
    int session_attempts;
    int64_t session_due; /* CLOCK_MONOTONIC ns: the session is started from then on */

    struct prof_thread_view *views; /* sampler's copy of the registry */
    size_t nviews;                  /* the signal sampler's copy: views[nviews] ... */
    uint64_t views_gen;             /* ... made at this registry generation */
    int64_t period_start_unix, period_start_mono;
    uint64_t registry_drops_reported;

    /* statistics: sampler-owned, except the atomics bumped by callbacks */
    /* per tick: t0 SuspendRuntime called, t_susp it returned, t_res ResumeRuntime called, t1 it
     * returned. The world is stopped from (about) t_susp to t_res. */
    uint64_t snap_empty, sig_ticks;
    char last_path[PATH_MAX];    /* the last profile's name, and how many share its second */
    unsigned same_second;
    uint64_t ticks_before_start; /* ticks skipped: the runtime had not started yet */
    uint64_t suspend_busy;       /* ticks skipped: another suspension was in progress */
    uint64_t ticks, suspend_failures, snap_failures, pause_max, suspend_ns, walk_ns, resume_ns;
    int64_t pause_ewma;     /* ns, of (t_res - t0) */
    uint64_t interval_sum;  /* ns, of the intervals actually used (stretched by the budget) */
    _Atomic uint64_t exceptions, allocations, contentions;
    uint64_t files, file_failures, raw_drops_total, pprof_drops_total;
    _Atomic int64_t sampler_cpu_ns; /* written by the sampler thread as it ends */
};

static inline struct profiler *impl(ICorProfilerCallback11 *i) { return (struct profiler *)i; }

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU clock of thread `tid` of this process (Linux: MAKE_THREAD_CPUCLOCK(tid,
 * CPUCLOCK_SCHED)). -1 when the thread is gone. */
static inline int64_t thread_cpu_ns(uint32_t tid)
{
    clockid_t cid = (clockid_t)((~(unsigned)tid) << 3) | 6;
    struct timespec ts;
    if (clock_gettime(cid, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint32_t current_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* A stack snapshot: frames (a FunctionID, or PROF_FRAME_NATIVE | ip), leaf first. */
struct snap {
    uint64_t f[PROF_MAX_FRAMES];
    uint16_t n;
    uint8_t truncated;
};

/* profiler_stacks.c */
/* Walks `thread` (0: the current thread) with DoStackSnapshot into *s. Keeps what was
 * collected even on failure; returns DoStackSnapshot's HRESULT. */
HRESULT prof_walk(struct profiler *p, ThreadID thread, struct snap *s);
/* The current thread's OS id and name into r->tid, r->tname, and its open span. */
void prof_current_thread(struct profiler *p, ThreadID id, struct prof_raw *r);
/* The open span of another thread (OS id tid) into r->span, read without a lock. */
void prof_other_thread_span(struct profiler *p, uint32_t tid, struct prof_raw *r);
/* One suspend-sampler tick: SuspendRuntime, a walk of each thread, ResumeRuntime. */
void prof_suspend_tick(struct profiler *p);
/* One signal-sampler tick (sigtick.c); falls back to the suspend sampler when our SIGPROF
 * handler was replaced. */
void prof_signal_tick(struct profiler *p);
/* "signal sampler (...) delivered ..." into out[outsz], for the log and the profile. */
void prof_sig_summary(struct profiler *p, char *out, size_t outsz);

/* profiler_profile.c (under work_lock) */
/* Creates the profile builder (p->pb) and the name cache (p->names) unless they exist: the
 * sampler thread's first step, else the first drain or flush (Shutdown, the last gasp), all
 * under work_lock. 0, or -1 (out of memory: logged once, and nothing is written). */
int prof_tables(struct profiler *p);
/* Adds the raw samples queued so far to the current period's profile. */
void prof_drain(struct profiler *p);
/* Writes the current period's file (and pushes it) and starts the next period. `last`: NULL
 * for a periodic file, "shutdown", or the last gasp's cause ("SIGTERM", "exit"...). */
void prof_flush(struct profiler *p, const char *last);

/* profiler_thread.c */
/* The sampler thread's first steps, off the app's main thread (or Initialize's, when that
 * thread cannot be created): the last gasp's thread and handlers, the signal sampler's
 * start and self-test (the sampler in use: p->sig, p->mode), the "started" log line. */
void prof_sampler_setup(struct profiler *p);
/* Starts the EventPipe session (allocations, contention); logs the outcome. */
void prof_start_session(struct profiler *p);
/* Sets p->stop and wakes the sampler thread. */
void prof_stop_and_wake(struct profiler *p);
/* The sampler thread (arg: the profiler): ticks, drains, periodic files, the session's start. */
void *prof_sampler_main(void *arg);
/* Stops and joins the sampler thread, and the session's thread (bounded). */
void prof_stop_sampler(struct profiler *p);
/* Shutdown's stop, without waiting for the sampler thread: sets p->stop (no wake-up) and
 * returns; once the caller holds work_lock the sampler runs no more ticks (it ends when it
 * next wakes, at its next tick, if the process is still there). It does not wait for the
 * session's thread: the caller calls prof_wait_session_thread after its work under work_lock.
 * Saves Shutdown the sampler's wake-up and the join (two context switches on its path). */
void prof_retire_sampler(struct profiler *p);
/* Waits (at most 2 s) for a thread still starting the EventPipe session. */
void prof_wait_session_thread(struct profiler *p);
/* The sampler thread's CPU time so far (ns), from its CPU clock, or what it recorded when it
 * ended; 0 if unknown. */
int64_t prof_sampler_cpu_ns(struct profiler *p);

#endif
