/* The control commands' work in the process (ctl_exec.h): status, trace, profile, log-level,
 * and the reply around them (clrmux_ctl_serve). */
#include "control/ctl_exec.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/platform.h"
#include "loader/builtin.h"
#include "loader/mux.h"
#include "profiler/companion.h"
#include "tracer/otlp.h"
#include "tracer/tracer_ctl.h"

#define MAX_LISTED_TARGETS 256 /* the tracer's most (tracer_impl.h's MAX_TARGETS) */

static const char *child_state(const struct clrmux_child *c)
{
    int d = atomic_load(&c->detach_state);
    if (d == 1)
        return "detaching";
    if (d == 2)
        return "detached";
    return atomic_load(&c->active) ? "active" : "failed";
}

/* The library of child c, or its builtin name ("builtin tracer"), from the configuration. */
static void child_library(const struct clrmux_mux *m, const struct clrmux_child *c, char *out, size_t outsz,
                          const char **builtin)
{
    *builtin = "";
    snprintf(out, outsz, "?");
    for (size_t i = 0; i < m->cfg.nchildren; i++) {
        const struct clrmux_child_conf *cc = &m->cfg.children[i];
        if (strcmp(cc->name, c->name) != 0)
            continue;
        if (cc->builtin[0]) {
            *builtin = cc->builtin;
            snprintf(out, outsz, "builtin %s", cc->builtin);
        } else {
            snprintf(out, outsz, "%s", cc->path);
        }
        return;
    }
}

static void target_origin(const struct clrmux_tracer_target_info *ti, const char *conf, char *out, size_t outsz)
{
    if (ti->line)
        snprintf(out, outsz, "%s:%d", conf, ti->line);
    else
        snprintf(out, outsz, "control");
}

/* ---- trace list / the tracer's part of status ----------------------------------------- */

static void tracer_text(struct clrmux_out *o, const struct clrmux_tracer_info *ti,
                        const struct clrmux_tracer_target_info *tg, int n, const char *conf, int targets_only)
{
    if (!targets_only) {
        clrmux_out_printf(o, "tracer '%s': %d target(s), %u method(s) registered, %u rewritten, %u refused%s\n",
                          ti->child, n, ti->methods, ti->rewritten, ti->skipped, ti->shut_down ? " (shut down)" : "");
        if (ti->output[0])
            clrmux_out_printf(o, "  spans: %llu written to %s in %llu line(s)\n", (unsigned long long)ti->written,
                              ti->output, (unsigned long long)ti->lines);
        if (ti->endpoint[0])
            clrmux_out_printf(o, "  spans: %llu queued for %s in %llu request(s)\n", (unsigned long long)ti->queued,
                              ti->endpoint, (unsigned long long)ti->requests);
        clrmux_out_printf(o, "  spans: %llu dropped (buffer full), %llu in files deleted by rotation, %llu not sampled, "
                             "%llu not recorded (too deep)\n",
                          (unsigned long long)ti->dropped, (unsigned long long)ti->deleted,
                          (unsigned long long)ti->unsampled, (unsigned long long)ti->too_deep);
    }
    if (!n)
        clrmux_out_printf(o, "%sno target (clrmux ctl PID trace add 'Assembly!Namespace.Type::Method')\n",
                          targets_only ? "" : "  ");
    for (int i = 0; i < n && i < MAX_LISTED_TARGETS; i++) {
        char origin[PATH_MAX + 16];
        target_origin(&tg[i], conf, origin, sizeof origin);
        clrmux_out_printf(o, "%s%-7s %s  (%s)  %u method(s), %llu call(s), %llu error(s)\n", targets_only ? "" : "  ",
                          tg[i].removed ? "removed" : "traced", tg[i].text, origin, tg[i].methods,
                          (unsigned long long)tg[i].calls, (unsigned long long)tg[i].errors);
    }
}

