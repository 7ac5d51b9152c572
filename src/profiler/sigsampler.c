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
 * rings, maps IPs to functions (GetFunctionFromIP, in the drain) and writes the profile.
 *
 * This file: the handler, the start with its checks, the check for a replaced handler.
 * sigtick.c: the sampler thread's side (arming threads, draining their rings, wall signals);
 * sigsampler_int.h: what both share. */
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
#include "profiler/sigsampler_int.h"

static _Atomic(struct prof_sig *) g_sig;
static struct sigaction g_prev;
static _Atomic int g_selftest_hits;
pid_t prof_sig_pid;
uid_t prof_sig_uid;

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
    int ours = s && (si->si_code == SI_TIMER || (si->si_code == SI_QUEUE && si->si_pid == prof_sig_pid)) &&
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
    prof_sig_pid = getpid();
    prof_sig_uid = getuid();

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
void prof_sig_pause(struct prof_sig *s, struct prof_rawq *q) { (void)s, (void)q; }
void prof_sig_get_stats(struct prof_sig *s, struct prof_sig_stats *out) { (void)s; memset(out, 0, sizeof *out); }

#endif
