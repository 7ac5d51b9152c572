/* The raw sample queue: two fixed buffers of records and frames. Producers (callbacks, the
 * sampler's suspended phase) copy ids into the current buffer under a mutex held only for
 * the copy; the sampler swaps buffers and resolves names off that path. Full = dropped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/lazymem.h"
#include "profiler/prof.h"

int prof_rawq_init(struct prof_rawq *q, uint32_t cap_recs, uint32_t cap_frames)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->lock, NULL);
    /* both buffers' records, then both buffers' frames, in one mapping touched as records
     * come, not at start-up (one mapping: one mmap, and its length header shares the first
     * records' page, instead of four headers' page faults on the runtime's start-up thread) */
    size_t recs = ((size_t)cap_recs * sizeof(struct prof_raw) + 63) & ~(size_t)63;
    size_t frames = (size_t)cap_frames * sizeof(uint64_t); /* 32-bit counts: no overflow in 64 bits */
    char *m = clrmux_lazy_calloc(1, 2 * recs + 2 * frames);
    if (!m)
        return -ENOMEM;
    for (int i = 0; i < 2; i++) {
        q->buf[i].recs = (struct prof_raw *)(void *)(m + (size_t)i * recs);
        q->buf[i].frames = (uint64_t *)(void *)(m + 2 * recs + (size_t)i * frames);
        q->buf[i].cap_recs = cap_recs;
        q->buf[i].cap_frames = cap_frames;
    }
    return 0;
}

void prof_rawq_free(struct prof_rawq *q)
{
    clrmux_lazy_free(q->buf[0].recs); /* the one mapping of both buffers */
    for (int i = 0; i < 2; i++) {
        q->buf[i].recs = NULL;
        q->buf[i].frames = NULL;
        q->buf[i].cap_recs = q->buf[i].cap_frames = 0;
    }
}

int prof_rawq_push(struct prof_rawq *q, const struct prof_raw *r, const uint64_t *frames, uint16_t n)
{
    int rc = 0;
    pthread_mutex_lock(&q->lock);
    struct prof_rawbuf *b = &q->buf[q->cur];
    if (q->closed) {
        rc = -EPIPE;
    } else if (b->nrecs >= b->cap_recs || (uint64_t)b->nframes + n > b->cap_frames) {
        q->dropped++;
        rc = -ENOSPC;
    } else {
        struct prof_raw *d = &b->recs[b->nrecs++];
        *d = *r;
        d->first = b->nframes;
        d->nframes = n;
        if (n)
            memcpy(&b->frames[b->nframes], frames, (size_t)n * sizeof *frames);
        b->nframes += n;
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

struct prof_rawbuf *prof_rawq_swap(struct prof_rawq *q)
{
    pthread_mutex_lock(&q->lock);
    struct prof_rawbuf *full = &q->buf[q->cur];
    q->cur ^= 1;
    pthread_mutex_unlock(&q->lock);
    return full;
}

uint64_t prof_rawq_take_dropped(struct prof_rawq *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t d = q->dropped;
    q->dropped = 0;
    pthread_mutex_unlock(&q->lock);
    return d;
}

void prof_rawq_close(struct prof_rawq *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_mutex_unlock(&q->lock);
}
