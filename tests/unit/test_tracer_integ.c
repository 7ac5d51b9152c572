/* Unit tests for src/tracer/integ.c: the definition parser (file:line errors, what a bad line
 * or definition leaves), the shipped definitions, the attach table and the span record a call
 * with attributes becomes (read back with xspan.c's parser). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "tracer/integ.h"
#include "tracer/xspan.h"

static char logged[8192];
static void sink(int level, const char *line, void *ctx)
{
    (void)level;
    (void)ctx;
    strncat(logged, line, sizeof logged - strlen(logged) - 2);
    strcat(logged, "\n");
}

struct added {
    int n;
    char text[64][512];
    int integ[64], line[64];
};
static int add(void *ctx, const char *target, int integ, const char *file, int line, char *err, size_t errlen)
{
    struct added *a = ctx;
    (void)file;
    if (strstr(target, "!") == NULL) {
        snprintf(err, errlen, "bad target '%s'", target);
        return -1;
    }
    snprintf(a->text[a->n], sizeof a->text[0], "%s", target);
    a->integ[a->n] = integ;
    a->line[a->n++] = line;
    return 0;
}

static struct clrmux_integ defs[CLRMUX_INTEG_MAX];

static void test_parse_ok(void **state)
{
    (void)state;
    struct added a = {0};
    int n = 0;
    logged[0] = 0;
    const char *text = "; comment\n"
                       "[integration shop]\n"
                       "target = App!App.Q::Send(string)   ; trailing comment\n"
                       "versions = 1.2 - 3.*\n"
                       "kind = Producer\n"
                       "name = send {messaging.destination.name}\n"
                       "attribute = messaging.destination.name = arg0\n"
                       "attribute = server.address = this.Conn.Host\n"
                       "attribute = messaging.system = 'q'\n"
                       "attribute = server.port = arg1.Ep.Port | this.Eps[0].Port\n"
                       "inject = arg1.Headers\n";
    assert_int_equal(clrmux_integ_parse(text, "f.conf", defs, &n, CLRMUX_INTEG_MAX, add, &a), 0);
    assert_int_equal(defs[0].max_arg, 1);
    assert_int_equal(defs[0].has_exit, 0);
    assert_int_equal(n, 1);
    assert_int_equal(a.n, 1);
    assert_string_equal(a.text[0], "App!App.Q::Send(string)");
    assert_int_equal(a.integ[0], 0);
    assert_int_equal(a.line[0], 3);
    assert_int_equal(defs[0].kind, 4);
    assert_int_equal(defs[0].vmin[0], 1);
    assert_int_equal(defs[0].vmin[1], 2);
    assert_int_equal(defs[0].vmax[0], 3);
    assert_int_equal(defs[0].vmax[1], -1);
    assert_non_null(strstr(defs[0].spec, "scope=shop\n"));
    assert_non_null(strstr(defs[0].spec, "name=send {messaging.destination.name}\n"));
    assert_non_null(strstr(defs[0].spec, "attr=server.address\tthis.Conn.Host\n"));
    assert_non_null(strstr(defs[0].spec, "attr=messaging.system\t'q'\n"));
    assert_non_null(strstr(defs[0].spec, "inject=arg1.Headers\n"));
    assert_non_null(strstr(defs[0].spec, "attr=server.port\targ1.Ep.Port | this.Eps[0].Port\n"));
    assert_non_null(strstr(defs[0].spec, "versions=1,2,3,-1\n"));
    assert_non_null(strstr(defs[0].spec, "kind=4\n"));
    assert_string_equal(logged, "");
}

static void test_parse_errors(void **state)
{
    (void)state;
    struct added a = {0};
    int n = 0;
    logged[0] = 0;
    const char *text = "orphan = 1\n"                               /* 1 */
                       "[integration a]\n"                          /* 2 */
                       "target = App!App.Q::Get\n"                  /* 3 */
                       "kind = client\n"                            /* 4 */
                       "kind = sideways\n"                          /* 5: the earlier kind stays */
                       "attribute = x = arg64.Foo\n"                /* 6: past CLRMUX_INTEG_MAX_ARG */
                       "attribute = y = this.Foo[x]|\n"             /* 7 */
                       "attribute = novalue\n"                      /* 8 */
                       "inject = 'const'\n"                         /* 9 */
                       "versions = 1.x - 2\n"                       /* 10 */
                       "extract_as = sideways\n"                    /* 11 */
                       "not a pair\n"                               /* 12 */
                       "[integration nokind]\n"                     /* 13 */
                       "target = App!App.Q::Put\n"                  /* 14 */
                       "[integration badtarget]\n"                  /* 15 */
                       "target = nonsense\n"                        /* 16 */
                       "kind = client\n"                            /* 17 */
                       "[section]\n"                                /* 18 */
                       "kind = client\n";                           /* 19: skipped with its section */
    int errors = clrmux_integ_parse(text, "u.conf", defs, &n, CLRMUX_INTEG_MAX, add, &a);
    assert_int_equal(n, 1);      /* only [integration a] */
    assert_int_equal(a.n, 1);    /* nokind's target was never registered */
    assert_string_equal(a.text[0], "App!App.Q::Get");
    assert_int_equal(defs[0].kind, 3);
    assert_true(errors >= 12);
    static const char *want[] = {
        "u.conf:1: a line before any [integration NAME]",
        "u.conf:5: [integration a]: kind 'sideways'",
        "u.conf:6: [integration a]: 'arg64.Foo' is not",
        "u.conf:7: [integration a]: 'this.Foo[x]|' is not",
        "u.conf:8: [integration a]: attribute is not KEY = VALUE",
        "u.conf:9: [integration a]: ''const'' is not",
        "u.conf:10: [integration a]: versions '1.x - 2'",
        "u.conf:11: [integration a]: extract_as 'sideways' is not link or parent",
        "u.conf:12: not KEY = VALUE",
        "u.conf:13: [integration nokind]: no kind",
        "u.conf:16: [integration badtarget]: bad target 'nonsense'; target skipped",
        "u.conf:15: [integration badtarget]: no valid target; definition skipped",
        "u.conf:18: '[section' is not an [integration NAME] section",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(logged, want[i]))
            fail_msg("missing '%s' in:\n%s", want[i], logged);
}

