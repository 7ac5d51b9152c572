/* The tracer's ReJIT thread (tracer_impl.h), started by Initialize: it makes the RequestReJIT calls the callbacks
 * queue (RequestReJIT suspends the runtime: it is made off the callback threads), looks up the
 * unhandled-exception hook's token off the app's main thread, and does the tracer's start-up
 * steps that need not be in Initialize: the last-gasp registration, the metrics file's open,
 * clrmux's membarrier registration when it adopted it (loader/detach.h; made when no job is
 * queued) and, flush_interval_ms later at most, the export thread's start. */
#include "tracer/tracer_impl.h"

/* The ReJIT thread's first steps, unless Shutdown came first (rj_stop): the last gasp's
 * start (its thread and handlers, unless another registration started them; Initialize made
 * the table entry), then the
 * metrics file's open. Not under rj_lock (the callbacks queue jobs meanwhile), but with rj_starting
 * set, which Shutdown waits out. Here rather than in Initialize: each thread created costs
 * the creating thread 0.1-0.7 ms on a VM (its stack mapped, a page-table update per page),
 * which in Initialize is the app's start-up; here it overlaps it. */
static void start_background(struct tracer *t)
{
    if (!t->rj_gasp_entry || clrmux_lastgasp_start() != 0)
        LOG_WARN("child '%s': no last gasp: a process that ends without Shutdown loses its unwritten spans", t->child);
    pthread_mutex_lock(&t->wr_lock);
    if (!t->final)
        tracer_open_metrics(t);
    pthread_mutex_unlock(&t->wr_lock);
}

/* How long after Initialize the ReJIT thread starts the export thread: the first flush
 * (flush_interval_ms), the time the span buffer takes to fill at 1 M spans/s, or
 * EXPORT_DELAY_MAX_MS, whichever comes first. Until then the spans wait in the buffer (the
 * last gasp and Shutdown write them themselves); a process that ends sooner (a hello world
 * ends ~60 ms after Initialize) never pays for the thread, its stack and its file opens. */
static int64_t export_delay_ns(const struct tracer *t)
{
    int64_t d = (int64_t)t->flush_ms * 1000000;
    int64_t fill = (int64_t)t->buffer_spans * 1000;
    if (fill < d)
        d = fill;
    return d < (int64_t)EXPORT_DELAY_MAX_MS * 1000000 ? d : (int64_t)EXPORT_DELAY_MAX_MS * 1000000;
}

/* Starts the export thread (the ReJIT thread, under rj_lock: Shutdown reads ex_started under
 * it). */
static void start_export(struct tracer *t)
{
    if (pthread_create(&t->ex_thread, NULL, tracer_export_thread, t) == 0) {
        t->ex_started = 1;
        LOG_DEBUG("tracer: export thread started, %lld ms after Initialize",
                  (long long)((clrmux_now_ns() - t->start_ns) / 1000000));
    } else {
        LOG_WARN("child '%s': cannot start the export thread; spans are written at shutdown only", t->child);
    }
}

static int past(const struct timespec *at)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec > at->tv_sec || (now.tv_sec == at->tv_sec && now.tv_nsec >= at->tv_nsec);
}

/* The hook's token (a tracer_queue_hook_lookup job), on another CPU than the one the app's main
 * thread had when it queued the job (it narrowed this thread's affinity): the lookup (~0.5 ms)
 * runs beside the runtime's start-up instead of preempting it. */
static void hook_lookup(struct tracer *t, const struct rejit_job *j)
{
    clrmux_unhandled_prefetch(&t->unhandled, (uintptr_t)j->hook_module, j->hook_base);
#ifdef __linux__
    if (j->moved)
        pthread_setaffinity_np(pthread_self(), sizeof j->affinity, &j->affinity);
#endif
}

