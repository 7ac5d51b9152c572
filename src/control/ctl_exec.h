/* What each control command does in the process (the protocol: ctl_proto.h):
 *
 *   status        the children (library, state, own event mask, callbacks delivered), the
 *                 built-in tracer (targets with their methods, calls and errors; spans written,
 *                 dropped, not sampled...), the built-in profiler (sampler state, files, the
 *                 last one), the log file and level; text, or JSON with --json
 *   trace add|remove|list   tracer/tracer_ctl.h
 *   profile flush|start|stop  profiler/companion.h's struct clrmux_profiler_ctl
 *   log-level L   clrmux's log threshold from now on (the environment's and loader.conf's
 *                 choice until the process ends, or the next log-level)
 *
 * Called on the control channel's thread only. Reads the live mux (clrmux_the_mux) and calls
 * down into the tracer and the profiler's companion; nothing calls back into this. */
#ifndef CLRMUX_CONTROL_CTL_EXEC_H
#define CLRMUX_CONTROL_CTL_EXEC_H

#include <stddef.h>

#include "control/ctl_proto.h"

/* Runs req. Returns 0 with the reply's body (text or JSON, may be empty) in *body, or -1
 * with the reason in err[errlen] (body then unused). */
int clrmux_ctl_exec(const struct clrmux_ctl_req *req, struct clrmux_out *body, char *err, size_t errlen);

/* The whole reply to the request bytes buf[0..len) (the line without its LF): "ok\n" and the
 * body, or "error: reason\n". *ok: 1 for an ok reply. For the server and the tests. */
void clrmux_ctl_serve(const char *buf, size_t len, struct clrmux_out *reply, int *ok);

#ifdef CLRMUX_TESTING
/* Tests without windows.h's clash with clrmux/com.h: clrmux_the_mux becomes a mux of no
 * children (Initialize done, this runtime text and configuration path), or NULL again when
 * runtime is NULL. */
void clrmux_ctl_test_mux(const char *runtime, const char *config);
#endif

#endif
