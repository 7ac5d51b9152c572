/* Spans recorded by the tracer's probes.
 *
 * The rewritten IL calls three native functions (cdecl, through `calli`):
 *   int64 clrmux_span_enter(int32 method)  opens a span on this thread's stack, returns its slot
 *   void  clrmux_span_exception(int64 slot) the method is being left by an exception (the
 *                                          probe runs in a filter, during the first pass)
 *   void  clrmux_span_exit(int64 slot)      closes the span (runs in a finally)
 *
 * Nesting is per thread: a thread-local stack of open spans gives each span its parent and
 * trace id (a new trace id for each span opened on an empty stack, unless the rewritten IL
 * joins the root span to the application's current System.Diagnostics.Activity with
 *   void  clrmux_span_join(void *id)        id: the Activity's W3C Id string object, pinned
 * which it calls only when clrmux_span_enter returned slot 0, i.e. for a root span).
 *
 * Head sampling: a root span is recorded with probability sample_ratio (decided from its
 * trace id, as OpenTelemetry's TraceIdRatioBased sampler does) or, when joined to an
 * Activity, when the Activity is recorded (parent-based); nested spans follow their root.
 * Every call is counted whatever happens to its span: per-method call and error counts and
 * a duration histogram (clrmux_method_metrics_get). A recorded span is counted when it is
 * drained; a span not sampled, dropped (full buffer) or not recorded (stack too deep) is
 * counted by the probe itself in per-thread counters (plain stores, no atomic read-modify-
 * write) that the exporter sums.
 *
 * A closed span is written to the span buffer (buffer_spans cells of 64 bytes), cut into
 * blocks: a thread owns one block at a time and fills it as its own single-producer ring
 * (a few plain stores and one release store per span: no lock, no atomic read-modify-write,
 * no cache line shared with other threads); a full block is handed to the consumer and a
 * free one taken from the pool (three atomic read-modify-writes per block); with no block free the
 * span is dropped and counted. The consumer drains the handed-over blocks, then the live
 * threads' own blocks. The consumer sleeps in clrmux_spans_wait; a thread that hands over
 * a block while a quarter of the blocks or more are in use wakes it (futex), so a burst is
 * drained before the buffer fills. In the steady state the probes neither lock nor allocate (a
 * thread's state, with room for CLRMUX_SPAN_INLINE_DEPTH open spans, is allocated once, on its
 * first span; a deeper recursion doubles the thread's stack, rarely, up to
 * CLRMUX_SPAN_MAX_DEPTH open spans). The probes read a tick counter (the
 * TSC on x86-64); one background thread drains the buffer (clrmux_spans_drain), which turns
 * ticks into Unix nanoseconds. */
#ifndef CLRMUX_TRACER_SPANS_H
#define CLRMUX_TRACER_SPANS_H

#include <stddef.h>
#include <stdint.h>
#include "common/spanctx.h"

/* Open spans per thread without a further allocation, and at most (a managed thread's
 * stack overflows long before: a frame takes at least ~48 bytes of its 1.5-8 MB). */
#define CLRMUX_SPAN_INLINE_DEPTH 256
#define CLRMUX_SPAN_MAX_DEPTH (1u << 20)
#define CLRMUX_SPAN_MAX_METHODS 8192 /* method indexes 0..8191 are counted */
#define CLRMUX_SPAN_ERROR 1u
#define CLRMUX_SPAN_JOINED 2u /* the trace is an Activity's: parent_id is the Activity's span */

/* A finished span (64 bytes). */
struct clrmux_span {
    uint8_t trace_id[16];
    uint64_t span_id;
    uint64_t parent_id;   /* 0: root span */
    int64_t start_ns;     /* Unix time, nanoseconds */
    int64_t end_ns;
    uint32_t method;      /* index given to clrmux_span_enter */
    uint32_t tid;         /* OS thread id */
    uint32_t exc;         /* exception name id (0: unknown / none), see clrmux_span_set_pending_exception */
    uint32_t flags;       /* CLRMUX_SPAN_ERROR */
};

/* Creates the span buffer (capacity in spans, rounded up to a power of two, at least 2; at
 * most capacity / 64 threads hold a block at once, 64 below a capacity of 4096, capacity
 * below 64: see spans.c). Returns
 * 0 or -1. Calling it again discards the previous buffer (tests only; no probe may run
 * meanwhile). */
int clrmux_spans_init(size_t capacity);
/* Frees the buffer (tests; no probe may run meanwhile). */
void clrmux_spans_fini(void);

