/* The built-in tracer's export thread: drains the span ring into a stage, writes OTLP JSON
 * lines and/or queues OTLP/HTTP requests (JSON or, through libclrmux_otlp.so, protobuf),
 * exports the per-method metrics, names threads (see tracer.h). */
#include "tracer/tracer_impl.h"

#ifdef __linux__
#include <fcntl.h>
#endif

/* libclrmux_otlp.so from the folder of libclrmux.so, or NULL (logged by the caller). */
const struct clrmux_otlp_pb_api *tracer_load_pb(void)
{
    char path[PATH_MAX], err[512];
    if (clrmux_module_path_of((const void *)&tracer_load_pb, path, sizeof path) != 0)
        return NULL;
    char *slash = clrmux_last_separator(path);
    size_t dir = slash ? (size_t)(slash - path) : 0;
    if (dir + 2 + sizeof CLRMUX_OTLP_PB_LIB > sizeof path)
        return NULL;
    snprintf(path + dir, sizeof path - dir, "%s%s", dir ? "/" : "", CLRMUX_OTLP_PB_LIB);
    void *lib = clrmux_lib_open(path, err, sizeof err);
    if (!lib) {
        LOG_ERROR("tracer: cannot load %s: %s", path, err);
        return NULL;
    }
    clrmux_otlp_pb_fn get = (clrmux_otlp_pb_fn)clrmux_lib_sym(lib, CLRMUX_OTLP_PB_SYMBOL);
    const struct clrmux_otlp_pb_api *api = get ? get() : NULL;
    return api && api->abi == CLRMUX_OTLP_PB_ABI ? api : NULL; /* stays loaded */
}

/* ---- export -------------------------------------------------------------------------- */

/* thread.name: the OS name of the thread (/proc/self/task/<tid>/comm: .NET sets it from
 * Thread.Name), cached per tid and re-read at most once a second. Export thread only. */
static const char *thread_name_cb(void *ctx, uint32_t tid)
{
    struct tracer *t = ctx;
    if (!t->tnames || !tid)
        return NULL;
    struct thread_name *e = &t->tnames[(tid * 2654435761u) & (THREAD_NAMES - 1)];
    int64_t now = t->batch_now_ns;
    if (e->tid != tid || now - e->read_ns > 1000000000) {
        char name[64] = "";
        if (clrmux_thread_name_of(tid, name, sizeof name) != 0)
            name[0] = 0;
        if (!name[0])
            clrmux_thread_name(tid, name, sizeof name); /* the thread is gone: its recorded name */
        if (name[0] || e->tid != tid) {
            snprintf(e->name, sizeof e->name, "%s", name);
            e->tid = tid;
        }
        e->read_ns = now;
    }
    return e->name[0] ? e->name : NULL;
}

const char *tracer_method_name(void *ctx, uint32_t id)
{
    struct tracer *t = ctx;
    return id < atomic_load_explicit(&t->nmethods, memory_order_acquire) ? t->methods[id].name : NULL;
}

const char *tracer_exc_name(void *ctx, uint32_t id)
{
    struct tracer *t = ctx;
    return id > 0 && id <= atomic_load_explicit(&t->nexc, memory_order_acquire) ? t->exc_names[id - 1] : NULL;
}

static const char *exc_msg_cb(void *ctx, uint32_t id)
{
    struct tracer *t = ctx;
    return id > 0 && id <= atomic_load_explicit(&t->nexc, memory_order_acquire) && t->exc_msgs[id - 1][0]
               ? t->exc_msgs[id - 1]
               : NULL;
}

static struct clrmux_otlp_names names_of(struct tracer *t)
{
    return (struct clrmux_otlp_names){tracer_method_name, tracer_exc_name, t, thread_name_cb, exc_msg_cb};
}

/* spans[0..n) as one OTLP JSON line, '\n' included, in t->line; 0, or -1 (out of memory). */
static int render_line(struct tracer *t, const struct clrmux_span *spans, size_t n,
                       const struct clrmux_otlp_names *names)
{
    struct clrmux_otlp_mem m = {t->line.p, 0, t->line.cap};
    int rc = clrmux_otlp_render_line(&m, &t->res, spans, n, names);
    t->line.p = m.p;
    t->line.cap = m.cap;
    t->line.len = rc ? 0 : m.len;
    return rc || !m.len ? -1 : 0;
}

/* t->line (n spans) to the output file with one write(2) (whole lines only), rotating it at
 * max_file_mb. */
