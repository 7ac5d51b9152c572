/* An in-process fake .NET runtime and fake child profilers for the mux's unit tests.
 *
 * struct fake_runtime: an ICorProfilerInfo15 object whose vtable is generated from the
 * X-macro lists (every method E_NOTIMPL) with a few methods overridden:
 *   QueryInterface   answers IUnknown and ICorProfilerInfo1..max_version only
 *   SetEventMask/2   records the last mask and counts calls; refuses (refuse_hr) any mask
 *                    containing a bit of refuse_low / refuse_high
 *   GetEventMask/2   the mask last set (so a proxy that forwards these is caught)
 *   GetRuntimeInformation  CoreCLR, version `major`.0.0
 *   GetFunctionInfo  FunctionID -> (class, module, token) from funcs[]
 *   RequestReJIT / RequestReJITWithInliners  recorded; each method requested gets a new
 *                    ReJIT ID (a counter from 1), which GetReJITIDs lists
 *   SetEnterLeaveFunctionHooks*, SetFunctionIDMapper*  counted
 *   EventPipeStartSession / StopSession / AddProviderToSession  session ids, counted
 *   EventPipeGetProviderInfo  name by provider handle from providers[]
 *
 * struct fake_child: an ICorProfilerCallback11 object answering QueryInterface up to
 * max_version, counting every callback by name (FC_CALLS(fc, Name)), setting its mask
 * (init_low/init_high) through the ICorProfilerInfo it receives in Initialize, with
 * configurable JITInlining / JITCachedFunctionSearchStarted answers.
 *
 * fake_mux_*: builds a mux with in-process children the way mux_Initialize and
 * clrmux_load_children do, without dlopen. */
#ifndef CLRMUX_TESTS_FAKE_RUNTIME_H
#define CLRMUX_TESTS_FAKE_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_server.h"
#include "clrmux/corprof.h"
#include "common/utf16.h"
#include "loader/elt.h"
#include "loader/eventpipe.h"
#include "loader/mux.h"
#include "loader/versions.h"

/* ======================================================================================
 * The fake runtime
 * ====================================================================================== */

#define FAKE_RT_MAX_FUNCS 16
#define FAKE_RT_MAX_PROVIDERS 16
#define FAKE_RT_MAX_REJIT 16

struct fake_runtime {
    ICorProfilerInfo15 iface;
    int refs;
    int max_version;  /* highest ICorProfilerInfoN answered by QueryInterface (1..15) */
    USHORT major;     /* GetRuntimeInformation's major version */
    int no_callback11; /* 1: like .NET Core 3.1, never calls LoadAsNotificationOnly */
    /* SetEventMask / SetEventMask2 */
    DWORD mask_low, mask_high; /* the mask in force (last one accepted) */
    int set_mask_calls;        /* SetEventMask + SetEventMask2 calls, refused ones included */
    int set_mask_accepted;
    DWORD refuse_low, refuse_high; /* refuse any mask with one of these bits... */
    HRESULT refuse_hr;             /* ...with this HRESULT (E_INVALIDARG when 0) */
    /* GetFunctionInfo */
    struct { FunctionID fid; ClassID cls; ModuleID mod; mdToken tok; } funcs[FAKE_RT_MAX_FUNCS];
    int nfuncs;
    /* RequestReJIT / RequestReJITWithInliners */
    int rejit_calls;
    ULONG rejit_last_count;
    ModuleID rejit_mods[FAKE_RT_MAX_REJIT];
    mdMethodDef rejit_methods[FAKE_RT_MAX_REJIT];
    int revert_calls;
    ULONG revert_last_count;
    mdMethodDef revert_methods[FAKE_RT_MAX_REJIT];
    int rejit_inliner_calls; /* RequestReJITWithInliners among rejit_calls */
    DWORD rejit_inliner_flags;
    /* the ReJIT IDs made (one per method per request) */
    struct { ModuleID mod; mdToken tok; ReJITID id; } rejit_ids[64];
    int nrejit_ids;
    /* IL: GetILFunctionBody answers `il` (the method's IL; Info::SetILFunctionBody replaces it) */
    BYTE il[256];
    ULONG il_size;
    int set_il_calls;
    _Atomic int detach_calls; /* RequestProfilerDetach (answers S_OK) */
    BYTE arena[4096];         /* GetILFunctionBodyAllocator's IMethodMalloc */
    ULONG arena_used;
    struct fake_malloc { IMethodMalloc iface; struct fake_runtime *rt; } malloc_obj;
    /* enter/leave hooks and mappers */
    int elt_calls;    /* SetEnterLeaveFunctionHooks, 2, 3, 3WithInfo */
    int mapper_calls; /* SetFunctionIDMapper, 2 */
    /* EventPipe */
    EVENTPIPE_SESSION next_session;
    int sessions_started, sessions_stopped, providers_added;
    struct { EVENTPIPE_PROVIDER handle; const char *name; } providers[FAKE_RT_MAX_PROVIDERS];
    int nproviders;
};

static inline struct fake_runtime *fr_impl(ICorProfilerInfo15 *i)
{
    return (struct fake_runtime *)((char *)i - offsetof(struct fake_runtime, iface));
}

