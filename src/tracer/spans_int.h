/* The span probes' private parts, shared by spans.c (probes, buffer, metrics), spans_queue.c
 * (the buffer's queues of blocks), spans_clock.c
 * (the tick clock and its calibration to Unix time) and spans_ctx.c (the profiler's view of a
 * thread's span context, thread names). Not a public interface. */
#ifndef CLRMUX_TRACER_SPANS_INT_H
#define CLRMUX_TRACER_SPANS_INT_H

#include "tracer/spans.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* ---- the tick clock (spans_clock.c) ---------------------------------------------------- */

/* Plain RDTSC, not RDTSCP or LFENCE; RDTSC: the out-of-order core may read the counter a few
 * instructions early or late, i.e. move a span's start or end by a few ns; a span is
 * exported with ns resolution but the call it times costs tens of ns in probes alone, so a
 * serialising read would buy nothing a reader can use, and it costs: on the reference VM
 * (bench/clocks.c, printed by bench/spans.sh) RDTSC takes ~11 ns, LFENCE+RDTSC ~19 and
 * RDTSCP ~22, and a span reads the counter twice. Start and end are read on the same
 * thread and the invariant TSC is synchronised across cores: a migration in between does
 * not skew a duration. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#else
static inline uint64_t ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

/* The first calibration point and a provisional rate (ns per tick, 0 when unusable), at init. */
double spans_cal_init(void);
/* The second calibration point (the export thread's first drain); returns the rate between
 * the first and the last point (ns per tick, 0 when unusable). */
double spans_cal_fix(void);
/* A new calibration point (after each drain: every span drained ended before it). */
void spans_cal_sample(void);
/* Unix time in ns of a tick, interpolated between the calibration points around it. */
int64_t spans_tick_to_ns(uint64_t tick);

/* ---- the span buffer's queues of block indexes (spans_queue.c) -------------------------- */

/* A bounded MPMC queue (D. Vyukov's) of up to a power of two of indexes: the retired blocks. */
struct qslot {
    _Atomic uint32_t seq;
    uint32_t val;
};

struct idxq {
    struct qslot *slots;
    uint32_t mask;
    _Alignas(64) _Atomic uint32_t enq;
    _Alignas(64) _Atomic uint32_t deq;
};

int idxq_init(struct idxq *q, uint32_t cap); /* cap: a power of two; 0 or -1 (no memory) */
void idxq_free(struct idxq *q);
void idxq_push(struct idxq *q, uint32_t v); /* never full: it holds each index at most once */
int idxq_pop(struct idxq *q, uint32_t *v);  /* 1, or 0 when empty */

/* A lock-free LIFO stack of the indexes 0..n-1 (the free blocks): `head` holds a tag that
 * changes on every update (no ABA) and the top index + 1 (0: empty); next[i] is the index + 1
 * of the entry under i. */
struct idxstack {
    _Atomic uint32_t *next; /* XORed with the initial value (spans_queue.c) */
    uint32_t n;
    _Alignas(64) _Atomic uint64_t head;
};
int stack_init(struct idxstack *st, uint32_t n); /* holding 0..n-1, 0 on top; 0 or -1 */
void stack_free(struct idxstack *st);
void stack_push(struct idxstack *st, uint32_t i);
int stack_pop(struct idxstack *st, uint32_t *i); /* 1, or 0 when empty */

/* ---- per-thread state (spans.c) -------------------------------------------------------- */

struct open_span {
    uint64_t span_id;
    uint64_t start; /* ticks */
    uint32_t method;
    uint16_t flags;
    uint16_t exc;
};

/* Per-thread counters of the calls whose span is not recorded (not sampled, ring full): a
 * direct-mapped table by method index, written only by its thread with plain (relaxed,
 * non-RMW) atomic stores, read by clrmux_metrics_snapshot under reg_lock; a method whose
 * slot is taken by another goes to the global atomics. Folded into the globals when the
 * thread exits. Durations in ticks. */
