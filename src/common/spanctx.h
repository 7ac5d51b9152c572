/* The tracer's per-thread span context as the profiler reads it: the record's layout, the
 * seqlock protocol, and the reader (header-only: the tracer in libclrmux.so writes, the
 * profiler in libclrmux_profiler.so reads through function pointers it gets from its host).
 *
 * Writer (the owning thread only, src/tracer/spans.c): seq odd (relaxed store), the fields
 * (release stores), seq even (release store); no fence (TSan supports none). One change skips
 * the seqlock: when the thread's last span closes, span_id, local_root_id and depth are set to
 * 0 (in that order) and the trace words left as they were; the reader treats a copy whose
 * local_root_id is 0 as no span (an open span always has a local root: itself at least). Records are never freed: at thread exit the tracer clears
 * the ids and `tid` and recycles the record for a later thread, so a reader holding a stale
 * pointer reads valid memory and sees by `tid` that the record is no longer its thread's.
 * Reader: any thread, including a signal handler on the owning thread (which may have
 * interrupted the writer: then seq is odd and the read fails rather than spins). */
#ifndef CLRMUX_COMMON_SPANCTX_H
#define CLRMUX_COMMON_SPANCTX_H

#include <stdint.h>
#include <string.h>

struct clrmux_span_context {
    volatile uint32_t seq;   /* even: stable; odd: the owner is updating the fields */
    volatile uint32_t tid;   /* the owning OS thread; 0 while the record is free */
    volatile uint32_t depth; /* open spans on the thread */
    uint32_t reserved;
    volatile uint64_t span_id;       /* the innermost open span; 0: none */
    volatile uint64_t local_root_id; /* the thread's outermost open span */
    union {
        volatile uint8_t trace_id[16];   /* the open spans' trace (W3C byte order) */
        volatile uint64_t trace_words[2]; /* the same bytes, for the reader's two loads */
    };
};

/* One consistent copy of a context, span_id != 0. */
struct clrmux_span_ids {
    uint64_t span_id, local_root_id;
    uint8_t trace_id[16];
};

/* Copies c into *out when the copy is consistent, a span is open and (tid != 0) the record
 * still belongs to OS thread tid. Returns 1, or 0 (no span, a concurrent update that lasted
 * `tries` attempts, another thread's record). No lock, no allocation, no system call:
 * async-signal-safe. The cost without an open span: three loads. */
static inline int clrmux_span_context_read(const struct clrmux_span_context *c, uint32_t tid,
                                           struct clrmux_span_ids *out, int tries)
{
    if (!c)
        return 0;
    for (; tries > 0; tries--) {
        uint32_t s0 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
        if (s0 & 1)
            continue;
        /* acquire loads (plain moves on x86-64): the second seq load stays after them */
        uint64_t span = __atomic_load_n(&c->span_id, __ATOMIC_ACQUIRE);
        if (!span) {
            if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == s0)
                return 0; /* no open span: the common case, three loads */
            continue;
        }
        uint32_t owner = __atomic_load_n(&c->tid, __ATOMIC_ACQUIRE);
        out->span_id = span;
        out->local_root_id = __atomic_load_n(&c->local_root_id, __ATOMIC_ACQUIRE);
        uint64_t w[2] = {__atomic_load_n(&c->trace_words[0], __ATOMIC_ACQUIRE),
                         __atomic_load_n(&c->trace_words[1], __ATOMIC_ACQUIRE)};
        memcpy(out->trace_id, w, 16);
        if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) != s0)
            continue;
        if (!out->local_root_id) /* the span closed meanwhile (the clear skips the seqlock) */
            return 0;
        return !tid || owner == tid;
    }
    return 0;
}

#endif
