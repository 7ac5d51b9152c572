/* OTLP JSON: one ExportTraceServiceRequest per line, as the OpenTelemetry Collector's
 * otlpjsonfile receiver reads it (opentelemetry-proto, JSON mapping: trace and span ids as
 * lower-case hex, 64-bit integers as decimal strings, enums as numbers). */
#ifndef CLRMUX_TRACER_OTLP_H
#define CLRMUX_TRACER_OTLP_H

#include <stddef.h>
#include <stdio.h>

#include "tracer/spans.h"

/* Names for the ids in struct clrmux_span: method index -> "Namespace.Type.Method";
 * exception id -> type name (NULL when unknown). */
typedef const char *(*clrmux_otlp_name_fn)(void *ctx, uint32_t id);

struct clrmux_otlp_names {
    clrmux_otlp_name_fn method;
    clrmux_otlp_name_fn exception;
    void *ctx;
};

/* Writes spans[0..n) as one line (one resourceSpans with service.name and process.pid, one
 * scopeSpans with scope "clrmux"). Nothing is written for n == 0. Returns 0, or -1 on a
 * write error. */
int clrmux_otlp_write_line(FILE *f, const char *service_name, long pid, const struct clrmux_span *spans, size_t n,
                           const struct clrmux_otlp_names *names);

/* Writes s as a JSON string literal (with quotes), escaping as RFC 8259 requires. */
void clrmux_json_string(FILE *f, const char *s);

#endif
