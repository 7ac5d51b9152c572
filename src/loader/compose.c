/* Composition of several children's instrumentation of one method: the per-method record
 * (ReJIT owners, held-back requests, JIT-time writers), the ReJIT chain run in
 * GetReJITParameters with a function control per child, revert by one owner, and the
 * composition of instrumented-code maps. See compose.h for the model. */
#include "loader/compose.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/cor.h"
#include "common/log.h"
#include "common/utf16.h"
#include "loader/mux.h"

#define NBUCKETS 4096

struct body {
    struct body *next;
    ULONG size;
    BYTE data[];
};

struct rec {
    struct rec *next;
    ModuleID module;
    mdMethodDef method;
    uint64_t owners;      /* requests in force */
    uint64_t pending;     /* held back until the first compilation */
    uint64_t jit_writers; /* Info::SetILFunctionBody at JIT time */
    int with_inliners;    /* some owner used RequestReJITWithInliners... */
    DWORD inliner_flags;  /* ...with these flags (OR) */
    int compiled;         /* JITCompilationStarted seen (or code found) */
    int inliner;          /* re-JITted because it inlined a requested method */
    struct body *bodies;  /* intermediate bodies of the last composition */
    struct body *base;    /* composed at JIT time: the method's IL before the ReJIT owners' */
};

struct clrmux_compose {
    pthread_mutex_t lock;
    struct rec *buckets[NBUCKETS];
    _Atomic int nrecs;
    _Atomic int npending;                /* records with pending != 0 */
    _Atomic uint64_t inliner_children;   /* asked for COR_PRF_REJIT_INLINING_CALLBACKS */
};

struct clrmux_compose *clrmux_compose_create(void)
{
    struct clrmux_compose *cs = calloc(1, sizeof *cs);
    if (cs)
        pthread_mutex_init(&cs->lock, NULL);
    return cs;
}

static void free_bodies(struct body *b)
{
    while (b) {
        struct body *n = b->next;
        free(b);
        b = n;
    }
}

void clrmux_compose_free(struct clrmux_compose *cs)
{
    if (!cs)
        return;
    for (int i = 0; i < NBUCKETS; i++) {
        struct rec *r = cs->buckets[i];
        while (r) {
            struct rec *n = r->next;
            free_bodies(r->bodies);
            free(r->base);
            free(r);
            r = n;
        }
    }
    pthread_mutex_destroy(&cs->lock);
    free(cs);
}

static size_t bucket_of(ModuleID module, mdMethodDef method)
{
    uint64_t h = (uint64_t)module * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)method * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 40) & (NBUCKETS - 1);
}

/* Under cs->lock. */
static struct rec *find(struct clrmux_compose *cs, ModuleID module, mdMethodDef method)
{
    for (struct rec *r = cs->buckets[bucket_of(module, method)]; r; r = r->next)
        if (r->module == module && r->method == method)
            return r;
    return NULL;
}

/* Under cs->lock. NULL on OOM (logged). */
static struct rec *find_or_add(struct clrmux_compose *cs, ModuleID module, mdMethodDef method)
{
    struct rec *r = find(cs, module, method);
    if (r)
        return r;
    r = calloc(1, sizeof *r);
    if (!r) {
        LOG_ERROR("out of memory: method 0x%08x of module 0x%lx not composed", (unsigned)method, (unsigned long)module);
        return NULL;
    }
    r->module = module;
    r->method = method;
    size_t b = bucket_of(module, method);
    r->next = cs->buckets[b];
    cs->buckets[b] = r;
    atomic_fetch_add(&cs->nrecs, 1);
    return r;
}

static uint64_t bit_of(const struct clrmux_child *c) { return 1ull << (c->index & 63); }

uint64_t clrmux_compose_owners(struct clrmux_mux *m, ModuleID module, mdMethodDef method)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->nrecs, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, module, method);
    uint64_t o = r ? r->owners : 0;
    pthread_mutex_unlock(&cs->lock);
    return o;
}

void clrmux_compose_add_owner(struct clrmux_mux *m, ModuleID module, mdMethodDef method, int child)
{
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find_or_add(cs, module, method);
    if (r)
        r->owners |= 1ull << (child & 63);
    pthread_mutex_unlock(&cs->lock);
}

