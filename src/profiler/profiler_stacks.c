/* The built-in profiler's stacks: DoStackSnapshot walks, the current thread's identity and
 * span, and the sampler's ticks (the suspend sampler's stop-the-world pause, the signal
 * sampler's tick in sigtick.c). See profiler_int.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "profiler/profiler_int.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- stacks ------------------------------------------------------------------------- */

static HRESULT STDMETHODCALLTYPE snap_cb(FunctionID fid, UINT_PTR ip, COR_PRF_FRAME_INFO fi, ULONG32 cs,
                                          BYTE ctx[], void *data)
{
    struct snap *s = data;
    if (s->n >= PROF_MAX_FRAMES) {
        s->truncated = 1;
        return E_FAIL; /* stops the walk */
    }
    s->f[s->n++] = fid ? (uint64_t)fid : (PROF_FRAME_NATIVE | ((uint64_t)ip & ~PROF_FRAME_TAG_MASK));
    return S_OK;
}

/* Walks `thread` (0: the current thread). Keeps what was collected even on failure. */
HRESULT prof_walk(struct profiler *p, ThreadID thread, struct snap *s)
{
    s->n = 0;
    s->truncated = 0;
    return ICorProfilerInfo3_DoStackSnapshot(p->info, thread, snap_cb, COR_PRF_SNAPSHOT_DEFAULT, s, NULL, 0);
}

/* The current thread's OS id and name, and its open span. */
void prof_current_thread(struct profiler *p, ThreadID id, struct prof_raw *r)
{
    uint32_t tid = 0;
    if (!id || prof_threads_lookup(&p->threads, id, &tid, r->tname, sizeof r->tname) != 0)
        r->tname[0] = 0;
    r->tid = tid ? tid : current_tid();
    if (!p->span_peek || !clrmux_span_context_read(p->span_peek(), 0, &r->span, 4))
        r->span.span_id = 0;
}

/* The open span of another thread (OS id tid), read without a lock (the thread may run). */
void prof_other_thread_span(struct profiler *p, uint32_t tid, struct prof_raw *r)
{
    if (!p->span_find || !clrmux_span_context_read(p->span_find(tid), tid, &r->span, 4))
        r->span.span_id = 0;
}

/* ---- sampler: one tick = one stop-the-world pause ----------------------------------- */

void prof_suspend_tick(struct profiler *p)
{
    int64_t t0 = mono_ns();
    HRESULT hr = ICorProfilerInfo10_SuspendRuntime(p->info10);
    if (hr == CORPROF_E_RUNTIME_UNINITIALIZED && !p->ticks) {
        /* The sampler starts in Initialize, before the runtime has finished starting (it
         * answers CORPROF_E_RUNTIME_UNINITIALIZED until EEStartup is done): sampling begins
         * at the first tick after that, without a word. */
        p->ticks_before_start++;
        return;
    }
    if (hr == CORPROF_E_SUSPENSION_IN_PROGRESS) {
        /* the runtime is suspended already (a garbage collection): this tick is skipped */
        p->suspend_busy++;
        return;
    }
    if (!p->ticks && !p->suspend_failures)
        LOG_DEBUG("profiler '%s': sampling begins (%llu tick(s) waited for the runtime to start)", p->name,
                  (unsigned long long)p->ticks_before_start);
    if (FAILED(hr)) {
        if (p->suspend_failures++ == 0)
            LOG_WARN("profiler '%s': SuspendRuntime failed with HRESULT %s; this tick has no cpu/wall sample "
                     "(logged once)", p->name, HR_STR(hr));
        return;
    }
    int64_t t_susp = mono_ns();
    size_t n = prof_threads_snapshot(&p->threads, p->views, PROF_MAX_THREADS);
    p->views_gen = UINT64_MAX; /* views[] overwritten: the signal sampler's copy is gone */
    int64_t interval = (int64_t)p->cfg.interval_ms * 1000000;
    static struct snap s; /* sampler thread only */
    for (size_t i = 0; i < n; i++) {
        struct prof_thread *t = &p->views[i].t;
        if (!t->tid)
            continue;
        int64_t cpu = thread_cpu_ns(t->tid);
        struct prof_raw r;
        memset(&r, 0, offsetof(struct prof_raw, type) + 1);
        r.kind = PROF_K_SAMPLE;
        r.tid = t->tid;
        snprintf(r.tname, sizeof r.tname, "%s", t->name);
        if (p->cfg.cpu && cpu >= 0)
            r.v0 = cpu > t->last_cpu_ns ? cpu - t->last_cpu_ns : 0;
        if (p->cfg.wall)
            r.v1 = t->last_wall_ns ? t0 - t->last_wall_ns : interval;
        t->last_cpu_ns = cpu >= 0 ? cpu : t->last_cpu_ns;
        t->last_wall_ns = t0;
        if (!r.v0 && !r.v1)
            continue;
        prof_other_thread_span(p, t->tid, &r);
        HRESULT whr = prof_walk(p, t->id, &s);
        if (FAILED(whr) && s.n == 0) {
            if (whr == E_FAIL)
                p->snap_empty++; /* nothing managed on the stack (a runtime thread waiting) */
            else
                p->snap_failures++;
        }
        r.truncated = s.truncated;
        prof_rawq_push(&p->q, &r, s.f, s.n);
    }
    int64_t t_res = mono_ns();
    ICorProfilerInfo10_ResumeRuntime(p->info10);
    int64_t t1 = mono_ns();
    for (size_t i = 0; i < n; i++)
        prof_threads_set_last(&p->threads, p->views[i].slot, p->views[i].t.id, p->views[i].t.last_cpu_ns,
                              p->views[i].t.last_wall_ns);
    p->ticks++;
    p->suspend_ns += (uint64_t)(t_susp - t0);
    p->walk_ns += (uint64_t)(t_res - t_susp);
    p->resume_ns += (uint64_t)(t1 - t_res);
    if ((uint64_t)(t_res - t0) > p->pause_max)
        p->pause_max = (uint64_t)(t_res - t0);
    p->pause_ewma = p->pause_ewma ? (p->pause_ewma * 7 + (t_res - t0)) / 8 : (t_res - t0);
}

