/* bench/usdt.c: what the USDT probes (src/tracer/usdt.h) cost a span while no tool is
 * attached, side by side with today's span, in one process.
 *
 * Three builds of the span probes (src/tracer/spans*.c, usdt.c), made by bench/usdt.sh as
 * shared objects and dlopen'd here, each with its own span buffer:
 *   plain  built with -DCLRMUX_NO_USDT: the probes as they were before the USDT sites
 *   off    the build in libclrmux.so: each probe loads its semaphore and branches over the call
 *   set    the same build with both semaphores set by hand, as perf or bpftrace set them when
 *          they attach (the probes' own work: the name, the hex trace id, the call; without the
 *          uprobe's trap, which a real tool adds: microseconds per probe)
 * A round times BLOCK spans (clrmux_span_enter_fast + clrmux_span_exit, as the rewritten IL
 * calls them) of each build in turn, the order rotating from round to round, on the thread's
 * CPU clock; the buffers are drained between blocks, outside the timing. Prints the median ns
 * per span of each build, and the median and quartiles of the per-round difference off - plain
 * (paired: both measured within the same round).
 *
 * Usage: usdt PLAIN.so OFF.so [ROUNDS [BLOCK]]   (default 41 rounds of 200000 spans) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracer/spans.h"

struct build {
    const char *name;
    void *lib;
    int (*init)(size_t);
    int64_t (*enter_fast)(int32_t);
    int64_t (*enter)(int32_t);
    void (*exit_)(int64_t);
    size_t (*drain)(struct clrmux_span *, size_t);
    volatile unsigned short *sem_start, *sem_end;
    double *ns; /* per round */
};

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *sym(void *lib, const char *name, const char *path)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "usdt: %s has no %s\n", path, name);
        exit(1);
    }
    return p;
}

static void load(struct build *b, const char *path, int rounds)
{
    b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->lib) {
        fprintf(stderr, "usdt: %s\n", dlerror());
        exit(1);
    }
    b->init = (int (*)(size_t))sym(b->lib, "clrmux_spans_init", path);
    b->enter_fast = (int64_t(*)(int32_t))sym(b->lib, "clrmux_span_enter_fast", path);
    b->enter = (int64_t(*)(int32_t))sym(b->lib, "clrmux_span_enter", path);
    b->exit_ = (void (*)(int64_t))sym(b->lib, "clrmux_span_exit", path);
    b->drain = (size_t(*)(struct clrmux_span *, size_t))sym(b->lib, "clrmux_spans_drain", path);
    b->sem_start = dlsym(b->lib, "clrmux_span_start_semaphore");
    b->sem_end = dlsym(b->lib, "clrmux_span_end_semaphore");
    b->ns = calloc((size_t)rounds, sizeof *b->ns);
    if (b->init(1u << 20) != 0) {
        fprintf(stderr, "usdt: %s: clrmux_spans_init failed\n", path);
        exit(1);
    }
}

static struct clrmux_span drained[65536];

static void drain_all(struct build *b)
{
    while (b->drain(drained, sizeof drained / sizeof drained[0]) > 0) {
    }
}

static double block(struct build *b, int n)
{
    double t0 = cpu_ns();
    for (int i = 0; i < n; i++) {
        int64_t s = b->enter_fast(7);
        if (s == CLRMUX_SPAN_SLOW)
            s = b->enter(7);
        b->exit_(s);
    }
    double t = cpu_ns() - t0;
    drain_all(b);
    return t / n;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: usdt PLAIN.so OFF.so [ROUNDS [BLOCK]]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 41, n = argc > 4 ? atoi(argv[4]) : 200000;
    struct build b[3] = {{.name = "plain"}, {.name = "off"}, {.name = "set"}};
    load(&b[0], argv[1], rounds);
    load(&b[1], argv[2], rounds);
    /* a second copy of the USDT build for "set": its own semaphores, set for good */
    char copy[4096];
    snprintf(copy, sizeof copy, "%s.set.so", argv[2]);
    load(&b[2], copy, rounds);
    if (!b[1].sem_start || !b[1].sem_end || !b[2].sem_start || !b[2].sem_end) {
        fprintf(stderr, "usdt: %s has no USDT semaphores (built without <sys/sdt.h>?)\n", argv[2]);
        return 1;
    }
    *b[2].sem_start = 1;
    *b[2].sem_end = 1;
    for (int w = 0; w < 3; w++) /* warm-up: each thread's state, the buffers' first pages */
        for (int k = 0; k < 3; k++)
            block(&b[k], n);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++) {
            int v = (k + r) % 3;
            b[v].ns[r] = block(&b[v], n);
        }
    double *diff = calloc((size_t)rounds, sizeof *diff), *dset = calloc((size_t)rounds, sizeof *dset);
    for (int r = 0; r < rounds; r++) {
        diff[r] = b[1].ns[r] - b[0].ns[r];
        dset[r] = b[2].ns[r] - b[0].ns[r];
    }
    double med[3];
    for (int k = 0; k < 3; k++)
        med[k] = pct(b[k].ns, rounds, 0.5);
    double d50 = pct(diff, rounds, 0.5), d25 = pct(diff, rounds, 0.25), d75 = pct(diff, rounds, 0.75);
    double s50 = pct(dset, rounds, 0.5);
    printf("  %-58s %8.2f ns/span\n", "plain: the span probes without USDT sites (before)", med[0]);
    printf("  %-58s %8.2f ns/span  (x%.3f)\n", "off: with the USDT sites, no tool attached (semaphores 0)", med[1],
           med[1] / med[0]);
    printf("  %-58s %8.2f ns/span  (x%.3f)\n", "set: semaphores set by hand (the probes' work, no uprobe trap)", med[2],
           med[2] / med[0]);
    printf("  off - plain per round (paired, %d rounds of %d spans): median %+.2f ns, quartiles %+.2f .. %+.2f ns\n",
           rounds, n, d50, d25, d75);
    printf("  set - plain per round: median %+.2f ns\n", s50);
    printf("usdt_summary plain=%.2f off=%.2f set=%.2f diff=%.2f q1=%.2f q3=%.2f\n", med[0], med[1], med[2], d50, d25,
           d75);
    return 0;
}
