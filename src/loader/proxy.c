/* The per-child ICorProfilerInfo proxy. Every method forwards to the runtime (generated from
 * gen/corprof_list.h) except the ones that must be the child's own: its event mask, its
 * ReJIT requests, enter/leave hooks and function-ID mappers (loader/elt.c), and EventPipe sessions. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/utf16.h"
#include "loader/elt.h"
#include "loader/eventpipe.h"
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

/* The ReJIT IDs this child would see alone (compose_view.c). */
static HRESULT STDMETHODCALLTYPE pxo_GetReJITIDs(ICorProfilerInfo15 *This, FunctionID functionId, ULONG cReJitIds,
                                                 ULONG *pcReJitIds, ReJITID *reJitIds)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_compose_rejit_ids(p->mux, p->child, functionId, cReJitIds, pcReJitIds, reJitIds);
}

/* A made-up ReJIT ID (a held-back version composed at JIT time) is the default version's code. */
static HRESULT STDMETHODCALLTYPE pxo_GetNativeCodeStartAddresses(ICorProfilerInfo15 *This, FunctionID functionID,
                                                                 ReJITID reJitId, ULONG32 cCodeStartAddresses,
                                                                 ULONG32 *pcCodeStartAddresses,
                                                                 UINT_PTR codeStartAddresses[])
{
    ICorProfilerInfo15 *real = px_impl(This)->mux->info;
    return real->lpVtbl->GetNativeCodeStartAddresses(real, functionID, clrmux_compose_runtime_rejitid(reJitId),
                                                     cCodeStartAddresses, pcCodeStartAddresses, codeStartAddresses);
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

/* JIT time: the runtime keeps the body as the method's IL, so the next child builds on it
 * (with the held-back ReJIT owners' rewrites on top for a method composed at JIT time). */
static HRESULT STDMETHODCALLTYPE pxo_SetILFunctionBody(ICorProfilerInfo15 *This, ModuleID moduleId, mdMethodDef methodId,
                                                       LPCBYTE pbNewILMethodHeader)
{
    struct clrmux_proxy *p = px_impl(This);
    HRESULT hr = clrmux_compose_jit_set_body(p->mux, p->child, moduleId, methodId, pbNewILMethodHeader);
    if (SUCCEEDED(hr))
        atomic_store(&p->child->set_il, 1);
    return hr;
}

/* ---- detach: this child only (detach.h) -------------------------------------------------- */

static HRESULT STDMETHODCALLTYPE pxo_RequestProfilerDetach(ICorProfilerInfo15 *This, DWORD dwExpectedCompletionMilliseconds)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_detach_request(p->mux, p->child, dwExpectedCompletionMilliseconds);
}

/* ---- a thread the child brings in itself is its own (ownthreads.h) ----------------------- */

static HRESULT STDMETHODCALLTYPE pxo_InitializeCurrentThread(ICorProfilerInfo15 *This)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_own_thread_initialize(p->mux, p->child);
}

/* ---- enter/leave hooks and function-ID mappers: every child its own (loader/elt.c) ------ */

#define HOOKS(N, GEN, E, L, T)                                                                     \
    static HRESULT STDMETHODCALLTYPE pxo_##N(ICorProfilerInfo15 *This, E *a, L *b, T *c)           \
    {                                                                                              \
        struct clrmux_proxy *p = px_impl(This);                                                    \
        return clrmux_elt_set_hooks(p->mux, p->child, GEN, (void *)a, (void *)b, (void *)c);       \
    }
HOOKS(SetEnterLeaveFunctionHooks, CLRMUX_ELT_GEN1, FunctionEnter, FunctionLeave, FunctionTailcall)
HOOKS(SetEnterLeaveFunctionHooks2, CLRMUX_ELT_GEN2, FunctionEnter2, FunctionLeave2, FunctionTailcall2)
HOOKS(SetEnterLeaveFunctionHooks3, CLRMUX_ELT_GEN3, FunctionEnter3, FunctionLeave3, FunctionTailcall3)
HOOKS(SetEnterLeaveFunctionHooks3WithInfo, CLRMUX_ELT_GEN3_INFO, FunctionEnter3WithInfo, FunctionLeave3WithInfo,
      FunctionTailcall3WithInfo)

