/* Unit tests for Activity span records: src/tracer/xspan.c (the checking parser),
 * src/tracer/xqueue.c (the queue), src/tracer/otlp_xspan.c (their OTLP JSON) and their strings
 * and fields in OTLP protobuf (src/tracer/pb/otlp_xpb.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "tracer/otlp.h"
#include "tracer/otlp_pb.h"
#include "tracer/xspan.h"
#include "xspan_build.h"

static const uint8_t trace[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
                                  0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};

/* a SERVER span of ASP.NET Core with two attributes, an event and a link */
static void server(struct xb *x, uint64_t span, const char *scope)
{
    xb_head(x, trace, span, 0xb7ad6b7169203331ull, 1000, 2000, 2, 2, "GET /order/{id}", "boom", scope, "10.0",
            "vendor=abc");
    xb_u(x, 2, 2);
    xb_attr_str(x, "http.request.method", "GET");
    xb_attr_int(x, "http.response.status_code", 500);
    xb_u(x, 1, 2); /* an event */
    xb_u(x, 1500, 8);
    xb_str(x, "exception");
    xb_u(x, 1, 2);
    xb_attr_str(x, "exception.type", "System.InvalidOperationException");
    xb_u(x, 1, 2); /* a link */
    memcpy(x->b + x->n, trace, 16);
    x->n += 16;
    xb_u(x, 0x1122334455667788ull, 8);
    xb_str(x, "");
    xb_u(x, 0, 2);
}

static void test_parse(void **state)
{
    (void)state;
    struct xb x;
    server(&x, 0x0102030405060708ull, "Microsoft.AspNetCore");
    struct clrmux_xspan s;
    assert_int_equal(clrmux_xspan_parse(x.b, x.n, &s), 0);
    assert_memory_equal(s.trace_id, trace, 16);
    assert_true(s.span_id == 0x0102030405060708ull && s.parent_id == 0xb7ad6b7169203331ull);
    assert_int_equal(s.kind, 2);
    assert_int_equal(s.status, 2);
    assert_int_equal(s.name.len, strlen("GET /order/{id}"));
    struct clrmux_xattr a;
    struct clrmux_xattrs l = s.attrs;
    assert_int_equal(clrmux_xattr_next(&l, &a), 1);
    assert_int_equal(a.type, CLRMUX_XATTR_STRING);
    assert_int_equal(clrmux_xattr_next(&l, &a), 1);
    assert_true(a.type == CLRMUX_XATTR_INT && a.i == 500);
    assert_int_equal(clrmux_xattr_next(&l, &a), 0);
    assert_int_equal(s.nevents, 1);
    assert_int_equal(s.nlinks, 1);
    /* every truncation of the record is refused, never read past */
    for (size_t n = 0; n < x.n; n++)
        assert_int_equal(clrmux_xspan_parse(x.b, n, &s), -1);
    /* a bad kind, status, version, attribute type; a zero span id */
    x.b[CLRMUX_XSPAN_HEADER - 8] = 9;
    assert_int_equal(clrmux_xspan_parse(x.b, x.n, &s), -1);
    server(&x, 0, "s");
    assert_int_equal(clrmux_xspan_parse(x.b, x.n, &s), -1);
    server(&x, 1, "s");
    x.b[0] = 2;
    assert_int_equal(clrmux_xspan_parse(x.b, x.n, &s), -1);
}

static void test_queue(void **state)
{
    (void)state;
    assert_int_equal(clrmux_xq_init(4096), 0);
    struct xb x;
    server(&x, 1, "a");
    size_t entry = 4 + ((x.n + 3) & ~(size_t)3);
    int pushed = 0;
    while (clrmux_xq_push(x.b, x.n) == 0)
        pushed++;
    assert_int_equal(pushed, (int)(4096 / entry));
    struct clrmux_xq_stats st;
    clrmux_xq_stats(&st);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(clrmux_xq_push(x.b, 3), -1); /* not a record */
    static uint8_t out[65536];
    /* drained and refilled across the ring's end, the records come back whole and in order */
    for (int round = 0; round < 5; round++) {
        size_t got = clrmux_xq_drain(out, sizeof out);
        assert_true(got > 0 && got % entry == 0);
        for (size_t off = 0; off < got; off += entry) {
            uint32_t len;
            memcpy(&len, out + off, 4);
            assert_int_equal(len, x.n);
            assert_memory_equal(out + off + 4, x.b, x.n);
        }
        for (int i = 0; i < 3 + round; i++)
            assert_int_equal(clrmux_xq_push(x.b, x.n), 0);
    }
    clrmux_xq_stats(&st);
    assert_int_equal(st.malformed, 1);
    assert_int_equal(clrmux_xq_init(4096), 0);
}