/* The probes (see above). A slot < 0 means "not recorded" (deeper than CLRMUX_SPAN_MAX_DEPTH,
 * or no memory to grow the thread's stack or create its state);
 * exit and exception ignore it (exit counts it as that frame's end: see
 * clrmux_span_unwind_leave). */
int64_t clrmux_span_enter(int32_t method);
/* The entry probe's fast path, which the rewritten IL calls without a GC transition
 * (SuppressGCTransition: it must not block, allocate, lock or call the runtime): the same as
 * clrmux_span_enter, but it returns CLRMUX_SPAN_SLOW instead of creating the thread's state
 * (its first span) or growing its stack (a deep recursion); the IL then calls
 * clrmux_span_enter, with a GC transition. Every other probe never blocks or allocates:
 * clrmux_span_exit, clrmux_span_exception and clrmux_span_join (at most a FUTEX_WAKE,
 * which does not block, when a span hands over a block above the buffer's high-water mark). */
#define CLRMUX_SPAN_SLOW (-2)
int64_t clrmux_span_enter_fast(int32_t method);
void clrmux_span_exit(int64_t slot);
void clrmux_span_exception(int64_t slot);

/* Joins the calling thread's root span (open, slot 0) to an Activity: `id` is the address of
 * a pinned System.String (CoreCLR layout: int32 length at +8, UTF-16 chars at +12; the
 * runtime's ICorProfilerInfo2::GetStringLayout2 gives the same offsets) holding a W3C
 * Activity Id "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>". The root span takes
 * the trace id, the span id as parent and the sampled flag (bit 0). Anything else (NULL,
 * hierarchical Ids, bad hex, a stack that is not one deep) is ignored. */
void clrmux_span_join(const void *id);
/* Joins from a C string (same format; tests and clrmux_span_join). Returns 0 or -1. */
int clrmux_span_join_w3c(const char *id, size_t len);

/* Head sampling: the probability that a new root trace is recorded, 0..1 (default 1). */
void clrmux_spans_set_sample_ratio(double ratio);

/* Number of open spans on the calling thread. */
unsigned clrmux_span_depth(void);
/* Remembers, for the calling thread, the exception being thrown (a name id 1..65535); the
 * next clrmux_span_exception on this thread records it. 0 clears it. */
void clrmux_span_set_pending_exception(uint32_t exc);

/* Exception unwinding, as the tracer receives it from the runtime on the calling thread
 * (ICorProfilerCallback::ExceptionUnwindFunctionEnter / Leave, ExceptionCatcherEnter): a
 * method span whose frame an exception unwinds ends there, with status ERROR and the pending
 * exception, instead of in a clause of the rewritten IL, which every other child monitoring
 * exceptions would see (ExceptionSearchFilterEnter, ExceptionUnwindFinallyEnter of the
 * traced method).
 *   clrmux_span_unwind_enter(method): the unwind phase enters a frame of the traced method
 *     with index `method` (as its probes get it), or of another method (-1);
 *   clrmux_span_unwind_leave(): that frame is gone; if it is the traced method's and the
 *     thread's top span is that method's, the span ends (ERROR, the exception thrown when
 *     the frame was entered: a nested exception thrown and caught in a finally meanwhile
 *     does not replace it). A frame whose entry probe recorded nothing (slot < 0) ends none;
 *   clrmux_span_unwind_caught(): the frame entered last catches the exception: it stays.
 * Nested exceptions nest (32 frames remembered, more counted). Never blocks, allocates or
 * calls the runtime; without the thread's state (no span yet) they do nothing. */
void clrmux_span_unwind_enter(int32_t method);
void clrmux_span_unwind_leave(void);
void clrmux_span_unwind_caught(void);
/* Forgets the calling thread's unwinding frames when it has no open span: the exception
 * being thrown (ExceptionThrown) starts afresh (frames an abandoned unwind left behind, as
 * when a finally throws an exception that escapes it, are not kept). */
void clrmux_span_unwind_reset_idle(void);

/* Moves up to max finished spans into out, their times in Unix nanoseconds; returns how
 * many. A thread's spans come in the order they closed (those of different threads are
 * not ordered). Single consumer. */
size_t clrmux_spans_drain(struct clrmux_span *out, size_t max);

/* Statistics: spans finished (pushed or dropped), dropped because the buffer was full, spans
 * not recorded because a thread's stack could not grow (CLRMUX_SPAN_MAX_DEPTH reached, or out
 * of memory), spans not sampled. */
