/* Method spans (tracer/spans.h) as OTLP protobuf: each span written as an Activity span record
 * (tracer/xspan.h), the batch then encoded by the direct encoder (otlp_xpb.c). With protobuf-c's
 * messages the export thread took ~0.72 us per request of bench/web.sh part 2's `clrmux-noact`
 * (one method span a request, and the metrics), 0.51-0.63 this way. The fields are those the JSON lines give a method span
 * (otlp.c): name the method's, kind INTERNAL, code.function.name, thread.id, thread.name; an
 * error has the `exception` event and status ERROR with the exception's type as its message;
 * otherwise no status at all (CLRMUX_XSPAN_F_UNSET_OMITTED). Scope `clrmux`, CLRMUX_VERSION. */
#include "tracer/pb/otlp_mspan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/pb/otlp_xpb.h"
#include "tracer/xspan.h"

struct rbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
};

/* room for n more bytes at b->p + b->len (reserved, not counted); 0, or -1 out of memory */
static int reserve(struct rbuf *b, size_t n)
{
    if (b->failed)
        return -1;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    return 0;
}

static uint8_t *le(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static size_t slen(const char *s) { return s ? strnlen(s, 65535) : 0; }

static uint8_t *str(uint8_t *p, const char *s, size_t n)
{
    p = le(p, n, 2);
    if (n)
        memcpy(p, s, n);
    return p + n;
}

static uint8_t *str_attr(uint8_t *p, const char *key, size_t klen, const char *value, size_t vlen)
{
    *p++ = CLRMUX_XATTR_STRING;
    return str(str(p, key, klen), value, vlen);
}

#define LIT(s) s, sizeof s - 1

/* span s as one queue entry: its u32 length, the record, padded to 4 bytes (clrmux_xq_drain's);
 * its size reserved at once from the lengths of its strings */
static void record(struct rbuf *b, const struct clrmux_span *s, const struct clrmux_otlp_names *names)
{
    const char *name = names ? clrmux_otlp_name(names->method, names->ctx, s->method) : NULL;
    char fallback[24];
    if (!name)
        snprintf(fallback, sizeof fallback, "method#%u", (unsigned)s->method);
    int error = (s->flags & CLRMUX_SPAN_ERROR) != 0;
    const char *exc = error && s->exc && names ? clrmux_otlp_name(names->exception, names->ctx, s->exc) : NULL;
    const char *msg = exc && names ? clrmux_otlp_name(names->exception_message, names->ctx, s->exc) : NULL;
    const char *tname = names ? clrmux_otlp_name(names->thread, names->ctx, s->tid) : NULL;
    size_t nlen = name ? slen(name) : strlen(fallback), elen = slen(exc), mlen = slen(msg), tlen = slen(tname);
    const char *etype = exc ? exc : "System.Exception";
    size_t etlen = exc ? elen : sizeof "System.Exception" - 1;
    size_t vlen = sizeof CLRMUX_VERSION - 1;
    /* the header, 5 strings, 3 attributes, an event with 2, the counts, at most 3 bytes of pad */
    size_t max = 4 + CLRMUX_XSPAN_HEADER + 10 + nlen + elen + 6 + vlen + 2 + (1 + 2 + 18 + 2 + nlen) + (1 + 2 + 9 + 8) +
                 (1 + 2 + 11 + 2 + tlen) + 2 + (8 + 2 + 9 + 2 + (1 + 2 + 14 + 2 + etlen) + (1 + 2 + 17 + 2 + mlen)) + 2 + 3;
    if (reserve(b, max) != 0)
        return;
    uint8_t *start = b->p + b->len, *p = start + 4;
    p = le(p, CLRMUX_XSPAN_VERSION, 2);
    p = le(p, CLRMUX_XSPAN_HEADER, 2);
    memcpy(p, s->trace_id, 16);
    p = le(p + 16, s->span_id, 8);
    p = le(p, s->parent_id, 8);
    p = le(p, (uint64_t)s->start_ns, 8);
    p = le(p, (uint64_t)s->end_ns, 8);
    *p++ = 1;             /* INTERNAL */
    *p++ = error ? 2 : 0; /* ERROR, or UNSET: left out (the flag) */
    *p++ = CLRMUX_XSPAN_F_UNSET_OMITTED;
    *p++ = 0;
    p = le(p, s->tid, 4);
    p = str(p, name ? name : fallback, nlen);
    p = str(p, exc, elen); /* the status message: the exception's type, when known */
    p = str(p, LIT("clrmux"));
    p = str(p, LIT(CLRMUX_VERSION));
    p = str(p, NULL, 0); /* trace_state */
    p = le(p, (name ? 1 : 0) + 1 + (tname ? 1 : 0), 2);
    if (name)
        p = str_attr(p, LIT("code.function.name"), name, nlen);
    *p++ = CLRMUX_XATTR_INT;
    p = str(p, LIT("thread.id"));
    p = le(p, s->tid, 8);
    if (tname)
        p = str_attr(p, LIT("thread.name"), tname, tlen);
    p = le(p, error, 2); /* events */
    if (error) {
        p = le(p, (uint64_t)s->end_ns, 8);
        p = str(p, LIT("exception"));
        p = le(p, msg ? 2 : 1, 2);
        p = str_attr(p, LIT("exception.type"), etype, etlen);
        if (msg)
            p = str_attr(p, LIT("exception.message"), msg, mlen);
    }
    p = le(p, 0, 2); /* links */
    size_t n = (size_t)(p - start) - 4;
    le(start, n, 4);
    while ((p - start) % 4)
        *p++ = 0;
    b->len += (size_t)(p - start);
}

int clrmux_mpb_traces(const struct clrmux_resource *res, const struct clrmux_span *spans, size_t n,
                      const struct clrmux_otlp_names *names, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    struct rbuf b = {0};
    for (size_t i = 0; i < n; i++)
        record(&b, &spans[i], names);
    int rc = -1;
    if (!b.failed) {
        size_t nout = 0, nbad = 0;
        rc = n ? clrmux_xpb_traces(res, b.p, b.len, out, len, &nout, &nbad) : 0;
    }
    free(b.p);
    return rc;
}
