/* bench/spanread.c: what labelling a sample with its span costs the sampler, in ns per
 * sample, measured on libclrmux.so's own exports (dlopen'd as the runtime would):
 *   peek + read, no span open    the signal handler's cost on a thread outside spans
 *   peek + read, a span open     ... on a thread inside a span (the record set as the
 *                                tracer's probes set it: seq even, ids, trace id)
 *   find(tid) + read             the suspend sampler's and other threads' events' cost
 * Usage: spanread LIBCLRMUX [N]   (N reads per timing, default 20000000; best of 5).
 * Built and run by bench/profiler.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/spanctx.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: spanread LIBCLRMUX [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 20000000;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "spanread: %s\n", dlerror());
        return 1;
    }
    struct clrmux_span_context *(*get)(void) = (struct clrmux_span_context * (*)(void)) dlsym(lib, "clrmux_span_context_get");
    struct clrmux_span_context *(*peek)(void) = (struct clrmux_span_context * (*)(void)) dlsym(lib, "clrmux_span_context_peek");
    struct clrmux_span_context *(*find)(uint32_t) = (struct clrmux_span_context * (*)(uint32_t)) dlsym(lib, "clrmux_span_context_find");
    if (!get || !peek || !find) {
        fprintf(stderr, "spanread: %s lacks the clrmux_span_context_* exports\n", argv[1]);
        return 1;
    }
    struct clrmux_span_context *c = get();
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    struct clrmux_span_ids ids = {0};
    volatile long sink = 0;
    const char *what[3] = {"peek + read, no span open", "peek + read, a span open", "find(tid) + read, a span open"};
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 1) { /* as the probes write it */
            c->seq++;
            c->depth = 1;
            c->span_id = 0x0123456789abcdefull;
            c->local_root_id = 0x0123456789abcdefull;
            for (int i = 0; i < 16; i++)
                c->trace_id[i] = (uint8_t)i;
            c->seq++;
        }
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            for (long i = 0; i < n; i++) {
                int got = mode < 2 ? clrmux_span_context_read(peek(), 0, &ids, 1)
                                   : clrmux_span_context_read(find(tid), tid, &ids, 4);
                sink += got + (long)(ids.span_id & 1);
            }
            double ns = (now() - t0) / (double)n;
            if (ns < best)
                best = ns;
        }
        printf("  %-34s %6.2f ns per sample\n", what[mode], best);
    }
    return sink == -1;
}