struct clrmux_span_stats {
    uint64_t finished, dropped, too_deep, unsampled;
};
void clrmux_spans_stats(struct clrmux_span_stats *s);

/* The consumer's wait: returns when a producer crossed the buffer's high-water mark (a
 * quarter of its blocks in use), when clrmux_spans_wake is called, or after timeout_ms (at
 * once if the buffer is above the mark). */
void clrmux_spans_wait(long timeout_ms);
void clrmux_spans_wake(void);
/* Spans in the buffer (approximate while producers run; takes the threads' registry lock). */
size_t clrmux_spans_pending(void);

/* ---- async spans and the async context (the managed agent's side: tracer/agent.h) --------
 *
 * A traced method that returns a Task keeps its span open until the task completes: at its
 * return the agent detaches the span from the thread's stack (clrmux_span_detach) and, when
 * the task completes on whatever thread, finishes it there (clrmux_span_finish). Meanwhile the
 * span's context flows with the ExecutionContext in the agent's AsyncLocal, whose change
 * handler tells each thread the context it now runs in (clrmux_span_ctx_set): a span opened
 * with no open span under it continues that context (its trace, its sampling decision, the
 * context's span as parent), and so does one opened under a span that opened in another
 * context (a continuation that runs inline inside a traced method). The profiler's view of a
 * thread with no open span shows its async context. */

/* A span's context: trace id (W3C byte order), span id (0: none), the process-local root span
 * (the profiler's label), the trace's sampling decision (1: recorded). 40 bytes; the agent
 * mirrors the layout. */
struct clrmux_span_ctx {
    uint8_t trace_id[16];
    uint64_t span_id;
    uint64_t local_root;
    uint32_t sampled;
    uint32_t reserved;
};

/* An open span detached from its thread (64 bytes; the agent holds it until the task ends). */
struct clrmux_async_span {
    uint8_t trace_id[16];
    uint64_t span_id, parent_id;
    uint64_t start;      /* ticks */
    uint32_t method;     /* index given to clrmux_span_enter */
    uint32_t tid;        /* the OS thread it started on */
    uint16_t flags;      /* CLRMUX_SPAN_JOINED */
    uint8_t sampled;
    uint8_t reserved[13];
};

/* The context of the calling thread's open span `slot` (a clrmux_span_enter result). Returns
 * 1, or 0 when slot is not open on this thread (not recorded, too deep). */
int clrmux_span_peek(int64_t slot, struct clrmux_span_ctx *out);
/* clrmux_span_peek, and span `slot` becomes an async context (the managed agent's AsyncEnter
 * made it the flow's): if an exception leaves its method (clrmux_span_unwind_leave), its id
 * is remembered as failed, so that readers of the flow's context skip it (the method never
 * gave its caller's context back). */
int clrmux_span_async_enter(int64_t slot, struct clrmux_span_ctx *out);
/* 1 when span_id was an async context whose method an exception left; the last 4096 or so are
 * remembered (an older one may answer 0). Never blocks, locks or allocates. */
int clrmux_span_failed(uint64_t span_id);
/* A word that is nonzero once clrmux_span_failed can answer 1 (valid for the process's life). */
const uint32_t *clrmux_span_failed_any(void);

/* Detaches open span `slot` (the innermost: spans above it are closed as clrmux_span_exit
 * would) from the calling thread's stack into *out. Returns 1 (the caller must pass *out to
 * clrmux_span_finish exactly once, on any thread), or 0 when slot is not open (nothing to
 * finish). Never blocks or allocates. */
int clrmux_span_detach(int64_t slot, struct clrmux_async_span *out);
/* Finishes a detached span now, on the calling thread: recorded (or counted when not sampled
 * or the buffer is full) with exc (an exception name id, 0: none) and the error status when
 * error is set. The thread's state is created at its first span (allocates once). */
void clrmux_span_finish(const struct clrmux_async_span *s, uint32_t exc, int error);
/* Sets the calling thread's async context (NULL or span_id 0: none). Allocates the thread's
 * state once. */
void clrmux_span_ctx_set(const struct clrmux_span_ctx *c);
/* The calling thread's current context: its innermost open span, or its async context when no
 * span is open or the innermost opened in another context. Returns 1, or 0 (none). */
int clrmux_span_ctx_current(struct clrmux_span_ctx *out);
/* The calling thread's innermost open span (whatever the async context). Returns 1, or 0 (no
 * span open). Never blocks or allocates. */
