/* Activity span records (tracer/xspan.h) written straight into an OTLP ExportTraceServiceRequest
 * in the protobuf wire format: each message's size computed from the record, then its bytes
 * written once. Built with protobuf-c, the request cost the export thread ~1.5 us a span of a
 * traced web service (a SERVER or CLIENT span with ~12 attributes: bench/web.sh, perf: protobuf-c
 * computes each nested message's size again at every level it is packed in, and every string
 * is copied into an arena first); the companion's other messages (method spans, metrics) are
 * still protobuf-c's. The fields are protobuf-c's for the same messages (proto3: a scalar or
 * string field at its default is left out, a submessage that is set is written even when it
 * is empty, a oneof member always); tests/unit/test_tracer_xspan.c decodes the bytes with
 * protobuf-c. Strings are made valid UTF-8 as they are written (any byte that is not part of
 * well-formed UTF-8, and NUL, becomes U+FFFD). */
#include "tracer/pb/otlp_xpb.h"

#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "tracer/xspan.h"

/* ---- the wire format (protobuf encoding: varints, tags, length-delimited fields) ---- */

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2 };

static size_t vsz(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80)
        v >>= 7, n++;
    return n;
}

/* a length-delimited field of len bytes (every field number here is < 16: a 1-byte tag) */
static size_t ldsz(size_t len) { return 1 + vsz(len) + len; }

static uint8_t *vput(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *tag(uint8_t *p, unsigned field, unsigned wt)
{
    *p++ = (uint8_t)(field << 3 | wt);
    return p;
}

static uint8_t *ldput(uint8_t *p, unsigned field, size_t len)
{
    return vput(tag(p, field, WT_LEN), len);
}

static uint8_t *f64put(uint8_t *p, unsigned field, uint64_t v)
{
    p = tag(p, field, WT_FIXED64);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *be64put(uint8_t *p, unsigned field, uint64_t v)
{
    p = ldput(p, field, 8);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (56 - 8 * i));
    return p;
}

/* ---- strings ---- */

/* 1 when q[0..n) is ASCII without NUL (most names, keys, URLs): eight bytes a step. */
static int plain_ascii(const unsigned char *q, size_t n)
{
    const uint64_t hi = 0x8080808080808080ull, lo = 0x0101010101010101ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, q + i, 8);
        if ((w & hi) || ((w - lo) & ~w & hi)) /* a byte >= 0x80, or a zero byte */
            return 0;
    }
    for (; i < n; i++)
        if (q[i] == 0 || q[i] >= 0x80)
            return 0;
    return 1;
}

/* q[0..n) made valid UTF-8 into out (NULL: only measured); returns its length. */
static size_t utf8_clean(const unsigned char *q, size_t n, uint8_t *out)
{
    const unsigned char *end = q + n;
    size_t len_out = 0;
    while (q < end) {
        size_t len = *q ? clrmux_utf8_seq(q, (size_t)(end - q)) : 0;
        if (len) {
            if (out)
                memcpy(out + len_out, q, len);
            len_out += len, q += len;
        } else {
            if (out)
                memcpy(out + len_out, "\xEF\xBF\xBD", 3);
            len_out += 3, q++;
        }
    }
    return len_out;
}

/* The length of s as written. */
static size_t ssz(struct clrmux_xstr s)
{
    return plain_ascii((const unsigned char *)s.p, s.len) ? s.len : utf8_clean((const unsigned char *)s.p, s.len, NULL);
}

/* s, whose length as written is clean (ssz), as field `field`: copied as it is when cleaning
 * changes nothing (each replaced byte would add two) */
static uint8_t *sput(uint8_t *p, unsigned field, struct clrmux_xstr s, size_t clean)
{
    p = ldput(p, field, clean);
    if (clean == s.len)
        memcpy(p, s.p, s.len);
    else
        utf8_clean((const unsigned char *)s.p, s.len, p);
    return p + clean;
}

/* an optional string field: left out when empty */
static size_t osz(struct clrmux_xstr s)
{
    size_t n = s.len ? ssz(s) : 0;
    return n ? ldsz(n) : 0;
}

static uint8_t *oput(uint8_t *p, unsigned field, struct clrmux_xstr s)
{
    size_t n = s.len ? ssz(s) : 0;
    return n ? sput(p, field, s, n) : p;
}

