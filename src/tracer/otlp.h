/* OTLP JSON: one ExportTraceServiceRequest per line, as the OpenTelemetry Collector's
 * otlpjsonfile receiver reads it (opentelemetry-proto, JSON mapping: trace and span ids as
 * lower-case hex, 64-bit integers as decimal strings, enums as numbers). */
#ifndef CLRMUX_TRACER_OTLP_H
#define CLRMUX_TRACER_OTLP_H

#include <stddef.h>
#include <stdio.h>

#include "tracer/spans.h"

/* Names for the ids in struct clrmux_span: method index -> "Namespace.Type.Method";
 * exception id -> type name; exception id -> its message; thread id -> thread name (each
 * NULL when unknown; the function pointers other than method may be NULL). */
typedef const char *(*clrmux_otlp_name_fn)(void *ctx, uint32_t id);

/* f's name for id, NULL when there is no f (or f knows none). */
static inline const char *clrmux_otlp_name(clrmux_otlp_name_fn f, void *ctx, uint32_t id)
{
    return f ? f(ctx, id) : NULL;
}

struct clrmux_otlp_names {
    clrmux_otlp_name_fn method;
    clrmux_otlp_name_fn exception;
    void *ctx;
    clrmux_otlp_name_fn thread;
    clrmux_otlp_name_fn exception_message;
};

/* The OTLP Resource: attributes in order (OpenTelemetry semantic conventions: service.name,
 * service.version, process.pid, process.executable.name, host.name, telemetry.sdk.*, and
 * those of OTEL_RESOURCE_ATTRIBUTES). */
#define CLRMUX_RESOURCE_MAX 32
struct clrmux_resource_attr {
    char key[128];
    char value[256];
    int is_int; /* value is a decimal integer: written as intValue */
};
struct clrmux_resource {
    size_t n;
    struct clrmux_resource_attr attrs[CLRMUX_RESOURCE_MAX];
};

/* Sets key (replacing its value if present). Returns 0, or -1 when full or too long. */
int clrmux_resource_set(struct clrmux_resource *r, const char *key, const char *value, int is_int);
/* The value of key, or NULL. */
const char *clrmux_resource_get(const struct clrmux_resource *r, const char *key);
/* Adds OTEL_RESOURCE_ATTRIBUTES-style text "k1=v1,k2=v2" (W3C Baggage octets, values
 * percent-decoded) without replacing keys already set. Returns the number of malformed
 * members skipped (their text in bad[badlen], comma-separated). */
int clrmux_resource_parse(struct clrmux_resource *r, const char *text, char *bad, size_t badlen);
/* The resource as an OTLP JSON object {"attributes":[...]}. */
void clrmux_resource_write_json(FILE *f, const struct clrmux_resource *r);

/* Writes spans[0..n) as one line (one resourceSpans with the resource, one scopeSpans with
 * scope "clrmux"). Span attributes (semantic conventions): code.function.name, thread.id,
 * thread.name; an error span has status ERROR with the exception type as its message and an
 * `exception` event (exception.type, exception.message when known) at its end time. Nothing
 * is written for n == 0. Returns 0, or -1 on a write error. */
int clrmux_otlp_write_line(FILE *f, const struct clrmux_resource *res, const struct clrmux_span *spans, size_t n,
                           const struct clrmux_otlp_names *names);

/* A growable memory buffer (malloc'd p, owned by the caller; start it zeroed). */
struct clrmux_otlp_mem {
    char *p;
    size_t len, cap;
};
/* Appends the line clrmux_otlp_write_line writes to m, formatted in place (no stdio): the
 * export thread's encoder. Returns 0, or -1 (out of memory; m->len may have grown by a
 * partial line: reset it). */
int clrmux_otlp_render_line(struct clrmux_otlp_mem *m, const struct clrmux_resource *res,
                            const struct clrmux_span *spans, size_t n, const struct clrmux_otlp_names *names);

/* Appends the Activity span records recs[0..len) (tracer/xspan.h; as clrmux_xq_drain gives
 * them: a u32 length and the record, 4-byte aligned) to m as one line: one resourceSpans
 * with res, one scopeSpans per instrumentation scope (the ActivitySource's name and version),
 * each span with its kind, attributes, events, links, trace state and status. A malformed
 * record is skipped and counted in *nbad. Returns 0 with *nout spans in the line (no line
 * when 0), or -1 (out of memory; m->len may have grown by a partial line: reset it). */
int clrmux_otlp_render_xspans(struct clrmux_otlp_mem *m, const struct clrmux_resource *res, const uint8_t *recs,
                              size_t len, size_t *nout, size_t *nbad);

/* A process-wide counter exported beside the per-method metrics (a monotonic cumulative sum
 * with unit {span}). */
struct clrmux_otlp_counter {
    const char *name, *description;
    uint64_t value;
};

/* Writes one ExportMetricsServiceRequest line (OTLP JSON): for each method 0..nmethods-1
 * that was called, clrmux.method.calls and clrmux.method.errors (monotonic cumulative sums,
 * unit {call}) and clrmux.method.duration (cumulative histogram, unit s, explicit bounds
 * clrmux_hist_bounds_s), each data point with attribute code.function.name; then the
 * counters. Totals come from clrmux_method_metrics_get. Returns 0, or -1 on a write error
 * or no memory. */
int clrmux_otlp_write_metrics(FILE *f, const struct clrmux_resource *res, int64_t start_ns, int64_t now_ns,
                              uint32_t nmethods, const struct clrmux_otlp_names *names,
                              const struct clrmux_otlp_counter *counters, size_t ncounters);

/* clrmux's version (the scope's and telemetry.sdk.version) */
#define CLRMUX_VERSION "0.1.0"

/* Writes s as a JSON string literal (with quotes), escaping as RFC 8259 requires. */
void clrmux_json_string(FILE *f, const char *s);

#endif
