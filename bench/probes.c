/* bench/probes.c: a span's native cost beside the floor under it, and each feature's share
 * of it, side by side in one process (bench/spans.sh builds and runs it; issue 27 goal 1).
 *
 * bench/spans.sh builds the span probes (src/tracer/spans*.c, usdt.c, with libclrmux.so's
 * flags) as shared objects that differ in one feature each, and passes them as NAME=PATH:
 *   full      as in libclrmux.so: the profiler's view of the span (the seqlock labels) and
 *             the USDT sites (a semaphore load and a branch per probe)
 *   nolabels  without the labels' seqlock update (-DCLRMUX_BENCH_NO_LABELS)
 *   nousdt    without the USDT sites (-DCLRMUX_NO_USDT)
 *   bare      without either
 * Each is dlopen'd with its own span buffer. A round times BLOCK spans of each build in turn
 * (clrmux_span_enter_fast + clrmux_span_exit, as the rewritten IL calls them), the order
 * rotating, on the thread's CPU clock, and BLOCK "floor" spans: two calls that are not
 * inlined, each reading the TSC once, the second storing a 64-byte record (bench/clocks.c's
 * floor); then the first build again with head sampling at 0 (`unsampled`: the call is only
 * counted in the per-method metrics on its thread). The buffers are drained between blocks,
 * outside the timing: the metrics of recorded spans are counted there (by the exporter), not
 * by the probes. Prints each build's median ns per span, the floor, each build minus the
 * floor, and each feature's share: the median over rounds of full - (full without it),
 * paired within the round.
 *
 * Usage: probes ROUNDS BLOCK NAME=PATH...   (the first build is the reference: `full`) */
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

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t tsc(void) { return __rdtsc(); }
#else
static inline uint64_t tsc(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

#define MAXB 8
struct build {
    const char *name;
    struct probe_fns f;
    void (*ratio)(double);
    double *ns;
};

static struct clrmux_span drained[65536];

static double block(struct build *b, int n)
{
    return probe_block(&b->f, n, drained, sizeof drained / sizeof drained[0]);
}

/* the floor (bench/clocks.c): two calls, each one TSC read, the second stores a record */
struct rec {
    uint64_t start, end, a, b, c, d, e, f;
};
#define RING 4096
static struct rec ring[RING];
static uint64_t open_start;
__attribute__((noinline)) static void floor_enter(void) { open_start = tsc(); }
__attribute__((noinline)) static void floor_exit(uint32_t i)
{
    uint64_t end = tsc();
    struct rec *r = &ring[i & (RING - 1)];
    r->start = open_start;
    r->end = end;
    r->a = i;
}

static double floor_block(int n)
{
    double t0 = probe_cpu_ns();
    for (int i = 0; i < n; i++) {
        floor_enter();
        floor_exit((uint32_t)i);
    }
    return (probe_cpu_ns() - t0) / n;
}

/* what each build of bench/spans.sh is */
static const char *label_of(const char *name)
{
    static const char *const t[][2] = {
        {"full", "full: as in libclrmux.so (labels, USDT sites)"},
        {"nolabels", "without the labels' seqlock update"},
        {"nousdt", "without the USDT sites"},
        {"bare", "bare: without either"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(name, t[i][0]) == 0)
            return t[i][1];
    return name;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double *c = malloc((size_t)n * sizeof *c);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp);
    double m = c[n / 2];
    free(c);
    return m;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: probes ROUNDS BLOCK NAME=PATH...\n");
        return 2;
    }
    int rounds = atoi(argv[1]), n = atoi(argv[2]), nb = 0;
    if (rounds < 1 || n < 1)
        return 2;
    struct build b[MAXB];
    for (int i = 3; i < argc && nb < MAXB; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        const char *path = eq + 1;
        struct build *x = &b[nb++];
        x->name = argv[i];
        void *lib = probe_load("probes", path, &x->f);
        x->ratio = (void (*)(double))probe_sym("probes", lib, "clrmux_spans_set_sample_ratio", path);
        x->ns = calloc((size_t)rounds, sizeof *x->ns);
    }
    /* the reference build again, not sampled: its own copy would share its state, so the
     * same library with the ratio switched around its block */
    double *fl = calloc((size_t)rounds, sizeof *fl), *uns = calloc((size_t)rounds, sizeof *uns);
    for (int w = 0; w < 3; w++) {
        floor_block(n);
        for (int k = 0; k < nb; k++)
            block(&b[k], n);
    }
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < nb + 2; j++) {
            int k = (j + r) % (nb + 2);
            if (k == nb) {
                fl[r] = floor_block(n);
            } else if (k == nb + 1) {
                b[0].ratio(0);
                uns[r] = block(&b[0], n);
                b[0].ratio(1);
            } else {
                b[k].ns[r] = block(&b[k], n);
            }
        }
    }
    double f = median(fl, rounds);
    printf("  %-62s %8.2f ns\n", "floor: two TSC reads in two calls, a 64-byte record", f);
    for (int k = 0; k < nb; k++) {
        double *d = calloc((size_t)rounds, sizeof *d);
        for (int r = 0; r < rounds; r++)
            d[r] = b[k].ns[r] - fl[r];
        printf("  %-62s %8.2f ns = floor + %.2f\n", label_of(b[k].name), median(b[k].ns, rounds), median(d, rounds));
        free(d);
    }
    {
        double *d = calloc((size_t)rounds, sizeof *d);
        for (int r = 0; r < rounds; r++)
            d[r] = uns[r] - fl[r];
        printf("  %-62s %8.2f ns = floor + %.2f\n", "full, not sampled (counted in the metrics on its thread)",
               median(uns, rounds), median(d, rounds));
        free(d);
    }
    /* shares: full - the build without the feature, paired per round */
    for (int k = 1; k < nb; k++) {
        double *d = calloc((size_t)rounds, sizeof *d);
        for (int r = 0; r < rounds; r++)
            d[r] = b[0].ns[r] - b[k].ns[r];
        char what[128];
        snprintf(what, sizeof what, "share: %s - %s (paired per round)", b[0].name, b[k].name);
        printf("  %-62s %8.2f ns\n", what, median(d, rounds));
        free(d);
    }
    printf("probes_summary floor=%.2f", f);
    for (int k = 0; k < nb; k++)
        printf(" %s=%.2f", b[k].name, median(b[k].ns, rounds));
    printf(" unsampled=%.2f", median(uns, rounds));
    for (int k = 1; k < nb; k++) {
        double *d = calloc((size_t)rounds, sizeof *d);
        for (int r = 0; r < rounds; r++)
            d[r] = b[0].ns[r] - b[k].ns[r];
        printf(" share_%s=%.2f", b[k].name, median(d, rounds));
        free(d);
    }
    printf("\n");
    return 0;
}