static void file_write(struct tracer *t, size_t n)
{
    char err[PATH_MAX + 200];
    int rc = clrmux_spanfile_write(t->out, t->line.p, t->line.len, n, err, sizeof err);
    if (rc < 0) {
        LOG_ERROR("tracer: %s; spans are no longer written to it", err);
        t->write_failed = 1;
        return;
    }
    t->written += n;
    t->lines++;
    if (rc > 0 && !t->rotation_errors++)
        LOG_ERROR("tracer: %s: the file was emptied instead to keep max_file_mb (logged once)", err);
    struct clrmux_spanfile_stats fs;
    clrmux_spanfile_stats(t->out, &fs);
    if (fs.files_deleted > t->deleted_logged && !t->deleted_logged)
        LOG_WARN("tracer: %s reached max_file_mb = %llu with max_files = %u: the oldest file is deleted at each "
                 "rotation from now on (its spans are counted as dropped; totals at shutdown)",
                 t->output, (unsigned long long)(t->max_file_bytes >> 20), t->max_files);
    t->deleted_logged = fs.files_deleted;
}

/* spans[0..n): to the OTLP/HTTP queue (protobuf, or the JSON line without its newline) and/or
 * as one JSON line to the file. Under wr_lock. */
static void write_batch(struct tracer *t, const struct clrmux_span *spans, size_t n)
{
    if (!n)
        return;
    t->batch_now_ns = clrmux_now_ns();
    struct clrmux_otlp_names names = names_of(t);
    int to_file = t->out && !t->write_failed;
    if (t->http && t->pb) {
        uint8_t *pb = NULL;
        size_t pblen = 0;
        if (t->pb->traces(&t->res, spans, n, &names, &pb, &pblen) != 0) {
            if (!t->request_errors++)
                LOG_ERROR("tracer: OTLP/HTTP: cannot build a request of %zu span(s): out of memory; dropped", n);
        } else {
            t->queued += n;
            t->requests++;
            clrmux_http_enqueue(t->http, (char *)pb, pblen, n);
        }
    }
    int json_http = t->http && !t->pb;
    if (!to_file && !json_http)
        return;
    if (render_line(t, spans, n, &names) != 0) {
        if (!t->render_errors++)
            LOG_ERROR("tracer: cannot format %zu span(s): out of memory; dropped (logged once)", n);
        return;
    }
    if (to_file)
        file_write(t, n);
    if (json_http) {
        char *body = malloc(t->line.len);
        if (body) {
            memcpy(body, t->line.p, t->line.len - 1); /* the request body: the line without '\n' */
            t->queued += n;
            t->requests++;
            clrmux_http_enqueue(t->http, body, t->line.len - 1, n); /* takes body */
        } else if (!t->request_errors++) {
            LOG_ERROR("tracer: OTLP/HTTP: cannot build a request of %zu span(s): out of memory; dropped (logged once)",
                      n);
        }
    }
}

/* Activity spans (tracer/xspan.h): drained from their queue and written as lines of their
 * own, to the file and/or the endpoint, when a flush is due or their queue fills past half of
 * a drain. Under wr_lock. */
#define XDRAIN (1u << 20) /* bytes of records rendered into one line */
static void export_xspans(struct tracer *t, int flush)
{
    struct clrmux_xq_stats xs;
    clrmux_xq_stats(&xs);
    if (!xs.waiting || (!flush && xs.waiting < XDRAIN / 2))
        return;
    if (!t->xbuf && !(t->xbuf = malloc(XDRAIN)))
        return; /* the records wait for the next call */
    for (int i = 0; i < 64; i++) { /* bounded, as tracer_export_pending is */
        size_t len = clrmux_xq_drain(t->xbuf, XDRAIN);
        if (!len)
            break;
        if (t->http && t->pb) { /* protobuf bodies to the endpoint */
            uint8_t *pb = NULL;
            size_t pblen = 0, n = 0, bad = 0;
            if (t->pb->xtraces(&t->res, t->xbuf, len, &pb, &pblen, &n, &bad) != 0) {
                if (!t->request_errors++)
                    LOG_ERROR("tracer: OTLP/HTTP: cannot build a request of Activity spans: out of memory; dropped");
            } else if (pb) {
                t->queued += n;
                t->requests++;
                t->xwritten += n;
                clrmux_http_enqueue(t->http, (char *)pb, pblen, n);
            }
            t->xbad += bad;
            if (!t->out || t->write_failed)
                continue;
        }
        struct clrmux_otlp_mem m = {t->line.p, 0, t->line.cap};
        size_t n = 0, bad = 0;
        int rc = clrmux_otlp_render_xspans(&m, &t->res, t->xbuf, len, &n, &bad);
        t->line.p = m.p;
        t->line.cap = m.cap;
        t->line.len = rc ? 0 : m.len;
        if (bad && !t->xbad)
            LOG_ERROR("tracer: %zu malformed Activity span record(s) skipped (logged once; counted at shutdown)", bad);
        t->xbad += bad;
        if (rc) {
            if (!t->render_errors++)
                LOG_ERROR("tracer: cannot format Activity spans: out of memory; dropped (logged once)");
            continue;
        }
        if (!n)
            continue;
        if (!(t->http && t->pb))
            t->xwritten += n;
        if (t->out && !t->write_failed)
            file_write(t, n);
        if (t->http && !t->pb) {
            char *body = malloc(t->line.len);
            if (body) { /* http/json: the line without its newline */
                memcpy(body, t->line.p, t->line.len - 1);
                t->queued += n;
                t->requests++;
                clrmux_http_enqueue(t->http, body, t->line.len - 1, n);
            }
        }
    }
}

