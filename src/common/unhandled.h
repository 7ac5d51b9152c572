/* Seeing an unhandled managed exception before the runtime aborts the process.
 *
 * On an unhandled exception the runtime calls System.AppContext.OnUnhandledException
 * (System.Private.CoreLib; it raises AppDomain.UnhandledException) on the dying thread, then
 * aborts: the PAL resets SIGABRT to its default action before calling abort(), so no signal
 * handler runs (measured on .NET 10: `rt_sigaction(SIGABRT, SIG_DFL)` then `tgkill(SIGABRT)`).
 * That method runs once per process, so its first JIT compilation or ReadyToRun lookup
 * (JITCompilationStarted / JITCachedFunctionSearchStarted) is the moment to flush: the
 * callback runs on the dying thread, which may then wait for the last gasp
 * (common/lastgasp.h), which flushes the tracer and the profiler. The tracer, which monitors
 * COR_PRF_MONITOR_JIT_COMPILATION and COR_PRF_MONITOR_CACHE_SEARCHES anyway, passes each
 * FunctionID to clrmux_unhandled_is_hook (the profiler does not: those callbacks cost its
 * cpu profile ~10% of its share of the process's CPU). */
#ifndef CLRMUX_COMMON_UNHANDLED_H
#define CLRMUX_COMMON_UNHANDLED_H

#include <stdatomic.h>
#include <stdint.h>

#include "clrmux/corprof.h"

struct clrmux_unhandled_hook {
    _Atomic uintptr_t corelib; /* ModuleID of System.Private.CoreLib, 0 until seen */
    _Atomic uint32_t token;    /* mdMethodDef of AppContext.OnUnhandledException; 0: not found */
    _Atomic uintptr_t not_corelib[8]; /* modules already looked at (the first callbacks only) */
    _Atomic int n_not_corelib;
};

/* 1 when `fid` is System.AppContext.OnUnhandledException. `info`: any ICorProfilerInfo
 * (only version 1 methods are called). Thread-safe; after CoreLib is found, one
 * GetFunctionInfo per call. A zeroed struct is ready. */
int clrmux_unhandled_is_hook(struct clrmux_unhandled_hook *h, ICorProfilerInfo *info, FunctionID fid);

#endif
