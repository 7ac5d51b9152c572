#include "loader/builtin.h"

#include "common/log.h"

ICorProfilerCallback11 *clrmux_builtin_create(const struct clrmux_child_conf *cc, int *version)
{
    (void)version;
    /* The IL-rewriting tracer and the continuous profiler are not part of this build yet. */
    LOG_ERROR("child '%s': builtin '%s' is not available in this build of clrmux; child skipped", cc->name,
              cc->builtin);
    return NULL;
}
