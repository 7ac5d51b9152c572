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
    uint64_t start;      /* ticks */
    uint64_t actx_span;  /* the thread's async context (its span id, 0: none) when the span opened */
    uint32_t method;
    uint16_t flags;
    uint16_t exc;
    uint8_t seg;         /* its trace segment (struct seg) */
    uint8_t segroot;     /* it opened the segment: its parent is the segment's root_parent */
    uint8_t entered;     /* an async context (clrmux_span_async_enter) */
};

/* A trace segment of a thread's stack of open spans: the spans from a root (depth 0), or from
 * a span opened under an async context that is not the one its stack parent opened in (a
 * continuation that runs inline inside a traced method), up to the next segment. Segments
 * nest as the stack does: segment k holds the spans whose `seg` is k. */
#define SEG_MAX 8
struct seg {
    uint8_t trace_id[16];
    uint64_t root_parent; /* the span its root continues (an Activity's, an async span's), else 0 */
    uint64_t local_root;  /* the process-local root span of the trace (the profiler's label) */
    uint8_t sampled;      /* the trace is recorded */
    uint8_t joined;       /* root_parent is not a span of this thread's stack */
};

/* The thread's async context: the span (an async method's, an Activity's) of the
 * ExecutionContext that runs on the thread, set by the managed agent's AsyncLocal whenever it
 * changes (clrmux_span_ctx_set). A span opened with no open span under it, or under one
 * opened in another context, continues it. */
struct actx {
    uint8_t trace_id[16];
    uint64_t span_id; /* 0: none */
    uint64_t local_root;
    uint8_t sampled;
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

#define UNWIND_MAX 32
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
    struct seg seg[SEG_MAX];
    struct actx actx;
    uint32_t depth;
    uint32_t cap;             /* entries in `stack` */
    struct open_span *stack;  /* `inline_stack`, or a heap copy grown for a deep recursion */
    uint32_t tid;
    uint64_t rng;
    uint16_t pending_exc;
    /* exception unwinding (clrmux_span_unwind_*): frames the unwind phase entered and has not
     * left (innermost last; beyond UNWIND_MAX only counted), and frames whose entry probe
     * recorded nothing (slot < 0: no memory), which are always the innermost */
    uint32_t n_unwind, unwind_over, lost;
    struct unwind_frame {
        int32_t method; /* the traced method's index, or -1 */
        uint16_t exc;   /* the exception being thrown when the frame was entered */
    } unwind[UNWIND_MAX];
    _Atomic uint64_t unsampled; /* spans of this thread not sampled (summed in clrmux_spans_stats) */
    struct open_span inline_stack[CLRMUX_SPAN_INLINE_DEPTH];
};

/* Span span_id, an async context, ended by an exception (clrmux_span_failed). */
void spans_async_failed(uint64_t span_id);

/* The calling thread's state, created (registered, its profiler's view made); NULL without
 * memory. Takes the registry's lock: never on a probe's fast path. */
struct tstate *spans_tstate_new(void);
/* Writes async span s, ended at tick `end` on the calling thread t, to t's block (or counts it:
 * not sampled, buffer full), as clrmux_span_exit does for a span of the stack. */
void spans_record_async(struct tstate *t, const struct clrmux_async_span *s, uint64_t end, uint16_t exc, int error);

/* The calling thread's state, NULL before its first span (spans.c; initial-exec TLS: no
 * allocation, no lock, async-signal-safe to read). */
extern __thread struct tstate *spans_tls __attribute__((tls_model("initial-exec")));

/* Nonzero once a reader of the view exists (clrmux_spans_want_labels: the built-in profiler is
 * made; clrmux_span_context_get: a reader asked for its thread's record): until then the probes
 * leave it alone (no reader: the seqlock's stores would be work for nobody). */
extern _Atomic int spans_labels_on;

/* The profiler's view: updated after each change of the stack or of the trace's sampling
 * decision. Seqlock: seq odd, the fields as release stores (each orders the odd seq before
 * it; plain moves on x86-64, which only keep the compiler from reordering), seq even with a
 * release store. Spans of a trace that is not recorded leave the ids 0. */
static inline void spans_ctx_update(struct tstate *t)
{
#ifdef CLRMUX_BENCH_NO_LABELS /* bench/probes.sh: the span without the profiler's view */
    (void)t;
    return;
#endif
    if (!atomic_load_explicit(&spans_labels_on, memory_order_relaxed))
        return;
    struct clrmux_span_context *c = t->ctx;
    uint32_t seq = c->seq;
    __atomic_store_n(&c->seq, seq + 1, __ATOMIC_RELAXED);
    uint32_t d = t->depth;
    __atomic_store_n(&c->depth, d, __ATOMIC_RELEASE);
    /* only a recorded trace labels samples: an id in a profile names a span one can find */
    uint64_t span = 0, root = 0;
    const uint8_t *trace = NULL;
    if (d) {
        const struct open_span *o = &t->stack[d - 1];
        const struct seg *s = &t->seg[o->seg];
        if (s->sampled)
            span = o->span_id, root = s->local_root, trace = s->trace_id;
    } else if (t->actx.span_id && t->actx.sampled) { /* a continuation of an async span */
        span = t->actx.span_id, trace = t->actx.trace_id;
        root = t->actx.local_root ? t->actx.local_root : span; /* as seg_start: never 0 with a span */
    }
    __atomic_store_n(&c->span_id, span, __ATOMIC_RELEASE);
    __atomic_store_n(&c->local_root_id, root, __ATOMIC_RELEASE);
    if (trace) {
        uint64_t w[2];
        memcpy(w, trace, 16);
        __atomic_store_n(&c->trace_words[0], w[0], __ATOMIC_RELEASE);
        __atomic_store_n(&c->trace_words[1], w[1], __ATOMIC_RELEASE);
    }
    __atomic_store_n(&c->seq, seq + 2, __ATOMIC_RELEASE);
}

/* spans_ctx_update after a span closed. When no span is left open and no recorded async
 * context shows instead, the view only loses its span: span_id, local_root_id and depth go to
 * 0 without the seqlock's two stores (the trace words stay). A reader checks span_id first:
 * one that loaded 0 reports no span; one that loaded the old id before the clear and then a
 * cleared local_root_id reads an inconsistent pair unless the seq check catches it, so the
 * reader (common/spanctx.h) rejects a copy whose local_root_id is 0; the next open goes
 * through the seqlock. */
static inline void spans_ctx_update_closed(struct tstate *t)
{
#ifdef CLRMUX_BENCH_NO_LABELS
    (void)t;
    return;
#endif
    if (!atomic_load_explicit(&spans_labels_on, memory_order_relaxed))
        return;
    if (t->depth || (t->actx.span_id && t->actx.sampled)) {
        spans_ctx_update(t);
        return;
    }
    struct clrmux_span_context *c = t->ctx;
    __atomic_store_n(&c->span_id, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->local_root_id, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->depth, 0, __ATOMIC_RELEASE);
}

/* Ids on the probes' path: wyrand (one 64x64->128 multiply per id; the per-thread state is
 * seeded from getrandom), never 0 (an invalid id in W3C Trace Context). */
static inline uint64_t spans_rnd(struct tstate *t)
{
    uint64_t v;
    do {
        t->rng += 0xa0761d6478bd642full;
        __uint128_t m = (__uint128_t)t->rng * (t->rng ^ 0xe7037ed1a0b428dbull);
        v = (uint64_t)(m >> 64) ^ (uint64_t)m;
    } while (__builtin_expect(!v, 0));
    return v;
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