static void tracer_json(struct clrmux_out *o, const struct clrmux_tracer_info *ti,
                        const struct clrmux_tracer_target_info *tg, int n, const char *conf, int targets_only)
{
    if (!targets_only) {
        clrmux_out_printf(o, "{\"child\":");
        clrmux_out_json_str(o, ti->child);
        clrmux_out_printf(o, ",\"output\":");
        clrmux_out_json_str(o, ti->output);
        clrmux_out_printf(o, ",\"endpoint\":");
        clrmux_out_json_str(o, ti->endpoint);
        clrmux_out_printf(o,
                          ",\"shut_down\":%s,\"methods\":%u,\"rewritten\":%u,\"refused\":%u,\"spans\":{\"written\":%llu,"
                          "\"lines\":%llu,\"queued\":%llu,\"requests\":%llu,\"dropped\":%llu,\"deleted\":%llu,"
                          "\"unsampled\":%llu,\"too_deep\":%llu},\"targets\":",
                          ti->shut_down ? "true" : "false", ti->methods, ti->rewritten, ti->skipped,
                          (unsigned long long)ti->written, (unsigned long long)ti->lines,
                          (unsigned long long)ti->queued, (unsigned long long)ti->requests,
                          (unsigned long long)ti->dropped, (unsigned long long)ti->deleted,
                          (unsigned long long)ti->unsampled, (unsigned long long)ti->too_deep);
    }
    clrmux_out_printf(o, "[");
    for (int i = 0; i < n && i < MAX_LISTED_TARGETS; i++) {
        char origin[PATH_MAX + 16];
        target_origin(&tg[i], conf, origin, sizeof origin);
        clrmux_out_printf(o, "%s{\"target\":", i ? "," : "");
        clrmux_out_json_str(o, tg[i].text);
        clrmux_out_printf(o, ",\"origin\":");
        clrmux_out_json_str(o, origin);
        clrmux_out_printf(o, ",\"state\":\"%s\",\"methods\":%u,\"calls\":%llu,\"errors\":%llu}",
                          tg[i].removed ? "removed" : "traced", tg[i].methods, (unsigned long long)tg[i].calls,
                          (unsigned long long)tg[i].errors);
    }
    clrmux_out_printf(o, "]%s", targets_only ? "" : "}");
}

/* The tracer's part: 1 when there is a tracer, else 0 (nothing written). */
static int tracer_part(struct clrmux_out *o, int json, int targets_only, const char *conf)
{
    struct clrmux_tracer_info *ti = calloc(1, sizeof *ti);
    struct clrmux_tracer_target_info *tg = calloc(MAX_LISTED_TARGETS, sizeof *tg);
    int n = ti && tg ? clrmux_tracer_ctl_info(ti, tg, MAX_LISTED_TARGETS) : -1;
    if (n >= 0) {
        if (json)
            tracer_json(o, ti, tg, n, conf, targets_only);
        else
            tracer_text(o, ti, tg, n, conf, targets_only);
    }
    free(ti), free(tg);
    return n >= 0;
}

/* ---- the profiler's part ------------------------------------------------------------- */