/* Defaults: every method E_NOTIMPL. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define FR_DEFAULT(I, D, R, N, P, A, ROUTE)                                                     \
    __attribute__((unused)) static R STDMETHODCALLTYPE frd_##N(ICorProfilerInfo15 *This CLRMUX_EXPAND P) \
    {                                                                                           \
        return E_NOTIMPL;                                                                       \
    }
CLRMUX_METHODS_ICorProfilerInfo(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo2(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo3(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo4(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo5(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo6(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo7(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo8(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo9(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo10(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo11(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo12(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo13(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo14(FR_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerInfo15(FR_DEFAULT, x)
#undef FR_DEFAULT
#pragma GCC diagnostic pop

static const IID *const fr_info_iids[] = CLRMUX_INFO_IIDS;

static HRESULT STDMETHODCALLTYPE fr_QueryInterface(ICorProfilerInfo15 *This, REFIID riid, void **ppv)
{
    struct fake_runtime *rt = fr_impl(This);
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    int ok = IsEqualIID(riid, &IID_IUnknown);
    for (int v = 1; !ok && v <= rt->max_version && v <= CLRMUX_INFO_MAX_VERSION; v++)
        ok = IsEqualIID(riid, fr_info_iids[v]);
    if (!ok)
        return E_NOINTERFACE;
    rt->refs++;
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE fr_AddRef(ICorProfilerInfo15 *This) { return (ULONG)++fr_impl(This)->refs; }
static ULONG STDMETHODCALLTYPE fr_Release(ICorProfilerInfo15 *This) { return (ULONG)--fr_impl(This)->refs; }

static HRESULT fr_set_mask(struct fake_runtime *rt, DWORD low, DWORD high)
{
    rt->set_mask_calls++;
    if ((low & rt->refuse_low) || (high & rt->refuse_high))
        return rt->refuse_hr ? rt->refuse_hr : E_INVALIDARG;
    rt->mask_low = low;
    rt->mask_high = high;
    rt->set_mask_accepted++;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_SetEventMask(ICorProfilerInfo15 *This, DWORD low)
{
    return fr_set_mask(fr_impl(This), low, 0);
}
static HRESULT STDMETHODCALLTYPE fr_SetEventMask2(ICorProfilerInfo15 *This, DWORD low, DWORD high)
{
    return fr_set_mask(fr_impl(This), low, high);
}
static HRESULT STDMETHODCALLTYPE fr_GetEventMask(ICorProfilerInfo15 *This, DWORD *low)
{
    *low = fr_impl(This)->mask_low;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_GetEventMask2(ICorProfilerInfo15 *This, DWORD *low, DWORD *high)
{
    *low = fr_impl(This)->mask_low;
    *high = fr_impl(This)->mask_high;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fr_GetRuntimeInformation(ICorProfilerInfo15 *This, USHORT *pClrInstanceId,
                                                         COR_PRF_RUNTIME_TYPE *pRuntimeType, USHORT *pMajorVersion,
                                                         USHORT *pMinorVersion, USHORT *pBuildNumber,
                                                         USHORT *pQFEVersion, ULONG cchVersionString,
                                                         ULONG *pcchVersionString, WCHAR *szVersionString)
{
    struct fake_runtime *rt = fr_impl(This);
    char ver[32];
    snprintf(ver, sizeof ver, "%u.0.0", (unsigned)rt->major);
    if (pClrInstanceId) *pClrInstanceId = 0;
    if (pRuntimeType) *pRuntimeType = COR_PRF_CORE_CLR;
    if (pMajorVersion) *pMajorVersion = rt->major;
    if (pMinorVersion) *pMinorVersion = 0;
    if (pBuildNumber) *pBuildNumber = 0;
    if (pQFEVersion) *pQFEVersion = 0;
    if (pcchVersionString) *pcchVersionString = (ULONG)strlen(ver) + 1;
    if (szVersionString && cchVersionString)
        clrmux_utf8_to_utf16(ver, szVersionString, cchVersionString);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fr_GetFunctionInfo(ICorProfilerInfo15 *This, FunctionID fid, ClassID *pClassId,
                                                   ModuleID *pModuleId, mdToken *pToken)
{
    struct fake_runtime *rt = fr_impl(This);
    for (int i = 0; i < rt->nfuncs; i++) {
        if (rt->funcs[i].fid == fid) {
            if (pClassId) *pClassId = rt->funcs[i].cls;
            if (pModuleId) *pModuleId = rt->funcs[i].mod;
            if (pToken) *pToken = rt->funcs[i].tok;
            return S_OK;
        }
    }
    return E_INVALIDARG;
}

/* Functions added with fake_runtime_add_function count as compiled (one code range). */
static HRESULT STDMETHODCALLTYPE fr_GetFunctionFromToken(ICorProfilerInfo15 *This, ModuleID mod, mdToken tok,
                                                        FunctionID *pfid)
{
    struct fake_runtime *rt = fr_impl(This);
    for (int i = 0; i < rt->nfuncs; i++)
        if (rt->funcs[i].mod == mod && rt->funcs[i].tok == tok) {
            *pfid = rt->funcs[i].fid;
            return S_OK;
        }
    return E_INVALIDARG;
}
static HRESULT STDMETHODCALLTYPE fr_GetCodeInfo2(ICorProfilerInfo15 *This, FunctionID fid, ULONG32 n, ULONG32 *pn,
                                                COR_PRF_CODE_INFO *infos)
{
    struct fake_runtime *rt = fr_impl(This);
    for (int i = 0; i < rt->nfuncs; i++)
        if (rt->funcs[i].fid == fid) {
            if (pn)
                *pn = 1;
            if (infos && n >= 1) {
                infos[0].startAddress = 0x1000;
                infos[0].size = 16;
            }
            return S_OK;
        }
    return CORPROF_E_FUNCTION_NOT_COMPILED;
}

