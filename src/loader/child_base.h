/* COM plumbing shared by clrmux's own ICorProfilerCallback11 objects: the mux and the
 * builtin children (tracer, profiler). Header-only, so the profiler's companion library
 * uses it too. */
#ifndef CLRMUX_CHILD_BASE_H
#define CLRMUX_CHILD_BASE_H

#include <stdatomic.h>

#include "clrmux/corprof.h"
#include "loader/versions.h"

/* 1 when riid is IUnknown or one of ICorProfilerCallback..ICorProfilerCallback11. */
static inline int clrmux_is_callback_iid(REFIID riid)
{
    static const IID *const iids[] = CLRMUX_CALLBACK_IIDS;
    int ok = IsEqualIID(riid, &IID_IUnknown);
    for (int v = 1; !ok && v <= CLRMUX_CALLBACK_MAX_VERSION; v++)
        ok = IsEqualIID(riid, iids[v]);
    return ok;
}

/* QueryInterface for a callback object: answers IUnknown and ICorProfilerCallback..11 with
 * `This` (adding a reference to *refs); E_POINTER for a NULL ppv, else E_NOINTERFACE. */
static inline HRESULT clrmux_callback_query(ICorProfilerCallback11 *This, _Atomic LONG *refs, REFIID riid,
                                            void **ppv)
{
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (!clrmux_is_callback_iid(riid))
        return E_NOINTERFACE;
    *ppv = This;
    atomic_fetch_add(refs, 1);
    return S_OK;
}

static inline ULONG clrmux_refs_add(_Atomic LONG *refs) { return (ULONG)atomic_fetch_add(refs, 1) + 1; }

/* Release for objects that are never freed (rewritten code, sampler threads or children may
 * still use them while the process ends): counts down, never below 0. */
static inline ULONG clrmux_refs_release(_Atomic LONG *refs)
{
    LONG n = atomic_fetch_sub(refs, 1) - 1;
    return (ULONG)(n < 0 ? 0 : n);
}

/* For X-macro expansion with the prefix passed in the I slot:
 *   CLRMUX_DEFINE_NOOP_CALLBACKS(pfx) defines pfx_<Method> returning S_OK for every
 *   callback method, and CLRMUX_NOOP_VTBL_ENTRY(I, ...) expands to `.Method = pfx_Method,`
 *   so a vtable starts from no-ops and overrides what the object handles. */
#define CLRMUX_NOOP_FN(PFX, D, R, N, P, A, ROUTE)                                                       \
    __attribute__((unused)) static HRESULT STDMETHODCALLTYPE PFX##_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    {                                                                                                   \
        (void)This;                                                                                     \
        return S_OK;                                                                                    \
    }
#define CLRMUX_DEFINE_NOOP_CALLBACKS(PFX)                                              \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"") \
    CLRMUX_METHODS_ICorProfilerCallback(CLRMUX_NOOP_FN, PFX)                           \
    CLRMUX_METHODS_ICorProfilerCallback2(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback3(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback4(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback5(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback6(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback7(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback8(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback9(CLRMUX_NOOP_FN, PFX)                          \
    CLRMUX_METHODS_ICorProfilerCallback10(CLRMUX_NOOP_FN, PFX)                         \
    CLRMUX_METHODS_ICorProfilerCallback11(CLRMUX_NOOP_FN, PFX)                         \
    _Pragma("GCC diagnostic pop")
/* Every callback slot (not IUnknown's) pointing at the no-ops of prefix PFX. */
#define CLRMUX_NOOP_VTBL_ENTRY(PFX, D, R, N, P, A, ROUTE) .N = PFX##_##N,
#define CLRMUX_NOOP_VTBL(PFX)                                        \
    CLRMUX_METHODS_ICorProfilerCallback(CLRMUX_NOOP_VTBL_ENTRY, PFX)   \
    CLRMUX_METHODS_ICorProfilerCallback2(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback3(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback4(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback5(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback6(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback7(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback8(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback9(CLRMUX_NOOP_VTBL_ENTRY, PFX)  \
    CLRMUX_METHODS_ICorProfilerCallback10(CLRMUX_NOOP_VTBL_ENTRY, PFX) \
    CLRMUX_METHODS_ICorProfilerCallback11(CLRMUX_NOOP_VTBL_ENTRY, PFX)

#endif
