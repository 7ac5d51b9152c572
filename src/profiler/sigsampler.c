/* The signal sampler (`sampler = signal`, Linux x64 and arm64): CPU and wall stack samples without
 * stopping the runtime.
 *
 *   cpu:  one POSIX timer per managed thread on that thread's CPU clock (timer_create,
 *         SIGEV_THREAD_ID): every interval of CPU the thread used, the kernel sends SIGPROF
 *         to that thread, which walks its own stack.
 *   wall: every interval the sampler thread signals (rt_tgsigqueueinfo, SIGPROF) each thread
 *         that ran since its last walk but is not running now; a thread that did not run has
 *         the same stack, so its wall time is added to that stack without a signal (200
 *         blocked threads cost a few clock reads per tick, not 200 signals), and a thread that
 *         runs is walked by its CPU timer anyway: its wall time waits for the next walk,
 *         without a signal.
 *
 * Why SIGPROF: the runtime (PAL, signal.cpp) handles SIGILL, SIGTRAP, SIGFPE, SIGBUS,
 * SIGSEGV, SIGABRT, SIGINT, SIGQUIT, SIGTERM and, for its thread suspension (activation
 * injection), SIGRTMIN; it ignores SIGPIPE. SIGPROF is none of these, and is the signal
 * meant for profiling timers. The handler is installed with SA_RESTART (as the PAL installs
 * its own, so that slow system calls restart) and blocks the asynchronous signals while it
 * runs (the runtime's activation signal waits the few microseconds of a walk); any SIGPROF
 * that is not ours (a foreign timer, kill -PROF) goes to the handler installed before us.
 *
 * The handler is async-signal-safe: no lock, no allocation, no call into the runtime. It
 * finds its thread's slot from the signal's value (slot index + magic), checks that the slot
 * belongs to the calling thread (gettid), walks the frame-pointer chain (stackwalk.c) into
 * the slot's ring of preallocated entries, and publishes it; the sampler thread drains the
 * rings, maps IPs to functions (GetFunctionFromIP, in the drain) and writes the profile. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/lazymem.h"
#include "common/log.h"
#include "profiler/prof.h"

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <ucontext.h>

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

static _Atomic(struct prof_sig *) g_sig;
static struct sigaction g_prev;
static _Atomic int g_selftest_hits;
static pid_t g_pid;
static uid_t g_uid;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static clockid_t thread_clock(uint32_t tid) { return (clockid_t)((~(unsigned)tid) << 3) | 6; }

static int64_t thread_cpu_ns(uint32_t tid)
{
    struct timespec ts;
    if (clock_gettime(thread_clock(tid), &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int send_to(uint32_t tid, uint32_t code)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGPROF;
    si.si_code = SI_QUEUE; /* negative: allowed from any thread of the process */
    si.si_pid = g_pid;
    si.si_uid = g_uid;
    si.si_value.sival_int = (int)code;
    return (int)syscall(SYS_rt_tgsigqueueinfo, (long)g_pid, (long)tid, (long)SIGPROF, &si);
}

/* ---- the handler (async-signal-safe) ------------------------------------------------- */

/* CPU ns a CPU timer signal stands for: one interval, plus one per overrun (expirations
 * while the previous signal was still pending). */
static int64_t cpu_intervals(const struct prof_sig *s, const siginfo_t *si)
{
    int over = si->si_code == SI_TIMER && si->si_overrun > 0 ? si->si_overrun : 0;
    return s->interval_ns * (1 + (int64_t)over);
}

static void chain(int sig, siginfo_t *si, void *uc)
{
    if (g_prev.sa_flags & SA_SIGINFO) {
        if (g_prev.sa_sigaction)
            g_prev.sa_sigaction(sig, si, uc);
    } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
        g_prev.sa_handler(sig);
    }
    /* SIG_DFL would end the process: a stray SIGPROF is counted and ignored instead */
}

