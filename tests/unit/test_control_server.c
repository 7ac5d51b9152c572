/* The control channel's Unix socket server (src/control/ctl_unix.c) in this process, without
 * a runtime: its folder (made 0700, an existing one's mode narrowed, a dead process's socket
 * removed), the socket (0600), one request per connection, and what a bad client gets:
 * garbage, an oversize line, a slow client (2 s), a client that leaves, more than the rate
 * allows; a reply once a (fake) mux is there; the socket removed at shutdown. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "control/ctl_server.h"
#include "loader/mux.h"

static char g_base[40], g_dir[64], g_sock[100];

static int dial(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_sock);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Sends len bytes, reads the whole reply into out (NUL-terminated). */
static void ask_n(const char *req, size_t len, char *out, size_t outsz)
{
    int fd = dial();
    assert_true(fd >= 0);
    /* (a refused client may find the connection closed before it sends: not checked here) */
    if (len && send(fd, req, len, MSG_NOSIGNAL) == (ssize_t)len)
        shutdown(fd, SHUT_WR); /* the request ends here, as `clrmux ctl` ends it */
    size_t got = 0;
    ssize_t k;
    while (got + 1 < outsz && (k = recv(fd, out + got, outsz - 1 - got, 0)) > 0)
        got += (size_t)k;
    out[got] = 0;
    close(fd);
}

static void ask(const char *req, char *out, size_t outsz) { ask_n(req, strlen(req), out, outsz); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_base, sizeof g_base, "/tmp/clrmux-ctltest.XXXXXX");
    assert_non_null(mkdtemp(g_base));
    setenv("CLRMUX_CONTROL_DIR", g_base, 1);
    snprintf(g_dir, sizeof g_dir, "%s/clrmux-%lu", g_base, (unsigned long)geteuid());
    snprintf(g_sock, sizeof g_sock, "%s/ctl-%ld.sock", g_dir, (long)getpid());
    /* a folder left too open (it is narrowed), holding a dead process's socket (removed) */
    assert_int_equal(mkdir(g_dir, 0700), 0);
    assert_int_equal(chmod(g_dir, 0755), 0);
    char stale[100];
    snprintf(stale, sizeof stale, "%s/ctl-999999999.sock", g_dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", stale);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd); /* the file stays; nothing listens */
    assert_int_equal(clrmux_ctl_test_start(), 0);
    struct stat st;
    assert_int_equal(lstat(stale, &st), -1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrmux_ctl_shutdown();
    struct stat st;
    assert_int_equal(lstat(g_sock, &st), -1); /* removed */
    assert_int_equal(dial(), -1);
    rmdir(g_dir);
    rmdir(g_base);
    return 0;
}

static void test_folder_and_socket(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(lstat(g_dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(lstat(g_sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_without_mux(void **state)
{
    (void)state;
    char r[4096];
    ask("status\n", r, sizeof r);
    assert_string_equal(r, "error: clrmux has not started in this process\n");
    ask("status", r, sizeof r); /* no LF: the client's half-close ends the request */
    assert_string_equal(r, "error: clrmux has not started in this process\n");
}

static void test_bad_clients(void **state)
{
    (void)state;
    char r[4096];
    ask_n("sta\x01tus\n", 8, r, sizeof r);
    assert_non_null(strstr(r, "error: control character 0x01 at byte 3"));
    ask("\xff\xfe\n", r, sizeof r);
    assert_non_null(strstr(r, "error: not UTF-8"));
    char *big = malloc(5000);
    memset(big, 'a', 5000);
    ask_n(big, 5000, r, sizeof r);
    assert_string_equal(r, "error: request longer than 4095 bytes\n");
    free(big);
    /* a slow client: part of a request, then nothing */
    int fd = dial();
    assert_true(fd >= 0);
    assert_int_equal(send(fd, "sta", 3, MSG_NOSIGNAL), 3);
    ssize_t k = recv(fd, r, sizeof r - 1, 0);
    assert_true(k > 0);
    r[k] = 0;
    assert_string_equal(r, "error: no complete request within 2 s\n");
    close(fd);
    /* clients that leave: before sending, and before reading the reply */
    fd = dial();
    close(fd);
    fd = dial();
    assert_int_equal(send(fd, "status --json\n", 14, MSG_NOSIGNAL), 14);
    close(fd);
    ask("status\n", r, sizeof r); /* served as before */
    assert_string_equal(r, "error: clrmux has not started in this process\n");
}

static void test_rate(void **state)
{
    (void)state;
    sleep_ms(2100); /* the bucket full again (10 a second, 20 at most) */
    char r[4096];
    int busy = 0, served = 0;
    for (int i = 0; i < 40; i++) {
        ask("status\n", r, sizeof r);
        if (!strncmp(r, "error: busy", 11))
            busy++;
        else if (!strcmp(r, "error: clrmux has not started in this process\n"))
            served++;
    }
    assert_true(served >= 20 && served <= 30); /* the burst, and what refilled meanwhile */
    assert_int_equal(busy + served, 40);
    sleep_ms(300);
    ask("status\n", r, sizeof r);
    assert_string_equal(r, "error: clrmux has not started in this process\n");
}

static void test_with_mux(void **state)
{
    (void)state;
    sleep_ms(2100);
    struct clrmux_mux *m = calloc(1, sizeof *m);
    m->info_version = 11;
    snprintf(m->runtime_version.text, sizeof m->runtime_version.text, "10.0.test");
    snprintf(m->cfg.path, sizeof m->cfg.path, "/etc/clrmux/loader.conf");
    clrmux_the_mux = m;
    static char r[65536];
    ask("status\n", r, sizeof r);
    assert_true(!strncmp(r, "ok\nclrmux ", 10));
    assert_non_null(strstr(r, ".NET 10.0.test, ICorProfilerInfo11"));
    assert_non_null(strstr(r, "config  /etc/clrmux/loader.conf"));
    ask("status --json\n", r, sizeof r);
    assert_true(!strncmp(r, "ok\n{\"pid\":", 10));
    assert_non_null(strstr(r, "\"children\":[],\"tracer\":null,\"profilers\":[]}"));
    ask("trace list\n", r, sizeof r);
    assert_non_null(strstr(r, "error: no built-in tracer in this process"));
    ask("trace add a!B::C\n", r, sizeof r);
    assert_non_null(strstr(r, "error: no built-in tracer in this process"));
    ask("profile flush\n", r, sizeof r);
    assert_non_null(strstr(r, "error: no built-in profiler in this process"));
    int level = clrmux_log_get_level();
    ask("log-level trace\n", r, sizeof r);
    assert_string_equal(r, "ok\nlog level TRACE (was INFO)\n");
    assert_int_equal(clrmux_log_get_level(), CLRMUX_LOG_TRACE);
    ask("log-level loud\n", r, sizeof r);
    assert_non_null(strstr(r, "error: log level 'loud' is not one of"));
    clrmux_log_set_level(level);
    atomic_store(&m->initializing, 1);
    ask("status\n", r, sizeof r);
    assert_non_null(strstr(r, "error: clrmux is still starting"));
    clrmux_the_mux = NULL;
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_and_socket), cmocka_unit_test(test_without_mux), cmocka_unit_test(test_bad_clients),
        cmocka_unit_test(test_rate),              cmocka_unit_test(test_with_mux),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
