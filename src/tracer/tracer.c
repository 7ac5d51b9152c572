/* The built-in IL-rewriting tracer (see tracer.h): the callbacks, the ReJIT thread, the
 * method registry, metadata names and target matching. The ReJIT thread: rejit.c; IL rewriting: tracer_rewrite.c;
 * exception names: tracer_exc.c; configuration: config.c; export: export.c. */
#include "tracer/tracer_impl.h"
#include "tracer/usdt.h"

_Atomic(struct tracer *) the_tracer;

static inline struct tracer *impl(ICorProfilerCallback11 *i) { return (struct tracer *)i; }

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRACER_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TRACER_LSAN)
#define TRACER_LSAN 1
#endif
#ifdef TRACER_LSAN
#include <sanitizer/lsan_interface.h>
static void tracer_lsan_root(void *p, size_t n) { __lsan_register_root_region(p, n); }
static void tracer_lsan_unroot(void *p, size_t n) { __lsan_unregister_root_region(p, n); }
#else
static void tracer_lsan_root(void *p, size_t n) { (void)p, (void)n; }
static void tracer_lsan_unroot(void *p, size_t n) { (void)p, (void)n; }
#endif

/* ---- small helpers ------------------------------------------------------------------- */

static void to_utf16(const char *s, WCHAR *out, size_t n) { clrmux_utf8_to_utf16(s, out, n); }

static void to_utf8(const WCHAR *s, size_t len, char *out, size_t n) { clrmux_utf16_to_utf8(s, len, out, n); }

