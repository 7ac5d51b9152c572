/* Internals shared by the mux's files: mux.c (the generated fan-out, lifecycle, exceptions,
 * the vtable), mux_jit.c (the JIT callbacks and out-parameter merges, ReJIT and EventPipe
 * routing) and mux_masks.c (the event masks). Not for use outside src/loader/mux*.c. */
#ifndef CLRMUX_MUX_INT_H
#define CLRMUX_MUX_INT_H

#include <stdatomic.h>
#include <stddef.h>

#include "loader/detach.h"
#include "loader/dispatch.h"
#include "loader/mux.h"

/* mux_masks.c, under mux->mask_lock: the union of clrmux's own flags and every active child's
 * mask except `except` (NULL: none), and its setting on the runtime (SetEventMask2, or
 * SetEventMask when the high half is 0 and ICorProfilerInfo5 is missing: E_INVALIDARG
 * otherwise); S_OK at once when the runtime already has it. */
void clrmux_mux_union_masks(struct clrmux_mux *m, struct clrmux_child *except, DWORD *low, DWORD *high);
HRESULT clrmux_mux_set_runtime_mask(struct clrmux_mux *m, DWORD low, DWORD high);

static inline struct clrmux_mux *clrmux_mux_of(ICorProfilerCallback11 *iface)
{
    return (struct clrmux_mux *)((char *)iface - offsetof(struct clrmux_mux, iface));
}

/* The route of callback N (dispatch.h): one acquire load. */
#define ROUTE(m, N) atomic_load_explicit(&(m)->routes[CLRMUX_ROUTE_##N], memory_order_acquire)
/* Its only subscriber when that child never detaches (else NULL): one acquire load. */
/* The callbacks' entry points keep no frame record of their own (GCC's omit-frame-pointer for
 * them alone; libclrmux.so is built with -fno-omit-frame-pointer): the direct way is a tail
 * call anyway, and the counted way then saves one register around the child's call instead
 * of building a frame (4 instructions fewer per callback: bench/run.sh part 2; mux.c's generated ones and mux_jit.c's JITInlining). A
 * frame-pointer walk that interrupts a child's callback goes on through the runtime's frames
 * from the child's record; it misses the runtime frame that called the entry point (its
 * return address is on the stack, not in a record), as it would a child called directly
 * from a leaf without a frame record. */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__))
#define CLRMUX_TRAMPOLINE __attribute__((optimize("omit-frame-pointer")))
#else
#define CLRMUX_TRAMPOLINE
#endif

#define DIRECT(m, N) atomic_load_explicit(&(m)->direct[CLRMUX_ROUTE_##N], memory_order_acquire)
/* Its only subscriber when that child may detach and membarrier is registered (else NULL). */
#define COUNTED(m, N) atomic_load_explicit(&(m)->counted[CLRMUX_ROUTE_##N], memory_order_acquire)

/* mux_one_N: the call of a route's only subscriber, counted in for evacuation (the route is
 * reloaded after counting in; if it no longer has one subscriber, WALK does the work). */
#define GEN_ONE(N, P, A, WALK)                                                               \
    static __attribute__((noinline)) HRESULT mux_one_##N(struct clrmux_mux *m CLRMUX_EXPAND P) \
    {                                                                                      \
        struct clrmux_thread_rec *t_ = clrmux_evac_enter();                                \
        const struct clrmux_route *r = ROUTE(m, N);                                        \
        HRESULT hr;                                                                        \
        if (__builtin_expect(r->n == 1, 1))                                                \
            hr = r->e[0].cb->lpVtbl->N(r->e[0].cb CLRMUX_EXPAND A);                        \
        else                                                                               \
            hr = WALK(m CLRMUX_EXPAND A); /* changed meanwhile */                          \
        clrmux_evac_leave(t_);                                                             \
        return hr;                                                                         \
    }

/* The fast ways of callback N (dispatch.h): a direct route (one subscriber that can never
 * detach, the route's gates open) is a tail call: one load, a test, the child's call. A
 * counted one (one subscriber that may detach, membarrier registered, gates open) is the
 * child's call between a plain add and a plain subtract on the thread's evacuation counter
 * (clrmux_evac_inc/dec): the thread counts itself in, then loads the child it calls. When
 * neither applies, the code after FAST_WAYS runs (the thread counted out again). */
#define FAST_WAYS(m, N, A)                                                                   \
    do {                                                                                     \
        ICorProfilerCallback11 *one_ = DIRECT(m, N);                                         \
        if (__builtin_expect(one_ != NULL, 1))                                               \
            return one_->lpVtbl->N(one_ CLRMUX_EXPAND A);                                    \
        struct clrmux_thread_rec *t_ = clrmux_tls_rec;                                       \
        if (__builtin_expect(t_ != NULL, 1)) {                                               \
            clrmux_evac_inc(t_);                                                             \
            one_ = COUNTED(m, N);                                                            \
            if (__builtin_expect(one_ != NULL, 1)) {                                         \
                HRESULT hr_ = one_->lpVtbl->N(one_ CLRMUX_EXPAND A);                         \
                clrmux_evac_dec(t_);                                                         \
                return hr_;                                                                  \
            }                                                                                \
            clrmux_evac_dec(t_);                                                             \
        }                                                                                    \
    } while (0)

/* The hand-written callbacks of mux_jit.c, for mux.c's vtable. */
HRESULT STDMETHODCALLTYPE mux_JITInlining(ICorProfilerCallback11 *This, FunctionID callerId, FunctionID calleeId,
                                          BOOL *pfShouldInline);
HRESULT STDMETHODCALLTYPE mux_JITCachedFunctionSearchStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                             BOOL *pbUseCachedFunction);
HRESULT STDMETHODCALLTYPE mux_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                    BOOL fIsSafeToBlock);
HRESULT STDMETHODCALLTYPE mux_JITCompilationFinished(ICorProfilerCallback11 *This, FunctionID functionId,
                                                     HRESULT hrStatus, BOOL fIsSafeToBlock);
HRESULT STDMETHODCALLTYPE mux_ReJITCompilationStarted(ICorProfilerCallback11 *This, FunctionID functionId,
                                                      ReJITID rejitId, BOOL fIsSafeToBlock);
HRESULT STDMETHODCALLTYPE mux_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID moduleId,
                                                 mdMethodDef methodId, ICorProfilerFunctionControl *pFunctionControl);
HRESULT STDMETHODCALLTYPE mux_ReJITCompilationFinished(ICorProfilerCallback11 *This, FunctionID functionId,
                                                       ReJITID rejitId, HRESULT hrStatus, BOOL fIsSafeToBlock);
HRESULT STDMETHODCALLTYPE mux_ReJITError(ICorProfilerCallback11 *This, ModuleID moduleId, mdMethodDef methodId,
                                         FunctionID functionId, HRESULT hrStatus);
HRESULT STDMETHODCALLTYPE mux_EventPipeEventDelivered(ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider,
                                                      DWORD eventId, DWORD eventVersion, ULONG cbMetadataBlob,
                                                      LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData,
                                                      LPCGUID pActivityId, LPCGUID pRelatedActivityId,
                                                      ThreadID eventThread, ULONG numStackFrames,
                                                      UINT_PTR *stackFrames);

#endif
