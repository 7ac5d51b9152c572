/* Span probes, per-thread nesting, per-method metrics and the bounded span ring (see
 * spans.h). The tick clock: spans_clock.c; the profiler's view, thread names and the W3C
 * trace context a span joins: spans_ctx.c. */
#include "tracer/spans_int.h"
#include "tracer/usdt.h"
#include "common/lazymem.h"
#include "common/platform.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the span buffer: per-thread rings of cells, handed over in blocks ------------------
 *
 * buffer_spans cells (64 bytes, one finished span each) are cut into blocks of BLK cells.
 * A thread that records spans owns one block at a time and uses it as a single-producer,
 * single-consumer ring: it writes a cell and publishes it with a release store of the
 * cell's own `ready` word (a plain store on x86-64, in the line it writes anyway), with no
 * atomic read-modify-write and no counter shared with the consumer; the export thread reads
 * the ready cells in order, clears their `ready` and gives them back with a release store
 * of the block's `read`. Positions count the thread's spans (they carry on from block to block),
 * a cell is `cells[pos % BLK]`, and the producer may write position pos while
 * pos - read < BLK (it caches read + BLK and reloads it only when it gets there).
 *
 * When its block is full the thread takes a free block from the pool and makes it its own,
 * then hands the full one to the consumer through the queue of retired blocks (three
 * atomic read-modify-writes per block of BLK spans); with no free block left the span is dropped
 * and counted (the block stays: the consumer may have made room in it by the next span).
 * The consumer drains the retired blocks first (in order: a thread's older spans come
 * first), returns each emptied one to the pool, then reads the live threads' own blocks
 * under the registry's lock; a thread that exits retires its block. A block is never
 * recycled while it is a thread's own: the thread installs its new block before retiring
 * the old one, and only a retired block goes back to the pool.
 *
 * A thread keeps at most one partly used block: buffer_spans / BLK threads record at once
 * (4096 at the default buffer of 262144 spans); BLK is at most 64 and the buffer has at least
 * 64 blocks when it holds 64 spans or more. */

struct cell {
    uint64_t trace_id[2];
    uint64_t span_id, parent_id;
    uint64_t start, end; /* ticks */
    uint32_t method;
    uint32_t tid;
    uint16_t exc, flags;
    _Atomic uint32_t ready; /* 1: written (producer, release); 0: drained (consumer) */
} __attribute__((aligned(64)));

struct block {
    _Atomic uint64_t read; /* positions below read are drained (consumer) */
    uint32_t gen;          /* times it went back to the pool (consumer) */
    uint32_t prev, prev_gen; /* the owner's block before it (index + 1, 0: none), and that
                                block's gen then (producer, at install) */
} __attribute__((aligned(64)));

static struct ring {
    struct cell *cells;    /* nblocks * blk cells */
    struct block *blocks;  /* nblocks */
    size_t bytes;          /* the cells' mapping */
    uint32_t blk, nblocks; /* powers of two */
    struct idxstack freeq;
    struct idxq fullq;
    _Alignas(64) _Atomic uint32_t nretired; /* blocks in fullq (approximate while it moves) */
    int32_t draining;      /* the retired block being drained (consumer), or -1 */
} ring = {.draining = -1};

static inline struct cell *block_cells(uint32_t i) { return ring.cells + (size_t)i * ring.blk; }
static inline uint32_t block_index(const struct block *b) { return (uint32_t)(b - ring.blocks); }

/* finished = drained + in the buffer + dropped: no counter of its own on the probes' path */
static _Atomic uint64_t st_dropped, st_too_deep, st_unsampled;
static uint64_t deq_total;            /* spans drained since init (consumer) */
static _Atomic uint64_t exited_spans; /* spans written by threads that have exited */

/* high-water wake: the consumer sleeps on `wake_word` (futex) with `sleeping` set; a thread
 * that retires a block while a quarter of the blocks or more wait to be drained wakes it
 * (the blocks threads hold as their own do not count: many threads, each with a few spans
 * in its block, must not keep the consumer awake) */
static _Atomic uint32_t wake_word, sleeping;
static uint32_t hw_retired; /* the mark: retired blocks */

/* the registry of the threads that record spans (their blocks; per-thread counters) */
__thread struct tstate *spans_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tstate *reg_head;

/* head sampling: a root trace is recorded when its random draw is below sample_bound */
static _Atomic uint64_t sample_bound = UINT64_MAX;

/* Tick rate and histogram bounds in ticks: the provisional set from init, replaced once by
 * the calibrated one at the first drain (published with a release store; probes read it). */
struct tickconv {
    double ns_per_tick;
    uint64_t bounds[CLRMUX_HIST_BOUNDS]; /* hist_bounds_ns in ticks */
};
static struct tickconv conv_set[2];
static struct tickconv *_Atomic conv = &conv_set[0];
static int calibrated; /* consumer: the second point is taken */