static uint64_t hash2(uint64_t a, uint32_t b)
{
    uint64_t h = (a ^ ((uint64_t)b << 32 | b)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The filter bit of a method: the hash's high bits, independent of its slot (the low bits). */
static void method_filter_bit(uint64_t h, size_t *word, uint64_t *bit)
{
    *word = (size_t)(h >> 58);        /* 64 words */
    *bit = 1ull << ((h >> 52) & 63); /* 64 bits each */
}

/* The index of a traced method, or -1. Lock-free. */
static int method_lookup(struct tracer *t, ModuleID mod, mdMethodDef tok)
{
    uint64_t h = hash2(mod, (uint32_t)tok);
    size_t w;
    uint64_t b;
    method_filter_bit(h, &w, &b);
    if (!(atomic_load_explicit(&t->method_filter[w], memory_order_acquire) & b))
        return -1; /* never registered (set before its slot is published) */
    size_t i = h & (METHOD_SLOTS - 1);
    for (size_t n = 0; n < METHOD_SLOTS; n++, i = (i + 1) & (METHOD_SLOTS - 1)) {
        struct method_slot *s = &t->slots[i];
        uint32_t idx1 = atomic_load_explicit(&s->idx1, memory_order_acquire);
        if (!idx1)
            return -1;
        if (s->module == mod && s->token == tok)
            return (int)idx1 - 1;
    }
    return -1;
}

/* Registers a method (under reg_lock). Returns its index, the existing one, or -1 when full. */
static int method_register(struct tracer *t, ModuleID mod, mdMethodDef tok, int target, const char *name, int *is_new)
{
    pthread_mutex_lock(&t->reg_lock);
    *is_new = 0;
    int idx = method_lookup(t, mod, tok);
    if (idx < 0) {
        uint32_t n = atomic_load(&t->nmethods);
        if (n < MAX_METHODS) {
            struct traced_method *m = &t->methods[n];
            m->module = mod;
            m->token = tok;
            m->target = target;
            snprintf(m->name, sizeof m->name, "%s", name);
            atomic_store_explicit(&t->nmethods, n + 1, memory_order_release);
            uint64_t h = hash2(mod, (uint32_t)tok);
            size_t w;
            uint64_t b;
            method_filter_bit(h, &w, &b);
            atomic_fetch_or_explicit(&t->method_filter[w], b, memory_order_release);
            size_t i = h & (METHOD_SLOTS - 1);
            while (atomic_load(&t->slots[i].idx1))
                i = (i + 1) & (METHOD_SLOTS - 1);
            t->slots[i].module = mod;
            t->slots[i].token = tok;
            atomic_store_explicit(&t->slots[i].idx1, n + 1, memory_order_release);
            idx = (int)n;
            *is_new = 1;
        }
    }
    pthread_mutex_unlock(&t->reg_lock);
    return idx;

}

static int resolve_type_name(void *ctx, uint32_t token, char *out, size_t outsz)
{
    return tracer_type_full_name(ctx, (mdToken)token, out, outsz, 0);
}

static int assembly_has_targets(struct tracer *t, const char *assembly)
{
    for (int i = 0; i < t->ntargets; i++)
        if (strcasecmp(t->targets[i].assembly, assembly) == 0)
            return 1;
    return 0;
}

/* Finds target tg's methods in the module; appends new ones to toks. */
static void match_target(struct tracer *t, int ti, IMetaDataImport2 *imp, ModuleID mod, mdMethodDef *toks, ULONG *ntoks,
                         ULONG cap)
{
    const struct clrmux_target *tg = &t->targets[ti];
    char part[CLRMUX_TARGET_NAME_MAX];
    WCHAR w[CLRMUX_TARGET_NAME_MAX];
    mdTypeDef td = 0;
    const char *p = tg->type;
    int first = 1;
    for (;;) {
        const char *plus = strchr(p, '+');
        size_t n = plus ? (size_t)(plus - p) : strlen(p);
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        to_utf16(part, w, CLRMUX_TARGET_NAME_MAX);
        mdTypeDef next = 0;
        if (FAILED(IMetaDataImport2_FindTypeDefByName(imp, w, first ? mdTokenNil : td, &next)) || !next) {
            LOG_DEBUG("tracer: %s:%d: type %s not found in %s", t->conf, tg->line, tg->type, tg->assembly);
            return;
        }
        td = next;
        first = 0;
        if (!plus)
            break;
        p = plus + 1;
    }
    to_utf16(tg->method, w, CLRMUX_TARGET_NAME_MAX);
    HCORENUM e = NULL;
    mdMethodDef found[64];
    ULONG nfound = 0;
    int any = 0;
    while (SUCCEEDED(IMetaDataImport2_EnumMethodsWithName(imp, &e, td, w, found, 64, &nfound)) && nfound > 0) {
        for (ULONG k = 0; k < nfound; k++) {
            PCCOR_SIGNATURE sig = NULL;
            ULONG siglen = 0, rva = 0;
            DWORD attr = 0, impl_flags = 0;
            if (FAILED(IMetaDataImport2_GetMethodProps(imp, found[k], NULL, NULL, 0, NULL, &attr, &sig, &siglen, &rva,
                                                      &impl_flags)))
                continue;
            if (tg->has_params) {
                char names[CLRMUX_TARGET_MAX_PARAMS][CLRMUX_TARGET_NAME_MAX];
                int np = clrmux_sig_param_names(sig, siglen, resolve_type_name, imp, names, CLRMUX_TARGET_MAX_PARAMS);
                if (np < 0 || np > CLRMUX_TARGET_MAX_PARAMS || !clrmux_target_params_match(tg, names, np))
                    continue;
            }
            char name[CLRMUX_TARGET_NAME_MAX + 130];
            snprintf(name, sizeof name, "%s.%s", tg->type, tg->method);
            if (rva == 0 || (impl_flags & 0x0003) != 0 /* miIL only (not native/runtime) */ ||
                (impl_flags & 0x1000) /* miInternalCall */) {
                LOG_WARN("tracer: %s:%d: %s (method 0x%08X) has no IL body (abstract, extern or runtime-implemented); "
                         "not traced", t->conf, tg->line, name, (unsigned)found[k]);
                atomic_fetch_add(&t->target_hits[ti], 1); /* matched: not reported again at shutdown */
                any = 1;
                continue;
            }
            int is_new = 0;
            int idx = method_register(t, mod, found[k], ti, name, &is_new);
            if (idx < 0) {
                LOG_ERROR("tracer: more than %d traced methods; %s not traced", MAX_METHODS, name);
                continue;
            }
            any = 1;
            atomic_fetch_add(&t->target_hits[ti], 1);
            if (is_new && *ntoks < cap)
                toks[(*ntoks)++] = found[k];
        }
    }
    if (e)
        IMetaDataImport2_CloseEnum(imp, e);
    if (!any)
        LOG_DEBUG("tracer: %s:%d: no method %s::%s matches in %s", t->conf, tg->line, tg->type, tg->method, tg->assembly);
}

/* ---- callbacks ----------------------------------------------------------------------- */

CLRMUX_DEFINE_NOOP_CALLBACKS(trd)

static HRESULT STDMETHODCALLTYPE tr_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    return clrmux_callback_query(This, &impl(This)->refs, riid, ppv);
}

static ULONG STDMETHODCALLTYPE tr_AddRef(ICorProfilerCallback11 *This) { return clrmux_refs_add(&impl(This)->refs); }

/* never freed: rewritten code calls the probes until the process ends */
static ULONG STDMETHODCALLTYPE tr_Release(ICorProfilerCallback11 *This) { return clrmux_refs_release(&impl(This)->refs); }

#define TRACER_MASK                                                                                    \
    (COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION |           \
     COR_PRF_MONITOR_CACHE_SEARCHES | COR_PRF_MONITOR_EXCEPTIONS)

static void agent_registered(void);

static HRESULT STDMETHODCALLTYPE tr_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct tracer *t = impl(This);
    HRESULT hr = unk ? IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo5, (void **)&t->info) : E_POINTER;
    if (FAILED(hr) || !t->info) {
        LOG_ERROR("child '%s': the runtime has no ICorProfilerInfo5 (HRESULT %s); tracer disabled", t->child,
                  HR_STR(hr));
        return FAILED(hr) ? hr : E_NOINTERFACE;
    }
    if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo10, (void **)&t->info10)))
        t->info10 = NULL; /* rewrites reach no caller that inlined the method (rejit.c) */
    /* after attach COR_PRF_MONITOR_CACHE_SEARCHES is not allowed (COR_PRF_ALLOWABLE_AFTER_ATTACH):
     * precompiled code is already in use then, and ReJIT replaces it all the same */
    DWORD mask = (DWORD)TRACER_MASK & (t->attaching ? ~(DWORD)COR_PRF_MONITOR_CACHE_SEARCHES : ~0u);
    hr = ICorProfilerInfo5_SetEventMask2(t->info, mask, 0);
    if (FAILED(hr)) {
        LOG_ERROR("child '%s': SetEventMask2 failed with HRESULT %s; tracer disabled", t->child, HR_STR(hr));
        return hr;
    }
    USHORT major = 0;
    COR_PRF_RUNTIME_TYPE rt = 0;
    if (t->suppress_gc &&
        (FAILED(ICorProfilerInfo5_GetRuntimeInformation(t->info, NULL, &rt, &major, NULL, NULL, NULL, 0, NULL, NULL)) ||
         rt != COR_PRF_CORE_CLR || major < 6)) {
        LOG_INFO("tracer: the probes keep their GC transition (SuppressGCTransition on calli needs .NET 6 or later)");
        t->suppress_gc = 0;
    }
    if (clrmux_spans_init(t->buffer_spans) != 0)
        return E_OUTOFMEMORY;
    if (t->agent)
        tracer_agent_setup(t, agent_registered);
    clrmux_spans_set_sample_ratio(t->sample_ratio);
    clrmux_usdt_set_names(tracer_method_name, t); /* the USDT probes' method names (tracer/usdt.h) */
    t->start_ns = clrmux_now_ns();
    if (!strcmp(t->protocol, "http/protobuf") && (t->endpoint[0] || t->metrics_endpoint[0]) && !(t->pb = tracer_load_pb())) {
        LOG_ERROR("tracer: OTLP protocol http/protobuf needs %s beside libclrmux.so; http/json is used",
                  CLRMUX_OTLP_PB_LIB);
        snprintf(t->protocol, sizeof t->protocol, "http/json");
    }
    const char *ctype = t->pb ? "application/x-protobuf" : "application/json";
    /* The rule: without endpoint, spans go to the file (`output`, or its default); with
     * endpoint, to the collector only, unless `output` is also set explicitly (then to both),
     * or libcurl cannot be loaded (then to the file, the explicit or the default one). */
    char via[PATH_MAX + 64] = "";
    if (t->endpoint[0]) {
        char err[800];
        char loaded[PATH_MAX];
        t->curl = clrmux_curl_open(getenv("CLRMUX_LIBCURL"), t->endpoint, loaded, sizeof loaded, err, sizeof err);
        if (!t->curl) {
            LOG_ERROR("tracer: endpoint %s: %s; OTLP/HTTP export is off, spans are written to %s instead", t->endpoint,
                      err, t->output);
            t->output_set = 1;
        } else {
            char bad[512];
            if (clrmux_curl_set_headers(t->curl, ctype, t->headers, bad, sizeof bad) > 0)
                LOG_ERROR("tracer: OTLP headers: malformed member(s) skipped: %s", bad);
            struct clrmux_http_conf hc = {
                .endpoint = t->endpoint,
                .max_queue = CLRMUX_HTTP_QUEUE,
                .max_attempts = CLRMUX_HTTP_ATTEMPTS,
                .backoff_ms = CLRMUX_HTTP_BACKOFF_MS,
                .backoff_max_ms = CLRMUX_HTTP_BACKOFF_MAX_MS,
                .timeout_ms = t->timeout_ms,
                .post = clrmux_curl_post,
                .post_ctx = t->curl,
            };
            if (!(t->http = clrmux_http_new(&hc)))
                return E_OUTOFMEMORY;
            snprintf(via, sizeof via, " (OTLP/HTTP %s with %s)", t->pb ? "protobuf" : "JSON", loaded);
            if (t->metrics_endpoint[0] &&
                (t->mcurl = clrmux_curl_open(getenv("CLRMUX_LIBCURL"), t->metrics_endpoint, loaded, sizeof loaded, err,
                                             sizeof err))) {
                clrmux_curl_set_headers(t->mcurl, ctype, t->headers, NULL, 0);
                hc.endpoint = t->metrics_endpoint;
                hc.post_ctx = t->mcurl;
                t->mhttp = clrmux_http_new(&hc);
            }
        }
    }
    /* metrics go where spans go: the file unless only an endpoint is used; opened by the
     * ReJIT thread as it starts, off the runtime's start-up path (tracer_open_metrics) */
    const int metrics_file = t->metrics_output[0] && (!t->http || t->output_set);
    t->mout_pending = metrics_file; /* cleared (under wr_lock) once opened */
    if (!t->http || t->output_set) {
        char err[PATH_MAX + 200];
        t->out = clrmux_spanfile_open(t->output, t->max_file_bytes, t->max_files, err, sizeof err);
        if (!t->out) {
            LOG_ERROR("child '%s': cannot open output %s: %s; tracer disabled", t->child, t->output, err);
            return E_FAIL;
        }
    }
    /* the one thread started here (rejit.c) */
    if (tracer_start_rejit_thread(t) != 0) {
        LOG_ERROR("child '%s': cannot start the ReJIT thread; tracer disabled", t->child);
        return E_FAIL;
    }
    t->rj_started = 1;
    if (metrics_file || t->mhttp)
        LOG_INFO("tracer: per-method metrics to %s%s%s every %ld ms and at shutdown",
                 metrics_file ? t->metrics_output : "", metrics_file && t->mhttp ? " and " : "",
                 t->mhttp ? t->metrics_endpoint : "", t->metrics_ms);
    if (t->sample_ratio < 1)
        LOG_INFO("tracer: head sampling: %g of the root traces are recorded (parent-based under an Activity)",
                 t->sample_ratio);
    int user = 0; /* the `trace =` targets; the integrations' are counted apart */
    for (int i = 0; i < t->ntargets; i++)
        user += !t->targets[i].integ;
    if (!t->http)
        LOG_INFO("tracer: %d target(s), spans to %s (service.name %s)", user, t->output, t->service);
    else if (!t->out)
        LOG_INFO("tracer: %d target(s), spans to %s%s (service.name %s)", user, t->endpoint, via, t->service);
    else
        LOG_INFO("tracer: %d target(s), spans to %s%s and to %s (service.name %s)", user, t->endpoint, via,
                 t->output, t->service);
    if (t->ninteg)
        LOG_INFO("tracer: %d bytecode integration(s) (%d method target(s)), the first: %s", t->ninteg,
                 t->ntargets - user, t->integs[0].name);
    return S_OK;
}