static void test_json(void **state)
{
    (void)state;
    static uint8_t recs[16384];
    size_t len = 0;
    struct xb x;
    const char *scopes[] = {"Microsoft.AspNetCore", "System.Net.Http", "Microsoft.AspNetCore"};
    for (int i = 0; i < 3; i++) {
        server(&x, (uint64_t)i + 1, scopes[i]);
        uint32_t n = (uint32_t)x.n;
        memcpy(recs + len, &n, 4);
        memcpy(recs + len + 4, x.b, x.n);
        len += 4 + ((x.n + 3) & ~(size_t)3);
    }
    uint32_t junk = 5; /* a malformed record: skipped, counted */
    memcpy(recs + len, &junk, 4);
    memcpy(recs + len + 4, "junk!", 5);
    len += 12;
    struct clrmux_resource res = {0};
    clrmux_resource_set(&res, "service.name", "shop", 0);
    struct clrmux_otlp_mem m = {0};
    size_t nout = 0, nbad = 0;
    assert_int_equal(clrmux_otlp_render_xspans(&m, &res, recs, len, &nout, &nbad), 0);
    assert_int_equal(nout, 3);
    assert_int_equal(nbad, 1);
    char *line = strndup(m.p, m.len);
    assert_non_null(strstr(line, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\""));
    /* one scopeSpans per source, its spans together */
    const char *a = strstr(line, "{\"scope\":{\"name\":\"Microsoft.AspNetCore\",\"version\":\"10.0\"},\"spans\":[");
    const char *b = strstr(line, "{\"scope\":{\"name\":\"System.Net.Http\"");
    assert_non_null(a), assert_non_null(b);
    assert_null(strstr(a + 20, "\"name\":\"Microsoft.AspNetCore\"")); /* not a second time */
    assert_non_null(strstr(line, "{\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"0000000000000001\","
                                 "\"parentSpanId\":\"b7ad6b7169203331\",\"traceState\":\"vendor=abc\","
                                 "\"name\":\"GET /order/{id}\",\"kind\":2,\"startTimeUnixNano\":\"1000\","
                                 "\"endTimeUnixNano\":\"2000\",\"attributes\":[{\"key\":\"http.request.method\","
                                 "\"value\":{\"stringValue\":\"GET\"}},{\"key\":\"http.response.status_code\","
                                 "\"value\":{\"intValue\":\"500\"}}],\"events\":[{\"timeUnixNano\":\"1500\","
                                 "\"name\":\"exception\",\"attributes\":[{\"key\":\"exception.type\",\"value\":"
                                 "{\"stringValue\":\"System.InvalidOperationException\"}}]}],\"links\":[{\"traceId\":"
                                 "\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"1122334455667788\","
                                 "\"attributes\":[]}],\"status\":{\"code\":2,\"message\":\"boom\"}}"));
    assert_true(m.len > 0 && m.p[m.len - 1] == '\n');
    free(line);
    free(m.p);
}

/* strings from the app: escaped, invalid UTF-8 replaced, so the line stays JSON */
static void test_json_strings(void **state)
{
    (void)state;
    struct xb x;
    xb_head(&x, trace, 7, 0, 1, 2, 1, 0, "a\"b\\c\n\x01\xff\xc3\xa9", "", "s", "", "");
    xb_u(&x, 0, 2), xb_u(&x, 0, 2), xb_u(&x, 0, 2);
    static uint8_t recs[1024];
    uint32_t n = (uint32_t)x.n;
    memcpy(recs, &n, 4);
    memcpy(recs + 4, x.b, x.n);
    struct clrmux_resource res = {0};
    struct clrmux_otlp_mem m = {0};
    size_t nout, nbad;
    assert_int_equal(clrmux_otlp_render_xspans(&m, &res, recs, 4 + ((x.n + 3) & ~(size_t)3), &nout, &nbad), 0);
    assert_int_equal(nout, 1);
    char *line = strndup(m.p, m.len);
    assert_non_null(strstr(line, "\"name\":\"a\\\"b\\\\c\\n\\u0001\xef\xbf\xbd\xc3\xa9\""));
    assert_non_null(strstr(line, "\"status\":{}"));
    free(line);
    free(m.p);
}