/* Names of the children in `set`, in file order, "a, b" (for log lines). */
static void names_of(struct clrmux_mux *m, uint64_t set, char *out, size_t outsz)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < m->nchildren && len + 1 < outsz; i++)
        if (set >> (i & 63) & 1) {
            int w = snprintf(out + len, outsz - len, "%s'%s'", len ? " -> " : "", m->children[i].name);
            if (w < 0)
                break;
            len += (size_t)w;
        }
}

/* "Namespace.Type::Method (0x06000001)" for log lines; the token alone when metadata fails. */
static void method_name(struct clrmux_mux *m, ModuleID module, mdMethodDef method, char *out, size_t outsz)
{
    snprintf(out, outsz, "method 0x%08x", (unsigned)method);
    IUnknown *unk = NULL;
    if (!m->info || FAILED(m->info->lpVtbl->GetModuleMetaData(m->info, module, 0 /* ofRead */, &IID_IMetaDataImport,
                                                               &unk)) || !unk)
        return;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    WCHAR wm[256], wt[256];
    ULONG nm = 0, nt = 0;
    mdTypeDef td = 0;
    if (SUCCEEDED(imp->lpVtbl->GetMethodProps(imp, method, &td, wm, 256, &nm, NULL, NULL, NULL, NULL, NULL)) &&
        SUCCEEDED(imp->lpVtbl->GetTypeDefProps(imp, td, wt, 256, &nt, NULL, NULL))) {
        char sm[256], st[256];
        clrmux_utf16_to_utf8(wm, nm ? nm - 1 : 0, sm, sizeof sm);
        clrmux_utf16_to_utf8(wt, nt ? nt - 1 : 0, st, sizeof st);
        snprintf(out, outsz, "%s::%s (0x%08x)", st, sm, (unsigned)method);
    }
    imp->lpVtbl->Release(imp);
}

/* Whether a live child other than `self` watches JIT compilation. */
static int other_jit_watcher(struct clrmux_mux *m, struct clrmux_child *self)
{
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        if (c != self && clrmux_child_live(c, 1) &&
            (atomic_load(&c->mask_low) & COR_PRF_MONITOR_JIT_COMPILATION))
            return 1;
    }
    return 0;
}

/* Whether the runtime has code for the method already (non-generic methods only: a generic
 * method's instantiations have no FunctionID for the token). */
static int has_code(struct clrmux_mux *m, ModuleID module, mdMethodDef method)
{
    FunctionID fid = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionFromToken(m->info, module, method, &fid)) || !fid)
        return 0;
    ULONG32 n = 0;
    return SUCCEEDED(m->info->lpVtbl->GetCodeInfo2(m->info, fid, 0, &n, NULL)) && n > 0;
}

static HRESULT runtime_rejit(struct clrmux_mux *m, int with_inliners, DWORD flags, ULONG n, ModuleID *mods,
                             mdMethodDef *methods)
{
    if (with_inliners && m->info_version >= 10)
        return m->info->lpVtbl->RequestReJITWithInliners(m->info, flags, n, mods, methods);
    return m->info->lpVtbl->RequestReJIT(m->info, n, mods, methods);
}

