/* OTLP/HTTP export: the tracer's OTLP JSON ExportTraceServiceRequest bodies POSTed to a
 * collector (`endpoint = http://127.0.0.1:4318/v1/traces`, Content-Type: application/json).
 *
 * Two parts:
 *   - a sender: a bounded FIFO of request bodies and its retry policy. Requests are sent in
 *     order, one at a time; a failed attempt that can succeed later (connection error,
 *     timeout, HTTP 429 or 5xx) makes the whole queue wait (exponential backoff: the
 *     endpoint is down for every request alike), a request is dropped after max_attempts or
 *     on another HTTP status (4xx: the collector will never take it), and a full queue drops
 *     its oldest request. Every drop is counted (requests and spans) and logged, at most
 *     once per 10 s while it goes on, and at the end. It never sleeps except in
 *     clrmux_http_finish: the tracer's exporter thread calls clrmux_http_pump after each
 *     drain of the span ring and keeps draining while the queue waits.
 *   - a transport over libcurl, loaded with dlopen at tracer start (libclrmux.so links no
 *     libcurl: its static archive is not PIC and the library must stay self-contained). The
 *     sender calls it through a function pointer, so the unit tests give it a fake one.
 * Not thread-safe: one thread (the exporter) uses a sender and its transport. */
#ifndef CLRMUX_TRACER_OTLP_HTTP_H
#define CLRMUX_TRACER_OTLP_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* What an attempt gave. */
enum clrmux_http_result {
    CLRMUX_HTTP_OK = 0,   /* 2xx */
    CLRMUX_HTTP_RETRY,    /* connection error, timeout, 429, 5xx: try again later */
    CLRMUX_HTTP_FAIL,     /* any other status or a permanent error: drop the request */
};

/* Posts body[0..len) within timeout_ms; sets *status to the HTTP status (0: no response)
 * and, unless OK, a short reason in why[whylen]. */
typedef enum clrmux_http_result (*clrmux_http_post_fn)(void *ctx, const char *body, size_t len, long timeout_ms,
                                                      long *status, char *why, size_t whylen);

struct clrmux_http_conf {
    const char *endpoint;       /* for messages */
    size_t max_queue;           /* requests waiting (and the one being retried) */
    int max_attempts;           /* per request */
    long backoff_ms;            /* wait after the first failed attempt; doubles after each */
    long backoff_max_ms;
    long timeout_ms;            /* per attempt */
    clrmux_http_post_fn post;
    void *post_ctx;
    int64_t (*now_ms)(void);    /* NULL: CLOCK_MONOTONIC (tests give a fake clock) */
    void (*set_url)(void *post_ctx, const char *url); /* for clrmux_http_enqueue_url; may be NULL */
    const char *who;            /* log prefix; NULL: "tracer: OTLP/HTTP" */
    const char *unit;           /* what nspans counts, in logs; NULL: "span(s)" */
    void (*sleep_ms)(long ms);  /* NULL: nanosleep */
};

/* The tracer's defaults. */
#define CLRMUX_HTTP_QUEUE 64
#define CLRMUX_HTTP_ATTEMPTS 5
#define CLRMUX_HTTP_BACKOFF_MS 200
#define CLRMUX_HTTP_BACKOFF_MAX_MS 5000
#define CLRMUX_HTTP_TIMEOUT_MS 5000
#define CLRMUX_HTTP_SHUTDOWN_MS 3000 /* clrmux_http_finish's bound at Shutdown */

struct clrmux_http_stats {
    uint64_t sent, sent_spans;               /* requests the collector accepted (2xx) */
    uint64_t attempts, failed_attempts;      /* every POST made / those that failed */
    uint64_t full, full_spans;               /* dropped: the queue was full (oldest first) */
    uint64_t failed, failed_spans;           /* dropped: max_attempts failed, or a 4xx... */
    uint64_t unsent, unsent_spans;           /* dropped: still queued when finish's time ran out */
    uint64_t queued_spans;                   /* spans given to clrmux_http_enqueue */
};

struct clrmux_http;

/* A sender (copies conf; endpoint is copied too). NULL when out of memory. */
struct clrmux_http *clrmux_http_new(const struct clrmux_http_conf *conf);
/* Queues a request; takes body (malloc'd) in every case. A full queue drops its oldest
 * request first (the one being retried, if it is the oldest). */
void clrmux_http_enqueue(struct clrmux_http *h, char *body, size_t len, size_t nspans);
/* The same, for a request to its own URL (url: malloc'd, taken; NULL: the transport's):
 * conf.set_url is called with it before each attempt. */