static void on_sigprof(int sig, siginfo_t *si, void *ucv)
{
    int saved = errno;
    struct prof_sig *s = atomic_load_explicit(&g_sig, memory_order_acquire);
    uint32_t code = (uint32_t)si->si_value.sival_int;
    int ours = s && (si->si_code == SI_TIMER || (si->si_code == SI_QUEUE && si->si_pid == g_pid)) &&
               (code >> 16) == SIG_MAGIC;
    if (!ours) {
        if (s)
            atomic_fetch_add_explicit(&s->foreign, 1, memory_order_relaxed);
        chain(sig, si, ucv);
        errno = saved;
        return;
    }
    uint64_t tsc_in = cycles();
    uint32_t idx = code & SIG_INDEX;
    if (idx == SIG_SELFTEST) {
        atomic_fetch_add(&g_selftest_hits, 1);
        errno = saved;
        return;
    }
    struct slot *sl = idx < PROF_MAX_THREADS ? atomic_load_explicit(&s->slots[idx], memory_order_acquire) : NULL;
    uintptr_t self = (uintptr_t)pthread_self(); /* reads the thread pointer: no system call */
    uint32_t owner = sl ? atomic_load(&sl->owner) : 0;
    int known = owner && atomic_load(&sl->owner_self) == self;
    if (!owner || (!known && (uint32_t)syscall(SYS_gettid) != owner)) {
        atomic_fetch_add_explicit(&s->stale, 1, memory_order_relaxed);
        errno = saved;
        return;
    }
    atomic_store(&sl->busy, 1);
    if (!known)
        atomic_store(&sl->owner_self, self);
    if (atomic_load(&sl->owner) != owner) { /* disarmed meanwhile */
        atomic_store(&sl->busy, 0);
        errno = saved;
        return;
    }
    int wall = (code & SIG_WALL) != 0;
    uint64_t h = atomic_load_explicit(&sl->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&sl->tail, memory_order_acquire);
    if (h - t >= RING) {
        atomic_fetch_add_explicit(&s->ring_drops, 1, memory_order_relaxed);
        if (wall)
            atomic_store(&sl->wall_inflight, 0); /* wall_pending waits for the next walk */
        else
            atomic_fetch_add(&sl->cpu_carry, cpu_intervals(s, si)); /* the next cpu walk carries it */
        atomic_store(&sl->busy, 0);
        errno = saved;
        return;
    }
    struct ent *e = &sl->ring[h % RING];
    const ucontext_t *uc = ucv;
    struct prof_walk_regs r = {
#if defined(__x86_64__)
        .ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP],
        .sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
        .fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP],
#else /* arm64: the frame pointer is x29; a frame record is [saved x29, saved x30 (LR)] */
        .ip = (uint64_t)uc->uc_mcontext.pc,
        .sp = (uint64_t)uc->uc_mcontext.sp,
        .fp = (uint64_t)uc->uc_mcontext.regs[29],
#endif
    };
    uint64_t hi = atomic_load_explicit(&sl->map_hi, memory_order_acquire);
    uint64_t lo = atomic_load_explicit(&sl->map_lo, memory_order_relaxed);
    uint64_t bound = (hi && r.sp >= lo && r.sp < hi) ? hi : 0;
    if (!bound) { /* the mapping is not known yet (or RSP is elsewhere: an alternate stack) */
        atomic_fetch_add_explicit(&s->safe_walks, 1, memory_order_relaxed);
        if (!hi)
            atomic_store_explicit(&sl->seen_sp, r.sp, memory_order_relaxed);
    }
    int status;
    e->n = (uint16_t)prof_fp_walk(&r, bound, atomic_load_explicit(&s->code, memory_order_acquire), e->f,
                                  PROF_MAX_FRAMES, &status);
    e->status = (uint8_t)status;
    e->wall = (uint8_t)wall;
    /* the thread's open span: a TLS read and two loads when none is open. A walk that
     * interrupted the tracer while it updated the record (seq odd) has no labels. */
    if (!s->peek || !clrmux_span_context_read(s->peek(), 0, &e->span, 1))
        e->span.span_id = 0;
    e->safe = !bound;
    if (wall) {
        e->v = atomic_exchange(&sl->wall_pending, 0);
        atomic_store(&sl->wall_inflight, 0);
    } else {
        /* the CPU timer expired 1 + si_overrun times since its previous signal: exactly that
         * many intervals of this thread's CPU, without a clock read */
        e->v = cpu_intervals(s, si) + atomic_exchange(&sl->cpu_carry, 0);
    }
    atomic_store_explicit(&sl->head, h + 1, memory_order_release);
    atomic_store(&sl->busy, 0);
    atomic_fetch_add_explicit(&s->handler_cycles, cycles() - tsc_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->handler_calls, 1, memory_order_relaxed);
    errno = saved;
}

