/* The span buffer's two lock-free queues of block indexes (see spans.c): the queue of retired
 * blocks (bounded MPMC, D. Vyukov's) and the pool of free blocks (a tagged LIFO stack). Called
 * once per block of spans, never per span. */
#include "tracer/spans_int.h"

#include "common/lazymem.h"

#include <stdlib.h>

/* A bounded MPMC queue of block indexes (D. Vyukov's): the queue of retired blocks. It
 * holds every block at most once, so it is never full. Slot i keeps its sequence number
 * less i, so that the initial state (sequence i in slot i) is all zeros: the slots are a
 * lazily mapped table (common/lazymem.h), neither written nor faulted in at start-up. */

static inline uint32_t seq_load(struct idxq *q, uint32_t i, memory_order mo)
{
    return atomic_load_explicit(&q->slots[i].seq, mo) + i;
}

static inline void seq_store(struct idxq *q, uint32_t i, uint32_t seq, memory_order mo)
{
    atomic_store_explicit(&q->slots[i].seq, seq - i, mo);
}

void idxq_push(struct idxq *q, uint32_t v)
{
    uint32_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    for (;;) {
        uint32_t i = pos & q->mask;
        int32_t diff = (int32_t)(seq_load(q, i, memory_order_acquire) - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                q->slots[i].val = v;
                seq_store(q, i, pos + 1, memory_order_release);
                return;
            }
        } else if (diff < 0) {
            return; /* full: cannot happen (the queue has room for every block) */
        } else {
            pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
        }
    }
}

int idxq_pop(struct idxq *q, uint32_t *v)
{
    uint32_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
    for (;;) {
        uint32_t i = pos & q->mask;
        int32_t diff = (int32_t)(seq_load(q, i, memory_order_acquire) - (pos + 1));
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *v = q->slots[i].val;
                seq_store(q, i, pos + q->mask + 1, memory_order_release);
                return 1;
            }
        } else if (diff < 0) {
            return 0; /* empty */
        } else {
            pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
        }
    }
}

/* The pool of free blocks: a lock-free stack (LIFO: the block given back last, still in the
 * cache, is taken first, so a consumer that keeps up keeps the probes on a few hot blocks
 * and the rest of the buffer is never touched). `head` holds a tag that changes on every
 * update (no ABA) and the top block's index + 1 (0: empty); next[i] is the index + 1 of the
 * block under block i. Popped by the producers, pushed by the consumer. next[i] is kept
 * XORed with its initial value (i + 2, or 0 for the last block), so that the initial stack
 * is all zeros: a lazily mapped table, as the queue's slots. */

static inline uint32_t next_init(const struct idxstack *st, uint32_t i) { return i + 1 < st->n ? i + 2 : 0; }

void stack_push(struct idxstack *st, uint32_t i)
{
    uint64_t old = atomic_load_explicit(&st->head, memory_order_relaxed), nw;
    do {
        atomic_store_explicit(&st->next[i], (uint32_t)old ^ next_init(st, i), memory_order_relaxed);
        nw = ((old >> 32) + 1) << 32 | (i + 1);
    } while (!atomic_compare_exchange_weak_explicit(&st->head, &old, nw, memory_order_release,
                                                    memory_order_relaxed));
}

int stack_pop(struct idxstack *st, uint32_t *i)
{
    uint64_t old = atomic_load_explicit(&st->head, memory_order_acquire), nw;
    do {
        uint32_t top = (uint32_t)old;
        if (!top)
            return 0;
        nw = ((old >> 32) + 1) << 32 |
             (atomic_load_explicit(&st->next[top - 1], memory_order_relaxed) ^ next_init(st, top - 1));
    } while (!atomic_compare_exchange_weak_explicit(&st->head, &old, nw, memory_order_acquire,
                                                    memory_order_acquire));
    *i = (uint32_t)old - 1;
    return 1;
}

void idxq_free(struct idxq *q)
{
    clrmux_lazy_free(q->slots);
    q->slots = NULL;
}

int idxq_init(struct idxq *q, uint32_t cap)
{
    q->slots = clrmux_lazy_calloc(cap, sizeof *q->slots); /* zeros: sequence i in slot i */
    if (!q->slots)
        return -1;
    q->mask = cap - 1;
    atomic_store(&q->enq, 0);
    atomic_store(&q->deq, 0);
    return 0;
}

void stack_free(struct idxstack *st)
{
    clrmux_lazy_free((void *)st->next);
    st->next = NULL;
}

int stack_init(struct idxstack *st, uint32_t n) /* holding every block, 0 on top */
{
    st->next = clrmux_lazy_calloc(n, sizeof *st->next); /* zeros: i + 2 under i */
    if (!st->next)
        return -1;
    st->n = n;
    atomic_store(&st->head, 1);
    return 0;
}

