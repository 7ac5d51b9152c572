/* The mux object: clrmux's ICorProfilerCallback11. Fan-out functions are generated from the
 * callback list in gen/corprof_list.h; lifecycle and the exception watch are written by hand
 * below; the JIT callbacks, out-parameter merges, ReJIT and EventPipe routing are in
 * mux_jit.c, the event masks in mux_masks.c (shared macros: mux_int.h). */
#include "loader/mux_int.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/guid.h"
#include "common/hresult.h"
#include "common/lastgasp.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/unhandled.h"
#include "common/utf16.h"
#include "loader/child_base.h"
#include "loader/loop.h"
#include "loader/elt.h"
#include "loader/eventpipe.h"
#include "loader/versions.h"

struct clrmux_mux *clrmux_the_mux;

#define impl clrmux_mux_of

#define child_live clrmux_child_live

/* ---- generated fan-out ---------------------------------------------------------------- */

/* The first argument of a callback (0 when it has none): A is (, a, b, ...) or (). */
#define ARG1(...) ARG1_(__VA_ARGS__, 0, 0)
#define ARG1_(empty, a, ...) a
/* Whether callback N is a thread callback while some child owns threads (ownthreads.h; their
 * gate keeps these routes off the fast ways): a constant 0 for every other callback. */
#define OWN_THREADS(m, N) (clrmux_route_is_thread(CLRMUX_ROUTE_##N) && atomic_load_explicit(&(m)->own.active, memory_order_relaxed))

/* MASK and ALL: the children of the callback's route. The fast ways as FAST_WAYS; a route
 * with several subscribers is walked by mux_walk_in_N while the thread is counted in with
 * the same plain add, once membarrier(2) is registered; else mux_walk_N counts itself in
 * (clrmux_evac_enter: a full fence without membarrier, or on a thread's first callback).
 * Either reloads the route after counting in. One subscriber's HRESULT reaches the runtime,
 * as it would alone (e.g. an error from ObjectReferences ends that heap walk); with
 * several, S_OK. */