/* per-method metrics */
struct mcounters {
    _Atomic uint64_t calls, errors, count, sum_ns;
    _Atomic uint64_t buckets[CLRMUX_HIST_BOUNDS + 1];
};
static struct mcounters *metrics;
/* the drained spans' counts: written by the consumer alone (plain loads and stores, no
 * atomic read-modify-write per span), read by the snapshots; metrics holds the rest */
static struct mcounters *dmetrics;

const double clrmux_hist_bounds_s[CLRMUX_HIST_BOUNDS] = {1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3,
                                                         1e-2, 5e-2, 1e-1, 5e-1, 1,    5,    10};
static const uint64_t hist_bounds_ns[CLRMUX_HIST_BOUNDS] = {
    1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 10000000, 50000000, 100000000, 500000000,
    1000000000, 5000000000, 10000000000};

static void conv_fill(struct tickconv *c, double ns_per_tick)
{
    c->ns_per_tick = ns_per_tick > 0 ? ns_per_tick : 1.0;
    for (int i = 0; i < CLRMUX_HIST_BOUNDS; i++)
        c->bounds[i] = (uint64_t)((double)hist_bounds_ns[i] / c->ns_per_tick);
}

static inline double ns_per_tick(void)
{
    return atomic_load_explicit(&conv, memory_order_acquire)->ns_per_tick;
}

static void account(uint32_t method, uint64_t dur_ns, int error)
{
    if (!metrics || method >= CLRMUX_SPAN_MAX_METHODS)
        return;
    struct mcounters *m = &metrics[method];
    unsigned b = 0;
    while (b < CLRMUX_HIST_BOUNDS && dur_ns > hist_bounds_ns[b])
        b++;
    atomic_fetch_add_explicit(&m->calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_ns, dur_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->buckets[b], 1, memory_order_relaxed);
    if (error)
        atomic_fetch_add_explicit(&m->errors, 1, memory_order_relaxed);
}