/* ---- start / check / stop -------------------------------------------------------------- */

/* The sampler's state and its two code-range buffers, in one mapping (sig_mem). */
struct sig_mem {
    struct prof_sig s;
    struct prof_code_ranges code[2];
};

static void sig_free(struct prof_sig *s) { clrmux_lazy_free(s); /* its sig_mem: s is its first member */ }

struct prof_sig *prof_sig_start(int interval_ms, int cpu, int wall, prof_span_peek_fn peek, char *why,
                                size_t whysz)
{
    if (atomic_load(&g_sig)) {
        snprintf(why, whysz, "another signal sampler already runs in this process");
        return NULL;
    }
    /* ~150 KB of tables and 2 x 64 KB of code ranges, mapped (lazymem.h): calloc cleared them
     * from recycled heap at start-up (1-2 ms of a hello world's main thread), and a hello world
     * touches a few pages of them; one mapping (one mmap, one length header on the page of
     * the fields set here) rather than three */
    struct sig_mem *m = clrmux_lazy_calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, whysz, "out of memory");
        return NULL;
    }
    struct prof_sig *s = &m->s;
    s->interval_ns = (int64_t)interval_ms * 1000000;
    s->code_buf[0] = &m->code[0];
    s->code_buf[1] = &m->code[1];
    s->cpu = cpu;
    s->wall = wall;
    s->peek = peek;
    s->mono0 = mono_ns();
    s->tsc0 = cycles();
    g_pid = getpid();
    g_uid = getuid();

    struct sigaction prev, sa;
    if (sigaction(SIGPROF, NULL, &prev) != 0) {
        snprintf(why, whysz, "sigaction(SIGPROF): %s", strerror(errno));
        sig_free(s);
        return NULL;
    }
    g_prev = prev;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    static const int sync_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT};
    for (size_t i = 0; i < sizeof sync_signals / sizeof sync_signals[0]; i++)
        sigdelset(&sa.sa_mask, sync_signals[i]);
    atomic_store_explicit(&g_sig, s, memory_order_release);
    if (sigaction(SIGPROF, &sa, NULL) != 0) {
        snprintf(why, whysz, "sigaction(SIGPROF): %s", strerror(errno));
        atomic_store(&g_sig, NULL);
        sig_free(s);
        return NULL;
    }
    /* check 1: a SIGPROF sent to this thread reaches our handler (unless this thread
     * blocks it, then the check cannot be made here) */
    sigset_t cur;
    if (pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && !sigismember(&cur, SIGPROF)) {
        int before = atomic_load(&g_selftest_hits);
        if (send_to((uint32_t)syscall(SYS_gettid), (SIG_MAGIC << 16) | SIG_SELFTEST) != 0) {
            snprintf(why, whysz, "rt_tgsigqueueinfo(SIGPROF): %s", strerror(errno));
            goto fail;
        }
        if (atomic_load(&g_selftest_hits) == before) {
            snprintf(why, whysz, "a SIGPROF sent to this thread did not reach the handler");
            goto fail;
        }
    }
    /* check 2: a CPU timer that signals one thread can be created */
    if (cpu) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = SIGPROF;
        sev.sigev_value.sival_int = (int)((SIG_MAGIC << 16) | SIG_SELFTEST);
        sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        timer_t t;
        if (timer_create(thread_clock((uint32_t)syscall(SYS_gettid)), &sev, &t) != 0) {
            snprintf(why, whysz, "timer_create(thread CPU clock, SIGEV_THREAD_ID): %s", strerror(errno));
            goto fail;
        }
        timer_delete(t);
    }
    return s;
fail:
    sigaction(SIGPROF, &prev, NULL);
    atomic_store(&g_sig, NULL);
    sig_free(s);
    return NULL;
}

int prof_sig_check(struct prof_sig *s, char *why, size_t whysz)
{
    (void)s;
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) != 0)
        return 0;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigprof)
        return 0;
    snprintf(why, whysz, "the SIGPROF handler was replaced by another one (%p)",
             (cur.sa_flags & SA_SIGINFO) ? (void *)cur.sa_sigaction : (void *)cur.sa_handler);
    return -1;
}

/* ---- the sampler thread's side ------------------------------------------------------- */