/* Rewrites again (RequestReJIT, one request per module) the registered methods that `stale`
 * says were rewritten without something they can have now (`what`, for the log). */
static void rejit_where(struct tracer *t, int (*stale_fn)(struct traced_method *), const char *what)
{
    /* a removed target's methods are not rewritten again (tracer_ctl.h) */
#define stale(m) (stale_fn(m) && !((m)->target >= 0 && atomic_load(&t->target_off[(m)->target])))
    uint32_t n = atomic_load_explicit(&t->nmethods, memory_order_acquire);
    mdMethodDef *toks = calloc(n ? n : 1, sizeof *toks);
    char *done = calloc(n ? n : 1, 1);
    if (!toks || !done) {
        free(toks), free(done);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (done[i] || !stale(&t->methods[i]))
            continue;
        ModuleID mod = t->methods[i].module;
        ULONG k = 0;
        for (uint32_t j = i; j < n; j++)
            if (!done[j] && t->methods[j].module == mod && stale(&t->methods[j])) {
                done[j] = 1;
                toks[k++] = t->methods[j].token;
            }
        LOG_DEBUG("tracer: %u method(s) rewritten again: %s", (unsigned)k, what);
        tracer_request_rejit(t, mod, toks, k, what);
    }
#undef stale
    free(toks), free(done);
}