static inline void bump(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

/* A drained span's call, counted by the consumer (its own counters). */
static inline void account_drained(uint32_t method, uint64_t dur_ns, int error)
{
    if (method >= CLRMUX_SPAN_MAX_METHODS)
        return;
    struct mcounters *m = &dmetrics[method];
    unsigned b = 0;
    while (b < CLRMUX_HIST_BOUNDS && dur_ns > hist_bounds_ns[b])
        b++;
    bump(&m->calls, 1);
    bump(&m->count, 1);
    bump(&m->sum_ns, dur_ns);
    bump(&m->buckets[b], 1);
    if (error)
        bump(&m->errors, 1);
}

static void add_counters(struct clrmux_method_metrics *o, struct mcounters *m)
{
    o->calls += atomic_load_explicit(&m->calls, memory_order_relaxed);
    o->errors += atomic_load_explicit(&m->errors, memory_order_relaxed);
    o->count += atomic_load_explicit(&m->count, memory_order_relaxed);
    o->sum_ns += atomic_load_explicit(&m->sum_ns, memory_order_relaxed);
    for (int b = 0; b <= CLRMUX_HIST_BOUNDS; b++)
        o->buckets[b] += atomic_load_explicit(&m->buckets[b], memory_order_relaxed);
}

static void threads_add_metrics(struct clrmux_method_metrics *out, uint32_t first, uint32_t n);

void clrmux_metrics_snapshot(struct clrmux_method_metrics *out, uint32_t n)
{
    memset(out, 0, (size_t)n * sizeof *out);
    if (!metrics)
        return;
    if (n > CLRMUX_SPAN_MAX_METHODS)
        n = CLRMUX_SPAN_MAX_METHODS;
    for (uint32_t i = 0; i < n; i++) {
        add_counters(&out[i], &metrics[i]);
        add_counters(&out[i], &dmetrics[i]);
    }
    threads_add_metrics(out, 0, n);
}

void clrmux_method_metrics_get(uint32_t method, struct clrmux_method_metrics *out)
{
    memset(out, 0, sizeof *out);
    if (!metrics || method >= CLRMUX_SPAN_MAX_METHODS)
        return;
    add_counters(out, &metrics[method]);
    add_counters(out, &dmetrics[method]);
    threads_add_metrics(out, method, 1);
}

void clrmux_spans_set_sample_ratio(double ratio)
{
    uint64_t bound;
    if (!(ratio > 0))
        bound = 0;
    else if (ratio >= 1)
        bound = UINT64_MAX;
    else
        bound = (uint64_t)(ratio * 18446744073709551616.0);
    atomic_store(&sample_bound, bound);
}


void clrmux_spans_wake(void)
{
    atomic_fetch_add(&wake_word, 1);
    clrmux_word_wake((uint32_t *)&wake_word);
}

/* Spans written to the buffer since init (the live threads' positions, the exited threads'
 * spans), under reg_lock. */
static uint64_t spans_written_locked(void)
{
    uint64_t n = atomic_load_explicit(&exited_spans, memory_order_relaxed);
    for (struct tstate *t = reg_head; t; t = t->next)
        n += atomic_load_explicit(&t->pos, memory_order_relaxed);
    return n;
}

size_t clrmux_spans_pending(void)
{
    if (!ring.cells)
        return 0;
    pthread_mutex_lock(&reg_lock);
    uint64_t w = spans_written_locked();
    pthread_mutex_unlock(&reg_lock);
    return w > deq_total ? (size_t)(w - deq_total) : 0;
}

void clrmux_spans_wait(long timeout_ms)
{
    uint32_t w = atomic_load(&wake_word);
    atomic_store(&sleeping, 1);
    if (!ring.cells || atomic_load(&ring.nretired) < hw_retired) /* below the mark: sleep */
        clrmux_word_wait((uint32_t *)&wake_word, w, timeout_ms);
    atomic_store(&sleeping, 0);
}

static void threads_reset(void);
static uint64_t threads_unsampled(void);

int clrmux_spans_init(size_t capacity)
{
    clrmux_spans_fini();
    if (capacity > (1u << 30))
        capacity = 1u << 30;
    size_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    uint32_t blk = 1; /* at most 64 cells a block, at least 64 blocks while cap >= 64 */
    while (blk < 64 && cap / (blk * 2) >= 64)
        blk <<= 1;
    uint32_t nblocks = (uint32_t)(cap / blk);
    /* anonymous memory is faulted in only as spans fill it */
    size_t bytes = cap * sizeof(struct cell);
    struct cell *c = clrmux_map_zero(bytes);
    struct block *bl = clrmux_lazy_calloc(nblocks, sizeof *bl);
    metrics = clrmux_lazy_calloc(CLRMUX_SPAN_MAX_METHODS, sizeof *metrics);
    dmetrics = clrmux_lazy_calloc(CLRMUX_SPAN_MAX_METHODS, sizeof *dmetrics);
    if (!c || !bl || !metrics || !dmetrics || stack_init(&ring.freeq, nblocks) != 0 || idxq_init(&ring.fullq, nblocks) != 0) {
        if (c)
            clrmux_unmap_zero(c, bytes);
        clrmux_lazy_free(bl);
        clrmux_lazy_free(metrics);
        metrics = NULL;
        clrmux_lazy_free(dmetrics);
        dmetrics = NULL;
        stack_free(&ring.freeq);
        idxq_free(&ring.fullq);
        return -1;
    }
    ring.bytes = bytes;
    ring.blk = blk;
    ring.nblocks = nblocks;
    ring.blocks = bl;
    ring.draining = -1;
    atomic_store(&ring.nretired, 0);
    hw_retired = nblocks / 4 ? nblocks / 4 : 1;
    deq_total = 0;
    atomic_store(&st_dropped, 0);
    atomic_store(&st_too_deep, 0);
    atomic_store(&st_unsampled, 0);
    atomic_store(&exited_spans, 0);
    conv_fill(&conv_set[0], spans_cal_init());
    atomic_store_explicit(&conv, &conv_set[0], memory_order_release);
    calibrated = 0;
    threads_reset();
    ring.cells = c; /* before any probe runs */
    return 0;
}

void clrmux_spans_fini(void)
{
    threads_reset(); /* no thread keeps a block */
    if (ring.cells)
        clrmux_unmap_zero(ring.cells, ring.bytes);
    ring.cells = NULL;
    clrmux_lazy_free(ring.blocks);
    ring.blocks = NULL;
    stack_free(&ring.freeq);
    idxq_free(&ring.fullq);
    clrmux_lazy_free(metrics);
    metrics = NULL;
    clrmux_lazy_free(dmetrics);
    dmetrics = NULL;
    atomic_store(&sample_bound, UINT64_MAX);
}

/* The calling thread's block is full (or it has none): room for position t->pos, in the
 * same block if the consumer has drained some of it, else in a block from the pool (the
 * full one is retired). 0: no room, the span is dropped. The probes' rare path: no lock,
 * no allocation (three atomic read-modify-writes per block). */
static __attribute__((noinline)) int block_room(struct tstate *t)
{
    struct block *b = atomic_load_explicit(&t->blk, memory_order_relaxed);
    uint64_t pos = atomic_load_explicit(&t->pos, memory_order_relaxed);
    if (b) {
        t->limit = atomic_load_explicit(&b->read, memory_order_acquire) + ring.blk;
        if (pos < t->limit)
            return 1;
    }
    uint32_t i;
    if (!ring.cells || !stack_pop(&ring.freeq, &i))
        return 0;
    struct block *nb = &ring.blocks[i];
    atomic_store_explicit(&nb->read, pos, memory_order_relaxed); /* its cells: all drained */
    nb->prev = b ? block_index(b) + 1 : 0;
    nb->prev_gen = b ? b->gen : 0;
    t->cells = block_cells(i);
    t->limit = pos + ring.blk;
    atomic_store_explicit(&t->blk, nb, memory_order_release); /* the new block first ... */
    if (b) {
        idxq_push(&ring.fullq, block_index(b)); /* ... then the old one to the consumer */
        uint32_t nr = atomic_fetch_add_explicit(&ring.nretired, 1, memory_order_relaxed) + 1;
        if (nr >= hw_retired && atomic_load_explicit(&sleeping, memory_order_relaxed))
            clrmux_spans_wake();
    }
    return 1;
}

/* Copies the ready cells of block b from its read position on (at most max - *n spans)
 * into out; returns 1 when it stopped at a cell not ready (all written so far is drained),
 * 0 when out is full. */
static int block_drain(struct block *b, struct clrmux_span *out, size_t *np, size_t max)
{
    uint64_t r = atomic_load_explicit(&b->read, memory_order_relaxed);
    struct cell *cells = block_cells(block_index(b));
    uint32_t m = ring.blk - 1;
    size_t n = *np;
    int empty = 0;
    while (n < max) {
        struct cell *c = &cells[r & m];
        if (!atomic_load_explicit(&c->ready, memory_order_acquire)) {
            empty = 1;
            break;
        }
        struct clrmux_span *s = &out[n++];
        memcpy(s->trace_id, c->trace_id, 16);
        s->span_id = c->span_id;
        s->parent_id = c->parent_id;
        s->start_ns = (int64_t)c->start; /* ticks until converted below */
        s->end_ns = (int64_t)c->end;
        s->method = c->method;
        s->tid = c->tid;
        s->exc = c->exc;
        s->flags = c->flags;
        atomic_store_explicit(&c->ready, 0, memory_order_relaxed); /* ordered by read's release */
        r++;
    }
    atomic_store_explicit(&b->read, r, memory_order_release);
    *np = n;
    return empty;
}

size_t clrmux_spans_drain(struct clrmux_span *out, size_t max)
{
    size_t n = 0;
    if (!ring.cells)
        return 0;
    /* the retired blocks first, oldest first: then a thread's spans come in order */
    while (n < max) {
        if (ring.draining < 0) {
            uint32_t i;
            if (!idxq_pop(&ring.fullq, &i))
                break;
            atomic_fetch_sub_explicit(&ring.nretired, 1, memory_order_relaxed);
            ring.draining = (int32_t)i;
        }
        if (!block_drain(&ring.blocks[ring.draining], out, &n, max))
            break; /* out is full */
        ring.blocks[ring.draining].gen++;
        stack_push(&ring.freeq, (uint32_t)ring.draining);
        ring.draining = -1;
    }
    /* then the live threads' own blocks (a block retired meanwhile is drained here or
     * later from the queue: it is recycled only from there) */
    if (n < max) {
        pthread_mutex_lock(&reg_lock);
        for (struct tstate *t = reg_head; t && n < max; t = t->next) {
            struct block *b = atomic_load_explicit(&t->blk, memory_order_acquire);
            /* not while the thread's block before it waits in the queue (or is about to):
             * the thread's older spans come first */
            if (b && !(b->prev && ring.blocks[b->prev - 1].gen == b->prev_gen))
                block_drain(b, out, &n, max);
        }
        pthread_mutex_unlock(&reg_lock);
    }
    deq_total += n;
    if (!calibrated) { /* the second point, and the tick rate for good */
        double r = spans_cal_fix();
        conv_fill(&conv_set[1], r > 0 ? r : conv_set[0].ns_per_tick);
        atomic_store_explicit(&conv, &conv_set[1], memory_order_release);
        calibrated = 1;
    }
    /* every span drained ended before this point: it is interpolated, never extrapolated */
    spans_cal_sample();
    double npt = ns_per_tick();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = (uint64_t)out[i].start_ns, t1 = (uint64_t)out[i].end_ns;
        account_drained(out[i].method, (uint64_t)((double)(t1 - t0) * npt), out[i].flags & CLRMUX_SPAN_ERROR);
        out[i].start_ns = spans_tick_to_ns(t0);
        out[i].end_ns = spans_tick_to_ns(t1);
    }
    return n;
}

