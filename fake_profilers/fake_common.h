/* A small real child profiler in C, configurable at compile time, for clrmux's tests.
 *
 * Each fake_profilers/NAME.c defines some FAKE_* macros and includes this file; the result
 * is a shared library exporting DllGetClassObject like any profiler. Behaviour at run time
 * comes from environment variables suffixed with the first 8 hex digits of the CLSID the
 * instance was created for (so two instances of one library can differ), falling back to
 * the unsuffixed name:
 *   RECORDER_MASK[_TAG]       low event mask to set in Initialize (hex, default 0)
 *   RECORDER_MASK_HIGH[_TAG]  high event mask (hex, default 0)
 *   RECORDER_OUT[_TAG]        file written at Shutdown: "Callback count" lines, sorted by
 *                             name, plus "#"-prefixed facts (mask read back, late mask results)
 *   RECORDER_NO_INLINE[_TAG]  "1": answer FALSE in JITInlining
 *   RECORDER_DETACH_AT[_TAG]  N: call RequestProfilerDetach in the N-th ModuleLoadFinished and
 *                             record its HRESULT and the callbacks received after it; the
 *                             output is also written at ProfilerDetachSucceeded
 *
 * Compile-time switches:
 *   FAKE_MAX_VERSION   highest ICorProfilerCallbackN answered (default 11; 1 = only v1)
 *   FAKE_INIT_HR       what Initialize returns (default S_OK)
 *   FAKE_CREATE_HR     when defined, what IClassFactory::CreateInstance returns
 *   FAKE_LATE_MASK     after the first ModuleLoadFinished, try an immutable change
 *                      (COR_PRF_ENABLE_OBJECT_ALLOCATED), COR_PRF_DISABLE_INLINING
 *                      (immutable before .NET 10) and a mutable change
 *                      (COR_PRF_MONITOR_THREADS), and record the three HRESULTs
 *   FAKE_CHAIN         a chaining loader: Initialize first loads the profiler library named
 *                      by CHAIN_PATH[_TAG] (CLSID CHAIN_CLSID[_TAG], default clrmux's), calls
 *                      its Initialize with the same Info and records "# chained hr=..."; then
 *                      behaves as a recorder
 *   FAKE_NOOP          count nothing (for benchmarks)
 *   FAKE_INIT_EXTRA(f) called at the end of Initialize (f: struct fake *), before it returns
 *   FAKE_SHUTDOWN_EXTRA(f, o)  called at Shutdown to append lines to the RECORDER_OUT file o
 *   FAKE_EVENTPIPE_DELIVERED   the EventPipeEventDelivered implementation (default: counted)
 *   FAKE_VTBL_EXTRA    more designated initializers of the vtable (callbacks of its own) */
#ifndef FAKE_COMMON_H
#define FAKE_COMMON_H

#define COBJMACROS
#if defined(_WIN32)
/* the chaining loader's library calls, as the runtime makes them on Windows (kernel32's
 * LoadLibraryA / GetProcAddress declared here: <windows.h> clashes with clrmux/com.h) */
__declspec(dllimport) void *__stdcall LoadLibraryA(const char *name);
__declspec(dllimport) void *__stdcall GetProcAddress(void *module, const char *name);
#define dlopen(path, flags) LoadLibraryA(path)
#define dlsym(lib, name) GetProcAddress(lib, name)
#else
#include <dlfcn.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/corprof.h"

#ifndef FAKE_MAX_VERSION
#define FAKE_MAX_VERSION 11
#endif
#ifndef FAKE_INIT_HR
#define FAKE_INIT_HR S_OK
#endif

#include "fake_export.h"

#define CB_ENUM(I, D, R, N, P, A, ROUTE) CB_##N,
enum { CLRMUX_ALL_ICorProfilerCallback11(CB_ENUM, x) CB_COUNT };
#define CB_NAME(I, D, R, N, P, A, ROUTE) #N,
static const char *const cb_names[] = {CLRMUX_ALL_ICorProfilerCallback11(CB_NAME, x)};

struct fake {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    CLSID clsid;
    char tag[9];
    ICorProfilerInfo5 *info;
    DWORD low, high;
    int no_inline;
    char out[1024];
    _Atomic unsigned long counts[CB_COUNT];
    char facts[8][160];
    int nfacts;
    _Atomic int late_done;
    int detach_at;
    _Atomic int detach_requested;
    _Atomic unsigned long after_detach; /* callbacks that began after a successful request */
};

static struct fake *fk_impl(ICorProfilerCallback11 *i) { return (struct fake *)i; }

static const char *fk_env(struct fake *f, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "%s_%s", name, f->tag);
    const char *v = getenv(key);
    return v ? v : getenv(name);
}

