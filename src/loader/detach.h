/* Per-child detach: RequestProfilerDetach from one child removes that child only.
 *
 * Evacuation (as the runtime does for a whole profiler, profilingapidetach.cpp): every mux
 * callback counts itself in and out on a per-thread record (clrmux_evac_enter/leave: one
 * thread-local lookup and two plain adds, clrmux_evac_add, no lock). A detaching child is made
 * inactive first (no new callback reaches it, its mutable mask bits leave the union, its ReJIT
 * ownership goes); a background thread then waits until every thread that was inside a
 * callback has left it, and calls the child's ProfilerDetachSucceeded. When every child has
 * detached, clrmux asks the runtime to detach clrmux itself; libclrmux.so is pinned in memory
 * (RTLD_NODELETE) at Initialize, so code a child thread may still run stays mapped.
 *
 * A child is refused as the runtime would refuse it alone (EnsureProfilerDetachable): an
 * immutable flag in its own mask (CORPROF_E_IMMUTABLE_FLAGS_SET), enter/leave hooks, a
 * JIT-time SetILFunctionBody or a ReJIT request (CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT),
 * no ICorProfilerCallback3 (CORPROF_E_CALLBACK3_REQUIRED), a detach already under way
 * (CORPROF_E_PROFILER_DETACHING). */
#ifndef CLRMUX_DETACH_H
#define CLRMUX_DETACH_H

#include <stdatomic.h>

#include "clrmux/corprof.h"

struct clrmux_mux;
struct clrmux_child;

/* One per thread that ever entered a mux callback; never freed, reused after thread exit. */
struct clrmux_thread_rec {
    struct clrmux_thread_rec *next;
    _Atomic unsigned long inside; /* callbacks this thread is in (nesting) */
    _Atomic int in_use;
};

/* barrier.c: registers the calling thread's record (reusing one of a thread that ended);
 * NULL when out of memory (that thread's callbacks are not counted). */
struct clrmux_thread_rec *clrmux_evac_register(void);
/* barrier.c: every thread's record, newest first (records are never freed: walk with ->next). */
struct clrmux_thread_rec *clrmux_evac_threads(void);
/* barrier.c: what an evacuation does before it reads the counters: waits until the membarrier
 * registration is over (or *stop is set), then makes every thread run a full barrier (or, when
 * membarrier is not registered, relies on the callbacks' own fences). */
void clrmux_barrier_before_evacuation(const _Atomic int *stop);
/* ELF only: hidden symbol, initial-exec TLS (a DLL's symbols are private unless exported, and
 * mingw-w64 has its own TLS model) */
#if defined(_WIN32)
#define CLRMUX_ELF_HIDDEN
#define CLRMUX_TLS_IE
#else
#define CLRMUX_ELF_HIDDEN __attribute__((visibility("hidden")))
#define CLRMUX_TLS_IE __attribute__((tls_model("initial-exec")))
#endif
/* 1 once the process-wide barrier is registered (clrmux_pin_self; platform.h). */
extern _Atomic int clrmux_evac_asymmetric CLRMUX_ELF_HIDDEN;
extern __thread struct clrmux_thread_rec *clrmux_tls_rec CLRMUX_TLS_IE;

/* The one place the calling thread's own counter (t->inside, written by no other thread) is
 * changed without a read-modify-write: adds `delta` (+1 or -1, a constant once inlined). What
 * it means is the C of the portable branch: a compiler barrier on both sides and a release
 * store, so a callback's accesses before a -1 are visible before it; a +1 is kept ahead of the
 * loads that follow by the compiler barrier here and, on the CPU, by a full fence the caller
 * adds or the detach side forces on every thread with membarrier(2). On x86-64 (not under TSan,
 * which must see the C atomics) the same in one instruction: an unlocked `addq` on memory is a
 * store with release order (x86-TSO) and the "memory" clobber is the compiler barrier; a
 * signal handler cannot split it. Every change of the counter goes through here, so the two
 * branches cannot drift apart. */