void *tracer_rejit_thread(void *arg)
{
    struct tracer *t = arg;
    clrmux_block_termination_signals();
    pthread_mutex_lock(&t->rj_lock);
    const int start = !t->rj_stop;
    t->rj_starting = start;
    pthread_mutex_unlock(&t->rj_lock);
    /* the last gasp first: its thread and handlers (a signal before them is the runtime's alone) */
    if (start)
        start_background(t);
    HRESULT hr = ICorProfilerInfo5_InitializeCurrentThread(t->info);
    if (FAILED(hr))
        LOG_WARN("tracer: InitializeCurrentThread failed with HRESULT %s", HR_STR(hr));
    /* the export thread's start: export_delay_ns after Initialize (a realtime deadline, as
     * pthread_cond_timedwait takes) */
    struct timespec export_at;
    clock_gettime(CLOCK_REALTIME, &export_at);
    int64_t left = t->start_ns + export_delay_ns(t) - clrmux_now_ns();
    if (left > 0) {
        export_at.tv_sec += (time_t)(left / 1000000000);
        export_at.tv_nsec += (long)(left % 1000000000);
        if (export_at.tv_nsec >= 1000000000)
            export_at.tv_sec++, export_at.tv_nsec -= 1000000000;
    }
    int export_due = start;
    int barrier = t->rj_barrier;
    pthread_mutex_lock(&t->rj_lock);
    t->rj_starting = 0;
    pthread_cond_broadcast(&t->rj_cond);
    for (;;) {
        if (export_due && !t->rj_stop && past(&export_at)) {
            export_due = 0;
            start_export(t);
        }
        if (!t->rj_head && !t->rj_stop) {
            if (barrier) { /* when there is nothing else to do: it waits for an RCU grace period */
                barrier = 0;
                pthread_mutex_unlock(&t->rj_lock);
                t->host.barrier_register_adopted();
                pthread_mutex_lock(&t->rj_lock);
                continue;
            }
            if (export_due)
                pthread_cond_timedwait(&t->rj_cond, &t->rj_lock, &export_at);
            else
                pthread_cond_wait(&t->rj_cond, &t->rj_lock);
            continue;
        }
        if (t->rj_stop)
            break;
        struct rejit_job *j = t->rj_head;
        t->rj_head = j->next;
        if (!t->rj_head)
            t->rj_tail = NULL;
        pthread_mutex_unlock(&t->rj_lock);
        if (j->hook_base) {
            hook_lookup(t, j);
            free(j);
            pthread_mutex_lock(&t->rj_lock);
            continue;
        }
#ifdef __linux__
        j->ran_cpu = sched_getcpu();
#endif
        /* a target added at run time: its rewrite also re-JIT-compiles the methods that inlined
         * it (the runtime tracks them when ReJIT is enabled, .NET Core 3.0+), and the rewritten
         * method is not inlined again, so a method made hot and inlined before `clrmux ctl
         * trace add` is traced at every call site */
        if (j->revert)
            j->hr = ICorProfilerInfo5_RequestRevert(t->info, j->n, j->modules, j->tokens, NULL);
        else if (j->inliners && t->info10)
            j->hr = t->info10->lpVtbl->RequestReJITWithInliners(t->info10, COR_PRF_REJIT_BLOCK_INLINING, j->n,
                                                               j->modules, j->tokens);
        else
            j->hr = ICorProfilerInfo5_RequestReJIT(t->info, j->n, j->modules, j->tokens);
#ifdef __linux__
        const int moved = j->moved; /* j is the waiting thread's once done is set */
#endif
        pthread_mutex_lock(&t->rj_lock);
        atomic_store(&j->done, 1);
        pthread_cond_broadcast(&t->rj_cond);
#ifdef __linux__
        if (moved)
            pthread_setaffinity_np(pthread_self(), sizeof t->rj_affinity, &t->rj_affinity);
#endif
    }
    pthread_mutex_unlock(&t->rj_lock);
    if (barrier) /* stopped first: the registration is still made (evacuation waits for it) */
        t->host.barrier_register_adopted();
    return NULL;
}

/* Starts the ReJIT thread (Initialize, on the runtime's start-up thread). It registers the
 * last gasp (start_background) and starts the export thread a little later
 * (export_delay_ns); it also makes clrmux's membarrier registration, which would otherwise
 * start a thread of its own on this one (loader/detach.h). Returns 0, or -1 (nothing
 * started, nothing left registered or adopted). */
int tracer_start_rejit_thread(struct tracer *t)
{
    t->rj_barrier = t->host.barrier_adopt && t->host.barrier_register_adopted && t->host.barrier_disown &&
                    t->host.barrier_adopt();
#ifdef __linux__
    t->rj_affinity_ok = pthread_getaffinity_np(pthread_self(), sizeof t->rj_affinity, &t->rj_affinity) == 0;
#endif
    /* the table entry now (a lock, no thread): the loader decides right after Initialize
     * whether to watch unhandled exceptions, and does only when a last gasp is registered
     * (common/unhandled.h); the ReJIT thread starts it. No handler is installed before that
     * start (clrmux_lastgasp_arm is not used): until then no traced method has run, so a
     * signal has nothing of the tracer's to save, and the runtime handles it as without
     * clrmux (.NET 9's, before the runtime has started, lets the app go on: a flush there
     * would have been final and lost every later span) */
    t->rj_gasp_entry = clrmux_lastgasp_register_deferred(tracer_last_gasp, t) == 0;
#ifndef _WIN32
    /* the thread is born with the termination signals blocked (as clrmux's threads run:
     * clrmux_block_termination_signals), so that none lands in its first instructions */
    sigset_t saved;
    clrmux_block_termination_signals_saving(&saved);
#endif
    const int created = pthread_create(&t->rj_thread, NULL, tracer_rejit_thread, t) == 0;
#ifndef _WIN32
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
#endif
    if (created)
        return 0;
    if (t->rj_gasp_entry)
        clrmux_lastgasp_unregister(tracer_last_gasp, t);
    if (t->rj_barrier)
        t->host.barrier_disown();
    return -1;
}

/* Appends job j to the ReJIT thread's queue and wakes it (under rj_lock). */
static void enqueue(struct tracer *t, struct rejit_job *j)
{
    if (t->rj_tail)
        t->rj_tail->next = j;
    else
        t->rj_head = j;
    t->rj_tail = j;
    pthread_cond_broadcast(&t->rj_cond);
}