void clrmux_spans_stats(struct clrmux_span_stats *s)
{
    s->dropped = atomic_load(&st_dropped);
    pthread_mutex_lock(&reg_lock);
    uint64_t w = ring.cells ? spans_written_locked() : 0;
    pthread_mutex_unlock(&reg_lock);
    s->finished = (w > deq_total ? w : deq_total) + s->dropped;
    s->too_deep = atomic_load(&st_too_deep);
    s->unsampled = atomic_load(&st_unsampled) + threads_unsampled();
}

/* ---- per-thread state (struct tstate: spans_int.h) ---------------------------------------- */

/* Counts a call whose span is not recorded, on its own thread. */
static void account_local(struct tstate *t, uint32_t method, uint64_t dur_ticks, int error)
{
    struct tmetric *e = &t->tm[method & (TM_SLOTS - 1)];
    uint32_t m1 = atomic_load_explicit(&e->method1, memory_order_relaxed);
    if (m1 != method + 1) {
        if (m1 || method >= CLRMUX_SPAN_MAX_METHODS) {
            account(method, (uint64_t)((double)dur_ticks * ns_per_tick()), error);
            return;
        }
        atomic_store_explicit(&e->method1, method + 1, memory_order_release);
    }
    const struct tickconv *cv = atomic_load_explicit(&conv, memory_order_acquire);
    unsigned b = 0;
    while (b < CLRMUX_HIST_BOUNDS && dur_ticks > cv->bounds[b])
        b++;
    bump(&e->calls, 1);
    bump(&e->sum_ticks, dur_ticks);
    bump(&e->buckets[b], 1);
    if (error)
        bump(&e->errors, 1);
}

