/* Threads owned by one child (or by clrmux): see ownthreads.h. */
#include "loader/ownthreads.h"

#include <pthread.h>

#include "common/log.h"
#include "loader/mux.h"

static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set on a thread by clrmux_own_thread_initialize, for the thread's life. */
static __thread struct {
    struct clrmux_mux *mux;
    struct clrmux_child *owner;
} t_init;

HRESULT clrmux_own_thread_initialize(struct clrmux_mux *m, struct clrmux_child *owner)
{
    if (m->info_version < 4)
        return E_NOTIMPL;
    struct clrmux_thread_rec *rec = clrmux_tls_rec;
    if (rec && atomic_load_explicit(&rec->inside, memory_order_relaxed))
        /* inside a callback: a runtime thread the child merely prepares, not one of its own */
        return m->info->lpVtbl->InitializeCurrentThread(m->info);
    if (!atomic_exchange(&m->own.active, 1)) /* the thread routes' gate closes (dispatch.h) */
        clrmux_dispatch_gate_closed(m, CLRMUX_GATE_OWN_THREADS);
    /* for the rest of the thread's life: the runtime creates its Thread object (and reports
     * it) only when the thread first needs one, e.g. in RequestReJIT, not in this call */
    t_init.mux = m;
    t_init.owner = owner;
    return m->info->lpVtbl->InitializeCurrentThread(m->info);
}

int clrmux_own_thread_filter(struct clrmux_mux *m, int id, uintptr_t tid, struct clrmux_child **only)
{
    struct clrmux_own_threads *o = &m->own;
    if (!tid)
        return 0;
    for (int i = 0; i < CLRMUX_OWN_THREADS; i++)
        if (atomic_load_explicit(&o->slot[i].tid, memory_order_acquire) == tid) {
            if (id == CLRMUX_ROUTE_ThreadCreated && t_init.mux != m) {
                /* the ThreadID of an owned thread whose end no one heard of, reused */
                atomic_store(&o->slot[i].tid, 0);
                break;
            }
            *only = atomic_load_explicit(&o->slot[i].owner, memory_order_relaxed);
            if (id == CLRMUX_ROUTE_ThreadDestroyed)
                atomic_store(&o->slot[i].tid, 0);
            return 1;
        }
    if (t_init.mux != m || (id != CLRMUX_ROUTE_ThreadCreated && id != CLRMUX_ROUTE_ThreadAssignedToOSThread))
        return 0;
    /* the runtime reports the thread being brought in: record it for its owner (the owner
     * stored before the ThreadID that publishes the slot; inserts serialised, rare) */
    pthread_mutex_lock(&insert_lock);
    for (int i = 0; i < CLRMUX_OWN_THREADS; i++)
        if (!atomic_load_explicit(&o->slot[i].tid, memory_order_relaxed)) {
            atomic_store_explicit(&o->slot[i].owner, t_init.owner, memory_order_relaxed);
            atomic_store_explicit(&o->slot[i].tid, tid, memory_order_release);
            pthread_mutex_unlock(&insert_lock);
            *only = t_init.owner;
            return 1;
        }
    pthread_mutex_unlock(&insert_lock);
    if (!atomic_exchange(&o->full_logged, 1))
        LOG_WARN("%d threads brought in by InitializeCurrentThread are already tracked: further ones are reported to "
                 "every child that asked for thread callbacks",
                 CLRMUX_OWN_THREADS);
    return 0; /* untracked: every subscriber, as the log says (its later callbacks could not be told apart) */
}
