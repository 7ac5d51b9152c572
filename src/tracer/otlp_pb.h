/* OTLP/HTTP protobuf bodies (`protocol = http/protobuf`, Content-Type application/x-protobuf):
 * the interface of the companion library libclrmux_otlp.so (src/tracer/pb/otlp_pb.c), which
 * encodes spans straight into the wire format (pb/otlp_xpb.c; method spans through
 * pb/otlp_mspan.c) and metrics with protobuf-c, from the vendored opentelemetry-proto schema
 * (src/tracer/proto). The tracer dlopens it from its own folder only when that protocol is
 * used, so libclrmux.so links no libprotobuf-c. The messages carry the same fields as the
 * JSON lines of tracer/otlp.h (ExportTraceServiceRequest, ExportMetricsServiceRequest). */
#ifndef CLRMUX_TRACER_OTLP_PB_H
#define CLRMUX_TRACER_OTLP_PB_H

#include <stddef.h>
#include <stdint.h>

#include "tracer/otlp.h"
#include "tracer/spans.h"

#define CLRMUX_OTLP_PB_ABI 2
#define CLRMUX_OTLP_PB_LIB "libclrmux_otlp.so"
#define CLRMUX_OTLP_PB_SYMBOL "clrmux_otlp_pb"

struct clrmux_otlp_pb_api {
    int abi; /* CLRMUX_OTLP_PB_ABI */
    /* spans[0..n) as an ExportTraceServiceRequest (scope `clrmux`; an UNSET status left out,
     * as in the JSON lines). *out: malloc'd, the caller frees; NULL when n is 0. Returns 0, or
     * -1 when out of memory. */
    int (*traces)(const struct clrmux_resource *res, const struct clrmux_span *spans, size_t n,
                  const struct clrmux_otlp_names *names, uint8_t **out, size_t *len);
    /* An ExportMetricsServiceRequest with the metrics of clrmux_otlp_write_metrics from a
     * snapshot m[0..nmethods) (methods never called are left out) and the histogram bounds
     * (seconds) bounds[0..nbounds). Returns 0, or -1 when out of memory. */
    int (*metrics)(const struct clrmux_resource *res, int64_t start_ns, int64_t now_ns,
                   const struct clrmux_method_metrics *m, uint32_t nmethods, const double *bounds, size_t nbounds,
                   const struct clrmux_otlp_names *names, const struct clrmux_otlp_counter *counters, size_t ncounters,
                   uint8_t **out, size_t *len);
    /* Activity span records recs[0..len) (tracer/xspan.h, as clrmux_xq_drain gives them) as
     * an ExportTraceServiceRequest: one ScopeSpans per instrumentation scope, the fields of
     * clrmux_otlp_render_xspans. *nout: spans in it; *nbad: malformed records skipped. Returns
     * 0 (with *out NULL when no span), or -1 when out of memory. */
    int (*xtraces)(const struct clrmux_resource *res, const uint8_t *recs, size_t len, uint8_t **out, size_t *outlen,
                   size_t *nout, size_t *nbad);
};

/* Exported by libclrmux_otlp.so: its API table (static, never freed). */
typedef const struct clrmux_otlp_pb_api *(*clrmux_otlp_pb_fn)(void);
const struct clrmux_otlp_pb_api *clrmux_otlp_pb(void);

#endif
