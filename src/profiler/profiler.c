/* The built-in continuous profiler: an ICorProfilerCallback11 child (`builtin = profiler`)
 * that reaches the runtime only through its own ICorProfilerInfo proxy, and writes one
 * gzip'd pprof file per period. See src/profiler/README.md for the design and its costs.
 * This file: its callbacks, Initialize, Shutdown, the last gasp, the COM plumbing and
 * clrmux_profiler_create; the sampler thread, the stacks and the profile are in
 * profiler_thread.c, profiler_stacks.c and profiler_profile.c, below it (profiler_int.h). */
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
#include "profiler/profiler_int.h"
#include "tracer/otlp_http.h"

#define EXPORT __attribute__((visibility("default")))
#pragma GCC diagnostic ignored "-Wunused-parameter"


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
    prof_current_thread(p, cur, &r);
    struct snap s;
    prof_walk(p, 0, &s);
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
        prof_walk(p, 0, &s);
    }
    if (eventThread && eventThread != cur) {
        if (prof_threads_lookup(&p->threads, eventThread, &r.tid, r.tname, sizeof r.tname) != 0)
            r.tid = 0;
        else
            prof_other_thread_span(p, r.tid, &r); /* the span it is in now: the closest we know */
    } else {
        prof_current_thread(p, cur, &r);
    }
    r.truncated = s.truncated;
    prof_rawq_push(&p->q, &r, s.f, s.n);
    return S_OK;
}

/* The process ends without Shutdown (common/lastgasp.h): the current period, up to now, as a
 * readable file; nothing written after it (final), or, for an unhandled exception (not
 * final: the process may go on), a new period starts and sampling goes on. The last-gasp
 * thread. */
static void prof_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    struct profiler *p = ctx;
    if (final)
        prof_stop_and_wake(p); /* no more ticks */
    if (clrmux_lastgasp_lock(&p->work_lock, deadline_ns) != 0) {
        LOG_ERROR("profiler '%s': last gasp (%s): the sampler did not finish its tick in time; the current period "
                  "(%.1f s) is lost", p->name, cause, (double)(mono_ns() - p->period_start_mono) / 1e9);
        return;
    }
    if (!p->final) {
        uint64_t files = p->files;
        double secs = (double)(mono_ns() - p->period_start_mono) / 1e9;
        prof_flush(p, final ? cause : NULL);
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
    /* no more ticks once we hold work_lock; the sampler thread is not woken or joined: it
     * ends at its next wake-up, if the process is still there */
    prof_retire_sampler(p);
    pthread_mutex_lock(&p->work_lock);
    if (p->sig)
        prof_sig_stop(p->sig);
    if (atomic_load(&p->session_started)) {
        atomic_store(&p->session_started, 0);
        ICorProfilerInfo12_EventPipeStopSession(p->info12, p->session);
    }
    if (!p->final)
        prof_flush(p, "shutdown");
    p->final = 1;
    pthread_mutex_unlock(&p->work_lock);
    prof_wait_session_thread(p);
    if (p->push)
        prof_push_finish(p->push, CLRMUX_HTTP_SHUTDOWN_MS);
    atomic_store(&p->shut_down, 1);
    prof_rawq_close(&p->q);
    double t = p->ticks ? (double)p->ticks * 1000.0 : 1;
    uint64_t md_tables = 0, md_importer = 0;
    if (p->names)
        prof_names_sources(p->names, &md_tables, &md_importer);
    char sampling[1024] = "", part[600];
    size_t used = 0;
    if (p->sig) {
        prof_sig_summary(p, part, sizeof part);
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
             "events, %llu samples; name cache cleared %llu times; names of %llu modules read from their metadata "
             "tables, %llu through the metadata importer",
             p->name, (unsigned long long)p->files, (unsigned long long)p->file_failures, sampling,
             (unsigned long long)atomic_load(&p->exceptions), (unsigned long long)atomic_load(&p->allocations),
             (unsigned long long)atomic_load(&p->contentions), (double)prof_sampler_cpu_ns(p) / 1e6,
             (unsigned long long)p->raw_drops_total, (unsigned long long)p->pprof_drops_total,
             (unsigned long long)(p->names ? prof_names_resets(p->names) : 0), (unsigned long long)md_tables,
             (unsigned long long)md_importer);
    return S_OK;
}

static int mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    struct stat st;
    if (stat(tmp, &st) == 0) { /* the usual case, one system call instead of one per component */
        if (S_ISDIR(st.st_mode))
            return 0;
        errno = ENOTDIR;
        return -1;
    }
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
    /* the signal sampler starts (handler, self-test) on the sampler thread: prof_sampler_setup */
    atomic_store(&p->mode, PROF_SAMPLER_SUSPEND);
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

    p->views = clrmux_lazy_calloc(PROF_MAX_THREADS, sizeof *p->views); /* never freed */
    p->views_gen = UINT64_MAX;
    if (!p->views || prof_rawq_init(&p->q, RAW_RECORDS, RAW_FRAMES) != 0) {
        LOG_ERROR("profiler '%s': out of memory; profiler disabled", p->name);
        return E_FAIL;
    }
    /* the profile builder and the name cache are the sampler thread's to create
     * (prof_tables, ~0.13 ms of mappings and first page faults): only it and, after it,
     * Shutdown and the last gasp use them */

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
        prof_start_session(p);

    pthread_mutex_init(&p->work_lock, NULL);
    /* On the app's main thread only the last gasp's table entry (a lock) and the sampler
     * thread's creation: the last gasp's thread and handlers (0.2-0.9 ms) and the signal
     * sampler's start and self-test (0.15-0.3 ms) are the sampler thread's first steps
     * (prof_sampler_setup). A process that ends by a signal before those steps (the sampler
     * thread's first ~0.1-1 ms) ends as without clrmux: nothing was sampled yet. The entry is
     * made here so that the loader, right after Initialize, sees a last gasp to watch
     * unhandled exceptions for (common/unhandled.h). */
    if (prof_lastgasp_register_deferred(prof_last_gasp, p) == 0)
        p->lastgasp_entry = 1;
    else
        LOG_WARN("profiler '%s': no last gasp: a process that ends without Shutdown loses its current period",
                 p->name);
    p->init_mono = mono_ns();
    if (pthread_create(&p->sampler, NULL, prof_sampler_main, p) == 0) {
        p->sampler_started = 1;
    } else {
        LOG_ERROR("profiler '%s': cannot start the sampler thread; profiles are written at shutdown only", p->name);
        prof_sampler_setup(p); /* here then */
        if (p->want_session && !atomic_load(&p->session_started))
            prof_start_session(p); /* nobody else would */
    }
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