/* argN past arg3 (the call passes them in an array), extract from an argument (at the entry)
 * or the return (at the exit), extract_as; a rejected line leaves max_arg as it was */
static void test_parse_args_extract(void **state)
{
    (void)state;
    struct added a = {0};
    int n = 0;
    logged[0] = 0;
    const char *text = "[integration deliver]\n"
                       "target = App!App.C::Deliver\n"
                       "kind = consumer\n"
                       "attribute = messaging.message.id = arg5.MessageId\n"
                       "attribute = messaging.destination.name = arg3 | arg4\n"
                       "attribute = x.returned = this.returnValue\n" /* a member named return...: not the return */
                       "inject = arg63.Headers | return.Headers\n"   /* 7: inject cannot read the return */
                       "extract = arg5.Headers\n"
                       "extract_as = parent\n"
                       "[integration get]\n"
                       "target = App!App.C::Get\n"
                       "kind = client\n"
                       "extract = return.Headers\n"
                       "attribute = a = arg12.X\n"
                       "extract = arg1.H | return.H\n";              /* 15: one path, or no return */
    assert_int_equal(clrmux_integ_parse(text, "x.conf", defs, &n, CLRMUX_INTEG_MAX, add, &a), 2);
    assert_int_equal(n, 2);
    assert_int_equal(defs[0].max_arg, 5);
    assert_int_equal(defs[0].has_exit, 0);
    assert_non_null(strstr(defs[0].spec, "extract=arg5.Headers\n"));
    assert_non_null(strstr(defs[0].spec, "extract_as=parent\n"));
    assert_int_equal(defs[1].max_arg, 12);
    assert_int_equal(defs[1].has_exit, 1);
    assert_non_null(strstr(logged, "x.conf:7: [integration deliver]: 'arg63.Headers | return.Headers' is not"));
    assert_non_null(strstr(logged, "x.conf:15: [integration get]: 'arg1.H | return.H' is not"));
}