#define GEN_MASK(I, D, R, N, P, A, L, H)                                                     \
    static __attribute__((noinline)) HRESULT mux_walk_in_##N(struct clrmux_mux *m CLRMUX_EXPAND P) \
    {                                                                                      \
        const struct clrmux_route *r = ROUTE(m, N);                                        \
        struct clrmux_child *only_;                                                        \
        if (OWN_THREADS(m, N) && clrmux_own_thread_filter(m, CLRMUX_ROUTE_##N, (uintptr_t)(ARG1 A), &only_)) { \
            HRESULT hr_ = S_OK; /* a thread one child owns: that child only */             \
            for (uint32_t i = 0; i < r->n; i++)                                            \
                if (r->e[i].child == only_)                                                \
                    hr_ = r->e[i].cb->lpVtbl->N(r->e[i].cb CLRMUX_EXPAND A);               \
            return hr_;                                                                    \
        }                                                                                  \
        if (r->n == 1)                                                                     \
            return r->e[0].cb->lpVtbl->N(r->e[0].cb CLRMUX_EXPAND A);                      \
        for (uint32_t i = 0; i < r->n; i++)                                                \
            r->e[i].cb->lpVtbl->N(r->e[i].cb CLRMUX_EXPAND A);                             \
        return S_OK;                                                                       \
    }                                                                                      \
    static __attribute__((noinline)) HRESULT mux_walk_##N(struct clrmux_mux *m CLRMUX_EXPAND P) \
    {                                                                                      \
        struct clrmux_thread_rec *t_ = clrmux_evac_enter();                                \
        HRESULT hr = mux_walk_in_##N(m CLRMUX_EXPAND A);                                   \
        clrmux_evac_leave(t_);                                                             \
        return hr;                                                                         \
    }                                                                                      \
    static HRESULT STDMETHODCALLTYPE CLRMUX_TRAMPOLINE mux_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    {                                                                                      \
        struct clrmux_mux *m = impl(This);                                                 \
        ICorProfilerCallback11 *one = DIRECT(m, N);                                        \
        if (__builtin_expect(one != NULL, 1))                                              \
            return one->lpVtbl->N(one CLRMUX_EXPAND A);                                    \
        struct clrmux_thread_rec *t_ = clrmux_tls_rec;                                     \
        if (__builtin_expect(t_ != NULL, 1)) {                                             \
            HRESULT hr;                                                                    \
            clrmux_evac_inc(t_);                                                           \
            one = COUNTED(m, N);                                                           \
            if (__builtin_expect(one != NULL, 1))                                          \
                hr = one->lpVtbl->N(one CLRMUX_EXPAND A);                                  \
            else if (__builtin_expect(atomic_load_explicit(&clrmux_evac_asymmetric, memory_order_relaxed), 1)) \
                hr = mux_walk_in_##N(m CLRMUX_EXPAND A);                                   \
            else {                                                                         \
                /* no membarrier(2): counted in again with a fenced add (clrmux_evac_enter's \
                 * way) before the route is read */                                         \
                clrmux_evac_dec(t_);                                                       \
                atomic_fetch_add(&t_->inside, 1);                                          \
                hr = mux_walk_in_##N(m CLRMUX_EXPAND A);                                   \
            }                                                                              \
            clrmux_evac_dec(t_);                                                           \
            return hr;                                                                     \
        }                                                                                  \
        return mux_walk_##N(m CLRMUX_EXPAND A);                                            \
    }
/* ALL: every live child (attach/detach notifications): the route says which. */
#define GEN_ALL GEN_MASK
/* The other kinds are written by hand below. */
#define GEN_NONE(I, D, R, N, P, A, L, H)
#define GEN_SELF(I, D, R, N, P, A, L, H)
#define GEN_MERGE(I, D, R, N, P, A, L, H)
#define GEN_REJIT(I, D, R, N, P, A, L, H)
#define GEN_JIT(I, D, R, N, P, A, L, H)
#define GEN_EVENTPIPE(I, D, R, N, P, A, L, H)
#define GEN(I, D, R, N, P, A, ROUTE) CLRMUX_ROUTE_APPLY(GEN_, I, D, R, N, P, A, ROUTE)
CLRMUX_ALL_ICorProfilerCallback11(GEN, ICorProfilerCallback11)

/* ---- exception callbacks: an unhandled exception seen before the abort ---------------- */

/* Every built-in child that buffers data (the tracer's spans, the profiler's current period)
 * registers a last gasp (common/lastgasp.h); the loader watches the exception callbacks once
 * for all of them (common/unhandled.h), so that a child alone, whatever it monitors, has its
 * data written when an unhandled exception ends the process. The children get the callbacks
 * they asked for as before (the generated fan-out), after the watch. */

/* .NET 10 raises no exception callback after the first pass enters the thread's outermost
 * frame when the exception was thrown from a catch block of that frame and goes unhandled;
 * the runtime then calls AppContext.OnUnhandledException. While such an exception is at that
 * frame, the loader takes the JIT and ReadyToRun-lookup callbacks (mutable flags) and looks
 * for that method's first call (common/unhandled.h); the window closes as soon as the
 * dispatch goes on (caught there, or left). Rare: exceptions thrown from a catch block of
 * Main (or of a thread's outermost method) that reach it again. */
#define WINDOW_LOW (COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_CACHE_SEARCHES)
static __thread int t_window; /* this thread holds a window open */

static void set_window(struct clrmux_mux *m, int open)
{
    if (t_window == open)
        return;
    t_window = open;
    int before = open ? atomic_fetch_add(&m->windows, 1) : atomic_fetch_sub(&m->windows, 1);
    if (open)
        clrmux_dispatch_gate_closed(m, CLRMUX_GATE_WINDOW); /* this thread's JIT callbacks watch */
    if (before != (open ? 0 : 1))
        return;
    pthread_mutex_lock(&m->mask_lock); /* the last to get here sees the final count */
    atomic_store(&m->window_low, atomic_load(&m->windows) ? (DWORD)WINDOW_LOW : 0);
    DWORD ul, uh;
    clrmux_mux_union_masks(m, NULL, &ul, &uh);
    HRESULT hr = clrmux_mux_set_runtime_mask(m, ul, uh);
    clrmux_dispatch_rebuild(m); /* the JIT routes' gates (dispatch.h) */
    pthread_mutex_unlock(&m->mask_lock);
    if (FAILED(hr))
        LOG_DEBUG("JIT callbacks for an exception at a thread's outermost frame: HRESULT %s", HR_STR(hr));
}

static void watch_exception(struct clrmux_mux *m, enum clrmux_exc_event ev, FunctionID fid)
{
    if (!atomic_load_explicit(&m->watch_unhandled, memory_order_relaxed))
        return;
    if (ev == CLRMUX_EXC_THROWN)
        clrmux_lastgasp_after_exception(); /* a fault turned into this exception left SIGPROF blocked */
    int found = clrmux_unhandled_exception_event((ICorProfilerInfo2 *)m->info, ev, fid);
    if (found == CLRMUX_EXC_UNHANDLED) {
        LOG_DEBUG("exception callbacks: an unhandled managed exception on thread %ld", clrmux_thread_id());
        clrmux_lastgasp_now();
    }
    if (m->runtime_major >= 10 && !m->attaching) {
        if (found == CLRMUX_EXC_AT_OUTERMOST)
            set_window(m, 1);
        else if (t_window && ev != CLRMUX_EXC_FILTER_ENTER && ev != CLRMUX_EXC_FILTER_LEAVE &&
                 ev != CLRMUX_EXC_THROWN && ev != CLRMUX_EXC_SEARCH_ENTER)
            set_window(m, 0);
    }
}


#define WATCHED(N, EV, FID, P, A)                                                              \
    static HRESULT STDMETHODCALLTYPE watch_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    {                                                                                        \
        watch_exception(impl(This), EV, FID);                                                \
        return mux_##N(This CLRMUX_EXPAND A);                                                \
    }
WATCHED(ExceptionThrown, CLRMUX_EXC_THROWN, 0, (, ObjectID o), (, o))
WATCHED(ExceptionSearchFunctionEnter, CLRMUX_EXC_SEARCH_ENTER, f, (, FunctionID f), (, f))
WATCHED(ExceptionSearchFunctionLeave, CLRMUX_EXC_SEARCH_LEAVE, 0, (), ())
WATCHED(ExceptionSearchFilterEnter, CLRMUX_EXC_FILTER_ENTER, f, (, FunctionID f), (, f))
WATCHED(ExceptionSearchFilterLeave, CLRMUX_EXC_FILTER_LEAVE, 0, (), ())
WATCHED(ExceptionSearchCatcherFound, CLRMUX_EXC_CATCHER_FOUND, f, (, FunctionID f), (, f))
WATCHED(ExceptionUnwindFunctionEnter, CLRMUX_EXC_UNWIND, f, (, FunctionID f), (, f))
WATCHED(ExceptionUnwindFunctionLeave, CLRMUX_EXC_UNWIND, 0, (), ())
WATCHED(ExceptionCatcherEnter, CLRMUX_EXC_CATCHER_ENTER, f, (, FunctionID f, ObjectID o), (, f, o))
WATCHED(ExceptionCatcherLeave, CLRMUX_EXC_CATCHER_LEAVE, 0, (), ())

/* After the children's Initialize: watch when some child registered a last gasp. */
static void start_watch(struct clrmux_mux *m)
{
    if (m->info_version < 2 || clrmux_lastgasp_registered() == 0)
        return;
    if (SUCCEEDED(clrmux_add_own_mask(m, COR_PRF_MONITOR_EXCEPTIONS | COR_PRF_ENABLE_STACK_SNAPSHOT)))
        atomic_store(&m->watch_unhandled, 1);
    else
        LOG_WARN("no watch for unhandled exceptions: the data the children hold is lost if one ends the process");
}

/* ---- IUnknown ------------------------------------------------------------------------- */

static HRESULT STDMETHODCALLTYPE mux_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    return clrmux_callback_query(This, &impl(This)->refs, riid, ppv);
}