/* ---- the signal sampler's tick (sigtick.c): no pause --------------------------------- */

void prof_signal_tick(struct profiler *p)
{
    /* every tick (one sigaction call): if the application or another library replaced our
     * SIGPROF handler, our timers must stop at once rather than hit its handler */
    char why[160];
    if (prof_sig_check(p->sig, why, sizeof why) != 0) {
        prof_sig_stop(p->sig);
        prof_sig_flush_wall(p->sig, &p->q);
        atomic_store(&p->mode, PROF_SAMPLER_SUSPEND);
        if (p->info10)
            LOG_WARN("profiler '%s': %s; switching to the suspend sampler", p->name, why);
        else
            LOG_WARN("profiler '%s': %s; no cpu/wall samples from now on (no ICorProfilerInfo10 for the "
                     "suspend sampler)", p->name, why);
        return;
    }
    /* the registry is copied only when a thread came, went or was renamed */
    int changed = prof_threads_snapshot_changed(&p->threads, &p->views_gen, p->views, PROF_MAX_THREADS, &p->nviews);
    prof_sig_tick(p->sig, p->views, p->nviews, changed, &p->q);
    p->sig_ticks++;
}

/* "signal sampler: ..." delivered rates, for the log and the profile's comments. */
void prof_sig_summary(struct profiler *p, char *out, size_t outsz)
{
    struct prof_sig_stats st;
    prof_sig_get_stats(p->sig, &st);
    double secs = (double)(mono_ns() - p->sig_start) / 1e9;
    snprintf(out, outsz,
             "signal sampler (%llu ticks, %.1f per second) delivered %llu cpu samples (%.1f per CPU-second of a thread, busiest thread %llu), "
             "%llu wall samples (%.1f per second per thread; %llu by signal, %llu on unchanged stacks, %llu on "
             "a running thread's next walk); "
             "%llu truncated walks, %llu cut at %d frames, %llu dropped (ring full), %llu wall signals unanswered "
             "(%llu merged into a cpu signal), "
             "%llu threads; handler %.1f us per walk",
             (unsigned long long)p->sig_ticks, secs > 0 ? (double)p->sig_ticks / secs : 0.0,
             (unsigned long long)st.cpu_samples, st.cpu_ns > 0 ? (double)st.cpu_samples * 1e9 / (double)st.cpu_ns : 0.0,
             (unsigned long long)st.max_thread_cpu_samples, (unsigned long long)st.wall_samples,
             st.wall_ns > 0 ? (double)st.wall_samples * 1e9 / (double)st.wall_ns : 0.0,
             (unsigned long long)st.wall_signals, (unsigned long long)st.wall_reused,
             (unsigned long long)st.wall_from_cpu,
             (unsigned long long)st.truncated, (unsigned long long)st.depth_cut, PROF_MAX_FRAMES,
             (unsigned long long)st.ring_drops, (unsigned long long)st.unresponsive,
             (unsigned long long)st.wall_merged, (unsigned long long)st.threads,
             st.handler_ns_avg / 1000.0);
}