static inline __attribute__((always_inline)) void clrmux_evac_add(struct clrmux_thread_rec *t, long delta)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    __asm__ volatile("addq %1, %0" : "+m"(*(unsigned long *)&t->inside) : "er"(delta) : "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&t->inside, atomic_load_explicit(&t->inside, memory_order_relaxed) + (unsigned long)delta,
                          memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Counts the calling thread into a mux callback. The child-active checks that follow are
 * ordered after it (sequentially consistent), so a detach that cleared `active` first and
 * then saw this thread outside knows the thread will not call the child. */
static inline __attribute__((always_inline)) struct clrmux_thread_rec *clrmux_evac_enter(void)
{
    struct clrmux_thread_rec *t = clrmux_tls_rec;
    if (__builtin_expect(!t, 0))
        t = clrmux_evac_register();
    if (t) {
        /* a plain add, ordered before the reads of the children's `active` flags by a full
         * fence, or (when the detach side can force one on every thread with membarrier(2))
         * by the compiler barrier of clrmux_evac_add only */
        if (__builtin_expect(atomic_load_explicit(&clrmux_evac_asymmetric, memory_order_relaxed), 1))
            clrmux_evac_add(t, 1);
        else
            atomic_fetch_add(&t->inside, 1); /* a sequentially consistent read-modify-write */
    }
    return t;
}

/* The counted fast path (dispatch.h, mux->counted[]), only once clrmux_evac_asymmetric is set:
 * one plain add to the calling thread's own counter (clrmux_evac_add: one instruction on
 * x86-64), the evacuating side forcing the fence on every thread with membarrier(2); then
 * clrmux_evac_dec. */
static inline __attribute__((always_inline)) void clrmux_evac_inc(struct clrmux_thread_rec *t)
{
    clrmux_evac_add(t, 1);
}

static inline __attribute__((always_inline)) void clrmux_evac_dec(struct clrmux_thread_rec *t)
{
    clrmux_evac_add(t, -1);
}

static inline __attribute__((always_inline)) void clrmux_evac_leave(struct clrmux_thread_rec *t)
{
    if (t)
        clrmux_evac_add(t, -1);
}

/* The proxy's RequestProfilerDetach (see above). S_OK when the detach is under way. */
HRESULT clrmux_detach_request(struct clrmux_mux *mux, struct clrmux_child *child, DWORD expected_ms);

/* The runtime's ProfilerDetachSucceeded for clrmux itself. */
void clrmux_detach_runtime_succeeded(struct clrmux_mux *mux);

/* At Shutdown: marks the mux shut down, wakes the detach thread and waits for it to end (no
 * child is notified any more). */
void clrmux_detach_shutdown(struct clrmux_mux *mux);

/* barrier.c. Keeps libclrmux.so mapped until the process ends (the runtime unloads a profiler
 * after it detached), and asks for the membarrier(2) registration (the registration can take
 * milliseconds; evacuation waits for its outcome); when it succeeds, registered(mux) runs on
 * the thread that made it (the mux rebuilds its dispatch tables there: its counted routes
 * need it). Made on a thread other than the app's: see below. */
void clrmux_pin_self(struct clrmux_mux *mux, void (*registered)(struct clrmux_mux *mux));

/* barrier.c. The registration's thread. A built-in child that starts a thread of its own in its
 * Initialize (the tracer's ReJIT thread) takes it over: clrmux_barrier_adopt() before it
 * creates the thread (1: adopted; clrmux_barrier_disown() if the thread then could not be
 * created), and the thread calls clrmux_barrier_register_adopted() before anything that can
 * wait on the runtime (once, whatever else it does: evacuation waits for the outcome). After
 * the children's Initialize, clrmux_barrier_start(mux) makes it on a short-lived thread of
 * clrmux's own (or on the calling thread when none can be created) unless it was adopted.
 * A thread created there would cost the app's main thread 0.2-0.35 ms. */
int clrmux_barrier_adopt(void);
/* Work of clrmux's own that must not cost the app's main thread (the control channel's
 * start: a thread created there costs it 0.2-0.35 ms): fn(arg) runs once, right after the
 * registration, on the thread that makes it. Set it before the children's Initialize. */
void clrmux_barrier_then(void (*fn)(void *), void *arg);
void clrmux_barrier_disown(void);
void clrmux_barrier_register_adopted(void);
void clrmux_barrier_start(struct clrmux_mux *mux);
#ifdef CLRMUX_TESTING
extern _Atomic int clrmux_barrier_test_adopted_runs; /* registrations made by an adopting thread */
int clrmux_barrier_test_state(void);                  /* 0 not asked, 1 under way, 2 over */
void clrmux_barrier_test_reset(void);
#endif

#endif