void clrmux_http_enqueue_url(struct clrmux_http *h, char *url, char *body, size_t len, size_t nspans);
/* Sends what is due, in order, for at most budget_ms (an attempt started is finished, its
 * timeout bounded by the budget unless budget_ms <= 0: the full timeout). Returns the
 * number of requests still queued. */
size_t clrmux_http_pump(struct clrmux_http *h, long budget_ms);
/* Sends everything queued within within_ms (waiting out the backoffs), then drops and counts
 * what is left, and logs the totals. The sender stays usable. */
void clrmux_http_finish(struct clrmux_http *h, long within_ms);
size_t clrmux_http_queued(const struct clrmux_http *h);
/* 1 when a request is queued and no backoff is running: clrmux_http_pump would send now. */
int clrmux_http_ready(const struct clrmux_http *h);
void clrmux_http_get_stats(const struct clrmux_http *h, struct clrmux_http_stats *s);
/* Frees the sender and what it still holds (not sent, not counted). */
void clrmux_http_free(struct clrmux_http *h);

/* ---- the libcurl transport ------------------------------------------------------------ */

struct clrmux_curl;

/* dlopens libcurl (`lib`, or NULL: "libcurl.so.4", then "libcurl-gnutls.so.4"), resolves
 * curl_global_init, curl_easy_init/setopt/perform/getinfo/cleanup, curl_slist_append and
 * curl_slist_free_all, and prepares one easy handle for POSTs to url (keep-alive between
 * requests, no signals, no proxy change, response bodies discarded). NULL with the reason
 * in err[errlen]; the path of the library loaded in loaded[loadedlen]. */
struct clrmux_curl *clrmux_curl_open(const char *lib, const char *url, char *loaded, size_t loadedlen, char *err,
                                     size_t errlen);
/* Points the handle at another URL (a clrmux_http_conf set_url). */
void clrmux_curl_set_url(void *ctx, const char *url);
/* The percent-decoding of the OpenTelemetry environment variables' members
 * (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES: the W3C Baggage encoding): the
 * spaces and tabs around s[0..n) trimmed, each %XX decoded, the result NUL-terminated in
 * out[outsz]. refuse_controls: a decoded CR, LF or NUL is an error (a header value). Returns
 * 0, or -1 on a bad escape, a refused character or a result that does not fit. */
int clrmux_otel_decode(const char *s, size_t n, char *out, size_t outsz, int refuse_controls);
/* Replaces the request headers: "Content-Type: <content_type>", then those of `headers`
 * (OTEL_EXPORTER_OTLP_HEADERS format: "key1=value1,key2=value2", percent-decoded; a member
 * without '=' or with CR/LF is skipped and counted; the skipped keys, never their values,
 * in bad[badlen]). Returns the number skipped, or -1 when out of memory (the old headers
 * stay). */
int clrmux_curl_set_headers(struct clrmux_curl *c, const char *content_type, const char *headers, char *bad,
                            size_t badlen);
/* A clrmux_http_post_fn (ctx: the struct clrmux_curl). 2xx OK; 429 and 5xx RETRY; any other
 * status FAIL; a transport error RETRY, except a malformed URL or an unsupported scheme. */
enum clrmux_http_result clrmux_curl_post(void *ctx, const char *body, size_t len, long timeout_ms, long *status,
                                         char *why, size_t whylen);
/* Releases the handle; libcurl itself stays loaded (never unloaded in a running process). */
void clrmux_curl_close(struct clrmux_curl *c);

/* The constants of curl's public ABI (curl/curl.h) that the transport uses, declared here so
 * that no libcurl header is needed to build; tests/unit checks them against curl.h. */
#define CLRMUX_CURLOPT_URL 10002
#define CLRMUX_CURLOPT_ERRORBUFFER 10010
#define CLRMUX_CURLOPT_WRITEFUNCTION 20011
#define CLRMUX_CURLOPT_POSTFIELDS 10015
#define CLRMUX_CURLOPT_USERAGENT 10018
#define CLRMUX_CURLOPT_HTTPHEADER 10023
#define CLRMUX_CURLOPT_POST 47
#define CLRMUX_CURLOPT_NOSIGNAL 99
#define CLRMUX_CURLOPT_POSTFIELDSIZE_LARGE 30120
#define CLRMUX_CURLOPT_TIMEOUT_MS 155
#define CLRMUX_CURLOPT_CONNECTTIMEOUT_MS 156
#define CLRMUX_CURLINFO_RESPONSE_CODE 0x200002
#define CLRMUX_CURL_GLOBAL_ALL 3
#define CLRMUX_CURL_ERROR_SIZE 256
#define CLRMUX_CURLE_OK 0
#define CLRMUX_CURLE_UNSUPPORTED_PROTOCOL 1
#define CLRMUX_CURLE_URL_MALFORMAT 3

#endif