static void add_tm(struct clrmux_method_metrics *o, const struct tmetric *e)
{
    uint64_t c = atomic_load_explicit(&e->calls, memory_order_relaxed);
    o->calls += c;
    o->count += c;
    o->errors += atomic_load_explicit(&e->errors, memory_order_relaxed);
    o->sum_ns += (uint64_t)((double)atomic_load_explicit(&e->sum_ticks, memory_order_relaxed) * ns_per_tick());
    for (int b = 0; b <= CLRMUX_HIST_BOUNDS; b++)
        o->buckets[b] += atomic_load_explicit(&e->buckets[b], memory_order_relaxed);
}

static void threads_add_metrics(struct clrmux_method_metrics *out, uint32_t first, uint32_t n)
{
    pthread_mutex_lock(&reg_lock);
    for (struct tstate *t = reg_head; t; t = t->next)
        for (int i = 0; i < TM_SLOTS; i++) {
            uint32_t m1 = atomic_load_explicit(&t->tm[i].method1, memory_order_acquire);
            if (m1 && m1 - 1 >= first && m1 - 1 < first + n)
                add_tm(&out[m1 - 1 - first], &t->tm[i]);
        }
    pthread_mutex_unlock(&reg_lock);
}

/* a new buffer (tests; no probe runs): the live threads' counters start again, and no
 * thread keeps a block of the old one */
static void threads_reset(void)
{
    pthread_mutex_lock(&reg_lock);
    for (struct tstate *t = reg_head; t; t = t->next) {
        memset(t->tm, 0, sizeof t->tm);
        atomic_store(&t->unsampled, 0);
        atomic_store(&t->blk, NULL);
        t->cells = NULL;
        atomic_store(&t->pos, 0);
        t->limit = 0;
    }
    pthread_mutex_unlock(&reg_lock);
}

static uint64_t threads_unsampled(void)
{
    uint64_t n = 0;
    pthread_mutex_lock(&reg_lock);
    for (struct tstate *t = reg_head; t; t = t->next)
        n += atomic_load_explicit(&t->unsampled, memory_order_relaxed);
    pthread_mutex_unlock(&reg_lock);
    return n;
}

static void tstate_free(void *p)
{
    struct tstate *t = p;
    spans_tls = NULL;
    spans_tname_record(t->tid);
    pthread_mutex_lock(&reg_lock);
    if (metrics) /* fold the thread's counters into the globals */
        for (int i = 0; i < TM_SLOTS; i++) {
            uint32_t m1 = atomic_load_explicit(&t->tm[i].method1, memory_order_relaxed);
            if (!m1)
                continue;
            struct clrmux_method_metrics o = {0};
            add_tm(&o, &t->tm[i]);
            struct mcounters *m = &metrics[m1 - 1];
            atomic_fetch_add(&m->calls, o.calls);
            atomic_fetch_add(&m->count, o.count);
            atomic_fetch_add(&m->errors, o.errors);
            atomic_fetch_add(&m->sum_ns, o.sum_ns);
            for (int b = 0; b <= CLRMUX_HIST_BOUNDS; b++)
                atomic_fetch_add(&m->buckets[b], o.buckets[b]);
        }
    atomic_fetch_add(&st_unsampled, atomic_load(&t->unsampled));
    struct block *b = atomic_load(&t->blk);
    if (b && ring.cells) { /* its last spans: the consumer drains them from the queue */
        atomic_fetch_add(&exited_spans, atomic_load_explicit(&t->pos, memory_order_relaxed));
        atomic_store(&t->blk, NULL);
        idxq_push(&ring.fullq, block_index(b));
        atomic_fetch_add(&ring.nretired, 1);
        if (atomic_load(&sleeping))
            clrmux_spans_wake();
    }
    if (t->prev)
        t->prev->next = t->next;
    else
        reg_head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    spans_ctx_release(t);
    pthread_mutex_unlock(&reg_lock);
    if (t->stack != t->inline_stack)
        free(t->stack);
    free(p);
}