static ULONG STDMETHODCALLTYPE mux_AddRef(ICorProfilerCallback11 *This) { return clrmux_refs_add(&impl(This)->refs); }

/* The mux is never freed: children may hold their proxies (which point at it) and profiler
 * threads may still run after the runtime's last Release. */
static ULONG STDMETHODCALLTYPE mux_Release(ICorProfilerCallback11 *This) { return clrmux_refs_release(&impl(This)->refs); }

/* ---- lifecycle ------------------------------------------------------------------------ */

static void config_path(char *out, size_t outsz)
{
    const char *env = getenv("CLRMUX_CONFIG");
    if (env && *env) {
        snprintf(out, outsz, "%s", env);
        return;
    }
    char self[4096];
    if (clrmux_module_path_of((const void *)&config_path, self, sizeof self) == 0) {
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = 0;
        snprintf(out, outsz, "%s/loader.conf", self);
    } else {
        snprintf(out, outsz, "loader.conf");
    }
}

/* Logging from the environment (cfg NULL: before the configuration is read, so that
 * every refusal of the file is visible) or from the environment over loader.conf. */
static void setup_logging(const struct clrmux_config *cfg)
{
    int level = cfg && cfg->log_level >= 0 ? cfg->log_level : CLRMUX_LOG_INFO;
    const char *env = getenv("CLRMUX_LOG_LEVEL");
    if (env && *env) {
        int l = clrmux_log_level_parse(env);
        if (l >= 0)
            level = l;
        else if (cfg)
            LOG_WARN("CLRMUX_LOG_LEVEL='%s' is not one of error|warn|info|debug|trace; ignored", env);
    }
    clrmux_log_set_level(level);
    const char *file = cfg && cfg->has_log_file ? cfg->log_file : NULL;
    const char *envf = getenv("CLRMUX_LOG_FILE");
    if (envf)
        file = envf;
    if (!cfg && !(file && *file))
        return;
    if (file && *file && clrmux_log_open(file) != 0)
        LOG_WARN("cannot open log file '%s' (%s); logging to stderr", file,
                 errno == ELOOP ? "a symlink" : errno == EINVAL ? "not a regular file"
                 : errno == EMLINK ? "a file with more than one hard link" : strerror(errno));
}