HRESULT clrmux_compose_request_rejit(struct clrmux_mux *m, struct clrmux_child *child, long inliner_flags, ULONG n,
                                     ModuleID *mods, mdMethodDef *methods)
{
    struct clrmux_compose *cs = m->compose;
    if (!(atomic_load(&child->mask_low) & COR_PRF_ENABLE_REJIT)) {
        LOG_WARN("child '%s': RequestReJIT refused (CORPROF_E_REJIT_NOT_ENABLED): its event mask lacks "
                 "COR_PRF_ENABLE_REJIT, as the runtime would refuse it alone", child->name);
        return CORPROF_E_REJIT_NOT_ENABLED;
    }
    if (n && (!mods || !methods))
        return E_INVALIDARG;
    if (n == 0)
        return runtime_rejit(m, inliner_flags >= 0, (DWORD)(inliner_flags < 0 ? 0 : inliner_flags), 0, mods, methods);
    ModuleID *fm = malloc(n * sizeof *fm);
    mdMethodDef *ft = malloc(n * sizeof *ft);
    if (!fm || !ft) {
        free(fm), free(ft);
        return E_OUTOFMEMORY;
    }
    const uint64_t bit = bit_of(child);
    atomic_store(&child->used_rejit, 1);
    /* a request with inliners is never held back: its target may run only inlined in other
     * methods, and would then never be compiled on its own */
    const int watchers = inliner_flags < 0 && other_jit_watcher(m, child);
    if (inliner_flags >= 0 && (inliner_flags & COR_PRF_REJIT_INLINING_CALLBACKS))
        atomic_fetch_or(&cs->inliner_children, bit);
    ULONG nf = 0, held = 0;
    for (ULONG i = 0; i < n; i++) {
        int compiled = !watchers || has_code(m, mods[i], methods[i]);
        int hold = 0;
        pthread_mutex_lock(&cs->lock);
        struct rec *r = find_or_add(cs, mods[i], methods[i]);
        if (r) {
            r->owners |= bit;
            if (inliner_flags >= 0) {
                r->with_inliners = 1;
                r->inliner_flags |= (DWORD)inliner_flags;
            }
            if (compiled)
                r->compiled = 1;
            if (!r->compiled) {
                if (!r->pending)
                    atomic_fetch_add(&cs->npending, 1);
                r->pending |= bit;
                hold = 1;
            }
        }
        pthread_mutex_unlock(&cs->lock);
        if (hold) {
            held++;
            LOG_DEBUG("child '%s': ReJIT of method 0x%08x (module 0x%lx) held back until its first compilation, "
                      "so that the children watching JIT compilation see it", child->name, (unsigned)methods[i],
                      (unsigned long)mods[i]);
        } else {
            fm[nf] = mods[i];
            ft[nf++] = methods[i];
        }
    }
    if (held)
        clrmux_add_own_mask(m, COR_PRF_MONITOR_CACHE_SEARCHES); /* to refuse precompiled code for them */
    HRESULT hr = S_OK;
    if (nf) {
        hr = runtime_rejit(m, inliner_flags >= 0, (DWORD)(inliner_flags < 0 ? 0 : inliner_flags), nf, fm, ft);
        if (FAILED(hr))
            LOG_WARN("child '%s': the runtime refused ReJIT of %u method(s): HRESULT 0x%08X", child->name,
                     (unsigned)nf, (unsigned)hr);
    }
    free(fm), free(ft);
    return hr;
}