/* Queues the lookup of the unhandled-exception hook's token in CoreLib (`mod`, mapped at
 * `base`) for the ReJIT thread, without waiting: CoreLib is loaded 5-10 ms before its first
 * method is compiled or looked up (the first JIT callback, which would otherwise look it up
 * on the app's main thread, ~12 page faults). */
void tracer_queue_hook_lookup(struct tracer *t, ModuleID mod, const void *base)
{
    struct rejit_job *j = calloc(1, sizeof *j);
    if (!j)
        return; /* the first callback looks it up */
    j->hook_module = mod;
    j->hook_base = base;
#ifdef __linux__
    /* woken on this CPU, the ReJIT thread would take it from the app's main thread for the
     * lookup: it runs on the others (hook_lookup restores its affinity) */
    int cpu = sched_getcpu();
    cpu_set_t others;
    if (cpu >= 0 && cpu < CPU_SETSIZE && pthread_getaffinity_np(t->rj_thread, sizeof others, &others) == 0 &&
        CPU_ISSET(cpu, &others) && CPU_COUNT(&others) > 1) {
        j->affinity = others;
        CPU_CLR(cpu, &others);
        j->moved = pthread_setaffinity_np(t->rj_thread, sizeof others, &others) == 0;
    }
#endif
    pthread_mutex_lock(&t->rj_lock);
    enqueue(t, j);
    pthread_mutex_unlock(&t->rj_lock);
}

/* Queues a RequestReJIT (or RequestRevert) for the ReJIT thread and waits (bounded) until it
 * has been made. */
#define SAME_CPU_WAIT_NS 2000000
static HRESULT request(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly, int revert,
                       int inliners)
{
    const char *what = revert ? "RequestRevert" : "RequestReJIT";
    struct rejit_job *j = calloc(1, sizeof *j);
    ModuleID *mods = calloc(n, sizeof *mods);
    mdMethodDef *toks = calloc(n, sizeof *toks);
    if (!j || !mods || !toks) {
        free(j), free(mods), free(toks);
        LOG_ERROR("tracer: out of memory; %s of %u method(s) of %s not made", what, (unsigned)n, assembly);
        return E_OUTOFMEMORY;
    }
    for (ULONG i = 0; i < n; i++) {
        mods[i] = mod;
        toks[i] = tokens[i];
    }
    j->n = n;
    j->modules = mods;
    j->tokens = toks;
    j->revert = revert;
    j->inliners = inliners;
#ifdef __linux__
    /* The ReJIT thread runs on this thread's CPU for the job, and this thread yields that CPU
     * to it until the job is done (SAME_CPU_WAIT_NS at most, then it sleeps): waking a thread
     * on an idle vCPU and being woken back by it cost 0.1-0.45 ms each way here (the idle vCPU's
     * halt exit), more than the RequestReJIT itself (~0.2 ms). */
    int cpu = sched_getcpu();
    if (t->rj_affinity_ok && cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &t->rj_affinity) &&
        CPU_COUNT(&t->rj_affinity) > 1) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        j->affinity = t->rj_affinity;
        j->moved = pthread_setaffinity_np(t->rj_thread, sizeof one, &one) == 0;
    }
#endif
    pthread_mutex_lock(&t->rj_lock);
    enqueue(t, j);
#ifdef __linux__
    if (j->moved) {
        pthread_mutex_unlock(&t->rj_lock);
        const int64_t until = clrmux_mono_ns() + SAME_CPU_WAIT_NS;
        while (!atomic_load(&j->done) && clrmux_mono_ns() < until)
            sched_yield();
        pthread_mutex_lock(&t->rj_lock);
    }
#endif
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += REJIT_WAIT_SECONDS;
    int rc = 0;
    while (!j->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&t->rj_cond, &t->rj_lock, &ts);
    int done = j->done;
    HRESULT hr = j->hr;
    const char *where = "";
#ifdef __linux__
    if (done && j->moved && j->ran_cpu == cpu)
        where = ", on this thread's CPU";
#endif
    if (done) {
        free(mods), free(toks), free(j);
    } /* else the ReJIT thread still owns the job: it is leaked rather than freed under it */
    pthread_mutex_unlock(&t->rj_lock);
    if (!done)
        LOG_WARN("tracer: %s for %s not done after %d s%s", what, assembly, REJIT_WAIT_SECONDS,
                 revert ? "" : "; its first calls may not be traced");
    else if (FAILED(hr))
        LOG_ERROR("tracer: %s of %u method(s) of %s failed with HRESULT %s", what, (unsigned)n, assembly,
                  HR_STR(hr));
    else
        LOG_DEBUG("tracer: %s for %u method(s) of %s%s", revert ? "revert requested" : "ReJIT requested", (unsigned)n,
                  assembly, where);
    return done ? hr : E_FAIL;
}

__thread int tracer_rejit_inliners;

void tracer_request_rejit(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly)
{
    request(t, mod, tokens, n, assembly, 0, tracer_rejit_inliners);
}

HRESULT tracer_request_revert(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly)
{
    return request(t, mod, tokens, n, assembly, 1, 0);
}
