/* The profiler's thread registry: managed threads from ThreadCreated / ThreadDestroyed /
 * ThreadAssignedToOSThread / ThreadNameChanged. A fixed table under one mutex; no runtime
 * call is ever made while the mutex is held. */
#include <stdio.h>
#include <string.h>

#include "profiler/prof.h"

void prof_threads_init(struct prof_threads *r)
{
    /* slots are cleared as they are taken (prof_threads_add): the 4096-slot table is not
     * touched at start-up */
    r->high = 0;
    r->dropped = 0;
    pthread_mutex_init(&r->lock, NULL);
}

static struct prof_thread *find(struct prof_threads *r, ThreadID id)
{
    for (size_t i = 0; i < r->high; i++)
        if (r->t[i].id == id)
            return &r->t[i];
    return NULL;
}

void prof_threads_add(struct prof_threads *r, ThreadID id, uint32_t tid)
{
    if (!id)
        return;
    pthread_mutex_lock(&r->lock);
    struct prof_thread *t = find(r, id);
    if (!t) {
        for (size_t i = 0; i < r->high && !t; i++)
            if (!r->t[i].id)
                t = &r->t[i];
        if (!t && r->high < PROF_MAX_THREADS)
            t = &r->t[r->high++];
        if (t) {
            memset(t, 0, sizeof *t);
            t->id = id;
            r->gen++;
        } else {
            r->dropped++;
        }
    }
    if (t && tid && t->tid != tid) {
        t->tid = tid;
        r->gen++;
    }
    pthread_mutex_unlock(&r->lock);
}

void prof_threads_remove(struct prof_threads *r, ThreadID id)
{
    pthread_mutex_lock(&r->lock);
    struct prof_thread *t = find(r, id);
    if (t) {
        memset(t, 0, sizeof *t);
        r->gen++;
        while (r->high > 0 && !r->t[r->high - 1].id)
            r->high--;
    }
    pthread_mutex_unlock(&r->lock);
}

void prof_threads_set_tid(struct prof_threads *r, ThreadID id, uint32_t tid)
{
    prof_threads_add(r, id, tid);
}

void prof_threads_set_name(struct prof_threads *r, ThreadID id, const char *utf8)
{
    prof_threads_add(r, id, 0);
    pthread_mutex_lock(&r->lock);
    struct prof_thread *t = find(r, id);
    if (t) {
        snprintf(t->name, sizeof t->name, "%s", utf8 ? utf8 : "");
        r->gen++;
    }
    pthread_mutex_unlock(&r->lock);
}

int prof_threads_lookup(struct prof_threads *r, ThreadID id, uint32_t *tid, char *name, size_t namesz)
{
    pthread_mutex_lock(&r->lock);
    struct prof_thread *t = find(r, id);
    if (t) {
        if (tid)
            *tid = t->tid;
        if (name && namesz)
            snprintf(name, namesz, "%s", t->name);
    }
    pthread_mutex_unlock(&r->lock);
    return t ? 0 : -1;
}

size_t prof_threads_snapshot(struct prof_threads *r, struct prof_thread_view *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->high && n < cap; i++) {
        if (!r->t[i].id)
            continue;
        out[n].slot = i;
        out[n].t = r->t[i];
        n++;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

int prof_threads_snapshot_changed(struct prof_threads *r, uint64_t *gen, struct prof_thread_view *out,
                                  size_t cap, size_t *n)
{
    pthread_mutex_lock(&r->lock);
    int changed = r->gen != *gen;
    if (changed) {
        size_t k = 0;
        for (size_t i = 0; i < r->high && k < cap; i++) {
            if (!r->t[i].id)
                continue;
            out[k].slot = i;
            out[k].t = r->t[i];
            k++;
        }
        *n = k;
        *gen = r->gen;
    }
    pthread_mutex_unlock(&r->lock);
    return changed;
}

void prof_threads_set_last(struct prof_threads *r, size_t slot, ThreadID id, int64_t cpu_ns, int64_t wall_ns)
{
    if (slot >= PROF_MAX_THREADS)
        return;
    pthread_mutex_lock(&r->lock);
    if (r->t[slot].id == id) {
        r->t[slot].last_cpu_ns = cpu_ns;
        r->t[slot].last_wall_ns = wall_ns;
    }
    pthread_mutex_unlock(&r->lock);
}

size_t prof_threads_count(struct prof_threads *r)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->high; i++)
        n += r->t[i].id != 0;
    pthread_mutex_unlock(&r->lock);
    return n;
}
