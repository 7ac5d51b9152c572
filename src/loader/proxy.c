/* The per-child ICorProfilerInfo proxy. Every method forwards to the runtime (generated from
 * gen/corprof_list.h) except the ones that must be the child's own: its event mask, its
 * ReJIT requests, enter/leave hooks and function-ID mappers, and EventPipe sessions. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/utf16.h"
#include "loader/mux.h"
#include "loader/versions.h"

static inline struct clrmux_proxy *px_impl(ICorProfilerInfo15 *iface)
{
    return (struct clrmux_proxy *)((char *)iface - offsetof(struct clrmux_proxy, iface));
}

/* Forwarders for every Info method. The runtime object is at least as new as the version
 * the child obtained through QueryInterface, so each slot it can call exists. */
#define FWD(I, D, R, N, P, A, ROUTE)                                                                \
    __attribute__((unused)) static R STDMETHODCALLTYPE px_##N(ICorProfilerInfo15 *This CLRMUX_EXPAND P) \
    {                                                                                             \
        ICorProfilerInfo15 *real = px_impl(This)->mux->info;                                      \
        return real->lpVtbl->N(real CLRMUX_EXPAND A);                                             \
    }
CLRMUX_METHODS_ICorProfilerInfo(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo2(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo3(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo4(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo5(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo6(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo7(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo8(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo9(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo10(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo11(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo12(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo13(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo14(FWD, x)
CLRMUX_METHODS_ICorProfilerInfo15(FWD, x)

/* ---- IUnknown: answers each Info version the runtime answers ------------------------- */

static HRESULT STDMETHODCALLTYPE pxo_QueryInterface(ICorProfilerInfo15 *This, REFIID riid, void **ppv)
{
    static const IID *const iids[] = CLRMUX_INFO_IIDS;
    struct clrmux_proxy *p = px_impl(This);
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    int ok = IsEqualIID(riid, &IID_IUnknown);
    for (int v = 1; !ok && v <= p->mux->info_version; v++)
        ok = IsEqualIID(riid, iids[v]);
    if (!ok)
        return E_NOINTERFACE;
    *ppv = This;
    atomic_fetch_add(&p->refs, 1);
    return S_OK;
}

static ULONG STDMETHODCALLTYPE pxo_AddRef(ICorProfilerInfo15 *This)
{
    return (ULONG)atomic_fetch_add(&px_impl(This)->refs, 1) + 1;
}

/* The proxy lives as long as the process: a child may keep it past its last Release. */
static ULONG STDMETHODCALLTYPE pxo_Release(ICorProfilerInfo15 *This)
{
    LONG n = atomic_fetch_sub(&px_impl(This)->refs, 1) - 1;
    return (ULONG)(n < 0 ? 0 : n);
}

/* ---- event masks: the child's own ----------------------------------------------------- */

static HRESULT STDMETHODCALLTYPE pxo_GetEventMask(ICorProfilerInfo15 *This, DWORD *pdwEvents)
{
    if (!pdwEvents)
        return E_INVALIDARG;
    *pdwEvents = atomic_load(&px_impl(This)->child->mask_low);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pxo_GetEventMask2(ICorProfilerInfo15 *This, DWORD *pdwEventsLow, DWORD *pdwEventsHigh)
{
    struct clrmux_child *c = px_impl(This)->child;
    if (!pdwEventsLow || !pdwEventsHigh)
        return E_INVALIDARG;
    *pdwEventsLow = atomic_load(&c->mask_low);
    *pdwEventsHigh = atomic_load(&c->mask_high);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pxo_SetEventMask(ICorProfilerInfo15 *This, DWORD dwEvents)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_set_child_mask(p->mux, p->child, dwEvents, atomic_load(&p->child->mask_high));
}

static HRESULT STDMETHODCALLTYPE pxo_SetEventMask2(ICorProfilerInfo15 *This, DWORD dwEventsLow, DWORD dwEventsHigh)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_set_child_mask(p->mux, p->child, dwEventsLow, dwEventsHigh);
}

/* ---- ReJIT and IL: composed with the other children's (compose.h) -------------------- */

static HRESULT STDMETHODCALLTYPE pxo_RequestReJIT(ICorProfilerInfo15 *This, ULONG cFunctions, ModuleID *moduleIds,
                                                  mdMethodDef *methodIds)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_compose_request_rejit(p->mux, p->child, -1, cFunctions, moduleIds, methodIds);
}

static HRESULT STDMETHODCALLTYPE pxo_RequestReJITWithInliners(ICorProfilerInfo15 *This, DWORD dwRejitFlags,
                                                              ULONG cFunctions, ModuleID *moduleIds, mdMethodDef *methodIds)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_compose_request_rejit(p->mux, p->child, (long)dwRejitFlags, cFunctions, moduleIds, methodIds);
}

static HRESULT STDMETHODCALLTYPE pxo_RequestRevert(ICorProfilerInfo15 *This, ULONG cFunctions, ModuleID *moduleIds,
                                                   mdMethodDef *methodIds, HRESULT *status)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_compose_request_revert(p->mux, p->child, cFunctions, moduleIds, methodIds, status);
}

/* During a ReJIT composition, the body the previous child set; else the runtime's. */
static HRESULT STDMETHODCALLTYPE pxo_GetILFunctionBody(ICorProfilerInfo15 *This, ModuleID moduleId, mdMethodDef methodId,
                                                       LPCBYTE *ppMethodHeader, ULONG *pcbMethodSize)
{
    struct clrmux_proxy *p = px_impl(This);
    if (clrmux_compose_il_body(p->mux, p->child, moduleId, methodId, ppMethodHeader, pcbMethodSize))
        return S_OK;
    return p->mux->info->lpVtbl->GetILFunctionBody(p->mux->info, moduleId, methodId, ppMethodHeader, pcbMethodSize);
}

/* JIT time: the runtime keeps the body as the method's IL, so the next child builds on it. */
static HRESULT STDMETHODCALLTYPE pxo_SetILFunctionBody(ICorProfilerInfo15 *This, ModuleID moduleId, mdMethodDef methodId,
                                                       LPCBYTE pbNewILMethodHeader)
{
    struct clrmux_proxy *p = px_impl(This);
    HRESULT hr = p->mux->info->lpVtbl->SetILFunctionBody(p->mux->info, moduleId, methodId, pbNewILMethodHeader);
    if (SUCCEEDED(hr)) {
        atomic_store(&p->child->set_il, 1);
        clrmux_compose_note_jit_writer(p->mux, p->child, moduleId, methodId);
    }
    return hr;
}

/* ---- detach: this child only (detach.h) -------------------------------------------------- */

static HRESULT STDMETHODCALLTYPE pxo_RequestProfilerDetach(ICorProfilerInfo15 *This, DWORD dwExpectedCompletionMilliseconds)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_detach_request(p->mux, p->child, dwExpectedCompletionMilliseconds);
}

/* ---- enter/leave hooks and function-ID mappers: the first child to set them owns them -- */

static HRESULT claim(struct clrmux_proxy *p, _Atomic(struct clrmux_child *) *owner, const char *what)
{
    struct clrmux_child *expected = NULL;
    if (atomic_compare_exchange_strong(owner, &expected, p->child) || expected == p->child)
        return S_OK;
    /* a child whose Initialize failed owns nothing any more: the next child may take them */
    if (!atomic_load(&expected->active) && atomic_compare_exchange_strong(owner, &expected, p->child))
        return S_OK;
    LOG_ERROR("child '%s': %s refused: child '%s' already owns them (clrmux gives enter/leave hooks to one child)",
              p->child->name, what, expected->name);
    return CORPROF_E_UNSUPPORTED_CALL_SEQUENCE;
}

#define OWNED(N, OWNER, WHAT, P, A)                                                       \
    static HRESULT STDMETHODCALLTYPE pxo_##N(ICorProfilerInfo15 *This CLRMUX_EXPAND P)  \
    {                                                                                  \
        struct clrmux_proxy *p = px_impl(This);                                        \
        HRESULT hr = claim(p, &p->mux->OWNER, WHAT);                                   \
        if (FAILED(hr))                                                                \
            return hr;                                                                 \
        return p->mux->info->lpVtbl->N(p->mux->info CLRMUX_EXPAND A);                  \
    }
OWNED(SetEnterLeaveFunctionHooks, elt_owner, "SetEnterLeaveFunctionHooks",
      (, FunctionEnter *a, FunctionLeave *b, FunctionTailcall *c), (, a, b, c))
OWNED(SetEnterLeaveFunctionHooks2, elt_owner, "SetEnterLeaveFunctionHooks2",
      (, FunctionEnter2 *a, FunctionLeave2 *b, FunctionTailcall2 *c), (, a, b, c))
OWNED(SetEnterLeaveFunctionHooks3, elt_owner, "SetEnterLeaveFunctionHooks3",
      (, FunctionEnter3 *a, FunctionLeave3 *b, FunctionTailcall3 *c), (, a, b, c))
OWNED(SetEnterLeaveFunctionHooks3WithInfo, elt_owner, "SetEnterLeaveFunctionHooks3WithInfo",
      (, FunctionEnter3WithInfo *a, FunctionLeave3WithInfo *b, FunctionTailcall3WithInfo *c), (, a, b, c))
OWNED(SetFunctionIDMapper, mapper_owner, "SetFunctionIDMapper", (, FunctionIDMapper *a), (, a))
OWNED(SetFunctionIDMapper2, mapper_owner, "SetFunctionIDMapper2", (, FunctionIDMapper2 *a, void *b), (, a, b))

/* ---- EventPipe: remember which child started which session ---------------------------- */

static HRESULT STDMETHODCALLTYPE pxo_EventPipeStartSession(ICorProfilerInfo15 *This, UINT32 cProviderConfigs,
                                                           COR_PRF_EVENTPIPE_PROVIDER_CONFIG *pProviderConfigs,
                                                           BOOL requestRundown, EVENTPIPE_SESSION *pSession)
{
    struct clrmux_proxy *p = px_impl(This);
    struct clrmux_mux *m = p->mux;
    HRESULT hr = m->info->lpVtbl->EventPipeStartSession(m->info, cProviderConfigs, pProviderConfigs, requestRundown, pSession);
    if (FAILED(hr) || !pSession)
        return hr;
    pthread_mutex_lock(&m->ep_lock);
    int n = atomic_load(&m->n_ep_sessions);
    if (n < CLRMUX_MAX_EP_SESSIONS) {
        struct clrmux_ep_session *s = &m->ep_sessions[n];
        s->session = *pSession;
        int np = 0;
        for (UINT32 i = 0; i < cProviderConfigs && np < CLRMUX_MAX_EP_PROVIDERS; i++)
            if (pProviderConfigs[i].providerName)
                clrmux_utf16_to_utf8(pProviderConfigs[i].providerName, 1024, s->providers[np++], 128);
        atomic_store_explicit(&s->nproviders, np, memory_order_relaxed);
        atomic_store_explicit(&s->child, p->child->index, memory_order_relaxed);
        atomic_store_explicit(&m->n_ep_sessions, n + 1, memory_order_release); /* publishes the slot */
    } else {
        LOG_WARN("child '%s': more than %d EventPipe sessions; events of this one are not routed",
                 p->child->name, CLRMUX_MAX_EP_SESSIONS);
    }
    pthread_mutex_unlock(&m->ep_lock);
    return hr;
}

/* A provider added to a session later is routed like the session's first ones. */
static HRESULT STDMETHODCALLTYPE pxo_EventPipeAddProviderToSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION session,
                                                                   COR_PRF_EVENTPIPE_PROVIDER_CONFIG providerConfig)
{
    struct clrmux_proxy *p = px_impl(This);
    struct clrmux_mux *m = p->mux;
    HRESULT hr = m->info->lpVtbl->EventPipeAddProviderToSession(m->info, session, providerConfig);
    if (FAILED(hr) || !providerConfig.providerName)
        return hr;
    char name[128];
    clrmux_utf16_to_utf8(providerConfig.providerName, 1024, name, sizeof name);
    pthread_mutex_lock(&m->ep_lock);
    for (int i = 0; i < atomic_load(&m->n_ep_sessions); i++) {
        struct clrmux_ep_session *s = &m->ep_sessions[i];
        if (s->session != session || atomic_load(&s->child) != p->child->index)
            continue;
        int n = atomic_load(&s->nproviders), known = 0;
        for (int k = 0; k < n; k++)
            known |= strcasecmp(s->providers[k], name) == 0;
        if (!known && n < CLRMUX_MAX_EP_PROVIDERS) {
            memcpy(s->providers[n], name, sizeof name);
            atomic_store_explicit(&s->nproviders, n + 1, memory_order_release); /* the name before the count */
        } else if (!known) {
            LOG_WARN("child '%s': more than %d providers in an EventPipe session; events of '%s' are not routed",
                     p->child->name, CLRMUX_MAX_EP_PROVIDERS, name);
        }
        break;
    }
    pthread_mutex_unlock(&m->ep_lock);
    return hr;
}

static HRESULT STDMETHODCALLTYPE pxo_EventPipeStopSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION session)
{
    struct clrmux_proxy *p = px_impl(This);
    struct clrmux_mux *m = p->mux;
    pthread_mutex_lock(&m->ep_lock);
    for (int i = 0; i < atomic_load(&m->n_ep_sessions); i++)
        if (m->ep_sessions[i].session == session && atomic_load(&m->ep_sessions[i].child) == p->child->index)
            atomic_store_explicit(&m->ep_sessions[i].child, -1, memory_order_release);
    pthread_mutex_unlock(&m->ep_lock);
    return m->info->lpVtbl->EventPipeStopSession(m->info, session);
}

/* ---- vtable: forwarders, then the overrides ------------------------------------------- */

#define VT(I, D, R, N, P, A, ROUTE) .N = px_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerInfo15Vtbl proxy_vtbl = {
    CLRMUX_METHODS_ICorProfilerInfo(VT, x) CLRMUX_METHODS_ICorProfilerInfo2(VT, x) CLRMUX_METHODS_ICorProfilerInfo3(VT, x)
    CLRMUX_METHODS_ICorProfilerInfo4(VT, x) CLRMUX_METHODS_ICorProfilerInfo5(VT, x) CLRMUX_METHODS_ICorProfilerInfo6(VT, x)
    CLRMUX_METHODS_ICorProfilerInfo7(VT, x) CLRMUX_METHODS_ICorProfilerInfo8(VT, x) CLRMUX_METHODS_ICorProfilerInfo9(VT, x)
    CLRMUX_METHODS_ICorProfilerInfo10(VT, x) CLRMUX_METHODS_ICorProfilerInfo11(VT, x)
    CLRMUX_METHODS_ICorProfilerInfo12(VT, x) CLRMUX_METHODS_ICorProfilerInfo13(VT, x)
    CLRMUX_METHODS_ICorProfilerInfo14(VT, x) CLRMUX_METHODS_ICorProfilerInfo15(VT, x)
    .QueryInterface = pxo_QueryInterface,
    .AddRef = pxo_AddRef,
    .Release = pxo_Release,
    .GetEventMask = pxo_GetEventMask,
    .GetEventMask2 = pxo_GetEventMask2,
    .SetEventMask = pxo_SetEventMask,
    .SetEventMask2 = pxo_SetEventMask2,
    .RequestReJIT = pxo_RequestReJIT,
    .RequestReJITWithInliners = pxo_RequestReJITWithInliners,
    .RequestRevert = pxo_RequestRevert,
    .RequestProfilerDetach = pxo_RequestProfilerDetach,
    .GetILFunctionBody = pxo_GetILFunctionBody,
    .SetILFunctionBody = pxo_SetILFunctionBody,
    .SetEnterLeaveFunctionHooks = pxo_SetEnterLeaveFunctionHooks,
    .SetEnterLeaveFunctionHooks2 = pxo_SetEnterLeaveFunctionHooks2,
    .SetEnterLeaveFunctionHooks3 = pxo_SetEnterLeaveFunctionHooks3,
    .SetEnterLeaveFunctionHooks3WithInfo = pxo_SetEnterLeaveFunctionHooks3WithInfo,
    .SetFunctionIDMapper = pxo_SetFunctionIDMapper,
    .SetFunctionIDMapper2 = pxo_SetFunctionIDMapper2,
    .EventPipeStartSession = pxo_EventPipeStartSession,
    .EventPipeAddProviderToSession = pxo_EventPipeAddProviderToSession,
    .EventPipeStopSession = pxo_EventPipeStopSession,
};
#pragma GCC diagnostic pop

void clrmux_proxy_init(struct clrmux_proxy *p, struct clrmux_mux *mux, struct clrmux_child *child)
{
    p->iface.lpVtbl = &proxy_vtbl;
    atomic_store(&p->refs, 1);
    p->mux = mux;
    p->child = child;
}
