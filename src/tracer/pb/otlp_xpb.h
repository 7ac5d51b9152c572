/* The companion's direct encoder of Activity span records (otlp_xpb.c): the records straight
 * into the protobuf wire format of an OTLP ExportTraceServiceRequest, without protobuf-c's
 * message structs. Internal to libclrmux_otlp.so: its API table's `xtraces` (tracer/otlp_pb.h). */
#ifndef CLRMUX_TRACER_PB_OTLP_XPB_H
#define CLRMUX_TRACER_PB_OTLP_XPB_H

#include <stddef.h>
#include <stdint.h>

#include "tracer/otlp.h"

/* Records recs[0..len) (tracer/xspan.h, as clrmux_xq_drain gives them) with resource res as an
 * ExportTraceServiceRequest: one ResourceSpans, one ScopeSpans per instrumentation scope (name
 * and version) in the order each is first seen, its spans in record order. *out: malloc'd, the
 * caller frees; NULL when there is no span. *nout: spans in it; *nbad: malformed records
 * skipped. Returns 0, or -1 when out of memory. */
int clrmux_xpb_traces(const struct clrmux_resource *res, const uint8_t *recs, size_t len, uint8_t **out, size_t *outlen,
                      size_t *nout, size_t *nbad);

#endif
