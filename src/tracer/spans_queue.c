/* The span buffer's two lock-free queues of block indexes (see spans.c): the queue of retired
 * blocks (bounded MPMC, D. Vyukov's) and the pool of free blocks (a tagged LIFO stack). Called
 * once per block of spans, never per span. */
#include "tracer/spans_int.h"

#include <stdlib.h>

/* A bounded MPMC queue of block indexes (D. Vyukov's): the queue of retired blocks. It
 * holds every block at most once, so it is never full. */

void idxq_push(struct idxq *q, uint32_t v)
{
    uint32_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    for (;;) {
        struct qslot *s = &q->slots[pos & q->mask];
        int32_t diff = (int32_t)(atomic_load_explicit(&s->seq, memory_order_acquire) - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                s->val = v;
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
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
        struct qslot *s = &q->slots[pos & q->mask];
        int32_t diff = (int32_t)(atomic_load_explicit(&s->seq, memory_order_acquire) - (pos + 1));
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *v = s->val;
                atomic_store_explicit(&s->seq, pos + q->mask + 1, memory_order_release);
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
 * block under block i. Popped by the producers, pushed by the consumer. */

void stack_push(struct idxstack *st, uint32_t i)
{
    uint64_t old = atomic_load_explicit(&st->head, memory_order_relaxed), nw;
    do {
        atomic_store_explicit(&st->next[i], (uint32_t)old, memory_order_relaxed);
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
        nw = ((old >> 32) + 1) << 32 | atomic_load_explicit(&st->next[top - 1], memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&st->head, &old, nw, memory_order_acquire,
                                                    memory_order_acquire));
    *i = (uint32_t)old - 1;
    return 1;
}

void idxq_free(struct idxq *q)
{
    free(q->slots);
    q->slots = NULL;
}

int idxq_init(struct idxq *q, uint32_t cap)
{
    q->slots = malloc((size_t)cap * sizeof *q->slots);
    if (!q->slots)
        return -1;
    q->mask = cap - 1;
    for (uint32_t i = 0; i < cap; i++) {
        q->slots[i].val = 0;
        atomic_init(&q->slots[i].seq, i);
    }
    atomic_store(&q->enq, 0);
    atomic_store(&q->deq, 0);
    return 0;
}

void stack_free(struct idxstack *st)
{
    free((void *)st->next);
    st->next = NULL;
}

int stack_init(struct idxstack *st, uint32_t n) /* holding every block, 0 on top */
{
    st->next = malloc((size_t)n * sizeof *st->next);
    if (!st->next)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        atomic_init(&st->next[i], i + 1 < n ? i + 2 : 0);
    atomic_store(&st->head, 1);
    return 0;
}

