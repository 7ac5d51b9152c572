/* OTLP/HTTP export: the bounded request queue with retries, and the libcurl transport
 * (see otlp_http.h). */
#include "tracer/otlp_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/platform.h"

#define DROP_LOG_INTERVAL_MS 10000

/* ---- the sender ----------------------------------------------------------------------- */

#define WHO(h) ((h)->conf.who ? (h)->conf.who : "tracer: OTLP/HTTP")
#define UNIT(h) ((h)->conf.unit ? (h)->conf.unit : "span(s)")

struct request {
    char *body;
    char *url; /* NULL: the transport's own */
    size_t len, nspans;
    int attempts;
};

enum drop_kind { DROP_FULL, DROP_FAILED, DROP_UNSENT, DROP_KINDS };

struct clrmux_http {
    struct clrmux_http_conf conf;
    char endpoint[2048];
    struct request *q; /* ring of conf.max_queue */
    size_t head, count;
    int64_t next_at;   /* no attempt before (the backoff) */
    long backoff;      /* the next wait after a failed attempt */
    uint64_t streak;   /* failed attempts since the last success */
    struct clrmux_http_stats st;
    /* drops not logged yet, per kind, and when drops were last logged */
    uint64_t unlogged[DROP_KINDS], unlogged_spans[DROP_KINDS];
    int64_t drop_logged_at;
    int drops_logged;
    char last_why[256];
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t now_ms(const struct clrmux_http *h) { return h->conf.now_ms ? h->conf.now_ms() : mono_ms(); }

struct clrmux_http *clrmux_http_new(const struct clrmux_http_conf *conf)
{
    struct clrmux_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->conf = *conf;
    if (h->conf.max_queue < 1)
        h->conf.max_queue = 1;
    if (h->conf.max_attempts < 1)
        h->conf.max_attempts = 1;
    if (h->conf.backoff_ms < 1)
        h->conf.backoff_ms = 1;
    if (h->conf.backoff_max_ms < h->conf.backoff_ms)
        h->conf.backoff_max_ms = h->conf.backoff_ms;
    if (h->conf.timeout_ms < 1)
        h->conf.timeout_ms = 1;
    snprintf(h->endpoint, sizeof h->endpoint, "%s", conf->endpoint ? conf->endpoint : "?");
    h->conf.endpoint = h->endpoint;
    h->backoff = h->conf.backoff_ms;
    h->q = calloc(h->conf.max_queue, sizeof *h->q);
    if (!h->q) {
        free(h);
        return NULL;
    }
    return h;
}

static struct request *at(struct clrmux_http *h, size_t i) { return &h->q[(h->head + i) % h->conf.max_queue]; }

static void pop(struct clrmux_http *h)
{
    struct request *r = at(h, 0);
    free(r->body);
    free(r->url);
    memset(r, 0, sizeof *r);
    h->head = (h->head + 1) % h->conf.max_queue;
    h->count--;
}

/* Logs the drops not logged yet: the first at once, then at most every
 * DROP_LOG_INTERVAL_MS while they go on; all of them with `force`. */
static void log_drops(struct clrmux_http *h, int force)
{
    int any = 0;
    for (int k = 0; k < DROP_KINDS; k++)
        any |= h->unlogged[k] != 0;
    if (!any)
        return;
    int64_t now = now_ms(h);
    if (!force && h->drops_logged && now - h->drop_logged_at < DROP_LOG_INTERVAL_MS)
        return;
    if (h->unlogged[DROP_FULL])
        LOG_WARN("%s: %llu request(s) (%llu %s) dropped: the queue of %zu request(s) to %s was "
                 "full (the oldest are dropped)",
                 WHO(h), (unsigned long long)h->unlogged[DROP_FULL], (unsigned long long)h->unlogged_spans[DROP_FULL], UNIT(h),
                 h->conf.max_queue, h->endpoint);
    if (h->unlogged[DROP_FAILED])
        LOG_WARN("%s: %llu request(s) (%llu %s) to %s dropped, not accepted (at most %d attempts "
                 "each; last: %s)",
                 WHO(h), (unsigned long long)h->unlogged[DROP_FAILED], (unsigned long long)h->unlogged_spans[DROP_FAILED],
                 UNIT(h),
                 h->endpoint, h->conf.max_attempts, h->last_why);
    if (h->unlogged[DROP_UNSENT])
        LOG_WARN("%s: %llu request(s) (%llu %s) to %s dropped, still queued when the time to "
                 "send them at shutdown ran out",
                 WHO(h), (unsigned long long)h->unlogged[DROP_UNSENT], (unsigned long long)h->unlogged_spans[DROP_UNSENT],
                 UNIT(h),
                 h->endpoint);
    memset(h->unlogged, 0, sizeof h->unlogged);
    memset(h->unlogged_spans, 0, sizeof h->unlogged_spans);
    h->drop_logged_at = now;
    h->drops_logged = 1;
}

static void drop_head(struct clrmux_http *h, enum drop_kind kind)
{
    size_t n = at(h, 0)->nspans;
    uint64_t *req = kind == DROP_FULL ? &h->st.full : kind == DROP_FAILED ? &h->st.failed : &h->st.unsent;
    uint64_t *spans = kind == DROP_FULL     ? &h->st.full_spans
                      : kind == DROP_FAILED ? &h->st.failed_spans
                                            : &h->st.unsent_spans;
    (*req)++;
    *spans += n;
    h->unlogged[kind]++;
    h->unlogged_spans[kind] += n;
    pop(h);
}

void clrmux_http_enqueue(struct clrmux_http *h, char *body, size_t len, size_t nspans)
{
    clrmux_http_enqueue_url(h, NULL, body, len, nspans);
}

void clrmux_http_enqueue_url(struct clrmux_http *h, char *url, char *body, size_t len, size_t nspans)
{
    if (h->count == h->conf.max_queue) {
        drop_head(h, DROP_FULL);
        log_drops(h, 0);
    }
    struct request *r = at(h, h->count);
    r->url = url;
    r->body = body;
    r->len = len;
    r->nspans = nspans;
    r->attempts = 0;
    h->count++;
    h->st.queued_spans += nspans;
}

/* One attempt of the oldest request. */
static void attempt(struct clrmux_http *h, long timeout_ms)
{
    struct request *r = at(h, 0);
    long status = 0;
    char why[256] = "";
    r->attempts++;
    h->st.attempts++;
    if (r->url && h->conf.set_url)
        h->conf.set_url(h->conf.post_ctx, r->url);
    enum clrmux_http_result res = h->conf.post(h->conf.post_ctx, r->body, r->len, timeout_ms, &status, why, sizeof why);
    if (res == CLRMUX_HTTP_OK) {
        h->st.sent++;
        h->st.sent_spans += r->nspans;
        if (h->streak)
            LOG_INFO("%s: %s accepted a request again (after %llu failed attempt(s))", WHO(h), h->endpoint,
                     (unsigned long long)h->streak);
        h->streak = 0;
        h->backoff = h->conf.backoff_ms;
        h->next_at = 0;
        pop(h);
        return;
    }
    h->st.failed_attempts++;
    h->streak++;
    snprintf(h->last_why, sizeof h->last_why, "%s", why[0] ? why : "failed");
    int last = res == CLRMUX_HTTP_FAIL || r->attempts >= h->conf.max_attempts;
    long wait = res == CLRMUX_HTTP_RETRY ? h->backoff : 0;
    /* the first failure of a streak is a warning; the following ones are counted (the
     * summary and the drop lines give them) and logged at debug level */
    int level = h->streak == 1 ? CLRMUX_LOG_WARN : CLRMUX_LOG_DEBUG;
    if (level <= clrmux_log_get_level()) {
        if (last)
            clrmux_log(level, "%s: POST of %zu %s to %s failed: %s; attempt %d of %d, dropped", WHO(h),
                       r->nspans, UNIT(h), h->endpoint, h->last_why, r->attempts, h->conf.max_attempts);
        else
            clrmux_log(level, "%s: POST of %zu %s to %s failed: %s; attempt %d of %d, retrying in "
                       "%ld ms",
                       WHO(h), r->nspans, UNIT(h), h->endpoint, h->last_why, r->attempts, h->conf.max_attempts, wait);
    }
    if (last) {
        drop_head(h, DROP_FAILED);
        log_drops(h, 0);
    }
    if (res == CLRMUX_HTTP_RETRY) { /* the endpoint is unreachable or busy: every request waits */
        h->next_at = now_ms(h) + wait;
        h->backoff = h->backoff > h->conf.backoff_max_ms / 2 ? h->conf.backoff_max_ms : h->backoff * 2;
    }
}

size_t clrmux_http_pump(struct clrmux_http *h, long budget_ms)
{
    int64_t start = now_ms(h);
    while (h->count) {
        int64_t now = now_ms(h);
        if (now < h->next_at || (budget_ms > 0 && now - start >= budget_ms))
            break;
        attempt(h, h->conf.timeout_ms);
    }
    log_drops(h, 0);
    return h->count;
}

void clrmux_http_finish(struct clrmux_http *h, long within_ms)
{
    int64_t deadline = now_ms(h) + within_ms;
    while (h->count) {
        int64_t now = now_ms(h);
        if (now >= deadline)
            break;
        if (now < h->next_at) {
            int64_t until = h->next_at < deadline ? h->next_at : deadline;
            if (h->conf.sleep_ms)
                h->conf.sleep_ms((long)(until - now));
            else
                nap_ms((long)(until - now));
            continue;
        }
        long left = (long)(deadline - now);
        attempt(h, left < h->conf.timeout_ms ? left : h->conf.timeout_ms);
    }
    while (h->count)
        drop_head(h, DROP_UNSENT);
    log_drops(h, 1);
    const struct clrmux_http_stats *s = &h->st;
    uint64_t dropped = s->full + s->failed + s->unsent;
    uint64_t dropped_spans = s->full_spans + s->failed_spans + s->unsent_spans;
    clrmux_log(dropped ? CLRMUX_LOG_WARN : CLRMUX_LOG_INFO,
               "%s to %s: %llu %s sent in %llu request(s), %llu attempt(s) of which %llu failed; "
               "%llu %s dropped in %llu request(s) (%llu queue full, %llu not accepted, %llu unsent at shutdown)",
               WHO(h), h->endpoint, (unsigned long long)s->sent_spans, UNIT(h), (unsigned long long)s->sent,
               (unsigned long long)s->attempts, (unsigned long long)s->failed_attempts,
               (unsigned long long)dropped_spans, UNIT(h), (unsigned long long)dropped, (unsigned long long)s->full,
               (unsigned long long)s->failed, (unsigned long long)s->unsent);
}

size_t clrmux_http_queued(const struct clrmux_http *h) { return h->count; }

int clrmux_http_ready(const struct clrmux_http *h) { return h->count && now_ms(h) >= h->next_at; }

void clrmux_http_get_stats(const struct clrmux_http *h, struct clrmux_http_stats *s) { *s = h->st; }

void clrmux_http_free(struct clrmux_http *h)
{
    if (!h)
        return;
    while (h->count)
        pop(h);
    free(h->q);
    free(h);
}

/* ---- the libcurl transport ------------------------------------------------------------ */

/* curl's types, as the ABI has them: handles are opaque pointers, CURLcode / CURLoption /
 * CURLINFO are C enums (int), curl_off_t is 64-bit. */
typedef int curl_code;
typedef int64_t curl_off;

struct clrmux_curl {
    void *lib;
    void *easy;
    void *headers;
    char url[2048];
    char errbuf[CLRMUX_CURL_ERROR_SIZE];
    curl_code (*global_init)(long flags);
    void *(*easy_init)(void);
    curl_code (*easy_setopt)(void *easy, int option, ...);
    curl_code (*easy_perform)(void *easy);
    curl_code (*easy_getinfo)(void *easy, int info, ...);
    void (*easy_cleanup)(void *easy);
    void *(*slist_append)(void *list, const char *s);
    void (*slist_free_all)(void *list);
};

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p, (void)ud;
    return size * n;
}

