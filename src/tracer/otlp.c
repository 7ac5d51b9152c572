/* OTLP JSON lines (see otlp.h): spans, metrics and the resource they share. */
#include "tracer/otlp.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/otlp_http.h"
#include "tracer/otlp_int.h"

void clrmux_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static const char *exc_message(const struct clrmux_otlp_names *names, uint32_t exc);

/* A span's JSON from its name to its start time's opening quote (the method's), and from its
 * end time's closing quote to the end of its attributes (the method's and the thread's). */
static void put_head(struct buf *b, uint32_t method, const char *name)
{
    PUTS(b, ",\"name\":");
    if (name) {
        put_json(b, name);
    } else {
        PUTS(b, "\"method#");
        put_u64(b, method);
        PUTS(b, "\"");
    }
    PUTS(b, ",\"kind\":1,\"startTimeUnixNano\":\"");
}

static void put_attrs(struct buf *b, const char *name, uint32_t tid, const char *tname)
{
    PUTS(b, "\",\"attributes\":[");
    if (name) {
        PUTS(b, "{\"key\":\"code.function.name\",\"value\":{\"stringValue\":");
        put_json(b, name);
        PUTS(b, "}},");
    }
    PUTS(b, "{\"key\":\"thread.id\",\"value\":{\"intValue\":\"");
    put_u64(b, tid);
    PUTS(b, "\"}}");
    if (tname) {
        PUTS(b, ",{\"key\":\"thread.name\",\"value\":{\"stringValue\":");
        put_json(b, tname);
        PUTS(b, "}}");
    }
    PUTS(b, "]");
}

/* Those two pieces as a line's last span had them: a line's spans mostly share their method
 * and thread, and then each is one copy (the name went in twice per span, and the thread's
 * name through the escaper). The method's name is known by its pointer (a method's name does
 * not change), the thread's by its text (it may). len SIZE_MAX: too long to keep here. */
struct span_cache {
    int valid;
    uint32_t method, tid;
    const char *name;
    char tname[64];
    int has_tname;
    size_t head_len, attrs_len;
    char head[320], attrs[640];
};

static void cache_fill(struct span_cache *c, uint32_t method, const char *name, uint32_t tid, const char *tname)
{
    struct buf h = {c->head, c->head + sizeof c->head, 0}, a = {c->attrs, c->attrs + sizeof c->attrs, 0};
    put_head(&h, method, name);
    put_attrs(&a, name, tid, tname);
    c->head_len = h.overflow ? SIZE_MAX : (size_t)(h.p - c->head);
    c->attrs_len = a.overflow ? SIZE_MAX : (size_t)(a.p - c->attrs);
    c->method = method;
    c->name = name;
    c->tid = tid;
    c->has_tname = tname != NULL;
    if (tname && strlen(tname) < sizeof c->tname)
        memcpy(c->tname, tname, strlen(tname) + 1);
    else if (tname)
        c->attrs_len = SIZE_MAX; /* a name longer than kept here: not compared, rendered each time */
    c->valid = 1;
}

static int cache_hit(const struct span_cache *c, uint32_t method, const char *name, uint32_t tid, const char *tname)
{
    return c->valid && c->method == method && c->name == name && c->tid == tid && c->has_tname == (tname != NULL) &&
           (!tname || strcmp(c->tname, tname) == 0);
}

