/* Method spans (tracer/spans.h) as OTLP protobuf: each span written as an Activity span record
 * (tracer/xspan.h), the batch then encoded by the direct encoder (otlp_xpb.c). protobuf-c's
 * messages cost the export thread ~0.7 us a method span (bench/web.sh part 2, `clrmux-noact`:
 * `get_packed_size` and `pack` walk every nested message again at each level, each string is
 * copied into an arena first). The fields are those the JSON lines give a method span
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

static uint8_t *room(struct rbuf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

static void le(struct rbuf *b, uint64_t v, size_t n)
{
    uint8_t *p = room(b, n);
    for (size_t i = 0; p && i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void str(struct rbuf *b, const char *s)
{
    size_t n = s ? strnlen(s, 65535) : 0;
    le(b, n, 2);
    uint8_t *p = room(b, n);
    if (p && n)
        memcpy(p, s, n);
}

static void str_attr(struct rbuf *b, const char *key, const char *value)
{
    le(b, CLRMUX_XATTR_STRING, 1);
    str(b, key);
    str(b, value);
}

static const char *nm(clrmux_otlp_name_fn f, void *ctx, uint32_t id) { return f ? f(ctx, id) : NULL; }

/* span s as one queue entry: its u32 length, the record, padded to 4 bytes (clrmux_xq_drain's) */
static void record(struct rbuf *b, const struct clrmux_span *s, const struct clrmux_otlp_names *names)
{
    size_t at = b->len;
    le(b, 0, 4); /* the length, set below */
    size_t start = b->len;
    const char *name = names ? nm(names->method, names->ctx, s->method) : NULL;
    char fallback[24];
    snprintf(fallback, sizeof fallback, "method#%u", (unsigned)s->method);
    int error = (s->flags & CLRMUX_SPAN_ERROR) != 0;
    const char *exc = error && s->exc && names ? nm(names->exception, names->ctx, s->exc) : NULL;
    const char *msg = exc && names ? nm(names->exception_message, names->ctx, s->exc) : NULL;
    const char *tname = names ? nm(names->thread, names->ctx, s->tid) : NULL;
    le(b, CLRMUX_XSPAN_VERSION, 2);
    le(b, CLRMUX_XSPAN_HEADER, 2);
    uint8_t *tid = room(b, 16);
    if (tid)
        memcpy(tid, s->trace_id, 16);
    le(b, s->span_id, 8);
    le(b, s->parent_id, 8);
    le(b, (uint64_t)s->start_ns, 8);
    le(b, (uint64_t)s->end_ns, 8);
    le(b, 1, 1);             /* INTERNAL */
    le(b, error ? 2 : 0, 1); /* ERROR, or UNSET: left out (the flag) */
    le(b, CLRMUX_XSPAN_F_UNSET_OMITTED, 1);
    le(b, 0, 1);
    le(b, s->tid, 4);
    str(b, name ? name : fallback);
    str(b, exc); /* the status message: the exception's type, when known */
    str(b, "clrmux");
    str(b, CLRMUX_VERSION);
    str(b, NULL); /* trace_state */
    le(b, (name ? 1 : 0) + 1 + (tname ? 1 : 0), 2);
    if (name)
        str_attr(b, "code.function.name", name);
    le(b, CLRMUX_XATTR_INT, 1);
    str(b, "thread.id");
    le(b, s->tid, 8);
    if (tname)
        str_attr(b, "thread.name", tname);
    le(b, error, 2); /* events */
    if (error) {
        le(b, (uint64_t)s->end_ns, 8);
        str(b, "exception");
        le(b, msg ? 2 : 1, 2);
        str_attr(b, "exception.type", exc ? exc : "System.Exception");
        if (msg)
            str_attr(b, "exception.message", msg);
    }
    le(b, 0, 2); /* links */
    size_t n = b->len - start;
    if (!b->failed) {
        for (int i = 0; i < 4; i++)
            b->p[at + i] = (uint8_t)(n >> (8 * i));
        le(b, 0, (4 - n % 4) % 4);
    }
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
