/* Spans recorded by the tracer's probes.
 *
 * The rewritten IL calls three native functions (cdecl, through `calli`):
 *   int64 clrmux_span_enter(int32 method)  opens a span on this thread's stack, returns its slot
 *   void  clrmux_span_exception(int64 slot) the method is being left by an exception (the
 *                                          probe runs in a filter, during the first pass)
 *   void  clrmux_span_exit(int64 slot)      closes the span (runs in a finally)
 *
 * Nesting is per thread: a thread-local stack of open spans gives each span its parent and
 * trace id (a new trace id for each span opened on an empty stack). A closed span is pushed
 * into a bounded lock-free MPSC ring (one 64-byte cell per span); when the ring is full the
 * span is dropped and counted. In the steady state the probes neither lock nor allocate (a
 * thread's state, with room for CLRMUX_SPAN_INLINE_DEPTH open spans, is allocated once, on its
 * first span; a deeper recursion doubles the thread's stack, rarely, up to
 * CLRMUX_SPAN_MAX_DEPTH open spans). The probes read a tick counter (the
 * TSC on x86-64); one background thread drains the ring (clrmux_spans_drain), which turns
 * ticks into Unix nanoseconds. */
#ifndef CLRMUX_TRACER_SPANS_H
#define CLRMUX_TRACER_SPANS_H

#include <stddef.h>
#include <stdint.h>

/* Open spans per thread without a further allocation, and at most (a managed thread's
 * stack overflows long before: a frame takes at least ~48 bytes of its 1.5-8 MB). */
#define CLRMUX_SPAN_INLINE_DEPTH 256
#define CLRMUX_SPAN_MAX_DEPTH (1u << 20)
#define CLRMUX_SPAN_ERROR 1u

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

/* Creates the ring (capacity rounded up to a power of two, at least 2). Returns 0 or -1.
 * Calling it again discards the previous ring (tests only; no probe may run meanwhile). */
int clrmux_spans_init(size_t capacity);
/* Frees the ring (tests). */
void clrmux_spans_fini(void);

/* The probes (see above). A slot < 0 means "not recorded" (deeper than CLRMUX_SPAN_MAX_DEPTH,
 * or no memory to grow the thread's stack or create its state);
 * exit and exception ignore it. */
int64_t clrmux_span_enter(int32_t method);
void clrmux_span_exit(int64_t slot);
void clrmux_span_exception(int64_t slot);

/* Number of open spans on the calling thread. */
unsigned clrmux_span_depth(void);
/* Remembers, for the calling thread, the exception being thrown (a name id 1..65535); the
 * next clrmux_span_exception on this thread records it. 0 clears it. */
void clrmux_span_set_pending_exception(uint32_t exc);

/* Moves up to max finished spans into out, their times in Unix nanoseconds; returns how
 * many. Single consumer. */
size_t clrmux_spans_drain(struct clrmux_span *out, size_t max);

/* Statistics: spans finished (pushed or dropped), dropped because the ring was full, and
 * spans not recorded because a thread's stack could not grow (CLRMUX_SPAN_MAX_DEPTH reached,
 * or out of memory). */
struct clrmux_span_stats {
    uint64_t finished, dropped, too_deep;
};
void clrmux_spans_stats(struct clrmux_span_stats *s);

/* Unix time in nanoseconds (CLOCK_REALTIME). */
int64_t clrmux_now_ns(void);

#endif
