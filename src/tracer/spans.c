/* Span probes, per-thread nesting and the bounded span ring (see spans.h). */
#include "tracer/spans.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- time: a cheap tick counter on the probes' path, Unix nanoseconds at drain ------------
 *
 * The probes read the CPU's invariant time-stamp counter (x86-64; elsewhere CLOCK_MONOTONIC),
 * about half the cost of clock_gettime. The consumer maps ticks to Unix time through
 * calibration points (tick, CLOCK_REALTIME) taken at init and after each drain; a tick is
 * interpolated between the two points around it (or extrapolated with the nearest
 * segment's slope), so the mapping is deterministic and monotonic and a child span stays
 * within its parent whichever batches they were drained in. */

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

int64_t clrmux_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define CAL_POINTS 4096 /* one per drain: about an hour at the default flush interval */
#define CAL_MIN_NS 1000000 /* a new point at least 1 ms after the previous one */

struct cal_point {
    uint64_t tick;
    int64_t ns;
};

static struct cal {
    struct cal_point p[CAL_POINTS]; /* ring, oldest at first */
    size_t first, n;
} cal;

/* The tightest of a few (tick, clock, tick) readings: a reading the scheduler interrupted
 * would misplace the point. */
static struct cal_point cal_sample(void)
{
    struct cal_point best = {0, 0};
    uint64_t best_w = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = ticks();
        int64_t ns = clrmux_now_ns();
        uint64_t b = ticks();
        if (b - a < best_w) {
            best_w = b - a;
            best = (struct cal_point){a + (b - a) / 2, ns};
        }
    }
    return best;
}

static struct cal_point *cal_at(size_t i) { return &cal.p[(cal.first + i) % CAL_POINTS]; }

static void cal_add(struct cal_point p)
{
    if (cal.n) {
        struct cal_point *last = cal_at(cal.n - 1);
        if (p.tick <= last->tick || p.ns < last->ns + CAL_MIN_NS)
            return; /* too close, or the wall clock went back: keep the current timeline */
    }
    if (cal.n == CAL_POINTS) {
        cal.first = (cal.first + 1) % CAL_POINTS;
        cal.n--;
    }
    *cal_at(cal.n++) = p;
}

static void cal_init(void)
{
    cal.first = cal.n = 0;
    struct cal_point p0 = cal_sample(), p1;
    cal_add(p0);
    do /* a first slope: ~1 ms */
        p1 = cal_sample();
    while (p1.ns < p0.ns + CAL_MIN_NS && p1.ns >= p0.ns);
    cal_add(p1);
    if (cal.n < 2) /* the clock went back meanwhile: a nominal 1 tick = 1 ns second point */
        cal_add((struct cal_point){p0.tick + CAL_MIN_NS, p0.ns + CAL_MIN_NS});
}

static int64_t seg(const struct cal_point *a, const struct cal_point *b, uint64_t tick)
{
    double slope = (double)(b->ns - a->ns) / (double)(b->tick - a->tick);
    if (tick >= a->tick)
        return a->ns + (int64_t)((double)(tick - a->tick) * slope);
    return a->ns - (int64_t)((double)(a->tick - tick) * slope);
}

static int64_t tick_to_ns(uint64_t tick)
{
    size_t n = cal.n;
    if (n < 2)
        return clrmux_now_ns();
    if (tick >= cal_at(n - 1)->tick)
        return seg(cal_at(n - 2), cal_at(n - 1), tick);
    if (tick < cal_at(0)->tick)
        return seg(cal_at(0), cal_at(1), tick);
    size_t lo = 0, hi = n - 1; /* p[lo].tick <= tick < p[hi].tick */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (cal_at(mid)->tick <= tick)
            lo = mid;
        else
            hi = mid;
    }
    return seg(cal_at(lo), cal_at(hi), tick);
}

/* ---- the ring: a bounded MPMC queue (D. Vyukov's), used with one consumer ------------- */

/* One cache line per span. */
struct cell {
    _Atomic uint32_t seq;
    uint32_t method;
    uint64_t trace_id[2];
    uint64_t span_id, parent_id;
    uint64_t start, end; /* ticks */
    uint32_t tid;
    uint16_t exc, flags;
} __attribute__((aligned(64)));

static struct ring {
    struct cell *cells;
    uint32_t mask;
    _Alignas(64) _Atomic uint32_t enq;
    _Alignas(64) uint32_t deq;
} ring;

static _Atomic uint64_t st_finished, st_dropped, st_too_deep;

int clrmux_spans_init(size_t capacity)
{
    clrmux_spans_fini();
    if (capacity > (1u << 30))
        capacity = 1u << 30;
    size_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    struct cell *c = aligned_alloc(64, cap * sizeof *c);
    if (!c)
        return -1;
    memset(c, 0, cap * sizeof *c);
    for (size_t i = 0; i < cap; i++)
        atomic_init(&c[i].seq, (uint32_t)i);
    ring.mask = (uint32_t)(cap - 1);
    atomic_store(&ring.enq, 0);
    ring.deq = 0;
    atomic_store(&st_finished, 0);
    atomic_store(&st_dropped, 0);
    atomic_store(&st_too_deep, 0);
    cal_init();
    ring.cells = c; /* before any probe runs */
    return 0;
}

void clrmux_spans_fini(void)
{
    free(ring.cells);
    ring.cells = NULL;
}

/* Claims a cell for a finished span, or NULL (full ring: the span is dropped and counted).
 * The caller fills it and publishes it with cell_publish. */
