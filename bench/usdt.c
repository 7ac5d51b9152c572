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

#include "probe_load.h"

struct build {
    const char *name;
    struct probe_fns f;
    volatile unsigned short *sem_start, *sem_end;
    double *ns; /* per round */
};

static void load(struct build *b, const char *path, int rounds)
{
    void *lib = probe_load("usdt", path, &b->f);
    /* the semaphores are hidden (as in libclrmux.so): usdt.sh's builds give their addresses */
    volatile unsigned short *(*sem)(int) = (volatile unsigned short *(*)(int))dlsym(lib, "clrmux_bench_semaphore");
    b->sem_start = sem ? sem(0) : NULL;
    b->sem_end = sem ? sem(1) : NULL;
    b->ns = calloc((size_t)rounds, sizeof *b->ns);
}

static struct clrmux_span drained[65536];

static double block(struct build *b, int n)
{
    return probe_block(&b->f, n, drained, sizeof drained / sizeof drained[0]);
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