static HRESULT get_runtime_info(struct clrmux_mux *m, IUnknown *unk)
{
    static const IID *const iids[] = CLRMUX_INFO_IIDS;
    for (int v = CLRMUX_INFO_MAX_VERSION; v >= 1; v--) {
        void *p = NULL;
        if (SUCCEEDED(unk->lpVtbl->QueryInterface(unk, iids[v], &p)) && p) {
            m->info = p;
            m->info_version = v;
            break;
        }
    }
    if (!m->info)
        return E_NOINTERFACE;
    m->immutable_low = COR_PRF_MONITOR_IMMUTABLE;
    m->immutable_high = COR_PRF_HIGH_MONITOR_IMMUTABLE;
    if (m->info_version >= 3) {
        USHORT clr_id = 0, major = 0, minor = 0, build = 0, qfe = 0;
        COR_PRF_RUNTIME_TYPE type = 0;
        WCHAR ver[64];
        ULONG len = 0;
        if (SUCCEEDED(m->info->lpVtbl->GetRuntimeInformation(m->info, &clr_id, &type, &major, &minor,
                                                              &build, &qfe, 64, &len, ver)))
            LOG_DEBUG("GetRuntimeInformation: %u.%u.%u.%u", major, minor, build, qfe);
        else
            major = minor = build = qfe = 0;
        /* .NET Core 3.1 answers 4.0.30319: the runtime's own files say better */
        clrmux_runtime_version_detect(major, minor, build, qfe, &m->runtime_version);
        m->runtime_major = m->runtime_version.major;
    } else {
        clrmux_runtime_version_detect(0, 0, 0, 0, &m->runtime_version);
        m->runtime_major = m->runtime_version.major;
    }
    /* .NET 10 made DISABLE_INLINING / DISABLE_OPTIMIZATIONS mutable (dotnet/runtime#113924) */
    if (m->runtime_major > 0 && m->runtime_major < 10)
        m->immutable_low = CLRMUX_PRF_MONITOR_IMMUTABLE_BEFORE_NET10;
    return S_OK;
}

/* Initialize and InitializeForAttach: config (`path`, or found as at start-up), logging,
 * process filters, runtime information, then every child (children.c calls InitializeForAttach
 * when m->attaching). */
/* The membarrier registration succeeded (detach.h): the sole subscribers that may detach get
 * their counted fast path (dispatch.h); the mux is never freed. */
