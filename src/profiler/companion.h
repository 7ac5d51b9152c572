/* The built-in profiler's companion library, build/libclrmux_profiler.so.
 *
 * libclrmux.so must stay self-contained (ldd shows only libc's parts), while the profiler
 * needs protobuf-c and zlib. So the profiler is built as a companion shared library beside
 * libclrmux.so, with both linked into it statically, their symbols hidden (the Makefile says
 * how), and `builtin = profiler` (src/loader/builtin.c) dlopens it from the folder
 * of libclrmux.so and calls its export CLRMUX_PROFILER_CREATE_SYMBOL (and looks up
 * CLRMUX_PROFILER_CTL_SYMBOL, its control operations: below).
 *
 * The companion logs through the host's logger (one log file, one level): it does not
 * link src/common/log.c but src/common/log_forward.c, which forwards clrmux_log() to the
 * functions given in `host`; and it
 * registers its last-gasp flush with the host's (src/common/lastgasp.c, one set of signal
 * handlers and one thread for the process). */
#ifndef CLRMUX_PROFILER_COMPANION_H
#define CLRMUX_PROFILER_COMPANION_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "clrmux/corprof.h"
#include "common/lastgasp.h"
#include "loader/config.h"

#define CLRMUX_PROFILER_LIBRARY "libclrmux_profiler.so"
#define CLRMUX_PROFILER_CREATE_SYMBOL "clrmux_profiler_create"
/* Bumped whenever struct clrmux_profiler_host or struct clrmux_child_conf changes. */
#define CLRMUX_PROFILER_HOST_ABI 4

struct clrmux_profiler_host {
    int abi;                                                /* CLRMUX_PROFILER_HOST_ABI */
    void (*vlog)(int level, const char *fmt, va_list ap);   /* clrmux_vlog of the host */
    int (*log_level)(void);                                 /* clrmux_log_get_level of the host */
    /* the host's last gasp (common/lastgasp.h): one mechanism for the whole process */
    int (*lastgasp_register)(clrmux_lastgasp_fn fn, void *ctx);
    void (*lastgasp_unregister)(clrmux_lastgasp_fn fn, void *ctx);
    /* the built-in tracer's span contexts (src/tracer/spans.h; common/spanctx.h reads them),
     * for the samples' `span id` labels: the calling thread's (async-signal-safe) and OS
     * thread tid's (lock-free). Given by the host rather than looked up with dlsym: the
     * runtime opens libclrmux.so RTLD_LOCAL, so RTLD_DEFAULT would not find them. */
    struct clrmux_span_context *(*span_context_peek)(void);
    struct clrmux_span_context *(*span_context_find)(uint32_t tid);
    /* the last gasp's registration in two steps (common/lastgasp.h): the table entry in
     * Initialize, the thread and handlers from the sampler thread */
    int (*lastgasp_register_deferred)(clrmux_lastgasp_fn fn, void *ctx);
    int (*lastgasp_start)(void);
};

/* ---- run-time control (the control channel, src/control) ------------------------------
 * The companion also exports CLRMUX_PROFILER_CTL_SYMBOL, a function that returns its control
 * operations; builtin.c keeps them beside the profiler it created. Each takes that profiler's
 * callback object (what clrmux_profiler_create returned) and is called from the control
 * channel's thread only: never from a runtime thread, and never in a callback. */
#define CLRMUX_PROFILER_CTL_SYMBOL "clrmux_profiler_ctl"
#define CLRMUX_PROFILER_CTL_ABI 1

struct clrmux_profiler_status {
    int sampling;           /* 1: the sampler takes cpu/wall samples; 0: stopped (profile stop) */
    int final;              /* Shutdown or the last gasp came: nothing more is written */
    char sampler[16];       /* "signal", "suspend", or "none" (no cpu/wall sampling) */
    uint64_t files;         /* profiles written */
    uint64_t file_failures;
    char last_file[PATH_MAX]; /* the last one ("" before the first) */
    char output_dir[PATH_MAX];
    double period_age_s;    /* seconds since the current period started */
    int period_s;
    uint64_t exceptions, allocations, contentions; /* events seen */
};

struct clrmux_profiler_ctl {
    int abi; /* CLRMUX_PROFILER_CTL_ABI */
    /* The state into *out. Returns 0, or -1 when busy (a flush took more than 0.5 s). */
    int (*status)(ICorProfilerCallback11 *cb, struct clrmux_profiler_status *out);
    /* Writes the current period now (as at a period's end: the file, the push) and starts the
     * next. Returns 0 with the file written in msg, or -1 with the reason in msg. */
    int (*flush)(ICorProfilerCallback11 *cb, char *msg, size_t msglen);
    /* Stops (on = 0) or starts again (on = 1) the cpu/wall sampler; the events (exceptions,
     * allocations, lock contention) are still recorded. Returns 0 once the sampler thread has
     * done it (msg says what changed), or -1 with the reason in msg. */
    int (*sampling)(ICorProfilerCallback11 *cb, int on, char *msg, size_t msglen);
};
typedef const struct clrmux_profiler_ctl *(*clrmux_profiler_ctl_fn)(void);

/* Creates the profiler child for section `cc` (keys in cc->kvs; relative output_dir resolved
 * against config_dir, the folder of loader.conf). Returns its callback object (one
 * reference) and sets *version to 11, or logs why and returns NULL. */
typedef ICorProfilerCallback11 *(*clrmux_profiler_create_fn)(const struct clrmux_child_conf *cc,
                                                           const char *config_dir,
                                                           const struct clrmux_profiler_host *host,
                                                           int *version);

#endif
