/* The event masks: each child's (clrmux_set_child_mask, what its proxy's SetEventMask does),
 * clrmux's own (clrmux_add_own_mask) and their union, set on the runtime (clrmux_apply_union),
 * all under mux->mask_lock; a change rebuilds the dispatch tables (dispatch.h) and tells the
 * composition (compose.h). Below the mux's callbacks: the children's proxies, their detach and
 * the composition call down into it. See mux.h. */
#include "loader/mux_int.h"

#include "common/hresult.h"
#include "common/log.h"
#include "loader/compose.h"

HRESULT clrmux_mux_set_runtime_mask(struct clrmux_mux *m, DWORD low, DWORD high)
{
    if (low == m->applied_low && high == m->applied_high)
        return S_OK;
    HRESULT hr;
    if (m->info_version >= 5)
        hr = m->info->lpVtbl->SetEventMask2(m->info, low, high);
    else if (high == 0)
        hr = m->info->lpVtbl->SetEventMask(m->info, low);
    else
        hr = E_INVALIDARG;
    if (SUCCEEDED(hr)) {
        m->applied_low = low;
        m->applied_high = high;
    }
    return hr;
}

void clrmux_mux_union_masks(struct clrmux_mux *m, struct clrmux_child *except, DWORD *low, DWORD *high)
{
    *low = atomic_load(&m->own_low) | atomic_load(&m->window_low);
    *high = 0;
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        if (c == except || !atomic_load(&c->active))
            continue;
        *low |= atomic_load(&c->mask_low);
        *high |= atomic_load(&c->mask_high);
    }
}

HRESULT clrmux_set_child_mask(struct clrmux_mux *m, struct clrmux_child *child, DWORD low, DWORD high)
{
    pthread_mutex_lock(&m->mask_lock);
    DWORD old_low = atomic_load(&child->mask_low), old_high = atomic_load(&child->mask_high);
    HRESULT hr = S_OK;
    if (!atomic_load(&child->active) && atomic_load(&child->detach_state)) {
        /* as the runtime answers a profiler that is detaching */
        LOG_WARN("child '%s': SetEventMask after its RequestProfilerDetach; refused", child->name);
        hr = CORPROF_E_PROFILER_DETACHING;
    } else if (!atomic_load(&child->active)) {
        /* a child whose Initialize failed is out: its mask no longer reaches the runtime */
        LOG_WARN("child '%s': SetEventMask after its Initialize failed; refused", child->name);
        hr = CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
    } else if (!atomic_load(&m->initializing) &&
        (((old_low ^ low) & m->immutable_low) || ((old_high ^ high) & m->immutable_high))) {
        LOG_WARN("child '%s': SetEventMask changes an immutable flag after Initialize (0x%08X/0x%08X -> 0x%08X/0x%08X); refused",
                 child->name, (unsigned)old_low, (unsigned)old_high, (unsigned)low, (unsigned)high);
        hr = E_FAIL; /* what the runtime answers a profiler alone (measured on .NET 8, 9, 10) */
    } else {
        DWORD ul, uh;
        clrmux_mux_union_masks(m, child, &ul, &uh);
        hr = clrmux_mux_set_runtime_mask(m, ul | low, uh | high);
        if (SUCCEEDED(hr)) {
            atomic_store(&child->mask_low, low);
            atomic_store(&child->mask_high, high);
            clrmux_compose_masks_changed(m);
            clrmux_dispatch_rebuild(m);
            LOG_DEBUG("child '%s': event mask low=0x%08X high=0x%08X (union low=0x%08X high=0x%08X)", child->name,
                      (unsigned)low, (unsigned)high, (unsigned)m->applied_low, (unsigned)m->applied_high);
        } else {
            LOG_WARN("child '%s': the runtime refused event mask low=0x%08X high=0x%08X: HRESULT %s", child->name,
                     (unsigned)low, (unsigned)high, HR_STR(hr));
        }
    }
    pthread_mutex_unlock(&m->mask_lock);
    return hr;
}

HRESULT clrmux_apply_union(struct clrmux_mux *m)
{
    pthread_mutex_lock(&m->mask_lock);
    DWORD ul, uh;
    clrmux_mux_union_masks(m, NULL, &ul, &uh);
    HRESULT hr = clrmux_mux_set_runtime_mask(m, ul, uh);
    clrmux_dispatch_rebuild(m); /* e.g. a child left: its routes go */
    pthread_mutex_unlock(&m->mask_lock);
    return hr;
}

HRESULT clrmux_add_own_mask(struct clrmux_mux *m, DWORD low)
{
    if ((atomic_load(&m->own_low) & low) == low)
        return S_OK;
    pthread_mutex_lock(&m->mask_lock);
    atomic_fetch_or(&m->own_low, low);
    DWORD ul, uh;
    clrmux_mux_union_masks(m, NULL, &ul, &uh);
    HRESULT hr = clrmux_mux_set_runtime_mask(m, ul, uh);
    pthread_mutex_unlock(&m->mask_lock);
    if (FAILED(hr))
        LOG_WARN("the runtime refused clrmux's own event flags 0x%08X: HRESULT %s", (unsigned)low, HR_STR(hr));
    else
        LOG_DEBUG("clrmux adds event flags 0x%08X (union low=0x%08X high=0x%08X)", (unsigned)low, (unsigned)ul,
                  (unsigned)uh);
    return hr;
}