HRESULT clrmux_compose_request_revert(struct clrmux_mux *m, struct clrmux_child *child, ULONG n, ModuleID *mods,
                                      mdMethodDef *methods, HRESULT *status)
{
    struct clrmux_compose *cs = m->compose;
    if (!(atomic_load(&child->mask_low) & COR_PRF_ENABLE_REJIT)) {
        LOG_WARN("child '%s': RequestRevert refused (CORPROF_E_REJIT_NOT_ENABLED): its event mask lacks "
                 "COR_PRF_ENABLE_REJIT, as the runtime would refuse it alone", child->name);
        return CORPROF_E_REJIT_NOT_ENABLED;
    }
    if (n == 0)
        return S_OK;
    if (!mods || !methods)
        return E_INVALIDARG;
    /* the runtime reverts what nobody else rewrites, the others' rewrites are rebuilt */
    ModuleID *rvm = malloc(n * sizeof *rvm), *rjm = malloc(n * sizeof *rjm);
    mdMethodDef *rvt = malloc(n * sizeof *rvt), *rjt = malloc(n * sizeof *rjt);
    ULONG *rvi = malloc(n * sizeof *rvi);
    if (!rvm || !rjm || !rvt || !rjt || !rvi) {
        free(rvm), free(rjm), free(rvt), free(rjt), free(rvi);
        return E_OUTOFMEMORY;
    }
    ULONG nrv = 0, nrj = 0;
    atomic_store(&child->used_rejit, 1);
    int with_inliners = 0;
    DWORD flags = 0;
    const uint64_t bit = bit_of(child);
    for (ULONG i = 0; i < n; i++) {
        if (status)
            status[i] = S_OK;
        pthread_mutex_lock(&cs->lock);
        struct rec *r = find(cs, mods[i], methods[i]);
        int was_owner = r && (r->owners & bit);
        int was_pending = was_owner && (r->pending & bit);
        int others = 0;
        if (was_owner) {
            r->owners &= ~bit;
            if (was_pending) {
                r->pending &= ~bit;
                if (!r->pending)
                    atomic_fetch_sub(&cs->npending, 1);
            }
            /* composed at JIT time: the runtime's own IL holds the owners' rewrites, so even
             * the last owner's revert is a rebuild (from the base) */
            others = (r->owners & ~r->pending) != 0 || r->base;
            if (others && r->with_inliners) {
                with_inliners = 1;
                flags |= r->inliner_flags;
            }
        }
        pthread_mutex_unlock(&cs->lock);
        if (was_pending)
            continue; /* held back: nothing reached the runtime for this child */
        if (others) {
            rjm[nrj] = mods[i];
            rjt[nrj++] = methods[i];
            char names[256];
            names_of(m, clrmux_compose_owners(m, mods[i], methods[i]), names, sizeof names);
            LOG_DEBUG("child '%s': revert of method 0x%08x (module 0x%lx): rebuilt for %s", child->name,
                      (unsigned)methods[i], (unsigned long)mods[i], names);
        } else {
            rvm[nrv] = mods[i];
            rvt[nrv] = methods[i];
            rvi[nrv++] = i;
        }
    }
    HRESULT hr = S_OK;
    if (nrv) {
        HRESULT *st = calloc(nrv, sizeof *st);
        hr = m->info->lpVtbl->RequestRevert(m->info, nrv, rvm, rvt, st);
        if (status && st)
            for (ULONG k = 0; k < nrv; k++)
                status[rvi[k]] = st[k];
        free(st);
    }
    if (nrj) {
        HRESULT h2 = runtime_rejit(m, with_inliners, flags, nrj, rjm, rjt);
        if (FAILED(h2)) {
            LOG_WARN("child '%s': rebuilding %u method(s) for their other owners failed: HRESULT 0x%08X", child->name,
                     (unsigned)nrj, (unsigned)h2);
            if (SUCCEEDED(hr))
                hr = h2;
        }
    }
    free(rvm), free(rjm), free(rvt), free(rjt), free(rvi);
    return hr;
}

/* ---- the chain ------------------------------------------------------------------------ */

struct chain {
    struct chain *prev;
    ModuleID module;
    mdMethodDef method;
    const BYTE *in; /* the body the current link reads; NULL = the runtime's */
    ULONG in_size;
    struct body *bodies; /* allocated by this chain */
};

static __thread struct chain *tls_chain;

int clrmux_compose_il_body(struct clrmux_mux *m, struct clrmux_child *child, ModuleID module, mdMethodDef method,
                           LPCBYTE *header, ULONG *size)
{
    (void)child;
    struct chain *c = tls_chain;
    if (c && c->module == module && c->method == method) {
        if (!c->in)
            return 0;
        if (header)
            *header = c->in;
        if (size)
            *size = c->in_size;
        return 1;
    }
    /* a method composed at JIT time: outside a composition, children read the IL without the
     * ReJIT owners' rewrites, as they would alone */
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->nrecs, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, module, method);
    const struct body *b = r ? r->base : NULL;
    pthread_mutex_unlock(&cs->lock);
    if (!b)
        return 0;
    if (header)
        *header = b->data;
    if (size)
        *size = b->size;
    return 1;
}

/* One child's ICorProfilerFunctionControl for one composition. */
struct fcw {
    ICorProfilerFunctionControl iface;
    _Atomic LONG refs;
    struct chain *chain; /* NULL once the child's GetReJITParameters returned */
    struct body *out;
    int has_flags;
    DWORD flags;
    COR_IL_MAP *map;
    ULONG nmap;
};

static struct fcw *fcw_of(ICorProfilerFunctionControl *i) { return (struct fcw *)i; }

static HRESULT STDMETHODCALLTYPE fcw_QueryInterface(ICorProfilerFunctionControl *This, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (!IsEqualIID(riid, &IID_IUnknown) && !IsEqualIID(riid, &IID_ICorProfilerFunctionControl))
        return E_NOINTERFACE;
    *ppv = This;
    atomic_fetch_add(&fcw_of(This)->refs, 1);
    return S_OK;
}

