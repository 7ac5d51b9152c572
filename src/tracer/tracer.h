/* The built-in IL-rewriting tracer (`builtin = tracer` in loader.conf).
 *
 * A child like any other: it reaches the runtime only through the ICorProfilerInfo proxy it
 * gets in Initialize and receives only the callbacks its own mask asks for:
 *   ModuleLoadFinished  find the configured targets' MethodDefs (IMetaDataImport2) and hand
 *                       them to a native thread that calls RequestReJIT (never the callback
 *                       thread); the callback waits, bounded, until the request is made so
 *                       that the first call of a method is traced too
 *   GetReJITParameters  wrap the original IL (tracer/il.h): entry probe, exception filter,
 *                       exit probe in a finally; the probes are `calli`s to native functions
 *                       (tracer/spans.h) through an unmanaged cdecl StandAloneSig
 *   JITInlining / JITCachedFunctionSearchStarted  refuse inlining and precompiled
 *                       (ReadyToRun) code of traced methods
 *   ExceptionThrown     remembers the exception's type name for the error status
 * Spans go to a bounded ring that a background thread writes as OTLP JSON lines, and/or
 * POSTs to an OTLP/HTTP collector (tracer/otlp_http.h; libcurl dlopened only then).
 *
 *   rewritten IL, root spans  join System.Diagnostics.Activity.Current (tracer/activity.h)
 * Every call is counted in per-method OTLP metrics (tracer/spans.h, tracer/otlp.h); spans
 * have head sampling (sample_ratio). Endpoints get protobuf bodies through the companion
 * libclrmux_otlp.so (tracer/otlp_pb.h) or JSON.
 *
 * Section keys: trace (repeatable), output, service_name, buffer_spans, flush_interval_ms,
 * endpoint, sample_ratio, metrics_output, metrics_interval_ms, metrics_endpoint, protocol,
 * headers, timeout_ms, join_activity (loader.conf.example documents them). Environment:
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_* (defaults under the
 * keys); CLRMUX_LIBCURL, the libcurl to load instead of libcurl.so.4. */
#ifndef CLRMUX_TRACER_TRACER_H
#define CLRMUX_TRACER_TRACER_H

#include "clrmux/corprof.h"
#include "loader/config.h"

/* What the tracer needs of its host (the loader), given at creation: it calls nothing of the
 * loader directly (rooms call downward only). Functions the loader defines (loader/detach.h):
 * clrmux's process-wide membarrier registration, which the tracer's ReJIT thread makes when
 * the tracer adopts it (barrier_adopt: 1 when adopted), before anything that can wait for it
 * (barrier_register_adopted), or gives back when that thread cannot start (barrier_disown).
 * NULL members: the tracer adopts nothing. */
struct clrmux_tracer_host {
    int (*barrier_adopt)(void);
    void (*barrier_register_adopted)(void);
    void (*barrier_disown)(void);
};

/* Creates the tracer from its section (`cfg_path`: the file, for messages; `cfg_dir`: the
 * folder relative paths resolve from; `host`: copied, NULL for none).
 * Returns its callback object (one reference) and sets *version = 11, or logs why and
 * returns NULL. Only one tracer may exist in a process. */
ICorProfilerCallback11 *clrmux_tracer_create(const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir,
                                             const struct clrmux_tracer_host *host, int *version);

#endif