/* the same strings in a protobuf body: ASCII as it is (across the 8-byte steps), valid UTF-8
 * kept, each invalid byte replaced by U+FFFD, wherever it falls */
static void test_pb_strings(void **state)
{
    (void)state;
    struct xb x;
    xb_head(&x, trace, 7, 0, 1, 2, 2, 0, "GET /orders/{id}", "", "s", "", "");
    xb_u(&x, 4, 2); /* attributes */
    xb_attr_str(&x, "url.full", "http://127.0.0.1:8080/orders/42?x=1");
    xb_attr_str(&x, "user_agent.original", "caf\xc3\xa9 bad\xff" "123456"); /* 16 bytes: two steps */
    xb_attr_str(&x, "k\xff" "ey", "tail \xe2\x82");                       /* a sequence cut short */
    xb_attr_str(&x, "nul", "a\x01z");
    xb_u(&x, 0, 2), xb_u(&x, 0, 2);
    static uint8_t recs[1024];
    uint32_t n = (uint32_t)x.n;
    memcpy(recs, &n, 4);
    memcpy(recs + 4, x.b, x.n);
    struct clrmux_resource res = {0};
    uint8_t *out = NULL;
    size_t len = 0, nout = 0, nbad = 0;
    assert_int_equal(clrmux_otlp_pb()->xtraces(&res, recs, 4 + ((x.n + 3) & ~(size_t)3), &out, &len, &nout, &nbad), 0);
    assert_int_equal(nout, 1);
    assert_int_equal(nbad, 0);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *r =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, out);
    assert_non_null(r); /* protobuf-c checks every string is valid UTF-8 as it unpacks */
    assert_true(r->n_resource_spans == 1 && r->resource_spans[0]->n_scope_spans == 1 &&
                r->resource_spans[0]->scope_spans[0]->n_spans == 1);
    const Opentelemetry__Proto__Trace__V1__Span *sp = r->resource_spans[0]->scope_spans[0]->spans[0];
    assert_string_equal(sp->name, "GET /orders/{id}");
    assert_int_equal(sp->n_attributes, 4);
    assert_string_equal(sp->attributes[0]->key, "url.full");
    assert_string_equal(sp->attributes[0]->value->string_value, "http://127.0.0.1:8080/orders/42?x=1");
    assert_string_equal(sp->attributes[1]->value->string_value, "caf\xc3\xa9 bad\xef\xbf\xbd" "123456");
    assert_string_equal(sp->attributes[2]->key, "k\xef\xbf\xbd" "ey");
    assert_string_equal(sp->attributes[2]->value->string_value, "tail \xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(sp->attributes[3]->value->string_value, "a\x01z"); /* a control character is valid UTF-8 */
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
    free(out);
}

/* appends record x to the drained-records buffer recs (u32 length, the bytes, padded to 4) */
static size_t put_rec(uint8_t *recs, size_t at, const struct xb *x)
{
    uint32_t n = (uint32_t)x->n;
    memcpy(recs + at, &n, 4);
    memcpy(recs + at + 4, x->b, x->n);
    return at + 4 + ((x->n + 3) & ~(size_t)3);
}

static uint64_t be_id(ProtobufCBinaryData b)
{
    uint64_t v = 0;
    for (size_t i = 0; i < b.len; i++)
        v = v << 8 | b.data[i];
    return b.len == 8 ? v : 0;
}

/* The direct encoder (otlp_xpb.c): every field of three records in two scopes and the
 * resource, decoded by protobuf-c */