static struct cell *cell_claim(uint32_t *pos_out)
{
    atomic_fetch_add_explicit(&st_finished, 1, memory_order_relaxed);
    struct cell *cells = ring.cells;
    if (!cells) {
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed);
        return NULL;
    }
    uint32_t pos = atomic_load_explicit(&ring.enq, memory_order_relaxed);
    for (;;) {
        struct cell *c = &cells[pos & ring.mask];
        uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int32_t diff = (int32_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring.enq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *pos_out = pos;
                return c;
            }
        } else if (diff < 0) {
            atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed); /* full */
            return NULL;
        } else {
            pos = atomic_load_explicit(&ring.enq, memory_order_relaxed);
        }
    }
}

static inline void cell_publish(struct cell *c, uint32_t pos)
{
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

size_t clrmux_spans_drain(struct clrmux_span *out, size_t max)
{
    struct cell *cells = ring.cells;
    size_t n = 0;
    if (!cells)
        return 0;
    while (n < max) {
        struct cell *c = &cells[ring.deq & ring.mask];
        uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        if (seq != ring.deq + 1)
            break; /* empty, or the producer that claimed this cell has not finished it */
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
        atomic_store_explicit(&c->seq, ring.deq + ring.mask + 1, memory_order_release);
        ring.deq++;
    }
    /* every span drained ended before this point: it is interpolated, never extrapolated */
    cal_add(cal_sample());
    for (size_t i = 0; i < n; i++) {
        out[i].start_ns = tick_to_ns((uint64_t)out[i].start_ns);
        out[i].end_ns = tick_to_ns((uint64_t)out[i].end_ns);
    }
    return n;
}

void clrmux_spans_stats(struct clrmux_span_stats *s)
{
    s->finished = atomic_load(&st_finished);
    s->dropped = atomic_load(&st_dropped);
    s->too_deep = atomic_load(&st_too_deep);
}

/* ---- per-thread state ----------------------------------------------------------------- */

struct open_span {
    uint64_t span_id;
    uint64_t start; /* ticks */
    uint32_t method;
    uint16_t flags;
    uint16_t exc;
};

struct tstate {
    uint8_t trace_id[16];
    uint32_t depth;
    uint32_t cap;             /* entries in `stack` */
    struct open_span *stack;  /* `inline_stack`, or a heap copy grown for a deep recursion */
    uint32_t tid;
    uint64_t rng;
    uint16_t pending_exc;
    struct open_span inline_stack[CLRMUX_SPAN_INLINE_DEPTH];
};

static __thread struct tstate *tls __attribute__((tls_model("initial-exec")));
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tstate_free(void *p)
{
    struct tstate *t = p;
    if (t && t->stack != t->inline_stack)
        free(t->stack);
    free(t);
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

static uint64_t rnd(struct tstate *t)
{
    uint64_t v;
    do
        v = splitmix(&t->rng);
    while (!v);
    return v;
}

static struct tstate *tstate_new(void)
{
    pthread_once(&tls_once, tls_init);
    struct tstate *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->stack = t->inline_stack;
    t->cap = CLRMUX_SPAN_INLINE_DEPTH;
    t->tid = (uint32_t)syscall(SYS_gettid);
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = (uint64_t)clrmux_now_ns() ^ ((uint64_t)t->tid << 32) ^ (uint64_t)(uintptr_t)t;
    t->rng = seed;
    pthread_setspecific(tls_key, t);
    tls = t;
    return t;
}

int64_t clrmux_span_enter(int32_t method)
{
    struct tstate *t = tls;
    if (__builtin_expect(!t, 0) && !(t = tstate_new()))
        return -1;
    if (__builtin_expect(t->depth >= t->cap, 0) && tstate_grow(t) != 0) {
        atomic_fetch_add_explicit(&st_too_deep, 1, memory_order_relaxed);
        return -1;
    }
    if (t->depth == 0) {
        uint64_t a = rnd(t), b = rnd(t);
        memcpy(t->trace_id, &a, 8);
        memcpy(t->trace_id + 8, &b, 8);
    }
    struct open_span *o = &t->stack[t->depth];
    o->span_id = rnd(t);
    o->method = (uint32_t)method;
    o->flags = 0;
    o->exc = 0;
    o->start = ticks();
    return t->depth++;
}

void clrmux_span_exit(int64_t slot)
{
    struct tstate *t = tls;
    if (!t || slot < 0 || slot >= (int64_t)t->depth)
        return;
    uint64_t end = ticks();
    /* spans above `slot` were left without their exit probe (cannot happen with the wrap's
     * finally; closed here so the stack stays consistent) */
    while ((int64_t)t->depth > slot) {
        uint32_t d = --t->depth;
        struct open_span *o = &t->stack[d];
        uint32_t pos;
        struct cell *c = cell_claim(&pos);
        if (!c)
            continue;
        memcpy(c->trace_id, t->trace_id, 16);
        c->span_id = o->span_id;
        c->parent_id = d ? t->stack[d - 1].span_id : 0;
        c->start = o->start;
        c->end = end;
        c->method = o->method;
        c->tid = t->tid;
        c->exc = o->exc;
        c->flags = o->flags;
        cell_publish(c, pos);
    }
    if (t->depth == 0)
        t->pending_exc = 0;
}

void clrmux_span_exception(int64_t slot)
{
    struct tstate *t = tls;
    if (!t || slot < 0 || slot >= (int64_t)t->depth)
        return;
    struct open_span *o = &t->stack[slot];
    o->flags |= CLRMUX_SPAN_ERROR;
    if (!o->exc)
        o->exc = t->pending_exc;
}

unsigned clrmux_span_depth(void)
{
    struct tstate *t = tls;
    return t ? t->depth : 0;
}

void clrmux_span_set_pending_exception(uint32_t exc)
{
    struct tstate *t = tls;
    if (t)
        t->pending_exc = exc > UINT16_MAX ? 0 : (uint16_t)exc;
}