/* The ReJIT bookkeeping is shared by the threads of the stress tests. */
static pthread_mutex_t fr_rejit_lock = PTHREAD_MUTEX_INITIALIZER;
static void fr_record_rejit(struct fake_runtime *rt, ULONG n, ModuleID *mods, mdMethodDef *methods)
{
    pthread_mutex_lock(&fr_rejit_lock);
    rt->rejit_calls++;
    rt->rejit_last_count = n;
    for (ULONG i = 0; i < n && i < FAKE_RT_MAX_REJIT; i++) {
        rt->rejit_mods[i] = mods[i];
        rt->rejit_methods[i] = methods[i];
        if (rt->nrejit_ids < 64) {
            rt->rejit_ids[rt->nrejit_ids].mod = mods[i];
            rt->rejit_ids[rt->nrejit_ids].tok = methods[i];
            rt->rejit_ids[rt->nrejit_ids].id = (ReJITID)rt->nrejit_ids + 1;
            rt->nrejit_ids++;
        }
    }
    pthread_mutex_unlock(&fr_rejit_lock);
}
/* The ReJIT ID the last request made for (mod, tok); 0 if none. */
static inline ReJITID fake_runtime_last_rejit_id(struct fake_runtime *rt, ModuleID mod, mdToken tok)
{
    ReJITID id = 0;
    pthread_mutex_lock(&fr_rejit_lock);
    for (int i = 0; i < rt->nrejit_ids; i++)
        if (rt->rejit_ids[i].mod == mod && rt->rejit_ids[i].tok == tok)
            id = rt->rejit_ids[i].id;
    pthread_mutex_unlock(&fr_rejit_lock);
    return id;
}
static HRESULT STDMETHODCALLTYPE fr_GetReJITIDs(ICorProfilerInfo15 *This, FunctionID fid, ULONG cap, ULONG *pn,
                                               ReJITID *ids)
{
    struct fake_runtime *rt = fr_impl(This);
    if (!pn || (cap && !ids))
        return E_INVALIDARG;
    ModuleID mod = 0;
    mdToken tok = 0;
    int found = 0;
    for (int i = 0; i < rt->nfuncs && !found; i++)
        if (rt->funcs[i].fid == fid)
            mod = rt->funcs[i].mod, tok = rt->funcs[i].tok, found = 1;
    if (!found)
        return E_INVALIDARG;
    ULONG n = 0;
    pthread_mutex_lock(&fr_rejit_lock);
    for (int i = 0; i < rt->nrejit_ids; i++)
        if (rt->rejit_ids[i].mod == mod && rt->rejit_ids[i].tok == tok) {
            if (n < cap)
                ids[n] = rt->rejit_ids[i].id;
            n++;
        }
    pthread_mutex_unlock(&fr_rejit_lock);
    *pn = n;
    return n > cap ? S_FALSE : S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_RequestReJIT(ICorProfilerInfo15 *This, ULONG n, ModuleID *mods, mdMethodDef *methods)
{
    fr_record_rejit(fr_impl(This), n, mods, methods);
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_RequestReJITWithInliners(ICorProfilerInfo15 *This, DWORD flags, ULONG n,
                                                            ModuleID *mods, mdMethodDef *methods)
{
    fr_impl(This)->rejit_inliner_calls++;
    fr_impl(This)->rejit_inliner_flags = flags;
    fr_record_rejit(fr_impl(This), n, mods, methods);
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_RequestRevert(ICorProfilerInfo15 *This, ULONG n, ModuleID *mods,
                                                 mdMethodDef *methods, HRESULT *status)
{
    struct fake_runtime *rt = fr_impl(This);
    (void)mods;
    rt->revert_calls++;
    rt->revert_last_count = n;
    for (ULONG i = 0; i < n && i < FAKE_RT_MAX_REJIT; i++) {
        rt->revert_methods[i] = methods[i];
        if (status)
            status[i] = S_OK;
    }
    return S_OK;
}
/* IMethodMalloc: hands out pieces of the runtime's arena (never freed, like the runtime's). */
static HRESULT STDMETHODCALLTYPE fm_QueryInterface(IMethodMalloc *This, REFIID riid, void **ppv)
{
    (void)riid;
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE fm_AddRef(IMethodMalloc *This) { (void)This; return 2; }
static ULONG STDMETHODCALLTYPE fm_Release(IMethodMalloc *This) { (void)This; return 1; }
static PVOID STDMETHODCALLTYPE fm_Alloc(IMethodMalloc *This, ULONG cb)
{
    struct fake_runtime *rt = ((struct fake_malloc *)This)->rt;
    if (rt->arena_used + cb > sizeof rt->arena)
        return NULL;
    void *p = rt->arena + rt->arena_used;
    rt->arena_used += (cb + 7) & ~7u;
    return p;
}
static const IMethodMallocVtbl fake_malloc_vtbl = {fm_QueryInterface, fm_AddRef, fm_Release, fm_Alloc};
static HRESULT STDMETHODCALLTYPE fr_GetILFunctionBodyAllocator(ICorProfilerInfo15 *This, ModuleID mod,
                                                              IMethodMalloc **pp)
{
    struct fake_runtime *rt = fr_impl(This);
    (void)mod;
    rt->malloc_obj.iface.lpVtbl = &fake_malloc_vtbl;
    rt->malloc_obj.rt = rt;
    *pp = &rt->malloc_obj.iface;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fr_RequestProfilerDetach(ICorProfilerInfo15 *This, DWORD ms)
{
    (void)ms;
    atomic_fetch_add(&fr_impl(This)->detach_calls, 1);
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_GetILFunctionBody(ICorProfilerInfo15 *This, ModuleID mod, mdMethodDef method,
                                                     LPCBYTE *hdr, ULONG *size)
{
    struct fake_runtime *rt = fr_impl(This);
    (void)mod, (void)method;
    if (hdr)
        *hdr = rt->il;
    if (size)
        *size = rt->il_size;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_SetILFunctionBody(ICorProfilerInfo15 *This, ModuleID mod, mdMethodDef method,
                                                     LPCBYTE body)
{
    struct fake_runtime *rt = fr_impl(This);
    (void)mod, (void)method;
    /* fake bodies are NUL-terminated strings */
    rt->il_size = (ULONG)strlen((const char *)body);
    memcpy(rt->il, body, rt->il_size + 1);
    rt->set_il_calls++;
    return S_OK;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
static HRESULT STDMETHODCALLTYPE fr_SetEnterLeaveFunctionHooks(ICorProfilerInfo15 *This, FunctionEnter *a,
                                                              FunctionLeave *b, FunctionTailcall *c)
{ fr_impl(This)->elt_calls++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_SetEnterLeaveFunctionHooks2(ICorProfilerInfo15 *This, FunctionEnter2 *a,
                                                               FunctionLeave2 *b, FunctionTailcall2 *c)
{ fr_impl(This)->elt_calls++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_SetEnterLeaveFunctionHooks3(ICorProfilerInfo15 *This, FunctionEnter3 *a,
                                                               FunctionLeave3 *b, FunctionTailcall3 *c)
{ fr_impl(This)->elt_calls++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_SetEnterLeaveFunctionHooks3WithInfo(ICorProfilerInfo15 *This,
                                                                       FunctionEnter3WithInfo *a,
                                                                       FunctionLeave3WithInfo *b,
                                                                       FunctionTailcall3WithInfo *c)
{ fr_impl(This)->elt_calls++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_SetFunctionIDMapper(ICorProfilerInfo15 *This, FunctionIDMapper *a)
{ fr_impl(This)->mapper_calls++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_SetFunctionIDMapper2(ICorProfilerInfo15 *This, FunctionIDMapper2 *a, void *b)
{ fr_impl(This)->mapper_calls++; return S_OK; }

static HRESULT STDMETHODCALLTYPE fr_EventPipeStartSession(ICorProfilerInfo15 *This, UINT32 n,
                                                         COR_PRF_EVENTPIPE_PROVIDER_CONFIG *cfgs, BOOL rundown,
                                                         EVENTPIPE_SESSION *pSession)
{
    struct fake_runtime *rt = fr_impl(This);
    if (!pSession)
        return E_INVALIDARG;
    rt->sessions_started++;
    *pSession = rt->next_session ? rt->next_session++ : (rt->next_session = 0x1001, 0x1000);
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fr_EventPipeStopSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION s)
{ fr_impl(This)->sessions_stopped++; return S_OK; }
static HRESULT STDMETHODCALLTYPE fr_EventPipeAddProviderToSession(ICorProfilerInfo15 *This, EVENTPIPE_SESSION s,
                                                                 COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg)
{ fr_impl(This)->providers_added++; return S_OK; }
#pragma GCC diagnostic pop

static HRESULT STDMETHODCALLTYPE fr_EventPipeGetProviderInfo(ICorProfilerInfo15 *This, EVENTPIPE_PROVIDER provider,
                                                            ULONG cchName, ULONG *pcchName, WCHAR *providerName)
{
    struct fake_runtime *rt = fr_impl(This);
    for (int i = 0; i < rt->nproviders; i++) {
        if (rt->providers[i].handle != provider)
            continue;
        ULONG need = (ULONG)strlen(rt->providers[i].name) + 1; /* ASCII names: one unit per byte */
        if (pcchName)
            *pcchName = need;
        if (!providerName || cchName < need)
            return E_INVALIDARG; /* as HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER) */
        clrmux_utf8_to_utf16(rt->providers[i].name, providerName, cchName);
        return S_OK;
    }
    return E_INVALIDARG;
}

#define frd_QueryInterface fr_QueryInterface
#define frd_AddRef fr_AddRef
#define frd_Release fr_Release
#define FR_VT(I, D, R, N, P, A, ROUTE) .N = frd_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerInfo15Vtbl fake_runtime_vtbl = {
    CLRMUX_ALL_ICorProfilerInfo15(FR_VT, x)
    .SetEventMask = fr_SetEventMask,
    .SetEventMask2 = fr_SetEventMask2,
    .GetEventMask = fr_GetEventMask,
    .GetEventMask2 = fr_GetEventMask2,
    .GetRuntimeInformation = fr_GetRuntimeInformation,
    .GetFunctionInfo = fr_GetFunctionInfo,
    .GetFunctionFromToken = fr_GetFunctionFromToken,
    .GetCodeInfo2 = fr_GetCodeInfo2,
    .RequestReJIT = fr_RequestReJIT,
    .RequestReJITWithInliners = fr_RequestReJITWithInliners,
    .GetReJITIDs = fr_GetReJITIDs,
    .RequestRevert = fr_RequestRevert,
    .RequestProfilerDetach = fr_RequestProfilerDetach,
    .GetILFunctionBodyAllocator = fr_GetILFunctionBodyAllocator,
    .GetILFunctionBody = fr_GetILFunctionBody,
    .SetILFunctionBody = fr_SetILFunctionBody,
    .SetEnterLeaveFunctionHooks = fr_SetEnterLeaveFunctionHooks,
    .SetEnterLeaveFunctionHooks2 = fr_SetEnterLeaveFunctionHooks2,
    .SetEnterLeaveFunctionHooks3 = fr_SetEnterLeaveFunctionHooks3,
    .SetEnterLeaveFunctionHooks3WithInfo = fr_SetEnterLeaveFunctionHooks3WithInfo,
    .SetFunctionIDMapper = fr_SetFunctionIDMapper,
    .SetFunctionIDMapper2 = fr_SetFunctionIDMapper2,
    .EventPipeStartSession = fr_EventPipeStartSession,
    .EventPipeStopSession = fr_EventPipeStopSession,
    .EventPipeAddProviderToSession = fr_EventPipeAddProviderToSession,
    .EventPipeGetProviderInfo = fr_EventPipeGetProviderInfo,
};
#pragma GCC diagnostic pop
#undef FR_VT

/* A runtime answering ICorProfilerInfo1..max_version and reporting .NET `major`. */
static inline void fake_runtime_init(struct fake_runtime *rt, int max_version, int major)
{
    memset(rt, 0, sizeof *rt);
    rt->iface.lpVtbl = &fake_runtime_vtbl;
    rt->refs = 1;
    rt->max_version = max_version;
    rt->major = (USHORT)major;
}

static inline void fake_runtime_add_function(struct fake_runtime *rt, FunctionID fid, ModuleID mod, mdToken tok)
{
    if (rt->nfuncs < FAKE_RT_MAX_FUNCS) {
        rt->funcs[rt->nfuncs].fid = fid;
        rt->funcs[rt->nfuncs].cls = 0xC1A55;
        rt->funcs[rt->nfuncs].mod = mod;
        rt->funcs[rt->nfuncs].tok = tok;
        rt->nfuncs++;
    }
}

static inline void fake_runtime_add_provider(struct fake_runtime *rt, EVENTPIPE_PROVIDER handle, const char *name)
{
    if (rt->nproviders < FAKE_RT_MAX_PROVIDERS) {
        rt->providers[rt->nproviders].handle = handle;
        rt->providers[rt->nproviders].name = name;
        rt->nproviders++;
    }
}

static inline IUnknown *fake_runtime_unknown(struct fake_runtime *rt) { return (IUnknown *)&rt->iface; }

/* The runtime's ICorProfilerFunctionControl in GetReJITParameters: records what it is given. */
struct fake_fc {
    ICorProfilerFunctionControl iface;
    int set_body_calls, set_flags_calls, set_map_calls;
    BYTE body[256];
    ULONG body_size;
    DWORD flags;
    COR_IL_MAP map[16];
    ULONG nmap;
};
static inline struct fake_fc *ffc_impl(ICorProfilerFunctionControl *i) { return (struct fake_fc *)i; }
static HRESULT STDMETHODCALLTYPE ffc_QueryInterface(ICorProfilerFunctionControl *This, REFIID riid, void **ppv)
{
    (void)riid;
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE ffc_AddRef(ICorProfilerFunctionControl *This) { (void)This; return 2; }
static ULONG STDMETHODCALLTYPE ffc_Release(ICorProfilerFunctionControl *This) { (void)This; return 1; }
static HRESULT STDMETHODCALLTYPE ffc_SetCodegenFlags(ICorProfilerFunctionControl *This, DWORD flags)
{
    ffc_impl(This)->set_flags_calls++;
    ffc_impl(This)->flags = flags;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE ffc_SetILFunctionBody(ICorProfilerFunctionControl *This, ULONG cb, LPCBYTE pb)
{
    struct fake_fc *f = ffc_impl(This);
    f->set_body_calls++;
    f->body_size = cb < sizeof f->body ? cb : (ULONG)sizeof f->body - 1;
    memcpy(f->body, pb, f->body_size);
    f->body[f->body_size] = 0;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE ffc_SetILInstrumentedCodeMap(ICorProfilerFunctionControl *This, ULONG n,
                                                             COR_IL_MAP *map)
{
    struct fake_fc *f = ffc_impl(This);
    f->set_map_calls++;
    f->nmap = n < 16 ? n : 16;
    memcpy(f->map, map, f->nmap * sizeof *map);
    return S_OK;
}
static const ICorProfilerFunctionControlVtbl fake_fc_vtbl = {
    ffc_QueryInterface, ffc_AddRef, ffc_Release, ffc_SetCodegenFlags, ffc_SetILFunctionBody,
    ffc_SetILInstrumentedCodeMap,
};
static inline void fake_fc_init(struct fake_fc *f)
{
    memset(f, 0, sizeof *f);
    f->iface.lpVtbl = &fake_fc_vtbl;
}

/* ======================================================================================
 * The fake child profiler
 * ====================================================================================== */

#define FC_ENUM(I, D, R, N, P, A, ROUTE) FC_##N,
enum { CLRMUX_ALL_ICorProfilerCallback11(FC_ENUM, x) FC_COUNT };
#undef FC_ENUM
#define FC_NAME(I, D, R, N, P, A, ROUTE) #N,
static const char *const fc_names[] __attribute__((unused)) = {CLRMUX_ALL_ICorProfilerCallback11(FC_NAME, x)};
#undef FC_NAME

/* Calls of callback `Name` a fake child received. */
#define FC_CALLS(fc, Name) ((fc)->counts[FC_##Name])

struct fake_child;
typedef HRESULT (*fake_child_init_hook)(struct fake_child *fc, ICorProfilerInfo15 *info);
/* Called in GetReJITParameters with the function control the child received. */
typedef void (*fake_child_rejit_hook)(struct fake_child *fc, ModuleID mod, mdMethodDef method,
                                      ICorProfilerFunctionControl *ctl);
/* Called in JITCompilationStarted. */
typedef void (*fake_child_jit_hook)(struct fake_child *fc, FunctionID fid);

struct fake_child {
    ICorProfilerCallback11 iface;
    int refs;
    int max_version;          /* highest ICorProfilerCallbackN answered (1..11) */
    /* Initialize */
    DWORD init_low, init_high; /* mask set through the received Info in Initialize */
    int no_mask;               /* 1: Initialize does not call SetEventMask2 */
    HRESULT init_hr;           /* Initialize's return value */
    fake_child_init_hook init_hook; /* called last in Initialize (its HRESULT is ignored) */
    fake_child_rejit_hook rejit_hook;
    fake_child_jit_hook jit_hook;
    char tag;                  /* for the test rewriters */
    char seen[256];            /* for the test rewriters: the body they read */
    HRESULT init_mask_hr;      /* what SetEventMask2 answered in Initialize */
    ICorProfilerInfo15 *info;  /* what Initialize received, after QueryInterface(Info5) */
    /* out-parameter callbacks */
    int set_inline;  /* 1: JITInlining writes inline_answer */
    BOOL inline_answer;
    BOOL inline_seen; /* *pfShouldInline as the child received it */
    int set_cache;   /* 1: JITCachedFunctionSearchStarted writes cache_answer */
    BOOL cache_answer;
    BOOL cache_seen;
    /* arguments of interest */
    ModuleID last_module;
    mdMethodDef last_method;
    FunctionID last_function;
    ReJITID last_rejit_id;     /* ReJITCompilationStarted's */
    EVENTPIPE_PROVIDER last_provider;
    unsigned long counts[FC_COUNT];
};

static inline struct fake_child *fc_impl(ICorProfilerCallback11 *i)
{
    return (struct fake_child *)((char *)i - offsetof(struct fake_child, iface));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
/* Every callback: count it, answer S_OK. */
#define FC_DEFAULT(I, D, R, N, P, A, ROUTE)                                                        \
    __attribute__((unused)) static HRESULT STDMETHODCALLTYPE fcd_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    {                                                                                              \
        fc_impl(This)->counts[FC_##N]++;                                                           \
        return S_OK;                                                                               \
    }
CLRMUX_METHODS_ICorProfilerCallback(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback2(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback3(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback4(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback5(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback6(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback7(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback8(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback9(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback10(FC_DEFAULT, x)
CLRMUX_METHODS_ICorProfilerCallback11(FC_DEFAULT, x)
#undef FC_DEFAULT

static const IID *const fc_cb_iids[] = CLRMUX_CALLBACK_IIDS;

static HRESULT STDMETHODCALLTYPE fc_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    struct fake_child *fc = fc_impl(This);
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    int ok = IsEqualIID(riid, &IID_IUnknown);
    for (int v = 1; !ok && v <= fc->max_version && v <= CLRMUX_CALLBACK_MAX_VERSION; v++)
        ok = IsEqualIID(riid, fc_cb_iids[v]);
    if (!ok)
        return E_NOINTERFACE;
    fc->refs++;
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE fc_AddRef(ICorProfilerCallback11 *This) { return (ULONG)++fc_impl(This)->refs; }
static ULONG STDMETHODCALLTYPE fc_Release(ICorProfilerCallback11 *This) { return (ULONG)--fc_impl(This)->refs; }

static HRESULT STDMETHODCALLTYPE fc_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_Initialize]++;
    void *p = NULL;
    if (FAILED(unk->lpVtbl->QueryInterface(unk, &IID_ICorProfilerInfo5, &p)) || !p)
        return E_FAIL;
    fc->info = p;
    if (!fc->no_mask)
        fc->init_mask_hr = fc->info->lpVtbl->SetEventMask2(fc->info, fc->init_low, fc->init_high);
    if (fc->init_hook)
        fc->init_hook(fc, fc->info);
    return fc->init_hr;
}

static HRESULT STDMETHODCALLTYPE fc_JITInlining(ICorProfilerCallback11 *This, FunctionID caller, FunctionID callee,
                                               BOOL *pfShouldInline)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_JITInlining]++;
    fc->inline_seen = *pfShouldInline;
    if (fc->set_inline)
        *pfShouldInline = fc->inline_answer;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fc_JITCachedFunctionSearchStarted(ICorProfilerCallback11 *This, FunctionID fid,
                                                                  BOOL *pbUseCachedFunction)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_JITCachedFunctionSearchStarted]++;
    fc->cache_seen = *pbUseCachedFunction;
    if (fc->set_cache)
        *pbUseCachedFunction = fc->cache_answer;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fc_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef method,
                                                      ICorProfilerFunctionControl *ctl)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_GetReJITParameters]++;
    fc->last_module = mod;
    fc->last_method = method;
    if (fc->rejit_hook)
        fc->rejit_hook(fc, mod, method, ctl);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fc_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, BOOL safe)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_JITCompilationStarted]++;
    fc->last_function = fid;
    if (fc->jit_hook)
        fc->jit_hook(fc, fid);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fc_ReJITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, ReJITID id,
                                                           BOOL safe)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_ReJITCompilationStarted]++;
    fc->last_function = fid;
    fc->last_rejit_id = id;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fc_EventPipeEventDelivered(
    ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
    ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
    LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames, UINT_PTR *stackFrames)
{
    struct fake_child *fc = fc_impl(This);
    fc->counts[FC_EventPipeEventDelivered]++;
    fc->last_provider = provider;
    return S_OK;
}
#pragma GCC diagnostic pop

#define fcd_QueryInterface fc_QueryInterface
#define fcd_AddRef fc_AddRef
#define fcd_Release fc_Release
#define FC_VT(I, D, R, N, P, A, ROUTE) .N = fcd_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl fake_child_vtbl = {
    CLRMUX_ALL_ICorProfilerCallback11(FC_VT, x)
    .Initialize = fc_Initialize,
    .JITInlining = fc_JITInlining,
    .JITCachedFunctionSearchStarted = fc_JITCachedFunctionSearchStarted,
    .GetReJITParameters = fc_GetReJITParameters,
    .JITCompilationStarted = fc_JITCompilationStarted,
    .ReJITCompilationStarted = fc_ReJITCompilationStarted,
    .EventPipeEventDelivered = fc_EventPipeEventDelivered,
};
#pragma GCC diagnostic pop
#undef FC_VT

/* A child answering ICorProfilerCallback1..max_version that sets (low, high) in Initialize. */
static inline void fake_child_init(struct fake_child *fc, int max_version, DWORD low, DWORD high)
{
    memset(fc, 0, sizeof *fc);
    fc->iface.lpVtbl = &fake_child_vtbl;
    fc->refs = 1;
    fc->max_version = max_version;
    fc->init_low = low;
    fc->init_high = high;
    fc->init_hr = S_OK;
}

/* Sum of all callbacks received except Initialize. */
static inline unsigned long fake_child_total_calls(const struct fake_child *fc)
{
    unsigned long n = 0;
    for (int i = 0; i < FC_COUNT; i++)
        if (i != FC_Initialize)
            n += fc->counts[i];
    return n;
}

/* ======================================================================================
 * A mux with in-process children
 * ====================================================================================== */

#define FAKE_MUX_MAX_CHILDREN 8

/* Every mux fake_mux_new made and fake_mux_free has not freed: keeps them reachable when a
 * failing assertion leaves a test early (no leak report), and lets a teardown free them. */
static struct clrmux_mux *fake_muxes[64];
static int fake_nmuxes;

/* A mux as mux_Initialize leaves it just before loading children: the runtime's highest
 * Info, its version and major version, the immutable sets, and initializing = 1. */
static inline struct clrmux_mux *fake_mux_new(struct fake_runtime *rt)
{
    struct clrmux_mux *m = clrmux_mux_create(&clrmux_control_channel);
    if (!m)
        return NULL;
    void *info = NULL;
    for (int v = CLRMUX_INFO_MAX_VERSION; v >= 1 && !info; v--) {
        if (SUCCEEDED(rt->iface.lpVtbl->QueryInterface(&rt->iface, fr_info_iids[v], &info)) && info)
            m->info_version = v;
    }
    m->info = info;
    m->runtime_major = rt->major;
    m->immutable_low = (rt->major > 0 && rt->major < 10) ? CLRMUX_PRF_MONITOR_IMMUTABLE_BEFORE_NET10
                                                        : (DWORD)COR_PRF_MONITOR_IMMUTABLE;
    m->immutable_high = COR_PRF_HIGH_MONITOR_IMMUTABLE;
    m->children = calloc(FAKE_MUX_MAX_CHILDREN, sizeof *m->children);
    atomic_store(&m->initializing, 1);
    if (fake_nmuxes < 64)
        fake_muxes[fake_nmuxes++] = m;
    return m;
}

/* Adds an in-process child exactly as clrmux_load_children does (version from
 * QueryInterface 11..3, proxy, active, Initialize; a failed Initialize drops the child's
 * mask and leaves it inactive). Returns the child's slot. */
static inline struct clrmux_child *fake_mux_add_child(struct clrmux_mux *m, struct fake_child *fc, const char *name)
{
    if (m->nchildren >= FAKE_MUX_MAX_CHILDREN)
        return NULL;
    struct clrmux_child *c = &m->children[m->nchildren];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->index = m->nchildren;
    int version = 2;
    ICorProfilerCallback11 *cb = &fc->iface;
    for (int v = CLRMUX_CALLBACK_MAX_VERSION; v >= 3; v--) {
        void *p = NULL;
        if (SUCCEEDED(fc->iface.lpVtbl->QueryInterface(&fc->iface, fc_cb_iids[v], &p)) && p) {
            fc->iface.lpVtbl->Release(&fc->iface);
            version = v;
            break;
        }
    }
    c->cb = cb;
    c->version = version;
    clrmux_proxy_init(&c->proxy, m, c);
    m->nchildren++;
    atomic_store(&c->active, 1);
    HRESULT hr = cb->lpVtbl->Initialize(cb, (IUnknown *)&c->proxy.iface);
    if (FAILED(hr)) {
        atomic_store(&c->active, 0);
        clrmux_compose_child_gone(m, c);
        atomic_store(&c->mask_low, 0);
        atomic_store(&c->mask_high, 0);
        clrmux_apply_union(m);
        clrmux_ep_drop_child(m, c);
    }
    return c;
}

/* The end of the mux's Initialize: immutable flags are fixed from here on. */
static inline void fake_mux_end_init(struct clrmux_mux *m)
{
    clrmux_elt_install(m); /* as mux_Initialize does after the children's Initialize */
    clrmux_ep_commit(m);
    atomic_store(&m->initializing, 0);
    clrmux_dispatch_update(m); /* as mux_Initialize does: immutable flags are fixed now */
}

/* The mux's own callback interface (what the runtime calls). */
static inline ICorProfilerCallback11 *fake_mux_cb(struct clrmux_mux *m) { return &m->iface; }

/* The ICorProfilerInfo15 a child calls (its proxy). */
static inline ICorProfilerInfo15 *fake_child_info(struct clrmux_child *c) { return &c->proxy.iface; }

/* Frees a mux built with fake_mux_new / clrmux_mux_create whose children are in-process. */
static inline void fake_mux_free(struct clrmux_mux *m)
{
    if (!m)
        return;
    for (int i = 0; i < fake_nmuxes; i++)
        if (fake_muxes[i] == m)
            fake_muxes[i] = fake_muxes[--fake_nmuxes];
    if (clrmux_the_mux == m)
        clrmux_the_mux = NULL;
    clrmux_config_free(&m->cfg);
    clrmux_elt_free(m);
    clrmux_dispatch_free(m);
    pthread_mutex_destroy(&m->mask_lock);
    clrmux_ep_free(m);
    free(m->children);
    clrmux_compose_free(m->compose);
    free(m);
}

/* Frees every mux fake_mux_new made that is still alive. */
static inline void fake_mux_free_all(void)
{
    while (fake_nmuxes > 0)
        fake_mux_free(fake_muxes[fake_nmuxes - 1]);
}

/* A child of a mux wired by hand: its name, ICorProfilerCallback version, the event mask its
 * Initialize sets, and what else its Initialize does (init_hook, may be NULL). */
struct child_spec {
    const char *name;
    int version;
    DWORD low, high;
    fake_child_init_hook init_hook;
};

/* A mux on `rt` with the n children of `spec` (n <= FAKE_MUX_MAX_CHILDREN) initialised into
 * fc[0..n-1] and added in order, then the end of the mux's Initialize; c[i] (c may be NULL)
 * receives child i's record in the mux. The set-up shared by the tests that wire children
 * by hand (tests/unit/test_mux_*.c, test_dispatch.c, tests/tsan/stress_elt_ep.c). */
static inline struct clrmux_mux *mux_with_children(struct fake_runtime *rt, const struct child_spec *spec, int n,
                                                   struct fake_child *fc, struct clrmux_child **c)
{
    struct clrmux_mux *m = fake_mux_new(rt);
    for (int i = 0; i < n; i++) {
        fake_child_init(&fc[i], spec[i].version, spec[i].low, spec[i].high);
        fc[i].init_hook = spec[i].init_hook;
        struct clrmux_child *ci = fake_mux_add_child(m, &fc[i], spec[i].name);
        if (c)
            c[i] = ci;
    }
    fake_mux_end_init(m);
    return m;
}

#endif
