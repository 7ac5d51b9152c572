/* The async contexts an exception left (see spans.h, clrmux_span_failed): the unwind in
 * spans.c records a span id here, the managed agent asks about it (spans_async.c's callers).
 * Below both: it calls nothing. */
#include "tracer/spans_int.h"

#include <stdatomic.h>

/* Async contexts whose method an exception left: a direct-mapped table of span ids (random,
 * so their low bits index it); a newer id may evict an older one. */
#define FAILED_SLOTS 4096u
static _Atomic uint64_t failed_ids[FAILED_SLOTS];
static uint32_t failed_any_word;

void spans_async_failed(uint64_t span_id)
{
    atomic_store_explicit(&failed_ids[span_id & (FAILED_SLOTS - 1)], span_id, memory_order_relaxed);
    __atomic_store_n(&failed_any_word, 1, __ATOMIC_RELEASE);
}

int clrmux_span_failed(uint64_t span_id)
{
    return span_id && atomic_load_explicit(&failed_ids[span_id & (FAILED_SLOTS - 1)], memory_order_relaxed) == span_id;
}

const uint32_t *clrmux_span_failed_any(void) { return &failed_any_word; }
