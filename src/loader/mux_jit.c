/* The mux's JIT callbacks (JITCompilationStarted/Finished and the out-parameter merges
 * JITInlining and JITCachedFunctionSearchStarted: their routes are gated, dispatch.h, and
 * their long way does compose's work), ReJIT routing by each version's owners and EventPipe
 * routing by each child's sessions. The rest of the mux is mux.c. */
#include "loader/mux_int.h"

#include "common/lastgasp.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/unhandled.h"
#include "loader/compose.h"
#include "loader/eventpipe.h"

#define impl clrmux_mux_of

/* In the JIT and ReadyToRun-lookup callbacks: the first call of AppContext.OnUnhandledException
 * while a window is open. */
static inline void watch_jit(struct clrmux_mux *m, FunctionID fid)
{
    if (atomic_load_explicit(&m->windows, memory_order_relaxed) &&
        clrmux_unhandled_is_hook(&m->hook, (ICorProfilerInfo *)m->info, fid)) {
        LOG_DEBUG("AppContext.OnUnhandledException: an unhandled managed exception on thread %ld",
                  clrmux_thread_id());
        clrmux_lastgasp_now();
    }
}

/* ---- out-parameter merges ------------------------------------------------------------- */

/* Whether a ReJIT request is held back somewhere (compose.c): the JIT callbacks then do
 * composition work besides the children's calls. */
static inline int compose_busy(const struct clrmux_mux *m)
{
    return atomic_load_explicit(m->compose_pending, memory_order_acquire) != 0;
}

/* The merge of a BOOL out-parameter: each child answers as if it were alone (from the
 * incoming value); the answer is TRUE only if every child's is. */
#define MERGE_WALK(m, N, out, ...)                                                            \
    do {                                                                                      \
        const struct clrmux_route *r = ROUTE(m, N);                                           \
        const BOOL incoming = result;                                                         \
        for (uint32_t i = 0; i < r->n; i++) {                                                 \
            BOOL mine = incoming;                                                             \
            r->e[i].cb->lpVtbl->N(r->e[i].cb, __VA_ARGS__, &mine);                            \
            if (!mine)                                                                        \
                result = FALSE;                                                               \
        }                                                                                     \
    } while (0)

static __attribute__((noinline)) HRESULT jit_inlining_walk(struct clrmux_mux *m, FunctionID callerId,
                                                           FunctionID calleeId, BOOL *pfShouldInline)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    BOOL result = pfShouldInline ? *pfShouldInline : TRUE;
    MERGE_WALK(m, JITInlining, result, callerId, calleeId); /* inline only if every child allows it */
    if (result && !clrmux_compose_may_inline(m, calleeId))
        result = FALSE; /* its ReJIT request is held back until its first compilation */
    if (result)
        clrmux_compose_note_inlining(m, callerId, calleeId); /* for inliner ReJIT callbacks */
    if (pfShouldInline)
        *pfShouldInline = result;
    clrmux_evac_leave(t_);
    return S_OK;
}

/* One subscriber that never detaches and nothing held back: the child answers the runtime. */
GEN_ONE(JITInlining, (, FunctionID callerId, FunctionID calleeId, BOOL *pfShouldInline), (, callerId, calleeId, pfShouldInline), jit_inlining_walk)

/* The long way (the route's gates closed, or no fast way): what compose needs, else the child. */
static __attribute__((noinline)) HRESULT jit_inlining_slow(struct clrmux_mux *m, FunctionID callerId,
                                                           FunctionID calleeId, BOOL *pfShouldInline)
{
    /* (not while clrmux records inlining for inliner ReJIT callbacks: compose_view.c) */
    if (ROUTE(m, JITInlining)->n == 1 && !compose_busy(m) && !clrmux_compose_tracks_inlining(m)) {
        clrmux_dispatch_regate(m, CLRMUX_ROUTE_JITInlining);
        return mux_one_JITInlining(m, callerId, calleeId, pfShouldInline);
    }
    return jit_inlining_walk(m, callerId, calleeId, pfShouldInline);
}

HRESULT STDMETHODCALLTYPE CLRMUX_TRAMPOLINE mux_JITInlining(ICorProfilerCallback11 *This, FunctionID callerId,
                                                 FunctionID calleeId, BOOL *pfShouldInline)
{
    struct clrmux_mux *m = impl(This);
    FAST_WAYS(m, JITInlining, (, callerId, calleeId, pfShouldInline)); /* gated (dispatch.h) */
    return jit_inlining_slow(m, callerId, calleeId, pfShouldInline);
}

static __attribute__((noinline)) HRESULT cache_search_walk(struct clrmux_mux *m, FunctionID functionId,
                                                           BOOL *pbUseCachedFunction)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    BOOL result = pbUseCachedFunction ? *pbUseCachedFunction : TRUE;
    MERGE_WALK(m, JITCachedFunctionSearchStarted, result, functionId); /* precompiled code only if every child agrees */
    if (result && !clrmux_compose_cache_search(m, functionId))
        result = FALSE; /* a held-back ReJIT waits for this method's first JIT compilation */
    if (pbUseCachedFunction)
        *pbUseCachedFunction = result;
    clrmux_evac_leave(t_);
    return S_OK;
}