/* Doubles the calling thread's stack of open spans (a recursion deeper than it). The rare
 * path: never taken by a thread that stays within CLRMUX_SPAN_INLINE_DEPTH. */
static __attribute__((noinline, cold)) int tstate_grow(struct tstate *t)
{
    if (t->cap >= CLRMUX_SPAN_MAX_DEPTH)
        return -1;
    uint32_t cap = t->cap * 2 > CLRMUX_SPAN_MAX_DEPTH ? CLRMUX_SPAN_MAX_DEPTH : t->cap * 2;
    struct open_span *s = malloc((size_t)cap * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, t->stack, (size_t)t->depth * sizeof *s);
    if (t->stack != t->inline_stack)
        free(t->stack);
    t->stack = s;
    t->cap = cap;
    return 0;
}
static void tls_init(void) { pthread_key_create(&tls_key, tstate_free); }

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct tstate *spans_tstate_new(void)
{
    pthread_once(&tls_once, tls_init);
    struct tstate *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->stack = t->inline_stack;
    t->cap = CLRMUX_SPAN_INLINE_DEPTH;
    t->tid = (uint32_t)clrmux_thread_id();
    uint64_t seed = 0;
    if (clrmux_random(&seed, sizeof seed) != 0)
        seed = (uint64_t)clrmux_now_ns() ^ ((uint64_t)t->tid << 32) ^ (uint64_t)(uintptr_t)t;
    t->rng = splitmix(&seed);
    spans_tname_record(t->tid);
    pthread_mutex_lock(&reg_lock);
    t->ctx = spans_ctx_alloc(t);
    if (!t->ctx) {
        pthread_mutex_unlock(&reg_lock);
        free(t);
        return NULL;
    }
    t->next = reg_head;
    if (reg_head)
        reg_head->prev = t;
    reg_head = t;
    pthread_mutex_unlock(&reg_lock);
    pthread_setspecific(tls_key, t);
    spans_tls = t;
    return t;
}

/* a reader of the span contexts exists (spans_int.h): the probes keep them from then on */
_Atomic int spans_labels_on;
void clrmux_spans_want_labels(void) { atomic_store(&spans_labels_on, 1); }
int clrmux_spans_labels_wanted(void) { return atomic_load(&spans_labels_on); }

__attribute__((visibility("default"))) struct clrmux_span_context *clrmux_span_context_peek(void)
{
    struct tstate *t = spans_tls; /* initial-exec TLS: no allocation, no lock: async-signal-safe */
    return t ? t->ctx : NULL;
}

__attribute__((visibility("default"))) struct clrmux_span_context *clrmux_span_context_get(void)
{
    clrmux_spans_want_labels(); /* a reader: the probes keep the views from now on */
    struct tstate *t = spans_tls;
    if (!t && !(t = spans_tstate_new()))
        return NULL;
    return t->ctx;
}

/* Segment k starts a new trace: a root span's (the head sampling decision drawn from its
 * trace id), or the async context's (continued: its trace, sampling and span as parent). */
static inline void seg_start(struct tstate *t, uint32_t k, const struct actx *a, uint64_t root_span)
{
    struct seg *s = &t->seg[k];
    if (a->span_id) {
        memcpy(s->trace_id, a->trace_id, 16);
        s->root_parent = a->span_id;
        s->local_root = a->local_root ? a->local_root : a->span_id;
        s->sampled = a->sampled;
        s->joined = 1;
        return;
    }
    uint64_t x = spans_rnd(t), y = spans_rnd(t);
    memcpy(s->trace_id, &x, 8);
    memcpy(s->trace_id + 8, &y, 8);
    s->root_parent = 0;
    s->local_root = root_span;
    s->joined = 0;
    uint64_t bound = atomic_load_explicit(&sample_bound, memory_order_relaxed);
    s->sampled = y < bound || bound == UINT64_MAX;
}

/* span_open's USDT probe, out of line (span_open stays a leaf until a tool attaches). */
static __attribute__((noinline, cold)) void usdt_start(struct tstate *t, const struct open_span *o, uint32_t k)
{
    clrmux_usdt_span_start(o->method, o->span_id, t->seg[k].trace_id);
}

