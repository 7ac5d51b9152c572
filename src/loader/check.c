/* clrmux_check_config: the library's own validation of a loader.conf, exported for the
 * launcher (`clrmux check`, `clrmux run`). It runs the same parser (config.c) and the same
 * child set-up the runtime's Initialize would: a library child passes the same ownership and
 * permission rule (common/trust.h) and loader-loop check (loop.h), is opened and asked for its
 * class factory (DllGetClassObject with its clsid; CreateInstance and Initialize are not
 * called), a builtin child is created with its section's keys, which is where the tracer and
 * the profiler check them. Every problem reaches the caller with its file and line. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/clrmux.h"
#include "common/guid.h"
#include "common/log.h"
#include "common/platform.h"
#include "loader/builtin.h"
#include "loader/children.h"
#include "loader/mux.h"
#include "loader/versions.h"

struct check_ctx {
    const struct clrmux_config *cfg;
    clrmux_check_report_fn report;
    void *user;
    struct clrmux_check_result *res;
    const char *child; /* the child being created, for messages without a line */
    int child_line;
};

static void emit(struct check_ctx *c, int level, int line, const char *msg)
{
    if (level <= CLRMUX_LOG_ERROR) c->res->errors++;
    else if (level == CLRMUX_LOG_WARN) c->res->warnings++;
    c->report(level, c->cfg->path, line, msg, c->user);
}

/* The builtins log their problems as "FILE:LINE: msg" (tracer) or "child 'X' line LINE: msg"
 * (profiler): the line is taken from there, else the child's section header is used. */
static void sink(int level, const char *text, void *ctx)
{
    struct check_ctx *c = ctx;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", text);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    int line = c->child_line;
    const char *body = msg;
    size_t plen = strlen(c->cfg->path);
    int ln, used = 0;
    if (strncmp(msg, c->cfg->path, plen) == 0 && sscanf(msg + plen, ":%d: %n", &ln, &used) == 1 && used) {
        line = ln;
        body = msg + plen + used;
    } else {
        const char *l = strstr(msg, " line ");
        if (l && sscanf(l, " line %d: %n", &ln, &used) == 1 && used) {
            line = ln;
            static char joined[2048];
            snprintf(joined, sizeof joined, "%.*s: %s", (int)(l - msg), msg, l + used);
            body = joined;
        }
    }
    emit(c, level, line, body);
}

/* Reports a problem of clrmux_child_open_factory for the child being checked. */
static void check_problem(int level, const char *text, void *ctx)
{
    struct check_ctx *c = ctx;
    char msg[10240];
    snprintf(msg, sizeof msg, "[child %s]: %s; %s", c->child, text,
             level <= CLRMUX_LOG_ERROR ? "the child would be skipped" : "loaded anyway (allow_insecure_paths = true)");
    emit(c, level, c->child_line, msg);
}

static void check_library_child(struct check_ctx *c, const struct clrmux_child_conf *cc)
{
    /* the same rules, in the same order, as the mux's Initialize (children.c) */
    char real[PATH_MAX];
    IClassFactory *factory = clrmux_child_open_factory(cc, c->cfg->allow_insecure_paths, real, sizeof real,
                                                       check_problem, c);
    if (!factory)
        return;
    factory->lpVtbl->Release(factory);
    c->res->active_children++;
    char msg[10240], clsid[CLRMUX_GUID_STRLEN];
    clrmux_guid_format(&cc->clsid, clsid);
    snprintf(msg, sizeof msg, "[child %s]: %s answers DllGetClassObject(%s)", cc->name, cc->path, clsid);
    emit(c, CLRMUX_LOG_INFO, cc->line, msg);
    /* the library stays loaded, as it would in the profiled process */
}

