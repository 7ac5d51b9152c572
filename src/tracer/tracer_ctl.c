/* Run-time control of the built-in tracer (tracer_ctl.h): trace targets added and removed
 * while the process runs, and the tracer's counts, for the control channel's thread. It
 * calls down into the tracer (its callbacks through the vtable, the ReJIT thread's queue);
 * the tracer never calls this file. */
#include "tracer/tracer_ctl.h"
#include "tracer/tracer_impl.h"

#include <stdarg.h>

/* one control operation at a time (the targets' array is appended to under it) */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(CLRMUX_PRINTF_FORMAT, 3, 4)));
static void say(char *msg, size_t msglen, const char *fmt, ...)
{
    if (!msg || !msglen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
}

/* The running tracer, or NULL with the reason in msg. */
static struct tracer *running(char *msg, size_t msglen)
{
    struct tracer *t = atomic_load(&the_tracer);
    if (!t) {
        say(msg, msglen, "no built-in tracer in this process (add a [child tracer] section with builtin = tracer "
                         "to its loader.conf)");
        return NULL;
    }
    if (!t->info || !t->rj_started) {
        say(msg, msglen, "the built-in tracer '%s' is not running (its Initialize failed: see the log)", t->child);
        return NULL;
    }
    if (atomic_load(&t->shut_down)) {
        say(msg, msglen, "the built-in tracer '%s' has shut down", t->child);
        return NULL;
    }
    return t;
}

int clrmux_tracer_ctl_present(void)
{
    char msg[8];
    return running(msg, sizeof msg) != NULL;
}

static void target_text(const struct clrmux_target *tg, char *out, size_t outsz)
{
    size_t n = (size_t)snprintf(out, outsz, "%s!%s::%s", tg->assembly, tg->type, tg->method);
    if (!tg->has_params || n >= outsz)
        return;
    n += (size_t)snprintf(out + n, outsz - n, "(");
    for (int i = 0; i < tg->nparams && n < outsz; i++)
        n += (size_t)snprintf(out + n, outsz - n, "%s%s", i ? "," : "", tg->params[i]);
    if (n < outsz)
        snprintf(out + n, outsz - n, ")");
}

static int same_target(const struct clrmux_target *a, const struct clrmux_target *b)
{
    if (strcasecmp(a->assembly, b->assembly) || strcmp(a->type, b->type) || strcmp(a->method, b->method) ||
        a->has_params != b->has_params || a->nparams != b->nparams)
        return 0;
    for (int i = 0; i < a->nparams; i++)
        if (strcmp(a->params[i], b->params[i]))
            return 0;
    return 1;
}

static int find_target(struct tracer *t, const struct clrmux_target *tg)
{
    int n = __atomic_load_n(&t->ntargets, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (!t->targets[i].integ && same_target(&t->targets[i], tg))
            return i;
    return -1;
}

/* The assembly name of module `mod` (a real, non-dynamic module), or -1. */
static int module_assembly(struct tracer *t, ModuleID mod, char *out, size_t outsz)
{
    LPCBYTE base = NULL;
    WCHAR wpath[512], wname[256];
    ULONG len = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (FAILED(ICorProfilerInfo5_GetModuleInfo2(t->info, mod, &base, 512, &len, wpath, &asm_id, &flags)) ||
        (flags & (COR_PRF_MODULE_DYNAMIC | COR_PRF_MODULE_RESOURCE)))
        return -1;
    if (FAILED(ICorProfilerInfo5_GetAssemblyInfo(t->info, asm_id, 256, &len, wname, NULL, NULL)))
        return -1;
    tracer_to_utf8(wname, len, out, outsz);
    return 0;
}

/* Each loaded module of `assembly` gets the tracer's ModuleLoadFinished again, which matches
 * the targets (the new one included) and asks for a ReJIT of the methods not registered
 * before. Returns the modules matched, or -1 when the modules cannot be listed. */
static int match_loaded(struct tracer *t, const char *assembly)
{
    ICorProfilerModuleEnum *en = NULL;
    if (FAILED(ICorProfilerInfo5_EnumModules(t->info, &en)) || !en)
        return -1;
    ModuleID mods[64];
    ULONG got = 0;
    int matched = 0;
    char name[256];
    while (SUCCEEDED(ICorProfilerModuleEnum_Next(en, 64, mods, &got)) && got > 0)
        for (ULONG i = 0; i < got; i++)
            if (module_assembly(t, mods[i], name, sizeof name) == 0 && strcasecmp(name, assembly) == 0) {
                t->iface.lpVtbl->ModuleLoadFinished(&t->iface, mods[i], S_OK);
                matched++;
            }
    ICorProfilerModuleEnum_Release(en);
    return matched;
}

/* A ReJIT (or a revert) of the methods of target ti, one request per module; returns the
 * methods. *worst: the last failure of a revert. */
static uint32_t for_methods(struct tracer *t, int ti, int revert, HRESULT *worst)
{
    uint32_t n = atomic_load_explicit(&t->nmethods, memory_order_acquire), total = 0;
    mdMethodDef *toks = calloc(n ? n : 1, sizeof *toks);
    char *done = calloc(n ? n : 1, 1);
    if (!toks || !done) {
        free(toks), free(done);
        *worst = E_OUTOFMEMORY;
        return 0;
    }
    char assembly[256];
    snprintf(assembly, sizeof assembly, "%s", t->targets[ti].assembly);
    for (uint32_t i = 0; i < n; i++) {
        if (done[i] || t->methods[i].target != ti)
            continue;
        ModuleID mod = t->methods[i].module;
        ULONG k = 0;
        for (uint32_t j = i; j < n; j++)
            if (!done[j] && t->methods[j].target == ti && t->methods[j].module == mod) {
                done[j] = 1;
                toks[k++] = t->methods[j].token;
            }
        if (revert) {
            HRESULT hr = tracer_request_revert(t, mod, toks, k, assembly);
            if (FAILED(hr))
                *worst = hr;
        } else {
            tracer_request_rejit(t, mod, toks, k, assembly);
        }
        total += k;
    }
    free(toks), free(done);
    return total;
}

static uint32_t methods_of(struct tracer *t, int ti)
{
    uint32_t n = atomic_load_explicit(&t->nmethods, memory_order_acquire), k = 0;
    for (uint32_t i = 0; i < n; i++)
        k += t->methods[i].target == ti;
    return k;
}

/* The start of `trace add` and `trace remove`, called with ctl_lock held: the running tracer and TEXT parsed
 * into *TG (calloc'd, the caller frees it) with its canonical text in CANON (CLRMUX_TRACER_CTL_TEXT_MAX bytes).
 * NULL with the reason in MSG when the tracer is not running, memory ran out or TEXT is not a target. */
static struct tracer *command_target(const char *text, char *msg, size_t msglen, struct clrmux_target **tg, char *canon)
{
    char err[400];
    struct tracer *t = running(msg, msglen);
    *tg = t ? calloc(1, sizeof **tg) : NULL;
    if (!t)
        return NULL;
    if (!*tg) {
        say(msg, msglen, "out of memory");
        return NULL;
    }
    if (clrmux_target_parse(text, *tg, err, sizeof err) != 0) {
        say(msg, msglen, "bad target %s", err);
        return NULL;
    }
    target_text(*tg, canon, CLRMUX_TRACER_CTL_TEXT_MAX);
    return t;
}

int clrmux_tracer_ctl_add(const char *text, char *msg, size_t msglen)
{
    say(msg, msglen, "%s", "");
    pthread_mutex_lock(&ctl_lock);
    int rc = -1;
    struct clrmux_target *tg = NULL;
    char canon[CLRMUX_TRACER_CTL_TEXT_MAX];
    struct tracer *t = command_target(text, msg, msglen, &tg, canon);
    if (!t)
        goto out;
    /* the rewrites this command asks for reach the callers that inlined the methods (rejit.c):
     * a method traced from now on may be hot, inlined into its callers already */
    tracer_rejit_inliners = 1;
    int ti = find_target(t, tg);
    if (ti >= 0 && !atomic_load(&t->target_off[ti])) {
        say(msg, msglen, "%s is already traced (%u method(s))", canon, methods_of(t, ti));
        rc = 0;
        goto out;
    }
    if (ti >= 0) { /* removed before: its methods are rewritten again, and it matches new modules */
        atomic_store(&t->target_off[ti], 0);
        HRESULT hr = S_OK;
        uint32_t k = for_methods(t, ti, 0, &hr);
        LOG_INFO("tracer: control: %s traced again: ReJIT requested for %u method(s)", canon, k);
        say(msg, msglen, "%s traced again: %u method(s) rewritten through ReJIT, traced from their next call", canon, k);
        rc = 0;
        goto out;
    }
    int n = __atomic_load_n(&t->ntargets, __ATOMIC_ACQUIRE);
    if (n >= MAX_TARGETS) {
        say(msg, msglen, "the tracer has %d targets, its most; remove one first", MAX_TARGETS);
        goto out;
    }
    t->targets[n] = *tg;
    t->targets[n].line = 0;
    atomic_store(&t->target_hits[n], 0);
    atomic_store(&t->target_off[n], 0);
    __atomic_store_n(&t->ntargets, n + 1, __ATOMIC_RELEASE); /* ModuleLoadFinished sees it from now on */
    uint32_t before = methods_of(t, n);
    int modules = match_loaded(t, tg->assembly);
    uint32_t k = methods_of(t, n) - before;
    if (modules < 0) {
        LOG_WARN("tracer: control: %s added; the loaded modules could not be listed: traced in modules loaded from "
                 "now on", canon);
        say(msg, msglen, "%s added; the loaded modules could not be listed (EnumModules failed): its methods are traced "
                         "when a module of %s loads", canon, tg->assembly);
        rc = 0;
    } else if (modules == 0) {
        LOG_INFO("tracer: control: %s added; %s is not loaded yet", canon, tg->assembly);
        say(msg, msglen, "%s added; %s is not loaded yet: its methods are traced when it loads", canon, tg->assembly);
        rc = 0;
    } else if (!atomic_load(&t->target_hits[n])) {
        atomic_store(&t->target_off[n], 1); /* listed as removed: it matches nothing */
        LOG_WARN("tracer: control: %s matches no method of %s; not added", canon, tg->assembly);
        say(msg, msglen, "%s matches no method in %s (loaded); nothing traced", canon, tg->assembly);
    } else {
        LOG_INFO("tracer: control: %s added: ReJIT requested for %u method(s)", canon, k);
        say(msg, msglen, "%s added: %u method(s) rewritten through ReJIT, traced from their next call%s", canon, k,
            k ? "" : " (every matching method has no IL body or is traced already: see the log)");
        rc = 0;
    }
out:
    tracer_rejit_inliners = 0;
    free(tg);
    pthread_mutex_unlock(&ctl_lock);
    return rc;
}

int clrmux_tracer_ctl_remove(const char *text, char *msg, size_t msglen)
{
    say(msg, msglen, "%s", "");
    pthread_mutex_lock(&ctl_lock);
    int rc = -1;
    struct clrmux_target *tg = NULL;
    char canon[CLRMUX_TRACER_CTL_TEXT_MAX];
    struct tracer *t = command_target(text, msg, msglen, &tg, canon);
    if (!t)
        goto out;
    int ti = find_target(t, tg);
    if (ti < 0 || atomic_load(&t->target_off[ti])) {
        say(msg, msglen, "%s is not traced (`trace list` shows the targets)", canon);
        goto out;
    }
    atomic_store(&t->target_off[ti], 1);
    HRESULT hr = S_OK;
    uint32_t k = for_methods(t, ti, 1, &hr);
    if (FAILED(hr)) {
        LOG_WARN("tracer: control: %s removed; RequestRevert of its %u method(s) failed with HRESULT %s", canon, k,
                 HR_STR(hr));
        say(msg, msglen, "%s removed; RequestRevert of its %u method(s) failed with HRESULT %s (see the log)", canon, k,
            HR_STR(hr));
        goto out;
    }
    LOG_INFO("tracer: control: %s removed: the tracer's rewrite of %u method(s) reverted", canon, k);
    say(msg, msglen, "%s removed: the tracer's rewrite of %u method(s) reverted (other children's rewrites stay)",
        canon, k);
    rc = 0;
out:
    free(tg);
    pthread_mutex_unlock(&ctl_lock);
    return rc;
}

int clrmux_tracer_ctl_info(struct clrmux_tracer_info *info, struct clrmux_tracer_target_info *targets, int max)
{
    memset(info, 0, sizeof *info);
    struct tracer *t = atomic_load(&the_tracer);
    if (!t || !t->info || !t->rj_started)
        return -1;
    pthread_mutex_lock(&ctl_lock);
    snprintf(info->child, sizeof info->child, "%s", t->child);
    info->shut_down = atomic_load(&t->shut_down);
    info->rewritten = atomic_load(&t->rewritten);
    info->skipped = atomic_load(&t->skipped);
    uint32_t nm = atomic_load_explicit(&t->nmethods, memory_order_acquire);
    info->methods = nm;
    int nt = __atomic_load_n(&t->ntargets, __ATOMIC_ACQUIRE);
    info->ntargets = 0; /* the `trace =` targets, not the integrations' (integ.h) */
    for (int i = 0; i < nt; i++)
        info->ntargets += !t->targets[i].integ;
    /* the writer's counts: under wr_lock when it can be had within 0.5 s (the export thread
     * holds it while it writes a batch), else read as they are (each a single word) */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 500000000;
    if (dl.tv_nsec >= 1000000000)
        dl.tv_sec++, dl.tv_nsec -= 1000000000;
    const int locked = pthread_mutex_timedlock(&t->wr_lock, &dl) == 0;
    info->written = __atomic_load_n(&t->written, __ATOMIC_RELAXED);
    info->lines = __atomic_load_n(&t->lines, __ATOMIC_RELAXED);
    info->queued = __atomic_load_n(&t->queued, __ATOMIC_RELAXED);
    info->requests = __atomic_load_n(&t->requests, __ATOMIC_RELAXED);
    if (locked && t->out) {
        struct clrmux_spanfile_stats fs;
        clrmux_spanfile_stats(t->out, &fs);
        info->deleted = fs.spans_dropped;
    }
    if (locked)
        pthread_mutex_unlock(&t->wr_lock);
    if (t->out || !t->http)
        snprintf(info->output, sizeof info->output, "%s", t->output);
    if (t->http)
        snprintf(info->endpoint, sizeof info->endpoint, "%s", t->endpoint);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    info->dropped = st.dropped;
    info->unsampled = st.unsampled;
    info->too_deep = st.too_deep;
    struct clrmux_method_metrics *mm = nm && max > 0 ? calloc(nm, sizeof *mm) : NULL;
    if (mm)
        clrmux_metrics_snapshot(mm, nm);
    for (int i = 0, k = 0; i < nt && k < max; i++) {
        if (t->targets[i].integ)
            continue; /* an integration's (integ.h): not a `trace =` target */
        struct clrmux_tracer_target_info *o = &targets[k++];
        memset(o, 0, sizeof *o);
        target_text(&t->targets[i], o->text, sizeof o->text);
        o->line = t->targets[i].line;
        o->removed = atomic_load(&t->target_off[i]);
        for (uint32_t m = 0; m < nm; m++) {
            if (t->methods[m].target != i)
                continue;
            o->methods++;
            if (mm) {
                o->calls += mm[m].calls;
                o->errors += mm[m].errors;
            }
        }
    }
    free(mm);
    pthread_mutex_unlock(&ctl_lock);
    return (int)info->ntargets;
}
