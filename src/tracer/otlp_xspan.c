/* Activity spans as OTLP JSON (see otlp.h, clrmux_otlp_render_xspans): the records the agent
 * queued (tracer/xspan.h), grouped by instrumentation scope (the ActivitySource). */
#include "tracer/otlp_int.h"

#include <math.h>
#include <stdio.h>

#include "tracer/xspan.h"

static void put_attr(struct buf *b, const struct clrmux_xattr *a, int first)
{
    if (!first)
        PUTS(b, ",");
    PUTS(b, "{\"key\":");
    put_jsonn(b, a->key.p, a->key.len);
    switch (a->type) {
    case CLRMUX_XATTR_STRING:
        PUTS(b, ",\"value\":{\"stringValue\":");
        put_jsonn(b, a->s.p, a->s.len);
        break;
    case CLRMUX_XATTR_BOOL:
        if (a->i)
            PUTS(b, ",\"value\":{\"boolValue\":true");
        else
            PUTS(b, ",\"value\":{\"boolValue\":false");
        break;
    case CLRMUX_XATTR_INT:
        PUTS(b, ",\"value\":{\"intValue\":\"");
        put_i64(b, a->i);
        PUTS(b, "\"");
        break;
    default: { /* DOUBLE: JSON has no NaN or infinity (OTLP's JSON mapping writes them as strings) */
        char num[40];
        if (isnan(a->d))
            snprintf(num, sizeof num, "\"NaN\"");
        else if (isinf(a->d))
            snprintf(num, sizeof num, a->d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        else
            snprintf(num, sizeof num, "%.17g", a->d);
        PUTS(b, ",\"value\":{\"doubleValue\":");
        put(b, num, strlen(num));
    }
    }
    PUTS(b, "}}");
}

static void put_attrs(struct buf *b, struct clrmux_xattrs l)
{
    struct clrmux_xattr a;
    PUTS(b, "[");
    for (int first = 1; clrmux_xattr_next(&l, &a); first = 0)
        put_attr(b, &a, first);
    PUTS(b, "]");
}

static void put_xspan(struct buf *b, const struct clrmux_xspan *x, int first)
{
    if (!first)
        PUTS(b, ",");
    PUTS(b, "{\"traceId\":\"");
    put_hex(b, x->trace_id, 16);
    PUTS(b, "\",\"spanId\":\"");
    put_hex64(b, x->span_id);
    PUTS(b, "\"");
    if (x->parent_id) {
        PUTS(b, ",\"parentSpanId\":\"");
        put_hex64(b, x->parent_id);
        PUTS(b, "\"");
    }
    if (x->trace_state.len) {
        PUTS(b, ",\"traceState\":");
        put_jsonn(b, x->trace_state.p, x->trace_state.len);
    }
    PUTS(b, ",\"name\":");
    put_jsonn(b, x->name.p, x->name.len);
    PUTS(b, ",\"kind\":");
    put_u64(b, x->kind);
    PUTS(b, ",\"startTimeUnixNano\":\"");
    put_i64(b, x->start_ns);
    PUTS(b, "\",\"endTimeUnixNano\":\"");
    put_i64(b, x->end_ns);
    PUTS(b, "\",\"attributes\":");
    put_attrs(b, x->attrs);
    if (x->nevents) {
        PUTS(b, ",\"events\":[");
        const uint8_t *c = x->events;
        uint16_t left = x->nevents;
        struct clrmux_xevent e;
        for (int f = 1; clrmux_xevent_next(&c, &left, &e); f = 0) {
            if (!f)
                PUTS(b, ",");
            PUTS(b, "{\"timeUnixNano\":\"");
            put_i64(b, e.time_ns);
            PUTS(b, "\",\"name\":");
            put_jsonn(b, e.name.p, e.name.len);
            PUTS(b, ",\"attributes\":");
            put_attrs(b, e.attrs);
            PUTS(b, "}");
        }
        PUTS(b, "]");
    }
    if (x->nlinks) {
        PUTS(b, ",\"links\":[");
        const uint8_t *c = x->links;
        uint16_t left = x->nlinks;
        struct clrmux_xlink l;
        for (int f = 1; clrmux_xlink_next(&c, &left, &l); f = 0) {
            if (!f)
                PUTS(b, ",");
            PUTS(b, "{\"traceId\":\"");
            put_hex(b, l.trace_id, 16);
            PUTS(b, "\",\"spanId\":\"");
            put_hex64(b, l.span_id);
            PUTS(b, "\"");
            if (l.trace_state.len) {
                PUTS(b, ",\"traceState\":");
                put_jsonn(b, l.trace_state.p, l.trace_state.len);
            }
            PUTS(b, ",\"attributes\":");
            put_attrs(b, l.attrs);
            PUTS(b, "}");
        }
        PUTS(b, "]");
    }
    if (!x->status && (x->flags & CLRMUX_XSPAN_F_UNSET_OMITTED)) {
        PUTS(b, "}");
        return;
    }
    PUTS(b, ",\"status\":{");
    if (x->status) {
        PUTS(b, "\"code\":");
        put_u64(b, x->status);
        if (x->status_message.len) {
            PUTS(b, ",\"message\":");
            put_jsonn(b, x->status_message.p, x->status_message.len);
        }
    }
    PUTS(b, "}}");
}

/* A record's parsed view and where it sits in the drained bytes. */
struct item {
    struct clrmux_xspan x;
    size_t len;
    int done;
};

/* an escaped string can take 6 bytes per input byte (a control character as \u00XX) */
static size_t room_of(const struct item *it) { return 512 + 6 * it->len; }

int clrmux_otlp_render_xspans(struct clrmux_otlp_mem *m, const struct clrmux_resource *res, const uint8_t *recs,
                              size_t len, size_t *nout, size_t *nbad)
{
    *nout = *nbad = 0;
    size_t cap = clrmux_xspan_count_run(recs, len);
    if (!cap)
        return 0;
    struct item *items = malloc(cap * sizeof *items);
    struct clrmux_xspan *xs = malloc(cap * sizeof *xs);
    if (!items || !xs) {
        free(items), free(xs);
        return -1;
    }
    size_t n = clrmux_xspan_parse_run(recs, len, xs, cap, nbad);
    for (size_t i = 0; i < n; i++) {
        items[i].x = xs[i];
        items[i].len = xs[i].size;
        items[i].done = 0;
    }
    free(xs);
    int rc = 0;
    if (!n)
        goto out;
    size_t head = 256 + 6 * sizeof res->attrs;
    if ((rc = mem_reserve(m, head)))
        goto out;
    struct buf b = {m->p + m->len, m->p + m->cap, 0};
    PUTS(&b, "{\"resourceSpans\":[{\"resource\":");
    put_resource(&b, res);
    PUTS(&b, ",\"scopeSpans\":[");
    m->len = (size_t)(b.p - m->p);
    for (size_t i = 0, scopes = 0; i < n; i++) {
        if (items[i].done)
            continue;
        const struct clrmux_xspan *sc = &items[i].x;
        if ((rc = mem_reserve(m, 64 + 6 * ((size_t)sc->scope_name.len + sc->scope_version.len))))
            goto out;
        b = (struct buf){m->p + m->len, m->p + m->cap, 0};
        if (scopes++)
            PUTS(&b, ",");
        PUTS(&b, "{\"scope\":{\"name\":");
        put_jsonn(&b, sc->scope_name.p, sc->scope_name.len);
        if (sc->scope_version.len) {
            PUTS(&b, ",\"version\":");
            put_jsonn(&b, sc->scope_version.p, sc->scope_version.len);
        }
        PUTS(&b, "},\"spans\":[");
        m->len = (size_t)(b.p - m->p);
        for (size_t j = i, first = 1; j < n; j++) {
            if (items[j].done || !clrmux_xspan_same_scope(sc, &items[j].x))
                continue;
            if ((rc = mem_reserve(m, room_of(&items[j]))))
                goto out;
            b = (struct buf){m->p + m->len, m->p + m->cap, 0};
            put_xspan(&b, &items[j].x, (int)first);
            if (b.overflow) { /* cannot happen with room_of's bound; the span is dropped */
                (*nbad)++;
            } else {
                m->len = (size_t)(b.p - m->p);
                first = 0;
                (*nout)++;
            }
            items[j].done = 1;
        }
        if ((rc = mem_reserve(m, 4)))
            goto out;
        memcpy(m->p + m->len, "]}", 2);
        m->len += 2;
    }
    static const char tail[] = "]}]}\n";
    if ((rc = mem_reserve(m, sizeof tail)))
        goto out;
    memcpy(m->p + m->len, tail, sizeof tail - 1);
    m->len += sizeof tail - 1;
out:
    free(items);
    return rc ? -1 : 0;
}
