/* The built-in continuous profiler: an ICorProfilerCallback11 child (`builtin = profiler`)
 * that reaches the runtime only through its own ICorProfilerInfo proxy, and writes one
 * gzip'd pprof file per period. See src/profiler/README.md for the design and its costs. */
#define COBJMACROS
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/hresult.h"
#include "common/lazymem.h"
#include "common/log.h"
#include "common/platform.h"
#include "loader/child_base.h"
#include "profiler/framename.h"
#include "profiler/pprof.h"
#include "profiler/prof.h"
#include "tracer/otlp_http.h"

#define EXPORT __attribute__((visibility("default")))
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define RAW_RECORDS 8192
#define RAW_FRAMES (128 * 1024)
#define NAME_ENTRIES 65536
#define NAME_ARENA (8u << 20)
/* Distinct samples a period may spend on span-labelled ones (of max_samples = 16384): each
 * span makes its own samples, so a busy service would otherwise fill the profile with them
 * and drop later samples outright; past this, samples keep their stack and values without
 * the span labels (counted, and said in the profile's comments and the log). */
#define SPAN_SAMPLE_CAP 12288
#define NO_FRAMES "[no managed frames]"
#define TRUNCATED "[truncated]"

/* sample types, in this order */
enum { V_CPU, V_WALL, V_EXC, V_ALLOC_N, V_ALLOC_B, V_LOCK_N, V_LOCK_NS, V_COUNT };
static const clrmux_pprof_value_type k_types[V_COUNT] = {
    {"cpu", "nanoseconds"},        {"wall", "nanoseconds"},     {"exception", "count"},
    {"alloc-samples", "count"},    {"alloc-size", "bytes"},     {"lock-count", "count"},
    {"lock-time", "nanoseconds"},
};

struct profiler {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    char name[CLRMUX_NAME_MAX];
    struct prof_config cfg;
    ICorProfilerInfo3 *info;    /* names, stacks, threads */
    ICorProfilerInfo10 *info10; /* SuspendRuntime / ResumeRuntime (NULL: no cpu/wall) */
    ICorProfilerInfo12 *info12; /* EventPipe (NULL: no allocations/contention) */
    struct prof_sig *sig;       /* the signal sampler (NULL: the suspend sampler) */
    _Atomic int mode;           /* PROF_SAMPLER_SIGNAL / _SUSPEND: the sampler in use */
    int64_t sig_start;          /* mono ns when the signal sampler started */
    struct prof_threads threads;
    struct prof_rawq q;
    struct prof_names *names;
    clrmux_pprof_builder *pb;
    char process[128];
    long pid;
    int output_ok;
    struct prof_push *push; /* Pyroscope (endpoint set), or NULL */
    /* the built-in tracer's span contexts (the host's; NULL without a host: no span labels) */
    prof_span_peek_fn span_peek;
    uint64_t span_unlabelled; /* this period: samples whose span labels were left out (cap) */
    struct clrmux_span_context *(*span_find)(uint32_t tid);

    pthread_t sampler;
    int sampler_started;
    /* The EventPipe session is started by a short-lived thread of ours (session_main), and
     * the runtime's managed EventSource side then runs on it: it becomes a runtime thread.
     * It is ours, not the app's: never sampled (its tid and ThreadID kept here, 0 until then).
     * Not the sampler thread itself: a runtime thread cannot SuspendRuntime on .NET 8
     * (CORPROF_E_UNSUPPORTED_CALL_SEQUENCE), which the suspend sampler needs. */
    _Atomic uint32_t own_tid;
    _Atomic ThreadID own_id;
    pthread_t session_thread;
    int session_thread_started;     /* by the sampler thread; joined by it or at Shutdown */
    _Atomic int session_thread_done;
    /* held by the sampler while it works (tick, drain, flush), by Shutdown and by the last
     * gasp (common/lastgasp.h), which sets `final`: no file is written after it */
    pthread_mutex_t work_lock;
    int final;
    _Atomic int stop; /* 1: the sampler thread ends; it sleeps on this word (a futex) */
    _Atomic int shut_down;

    int want_session;
    _Atomic int session_started;
    EVENTPIPE_SESSION session;
    int session_attempts;
    int64_t session_due; /* CLOCK_MONOTONIC ns: the session is started from then on */

    struct prof_thread_view *views; /* sampler's copy of the registry */
    size_t nviews;                  /* the signal sampler's copy: views[nviews] ... */
    uint64_t views_gen;             /* ... made at this registry generation */
    int64_t period_start_unix, period_start_mono;
    uint64_t registry_drops_reported;

    /* statistics: sampler-owned, except the atomics bumped by callbacks */
    /* per tick: t0 SuspendRuntime called, t_susp it returned, t_res ResumeRuntime called, t1 it
     * returned. The world is stopped from (about) t_susp to t_res. */
    uint64_t snap_empty, sig_ticks;
    char last_path[PATH_MAX];    /* the last profile's name, and how many share its second */
    unsigned same_second;
    uint64_t ticks_before_start; /* ticks skipped: the runtime had not started yet */
    uint64_t suspend_busy;       /* ticks skipped: another suspension was in progress */
    uint64_t ticks, suspend_failures, snap_failures, pause_max, suspend_ns, walk_ns, resume_ns;
    int64_t pause_ewma;     /* ns, of (t_res - t0) */
    uint64_t interval_sum;  /* ns, of the intervals actually used (stretched by the budget) */
    _Atomic uint64_t exceptions, allocations, contentions;
    uint64_t files, file_failures, raw_drops_total, pprof_drops_total;
    int64_t sampler_cpu_ns;
};

static struct profiler *impl(ICorProfilerCallback11 *i) { return (struct profiler *)i; }

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU clock of thread `tid` of this process (Linux: MAKE_THREAD_CPUCLOCK(tid,
 * CPUCLOCK_SCHED)). -1 when the thread is gone. */
