/* The built-in IL-rewriting tracer (see tracer.h). */
#define COBJMACROS
#include "tracer/tracer.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/hresult.h"
#include "common/lastgasp.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/unhandled.h"
#include "common/utf16.h"
#include "loader/child_base.h"
#include "tracer/il.h"
#include "tracer/otlp.h"
#include "tracer/otlp_http.h"
#include "tracer/spanfile.h"
#include "tracer/spans.h"
#include "tracer/target.h"

#define ofRead 0x0u
#define ofWrite 0x1u
#define MAX_TARGETS 256
#define MAX_METHODS 8192
#define METHOD_SLOTS 16384 /* power of two, > MAX_METHODS */
#define MAX_EXC_NAMES 512
#define EXPORT_BATCH 1024
#define POLL_MS 50
#define REJIT_WAIT_SECONDS 10
#define CONV_I 0xD3
#define HOLD_AFTER_UNHANDLED_MS 5000

struct traced_method {
    ModuleID module;
    mdMethodDef token;
    int target;
    char name[CLRMUX_TARGET_NAME_MAX + 130];
};

struct method_slot {
    _Atomic uint32_t idx1; /* index + 1; 0 = empty */
    ModuleID module;
    mdMethodDef token;
};

struct rejit_job {
    struct rejit_job *next;
    ULONG n;
    ModuleID *modules;
    mdMethodDef *tokens;
    int done;
    HRESULT hr;
};

/* The line being built: a buffer kept across batches (it grows to the largest line once),
 * filled through a stdio cookie (glibc's open_memstream costs ~10 us per span here). */
struct linebuf {
    char *p;
    size_t len, cap;
    int oom;
};

struct tracer {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    char child[CLRMUX_NAME_MAX];
    ICorProfilerInfo5 *info;
    int attaching; /* loaded by InitializeForAttach */

    struct clrmux_target *targets;
    int ntargets;
    _Atomic int *target_hits;
    char output[PATH_MAX];
    char conf[PATH_MAX];
    char endpoint[2048]; /* OTLP/HTTP; "" = none */
    int output_set;      /* `output =` given explicitly */
    char service[256];
    size_t buffer_spans;
    long flush_ms;

    /* traced methods: registered under reg_lock, read lock-free */
    pthread_mutex_t reg_lock;
    struct traced_method *methods;
    _Atomic uint32_t nmethods;
    struct method_slot *slots;

    /* the ReJIT thread */
    pthread_mutex_t rj_lock;
    pthread_cond_t rj_cond;
    struct rejit_job *rj_head, *rj_tail;
    int rj_started, rj_stop;
    pthread_t rj_thread;

    /* IL rewriting (metadata emission is serialised) */
    pthread_mutex_t rw_lock;
    _Atomic uint32_t rewritten, skipped;
    _Atomic uint64_t rewrite_ns;

    /* exception type names */
    pthread_mutex_t exc_lock;
    struct { ClassID cls; uint32_t id; } exc_cache[MAX_EXC_NAMES];
    uint32_t nexc_cache;
    char (*exc_names)[160];
    _Atomic uint32_t nexc;

    /* export */
    pthread_mutex_t ex_lock;
    pthread_cond_t ex_cond;
    int ex_stop, ex_started;
    pthread_t ex_thread;
    struct clrmux_spanfile *out; /* the output file (NULL: none) */
    uint64_t max_file_bytes;     /* `max_file_mb` (0: no cap) */
    unsigned max_files;          /* `max_files` */
    uint64_t rotation_errors, render_errors;
    struct clrmux_curl *curl; /* OTLP/HTTP (endpoint set and libcurl loaded) */
    struct clrmux_http *http;
    uint64_t queued, requests, request_errors;
    struct clrmux_span *batch;
    size_t nbatch;
    uint64_t written, lines, dropped_logged, deleted_logged;
    struct clrmux_unhandled_hook unhandled; /* AppContext.OnUnhandledException: flush first */
    struct linebuf line;                    /* the OTLP JSON line being written */
    /* the writer: the export thread, Shutdown, or the last gasp (common/lastgasp.h), which
     * sets `final`: nothing is written after it */
    pthread_mutex_t wr_lock;
    int final;
    _Atomic int64_t hold_until_ns; /* after an unhandled exception: no write until then */
    int write_failed;
    _Atomic int shut_down;
};

static _Atomic(struct tracer *) the_tracer;

static inline struct tracer *impl(ICorProfilerCallback11 *i) { return (struct tracer *)i; }

/* ---- small helpers ------------------------------------------------------------------- */

static void to_utf16(const char *s, WCHAR *out, size_t n) { clrmux_utf8_to_utf16(s, out, n); }

static void to_utf8(const WCHAR *s, size_t len, char *out, size_t n) { clrmux_utf16_to_utf8(s, len, out, n); }