static ULONG STDMETHODCALLTYPE fcw_AddRef(ICorProfilerFunctionControl *This)
{
    return (ULONG)atomic_fetch_add(&fcw_of(This)->refs, 1) + 1;
}

/* Freed by the composition when only its own reference is left; a child that keeps one
 * keeps the (then inert) object. */
static ULONG STDMETHODCALLTYPE fcw_Release(ICorProfilerFunctionControl *This)
{
    LONG n = atomic_fetch_sub(&fcw_of(This)->refs, 1) - 1;
    return (ULONG)(n < 0 ? 0 : n);
}

static HRESULT STDMETHODCALLTYPE fcw_SetCodegenFlags(ICorProfilerFunctionControl *This, DWORD flags)
{
    struct fcw *w = fcw_of(This);
    if (!w->chain)
        return CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
    w->flags = flags;
    w->has_flags = 1;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fcw_SetILFunctionBody(ICorProfilerFunctionControl *This, ULONG cb, LPCBYTE pb)
{
    struct fcw *w = fcw_of(This);
    if (!w->chain)
        return CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
    if (cb == 0 || !pb)
        return E_INVALIDARG; /* as the runtime's function control */
    struct body *b = malloc(sizeof *b + cb);
    if (!b)
        return E_OUTOFMEMORY;
    b->size = cb;
    memcpy(b->data, pb, cb);
    b->next = w->chain->bodies;
    w->chain->bodies = b;
    w->out = b;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fcw_SetILInstrumentedCodeMap(ICorProfilerFunctionControl *This, ULONG n,
                                                             COR_IL_MAP *map)
{
    struct fcw *w = fcw_of(This);
    if (!w->chain)
        return CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
    if (n && !map)
        return E_INVALIDARG;
    COR_IL_MAP *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy)
        return E_OUTOFMEMORY;
    if (n)
        memcpy(copy, map, n * sizeof *copy);
    free(w->map);
    w->map = copy;
    w->nmap = n;
    return S_OK;
}

static const ICorProfilerFunctionControlVtbl fcw_vtbl = {
    .QueryInterface = fcw_QueryInterface,
    .AddRef = fcw_AddRef,
    .Release = fcw_Release,
    .SetCodegenFlags = fcw_SetCodegenFlags,
    .SetILFunctionBody = fcw_SetILFunctionBody,
    .SetILInstrumentedCodeMap = fcw_SetILInstrumentedCodeMap,
};

void clrmux_compose_il_maps(const COR_IL_MAP *first, ULONG nfirst, const COR_IL_MAP *second, ULONG nsecond,
                            COR_IL_MAP *out)
{
    for (ULONG i = 0; i < nfirst; i++) {
        ULONG32 x = first[i].newOffset;
        const COR_IL_MAP *below = NULL;
        for (ULONG k = 0; k < nsecond; k++)
            if (second[k].oldOffset <= x && (!below || second[k].oldOffset > below->oldOffset))
                below = &second[k];
        out[i].oldOffset = first[i].oldOffset;
        if (below) {
            out[i].newOffset = below->newOffset + (x - below->oldOffset);
            out[i].fAccurate = first[i].fAccurate && below->fAccurate && below->oldOffset == x;
        } else {
            out[i].newOffset = x;
            out[i].fAccurate = first[i].fAccurate;
        }
    }
}

/* The result of a chain of owners. */
struct chain_result {
    const BYTE *body; /* the final body (in ch.bodies or the base), NULL when nobody rewrote */
    ULONG size;
    int any_flags, nbodies;
    DWORD flags;
    COR_IL_MAP *map; /* malloc'd, or NULL */
    ULONG nmap;
    uint64_t called;
};

/* Calls each owner's GetReJITParameters in file order (see compose.h); `ch` must be set up by
 * the caller (module, method, in = the body the first owner reads or NULL). */
static void run_chain(struct clrmux_mux *m, struct chain *ch, uint64_t owners, struct chain_result *res)
{
    memset(res, 0, sizeof *res);
    ch->prev = tls_chain;
    tls_chain = ch;
    const BYTE *start = ch->in;
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        if (!(owners >> (i & 63) & 1) || !clrmux_child_live(c, 4))
            continue;
        struct fcw *w = calloc(1, sizeof *w);
        if (!w) {
            LOG_ERROR("out of memory: child '%s' skipped in the ReJIT of method 0x%08x", c->name,
                      (unsigned)ch->method);
            continue;
        }
        w->iface.lpVtbl = &fcw_vtbl;
        atomic_store(&w->refs, 1);
        w->chain = ch;
        res->called |= 1ull << (i & 63);
        c->cb->lpVtbl->GetReJITParameters(c->cb, ch->module, ch->method, &w->iface);
        w->chain = NULL;
        if (w->out) {
            ch->in = w->out->data;
            ch->in_size = w->out->size;
            res->nbodies++;
        }
        if (w->has_flags) {
            res->flags |= w->flags;
            res->any_flags = 1;
        }
        if (w->map) {
            if (!res->map) {
                res->map = w->map; /* the links before rewrote without a map: identity */
                res->nmap = w->nmap;
                w->map = NULL;
            } else {
                COR_IL_MAP *composed = malloc(res->nmap * sizeof *composed);
                if (composed) {
                    clrmux_compose_il_maps(res->map, res->nmap, w->map, w->nmap, composed);
                    free(res->map);
                    res->map = composed;
                }
            }
        }
        free(w->map);
        w->map = NULL;
        if (atomic_load(&w->refs) == 1)
            free(w);
    }
    tls_chain = ch->prev;
    if (ch->in && (res->nbodies || ch->in != start)) {
        res->body = ch->in;
        res->size = ch->in_size;
    } else if (start) {
        res->body = start; /* a base body (see jit_composed) stands for the runtime's */
        res->size = ch->in_size;
    }
}