static int64_t thread_cpu_ns(uint32_t tid)
{
    clockid_t cid = (clockid_t)((~(unsigned)tid) << 3) | 6;
    struct timespec ts;
    if (clock_gettime(cid, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t current_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* ---- stacks ------------------------------------------------------------------------- */

struct snap {
    uint64_t f[PROF_MAX_FRAMES];
    uint16_t n;
    uint8_t truncated;
};

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
static HRESULT walk(struct profiler *p, ThreadID thread, struct snap *s)
{
    s->n = 0;
    s->truncated = 0;
    return ICorProfilerInfo3_DoStackSnapshot(p->info, thread, snap_cb, COR_PRF_SNAPSHOT_DEFAULT, s, NULL, 0);
}

/* The current thread's OS id and name, and its open span. */
static void current_thread(struct profiler *p, ThreadID id, struct prof_raw *r)
{
    uint32_t tid = 0;
    if (!id || prof_threads_lookup(&p->threads, id, &tid, r->tname, sizeof r->tname) != 0)
        r->tname[0] = 0;
    r->tid = tid ? tid : current_tid();
    if (!p->span_peek || !clrmux_span_context_read(p->span_peek(), 0, &r->span, 4))
        r->span.span_id = 0;
}

/* The open span of another thread (OS id tid), read without a lock (the thread may run). */
static void other_thread_span(struct profiler *p, uint32_t tid, struct prof_raw *r)
{
    if (!p->span_find || !clrmux_span_context_read(p->span_find(tid), tid, &r->span, 4))
        r->span.span_id = 0;
}

/* ---- sampler: one tick = one stop-the-world pause ----------------------------------- */

static void tick(struct profiler *p)
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
        other_thread_span(p, t->tid, &r);
        HRESULT whr = walk(p, t->id, &s);
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

/* ---- the signal sampler's tick (sigsampler.c): no pause ------------------------------ */

static void sig_tick(struct profiler *p)
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
static void sig_summary(struct profiler *p, char *out, size_t outsz)
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

/* ---- drain: raw ids -> names -> pprof (sampler thread, or Shutdown after it stopped) -- */

static uint64_t ip_fid(void *ctx, uint64_t ip)
{
    return prof_names_ip_function(ctx, (uintptr_t)ip);
}

static int native_code(void *ctx, uint64_t ip)
{
    (void)ctx;
    return prof_native_code(ip);
}

static void add_raw(struct profiler *p, const struct prof_raw *r, const uint64_t *frames)
{
    const char *names[PROF_MAX_FRAMES + 2];
    size_t nn = 0;
    /* a signal walk that passed an OSR-shaped frame record: keep its caller or drop it */
    uint64_t folded[PROF_MAX_FRAMES];
    uint16_t nframes = r->nframes;
    for (uint16_t i = 0; i < nframes && i < PROF_MAX_FRAMES; i++) {
        if ((frames[i] & PROF_FRAME_TAG_MASK) == PROF_FRAME_OSR_CALLER) {
            if (nframes > PROF_MAX_FRAMES)
                nframes = PROF_MAX_FRAMES;
            memcpy(folded, frames, (size_t)nframes * sizeof folded[0]);
            nframes = (uint16_t)prof_osr_fold(folded, nframes, ip_fid, native_code, p->names);
            frames = folded;
            break;
        }
    }
    char pseudo[160];
    prof_names_begin(p->names);
    if (r->kind == PROF_K_EXCEPTION) {
        snprintf(pseudo, sizeof pseudo, "[throw] %s", prof_names_class(p->names, r->class_id));
        names[nn++] = pseudo;
    } else if (r->kind == PROF_K_ALLOC) {
        snprintf(pseudo, sizeof pseudo, "[alloc] %s", r->type[0] ? r->type : CLRMUX_FRAME_UNKNOWN);
        names[nn++] = pseudo;
    }
    const char *prev_native = NULL;
    for (uint16_t i = 0; i < nframes; i++) {
        uint64_t f = frames[i];
        uint64_t v = f & ~PROF_FRAME_TAG_MASK;
        const char *s;
        FunctionID fid = 0;
        switch (f & PROF_FRAME_TAG_MASK) {
        case PROF_FRAME_FUNCTION: fid = (FunctionID)v; break;
        case PROF_FRAME_MANAGED_IP: fid = prof_names_ip_function(p->names, (uintptr_t)v); break;
        default: break;
        }
        if (fid) {
            s = prof_names_function(p->names, fid);
            prev_native = NULL;
        } else {
            s = prof_names_native(p->names, (uintptr_t)v);
            if (prev_native && strcmp(prev_native, s) == 0)
                continue; /* one frame per module */
            prev_native = s;
        }
        names[nn++] = s;
    }
    /* A thread caught by SuspendRuntime in managed code stops at a GC poll: the poll frames
     * are where our own suspension parked it, not where it spent its time. */
    size_t skip = 0;
    if (r->kind == PROF_K_SAMPLE)
        while (skip < nn && skip < 2 && strncmp(names[skip], "System.Threading.Thread.", 24) == 0 &&
               (strcmp(names[skip] + 24, "PollGC") == 0 || strncmp(names[skip] + 24, "<PollGC>", 8) == 0))
            skip++;
    if (skip && skip < nn) {
        memmove(names, names + skip, (nn - skip) * sizeof names[0]);
        nn -= skip;
    }
    if (r->nframes == 0)
        names[nn++] = NO_FRAMES;
    else if (r->truncated && nn < PROF_MAX_FRAMES + 2)
        names[nn++] = TRUNCATED; /* the root we could not reach */
    int64_t values[V_COUNT] = {0};
    switch (r->kind) {
    case PROF_K_SAMPLE: values[V_CPU] = r->v0; values[V_WALL] = r->v1; break;
    case PROF_K_EXCEPTION: values[V_EXC] = r->v0; break;
    case PROF_K_ALLOC: values[V_ALLOC_N] = r->v0; values[V_ALLOC_B] = r->v1; break;
    case PROF_K_LOCK: values[V_LOCK_N] = r->v0; values[V_LOCK_NS] = r->v1; break;
    default: return;
    }
    clrmux_pprof_label labels[5];
    size_t nl = 0;
    if (r->tid)
        labels[nl++] = (clrmux_pprof_label){.key = "thread id", .num = r->tid};
    if (r->tname[0])
        labels[nl++] = (clrmux_pprof_label){.key = "thread name", .str = r->tname};
    /* Datadog's label names; the ids in lowercase hex as OTLP spells them (spanId,
     * traceId), so that an id copied from the spans works with -tagfocus: a decimal id
     * would be taken by pprof for a numeric range (and one above 2^63 makes it fail) */
    char span_hex[17], root_hex[17], trace_hex[33];
    if (r->span.span_id && clrmux_pprof_sample_count(p->pb) >= SPAN_SAMPLE_CAP)
        p->span_unlabelled++;
    else if (r->span.span_id) {
        snprintf(span_hex, sizeof span_hex, "%016llx", (unsigned long long)r->span.span_id);
        snprintf(root_hex, sizeof root_hex, "%016llx", (unsigned long long)r->span.local_root_id);
        for (int i = 0; i < 16; i++)
            snprintf(trace_hex + 2 * i, 3, "%02x", r->span.trace_id[i]);
        labels[nl++] = (clrmux_pprof_label){.key = "span id", .str = span_hex};
        labels[nl++] = (clrmux_pprof_label){.key = "local root span id", .str = root_hex};
        labels[nl++] = (clrmux_pprof_label){.key = "trace id", .str = trace_hex};
    }
    clrmux_pprof_add_sample(p->pb, names, nn, values, V_COUNT, labels, nl);
}

static void drain(struct profiler *p)
{
    struct prof_rawbuf *b = prof_rawq_swap(&p->q);
    for (uint32_t i = 0; i < b->nrecs; i++)
        add_raw(p, &b->recs[i], &b->frames[b->recs[i].first]);
    prof_rawbuf_clear(b);
}

/* Writes the current period's file and starts the next period. `last`: NULL for a periodic
 * file, "shutdown", or the last gasp's cause ("SIGTERM", "exit"...). */
static void flush(struct profiler *p, const char *last)
{
    if (p->sig)
        prof_sig_flush_wall(p->sig, &p->q);
    drain(p);
    drain(p); /* both buffers: events pushed while the first was drained */
    int64_t now_unix = unix_ns(), now_mono = mono_ns();
    clrmux_pprof_set_time(p->pb, p->period_start_unix, now_mono - p->period_start_mono);
    uint64_t raw_drops = prof_rawq_take_dropped(&p->q);
    uint64_t pprof_drops = clrmux_pprof_dropped(p->pb, CLRMUX_PPROF_DROP_REASON_COUNT);
    char c[256];
    if (atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL)
        snprintf(c, sizeof c, "clrmux profiler: signal sampler (no pause), sampling interval %d ms, period %d s%s",
                 p->cfg.interval_ms, p->cfg.period_s, !last ? "" : strcmp(last, "shutdown") == 0 ? ", last period (shutdown)" : ", last period (the process ended without Shutdown)");
    else
        snprintf(c, sizeof c, "clrmux profiler: suspend sampler, sampling interval %d ms (average used %.1f ms, pause "
                 "budget %d%%), period %d s%s", p->cfg.interval_ms,
                 p->ticks ? (double)p->interval_sum / 1e6 / (double)p->ticks : 0.0, p->cfg.pause_budget_pct,
                 p->cfg.period_s, !last ? "" : strcmp(last, "shutdown") == 0 ? ", last period (shutdown)" : ", last period (the process ended without Shutdown)");
    clrmux_pprof_add_comment(p->pb, c);
    if (p->sig) {
        char sc[640];
        sig_summary(p, sc, sizeof sc);
        clrmux_pprof_add_comment(p->pb, sc);
        LOG_INFO("profiler '%s': %s", p->name, sc);
    }
    if (raw_drops) {
        snprintf(c, sizeof c, "dropped %llu events: raw sample buffer full", (unsigned long long)raw_drops);
        clrmux_pprof_add_comment(p->pb, c);
    }
    if (p->span_unlabelled) {
        snprintf(c, sizeof c, "%llu samples without their span labels: more than %d distinct samples this period",
                 (unsigned long long)p->span_unlabelled, SPAN_SAMPLE_CAP);
        clrmux_pprof_add_comment(p->pb, c);
        LOG_INFO("profiler '%s': %s", p->name, c);
        p->span_unlabelled = 0;
    }
    uint64_t reg = p->threads.dropped;
    if (reg > p->registry_drops_reported) {
        snprintf(c, sizeof c, "%llu threads not tracked: thread registry full (%d)",
                 (unsigned long long)(reg - p->registry_drops_reported), PROF_MAX_THREADS);
        clrmux_pprof_add_comment(p->pb, c);
    }
    if (raw_drops || pprof_drops || reg > p->registry_drops_reported)
        LOG_WARN("profiler '%s': this period dropped %llu events (raw buffer full) and %llu samples (profile "
                 "limits); %llu threads untracked", p->name, (unsigned long long)raw_drops,
                 (unsigned long long)pprof_drops, (unsigned long long)(reg - p->registry_drops_reported));
    p->registry_drops_reported = reg;
    p->raw_drops_total += raw_drops;
    p->pprof_drops_total += pprof_drops;
    if (p->output_ok) {
        char path[PATH_MAX];
        int bad = prof_output_path(path, sizeof path, p->cfg.output_dir, p->process, p->pid, p->period_start_unix);
        if (!bad && strcmp(path, p->last_path) == 0) {
            /* a second period that started within the same second (a flush at an unhandled
             * exception, then Shutdown): <name>-2.pb.gz, -3, ... instead of overwriting */
            size_t l = strlen(path) - strlen(".pb.gz");
            char tail[32];
            snprintf(tail, sizeof tail, "-%u.pb.gz", ++p->same_second);
            if (l + strlen(tail) + 1 > sizeof path)
                bad = -1;
            else
                memcpy(path + l, tail, strlen(tail) + 1);
        } else if (!bad) {
            snprintf(p->last_path, sizeof p->last_path, "%s", path);
            p->same_second = 1;
        }
        if (bad) {
            p->file_failures++;
            LOG_ERROR("profiler '%s': output path too long in %s", p->name, p->cfg.output_dir);
        } else {
            int rc = clrmux_pprof_write_file(p->pb, path);
            if (rc != 0) {
                p->file_failures++;
                LOG_ERROR("profiler '%s': cannot write %s: %s", p->name, path, strerror(-rc));
            } else {
                p->files++;
                LOG_INFO("profiler '%s': wrote %s (%zu samples, %zu functions)", p->name, path,
                         clrmux_pprof_sample_count(p->pb), clrmux_pprof_function_count(p->pb));
            }
        }
    }
    if (p->push) { /* the same profile to Pyroscope; sent now for a bounded time, retried later */
        uint8_t *gz = NULL;
        size_t len = 0;
        if (clrmux_pprof_serialize(p->pb, &gz, &len) == 0)
            prof_push_send(p->push, gz, len, p->period_start_unix, now_unix);
        prof_push_pump(p->push, last ? 0 : 200);
    }
    clrmux_pprof_reset(p->pb);
    p->period_start_unix = now_unix;
    p->period_start_mono = now_mono;
}

/* ---- EventPipe session ---------------------------------------------------------------- */

static void start_session(struct profiler *p)
{
    static const WCHAR provider[] = {'M', 'i', 'c', 'r', 'o', 's', 'o', 'f', 't', '-', 'W', 'i', 'n', 'd', 'o',
                                     'w', 's', '-', 'D', 'o', 't', 'N', 'E', 'T', 'R', 'u', 'n', 't', 'i', 'm',
                                     'e', 0};
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG pc = {
        .providerName = provider,
        .keywords = (p->cfg.allocations ? PROF_KEYWORD_GC : 0) | (p->cfg.contention ? PROF_KEYWORD_CONTENTION : 0),
        .loggingLevel = p->cfg.allocations ? COR_PRF_EVENTPIPE_VERBOSE : COR_PRF_EVENTPIPE_INFORMATIONAL,
        .filterData = NULL,
    };
    EVENTPIPE_SESSION s = 0;
    HRESULT hr = ICorProfilerInfo12_EventPipeStartSession(p->info12, 1, &pc, FALSE, &s);
    p->session_attempts++;
    if (SUCCEEDED(hr)) {
        p->session = s;
        atomic_store(&p->session_started, 1);
        LOG_INFO("profiler '%s': EventPipe session started %lld ms after Initialize (eventpipe_delay_ms = %d; "
                 "Microsoft-Windows-DotNETRuntime keywords 0x%llX)",
                 p->name, (long long)((mono_ns() - p->session_due) / 1000000 + p->cfg.eventpipe_delay_ms),
                 p->cfg.eventpipe_delay_ms,
                 (unsigned long long)pc.keywords);
    } else {
        LOG_WARN("profiler '%s': EventPipeStartSession failed with HRESULT %s (attempt %d)%s", p->name,
                 HR_STR(hr), p->session_attempts,
                 p->session_attempts < 3 ? "; retried on a later tick" : "; no allocation/contention profile");
    }
}

/* ---- the sampler thread --------------------------------------------------------------- */

/* The sampler thread sleeps until its next tick (CLOCK_MONOTONIC ns) or until p->stop is set:
 * a futex wait on p->stop with an absolute timeout, one system call per tick (a condition
 * variable's timed wait took two, and the tick's own system calls are few). */
static void sleep_until(struct profiler *p, int64_t deadline)
{
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    while (!atomic_load(&p->stop)) {
        /* FUTEX_WAIT_BITSET: an absolute timeout on CLOCK_MONOTONIC; returns at once
         * (EAGAIN) when stop is no longer 0 */
        long r = syscall(SYS_futex, (int *)&p->stop, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts, NULL,
                         FUTEX_BITSET_MATCH_ANY);
        if (r != 0 && errno == ETIMEDOUT)
            return;
        if (r != 0 && errno != EINTR && errno != EAGAIN) { /* no futex: sleep in steps of 1 ms */
            int64_t now = mono_ns();
            if (now >= deadline)
                return;
            int64_t step = deadline - now < 1000000 ? deadline - now : 1000000;
            struct timespec st = {.tv_sec = 0, .tv_nsec = step};
            nanosleep(&st, NULL);
        }
    }
}

/* Sets p->stop and wakes the sampler thread. */
static void stop_and_wake(struct profiler *p)
{
    atomic_store(&p->stop, 1);
    syscall(SYS_futex, (int *)&p->stop, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

/* The thread that starts the EventPipe session eventpipe_delay_ms after Initialize, then
 * ends: the runtime's managed EventSource work that the session wakes runs on it. */
static void *session_main(void *arg)
{
    struct profiler *p = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-evpipe");
    atomic_store(&p->own_tid, current_tid());
    if (!atomic_load(&p->stop))
        start_session(p);
    atomic_store(&p->session_thread_done, 1);
    return NULL;
}

static void *sampler_main(void *arg)
{
    struct profiler *p = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-prof");
    int64_t interval = (int64_t)p->cfg.interval_ms * 1000000;
    int64_t period = (int64_t)p->cfg.period_s * 1000000000;
    int64_t next = mono_ns() + interval;
    int sample = (p->sig || p->info10) && (p->cfg.cpu || p->cfg.wall);
    while (!atomic_load(&p->stop)) {
        sleep_until(p, next);
        if (atomic_load(&p->stop))
            break;
        pthread_mutex_lock(&p->work_lock);
        if (p->final) {
            pthread_mutex_unlock(&p->work_lock);
            break;
        }
        if (p->session_thread_started && atomic_load(&p->session_thread_done)) {
            pthread_join(p->session_thread, NULL);
            p->session_thread_started = 0;
        }
        if (p->want_session && !atomic_load(&p->session_started) && p->session_attempts < 3 &&
            !p->session_thread_started && mono_ns() >= p->session_due) {
            atomic_store(&p->session_thread_done, 0);
            if (pthread_create(&p->session_thread, NULL, session_main, p) == 0)
                p->session_thread_started = 1;
            else
                start_session(p); /* no thread for it: from here, this once */
        }
        if (sample && atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL)
            sig_tick(p);
        else if (sample && p->info10)
            tick(p);
        drain(p);
        int64_t now = mono_ns();
        if (now - p->period_start_mono >= period)
            flush(p, NULL);
        /* the pause budget: at most pause_budget_pct of wall time stopped (at most 1 s) */
        int64_t iv = interval;
        if (sample && atomic_load(&p->mode) == PROF_SAMPLER_SUSPEND && p->cfg.pause_budget_pct > 0) {
            int64_t need = p->pause_ewma * 100 / p->cfg.pause_budget_pct;
            iv = need > iv ? (need < 1000000000 ? need : 1000000000) : iv;
        }
        pthread_mutex_unlock(&p->work_lock);
        if (atomic_load(&p->mode) == PROF_SAMPLER_SUSPEND)
            p->interval_sum += (uint64_t)iv;
        next += iv;
        if (next <= now)
            next = now + iv; /* missed ticks are skipped, not bunched */
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        p->sampler_cpu_ns = (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec;
    return NULL;
}

/* ---- callbacks ------------------------------------------------------------------------ */

static HRESULT STDMETHODCALLTYPE pr_ThreadCreated(ICorProfilerCallback11 *This, ThreadID id)
{
    struct profiler *p = impl(This);
    DWORD os = 0;
    if (FAILED(ICorProfilerInfo3_GetThreadInfo(p->info, id, &os)))
        os = 0;
    uint32_t own = atomic_load(&p->own_tid);
    if (own && (current_tid() == own || os == own)) {
        atomic_store(&p->own_id, id); /* our session thread, seen by the runtime: not sampled */
        return S_OK;
    }
    prof_threads_add(&p->threads, id, os);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_ThreadDestroyed(ICorProfilerCallback11 *This, ThreadID id)
{
    prof_threads_remove(&impl(This)->threads, id);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_ThreadAssignedToOSThread(ICorProfilerCallback11 *This, ThreadID id, DWORD os)
{
    struct profiler *p = impl(This);
    if (id == atomic_load(&p->own_id) || (os && os == atomic_load(&p->own_tid)))
        return S_OK;
    prof_threads_set_tid(&p->threads, id, os);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_ThreadNameChanged(ICorProfilerCallback11 *This, ThreadID id, ULONG cch,
                                                      WCHAR *name)
{
    if (id == atomic_load(&impl(This)->own_id))
        return S_OK;
    char utf8[PROF_THREAD_NAME];
    clrmux_frame_utf16_to_utf8(utf8, sizeof utf8, (const uint16_t *)name, name ? cch : 0);
    prof_threads_set_name(&impl(This)->threads, id, utf8);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID obj)
{
    struct profiler *p = impl(This);
    if (!p->cfg.exceptions || atomic_load_explicit(&p->shut_down, memory_order_relaxed))
        return S_OK;
    atomic_fetch_add_explicit(&p->exceptions, 1, memory_order_relaxed);
    struct prof_raw r;
    memset(&r, 0, sizeof r);
    r.kind = PROF_K_EXCEPTION;
    r.v0 = 1;
    if (FAILED(ICorProfilerInfo3_GetClassFromObject(p->info, obj, &r.class_id)))
        r.class_id = 0;
    ThreadID cur = 0;
    if (FAILED(ICorProfilerInfo3_GetCurrentThreadID(p->info, &cur)))
        cur = 0;
    current_thread(p, cur, &r);
    struct snap s;
    walk(p, 0, &s);
    r.truncated = s.truncated;
    prof_rawq_push(&p->q, &r, s.f, s.n);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_EventPipeEventDelivered(
    ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
    ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
    LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames, UINT_PTR *stackFrames)
{
    struct profiler *p = impl(This);
    if (atomic_load_explicit(&p->shut_down, memory_order_relaxed))
        return S_OK;
    struct prof_raw r;
    memset(&r, 0, sizeof r);
    if (eventId == PROF_EVENT_ALLOCATION_TICK && p->cfg.allocations) {
        struct prof_alloc_tick a;
        if (prof_parse_alloc_tick(eventData, cbEventData, eventVersion, sizeof(void *), &a) != 0)
            return S_OK;
        atomic_fetch_add_explicit(&p->allocations, 1, memory_order_relaxed);
        r.kind = PROF_K_ALLOC;
        r.v0 = 1;
        r.v1 = (int64_t)a.bytes;
        snprintf(r.type, sizeof r.type, "%s", a.type_name);
    } else if (eventId == PROF_EVENT_CONTENTION_STOP && p->cfg.contention) {
        double ns;
        if (prof_parse_contention_stop(eventData, cbEventData, eventVersion, &ns) != 0)
            return S_OK;
        atomic_fetch_add_explicit(&p->contentions, 1, memory_order_relaxed);
        r.kind = PROF_K_LOCK;
        r.v0 = 1;
        r.v1 = (int64_t)ns;
    } else {
        return S_OK;
    }
    ThreadID cur = 0;
    if (FAILED(ICorProfilerInfo3_GetCurrentThreadID(p->info, &cur)))
        cur = 0;
    struct snap s;
    s.n = 0;
    s.truncated = 0;
    size_t n = stackFrames ? prof_event_stack_frames(numStackFrames, PROF_MAX_FRAMES) : 0;
    for (size_t i = 0; i < n; i++)
        s.f[s.n++] = PROF_FRAME_MANAGED_IP | ((uint64_t)stackFrames[i] & ~PROF_FRAME_TAG_MASK);
    /* in-process sessions report eventThread 0 and no stack for events of the current
     * thread (.NET 10): walk it synchronously, as allowed from a callback */
    if (n == 0 && (!eventThread || eventThread == cur)) {
        walk(p, 0, &s);
    }
    if (eventThread && eventThread != cur) {
        if (prof_threads_lookup(&p->threads, eventThread, &r.tid, r.tname, sizeof r.tname) != 0)
            r.tid = 0;
        else
            other_thread_span(p, r.tid, &r); /* the span it is in now: the closest we know */
    } else {
        current_thread(p, cur, &r);
    }
    r.truncated = s.truncated;
    prof_rawq_push(&p->q, &r, s.f, s.n);
    return S_OK;
}

static void stop_sampler(struct profiler *p)
{
    if (!p->sampler_started)
        return;
    stop_and_wake(p);
    pthread_join(p->sampler, NULL);
    p->sampler_started = 0;
    if (p->session_thread_started) { /* starting the session: bounded, it is the runtime's call */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_timedjoin_np(p->session_thread, NULL, &ts) != 0) {
            LOG_WARN("profiler '%s': the EventPipe session is still starting at shutdown; not waited for", p->name);
            pthread_detach(p->session_thread);
        }
        p->session_thread_started = 0;
    }
}

/* The process ends without Shutdown (common/lastgasp.h): the current period, up to now, as a
 * readable file; nothing written after it (final), or, for an unhandled exception (not
 * final: the process may go on), a new period starts and sampling goes on. The last-gasp
 * thread. */
static void prof_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    struct profiler *p = ctx;
    if (final)
        stop_and_wake(p); /* no more ticks */
    if (clrmux_lastgasp_lock(&p->work_lock, deadline_ns) != 0) {
        LOG_ERROR("profiler '%s': last gasp (%s): the sampler did not finish its tick in time; the current period "
                  "(%.1f s) is lost", p->name, cause, (double)(mono_ns() - p->period_start_mono) / 1e9);
        return;
    }
    if (!p->final) {
        uint64_t files = p->files;
        double secs = (double)(mono_ns() - p->period_start_mono) / 1e9;
        flush(p, final ? cause : NULL);
        p->final = final;
        if (p->files > files)
            LOG_WARN("profiler '%s': last gasp (%s): the current period (%.1f s, up to now) is written; %llu file(s) "
                     "in all; lost: nothing sampled before this point", p->name, cause, secs,
                     (unsigned long long)p->files);
        else
            LOG_ERROR("profiler '%s': last gasp (%s): the current period (%.1f s) could not be written", p->name,
                      cause, secs);
    }
    pthread_mutex_unlock(&p->work_lock);
}

static HRESULT STDMETHODCALLTYPE pr_Shutdown(ICorProfilerCallback11 *This)
{
    struct profiler *p = impl(This);
    if (atomic_load(&p->shut_down))
        return S_OK;
    prof_lastgasp_unregister(prof_last_gasp, p); /* waits for a last gasp under way */
    stop_sampler(p);
    if (p->sig)
        prof_sig_stop(p->sig);
    if (atomic_load(&p->session_started)) {
        atomic_store(&p->session_started, 0);
        ICorProfilerInfo12_EventPipeStopSession(p->info12, p->session);
    }
    pthread_mutex_lock(&p->work_lock);
    if (!p->final)
        flush(p, "shutdown");
    p->final = 1;
    pthread_mutex_unlock(&p->work_lock);
    if (p->push)
        prof_push_finish(p->push, CLRMUX_HTTP_SHUTDOWN_MS);
    atomic_store(&p->shut_down, 1);
    prof_rawq_close(&p->q);
    double t = p->ticks ? (double)p->ticks * 1000.0 : 1;
    char sampling[1024] = "", part[600];
    size_t used = 0;
    if (p->sig) {
        sig_summary(p, part, sizeof part);
        used += (size_t)snprintf(sampling, sizeof sampling, "%llu signal sampler ticks (no pause): %s; ",
                                 (unsigned long long)p->sig_ticks, part);
    }
    if (p->ticks || !p->sig)
        snprintf(sampling + used, sizeof sampling - used,
                 "%llu ticks (interval avg %.1f ms): SuspendRuntime avg %.1f us, stack walks avg %.1f us, "
                 "ResumeRuntime avg %.1f us, suspend+walks max %.1f us, %llu suspend failures (%llu ticks skipped "
                 "during another suspension), %llu failed stack walks (%llu without managed frames); ",
                 (unsigned long long)p->ticks, p->ticks ? (double)p->interval_sum / 1e6 / (double)p->ticks : 0.0,
                 (double)p->suspend_ns / t, (double)p->walk_ns / t, (double)p->resume_ns / t,
                 (double)p->pause_max / 1000.0, (unsigned long long)p->suspend_failures,
                 (unsigned long long)p->suspend_busy, (unsigned long long)p->snap_failures, (unsigned long long)p->snap_empty);
    LOG_INFO("profiler '%s': shut down; %llu files written (%llu failed); %s"
             "%llu exceptions, %llu allocation ticks, %llu contentions; sampler thread CPU %.1f ms; dropped %llu raw "
             "events, %llu samples; name cache cleared %llu times",
             p->name, (unsigned long long)p->files, (unsigned long long)p->file_failures, sampling,
             (unsigned long long)atomic_load(&p->exceptions), (unsigned long long)atomic_load(&p->allocations),
             (unsigned long long)atomic_load(&p->contentions), (double)p->sampler_cpu_ns / 1e6,
             (unsigned long long)p->raw_drops_total, (unsigned long long)p->pprof_drops_total,
             (unsigned long long)prof_names_resets(p->names));
    return S_OK;
}

static int mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return (stat(tmp, &st) == 0 && S_ISDIR(st.st_mode)) ? 0 : -1;
}

static HRESULT STDMETHODCALLTYPE pr_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct profiler *p = impl(This);
    if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo3, (void **)&p->info)) || !p->info) {
        LOG_ERROR("profiler '%s': the runtime has no ICorProfilerInfo3; profiler disabled", p->name);
        return E_FAIL;
    }
    if (p->cfg.cpu || p->cfg.wall) {
        if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo10, (void **)&p->info10)))
            p->info10 = NULL;
    }
    atomic_store(&p->mode, PROF_SAMPLER_SUSPEND);
    if ((p->cfg.cpu || p->cfg.wall) && p->cfg.sampler == PROF_SAMPLER_SIGNAL) {
        char why[256];
        p->sig = prof_sig_start(p->cfg.interval_ms, p->cfg.cpu, p->cfg.wall, p->span_peek, why, sizeof why);
        if (p->sig) {
            atomic_store(&p->mode, PROF_SAMPLER_SIGNAL);
            p->sig_start = mono_ns();
        }
        else
            LOG_WARN("profiler '%s': the signal sampler cannot run here (%s); using the suspend sampler", p->name,
                     why);
    }
    if ((p->cfg.cpu || p->cfg.wall) && !p->sig && !p->info10)
        LOG_WARN("profiler '%s': the runtime has no ICorProfilerInfo10 (SuspendRuntime, .NET Core 3.0+): no cpu "
                 "or wall profile", p->name);
    p->want_session = p->cfg.allocations || p->cfg.contention;
    if (p->want_session) {
        if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo12, (void **)&p->info12)))
            p->info12 = NULL;
        if (!p->info12) {
            LOG_WARN("profiler '%s': the runtime has no ICorProfilerInfo12 (in-process EventPipe, .NET 5+): no "
                     "allocation or contention profile", p->name);
            p->want_session = 0;
        }
    }
    char exe[128] = "", app[128] = "";
    clrmux_process_names(exe, sizeof exe, app, sizeof app);
    snprintf(p->process, sizeof p->process, "%s", app[0] ? app : exe[0] ? exe : "process");
    p->pid = (long)getpid();
    if (p->cfg.endpoint[0]) {
        char err[800];
        if (!(p->push = prof_push_open(p->cfg.endpoint, p->cfg.app_name[0] ? p->cfg.app_name : p->process,
                                       p->cfg.headers, err, sizeof err)))
            LOG_ERROR("profiler '%s': endpoint %s: %s; profiles are only written to files", p->name, p->cfg.endpoint,
                      err);
    }
    p->output_ok = mkdirs(p->cfg.output_dir) == 0;
    if (!p->output_ok)
        LOG_ERROR("profiler '%s': cannot create output_dir %s: %s; profiles are collected but not written", p->name,
                  p->cfg.output_dir, strerror(errno));

    clrmux_pprof_config pc = {
        .sample_types = k_types,
        .n_sample_types = V_COUNT,
        .period_type = {"wall", "nanoseconds"},
        .period = (int64_t)p->cfg.interval_ms * 1000000,
        .default_sample_type = p->cfg.cpu ? "cpu" : "wall",
        /* worst case ~45 MB (pprof.h's formula), typical use a few hundred KB */
        .limits = {.max_samples = 16384, .max_functions = 32768, .max_strings = 65536,
                   .max_string_bytes = 8u << 20, .max_stack_depth = PROF_MAX_FRAMES + 2},
    };
    int rc = clrmux_pprof_create(&pc, &p->pb);
    p->names = rc == 0 ? prof_names_create(p->info, NAME_ENTRIES, NAME_ARENA) : NULL;
    p->views = clrmux_lazy_calloc(PROF_MAX_THREADS, sizeof *p->views); /* never freed */
    p->views_gen = UINT64_MAX;
    if (rc != 0 || !p->names || !p->views || prof_rawq_init(&p->q, RAW_RECORDS, RAW_FRAMES) != 0) {
        LOG_ERROR("profiler '%s': out of memory; profiler disabled", p->name);
        return E_FAIL;
    }

    /* No JIT compilation / ReadyToRun lookup callbacks (measured, they cost the cpu profile
     * ~10% of its share of the process's CPU: tests/clr/profiler.sh, ratio 0.78-0.89 vs 0.97);
     * the loader watches for unhandled exceptions for every built-in (common/unhandled.h). */
    DWORD low = COR_PRF_MONITOR_THREADS | COR_PRF_ENABLE_STACK_SNAPSHOT;
    if (p->cfg.exceptions)
        low |= COR_PRF_MONITOR_EXCEPTIONS;
    DWORD high = p->want_session ? COR_PRF_HIGH_MONITOR_EVENT_PIPE : 0;
    HRESULT hr = ICorProfilerInfo3_QueryInterface(p->info, &IID_ICorProfilerInfo5, (void **)&unk);
    if (SUCCEEDED(hr)) {
        hr = ICorProfilerInfo5_SetEventMask2((ICorProfilerInfo5 *)unk, low, high);
        ICorProfilerInfo5_Release((ICorProfilerInfo5 *)unk);
    } else {
        hr = ICorProfilerInfo3_SetEventMask(p->info, low);
    }
    if (FAILED(hr)) {
        LOG_ERROR("profiler '%s': SetEventMask2(0x%08X, 0x%08X) failed with HRESULT %s; profiler disabled",
                  p->name, (unsigned)low, (unsigned)high, HR_STR(hr));
        return hr;
    }
    p->period_start_unix = unix_ns();
    p->period_start_mono = mono_ns();
    /* The session for allocations and contention starts eventpipe_delay_ms after Initialize,
     * from a thread the sampler starts (session_main): enabling Microsoft-Windows-DotNETRuntime
     * wakes the runtime's managed EventSource side (hundreds more ReadyToRun lookups, a dozen JIT compilations,
     * 40-60 ms of CPU on the main thread when the session exists before the default event
     * sources are created), which start-up then does not pay (bench/startup.sh). 0 starts it
     * here, so that the events of start-up itself are seen. */
    p->session_due = p->period_start_mono + (int64_t)p->cfg.eventpipe_delay_ms * 1000000;
    if (p->want_session && p->cfg.eventpipe_delay_ms == 0)
        start_session(p);

    pthread_mutex_init(&p->work_lock, NULL);
    if (pthread_create(&p->sampler, NULL, sampler_main, p) == 0) {
        p->sampler_started = 1;
    } else {
        LOG_ERROR("profiler '%s': cannot start the sampler thread; profiles are written at shutdown only", p->name);
        if (p->want_session && !atomic_load(&p->session_started))
            start_session(p); /* nobody else would */
    }
    if (prof_lastgasp_register(prof_last_gasp, p) != 0)
        LOG_WARN("profiler '%s': no last gasp: a process that ends without Shutdown loses its current period",
                 p->name);
    int sampling = p->sig || p->info10;
    LOG_INFO("profiler '%s': started for %s[%ld]: output %s every %d s, %s sampler every %d ms; cpu=%d wall=%d "
             "exceptions=%d allocations=%d contention=%d", p->name, p->process, p->pid, p->cfg.output_dir,
             p->cfg.period_s, p->sig ? "signal (SIGPROF, no pause)" : "suspend (SuspendRuntime)",
             p->cfg.interval_ms, p->cfg.cpu && sampling, p->cfg.wall && sampling,
             p->cfg.exceptions, p->cfg.allocations && p->info12, p->cfg.contention && p->info12);
    return S_OK;
}

