/* Unit tests for src/tracer/otlp_http.c: the OTLP/HTTP sender's queue, order, retries with
 * exponential backoff, bounded attempts, drop-oldest when full, the bounded finish, the log
 * lines (with a fake transport and a fake clock); and the libcurl transport against a
 * one-shot HTTP server on 127.0.0.1 (when libcurl.so.4 is installed). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "tracer/otlp_http.h"

#if __has_include(<curl/curl.h>)
#include <curl/curl.h>
/* the constants otlp_http.h declares are curl's */
_Static_assert(CLRMUX_CURLOPT_URL == CURLOPT_URL, "CURLOPT_URL");
_Static_assert(CLRMUX_CURLOPT_ERRORBUFFER == CURLOPT_ERRORBUFFER, "CURLOPT_ERRORBUFFER");
_Static_assert(CLRMUX_CURLOPT_WRITEFUNCTION == CURLOPT_WRITEFUNCTION, "CURLOPT_WRITEFUNCTION");
_Static_assert(CLRMUX_CURLOPT_POSTFIELDS == CURLOPT_POSTFIELDS, "CURLOPT_POSTFIELDS");
_Static_assert(CLRMUX_CURLOPT_USERAGENT == CURLOPT_USERAGENT, "CURLOPT_USERAGENT");
_Static_assert(CLRMUX_CURLOPT_HTTPHEADER == CURLOPT_HTTPHEADER, "CURLOPT_HTTPHEADER");
_Static_assert(CLRMUX_CURLOPT_POST == CURLOPT_POST, "CURLOPT_POST");
_Static_assert(CLRMUX_CURLOPT_NOSIGNAL == CURLOPT_NOSIGNAL, "CURLOPT_NOSIGNAL");
_Static_assert(CLRMUX_CURLOPT_POSTFIELDSIZE_LARGE == CURLOPT_POSTFIELDSIZE_LARGE, "CURLOPT_POSTFIELDSIZE_LARGE");
_Static_assert(CLRMUX_CURLOPT_TIMEOUT_MS == CURLOPT_TIMEOUT_MS, "CURLOPT_TIMEOUT_MS");
_Static_assert(CLRMUX_CURLOPT_CONNECTTIMEOUT_MS == CURLOPT_CONNECTTIMEOUT_MS, "CURLOPT_CONNECTTIMEOUT_MS");
_Static_assert(CLRMUX_CURLINFO_RESPONSE_CODE == CURLINFO_RESPONSE_CODE, "CURLINFO_RESPONSE_CODE");
_Static_assert(CLRMUX_CURL_GLOBAL_ALL == CURL_GLOBAL_ALL, "CURL_GLOBAL_ALL");
_Static_assert(CLRMUX_CURL_ERROR_SIZE == CURL_ERROR_SIZE, "CURL_ERROR_SIZE");
_Static_assert(CLRMUX_CURLE_OK == CURLE_OK, "CURLE_OK");
_Static_assert(CLRMUX_CURLE_UNSUPPORTED_PROTOCOL == CURLE_UNSUPPORTED_PROTOCOL, "CURLE_UNSUPPORTED_PROTOCOL");
_Static_assert(CLRMUX_CURLE_URL_MALFORMAT == CURLE_URL_MALFORMAT, "CURLE_URL_MALFORMAT");
_Static_assert(sizeof(curl_off_t) == sizeof(int64_t), "curl_off_t");
#endif

/* ---- fake clock, fake transport, captured log ------------------------------------------ */

static int64_t clock_ms;
static int64_t fake_now(void) { return clock_ms; }
static void fake_sleep(long ms) { clock_ms += ms; }

#define MAX_POSTS 64
static struct {
    enum clrmux_http_result script[MAX_POSTS]; /* the answer to each post, in order (default OK) */
    int nscript;
    int n;                                     /* posts made */
    char bodies[MAX_POSTS][32];
    int64_t at[MAX_POSTS];
    long timeout[MAX_POSTS];
    long cost_ms;                              /* each post advances the clock */
} fake;