static uint64_t hash2(uint64_t a, uint32_t b)
{
    uint64_t h = (a ^ ((uint64_t)b << 32 | b)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The index of a traced method, or -1. Lock-free. */
static int method_lookup(struct tracer *t, ModuleID mod, mdMethodDef tok)
{
    size_t i = hash2(mod, (uint32_t)tok) & (METHOD_SLOTS - 1);
    for (size_t n = 0; n < METHOD_SLOTS; n++, i = (i + 1) & (METHOD_SLOTS - 1)) {
        struct method_slot *s = &t->slots[i];
        uint32_t idx1 = atomic_load_explicit(&s->idx1, memory_order_acquire);
        if (!idx1)
            return -1;
        if (s->module == mod && s->token == tok)
            return (int)idx1 - 1;
    }
    return -1;
}

/* Registers a method (under reg_lock). Returns its index, the existing one, or -1 when full. */
static int method_register(struct tracer *t, ModuleID mod, mdMethodDef tok, int target, const char *name, int *is_new)
{
    pthread_mutex_lock(&t->reg_lock);
    *is_new = 0;
    int idx = method_lookup(t, mod, tok);
    if (idx < 0) {
        uint32_t n = atomic_load(&t->nmethods);
        if (n < MAX_METHODS) {
            struct traced_method *m = &t->methods[n];
            m->module = mod;
            m->token = tok;
            m->target = target;
            snprintf(m->name, sizeof m->name, "%s", name);
            atomic_store_explicit(&t->nmethods, n + 1, memory_order_release);
            size_t i = hash2(mod, (uint32_t)tok) & (METHOD_SLOTS - 1);
            while (atomic_load(&t->slots[i].idx1))
                i = (i + 1) & (METHOD_SLOTS - 1);
            t->slots[i].module = mod;
            t->slots[i].token = tok;
            atomic_store_explicit(&t->slots[i].idx1, n + 1, memory_order_release);
            idx = (int)n;
            *is_new = 1;
        }
    }
    pthread_mutex_unlock(&t->reg_lock);
    return idx;
}

static const char *method_name_cb(void *ctx, uint32_t id)
{
    struct tracer *t = ctx;
    return id < atomic_load_explicit(&t->nmethods, memory_order_acquire) ? t->methods[id].name : NULL;
}

static const char *exc_name_cb(void *ctx, uint32_t id)
{
    struct tracer *t = ctx;
    return id > 0 && id <= atomic_load_explicit(&t->nexc, memory_order_acquire) ? t->exc_names[id - 1] : NULL;
}

/* ---- configuration ------------------------------------------------------------------- */

static int configure(struct tracer *t, const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir)
{
    const char *file = cfg_path && *cfg_path ? cfg_path : "loader.conf";
    snprintf(t->conf, sizeof t->conf, "%s", file);
    const char *output = "traces-%p.otlp.jsonl";
    char exe[256] = "", app[256] = "";
    clrmux_process_names(exe, sizeof exe, app, sizeof app);
    snprintf(t->service, sizeof t->service, "%s", app[0] ? app : exe[0] ? exe : "unknown_service");
    t->buffer_spans = 65536;
    t->flush_ms = 1000;
    t->max_file_bytes = (uint64_t)100 << 20;
    t->max_files = 5;
    t->targets = calloc(MAX_TARGETS, sizeof *t->targets);
    t->target_hits = calloc(MAX_TARGETS, sizeof *t->target_hits);
    if (!t->targets || !t->target_hits)
        return -1;
    size_t unknown = 0, too_many = 0; /* unknown keys: the first 10 are logged, then a count */
    for (size_t i = 0; i < cc->nkvs; i++) {
        const struct clrmux_kv *kv = &cc->kvs[i];
        if (strcmp(kv->key, "trace") == 0) {
            if (t->ntargets >= MAX_TARGETS) {
                if (!too_many++)
                    LOG_ERROR("%s:%d: [child %s]: more than %d trace targets; this one and later ones ignored", file,
                              kv->line, cc->name, MAX_TARGETS);
                continue;
            }
            char err[400];
            struct clrmux_target *tg = &t->targets[t->ntargets];
            if (clrmux_target_parse(kv->value, tg, err, sizeof err) != 0) {
                LOG_ERROR("%s:%d: [child %s]: bad trace target %s; ignored", file, kv->line, cc->name, err);
                continue;
            }
            tg->line = kv->line;
            t->ntargets++;
        } else if (strcmp(kv->key, "output") == 0) {
            output = kv->value;
            t->output_set = 1;
        } else if (strcmp(kv->key, "service_name") == 0) {
            snprintf(t->service, sizeof t->service, "%s", kv->value);
        } else if (strcmp(kv->key, "buffer_spans") == 0 || strcmp(kv->key, "flush_interval_ms") == 0) {
            char *end = NULL;
            errno = 0;
            long v = strtol(kv->value, &end, 10);
            int is_buf = kv->key[0] == 'b';
            if (errno || !end || *end || v < (is_buf ? 16 : 10) || v > (is_buf ? 1 << 24 : 3600000)) {
                LOG_ERROR("%s:%d: [child %s]: %s = '%s' is not a number in %s; default kept", file, kv->line, cc->name,
                          kv->key, kv->value, is_buf ? "16..16777216" : "10..3600000");
            } else if (is_buf) {
                t->buffer_spans = (size_t)v;
            } else {
                t->flush_ms = v;
            }
        } else if (strcmp(kv->key, "max_file_mb") == 0 || strcmp(kv->key, "max_files") == 0) {
            char *end = NULL;
            errno = 0;
            long v = strtol(kv->value, &end, 10);
            int is_mb = strcmp(kv->key, "max_file_mb") == 0;
            long lo = is_mb ? 0 : 1, hi = is_mb ? 1048576 : CLRMUX_SPANFILE_MAX_FILES;
            if (errno || !end || *end || end == kv->value || v < lo || v > hi)
                LOG_ERROR("%s:%d: [child %s]: %s = '%s' is not a number in %ld..%ld; default kept", file, kv->line,
                          cc->name, kv->key, kv->value, lo, hi);
            else if (is_mb)
                t->max_file_bytes = (uint64_t)v << 20;
            else
                t->max_files = (unsigned)v;
        } else if (strcmp(kv->key, "endpoint") == 0) {
            if (strncasecmp(kv->value, "http://", 7) != 0 && strncasecmp(kv->value, "https://", 8) != 0)
                LOG_ERROR("%s:%d: [child %s]: endpoint '%s' is not an http:// or https:// URL; ignored", file,
                          kv->line, cc->name, kv->value);
            else if (strlen(kv->value) >= sizeof t->endpoint)
                LOG_ERROR("%s:%d: [child %s]: endpoint too long; ignored", file, kv->line, cc->name);
            else
                snprintf(t->endpoint, sizeof t->endpoint, "%s", kv->value);
        } else if (++unknown <= 10) {
            LOG_WARN("%s:%d: [child %s]: unknown key '%s'; ignored", file, kv->line, cc->name, kv->key);
        }
    }
    if (unknown > 10)
        LOG_WARN("%s: [child %s]: %zu more unknown keys ignored", file, cc->name, unknown - 10);
    char expanded[PATH_MAX];
    if (clrmux_expand_pid(output, expanded, sizeof expanded) != 0) {
        LOG_ERROR("child '%s': output path too long", cc->name);
        return -1;
    }
    if (expanded[0] == '/')
        snprintf(t->output, sizeof t->output, "%s", expanded);
    else if ((size_t)snprintf(t->output, sizeof t->output, "%s/%s", cfg_dir && *cfg_dir ? cfg_dir : ".", expanded) >=
             sizeof t->output) {
        LOG_ERROR("child '%s': output path too long", cc->name);
        return -1;
    }
    if (t->ntargets == 0)
        LOG_WARN("child '%s': no valid 'trace =' target; the tracer records nothing", cc->name);
    return 0;
}

/* ---- export -------------------------------------------------------------------------- */

static ssize_t linebuf_write(void *cookie, const char *buf, size_t n)
{
    struct linebuf *b = cookie;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, buf, n);
    b->len += n;
    return (ssize_t)n;
}

/* The batch as one OTLP JSON line, '\n' included, in t->line; 0, or -1 (out of memory). */
static int render_batch(struct tracer *t)
{
    struct clrmux_otlp_names names = {method_name_cb, exc_name_cb, t};
    t->line.len = 0;
    t->line.oom = 0;
    FILE *m = fopencookie(&t->line, "w", (cookie_io_functions_t){.write = linebuf_write});
    if (!m)
        return -1;
    setvbuf(m, NULL, _IOFBF, 1 << 16);
    int rc = clrmux_otlp_write_line(m, t->service, (long)getpid(), t->batch, t->nbatch, &names);
    if (fclose(m) != 0 || t->line.oom || !t->line.len)
        rc = -1;
    return rc;
}

/* Writes the batch as one line, with one write(2) (whole lines only), to the file, and/or
 * queues it for the OTLP/HTTP collector. Export thread, or the last gasp (under wr_lock). */
static void write_batch(struct tracer *t)
{
    if (!t->nbatch)
        return;
    int to_file = t->out && !t->write_failed;
    if (!to_file && !t->http) {
        t->nbatch = 0;
        return;
    }
    if (render_batch(t) != 0) {
        if (!t->render_errors++)
            LOG_ERROR("tracer: cannot format %zu span(s): out of memory; dropped (logged once)", t->nbatch);
        t->nbatch = 0;
        return;
    }
    if (to_file) {
        char err[PATH_MAX + 200];
        int rc = clrmux_spanfile_write(t->out, t->line.p, t->line.len, t->nbatch, err, sizeof err);
        if (rc < 0) {
            LOG_ERROR("tracer: %s; spans are no longer written to it", err);
            t->write_failed = 1;
        } else {
            t->written += t->nbatch;
            t->lines++;
            if (rc > 0 && !t->rotation_errors++)
                LOG_ERROR("tracer: %s: the file was emptied instead to keep max_file_mb (logged once)", err);
            struct clrmux_spanfile_stats fs;
            clrmux_spanfile_stats(t->out, &fs);
            if (fs.files_deleted > t->deleted_logged && !t->deleted_logged)
                LOG_WARN("tracer: %s reached max_file_mb = %llu with max_files = %u: the oldest file is deleted at "
                         "each rotation from now on (its spans are counted as dropped; totals at shutdown)",
                         t->output, (unsigned long long)(t->max_file_bytes >> 20), t->max_files);
            t->deleted_logged = fs.files_deleted;
        }
    }
    if (t->http) {
        char *body = malloc(t->line.len);
        if (body) {
            memcpy(body, t->line.p, t->line.len - 1); /* the request body: the line without '\n' */
            t->queued += t->nbatch;
            t->requests++;
            clrmux_http_enqueue(t->http, body, t->line.len - 1, t->nbatch); /* takes body */
        } else if (!t->render_errors++) {
            LOG_ERROR("tracer: OTLP/HTTP: cannot build a request of %zu span(s): out of memory; dropped (logged once)",
                      t->nbatch);
        }
    }
    t->nbatch = 0;
}

/* Moves finished spans from the ring into the batch, writing each full batch as a line; with
 * `flush`, also the partial batch. Export thread, Shutdown or the last gasp (under wr_lock). */
static void export_pending(struct tracer *t, int flush)
{
    /* at most one ring's worth per call: producers that keep up with the writer must not keep
     * it (and wr_lock) forever; the spans after that wait for the next poll */
    for (size_t n = 0; n <= t->buffer_spans / EXPORT_BATCH + 1; n++) {
        t->nbatch += clrmux_spans_drain(t->batch + t->nbatch, EXPORT_BATCH - t->nbatch);
        if (t->nbatch < EXPORT_BATCH)
            break;
        write_batch(t);
    }
    if (flush)
        write_batch(t);
    struct clrmux_span_stats st;
    clrmux_spans_stats(&st);
    if (st.dropped > t->dropped_logged && (flush || st.dropped - t->dropped_logged >= 100000)) {
        LOG_WARN("tracer: %llu span(s) dropped: the buffer (%zu spans) was full",
                 (unsigned long long)(st.dropped - t->dropped_logged), t->buffer_spans);
        t->dropped_logged = st.dropped;
    }
}

static void add_ms(struct timespec *ts, long ms)
{
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Drains the ring every POLL_MS (so that a burst does not overflow it between flushes) and
 * writes and flushes what it holds every flush_ms. */
static void *export_thread(void *arg)
{
    struct tracer *t = arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-export");
    const long poll = t->flush_ms < POLL_MS ? t->flush_ms : POLL_MS;
    struct timespec flush_at, next, now;
    clock_gettime(CLOCK_REALTIME, &flush_at);
    add_ms(&flush_at, t->flush_ms);
    pthread_mutex_lock(&t->ex_lock);
    while (!t->ex_stop) {
        clock_gettime(CLOCK_REALTIME, &now);
        next = now;
        /* no wait while requests are ready to send (the pump stopped at its budget) */
        if (!t->http || !clrmux_http_ready(t->http))
            add_ms(&next, poll);
        while (!t->ex_stop && before(&now, &next)) { /* until the next poll or a stop */
            pthread_cond_timedwait(&t->ex_cond, &t->ex_lock, &next);
            clock_gettime(CLOCK_REALTIME, &now);
        }
        if (t->ex_stop)
            break;
        int flush = !before(&now, &flush_at);
        if (flush) {
            flush_at = now;
            add_ms(&flush_at, t->flush_ms);
        }
        pthread_mutex_unlock(&t->ex_lock);
        pthread_mutex_lock(&t->wr_lock);
        if (!t->final && clrmux_mono_ns() >= atomic_load(&t->hold_until_ns)) {
            export_pending(t, flush);
            if (t->http) /* what is due, for at most a poll interval: then the ring is drained again */
                clrmux_http_pump(t->http, poll);
        }
        pthread_mutex_unlock(&t->wr_lock);
        pthread_mutex_lock(&t->ex_lock);
    }
    pthread_mutex_unlock(&t->ex_lock);
    /* Shutdown: the last spans, and the requests still queued, within a bounded time */
    pthread_mutex_lock(&t->wr_lock);
    if (!t->final) {
        export_pending(t, 1);
        if (t->http)
            clrmux_http_finish(t->http, CLRMUX_HTTP_SHUTDOWN_MS);
    }
    pthread_mutex_unlock(&t->wr_lock);
    return NULL;
}

/* ---- the ReJIT thread ---------------------------------------------------------------- */

static void *rejit_thread(void *arg)
{
    struct tracer *t = arg;
    clrmux_block_termination_signals();
    HRESULT hr = ICorProfilerInfo5_InitializeCurrentThread(t->info);
    if (FAILED(hr))
        LOG_WARN("tracer: InitializeCurrentThread failed with HRESULT %s", HR_STR(hr));
    pthread_mutex_lock(&t->rj_lock);
    for (;;) {
        while (!t->rj_head && !t->rj_stop)
            pthread_cond_wait(&t->rj_cond, &t->rj_lock);
        if (t->rj_stop)
            break;
        struct rejit_job *j = t->rj_head;
        t->rj_head = j->next;
        if (!t->rj_head)
            t->rj_tail = NULL;
        pthread_mutex_unlock(&t->rj_lock);
        j->hr = ICorProfilerInfo5_RequestReJIT(t->info, j->n, j->modules, j->tokens);
        pthread_mutex_lock(&t->rj_lock);
        j->done = 1;
        pthread_cond_broadcast(&t->rj_cond);
    }
    pthread_mutex_unlock(&t->rj_lock);
    return NULL;
}

/* Queues a RequestReJIT for the ReJIT thread and waits (bounded) until it has been made. */
static void request_rejit(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly)
{
    struct rejit_job *j = calloc(1, sizeof *j);
    ModuleID *mods = calloc(n, sizeof *mods);
    mdMethodDef *toks = calloc(n, sizeof *toks);
    if (!j || !mods || !toks) {
        free(j), free(mods), free(toks);
        LOG_ERROR("tracer: out of memory; %u method(s) of %s not traced", (unsigned)n, assembly);
        return;
    }
    for (ULONG i = 0; i < n; i++) {
        mods[i] = mod;
        toks[i] = tokens[i];
    }
    j->n = n;
    j->modules = mods;
    j->tokens = toks;
    pthread_mutex_lock(&t->rj_lock);
    if (t->rj_tail)
        t->rj_tail->next = j;
    else
        t->rj_head = j;
    t->rj_tail = j;
    pthread_cond_broadcast(&t->rj_cond);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += REJIT_WAIT_SECONDS;
    int rc = 0;
    while (!j->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&t->rj_cond, &t->rj_lock, &ts);
    int done = j->done;
    HRESULT hr = j->hr;
    if (done) {
        free(mods), free(toks), free(j);
    } /* else the ReJIT thread still owns the job: it is leaked rather than freed under it */
    pthread_mutex_unlock(&t->rj_lock);
    if (!done)
        LOG_WARN("tracer: RequestReJIT for %s not done after %d s; its first calls may not be traced", assembly,
                 REJIT_WAIT_SECONDS);
    else if (FAILED(hr))
        LOG_ERROR("tracer: RequestReJIT of %u method(s) of %s failed with HRESULT %s", (unsigned)n, assembly,
                  HR_STR(hr));
    else
        LOG_DEBUG("tracer: ReJIT requested for %u method(s) of %s", (unsigned)n, assembly);
}

/* ---- metadata ------------------------------------------------------------------------ */

/* Full name of a TypeDef ("Ns.Outer+Inner") or TypeRef. */
static int type_full_name(IMetaDataImport2 *imp, mdToken tok, char *out, size_t outsz, int depth)
{
    WCHAR w[512];
    ULONG len = 0;
    char name[512];
    if (depth > 8)
        return -1;
    if (TypeFromToken(tok) == mdtTypeDef) {
        DWORD flags = 0;
        mdToken ext = 0;
        if (FAILED(IMetaDataImport2_GetTypeDefProps(imp, tok, w, 512, &len, &flags, &ext)))
            return -1;
        to_utf8(w, len, name, sizeof name);
        mdTypeDef encl = 0;
        if ((flags & 0x6) && SUCCEEDED(IMetaDataImport2_GetNestedClassProps(imp, tok, &encl)) && encl) {
            char outer[512];
            if (type_full_name(imp, encl, outer, sizeof outer, depth + 1) == 0) {
                snprintf(out, outsz, "%s+%s", outer, name);
                return 0;
            }
        }
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    if (TypeFromToken(tok) == mdtTypeRef) {
        mdToken scope = 0;
        if (FAILED(IMetaDataImport2_GetTypeRefProps(imp, tok, &scope, w, 512, &len)))
            return -1;
        to_utf8(w, len, name, sizeof name);
        if (TypeFromToken(scope) == mdtTypeRef) {
            char outer[512];
            if (type_full_name(imp, scope, outer, sizeof outer, depth + 1) == 0) {
                snprintf(out, outsz, "%s+%s", outer, name);
                return 0;
            }
        }
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    return -1;
}

static int resolve_type_name(void *ctx, uint32_t token, char *out, size_t outsz)
{
    return type_full_name(ctx, (mdToken)token, out, outsz, 0);
}

static int assembly_has_targets(struct tracer *t, const char *assembly)
{
    for (int i = 0; i < t->ntargets; i++)
        if (strcasecmp(t->targets[i].assembly, assembly) == 0)
            return 1;
    return 0;
}

/* Finds target tg's methods in the module; appends new ones to toks. */
static void match_target(struct tracer *t, int ti, IMetaDataImport2 *imp, ModuleID mod, mdMethodDef *toks, ULONG *ntoks,
                         ULONG cap)
{
    const struct clrmux_target *tg = &t->targets[ti];
    char part[CLRMUX_TARGET_NAME_MAX];
    WCHAR w[CLRMUX_TARGET_NAME_MAX];
    mdTypeDef td = 0;
    const char *p = tg->type;
    int first = 1;
    for (;;) {
        const char *plus = strchr(p, '+');
        size_t n = plus ? (size_t)(plus - p) : strlen(p);
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        to_utf16(part, w, CLRMUX_TARGET_NAME_MAX);
        mdTypeDef next = 0;
        if (FAILED(IMetaDataImport2_FindTypeDefByName(imp, w, first ? mdTokenNil : td, &next)) || !next) {
            LOG_DEBUG("tracer: %s:%d: type %s not found in %s", t->conf, tg->line, tg->type, tg->assembly);
            return;
        }
        td = next;
        first = 0;
        if (!plus)
            break;
        p = plus + 1;
    }
    to_utf16(tg->method, w, CLRMUX_TARGET_NAME_MAX);
    HCORENUM e = NULL;
    mdMethodDef found[64];
    ULONG nfound = 0;
    int any = 0;
    while (SUCCEEDED(IMetaDataImport2_EnumMethodsWithName(imp, &e, td, w, found, 64, &nfound)) && nfound > 0) {
        for (ULONG k = 0; k < nfound; k++) {
            PCCOR_SIGNATURE sig = NULL;
            ULONG siglen = 0, rva = 0;
            DWORD attr = 0, impl_flags = 0;
            if (FAILED(IMetaDataImport2_GetMethodProps(imp, found[k], NULL, NULL, 0, NULL, &attr, &sig, &siglen, &rva,
                                                      &impl_flags)))
                continue;
            if (tg->has_params) {
                char names[CLRMUX_TARGET_MAX_PARAMS][CLRMUX_TARGET_NAME_MAX];
                int np = clrmux_sig_param_names(sig, siglen, resolve_type_name, imp, names, CLRMUX_TARGET_MAX_PARAMS);
                if (np < 0 || np > CLRMUX_TARGET_MAX_PARAMS || !clrmux_target_params_match(tg, names, np))
                    continue;
            }
            char name[CLRMUX_TARGET_NAME_MAX + 130];
            snprintf(name, sizeof name, "%s.%s", tg->type, tg->method);
            if (rva == 0 || (impl_flags & 0x0003) != 0 /* miIL only (not native/runtime) */ ||
                (impl_flags & 0x1000) /* miInternalCall */) {
                LOG_WARN("tracer: %s:%d: %s (method 0x%08X) has no IL body (abstract, extern or runtime-implemented); "
                         "not traced", t->conf, tg->line, name, (unsigned)found[k]);
                atomic_fetch_add(&t->target_hits[ti], 1); /* matched: not reported again at shutdown */
                any = 1;
                continue;
            }
            int is_new = 0;
            int idx = method_register(t, mod, found[k], ti, name, &is_new);
            if (idx < 0) {
                LOG_ERROR("tracer: more than %d traced methods; %s not traced", MAX_METHODS, name);
                continue;
            }
            any = 1;
            atomic_fetch_add(&t->target_hits[ti], 1);
            if (is_new && *ntoks < cap)
                toks[(*ntoks)++] = found[k];
        }
    }
    if (e)
        IMetaDataImport2_CloseEnum(imp, e);
    if (!any)
        LOG_DEBUG("tracer: %s:%d: no method %s::%s matches in %s", t->conf, tg->line, tg->type, tg->method, tg->assembly);
}

/* ---- IL rewriting -------------------------------------------------------------------- */

static void b_fnptr(clrmux_il_builder *b, void *fn)
{
    clrmux_il_b_op_arg(b, CLRMUX_IL_OP_LDC_I8, (int64_t)(intptr_t)fn);
    clrmux_il_b_op(b, CONV_I);
}

/* Rewrites method idx. Returns 0, or -1 with a reason in why. */
static int rewrite(struct tracer *t, ModuleID mod, mdMethodDef tok, uint32_t idx, ICorProfilerFunctionControl *fc,
                   char *why, size_t whylen)
{
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    HRESULT hr = ICorProfilerInfo5_GetILFunctionBody(t->info, mod, tok, &il, &il_size);
    if (FAILED(hr) || !il) {
        snprintf(why, whylen, "GetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        return -1;
    }
    char err[256];
    clrmux_il_body body;
    int rc = clrmux_il_parse(il, il_size, &body, NULL, err, sizeof err);
    if (rc) {
        snprintf(why, whylen, "cannot parse its IL: %s", err);
        return -1;
    }
    IUnknown *unk = NULL;
    IMetaDataEmit2 *emit = NULL;
    IMetaDataImport2 *imp = NULL;
    uint8_t *newsig = NULL, *code = NULL;
    clrmux_il_builder be, bx, bf;
    clrmux_il_b_init(&be);
    clrmux_il_b_init(&bx);
    clrmux_il_b_init(&bf);
    int result = -1;
    pthread_mutex_lock(&t->rw_lock);
    hr = ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead | ofWrite, &IID_IMetaDataEmit2, &unk);
    if (FAILED(hr) || !unk) {
        snprintf(why, whylen, "GetModuleMetaData(ofWrite) failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    emit = (IMetaDataEmit2 *)unk;
    if (FAILED(hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataImport2, (void **)&imp)) || !imp) {
        snprintf(why, whylen, "no IMetaDataImport2 (HRESULT %s)", HR_STR(hr));
        goto out;
    }
    PCCOR_SIGNATURE msig = NULL;
    ULONG msig_len = 0;
    if (FAILED(hr = IMetaDataImport2_GetMethodProps(imp, tok, NULL, NULL, 0, NULL, NULL, &msig, &msig_len, NULL, NULL))) {
        snprintf(why, whylen, "GetMethodProps failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    clrmux_il_method_sig ms;
    if (clrmux_il_parse_method_sig(msig, msig_len, &ms, err, sizeof err)) {
        snprintf(why, whylen, "cannot read its signature: %s", err);
        goto out;
    }
    PCCOR_SIGNATURE lsig = NULL;
    ULONG lsig_len = 0;
    if (body.local_sig_tok &&
        FAILED(hr = IMetaDataImport2_GetSigFromToken(imp, (mdSignature)body.local_sig_tok, &lsig, &lsig_len))) {
        snprintf(why, whylen, "GetSigFromToken(0x%08X) failed with HRESULT %s", (unsigned)body.local_sig_tok,
                 HR_STR(hr));
        goto out;
    }
    /* new locals: int64 span slot, then the return value */
    uint8_t types[1 + 512];
    size_t tlen = 1;
    uint32_t ntypes = 1;
    types[0] = CLRMUX_ELEMENT_TYPE_I8;
    if (!ms.returns_void) {
        if (ms.ret_len > sizeof types - 1) {
            snprintf(why, whylen, "return type signature too long (%zu bytes)", ms.ret_len);
            goto out;
        }
        memcpy(types + 1, msig + ms.ret_offset, ms.ret_len);
        tlen += ms.ret_len;
        ntypes++;
    }
    size_t newsig_len = 0;
    uint32_t first_new = 0;
    if ((rc = clrmux_il_locals_append(lsig, lsig_len, types, tlen, ntypes, &newsig, &newsig_len, &first_new, err,
                                      sizeof err))) {
        snprintf(why, whylen, "cannot extend its locals: %s", err);
        goto out;
    }
    mdSignature local_tok = 0, sig_enter = 0, sig_void = 0;
    /* unmanaged cdecl StandAloneMethodSigs: int64(int32) and void(int64) */
    static const uint8_t enter_sig[] = {0x01, 0x01, CLRMUX_ELEMENT_TYPE_I8, CLRMUX_ELEMENT_TYPE_I4};
    static const uint8_t void_sig[] = {0x01, 0x01, CLRMUX_ELEMENT_TYPE_VOID, CLRMUX_ELEMENT_TYPE_I8};
    if (FAILED(hr = IMetaDataEmit2_GetTokenFromSig(emit, newsig, (ULONG)newsig_len, &local_tok)) ||
        FAILED(hr = IMetaDataEmit2_GetTokenFromSig(emit, enter_sig, sizeof enter_sig, &sig_enter)) ||
        FAILED(hr = IMetaDataEmit2_GetTokenFromSig(emit, void_sig, sizeof void_sig, &sig_void))) {
        snprintf(why, whylen, "GetTokenFromSig failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    uint32_t slot = first_new;
    /* entry: slot = enter(idx) */
    clrmux_il_b_ldc_i4(&be, (int32_t)idx);
    b_fnptr(&be, (void *)clrmux_span_enter);
    clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)sig_enter);
    clrmux_il_b_var(&be, CLRMUX_IL_STLOC, slot);
    /* exit: exit(slot) */
    clrmux_il_b_var(&bx, CLRMUX_IL_LDLOC, slot);
    b_fnptr(&bx, (void *)clrmux_span_exit);
    clrmux_il_b_token(&bx, CLRMUX_IL_OP_CALLI, (uint32_t)sig_void);
    /* filter: [exception] pop; exception(slot); 0 (keep searching: the exception propagates) */
    clrmux_il_b_op(&bf, CLRMUX_IL_OP_POP);
    clrmux_il_b_var(&bf, CLRMUX_IL_LDLOC, slot);
    b_fnptr(&bf, (void *)clrmux_span_exception);
    clrmux_il_b_token(&bf, CLRMUX_IL_OP_CALLI, (uint32_t)sig_void);
    clrmux_il_b_ldc_i4(&bf, 0);
    if (clrmux_il_b_finish(&be, err, sizeof err) || clrmux_il_b_finish(&bx, err, sizeof err) ||
        clrmux_il_b_finish(&bf, err, sizeof err)) {
        snprintf(why, whylen, "cannot build the probes: %s", err);
        goto out;
    }
    clrmux_il_wrap_spec spec = {
        .entry = be.data, .entry_len = be.len,
        .exit = bx.data, .exit_len = bx.len,
        .filter = bf.data, .filter_len = bf.len,
        .ret_local = ms.returns_void ? CLRMUX_IL_NO_LOCAL : first_new + 1,
        .local_sig_tok = (uint32_t)local_tok,
        .extra_max_stack = 2,
    };
    if ((rc = clrmux_il_wrap(&body, &spec, err, sizeof err))) {
        snprintf(why, whylen, "cannot wrap its IL: %s", err);
        goto out;
    }
    size_t code_len = 0;
    if ((rc = clrmux_il_emit(&body, &code, &code_len, err, sizeof err))) {
        snprintf(why, whylen, "cannot encode the new IL: %s", err);
        goto out;
    }
    if (FAILED(hr = ICorProfilerFunctionControl_SetILFunctionBody(fc, (ULONG)code_len, code))) {
        snprintf(why, whylen, "SetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    snprintf(why, whylen, "%u -> %zu bytes of IL", (unsigned)il_size, code_len);
    result = 0;
out:
    pthread_mutex_unlock(&t->rw_lock);
    if (imp)
        IMetaDataImport2_Release(imp);
    if (emit)
        IMetaDataEmit2_Release(emit);
    free(newsig);
    free(code);
    clrmux_il_b_free(&be);
    clrmux_il_b_free(&bx);
    clrmux_il_b_free(&bf);
    clrmux_il_body_free(&body);
    return result;
}

/* ---- exception names ----------------------------------------------------------------- */

static uint32_t exception_name_id(struct tracer *t, ClassID cls)
{
    uint32_t id = 0;
    pthread_mutex_lock(&t->exc_lock);
    for (uint32_t i = 0; i < t->nexc_cache; i++)
        if (t->exc_cache[i].cls == cls) {
            id = t->exc_cache[i].id;
            goto done;
        }
    ModuleID mod = 0;
    mdTypeDef td = 0;
    if (FAILED(ICorProfilerInfo5_GetClassIDInfo(t->info, cls, &mod, &td)) || !td)
        goto done;
    IUnknown *unk = NULL;
    if (FAILED(ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead, &IID_IMetaDataImport2, &unk)) || !unk)
        goto done;
    char name[160];
    int ok = type_full_name((IMetaDataImport2 *)unk, td, name, sizeof name, 0) == 0;
    IUnknown_Release(unk);
    if (!ok)
        goto done;
    uint32_t n = atomic_load(&t->nexc);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(t->exc_names[i], name) == 0)
            id = i + 1;
    if (!id && n < MAX_EXC_NAMES) {
        snprintf(t->exc_names[n], sizeof t->exc_names[n], "%s", name);
        atomic_store_explicit(&t->nexc, n + 1, memory_order_release);
        id = n + 1;
    }
    if (id && t->nexc_cache < MAX_EXC_NAMES) {
        t->exc_cache[t->nexc_cache].cls = cls;
        t->exc_cache[t->nexc_cache].id = id;
        t->nexc_cache++;
    }
done:
    pthread_mutex_unlock(&t->exc_lock);
    return id;
}

/* ---- callbacks ----------------------------------------------------------------------- */

CLRMUX_DEFINE_NOOP_CALLBACKS(trd)

static HRESULT STDMETHODCALLTYPE tr_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    return clrmux_callback_query(This, &impl(This)->refs, riid, ppv);
}

static ULONG STDMETHODCALLTYPE tr_AddRef(ICorProfilerCallback11 *This) { return clrmux_refs_add(&impl(This)->refs); }

/* never freed: rewritten code calls the probes until the process ends */
static ULONG STDMETHODCALLTYPE tr_Release(ICorProfilerCallback11 *This) { return clrmux_refs_release(&impl(This)->refs); }

#define TRACER_MASK                                                                                    \
    (COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_JIT_COMPILATION |           \
     COR_PRF_MONITOR_CACHE_SEARCHES | COR_PRF_MONITOR_EXCEPTIONS)

static void tracer_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final);

static HRESULT STDMETHODCALLTYPE tr_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct tracer *t = impl(This);
    HRESULT hr = unk ? IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo5, (void **)&t->info) : E_POINTER;
    if (FAILED(hr) || !t->info) {
        LOG_ERROR("child '%s': the runtime has no ICorProfilerInfo5 (HRESULT %s); tracer disabled", t->child,
                  HR_STR(hr));
        return FAILED(hr) ? hr : E_NOINTERFACE;
    }
    /* after attach COR_PRF_MONITOR_CACHE_SEARCHES is not allowed (COR_PRF_ALLOWABLE_AFTER_ATTACH):
     * precompiled code is already in use then, and ReJIT replaces it all the same */
    DWORD mask = (DWORD)TRACER_MASK & (t->attaching ? ~(DWORD)COR_PRF_MONITOR_CACHE_SEARCHES : ~0u);
    hr = ICorProfilerInfo5_SetEventMask2(t->info, mask, 0);
    if (FAILED(hr)) {
        LOG_ERROR("child '%s': SetEventMask2 failed with HRESULT %s; tracer disabled", t->child, HR_STR(hr));
        return hr;
    }
    if (clrmux_spans_init(t->buffer_spans) != 0)
        return E_OUTOFMEMORY;
    /* The rule: without endpoint, spans go to the file (`output`, or its default); with
     * endpoint, to the collector only, unless `output` is also set explicitly (then to both),
     * or libcurl cannot be loaded (then to the file, the explicit or the default one). */
    char via[PATH_MAX + 64] = "";
    if (t->endpoint[0]) {
        char err[800];
        char loaded[PATH_MAX];
        t->curl = clrmux_curl_open(getenv("CLRMUX_LIBCURL"), t->endpoint, loaded, sizeof loaded, err, sizeof err);
        if (!t->curl) {
            LOG_ERROR("tracer: endpoint %s: %s; OTLP/HTTP export is off, spans are written to %s instead", t->endpoint,
                      err, t->output);
            t->output_set = 1;
        } else {
            struct clrmux_http_conf hc = {
                .endpoint = t->endpoint,
                .max_queue = CLRMUX_HTTP_QUEUE,
                .max_attempts = CLRMUX_HTTP_ATTEMPTS,
                .backoff_ms = CLRMUX_HTTP_BACKOFF_MS,
                .backoff_max_ms = CLRMUX_HTTP_BACKOFF_MAX_MS,
                .timeout_ms = CLRMUX_HTTP_TIMEOUT_MS,
                .post = clrmux_curl_post,
                .post_ctx = t->curl,
            };
            if (!(t->http = clrmux_http_new(&hc)))
                return E_OUTOFMEMORY;
            snprintf(via, sizeof via, " (OTLP/HTTP JSON with %s)", loaded);
        }
    }
    if (!t->http || t->output_set) {
        char err[PATH_MAX + 200];
        t->out = clrmux_spanfile_open(t->output, t->max_file_bytes, t->max_files, err, sizeof err);
        if (!t->out) {
            LOG_ERROR("child '%s': cannot open output %s: %s; tracer disabled", t->child, t->output, err);
            return E_FAIL;
        }
    }
    if (pthread_create(&t->rj_thread, NULL, rejit_thread, t) != 0) {
        LOG_ERROR("child '%s': cannot start the ReJIT thread; tracer disabled", t->child);
        return E_FAIL;
    }
    t->rj_started = 1;
    if (pthread_create(&t->ex_thread, NULL, export_thread, t) == 0)
        t->ex_started = 1;
    else
        LOG_WARN("child '%s': cannot start the export thread; spans are written at shutdown only", t->child);
    if (clrmux_lastgasp_register(tracer_last_gasp, t) != 0)
        LOG_WARN("child '%s': no last gasp: a process that ends without Shutdown loses its unwritten spans", t->child);
    if (!t->http)
        LOG_INFO("tracer: %d target(s), spans to %s (service.name %s)", t->ntargets, t->output, t->service);
    else if (!t->out)
        LOG_INFO("tracer: %d target(s), spans to %s%s (service.name %s)", t->ntargets, t->endpoint, via, t->service);
    else
        LOG_INFO("tracer: %d target(s), spans to %s%s and to %s (service.name %s)", t->ntargets, t->endpoint, via,
                 t->output, t->service);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ModuleLoadFinished(ICorProfilerCallback11 *This, ModuleID mod, HRESULT status)
{
    struct tracer *t = impl(This);
    if (FAILED(status) || !t->ntargets || atomic_load(&t->shut_down))
        return S_OK;
    LPCBYTE base = NULL;
    WCHAR wpath[512];
    ULONG len = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (FAILED(ICorProfilerInfo5_GetModuleInfo2(t->info, mod, &base, 512, &len, wpath, &asm_id, &flags)))
        return S_OK;
    if (flags & (COR_PRF_MODULE_DYNAMIC | COR_PRF_MODULE_RESOURCE))
        return S_OK;
    WCHAR wname[256];
    char assembly[256];
    if (FAILED(ICorProfilerInfo5_GetAssemblyInfo(t->info, asm_id, 256, &len, wname, NULL, NULL)))
        return S_OK;
    to_utf8(wname, len, assembly, sizeof assembly);
    if (!assembly_has_targets(t, assembly))
        return S_OK;
    IUnknown *unk = NULL;
    HRESULT hr = ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead, &IID_IMetaDataImport2, &unk);
    if (FAILED(hr) || !unk) {
        LOG_WARN("tracer: no metadata for %s (HRESULT %s); its targets are not traced", assembly, HR_STR(hr));
        return S_OK;
    }
    IMetaDataImport2 *imp = (IMetaDataImport2 *)unk;
    mdMethodDef toks[512];
    ULONG n = 0;
    for (int i = 0; i < t->ntargets; i++)
        if (strcasecmp(t->targets[i].assembly, assembly) == 0)
            match_target(t, i, imp, mod, toks, &n, 512);
    IMetaDataImport2_Release(imp);
    if (n) {
        LOG_INFO("tracer: %s: %u method(s) to trace", assembly, (unsigned)n);
        request_rejit(t, mod, toks, n, assembly);
    }
    return S_OK;
}

/* Attach: Initialize as at start-up; the modules already loaded are matched once the attach
 * is complete (ModuleLoadFinished is not raised for them), then ReJIT does the rest. */
static HRESULT STDMETHODCALLTYPE tr_InitializeForAttach(ICorProfilerCallback11 *This, IUnknown *unk, void *data, UINT cb)
{
    (void)data, (void)cb;
    impl(This)->attaching = 1;
    return tr_Initialize(This, unk);
}

static HRESULT STDMETHODCALLTYPE tr_ProfilerAttachComplete(ICorProfilerCallback11 *This)
{
    struct tracer *t = impl(This);
    ICorProfilerModuleEnum *en = NULL;
    if (FAILED(ICorProfilerInfo5_EnumModules(t->info, &en)) || !en) {
        LOG_WARN("tracer: EnumModules failed after attach; only modules loaded from now on are traced");
        return S_OK;
    }
    ModuleID mods[64];
    ULONG got = 0, total = 0;
    while (SUCCEEDED(ICorProfilerModuleEnum_Next(en, 64, mods, &got)) && got > 0) {
        for (ULONG i = 0; i < got; i++)
            tr_ModuleLoadFinished(This, mods[i], S_OK);
        total += got;
    }
    ICorProfilerModuleEnum_Release(en);
    LOG_INFO("tracer: attached; %u module(s) already loaded were matched against the targets", (unsigned)total);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                                       ICorProfilerFunctionControl *fc)
{
    struct tracer *t = impl(This);
    int idx = method_lookup(t, mod, tok);
    if (idx < 0 || !fc)
        return S_OK;
    char why[320];
    int64_t t0 = clrmux_now_ns();
    if (rewrite(t, mod, tok, (uint32_t)idx, fc, why, sizeof why) == 0) {
        int64_t ns = clrmux_now_ns() - t0;
        atomic_fetch_add(&t->rewritten, 1);
        atomic_fetch_add(&t->rewrite_ns, (uint64_t)ns);
        LOG_DEBUG("tracer: %s rewritten in %lld us (%s)", t->methods[idx].name, (long long)(ns / 1000), why);
    } else {
        atomic_fetch_add(&t->skipped, 1);
        LOG_WARN("tracer: %s (method 0x%08X) not traced: %s", t->methods[idx].name, (unsigned)tok, why);
    }
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ReJITError(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                               FunctionID fid, HRESULT status)
{
    struct tracer *t = impl(This);
    (void)fid;
    int idx = method_lookup(t, mod, tok);
    LOG_WARN("tracer: ReJIT of %s (method 0x%08X) failed with HRESULT %s; not traced",
             idx >= 0 ? t->methods[idx].name : "?", (unsigned)tok, HR_STR(status));
    return S_OK;
}

static int is_traced_function(struct tracer *t, FunctionID fid)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    if (!atomic_load_explicit(&t->nmethods, memory_order_relaxed))
        return 0;
    if (FAILED(ICorProfilerInfo5_GetFunctionInfo(t->info, fid, &cls, &mod, &tok)))
        return 0;
    return method_lookup(t, mod, tok) >= 0;
}

static HRESULT STDMETHODCALLTYPE tr_JITInlining(ICorProfilerCallback11 *This, FunctionID caller, FunctionID callee,
                                                BOOL *pfShouldInline)
{
    (void)caller;
    if (pfShouldInline && *pfShouldInline && is_traced_function(impl(This), callee))
        *pfShouldInline = FALSE;
    return S_OK;
}

/* An unhandled exception is about to end the process (common/unhandled.h): the last gasp,
 * on the dying thread, before the runtime aborts. */
static void check_unhandled(struct tracer *t, FunctionID fid)
{
    if (clrmux_unhandled_is_hook(&t->unhandled, (ICorProfilerInfo *)t->info, fid))
        clrmux_lastgasp_now();
}

static HRESULT STDMETHODCALLTYPE tr_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, BOOL safe)
{
    (void)safe;
    check_unhandled(impl(This), fid);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_JITCachedFunctionSearchStarted(ICorProfilerCallback11 *This, FunctionID fid,
                                                                   BOOL *pbUseCachedFunction)
{
    check_unhandled(impl(This), fid);
    if (pbUseCachedFunction && *pbUseCachedFunction && is_traced_function(impl(This), fid))
        *pbUseCachedFunction = FALSE;
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE tr_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID obj)
{
    struct tracer *t = impl(This);
    if (!clrmux_span_depth())
        return S_OK; /* no traced method open on this thread */
    ClassID cls = 0;
    uint32_t id = 0;
    if (SUCCEEDED(ICorProfilerInfo5_GetClassFromObject(t->info, obj, &cls)) && cls)
        id = exception_name_id(t, cls);
    clrmux_span_set_pending_exception(id);
    return S_OK;
}

/* The closing summary: at Shutdown (cause NULL, info), or at the last gasp (warn, with what
 * that flush wrote and what could not be saved). */
static void log_summary(struct tracer *t, const char *cause, uint64_t flushed)
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
                 "%llu not recorded (nesting deeper than %u, or no memory to grow a thread's span stack)",
                 nrw, (unsigned long long)(nrw ? atomic_load(&t->rewrite_ns) / nrw / 1000 : 0),
                 (unsigned)atomic_load(&t->skipped), dest, (unsigned long long)st.dropped,
                 (unsigned long long)st.too_deep, CLRMUX_SPAN_MAX_DEPTH);
    else
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
static void tracer_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    struct tracer *t = ctx;
    if (clrmux_lastgasp_lock(&t->wr_lock, deadline_ns) != 0) {
        LOG_ERROR("tracer: last gasp (%s): the export thread did not finish its write in time; the spans not yet "
                  "written (%llu written so far) are lost", cause, (unsigned long long)t->written);
        return;
    }
    if (!t->final) {
        uint64_t before = t->written + t->queued;
        export_pending(t, 1);
        long ms = (long)((deadline_ns - clrmux_mono_ns()) / 1000000);
        if (t->http && ms > 0 && final)
            clrmux_http_finish(t->http, ms);
        if (final)
            t->final = 1;
        else
            atomic_store(&t->hold_until_ns, clrmux_mono_ns() + (int64_t)HOLD_AFTER_UNHANDLED_MS * 1000000);
        log_summary(t, cause, t->written + t->queued - before);
    }
    pthread_mutex_unlock(&t->wr_lock);
}

static HRESULT STDMETHODCALLTYPE tr_Shutdown(ICorProfilerCallback11 *This)
{
    struct tracer *t = impl(This);
    if (atomic_exchange(&t->shut_down, 1))
        return S_OK;
    clrmux_lastgasp_unregister(tracer_last_gasp, t); /* waits for a last gasp under way */
    if (t->ex_started) {
        pthread_mutex_lock(&t->ex_lock);
        t->ex_stop = 1;
        pthread_cond_broadcast(&t->ex_cond);
        pthread_mutex_unlock(&t->ex_lock);
        pthread_join(t->ex_thread, NULL); /* it wrote the last spans and sent the last requests */
    } else {
        pthread_mutex_lock(&t->wr_lock);
        if (!t->final) {
            export_pending(t, 1);
            if (t->http)
                clrmux_http_finish(t->http, CLRMUX_HTTP_SHUTDOWN_MS);
        }
        pthread_mutex_unlock(&t->wr_lock);
    }
    if (t->rj_started) {
        pthread_mutex_lock(&t->rj_lock);
        t->rj_stop = 1;
        pthread_cond_broadcast(&t->rj_cond);
        pthread_mutex_unlock(&t->rj_lock);
    }
    for (int i = 0; i < t->ntargets; i++)
        if (!atomic_load(&t->target_hits[i]))
            LOG_WARN("tracer: %s:%d: target %s!%s::%s%s matched no method", t->conf, t->targets[i].line,
                     t->targets[i].assembly, t->targets[i].type, t->targets[i].method,
                     t->targets[i].has_params ? "(...)" : "");
    if (!t->final)
        log_summary(t, NULL, 0);
    pthread_mutex_lock(&t->wr_lock);
    t->final = 1;
    clrmux_spanfile_close(t->out);
    t->out = NULL;
    pthread_mutex_unlock(&t->wr_lock);
    return S_OK;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl tracer_vtbl = {
    .QueryInterface = tr_QueryInterface,
    .AddRef = tr_AddRef,
    .Release = tr_Release,
    CLRMUX_NOOP_VTBL(trd)
    .Initialize = tr_Initialize,
    .InitializeForAttach = tr_InitializeForAttach,
    .ProfilerAttachComplete = tr_ProfilerAttachComplete,
    .Shutdown = tr_Shutdown,
    .ModuleLoadFinished = tr_ModuleLoadFinished,
    .GetReJITParameters = tr_GetReJITParameters,
    .ReJITError = tr_ReJITError,
    .JITInlining = tr_JITInlining,
    .JITCachedFunctionSearchStarted = tr_JITCachedFunctionSearchStarted,
    .JITCompilationStarted = tr_JITCompilationStarted,
    .ExceptionThrown = tr_ExceptionThrown,
};
#pragma GCC diagnostic pop

ICorProfilerCallback11 *clrmux_tracer_create(const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir,
                                             int *version)
{
    struct tracer *t = calloc(1, sizeof *t);
    if (!t) {
        LOG_ERROR("child '%s': out of memory; child skipped", cc->name);
        return NULL;
    }
    struct tracer *expected = NULL;
    if (!atomic_compare_exchange_strong(&the_tracer, &expected, t)) {
        LOG_ERROR("child '%s': a tracer is already loaded (child '%s'); only one tracer per process; child skipped",
                  cc->name, expected->child);
        free(t);
        return NULL;
    }
    t->iface.lpVtbl = &tracer_vtbl;
    atomic_store(&t->refs, 1);
    snprintf(t->child, sizeof t->child, "%s", cc->name);
    pthread_mutex_init(&t->reg_lock, NULL);
    pthread_mutex_init(&t->rj_lock, NULL);
    pthread_cond_init(&t->rj_cond, NULL);
    pthread_mutex_init(&t->rw_lock, NULL);
    pthread_mutex_init(&t->exc_lock, NULL);
    pthread_mutex_init(&t->ex_lock, NULL);
    pthread_mutex_init(&t->wr_lock, NULL);
    pthread_cond_init(&t->ex_cond, NULL);
    t->methods = calloc(MAX_METHODS, sizeof *t->methods);
    t->slots = calloc(METHOD_SLOTS, sizeof *t->slots);
    t->exc_names = calloc(MAX_EXC_NAMES, sizeof *t->exc_names);
    t->batch = calloc(EXPORT_BATCH, sizeof *t->batch);
    if (!t->methods || !t->slots || !t->exc_names || !t->batch || configure(t, cc, cfg_path, cfg_dir) != 0) {
        LOG_ERROR("child '%s': tracer setup failed; child skipped", cc->name);
        atomic_store(&the_tracer, NULL);
        free(t->methods), free(t->slots), free(t->exc_names), free(t->batch), free(t->targets);
        free((void *)t->target_hits);
        free(t);
        return NULL;
    }
    *version = 11;
    return &t->iface;
}
