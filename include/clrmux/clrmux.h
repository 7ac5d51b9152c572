/* libclrmux.so's public entry points: the COM exports the runtime calls.
 *
 * Register clrmux as the process's profiler:
 *   CORECLR_ENABLE_PROFILING=1
 *   CORECLR_PROFILER={EE712634-5BBB-4C28-8E6A-45180A97AD0B}
 *   CORECLR_PROFILER_PATH=/path/to/libclrmux.so
 * and list the child profilers in loader.conf (beside the library, or CLRMUX_CONFIG). */
#ifndef CLRMUX_CLRMUX_H
#define CLRMUX_CLRMUX_H

#include "clrmux/corprof.h"

#define CLRMUX_EXPORT __attribute__((visibility("default")))

/* clrmux's CLSID: {EE712634-5BBB-4C28-8E6A-45180A97AD0B}. */
#define CLSID_clrmux {0xEE712634, 0x5BBB, 0x4C28, {0x8E, 0x6A, 0x45, 0x18, 0x0A, 0x97, 0xAD, 0x0B}}
#define CLRMUX_CLSID_STRING "{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"

/* The runtime's first call: for CLSID_clrmux and IID_IClassFactory (or IID_IUnknown) stores
 * clrmux's class factory in *ppv and returns S_OK. Any other CLSID: CLASS_E_CLASSNOTAVAILABLE;
 * any other IID: E_NOINTERFACE; ppv NULL: E_POINTER. The factory's CreateInstance makes the
 * profiler object, which answers IUnknown and ICorProfilerCallback..ICorProfilerCallback11. */
CLRMUX_EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv);

/* Always S_FALSE: a profiler is never unloaded (the runtime does not call it anyway). */
CLRMUX_EXPORT HRESULT STDMETHODCALLTYPE DllCanUnloadNow(void);

/* The loader-loop marker every clrmux build exports: nonzero while that copy of clrmux is
 * loading its children (inside its Initialize), else 0. A clrmux that finds a child
 * library exporting it refuses that child; a clrmux whose Initialize runs while any copy
 * answers nonzero refuses to start (see src/loader/loop.h). Thread-safe (an atomic read). */
CLRMUX_EXPORT int clrmux_loader_busy(void);

#endif
