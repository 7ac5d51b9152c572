/* The span probes' clock (see spans_int.h): a cheap tick counter on the probes' path,
 * mapped to Unix nanoseconds at drain through calibration points. */
#include "tracer/spans_int.h"

#include <stddef.h>

/* ---- time: a cheap tick counter on the probes' path, Unix nanoseconds at drain ------------
 *
 * The probes read the CPU's invariant time-stamp counter (x86-64; elsewhere CLOCK_MONOTONIC),
 * about half the cost of clock_gettime. The consumer maps ticks to Unix time through
 * calibration points (tick, CLOCK_REALTIME) taken at init and after each drain; a tick is
 * interpolated between the two points around it (or extrapolated with the nearest
 * segment's slope), so the mapping is deterministic and monotonic and a child span stays
 * within its parent whichever batches they were drained in.
 *
 * Init takes the first point and a provisional tick rate over a few microseconds (the
 * histogram bounds of the calls counted on their own thread until the export thread's
 * first drain); the first drain at least CAL_MIN_NS later (on the export thread, off the
 * runtime's start-up path) adds the second point and fixes the tick rate for good. */


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
    double slope; /* ns per tick to the next point (set when that point is added) */
};

static struct cal {
    struct cal_point p[CAL_POINTS]; /* ring, oldest at first */
    size_t first, n;
    double last_slope; /* ns per tick between the last two points */
    size_t hint;       /* the segment [hint, hint + 1) the last lookup fell in: a drain's spans
                          mostly fall in the same one, so few lookups search */
} cal;

/* The tightest of a few (tick, clock, tick) readings: a reading the scheduler interrupted
 * would misplace the point. */
static struct cal_point cal_sample(void)
{
    struct cal_point best = {0, 0, 0};
    uint64_t best_w = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = ticks();
        int64_t ns = clrmux_now_ns();
        uint64_t b = ticks();
        if (b - a < best_w) {
            best_w = b - a;
            best = (struct cal_point){a + (b - a) / 2, ns, 0};
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
        cal.hint = 0; /* its indexes moved */
    }
    *cal_at(cal.n++) = p;
    if (cal.n >= 2) {
        struct cal_point *a = cal_at(cal.n - 2);
        const struct cal_point *b = cal_at(cal.n - 1);
        cal.last_slope = a->slope = (double)(b->ns - a->ns) / (double)(b->tick - a->tick);
    }
}

#define CAL_PROVISIONAL_NS 20000 /* the provisional tick rate's window at init: 20 us */

/* ns per tick between two points, or 0 when they do not give a usable rate */
static double cal_rate(struct cal_point a, struct cal_point b)
{
    if (b.tick <= a.tick || b.ns <= a.ns)
        return 0;
    double r = (double)(b.ns - a.ns) / (double)(b.tick - a.tick);
    return r > 0 && r <= 1e3 ? r : 0;
}

/* The first point, and a provisional rate over ~20 us (no 1 ms spin at start-up). */
double spans_cal_init(void)
{
    cal.first = cal.n = cal.hint = 0;
    struct cal_point p0 = cal_sample(), p1;
    cal_add(p0);
    int spins = 0;
    do
        p1 = cal_sample();
    while (p1.ns < p0.ns + CAL_PROVISIONAL_NS && p1.ns >= p0.ns && ++spins < 100000);
    return cal_rate(p0, p1);
}

/* The second point (export thread, first drain): waits out what is left of CAL_MIN_NS
 * after the first point (nothing once the process has run a millisecond). */
static void cal_second_point(void)
{
    struct cal_point p0 = *cal_at(0), p1;
    int spins = 0;
    do
        p1 = cal_sample();
    while (p1.ns < p0.ns + CAL_MIN_NS && p1.ns >= p0.ns && ++spins < 1000000);
    cal_add(p1);
    if (cal.n < 2) /* the clock went back meanwhile: a nominal 1 tick = 1 ns second point */
        cal_add((struct cal_point){p0.tick + CAL_MIN_NS, p0.ns + CAL_MIN_NS, 0});
}

/* tick mapped through the segment from point a to the next one (a->slope: the same
 * division, done once when that point was added) */
static inline int64_t seg(const struct cal_point *a, uint64_t tick)
{
    if (tick >= a->tick)
        return a->ns + (int64_t)((double)(tick - a->tick) * a->slope);
    return a->ns - (int64_t)((double)(a->tick - tick) * a->slope);
}

int64_t spans_tick_to_ns(uint64_t tick)
{
    size_t n = cal.n;
    if (n < 2)
        return clrmux_now_ns();
    const struct cal_point *a = cal_at(n - 2);
    if (tick >= a->tick) /* the last segment */
        return a->ns + (int64_t)((double)(tick - a->tick) * cal.last_slope);
    size_t h = cal.hint;
    if (h + 2 < n && cal_at(h)->tick <= tick && tick < cal_at(h + 1)->tick) /* the last lookup's */
        return seg(cal_at(h), tick);
    if (tick < cal_at(0)->tick)
        return seg(cal_at(0), tick);
    size_t lo = 0, hi = n - 1; /* p[lo].tick <= tick < p[hi].tick */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (cal_at(mid)->tick <= tick)
            lo = mid;
        else
            hi = mid;
    }
    cal.hint = lo;
    return seg(cal_at(lo), tick);
}

double spans_cal_fix(void)
{
    cal_second_point();
    return cal_rate(*cal_at(0), *cal_at(cal.n - 1));
}

void spans_cal_sample(void) { cal_add(cal_sample()); }