static void put_span(struct buf *b, const struct clrmux_span *s, size_t i, const struct clrmux_otlp_names *names,
                     struct span_cache *sc)
{
    const char *name = names && names->method ? names->method(names->ctx, s->method) : NULL;
    const char *tname = names && names->thread ? names->thread(names->ctx, s->tid) : NULL;
    if (i)
        PUTS(b, ",");
    PUTS(b, "{\"traceId\":\"");
    put_hex(b, s->trace_id, 16);
    PUTS(b, "\",\"spanId\":\"");
    put_hex64(b, s->span_id);
    PUTS(b, "\"");
    if (s->parent_id) {
        PUTS(b, ",\"parentSpanId\":\"");
        put_hex64(b, s->parent_id);
        PUTS(b, "\"");
    }
    if (!cache_hit(sc, s->method, name, s->tid, tname))
        cache_fill(sc, s->method, name, s->tid, tname);
    if (sc->head_len != SIZE_MAX)
        put(b, sc->head, sc->head_len);
    else
        put_head(b, s->method, name);
    put_i64(b, s->start_ns);
    PUTS(b, "\",\"endTimeUnixNano\":\"");
    put_i64(b, s->end_ns);
    if (sc->attrs_len != SIZE_MAX)
        put(b, sc->attrs, sc->attrs_len);
    else
        put_attrs(b, name, s->tid, tname);
    if (s->flags & CLRMUX_SPAN_ERROR) {
        const char *exc = s->exc && names && names->exception ? names->exception(names->ctx, s->exc) : NULL;
        const char *msg = exc ? exc_message(names, s->exc) : NULL;
        PUTS(b, ",\"events\":[{\"timeUnixNano\":\"");
        put_i64(b, s->end_ns);
        PUTS(b, "\",\"name\":\"exception\",\"attributes\":[{\"key\":\"exception.type\",\"value\":{\"stringValue\":");
        put_json(b, exc ? exc : "System.Exception");
        PUTS(b, "}}");
        if (msg) {
            PUTS(b, ",{\"key\":\"exception.message\",\"value\":{\"stringValue\":");
            put_json(b, msg);
            PUTS(b, "}}");
        }
        PUTS(b, "]}],\"status\":{\"code\":2");
        if (exc) {
            PUTS(b, ",\"message\":");
            put_json(b, exc);
        }
        PUTS(b, "}}");
    } else {
        /* status UNSET, the default: left out, as the protobuf JSON mapping leaves out a field
         * at its default (OTLP/JSON follows it), 12 bytes of ~400 a span */
        PUTS(b, "}");
    }
}

static const char *exc_message(const struct clrmux_otlp_names *names, uint32_t exc)
{
    return names && names->exception_message ? names->exception_message(names->ctx, exc) : NULL;
}

/* ---- resource ---------------------------------------------------------------------------- */

int clrmux_resource_set(struct clrmux_resource *r, const char *key, const char *value, int is_int)
{
    if (!key || !*key || !value || strlen(key) >= sizeof r->attrs[0].key || strlen(value) >= sizeof r->attrs[0].value)
        return -1;
    size_t i = 0;
    while (i < r->n && strcmp(r->attrs[i].key, key) != 0)
        i++;
    if (i == r->n) {
        if (r->n == CLRMUX_RESOURCE_MAX)
            return -1;
        r->n++;
    }
    snprintf(r->attrs[i].key, sizeof r->attrs[i].key, "%s", key);
    snprintf(r->attrs[i].value, sizeof r->attrs[i].value, "%s", value);
    r->attrs[i].is_int = is_int;
    return 0;
}

const char *clrmux_resource_get(const struct clrmux_resource *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->attrs[i].key, key) == 0)
            return r->attrs[i].value;
    return NULL;
}

int clrmux_resource_parse(struct clrmux_resource *r, const char *text, char *bad, size_t badlen)
{
    int nbad = 0;
    if (bad && badlen)
        bad[0] = 0;
    for (const char *p = text; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        char key[128], value[256];
        int ok = eq && clrmux_otel_decode(p, (size_t)(eq - p), key, sizeof key, 0) == 0 && key[0] &&
                 clrmux_otel_decode(eq + 1, n - (size_t)(eq - p) - 1, value, sizeof value, 0) == 0;
        if (ok) {
            if (!clrmux_resource_get(r, key))
                ok = clrmux_resource_set(r, key, value, 0) == 0;
        } else if (n == 0 || strspn(p, " \t") >= n) {
            ok = 1; /* empty member */
        }
        if (!ok) {
            nbad++;
            if (bad && badlen) {
                size_t l = strlen(bad);
                snprintf(bad + l, badlen - l, "%s%.*s", l ? "," : "", (int)n, p);
            }
        }
        p = comma ? comma + 1 : NULL;
    }
    return nbad;
}