static void push(struct prof_sig *s, struct slot *sl, struct prof_rawq *q, const uint64_t *f, uint16_t n,
                 const struct clrmux_span_ids *span, int status, int64_t cpu_ns, int64_t wall_ns)
{
    struct prof_raw r;
    memset(&r, 0, offsetof(struct prof_raw, type) + 1);
    if (span && span->span_id)
        r.span = *span;
    r.kind = PROF_K_SAMPLE;
    r.tid = sl->tid;
    r.truncated = status != PROF_WALK_OK;
    r.v0 = cpu_ns;
    r.v1 = wall_ns;
    _Static_assert(sizeof r.tname == sizeof sl->name, "thread name sizes");
    memcpy(r.tname, sl->name, sizeof r.tname); /* NUL-terminated: snprintf'd into sl->name */
    for (uint16_t i = 0; i < n; i++)
        s->frames[i] = (f[i] & PROF_FRAME_TAG_MASK) == PROF_FRAME_OSR_CALLER ? f[i] /* prof_osr_fold */
                                                                             : PROF_FRAME_MANAGED_IP | f[i];
    prof_rawq_push(q, &r, s->frames, n);
}

static void flush_accum(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    if (sl->wall_accum > 0 && sl->have_last)
        push(s, sl, q, sl->last_f, sl->last_n, &sl->last_span, sl->last_status, 0, sl->wall_accum);
    sl->wall_accum = 0;
}

static void drain_slot(struct prof_sig *s, struct slot *sl, struct prof_rawq *q, int64_t now)
{
    uint64_t t = atomic_load_explicit(&sl->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&sl->head, memory_order_acquire);
    if (t != h && sl->idle_level && sl->have_last && now > sl->last_wall) {
        /* it was idle, checked less often, and has been walked: the wall time until this
         * tick stays with the old stack, and the thread is checked again this tick */
        sl->wall_accum += now - sl->last_wall;
        s->st.wall_ns += now - sl->last_wall;
        sl->last_wall = now;
        sl->idle_level = sl->skip = 0;
    }
    for (; t != h; t++) {
        struct ent *e = &sl->ring[t % RING];
        if (e->status == PROF_WALK_BROKEN)
            s->st.truncated++;
        else if (e->status == PROF_WALK_DEPTH)
            s->st.depth_cut++;
        /* the wall time of a running thread waits for its next walk: this one */
        int64_t next = sl->wall_next;
        sl->wall_next = 0;
        if (e->wall) {
            flush_accum(s, sl, q);
            if (e->v + next > 0)
                push(s, sl, q, e->f, e->n, &e->span, e->status, 0, e->v + next);
        } else {
            s->st.cpu_samples++;
            s->st.cpu_ns += e->v;
            sl->cpu_walk_tick = s->tick_no;
            sl->cpu_samples++;
            if (sl->cpu_samples > s->st.max_thread_cpu_samples)
                s->st.max_thread_cpu_samples = sl->cpu_samples;
            push(s, sl, q, e->f, e->n, &e->span, e->status, e->v, next);
        }
        /* the newest stack, for wall time of a thread that does not run */
        flush_accum(s, sl, q);
        memcpy(sl->last_f, e->f, (size_t)e->n * sizeof e->f[0]);
        sl->last_n = e->n;
        sl->last_span = e->span;
        sl->last_status = e->status;
        sl->have_last = 1;
        /* a wall walk stands while the thread's CPU clock stays where the sampler read it
         * before signalling (the handler itself costs the thread a few microseconds); a cpu
         * walk's thread was running. A walk made before the stack mapping was known could not
         * scan past frameless frames: when it broke, or stopped at its first frame (a zero
         * frame pointer, where a bounded walk scans), walk this thread again rather than reuse
         * it (a chain followed to its outermost frame needed no scan). */
        sl->wall_cpu_seen =
            (e->safe && (e->status != PROF_WALK_OK || e->n < 2)) || !e->wall ? -1 : sl->sent_cpu;
    }
    atomic_store_explicit(&sl->tail, t, memory_order_release);
}

static void disarm(struct slot *sl)
{
    if (sl->has_timer) {
        timer_delete(sl->timer);
        sl->has_timer = 0;
    }
    atomic_store(&sl->owner, 0);
    while (atomic_load(&sl->busy))
        sched_yield();
}