static void barrier_registered(struct clrmux_mux *m)
{
    if (!atomic_load(&m->shut_down))
        clrmux_dispatch_update(m);
}

static HRESULT mux_start(struct clrmux_mux *m, IUnknown *pInfoUnk, const char *path_override)
{
    char who[4096];
    int loop = clrmux_loop_detect(who, sizeof who);
    if (loop) {
        if (loop == 2)
            setup_logging(NULL); /* another build: its own logging is not set up yet */
        LOG_ERROR("loader loop: clrmux was loaded as a child profiler while clrmux (%s) is loading its children; "
                  "this nested instance does nothing (remove clrmux, or the loader that loads it, from loader.conf)",
                  who);
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    }
    clrmux_the_mux = m; /* the instance the runtime initializes, never a nested one */
    char path[4096];
    if (path_override && *path_override)
        snprintf(path, sizeof path, "%s", path_override);
    else
        config_path(path, sizeof path);
    setup_logging(NULL);
    clrmux_config_load(path, &m->cfg);
    setup_logging(&m->cfg);
    LOG_INFO("clrmux %s: config %s", m->attaching ? "attaching to a running process" : "starting", path);
    for (size_t i = 0; i < m->cfg.ndiags; i++) {
        const struct clrmux_diag *d = &m->cfg.diags[i];
        if (d->line)
            clrmux_log(d->level, "%s:%d: %s", path, d->line, d->msg);
        else
            clrmux_log(d->level, "%s: %s", path, d->msg);
    }
    if (m->cfg.dropped_diags)
        LOG_WARN("%s: %zu more problems not shown", path, m->cfg.dropped_diags);

    char exe[256] = "", app[256] = "";
    clrmux_process_names(exe, sizeof exe, app, sizeof app);
    const char *why = "";
    if (!clrmux_config_process_allowed(&m->cfg, exe, app, &why)) {
        LOG_INFO("process '%s'%s%s not profiled: %s", exe, app[0] ? " running " : "", app, why);
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    }
    if (!m->cfg.found || clrmux_config_active_children(&m->cfg) == 0) {
        LOG_WARN("no enabled child profiler in %s; the application runs unprofiled", path);
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    }
    if (FAILED(get_runtime_info(m, pInfoUnk))) {
        LOG_ERROR("the runtime answered no ICorProfilerInfo interface; the application runs unprofiled");
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    }
    LOG_INFO("runtime: .NET %s, ICorProfilerInfo%d", m->runtime_version.text, m->info_version);
    clrmux_pin_self(m, barrier_registered); /* children may detach one by one; clrmux's code stays mapped */
    atomic_store(&m->initializing, 1);
    /* the control channel (src/control): its thread started off this one, after the children */
    if (m->control && m->control->configure(!m->cfg.control_disabled, m->cfg.perf_map))
        clrmux_barrier_then(m->control->start, NULL);
    clrmux_loop_enter();
    int n = clrmux_load_children(m);
    clrmux_elt_install(m); /* the runtime takes ELT hooks only during Initialize */
    start_watch(m);        /* COR_PRF_ENABLE_STACK_SNAPSHOT is taken only during Initialize */
    clrmux_ep_commit(m);   /* one EventPipe session for the children's sessions so far */
    clrmux_loop_leave();
    atomic_store(&m->initializing, 0);
    clrmux_dispatch_update(m); /* immutable flags are fixed now: more routes may be direct */
    if (n == 0) {
        LOG_WARN("no child profiler could be loaded; the application runs unprofiled");
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    }
    clrmux_barrier_start(m); /* unless a built-in child's thread makes the registration */
    LOG_INFO("%d child profiler(s) active; event mask low=0x%08X high=0x%08X", n,
             (unsigned)m->applied_low, (unsigned)m->applied_high);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE mux_Initialize(ICorProfilerCallback11 *This, IUnknown *pInfoUnk)
{
    return mux_start(impl(This), pInfoUnk, NULL);
}

/* Attach (DiagnosticsClient.AttachProfiler, `clrmux attach`): the client data, when given, is
 * the path of the loader.conf to use (UTF-8, NUL-terminated or not); children that implement
 * ICorProfilerCallback3 get InitializeForAttach, the others are skipped with a log line. */
static HRESULT STDMETHODCALLTYPE mux_InitializeForAttach(ICorProfilerCallback11 *This, IUnknown *pCorProfilerInfoUnk,
                                                         void *pvClientData, UINT cbClientData)
{
    struct clrmux_mux *m = impl(This);
    char path[4096] = "";
    if (pvClientData && cbClientData > 0) {
        size_t n = cbClientData < sizeof path - 1 ? cbClientData : sizeof path - 1;
        memcpy(path, pvClientData, n);
        path[n] = 0;
    }
    m->attaching = 1;
    return mux_start(m, pCorProfilerInfoUnk, path);
}

static HRESULT STDMETHODCALLTYPE mux_Shutdown(ICorProfilerCallback11 *This)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    struct clrmux_mux *m = impl(This);
    if (m->control)
        m->control->shutdown(); /* no command from now on */
    for (int i = 0; i < m->nchildren; i++)
        if (child_live(&m->children[i], 1))
            m->children[i].cb->lpVtbl->Shutdown(m->children[i].cb);
    m->shut_down = 1;
    clrmux_detach_shutdown(m);
    LOG_INFO("shutdown: %d child profiler(s) notified", m->nchildren);
    clrmux_evac_leave(t_);
    return S_OK;
}