#define TM_SLOTS 64
struct tmetric {
    _Atomic uint32_t method1; /* method + 1; 0: free */
    _Atomic uint64_t calls, errors, sum_ticks;
    _Atomic uint64_t buckets[CLRMUX_HIST_BOUNDS + 1];
};

struct block;
struct cell;

struct tstate {
    /* the thread's block of the span buffer (spans.c): written by the thread, read by the
     * consumer under reg_lock; positions count the thread's spans */
    struct block *_Atomic blk;
    struct cell *cells; /* blk's cells */
    _Atomic uint64_t pos; /* the next span's position (relaxed: stats read it) */
    uint64_t limit;     /* pos may be written while below it (blk's read + its size, cached) */
    struct clrmux_span_context *ctx; /* the profiler's view (never freed: see ctx_alloc) */
    uint32_t ctx_slot;               /* its index in ctx_by_tid, or CTX_NO_SLOT */
    struct tstate *next, *prev;     /* registry of live threads (reg_lock) */
    struct tmetric tm[TM_SLOTS];
    uint8_t trace_id[16];
    uint64_t root_parent; /* the joined Activity's span id, else 0 */
    uint32_t depth;
    uint32_t cap;             /* entries in `stack` */
    struct open_span *stack;  /* `inline_stack`, or a heap copy grown for a deep recursion */
    uint32_t tid;
    uint64_t rng;
    uint16_t pending_exc;
    uint8_t sampled; /* the current trace is recorded */
    _Atomic uint64_t unsampled; /* spans of this thread not sampled (summed in clrmux_spans_stats) */
    uint8_t joined;
    struct open_span inline_stack[CLRMUX_SPAN_INLINE_DEPTH];
};

/* The calling thread's state, NULL before its first span (spans.c; initial-exec TLS: no
 * allocation, no lock, async-signal-safe to read). */
extern __thread struct tstate *spans_tls __attribute__((tls_model("initial-exec")));

/* The profiler's view: updated after each change of the stack or of the trace's sampling
 * decision. Seqlock: seq odd, the fields as release stores (each orders the odd seq before
 * it; plain moves on x86-64, which only keep the compiler from reordering), seq even with a
 * release store. Spans of a trace that is not recorded leave the ids 0. */
static inline void spans_ctx_update(struct tstate *t)
{
    struct clrmux_span_context *c = t->ctx;
    uint32_t seq = c->seq;
    __atomic_store_n(&c->seq, seq + 1, __ATOMIC_RELAXED);
    uint32_t d = t->depth;
    __atomic_store_n(&c->depth, d, __ATOMIC_RELEASE);
    /* only a recorded trace labels samples: an id in a profile names a span one can find */
    uint32_t r = t->sampled ? d : 0;
    __atomic_store_n(&c->span_id, r ? t->stack[r - 1].span_id : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->local_root_id, r ? t->stack[0].span_id : 0, __ATOMIC_RELEASE);
    if (d == 1) {
        uint64_t w[2];
        memcpy(w, t->trace_id, 16);
        __atomic_store_n(&c->trace_words[0], w[0], __ATOMIC_RELEASE);
        __atomic_store_n(&c->trace_words[1], w[1], __ATOMIC_RELEASE);
    }
    __atomic_store_n(&c->seq, seq + 2, __ATOMIC_RELEASE);
}

/* ---- the profiler's view, thread names, W3C trace context (spans_ctx.c) ----------------- */

/* Records the OS name of thread tid (at its first span and at its exit). */
void spans_tname_record(uint32_t tid);
/* A cleared span context record for thread t, published in the tid table (the registry's
 * lock held). NULL without memory. */
struct clrmux_span_context *spans_ctx_alloc(struct tstate *t);
/* Thread t exits (the registry's lock held): its record is cleared and reused later. */
void spans_ctx_release(struct tstate *t);

#endif