/* The wall time not pushed yet goes to the last stack: the ticks skipped while the thread is
 * idle (counted, not added yet) and a running thread's time that waits for its next walk. */
static void settle_wall(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    drain_slot(s, sl, q, s->tick_now);
    if (sl->skip && sl->have_last && s->tick_now > sl->last_wall) {
        sl->wall_accum += s->tick_now - sl->last_wall;
        s->st.wall_ns += s->tick_now - sl->last_wall;
        sl->last_wall = s->tick_now;
    }
    sl->wall_accum += sl->wall_next;
    sl->wall_next = 0;
    flush_accum(s, sl, q);
}

static void retire(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    disarm(sl);
    settle_wall(s, sl, q);
    sl->id = 0;
    sl->tid = 0;
}

/* The stack pointer of thread tid from /proc/self/task/<tid>/syscall ("nr args... sp pc", or
 * "-1 sp pc" when blocked outside a system call), or 0 when it runs or cannot be read. */
static uint64_t blocked_sp(uint32_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (strncmp(buf, "running", 7) == 0)
        return 0;
    uint64_t tok[9];
    size_t k = 0;
    char *p = buf, *end;
    while (k < 9) {
        unsigned long long v = strtoull(p, &end, 0);
        if (end == p)
            break;
        tok[k++] = v;
        p = end;
    }
    return k >= 3 ? tok[k - 2] : 0;
}

static void arm(struct prof_sig *s, struct slot *sl, size_t idx, const struct prof_thread *t, int64_t now)
{
    int64_t cpu = thread_cpu_ns(t->tid);
    sl->id = t->id;
    sl->tid = t->tid;
    sl->have_last = 0;
    sl->last_n = 0;
    sl->last_span.span_id = 0;
    sl->wall_cpu_seen = -1;
    sl->last_wall = now;
    sl->wall_accum = 0;
    sl->wall_next = 0;
    sl->chk_cpu = sl->chk_mono = 0;
    sl->cpu_samples = 0;
    sl->idle_level = sl->skip = 0;
    sl->cpu_walk_tick = 0;
    atomic_store(&sl->owner_self, 0);
    atomic_store(&sl->head, 0);
    atomic_store(&sl->tail, 0);
    atomic_store(&sl->map_lo, 0);
    atomic_store(&sl->map_hi, 0);
    atomic_store(&sl->seen_sp, 0);
    atomic_store(&sl->cpu_carry, 0);
    atomic_store(&sl->wall_pending, 0);
    atomic_store(&sl->wall_inflight, 0);
    atomic_store(&sl->owner, t->tid);
    /* a thread blocked in a system call shows its stack pointer in /proc: its stack mapping
     * is then looked up in this tick, before its first walk (a walk without it reads each
     * frame by a system call, cannot scan frameless frames, and is made again) */
    uint64_t sp = blocked_sp(t->tid);
    if (sp)
        atomic_store(&sl->seen_sp, sp);
    s->st.threads++;
    if (!s->cpu || cpu < 0)
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_value.sival_int = (int)((SIG_MAGIC << 16) | (uint32_t)idx);
    sev._sigev_un._tid = (pid_t)t->tid;
    struct itimerspec its = {
        .it_interval = {.tv_sec = s->interval_ns / 1000000000, .tv_nsec = s->interval_ns % 1000000000},
        .it_value = {.tv_sec = s->interval_ns / 1000000000, .tv_nsec = s->interval_ns % 1000000000},
    };
    if (timer_create(thread_clock(t->tid), &sev, &sl->timer) != 0) {
        s->st.timer_failures++;
        if (!s->timer_logged++)
            LOG_WARN("profiler: timer_create for thread %u failed: %s; that thread has wall samples only "
                     "(logged once)", t->tid, strerror(errno));
        return;
    }
    if (timer_settime(sl->timer, 0, &its, NULL) != 0) {
        timer_delete(sl->timer);
        s->st.timer_failures++;
        return;
    }
    sl->has_timer = 1;
}

/* The stacks first seen by this tick's walks, and the executable ranges when they are due
 * (code_due), in one pass over /proc/self/maps (a start-up's first tick needs both: two
 * passes were 1-2 ms of the sampler thread on a VM, measured with perf) */
