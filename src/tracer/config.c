/* The built-in tracer's configuration: its loader.conf section over OpenTelemetry's
 * environment variables, and the OTLP resource (see tracer.h for the keys). */
#include "tracer/tracer_impl.h"

/* ---- configuration ------------------------------------------------------------------- */

/* A bytecode integration's target (integ.h): a trace target that knows its definition. */
static int integ_target(void *ctx, const char *text, int integ, const char *file, int line, char *err, size_t errlen)
{
    struct tracer *t = ctx;
    (void)file;
    if (t->ntargets >= MAX_TARGETS) {
        snprintf(err, errlen, "more than %d trace targets", MAX_TARGETS);
        return -1;
    }
    struct clrmux_target *tg = &t->targets[t->ntargets];
    char why[400];
    if (clrmux_target_parse(text, tg, why, sizeof why) != 0) {
        snprintf(err, errlen, "bad target %s", why);
        return -1;
    }
    tg->line = line;
    tg->integ = integ + 1;
    t->ntargets++;
    return 0;
}

/* The shipped definitions, then the user's file (integrations = FILE). */
static void integ_load(struct tracer *t)
{
    t->integs = calloc(CLRMUX_INTEG_MAX, sizeof *t->integs);
    if (!t->integs)
        return;
    /* the shipped definitions of the instrumentations on (`instrument = ... adonet, redis`) */
    for (const struct clrmux_integ_shipped *s = clrmux_integ_shipped; s->instrument; s++)
        if (strstr(t->instrument, s->instrument))
            clrmux_integ_parse(s->text, "(shipped integrations)", t->integs, &t->ninteg, CLRMUX_INTEG_MAX, integ_target,
                               t);
    if (!t->integ_file[0])
        return;
    FILE *f = fopen(t->integ_file, "re");
    if (!f) {
        LOG_ERROR("tracer: integrations = %s: cannot open it (%s); its definitions are not loaded", t->integ_file,
                  strerror(errno));
        return;
    }
    size_t cap = 256 * 1024;
    char *text = malloc(cap + 1);
    size_t n = text ? fread(text, 1, cap + 1, f) : 0;
    fclose(f);
    if (!text || n > cap) {
        LOG_ERROR("tracer: integrations = %s: %s; its definitions are not loaded", t->integ_file,
                  text ? "larger than 256 KB" : "out of memory");
        free(text);
        return;
    }
    text[n] = 0;
    int before = t->ninteg;
    clrmux_integ_parse(text, t->integ_file, t->integs, &t->ninteg, CLRMUX_INTEG_MAX, integ_target, t);
    free(text);
    LOG_INFO("tracer: %s: %d integration(s)", t->integ_file, t->ninteg - before);
}

/* OpenTelemetry's environment variables, read first: loader.conf's keys win over them.
 * OTEL_SERVICE_NAME; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is) or
 * OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces, /v1/metrics); OTEL_EXPORTER_OTLP_METRICS_ENDPOINT;
 * OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, _HEADERS, _TIMEOUT. OTEL_RESOURCE_ATTRIBUTES is read
 * in resource_init. */
static const char *env2(const char *specific, const char *general)
{
    const char *v = getenv(specific);
    if (v && *v)
        return v;
    v = getenv(general);
    return v && *v ? v : NULL;
}

