/* The queue of Activity span records between the agent's threads and the export thread (see
 * xspan.h). */
#include "tracer/xspan.h"

#include <pthread.h>
#include <string.h>

#include "common/lazymem.h"

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