static enum clrmux_http_result fake_post(void *ctx, const char *body, size_t len, long timeout_ms, long *status,
                                         char *why, size_t whylen)
{
    (void)ctx;
    int i = fake.n++;
    assert_true(i < MAX_POSTS);
    snprintf(fake.bodies[i], sizeof fake.bodies[i], "%.*s", (int)len, body);
    fake.at[i] = clock_ms;
    fake.timeout[i] = timeout_ms;
    clock_ms += fake.cost_ms;
    enum clrmux_http_result r = i < fake.nscript ? fake.script[i] : CLRMUX_HTTP_OK;
    *status = r == CLRMUX_HTTP_OK ? 200 : r == CLRMUX_HTTP_RETRY ? 503 : 400;
    if (r != CLRMUX_HTTP_OK)
        snprintf(why, whylen, "HTTP %ld", *status);
    return r;
}

static char logbuf[16384];
static void sink(int level, const char *line, void *ctx)
{
    (void)ctx;
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "%-5s %s", clrmux_log_level_name(level), line);
}

static struct clrmux_http *make(size_t queue, int attempts)
{
    memset(&fake, 0, sizeof fake);
    clock_ms = 1000000;
    logbuf[0] = 0;
    clrmux_log_set_sink(sink, NULL);
    struct clrmux_http_conf c = {
        .endpoint = "http://127.0.0.1:4318/v1/traces",
        .max_queue = queue,
        .max_attempts = attempts,
        .backoff_ms = 200,
        .backoff_max_ms = 1000,
        .timeout_ms = 5000,
        .post = fake_post,
        .now_ms = fake_now,
        .sleep_ms = fake_sleep,
    };
    struct clrmux_http *h = clrmux_http_new(&c);
    assert_non_null(h);
    return h;
}

static void done(struct clrmux_http *h)
{
    clrmux_http_free(h);
    clrmux_log_set_sink(NULL, NULL);
}

static void enq(struct clrmux_http *h, const char *body, size_t nspans)
{
    char *b = strdup(body);
    assert_non_null(b);
    clrmux_http_enqueue(h, b, strlen(b), nspans);
}

/* ---- the sender ------------------------------------------------------------------------- */

static void test_sends_in_order(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    enq(h, "a", 1);
    enq(h, "b", 2);
    enq(h, "c", 3);
    assert_int_equal(clrmux_http_queued(h), 3);
    assert_true(clrmux_http_ready(h));
    assert_int_equal(clrmux_http_pump(h, 0), 0);
    assert_int_equal(fake.n, 3);
    assert_string_equal(fake.bodies[0], "a");
    assert_string_equal(fake.bodies[1], "b");
    assert_string_equal(fake.bodies[2], "c");
    assert_int_equal(fake.timeout[0], 5000);
    assert_false(clrmux_http_ready(h));
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.sent, 3);
    assert_int_equal(s.sent_spans, 6);
    assert_int_equal(s.attempts, 3);
    assert_int_equal(s.failed_attempts, 0);
    assert_int_equal(s.queued_spans, 6);
    assert_string_equal(logbuf, ""); /* nothing to say when all goes well */
    done(h);
}

static void test_retry_backoff(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    fake.script[0] = fake.script[1] = fake.script[2] = CLRMUX_HTTP_RETRY;
    fake.nscript = 3;
    int64_t t0 = clock_ms;
    enq(h, "a", 10);
    enq(h, "b", 20);
    assert_int_equal(clrmux_http_pump(h, 0), 2); /* attempt 1 of a fails: everything waits 200 ms */
    assert_int_equal(fake.n, 1);
    assert_false(clrmux_http_ready(h));
    clock_ms = t0 + 199;
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 1);
    clock_ms = t0 + 200;
    clrmux_http_pump(h, 0); /* attempt 2 fails: 400 ms */
    assert_int_equal(fake.n, 2);
    clock_ms = t0 + 599;
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 2);
    clock_ms = t0 + 600;
    clrmux_http_pump(h, 0); /* attempt 3 fails: 800 ms */
    clock_ms = t0 + 1399;
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 3);
    clock_ms = t0 + 1400;
    assert_int_equal(clrmux_http_pump(h, 0), 0); /* attempt 4 of a and b's first succeed */
    assert_int_equal(fake.n, 5);
    assert_string_equal(fake.bodies[3], "a");
    assert_string_equal(fake.bodies[4], "b");
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.sent, 2);
    assert_int_equal(s.sent_spans, 30);
    assert_int_equal(s.attempts, 5);
    assert_int_equal(s.failed_attempts, 3);
    assert_int_equal(s.failed + s.full + s.unsent, 0);
    /* the first failure is a warning, the next ones are not repeated at info level, the
     * recovery is said */
    assert_non_null(strstr(logbuf, "WARN  tracer: OTLP/HTTP: POST of 10 span(s) to http://127.0.0.1:4318/v1/traces "
                                   "failed: HTTP 503; attempt 1 of 5, retrying in 200 ms"));
    assert_null(strstr(logbuf, "attempt 2 of 5"));
    assert_non_null(strstr(logbuf, "accepted a request again (after 3 failed attempt(s))"));
    /* after a success the backoff starts again at 200 ms */
    fake.script[5] = CLRMUX_HTTP_RETRY;
    fake.nscript = 6;
    enq(h, "c", 1);
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 6);
    clock_ms += 200;
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 7);
    assert_int_equal(clrmux_http_queued(h), 0);
    done(h);
}

