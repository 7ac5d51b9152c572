/* Children built into libclrmux.so (`builtin = NAME` in loader.conf). They are ordinary
 * children: created here, then called and given an ICorProfilerInfo proxy like any other. */
#ifndef CLRMUX_BUILTIN_H
#define CLRMUX_BUILTIN_H

#include "clrmux/corprof.h"
#include "loader/config.h"

/* Creates builtin child `cc->builtin` with its section's keys. Returns its callback object
 * (one reference) and sets *version, or logs why and returns NULL. */
ICorProfilerCallback11 *clrmux_builtin_create(const struct clrmux_child_conf *cc, int *version);

#endif