static void test_shipped(void **state)
{
    (void)state;
    struct added a = {0};
    int n = 0;
    logged[0] = 0;
    for (const struct clrmux_integ_shipped *s = clrmux_integ_shipped; s->instrument; s++)
        assert_int_equal(clrmux_integ_parse(s->text, "(shipped)", defs, &n, CLRMUX_INTEG_MAX, add, &a), 0);
    assert_true(n >= 3);
    assert_true(a.n >= 5);
    assert_string_equal(logged, "");
}

static size_t blob(uint8_t *b, int parent)
{
    size_t i = 0;
    b[i++] = 3; /* client */
    b[i++] = 13, b[i++] = 0;
    memcpy(b + i, "SELECT orders", 13), i += 13;
    b[i++] = 6, b[i++] = 0;
    memcpy(b + i, "sqlite", 6), i += 6;
    b[i++] = (uint8_t)parent;
    if (parent) {
        memset(b + i, 0xAB, 16), i += 16;
        memset(b + i, 0, 8), b[i] = 7, i += 8;
    }
    b[i++] = 1, b[i++] = 0;        /* one attribute */
    b[i++] = CLRMUX_XATTR_STRING;
    b[i++] = 14, b[i++] = 0;
    memcpy(b + i, "db.system.name", 14), i += 14;
    b[i++] = 6, b[i++] = 0;
    memcpy(b + i, "sqlite", 6), i += 6;
    return i;
}

static void test_attach_and_record(void **state)
{
    (void)state;
    uint8_t b[256], rec[1024];
    size_t blen = blob(b, 0), len = 0;
    assert_int_equal(clrmux_integ_any(), 0);
    assert_int_equal(clrmux_integ_attach(42, b, blen), 0);
    assert_int_equal(clrmux_integ_attach(43, b, blen), 0);
    assert_int_equal(clrmux_integ_attach(42, b, blen), 0); /* replaced */
    assert_true(clrmux_integ_any());
    assert_null(clrmux_integ_take(44, &len));
    uint8_t *got = clrmux_integ_take(42, &len);
    assert_non_null(got);
    assert_int_equal(len, blen);
    assert_null(clrmux_integ_take(42, &len));
    struct clrmux_span s = {.span_id = 42, .parent_id = 9, .start_ns = 1000, .end_ns = 2000, .tid = 5,
                            .flags = CLRMUX_SPAN_ERROR};
    memset(s.trace_id, 0x11, 16);
    size_t n = clrmux_integ_record(&s, got, len, "Microsoft.Data.Sqlite.SqliteException", rec, sizeof rec);
    free(got);
    assert_true(n > 0);
    struct clrmux_xspan x;
    assert_int_equal(clrmux_xspan_parse(rec, n, &x), 0);
    assert_int_equal(x.kind, 3);
    assert_int_equal(x.status, 2);
    assert_int_equal(x.span_id, 42);
    assert_int_equal(x.parent_id, 9);
    assert_int_equal(x.start_ns, 1000);
    assert_int_equal(x.end_ns, 2000);
    assert_memory_equal(x.name.p, "SELECT orders", 13);
    assert_memory_equal(x.scope_name.p, "sqlite", 6);
    struct clrmux_xattr at;
    int seen = 0;
    while (clrmux_xattr_next(&x.attrs, &at))
        if (at.key.len == 10 && !memcmp(at.key.p, "error.type", 10))
            seen = at.s.len == 37 && !memcmp(at.s.p, "Microsoft.Data.Sqlite.SqliteException", 37);
    assert_true(seen);
    assert_int_equal(x.nlinks, 0);
    /* the extracted context as the parent (ctx 1): its trace and span, and two links: to it
     * and to the span's own parent */
    blen = blob(b, 1);
    s.flags = 0;
    n = clrmux_integ_record(&s, b, blen, NULL, rec, sizeof rec);
    assert_true(n > 0);
    assert_int_equal(clrmux_xspan_parse(rec, n, &x), 0);
    assert_int_equal(x.trace_id[0], 0xAB);
    assert_int_equal(x.parent_id, 7);
    assert_int_equal(x.status, 0);
    assert_int_equal(x.flags & CLRMUX_XSPAN_F_REMOTE_PARENT, CLRMUX_XSPAN_F_REMOTE_PARENT);
    assert_int_equal(x.nlinks, 2);
    const uint8_t *cur = x.links;
    uint16_t left = x.nlinks;
    struct clrmux_xlink l;
    assert_int_equal(clrmux_xlink_next(&cur, &left, &l), 1);
    assert_int_equal(l.trace_id[0], 0xAB);
    assert_int_equal(l.span_id, 7);
    assert_int_equal(clrmux_xlink_next(&cur, &left, &l), 1);
    assert_int_equal(l.trace_id[0], 0x11);
    assert_int_equal(l.span_id, 9);
    /* ... without a parent of its own: one link */
    s.parent_id = 0;
    n = clrmux_integ_record(&s, b, blen, NULL, rec, sizeof rec);
    assert_int_equal(clrmux_xspan_parse(rec, n, &x), 0);
    assert_int_equal(x.parent_id, 7);
    assert_int_equal(x.nlinks, 1);
    s.parent_id = 9;
    /* the extracted context as a link (ctx 2): the parent stays */
    blen = blob(b, 2);
    n = clrmux_integ_record(&s, b, blen, NULL, rec, sizeof rec);
    assert_true(n > 0);
    assert_int_equal(clrmux_xspan_parse(rec, n, &x), 0);
    assert_int_equal(x.trace_id[0], 0x11);
    assert_int_equal(x.parent_id, 9);
    assert_int_equal(x.flags & CLRMUX_XSPAN_F_REMOTE_PARENT, 0);
    assert_int_equal(x.nlinks, 1);
    cur = x.links;
    left = x.nlinks;
    assert_int_equal(clrmux_xlink_next(&cur, &left, &l), 1);
    assert_int_equal(l.trace_id[0], 0xAB);
    assert_int_equal(l.span_id, 7);
    b[24] = 3; /* an unknown ctx: no record */
    assert_int_equal(clrmux_integ_record(&s, b, blen, NULL, rec, sizeof rec), 0);
    blen = blob(b, 1);
    /* malformed blobs: no record */
    assert_int_equal(clrmux_integ_record(&s, b, 5, NULL, rec, sizeof rec), 0);
    b[0] = 9;
    assert_int_equal(clrmux_integ_record(&s, b, blen, NULL, rec, sizeof rec), 0);
    /* no room */
    b[0] = 3;
    assert_int_equal(clrmux_integ_record(&s, b, blen, NULL, rec, 20), 0);
    got = clrmux_integ_take(43, &len);
    free(got);
    assert_int_equal(clrmux_integ_any(), 0);
}

