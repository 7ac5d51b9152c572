/* Loading child profilers exactly as the runtime loads a profiler (profilinghelper.cpp):
 * dlopen -> DllGetClassObject(clsid, IID_IClassFactory) -> CreateInstance(NULL,
 * IID_ICorProfilerCallback2) -> QueryInterface for ICorProfilerCallback11 down to 3 ->
 * Initialize(its own ICorProfilerInfo proxy). Children are never unloaded. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/guid.h"
#include "common/hresult.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/trust.h"
#include "loader/builtin.h"
#include "loader/children.h"
#include "loader/eventpipe.h"
#include "loader/loop.h"
#include "loader/mux.h"
#include "loader/versions.h"

IClassFactory *clrmux_child_open_factory(const struct clrmux_child_conf *cc, int allow_insecure, char *real,
                                         size_t realsz, clrmux_child_problem_fn problem, void *ctx)
{
    char text[PATH_MAX * 3 + 512];
    real[0] = 0;
    struct stat st;
    if (clrmux_stat(cc->path, &st) != 0) {
        snprintf(text, sizeof text, "%s: %s", cc->path, strerror(errno));
        problem(CLRMUX_LOG_ERROR, text, ctx);
        return NULL;
    }
    char why[PATH_MAX + 160];
    if (clrmux_path_trusted(cc->path, real, realsz, why, sizeof why) != 0) {
        if (!allow_insecure) {
            snprintf(text, sizeof text, "refused to load %s: %s (a child library must be owned by root or this "
                     "process's user and writable only by its owner, as must each folder above it; "
                     "allow_insecure_paths = true in [loader] overrides this)", cc->path, why);
            problem(CLRMUX_LOG_ERROR, text, ctx);
            return NULL;
        }
        snprintf(text, sizeof text, "%s: %s", cc->path, why);
        problem(CLRMUX_LOG_WARN, text, ctx);
    }
    char err[512];
    void *lib = clrmux_lib_open(cc->path, err, sizeof err);
    if (!lib) {
        snprintf(text, sizeof text, "cannot load %s as a shared library: %s", cc->path, err);
        problem(CLRMUX_LOG_ERROR, text, ctx);
        return NULL;
    }
    if (clrmux_is_clrmux_library(lib)) {
        snprintf(text, sizeof text, "%s is a build of clrmux: clrmux cannot be its own child (a loader loop)",
                 real[0] ? real : cc->path);
        problem(CLRMUX_LOG_ERROR, text, ctx);
        return NULL; /* the library stays loaded (its constructors ran), as children are never unloaded */
    }
    clrmux_DllGetClassObject_fn get = (clrmux_DllGetClassObject_fn)clrmux_lib_sym(lib, "DllGetClassObject");
    if (!get) {
        snprintf(text, sizeof text, "%s exports no DllGetClassObject", cc->path);
        problem(CLRMUX_LOG_ERROR, text, ctx);
        return NULL;
    }
    IClassFactory *factory = NULL;
    HRESULT hr = get(&cc->clsid, &IID_IClassFactory, (void **)&factory);
    if (FAILED(hr) || !factory) {
        char clsid[CLRMUX_GUID_STRLEN];
        clrmux_guid_format(&cc->clsid, clsid);
        snprintf(text, sizeof text, "DllGetClassObject(%s) failed with HRESULT %s", clsid, HR_STR(hr));
        problem(CLRMUX_LOG_ERROR, text, ctx);
        return NULL;
    }
    return factory;
}

/* Logs a problem of clrmux_child_open_factory for the child named `ctx`. */
static void log_problem(int level, const char *text, void *ctx)
{
    if (level <= CLRMUX_LOG_ERROR)
        LOG_ERROR("child '%s': %s; child skipped", (const char *)ctx, text);
    else
        LOG_WARN("child '%s': %s; loaded anyway (allow_insecure_paths = true)", (const char *)ctx, text);
}

/* Creates the child's callback object. Returns it (one reference) with its version, or
 * NULL after logging why. */