static inline int64_t span_open(struct tstate *t, int32_t method)
{
    uint32_t d = t->depth;
    struct open_span *o = &t->stack[d];
    uint64_t actx = t->actx.span_id;
    uint32_t k = 0;
    int root = 1;
    if (d) {
        const struct open_span *up = &t->stack[d - 1];
        k = up->seg;
        /* the stack's context, or the span under it runs the async context itself: nested;
         * else a continuation runs inline inside `up`: a new segment continues its context */
        root = actx != up->actx_span && actx != up->span_id && k + 1 < SEG_MAX;
        k += (uint32_t)root;
    }
    /* every span has an id, recorded or not: an async span's continuations carry it in the
     * async context with its trace's sampling decision */
    o->span_id = spans_rnd(t);
    if (root)
        seg_start(t, k, &t->actx, o->span_id);
    o->actx_span = actx;
    o->seg = (uint8_t)k;
    o->segroot = (uint8_t)root;
    o->method = (uint32_t)method;
    o->flags = 0;
    o->exc = 0;
    o->entered = 0;
    o->start = ticks();
    t->depth = d + 1;
    spans_ctx_update(t);
    if (CLRMUX_USDT_ON(span_start)) /* USDT clrmux:span_start, when a tool attached (usdt.h) */
        usdt_start(t, o, k);
    return d;
}

int64_t clrmux_span_enter_fast(int32_t method)
{
#ifdef CLRMUX_BENCH_NOOP_PROBES
    (void)method;
    return 0;
#endif
    struct tstate *t = spans_tls;
    if (__builtin_expect(!t || t->depth >= t->cap, 0))
        return CLRMUX_SPAN_SLOW;
    return span_open(t, method);
}

int64_t clrmux_span_enter(int32_t method)
{
    struct tstate *t = spans_tls;
    if (__builtin_expect(!t, 0) && !(t = spans_tstate_new()))
        return -1;
    if (__builtin_expect(t->depth >= t->cap, 0) && tstate_grow(t) != 0) {
        atomic_fetch_add_explicit(&st_too_deep, 1, memory_order_relaxed);
        t->lost++; /* this frame has no span: its unwind ends none (clrmux_span_unwind_leave) */
        if (metrics && (uint32_t)method < CLRMUX_SPAN_MAX_METHODS)
            atomic_fetch_add_explicit(&metrics[method].calls, 1, memory_order_relaxed);
        return -1;
    }
    return span_open(t, method);
}

/* Writes a finished span to cell `pos` of the calling thread's block. */
static inline __attribute__((always_inline)) void cell_write(struct tstate *t, uint64_t pos, const uint8_t *trace,
                                                             uint64_t span, uint64_t parent, uint64_t start,
                                                             uint64_t end, uint32_t method, uint32_t tid, uint16_t exc,
                                                             uint16_t flags)
{
    struct cell *c = &t->cells[pos & (ring.blk - 1)];
    memcpy(c->trace_id, trace, 16);
    c->span_id = span;
    c->parent_id = parent;
    c->start = start;
    c->end = end;
    c->method = method;
    c->tid = tid;
    c->exc = exc;
    c->flags = flags;
    atomic_store_explicit(&c->ready, 1, memory_order_release);
    atomic_store_explicit(&t->pos, pos + 1, memory_order_relaxed);
}

/* record()'s rare side, out of line so that the common one stays a leaf (no registers saved
 * for a call): a tool attached to span_end, a trace not recorded, a full block. */
static __attribute__((noinline)) void record_slow(struct tstate *t, const uint8_t *trace, uint64_t span,
                                                  uint64_t parent, uint64_t start, uint64_t end, uint32_t method,
                                                  uint32_t tid, uint16_t exc, uint16_t flags, int sampled)
{
    if (CLRMUX_USDT_ON(span_end)) /* USDT clrmux:span_end, when a tool attached (usdt.h) */
        clrmux_usdt_span_end(method, span, trace, (uint64_t)((double)(end - start) * ns_per_tick()),
                             flags & CLRMUX_SPAN_ERROR);
    if (!sampled) {
        bump(&t->unsampled, 1);
        account_local(t, method, end - start, flags & CLRMUX_SPAN_ERROR);
        return;
    }
    uint64_t pos = atomic_load_explicit(&t->pos, memory_order_relaxed);
    if (pos == t->limit && !block_room(t)) {
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed); /* full */
        account_local(t, method, end - start, flags & CLRMUX_SPAN_ERROR);
        return;
    }
    cell_write(t, pos, trace, span, parent, start, end, method, tid, exc, flags);
}

/* A finished span to the calling thread's block of the buffer; a span of a trace that is not
 * recorded, or that finds the buffer full, is counted on the thread instead. */
static inline void record(struct tstate *t, const uint8_t *trace, uint64_t span, uint64_t parent, uint64_t start,
                          uint64_t end, uint32_t method, uint32_t tid, uint16_t exc, uint16_t flags, int sampled)
{
    uint64_t pos = atomic_load_explicit(&t->pos, memory_order_relaxed);
    if (__builtin_expect(!sampled || pos == t->limit || CLRMUX_USDT_ON(span_end), 0)) {
        record_slow(t, trace, span, parent, start, end, method, tid, exc, flags, sampled);
        return;
    }
    cell_write(t, pos, trace, span, parent, start, end, method, tid, exc, flags);
}