void clrmux_resource_write_json(FILE *f, const struct clrmux_resource *r)
{
    fputs("{\"attributes\":[", f);
    for (size_t i = 0; i < r->n; i++) {
        fputs(i ? ",{\"key\":" : "{\"key\":", f);
        clrmux_json_string(f, r->attrs[i].key);
        fputs(r->attrs[i].is_int ? ",\"value\":{\"intValue\":" : ",\"value\":{\"stringValue\":", f);
        clrmux_json_string(f, r->attrs[i].value);
        fputs("}}", f);
    }
    fputs("]}", f);
}

/* span i formatted at the end of m: in place when it fits SPAN_ROOM bytes (names are short),
 * else with the room its names need */
#define SPAN_ROOM 4096
static int render_span(struct clrmux_otlp_mem *m, const struct clrmux_span *s, size_t i,
                       const struct clrmux_otlp_names *names, struct span_cache *nc)
{
    if (mem_reserve(m, SPAN_ROOM))
        return -1;
    struct buf b = {m->p + m->len, m->p + m->cap, 0};
    put_span(&b, s, i, names, nc);
    if (!b.overflow) {
        m->len = (size_t)(b.p - m->p);
        return 0;
    }
    size_t need = 1024;
    const char *nm = names && names->method ? names->method(names->ctx, s->method) : NULL;
    const char *ex = names && names->exception ? names->exception(names->ctx, s->exc) : NULL;
    const char *em = exc_message(names, s->exc);
    const char *tn = names && names->thread ? names->thread(names->ctx, s->tid) : NULL;
    need += 6 * (2 * (nm ? strlen(nm) : 0) + 3 * (ex ? strlen(ex) : 0) + (em ? strlen(em) : 0) + (tn ? strlen(tn) : 0));
    if (mem_reserve(m, need))
        return -1;
    b = (struct buf){m->p + m->len, m->p + m->cap, 0};
    put_span(&b, s, i, names, nc);
    if (b.overflow)
        return -1;
    m->len = (size_t)(b.p - m->p);
    return 0;
}

int clrmux_otlp_render_line(struct clrmux_otlp_mem *m, const struct clrmux_resource *res,
                            const struct clrmux_span *spans, size_t n, const struct clrmux_otlp_names *names)
{
    if (!n)
        return 0;
    /* the head: the resource (at most 32 attributes of 384 bytes, escaped) */
    size_t head = 256 + 6 * sizeof res->attrs;
    if (mem_reserve(m, head))
        return -1;
    struct buf b = {m->p + m->len, m->p + m->cap, 0};
    PUTS(&b, "{\"resourceSpans\":[{\"resource\":");
    put_resource(&b, res);
    PUTS(&b, ",\"scopeSpans\":[{\"scope\":{\"name\":\"clrmux\",\"version\":\"" CLRMUX_VERSION "\"},\"spans\":[");
    if (b.overflow)
        return -1;
    m->len = (size_t)(b.p - m->p);
    struct span_cache nc;
    nc.valid = 0;
    for (size_t i = 0; i < n; i++)
        if (render_span(m, &spans[i], i, names, &nc))
            return -1;
    static const char tail[] = "]}]}]}\n";
    if (mem_reserve(m, sizeof tail))
        return -1;
    memcpy(m->p + m->len, tail, sizeof tail - 1);
    m->len += sizeof tail - 1;
    return 0;
}