static void test_bounded_attempts(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 3);
    for (int i = 0; i < MAX_POSTS; i++)
        fake.script[i] = CLRMUX_HTTP_RETRY;
    fake.nscript = MAX_POSTS;
    enq(h, "a", 7);
    enq(h, "b", 1);
    int64_t t0 = clock_ms;
    for (int i = 0; i < 40 && fake.n < 3; i++) {
        clrmux_http_pump(h, 0);
        clock_ms += 100;
    }
    assert_int_equal(fake.n, 3); /* at t0, t0+200, t0+600 (backoff capped at 1000 later) */
    assert_int_equal(fake.at[1] - t0, 200);
    assert_int_equal(fake.at[2] - t0, 600);
    assert_int_equal(clrmux_http_queued(h), 1); /* a dropped after 3 attempts */
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.failed, 1);
    assert_int_equal(s.failed_spans, 7);
    assert_non_null(strstr(logbuf, "1 request(s) (7 span(s)) to http://127.0.0.1:4318/v1/traces dropped, not "
                                   "accepted (at most 3 attempts each; last: HTTP 503)"));
    /* the endpoint is still down: b waits the next backoff (800 ms), then 1000 (the cap) */
    int64_t t1 = fake.at[2];
    for (int i = 0; i < 40 && fake.n < 5; i++) {
        clrmux_http_pump(h, 0);
        clock_ms += 100;
    }
    assert_string_equal(fake.bodies[3], "b");
    assert_int_equal(fake.at[3] - t1, 800);
    assert_int_equal(fake.at[4] - fake.at[3], 1000);
    done(h);
}

static void test_rejected_not_retried(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    fake.script[0] = CLRMUX_HTTP_FAIL; /* e.g. HTTP 400: the collector will never take it */
    fake.nscript = 1;
    enq(h, "bad", 4);
    enq(h, "good", 5);
    assert_int_equal(clrmux_http_pump(h, 0), 0); /* no wait after a rejection */
    assert_int_equal(fake.n, 2);
    assert_string_equal(fake.bodies[1], "good");
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.failed, 1);
    assert_int_equal(s.failed_spans, 4);
    assert_int_equal(s.sent_spans, 5);
    assert_non_null(strstr(logbuf, "failed: HTTP 400; attempt 1 of 5, dropped"));
    done(h);
}

static void test_full_queue_drops_oldest(void **state)
{
    (void)state;
    struct clrmux_http *h = make(3, 5);
    enq(h, "1", 1);
    enq(h, "2", 2);
    enq(h, "3", 3);
    enq(h, "4", 4); /* drops 1 */
    enq(h, "5", 5); /* drops 2 */
    assert_int_equal(clrmux_http_queued(h), 3);
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.full, 2);
    assert_int_equal(s.full_spans, 3);
    assert_int_equal(s.queued_spans, 15);
    /* the first drop is logged at once, the next within 10 s is kept for later */
    assert_non_null(strstr(logbuf, "1 request(s) (1 span(s)) dropped: the queue of 3 request(s) to "
                                   "http://127.0.0.1:4318/v1/traces was full (the oldest are dropped)"));
    assert_null(strstr(logbuf, "(2 span(s)) dropped: the queue"));
    clrmux_http_pump(h, 0);
    assert_int_equal(fake.n, 3);
    assert_string_equal(fake.bodies[0], "3");
    assert_string_equal(fake.bodies[1], "4");
    assert_string_equal(fake.bodies[2], "5");
    clock_ms += 10000;
    clrmux_http_pump(h, 0);
    assert_non_null(strstr(logbuf, "1 request(s) (2 span(s)) dropped: the queue"));
    done(h);
}