static void test_pb_fields(void **state)
{
    (void)state;
    static uint8_t recs[8192];
    size_t at = 0;
    struct xb x;
    server(&x, 0x0102030405060708ull, "Microsoft.AspNetCore");
    at = put_rec(recs, at, &x);
    xb_head(&x, trace, 0x99, 0, 3000, 4000, 3, 0, "call", "not sent", "Lib", "", "");
    xb_u(&x, 3, 2);
    xb_u(&x, CLRMUX_XATTR_BOOL, 1), xb_str(&x, "flag"), xb_u(&x, 1, 1);
    xb_u(&x, CLRMUX_XATTR_DOUBLE, 1), xb_str(&x, "ratio");
    double d = 2.5;
    uint64_t bits;
    memcpy(&bits, &d, 8);
    xb_u(&x, bits, 8);
    xb_attr_int(&x, "delta", -7);
    xb_u(&x, 0, 2), xb_u(&x, 0, 2);
    at = put_rec(recs, at, &x);
    server(&x, 0x0a0b, "Microsoft.AspNetCore");
    at = put_rec(recs, at, &x);
    struct clrmux_resource res = {0};
    clrmux_resource_set(&res, "service.name", "front", 0);
    clrmux_resource_set(&res, "process.pid", "42", 1);
    uint8_t *out = NULL;
    size_t len = 0, nout = 0, nbad = 0;
    assert_int_equal(clrmux_otlp_pb()->xtraces(&res, recs, at, &out, &len, &nout, &nbad), 0);
    assert_int_equal(nout, 3);
    assert_int_equal(nbad, 0);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *r =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->n_resource_spans, 1);
    const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = r->resource_spans[0];
    assert_int_equal(rs->resource->n_attributes, 2);
    assert_string_equal(rs->resource->attributes[0]->key, "service.name");
    assert_string_equal(rs->resource->attributes[0]->value->string_value, "front");
    assert_int_equal(rs->resource->attributes[1]->value->int_value, 42);
    assert_int_equal(rs->n_scope_spans, 2); /* the scope of records 1 and 3, then record 2's */
    assert_string_equal(rs->scope_spans[0]->scope->name, "Microsoft.AspNetCore");
    assert_string_equal(rs->scope_spans[0]->scope->version, "10.0");
    assert_string_equal(rs->scope_spans[1]->scope->name, "Lib");
    assert_int_equal(rs->scope_spans[0]->n_spans, 2);
    assert_int_equal(rs->scope_spans[1]->n_spans, 1);
    const Opentelemetry__Proto__Trace__V1__Span *a = rs->scope_spans[0]->spans[0], *b = rs->scope_spans[1]->spans[0];
    assert_int_equal(a->trace_id.len, 16);
    assert_memory_equal(a->trace_id.data, trace, 16);
    assert_true(be_id(a->span_id) == 0x0102030405060708ull && be_id(a->parent_span_id) == 0xb7ad6b7169203331ull);
    assert_true(be_id(rs->scope_spans[0]->spans[1]->span_id) == 0x0a0b);
    assert_string_equal(a->trace_state, "vendor=abc");
    assert_string_equal(a->name, "GET /order/{id}");
    assert_int_equal(a->kind, 2);
    assert_true(a->start_time_unix_nano == 1000 && a->end_time_unix_nano == 2000);
    assert_int_equal(a->n_attributes, 2);
    assert_string_equal(a->attributes[0]->key, "http.request.method");
    assert_string_equal(a->attributes[0]->value->string_value, "GET");
    assert_int_equal(a->attributes[1]->value->int_value, 500);
    assert_int_equal(a->n_events, 1);
    assert_true(a->events[0]->time_unix_nano == 1500);
    assert_string_equal(a->events[0]->name, "exception");
    assert_int_equal(a->events[0]->n_attributes, 1);
    assert_string_equal(a->events[0]->attributes[0]->value->string_value, "System.InvalidOperationException");
    assert_int_equal(a->n_links, 1);
    assert_memory_equal(a->links[0]->trace_id.data, trace, 16);
    assert_true(be_id(a->links[0]->span_id) == 0x1122334455667788ull);
    assert_non_null(a->status);
    assert_int_equal(a->status->code, 2);
    assert_string_equal(a->status->message, "boom");
    assert_true(be_id(b->span_id) == 0x99 && b->parent_span_id.len == 0);
    assert_string_equal(b->trace_state, "");
    assert_int_equal(b->kind, 3);
    assert_int_equal(b->n_attributes, 3);
    assert_int_equal(b->attributes[0]->value->value_case, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
    assert_true(b->attributes[0]->value->bool_value);
    assert_true(b->attributes[1]->value->double_value == 2.5);
    assert_int_equal(b->attributes[2]->value->int_value, -7);
    assert_non_null(b->status); /* UNSET: no message even when the record has one */
    assert_int_equal(b->status->code, 0);
    assert_string_equal(b->status->message, "");
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
    free(out);
    /* only malformed records: nothing to send */
    uint8_t bad[12] = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(clrmux_otlp_pb()->xtraces(&res, bad, sizeof bad, &out, &len, &nout, &nbad), 0);
    assert_null(out);
    assert_int_equal(nout, 0);
}

