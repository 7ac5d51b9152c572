/* What each child sees of the ReJIT versions several children's requests make (compose.h):
 * which children a version's ReJIT ID belongs to (GetReJITIDs, ReJITCompilationStarted /
 * Finished, ReJITError), and which children an inliner re-JITted by the runtime reaches
 * (the inlining seen in JITInlining).
 *
 * "As alone": a child sees a new version of a method only when its own request made it (or,
 * held back, when its request made the method's first compilation a ReJIT: a version made up
 * by clrmux). A version rebuilt because another child asked for a ReJIT of the same method or
 * reverted its own is nobody's to see but the requester's: alone, the other owners would not
 * have had a new version. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "loader/compose_int.h"
#include "loader/mux.h"

#define MAX_EDGES (1L << 20)

void clrmux_compose_ver_add(struct rec *r, ReJITID id, uint64_t seen)
{
    for (int i = 0; i < r->nvers; i++)
        if (r->vers[i].id == id) {
            r->vers[i].seen |= seen;
            return;
        }
    if (r->nvers == r->capvers) {
        int cap = r->capvers ? r->capvers * 2 : 4;
        struct ver *v = realloc(r->vers, (size_t)cap * sizeof *v);
        if (!v) {
            LOG_ERROR("out of memory: ReJIT ID %lu of method 0x%08x not recorded (its ReJIT callbacks reach "
                      "its owners)", (unsigned long)id, (unsigned)r->method);
            return;
        }
        r->vers = v;
        r->capvers = cap;
    }
    r->vers[r->nvers].id = id;
    r->vers[r->nvers++].seen = seen;
}

/* Under cs->lock: the version's audience; -1 when the ID is not recorded. */
static int64_t ver_seen(const struct rec *r, ReJITID id)
{
    for (int i = 0; i < r->nvers; i++)
        if (r->vers[i].id == id)
            return (int64_t)(r->vers[i].seen & 0x7fffffffffffffffull);
    return -1;
}

/* The runtime's ReJIT IDs of `fid` (malloc'd into *ids); -1 when it cannot tell. */
static long runtime_ids(struct clrmux_mux *m, FunctionID fid, ReJITID **ids)
{
    *ids = NULL;
    if (m->info_version < 4)
        return -1;
    ULONG n = 0;
    HRESULT hr = m->info->lpVtbl->GetReJITIDs(m->info, fid, 0, &n, NULL);
    if (FAILED(hr))
        return -1;
    for (int tries = 0; tries < 4; tries++) {
        ULONG cap = n + 4;
        ReJITID *buf = malloc(cap * sizeof *buf);
        if (!buf)
            return -1;
        hr = m->info->lpVtbl->GetReJITIDs(m->info, fid, cap, &n, buf);
        if (hr == S_OK || (SUCCEEDED(hr) && n <= cap)) {
            *ids = buf;
            return (long)n;
        }
        free(buf);
        if (FAILED(hr))
            return -1;
    }
    return -1;
}

void clrmux_compose_attribute_newest(struct clrmux_mux *m, struct rec *r, uint64_t seen)
{
    FunctionID fid = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionFromToken(m->info, r->module, r->method, &fid)) || !fid)
        return; /* a generic method, or its type not loaded: attributed at its ReJIT callback */
    ReJITID *ids = NULL;
    long n = runtime_ids(m, fid, &ids);
    if (n <= 0) {
        free(ids);
        return;
    }
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    ReJITID newest = 0;
    for (long i = 0; i < n; i++)
        if (ids[i] > newest && ver_seen(r, ids[i]) < 0)
            newest = ids[i];
    if (newest) {
        clrmux_compose_ver_add(r, newest, seen);
        r->has_cur = 0; /* attributed: the callbacks find it */
    }
    pthread_mutex_unlock(&cs->lock);
    free(ids);
}

uint64_t clrmux_compose_rejit_audience(struct clrmux_mux *m, FunctionID fid, ReJITID id)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return 0;
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = clrmux_compose_find(cs, mod, tok);
    uint64_t set = 0;
    if (r) {
        int64_t s = ver_seen(r, id);
        if (s >= 0) {
            set = (uint64_t)s;
        } else if (r->has_cur) {
            /* the version last composed, met here first */
            set = r->cur_seen;
            clrmux_compose_ver_add(r, id, set);
            r->has_cur = 0;
        } else {
            set = r->owners; /* not made through clrmux's compositions: its owners */
            clrmux_compose_ver_add(r, id, set);
        }
        set &= r->owners | r->jit_as_rejit;
    }
    pthread_mutex_unlock(&cs->lock);
    return set;
}

