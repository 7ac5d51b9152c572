/* Per-child detach: the detach thread, refusals as the runtime would answer the child alone.
 * See detach.h; the evacuation counters and the membarrier registration are barrier.c's. */
#include "loader/detach.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/hresult.h"
#include "common/log.h"
#include "common/platform.h"
#include "loader/elt.h"
#include "loader/mux.h"

/* ---- the detach thread ---------------------------------------------------------------- */

static pthread_mutex_t detach_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t detach_cond = PTHREAD_COND_INITIALIZER;
static int detach_thread_started;
static pthread_t detach_tid;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until no thread is inside a callback it was in when this started. */
static void evacuate(struct clrmux_mux *m)
{
    clrmux_barrier_before_evacuation(&m->shut_down); /* barrier.h */
    for (struct clrmux_thread_rec *t = clrmux_evac_threads(); t; t = t->next)
        while (atomic_load(&t->inside) != 0 && !atomic_load(&m->shut_down))
            sleep_ms(2);
}

static int pending_detaches(struct clrmux_mux *m)
{
    for (int i = 0; i < m->nchildren; i++)
        if (atomic_load(&m->children[i].detach_state) == 1)
            return 1;
    return 0;
}

static void *detach_thread(void *arg)
{
    struct clrmux_mux *m = arg;
    /* (not hidden as an owned thread: that would close the thread routes' gate for good,
     * ownthreads.h, for a thread that exists only after a child detached) */
    if (m->info_version >= 4)
        m->info->lpVtbl->InitializeCurrentThread(m->info);
    for (;;) {
        pthread_mutex_lock(&detach_lock);
        while (!pending_detaches(m) && !m->shut_down)
            pthread_cond_wait(&detach_cond, &detach_lock);
        pthread_mutex_unlock(&detach_lock);
        if (m->shut_down)
            break;
        evacuate(m);
        if (atomic_load(&m->shut_down))
            break;
        int all = 1, notified = 0;
        for (int i = 0; i < m->nchildren; i++) {
            struct clrmux_child *c = &m->children[i];
            int expected = 1;
            if (atomic_compare_exchange_strong(&c->detach_state, &expected, 2)) {
                LOG_INFO("child '%s': detached (no thread is in its callbacks any more); ProfilerDetachSucceeded",
                         c->name);
                c->cb->lpVtbl->ProfilerDetachSucceeded(c->cb);
                c->cb->lpVtbl->Release(c->cb);
                notified++;
            }
            if (atomic_load(&c->active))
                all = 0;
        }
        if (notified && all && !m->shut_down) {
            /* every child has left: clrmux leaves the runtime too */
            HRESULT hr = E_NOTIMPL;
            /* early in start-up the runtime refuses until it has started: retry for a while */
            for (int tries = 0; m->info_version >= 3 && tries < 100 && !m->shut_down; tries++) {
                hr = m->info->lpVtbl->RequestProfilerDetach(m->info, 300); /* 0 would mean 5 s */
                if (hr != CORPROF_E_RUNTIME_UNINITIALIZED)
                    break;
                sleep_ms(50);
            }
            if (SUCCEEDED(hr)) {
                LOG_INFO("every child has detached: clrmux detaches from the runtime");
                break;
            }
            LOG_INFO("every child has detached; the runtime keeps clrmux loaded (RequestProfilerDetach: HRESULT "
                     "%s; e.g. an immutable flag or IL instrumentation stays in force)", HR_STR(hr));
        }
    }
    return NULL;
}

HRESULT clrmux_detach_request(struct clrmux_mux *m, struct clrmux_child *c, DWORD expected_ms)
{
    (void)expected_ms; /* evacuation is polled; the hint only bounds the runtime's own wait */
    const char *why = NULL;
    HRESULT hr = S_OK;
    pthread_mutex_lock(&m->mask_lock);
    DWORD low = atomic_load(&c->mask_low), high = atomic_load(&c->mask_high);
    if (atomic_load(&c->detach_state)) {
        hr = CORPROF_E_PROFILER_DETACHING, why = "a detach is already under way";
    } else if (!atomic_load(&c->active) || atomic_load(&m->initializing)) {
        hr = CORPROF_E_PROFILER_NOT_YET_INITIALIZED, why = "it is not initialised";
    } else if (c->version < 3) {
        hr = CORPROF_E_CALLBACK3_REQUIRED, why = "it does not implement ICorProfilerCallback3";
    } else if ((low & m->immutable_low) || (high & m->immutable_high)) {
        hr = CORPROF_E_IMMUTABLE_FLAGS_SET, why = "its event mask holds an immutable flag";
    } else if (clrmux_elt_child_hooks(m, c)) {
        hr = CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT, why = "it set enter/leave hooks";
    } else if (atomic_load(&c->set_il)) {
        hr = CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT, why = "it called SetILFunctionBody";
    } else if (atomic_load(&c->used_rejit)) {
        hr = CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT, why = "it requested ReJIT";
    } else {
        atomic_store(&c->detach_state, 1);
        atomic_store(&c->active, 0); /* no new callback reaches it (seq_cst: before the evacuation) */
        clrmux_dispatch_rebuild(m);   /* its routes go before the evacuation starts */
    }
    pthread_mutex_unlock(&m->mask_lock);
    if (FAILED(hr)) {
        LOG_WARN("child '%s': RequestProfilerDetach refused (HRESULT %s): %s, as the runtime would refuse it "
                 "alone", c->name, HR_STR(hr), why);
        return hr;
    }
    clrmux_compose_child_gone(m, c);
    HRESULT uh = clrmux_apply_union(m);
    LOG_INFO("child '%s': RequestProfilerDetach: it receives no more callbacks%s", c->name,
             FAILED(uh) ? "; the runtime keeps its event flags" : "");
    pthread_mutex_lock(&detach_lock);
    int start = !detach_thread_started;
    detach_thread_started = 1;
    pthread_cond_broadcast(&detach_cond);
    pthread_mutex_unlock(&detach_lock);
    if (start && pthread_create(&detach_tid, NULL, detach_thread, m) != 0) {
        LOG_ERROR("cannot start the detach thread; child '%s' is not notified", c->name);
        pthread_mutex_lock(&detach_lock);
        detach_thread_started = 0;
        pthread_mutex_unlock(&detach_lock);
    }
    return S_OK;
}

void clrmux_detach_runtime_succeeded(struct clrmux_mux *m)
{
    (void)m;
    LOG_INFO("clrmux detached from the runtime");
}

void clrmux_detach_shutdown(struct clrmux_mux *m)
{
    atomic_store(&m->shut_down, 1);
    pthread_mutex_lock(&detach_lock);
    int started = detach_thread_started;
    detach_thread_started = 0;
    pthread_cond_broadcast(&detach_cond);
    pthread_mutex_unlock(&detach_lock);
    if (started && !pthread_equal(pthread_self(), detach_tid))
        pthread_join(detach_tid, NULL);
}
