/* Unit tests for the control channel's pure parts (src/control/ctl_proto.c, ctl_path.c) and
 * its reply when clrmux has not started (ctl_exec.c): the request parser's commands and
 * refusals, framing, the bounded reply buffer and JSON strings, the rate limit, the names. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_exec.h"
#include "control/ctl_path.h"
#include "control/ctl_proto.h"

static char err[600];

static struct clrmux_ctl_req parse_ok(const char *text)
{
    struct clrmux_ctl_req r;
    if (clrmux_ctl_parse(text, strlen(text), &r, err, sizeof err) != 0)
        fail_msg("'%s' refused: %s", text, err);
    return r;
}

static void parse_bad_n(const char *text, size_t len, const char *why)
{
    struct clrmux_ctl_req r;
    err[0] = 0;
    if (clrmux_ctl_parse(text, len, &r, err, sizeof err) == 0)
        fail_msg("'%.*s' accepted", (int)len, text);
    if (!strstr(err, why))
        fail_msg("'%.*s': message '%s' lacks '%s'", (int)len, text, err, why);
}

static void parse_bad(const char *text, const char *why) { parse_bad_n(text, strlen(text), why); }

static void test_commands(void **state)
{
    (void)state;
    struct clrmux_ctl_req r = parse_ok("status");
    assert_int_equal(r.op, CLRMUX_CTL_STATUS);
    assert_int_equal(r.json, 0);
    r = parse_ok("  status   --json \r");
    assert_int_equal(r.op, CLRMUX_CTL_STATUS);
    assert_int_equal(r.json, 1);
    r = parse_ok("trace add   System.Private.CoreLib!System.IO.Path::Combine(string, string)  ");
    assert_int_equal(r.op, CLRMUX_CTL_TRACE_ADD);
    assert_string_equal(r.arg, "System.Private.CoreLib!System.IO.Path::Combine(string, string)");
    r = parse_ok("trace\tremove a!B::C");
    assert_int_equal(r.op, CLRMUX_CTL_TRACE_REMOVE);
    assert_string_equal(r.arg, "a!B::C");
    r = parse_ok("trace list --json");
    assert_int_equal(r.op, CLRMUX_CTL_TRACE_LIST);
    assert_int_equal(r.json, 1);
    assert_int_equal(parse_ok("profile flush").op, CLRMUX_CTL_PROFILE_FLUSH);
    assert_int_equal(parse_ok("profile start").op, CLRMUX_CTL_PROFILE_START);
    assert_int_equal(parse_ok("profile stop").op, CLRMUX_CTL_PROFILE_STOP);
    r = parse_ok("log-level debug");
    assert_int_equal(r.op, CLRMUX_CTL_LOG_LEVEL);
    assert_string_equal(r.arg, "debug");
    r = parse_ok("trace add Ünïcode!Nß.Typ::Méthode"); /* UTF-8 names */
    assert_string_equal(r.arg, "Ünïcode!Nß.Typ::Méthode");
    assert_string_equal(clrmux_ctl_op_name(CLRMUX_CTL_TRACE_ADD), "trace add");
}

static void test_refusals(void **state)
{
    (void)state;
    parse_bad("", "empty request");
    parse_bad("   ", "empty request");
    parse_bad("reboot", "unknown command 'reboot'");
    parse_bad("averyveryveryveryveryveryverylongword", "unknown command");
    parse_bad("trace", "needs a subcommand");
    parse_bad("trace drop x!Y::Z", "unknown command 'trace drop'");
    parse_bad("trace add", "needs a target");
    parse_bad("trace add   ", "needs a target");
    parse_bad("profile", "needs a subcommand");
    parse_bad("profile flush now", "takes no argument");
    parse_bad("status --yaml", "only --json");
    parse_bad("status --json --json", "only --json");
    parse_bad("log-level", "needs a level");
    parse_bad("log-level debug please", "one word");
    parse_bad_n("status\0--json", 13, "control character 0x00 at byte 6");
    parse_bad("status\x1b[2J", "control character 0x1B");
    parse_bad("status\x7f", "control character 0x7F");
    parse_bad("trace add a!B::\xC3", "not UTF-8 at byte 15");
    parse_bad("trace add \xED\xA0\x80", "not UTF-8");    /* a surrogate */
    parse_bad("trace add \xC0\xAF", "not UTF-8");        /* an overlong '/' */
    parse_bad("trace add \xF4\x90\x80\x80", "not UTF-8"); /* above U+10FFFF */
    /* bounds: the line, the argument */
    char *big = malloc(CLRMUX_CTL_MAX_REQUEST + 10);
    memset(big, 'a', CLRMUX_CTL_MAX_REQUEST + 9);
    memcpy(big, "trace add ", 10);
    parse_bad_n(big, CLRMUX_CTL_MAX_REQUEST, "longer than 4095 bytes");
    parse_bad_n(big, CLRMUX_CTL_MAX_ARG + 20, "argument longer than 1023 bytes");
    free(big);
}

static void test_framing(void **state)
{
    (void)state;
    assert_int_equal(clrmux_ctl_line("status\n", 7), 6);
    assert_int_equal(clrmux_ctl_line("status", 6), -1);
    assert_int_equal(clrmux_ctl_line("a\nb\n", 4), 1);
    char *buf = malloc(CLRMUX_CTL_MAX_REQUEST + 1);
    memset(buf, 'x', CLRMUX_CTL_MAX_REQUEST + 1);
    assert_int_equal(clrmux_ctl_line(buf, CLRMUX_CTL_MAX_REQUEST - 1), -1);
    assert_int_equal(clrmux_ctl_line(buf, CLRMUX_CTL_MAX_REQUEST), -2);
    buf[CLRMUX_CTL_MAX_REQUEST - 1] = '\n'; /* a line of 4095 bytes and its LF: the most */
    assert_int_equal(clrmux_ctl_line(buf, CLRMUX_CTL_MAX_REQUEST + 1), CLRMUX_CTL_MAX_REQUEST - 1);
    free(buf);
}

