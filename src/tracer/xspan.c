/* Activity span records (see xspan.h): the checking parser (also in libclrmux_otlp.so, whose
 * protobuf encoder reads the records). */
#include "tracer/xspan.h"

#include <string.h>

/* ---- the parser -------------------------------------------------------------------------- */

struct rd {
    const uint8_t *p, *end;
    int bad;
};

static inline int need(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return 0;
    }
    return 1;
}

/* an n-byte little-endian integer (n: 1, 2, 4 or 8); 0 past the end */
static inline uint64_t rd_u(struct rd *r, size_t n)
{
    if (!need(r, n))
        return 0;
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, r->p, n); /* one load for a constant n */
#else
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
#endif
    r->p += n;
    return v;
}

static struct clrmux_xstr rd_str(struct rd *r)
{
    struct clrmux_xstr s = {NULL, 0};
    uint16_t n = (uint16_t)rd_u(r, 2);
    if (need(r, n)) {
        s.p = (const char *)r->p;
        s.len = n;
        r->p += n;
    }
    return s;
}

static void rd_bytes(struct rd *r, uint8_t *out, size_t n)
{
    if (need(r, n)) {
        memcpy(out, r->p, n);
        r->p += n;
    }
}

static int attr_read(struct rd *r, struct clrmux_xattr *a)
{
    a->type = (uint8_t)rd_u(r, 1);
    a->key = rd_str(r);
    a->s = (struct clrmux_xstr){NULL, 0};
    a->i = 0;
    a->d = 0;
    switch (a->type) {
    case CLRMUX_XATTR_STRING: a->s = rd_str(r); break;
    case CLRMUX_XATTR_BOOL: a->i = rd_u(r, 1) != 0; break;
    case CLRMUX_XATTR_INT: a->i = (int64_t)rd_u(r, 8); break;
    case CLRMUX_XATTR_DOUBLE: {
        uint64_t bits = rd_u(r, 8);
        memcpy(&a->d, &bits, sizeof a->d);
        break;
    }
    default: r->bad = 1;
    }
    return !r->bad;
}

/* a list of attributes: checked whole, its view in *l */
static void attrs_read(struct rd *r, struct clrmux_xattrs *l)
{
    l->n = (uint16_t)rd_u(r, 2);
    l->p = r->p;
    struct clrmux_xattr a;
    for (uint16_t i = 0; i < l->n && !r->bad; i++)
        attr_read(r, &a);
    l->end = r->p;
}

int clrmux_xattr_next(struct clrmux_xattrs *l, struct clrmux_xattr *a)
{
    if (!l->n || l->p >= l->end)
        return 0;
    struct rd r = {l->p, l->end, 0};
    if (!attr_read(&r, a))
        return 0;
    l->p = r.p;
    l->n--;
    return 1;
}

static void event_read(struct rd *r, struct clrmux_xevent *e)
{
    e->time_ns = (int64_t)rd_u(r, 8);
    e->name = rd_str(r);
    attrs_read(r, &e->attrs);
}

static void link_read(struct rd *r, struct clrmux_xlink *l)
{
    rd_bytes(r, l->trace_id, 16);
    l->span_id = rd_u(r, 8);
    l->trace_state = rd_str(r);
    attrs_read(r, &l->attrs);
}

int clrmux_xspan_parse(const uint8_t *rec, size_t len, struct clrmux_xspan *x)
{
    struct rd r = {rec, rec + len, 0};
    if (!rec || len < CLRMUX_XSPAN_HEADER || len > CLRMUX_XSPAN_MAX)
        return -1;
    if (rd_u(&r, 2) != CLRMUX_XSPAN_VERSION || rd_u(&r, 2) != CLRMUX_XSPAN_HEADER)
        return -1;
    rd_bytes(&r, x->trace_id, 16);
    x->span_id = rd_u(&r, 8);
    x->parent_id = rd_u(&r, 8);
    x->start_ns = (int64_t)rd_u(&r, 8);
    x->end_ns = (int64_t)rd_u(&r, 8);
    x->kind = (uint8_t)rd_u(&r, 1);
    x->status = (uint8_t)rd_u(&r, 1);
    x->flags = (uint8_t)rd_u(&r, 1);
    rd_u(&r, 1);
    x->tid = (uint32_t)rd_u(&r, 4);
    x->name = rd_str(&r);
    x->status_message = rd_str(&r);
    x->scope_name = rd_str(&r);
    x->scope_version = rd_str(&r);
    x->trace_state = rd_str(&r);
    attrs_read(&r, &x->attrs);
    x->nevents = (uint16_t)rd_u(&r, 2);
    x->events = r.p;
    struct clrmux_xevent e;
    for (uint16_t i = 0; i < x->nevents && !r.bad; i++)
        event_read(&r, &e);
    x->nlinks = (uint16_t)rd_u(&r, 2);
    x->links = r.p;
    struct clrmux_xlink l;
    for (uint16_t i = 0; i < x->nlinks && !r.bad; i++)
        link_read(&r, &l);
    x->end = r.p;
    x->size = (size_t)(r.p - rec);
    if (r.bad || x->kind < 1 || x->kind > 5 || x->status > 2 || !x->span_id)
        return -1;
    return 0;
}

int clrmux_xevent_next(const uint8_t **cursor, uint16_t *left, struct clrmux_xevent *e)
{
    if (!*left)
        return 0;
    struct rd r = {*cursor, *cursor + CLRMUX_XSPAN_MAX, 0}; /* checked by the parse */
    event_read(&r, e);
    *cursor = r.p;
    (*left)--;
    return 1;
}

int clrmux_xlink_next(const uint8_t **cursor, uint16_t *left, struct clrmux_xlink *l)
{
    if (!*left)
        return 0;
    struct rd r = {*cursor, *cursor + CLRMUX_XSPAN_MAX, 0};
    link_read(&r, l);
    *cursor = r.p;
    (*left)--;
    return 1;
}

size_t clrmux_xspan_count_run(const uint8_t *recs, size_t len)
{
    size_t n = 0;
    for (size_t off = 0; off + 4 <= len; n++) {
        uint32_t l;
        memcpy(&l, recs + off, 4);
        off += 4 + (((size_t)l + 3) & ~(size_t)3); /* size_t: a length near 2^32 must not wrap to 0 */
    }
    return n;
}

size_t clrmux_xspan_parse_run(const uint8_t *recs, size_t len, struct clrmux_xspan *out, size_t cap, size_t *nbad)
{
    size_t n = 0;
    for (size_t off = 0; off + 4 <= len && n < cap;) {
        uint32_t l;
        memcpy(&l, recs + off, 4);
        if (l > len - off - 4) {
            (*nbad)++;
            break;
        }
        if (clrmux_xspan_parse(recs + off + 4, l, &out[n]) == 0)
            n++;
        else
            (*nbad)++;
        off += 4 + (((size_t)l + 3) & ~(size_t)3);
    }
    return n;
}

int clrmux_xspan_same_scope(const struct clrmux_xspan *a, const struct clrmux_xspan *b)
{
    return a->scope_name.len == b->scope_name.len && a->scope_version.len == b->scope_version.len &&
           !memcmp(a->scope_name.p, b->scope_name.p, a->scope_name.len) &&
           !memcmp(a->scope_version.p, b->scope_version.p, a->scope_version.len);
}