static void otel_env(struct tracer *t)
{
    const char *v;
    if ((v = getenv("OTEL_SERVICE_NAME")) && *v) {
        snprintf(t->service, sizeof t->service, "%s", v);
        t->service_set = 1;
    }
    const char *base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    if ((v = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && *v) {
        snprintf(t->endpoint, sizeof t->endpoint, "%s", v);
    } else if (base && *base) {
        size_t n = strlen(base);
        while (n && base[n - 1] == '/')
            n--;
        snprintf(t->endpoint, sizeof t->endpoint, "%.*s/v1/traces", (int)n, base);
    }
    if ((v = getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) && *v) {
        snprintf(t->metrics_endpoint, sizeof t->metrics_endpoint, "%s", v);
    } else if (base && *base) {
        size_t n = strlen(base);
        while (n && base[n - 1] == '/')
            n--;
        snprintf(t->metrics_endpoint, sizeof t->metrics_endpoint, "%.*s/v1/metrics", (int)n, base);
    }
    if (t->endpoint[0] && strncasecmp(t->endpoint, "http://", 7) != 0 && strncasecmp(t->endpoint, "https://", 8) != 0) {
        LOG_ERROR("tracer: OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT '%s' is not an http:// or https:// URL; ignored",
                  t->endpoint);
        t->endpoint[0] = t->metrics_endpoint[0] = 0;
    }
    if ((v = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"))) {
        if (strcmp(v, "http/json") == 0 || strcmp(v, "http/protobuf") == 0)
            snprintf(t->protocol, sizeof t->protocol, "%s", v);
        else
            LOG_ERROR("tracer: OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL '%s' is not supported (http/protobuf, "
                      "http/json); %s used", v, t->protocol);
    }
    if ((v = env2("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")))
        snprintf(t->headers, sizeof t->headers, "%s", v);
    if ((v = env2("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"))) {
        char *end = NULL;
        long ms = strtol(v, &end, 10);
        if (end && !*end && ms >= 100 && ms <= 3600000)
            t->timeout_ms = ms;
        else
            LOG_ERROR("tracer: OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT '%s' is not a number of ms in 100..3600000; %ld "
                      "used", v, t->timeout_ms);
    }
}

/* The resource (semantic conventions): service.name (service_name, OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES' service.name, else the process name), then
 * OTEL_RESOURCE_ATTRIBUTES, process.pid, process.executable.name, host.name, telemetry.sdk.*. */
static void resource_init(struct tracer *t, const char *exe, const char *app)
{
    struct clrmux_resource *r = &t->res;
    char bad[512];
    const char *ra = getenv("OTEL_RESOURCE_ATTRIBUTES");
    struct clrmux_resource env = {0};
    if (ra && clrmux_resource_parse(&env, ra, bad, sizeof bad) > 0)
        LOG_ERROR("tracer: OTEL_RESOURCE_ATTRIBUTES: malformed member(s) skipped: %s", bad);
    const char *svc = clrmux_resource_get(&env, "service.name");
    clrmux_resource_set(r, "service.name", t->service_set || !svc ? t->service : svc, 0);
    snprintf(t->service, sizeof t->service, "%s", clrmux_resource_get(r, "service.name"));
    for (size_t i = 0; i < env.n; i++)
        if (!clrmux_resource_get(r, env.attrs[i].key))
            clrmux_resource_set(r, env.attrs[i].key, env.attrs[i].value, 0);
    char num[32], host[256] = "";
    snprintf(num, sizeof num, "%ld", (long)getpid());
    clrmux_resource_set(r, "process.pid", num, 1);
    if (exe[0] && !clrmux_resource_get(r, "process.executable.name"))
        clrmux_resource_set(r, "process.executable.name", exe, 0);
    (void)app;
    if (clrmux_host_name(host, sizeof host) == 0 && host[0] && !clrmux_resource_get(r, "host.name"))
        clrmux_resource_set(r, "host.name", host, 0);
    clrmux_resource_set(r, "telemetry.sdk.name", "clrmux", 0);
    clrmux_resource_set(r, "telemetry.sdk.language", "cpp", 0);
    clrmux_resource_set(r, "telemetry.sdk.version", CLRMUX_VERSION, 0);
}


/* The built-in instrumentations of the agent (`instrument =`). */
#define INSTRUMENTS "aspnetcore, httpclient, grpc, adonet, redis, rabbitmq, kafka"
static const char *const instruments[] = {"aspnetcore", "httpclient", "grpc", "adonet", "redis", "rabbitmq", "kafka"};

/* Splits a comma-separated list into its trimmed items; calls fn for each. */
static int each_item(const char *list, int (*fn)(const char *item, size_t n, void *ctx), void *ctx)
{
    int bad = 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t n = (size_t)(e - p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n && fn(p, n, ctx) != 0)
            bad = -1;
        p = e;
    }
    return bad;
}

struct listbuf {
    char *out;
    size_t outsz;
    char *bad;
    size_t badsz;
};

static void list_add(struct listbuf *b, const char *item, size_t n)
{
    size_t len = strlen(b->out);
    if (len + n + 2 <= b->outsz)
        snprintf(b->out + len, b->outsz - len, "%s%.*s", len ? "," : "", (int)n, item);
}

static int add_instrument(const char *item, size_t n, void *ctx)
{
    struct listbuf *b = ctx;
    if (n == 4 && !strncasecmp(item, "none", 4))
        return 0;
    for (size_t i = 0; i < sizeof instruments / sizeof *instruments; i++)
        if (strlen(instruments[i]) == n && !strncasecmp(item, instruments[i], n)) {
            list_add(b, instruments[i], n);
            return 0;
        }
    snprintf(b->bad, b->badsz, "'%.*s'", (int)(n > 60 ? 60 : n), item);
    return -1;
}

static int parse_instrument(const char *v, char *out, size_t outsz, char *bad, size_t badsz)
{
    struct listbuf b = {out, outsz, bad, badsz};
    out[0] = 0;
    return each_item(v, add_instrument, &b);
}

static int add_source(const char *item, size_t n, void *ctx)
{
    struct listbuf *b = ctx;
    if (n == 4 && !strncasecmp(item, "none", 4))
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)item[i] < 0x21 || item[i] == '"' || item[i] == '\\' || (unsigned char)item[i] > 0x7e) {
            snprintf(b->bad, b->badsz, "%.*s", (int)(n > 60 ? 60 : n), item);
            return -1;
        }
    list_add(b, item, n);
    return 0;
}