static struct clrmux_xstr cstr(const char *s) { return (struct clrmux_xstr){s ? s : "", s ? (uint16_t)strnlen(s, 65535) : 0}; }

/* ---- KeyValue, AnyValue ---- */

/* An attribute's lengths as written: its key and string value (cleaned), its AnyValue, its
 * KeyValue; computed once in each pass. */
struct asz {
    size_t key, val, any, kv;
};

/* a's lengths into *z (in place: a struct returned through memory and copied stalled the
 * store that followed it) */
static void asz_fill(const struct clrmux_xattr *a, struct asz *z)
{
    z->key = a->key.len ? ssz(a->key) : 0;
    z->val = 0;
    switch (a->type) {
    case CLRMUX_XATTR_STRING: z->val = ssz(a->s), z->any = ldsz(z->val); break;
    case CLRMUX_XATTR_BOOL: z->any = 2; break;
    case CLRMUX_XATTR_INT: z->any = 1 + vsz((uint64_t)a->i); break;
    default: z->any = 9;
    }
    z->kv = (z->key ? ldsz(z->key) : 0) + ldsz(z->any);
}

static struct asz asz_of(const struct clrmux_xattr *a)
{
    struct asz z;
    asz_fill(a, &z);
    return z;
}

/* an attribute and its lengths */
struct cattr {
    struct clrmux_xattr a;
    struct asz z;
};

static uint8_t *kv_put_sized(uint8_t *p, unsigned field, const struct cattr *e);

static uint8_t *kv_put(uint8_t *p, unsigned field, const struct clrmux_xattr *a)
{
    struct cattr e = {*a, asz_of(a)};
    return kv_put_sized(p, field, &e);
}

static size_t attrs_sz(struct clrmux_xattrs l)
{
    struct clrmux_xattr a;
    size_t n = 0;
    while (clrmux_xattr_next(&l, &a))
        n += ldsz(asz_of(&a).kv);
    return n;
}

static uint8_t *attrs_put(uint8_t *p, unsigned field, struct clrmux_xattrs l)
{
    struct clrmux_xattr a;
    while (clrmux_xattr_next(&l, &a))
        p = kv_put(p, field, &a);
    return p;
}

/* The spans' own attributes as the size pass read and measured them, in the order it met
 * them, for the write pass: each is read from its record and measured once (reading and
 * measuring them again was a third of the export thread's time for a traced web service's
 * spans, ~12 attributes each). Events' and links' attributes are read at each pass. */
#define KEPT_MAX 65536 /* attributes kept from a batch to the next: 5.5 MB */

struct acache {
    struct cattr *v;
    size_t n, cap, at; /* at: the write pass's next */
    int oom;
};

static size_t attrs_sz_keep(struct clrmux_xattrs l, struct acache *c)
{
    size_t n = 0;
    if (c->cap - c->n < l.n) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap - c->n < l.n)
            cap *= 2;
        struct cattr *v = realloc(c->v, cap * sizeof *v);
        if (!v) {
            c->oom = 1;
            return 0;
        }
        c->v = v, c->cap = cap;
    }
    struct cattr *e = c->v + c->n;
    for (; clrmux_xattr_next(&l, &e->a); e++) { /* at most l.n of them */
        asz_fill(&e->a, &e->z);
        n += ldsz(e->z.kv);
    }
    c->n = (size_t)(e - c->v);
    return n;
}

/* attribute e as field `field` (its lengths measured) */
static uint8_t *kv_put_sized(uint8_t *p, unsigned field, const struct cattr *e)
{
    const struct clrmux_xattr *a = &e->a;
    p = ldput(p, field, e->z.kv);
    if (e->z.key)
        p = sput(p, 1, a->key, e->z.key);
    p = ldput(p, 2, e->z.any);
    switch (a->type) {
    case CLRMUX_XATTR_STRING: return sput(p, 1, a->s, e->z.val); /* a oneof member: even when empty */
    case CLRMUX_XATTR_BOOL: return vput(tag(p, 2, WT_VARINT), a->i != 0);
    case CLRMUX_XATTR_INT: return vput(tag(p, 3, WT_VARINT), (uint64_t)a->i);
    default: {
        uint64_t bits;
        memcpy(&bits, &a->d, 8);
        return f64put(p, 4, bits);
    }
    }
}

/* ---- Span ---- */