static void lookup_stacks(struct prof_sig *s, size_t npend, int code_due)
{
    if (code_due) {
        struct prof_code_ranges *cur = atomic_load(&s->code);
        struct prof_code_ranges *next = cur == s->code_buf[0] ? s->code_buf[1] : s->code_buf[0];
        uint64_t main_stack[2];
        if (prof_maps_scan(next, s->pend_sp, npend, s->pend_lo, s->pend_hi, main_stack) != (size_t)-1) {
            atomic_store_explicit(&s->code, next, memory_order_release);
            /* the main thread's stack is known by name: its first walks (a hello world's
             * busiest thread, armed on this first tick) need not read each frame by a system
             * call, nor wait for a second pass over the maps */
            for (size_t idx = 0; main_stack[1] && idx < s->high; idx++) {
                struct slot *sl = atomic_load(&s->slots[idx]);
                if (sl && sl->id && sl->tid == (uint32_t)g_pid && !atomic_load(&sl->map_hi) &&
                    !atomic_load(&sl->seen_sp)) {
                    atomic_store(&sl->map_lo, main_stack[0]);
                    atomic_store_explicit(&sl->map_hi, main_stack[1], memory_order_release);
                }
            }
        }
        s->code_loaded = s->tick_now;
    } else if (npend) {
        prof_stack_mappings(s->pend_sp, npend, s->pend_lo, s->pend_hi); /* one pass over the maps */
    }
    for (size_t i = 0; i < npend; i++) {
        struct slot *sl = atomic_load(&s->slots[s->pend_idx[i]]);
        if (sl && s->pend_hi[i]) {
            atomic_store(&sl->map_lo, s->pend_lo[i]);
            atomic_store_explicit(&sl->map_hi, s->pend_hi[i], memory_order_release);
        }
    }
}

/* A zeroed slot with its ring and frames, or NULL (out of memory). Slots come from chunks of
 * SLOT_CHUNK, next to each other; like their rings, they are never freed (a late signal may
 * still find one). A chunk, its rings and its frames are one mapping (common/lazymem.h),
 * touched as threads come (calloc cleared ~10 KB of rings and frames per thread, and
 * LeakSanitizer does not see pointers kept in the mapped prof_sig). */
static struct slot *new_slot(struct prof_sig *s)
{
    if (s->chunk_used == SLOT_CHUNK || !s->chunk) {
        size_t per = sizeof(struct slot) + RING * sizeof(struct ent) + PROF_MAX_FRAMES * sizeof(uint64_t);
        char *m = clrmux_lazy_calloc(SLOT_CHUNK, per);
        if (!m)
            return NULL;
        struct slot *c = (struct slot *)(void *)m;
        struct ent *rings = (struct ent *)(void *)(m + SLOT_CHUNK * sizeof(struct slot));
        uint64_t *frames = (uint64_t *)(void *)((char *)rings + SLOT_CHUNK * RING * sizeof(struct ent));
        for (size_t i = 0; i < SLOT_CHUNK; i++) {
            c[i].ring = rings + i * RING;
            c[i].last_f = frames + i * PROF_MAX_FRAMES;
        }
        s->chunk = c;
        s->chunk_used = 0;
    }
    struct slot *sl = &s->chunk[s->chunk_used++];
    /* the ring's pages faulted in here, on the sampler thread, not by the thread's first
     * walks in its signal handler */
    for (volatile char *b = (volatile char *)sl->ring; b < (volatile char *)(sl->ring + RING); b += 4096)
        *b = 0;
    ((volatile char *)(sl->ring + RING))[-1] = 0;
    return sl;
}