/* The spans of bytecode integrations' calls among s[0..n) (those with attributes attached,
 * integ.h) become Activity-style records of their definition's kind, queued with the
 * Activities' (xspan.h); the others are kept, in order. Returns how many are kept. */
static size_t integ_spans(struct tracer *t, struct clrmux_span *s, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        size_t blen = 0;
        uint8_t *blob = clrmux_integ_take(s[i].span_id, &blen);
        if (blob && blob[0] == 0) { /* kind 0: the call is not a span (a consumer's poll that got nothing) */
            free(blob);
            continue;
        }
        if (!blob) {
            if (kept != i)
                s[kept] = s[i];
            kept++;
            continue;
        }
        if (!t->ibuf && !(t->ibuf = malloc(CLRMUX_XSPAN_MAX))) {
            free(blob);
            s[kept++] = s[i];
            continue;
        }
        const char *exc = (s[i].flags & CLRMUX_SPAN_ERROR) && s[i].exc ? tracer_exc_name(t, s[i].exc) : NULL;
        size_t len = clrmux_integ_record(&s[i], blob, blen, exc, t->ibuf, CLRMUX_XSPAN_MAX);
        free(blob);
        if (!len || clrmux_xq_push(t->ibuf, len) == -1)
            s[kept++] = s[i]; /* a malformed blob: the plain method span */
    }
    return kept;
}

/* Moves what the ring holds into the stage (as much as fits). Draining is a copy: fast
 * enough to keep up with the probes, while writing the JSON is not. */
static void stage_fill(struct tracer *t)
{
    if (t->shead == t->nstage) {
        t->shead = t->nstage = 0;
    } else if (t->shead >= t->stage_cap / 2 && t->nstage == t->stage_cap) {
        /* compacted once at least half of it is written: a memmove per batch would copy
         * the whole stage for every EXPORT_BATCH spans */
        memmove(t->stage, t->stage + t->shead, (t->nstage - t->shead) * sizeof *t->stage);
        t->nstage -= t->shead;
        t->shead = 0;
    }
    while (t->nstage < t->stage_cap) {
        size_t n = clrmux_spans_drain(t->stage + t->nstage, t->stage_cap - t->nstage);
        if (n && clrmux_integ_any())
            n = integ_spans(t, t->stage + t->nstage, n);
        t->nstage += n;
        if (!n)
            break;
    }
}