/* Keeps the chain's bodies with the record until its next composition. */
static void keep_bodies(struct clrmux_compose *cs, struct rec *r, struct chain *ch)
{
    pthread_mutex_lock(&cs->lock);
    struct body *old = NULL;
    if (r) {
        old = r->bodies;
        r->bodies = ch->bodies;
        ch->bodies = NULL;
    }
    pthread_mutex_unlock(&cs->lock);
    free_bodies(old);
    free_bodies(ch->bodies);
}

void clrmux_compose_get_rejit_parameters(struct clrmux_mux *m, ModuleID module, mdMethodDef method,
                                         ICorProfilerFunctionControl *runtime_fc)
{
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find_or_add(cs, module, method);
    uint64_t owners = r ? r->owners : 0;
    int inliner = 0;
    if (r && r->pending) {
        /* the method's first compilation is a ReJIT after all (another owner's request was
         * not held back): the held-back owners join this composition */
        r->pending = 0;
        atomic_fetch_sub(&cs->npending, 1);
    }
    if (r)
        r->compiled = 1;
    const struct body *base = r ? r->base : NULL;
    if (r && !owners && !base) {
        /* re-JITted because it inlined a method requested with inlining callbacks */
        owners = atomic_load(&cs->inliner_children);
        r->owners |= owners;
        r->inliner = inliner = owners != 0;
    }
    pthread_mutex_unlock(&cs->lock);
    if (!owners && !base) {
        LOG_DEBUG("GetReJITParameters for module 0x%lx method 0x%08x that no child requested",
                  (unsigned long)module, (unsigned)method);
        return;
    }

    /* a method composed at JIT time: the runtime's IL holds the owners' rewrites of then, so
     * the chain starts from the body as it was before them */
    struct chain ch = {.module = module, .method = method};
    if (base) {
        ch.in = base->data;
        ch.in_size = base->size;
    }
    struct chain_result res;
    run_chain(m, &ch, owners, &res);
    HRESULT hr = S_OK;
    if (runtime_fc) {
        if (res.body && FAILED(hr = runtime_fc->lpVtbl->SetILFunctionBody(runtime_fc, res.size, res.body)))
            LOG_WARN("ReJIT of method 0x%08x (module 0x%lx): the runtime refused the composed body: HRESULT 0x%08X",
                     (unsigned)method, (unsigned long)module, (unsigned)hr);
        if (res.any_flags)
            runtime_fc->lpVtbl->SetCodegenFlags(runtime_fc, res.flags);
        if (res.map)
            runtime_fc->lpVtbl->SetILInstrumentedCodeMap(runtime_fc, res.nmap, res.map);
    }
    free(res.map);
    if (clrmux_log_get_level() >= CLRMUX_LOG_DEBUG) {
        char names[256], mname[600];
        names_of(m, res.called, names, sizeof names);
        method_name(m, module, method, mname, sizeof mname);
        LOG_DEBUG("ReJIT composition of %s (module 0x%lx)%s: %s; %d rewrite(s), final body %u bytes%s",
                  mname, (unsigned long)module, inliner ? " (an inliner of a requested method)" : "",
                  res.called ? names : "no owner left (the body before the ReJIT owners)", res.nbodies,
                  (unsigned)(res.body ? res.size : 0), res.any_flags ? ", codegen flags" : "");
    }
    keep_bodies(cs, r, &ch);
}

