/* Activity span records (see xspan.h): the checking parser and the queue between the agent's
 * threads and the export thread. */
#include "tracer/xspan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/lazymem.h"

/* ---- the parser -------------------------------------------------------------------------- */

struct rd {
    const uint8_t *p, *end;
    int bad;
};

static int need(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return 0;
    }
    return 1;
}

static uint64_t rd_u(struct rd *r, size_t n)
{
    uint64_t v = 0;
    if (!need(r, n))
        return 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
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

/* ---- the queue --------------------------------------------------------------------------
 * A byte ring: entries are a u32 length and the record, 4-byte aligned; an entry that would
 * cross the end is preceded by a wrap marker (UINT32_MAX) and starts at 0. head and tail
 * count bytes since init (head - tail: in use). */
#define WRAP UINT32_MAX

static struct {
    pthread_mutex_t lock;
    uint8_t *buf;
    size_t cap;
    uint64_t head, tail;
    uint64_t pushed, dropped, malformed;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t align4(size_t n) { return (n + 3) & ~(size_t)3; }

int clrmux_xq_init(size_t bytes)
{
    pthread_mutex_lock(&q.lock);
    if (q.buf)
        clrmux_unmap_zero(q.buf, q.cap);
    q.cap = align4(bytes < 4096 ? 4096 : bytes);
    q.buf = clrmux_map_zero(q.cap);
    q.head = q.tail = 0;
    q.pushed = q.dropped = q.malformed = 0;
    int rc = q.buf ? 0 : -1;
    if (!q.buf)
        q.cap = 0;
    pthread_mutex_unlock(&q.lock);
    return rc;
}

int clrmux_xq_push(const uint8_t *rec, size_t len)
{
    if (!rec || len < 4 || len > CLRMUX_XSPAN_MAX || rec[0] != CLRMUX_XSPAN_VERSION || rec[1] != 0 ||
        rec[2] != CLRMUX_XSPAN_HEADER || rec[3] != 0) {
        pthread_mutex_lock(&q.lock);
        q.malformed++;
        pthread_mutex_unlock(&q.lock);
        return -1;
    }
    size_t entry = 4 + align4(len);
    pthread_mutex_lock(&q.lock);
    int rc = -2;
    if (q.buf) {
        size_t at = (size_t)(q.head % q.cap);
        size_t pad = q.cap - at < entry ? q.cap - at : 0; /* wrap: the rest of the ring is skipped */
        if (q.head - q.tail + pad + entry <= q.cap) {
            if (pad) {
                uint32_t w = WRAP;
                memcpy(q.buf + at, &w, 4);
                q.head += pad;
                at = 0;
            }
            uint32_t n = (uint32_t)len;
            memcpy(q.buf + at, &n, 4);
            memcpy(q.buf + at + 4, rec, len);
            q.head += entry;
            q.pushed++;
            rc = 0;
        }
    }
    if (rc)
        q.dropped++;
    pthread_mutex_unlock(&q.lock);
    return rc;
}

size_t clrmux_xq_drain(uint8_t *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&q.lock);
    while (q.buf && q.tail < q.head) {
        size_t at = (size_t)(q.tail % q.cap);
        uint32_t len;
        memcpy(&len, q.buf + at, 4);
        if (len == WRAP) {
            q.tail += q.cap - at;
            continue;
        }
        size_t entry = 4 + align4(len);
        if (n + entry > cap)
            break;
        memcpy(out + n, q.buf + at, entry);
        n += entry;
        q.tail += entry;
    }
    pthread_mutex_unlock(&q.lock);
    return n;
}

void clrmux_xq_stats(struct clrmux_xq_stats *s)
{
    pthread_mutex_lock(&q.lock);
    s->pushed = q.pushed;
    s->dropped = q.dropped;
    s->malformed = q.malformed;
    s->waiting = (size_t)(q.head - q.tail);
    pthread_mutex_unlock(&q.lock);
}