static void profilers_part(struct clrmux_out *o, int json)
{
    if (json)
        clrmux_out_printf(o, "[");
    int k = 0;
    const char *name;
    ICorProfilerCallback11 *cb;
    const struct clrmux_profiler_ctl *ctl;
    for (int i = 0; clrmux_builtin_profiler(i, &name, &cb, &ctl) == 0; i++) {
        struct clrmux_profiler_status *st = calloc(1, sizeof *st);
        if (!st)
            break;
        int busy = ctl->status(cb, st) != 0;
        if (json) {
            clrmux_out_printf(o, "%s{\"child\":", k ? "," : "");
            clrmux_out_json_str(o, name);
            clrmux_out_printf(o, ",\"sampler\":\"%s\",\"sampling\":%s,\"busy\":%s,\"final\":%s,\"files\":%llu,"
                                 "\"file_failures\":%llu,\"last_file\":",
                              st->sampler, st->sampling ? "true" : "false", busy ? "true" : "false",
                              st->final ? "true" : "false", (unsigned long long)st->files,
                              (unsigned long long)st->file_failures);
            clrmux_out_json_str(o, st->last_file);
            clrmux_out_printf(o, ",\"output_dir\":");
            clrmux_out_json_str(o, st->output_dir);
            clrmux_out_printf(o, ",\"period_s\":%d,\"period_age_s\":%.3f,\"exceptions\":%llu,\"allocations\":%llu,"
                                 "\"contentions\":%llu}",
                              st->period_s, st->period_age_s, (unsigned long long)st->exceptions,
                              (unsigned long long)st->allocations, (unsigned long long)st->contentions);
        } else {
            clrmux_out_printf(o, "profiler '%s': %s sampler %s%s; %llu file(s) written to %s (%llu failed)%s\n", name,
                              st->sampler, st->final ? "shut down" : st->sampling ? "running" : "stopped",
                              busy ? " (busy: the file counts are not shown)" : "", (unsigned long long)st->files,
                              st->output_dir, (unsigned long long)st->file_failures, "");
            if (st->last_file[0])
                clrmux_out_printf(o, "  last profile %s\n", st->last_file);
            clrmux_out_printf(o, "  current period: %.1f s of %d s; %llu exception(s), %llu allocation tick(s), %llu "
                                 "contention(s) seen\n",
                              st->period_age_s, st->period_s, (unsigned long long)st->exceptions,
                              (unsigned long long)st->allocations, (unsigned long long)st->contentions);
        }
        k++;
        free(st);
    }
    if (json)
        clrmux_out_printf(o, "]");
}

/* ---- status -------------------------------------------------------------------------- */

static int status(struct clrmux_mux *m, int json, struct clrmux_out *o)
{
    char exe[256] = "", app[256] = "", log[4096];
    clrmux_process_names(exe, sizeof exe, app, sizeof app);
    clrmux_log_path(log, sizeof log);
    const char *level = clrmux_log_level_name(clrmux_log_get_level());
    if (json) {
        clrmux_out_printf(o, "{\"pid\":%ld,\"clrmux\":\"%s\",\"process\":", (long)getpid(), CLRMUX_VERSION);
        clrmux_out_json_str(o, exe);
        clrmux_out_printf(o, ",\"app\":");
        clrmux_out_json_str(o, app);
        clrmux_out_printf(o, ",\"runtime\":");
        clrmux_out_json_str(o, m->runtime_version.text);
        clrmux_out_printf(o, ",\"info_version\":%d,\"attached\":%s,\"config\":", m->info_version,
                          m->attaching ? "true" : "false");
        clrmux_out_json_str(o, m->cfg.path);
        clrmux_out_printf(o, ",\"log\":{\"file\":");
        clrmux_out_json_str(o, log);
        clrmux_out_printf(o, ",\"level\":\"%s\"},\"mask\":{\"low\":%u,\"high\":%u},\"shut_down\":%s,\"children\":[",
                          level, (unsigned)m->applied_low, (unsigned)m->applied_high,
                          atomic_load(&m->shut_down) ? "true" : "false");
    } else {
        clrmux_out_printf(o, "clrmux %s in process %ld (%s%s%s), .NET %s, ICorProfilerInfo%d%s%s\n", CLRMUX_VERSION,
                          (long)getpid(), exe, app[0] ? " running " : "", app, m->runtime_version.text,
                          m->info_version, m->attaching ? ", attached" : "",
                          atomic_load(&m->shut_down) ? ", shut down" : "");
        clrmux_out_printf(o, "config  %s\nlog     %s (level %s)\nmask    low=0x%08X high=0x%08X (the union set on "
                             "the runtime)\nchildren:\n",
                          m->cfg.path, log[0] ? log : "stderr", level, (unsigned)m->applied_low,
                          (unsigned)m->applied_high);
    }
    unsigned owned[CLRMUX_MAX_CHILDREN];
    clrmux_compose_owned_counts(m, owned, m->nchildren < CLRMUX_MAX_CHILDREN ? m->nchildren : CLRMUX_MAX_CHILDREN);
    for (int i = 0; i < m->nchildren && i < CLRMUX_MAX_CHILDREN; i++) {
        const struct clrmux_child *c = &m->children[i];
        char lib[PATH_MAX + 16];
        const char *builtin;
        child_library(m, c, lib, sizeof lib, &builtin);
        unsigned lo = (unsigned)atomic_load(&c->mask_low), hi = (unsigned)atomic_load(&c->mask_high);
        if (json) {
            clrmux_out_printf(o, "%s{\"name\":", i ? "," : "");
            clrmux_out_json_str(o, c->name);
            clrmux_out_printf(o, ",\"library\":");
            clrmux_out_json_str(o, lib);
            clrmux_out_printf(o, ",\"builtin\":");
            clrmux_out_json_str(o, builtin);
            clrmux_out_printf(o, ",\"state\":\"%s\",\"interface\":%d,\"mask_low\":%u,\"mask_high\":%u,"
                                 "\"rejit_methods\":%u}",
                              child_state(c), c->version, lo, hi, owned[i]);
        } else {
            clrmux_out_printf(o, "  %-12s %-9s ICorProfilerCallback%-2d mask low=0x%08X high=0x%08X  ReJIT of %u method(s)  %s\n",
                              c->name, child_state(c), c->version, lo, hi, owned[i], lib);
        }
    }
    if (json) {
        clrmux_out_printf(o, "],\"tracer\":");
        if (!tracer_part(o, 1, 0, m->cfg.path))
            clrmux_out_printf(o, "null");
        clrmux_out_printf(o, ",\"profilers\":");
        profilers_part(o, 1);
        clrmux_out_printf(o, "}\n");
    } else {
        tracer_part(o, 0, 0, m->cfg.path);
        profilers_part(o, 0);
    }
    return 0;
}