/* the table keeps every entry reachable after deletions in the middle of a probe run */
static void test_attach_many(void **state)
{
    (void)state;
    uint8_t b[256];
    size_t blen = blob(b, 0), len;
    for (uint64_t id = 1; id <= 3000; id++)
        assert_int_equal(clrmux_integ_attach(id, b, blen), 0);
    for (uint64_t id = 1; id <= 3000; id += 2)
        free(clrmux_integ_take(id, &len));
    for (uint64_t id = 2; id <= 3000; id += 2) {
        uint8_t *g = clrmux_integ_take(id, &len);
        if (!g)
            fail_msg("span %llu lost", (unsigned long long)id);
        free(g);
    }
    assert_int_equal(clrmux_integ_any(), 0);
    /* a full table forgets everything (spans that never reach the exporter keep no blob forever) */
    for (uint64_t id = 1; id <= 4096; id++)
        assert_int_equal(clrmux_integ_attach(id, b, blen), 0);
    assert_int_equal(clrmux_integ_attach(5000, b, blen), -1);
    assert_int_equal(clrmux_integ_any(), 0);
    assert_null(clrmux_integ_take(7, &len));
    assert_int_equal(clrmux_integ_attach(5001, b, blen), 0);
    free(clrmux_integ_take(5001, &len));
}

int main(void)
{
    clrmux_log_set_sink(sink, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_shipped),
        cmocka_unit_test(test_parse_args_extract),
        cmocka_unit_test(test_attach_and_record),
        cmocka_unit_test(test_attach_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
