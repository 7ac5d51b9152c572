/* Unit tests for src/loader/check.c, clrmux_check_config (what `clrmux check` prints): every
 * problem reaches the report callback with the configuration's path and its line, from the
 * parser, from a library child that cannot be opened, and from the builtin tracer's own keys;
 * the result counts errors, warnings and children, and says where the tracer writes. Runs
 * under ASan/UBSan, and under Wine (make windows). Needs build/fake (CLRMUX_FAKE_DIR). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clrmux/clrmux.h"
#include "platform_fixture.h"

#define MAX_MSGS 64

struct seen {
    int n;
    int level[MAX_MSGS], line[MAX_MSGS];
    char file[MAX_MSGS][256], msg[MAX_MSGS][512];
};

static void record(int level, const char *file, int line, const char *message, void *ctx)
{
    struct seen *s = ctx;
    if (s->n == MAX_MSGS)
        return;
    s->level[s->n] = level;
    s->line[s->n] = line;
    snprintf(s->file[s->n], sizeof s->file[0], "%s", file);
    snprintf(s->msg[s->n], sizeof s->msg[0], "%s", message);
    s->n++;
}

/* index of the message at `line` containing `text`, or -1 */
static int find(const struct seen *s, int line, const char *text)
{
    for (int i = 0; i < s->n; i++)
        if (s->line[i] == line && strstr(s->msg[i], text))
            return i;
    return -1;
}

static void dump(const struct seen *s)
{
    for (int i = 0; i < s->n; i++)
        print_message("  %s:%d: level %d: %s\n", s->file[i], s->line[i], s->level[i], s->msg[i]);
}

static char *write_conf(const char *text)
{
    static char path[256];
    const char *t = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/clrmux-check-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* the fake child libraries' folder, absolute (the config file is in TMPDIR) */
static const char *fake_dir(void)
{
    static char abs[4096];
    const char *d = getenv("CLRMUX_FAKE_DIR");
    if (!realpath(d && *d ? d : "build/fake", abs))
        fail_msg("fake child libraries not found (CLRMUX_FAKE_DIR or build/fake); run `make all` first");
    return abs;
}

/* clrmux_check_config on a configuration file holding `text`: the messages go to *s, the
 * result to *res (the caller frees it); the return value is checked against the error count.
 * Returns the file's path (the caller unlinks it). */
static char *check_text(const char *text, struct seen *s, struct clrmux_check_result **res)
{
    char *path = write_conf(text);
    *res = calloc(1, sizeof **res);
    assert_non_null(*res);
    int rc = clrmux_check_config(path, record, s, *res);
    dump(s);
    assert_int_equal(rc, (*res)->errors);
    return path;
}

/* Every kind of problem, each with its line; a library child that answers counts as usable. */
static void test_problems_with_lines(void **state)
{
    (void)state;
    char text[4096];
    snprintf(text, sizeof text,
             "[loader]\n"                                  /* 1 */
             "log_level = loud\n"                          /* 2 */
             "[child missing]\n"                           /* 3 */
             "path = /nonexistent/libx.so\n"               /* 4 */
             "clsid = {12345678-1234-1234-1234-123456789ABC}\n" /* 5 */
             "[child noexport]\n"                          /* 6 */
             "path = %s/libnoexport" FAKE_EXT "\n"          /* 7 */
             "clsid = {12345678-1234-1234-1234-123456789ABC}\n" /* 8 */
             "junk line\n"                                 /* 9 */
             "[child rec]\n"                               /* 10 */
             "path = %s/librecorder" FAKE_EXT "\n"          /* 11 */
             "clsid = {A0000001-0000-0000-0000-000000000001}\n", /* 12 */
             fake_dir(), fake_dir());
    struct seen s = {0};
    struct clrmux_check_result *res;
    char *path = check_text(text, &s, &res);
    assert_int_equal(res->errors, 4);
    assert_int_equal(res->warnings, 0);
    assert_int_equal(res->active_children, 1);
    assert_true(find(&s, 2, "log_level 'loud'") >= 0);
    assert_true(find(&s, 3, "No such file or directory") >= 0);
    assert_true(find(&s, 6, "exports no DllGetClassObject") >= 0);
    int i = find(&s, 9, "malformed line");
    assert_true(i >= 0);
    assert_int_equal(s.level[i], 0);
    assert_string_equal(s.file[i], path);
    assert_true(find(&s, 10, "answers DllGetClassObject") >= 0);
    assert_string_equal(res->traces, "");
    assert_string_equal(res->profiles_dir, "");
    assert_string_equal(res->log_file, "");
    unlink(path);
    free(res);
}

/* The builtin tracer's own keys, with their lines, and where it writes. */
static void test_tracer_problems_with_lines(void **state)
{
    (void)state;
    struct seen s = {0};
    struct clrmux_check_result *res;
    char *path = check_text("[child tracer]\n"          /* 1 */
                            "builtin = tracer\n"        /* 2 */
                            "trace = nonsense\n"        /* 3 */
                            "trace = a!B.C::D\n"        /* 4 */
                            "output = spans-%p.jsonl\n", /* 5 */
                            &s, &res);
    assert_int_equal(res->errors, 1);
    assert_int_equal(res->warnings, 0);
    assert_int_equal(res->active_children, 1);
    int i = find(&s, 3, "bad trace target 'nonsense'");
    assert_true(i >= 0);
    assert_int_equal(s.level[i], 0);
    assert_string_equal(s.file[i], path);
    assert_true(strncmp(s.msg[i], "[child tracer]", 14) == 0); /* the "FILE:LINE: " prefix is taken off */
    assert_true(find(&s, 1, "builtin tracer") >= 0);
    /* the tracer's output, resolved against the file's folder */
    char want[512];
    snprintf(want, sizeof want, "%.*s/spans-%%p.jsonl", (int)(strrchr(path, '/') - path), path);
    assert_string_equal(res->traces, want);
    unlink(path);
    free(res);
}

/* A missing file: the parser's warning, then one error (the app would run unprofiled). */
static void test_missing_file(void **state)
{
    (void)state;
    struct seen s = {0};
    struct clrmux_check_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    int rc = clrmux_check_config("/nonexistent/loader.conf", record, &s, res);
    dump(&s);
    assert_int_equal(rc, 1);
    assert_int_equal(res->errors, 1);
    assert_int_equal(res->active_children, 0);
    assert_true(find(&s, 0, "cannot read /nonexistent/loader.conf") >= 0);
    assert_true(find(&s, 0, "would run unprofiled") >= 0);
    free(res);
}

/* Only disabled children: no error per child, but no child would load, which is an error. */
static void test_no_usable_child(void **state)
{
    (void)state;
    char *path = write_conf("[loader]\nlog_file = x-%p.log\n[child t]\nbuiltin = tracer\nenabled = false\n");
    struct seen s = {0};
    struct clrmux_check_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    assert_int_equal(clrmux_check_config(path, record, &s, res), 1);
    dump(&s);
    assert_int_equal(res->active_children, 0);
    assert_true(find(&s, 0, "no enabled child profiler would load") >= 0);
    assert_non_null(strstr(res->log_file, "/x-%p.log"));
    unlink(path);
    free(res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_problems_with_lines),
        cmocka_unit_test(test_tracer_problems_with_lines),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_no_usable_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