/* ---- the commands -------------------------------------------------------------------- */

static void err_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(CLRMUX_CTL_PRINTF, 3, 4)));
static void err_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int profile(enum clrmux_ctl_op op, struct clrmux_out *o, char *err, size_t errlen)
{
    const char *name;
    ICorProfilerCallback11 *cb;
    const struct clrmux_profiler_ctl *ctl;
    int n = 0, failed = 0;
    char msg[PATH_MAX + 256];
    for (int i = 0; clrmux_builtin_profiler(i, &name, &cb, &ctl) == 0; i++, n++) {
        msg[0] = 0;
        int rc = op == CLRMUX_CTL_PROFILE_FLUSH ? ctl->flush(cb, msg, sizeof msg)
                                                : ctl->sampling(cb, op == CLRMUX_CTL_PROFILE_START, msg, sizeof msg);
        if (rc != 0) {
            failed++;
            err_set(err, errlen, "profiler '%s': %s", name, msg);
        }
        clrmux_out_printf(o, "profiler '%s': %s\n", name, msg);
    }
    if (!n) {
        err_set(err, errlen, "no built-in profiler in this process (add a [child profiler] section with builtin = "
                             "profiler to its loader.conf)");
        return -1;
    }
    return failed ? -1 : 0;
}

int clrmux_ctl_exec(const struct clrmux_ctl_req *req, struct clrmux_out *body, char *err, size_t errlen)
{
    struct clrmux_mux *m = clrmux_the_mux;
    err[0] = 0;
    if (!m || !m->info_version) {
        err_set(err, errlen, "clrmux has not started in this process");
        return -1;
    }
    if (atomic_load(&m->initializing)) {
        err_set(err, errlen, "clrmux is still starting its children; try again in a moment");
        return -1;
    }
    char msg[CLRMUX_TRACER_CTL_TEXT_MAX + 600];
    switch (req->op) {
    case CLRMUX_CTL_STATUS:
        return status(m, req->json, body);
    case CLRMUX_CTL_TRACE_LIST:
        if (!tracer_part(body, req->json, 1, m->cfg.path)) {
            err_set(err, errlen, "no built-in tracer in this process (add a [child tracer] section with builtin = "
                                 "tracer to its loader.conf)");
            return -1;
        }
        if (req->json)
            clrmux_out_printf(body, "\n");
        return 0;
    case CLRMUX_CTL_TRACE_ADD:
    case CLRMUX_CTL_TRACE_REMOVE: {
        int rc = req->op == CLRMUX_CTL_TRACE_ADD ? clrmux_tracer_ctl_add(req->arg, msg, sizeof msg)
                                                 : clrmux_tracer_ctl_remove(req->arg, msg, sizeof msg);
        if (rc != 0) {
            err_set(err, errlen, "%s", msg);
            return -1;
        }
        clrmux_out_printf(body, "%s\n", msg);
        return 0;
    }
    case CLRMUX_CTL_PROFILE_FLUSH:
    case CLRMUX_CTL_PROFILE_START:
    case CLRMUX_CTL_PROFILE_STOP:
        return profile(req->op, body, err, errlen);
    case CLRMUX_CTL_LOG_LEVEL: {
        int l = clrmux_log_level_parse(req->arg);
        if (l < 0) {
            err_set(err, errlen, "log level '%.64s' is not one of error|warn|info|debug|trace", req->arg);
            return -1;
        }
        int old = clrmux_log_get_level();
        clrmux_log_set_level(l);
        /* said at the more verbose of the two levels, so that it is seen either way */
        clrmux_log(l > old ? l : old, "control: log level %s -> %s", clrmux_log_level_name(old),
                   clrmux_log_level_name(l));
        clrmux_out_printf(body, "log level %s (was %s)\n", clrmux_log_level_name(l), clrmux_log_level_name(old));
        return 0;
    }
    }
    err_set(err, errlen, "unknown command");
    return -1;
}

