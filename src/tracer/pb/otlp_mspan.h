/* Method spans as OTLP protobuf through the direct encoder (otlp_mspan.c). Internal to
 * libclrmux_otlp.so: its API table's `traces` (tracer/otlp_pb.h). */
#ifndef CLRMUX_TRACER_PB_OTLP_MSPAN_H
#define CLRMUX_TRACER_PB_OTLP_MSPAN_H

#include <stddef.h>
#include <stdint.h>

#include "tracer/otlp.h"
#include "tracer/spans.h"

/* Spans spans[0..n) with resource res as an ExportTraceServiceRequest (one ResourceSpans, one
 * ScopeSpans `clrmux`), their names through `names` (NULL: `method#N`, no thread name, no
 * exception name). *out: malloc'd, the caller frees; NULL (and 0) when n is 0. Returns 0, or -1
 * when out of memory. */
int clrmux_mpb_traces(const struct clrmux_resource *res, const struct clrmux_span *spans, size_t n,
                      const struct clrmux_otlp_names *names, uint8_t **out, size_t *len);

#endif
