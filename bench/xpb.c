/* bench/xpb.c: what encoding a traced web service's spans as OTLP protobuf costs the export
 * thread, in ns per span, side by side in one run:
 *   clrmux      libclrmux_otlp.so's direct encoder (its `xtraces`, dlopen'd as the tracer
 *               does) on a batch of Activity span records (tracer/xspan.h)
 *   protobuf-c  the same records parsed (clrmux_xspan_parse) and built into protobuf-c's
 *               generated messages, then packed: what one writes by hand with the library
 *               (and what the tracer did before its direct encoder)
 * The spans: SERVER and CLIENT in turn, 12 attributes each, as the agent records a request and
 * a call (bench/web.sh's). Both bodies decode to the same spans (checked once, with protobuf-c).
 * Usage: xpb LIBCLRMUX_OTLP [SPANS_PER_BATCH] [BATCHES]   (500, 2000; best of 5).
 * Built and run by bench/web.sh (part 4). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "tracer/otlp_pb.h"
#include "tracer/xspan.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- the records, as the agent's SpanWriter writes them ---- */

struct wr {
    uint8_t *p;
    size_t n;
};
static void u(struct wr *w, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        w->p[w->n++] = (uint8_t)(v >> (8 * i));
}
static void str(struct wr *w, const char *s)
{
    size_t n = strlen(s);
    u(w, n, 2);
    memcpy(w->p + w->n, s, n);
    w->n += n;
}
static void sattr(struct wr *w, const char *k, const char *v) { u(w, CLRMUX_XATTR_STRING, 1), str(w, k), str(w, v); }
static void iattr(struct wr *w, const char *k, int64_t v) { u(w, CLRMUX_XATTR_INT, 1), str(w, k), u(w, (uint64_t)v, 8); }

/* n records into a drained run (a u32 length and the record, 4-byte aligned); returns its length */
static size_t records(uint8_t *run, int n)
{
    static const uint8_t trace[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int server = !(i & 1);
        struct wr w = {run + len + 4, 0};
        u(&w, CLRMUX_XSPAN_VERSION, 2), u(&w, CLRMUX_XSPAN_HEADER, 2);
        memcpy(w.p + w.n, trace, 16), w.n += 16;
        u(&w, 0x1122334455667788ull + (uint64_t)i, 8), u(&w, 0xb7ad6b7169203331ull, 8);
        u(&w, 1764460800000000000ull + (uint64_t)i * 1000, 8), u(&w, 1764460800000040000ull + (uint64_t)i * 1000, 8);
        u(&w, server ? 2 : 3, 1), u(&w, 0, 1), u(&w, server, 1), u(&w, 0, 1), u(&w, 4242, 4);
        str(&w, server ? "GET /bench" : "GET"), str(&w, ""), str(&w, server ? "Microsoft.AspNetCore" : "System.Net.Http");
        str(&w, ""), str(&w, "");
        u(&w, 12, 2);
        sattr(&w, "http.request.method", "GET");
        sattr(&w, "url.scheme", "http");
        sattr(&w, "url.path", server ? "/bench" : "/stock/42");
        sattr(&w, "server.address", "127.0.0.1");
        iattr(&w, "server.port", 5100);
        sattr(&w, "network.protocol.version", "1.1");
        sattr(&w, "user_agent.original", "wrk/4.2.0");
        sattr(&w, "client.address", "127.0.0.1");
        sattr(&w, "http.route", "/bench");
        iattr(&w, "http.response.status_code", 200);
        sattr(&w, "url.full", "http://127.0.0.1:5101/stock/42?warehouse=east");
        sattr(&w, "url.query", "warehouse=east");
        u(&w, 0, 2), u(&w, 0, 2); /* no events, no links */
        uint32_t l = (uint32_t)w.n;
        memcpy(run + len, &l, 4);
        len += 4 + ((w.n + 3) & ~(size_t)3);
    }
    return len;
}

/* ---- by hand with protobuf-c ---- */

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans ScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans ResourceSpans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

/* protobuf-c's strings are NUL-terminated: each copied into one arena per batch */
struct arena {
    char *p;
    size_t n, cap;
};
static char *dupx(struct arena *a, struct clrmux_xstr s)
{
    if (a->n + s.len + 1 > a->cap)
        return NULL;
    char *d = a->p + a->n;
    memcpy(d, s.p ? s.p : "", s.len);
    d[s.len] = 0;
    a->n += (size_t)s.len + 1;
    return d;
}

