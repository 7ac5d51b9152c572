/* Seeing an unhandled managed exception before the runtime aborts the process.
 *
 * On an unhandled exception the runtime reports it ("Unhandled exception. ..." on stderr) on
 * the dying thread, then aborts: the PAL resets SIGABRT to its default action before calling
 * abort(), so no signal handler runs (measured on .NET 8, 9 and 10: `rt_sigaction(SIGABRT,
 * SIG_DFL)` then `tgkill(SIGABRT)`). Two ways to see it coming, each calling back on the
 * dying thread, which may then wait for the last gasp (common/lastgasp.h):
 *
 * 1. The exception callbacks (COR_PRF_MONITOR_EXCEPTIONS), which both built-in children ask
 *    for anyway; the loader feeds them to clrmux_unhandled_exception_event for every child
 *    (.NET 8, 9 and 10). What the runtime raises, measured with a logging child:
 *      caught:      ExceptionThrown, (SearchFunctionEnter [SearchFilterEnter/Leave]
 *                   SearchFunctionLeave)*, SearchCatcherFound, then the second pass
 *                   (UnwindFunctionEnter/Leave, UnwindFinallyEnter/Leave) and CatcherEnter/Leave;
 *      unhandled:   the first pass enters every managed frame up to the thread's outermost one
 *                   without SearchCatcherFound, then .NET 8 leaves that frame
 *                   (SearchFunctionLeave) and prints and aborts with no further callback, while
 *                   .NET 9 and 10 (the managed exception handling of CoreLib's EH.DispatchEx)
 *                   print first, then run the second pass (an UnwindFunctionLeave, then
 *                   UnwindFunctionEnter per frame, finally blocks included) and abort;
 *      caught in native code (reflection's invoke on .NET 9, a static constructor's
 *      TypeInitializationException): the first pass ends without SearchCatcherFound at a
 *                   frame that is not the outermost one, then the second pass runs.
 *    So an exception is unhandled when its first pass ends, without a catcher, at the
 *    thread's outermost managed frame: ends means SearchFunctionLeave of that frame (.NET 8)
 *    or the second pass starting (.NET 9, 10). Which frame is the outermost comes from one
 *    stack walk (DoStackSnapshot; COR_PRF_ENABLE_STACK_SNAPSHOT) at a thread's first
 *    exception, and is confirmed by another walk before an exception is called unhandled
 *    (rare: only an exception that leaves that frame without a catcher). No cost beyond the
 *    callbacks themselves for the caught exceptions of a thread.
 * 2. System.AppContext.OnUnhandledException (System.Private.CoreLib; it raises
 *    AppDomain.UnhandledException): .NET 10 always calls it, .NET 8 and 9 only when the
 *    application subscribed to AppDomain.UnhandledException; ExceptionHandling.
 *    RaiseAppDomainUnhandledExceptionEvent (.NET 10) calls it without an exception. It runs
 *    once per process, so its first JIT compilation or ReadyToRun lookup
 *    (JITCompilationStarted / JITCachedFunctionSearchStarted) is the moment. The tracer, which
 *    monitors COR_PRF_MONITOR_JIT_COMPILATION and COR_PRF_MONITOR_CACHE_SEARCHES anyway,
 *    passes each FunctionID to clrmux_unhandled_is_hook (the profiler does not: those
 *    callbacks cost its cpu profile ~10% of its share of the process's CPU). */
#ifndef CLRMUX_COMMON_UNHANDLED_H
#define CLRMUX_COMMON_UNHANDLED_H

#include <stdatomic.h>
#include <stdint.h>

#include "clrmux/corprof.h"

struct clrmux_unhandled_hook {
    _Atomic uintptr_t corelib; /* ModuleID of System.Private.CoreLib, 0 until its token is known */
    _Atomic uint32_t token;    /* mdMethodDef of AppContext.OnUnhandledException; 0: not found */
    _Atomic uint32_t state;    /* 0: not looked for; 1: being looked for (the thread that set it);
                                  2: known (token, then corelib, stored) */
    _Atomic uintptr_t not_corelib[8]; /* modules already looked at (the first callbacks only) */
    _Atomic int n_not_corelib;
};