/* Drains the ring into the stage and writes full batches as lines; with `flush`, also the
 * partial batch, and flushes the file. Whenever the ring passes its high-water mark while
 * the lines are written, it is drained again first. One call writes at most two stages'
 * worth of spans: threads that produce spans faster than they can be written must not keep
 * the caller here forever (it holds wr_lock, which the last gasp and Shutdown wait for);
 * what is left stays in the ring or the stage for the next call, which the export thread
 * makes without waiting (the return value). Export thread (or Shutdown). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tracer_export_pending(struct tracer *t, int flush)
{
    uint64_t cpu0 = thread_cpu_ns();
    stage_fill(t);
    size_t hw = t->stage_cap / 4;
    size_t budget = 2 * t->stage_cap, written = 0;
    while (written < budget && !atomic_load_explicit(&t->gasp_waiting, memory_order_relaxed) &&
           (t->nstage - t->shead >= EXPORT_BATCH || (flush && t->nstage > t->shead))) {
        size_t n = t->nstage - t->shead < EXPORT_BATCH ? t->nstage - t->shead : EXPORT_BATCH;
        write_batch(t, t->stage + t->shead, n);
        t->shead += n;
        written += n;
        /* refilled once less than a batch is left, so the thread goes back to sleep with the
         * ring (nearly) empty rather than up to its high-water mark: the whole ring is slack
         * for the next time the thread waits for a CPU */
        if (written < budget &&
            (t->nstage - t->shead < EXPORT_BATCH || clrmux_spans_pending() > hw))
            stage_fill(t);
    }
    export_xspans(t, flush);
    if (written) {
        t->encoded += written;
        t->encode_cpu_ns += thread_cpu_ns() - cpu0;
    }
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    if (st.dropped > t->dropped_logged && (flush || st.dropped - t->dropped_logged >= 100000)) {
        LOG_WARN("tracer: %llu span(s) dropped: the buffer (%zu spans) was full; their calls are still counted in "
                 "the metrics (clrmux.method.*)",
                 (unsigned long long)(st.dropped - t->dropped_logged), t->buffer_spans);
        t->dropped_logged = st.dropped;
    }
    /* with flush, any span left is more: the partial batch is written by the next call */
    return written >= budget && t->nstage - t->shead + clrmux_spans_pending() >= (flush ? 1u : EXPORT_BATCH);
}

void tracer_export_all(struct tracer *t, int64_t deadline_mono_ns)
{
    /* bounded: threads still recording spans at the end must not keep the caller here. What
     * is finished when it starts is written (the staged spans and the ring's), and no more:
     * threads that go on recording faster than a file takes them (a flood at the last gasp)
     * would otherwise keep it writing until the deadline, and the last gasp past it */
    const uint64_t finished = t->encoded + (t->nstage - t->shead) + clrmux_spans_pending();
    for (int i = 0; i < 64 && tracer_export_pending(t, 1) && t->encoded < finished; i++)
        if (deadline_mono_ns && clrmux_mono_ns() >= deadline_mono_ns)
            break;
}

/* Opens metrics_output if Initialize left it to be opened (mout_pending): as the span file is
 * (no symbolic link, no one else's file, same size cap), and once; a failure is logged and
 * the metrics file is left out. Under wr_lock: by the ReJIT thread as it starts, or by
 * whoever exports the metrics first (the last gasp, Shutdown). */
void tracer_open_metrics(struct tracer *t)
{
    if (!t->mout_pending)
        return;
    t->mout_pending = 0;
    char err[PATH_MAX + 200];
    if (!(t->mout = clrmux_spanfile_open(t->metrics_output, t->max_file_bytes, t->max_files, err, sizeof err)))
        LOG_ERROR("tracer: cannot open the metrics output %s: %s; no metrics file", t->metrics_output, err);
}

/* One ExportMetricsServiceRequest with the cumulative totals: to the metrics file and/or
 * the metrics endpoint. The ring is drained first (its spans are counted when drained). */