/* a batch with more attributes than the encoder keeps from one batch to the next (its
 * measured attributes, otlp_xpb.c's KEPT_MAX), then a small one: every span's attributes are
 * its own, in order, both times */
static void test_pb_many_attributes(void **state)
{
    (void)state;
    enum { SPANS = 700, ATTRS = 100 };
    size_t cap = (size_t)SPANS * 2048, at = 0;
    uint8_t *recs = malloc(cap);
    assert_non_null(recs);
    struct xb x;
    for (int i = 0; i < SPANS; i++) {
        xb_head(&x, trace, (uint64_t)i + 1, 0, 1000, 2000, 1, 0, "work", "", i % 3 ? "A" : "B", "", "");
        xb_u(&x, ATTRS, 2);
        for (int k = 0; k < ATTRS; k++)
            xb_attr_int(&x, k % 2 ? "n.odd" : "n.even", (int64_t)i * 1000 + k);
        xb_u(&x, 0, 2), xb_u(&x, 0, 2);
        at = put_rec(recs, at, &x);
    }
    struct clrmux_resource res = {0};
    clrmux_resource_set(&res, "service.name", "many", 0);
    for (int round = 0; round < 2; round++) {
        size_t n = round ? 3 : SPANS, len = 0, nout = 0, nbad = 0, used = 0;
        if (round) /* the first three records */
            for (int i = 0; i < 3; i++) {
                uint32_t l;
                memcpy(&l, recs + used, 4);
                used += 4 + ((l + 3) & ~3u);
            }
        uint8_t *out = NULL;
        assert_int_equal(clrmux_otlp_pb()->xtraces(&res, recs, round ? used : at, &out, &len, &nout, &nbad), 0);
        assert_int_equal(nout, n);
        Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *r =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, out);
        assert_non_null(r);
        size_t seen = 0;
        for (size_t s = 0; s < r->resource_spans[0]->n_scope_spans; s++) {
            const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = r->resource_spans[0]->scope_spans[s];
            for (size_t j = 0; j < ss->n_spans; j++, seen++) {
                const Opentelemetry__Proto__Trace__V1__Span *sp = ss->spans[j];
                int64_t i = (int64_t)be_id(sp->span_id) - 1;
                assert_string_equal(ss->scope->name, i % 3 ? "A" : "B");
                assert_int_equal(sp->n_attributes, ATTRS);
                for (int k = 0; k < ATTRS; k++) {
                    assert_string_equal(sp->attributes[k]->key, k % 2 ? "n.odd" : "n.even");
                    assert_int_equal(sp->attributes[k]->value->int_value, i * 1000 + k);
                }
            }
        }
        assert_int_equal(seen, n);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
        free(out);
    }
    free(recs);
}

/* method spans (the API's `traces`: pb/otlp_mspan.c through the direct encoder): every field
 * the JSON lines give them, an UNSET status left out, an error's event and status */
static const char *mname(void *ctx, uint32_t id)
{
    (void)ctx;
    return id == 1 ? "Shop.Store.BenchAsync" : NULL;
}
static const char *tname(void *ctx, uint32_t id) { return (void)ctx, id == 77 ? "worker" : NULL; }
static const char *ename(void *ctx, uint32_t id) { return (void)ctx, id == 5 ? "System.InvalidOperationException" : NULL; }
static const char *emsg(void *ctx, uint32_t id) { return (void)ctx, id == 5 ? "kaput" : NULL; }