void clrmux_compose_note_jit_writer(struct clrmux_mux *m, struct clrmux_child *child, ModuleID module,
                                    mdMethodDef method)
{
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find_or_add(cs, module, method);
    uint64_t before = r ? r->jit_writers : 0;
    if (r)
        r->jit_writers |= bit_of(child);
    pthread_mutex_unlock(&cs->lock);
    if (r && before && clrmux_log_get_level() >= CLRMUX_LOG_DEBUG) {
        char names[256];
        names_of(m, before | bit_of(child), names, sizeof names);
        char mname[600];
        method_name(m, module, method, mname, sizeof mname);
        LOG_DEBUG("JIT-time composition of %s (module 0x%lx): %s", mname, (unsigned long)module, names);
    }
}

/* ---- JIT events ----------------------------------------------------------------------- */

/* Sets `body` as the method's IL at JIT time (ICorProfilerInfo::SetILFunctionBody with a
 * buffer from the module's IMethodMalloc, which the runtime owns). */
static HRESULT set_jit_body(struct clrmux_mux *m, ModuleID mod, mdMethodDef tok, const BYTE *body, ULONG size)
{
    IMethodMalloc *mm = NULL;
    HRESULT hr = m->info->lpVtbl->GetILFunctionBodyAllocator(m->info, mod, &mm);
    if (FAILED(hr) || !mm)
        return FAILED(hr) ? hr : E_FAIL;
    BYTE *p = mm->lpVtbl->Alloc(mm, size);
    if (p) {
        memcpy(p, body, size);
        hr = m->info->lpVtbl->SetILFunctionBody(m->info, mod, tok, p);
    } else {
        hr = E_OUTOFMEMORY;
    }
    mm->lpVtbl->Release(mm);
    return hr;
}

/* The first compilation of a method whose ReJIT owners were held back, after the JIT-time
 * children saw JITCompilationStarted: the owners' chain runs now and its body becomes the
 * method's IL, so that every thread, also one that raced with this compilation, runs the
 * composed code from the first call (a ReJIT requested now would leave such a thread one
 * call on the code without the owners' rewrites). Codegen flags cannot be given at JIT time:
 * an owner that sets them gets a ReJIT on top, built from the same base. */
