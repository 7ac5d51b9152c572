/* The profiler's view of a thread's span context (the tid table of clrmux_span_context
 * records, see spans.h) and the names of the threads that opened spans (see spans_int.h).
 * Below spans.c: it reads a thread's state only as spans.c hands it over. */
#include "tracer/spans_int.h"
#include "common/platform.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Thread names (tid -> the OS name, which .NET sets from Thread.Name), recorded when a
 * thread opens its first span and again when it exits, so that the exporter can name the
 * threads that are gone by the time their spans are written. */
#define TNAMES 4096
static struct {
    uint32_t tid;
    char name[16];
} tnames[TNAMES];
static pthread_mutex_t tnames_lock = PTHREAD_MUTEX_INITIALIZER;

void spans_tname_record(uint32_t tid)
{
    char name[32] = "";
    if (clrmux_thread_name_of(tid, name, sizeof name) != 0)
        return;
    pthread_mutex_lock(&tnames_lock);
    size_t i = (tid * 2654435761u) % TNAMES;
    tnames[i].tid = tid;
    size_t len = strnlen(name, sizeof tnames[i].name - 1);
    memcpy(tnames[i].name, name, len);
    tnames[i].name[len] = 0;
    pthread_mutex_unlock(&tnames_lock);
}

int clrmux_thread_name(uint32_t tid, char *out, size_t outsz)
{
    int found = 0;
    pthread_mutex_lock(&tnames_lock);
    size_t i = (tid * 2654435761u) % TNAMES;
    if (tid && tnames[i].tid == tid && tnames[i].name[0]) {
        snprintf(out, outsz, "%s", tnames[i].name);
        found = 1;
    }
    pthread_mutex_unlock(&tnames_lock);
    return found ? 0 : -1;
}

/* ---- the profiler's view: span context records ------------------------------------------
 *
 * Records live in chunks that are never freed; a thread's record goes back to a free list at
 * its exit (cleared, tid 0) and serves a later thread. ctx_by_tid maps a live thread's OS id
 * to its record (open addressing from tid % CTX_TABLE over CTX_PROBE slots, pointers stored
 * with atomics): clrmux_span_context_find reads it without a lock, and the reader checks the
 * record's tid, so a lookup that races with a thread's exit and a record's reuse finds either
 * nothing or a record it rejects. All changes under reg_lock. */
#define CTX_TABLE 8192
#define CTX_PROBE 16
#define CTX_NO_SLOT UINT32_MAX
#define CTX_CHUNK 64
static _Atomic(struct clrmux_span_context *) ctx_by_tid[CTX_TABLE];
struct ctx_rec {
    struct clrmux_span_context c; /* first */
    struct ctx_rec *next_free;
};
static struct ctx_rec *ctx_free;

/* A cleared record for thread t, published in ctx_by_tid (reg_lock held). NULL without memory. */
struct clrmux_span_context *spans_ctx_alloc(struct tstate *t)
{
    if (!ctx_free) {
        struct ctx_rec *chunk = calloc(CTX_CHUNK, sizeof *chunk); /* never freed */
        if (!chunk)
            return NULL;
        for (int i = 0; i < CTX_CHUNK; i++) {
            chunk[i].next_free = ctx_free;
            ctx_free = &chunk[i];
        }
    }
    struct ctx_rec *r = ctx_free;
    ctx_free = r->next_free;
    struct clrmux_span_context *c = &r->c;
    __atomic_store_n(&c->tid, t->tid, __ATOMIC_RELEASE);
    t->ctx_slot = CTX_NO_SLOT;
    for (uint32_t i = 0; i < CTX_PROBE; i++) {
        uint32_t k = (t->tid + i) % CTX_TABLE;
        if (!atomic_load_explicit(&ctx_by_tid[k], memory_order_relaxed)) {
            atomic_store_explicit(&ctx_by_tid[k], c, memory_order_release);
            t->ctx_slot = k;
            break;
        }
    }
    return c; /* not in the table (CTX_PROBE live threads collide): peek still finds it */
}

/* Thread t exits (reg_lock held): its record is cleared, leaves the table, is reused later. */
void spans_ctx_release(struct tstate *t)
{
    struct clrmux_span_context *c = t->ctx;
    if (!c)
        return;
    if (t->ctx_slot != CTX_NO_SLOT)
        atomic_store_explicit(&ctx_by_tid[t->ctx_slot], NULL, memory_order_relaxed);
    uint32_t seq = c->seq;
    __atomic_store_n(&c->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&c->tid, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->depth, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->span_id, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->local_root_id, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&c->seq, seq + 2, __ATOMIC_RELEASE);
    struct ctx_rec *r = (struct ctx_rec *)c;
    r->next_free = ctx_free;
    ctx_free = r;
    t->ctx = NULL;
}

__attribute__((visibility("default"))) struct clrmux_span_context *clrmux_span_context_find(uint32_t tid)
{
    if (!tid)
        return NULL;
    for (uint32_t i = 0; i < CTX_PROBE; i++) {
        struct clrmux_span_context *c =
            atomic_load_explicit(&ctx_by_tid[(tid + i) % CTX_TABLE], memory_order_acquire);
        if (c && __atomic_load_n(&c->tid, __ATOMIC_RELAXED) == tid)
            return c;
    }
    return NULL;
}