static size_t event_sz(const struct clrmux_xevent *e)
{
    return (e->time_ns ? 9 : 0) + osz(e->name) + attrs_sz(e->attrs);
}

static size_t link_sz(const struct clrmux_xlink *l)
{
    return 18 + 10 + osz(l->trace_state) + attrs_sz(l->attrs);
}

static struct clrmux_xstr status_message(const struct clrmux_xspan *x)
{
    return x->status == 2 ? x->status_message : (struct clrmux_xstr){"", 0};
}

static size_t status_sz(const struct clrmux_xspan *x)
{
    return osz(status_message(x)) + (x->status ? 1 + vsz(x->status) : 0);
}

/* the Status message is written (even empty: UNSET), unless an UNSET one is to be left out */
static int has_status(const struct clrmux_xspan *x) { return x->status || !(x->flags & CLRMUX_XSPAN_F_UNSET_OMITTED); }

static size_t span_sz(const struct clrmux_xspan *x, struct acache *kept)
{
    size_t n = 18 + 10 + osz(x->trace_state) + (x->parent_id ? 10 : 0) + osz(x->name) + (x->kind ? 1 + vsz(x->kind) : 0) +
               (x->start_ns ? 9 : 0) + (x->end_ns ? 9 : 0) + attrs_sz_keep(x->attrs, kept) +
               (has_status(x) ? ldsz(status_sz(x)) : 0);
    const uint8_t *c = x->events;
    uint16_t left = x->nevents;
    struct clrmux_xevent e;
    while (clrmux_xevent_next(&c, &left, &e))
        n += ldsz(event_sz(&e));
    c = x->links;
    left = x->nlinks;
    struct clrmux_xlink l;
    while (clrmux_xlink_next(&c, &left, &l))
        n += ldsz(link_sz(&l));
    return n;
}

/* span x, its size measured by span_sz (its attributes kept in c: next, c->at on) */
static uint8_t *span_put(uint8_t *p, const struct clrmux_xspan *x, size_t size, struct acache *c, size_t nattrs)
{
    p = ldput(p, 2, size); /* ScopeSpans.spans */
    p = ldput(p, 1, 16);
    memcpy(p, x->trace_id, 16);
    p += 16;
    p = be64put(p, 2, x->span_id);
    p = oput(p, 3, x->trace_state);
    if (x->parent_id)
        p = be64put(p, 4, x->parent_id);
    p = oput(p, 5, x->name);
    if (x->kind)
        p = vput(tag(p, 6, WT_VARINT), x->kind);
    if (x->start_ns)
        p = f64put(p, 7, (uint64_t)x->start_ns);
    if (x->end_ns)
        p = f64put(p, 8, (uint64_t)x->end_ns);
    for (size_t i = 0; i < nattrs; i++)
        p = kv_put_sized(p, 9, &c->v[c->at++]);
    const uint8_t *cur = x->events;
    uint16_t left = x->nevents;
    struct clrmux_xevent e;
    while (clrmux_xevent_next(&cur, &left, &e)) {
        p = ldput(p, 11, event_sz(&e));
        if (e.time_ns)
            p = f64put(p, 1, (uint64_t)e.time_ns);
        p = oput(p, 2, e.name);
        p = attrs_put(p, 3, e.attrs);
    }
    cur = x->links;
    left = x->nlinks;
    struct clrmux_xlink l;
    while (clrmux_xlink_next(&cur, &left, &l)) {
        p = ldput(p, 13, link_sz(&l));
        p = ldput(p, 1, 16);
        memcpy(p, l.trace_id, 16);
        p += 16;
        p = be64put(p, 2, l.span_id);
        p = oput(p, 3, l.trace_state);
        p = attrs_put(p, 4, l.attrs);
    }
    if (has_status(x)) {
        p = ldput(p, 15, status_sz(x));
        p = oput(p, 2, status_message(x));
        if (x->status)
            p = vput(tag(p, 3, WT_VARINT), x->status);
    }
    return p;
}

/* ---- Resource ---- */

/* the resource's attribute i as an xattr (its strings NUL-terminated: views of them) */
static struct clrmux_xattr res_attr(const struct clrmux_resource *r, size_t i)
{
    struct clrmux_xattr a = {0};
    a.key = cstr(r->attrs[i].key);
    if (r->attrs[i].is_int) {
        a.type = CLRMUX_XATTR_INT;
        a.i = strtoll(r->attrs[i].value, NULL, 10);
    } else {
        a.type = CLRMUX_XATTR_STRING;
        a.s = cstr(r->attrs[i].value);
    }
    return a;
}

