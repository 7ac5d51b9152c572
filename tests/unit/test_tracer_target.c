/* Unit tests for src/tracer/target.c: `trace =` target parsing, canonical parameter type
 * names, signature decoding (ECMA-335 II.23.2) and overload matching. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tracer/target.h"

static char err[512];

static void parse_ok(const char *text, struct clrmux_target *t)
{
    if (clrmux_target_parse(text, t, err, sizeof err) != 0)
        fail_msg("'%s' refused: %s", text, err);
}

static void parse_bad(const char *text, const char *why)
{
    struct clrmux_target t;
    err[0] = 0;
    if (clrmux_target_parse(text, &t, err, sizeof err) == 0)
        fail_msg("'%s' accepted", text);
    if (!strstr(err, why))
        fail_msg("'%s': message '%s' lacks '%s'", text, err, why);
}

static void test_parse_simple(void **state)
{
    (void)state;
    struct clrmux_target t;
    parse_ok("tracee!Tracee.Targets::Add", &t);
    assert_string_equal(t.assembly, "tracee");
    assert_string_equal(t.type, "Tracee.Targets");
    assert_string_equal(t.method, "Add");
    assert_int_equal(t.has_params, 0);
    assert_int_equal(t.nparams, 0);
    parse_ok("  MyApp ! MyApp.Orders.OrderService :: PlaceOrder  ", &t);
    assert_string_equal(t.assembly, "MyApp");
    assert_string_equal(t.type, "MyApp.Orders.OrderService");
    assert_string_equal(t.method, "PlaceOrder");
    parse_ok("tracee!Tracee.Targets::.ctor", &t);
    assert_string_equal(t.method, ".ctor");
    parse_ok("MyApp!MyApp.Util.Cache`1::Get", &t);
    assert_string_equal(t.type, "MyApp.Util.Cache`1");
    parse_ok("NoNamespace!Program::<Main>$", &t);
    assert_string_equal(t.type, "Program");
    assert_string_equal(t.method, "<Main>$");
}

static void test_parse_params(void **state)
{
    (void)state;
    struct clrmux_target t;
    parse_ok("System.Private.CoreLib!System.IO.Path::Combine(string, System.String)", &t);
    assert_string_equal(t.assembly, "System.Private.CoreLib");
    assert_string_equal(t.type, "System.IO.Path");
    assert_string_equal(t.method, "Combine");
    assert_int_equal(t.has_params, 1);
    assert_int_equal(t.nparams, 2);
    assert_string_equal(t.params[0], "string");
    assert_string_equal(t.params[1], "string");

    parse_ok("MyApp!MyApp.Outer+Inner`1::.ctor(ref int, List<System.Int32, Dictionary<string,object>>, int[,], out Point, "
             "in MyApp.Big, byte*, Int64)", &t);
    assert_string_equal(t.type, "MyApp.Outer+Inner`1");
    assert_int_equal(t.nparams, 7);
    assert_string_equal(t.params[0], "int&");
    assert_string_equal(t.params[1], "List<int,Dictionary<string,object>>");
    assert_string_equal(t.params[2], "int[,]");
    assert_string_equal(t.params[3], "Point&");
    assert_string_equal(t.params[4], "MyApp.Big&");
    assert_string_equal(t.params[5], "byte*");
    assert_string_equal(t.params[6], "long");

    parse_ok("a!B::M()", &t);
    assert_int_equal(t.has_params, 1);
    assert_int_equal(t.nparams, 0);
    parse_ok("a!B::M(  )", &t);
    assert_int_equal(t.has_params, 1);
    assert_int_equal(t.nparams, 0);
    /* a parameter whose name starts like a keyword is not by-ref */
    parse_ok("a!B::M(refinery, output)", &t);
    assert_string_equal(t.params[0], "refinery");
    assert_string_equal(t.params[1], "output");
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_bad("this is not a target", "expected Assembly!Namespace.Type::Method");
    parse_bad("tracee!Tracee.Targets.Add", "expected '::'");
    parse_bad("!Tracee.Targets::Add", "empty assembly name");
    parse_bad("tracee!::Add", "empty type name");
    parse_bad("tracee!Tracee.Targets::", "empty method name");
    parse_bad("tracee!Tracee.Targets::(int)", "empty method name");
    parse_bad("tracee!.Targets::Add", "bad type name");
    parse_bad("tracee!Tracee.Targets.::Add", "bad type name");
    parse_bad("tracee!Outer+::Add", "bad type name");
    parse_bad("tracee!Outer++Inner::Add", "bad type name");
    parse_bad("tracee!Tra cee::Add", "bad character in the type name");
    parse_bad("tracee!Tracee::Ad d", "bad character in the method name");
    parse_bad("tracee!Tracee::Add(int", "missing ')'");
    parse_bad("tracee!Tracee::Add(int) x", "text after the parameter list");
    parse_bad("tracee!Tracee::Add(List<int)", "unbalanced");
    parse_bad("tracee!Tracee::Add(int,,int)", "empty parameter type");
    parse_bad("tracee!Tracee::Add(int,)", "empty parameter type");
    parse_bad("a!B::M(int,int,int,int,int,int,int,int,int,int,int,int,int,int,int,int,int)", "too many parameter types");
}