/* Where a builtin child writes (for the launcher's summary), from its section's keys. */
static void note_outputs(const struct clrmux_config *cfg, const struct clrmux_child_conf *cc,
                         struct clrmux_check_result *res)
{
    const char *out = NULL, *endpoint = NULL;
    int is_tracer = strcmp(cc->builtin, "tracer") == 0;
    for (size_t k = 0; k < cc->nkvs; k++) {
        if (strcmp(cc->kvs[k].key, is_tracer ? "output" : "output_dir") == 0 && cc->kvs[k].value[0])
            out = cc->kvs[k].value;
        if (is_tracer && strcmp(cc->kvs[k].key, "endpoint") == 0)
            endpoint = cc->kvs[k].value;
    }
    if (!out && is_tracer && endpoint)
        return; /* spans go only to the collector */
    if (!out)
        out = is_tracer ? "traces-%p.otlp.jsonl" : "profiles";
    char *dst = is_tracer ? res->traces : res->profiles_dir;
    int n = clrmux_path_is_absolute(out) || !cfg->dir[0] ? snprintf(dst, sizeof res->traces, "%s", out)
                                           : snprintf(dst, sizeof res->traces, "%s/%s", cfg->dir, out);
    if (n < 0 || (size_t)n >= sizeof res->traces)
        dst[0] = 0; /* too long: the builtin has logged it */
}

int clrmux_check_config(const char *path, clrmux_check_report_fn report, void *ctx,
                        struct clrmux_check_result *res)
{
    memset(res, 0, sizeof *res);
    /* builtin_create reads the configuration's path and folder from the mux */
    struct clrmux_mux *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    clrmux_config_load(path, &m->cfg);
    struct check_ctx c = {&m->cfg, report, ctx, res, NULL, 0};
    const struct clrmux_config *cfg = &m->cfg;
    for (size_t i = 0; i < cfg->ndiags; i++)
        emit(&c, cfg->diags[i].level, cfg->diags[i].line, cfg->diags[i].msg);
    if (cfg->dropped_diags) {
        char msg[128];
        snprintf(msg, sizeof msg, "%zu more problems not listed", cfg->dropped_diags);
        emit(&c, CLRMUX_LOG_ERROR, 0, msg);
    }
    if (!cfg->found) {
        emit(&c, CLRMUX_LOG_ERROR, 0, "no configuration to read: the application would run unprofiled");
        clrmux_config_free(&m->cfg);
        free(m);
        return res->errors;
    }
    if (cfg->log_file[0])
        snprintf(res->log_file, sizeof res->log_file, "%s", cfg->log_file);

    int saved_level = clrmux_log_get_level();
    clrmux_log_set_level(CLRMUX_LOG_WARN);
    clrmux_log_open("/dev/null"); /* the lines reach the caller through the sink only */
    clrmux_log_set_sink(sink, &c);
    for (size_t i = 0; i < cfg->nchildren; i++) {
        const struct clrmux_child_conf *cc = &cfg->children[i];
        if (cc->invalid || !cc->enabled)
            continue;
        c.child = cc->name;
        c.child_line = cc->line;
        if (!cc->builtin[0]) {
            check_library_child(&c, cc);
            continue;
        }
        int version = 0;
        /* a builtin that logged an error for one of its keys still runs (that key is skipped) */
        ICorProfilerCallback11 *cb = clrmux_builtin_create(cc, cfg, &version);
        if (!cb)
            continue;
        cb->lpVtbl->Release(cb);
        res->active_children++;
        note_outputs(cfg, cc, res);
        char msg[256];
        snprintf(msg, sizeof msg, "[child %s]: builtin %s", cc->name, cc->builtin);
        emit(&c, CLRMUX_LOG_INFO, cc->line, msg);
    }
    clrmux_log_set_sink(NULL, NULL);
    clrmux_log_open(NULL);
    clrmux_log_set_level(saved_level);
    if (res->active_children == 0)
        emit(&c, CLRMUX_LOG_ERROR, 0, "no enabled child profiler would load; the application would run unprofiled");
    clrmux_config_free(&m->cfg);
    free(m);
    return res->errors;
}
