/* The OTLP protobuf encoder of libclrmux_otlp.so (see tracer/otlp_pb.h): builds the
 * protobuf-c messages of a batch of metrics in an arena and packs them (spans: the direct
 * encoder, otlp_xpb.c; method spans as its records, otlp_mspan.c). */
#include "tracer/otlp_pb.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "tracer/pb/otlp_mspan.h"
#include "tracer/pb/otlp_xpb.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Metrics__V1__Metric Metric;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumberDataPoint;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistogramDataPoint;

/* ---- an arena: every message of one request, freed at once ----------------------------
 * Its standard blocks (BLOCK bytes) are kept for the calling thread's next request (up to
 * KEPT_BLOCKS, freed when the thread ends) rather than given back to malloc: freed, they went
 * back to the system with the heap's top and were faulted in and zeroed again for the next
 * batch, ~40% of the export thread's time per span of a traced web service (bench/web.sh,
 * perf: memset and page faults). The export thread makes nearly every request. */
#define BLOCK 65536
#define KEPT_BLOCKS 64 /* 4 MiB a thread at most: a batch of ~8000 spans */
struct block {
    struct block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};
struct arena {
    struct block *head;
    int failed;
};

static __thread struct block *kept; /* this thread's spare standard blocks */
static __thread int nkept;
static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