static void id_be(uint8_t *out, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* recs[0..len) as an ExportTraceServiceRequest built with protobuf-c (one ScopeSpans per
 * scope, in first-seen order); *out malloc'd. Returns the spans, -1 when out of memory. */
static long by_hand(const uint8_t *recs, size_t len, uint8_t **out, size_t *outlen)
{
    size_t cap = clrmux_xspan_count_run(recs, len), nbad = 0;
    struct clrmux_xspan *xs = malloc(cap * sizeof *xs);
    if (!xs)
        return -1;
    size_t n = clrmux_xspan_parse_run(recs, len, xs, cap, &nbad);
    Span *spans = calloc(n, sizeof *spans);
    Span **sp = calloc(n, sizeof *sp);
    ScopeSpans *scopes = calloc(n, sizeof *scopes);
    ScopeSpans **ssp = calloc(n, sizeof *ssp);
    Opentelemetry__Proto__Common__V1__InstrumentationScope *scope = calloc(n, sizeof *scope);
    uint8_t(*ids)[16] = calloc(n, sizeof *ids);
    struct arena ar = {malloc(len), 0, len}; /* the strings' bytes and their NULs fit in the records' */
    size_t nattrs = 0;
    for (size_t i = 0; i < n; i++)
        nattrs += xs[i].attrs.n;
    KeyValue *kv = calloc(nattrs ? nattrs : 1, sizeof *kv);
    KeyValue **kvp = calloc(nattrs ? nattrs : 1, sizeof *kvp);
    AnyValue *av = calloc(nattrs ? nattrs : 1, sizeof *av);
    long rc = -1;
    if (!spans || !sp || !scopes || !ssp || !scope || !ids || !kv || !kvp || !av || !ar.p)
        goto out;
    size_t nscopes = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct clrmux_xspan *x = &xs[i];
        Span *s = &spans[i];
        opentelemetry__proto__trace__v1__span__init(s);
        s->trace_id.data = (uint8_t *)x->trace_id, s->trace_id.len = 16;
        id_be(ids[i], x->span_id), s->span_id.data = ids[i], s->span_id.len = 8;
        id_be(ids[i] + 8, x->parent_id), s->parent_span_id.data = ids[i] + 8, s->parent_span_id.len = x->parent_id ? 8 : 0;
        s->name = dupx(&ar, x->name);
        s->trace_state = dupx(&ar, x->trace_state);
        s->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)x->kind;
        s->start_time_unix_nano = (uint64_t)x->start_ns, s->end_time_unix_nano = (uint64_t)x->end_ns;
        s->attributes = kvp + k;
        struct clrmux_xattrs l = x->attrs;
        struct clrmux_xattr a;
        while (clrmux_xattr_next(&l, &a)) {
            opentelemetry__proto__common__v1__key_value__init(&kv[k]);
            opentelemetry__proto__common__v1__any_value__init(&av[k]);
            kv[k].key = dupx(&ar, a.key);
            kv[k].value = &av[k];
            if (a.type == CLRMUX_XATTR_STRING)
                av[k].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE, av[k].string_value = dupx(&ar, a.s);
            else
                av[k].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE, av[k].int_value = a.i;
            kvp[k] = &kv[k];
            k++, s->n_attributes++;
        }
        size_t j = 0;
        while (j < nscopes && !(scope[j].name && strlen(scope[j].name) == x->scope_name.len &&
                                !memcmp(scope[j].name, x->scope_name.p, x->scope_name.len)))
            j++;
        if (j == nscopes) {
            opentelemetry__proto__common__v1__instrumentation_scope__init(&scope[j]);
            scope[j].name = dupx(&ar, x->scope_name);
            opentelemetry__proto__trace__v1__scope_spans__init(&scopes[j]);
            scopes[j].scope = &scope[j];
            scopes[j].spans = sp + i; /* filled below, grouped */
            ssp[j] = &scopes[j];
            nscopes++;
        }
        scopes[j].n_spans++;
    }
    /* the spans grouped by scope, in first-seen order */
    size_t at = 0;
    for (size_t j = 0; j < nscopes; j++) {
        scopes[j].spans = sp + at;
        for (size_t i = 0; i < n; i++)
            if (strlen(scope[j].name) == xs[i].scope_name.len && !memcmp(scope[j].name, xs[i].scope_name.p, xs[i].scope_name.len))
                sp[at++] = &spans[i];
    }
    Opentelemetry__Proto__Resource__V1__Resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    KeyValue rkv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *rkvp = &rkv;
    AnyValue rav = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    rkv.key = "service.name", rkv.value = &rav;
    rav.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE, rav.string_value = "front";
    res.attributes = &rkvp, res.n_attributes = 1;
    ResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    rs.resource = &res, rs.scope_spans = ssp, rs.n_scope_spans = nscopes;
    Request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.resource_spans = &rsp, req.n_resource_spans = 1;
    *outlen = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    if ((*out = malloc(*outlen ? *outlen : 1))) {
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, *out);
        rc = (long)n;
    }