void clrmux_ctl_serve(const char *buf, size_t len, struct clrmux_out *reply, int *ok)
{
    struct clrmux_ctl_req *req = calloc(1, sizeof *req);
    char err[CLRMUX_TRACER_CTL_TEXT_MAX + 600];
    *ok = 0;
    if (!req) {
        clrmux_out_printf(reply, "error: out of memory\n");
        return;
    }
    if (clrmux_ctl_parse(buf, len, req, err, sizeof err) != 0) {
        clrmux_out_printf(reply, "error: %s\n", err);
        free(req);
        return;
    }
    clrmux_out_printf(reply, "ok\n");
    size_t head = reply->len;
    struct clrmux_out body = {reply->p + head, 0, reply->cap - head, 0};
    if (clrmux_ctl_exec(req, &body, err, sizeof err) != 0) {
        reply->len = 0;
        reply->p[0] = 0;
        reply->truncated = 0;
        clrmux_out_printf(reply, "error: %s\n", err);
        free(req);
        return;
    }
    reply->len = head + body.len;
    if (body.truncated) {
        reply->truncated = 1;
        /* the reply is cut: said in its last line (room for it kept below) */
    }
    *ok = 1;
    free(req);
}

#ifdef CLRMUX_TESTING
void clrmux_ctl_test_mux(const char *runtime, const char *config)
{
    static struct clrmux_mux *fake;
    if (!runtime) {
        clrmux_the_mux = NULL;
        free(fake);
        fake = NULL;
        return;
    }
    if (!fake && !(fake = calloc(1, sizeof *fake)))
        return;
    fake->info_version = 11;
    snprintf(fake->runtime_version.text, sizeof fake->runtime_version.text, "%s", runtime);
    snprintf(fake->cfg.path, sizeof fake->cfg.path, "%s", config);
    clrmux_the_mux = fake;
}
#endif