static size_t resource_sz(const struct clrmux_resource *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        struct clrmux_xattr a = res_attr(r, i);
        n += ldsz(asz_of(&a).kv);
    }
    return n;
}

static size_t scope_sz(const struct clrmux_xspan *x) { return osz(x->scope_name) + osz(x->scope_version); }

int clrmux_xpb_traces(const struct clrmux_resource *res, const uint8_t *recs, size_t len, uint8_t **out, size_t *outlen,
                      size_t *nout, size_t *nbad)
{
    *out = NULL;
    *outlen = *nout = *nbad = 0;
    size_t cap = clrmux_xspan_count_run(recs, len);
    if (!cap)
        return 0;
    struct clrmux_xspan *xs = malloc(cap * sizeof *xs);
    size_t *order = malloc(cap * sizeof *order);          /* the spans grouped by scope, in first-seen order */
    size_t *start = malloc((cap + 1) * sizeof *start);    /* each scope's first place in order[] */
    size_t *span_size = malloc(cap * sizeof *span_size);  /* by place in order[] */
    size_t *scope_size = malloc(cap * sizeof *scope_size); /* each ScopeSpans' */
    size_t *span_nattrs = malloc(cap * sizeof *span_nattrs); /* by place in order[]: its attributes kept */
    char *done = calloc(cap, 1);
    /* the thread's, kept from one call to the next (the export thread calls it every batch):
     * its pages stay mapped; let go after a batch past KEPT_MAX */
    static _Thread_local struct acache kept;
    kept.n = kept.at = 0;
    kept.oom = 0;
    uint8_t *b = NULL;
    int rc = -1;
    if (!xs || !order || !start || !span_size || !scope_size || !span_nattrs || !done)
        goto out;
    rc = 0;
    size_t n = clrmux_xspan_parse_run(recs, len, xs, cap, nbad), nscopes = 0, k = 0;
    if (!n)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        start[nscopes++] = k;
        for (size_t j = i; j < n; j++)
            if (!done[j] && clrmux_xspan_same_scope(&xs[i], &xs[j]))
                done[j] = 1, order[k++] = j;
    }
    start[nscopes] = n;
    /* sizes, innermost first: each is needed before its message's bytes */
    size_t res_size = resource_sz(res), rs = ldsz(res_size);
    for (size_t s = 0; s < nscopes; s++) {
        size_t ss = ldsz(scope_sz(&xs[order[start[s]]]));
        for (size_t q = start[s]; q < start[s + 1]; q++) {
            size_t first = kept.n;
            span_size[q] = span_sz(&xs[order[q]], &kept);
            span_nattrs[q] = kept.n - first;
            ss += ldsz(span_size[q]);
        }
        scope_size[s] = ss;
        rs += ldsz(ss);
    }
    size_t total = ldsz(rs);
    uint8_t *p = b = kept.oom ? NULL : malloc(total);
    if (!b) {
        rc = -1;
        goto out;
    }
    p = ldput(p, 1, rs); /* ExportTraceServiceRequest.resource_spans */
    p = ldput(p, 1, res_size); /* ResourceSpans.resource */
    for (size_t i = 0; i < res->n; i++) {
        struct clrmux_xattr a = res_attr(res, i);
        p = kv_put(p, 1, &a);
    }
    for (size_t s = 0; s < nscopes; s++) {
        const struct clrmux_xspan *sc = &xs[order[start[s]]];
        p = ldput(p, 2, scope_size[s]); /* ResourceSpans.scope_spans */
        p = ldput(p, 1, scope_sz(sc));
        p = oput(p, 1, sc->scope_name);
        p = oput(p, 2, sc->scope_version);
        for (size_t q = start[s]; q < start[s + 1]; q++)
            p = span_put(p, &xs[order[q]], span_size[q], &kept, span_nattrs[q]);
    }
    *out = b;
    *outlen = total;
    *nout = n;
    b = NULL;
out:
    free(b), free(xs), free(order), free(start), free(span_size), free(scope_size), free(span_nattrs), free(done);
    if (kept.cap > KEPT_MAX) {
        free(kept.v);
        kept.v = NULL;
        kept.cap = 0;
    }
    return rc;
}