uint64_t clrmux_compose_rejit_error_audience(struct clrmux_mux *m, ModuleID mod, mdMethodDef tok)
{
    if (clrmux_compose_tls_in_request)
        return clrmux_compose_tls_requesters;
    struct clrmux_compose *cs = m->compose;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = clrmux_compose_find(cs, mod, tok);
    uint64_t set = 0;
    if (r) {
        set = r->announce | r->cur_seen;
        if (!set) {
            /* the version last composed: the newest recorded */
            ReJITID newest = 0;
            for (int i = 0; i < r->nvers; i++)
                if (r->vers[i].id > newest && r->vers[i].id < CLRMUX_FAKE_REJITID_BASE) {
                    newest = r->vers[i].id;
                    set = r->vers[i].seen;
                }
        }
        set &= r->owners;
    }
    pthread_mutex_unlock(&cs->lock);
    return set;
}

HRESULT clrmux_compose_rejit_ids(struct clrmux_mux *m, struct clrmux_child *child, FunctionID fid, ULONG cap,
                                 ULONG *pcount, ReJITID *out)
{
    ICorProfilerInfo15 *rt = m->info;
    if (!pcount || (cap && !out))
        return E_INVALIDARG; /* as the runtime */
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    struct clrmux_compose *cs = m->compose;
    int known = atomic_load_explicit(&cs->nrecs, memory_order_acquire) &&
                SUCCEEDED(rt->lpVtbl->GetFunctionInfo(rt, fid, &cls, &mod, &tok));
    if (known) {
        pthread_mutex_lock(&cs->lock);
        known = clrmux_compose_find(cs, mod, tok) != NULL;
        pthread_mutex_unlock(&cs->lock);
    }
    if (!known) /* no child asked anything of this method through clrmux */
        return rt->lpVtbl->GetReJITIDs(rt, fid, cap, pcount, out);
    ReJITID *ids = NULL;
    long n = runtime_ids(m, fid, &ids);
    if (n < 0) {
        free(ids);
        return rt->lpVtbl->GetReJITIDs(rt, fid, cap, pcount, out);
    }
    const uint64_t bit = clrmux_bit_of(child);
    ULONG count = 0;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = clrmux_compose_find(cs, mod, tok);
    if (r && r->has_cur) {
        /* the version last composed, not attributed when it was (the runtime could not tell
         * then, and no ReJIT callback came since): the newest ID not recorded */
        ReJITID newest = 0;
        for (long i = 0; i < n; i++)
            if (ids[i] > newest && ver_seen(r, ids[i]) < 0)
                newest = ids[i];
        if (newest) {
            clrmux_compose_ver_add(r, newest, r->cur_seen);
            r->has_cur = 0;
        }
    }
    for (long i = 0; r && i < n; i++) {
        int64_t s = ver_seen(r, ids[i]);
        /* not composed yet: the version of a request still waiting for its method's next call */
        int mine = s >= 0 ? ((uint64_t)s & bit) != 0 : (r->announce & bit) != 0;
        if (mine) {
            if (count < cap)
                out[count] = ids[i];
            count++;
        }
    }
    for (int i = 0; r && i < r->nvers; i++)
        if (r->vers[i].id >= CLRMUX_FAKE_REJITID_BASE && (r->vers[i].seen & bit)) {
            if (count < cap)
                out[count] = r->vers[i].id;
            count++;
        }
    pthread_mutex_unlock(&cs->lock);
    free(ids);
    *pcount = count;
    return count > cap ? S_FALSE : S_OK;
}

/* ---- inlining ----------------------------------------------------------------------------- */

static size_t edge_bucket(FunctionID caller)
{
    return (size_t)(((uint64_t)caller * 0x9E3779B97F4A7C15ull) >> 40) & (NBUCKETS - 1);
}