struct clrmux_curl *clrmux_curl_open(const char *lib, const char *url, char *loaded, size_t loadedlen, char *err,
                                     size_t errlen)
{
#if defined(_WIN32)
    /* curl's own Windows build (curl.se/windows), or a libcurl.dll on the DLL search path */
    static const char *const names[] = {"libcurl-x64.dll", "libcurl.dll"};
#else
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
#endif
    char why[512] = "";
    void *h = NULL;
    if (lib && *lib) {
        h = clrmux_lib_open(lib, why, sizeof why);
    } else {
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
            char w[512];
            h = clrmux_lib_open(names[i], w, sizeof w);
            if (!h && !why[0])
                snprintf(why, sizeof why, "%s", w);
        }
    }
    if (!h) {
        snprintf(err, errlen, "cannot load libcurl (%s)", why);
        return NULL;
    }
    struct clrmux_curl *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL; /* the library stays loaded: harmless */
    }
    c->lib = h;
    snprintf(c->url, sizeof c->url, "%s", url);
#define SYM(field, name)                                                                   \
    do {                                                                                   \
        void *p_ = clrmux_lib_sym(h, name);                                                \
        if (!p_) {                                                                         \
            snprintf(err, errlen, "%s is not a usable libcurl: no %s", lib && *lib ? lib : "libcurl", name); \
            free(c);                                                                       \
            return NULL;                                                                   \
        }                                                                                  \
        c->field = (__typeof__(c->field))p_;                                               \
    } while (0)
    SYM(global_init, "curl_global_init");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
    if (loaded && loadedlen && clrmux_module_path_of((const void *)c->easy_init, loaded, loadedlen) != 0)
        snprintf(loaded, loadedlen, "%s", lib && *lib ? lib : "libcurl");
    curl_code rc = c->global_init(CLRMUX_CURL_GLOBAL_ALL);
    if (rc != CLRMUX_CURLE_OK) {
        snprintf(err, errlen, "curl_global_init failed (CURLcode %d)", rc);
        free(c);
        return NULL;
    }
    c->easy = c->easy_init();
    void *hd = c->slist_append(NULL, "Content-Type: application/json");
    void *hd2 = hd ? c->slist_append(hd, "Expect:") : NULL; /* no 100-continue round trip */
    if (!c->easy || !hd2) {
        snprintf(err, errlen, "curl_easy_init failed");
        if (hd)
            c->slist_free_all(hd);
        if (c->easy)
            c->easy_cleanup(c->easy);
        free(c);
        return NULL;
    }
    c->headers = hd2;
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_URL, c->url);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_NOSIGNAL, 1L); /* the process's threads and signals are the runtime's */
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_POST, 1L);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_HTTPHEADER, c->headers);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_WRITEFUNCTION, discard); /* else the response goes to stdout */
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_ERRORBUFFER, c->errbuf);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_USERAGENT, "clrmux");
    return c;
}

