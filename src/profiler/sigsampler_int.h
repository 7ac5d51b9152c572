/* The signal sampler's shared parts (sigsampler.c: the SIGPROF handler, start, check;
 * sigtick.c: the sampler thread's side, per tick): the slots, the sampler's state and the
 * helpers both use. Linux x64 and arm64 only; internal to those two files. */
#ifndef CLRMUX_PROFILER_SIGSAMPLER_INT_H
#define CLRMUX_PROFILER_SIGSAMPLER_INT_H

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>

#include "profiler/prof.h"

/* A cheap, monotonic cycle count for the handler's cost: the time-stamp counter on x64, the
 * generic timer's virtual count (CNTVCT_EL0, readable from user mode on Linux) on arm64. */
static inline uint64_t cycles(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#endif
}

#define SIG_MAGIC 0x5CA1u      /* bits 16..30 of the signal's value */
#define SIG_WALL 0x8000u       /* bit 15: a wall walk (else a CPU timer walk) */
#define SIG_INDEX 0x1FFFu      /* bits 0..12: the slot */
#define SIG_SELFTEST SIG_INDEX /* the start-up check */
#define RING 4                 /* walks a thread can hold between two drains */
/* A thread that used less CPU than this since the sampler read its clock before its last
 * wall walk is taken as not having run: the signal's delivery, our handler and the restart
 * of the interrupted system call cost it a few microseconds (~20 us on a VM where a system
 * call costs 5 us). */
#define WALL_RAN_NS 50000
/* A thread found idle is checked again after 1, 3, 7, 15, 31, then 63 ticks: 200 threads
 * blocked for long cost ~3 clock reads per tick instead of 200. Its wall time accrues
 * meanwhile; when a check finds it ran, the wall time since the previous check minus its CPU
 * time and one interval stays with the old stack, the rest goes to the new walk (a cpu walk
 * drained meanwhile ends the wait: the time until then stays with the old stack). */
#define WALL_MAX_SKIP 63
/* A thread that used at least half of the wall time since the sampler last read its CPU
 * clock (a read at most this many intervals old) runs: its CPU timer walks it about every
 * other interval, and the next walk (cpu or wall) carries its wall time. At most this many
 * intervals wait so: beyond, the thread is signalled. */
#define WALL_DEFER_WINDOW 16
/* A wall signal not handled after this many ticks (the thread blocks SIGPROF) is given up. */
#define WALL_STUCK_TICKS 100
#define SLOT_CHUNK 64             /* slots allocated together */
#define CODE_RELOAD_NS 5000000000ll /* executable ranges reloaded every 5 s */

struct ent {
    uint8_t wall, status, safe; /* safe: walked before the stack mapping was known (no scan) */
    uint16_t n;
    int64_t v;      /* cpu: thread CPU ns since the previous cpu walk; wall: ns carried */
    struct clrmux_span_ids span; /* the thread's open span when walked (span_id 0: none) */
    uint64_t f[PROF_MAX_FRAMES];
};

struct slot {
    /* shared with the handler */
    _Atomic uint32_t owner; /* the OS thread whose handler may write; 0: none */
    _Atomic uint32_t busy;  /* a handler is writing */
    _Atomic uintptr_t owner_self; /* pthread_self() of the owner, once its handler has run:
                                     spares the gettid system call */
    _Atomic uint64_t head, tail;
    _Atomic uint64_t map_lo, map_hi; /* the thread's stack mapping (0: not known yet) */
    _Atomic uint64_t seen_sp;        /* an RSP seen by a walk, for the sampler to look up */
    _Atomic int64_t cpu_carry;       /* CPU ns of cpu walks dropped (ring full), for the next */
    _Atomic int64_t wall_pending;    /* wall ns the next wall walk carries */
    _Atomic int wall_inflight;
    /* sampler thread only. The walks' frames (ring, last_f: 10 KB) are allocated apart, so
     * that the slots are small and close together: a tick over 200 idle threads touches a
     * cache line or two of each, not 200 pages */
    uint32_t tid;
    ThreadID id;
    uint32_t idle_level, skip; /* ticks skipped after the last check that found the thread
                                  idle (doubles per idle check); ticks left to skip */
    int64_t wall_cpu_seen, last_wall, wall_accum;
    int64_t wall_next;          /* wall ns of a running thread, for its next walk */
    int64_t chk_cpu, chk_mono;  /* its CPU clock at the sampler's last read, and when (0: none) */
    uint64_t cpu_walk_tick;     /* the tick that drained its last cpu walk (0: none) */
    uint64_t sent_tick;         /* the tick that sent the wall signal in flight */
    int64_t sent_cpu;           /* the thread's CPU clock read just before that signal */
    uint64_t cpu_samples;
    uint16_t last_n;
    uint8_t last_status, have_last;
    int has_timer;
    timer_t timer;
    struct clrmux_span_ids last_span; /* the last walk's span: a thread that did not run since
                                         is still in it */
    char name[PROF_THREAD_NAME];
    struct ent *ring;  /* [RING], shared with the handler; allocated with the slot, never freed */
    uint64_t *last_f;  /* [PROF_MAX_FRAMES], sampler thread only: the last walk's frames */
};

struct prof_sig {
    _Atomic(struct slot *) slots[PROF_MAX_THREADS];
    size_t high;
    int64_t interval_ns;
    int cpu, wall;
    prof_span_peek_fn peek; /* the tracer's span context of the calling thread, or NULL */
    uint8_t present[PROF_MAX_THREADS];
    uint16_t pend_idx[PROF_MAX_THREADS]; /* slots whose stack mapping is to be looked up */
    uint64_t pend_sp[PROF_MAX_THREADS], pend_lo[PROF_MAX_THREADS], pend_hi[PROF_MAX_THREADS];
    uint64_t frames[PROF_MAX_FRAMES];
    struct prof_sig_stats st; /* sampler-side counters */
    _Atomic uint64_t ring_drops, stale, foreign, safe_walks; /* handler-side */
    _Atomic uint64_t handler_cycles, handler_calls; /* TSC cycles spent in our handler */
    uint64_t tsc0;
    int64_t mono0; /* the TSC against the monotonic clock, for cycles -> ns */
    int timer_logged;
    /* executable ranges for the walk's stack scan: two copies, the handler reads `code` */
    struct prof_code_ranges *code_buf[2];
    _Atomic(struct prof_code_ranges *) code;
    int64_t code_loaded;
    uint64_t tick_no; /* ticks so far, from 1 */
    struct slot *chunk; /* the chunk new slots come from, chunk_used of SLOT_CHUNK taken */
    size_t chunk_used;
    int64_t tick_now; /* the monotonic clock at the last tick */
};

extern pid_t prof_sig_pid; /* getpid() and getuid() at prof_sig_start */
extern uid_t prof_sig_uid;

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline clockid_t thread_clock(uint32_t tid) { return (clockid_t)((~(unsigned)tid) << 3) | 6; }

static inline int64_t thread_cpu_ns(uint32_t tid)
{
    struct timespec ts;
    if (clock_gettime(thread_clock(tid), &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int send_to(uint32_t tid, uint32_t code)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGPROF;
    si.si_code = SI_QUEUE; /* negative: allowed from any thread of the process */
    si.si_pid = prof_sig_pid;
    si.si_uid = prof_sig_uid;
    si.si_value.sival_int = (int)code;
    return (int)syscall(SYS_rt_tgsigqueueinfo, (long)prof_sig_pid, (long)tid, (long)SIGPROF, &si);
}

#endif