void tracer_export_metrics(struct tracer *t)
{
    tracer_open_metrics(t);
    if (!t->mout && !t->mhttp)
        return;
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    struct clrmux_otlp_counter counters[3] = {
        {"clrmux.tracer.spans.dropped", "Spans dropped because the span buffer was full", st.dropped},
        {"clrmux.tracer.spans.unsampled", "Spans not recorded by head sampling (sample_ratio)", st.unsampled},
        {"clrmux.tracer.spans.too_deep", "Spans not recorded: nesting deeper than the stack", st.too_deep},
    };
    struct clrmux_otlp_names names = names_of(t);
    char *body = NULL;
    size_t len = 0;
#if defined(_WIN32)
    FILE *m = clrmux_tmpstream(); /* no open_memstream: a private temporary file, read back */
#else
    FILE *m = open_memstream(&body, &len);
#endif
    int rc = m ? clrmux_otlp_write_metrics(m, &t->res, t->start_ns, clrmux_now_ns(),
                                           atomic_load_explicit(&t->nmethods, memory_order_acquire), &names, counters,
                                           3)
               : -1;
#if defined(_WIN32)
    if (m && rc == 0)
        rc = clrmux_tmpstream_read(m, &body, &len);
#endif
    if (m && fclose(m) != 0)
        rc = -1;
    if (rc != 0 || !body || !len) {
        free(body);
        LOG_ERROR("tracer: cannot build the metrics: out of memory");
        return;
    }
    if (t->mout) {
        char err[PATH_MAX + 200];
        int wrc = clrmux_spanfile_write(t->mout, body, len, 0, err, sizeof err);
        if (wrc == 1) {
            LOG_WARN("tracer: rotating %s failed: %s", t->metrics_output, err);
        } else if (wrc != 0) {
            LOG_ERROR("tracer: writing %s failed: %s; metrics are no longer written to it", t->metrics_output, err);
            clrmux_spanfile_close(t->mout);
            t->mout = NULL;
        } else {
            t->metric_lines++;
        }
    }
    if (t->mhttp && t->pb) {
        uint32_t n = atomic_load_explicit(&t->nmethods, memory_order_acquire);
        struct clrmux_method_metrics *mm = calloc(n ? n : 1, sizeof *mm);
        uint8_t *pb = NULL;
        size_t pblen = 0;
        if (mm) {
            clrmux_metrics_snapshot(mm, n);
            if (t->pb->metrics(&t->res, t->start_ns, clrmux_now_ns(), mm, n, clrmux_hist_bounds_s, CLRMUX_HIST_BOUNDS,
                               &names, counters, 3, &pb, &pblen) == 0)
                clrmux_http_enqueue(t->mhttp, (char *)pb, pblen, 0);
            free(mm);
        }
        free(body);
    } else if (t->mhttp) {
        clrmux_http_enqueue(t->mhttp, body, len - 1, 0);
    } else {
        free(body);
    }
}

/* At Shutdown: the queued span requests, then the metrics request, all within
 * CLRMUX_HTTP_SHUTDOWN_MS (what is left unsent is dropped and counted). */
void tracer_finish_http(struct tracer *t)
{
    int64_t t0 = clrmux_now_ns();
    if (t->http)
        clrmux_http_finish(t->http, CLRMUX_HTTP_SHUTDOWN_MS);
    long left = CLRMUX_HTTP_SHUTDOWN_MS - (long)((clrmux_now_ns() - t0) / 1000000);
    if (t->mhttp)
        clrmux_http_finish(t->mhttp, left > 0 ? left : 1);
}

/* Thread tid's time on a CPU and waiting on the run queue for one, in ns (Linux:
 * /proc/self/task/<tid>/schedstat, "run wait slices"); both 0 when unknown (or tid is 0).
 * Spans dropped while the export thread waited long for a CPU say the machine was busy, not
 * that it is slow. */
void tracer_sched_times(long tid, uint64_t *run, uint64_t *wait)
{
    *run = *wait = 0;
#ifdef __linux__
    char path[64];
    if (tid <= 0)
        return;
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    unsigned long long r, w;
    if (fscanf(f, "%llu %llu", &r, &w) == 2)
        *run = r, *wait = w;
    fclose(f);
#else
    (void)tid;
#endif
}

/* The calling thread's run-queue wait in ns from its schedstat, read through fd (kept open:
 * no open(2) per pass; /proc's seq files answer pread at offset 0 afresh); 0 when unknown. */
static uint64_t own_wait_ns(int fd)
{
#ifdef __linux__
    char buf[96];
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long long r, w;
    return sscanf(buf, "%llu %llu", &r, &w) == 2 ? (uint64_t)w : 0;
#else
    (void)fd;
    return 0;
#endif
}

/* The export thread's own account of its time (tracer_impl.h: ex_own_*): its CPU clock and
 * its run-queue wait. */
static void own_times_update(struct tracer *t, int fd)
{
    atomic_store_explicit(&t->ex_own_run_ns, thread_cpu_ns(), memory_order_relaxed);
    uint64_t w = own_wait_ns(fd);
    if (w)
        atomic_store_explicit(&t->ex_own_wait_ns, w, memory_order_relaxed);
}

void tracer_export_thread_times(struct tracer *t, uint64_t *run, uint64_t *wait)
{
    /* ended: its final figures; else its last pass's, or its live schedstat when newer (it
     * may sleep up to a poll interval between passes). A thread that ends between the two
     * reads left its final figures before it ended: read again. */
    int ended = atomic_load_explicit(&t->ex_ended, memory_order_acquire);
    uint64_t r = atomic_load_explicit(&t->ex_own_run_ns, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&t->ex_own_wait_ns, memory_order_relaxed);
    if (!ended) {
        uint64_t lr = 0, lw = 0;
        tracer_sched_times(atomic_load(&t->ex_tid), &lr, &lw);
        if (!lr && atomic_load_explicit(&t->ex_ended, memory_order_acquire)) {
            r = atomic_load_explicit(&t->ex_own_run_ns, memory_order_relaxed);
            w = atomic_load_explicit(&t->ex_own_wait_ns, memory_order_relaxed);
        }
        if (lr > r)
            r = lr;
        if (lw > w)
            w = lw;
    }
    *run = r;
    *wait = w;
}

