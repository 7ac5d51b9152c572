/* Children built into libclrmux.so (`builtin = NAME` in loader.conf). They are ordinary
 * children: created here, then called and given an ICorProfilerInfo proxy like any other. */
#ifndef CLRMUX_BUILTIN_H
#define CLRMUX_BUILTIN_H

#include "clrmux/corprof.h"
#include "loader/config.h"

/* Creates builtin child `cc->builtin` with its section's keys, under `cfg` (the whole
 * loader.conf it came from: its path and folder, allow_insecure_paths). Returns its callback
 * object (one reference) and sets *version, or logs why and returns NULL. */
ICorProfilerCallback11 *clrmux_builtin_create(const struct clrmux_child_conf *cc, const struct clrmux_config *cfg,
                                              int *version);

/* The built-in profiler i (0, 1...; in creation order) for the control channel: its child
 * name, callback object and control operations (profiler/companion.h). Returns 0, or -1 when
 * there is no such profiler (or its companion has no control operations). */
struct clrmux_profiler_ctl;
int clrmux_builtin_profiler(int i, const char **name, ICorProfilerCallback11 **cb, const struct clrmux_profiler_ctl **ctl);

#endif
