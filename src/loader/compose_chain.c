/* The chain of ReJIT owners run in GetReJITParameters (see compose.h): a function control
 * per owner, the body each link reads through its proxy's GetILFunctionBody, each owner's
 * last link cached (a rebuild another child asked for reuses it instead of calling the owner,
 * as alone), and the composition of instrumented-code maps. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/cor.h"
#include "common/hresult.h"
#include "common/log.h"
#include "loader/compose_int.h"
#include "loader/mux.h"

#define find clrmux_compose_find
#define find_or_add clrmux_compose_find_or_add
#define names_of clrmux_compose_names
#define method_name clrmux_compose_method_name

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
    const char *child;   /* its name, for log lines */
    mdMethodDef method;
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

/* A call after the child's GetReJITParameters returned: refused, as the runtime's control. */
static HRESULT late_call(struct fcw *w, const char *what)
{
    LOG_WARN("child '%s': ICorProfilerFunctionControl::%s for method 0x%08x after its GetReJITParameters returned: "
             "refused (CORPROF_E_UNSUPPORTED_CALL_SEQUENCE)", w->child ? w->child : "?", what, (unsigned)w->method);
    return CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
}

static HRESULT STDMETHODCALLTYPE fcw_SetCodegenFlags(ICorProfilerFunctionControl *This, DWORD flags)
{
    struct fcw *w = fcw_of(This);
    if (!w->chain)
        return late_call(w, "SetCodegenFlags");
    w->flags = flags;
    w->has_flags = 1;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fcw_SetILFunctionBody(ICorProfilerFunctionControl *This, ULONG cb, LPCBYTE pb)
{
    struct fcw *w = fcw_of(This);
    if (!w->chain)
        return late_call(w, "SetILFunctionBody");
    if (cb == 0 || !pb) {
        LOG_WARN("child '%s': SetILFunctionBody for method 0x%08x with an empty body: refused (E_INVALIDARG, as the "
                 "runtime's function control)", w->child, (unsigned)w->method);
        return E_INVALIDARG;
    }
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
        return late_call(w, "SetILInstrumentedCodeMap");
    if (n && !map) {
        LOG_WARN("child '%s': SetILInstrumentedCodeMap for method 0x%08x with no map: refused (E_INVALIDARG)",
                 w->child, (unsigned)w->method);
        return E_INVALIDARG;
    }
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

static uint64_t fnv1a(const BYTE *p, ULONG n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (ULONG i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h | 1; /* never 0: 0 stands for the runtime's IL */
}

static struct body *copy_body(const BYTE *p, ULONG n)
{
    struct body *b = malloc(sizeof *b + n);
    if (b) {
        b->next = NULL;
        b->size = n;
        memcpy(b->data, p, n);
    }
    return b;
}

/* Folds one link's codegen flags and map into the result. `map` is taken over (freed). */
static void fold_link(struct chain_result *res, int has_flags, DWORD flags, COR_IL_MAP *map, ULONG nmap)
{
    if (has_flags) {
        res->flags |= flags;
        res->any_flags = 1;
    }
    if (!map)
        return;
    if (!res->map) {
        res->map = map; /* the links before rewrote without a map: identity */
        res->nmap = nmap;
        return;
    }
    COR_IL_MAP *composed = malloc(res->nmap * sizeof *composed);
    if (composed) {
        clrmux_compose_il_maps(res->map, res->nmap, map, nmap, composed);
        free(res->map);
        res->map = composed;
    }
    free(map);
}

static COR_IL_MAP *copy_map(const COR_IL_MAP *map, ULONG n)
{
    COR_IL_MAP *c = map && n ? malloc(n * sizeof *c) : NULL;
    if (c)
        memcpy(c, map, n * sizeof *c);
    return c;
}

void clrmux_compose_run_chain(struct clrmux_mux *m, struct rec *r, struct chain *ch, uint64_t owners, uint64_t fresh,
                              struct chain_result *res)
{
    struct clrmux_compose *cs = m->compose;
    memset(res, 0, sizeof *res);
    /* the owners' last links: this chain's own while it runs (a concurrent revert drops
     * only what it finds in the record) */
    struct link *links = NULL;
    if (r) {
        pthread_mutex_lock(&cs->lock);
        links = r->links;
        r->links = NULL;
        pthread_mutex_unlock(&cs->lock);
    }
    ch->prev = tls_chain;
    tls_chain = ch;
    const BYTE *start = ch->in;
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        const uint64_t bit = 1ull << (i & 63);
        if (!(owners & bit) || !clrmux_child_live(c, 4))
            continue;
        struct link **lp = &links;
        while (*lp && (*lp)->child != i)
            lp = &(*lp)->next;
        struct link *lk = *lp;
        const uint64_t in_hash = ch->in ? fnv1a(ch->in, ch->in_size) : 0;
        const ULONG in_size = ch->in ? ch->in_size : 0;
        if (lk && !(fresh & bit) && lk->in_hash == in_hash && lk->in_size == in_size) {
            /* it asked nothing and its input is what it rewrote last time: alone it would not
             * be asked again, and would have set the same */
            struct body *b = lk->out ? copy_body(lk->out->data, lk->out->size) : NULL;
            if (lk->out && !b) {
                LOG_ERROR("out of memory: child '%s' left out of the ReJIT of method 0x%08x", c->name,
                          (unsigned)ch->method);
                continue;
            }
            if (b) {
                b->next = ch->bodies;
                ch->bodies = b;
                ch->in = b->data;
                ch->in_size = b->size;
                res->nbodies++;
            }
            fold_link(res, lk->has_flags, lk->flags, copy_map(lk->map, lk->nmap), lk->nmap);
            res->reused |= bit;
            continue;
        }
        struct fcw *w = calloc(1, sizeof *w);
        if (!w) {
            LOG_ERROR("out of memory: child '%s' skipped in the ReJIT of method 0x%08x", c->name,
                      (unsigned)ch->method);
            continue;
        }
        w->iface.lpVtbl = &fcw_vtbl;
        atomic_store(&w->refs, 1);
        w->chain = ch;
        w->child = c->name;
        w->method = ch->method;
        res->called |= bit;
        if (!(fresh & bit))
            res->recalled |= bit;
        c->cb->lpVtbl->GetReJITParameters(c->cb, ch->module, ch->method, &w->iface);
        w->chain = NULL;
        /* its new last link */
        struct link *nl = calloc(1, sizeof *nl);
        if (nl) {
            nl->child = i;
            nl->in_hash = in_hash;
            nl->in_size = in_size;
            nl->has_flags = w->has_flags;
            nl->flags = w->flags;
            nl->nmap = w->nmap;
            nl->map = copy_map(w->map, w->nmap);
            nl->out = w->out ? copy_body(w->out->data, w->out->size) : NULL;
            if ((w->map && !nl->map) || (w->out && !nl->out)) {
                clrmux_compose_free_links(nl); /* not cached: it will be asked again */
                nl = NULL;
            }
        }
        if (lk) {
            *lp = lk->next;
            lk->next = NULL;
            clrmux_compose_free_links(lk);
        }
        if (nl) {
            nl->next = links;
            links = nl;
        }
        if (w->out) {
            ch->in = w->out->data;
            ch->in_size = w->out->size;
            res->nbodies++;
        }
        fold_link(res, w->has_flags, w->flags, w->map, w->nmap);
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
    /* back to the record: the links of children that are still owners */
    if (r) {
        struct link *drop = NULL;
        pthread_mutex_lock(&cs->lock);
        while (links) {
            struct link *n = links->next;
            if (r->owners >> (links->child & 63) & 1) {
                links->next = r->links;
                r->links = links;
            } else {
                links->next = drop;
                drop = links;
            }
            links = n;
        }
        pthread_mutex_unlock(&cs->lock);
        clrmux_compose_free_links(drop);
    }
}

/* Keeps the chain's bodies with the record until its next composition. */
void clrmux_compose_keep_bodies(struct clrmux_compose *cs, struct rec *r, struct chain *ch)
{
    pthread_mutex_lock(&cs->lock);
    struct body *old = NULL;
    if (r) {
        old = r->bodies;
        r->bodies = ch->bodies;
        ch->bodies = NULL;
    }
    pthread_mutex_unlock(&cs->lock);
    clrmux_compose_free_bodies(old);
    clrmux_compose_free_bodies(ch->bodies);
}

void clrmux_compose_get_rejit_parameters(struct clrmux_mux *m, ModuleID module, mdMethodDef method,
                                         ICorProfilerFunctionControl *runtime_fc)
{
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find_or_add(cs, module, method);
    uint64_t owners = r ? r->owners : 0;
    /* the requesters: called afresh, they see this version (GetReJITIDs, ReJIT callbacks) */
    uint64_t fresh = r ? r->announce : 0;
    int inliner = 0;
    if (r && r->pending) {
        /* the method's first compilation is a ReJIT after all (another owner's request was
         * not held back): the held-back owners join this composition */
        fresh |= r->pending;
        r->pending = 0;
        clrmux_compose_count(m, &cs->npending, -1);
    }
    if (r) {
        r->announce = 0;
        r->compiled = 1;
    }
    const struct body *base = r ? r->base : NULL;
    int ask_inliners = r && !owners && !base;
    pthread_mutex_unlock(&cs->lock);
    if (ask_inliners) {
        /* re-JITted because it inlined a method requested with inlining callbacks: it goes to
         * the children that asked for them on a method it inlined, as alone */
        uint64_t aud = clrmux_compose_inliner_audience(m, module, method);
        pthread_mutex_lock(&cs->lock);
        if (!r->owners && aud) {
            r->owners |= aud;
            r->inliner = 1;
        }
        owners = r->owners;
        inliner = r->inliner;
        fresh |= aud;
        pthread_mutex_unlock(&cs->lock);
    }
    if (r) {
        pthread_mutex_lock(&cs->lock);
        r->cur_seen = fresh & owners;
        r->has_cur = 1;
        pthread_mutex_unlock(&cs->lock);
        clrmux_compose_attribute_newest(m, r, fresh & owners);
    }
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
    clrmux_compose_run_chain(m, r, &ch, owners, fresh, &res);
    HRESULT hr = S_OK;
    if (runtime_fc) {
        if (res.body && FAILED(hr = runtime_fc->lpVtbl->SetILFunctionBody(runtime_fc, res.size, res.body))) {
            char mname[600];
            method_name(m, module, method, mname, sizeof mname);
            LOG_WARN("ReJIT of %s (module 0x%lx): the runtime refused the composed body: HRESULT %s", mname,
                     (unsigned long)module, HR_STR(hr));
        }
        if (res.any_flags)
            runtime_fc->lpVtbl->SetCodegenFlags(runtime_fc, res.flags);
        if (res.map)
            runtime_fc->lpVtbl->SetILInstrumentedCodeMap(runtime_fc, res.nmap, res.map);
    }
    free(res.map);
    if (clrmux_log_get_level() >= CLRMUX_LOG_DEBUG) {
        char names[256], reused[256], recalled[256], mname[600];
        names_of(m, res.called | res.reused, names, sizeof names);
        names_of(m, res.reused, reused, sizeof reused);
        names_of(m, res.recalled, recalled, sizeof recalled);
        method_name(m, module, method, mname, sizeof mname);
        LOG_DEBUG("ReJIT composition of %s (module 0x%lx)%s: %s; %d rewrite(s), final body %u bytes%s%s%s%s%s",
                  mname, (unsigned long)module, inliner ? " (an inliner of a requested method)" : "",
                  res.called | res.reused ? names : "no owner left (the body before the ReJIT owners)", res.nbodies,
                  (unsigned)(res.body ? res.size : 0), res.any_flags ? ", codegen flags" : "",
                  res.reused ? "; last rewrite reused, not called (as alone): " : "", res.reused ? reused : "",
                  res.recalled ? "; called again, their input changed: " : "", res.recalled ? recalled : "");
    }
    clrmux_compose_keep_bodies(cs, r, &ch);
}
