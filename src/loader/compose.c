/* Composition of several children's instrumentation of one method: requests and reverts by
 * one owner (ReJIT owners, held-back requests, JIT-time writers of the per-method record), a
 * child's leaving. The records' table is in compose_state.c, the JIT events (held-back
 * requests, JIT-time rewrites of a method composed at JIT time) in compose_jit.c, the chain
 * run in GetReJITParameters in compose_chain.c, what each child sees of the versions in
 * compose_view.c. See compose.h and compose_int.h. */
#include "loader/compose.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "loader/compose_int.h"
#include "loader/mux.h"

#define find clrmux_compose_find
#define find_or_add clrmux_compose_find_or_add
#define bit_of clrmux_bit_of
#define names_of clrmux_compose_names
#define method_name clrmux_compose_method_name

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

void clrmux_compose_owned_counts(struct clrmux_mux *m, unsigned *counts, int n)
{
    struct clrmux_compose *cs = m->compose;
    for (int i = 0; i < n; i++)
        counts[i] = 0;
    if (!cs || !atomic_load_explicit(&cs->nrecs, memory_order_acquire))
        return;
    pthread_mutex_lock(&cs->lock);
    for (int b = 0; b < NBUCKETS; b++)
        for (const struct rec *r = cs->buckets[b]; r; r = r->next)
            for (int i = 0; i < n && i < 64; i++)
                counts[i] += (unsigned)((r->owners >> i) & 1);
    pthread_mutex_unlock(&cs->lock);
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

HRESULT clrmux_compose_request_rejit(struct clrmux_mux *m, struct clrmux_child *child, long inliner_flags, ULONG n,
                                     ModuleID *mods, mdMethodDef *methods)
{
    struct clrmux_compose *cs = m->compose;
    if (!(atomic_load(&child->mask_low) & COR_PRF_ENABLE_REJIT)) {
        LOG_WARN("child '%s': RequestReJIT refused (CORPROF_E_REJIT_NOT_ENABLED): its event mask lacks "
                 "COR_PRF_ENABLE_REJIT, as the runtime would refuse it alone", child->name);
        return CORPROF_E_REJIT_NOT_ENABLED;
    }
    if (n && (!mods || !methods)) {
        LOG_WARN("child '%s': RequestReJIT of %u method(s) with no module or method array: E_INVALIDARG, as the "
                 "runtime answers", child->name, (unsigned)n);
        return E_INVALIDARG;
    }
    if (n == 0)
        return clrmux_compose_runtime_rejit(m, bit_of(child), inliner_flags >= 0,
                                            (DWORD)(inliner_flags < 0 ? 0 : inliner_flags), 0, mods, methods);
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
                if (inliner_flags & COR_PRF_REJIT_INLINING_CALLBACKS)
                    r->inliner_cb |= bit;
            }
            if (compiled)
                r->compiled = 1;
            if (!r->compiled) {
                if (!r->pending)
                    clrmux_compose_count(m, &cs->npending, 1);
                r->pending |= bit;
                hold = 1;
            } else {
                r->announce |= bit; /* its own new version: it is called afresh and sees it */
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
        hr = clrmux_compose_runtime_rejit(m, bit, inliner_flags >= 0, (DWORD)(inliner_flags < 0 ? 0 : inliner_flags),
                                          nf, fm, ft);
        if (FAILED(hr))
            LOG_WARN("child '%s': the runtime refused ReJIT of %u method(s): HRESULT %s", child->name,
                     (unsigned)nf, HR_STR(hr));
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
    if (!mods || !methods) {
        LOG_WARN("child '%s': RequestRevert of %u method(s) with no module or method array: E_INVALIDARG, as the "
                 "runtime answers", child->name, (unsigned)n);
        return E_INVALIDARG;
    }
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
            r->announce &= ~bit;
            r->inliner_cb &= ~bit;
            if (r->jit_as_rejit & bit) {
                r->jit_as_rejit &= ~bit; /* alone, its method is back to plain JIT compilations */
                if (!r->jit_as_rejit)
                    clrmux_compose_count(m, &cs->nas_rejit, -1);
            }
            for (struct link **l = &r->links; *l; l = &(*l)->next)
                if ((*l)->child == child->index) {
                    struct link *gone = *l;
                    *l = gone->next;
                    gone->next = NULL;
                    clrmux_compose_free_links(gone);
                    break;
                }
            if (was_pending) {
                r->pending &= ~bit;
                if (!r->pending)
                    clrmux_compose_count(m, &cs->npending, -1);
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
        if (FAILED(hr))
            LOG_WARN("child '%s': the runtime refused the revert of %u method(s): HRESULT %s", child->name,
                     (unsigned)nrv, HR_STR(hr));
        else
            LOG_DEBUG("child '%s': revert of %u method(s) no other child rewrites: reverted by the runtime",
                      child->name, (unsigned)nrv);
        if (status && st)
            for (ULONG k = 0; k < nrv; k++)
                status[rvi[k]] = st[k];
        free(st);
    }
    if (nrj) {
        /* nobody asked for the rebuilt version: no child sees it (its owners alone would not) */
        HRESULT h2 = clrmux_compose_runtime_rejit(m, 0, with_inliners, flags, nrj, rjm, rjt);
        if (FAILED(h2)) {
            LOG_WARN("child '%s': rebuilding %u method(s) for their other owners failed: HRESULT %s", child->name,
                     (unsigned)nrj, HR_STR(h2));
            if (SUCCEEDED(hr))
                hr = h2;
        }
    }
    free(rvm), free(rjm), free(rvt), free(rjt), free(rvi);
    return hr;
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

void clrmux_compose_child_gone(struct clrmux_mux *m, struct clrmux_child *child)
{
    struct clrmux_compose *cs = m->compose;
    const uint64_t bit = bit_of(child);
    atomic_fetch_and(&cs->inliner_children, ~bit);
    pthread_mutex_lock(&cs->lock);
    for (int b = 0; b < NBUCKETS; b++)
        for (struct rec *r = cs->buckets[b]; r; r = r->next) {
            r->owners &= ~bit;
            r->announce &= ~bit;
            r->inliner_cb &= ~bit;
            r->cur_seen &= ~bit;
            for (int k = 0; k < r->nvers; k++)
                r->vers[k].seen &= ~bit;
            if (r->pending & bit) {
                r->pending &= ~bit;
                if (!r->pending)
                    clrmux_compose_count(m, &cs->npending, -1);
            }
            if (r->jit_as_rejit & bit) {
                r->jit_as_rejit &= ~bit;
                if (!r->jit_as_rejit)
                    clrmux_compose_count(m, &cs->nas_rejit, -1);
            }
            for (struct link **l = &r->links; *l; l = &(*l)->next)
                if ((*l)->child == child->index) {
                    struct link *gone = *l;
                    *l = gone->next;
                    gone->next = NULL;
                    clrmux_compose_free_links(gone);
                    break;
                }
        }
    pthread_mutex_unlock(&cs->lock);
}
