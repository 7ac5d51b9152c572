/* The tracer's ending: the closing summary (Shutdown's info line, the last gasp's warning) and
 * the last gasp itself (common/lastgasp.h: the process ends without Shutdown), which writes
 * every finished span through export.c. Registered by the ReJIT thread (rejit.c), called by
 * Shutdown (tracer.c); calls only downward (export.c, the span buffer, the span file). */
#include "tracer/tracer_impl.h"

#include <limits.h>
#include <stdio.h>

/* The closing summary: at Shutdown (cause NULL, info), or at the last gasp (warn, with what
 * that flush wrote and what could not be saved). */
void tracer_log_summary(struct tracer *t, const char *cause, uint64_t flushed)
{
    struct clrmux_spanfile_stats fs;
    clrmux_spanfile_stats(t->out, &fs);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    unsigned nrw = (unsigned)atomic_load(&t->rewritten);
    char dest[PATH_MAX + 2200];
    int n = 0;
    if (t->out || !t->http) {
        char rot[160] = "";
        if (fs.rotations)
            snprintf(rot, sizeof rot, " (%llu rotation(s); %llu old file(s) deleted, holding %llu span(s))",
                     (unsigned long long)fs.rotations, (unsigned long long)fs.files_deleted,
                     (unsigned long long)fs.spans_dropped);
        n = snprintf(dest, sizeof dest, "%llu span(s) written to %s in %llu line(s)%s%s", (unsigned long long)t->written,
                     t->output, (unsigned long long)t->lines, rot, t->http ? ", " : "");
    }
    if (t->http)
        snprintf(dest + n, sizeof dest - (size_t)n, "%llu span(s) queued for %s in %llu request(s)",
                 (unsigned long long)t->queued, t->endpoint, (unsigned long long)t->requests);
    if (!cause)
        LOG_INFO("tracer: %u method(s) rewritten (%llu us each on average), %u skipped; %s, %llu dropped (buffer full), "
                 "%llu not recorded (nesting deeper than %u, or no memory to grow a thread's span stack), %llu not "
                 "sampled; every call counted in %llu metrics line(s)",
                 nrw, (unsigned long long)(nrw ? atomic_load(&t->rewrite_ns) / nrw / 1000 : 0),
                 (unsigned)atomic_load(&t->skipped), dest, (unsigned long long)st.dropped,
                 (unsigned long long)st.too_deep, CLRMUX_SPAN_MAX_DEPTH, (unsigned long long)st.unsampled,
                 (unsigned long long)t->metric_lines);
    if (!cause && t->encoded)
        LOG_INFO("tracer: export: %llu span(s) drained, encoded and written in %.1f ms of the export thread's and Shutdown's CPU "
                 "time (%.0f spans/s); the export thread ran %.1f ms and waited %.1f ms for a CPU",
                 (unsigned long long)t->encoded, (double)t->encode_cpu_ns / 1e6,
                 t->encode_cpu_ns ? (double)t->encoded * 1e9 / (double)t->encode_cpu_ns : 0.0,
                 (double)t->ex_run_ns / 1e6, (double)t->ex_wait_ns / 1e6);
    else if (cause)
        LOG_WARN("tracer: last gasp (%s): every span finished so far is saved (%llu written now); %s, %llu dropped "
                 "(buffer full), %llu not recorded (too deep); lost: the spans of calls still running, which "
                 "never finish",
                 cause, (unsigned long long)flushed, dest, (unsigned long long)st.dropped,
                 (unsigned long long)st.too_deep);
}

/* The process ends without Shutdown (common/lastgasp.h): write every finished span, then
 * nothing more (final), or, for an unhandled exception (not final: the runtime aborts in a
 * moment, unless the event was only raised), write them and hold the export thread's writes
 * for HOLD_AFTER_UNHANDLED_MS, so that no line is being written when the abort comes. The
 * last-gasp thread. */
void tracer_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    struct tracer *t = ctx;
    atomic_store(&t->gasp_waiting, 1); /* the export thread lets go of wr_lock */
    int locked = clrmux_lastgasp_lock(&t->wr_lock, deadline_ns);
    atomic_store(&t->gasp_waiting, 0);
    if (locked != 0) {
        LOG_ERROR("tracer: last gasp (%s): the export thread did not finish its write in time; the spans not yet "
                  "written (%llu written so far) are lost", cause, (unsigned long long)t->written);
        return;
    }
    if (!t->final) {
        uint64_t before = t->written + t->queued;
        tracer_export_all(t, deadline_ns);
        tracer_export_metrics(t);
        long ms = (long)((deadline_ns - clrmux_mono_ns()) / 1000000);
        if (t->http && ms > 0 && final)
            clrmux_http_finish(t->http, ms);
        if (final)
            t->final = 1;
        else
            atomic_store(&t->hold_until_ns, clrmux_mono_ns() + (int64_t)HOLD_AFTER_UNHANDLED_MS * 1000000);
        tracer_log_summary(t, cause, t->written + t->queued - before);
    }
    pthread_mutex_unlock(&t->wr_lock);
}