/* DiagnosticSource was loaded: the methods already rewritten without the Activity join are
 * rewritten again so that their root spans join the Activities that can exist from now on. */
static int no_join(struct traced_method *m) { return !atomic_load(&m->joins) && m->target >= 0; }
/* rewritten before the agent: its root spans join only Activity.Current (if that), a task's
 * span ends at its return */
static int before_agent(struct traced_method *m) { return atomic_load(&m->agent_pending) || atomic_load(&m->joins); }

/* The managed agent registered its entry points (tracer/agent.h; on the thread that runs the
 * startup hooks): methods that return a task get async spans from now on, those rewritten
 * before are rewritten again. */
static void agent_registered(void)
{
    struct tracer *t = atomic_load(&the_tracer);
    if (!t || atomic_exchange(&t->agent_ready, 1))
        return;
    LOG_INFO("tracer: managed agent %s started: async spans%s", t->agent_path,
             t->instrument[0] || t->activity_sources[0] ? ", Activities recorded" : "");
    rejit_where(t, before_agent, "the managed agent's async spans and context from now on");
}

/* CoreLib is loaded (mapped at base): ProcessStartupHooks is registered (its ReadyToRun code
 * refused, inlining vetoed) to be rewritten at its JIT compilation (agent_boot_jit), to start
 * the managed agent before Main (tracer/agent_boot.h). */
static void agent_boot(struct tracer *t, ModuleID mod, const void *base)
{
    char why[256];
    if (clrmux_agent_boot_find(base, t->agent_path, &t->boot, why, sizeof why) != 0) {
        LOG_WARN("tracer: %s; no managed agent", why);
        return;
    }
    int is_new = 0, idx = method_register(t, mod, t->boot.method, -2, CLRMUX_AGENT_BOOT_NAME, &is_new);
    if (idx >= 0)
        t->agent_boot = idx + 1;
}