static void test_out(void **state)
{
    (void)state;
    char b[16];
    struct clrmux_out o;
    clrmux_out_init(&o, b, sizeof b);
    clrmux_out_printf(&o, "%s", "0123456789");
    assert_int_equal(o.truncated, 0);
    clrmux_out_printf(&o, "%s", "abcdefghij");
    assert_int_equal(o.truncated, 1);
    assert_int_equal(o.len, 15);
    assert_string_equal(b, "0123456789abcde");
    clrmux_out_printf(&o, "more");
    assert_int_equal(o.len, 15);

    char j[128];
    clrmux_out_init(&o, j, sizeof j);
    clrmux_out_json_str(&o, "a\"b\\c\n\x01\xC3\xA9\xFF!");
    assert_string_equal(j, "\"a\\\"b\\\\c\\u000a\\u0001\xC3\xA9\xEF\xBF\xBD!\"");
    assert_int_equal(o.truncated, 0);
    clrmux_out_init(&o, j, 4);
    clrmux_out_json_str(&o, "abcdef");
    assert_int_equal(o.truncated, 1);
    assert_int_equal(strlen(j), 3);
}

static void test_rate(void **state)
{
    (void)state;
    struct clrmux_ctl_rate r;
    clrmux_ctl_rate_init(&r, 3, 10, 0);
    assert_true(clrmux_ctl_rate_take(&r, 0));
    assert_true(clrmux_ctl_rate_take(&r, 0));
    assert_true(clrmux_ctl_rate_take(&r, 0));
    assert_false(clrmux_ctl_rate_take(&r, 0));              /* the burst is spent */
    assert_false(clrmux_ctl_rate_take(&r, 50000000));       /* 50 ms: half a token */
    assert_true(clrmux_ctl_rate_take(&r, 100000000));       /* 100 ms: one */
    assert_false(clrmux_ctl_rate_take(&r, 100000000));
    assert_true(clrmux_ctl_rate_take(&r, 10000000000ll));   /* 10 s later: the burst again, no more */
    assert_true(clrmux_ctl_rate_take(&r, 10000000000ll));
    assert_true(clrmux_ctl_rate_take(&r, 10000000000ll));
    assert_false(clrmux_ctl_rate_take(&r, 10000000000ll));
}

static void test_paths(void **state)
{
    (void)state;
    char b[64], d[64], n[32];
    assert_int_equal(clrmux_ctl_base(NULL, NULL, b, sizeof b), 0);
    assert_string_equal(b, "/tmp");
    assert_int_equal(clrmux_ctl_base("", "/var/tmp//", b, sizeof b), 0);
    assert_string_equal(b, "/var/tmp");
    assert_int_equal(clrmux_ctl_base("/run/ctl", "/var/tmp", b, sizeof b), 0);
    assert_string_equal(b, "/run/ctl");
    assert_int_equal(clrmux_ctl_base("relative", "also", b, sizeof b), 0); /* relative: ignored */
    assert_string_equal(b, "/tmp");
    assert_int_equal(clrmux_ctl_base("/", NULL, b, sizeof b), 0);
    assert_string_equal(b, "/");
    assert_int_equal(clrmux_ctl_dir(b, 0, d, sizeof d), 0);
    assert_string_equal(d, "/clrmux-0");
    assert_int_equal(clrmux_ctl_dir("/tmp", 1000, d, sizeof d), 0);
    assert_string_equal(d, "/tmp/clrmux-1000");
    assert_int_equal(clrmux_ctl_sock_name(4194304, n, sizeof n), 0);
    assert_string_equal(n, "ctl-4194304.sock");
    assert_int_equal(clrmux_ctl_pipe_name(77, n, sizeof n), 0);
    assert_string_equal(n, "\\\\.\\pipe\\clrmux-ctl-77");
    assert_int_equal(clrmux_ctl_dir("/a-very-long-folder-name-that-does-not-fit-in-sixteen", 1, d, 16), -1);
    assert_int_equal(clrmux_ctl_base("/0123456789abcdef", NULL, b, 8), -1);
}

/* No mux in this process: every well-formed command gets an error, nothing runs */
static void test_serve_without_clrmux(void **state)
{
    (void)state;
    char buf[256];
    struct clrmux_out o;
    int ok = 1;
    clrmux_out_init(&o, buf, sizeof buf);
    clrmux_ctl_serve("status", 6, &o, &ok);
    assert_int_equal(ok, 0);
    assert_string_equal(buf, "error: clrmux has not started in this process\n");
    clrmux_out_init(&o, buf, sizeof buf);
    clrmux_ctl_serve("bogus", 5, &o, &ok);
    assert_int_equal(ok, 0);
    assert_non_null(strstr(buf, "error: unknown command 'bogus'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands),     cmocka_unit_test(test_refusals), cmocka_unit_test(test_framing),
        cmocka_unit_test(test_out),          cmocka_unit_test(test_rate),     cmocka_unit_test(test_paths),
        cmocka_unit_test(test_serve_without_clrmux),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