static void test_pump_budget(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    fake.cost_ms = 30;
    for (int i = 0; i < 5; i++)
        enq(h, "x", 1);
    assert_int_equal(clrmux_http_pump(h, 50), 3); /* starts at 0 and 30; not at 60 */
    assert_int_equal(fake.n, 2);
    assert_true(clrmux_http_ready(h));
    assert_int_equal(clrmux_http_pump(h, 0), 0);
    assert_int_equal(fake.n, 5);
    done(h);
}

static void test_finish_bounded(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    for (int i = 0; i < MAX_POSTS; i++)
        fake.script[i] = CLRMUX_HTTP_RETRY;
    fake.nscript = MAX_POSTS;
    enq(h, "a", 100);
    enq(h, "b", 200);
    int64_t t0 = clock_ms;
    clrmux_http_finish(h, 1000); /* attempts at 0, 200, 600; the next (1400) is too late */
    assert_int_equal(fake.n, 3);
    assert_int_equal(fake.at[2] - t0, 600);
    assert_int_equal(fake.timeout[2], 400); /* an attempt's timeout ends with the time left */
    assert_int_equal(clock_ms - t0, 1000);
    assert_int_equal(clrmux_http_queued(h), 0);
    struct clrmux_http_stats s;
    clrmux_http_get_stats(h, &s);
    assert_int_equal(s.unsent, 2);
    assert_int_equal(s.unsent_spans, 300);
    assert_non_null(strstr(logbuf, "2 request(s) (300 span(s)) to http://127.0.0.1:4318/v1/traces dropped, still "
                                   "queued when the time to send them at shutdown ran out"));
    assert_non_null(strstr(logbuf, "WARN  tracer: OTLP/HTTP to http://127.0.0.1:4318/v1/traces: 0 span(s) sent in 0 "
                                   "request(s), 3 attempt(s) of which 3 failed; 300 span(s) dropped in 2 request(s) "
                                   "(0 queue full, 0 not accepted, 2 unsent at shutdown)"));
    done(h);
}

static void test_finish_sends_all(void **state)
{
    (void)state;
    struct clrmux_http *h = make(8, 5);
    fake.script[0] = CLRMUX_HTTP_RETRY;
    fake.nscript = 1;
    enq(h, "a", 1);
    enq(h, "b", 1);
    clrmux_http_finish(h, 3000);
    assert_int_equal(fake.n, 3);
    assert_non_null(strstr(logbuf, "INFO  tracer: OTLP/HTTP to http://127.0.0.1:4318/v1/traces: 2 span(s) sent in 2 "
                                   "request(s), 3 attempt(s) of which 1 failed; 0 span(s) dropped"));
    done(h);
}

/* ---- the libcurl transport -------------------------------------------------------------- */

struct server {
    int fd, port, status;
    char request[8192];
    size_t len;
};

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Accepts one connection, reads one request (headers and Content-Length body), answers
 * `status` and closes. */
static void *serve_one(void *arg)
{
    struct server *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    for (;;) {
        ssize_t n = read(c, s->request + s->len, sizeof s->request - 1 - s->len);
        if (n <= 0)
            break;
        s->len += (size_t)n;
        s->request[s->len] = 0;
        char *end = strstr(s->request, "\r\n\r\n");
        const char *cl = strstr(s->request, "Content-Length: ");
        if (end && cl && s->len >= (size_t)(end + 4 - s->request) + strtoul(cl + 16, NULL, 10))
            break;
    }
    char resp[128];
    int n = snprintf(resp, sizeof resp, "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                     s->status);
    if (write(c, resp, (size_t)n) != n)
        s->status = -1;
    close(c);
    return NULL;
}

static struct clrmux_curl *open_curl(const char *url)
{
    char loaded[512], err[512];
    struct clrmux_curl *c = clrmux_curl_open(NULL, url, loaded, sizeof loaded, err, sizeof err);
    if (!c)
        print_message("libcurl not usable here (%s): transport test skipped\n", err);
    return c;
}

static enum clrmux_http_result post_to(int status, struct server *s, long *code, char *why, size_t whylen)
{
    memset(s, 0, sizeof *s);
    s->status = status;
    s->fd = listen_loopback(&s->port);
    assert_int_equal(listen(s->fd, 1), 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/traces", s->port);
    struct clrmux_curl *c = open_curl(url);
    if (!c) {
        close(s->fd);
        return (enum clrmux_http_result)-1;
    }
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, serve_one, s), 0);
    const char *body = "{\"resourceSpans\":[]}";
    enum clrmux_http_result r = clrmux_curl_post(c, body, strlen(body), 5000, code, why, whylen);
    pthread_join(th, NULL);
    close(s->fd);
    clrmux_curl_close(c);
    return r;
}