int clrmux_compose_tracks_inlining(struct clrmux_mux *m)
{
    return atomic_load_explicit(&m->compose->track_inlining, memory_order_relaxed);
}

void clrmux_compose_masks_changed(struct clrmux_mux *m)
{
    int n = 0;
    for (int i = 0; i < m->nchildren; i++)
        if (atomic_load(&m->children[i].mask_low) & COR_PRF_ENABLE_REJIT)
            n++;
    atomic_store(&m->compose->track_inlining, n >= 2);
}

void clrmux_compose_note_inlining(struct clrmux_mux *m, FunctionID caller, FunctionID callee)
{
    struct clrmux_compose *cs = m->compose;
    if (!caller || !callee || cs->edges_full || !atomic_load_explicit(&cs->track_inlining, memory_order_relaxed))
        return;
    pthread_mutex_lock(&cs->edge_lock);
    if (!cs->edges && !(cs->edges = calloc(NBUCKETS, sizeof *cs->edges))) {
        cs->edges_full = 1;
        pthread_mutex_unlock(&cs->edge_lock);
        LOG_WARN("out of memory: inlining not recorded; inliner ReJIT callbacks reach every child that asked for "
                 "inlining callbacks");
        return;
    }
    size_t b = edge_bucket(caller);
    struct edge *e = cs->edges[b];
    while (e && !(e->caller == caller && e->callee == callee))
        e = e->next;
    int full = 0;
    if (!e) {
        if (cs->nedges >= MAX_EDGES || !(e = malloc(sizeof *e))) {
            cs->edges_full = full = 1;
        } else {
            e->caller = caller;
            e->callee = callee;
            e->next = cs->edges[b];
            cs->edges[b] = e;
            cs->nedges++;
        }
    }
    pthread_mutex_unlock(&cs->edge_lock);
    if (full)
        LOG_WARN("%ld inlining decisions recorded: no more are; inliner ReJIT callbacks of later ones reach every "
                 "child that asked for inlining callbacks", (long)MAX_EDGES);
}

#define MAX_REACH 64

uint64_t clrmux_compose_inliner_audience(struct clrmux_mux *m, ModuleID mod, mdMethodDef tok)
{
    struct clrmux_compose *cs = m->compose;
    const uint64_t all = atomic_load(&cs->inliner_children);
    if (!all)
        return 0;
    FunctionID root = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionFromToken(m->info, mod, tok, &root)) || !root)
        return all; /* a generic method: its inlining is not known by token */
    /* the methods `root` inlined, also through methods it inlined (the runtime counts a
     * method inlined into an inlinee as inlined by the method compiled) */
    FunctionID reach[MAX_REACH];
    int nreach = 0;
    pthread_mutex_lock(&cs->edge_lock);
    if (cs->edges) {
        FunctionID queue[MAX_REACH];
        int qh = 0, qt = 0;
        queue[qt++] = root;
        while (qh < qt && nreach < MAX_REACH) {
            FunctionID f = queue[qh++];
            for (struct edge *e = cs->edges[edge_bucket(f)]; e && nreach < MAX_REACH; e = e->next) {
                if (e->caller != f)
                    continue;
                int dup = e->callee == root;
                for (int k = 0; k < nreach && !dup; k++)
                    dup = reach[k] == e->callee;
                if (dup)
                    continue;
                reach[nreach++] = e->callee;
                if (qt < MAX_REACH)
                    queue[qt++] = e->callee;
            }
        }
    }
    pthread_mutex_unlock(&cs->edge_lock);
    uint64_t aud = 0;
    for (int i = 0; i < nreach; i++) {
        ClassID cls = 0;
        ModuleID cm = 0;
        mdToken ct = 0;
        if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, reach[i], &cls, &cm, &ct)))
            continue;
        pthread_mutex_lock(&cs->lock);
        struct rec *r = clrmux_compose_find(cs, cm, ct);
        if (r)
            aud |= r->inliner_cb;
        pthread_mutex_unlock(&cs->lock);
    }
    if (!aud) {
        LOG_DEBUG("inliner method 0x%08x (module 0x%lx): no recorded inlining of a method requested with inlining "
                  "callbacks (precompiled code, or none seen); it goes to every child that asked for them",
                  (unsigned)tok, (unsigned long)mod);
        return all;
    }
    return aud & all;
}
