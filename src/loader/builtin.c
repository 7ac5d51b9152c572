#include "loader/builtin.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/lastgasp.h"
#include "common/log.h"
#include "loader/detach.h"
#include "loader/config.h"
#include "common/platform.h"
#include "common/trust.h"
#include "profiler/companion.h"
#include "tracer/spans.h"
#include "tracer/tracer.h"

/* The built-in profilers created, with their control operations (the control channel's) */
#define MAX_PROFILERS 4
static struct {
    char name[CLRMUX_NAME_MAX];
    ICorProfilerCallback11 *cb;
    const struct clrmux_profiler_ctl *ctl;
} profilers[MAX_PROFILERS];
static _Atomic int nprofilers;

#if defined(_WIN32)
/* ---- builtin = profiler: not on Windows ------------------------------------------------
 * Its samplers are Linux-only (a signal per thread, /proc, process_vm_readv):
 * docs/platforms.md. */
static ICorProfilerCallback11 *create_profiler(const struct clrmux_child_conf *cc, const struct clrmux_config *cfg,
                                               int *version)
{
    (void)cfg;
    (void)version;
    LOG_ERROR("child '%s': the built-in profiler (builtin = profiler) is unavailable on Windows (its samplers are "
              "Linux-only); child skipped, the other children run", cc->name);
    return NULL;
}
#else
/* ---- builtin = profiler: the companion library libclrmux_profiler.so ------------------
 * Kept out of libclrmux.so (it carries zlib and protobuf-c, linked into it); dlopened from the
 * folder of libclrmux.so. A missing library is one log line and the child is skipped. */
static ICorProfilerCallback11 *create_profiler(const struct clrmux_child_conf *cc, const struct clrmux_config *cfg,
                                               int *version)
{
    char path[4096], err[512];
    if (clrmux_module_path_of((const void *)&create_profiler, path, sizeof path) != 0) {
        LOG_ERROR("child '%s': cannot find the folder of libclrmux.so to load %s; child skipped", cc->name,
                  CLRMUX_PROFILER_LIBRARY);
        return NULL;
    }
    char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    if (dir_len + 1 + sizeof CLRMUX_PROFILER_LIBRARY > sizeof path)
        return NULL;
    snprintf(path + dir_len, sizeof path - dir_len, "%s%s", dir_len ? "/" : "", CLRMUX_PROFILER_LIBRARY);
    char real[4096] = "", why[4096 + 160];
    struct stat st; /* a missing library: dlopen's own message below says so */
    if (stat(path, &st) == 0 && clrmux_path_trusted(path, real, sizeof real, why, sizeof why) != 0) {
        if (!cfg->allow_insecure_paths) {
            LOG_ERROR("child '%s': refused to load %s: %s (allow_insecure_paths = true in [loader] overrides this); "
                      "child skipped", cc->name, path, why);
            return NULL;
        }
        LOG_WARN("child '%s': %s: %s; loaded anyway (allow_insecure_paths = true)", cc->name, path, why);
    }
    void *lib = clrmux_lib_open(path, err, sizeof err);
    if (!lib) {
        LOG_ERROR("child '%s': builtin 'profiler' needs %s, which cannot be loaded (%s); child skipped", cc->name,
                  path, err);
        return NULL;
    }
    clrmux_profiler_create_fn create = (clrmux_profiler_create_fn)clrmux_lib_sym(lib, CLRMUX_PROFILER_CREATE_SYMBOL);
    static const struct clrmux_profiler_host host = {CLRMUX_PROFILER_HOST_ABI, clrmux_vlog, clrmux_log_get_level,
                                                     clrmux_lastgasp_register, clrmux_lastgasp_unregister,
                                                     clrmux_span_context_peek, clrmux_span_context_find,
                                                     clrmux_lastgasp_register_deferred, clrmux_lastgasp_start};
    ICorProfilerCallback11 *cb =
        create ? create(cc, cfg->dir, &host, version) : NULL;
    if (!cb)
        LOG_ERROR("child '%s': %s %s; child skipped", cc->name, path,
                  create ? "did not create the profiler (a library from another clrmux build?)"
                         : "exports no " CLRMUX_PROFILER_CREATE_SYMBOL);
    if (cb) {
        LOG_INFO("child '%s': builtin profiler from %s", cc->name, real[0] ? real : path);
        clrmux_spans_want_labels(); /* the tracer's agent keeps async contexts current for it */
        clrmux_profiler_ctl_fn ctl = (clrmux_profiler_ctl_fn)clrmux_lib_sym(lib, CLRMUX_PROFILER_CTL_SYMBOL);
        const struct clrmux_profiler_ctl *ops = ctl ? ctl() : NULL;
        int i = atomic_load(&nprofilers);
        if (ops && ops->abi == CLRMUX_PROFILER_CTL_ABI && i < MAX_PROFILERS) {
            snprintf(profilers[i].name, sizeof profilers[i].name, "%s", cc->name);
            profilers[i].cb = cb;
            profilers[i].ctl = ops;
            atomic_store(&nprofilers, i + 1);
        }
    }
    return cb; /* the library stays loaded, as children are never unloaded */
}
#endif

int clrmux_builtin_profiler(int i, const char **name, ICorProfilerCallback11 **cb, const struct clrmux_profiler_ctl **ctl)
{
    if (i < 0 || i >= atomic_load(&nprofilers))
        return -1;
    *name = profilers[i].name;
    *cb = profilers[i].cb;
    *ctl = profilers[i].ctl;
    return 0;
}

ICorProfilerCallback11 *clrmux_builtin_create(const struct clrmux_child_conf *cc, const struct clrmux_config *cfg,
                                              int *version)
{
    if (strcmp(cc->builtin, "profiler") == 0)
        return create_profiler(cc, cfg, version);
    if (strcmp(cc->builtin, "tracer") == 0) {
        static const struct clrmux_tracer_host host = {clrmux_barrier_adopt, clrmux_barrier_register_adopted,
                                                       clrmux_barrier_disown};
        return clrmux_tracer_create(cc, cfg->path, cfg->dir, &host, version);
    }
    LOG_ERROR("child '%s': builtin '%s' is not available in this build of clrmux; child skipped", cc->name,
              cc->builtin);
    return NULL;
}