static void test_curl_post(void **state)
{
    (void)state;
    struct server s;
    long code = -1;
    char why[256] = "";
    enum clrmux_http_result r = post_to(200, &s, &code, why, sizeof why);
    if ((int)r == -1)
        skip();
    assert_int_equal(r, CLRMUX_HTTP_OK);
    assert_int_equal(code, 200);
    assert_non_null(strstr(s.request, "POST /v1/traces HTTP/1.1\r\n"));
    assert_non_null(strstr(s.request, "\r\nContent-Type: application/json\r\n"));
    assert_non_null(strstr(s.request, "\r\nContent-Length: 20\r\n"));
    assert_null(strstr(s.request, "Expect:"));
    assert_non_null(strstr(s.request, "\r\n\r\n{\"resourceSpans\":[]}"));

    assert_int_equal(post_to(503, &s, &code, why, sizeof why), CLRMUX_HTTP_RETRY);
    assert_string_equal(why, "HTTP 503");
    assert_int_equal(post_to(429, &s, &code, why, sizeof why), CLRMUX_HTTP_RETRY);
    assert_int_equal(post_to(400, &s, &code, why, sizeof why), CLRMUX_HTTP_FAIL);
    assert_int_equal(code, 400);
}

static void test_curl_nothing_listening(void **state)
{
    (void)state;
    int port;
    int fd = listen_loopback(&port); /* bound, not listening: connections are refused */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/traces", port);
    struct clrmux_curl *c = open_curl(url);
    if (!c) {
        close(fd);
        skip();
    }
    long code = -1;
    char why[256] = "";
    assert_int_equal(clrmux_curl_post(c, "{}", 2, 2000, &code, why, sizeof why), CLRMUX_HTTP_RETRY);
    assert_int_equal(code, 0);
    assert_non_null(strstr(why, "(CURLcode 7)"));
    clrmux_curl_close(c);
    close(fd);
}

static void test_curl_missing(void **state)
{
    (void)state;
    char loaded[64], err[512];
    assert_null(clrmux_curl_open("/nonexistent/libcurl.so.4", "http://127.0.0.1:1/", loaded, sizeof loaded, err,
                                 sizeof err));
    assert_non_null(strstr(err, "cannot load libcurl (/nonexistent/libcurl.so.4: cannot open shared object file"));
}

/* The percent-decoding shared by OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES. */
static void test_otel_decode(void **state)
{
    (void)state;
    char out[16];
    const char *in = " a%20b%2C\t";
    assert_int_equal(clrmux_otel_decode(in, strlen(in), out, sizeof out, 1), 0);
    assert_string_equal(out, "a b,");
    assert_int_equal(clrmux_otel_decode("%zz", 3, out, sizeof out, 0), -1); /* bad escape */
    assert_int_equal(clrmux_otel_decode("%4", 2, out, sizeof out, 0), -1);  /* cut short */
    assert_int_equal(clrmux_otel_decode("0123456789abcdef", 16, out, sizeof out, 0), -1); /* no room for NUL */
    /* a header refuses CR, LF and NUL; a resource attribute takes them */
    assert_int_equal(clrmux_otel_decode("x%0D%0Ay", 8, out, sizeof out, 1), -1);
    assert_int_equal(clrmux_otel_decode("x%00", 4, out, sizeof out, 1), -1);
    assert_int_equal(clrmux_otel_decode("x%0Ay", 5, out, sizeof out, 0), 0);
    assert_string_equal(out, "x\ny");
}

int main(void)
{
    if (!getenv("CLRMUX_TEST_VERBOSE"))
        clrmux_log_open("/dev/null"); /* the lines are checked through the sink */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sends_in_order),
        cmocka_unit_test(test_retry_backoff),
        cmocka_unit_test(test_bounded_attempts),
        cmocka_unit_test(test_rejected_not_retried),
        cmocka_unit_test(test_full_queue_drops_oldest),
        cmocka_unit_test(test_pump_budget),
        cmocka_unit_test(test_finish_bounded),
        cmocka_unit_test(test_finish_sends_all),
        cmocka_unit_test(test_curl_post),
        cmocka_unit_test(test_curl_nothing_listening),
        cmocka_unit_test(test_curl_missing),
        cmocka_unit_test(test_otel_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