/* 1 when `fid` is System.AppContext.OnUnhandledException. `info`: any ICorProfilerInfo
 * (only version 1 methods are called). Thread-safe; after CoreLib is found, one
 * GetFunctionInfo per call. The first call for a CoreLib method looks the token up (CoreLib's
 * tables, ~12 page faults and 0.3-0.8 ms on a VM), unless clrmux_unhandled_prefetch did; if
 * a prefetch is under way, it waits for it (memory reads only, no lock). A zeroed struct is
 * ready. */
int clrmux_unhandled_is_hook(struct clrmux_unhandled_hook *h, ICorProfilerInfo *info, FunctionID fid);

/* Looks the token up ahead of the callbacks, from another thread than the runtime's: CoreLib
 * (`corelib`, the ModuleID of System.Private.CoreLib, mapped at `base` as GetModuleInfo gives
 * it) is loaded ~5-10 ms before its first method is JIT-compiled or looked up in its
 * ReadyToRun code, time in which this runs beside the runtime's start-up. Reads CoreLib's
 * metadata tables only (mdtables.h; no runtime call, no lock); when they cannot be read, or
 * a lookup is already under way or done, it does nothing and the first callback does the
 * lookup (with the importer as fallback). Returns 1 when the token is now known, else 0. */
int clrmux_unhandled_prefetch(struct clrmux_unhandled_hook *h, uintptr_t corelib, const void *base);

/* The exception callbacks of ICorProfilerCallback, as clrmux_unhandled_exception_event
 * takes them (the Unwind ones as one). */
enum clrmux_exc_event {
    CLRMUX_EXC_THROWN,         /* ExceptionThrown */
    CLRMUX_EXC_SEARCH_ENTER,   /* ExceptionSearchFunctionEnter(fid) */
    CLRMUX_EXC_SEARCH_LEAVE,   /* ExceptionSearchFunctionLeave */
    CLRMUX_EXC_FILTER_ENTER,   /* ExceptionSearchFilterEnter (a filter may throw and catch) */
    CLRMUX_EXC_FILTER_LEAVE,   /* ExceptionSearchFilterLeave */
    CLRMUX_EXC_CATCHER_FOUND,  /* ExceptionSearchCatcherFound */
    CLRMUX_EXC_UNWIND,         /* ExceptionUnwindFunctionEnter / ExceptionUnwindFunctionLeave */
    CLRMUX_EXC_CATCHER_ENTER,  /* ExceptionCatcherEnter(fid): the dispatch is over */
    CLRMUX_EXC_CATCHER_LEAVE,  /* ExceptionCatcherLeave */
};

/* What clrmux_unhandled_exception_event found. */
enum clrmux_exc_finding {
    CLRMUX_EXC_NOTHING = 0,
    CLRMUX_EXC_UNHANDLED = 1,     /* the exception is being dispatched unhandled: the runtime
                                     reports it and aborts once the callback returns */
    CLRMUX_EXC_AT_OUTERMOST = 2,  /* an exception thrown while a catch block of the thread's
                                     outermost function runs (the "throw;" or wrap of Main's
                                     catch) reached that function in its first pass: caught
                                     there, or unhandled. .NET 10 then raises no further
                                     exception callback; only AppContext.OnUnhandledException
                                     follows */
};

/* Feeds one exception callback, on the thread that raised it (the state is per thread).
 * `info`: the runtime's ICorProfilerInfo2 or later, with COR_PRF_ENABLE_STACK_SNAPSHOT set
 * (without it, DoStackSnapshot fails and nothing is ever called unhandled). `fid`: the
 * callback's FunctionID (0 for those without one). Returns what this callback shows (above).
 * Cost: a few loads and stores; a stack walk at a thread's first exception and when an
 * exception leaves the thread's outermost frame without a catcher. */
int clrmux_unhandled_exception_event(ICorProfilerInfo2 *info, enum clrmux_exc_event ev, FunctionID fid);

#endif