/* ---- COM plumbing --------------------------------------------------------------------- */

CLRMUX_DEFINE_NOOP_CALLBACKS(prd)

/* Attach: Initialize as at start-up; the managed threads that already run are registered once
 * the attach is complete (ThreadCreated is not raised for them). */
static HRESULT STDMETHODCALLTYPE pr_InitializeForAttach(ICorProfilerCallback11 *This, IUnknown *unk, void *data, UINT cb)
{
    (void)data, (void)cb;
    return pr_Initialize(This, unk);
}

static HRESULT STDMETHODCALLTYPE pr_ProfilerAttachComplete(ICorProfilerCallback11 *This)
{
    struct profiler *p = impl(This);
    ICorProfilerInfo4 *info4 = NULL;
    ICorProfilerThreadEnum *en = NULL;
    if (FAILED(ICorProfilerInfo3_QueryInterface(p->info, &IID_ICorProfilerInfo4, (void **)&info4)) || !info4)
        return S_OK;
    if (SUCCEEDED(ICorProfilerInfo4_EnumThreads(info4, &en)) && en) {
        ThreadID ids[64];
        ULONG got = 0;
        while (SUCCEEDED(ICorProfilerThreadEnum_Next(en, 64, ids, &got)) && got > 0)
            for (ULONG i = 0; i < got; i++)
                pr_ThreadCreated(This, ids[i]);
        ICorProfilerThreadEnum_Release(en);
    }
    ICorProfilerInfo4_Release(info4);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE pr_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    return clrmux_callback_query(This, &impl(This)->refs, riid, ppv);
}