int clrmux_otlp_write_line(FILE *f, const struct clrmux_resource *res, const struct clrmux_span *spans, size_t n,
                           const struct clrmux_otlp_names *names)
{
    if (!n)
        return 0;
    struct clrmux_otlp_mem m = {0};
    int rc = clrmux_otlp_render_line(&m, res, spans, n, names);
    if (rc == 0 && fwrite(m.p, 1, m.len, f) != m.len)
        rc = -1;
    free(m.p);
    return rc || ferror(f) ? -1 : 0;
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void metric_attrs(FILE *f, const char *name)
{
    fputs("\"attributes\":[{\"key\":\"code.function.name\",\"value\":{\"stringValue\":", f);
    clrmux_json_string(f, name);
    fputs("}}]", f);
}

int clrmux_otlp_write_metrics(FILE *f, const struct clrmux_resource *res, int64_t start_ns, int64_t now_ns,
                              uint32_t nmethods, const struct clrmux_otlp_names *names,
                              const struct clrmux_otlp_counter *counters, size_t ncounters)
{
    struct clrmux_method_metrics *m = calloc(nmethods ? nmethods : 1, sizeof *m);
    if (!m)
        return -1;
    size_t used = 0;
    clrmux_metrics_snapshot(m, nmethods);
    for (uint32_t i = 0; i < nmethods; i++)
        used += m[i].calls != 0;
    fputs("{\"resourceMetrics\":[{\"resource\":", f);
    clrmux_resource_write_json(f, res);
    fputs(",\"scopeMetrics\":[{\"scope\":{\"name\":\"clrmux\",\"version\":\"" CLRMUX_VERSION "\"},\"metrics\":[", f);
    static const struct {
        const char *name, *desc, *unit;
    } sums[2] = {{"clrmux.method.calls", "Calls of a traced method, whether or not its span was recorded", "{call}"},
                 {"clrmux.method.errors", "Calls of a traced method left by an exception", "{call}"}};
    int first_metric = 1;
    for (int k = 0; k < 2 && used; k++) {
        fprintf(f, "%s{\"name\":\"%s\",\"description\":\"%s\",\"unit\":\"%s\",\"sum\":{\"dataPoints\":[",
                first_metric ? "" : ",", sums[k].name, sums[k].desc, sums[k].unit);
        first_metric = 0;
        int first = 1;
        for (uint32_t i = 0; i < nmethods; i++) {
            if (!m[i].calls)
                continue;
            const char *nm = names && names->method ? names->method(names->ctx, i) : NULL;
            fputs(first ? "{" : ",{", f);
            first = 0;
            metric_attrs(f, nm ? nm : "?");
            fprintf(f, ",\"startTimeUnixNano\":\"%lld\",\"timeUnixNano\":\"%lld\",\"asInt\":\"%llu\"}",
                    (long long)start_ns, (long long)now_ns,
                    (unsigned long long)(k == 0 ? m[i].calls : m[i].errors));
        }
        fputs("],\"aggregationTemporality\":2,\"isMonotonic\":true}}", f);
    }
    if (used) {
        fputs(",{\"name\":\"clrmux.method.duration\",\"description\":\"Duration of the calls of a traced method\","
              "\"unit\":\"s\",\"histogram\":{\"dataPoints\":[", f);
        int first = 1;
        for (uint32_t i = 0; i < nmethods; i++) {
            if (!m[i].calls)
                continue;
            const char *nm = names && names->method ? names->method(names->ctx, i) : NULL;
            fputs(first ? "{" : ",{", f);
            first = 0;
            metric_attrs(f, nm ? nm : "?");
            fprintf(f, ",\"startTimeUnixNano\":\"%lld\",\"timeUnixNano\":\"%lld\",\"count\":\"%llu\",\"sum\":%.9f,"
                       "\"bucketCounts\":[",
                    (long long)start_ns, (long long)now_ns, (unsigned long long)m[i].count, (double)m[i].sum_ns / 1e9);
            for (int b = 0; b <= CLRMUX_HIST_BOUNDS; b++)
                fprintf(f, "%s\"%llu\"", b ? "," : "", (unsigned long long)m[i].buckets[b]);
            fputs("],\"explicitBounds\":[", f);
            for (int b = 0; b < CLRMUX_HIST_BOUNDS; b++)
                fprintf(f, "%s%g", b ? "," : "", clrmux_hist_bounds_s[b]);
            fputs("]}", f);
        }
        fputs("],\"aggregationTemporality\":2}}", f);
    }
    for (size_t c = 0; c < ncounters; c++) {
        fprintf(f, "%s{\"name\":", first_metric && !used && c == 0 ? "" : ",");
        clrmux_json_string(f, counters[c].name);
        fputs(",\"description\":", f);
        clrmux_json_string(f, counters[c].description);
        fprintf(f, ",\"unit\":\"{span}\",\"sum\":{\"dataPoints\":[{\"startTimeUnixNano\":\"%lld\",\"timeUnixNano\":"
                   "\"%lld\",\"asInt\":\"%llu\"}],\"aggregationTemporality\":2,\"isMonotonic\":true}}",
                (long long)start_ns, (long long)now_ns, (unsigned long long)counters[c].value);
    }
    fputs("]}]}]}\n", f);
    free(m);
    return ferror(f) ? -1 : 0;
}
