/* The evacuation counters and the process-wide barrier (see detach.h for what they serve):
 * a record per thread that ever entered a mux callback, counted in and out by every callback
 * (clrmux_evac_enter/leave), and the membarrier(2) registration that lets those counts be
 * plain adds, made off the app's main thread (clrmux_pin_self, clrmux_barrier_*). The floor of
 * the loader's detach machinery: it calls nothing of src/loader; what the registration's
 * success changes (the dispatch tables) is a function its caller gives. */
#include "loader/detach.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "common/platform.h"

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

/* what clrmux_pin_self was given: run once the registration succeeded */
static void (*_Atomic registered_fn)(struct clrmux_mux *);

static void *register_membarrier(void *arg)
{
    struct clrmux_mux *m = arg;
    if (clrmux_process_barrier_register() == 0) {
        atomic_store(&clrmux_evac_asymmetric, 1);
        void (*fn)(struct clrmux_mux *) = atomic_load(&registered_fn);
        if (m && fn)
            fn(m);
    }
    atomic_store(&membarrier_state, 2);
    void (*fn)(void *) = atomic_exchange(&then_fn, NULL);
    if (fn)
        fn(then_arg);
    return NULL;
}

void clrmux_pin_self(struct clrmux_mux *m, void (*registered)(struct clrmux_mux *m))
{
    atomic_store(&registered_fn, registered);
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

struct clrmux_thread_rec *clrmux_evac_threads(void) { return atomic_load(&thread_recs); }

void clrmux_barrier_before_evacuation(const _Atomic int *stop)
{
    /* a thread that saw clrmux_evac_asymmetric set counts itself in without a fence: the
     * registration must be over (and its outcome final) before the counters are read */
    while (atomic_load(&membarrier_state) == 1 && !atomic_load(stop)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* a full barrier (a sequentially consistent read-modify-write; ThreadSanitizer takes no
     * fences): the routes without the child are stored before the counters are read */
    (void)atomic_fetch_add(&membarrier_state, 0);
    /* every thread runs a full barrier: a callback that counted itself in before the child
     * was made inactive is seen by the caller, one that counts itself in later sees it inactive */
    if (atomic_load(&clrmux_evac_asymmetric) && clrmux_process_barrier() != 0)
        LOG_WARN("the process-wide memory barrier failed; a callback running right now may still reach a detaching child");
}