GEN_ONE(JITCachedFunctionSearchStarted, (, FunctionID functionId, BOOL *pbUseCachedFunction), (, functionId, pbUseCachedFunction), cache_search_walk)

static __attribute__((noinline)) HRESULT cache_search_slow(struct clrmux_mux *m, FunctionID functionId,
                                                           BOOL *pbUseCachedFunction)
{
    watch_jit(m, functionId); /* an unhandled-exception window may be open */
    if (ROUTE(m, JITCachedFunctionSearchStarted)->n == 1 && !compose_busy(m)) {
        clrmux_dispatch_regate(m, CLRMUX_ROUTE_JITCachedFunctionSearchStarted);
        return mux_one_JITCachedFunctionSearchStarted(m, functionId, pbUseCachedFunction);
    }
    return cache_search_walk(m, functionId, pbUseCachedFunction);
}

HRESULT STDMETHODCALLTYPE mux_JITCachedFunctionSearchStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                                    BOOL *pbUseCachedFunction)
{
    struct clrmux_mux *m = impl(This);
    /* gated (dispatch.h): held-back ReJIT requests, an unhandled-exception window */
    FAST_WAYS(m, JITCachedFunctionSearchStarted, (, functionId, pbUseCachedFunction));
    return cache_search_slow(m, functionId, pbUseCachedFunction);
}

/* ---- JIT compilation: routed by mask; held-back ReJIT requests are made at the end ----- */

static __attribute__((noinline)) HRESULT jit_started_walk(struct clrmux_mux *m, FunctionID functionId,
                                                          BOOL fIsSafeToBlock)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    ReJITID as_id = 0; /* held-back ReJIT owners see a ReJIT compilation instead (compose.h) */
    const uint64_t as_rejit = clrmux_compose_jit_as_rejit(m, functionId, &as_id);
    const struct clrmux_route *r = ROUTE(m, JITCompilationStarted);
    for (uint32_t i = 0; i < r->n; i++)
        if (!(as_rejit >> (r->e[i].child->index & 63) & 1))
            r->e[i].cb->lpVtbl->JITCompilationStarted(r->e[i].cb, functionId, fIsSafeToBlock);
    /* after the JIT-time children: the held-back owners' chain, their ReJITCompilationStarted */
    clrmux_compose_jit_started(m, functionId, fIsSafeToBlock, as_rejit, as_id);
    clrmux_evac_leave(t_);
    return S_OK;
}

GEN_ONE(JITCompilationStarted, (, FunctionID functionId, BOOL fIsSafeToBlock), (, functionId, fIsSafeToBlock), jit_started_walk)

static __attribute__((noinline)) HRESULT jit_started_slow(struct clrmux_mux *m, FunctionID functionId,
                                                          BOOL fIsSafeToBlock)
{
    watch_jit(m, functionId); /* an unhandled-exception window may be open */
    if (ROUTE(m, JITCompilationStarted)->n == 1 && !compose_busy(m)) {
        clrmux_dispatch_regate(m, CLRMUX_ROUTE_JITCompilationStarted);
        return mux_one_JITCompilationStarted(m, functionId, fIsSafeToBlock);
    }
    return jit_started_walk(m, functionId, fIsSafeToBlock);
}

HRESULT STDMETHODCALLTYPE mux_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                           BOOL fIsSafeToBlock)
{
    struct clrmux_mux *m = impl(This);
    /* gated (dispatch.h): compose's JIT work, an unhandled-exception window */
    FAST_WAYS(m, JITCompilationStarted, (, functionId, fIsSafeToBlock));
    return jit_started_slow(m, functionId, fIsSafeToBlock);
}

static __attribute__((noinline)) HRESULT jit_finished_walk(struct clrmux_mux *m, FunctionID functionId,
                                                           HRESULT hrStatus, BOOL fIsSafeToBlock)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    ReJITID as_id = 0;
    const uint64_t as_rejit = clrmux_compose_jit_as_rejit(m, functionId, &as_id);
    const struct clrmux_route *r = ROUTE(m, JITCompilationFinished);
    for (uint32_t i = 0; i < r->n; i++)
        if (!(as_rejit >> (r->e[i].child->index & 63) & 1))
            r->e[i].cb->lpVtbl->JITCompilationFinished(r->e[i].cb, functionId, hrStatus, fIsSafeToBlock);
    clrmux_compose_jit_finished(m, functionId, hrStatus, fIsSafeToBlock, as_rejit, as_id);
    clrmux_evac_leave(t_);
    return S_OK;
}

/* (a request held back while the child ran is made by JITCompilationFinished's walk) */
GEN_ONE(JITCompilationFinished, (, FunctionID functionId, HRESULT hrStatus, BOOL fIsSafeToBlock), (, functionId, hrStatus, fIsSafeToBlock), jit_finished_walk)