/* The runtime detached clrmux itself: every child had detached and was told so (detach.c). */
static HRESULT STDMETHODCALLTYPE mux_ProfilerDetachSucceeded(ICorProfilerCallback11 *This)
{
    clrmux_detach_runtime_succeeded(impl(This));
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE mux_LoadAsNotificationOnly(ICorProfilerCallback11 *This, BOOL *pbNotificationOnly)
{
    /* asked before Initialize, on the thread that then calls it */
    impl(This)->runtime_asked_notification_only = 1;
    /* clrmux is the main profiler: its children may rewrite IL, ReJIT and hook functions. */
    if (pbNotificationOnly)
        *pbNotificationOnly = FALSE;
    return S_OK;
}

/* ---- vtable --------------------------------------------------------------------------- */

#define VT(I, D, R, N, P, A, ROUTE) .N = mux_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init" /* the watched exception callbacks replace the fan-out */
static const ICorProfilerCallback11Vtbl mux_vtbl = {
    CLRMUX_ALL_ICorProfilerCallback11(VT, ICorProfilerCallback11)
    .ExceptionThrown = watch_ExceptionThrown,
    .ExceptionSearchFunctionEnter = watch_ExceptionSearchFunctionEnter,
    .ExceptionSearchFunctionLeave = watch_ExceptionSearchFunctionLeave,
    .ExceptionSearchFilterEnter = watch_ExceptionSearchFilterEnter,
    .ExceptionSearchFilterLeave = watch_ExceptionSearchFilterLeave,
    .ExceptionSearchCatcherFound = watch_ExceptionSearchCatcherFound,
    .ExceptionUnwindFunctionEnter = watch_ExceptionUnwindFunctionEnter,
    .ExceptionUnwindFunctionLeave = watch_ExceptionUnwindFunctionLeave,
    .ExceptionCatcherEnter = watch_ExceptionCatcherEnter,
    .ExceptionCatcherLeave = watch_ExceptionCatcherLeave,
};
#pragma GCC diagnostic pop

struct clrmux_mux *clrmux_mux_create(const struct clrmux_mux_control *control)
{
    struct clrmux_mux *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->compose = clrmux_compose_create();
    if (!m->compose) {
        free(m);
        return NULL;
    }
    m->iface.lpVtbl = &mux_vtbl;
    m->control = control;
    atomic_store(&m->refs, 1);
    for (int i = 0; i < CLRMUX_NROUTES; i++)
        atomic_init(&m->routes[i], &clrmux_route_empty);
    m->compose_pending = clrmux_compose_pending(m->compose);
    pthread_mutex_init(&m->mask_lock, NULL);
    m->cfg.log_level = -1;
    if (!clrmux_the_mux) /* a nested instance never replaces the first (CreateInstance runs on one thread) */
        clrmux_the_mux = m;
    return m;
}