void prof_sig_tick(struct prof_sig *s, const struct prof_thread_view *v, size_t n, int changed,
                   struct prof_rawq *q)
{
    int64_t now = mono_ns();
    s->tick_no++;
    s->tick_now = now;
    /* JIT'd code and libraries come and go: the executable ranges are reloaded every 5 s
     * into the copy the handler does not use (a handler still reading a 5-s old copy reads
     * valid, bounded memory); loaded by lookup_stacks below, with this tick's new stacks */
    int code_due = !s->code_loaded || now - s->code_loaded >= CODE_RELOAD_NS;
    if (changed)
        memset(s->present, 0, sizeof s->present);
    for (size_t i = 0; changed && i < n; i++) {
        const struct prof_thread *t = &v[i].t;
        size_t idx = v[i].slot;
        if (!t->tid || idx >= PROF_MAX_THREADS)
            continue;
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl) {
            sl = new_slot(s);
            if (!sl)
                continue;
            atomic_store_explicit(&s->slots[idx], sl, memory_order_release);
        }
        if (idx + 1 > s->high)
            s->high = idx + 1;
        s->present[idx] = 1;
        if (sl->id != t->id || sl->tid != t->tid) {
            if (sl->id)
                retire(s, sl, q);
            arm(s, sl, idx, t, now);
        }
        if (strcmp(sl->name, t->name) != 0)
            snprintf(sl->name, sizeof sl->name, "%s", t->name);
    }
    size_t npend = 0;
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl || !sl->id)
            continue;
        if (!s->present[idx]) {
            retire(s, sl, q);
            continue;
        }
        drain_slot(s, sl, q, now);
        uint64_t sp = atomic_load(&sl->seen_sp);
        if (sp && !atomic_load(&sl->map_hi)) {
            s->pend_idx[npend] = (uint16_t)idx;
            s->pend_sp[npend++] = sp;
            atomic_store(&sl->seen_sp, 0);
        }
    }
    /* the stacks first seen by this tick's walks are looked up before any wall signal: a
     * walk made without its stack's bounds reads each frame by a system call and, when it
     * breaks, is made again */
    lookup_stacks(s, npend, code_due);
    for (size_t idx = 0; s->wall && idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl || !sl->id)
            continue;
        if (sl->skip) { /* long idle: checked less often; this tick's wall time accrues to its
                           unchanged stack (counted here, added at the next check) */
            sl->skip--;
            s->st.wall_samples++;
            continue;
        }
        int64_t d = now - sl->last_wall;
        if (d <= 0)
            continue;
        /* walked by its CPU timer during this tick or the previous one */
        int fresh = sl->have_last && sl->cpu_walk_tick && s->tick_no - sl->cpu_walk_tick <= 1;
        int inflight = atomic_load(&sl->wall_inflight);
        int64_t cpu = 0;
        if (!fresh && !inflight && (cpu = thread_cpu_ns(sl->tid)) < 0)
            continue; /* gone: ThreadDestroyed follows */
        sl->last_wall = now;
        s->st.wall_samples++; /* one per thread per tick */
        s->st.wall_ns += d;
        if (inflight) { /* the previous signal is not handled yet: its walk carries d too */
            atomic_fetch_add(&sl->wall_pending, d);
            /* SIGPROF is not a real-time signal: a wall signal sent while the thread's CPU
             * timer signal was pending is merged into it (rt_tgsigqueueinfo succeeds, the
             * kernel drops the second). A cpu walk drained after the send stands for it:
             * its stack gets the wall time (a wall signal that still arrives carries 0) */
            if (sl->cpu_walk_tick > sl->sent_tick && atomic_exchange(&sl->wall_inflight, 0)) {
                sl->wall_accum += atomic_exchange(&sl->wall_pending, 0);
                s->st.wall_merged++;
                continue;
            }
            if (s->tick_no - sl->sent_tick > WALL_STUCK_TICKS) {
                /* a thread that blocks SIGPROF (or never runs): stop waiting for it, give
                 * its wall time to its last stack and signal it again later */
                if (atomic_exchange(&sl->wall_inflight, 0)) {
                    int64_t pend = atomic_exchange(&sl->wall_pending, 0);
                    if (sl->have_last)
                        sl->wall_accum += pend;
                    else
                        push(s, sl, q, sl->last_f, 0, NULL, PROF_WALK_BROKEN, 0, pend);
                    s->st.unresponsive++;
                }
            }
            continue;
        }
        if (fresh) {
            /* it runs: its CPU timer walked it within the last two intervals, and its next
             * walk is a sample of where it is, as good as a new walk, without a signal or a
             * clock read; d goes into that walk's record (if the thread blocks before, a
             * check finds it idle and the wall walk of where it waits carries d) */
            sl->wall_next += d;
            s->st.wall_from_cpu++;
            sl->idle_level = sl->skip = 0;
            continue;
        }
        /* it used half or more of the time since the last clock read (a recent one): it
         * runs, and its CPU timer will walk it within about two intervals; that walk carries
         * d. If it stops running before, the next check finds it idle and signals it: the
         * walk of where it waits then carries d. No signal for a thread that runs. */
        int64_t since = now - sl->chk_mono;
        int running = sl->have_last && sl->chk_mono && since > 0 && since <= WALL_DEFER_WINDOW * s->interval_ns &&
                      (cpu - sl->chk_cpu) * 2 >= since && sl->wall_next < WALL_DEFER_WINDOW * s->interval_ns;
        sl->chk_cpu = cpu;
        sl->chk_mono = now;
        if (running) {
            sl->wall_next += d;
            s->st.wall_from_cpu++;
            sl->idle_level = sl->skip = 0;
            continue;
        }
        if (sl->have_last && !sl->wall_next && sl->wall_cpu_seen >= 0 && cpu - sl->wall_cpu_seen < WALL_RAN_NS) {
            sl->wall_accum += d; /* did not run: same stack */
            s->st.wall_reused++;
            sl->idle_level = sl->idle_level * 2 + 1 < WALL_MAX_SKIP ? sl->idle_level * 2 + 1 : WALL_MAX_SKIP;
            sl->skip = sl->idle_level;
            continue;
        }
        /* it ran: the part of d it spent blocked (d minus its CPU time and one interval)
         * stays with the old stack, the rest goes to the new walk */
        int64_t ran = sl->wall_cpu_seen >= 0 ? cpu - sl->wall_cpu_seen + s->interval_ns : d;
        int64_t newpart = ran < d ? ran : d;
        if (sl->have_last)
            sl->wall_accum += d - newpart;
        else
            newpart = d;
        sl->idle_level = sl->skip = 0;
        flush_accum(s, sl, q);
        atomic_fetch_add(&sl->wall_pending, newpart + sl->wall_next);
        sl->wall_next = 0;
        atomic_store(&sl->wall_inflight, 1);
        sl->sent_tick = s->tick_no;
        sl->sent_cpu = cpu;
        if (send_to(sl->tid, (SIG_MAGIC << 16) | SIG_WALL | (uint32_t)idx) != 0)
            atomic_store(&sl->wall_inflight, 0);
        else
            s->st.wall_signals++;
    }
}

