/* bench/probe_load.h: what bench/probes.c and bench/usdt.c share: a build of the span probes
 * (src/tracer/spans*.c as a shared object, built by bench/spans.sh or bench/usdt.sh) opened with
 * dlopen and its span buffer made, its spans timed in blocks on the thread's CPU clock. */
#ifndef CLRMUX_BENCH_PROBE_LOAD_H
#define CLRMUX_BENCH_PROBE_LOAD_H
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tracer/spans.h"

/* One build's entry points (tracer/spans.h), as the rewritten IL calls them. */
struct probe_fns {
    int (*init)(size_t);
    int64_t (*enter_fast)(int32_t);
    int64_t (*enter)(int32_t);
    void (*exit_)(int64_t);
    size_t (*drain)(struct clrmux_span *, size_t);
};

/* This thread's CPU time, ns. */
static inline double probe_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* NAME in LIB (opened from PATH), or exit 1 after saying which of WHO's builds lacks it. */
static inline void *probe_sym(const char *who, void *lib, const char *name, const char *path)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "%s: %s has no %s\n", who, path, name);
        exit(1);
    }
    return p;
}

/* Opens the build at PATH (its own copy of the probes' state: RTLD_LOCAL), fills F and makes
 * its span buffer (1 M spans); the library handle (never closed), or exit 1 with WHO's message. */
static inline void *probe_load(const char *who, const char *path, struct probe_fns *f)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s: %s\n", who, dlerror());
        exit(1);
    }
    f->init = (int (*)(size_t))probe_sym(who, lib, "clrmux_spans_init", path);
    f->enter_fast = (int64_t(*)(int32_t))probe_sym(who, lib, "clrmux_span_enter_fast", path);
    f->enter = (int64_t(*)(int32_t))probe_sym(who, lib, "clrmux_span_enter", path);
    f->exit_ = (void (*)(int64_t))probe_sym(who, lib, "clrmux_span_exit", path);
    f->drain = (size_t(*)(struct clrmux_span *, size_t))probe_sym(who, lib, "clrmux_spans_drain", path);
    /* as with the built-in profiler loaded: the probes keep each thread's view for its labels
     * (without a reader they skip it, as a build without labels does) */
    void (*want_labels)(void) = (void (*)(void))dlsym(lib, "clrmux_spans_want_labels");
    if (want_labels)
        want_labels();
    if (f->init(1u << 20) != 0) {
        fprintf(stderr, "%s: %s: clrmux_spans_init failed\n", who, path);
        exit(1);
    }
    return lib;
}

/* N spans of F (method 7), ns per span on the thread's CPU clock; the buffer drained after,
 * outside the timing, into SCRATCH (SCRATCH_N spans at a time). */
static inline double probe_block(const struct probe_fns *f, int n, struct clrmux_span *scratch, size_t scratch_n)
{
    double t0 = probe_cpu_ns();
    for (int i = 0; i < n; i++) {
        int64_t s = f->enter_fast(7);
        if (s == CLRMUX_SPAN_SLOW)
            s = f->enter(7);
        f->exit_(s);
    }
    double t = probe_cpu_ns() - t0;
    while (f->drain(scratch, scratch_n) > 0) {
    }
    return t / n;
}
#endif