static void fk_fact(struct fake *f, const char *fmt, DWORD a, DWORD b)
{
    if (f->nfacts < 8)
        snprintf(f->facts[f->nfacts++], sizeof f->facts[0], fmt, (unsigned)a, (unsigned)b);
}

static inline void fk_hit(ICorProfilerCallback11 *This, int cb)
{
#ifndef FAKE_NOOP
    atomic_fetch_add_explicit(&fk_impl(This)->counts[cb], 1, memory_order_relaxed);
    if (atomic_load_explicit(&fk_impl(This)->detach_requested, memory_order_relaxed) == 2)
        atomic_fetch_add(&fk_impl(This)->after_detach, 1);
#else
    (void)This, (void)cb;
#endif
}

/* Every callback: count it and return S_OK. */
#define CB_FN(I, D, R, N, P, A, ROUTE) \
    __attribute__((unused)) static HRESULT STDMETHODCALLTYPE fkg_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    { fk_hit(This, CB_##N); return S_OK; }
#define fkg_QueryInterface fk_QueryInterface
#define fkg_AddRef fk_AddRef
#define fkg_Release fk_Release
CLRMUX_METHODS_ICorProfilerCallback(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback2(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback3(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback4(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback5(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback6(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback7(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback8(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback9(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback10(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback11(CB_FN, x)

static const IID *const fk_iids[] = {NULL, &IID_ICorProfilerCallback, &IID_ICorProfilerCallback2,
    &IID_ICorProfilerCallback3, &IID_ICorProfilerCallback4, &IID_ICorProfilerCallback5,
    &IID_ICorProfilerCallback6, &IID_ICorProfilerCallback7, &IID_ICorProfilerCallback8,
    &IID_ICorProfilerCallback9, &IID_ICorProfilerCallback10, &IID_ICorProfilerCallback11};

static HRESULT STDMETHODCALLTYPE fk_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    *ppv = NULL;
    int ok = IsEqualIID(riid, &IID_IUnknown);
    for (int v = 1; !ok && v <= FAKE_MAX_VERSION; v++)
        ok = IsEqualIID(riid, fk_iids[v]);
    if (!ok)
        return E_NOINTERFACE;
    *ppv = This;
    atomic_fetch_add(&fk_impl(This)->refs, 1);
    return S_OK;
}
static ULONG STDMETHODCALLTYPE fk_AddRef(ICorProfilerCallback11 *This) { return (ULONG)atomic_fetch_add(&fk_impl(This)->refs, 1) + 1; }
static ULONG STDMETHODCALLTYPE fk_Release(ICorProfilerCallback11 *This) { return (ULONG)atomic_fetch_sub(&fk_impl(This)->refs, 1) - 1; }

static HRESULT STDMETHODCALLTYPE fk_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct fake *f = fk_impl(This);
    fk_hit(This, CB_Initialize);
    const char *v;
#ifdef FAKE_CHAIN
    if ((v = fk_env(f, "CHAIN_PATH")) && *v) {
        HRESULT chr = E_FAIL;
        void *lib = dlopen(v, RTLD_NOW | RTLD_LOCAL);
        HRESULT (*get)(REFCLSID, REFIID, void **) = lib ? (HRESULT (*)(REFCLSID, REFIID, void **))dlsym(lib, "DllGetClassObject") : NULL;
        CLSID clsid = {0xEE712634, 0x5BBB, 0x4C28, {0x8E, 0x6A, 0x45, 0x18, 0x0A, 0x97, 0xAD, 0x0B}};
        const char *cs = fk_env(f, "CHAIN_CLSID");
        unsigned d1, d2, d3, b[8];
        if (cs && sscanf(cs, "{%8x-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x}", &d1, &d2, &d3, &b[0], &b[1], &b[2], &b[3], &b[4],
                         &b[5], &b[6], &b[7]) == 11) {
            clsid.Data1 = d1, clsid.Data2 = (USHORT)d2, clsid.Data3 = (USHORT)d3;
            for (int i = 0; i < 8; i++) clsid.Data4[i] = (BYTE)b[i];
        }
        IClassFactory *cf = NULL;
        ICorProfilerCallback2 *cb = NULL;
        if (get && SUCCEEDED(get(&clsid, &IID_IClassFactory, (void **)&cf)) && cf &&
            SUCCEEDED(cf->lpVtbl->CreateInstance(cf, NULL, &IID_ICorProfilerCallback2, (void **)&cb)) && cb)
            chr = cb->lpVtbl->Initialize(cb, unk);
        fk_fact(f, "# chained hr=0x%08X%.0u", (DWORD)chr, 0);
    }
#endif
    f->low = (v = fk_env(f, "RECORDER_MASK")) ? (DWORD)strtoul(v, NULL, 16) : 0;
    f->high = (v = fk_env(f, "RECORDER_MASK_HIGH")) ? (DWORD)strtoul(v, NULL, 16) : 0;
    f->no_inline = (v = fk_env(f, "RECORDER_NO_INLINE")) && strcmp(v, "1") == 0;
    f->detach_at = (v = fk_env(f, "RECORDER_DETACH_AT")) ? atoi(v) : 0;
    snprintf(f->out, sizeof f->out, "%s", (v = fk_env(f, "RECORDER_OUT")) ? v : "");
    if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo5, (void **)&f->info)))
        return E_FAIL;
    HRESULT hr = ICorProfilerInfo5_SetEventMask2(f->info, f->low, f->high);
    fk_fact(f, "# SetEventMask2 hr=0x%08X%.0u", (DWORD)hr, 0);
    DWORD lo = 0, hi = 0;
    ICorProfilerInfo5_GetEventMask2(f->info, &lo, &hi);
    fk_fact(f, "# GetEventMask2 low=0x%08X high=0x%08X", lo, hi);
#ifdef FAKE_INIT_EXTRA
    FAKE_INIT_EXTRA(f);
#endif
    return FAKE_INIT_HR;
}

/* Attach: set up as in Initialize, counted as InitializeForAttach. */
static HRESULT STDMETHODCALLTYPE fk_InitializeForAttach(ICorProfilerCallback11 *This, IUnknown *unk, void *data, UINT cb)
{
    fk_hit(This, CB_InitializeForAttach);
    HRESULT hr = fk_Initialize(This, unk);
    atomic_fetch_sub(&fk_impl(This)->counts[CB_Initialize], 1);
    return hr;
}

static HRESULT STDMETHODCALLTYPE fk_ModuleLoadFinished(ICorProfilerCallback11 *This, ModuleID moduleId, HRESULT hrStatus)
{
    fk_hit(This, CB_ModuleLoadFinished);
    {
        struct fake *f = fk_impl(This);
        int expected = 0;
        if (f->detach_at && (int)atomic_load(&f->counts[CB_ModuleLoadFinished]) == f->detach_at &&
            atomic_compare_exchange_strong(&f->detach_requested, &expected, 1)) {
            HRESULT hr = ICorProfilerInfo5_RequestProfilerDetach(f->info, 0);
            fk_fact(f, "# RequestProfilerDetach hr=0x%08X%.0u", (DWORD)hr, 0);
            if (SUCCEEDED(hr))
                atomic_store(&f->detach_requested, 2);
        }
    }
#ifdef FAKE_LATE_MASK
    struct fake *f = fk_impl(This);
    if (atomic_exchange(&f->late_done, 1) == 0) {
        HRESULT a = ICorProfilerInfo5_SetEventMask2(f->info, f->low | COR_PRF_ENABLE_OBJECT_ALLOCATED, f->high);
        fk_fact(f, "# late immutable change hr=0x%08X%.0u", (DWORD)a, 0);
        HRESULT c = ICorProfilerInfo5_SetEventMask2(f->info, f->low | COR_PRF_DISABLE_INLINING, f->high);
        fk_fact(f, "# late disable-inlining change hr=0x%08X%.0u", (DWORD)c, 0);
        if (SUCCEEDED(c)) /* mutable on .NET 10: set it back */
            ICorProfilerInfo5_SetEventMask2(f->info, f->low, f->high);
        HRESULT b = ICorProfilerInfo5_SetEventMask2(f->info, f->low | COR_PRF_MONITOR_THREADS, f->high);
        fk_fact(f, "# late mutable change hr=0x%08X%.0u", (DWORD)b, 0);
        if (SUCCEEDED(b))
            f->low |= COR_PRF_MONITOR_THREADS;
    }
#endif
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fk_JITInlining(ICorProfilerCallback11 *This, FunctionID caller, FunctionID callee, BOOL *pfShouldInline)
{
    fk_hit(This, CB_JITInlining);
    if (fk_impl(This)->no_inline)
        *pfShouldInline = FALSE;
    return S_OK;
}

static int fk_cmp(const void *a, const void *b) { return strcmp(cb_names[*(const int *)a], cb_names[*(const int *)b]); }

static void fk_write(struct fake *f);
static HRESULT STDMETHODCALLTYPE fk_Shutdown(ICorProfilerCallback11 *This)
{
    fk_hit(This, CB_Shutdown);
    fk_write(fk_impl(This));
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE fk_ProfilerDetachSucceeded(ICorProfilerCallback11 *This)
{
    struct fake *f = fk_impl(This);
    atomic_fetch_add(&f->counts[CB_ProfilerDetachSucceeded], 1); /* not an "after detach" callback */
    fk_write(f);
    return S_OK;
}

static void fk_write(struct fake *f)
{
    if (!f->out[0])
        return;
    FILE *o = fopen(f->out, "w");
    if (!o)
        return;
    int order[CB_COUNT];
    for (int i = 0; i < CB_COUNT; i++) order[i] = i;
    qsort(order, CB_COUNT, sizeof order[0], fk_cmp);
    for (int i = 0; i < CB_COUNT; i++)
        if (atomic_load(&f->counts[order[i]]))
            fprintf(o, "%s %lu\n", cb_names[order[i]], atomic_load(&f->counts[order[i]]));
    for (int i = 0; i < f->nfacts; i++)
        fprintf(o, "%s\n", f->facts[i]);
    if (atomic_load(&f->detach_requested))
        fprintf(o, "# callbacks after detach %lu\n", atomic_load(&f->after_detach));
#ifdef FAKE_SHUTDOWN_EXTRA
    FAKE_SHUTDOWN_EXTRA(f, o);
#endif
    fclose(o);
}

/* RECORDER_NOTIFICATION_ONLY=1: answers TRUE, as a profiler listed in
 * CORECLR_NOTIFICATION_PROFILERS must (the benchmarks load libnoop.so that way). */
static HRESULT STDMETHODCALLTYPE fk_LoadAsNotificationOnly(ICorProfilerCallback11 *This, BOOL *pbNotificationOnly)
{
    fk_hit(This, CB_LoadAsNotificationOnly);
    const char *v = fk_env(fk_impl(This), "RECORDER_NOTIFICATION_ONLY");
    if (pbNotificationOnly)
        *pbNotificationOnly = v && strcmp(v, "1") == 0;
    return S_OK;
}

#define VT(I, D, R, N, P, A, ROUTE) .N = fkg_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl fk_vtbl = {
    CLRMUX_ALL_ICorProfilerCallback11(VT, x)
    .QueryInterface = fk_QueryInterface,
    .AddRef = fk_AddRef,
    .Release = fk_Release,
    .Initialize = fk_Initialize,
    .InitializeForAttach = fk_InitializeForAttach,
    .Shutdown = fk_Shutdown,
    .ProfilerDetachSucceeded = fk_ProfilerDetachSucceeded,
    .ModuleLoadFinished = fk_ModuleLoadFinished,
    .JITInlining = fk_JITInlining,
    .LoadAsNotificationOnly = fk_LoadAsNotificationOnly,
#ifdef FAKE_EVENTPIPE_DELIVERED
    .EventPipeEventDelivered = FAKE_EVENTPIPE_DELIVERED,
#endif
#ifdef FAKE_VTBL_EXTRA
    FAKE_VTBL_EXTRA
#endif
};
#pragma GCC diagnostic pop

/* ---- class factory -------------------------------------------------------------------- */
struct fake_factory {
    IClassFactory iface;
    CLSID clsid;
};

static HRESULT STDMETHODCALLTYPE ff_QueryInterface(IClassFactory *This, REFIID riid, void **ppv)
{
    if (IsEqualIID(riid, &IID_IUnknown) || IsEqualIID(riid, &IID_IClassFactory)) {
        *ppv = This;
        return S_OK;
    }
    *ppv = NULL;
    return E_NOINTERFACE;
}
static ULONG STDMETHODCALLTYPE ff_AddRef(IClassFactory *This) { return 2; }
static ULONG STDMETHODCALLTYPE ff_Release(IClassFactory *This) { free(This); return 0; }
static HRESULT STDMETHODCALLTYPE ff_CreateInstance(IClassFactory *This, IUnknown *outer, REFIID riid, void **ppv)
{
#ifdef FAKE_CREATE_HR
    *ppv = NULL;
    return FAKE_CREATE_HR;
#endif
    struct fake *f = calloc(1, sizeof *f);
    f->iface.lpVtbl = &fk_vtbl;
    f->clsid = ((struct fake_factory *)This)->clsid;
    snprintf(f->tag, sizeof f->tag, "%08X", (unsigned)f->clsid.Data1);
    HRESULT hr = fk_QueryInterface(&f->iface, riid, ppv);
    if (FAILED(hr))
        free(f);
    return hr;
}
static HRESULT STDMETHODCALLTYPE ff_LockServer(IClassFactory *This, BOOL lock) { return S_OK; }
static const IClassFactoryVtbl ff_vtbl = {ff_QueryInterface, ff_AddRef, ff_Release, ff_CreateInstance, ff_LockServer};

#ifndef FAKE_NO_EXPORT
/* Answers any CLSID: the instance's configuration is keyed by it. */
EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv)
{
    if (!IsEqualIID(riid, &IID_IClassFactory) && !IsEqualIID(riid, &IID_IUnknown))
        return E_NOINTERFACE;
    struct fake_factory *ff = calloc(1, sizeof *ff);
    ff->iface.lpVtbl = &ff_vtbl;
    ff->clsid = *rclsid;
    *ppv = ff;
    return S_OK;
}
#else
EXPORT int fake_profiler_without_dllgetclassobject(void) { return (int)sizeof(ff_vtbl); }
#endif

#endif