static int hexd(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int clrmux_otel_decode(const char *s, size_t n, char *out, size_t outsz, int refuse_controls)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || hexd(s[i + 1]) < 0 || hexd(s[i + 2]) < 0)
                return -1;
            c = hexd(s[i + 1]) << 4 | hexd(s[i + 2]);
            i += 2;
        }
        if ((refuse_controls && (c == '\r' || c == '\n' || c == 0)) || o + 1 >= outsz)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = 0;
    return 0;
}

int clrmux_curl_set_headers(struct clrmux_curl *c, const char *content_type, const char *headers, char *bad,
                            size_t badlen)
{
    int nbad = 0;
    char line[1200];
    if (bad && badlen)
        bad[0] = 0;
    snprintf(line, sizeof line, "Content-Type: %s", content_type);
    void *hd = c->slist_append(NULL, line);
    hd = hd ? c->slist_append(hd, "Expect:") : NULL;
    for (const char *p = headers; hd && p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        char k[256], v[900];
        if (eq && clrmux_otel_decode(p, (size_t)(eq - p), k, sizeof k, 1) == 0 && k[0] && !strpbrk(k, ": \t") &&
            clrmux_otel_decode(eq + 1, n - (size_t)(eq - p) - 1, v, sizeof v, 1) == 0 /* no header injection */) {
            snprintf(line, sizeof line, "%s: %s", k, v);
            hd = c->slist_append(hd, line);
        } else if (strspn(p, " \t") < n) {
            nbad++;
            if (bad && badlen) { /* the key only: values may be secrets */
                size_t l = strlen(bad);
                snprintf(bad + l, badlen - l, "%s'%.*s'", l ? ", " : "", (int)(eq ? (size_t)(eq - p) : 0), p);
            }
        }
        p = comma ? comma + 1 : NULL;
    }
    if (!hd)
        return -1;
    if (c->headers)
        c->slist_free_all(c->headers);
    c->headers = hd;
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_HTTPHEADER, c->headers);
    return nbad;
}