/* Waits on the span buffer (woken at its high-water mark), drains it at least every POLL_MS,
 * writes and flushes what it holds every flush_ms, exports the metrics every metrics_ms.
 * Writes under wr_lock, and none after the last gasp (final) or while it holds them. */
void *tracer_export_thread(void *arg)
{
    struct tracer *t = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-export");
    atomic_store(&t->ex_tid, clrmux_thread_id());
#ifdef __linux__
    /* the CPUs the process had at Initialize, not those of the ReJIT thread that started it:
     * that thread narrows its own affinity for a while around some jobs (rejit.c), and a
     * thread inherits its creator's, so an export thread started meanwhile would have been
     * held to one CPU for good, beside the app's busiest thread */
    if (t->rj_affinity_ok)
        pthread_setaffinity_np(pthread_self(), sizeof t->rj_affinity, &t->rj_affinity);
#endif
    int sfd = -1;
#ifdef __linux__
    sfd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
#endif
    const long poll = t->flush_ms < POLL_MS ? t->flush_ms : POLL_MS;
    /* counted from Initialize: the thread starts up to EXPORT_DELAY_MAX_MS after it */
    int64_t flush_at = t->start_ns + (int64_t)t->flush_ms * 1000000;
    int64_t metrics_at = t->start_ns + (int64_t)t->metrics_ms * 1000000;
    int more = 0; /* the last export stopped at its budget with spans left: no wait */
    int64_t times_at = 0; /* its own account's next update (own_times_update) */
    pthread_mutex_lock(&t->wr_lock);
    if (!t->final)
        tracer_open_metrics(t);
    pthread_mutex_unlock(&t->wr_lock);
    for (;;) {
        pthread_mutex_lock(&t->ex_lock);
        int stop = t->ex_stop;
        pthread_mutex_unlock(&t->ex_lock);
        if (stop)
            break;
        /* no wait while requests are ready to send (the pump stopped at its budget) */
        if (!more && !(t->http && clrmux_http_ready(t->http)) && !(t->mhttp && clrmux_http_ready(t->mhttp)))
            clrmux_spans_wait(poll);
        more = 0;
        int64_t now = clrmux_now_ns();
        int flush = now >= flush_at;
        if (flush)
            flush_at = now + (int64_t)t->flush_ms * 1000000;
        t->export_pass(t, 1); /* tracer.c: Activity initialized: rewrite again to join (activity.h) */
        if (atomic_load(&t->gasp_waiting)) { /* let the last gasp take wr_lock */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        pthread_mutex_lock(&t->wr_lock);
        int ran = 0; /* it wrote spans (not final, not held) */
        if (!t->final && clrmux_mono_ns() >= atomic_load(&t->hold_until_ns)) {
            uint64_t enc = t->encoded;
            more = tracer_export_pending(t, flush);
            ran = t->encoded != enc;
            if (now >= metrics_at) {
                metrics_at = now + (int64_t)t->metrics_ms * 1000000;
                tracer_export_metrics(t);
            }
            if (t->http) /* what is due, for at most a poll interval: then the ring is drained again */
                clrmux_http_pump(t->http, poll);
            if (t->mhttp)
                clrmux_http_pump(t->mhttp, poll);
        }
        pthread_mutex_unlock(&t->wr_lock);
        /* a batch or more waiting already (written meanwhile): no sleep first (only after a
         * pass that wrote: a pass that could write nothing sleeps, whatever is pending) */
        if (ran && !more && clrmux_spans_pending() >= EXPORT_BATCH)
            more = 1;
        if (!more || now >= times_at) { /* about to sleep, or at least every poll interval */
            own_times_update(t, sfd);
            times_at = now + (int64_t)poll * 1000000;
        }
    }
    /* Shutdown wrote the last spans and metrics itself (final) */
    own_times_update(t, sfd);
    atomic_store_explicit(&t->ex_ended, 1, memory_order_release);
#ifdef __linux__
    if (sfd >= 0)
        close(sfd);
#endif
    return NULL;
}
