/* Pushing each profile to Pyroscope's HTTP ingest API (`endpoint =` in the profiler's
 * section): POST <endpoint>/ingest?name=<app_name>&from=<unix s>&until=<unix s>
 * &format=pprof&spyName=clrmux with the gzip'd pprof as the body
 * (Content-Type: application/octet-stream), through the tracer's OTLP/HTTP sender
 * (src/tracer/otlp_http.c: bounded queue, retries with exponential backoff on connection
 * errors, 429 and 5xx, drops counted and logged) and its libcurl transport (dlopened). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "profiler/prof.h"
#include "tracer/otlp_http.h"

struct prof_push {
    struct clrmux_curl *curl;
    struct clrmux_http *http;
    char base[2048]; /* <endpoint>/ingest */
    char app[256];   /* URL-encoded */
};

static void url_encode(const char *s, char *out, size_t outsz)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < outsz; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = 0;
}

struct prof_push *prof_push_open(const char *endpoint, const char *app, const char *headers, char *err, size_t errlen)
{
    struct prof_push *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t n = strlen(endpoint);
    while (n && endpoint[n - 1] == '/')
        n--;
    if (n >= 7 && strcmp(endpoint + n - 7, "/ingest") == 0)
        n -= 7;
    snprintf(p->base, sizeof p->base, "%.*s/ingest", (int)n, endpoint);
    url_encode(app, p->app, sizeof p->app);
    char loaded[1024];
    p->curl = clrmux_curl_open(getenv("CLRMUX_LIBCURL"), p->base, loaded, sizeof loaded, err, errlen);
    if (!p->curl) {
        free(p);
        return NULL;
    }
    char bad[256];
    if (clrmux_curl_set_headers(p->curl, "application/octet-stream", headers, bad, sizeof bad) > 0)
        LOG_ERROR("profiler: Pyroscope headers: malformed member(s) skipped: %s", bad);
    struct clrmux_http_conf hc = {
        .endpoint = p->base,
        .max_queue = 16,
        .max_attempts = CLRMUX_HTTP_ATTEMPTS,
        .backoff_ms = CLRMUX_HTTP_BACKOFF_MS,
        .backoff_max_ms = CLRMUX_HTTP_BACKOFF_MAX_MS,
        .timeout_ms = CLRMUX_HTTP_TIMEOUT_MS,
        .post = clrmux_curl_post,
        .post_ctx = p->curl,
        .set_url = clrmux_curl_set_url,
        .who = "profiler: Pyroscope",
        .unit = "profile(s)",
    };
    if (!(p->http = clrmux_http_new(&hc))) {
        clrmux_curl_close(p->curl);
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    LOG_INFO("profiler: profiles are pushed to %s (Pyroscope ingest API, name %s, with %s)", p->base, app, loaded);
    return p;
}

void prof_push_send(struct prof_push *p, uint8_t *pprof_gz, size_t len, int64_t from_ns, int64_t until_ns)
{
    char *url = malloc(sizeof p->base + sizeof p->app + 128);
    if (!url) {
        free(pprof_gz);
        return;
    }
    long long from = from_ns / 1000000000, until = (until_ns + 999999999) / 1000000000;
    if (until <= from)
        until = from + 1;
    sprintf(url, "%s?name=%s&from=%lld&until=%lld&format=pprof&spyName=clrmux", p->base, p->app, from, until);
    clrmux_http_enqueue_url(p->http, url, (char *)pprof_gz, len, 1);
}

void prof_push_pump(struct prof_push *p, long budget_ms) { clrmux_http_pump(p->http, budget_ms); }

void prof_push_finish(struct prof_push *p, long within_ms) { clrmux_http_finish(p->http, within_ms); }