static ICorProfilerCallback11 *create_library_child(const struct clrmux_child_conf *cc, int allow_insecure,
                                                    char *real, size_t realsz, int *version)
{
    IClassFactory *factory = clrmux_child_open_factory(cc, allow_insecure, real, realsz, log_problem,
                                                       (void *)cc->name);
    if (!factory)
        return NULL;
    IUnknown *obj = NULL;
    HRESULT hr = factory->lpVtbl->CreateInstance(factory, NULL, &IID_ICorProfilerCallback2, (void **)&obj);
    if (FAILED(hr) || !obj) {
        IUnknown *v1 = NULL;
        if (SUCCEEDED(factory->lpVtbl->CreateInstance(factory, NULL, &IID_ICorProfilerCallback, (void **)&v1)) && v1) {
            LOG_ERROR("child '%s': implements only ICorProfilerCallback (version 1); the runtime requires "
                      "ICorProfilerCallback2 or later; child skipped", cc->name);
            v1->lpVtbl->Release(v1);
        } else {
            LOG_ERROR("child '%s': CreateInstance(IID_ICorProfilerCallback2) failed with HRESULT %s; child skipped",
                      cc->name, HR_STR(hr));
        }
        factory->lpVtbl->Release(factory);
        return NULL;
    }
    factory->lpVtbl->Release(factory);
    static const IID *const iids[] = CLRMUX_CALLBACK_IIDS;
    for (int v = CLRMUX_CALLBACK_MAX_VERSION; v >= 3; v--) {
        void *p = NULL;
        if (SUCCEEDED(obj->lpVtbl->QueryInterface(obj, iids[v], &p)) && p) {
            obj->lpVtbl->Release(obj);
            *version = v;
            return p;
        }
    }
    *version = 2;
    return (ICorProfilerCallback11 *)obj;
}

int clrmux_load_children(struct clrmux_mux *m)
{
    const struct clrmux_config *cfg = &m->cfg;
    m->children = calloc(cfg->nchildren ? cfg->nchildren : 1, sizeof *m->children);
    if (!m->children)
        return 0;
    int active = 0;
    for (size_t i = 0; i < cfg->nchildren; i++) {
        const struct clrmux_child_conf *cc = &cfg->children[i];
        if (cc->invalid)
            continue;
        if (!cc->enabled) {
            LOG_INFO("child '%s': disabled (enabled = false)", cc->name);
            continue;
        }
        struct clrmux_child *c = &m->children[m->nchildren];
        snprintf(c->name, sizeof c->name, "%s", cc->name);
        c->index = m->nchildren;
        int version = 0;
        char real[PATH_MAX] = "";
        ICorProfilerCallback11 *cb = cc->builtin[0] ? clrmux_builtin_create(cc, cfg, &version)
                                                    : create_library_child(cc, cfg->allow_insecure_paths, real,
                                                                           sizeof real, &version);
        if (!cb)
            continue;
        c->cb = cb;
        c->version = version;
        clrmux_proxy_init(&c->proxy, m, c);
        if (version >= 11 && m->runtime_asked_notification_only) {
            /* a runtime with ICorProfilerCallback11 asks every profiler this before
             * Initialize; the answer does not matter in the main slot, but a child sees the
             * call as it would alone. Older runtimes (.NET Core 3.1) never ask: neither does
             * clrmux. */
            BOOL notification_only = FALSE;
            cb->lpVtbl->LoadAsNotificationOnly(cb, &notification_only);
            if (notification_only)
                LOG_INFO("child '%s': asks to load as a notification-only profiler; clrmux loads it as a full child", cc->name);
        }
        if (m->attaching && version < 3) {
            LOG_WARN("child '%s': implements no ICorProfilerCallback3 (InitializeForAttach): it cannot attach to a "
                     "running process; child skipped", cc->name);
            cb->lpVtbl->Release(cb);
            continue;
        }
        m->nchildren++; /* visible to the mask union from here on */
        atomic_store(&c->active, 1);
        HRESULT hr = m->attaching ? cb->lpVtbl->InitializeForAttach(cb, (IUnknown *)&c->proxy.iface, NULL, 0)
                                  : cb->lpVtbl->Initialize(cb, (IUnknown *)&c->proxy.iface);
        if (FAILED(hr)) {
            atomic_store(&c->active, 0);
            clrmux_compose_child_gone(m, c);
            LOG_ERROR("child '%s': %s failed with HRESULT %s; child skipped", cc->name,
                      m->attaching ? "InitializeForAttach" : "Initialize", HR_STR(hr));
            atomic_store(&c->mask_low, 0);
            atomic_store(&c->mask_high, 0);
            clrmux_apply_union(m);
            clrmux_ep_drop_child(m, c); /* its EventPipe sessions end with it */
            cb->lpVtbl->Release(cb);
            continue;
        }
        active++;
        LOG_INFO("child '%s': loaded (%s, ICorProfilerCallback%d), event mask low=0x%08X high=0x%08X", cc->name,
                 cc->builtin[0] ? cc->builtin : real[0] ? real : cc->path, version, (unsigned)atomic_load(&c->mask_low),
                 (unsigned)atomic_load(&c->mask_high));
    }
    return active;
}
