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

/* Windows: the exports are listed in src/loader/libclrmux.def */
#if defined(_WIN32)
#define CLRMUX_EXPORT
#else
#define CLRMUX_EXPORT __attribute__((visibility("default")))
#endif

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

/* ---- configuration check (for the launcher: `clrmux check`, `clrmux run`) -------------- */

/* One problem or note found by clrmux_check_config: `level` is 0 error, 1 warning, 2 info;
 * `file` the configuration's path; `line` 1-based, or 0 for the file as a whole; `message`
 * one line without a newline. The strings are valid only during the call. */
typedef void (*clrmux_check_report_fn)(int level, const char *file, int line, const char *message,
                                       void *ctx);

/* What clrmux_check_config found. Paths are absolute or relative to the current folder, as
 * the library would open them; "%p" stands for the profiled process's id. */
struct clrmux_check_result {
    int errors;          /* problems that skip a key, a child or the file */
    int warnings;        /* ignored keys or sections that change nothing else */
    int active_children; /* children that would be created */
    char log_file[4096]; /* log_file of [loader]; "" = stderr */
    char traces[4096];   /* the tracer's span file; "" = no tracer, or spans go only to a collector */
    char profiles_dir[4096]; /* the profiler's output_dir; "" = no profiler */
};

/* Validates the loader.conf at `path` as clrmux would at Initialize, without a runtime: the
 * same parser, then each enabled child: a library child is opened and asked for its class
 * factory (DllGetClassObject with its clsid; nothing else of it is called), a builtin child
 * is created with its keys (where the tracer and the profiler check them) and released.
 * Each problem, then one note per usable child, is passed to `report` in file order; *res is
 * filled. Returns the number of errors (a missing file, or no usable child, is one), or -1
 * when out of memory. Meant for a process of its own (the launcher): it loads the children's
 * libraries, and a process hosts only one tracer. Not thread-safe (it redirects the log). */
CLRMUX_EXPORT int clrmux_check_config(const char *path, clrmux_check_report_fn report, void *ctx,
                                      struct clrmux_check_result *res);

/* The built-in tracer's span context of the calling thread, for the built-in profiler's
 * labels (`span id`, `local root span id`, `trace id`). Returns a pointer to a per-thread
 * record owned by libclrmux.so (created on the first call; NULL without memory):
 *   struct { volatile uint32_t seq, tid, depth, reserved; volatile uint64_t span_id,
 *            local_root_id; volatile uint8_t trace_id[16]; }
 * (struct clrmux_span_context, src/common/spanctx.h, with its reader). The tracer's probes
 * update it on the owning thread, `seq` odd while they do (seqlock, release stores). A
 * reader (a signal handler on that thread, or any other thread) reads seq, the fields, seq
 * again, and keeps the values only when both seq reads are equal and even and `tid` is the
 * thread it meant. Records are never freed: at thread exit the record is cleared (tid 0)
 * and later reused by another thread, so a cached pointer stays safe to read. Call it
 * outside any signal handler (it allocates on the first call). span_id 0: no open span. */
struct clrmux_span_context;
CLRMUX_EXPORT struct clrmux_span_context *clrmux_span_context_get(void);
/* The same record if the calling thread has one, else NULL; no allocation, no lock (an
 * initial-exec TLS read): async-signal-safe, for a SIGPROF handler on the sampled thread. */
CLRMUX_EXPORT struct clrmux_span_context *clrmux_span_context_peek(void);
/* The record of OS thread `tid` (gettid) if that thread is alive and has one, else NULL
 * (also for tid 0); a lock-free lookup (async-signal-safe), for a sampler that reads another
 * thread's span (the profiler's suspend sampler). Check the record's tid when reading it. */
CLRMUX_EXPORT struct clrmux_span_context *clrmux_span_context_find(uint32_t tid);

#endif