static void test_canon(void **state)
{
    (void)state;
    char out[CLRMUX_TARGET_NAME_MAX];
    static const char *const cases[][2] = {
        {"System.Int32", "int"}, {" int ", "int"}, {"Int32", "int"}, {"System.Boolean", "bool"},
        {"System.Object[]", "object[]"}, {"ref System.String", "string&"}, {"in  Foo.Bar", "Foo.Bar&"},
        {"out int[]", "int[]&"}, {"Dictionary< string , List<System.Int64> >", "Dictionary<string,List<long>>"},
        {"nint", "nint"}, {"System.IntPtr", "nint"}, {"MyInt32", "MyInt32"}, {"Foo.Int32", "Foo.Int32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(clrmux_target_canon_type(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    char small[4];
    assert_int_equal(clrmux_target_canon_type("System.String", small, sizeof small), -1);
}

/* Resolver of the signature tests: a few tokens of an imaginary module. */
static int resolve(void *ctx, uint32_t token, char *out, size_t outsz)
{
    (void)ctx;
    const char *n = NULL;
    switch (token) {
    case 0x02000005: n = "Tracee.Point"; break;
    case 0x01000002: n = "System.String"; break;
    case 0x01000003: n = "System.Collections.Generic.List`1"; break;
    case 0x01000004: n = "Outer+Inner"; break;
    default: return -1;
    }
    snprintf(out, outsz, "%s", n);
    return 0;
}

static void test_sig_param_names(void **state)
{
    (void)state;
    /* generic (2) instance method: void M(int, Point, string[], ref int, List<int>, !0, !!1, int[,],
     * class System.String, modopt(Inner) long, Outer+Inner, unknown typedef) */
    static const uint8_t sig[] = {
        0x30, 0x02, 0x0C,          /* HASTHIS|GENERIC, 2 generic params, 12 params */
        0x01,                      /* void */
        0x08,                      /* int */
        0x11, 0x14,                /* valuetype typedef 5 (5<<2|0) */
        0x1D, 0x0E,                /* string[] */
        0x10, 0x08,                /* ref int */
        0x15, 0x12, 0x0D, 0x01, 0x08, /* genericinst class typeref 3 (3<<2|1 = 0x0D) <int> */
        0x13, 0x00,                /* !0 */
        0x1E, 0x01,                /* !!1 */
        0x14, 0x08, 0x02, 0x00, 0x00, /* int[,]: rank 2, no sizes, no lower bounds */
        0x12, 0x09,                /* class typeref 2: System.String -> string */
        0x20, 0x11, 0x0A,          /* modopt(typeref 4) long */
        0x12, 0x11,                /* class typeref 4 */
        0x12, 0x7C,                /* class typedef 31 (unknown to the resolver) */
    };
    char names[16][CLRMUX_TARGET_NAME_MAX];
    int n = clrmux_sig_param_names(sig, sizeof sig, resolve, NULL, names, 16);
    assert_int_equal(n, 12);
    static const char *const exp[] = {"int", "Tracee.Point", "string[]", "int&", "System.Collections.Generic.List`1<int>",
                                      "!0", "!!1", "int[,]", "string", "long", "Outer+Inner", "?0200001F"};
    for (int i = 0; i < n; i++)
        assert_string_equal(names[i], exp[i]);
    /* fewer slots than parameters: still counts them all */
    assert_int_equal(clrmux_sig_param_names(sig, sizeof sig, resolve, NULL, names, 2), 12);
    assert_string_equal(names[1], "Tracee.Point");
    /* truncated and malformed */
    assert_int_equal(clrmux_sig_param_names(sig, 10, resolve, NULL, names, 16), -1);
    static const uint8_t bad[] = {0x00, 0x01, 0x01, 0x55};
    assert_int_equal(clrmux_sig_param_names(bad, sizeof bad, resolve, NULL, names, 16), -1);
    static const uint8_t none[] = {0x00, 0x00, 0x08};
    assert_int_equal(clrmux_sig_param_names(none, sizeof none, resolve, NULL, names, 16), 0);
}

static void test_type_matches(void **state)
{
    (void)state;
    assert_true(clrmux_target_type_matches("Point", "Tracee.Point"));
    assert_true(clrmux_target_type_matches("Tracee.Point", "Tracee.Point"));
    assert_true(clrmux_target_type_matches("Inner", "Outer+Inner"));
    assert_true(clrmux_target_type_matches("Outer+Inner", "Ns.Outer+Inner"));
    assert_true(clrmux_target_type_matches("List<int>", "System.Collections.Generic.List`1<int>"));
    assert_true(clrmux_target_type_matches("List`1<int>", "System.Collections.Generic.List`1<int>"));
    assert_true(clrmux_target_type_matches("Point&", "Tracee.Point&"));
    assert_true(clrmux_target_type_matches("string[]", "string[]"));
    assert_false(clrmux_target_type_matches("oint", "Tracee.Point"));
    assert_false(clrmux_target_type_matches("Point", "Tracee.Point&"));
    assert_false(clrmux_target_type_matches("int[]", "int"));
    assert_false(clrmux_target_type_matches("int", "long"));
    assert_false(clrmux_target_type_matches("List<int>", "System.Collections.Generic.List`1<long>"));
    assert_false(clrmux_target_type_matches("Other.Point", "Tracee.Point"));
}

static void test_params_match(void **state)
{
    (void)state;
    struct clrmux_target t;
    char names[2][CLRMUX_TARGET_NAME_MAX] = {"string", "string"};
    parse_ok("a!System.IO.Path::Combine", &t);
    assert_true(clrmux_target_params_match(&t, names, 2)); /* no list: every overload */
    parse_ok("a!System.IO.Path::Combine(string,string)", &t);
    assert_true(clrmux_target_params_match(&t, names, 2));
    assert_false(clrmux_target_params_match(&t, names, 1));
    parse_ok("a!System.IO.Path::Combine(string,string,string)", &t);
    assert_false(clrmux_target_params_match(&t, names, 2));
    parse_ok("a!System.IO.Path::Combine(String, int)", &t);
    assert_false(clrmux_target_params_match(&t, names, 2));
    parse_ok("a!System.IO.Path::Combine()", &t);
    assert_true(clrmux_target_params_match(&t, names, 0));
    assert_false(clrmux_target_params_match(&t, names, 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_simple),
        cmocka_unit_test(test_parse_params),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_canon),
        cmocka_unit_test(test_sig_param_names),
        cmocka_unit_test(test_type_matches),
        cmocka_unit_test(test_params_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