static HRESULT STDMETHODCALLTYPE tr_ModuleLoadFinished(ICorProfilerCallback11 *This, ModuleID mod, HRESULT status)
{
    struct tracer *t = impl(This);
    if (FAILED(status) || (!t->ntargets && !t->agent_path[0]) || atomic_load(&t->shut_down))
        return S_OK;
    LPCBYTE base = NULL;
    WCHAR wpath[512];
    ULONG len = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (FAILED(ICorProfilerInfo5_GetModuleInfo2(t->info, mod, &base, 512, &len, wpath, &asm_id, &flags)))
        return S_OK;
    if (flags & (COR_PRF_MODULE_DYNAMIC | COR_PRF_MODULE_RESOURCE))
        return S_OK;
    WCHAR wname[256];
    char assembly[256];
    if (FAILED(ICorProfilerInfo5_GetAssemblyInfo(t->info, asm_id, 256, &len, wname, NULL, NULL)))
        return S_OK;
    to_utf8(wname, len, assembly, sizeof assembly);
    if (base && !atomic_load_explicit(&t->unhandled.state, memory_order_relaxed) &&
        strcmp(assembly, "System.Private.CoreLib") == 0)
        tracer_queue_hook_lookup(t, mod, base);
    /* an Activity can exist from now on: root spans call the agent's JoinRoot (spans.h) */
    if (strcasecmp(assembly, CLRMUX_DIAGNOSTICSOURCE) == 0)
        clrmux_spans_join_possible();
    /* the join waits for Activity's initialization (activity.h) */
    if (t->join_activity && strcasecmp(assembly, CLRMUX_DIAGNOSTICSOURCE) == 0 && !atomic_load(&t->ds_module) &&
        clrmux_activity_find((ICorProfilerInfo3 *)t->info, mod, &t->activity) == 0)
        atomic_store(&t->ds_module, mod);
    if (t->agent_path[0] && !t->agent_boot && strcmp(assembly, "System.Private.CoreLib") == 0)
        agent_boot(t, mod, base);
    if (!assembly_has_targets(t, assembly))
        return S_OK;
    IUnknown *unk = NULL;
    HRESULT hr = ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead, &IID_IMetaDataImport2, &unk);
    if (FAILED(hr) || !unk) {
        LOG_WARN("tracer: no metadata for %s (HRESULT %s); its targets are not traced", assembly, HR_STR(hr));
        return S_OK;
    }
    IMetaDataImport2 *imp = (IMetaDataImport2 *)unk;
    mdMethodDef toks[512];
    ULONG n = 0;
    for (int i = 0; i < t->ntargets; i++)
        if (strcasecmp(t->targets[i].assembly, assembly) == 0 && !atomic_load(&t->target_off[i]))
            match_target(t, i, imp, mod, toks, &n, 512);
    IMetaDataImport2_Release(imp);
    if (n) {
        LOG_INFO("tracer: %s: %u method(s) to trace", assembly, (unsigned)n);
        tracer_request_rejit(t, mod, toks, n, assembly);
    }
    return S_OK;
}

/* Attach: Initialize as at start-up; the modules already loaded are matched once the attach
 * is complete (ModuleLoadFinished is not raised for them), then ReJIT does the rest. */
static HRESULT STDMETHODCALLTYPE tr_InitializeForAttach(ICorProfilerCallback11 *This, IUnknown *unk, void *data, UINT cb)
{
    (void)data, (void)cb;
    impl(This)->attaching = 1;
    return tr_Initialize(This, unk);
}

static HRESULT STDMETHODCALLTYPE tr_ProfilerAttachComplete(ICorProfilerCallback11 *This)
{
    struct tracer *t = impl(This);
    ICorProfilerModuleEnum *en = NULL;
    if (FAILED(ICorProfilerInfo5_EnumModules(t->info, &en)) || !en) {
        LOG_WARN("tracer: EnumModules failed after attach; only modules loaded from now on are traced");
        return S_OK;
    }
    ModuleID mods[64];
    ULONG got = 0, total = 0;
    while (SUCCEEDED(ICorProfilerModuleEnum_Next(en, 64, mods, &got)) && got > 0) {
        for (ULONG i = 0; i < got; i++)
            tr_ModuleLoadFinished(This, mods[i], S_OK);
        total += got;
    }
    ICorProfilerModuleEnum_Release(en);
    /* Activity's methods may all be compiled already: no JIT callback will name its ClassID
     * (note_activity); on this runtime thread, after the attach, the token gives it */
    ModuleID ds = atomic_load(&t->ds_module);
    ClassID cls = 0;
    if (ds && !atomic_load(&t->activity_cls) &&
        SUCCEEDED(ICorProfilerInfo5_GetClassFromToken(t->info, ds, t->activity.type, &cls)) && cls)
        atomic_store(&t->activity_cls, cls);
    LOG_INFO("tracer: attached; %u module(s) already loaded were matched against the targets", (unsigned)total);
    return S_OK;
}

static void rejit_for_join(struct tracer *t)
{
    if (!atomic_load(&t->agent_ready)) /* with the agent, JoinRoot carries Activity.Current */
        rejit_where(t, no_join, "their root spans join Activity.Current");
}