int clrmux_span_ctx_top(struct clrmux_span_ctx *out);
/* The join word: nonzero once a root span may have a context to join through the agent's
 * JoinRoot, i.e. once an Activity can exist (System.Diagnostics.DiagnosticSource is loaded:
 * clrmux_spans_join_possible) or an async span context was entered or set
 * (clrmux_span_async_enter, clrmux_span_ctx_set). The rewritten IL reads it before its join
 * check (ExecutionContext.Capture() against the empty one, then JoinRoot: tracer/agent.h): until
 * then a root span checks nothing. Valid for the process's life; it never goes back to 0. */
const uint32_t *clrmux_spans_join_word(void);
void clrmux_spans_join_possible(void);

/* Joins the calling thread's root span (open, slot 0, nothing above it) to context c: c's
 * trace, c's span as parent, c's sampling decision (as clrmux_span_join does for a W3C Id).
 * Anything else (no root span alone on the stack, span_id 0) is ignored. Never blocks or
 * allocates. */
void clrmux_span_join_ctx(const struct clrmux_span_ctx *c);

/* The built-in profiler reads the span contexts (its samples carry span labels): the probes
 * keep each thread's view (clrmux_span_context) up to date from then on (before, with no reader,
 * they leave it alone), and the agent keeps each thread's async context current as the
 * ExecutionContext changes (a cost per switch), not only when a span opens. Set by the loader
 * as it creates the profiler (before any span), and by clrmux_span_context_get. */
void clrmux_spans_want_labels(void);
int clrmux_spans_labels_wanted(void);

/* ---- per-method metrics ---------------------------------------------------------------- */

/* Duration histogram bucket upper bounds in seconds (explicit bounds, OTLP style: bucket i
 * counts durations <= bound[i] and > bound[i-1]; the last bucket is above the last bound). */
#define CLRMUX_HIST_BOUNDS 15
extern const double clrmux_hist_bounds_s[CLRMUX_HIST_BOUNDS];

struct clrmux_method_metrics {
    uint64_t calls;       /* every call, whatever happened to its span */
    uint64_t errors;      /* calls left by an exception */
    uint64_t count;       /* calls in the histogram (all but those too deep to be timed) */
    uint64_t sum_ns;      /* total duration */
    uint64_t buckets[CLRMUX_HIST_BOUNDS + 1];
};
/* The totals for method (0 when out of range). Spans still in the buffer are not counted yet:
 * drain first. */
void clrmux_method_metrics_get(uint32_t method, struct clrmux_method_metrics *out);
/* The totals of methods 0..n-1 in out[0..n) in one pass (takes the thread registry's lock
 * once). */
void clrmux_metrics_snapshot(struct clrmux_method_metrics *out, uint32_t n);

/* ---- the profiler's view of the current span ------------------------------------------- */

/* Per-thread span context (struct clrmux_span_context, common/spanctx.h: layout, seqlock,
 * reader), written by the probes on their own thread after each change of the stack once a
 * reader exists (clrmux_spans_want_labels, or a first clrmux_span_context_get), read by the
 * profiler's samplers. Ids are 0 when no span is open. Records are never freed (a
 * thread's record is cleared and recycled at its exit), so a stale pointer stays readable. */
/* The calling thread's context (created on first use; NULL without memory). Call it once
 * per thread outside any signal handler and cache the pointer: it is this thread's until the
 * thread exits. Exported from libclrmux.so as clrmux_span_context_get. */
struct clrmux_span_context *clrmux_span_context_get(void);
/* The calling thread's context if it has one (the thread ever opened a span), else NULL;
 * never allocates or locks: callable from a signal handler on that thread (the profiler's
 * signal sampler calls it in its handler). */
struct clrmux_span_context *clrmux_span_context_peek(void);
/* The context of OS thread tid if that thread has one, else NULL: a lock-free lookup in a
 * table of the live threads' records (async-signal-safe; for the profiler's suspend sampler
 * and for events of another thread). The record may be recycled by the time it is read:
 * read it with clrmux_span_context_read(c, tid, ...), which checks the owner. */
struct clrmux_span_context *clrmux_span_context_find(uint32_t tid);

/* The OS name of thread tid as recorded when it opened its first span or exited (15
 * characters at most). Returns 0, or -1 when unknown. */
int clrmux_thread_name(uint32_t tid, char *out, size_t outsz);

/* Unix time in nanoseconds (CLOCK_REALTIME). */
int64_t clrmux_now_ns(void);

#endif
