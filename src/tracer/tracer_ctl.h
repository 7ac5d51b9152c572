/* Run-time control of the built-in tracer, for the control channel (src/control): add and
 * remove trace targets while the process runs, list them, read the tracer's counts.
 *
 * Adding a target matches it against the modules already loaded, exactly as ModuleLoadFinished
 * matches the `trace =` lines at start-up (and against the modules loaded later), and asks
 * for a ReJIT of the new methods on the tracer's ReJIT thread: clrmux's composition puts the
 * tracer's rewrite on top of the other children's as at start-up, and each method is traced
 * from its next call. Removing a target asks for a RequestRevert of its methods through the
 * tracer's own Info proxy: only the tracer's rewrite goes (another child's stays, the loader
 * re-JITs the method for it). A removed target matches no module loaded later; adding it
 * again traces its methods again.
 *
 * Called from the control channel's thread only (never a runtime thread; each call may wait
 * for the ReJIT thread, REJIT_WAIT_SECONDS at most per module). The tracer itself never calls
 * these. Thread-safe against the tracer's callbacks; calls are serialised among themselves. */
#ifndef CLRMUX_TRACER_TRACER_CTL_H
#define CLRMUX_TRACER_TRACER_CTL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define CLRMUX_TRACER_CTL_TEXT_MAX 1024

/* One target, as listed. */
struct clrmux_tracer_target_info {
    char text[CLRMUX_TRACER_CTL_TEXT_MAX]; /* Assembly!Ns.Type::Method[(params)] */
    int line;                              /* its loader.conf line; 0: added at run time */
    int removed;                           /* removed at run time (trace remove) */
    uint32_t methods;                      /* methods it matched (rewritten or to be) */
    uint64_t calls, errors;                /* every call counted so far (spans drained) */
};

/* The tracer's counts (see docs/tracing.md, "Nothing uncounted"). */
struct clrmux_tracer_info {
    char child[64];             /* its [child NAME] */
    char output[PATH_MAX];      /* the span file ("" when spans go only to an endpoint) */
    char endpoint[2048];        /* the OTLP/HTTP endpoint ("" when none) */
    int shut_down;              /* Shutdown came: nothing changes any more */
    int ntargets;               /* targets, removed ones included */
    uint32_t methods;           /* methods registered */
    uint32_t rewritten, skipped; /* GetReJITParameters rewrites made and refused */
    uint64_t written, lines;    /* spans written to the file, in that many lines */
    uint64_t queued, requests;  /* spans queued for the endpoint, in that many requests */
    uint64_t dropped;           /* spans dropped: buffer full */
    uint64_t deleted;           /* spans in files deleted by rotation */
    uint64_t unsampled, too_deep;
};

/* 1 when a tracer child exists in this process and its Initialize succeeded. */
int clrmux_tracer_ctl_present(void);

/* The tracer's counts into *info and up to `max` targets into targets[] (may be NULL when max
 * is 0). Returns the number of targets (all of them, even beyond max), or -1 when no tracer
 * runs. */
int clrmux_tracer_ctl_info(struct clrmux_tracer_info *info, struct clrmux_tracer_target_info *targets, int max);

/* Adds target `text` (the `trace =` syntax). Returns 0 (what was done in msg: the methods
 * rewritten, or that the assembly is not loaded yet, or that it was already traced), or -1
 * with the reason in msg (no tracer, a bad target, no method of that name in the loaded
 * assembly, too many targets). msg is always NUL-terminated. */
int clrmux_tracer_ctl_add(const char *text, char *msg, size_t msglen);

/* Removes the target written as `text` (compared field by field with the parsed targets,
 * the assembly name without case). Returns 0 (msg: the methods reverted), or -1 with the
 * reason in msg. */
int clrmux_tracer_ctl_remove(const char *text, char *msg, size_t msglen);

#endif