static void test_pb_method_spans(void **state)
{
    (void)state;
    struct clrmux_span sp[2] = {
        {.span_id = 0x0102030405060708ull, .start_ns = 1000, .end_ns = 2500, .method = 1, .tid = 77},
        {.span_id = 0xa1, .parent_id = 0x0102030405060708ull, .start_ns = 1100, .end_ns = 2000, .method = 2, .tid = 78,
         .exc = 5, .flags = CLRMUX_SPAN_ERROR},
    };
    for (int i = 0; i < 16; i++)
        sp[0].trace_id[i] = sp[1].trace_id[i] = (uint8_t)(i + 1);
    struct clrmux_resource res = {0};
    clrmux_resource_set(&res, "service.name", "shop", 0);
    clrmux_resource_set(&res, "process.pid", "4242", 1);
    struct clrmux_otlp_names names = {.method = mname, .exception = ename, .thread = tname, .exception_message = emsg};
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(clrmux_otlp_pb()->traces(&res, sp, 2, &names, &out, &len), 0);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *r =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->n_resource_spans, 1);
    const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = r->resource_spans[0];
    assert_int_equal(rs->resource->n_attributes, 2);
    assert_string_equal(rs->resource->attributes[0]->value->string_value, "shop");
    assert_int_equal(rs->resource->attributes[1]->value->int_value, 4242);
    assert_int_equal(rs->n_scope_spans, 1);
    assert_string_equal(rs->scope_spans[0]->scope->name, "clrmux");
    assert_string_equal(rs->scope_spans[0]->scope->version, CLRMUX_VERSION);
    assert_int_equal(rs->scope_spans[0]->n_spans, 2);
    const Opentelemetry__Proto__Trace__V1__Span *a = rs->scope_spans[0]->spans[0], *b = rs->scope_spans[0]->spans[1];
    static const uint8_t id[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(a->trace_id.len, 16);
    assert_memory_equal(a->trace_id.data, sp[0].trace_id, 16);
    assert_int_equal(a->span_id.len, 8);
    assert_memory_equal(a->span_id.data, id, 8);
    assert_int_equal(a->parent_span_id.len, 0);
    assert_string_equal(a->name, "Shop.Store.BenchAsync");
    assert_int_equal(a->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL);
    assert_int_equal(a->start_time_unix_nano, 1000);
    assert_int_equal(a->end_time_unix_nano, 2500);
    assert_int_equal(a->n_attributes, 3);
    assert_string_equal(a->attributes[0]->key, "code.function.name");
    assert_string_equal(a->attributes[0]->value->string_value, "Shop.Store.BenchAsync");
    assert_string_equal(a->attributes[1]->key, "thread.id");
    assert_int_equal(a->attributes[1]->value->int_value, 77);
    assert_string_equal(a->attributes[2]->key, "thread.name");
    assert_string_equal(a->attributes[2]->value->string_value, "worker");
    assert_int_equal(a->n_events, 0);
    assert_null(a->status); /* UNSET: no Status at all, as the JSON line has none */
    assert_memory_equal(b->parent_span_id.data, id, 8);
    assert_string_equal(b->name, "method#2"); /* no name: no code.function.name */
    assert_int_equal(b->n_attributes, 1);
    assert_string_equal(b->attributes[0]->key, "thread.id");
    assert_int_equal(b->n_events, 1);
    assert_string_equal(b->events[0]->name, "exception");
    assert_int_equal(b->events[0]->time_unix_nano, 2000);
    assert_int_equal(b->events[0]->n_attributes, 2);
    assert_string_equal(b->events[0]->attributes[0]->key, "exception.type");
    assert_string_equal(b->events[0]->attributes[0]->value->string_value, "System.InvalidOperationException");
    assert_string_equal(b->events[0]->attributes[1]->value->string_value, "kaput");
    assert_non_null(b->status);
    assert_int_equal(b->status->code, OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
    assert_string_equal(b->status->message, "System.InvalidOperationException");
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
    free(out);
    /* no span: no body */
    out = (uint8_t *)&len;
    assert_int_equal(clrmux_otlp_pb()->traces(&res, sp, 0, &names, &out, &len), 0);
    assert_null(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_strings),
        cmocka_unit_test(test_pb_strings),
        cmocka_unit_test(test_pb_fields),
        cmocka_unit_test(test_pb_many_attributes),
        cmocka_unit_test(test_pb_method_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