out:
    free(ar.p), free(xs), free(spans), free(sp), free(scopes), free(ssp), free(scope), free(ids), free(kv), free(kvp), free(av);
    return rc;
}

/* spans in an encoded request (-1: it does not decode) */
static long decoded_spans(const uint8_t *b, size_t len)
{
    Request *r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, b);
    if (!r)
        return -1;
    long n = 0;
    for (size_t i = 0; i < r->n_resource_spans; i++)
        for (size_t j = 0; j < r->resource_spans[i]->n_scope_spans; j++)
            n += (long)r->resource_spans[i]->scope_spans[j]->n_spans;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: xpb LIBCLRMUX_OTLP [SPANS_PER_BATCH] [BATCHES]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 500, batches = argc > 3 ? atoi(argv[3]) : 2000;
    if (n < 2 || n > 100000 || batches < 1) {
        fprintf(stderr, "xpb: SPANS_PER_BATCH 2-100000, BATCHES >= 1\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    clrmux_otlp_pb_fn get = h ? (clrmux_otlp_pb_fn)dlsym(h, CLRMUX_OTLP_PB_SYMBOL) : NULL;
    const struct clrmux_otlp_pb_api *api = get ? get() : NULL;
    if (!api || api->abi != CLRMUX_OTLP_PB_ABI || !api->xtraces) {
        fprintf(stderr, "xpb: %s: %s\n", argv[1], h ? "no encoder of this ABI" : dlerror());
        return 1;
    }
    uint8_t *run = malloc((size_t)n * 1024);
    if (!run)
        return 1;
    size_t len = records(run, n);
    struct clrmux_resource res = {0};
    res.n = 1;
    strcpy(res.attrs[0].key, "service.name");
    strcpy(res.attrs[0].value, "front");
    uint8_t *out = NULL;
    size_t outlen = 0, nout = 0, nbad = 0;
    /* both bodies decode to the batch's spans */
    if (api->xtraces(&res, run, len, &out, &outlen, &nout, &nbad) || decoded_spans(out, outlen) != n) {
        fprintf(stderr, "xpb: the direct encoder's body does not decode to %d spans\n", n);
        return 1;
    }
    size_t direct_bytes = outlen;
    free(out);
    if (by_hand(run, len, &out, &outlen) != n || decoded_spans(out, outlen) != n) {
        fprintf(stderr, "xpb: protobuf-c's body does not decode to %d spans\n", n);
        return 1;
    }
    size_t hand_bytes = outlen;
    free(out);
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        for (int b = 0; b < batches; b++) {
            api->xtraces(&res, run, len, &out, &outlen, &nout, &nbad);
            free(out);
        }
        double t1 = now();
        for (int b = 0; b < batches; b++) {
            by_hand(run, len, &out, &outlen);
            free(out);
        }
        double t2 = now();
        if ((t1 - t0) / batches / n < best[0])
            best[0] = (t1 - t0) / batches / n;
        if ((t2 - t1) / batches / n < best[1])
            best[1] = (t2 - t1) / batches / n;
    }
    printf("   clrmux's direct encoder %7.1f ns per span (%zu bytes a batch of %d)\n", best[0], direct_bytes, n);
    printf("   protobuf-c by hand      %7.1f ns per span (%zu bytes)\n", best[1], hand_bytes);
    printf("   clrmux / protobuf-c %.2f\n", best[0] / best[1]);
    return 0;
}