static HRESULT STDMETHODCALLTYPE pxo_SetFunctionIDMapper(ICorProfilerInfo15 *This, FunctionIDMapper *fn)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_elt_set_mapper(p->mux, p->child, 0, (void *)fn, NULL);
}

static HRESULT STDMETHODCALLTYPE pxo_SetFunctionIDMapper2(ICorProfilerInfo15 *This, FunctionIDMapper2 *fn, void *data)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_elt_set_mapper(p->mux, p->child, 1, (void *)fn, data);
}

static HRESULT STDMETHODCALLTYPE pxo_GetFunctionEnter3Info(ICorProfilerInfo15 *This, FunctionID fid, COR_PRF_ELT_INFO info,
                                                           COR_PRF_FRAME_INFO *frame, ULONG *pcb,
                                                           COR_PRF_FUNCTION_ARGUMENT_INFO *args)
{
    return clrmux_elt_enter3_info(px_impl(This)->child, fid, info, frame, pcb, args);
}

static HRESULT STDMETHODCALLTYPE pxo_GetFunctionLeave3Info(ICorProfilerInfo15 *This, FunctionID fid, COR_PRF_ELT_INFO info,
                                                           COR_PRF_FRAME_INFO *frame, COR_PRF_FUNCTION_ARGUMENT_RANGE *rv)
{
    return clrmux_elt_leave3_info(px_impl(This)->child, fid, info, frame, rv);
}

static HRESULT STDMETHODCALLTYPE pxo_GetFunctionTailcall3Info(ICorProfilerInfo15 *This, FunctionID fid,
                                                              COR_PRF_ELT_INFO info, COR_PRF_FRAME_INFO *frame)
{
    return clrmux_elt_tailcall3_info(px_impl(This)->child, fid, info, frame);
}

/* ---- EventPipe: each child its own view of clrmux's session (loader/eventpipe.c) ------- */

static HRESULT STDMETHODCALLTYPE pxo_EventPipeStartSession(ICorProfilerInfo15 *This, UINT32 cProviderConfigs,
                                                           COR_PRF_EVENTPIPE_PROVIDER_CONFIG *pProviderConfigs,
                                                           BOOL requestRundown, EVENTPIPE_SESSION *pSession)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_ep_start(p->mux, p->child, cProviderConfigs, pProviderConfigs, requestRundown, pSession);
}

static HRESULT STDMETHODCALLTYPE pxo_EventPipeAddProviderToSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION session,
                                                                   COR_PRF_EVENTPIPE_PROVIDER_CONFIG providerConfig)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_ep_add_provider(p->mux, p->child, session, providerConfig);
}

static HRESULT STDMETHODCALLTYPE pxo_EventPipeStopSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION session)
{
    struct clrmux_proxy *p = px_impl(This);
    return clrmux_ep_stop(p->mux, p->child, session);
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
    .GetReJITIDs = pxo_GetReJITIDs,
    .GetNativeCodeStartAddresses = pxo_GetNativeCodeStartAddresses,
    .RequestProfilerDetach = pxo_RequestProfilerDetach,
    .InitializeCurrentThread = pxo_InitializeCurrentThread,
    .GetILFunctionBody = pxo_GetILFunctionBody,
    .SetILFunctionBody = pxo_SetILFunctionBody,
    .SetEnterLeaveFunctionHooks = pxo_SetEnterLeaveFunctionHooks,
    .SetEnterLeaveFunctionHooks2 = pxo_SetEnterLeaveFunctionHooks2,
    .SetEnterLeaveFunctionHooks3 = pxo_SetEnterLeaveFunctionHooks3,
    .SetEnterLeaveFunctionHooks3WithInfo = pxo_SetEnterLeaveFunctionHooks3WithInfo,
    .SetFunctionIDMapper = pxo_SetFunctionIDMapper,
    .SetFunctionIDMapper2 = pxo_SetFunctionIDMapper2,
    .GetFunctionEnter3Info = pxo_GetFunctionEnter3Info,
    .GetFunctionLeave3Info = pxo_GetFunctionLeave3Info,
    .GetFunctionTailcall3Info = pxo_GetFunctionTailcall3Info,
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
