/* Opening a library child up to its class factory, the way the runtime opens a profiler
 * (profilinghelper.cpp): shared by the mux's Initialize (children.c) and `clrmux check`'s
 * probe of each child (check.c), so both apply the same rules in the same order. */
#ifndef CLRMUX_LOADER_CHILDREN_H
#define CLRMUX_LOADER_CHILDREN_H

#include <stddef.h>

#include "loader/config.h"
#include "clrmux/com.h"

/* Called for each problem met: `level` is CLRMUX_LOG_ERROR (the child cannot load; the
 * open stops there) or CLRMUX_LOG_WARN (an unsafe path loaded anyway because
 * allow_insecure_paths is set). `text` says what and why ("refused to load PATH: WHY (...)"),
 * without the child's name or the consequence, which the caller adds; it lives until the
 * call returns. */
typedef void (*clrmux_child_problem_fn)(int level, const char *text, void *ctx);

/* Opens the library child `cc` (cc->path, cc->clsid): the file exists; it passes the
 * ownership and permission rule (common/trust.h) unless allow_insecure (then a WARN); it
 * opens as a shared library; it is not a build of clrmux (loop.h: a loader loop); it exports
 * DllGetClassObject; DllGetClassObject(clsid, IID_IClassFactory) answers. Returns the class
 * factory (one reference, the caller releases it), or NULL after reporting why through
 * `problem`. real (realsz bytes, at least PATH_MAX) receives the resolved path of the
 * library, or "" when it was not resolved. The library is never closed: its constructors
 * ran, and children are never unloaded. */
IClassFactory *clrmux_child_open_factory(const struct clrmux_child_conf *cc, int allow_insecure, char *real,
                                         size_t realsz, clrmux_child_problem_fn problem, void *ctx);

#endif