static ULONG STDMETHODCALLTYPE pr_AddRef(ICorProfilerCallback11 *This) { return clrmux_refs_add(&impl(This)->refs); }

/* Never freed: the runtime and the sampler may still hold it while the process ends. */
static ULONG STDMETHODCALLTYPE pr_Release(ICorProfilerCallback11 *This) { return clrmux_refs_release(&impl(This)->refs); }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl k_vtbl = {
    CLRMUX_NOOP_VTBL(prd)
    .QueryInterface = pr_QueryInterface,
    .AddRef = pr_AddRef,
    .Release = pr_Release,
    .Initialize = pr_Initialize,
    .InitializeForAttach = pr_InitializeForAttach,
    .ProfilerAttachComplete = pr_ProfilerAttachComplete,
    .Shutdown = pr_Shutdown,
    .ThreadCreated = pr_ThreadCreated,
    .ThreadDestroyed = pr_ThreadDestroyed,
    .ThreadAssignedToOSThread = pr_ThreadAssignedToOSThread,
    .ThreadNameChanged = pr_ThreadNameChanged,
    .ExceptionThrown = pr_ExceptionThrown,
    .EventPipeEventDelivered = pr_EventPipeEventDelivered,
};
#pragma GCC diagnostic pop

EXPORT ICorProfilerCallback11 *clrmux_profiler_create(const struct clrmux_child_conf *cc, const char *config_dir,
                                                      const struct clrmux_profiler_host *host, int *version)
{
#ifdef CLRMUX_PROFILER_COMPANION
    if (!host || host->abi != CLRMUX_PROFILER_HOST_ABI)
        return NULL; /* a companion from another build: the caller logs it */
    prof_hostlog_set(host);
#else
    (void)host;
#endif
    struct profiler *p = clrmux_lazy_calloc(1, sizeof *p); /* never freed; ~400 KB touched as used */
    if (!p) {
        LOG_ERROR("child '%s': out of memory creating the profiler; child skipped", cc->name);
        return NULL;
    }
    p->iface.lpVtbl = &k_vtbl;
    p->refs = 1;
    snprintf(p->name, sizeof p->name, "%s", cc->name);
    if (host && host->abi == CLRMUX_PROFILER_HOST_ABI) {
        p->span_peek = host->span_context_peek;
        p->span_find = host->span_context_find;
    }
    prof_threads_init(&p->threads);
    prof_config_parse(&p->cfg, cc, config_dir);
    *version = 11;
    return &p->iface;
}