void tracer_activity_poll(struct tracer *t, int rejit)
{
    ClassID cls = atomic_load_explicit(&t->activity_cls, memory_order_acquire);
    if (cls && !atomic_load_explicit(&t->ds_loaded, memory_order_relaxed) &&
        clrmux_activity_initialized((ICorProfilerInfo3 *)t->info, &t->activity, cls) &&
        !atomic_exchange(&t->ds_loaded, 1)) {
        LOG_DEBUG("tracer: System.Diagnostics.Activity is initialized: root spans join Activity.Current from now on");
        atomic_store(&t->join_rejit, 1);
    }
    if (rejit && atomic_load_explicit(&t->join_rejit, memory_order_relaxed) && atomic_exchange(&t->join_rejit, 0))
        rejit_for_join(t);
}

static HRESULT STDMETHODCALLTYPE tr_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                                       ICorProfilerFunctionControl *fc)
{
    struct tracer *t = impl(This);
    int idx = method_lookup(t, mod, tok);
    if (idx < 0 || !fc)
        return S_OK;
    tracer_activity_poll(t, 0); /* the join only once Activity is initialized (activity.h) */
    char why[320];
    int64_t t0 = clrmux_now_ns();
    if (idx == t->agent_boot - 1)
        return S_OK; /* rewritten at its JIT compilation (agent_boot_jit) */
    if (tracer_rewrite(t, mod, tok, (uint32_t)idx, fc, why, sizeof why) == 0) {
        int64_t ns = clrmux_now_ns() - t0;
        atomic_fetch_add(&t->rewritten, 1);
        atomic_fetch_add(&t->rewrite_ns, (uint64_t)ns);
        LOG_DEBUG("tracer: %s rewritten in %lld us (%s)", t->methods[idx].name, (long long)(ns / 1000), why);
    } else {
        atomic_fetch_add(&t->skipped, 1);
        LOG_WARN("tracer: %s (method 0x%08X) not traced: %s", t->methods[idx].name, (unsigned)tok, why);
    }
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ReJITError(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                               FunctionID fid, HRESULT status)
{
    struct tracer *t = impl(This);
    (void)fid;
    int idx = method_lookup(t, mod, tok);
    LOG_WARN("tracer: ReJIT of %s (method 0x%08X) failed with HRESULT %s; not traced",
             idx >= 0 ? t->methods[idx].name : "?", (unsigned)tok, HR_STR(status));
    return S_OK;
}

/* The traced method's index of function fid, or -1. */
static int traced_index(struct tracer *t, FunctionID fid)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    if (!atomic_load_explicit(&t->nmethods, memory_order_relaxed))
        return -1;
    if (FAILED(ICorProfilerInfo5_GetFunctionInfo(t->info, fid, &cls, &mod, &tok)))
        return -1;
    return method_lookup(t, mod, tok);
}

static int is_traced_function(struct tracer *t, FunctionID fid) { return traced_index(t, fid) >= 0; }

static HRESULT STDMETHODCALLTYPE tr_JITInlining(ICorProfilerCallback11 *This, FunctionID caller, FunctionID callee,
                                                BOOL *pfShouldInline)
{
    (void)caller;
    if (pfShouldInline && *pfShouldInline && is_traced_function(impl(This), callee))
        *pfShouldInline = FALSE;
    return S_OK;
}

/* An unhandled exception is about to end the process (common/unhandled.h): the last gasp,
 * on the dying thread, before the runtime aborts. */
static void check_unhandled(struct tracer *t, FunctionID fid)
{
    if (clrmux_unhandled_is_hook(&t->unhandled, (ICorProfilerInfo *)t->info, fid))
        clrmux_lastgasp_now();
}

/* ProcessStartupHooks is compiled (its ReadyToRun code refused): rewritten to start the agent. */
static void agent_boot_jit(struct tracer *t, FunctionID fid)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    if (!t->agent_boot || FAILED(ICorProfilerInfo5_GetFunctionInfo(t->info, fid, &cls, &mod, &tok)))
        return;
    struct traced_method *m = &t->methods[t->agent_boot - 1];
    if (m->module != mod || m->token != tok)
        return;
    char why[320];
    if (clrmux_agent_boot_rewrite(t->info, mod, &t->boot, why, sizeof why) == 0)
        LOG_DEBUG("tracer: %s rewritten to start the managed agent (%s)", m->name, why);
    else
        LOG_WARN("tracer: %s not rewritten: %s; no managed agent", m->name, why);
}

/* Once DiagnosticSource is loaded: Activity's ClassID, from the first JIT compilation or
 * precompiled-code lookup of one of its methods (before the class can be initialized). */
static void note_activity(struct tracer *t, FunctionID fid)
{
    if (!atomic_load_explicit(&t->ds_module, memory_order_acquire) ||
        atomic_load_explicit(&t->activity_cls, memory_order_relaxed))
        return;
    ClassID cls = 0;
    ModuleID mod = 0, cmod = 0;
    mdToken tok = 0;
    mdTypeDef td = 0;
    if (SUCCEEDED(ICorProfilerInfo5_GetFunctionInfo(t->info, fid, &cls, &mod, &tok)) && cls &&
        mod == t->activity.module && SUCCEEDED(ICorProfilerInfo5_GetClassIDInfo(t->info, cls, &cmod, &td)) &&
        cmod == mod && td == t->activity.type)
        atomic_store_explicit(&t->activity_cls, cls, memory_order_release);
}

