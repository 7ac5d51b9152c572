/* bench/clocks.c: what reading the time costs on this machine, in ns per read (thread CPU
 * time, best of 5 timings of N reads), beside the floor it puts under a span timed like the
 * tracer's probes (issue 12):
 *   rdtsc                  the time-stamp counter (what the probes read, x86-64)
 *   rdtscp                 the same, waiting for the instructions before it
 *   lfence+rdtsc           the same, ordered after the loads before it
 *   clock_gettime MONOTONIC        through the vDSO (what Stopwatch and OpenTelemetry read)
 *   clock_gettime MONOTONIC_COARSE the tick-resolution clock (milliseconds: no use for a span)
 *   span floor             two calls (not inlined, like the probes) that each read the TSC
 *                          once, the second storing a 64-byte record with both readings in a
 *                          ring: the least a span timed with the TSC can cost; the probes' own
 *                          work (ids, stack, ring) runs in the shadow of these two reads.
 * A counter read that the hypervisor traps would cost a VM exit, ~1 us or more: a few ns means
 * it is not trapped. Usage: clocks [N] (default 2000000). Prints `name=ns` words on one line
 * for bench/spans.sh after a readable table. Built and run by bench/spans.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile uint64_t sink;

struct rec {
    uint64_t start, end, a, b, c, d, e, f;
};
#define RING 4096 /* 256 KB: the records stay in the cache, like a drained ring */
static struct rec ring[RING];
static uint64_t open_start;

#ifdef HAVE_TSC
__attribute__((noinline)) static void floor_enter(void) { open_start = __rdtsc(); }
__attribute__((noinline)) static void floor_exit(uint32_t i)
{
    uint64_t end = __rdtsc();
    struct rec *r = &ring[i & (RING - 1)];
    r->start = open_start;
    r->end = end;
    r->a = i;
}
#endif

enum { K_RDTSC, K_RDTSCP, K_LFENCE, K_MONO, K_COARSE, K_FLOOR, K_N };
static const char *const names[K_N] = {"rdtsc", "rdtscp", "lfence_rdtsc", "clock_monotonic", "clock_coarse",
                                       "span_floor"};
static const char *const labels[K_N] = {"rdtsc", "rdtscp", "lfence + rdtsc", "clock_gettime(CLOCK_MONOTONIC)",
                                        "clock_gettime(CLOCK_MONOTONIC_COARSE)",
                                        "span floor (two TSC reads, a record)"};

static double run(int k, long n)
{
    double t0 = cpu_ns();
    struct timespec ts;
    switch (k) {
#ifdef HAVE_TSC
    case K_RDTSC:
        for (long i = 0; i < n; i++)
            sink += __rdtsc();
        break;
    case K_RDTSCP: {
        unsigned aux;
        for (long i = 0; i < n; i++)
            sink += __rdtscp(&aux);
        break;
    }
    case K_LFENCE:
        for (long i = 0; i < n; i++) {
            _mm_lfence();
            sink += __rdtsc();
        }
        break;
    case K_FLOOR:
        for (long i = 0; i < n; i++) {
            floor_enter();
            floor_exit((uint32_t)i);
        }
        break;
#endif
    case K_MONO:
        for (long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sink += (uint64_t)ts.tv_nsec;
        }
        break;
    case K_COARSE:
        for (long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
            sink += (uint64_t)ts.tv_nsec;
        }
        break;
    default:
        return -1;
    }
    return (cpu_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n <= 0)
        n = 2000000;
    double best[K_N];
    for (int k = 0; k < K_N; k++)
        best[k] = 1e9;
    for (int round = 0; round < 5; round++) /* interleaved: a noisy moment hits every clock */
        for (int k = 0; k < K_N; k++) {
            double v = run(k, n);
            if (v >= 0 && v < best[k])
                best[k] = v;
        }
    char words[512] = "";
    size_t len = 0;
    for (int k = 0; k < K_N; k++) {
        if (best[k] >= 1e9)
            continue; /* not on this CPU */
        printf("  %-44s %8.2f ns\n", labels[k], best[k]);
        len += (size_t)snprintf(words + len, sizeof words - len, "%s%s=%.2f", len ? " " : "", names[k], best[k]);
    }
    printf("%s\n", words);
    return 0;
}