void clrmux_compose_jit_started(struct clrmux_mux *m, FunctionID fid)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire))
        return;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    uint64_t owners = 0;
    int with_inliners = 0;
    DWORD flags = 0;
    if (r && r->pending && !r->compiled) {
        owners = r->pending;
        r->pending = 0;
        atomic_fetch_sub(&cs->npending, 1);
        with_inliners = r->with_inliners;
        flags = r->inliner_flags;
    }
    if (r)
        r->compiled = 1;
    pthread_mutex_unlock(&cs->lock);
    if (!owners)
        return;
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    struct body *base = NULL;
    if (SUCCEEDED(m->info->lpVtbl->GetILFunctionBody(m->info, mod, tok, &il, &il_size)) && il && il_size &&
        (base = malloc(sizeof *base + il_size))) {
        base->next = NULL;
        base->size = il_size;
        memcpy(base->data, il, il_size);
    }
    struct chain ch = {.module = mod, .method = tok};
    struct chain_result res;
    memset(&res, 0, sizeof res);
    HRESULT hr = E_FAIL;
    if (base) {
        run_chain(m, &ch, owners, &res);
        hr = res.nbodies ? set_jit_body(m, mod, tok, res.body, res.size) : S_OK;
    }
    char names[256], mname[600];
    names_of(m, owners, names, sizeof names);
    method_name(m, mod, tok, mname, sizeof mname);
    if (SUCCEEDED(hr) && res.nbodies) {
        pthread_mutex_lock(&cs->lock);
        free(r->base);
        r->base = base;
        base = NULL;
        pthread_mutex_unlock(&cs->lock);
        LOG_DEBUG("ReJIT composition of %s (module 0x%lx) at its first JIT compilation (held back): %s; "
                  "%d rewrite(s), final body %u bytes%s", mname, (unsigned long)mod, names, res.nbodies,
                  (unsigned)res.size, res.map ? "; instrumented-code map not given at JIT time" : "");
    }
    keep_bodies(cs, r, &ch);
    free(res.map);
    free(base);
    if (FAILED(hr) || res.any_flags) {
        /* the runtime refused the body, or codegen flags: a ReJIT it is, built from the base */
        HRESULT h2 = runtime_rejit(m, with_inliners, flags, 1, &mod, &tok);
        LOG_DEBUG("ReJIT of %s for %s requested at its first compilation (%s): HRESULT 0x%08X", mname, names,
                  FAILED(hr) ? "the JIT-time body was refused" : "codegen flags", (unsigned)h2);
    }
}

void clrmux_compose_jit_finished(struct clrmux_mux *m, FunctionID fid)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire))
        return;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    uint64_t pending = 0;
    int with_inliners = 0;
    DWORD flags = 0;
    if (r) {
        r->compiled = 1;
        pending = r->pending;
        if (pending) {
            r->pending = 0;
            atomic_fetch_sub(&cs->npending, 1);
            with_inliners = r->with_inliners;
            flags = r->inliner_flags;
        }
    }
    pthread_mutex_unlock(&cs->lock);
    if (!pending)
        return;
    /* on the JIT thread, after JITCompilationFinished: the runtime makes this ReJIT win */
    HRESULT hr = runtime_rejit(m, with_inliners, flags, 1, &mod, &tok);
    char names[256];
    names_of(m, pending, names, sizeof names);
    if (FAILED(hr))
        LOG_WARN("held-back ReJIT of method 0x%08x (module 0x%lx) for %s refused by the runtime: HRESULT 0x%08X",
                 (unsigned)tok, (unsigned long)mod, names, (unsigned)hr);
    else
        LOG_DEBUG("held-back ReJIT of method 0x%08x (module 0x%lx) for %s requested after its first compilation",
                  (unsigned)tok, (unsigned long)mod, names);
}

int clrmux_compose_may_inline(struct clrmux_mux *m, FunctionID callee)
{
    /* the runtime does not inline a method with a ReJIT request in force: neither while the
     * request is held back */
    return clrmux_compose_cache_search(m, callee);
}

int clrmux_compose_cache_search(struct clrmux_mux *m, FunctionID fid)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire))
        return 1;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return 1;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    int refuse = r && r->pending && !r->compiled;
    pthread_mutex_unlock(&cs->lock);
    return !refuse;
}

void clrmux_compose_child_gone(struct clrmux_mux *m, struct clrmux_child *child)
{
    struct clrmux_compose *cs = m->compose;
    const uint64_t bit = bit_of(child);
    atomic_fetch_and(&cs->inliner_children, ~bit);
    pthread_mutex_lock(&cs->lock);
    for (int b = 0; b < NBUCKETS; b++)
        for (struct rec *r = cs->buckets[b]; r; r = r->next) {
            r->owners &= ~bit;
            if (r->pending & bit) {
                r->pending &= ~bit;
                if (!r->pending)
                    atomic_fetch_sub(&cs->npending, 1);
            }
        }
    pthread_mutex_unlock(&cs->lock);
}

const _Atomic int *clrmux_compose_pending(struct clrmux_compose *cs) { return &cs->npending; }