void clrmux_curl_set_url(void *ctx, const char *url)
{
    struct clrmux_curl *c = ctx;
    snprintf(c->url, sizeof c->url, "%s", url);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_URL, c->url);
}

enum clrmux_http_result clrmux_curl_post(void *ctx, const char *body, size_t len, long timeout_ms, long *status,
                                         char *why, size_t whylen)
{
    struct clrmux_curl *c = ctx;
    long code = 0;
    c->errbuf[0] = 0;
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_POSTFIELDS, body);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_POSTFIELDSIZE_LARGE, (curl_off)len);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_TIMEOUT_MS, timeout_ms);
    c->easy_setopt(c->easy, CLRMUX_CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 2000 ? timeout_ms : 2000L);
    curl_code rc = c->easy_perform(c->easy);
    if (rc != CLRMUX_CURLE_OK) {
        *status = 0;
        snprintf(why, whylen, "%s (CURLcode %d)", c->errbuf[0] ? c->errbuf : "transfer failed", rc);
        return rc == CLRMUX_CURLE_UNSUPPORTED_PROTOCOL || rc == CLRMUX_CURLE_URL_MALFORMAT ? CLRMUX_HTTP_FAIL
                                                                                          : CLRMUX_HTTP_RETRY;
    }
    c->easy_getinfo(c->easy, CLRMUX_CURLINFO_RESPONSE_CODE, &code);
    *status = code;
    if (code >= 200 && code < 300)
        return CLRMUX_HTTP_OK;
    snprintf(why, whylen, "HTTP %ld", code);
    return code == 429 || (code >= 500 && code < 600) ? CLRMUX_HTTP_RETRY : CLRMUX_HTTP_FAIL;
}

void clrmux_curl_close(struct clrmux_curl *c)
{
    if (!c)
        return;
    if (c->easy)
        c->easy_cleanup(c->easy);
    if (c->headers)
        c->slist_free_all(c->headers);
    free(c);
}