static HRESULT STDMETHODCALLTYPE tr_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, BOOL safe)
{
    (void)safe;
    check_unhandled(impl(This), fid);
    note_activity(impl(This), fid);
    if (impl(This)->agent_boot && !atomic_load_explicit(&impl(This)->agent_ready, memory_order_relaxed))
        agent_boot_jit(impl(This), fid);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_JITCachedFunctionSearchStarted(ICorProfilerCallback11 *This, FunctionID fid,
                                                                   BOOL *pbUseCachedFunction)
{
    check_unhandled(impl(This), fid);
    note_activity(impl(This), fid);
    if (pbUseCachedFunction && *pbUseCachedFunction && is_traced_function(impl(This), fid))
        *pbUseCachedFunction = FALSE;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID obj)
{
    struct tracer *t = impl(This);
    if (!clrmux_span_depth()) {
        clrmux_span_unwind_reset_idle();
        return S_OK; /* no traced method open on this thread */
    }
    ClassID cls = 0;
    uint32_t id = 0;
    if (SUCCEEDED(ICorProfilerInfo5_GetClassFromObject(t->info, obj, &cls)) && cls)
        id = tracer_exception_name_id(t, obj, cls);
    clrmux_span_set_pending_exception(id);
    return S_OK;
}

/* A method span whose frame an exception unwinds ends here, not in a clause of the rewritten
 * IL: other children monitoring exceptions see the method's callbacks as they would alone
 * (spans.h, clrmux_span_unwind_enter). */
static HRESULT STDMETHODCALLTYPE tr_ExceptionUnwindFunctionEnter(ICorProfilerCallback11 *This, FunctionID fid)
{
    clrmux_span_unwind_enter(clrmux_span_depth() ? traced_index(impl(This), fid) : -1);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ExceptionUnwindFunctionLeave(ICorProfilerCallback11 *This)
{
    (void)This;
    clrmux_span_unwind_leave();
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ExceptionCatcherEnter(ICorProfilerCallback11 *This, FunctionID fid, ObjectID obj)
{
    (void)This, (void)fid, (void)obj;
    clrmux_span_unwind_caught();
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_Shutdown(ICorProfilerCallback11 *This)
{
    struct tracer *t = impl(This);
    if (atomic_exchange(&t->shut_down, 1))
        return S_OK;
    if (t->rj_started) { /* the ReJIT thread stops; ex_started and the last gasp are settled */
        pthread_mutex_lock(&t->rj_lock);
        t->rj_stop = 1;
        pthread_cond_broadcast(&t->rj_cond);
        while (t->rj_starting)
            pthread_cond_wait(&t->rj_cond, &t->rj_lock);
        pthread_mutex_unlock(&t->rj_lock);
    }
    clrmux_lastgasp_unregister(tracer_last_gasp, t); /* waits for a last gasp under way */
    /* The last spans and metrics, and the requests still queued (bounded), written here
     * rather than by the export thread: waking it and joining it (its exit unmaps its stack)
     * cost this thread ~0.5 ms of a short process's end. The export thread writes nothing
     * once `final` is set; it is told to stop and left to end with the process. */
    if (t->ex_started) {
        pthread_mutex_lock(&t->ex_lock);
        t->ex_stop = 1;
        pthread_mutex_unlock(&t->ex_lock);
        pthread_detach(t->ex_thread); /* a process that goes on (detach) gets its stack back */
    }
    atomic_store(&t->gasp_waiting, 1); /* the export thread lets go of wr_lock */
    pthread_mutex_lock(&t->wr_lock);
    atomic_store(&t->gasp_waiting, 0);
    const int gasped = t->final; /* the last gasp wrote everything and logged its summary */
    if (!gasped) {
        tracer_export_all(t, 0);
        tracer_export_metrics(t);
        tracer_finish_http(t);
        t->final = 1;
    }
    pthread_mutex_unlock(&t->wr_lock);
    if (!gasped && clrmux_log_get_level() >= CLRMUX_LOG_INFO) /* for the info line only */
        tracer_export_thread_times(t, &t->ex_run_ns, &t->ex_wait_ns);
    if (t->mout) {
        clrmux_spanfile_close(t->mout);
        t->mout = NULL;
    }
    for (int i = 0; i < t->ntargets; i++)
        if (!atomic_load(&t->target_hits[i]) && t->targets[i].line && !t->targets[i].integ) /* added at run time:
                                                                                             answered then */
            LOG_WARN("tracer: %s:%d: target %s!%s::%s%s matched no method", t->conf, t->targets[i].line,
                     t->targets[i].assembly, t->targets[i].type, t->targets[i].method,
                     t->targets[i].has_params ? "(...)" : "");
    if (!gasped)
        tracer_log_summary(t, NULL, 0);
    pthread_mutex_lock(&t->wr_lock);
    clrmux_spanfile_close(t->out);
    t->out = NULL;
    pthread_mutex_unlock(&t->wr_lock);
    return S_OK;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl tracer_vtbl = {
    .QueryInterface = tr_QueryInterface,
    .AddRef = tr_AddRef,
    .Release = tr_Release,
    CLRMUX_NOOP_VTBL(trd)
    .Initialize = tr_Initialize,
    .InitializeForAttach = tr_InitializeForAttach,
    .ProfilerAttachComplete = tr_ProfilerAttachComplete,
    .Shutdown = tr_Shutdown,
    .ModuleLoadFinished = tr_ModuleLoadFinished,
    .GetReJITParameters = tr_GetReJITParameters,
    .ReJITError = tr_ReJITError,
    .JITInlining = tr_JITInlining,
    .JITCachedFunctionSearchStarted = tr_JITCachedFunctionSearchStarted,
    .JITCompilationStarted = tr_JITCompilationStarted,
    .ExceptionThrown = tr_ExceptionThrown,
    .ExceptionUnwindFunctionEnter = tr_ExceptionUnwindFunctionEnter,
    .ExceptionUnwindFunctionLeave = tr_ExceptionUnwindFunctionLeave,
    .ExceptionCatcherEnter = tr_ExceptionCatcherEnter,
};
#pragma GCC diagnostic pop

ICorProfilerCallback11 *clrmux_tracer_create(const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir,
                                             const struct clrmux_tracer_host *host, int *version)
{
    /* ~43 KB, mostly path and header buffers and caches used later or never: mapped zeroed
     * (lazymem.h), so that only the pages written fault in (calloc's memset faulted in all
     * ten, ~0.2 ms at start-up on a VM); a root region for LeakSanitizer, which does not scan
     * mappings, as the tracer holds heap pointers */
    struct tracer *t = clrmux_lazy_calloc(1, sizeof *t);
    if (!t) {
        LOG_ERROR("child '%s': out of memory; child skipped", cc->name);
        return NULL;
    }
    struct tracer *expected = NULL;
    if (!atomic_compare_exchange_strong(&the_tracer, &expected, t)) {
        LOG_ERROR("child '%s': a tracer is already loaded (child '%s'); only one tracer per process; child skipped",
                  cc->name, expected->child);
        clrmux_lazy_free(t);
        return NULL;
    }
    tracer_lsan_root(t, sizeof *t);
    t->export_pass = tracer_activity_poll; /* the export thread's periodic check (export.c) */
    if (host)
        t->host = *host;
    t->iface.lpVtbl = &tracer_vtbl;
    atomic_store(&t->refs, 1);
    snprintf(t->child, sizeof t->child, "%s", cc->name);
    pthread_mutex_init(&t->reg_lock, NULL);
    pthread_mutex_init(&t->rj_lock, NULL);
    pthread_cond_init(&t->rj_cond, NULL);
    pthread_mutex_init(&t->rw_lock, NULL);
    pthread_mutex_init(&t->exc_lock, NULL);
    pthread_mutex_init(&t->ex_lock, NULL);
    pthread_mutex_init(&t->wr_lock, NULL);
    pthread_cond_init(&t->ex_cond, NULL);
    /* ~9 MB of worst-case tables, touched only as they fill (no start-up cost; the 80 KB
     * thread-name cache too: calloc cleared it at start-up) */
    t->methods = clrmux_lazy_calloc(MAX_METHODS, sizeof *t->methods);
    /* hash-indexed or rarely used: mapped without clrmux_lazy_calloc's length header, whose
     * write would fault in a page that may never be used (never freed once the tracer runs) */
    t->slots = clrmux_map_zero(METHOD_SLOTS * sizeof *t->slots);
    t->exc_names = clrmux_map_zero(MAX_EXC_NAMES * sizeof *t->exc_names);
    t->exc_msgs = clrmux_map_zero(MAX_EXC_NAMES * sizeof *t->exc_msgs);
    t->tnames = clrmux_map_zero(THREAD_NAMES * sizeof *t->tnames);
    if (!t->methods || !t->slots || !t->exc_names || !t->exc_msgs || !t->tnames || tracer_configure(t, cc, cfg_path, cfg_dir) != 0 ||
        !(t->stage = clrmux_lazy_calloc((t->stage_cap = t->buffer_spans < STAGE_MAX ? t->buffer_spans : STAGE_MAX), sizeof *t->stage))) {
        LOG_ERROR("child '%s': tracer setup failed; child skipped", cc->name);
        atomic_store(&the_tracer, NULL);
        clrmux_lazy_free(t->methods), clrmux_lazy_free(t->stage);
        clrmux_unmap_zero(t->slots, METHOD_SLOTS * sizeof *t->slots);
        clrmux_unmap_zero(t->exc_names, MAX_EXC_NAMES * sizeof *t->exc_names);
        clrmux_unmap_zero(t->exc_msgs, MAX_EXC_NAMES * sizeof *t->exc_msgs);
        clrmux_unmap_zero(t->tnames, THREAD_NAMES * sizeof *t->tnames);
        clrmux_lazy_free(t->targets);
        free((void *)t->target_hits);
        tracer_lsan_unroot(t, sizeof *t);
        clrmux_lazy_free(t);
        return NULL;
    }
    *version = 11;
    return &t->iface;
}