static void kept_release(void *p)
{
    (void)p;
    for (struct block *b = kept, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    kept = NULL;
    nkept = 0;
}

static void kept_key_make(void) { (void)pthread_key_create(&kept_key, kept_release); }

static void *alloc(struct arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        struct block *b;
        if (n <= BLOCK && kept) {
            b = kept;
            kept = b->next;
            nkept--;
        } else {
            size_t cap = n > BLOCK ? n : BLOCK;
            b = malloc(sizeof *b + cap);
            if (!b) {
                a->failed = 1;
                return NULL;
            }
            b->cap = cap;
        }
        b->next = a->head, b->used = 0;
        a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
}

static void arena_free(struct arena *a)
{
    for (struct block *b = a->head, *n; b; b = n) {
        n = b->next;
        if (b->cap == BLOCK && nkept < KEPT_BLOCKS) {
            if (!kept) { /* the thread's first spare: freed when it ends */
                pthread_once(&kept_once, kept_key_make);
                (void)pthread_setspecific(kept_key, (void *)1);
            }
            b->next = kept;
            kept = b;
            nkept++;
        } else {
            free(b);
        }
    }
    a->head = NULL;
}

static KeyValue *kv(struct arena *a, const char *key)
{
    KeyValue *k = alloc(a, sizeof *k);
    AnyValue *v = alloc(a, sizeof *v);
    if (!k || !v)
        return NULL;
    opentelemetry__proto__common__v1__key_value__init(k);
    opentelemetry__proto__common__v1__any_value__init(v);
    k->key = (char *)key;
    k->value = v;
    return k;
}

static KeyValue *kv_str(struct arena *a, const char *key, const char *value)
{
    KeyValue *k = kv(a, key);
    if (k) {
        k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        k->value->string_value = (char *)value;
    }
    return k;
}

static KeyValue *kv_int(struct arena *a, const char *key, int64_t value)
{
    KeyValue *k = kv(a, key);
    if (k) {
        k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        k->value->int_value = value;
    }
    return k;
}

static Resource *resource(struct arena *a, const struct clrmux_resource *r)
{
    Resource *res = alloc(a, sizeof *res);
    KeyValue **attrs = alloc(a, (r->n + 1) * sizeof *attrs);
    if (!res || !attrs)
        return NULL;
    opentelemetry__proto__resource__v1__resource__init(res);
    for (size_t i = 0; i < r->n; i++)
        attrs[i] = r->attrs[i].is_int ? kv_int(a, r->attrs[i].key, strtoll(r->attrs[i].value, NULL, 10))
                                      : kv_str(a, r->attrs[i].key, r->attrs[i].value);
    res->n_attributes = r->n;
    res->attributes = attrs;
    return res;
}

static Scope *scope(struct arena *a)
{
    Scope *s = alloc(a, sizeof *s);
    if (s) {
        opentelemetry__proto__common__v1__instrumentation_scope__init(s);
        s->name = "clrmux";
        s->version = CLRMUX_VERSION;
    }
    return s;
}

static int pack(struct arena *a, const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    if (a->failed)
        return -1;
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return -1;
    *len = protobuf_c_message_pack(m, buf);
    *out = buf;
    return 0;
}

static NumberDataPoint *number(struct arena *a, KeyValue **attrs, size_t nattrs, int64_t start, int64_t now,
                               uint64_t value)
{
    NumberDataPoint *p = alloc(a, sizeof *p);
    if (!p)
        return NULL;
    opentelemetry__proto__metrics__v1__number_data_point__init(p);
    p->n_attributes = nattrs;
    p->attributes = attrs;
    p->start_time_unix_nano = (uint64_t)start;
    p->time_unix_nano = (uint64_t)now;
    p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
    p->as_int = (int64_t)value;
    return p;
}

static Metric *sum_metric(struct arena *a, const char *name, const char *desc, const char *unit, size_t npoints)
{
    Metric *m = alloc(a, sizeof *m);
    Opentelemetry__Proto__Metrics__V1__Sum *s = alloc(a, sizeof *s);
    NumberDataPoint **pts = alloc(a, (npoints + 1) * sizeof *pts);
    if (!m || !s || !pts)
        return NULL;
    opentelemetry__proto__metrics__v1__metric__init(m);
    opentelemetry__proto__metrics__v1__sum__init(s);
    m->name = (char *)name, m->description = (char *)desc, m->unit = (char *)unit;
    m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
    m->sum = s;
    s->aggregation_temporality = OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
    s->is_monotonic = 1;
    s->data_points = pts;
    return m;
}

static int metrics(const struct clrmux_resource *res, int64_t start_ns, int64_t now_ns,
                   const struct clrmux_method_metrics *mm, uint32_t nmethods, const double *bounds, size_t nbounds,
                   const struct clrmux_otlp_names *names, const struct clrmux_otlp_counter *counters, size_t ncounters,
                   uint8_t **out, size_t *len)
{
    struct arena a = {0};
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest req;
    Opentelemetry__Proto__Metrics__V1__ResourceMetrics rm;
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics sm;
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__init(&req);
    opentelemetry__proto__metrics__v1__resource_metrics__init(&rm);
    opentelemetry__proto__metrics__v1__scope_metrics__init(&sm);
    Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rmp = &rm;
    Opentelemetry__Proto__Metrics__V1__ScopeMetrics *smp = &sm;
    req.n_resource_metrics = 1;
    req.resource_metrics = &rmp;
    rm.resource = resource(&a, res);
    rm.n_scope_metrics = 1;
    rm.scope_metrics = &smp;
    sm.scope = scope(&a);
    size_t used = 0;
    for (uint32_t i = 0; i < nmethods; i++)
        used += mm[i].calls != 0;
    Metric **ms = alloc(&a, (3 + ncounters) * sizeof *ms);
    size_t nm_ = 0;
    if (used && ms) {
        Metric *calls = sum_metric(&a, "clrmux.method.calls",
                                   "Calls of a traced method, whether or not its span was recorded", "{call}", used);
        Metric *errors = sum_metric(&a, "clrmux.method.errors", "Calls of a traced method left by an exception",
                                    "{call}", used);
        Metric *dur = alloc(&a, sizeof *dur);
        Opentelemetry__Proto__Metrics__V1__Histogram *h = alloc(&a, sizeof *h);
        HistogramDataPoint **hp = alloc(&a, used * sizeof *hp);
        double *b = alloc(&a, (nbounds + 1) * sizeof *b);
        if (calls && errors && dur && h && hp && b) {
            opentelemetry__proto__metrics__v1__metric__init(dur);
            opentelemetry__proto__metrics__v1__histogram__init(h);
            dur->name = "clrmux.method.duration";
            dur->description = "Duration of the calls of a traced method";
            dur->unit = "s";
            dur->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
            dur->histogram = h;
            h->aggregation_temporality =
                OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
            h->data_points = hp;
            memcpy(b, bounds, nbounds * sizeof *b);
            for (uint32_t i = 0; i < nmethods; i++) {
                if (!mm[i].calls)
                    continue;
                const char *name = names ? clrmux_otlp_name(names->method, names->ctx, i) : NULL;
                KeyValue **attrs = alloc(&a, sizeof *attrs);
                if (!attrs)
                    break;
                attrs[0] = kv_str(&a, "code.function.name", name ? name : "?");
                calls->sum->data_points[calls->sum->n_data_points++] = number(&a, attrs, 1, start_ns, now_ns, mm[i].calls);
                errors->sum->data_points[errors->sum->n_data_points++] =
                    number(&a, attrs, 1, start_ns, now_ns, mm[i].errors);
                HistogramDataPoint *p = alloc(&a, sizeof *p);
                uint64_t *bc = alloc(&a, (nbounds + 1) * sizeof *bc);
                if (!p || !bc)
                    break;
                opentelemetry__proto__metrics__v1__histogram_data_point__init(p);
                p->n_attributes = 1;
                p->attributes = attrs;
                p->start_time_unix_nano = (uint64_t)start_ns;
                p->time_unix_nano = (uint64_t)now_ns;
                p->count = mm[i].count;
                p->sum = (double)mm[i].sum_ns / 1e9;
                for (size_t k = 0; k <= nbounds && k <= CLRMUX_HIST_BOUNDS; k++)
                    bc[k] = mm[i].buckets[k];
                p->n_bucket_counts = nbounds + 1;
                p->bucket_counts = bc;
                p->n_explicit_bounds = nbounds;
                p->explicit_bounds = b;
                hp[h->n_data_points++] = p;
            }
            ms[nm_++] = calls, ms[nm_++] = errors, ms[nm_++] = dur;
        } else {
            a.failed = 1;
        }
    }
    for (size_t c = 0; ms && c < ncounters; c++) {
        Metric *m = sum_metric(&a, counters[c].name, counters[c].description, "{span}", 1);
        if (!m)
            break;
        m->sum->data_points[m->sum->n_data_points++] = number(&a, NULL, 0, start_ns, now_ns, counters[c].value);
        ms[nm_++] = m;
    }
    sm.n_metrics = nm_;
    sm.metrics = ms;
    int rc = pack(&a, &req.base, out, len);
    arena_free(&a);
    return rc;
}

/* ---- Activity spans (tracer/xspan.h): otlp_xpb.c writes their wire format directly ---- */

static const struct clrmux_otlp_pb_api api = {CLRMUX_OTLP_PB_ABI, clrmux_mpb_traces, metrics, clrmux_xpb_traces};

__attribute__((visibility("default"))) const struct clrmux_otlp_pb_api *clrmux_otlp_pb(void) { return &api; }
