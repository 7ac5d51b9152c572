/* The built-in profiler's profile: the period's tables (the pprof builder and the name
 * cache), raw samples -> function names -> the period's pprof (pprof.c), and writing (and
 * pushing) a period's file. See profiler_int.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "profiler/profiler_int.h"
#include "tracer/otlp_http.h"

/* ---- the tables: the period's profile builder and the name cache -------------------- */

static const clrmux_pprof_value_type k_types[V_COUNT] = {
    {"cpu", "nanoseconds"},        {"wall", "nanoseconds"},     {"exception", "count"},
    {"alloc-samples", "count"},    {"alloc-size", "bytes"},     {"lock-count", "count"},
    {"lock-time", "nanoseconds"},
};

int prof_tables(struct profiler *p)
{
    if (p->pb && p->names)
        return 0;
    if (p->tables_failed)
        return -1;
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
    if (!p->pb && clrmux_pprof_create(&pc, &p->pb) != 0)
        p->pb = NULL;
    if (!p->names)
        p->names = prof_names_create(p->info, NAME_ENTRIES, NAME_ARENA);
    if (p->pb && p->names)
        return 0;
    p->tables_failed = 1;
    LOG_ERROR("profiler '%s': out of memory for the profile's tables; nothing is written", p->name);
    return -1;
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

void prof_drain(struct profiler *p)
{
    struct prof_rawbuf *b = prof_rawq_swap(&p->q);
    for (uint32_t i = 0; prof_tables(p) == 0 && i < b->nrecs; i++)
        add_raw(p, &b->recs[i], &b->frames[b->recs[i].first]);
    prof_rawbuf_clear(b);
}

/* Writes the current period's file and starts the next period. `last`: NULL for a periodic
 * file, "shutdown", or the last gasp's cause ("SIGTERM", "exit"...). */
void prof_flush(struct profiler *p, const char *last)
{
    if (p->sig)
        prof_sig_flush_wall(p->sig, &p->q);
    prof_drain(p);
    prof_drain(p); /* both buffers: events pushed while the first was drained */
    int64_t now_unix = unix_ns(), now_mono = mono_ns();
    if (prof_tables(p) != 0) { /* no memory for them: nothing to write (logged once) */
        p->period_start_unix = now_unix;
        p->period_start_mono = now_mono;
        return;
    }
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
        prof_sig_summary(p, sc, sizeof sc);
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
            /* the last file is written on the process's exit path: not waiting for the
             * disk there took 1.5 ms off Shutdown in a hello world of ~80 ms (pprof.h) */
            int rc = clrmux_pprof_write_file_flags(p->pb, path, last ? CLRMUX_PPROF_WRITE_NO_FSYNC : 0);
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