static __attribute__((noinline)) HRESULT jit_finished_slow(struct clrmux_mux *m, FunctionID functionId,
                                                           HRESULT hrStatus, BOOL fIsSafeToBlock)
{
    if (ROUTE(m, JITCompilationFinished)->n == 1 && !compose_busy(m)) {
        clrmux_dispatch_regate(m, CLRMUX_ROUTE_JITCompilationFinished);
        return mux_one_JITCompilationFinished(m, functionId, hrStatus, fIsSafeToBlock);
    }
    return jit_finished_walk(m, functionId, hrStatus, fIsSafeToBlock);
}

HRESULT STDMETHODCALLTYPE mux_JITCompilationFinished(ICorProfilerCallback11 *This, FunctionID functionId,
                                                            HRESULT hrStatus, BOOL fIsSafeToBlock)
{
    struct clrmux_mux *m = impl(This);
    FAST_WAYS(m, JITCompilationFinished, (, functionId, hrStatus, fIsSafeToBlock)); /* gated (dispatch.h) */
    return jit_finished_slow(m, functionId, hrStatus, fIsSafeToBlock);
}

/* ---- ReJIT: each version to the children whose own request made it (compose_view.c) ---- */

/* The entries of route N (its subscribers, see dispatch.c) that own the method. */
#define FOR_OWNERS(m, N, owners, cb)                                                       \
    for (const struct clrmux_route *r_ = ROUTE(m, N); r_; r_ = NULL)                       \
        for (uint32_t i_ = 0; i_ < r_->n; i_++)                                            \
            for (ICorProfilerCallback11 *cb = r_->e[i_].cb; cb; cb = NULL)                  \
                if ((owners) >> (r_->e[i_].child->index & 63) & 1)

HRESULT STDMETHODCALLTYPE mux_ReJITCompilationStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                             ReJITID rejitId, BOOL fIsSafeToBlock)
{
    struct clrmux_mux *m = impl(This);
    if (!ROUTE(m, ReJITCompilationStarted)->n)
        return S_OK; /* no child monitors JIT compilation: nothing to count in for */
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    uint64_t owners = clrmux_compose_rejit_audience(m, functionId, rejitId);
    FOR_OWNERS(m, ReJITCompilationStarted, owners, cb)
        cb->lpVtbl->ReJITCompilationStarted(cb, functionId, rejitId, fIsSafeToBlock);
    clrmux_evac_leave(t_);
    return S_OK;
}

HRESULT STDMETHODCALLTYPE mux_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID moduleId,
                                                        mdMethodDef methodId, ICorProfilerFunctionControl *pFunctionControl)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    clrmux_compose_get_rejit_parameters(impl(This), moduleId, methodId, pFunctionControl);
    clrmux_evac_leave(t_);
    return S_OK;
}

HRESULT STDMETHODCALLTYPE mux_ReJITCompilationFinished(ICorProfilerCallback11 *This, FunctionID functionId,
                                                              ReJITID rejitId, HRESULT hrStatus, BOOL fIsSafeToBlock)
{
    struct clrmux_mux *m = impl(This);
    if (!ROUTE(m, ReJITCompilationFinished)->n)
        return S_OK; /* no child monitors JIT compilation: nothing to count in for */
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    uint64_t owners = clrmux_compose_rejit_audience(m, functionId, rejitId);
    FOR_OWNERS(m, ReJITCompilationFinished, owners, cb)
        cb->lpVtbl->ReJITCompilationFinished(cb, functionId, rejitId, hrStatus, fIsSafeToBlock);
    clrmux_evac_leave(t_);
    return S_OK;
}

HRESULT STDMETHODCALLTYPE mux_ReJITError(ICorProfilerCallback11 *This, ModuleID moduleId, mdMethodDef methodId,
                                                FunctionID functionId, HRESULT hrStatus)
{
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    struct clrmux_mux *m = impl(This);
    uint64_t owners = clrmux_compose_rejit_error_audience(m, moduleId, methodId);
    FOR_OWNERS(m, ReJITError, owners, cb) cb->lpVtbl->ReJITError(cb, moduleId, methodId, functionId, hrStatus);
    clrmux_evac_leave(t_);
    return S_OK;
}

/* ---- EventPipe: each event to the children whose own sessions asked for it (eventpipe.c) -- */

HRESULT STDMETHODCALLTYPE mux_EventPipeEventDelivered(
    ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
    ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
    LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames, UINT_PTR *stackFrames)
{
    if (!atomic_load_explicit(&impl(This)->ep, memory_order_acquire))
        return S_OK; /* no child started a session (the events of a session clrmux ended) */
    struct clrmux_thread_rec *t_ = clrmux_evac_enter();
    clrmux_ep_deliver(impl(This), provider, eventId, eventVersion, cbMetadataBlob, metadataBlob, cbEventData, eventData,
                      pActivityId, pRelatedActivityId, eventThread, numStackFrames, stackFrames);
    clrmux_evac_leave(t_);
    return S_OK;
}