void prof_sig_flush_wall(struct prof_sig *s, struct prof_rawq *q)
{
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (sl && sl->id)
            settle_wall(s, sl, q); /* a file is written now */
    }
}

void prof_sig_stop(struct prof_sig *s)
{
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (sl && sl->id)
            disarm(sl);
    }
}

void prof_sig_get_stats(struct prof_sig *s, struct prof_sig_stats *out)
{
    *out = s->st;
    out->ring_drops = atomic_load(&s->ring_drops);
    out->stale_signals = atomic_load(&s->stale);
    out->foreign_signals = atomic_load(&s->foreign);
    out->safe_walks = atomic_load(&s->safe_walks);
    uint64_t calls = atomic_load(&s->handler_calls), cyc = atomic_load(&s->handler_cycles);
    double ns_per_cycle = (double)(mono_ns() - s->mono0) / (double)(cycles() - s->tsc0 + 1);
    out->handler_ns_avg = calls ? (double)cyc * ns_per_cycle / (double)calls : 0.0;
}

#else /* not Linux x64 or arm64 */

struct prof_sig *prof_sig_start(int interval_ms, int cpu, int wall, prof_span_peek_fn peek, char *why,
                                size_t whysz)
{
    (void)interval_ms, (void)cpu, (void)wall, (void)peek;
    snprintf(why, whysz, "the signal sampler needs Linux on x86-64 or arm64");
    return NULL;
}
int prof_sig_check(struct prof_sig *s, char *why, size_t whysz) { (void)s, (void)why, (void)whysz; return 0; }
void prof_sig_tick(struct prof_sig *s, const struct prof_thread_view *v, size_t n, int changed,
                   struct prof_rawq *q)
{
    (void)s, (void)v, (void)n, (void)changed, (void)q;
}
void prof_sig_flush_wall(struct prof_sig *s, struct prof_rawq *q) { (void)s, (void)q; }
void prof_sig_stop(struct prof_sig *s) { (void)s; }
void prof_sig_get_stats(struct prof_sig *s, struct prof_sig_stats *out) { (void)s; memset(out, 0, sizeof *out); }

#endif
