/* Per-child detach: evacuation counters, the detach thread, refusals as the runtime would
 * answer the child alone. See detach.h. */
#include "loader/detach.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/hresult.h"
#include "common/log.h"
#include "common/platform.h"
#include "loader/elt.h"
#include "loader/mux.h"

__thread struct clrmux_thread_rec *clrmux_tls_rec CLRMUX_TLS_IE;
static _Atomic(struct clrmux_thread_rec *) thread_recs;
_Atomic int clrmux_evac_asymmetric;
static pthread_key_t rec_key;
static pthread_once_t rec_once = PTHREAD_ONCE_INIT;

static void rec_release(void *p)
{
    struct clrmux_thread_rec *t = p;
    atomic_store(&t->inside, 0);
    atomic_store(&t->in_use, 0);
}

static void make_key(void) { pthread_key_create(&rec_key, rec_release); }

struct clrmux_thread_rec *clrmux_evac_register(void)
{
    pthread_once(&rec_once, make_key);
    struct clrmux_thread_rec *t;
    for (t = atomic_load(&thread_recs); t; t = t->next) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&t->in_use, &expected, 1))
            break; /* a record of a thread that ended */
    }
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t)
            return NULL; /* this thread's callbacks are not counted: logged once below */
        atomic_store(&t->in_use, 1);
        struct clrmux_thread_rec *head = atomic_load(&thread_recs);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&thread_recs, &head, t));
    }
    pthread_setspecific(rec_key, t);
    clrmux_tls_rec = t;
    return t;
}

/* membarrier registration: 0 not asked, 1 under way (asked at Initialize, made on a thread
 * other than the app's), 2 over. The registration waits for an RCU grace period when the
 * process has threads (0.1 to several ms measured here), so it runs beside start-up rather
 * than in it; until it is over, callbacks count themselves in with a full fence
 * (clrmux_evac_enter), which is always correct. Its thread: a built-in child's own when one
 * adopted it during Initialize (clrmux_barrier_adopt: the tracer's ReJIT thread), else one
 * started for it after the children's Initialize (clrmux_barrier_start); a thread created
 * costs the app's main thread 0.2-0.35 ms here (its stack's page-table updates). */
static _Atomic int membarrier_state;
/* who makes it: 0 nobody yet, 1 an adopting child's thread, 2 clrmux (its own thread) */
static _Atomic int membarrier_owner;
static struct clrmux_mux *_Atomic membarrier_mux;
#ifdef CLRMUX_TESTING
_Atomic int clrmux_barrier_test_adopted_runs;
int clrmux_barrier_test_state(void) { return atomic_load(&membarrier_state); }
void clrmux_barrier_test_reset(void)
{
    atomic_store(&membarrier_state, 0);
    atomic_store(&membarrier_owner, 0);
    atomic_store(&clrmux_barrier_test_adopted_runs, 0);
}
#endif

/* clrmux_barrier_then's work: run once, after the registration, on the thread that made it */
static void (*_Atomic then_fn)(void *);
static void *then_arg;

void clrmux_barrier_then(void (*fn)(void *), void *arg)
{
    then_arg = arg;
    atomic_store(&then_fn, fn);
}

static void *register_membarrier(void *arg)
{
    struct clrmux_mux *m = arg;
    if (clrmux_process_barrier_register() == 0) {
        atomic_store(&clrmux_evac_asymmetric, 1);
        /* the sole subscribers that may detach get their counted fast path (dispatch.h); the
         * mux is never freed */
        if (m && !atomic_load(&m->shut_down))
            clrmux_dispatch_update(m);
    }
    atomic_store(&membarrier_state, 2);
    void (*fn)(void *) = atomic_exchange(&then_fn, NULL);
    if (fn)
        fn(then_arg);
    return NULL;
}

void clrmux_pin_self(struct clrmux_mux *m)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&membarrier_state, &expected, 1))
        atomic_store(&membarrier_mux, m);
    if (clrmux_pin_module_of((const void *)&clrmux_pin_self) != 0)
        LOG_WARN("cannot pin libclrmux.so in memory; detaching clrmux from the runtime is refused");
}

int clrmux_barrier_adopt(void)
{
    if (atomic_load(&membarrier_state) != 1)
        return 0; /* not asked (no mux started: a unit test's child) or over */
    int expected = 0;
    return atomic_compare_exchange_strong(&membarrier_owner, &expected, 1);
}

void clrmux_barrier_disown(void)
{
    int expected = 1;
    (void)atomic_compare_exchange_strong(&membarrier_owner, &expected, 0);
}

void clrmux_barrier_register_adopted(void)
{
    if (atomic_load(&membarrier_owner) != 1 || atomic_load(&membarrier_state) != 1)
        return;
#ifdef CLRMUX_TESTING
    atomic_fetch_add(&clrmux_barrier_test_adopted_runs, 1);
#endif
    register_membarrier(atomic_load(&membarrier_mux));
    LOG_DEBUG("process-wide barrier registration made on a built-in child's thread (%s)",
              atomic_load(&clrmux_evac_asymmetric) ? "registered" : "not available");
}

void clrmux_barrier_start(struct clrmux_mux *m)
{
    int expected = 0;
    if (atomic_load(&membarrier_state) != 1 ||
        !atomic_compare_exchange_strong(&membarrier_owner, &expected, 2))
        return; /* not asked, or a built-in child's thread makes it */
    pthread_attr_t attr;
    pthread_t tid;
    int started = pthread_attr_init(&attr) == 0 &&
                  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&tid, &attr, register_membarrier, m) == 0;
    pthread_attr_destroy(&attr);
    LOG_DEBUG("process-wide barrier registration on a thread of clrmux's own%s", started ? "" : " (none: on this one)");
    if (!started)
        register_membarrier(m);
}

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
    /* a thread that saw clrmux_evac_asymmetric set counts itself in without a fence: the
     * registration must be over (and its outcome final) before it is read here */
    while (atomic_load(&membarrier_state) == 1 && !atomic_load(&m->shut_down))
        sleep_ms(1);
    /* a full barrier (a sequentially consistent read-modify-write; ThreadSanitizer takes no
     * fences): the routes without the child are stored before the counters are read */
    (void)atomic_fetch_add(&membarrier_state, 0);
    /* every thread runs a full barrier: a callback that counted itself in before the child
     * was made inactive is seen below, one that counts itself in later sees it inactive */
    if (atomic_load(&clrmux_evac_asymmetric) &&
        clrmux_process_barrier() != 0)
        LOG_WARN("the process-wide memory barrier failed; a callback running right now may still reach a detaching child");
    for (struct clrmux_thread_rec *t = atomic_load(&thread_recs); t; t = t->next)
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