static int parse_sources(const char *v, char *out, size_t outsz, char *bad, size_t badsz)
{
    struct listbuf b = {out, outsz, bad, badsz};
    out[0] = 0;
    return each_item(v, add_source, &b);
}

int tracer_configure(struct tracer *t, const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir)
{
    const char *file = cfg_path && *cfg_path ? cfg_path : "loader.conf";
    snprintf(t->conf, sizeof t->conf, "%s", file);
    const char *output = "traces-%p.otlp.jsonl";
    const char *moutput = "metrics-%p.otlp.jsonl";
    char exe[256] = "", app[256] = "";
    clrmux_process_names(exe, sizeof exe, app, sizeof app);
    snprintf(t->service, sizeof t->service, "%s", app[0] ? app : exe[0] ? exe : "unknown_service");
    t->buffer_spans = 262144; /* a quarter of a second at 1 M spans/s: 16 MB */
    t->flush_ms = 1000;
    t->max_file_bytes = (uint64_t)100 << 20;
    t->max_files = 5;
    t->metrics_ms = METRICS_MS_DEFAULT;
    t->sample_ratio = 1.0;
    t->join_activity = 1;
    t->suppress_gc = 1;
    t->agent = 1;
    t->sanitize_queries = 1;
    snprintf(t->instrument, sizeof t->instrument, "aspnetcore,httpclient,grpc,adonet,redis,rabbitmq,kafka");
    snprintf(t->activity_sources, sizeof t->activity_sources, "*");
    t->timeout_ms = CLRMUX_HTTP_TIMEOUT_MS;
    snprintf(t->protocol, sizeof t->protocol, "http/protobuf"); /* OTLP's default */
    otel_env(t);
    t->targets = clrmux_lazy_calloc(MAX_TARGETS, sizeof *t->targets); /* 1.2 MB, touched as used */
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
            t->service_set = 1;
        } else if (strcmp(kv->key, "metrics_output") == 0) {
            moutput = kv->value;
        } else if (strcmp(kv->key, "metrics_endpoint") == 0) {
            if (strncasecmp(kv->value, "http://", 7) != 0 && strncasecmp(kv->value, "https://", 8) != 0)
                LOG_ERROR("%s:%d: [child %s]: metrics_endpoint '%s' is not an http:// or https:// URL; ignored", file,
                          kv->line, cc->name, kv->value);
            else
                snprintf(t->metrics_endpoint, sizeof t->metrics_endpoint, "%s", kv->value);
        } else if (strcmp(kv->key, "sample_ratio") == 0) {
            char *end = NULL;
            errno = 0;
            double v = strtod(kv->value, &end);
            if (errno || !end || end == kv->value || *end || !(v >= 0 && v <= 1))
                LOG_ERROR("%s:%d: [child %s]: sample_ratio = '%s' is not a number in 0..1; default kept", file,
                          kv->line, cc->name, kv->value);
            else
                t->sample_ratio = v;
        } else if (strcmp(kv->key, "metrics_interval_ms") == 0 || strcmp(kv->key, "timeout_ms") == 0) {
            char *end = NULL;
            errno = 0;
            long v = strtol(kv->value, &end, 10);
            if (errno || !end || *end || v < 100 || v > 3600000)
                LOG_ERROR("%s:%d: [child %s]: %s = '%s' is not a number in 100..3600000; default kept", file,
                          kv->line, cc->name, kv->key, kv->value);
            else if (kv->key[0] == 'm')
                t->metrics_ms = v;
            else
                t->timeout_ms = v;
        } else if (strcmp(kv->key, "protocol") == 0) {
            if (strcmp(kv->value, "http/json") != 0 && strcmp(kv->value, "http/protobuf") != 0)
                LOG_ERROR("%s:%d: [child %s]: protocol '%s' is not http/json or http/protobuf; ignored", file,
                          kv->line, cc->name, kv->value);
            else
                snprintf(t->protocol, sizeof t->protocol, "%s", kv->value);
        } else if (strcmp(kv->key, "join_activity") == 0 || strcmp(kv->key, "suppress_gc_transition") == 0) {
            int *flag = kv->key[0] == 'j' ? &t->join_activity : &t->suppress_gc;
            if (!strcasecmp(kv->value, "true") || !strcmp(kv->value, "1"))
                *flag = 1;
            else if (!strcasecmp(kv->value, "false") || !strcmp(kv->value, "0"))
                *flag = 0;
            else
                LOG_ERROR("%s:%d: [child %s]: %s = '%s' is not true or false; default kept", file, kv->line,
                          cc->name, kv->key, kv->value);
        } else if (strcmp(kv->key, "integrations") == 0) {
            if (kv->value[0] == '/' || !cfg_dir || !*cfg_dir)
                snprintf(t->integ_file, sizeof t->integ_file, "%s", kv->value);
            else
                snprintf(t->integ_file, sizeof t->integ_file, "%s/%s", cfg_dir, kv->value);
        } else if (strcmp(kv->key, "sanitize_queries") == 0) {
            if (!strcasecmp(kv->value, "true") || !strcmp(kv->value, "1"))
                t->sanitize_queries = 1;
            else if (!strcasecmp(kv->value, "false") || !strcmp(kv->value, "0"))
                t->sanitize_queries = 0;
            else
                LOG_ERROR("%s:%d: [child %s]: sanitize_queries = '%s' is not true or false; default kept", file,
                          kv->line, cc->name, kv->value);
        } else if (strcmp(kv->key, "agent") == 0) {
            if (!strcasecmp(kv->value, "true") || !strcmp(kv->value, "1"))
                t->agent = 1;
            else if (!strcasecmp(kv->value, "false") || !strcmp(kv->value, "0"))
                t->agent = 0;
            else
                LOG_ERROR("%s:%d: [child %s]: agent = '%s' is not true or false; default kept", file, kv->line,
                          cc->name, kv->value);
        } else if (strcmp(kv->key, "instrument") == 0) {
            char bad[128];
            if (parse_instrument(kv->value, t->instrument, sizeof t->instrument, bad, sizeof bad) != 0)
                LOG_ERROR("%s:%d: [child %s]: instrument: unknown instrumentation(s) %s skipped (known: %s, or none)",
                          file, kv->line, cc->name, bad, INSTRUMENTS);
        } else if (strcmp(kv->key, "activity_sources") == 0) {
            char bad[128];
            if (parse_sources(kv->value, t->activity_sources, sizeof t->activity_sources, bad, sizeof bad) != 0)
                LOG_ERROR("%s:%d: [child %s]: activity_sources: pattern '%s' skipped (names, `*` wildcards, "
                          "comma-separated, or none)", file, kv->line, cc->name, bad);
        } else if (strcmp(kv->key, "headers") == 0) {
            snprintf(t->headers, sizeof t->headers, "%s", kv->value);
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
    if (moutput[0]) {
        if (clrmux_expand_pid(moutput, expanded, sizeof expanded) != 0 ||
            (size_t)snprintf(t->metrics_output, sizeof t->metrics_output, "%s%s%s",
                             expanded[0] == '/' ? "" : cfg_dir && *cfg_dir ? cfg_dir : ".",
                             expanded[0] == '/' ? "" : "/", expanded) >= sizeof t->metrics_output) {
            LOG_ERROR("child '%s': metrics_output path too long; no metrics file", cc->name);
            t->metrics_output[0] = 0;
        }
    }
    /* the metrics endpoint: explicit, else beside the traces endpoint (.../v1/traces -> .../v1/metrics) */
    size_t el = strlen(t->endpoint);
    if (!t->metrics_endpoint[0] && el >= 10 && strcmp(t->endpoint + el - 10, "/v1/traces") == 0)
        snprintf(t->metrics_endpoint, sizeof t->metrics_endpoint, "%.*s/v1/metrics", (int)(el - 10), t->endpoint);
    resource_init(t, exe, app);
    int user_targets = t->ntargets;
    if (t->agent)
        integ_load(t);
    else if (t->integ_file[0])
        LOG_WARN("%s: [child %s]: integrations = %s needs the agent (agent = false): not loaded", file, cc->name,
                 t->integ_file);
    if (user_targets == 0 && t->ninteg == 0 && (!t->agent || (!t->instrument[0] && !t->activity_sources[0])))
        LOG_WARN("child '%s': no valid 'trace =' target and no Activity recorded; the tracer records nothing",
                 cc->name);
    return 0;
}