void spans_record_async(struct tstate *t, const struct clrmux_async_span *s, uint64_t end, uint16_t exc, int error)
{
    record(t, s->trace_id, s->span_id, s->parent_id, s->start, end, s->method, s->tid, exc,
           (uint16_t)(s->flags | (error ? CLRMUX_SPAN_ERROR : 0)), s->sampled);
}

/* The innermost frame without a span returns (slot < 0). */
static __attribute__((noinline, cold)) void lost_frame_ends(struct tstate *t)
{
    if (t && t->lost)
        t->lost--;
}

/* Ends the top span at tick `end`. */
static inline __attribute__((always_inline)) void close_top(struct tstate *t, uint64_t end)
{
    uint32_t d = --t->depth;
    const struct open_span *o = &t->stack[d];
    const struct seg *sg = &t->seg[o->seg];
    record(t, sg->trace_id, o->span_id, o->segroot ? sg->root_parent : t->stack[d - 1].span_id, o->start, end,
           o->method, t->tid, o->exc, (uint16_t)(o->flags | (sg->joined ? CLRMUX_SPAN_JOINED : 0)), sg->sampled);
}

/* Ends the spans from the top down to (and including) `slot`, at tick `end`. */
static __attribute__((noinline)) void close_down_to(struct tstate *t, int64_t slot, uint64_t end)
{
    while ((int64_t)t->depth > slot)
        close_top(t, end);
    if (t->depth == 0)
        t->pending_exc = 0, t->lost = 0;
    spans_ctx_update(t);
}

void clrmux_span_exit(int64_t slot)
{
#ifdef CLRMUX_BENCH_NOOP_PROBES
    (void)slot;
    return;
#endif
    struct tstate *t = spans_tls;
    if (__builtin_expect(slot < 0, 0)) {
        lost_frame_ends(t);
        return;
    }
    if (!t || slot >= (int64_t)t->depth)
        return;
    uint64_t end = ticks();
    if (__builtin_expect(slot + 1 == (int64_t)t->depth, 1)) { /* the top span: the common case */
        close_top(t, end);
        if (!t->depth)
            t->pending_exc = 0, t->lost = 0;
        spans_ctx_update_closed(t);
        return;
    }
    /* spans above `slot` were left without their exit probe (an unwind the tracer did not see
     * end them; closed here so the stack stays consistent) */
    close_down_to(t, slot, end);
}

void clrmux_span_unwind_enter(int32_t method)
{
    struct tstate *t = spans_tls;
    if (!t)
        return;
    if (t->n_unwind < UNWIND_MAX)
        t->unwind[t->n_unwind++] = (struct unwind_frame){method, t->pending_exc};
    else
        t->unwind_over++;
}

/* The frame entered last, popped: 1 and *f, or 0 (none remembered). */
static int unwind_pop(struct tstate *t, struct unwind_frame *f)
{
    if (t->unwind_over) {
        t->unwind_over--;
        f->method = -1;
        return 1;
    }
    if (!t->n_unwind)
        return 0;
    *f = t->unwind[--t->n_unwind];
    return 1;
}

void clrmux_span_unwind_leave(void)
{
    struct tstate *t = spans_tls;
    struct unwind_frame f;
    if (!t || !unwind_pop(t, &f) || f.method < 0)
        return;
    if (t->lost) { /* the innermost traced frames recorded nothing: this is one of them */
        t->lost--;
        return;
    }
    if (!t->depth || t->stack[t->depth - 1].method != (uint32_t)f.method)
        return; /* not the frame of the top span (a version of the method without probes) */
    struct open_span *o = &t->stack[t->depth - 1];
    o->flags |= CLRMUX_SPAN_ERROR;
    if (!o->exc)
        o->exc = f.exc ? f.exc : t->pending_exc;
    if (o->entered) /* the flow's context still names it: readers skip it */
        spans_async_failed(o->span_id);
    close_down_to(t, (int64_t)t->depth - 1, ticks());
}

void clrmux_span_unwind_caught(void)
{
    struct tstate *t = spans_tls;
    struct unwind_frame f;
    if (t)
        (void)unwind_pop(t, &f);
}

void clrmux_span_unwind_reset_idle(void)
{
    struct tstate *t = spans_tls;
    if (t && !t->depth)
        t->n_unwind = t->unwind_over = t->lost = 0;
}

void clrmux_span_exception(int64_t slot)
{
    struct tstate *t = spans_tls;
    if (!t || slot < 0 || slot >= (int64_t)t->depth)
        return;
    struct open_span *o = &t->stack[slot];
    o->flags |= CLRMUX_SPAN_ERROR;
    if (!o->exc)
        o->exc = t->pending_exc;
}

unsigned clrmux_span_depth(void)
{
    struct tstate *t = spans_tls;
    return t ? t->depth : 0;
}

void clrmux_span_set_pending_exception(uint32_t exc)
{
    struct tstate *t = spans_tls;
    if (t)
        t->pending_exc = exc > UINT16_MAX ? 0 : (uint16_t)exc;
}
