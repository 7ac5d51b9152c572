/* Unit tests for src/profiler/framename.c (frame-name formatting and UTF-16
 * to UTF-8 conversion). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "profiler/framename.h"

/* Checks that s[0..n) is well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF, no truncated sequence). */
static int is_valid_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++) {
            if ((p[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

#define FMT(buf, ...) clrmux_frame_name_managed(buf, sizeof buf, __VA_ARGS__)

static void test_plain_method(void **state)
{
    (void)state;
    char buf[256];
    size_t n = FMT(buf, "System.Threading.Thread", "Sleep", NULL, 0, NULL, 0);
    assert_string_equal(buf, "System.Threading.Thread.Sleep");
    assert_int_equal(n, strlen(buf));
    FMT(buf, "MyApp.Program", ".ctor", NULL, 0, NULL, 0);
    assert_string_equal(buf, "MyApp.Program..ctor");
}

static void test_nested_type(void **state)
{
    (void)state;
    char buf[256];
    FMT(buf, "MyApp.Outer+Inner", "Run", NULL, 0, NULL, 0);
    assert_string_equal(buf, "MyApp.Outer+Inner.Run");
    FMT(buf, "A.B+C+D", "M", NULL, 0, NULL, 0);
    assert_string_equal(buf, "A.B+C+D.M");
}

static void test_generic_type_with_args(void **state)
{
    (void)state;
    char buf[256];
    const char *args[] = { "System.Int32" };
    FMT(buf, "System.Collections.Generic.List`1", "Add", args, 1, NULL, 0);
    assert_string_equal(buf,
                        "System.Collections.Generic.List<System.Int32>.Add");

    const char *kv[] = { "System.String", "System.Int32" };
    FMT(buf, "System.Collections.Generic.Dictionary`2", "TryGetValue", kv, 2,
        NULL, 0);
    assert_string_equal(buf, "System.Collections.Generic.Dictionary<"
                             "System.String, System.Int32>.TryGetValue");
}

static void test_generic_type_without_args_strips_arity(void **state)
{
    (void)state;
    char buf[256];
    FMT(buf, "System.Collections.Generic.List`1", "Add", NULL, 0, NULL, 0);
    assert_string_equal(buf, "System.Collections.Generic.List.Add");
    FMT(buf, "Ns.Outer`1+Inner`2", "M", NULL, 0, NULL, 0);
    assert_string_equal(buf, "Ns.Outer+Inner.M");
    /* not an arity suffix: kept verbatim */
    FMT(buf, "Ns.Weird`x", "M", NULL, 0, NULL, 0);
    assert_string_equal(buf, "Ns.Weird`x.M");
    FMT(buf, "Ns.Many`12345", "M", NULL, 0, NULL, 0);
    assert_string_equal(buf, "Ns.Many`12345.M");
}

static void test_nested_generic_distributes_args(void **state)
{
    (void)state;
    char buf[256];
    const char *targs[] = { "A", "B", "C" };
    const char *margs[] = { "D" };
    FMT(buf, "Ns.Outer`1+Inner`2", "M", targs, 3, margs, 1);
    assert_string_equal(buf, "Ns.Outer<A>+Inner<B, C>.M<D>");
    /* Non-generic nested type inside a generic one. */
    FMT(buf, "Ns.Outer`1+Inner", "M", targs, 1, NULL, 0);
    assert_string_equal(buf, "Ns.Outer<A>+Inner.M");
}

static void test_generic_arity_mismatch_appends_all(void **state)
{
    (void)state;
    char buf[256];
    const char *targs[] = { "A", "B" };
    FMT(buf, "Ns.Thing`1", "M", targs, 2, NULL, 0);
    assert_string_equal(buf, "Ns.Thing<A, B>.M");
    FMT(buf, "Ns.NoArity", "M", targs, 1, NULL, 0);
    assert_string_equal(buf, "Ns.NoArity<A>.M");
}

static void test_generic_method(void **state)
{
    (void)state;
    char buf[256];
    const char *margs[] = { "System.Int32", "System.String" };
    FMT(buf, "System.Linq.Enumerable", "Select", NULL, 0, margs, 2);
    assert_string_equal(buf,
                        "System.Linq.Enumerable.Select<System.Int32, "
                        "System.String>");
    const char *nullarg[] = { NULL };
    FMT(buf, "T", "M", NULL, 0, nullarg, 1);
    assert_string_equal(buf, "T.M<?>");
}

static void test_missing_parts(void **state)
{
    (void)state;
    char buf[64];
    FMT(buf, NULL, "GlobalFn", NULL, 0, NULL, 0);
    assert_string_equal(buf, "GlobalFn");
    FMT(buf, "", "GlobalFn", NULL, 0, NULL, 0);
    assert_string_equal(buf, "GlobalFn");
    FMT(buf, "Ns.T", NULL, NULL, 0, NULL, 0);
    assert_string_equal(buf, "Ns.T.[unknown]");
    FMT(buf, NULL, NULL, NULL, 0, NULL, 0);
    assert_string_equal(buf, "[unknown]");
}

static void test_native_and_unknown(void **state)
{
    (void)state;
    char buf[64];
    size_t n = clrmux_frame_name_native(buf, sizeof buf,
                                        "/usr/lib/x86_64-linux-gnu/libfoo.so");
    assert_string_equal(buf, "[native] libfoo.so");
    assert_int_equal(n, strlen("[native] libfoo.so"));
    clrmux_frame_name_native(buf, sizeof buf, "libbar.so.1");
    assert_string_equal(buf, "[native] libbar.so.1");
    clrmux_frame_name_native(buf, sizeof buf, NULL);
    assert_string_equal(buf, "[native]");
    clrmux_frame_name_native(buf, sizeof buf, "/usr/lib/");
    assert_string_equal(buf, "[native]");
    n = clrmux_frame_name_unknown(buf, sizeof buf);
    assert_string_equal(buf, "[unknown]");
    assert_int_equal(n, 9);
}

static void test_truncation_ascii(void **state)
{
    (void)state;
    char buf[8];
    memset(buf, 'X', sizeof buf);
    size_t n = FMT(buf, "Ns.Type", "Method", NULL, 0, NULL, 0);
    assert_int_equal(n, strlen("Ns.Type.Method"));
    assert_true(n >= sizeof buf);
    assert_string_equal(buf, "Ns.Type");

    /* measuring with cap 0 */
    n = clrmux_frame_name_managed(NULL, 0, "Ns.Type", "Method", NULL, 0, NULL,
                                  0);
    assert_int_equal(n, 14);

    /* cap 1: empty string */
    char one[1] = { 'X' };
    n = clrmux_frame_name_unknown(one, 1);
    assert_int_equal(one[0], '\0');
    assert_int_equal(n, 9);

    /* exact fit */
    char fit[10];
    n = clrmux_frame_name_unknown(fit, sizeof fit);
    assert_int_equal(n, 9);
    assert_string_equal(fit, "[unknown]");
}

static void test_truncation_at_utf8_boundary(void **state)
{
    (void)state;
    /* "Ns.Ünïcødé" with multi-byte characters; type "Ns.Typé" (é = C3 A9) */
    const char *type = "Ns.Typ\xC3\xA9";
    const char *method = "\xE6\x97\xA5\xE6\x9C\xAC"; /* two 3-byte chars */
    char full[64];
    size_t n = FMT(full, type, method, NULL, 0, NULL, 0);
    assert_string_equal(full, "Ns.Typ\xC3\xA9.\xE6\x97\xA5\xE6\x9C\xAC");
    assert_int_equal(n, strlen(full));
    /* Every cap from 0 to full length: output is a valid UTF-8 prefix. */
    for (size_t cap = 1; cap <= n + 1; cap++) {
        char buf[64];
        memset(buf, 'Z', sizeof buf);
        size_t m = clrmux_frame_name_managed(buf, cap, type, method, NULL, 0,
                                             NULL, 0);
        assert_int_equal(m, n);
        size_t len = strlen(buf);
        assert_true(len < cap);
        if (m < cap)
            assert_int_equal(len, n); /* not truncated */
        else
            assert_true(len + 3 >= cap - 1); /* cut at most 3 bytes short */
        assert_true(is_valid_utf8(buf, len));
        assert_memory_equal(buf, full, len);
    }
    /* cap 8: "Ns.Typ" + (é needs 2 bytes, only 1 left) -> cut before é */
    char b8[8];
    FMT(b8, type, method, NULL, 0, NULL, 0);
    assert_string_equal(b8, "Ns.Typ");
    /* cap 11: "Ns.Typé." is 9 bytes, 3-byte char does not fit in 1 */
    char b11[11];
    FMT(b11, type, method, NULL, 0, NULL, 0);
    assert_string_equal(b11, "Ns.Typ\xC3\xA9.");
}

static void test_invalid_utf8_input_replaced(void **state)
{
    (void)state;
    char buf[64];
    /* lone continuation byte, truncated 3-byte sequence, overlong, and an
     * encoded surrogate (ED A0 80) */
    FMT(buf, "A\x80" "B", "C\xE6\x97" "D", NULL, 0, NULL, 0);
    assert_string_equal(buf, "A\xEF\xBF\xBD" "B.C\xEF\xBF\xBD" "D");
    FMT(buf, "\xC0\xAF", "\xED\xA0\x80", NULL, 0, NULL, 0);
    assert_true(is_valid_utf8(buf, strlen(buf)));
    /* C0 and AF each replaced; ED A0 80: ED is a maximal subpart (A0 is
     * outside ED's range), then A0 and 80 separately */
    assert_string_equal(buf, "\xEF\xBF\xBD\xEF\xBF\xBD."
                             "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    /* 4-byte character kept */
    FMT(buf, "T", "\xF0\x9F\x98\x80", NULL, 0, NULL, 0);
    assert_string_equal(buf, "T.\xF0\x9F\x98\x80");
}

static void test_utf16_basic(void **state)
{
    (void)state;
    char buf[64];
    const uint16_t s[] = { 'L', 'i', 's', 't', '`', '1', 0 };
    size_t n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, s, SIZE_MAX);
    assert_string_equal(buf, "List`1");
    assert_int_equal(n, 6);
    /* counted input without NUL */
    n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, s, 4);
    assert_string_equal(buf, "List");
    /* BMP characters: é (2 bytes), 日 (3 bytes) */
    const uint16_t bmp[] = { 0x00E9, 0x65E5 };
    n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, bmp, 2);
    assert_string_equal(buf, "\xC3\xA9\xE6\x97\xA5");
    assert_int_equal(n, 5);
    n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, NULL, 0);
    assert_string_equal(buf, "");
    assert_int_equal(n, 0);
}

static void test_utf16_surrogate_pairs(void **state)
{
    (void)state;
    char buf[64];
    /* U+1F600 = D83D DE00; U+10FFFF = DBFF DFFF; U+10000 = D800 DC00 */
    const uint16_t s[] = { 'a', 0xD83D, 0xDE00, 0xDBFF, 0xDFFF, 0xD800, 0xDC00,
                           'b' };
    size_t n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, s, 8);
    assert_string_equal(buf, "a\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"
                             "\xF0\x90\x80\x80" "b");
    assert_int_equal(n, 14);
    assert_true(is_valid_utf8(buf, n));
}

static void test_utf16_invalid_surrogates(void **state)
{
    (void)state;
    char buf[64];
    /* lone low, lone high followed by a non-surrogate, high at the end */
    const uint16_t s[] = { 0xDC00, 'x', 0xD800, 'y', 0xD83D };
    clrmux_frame_utf16_to_utf8(buf, sizeof buf, s, 5);
    assert_string_equal(buf, "\xEF\xBF\xBD" "x\xEF\xBF\xBD" "y\xEF\xBF\xBD");
    /* two highs then a low: first high invalid, second pairs */
    const uint16_t t[] = { 0xD83D, 0xD83D, 0xDE00 };
    clrmux_frame_utf16_to_utf8(buf, sizeof buf, t, 3);
    assert_string_equal(buf, "\xEF\xBF\xBD\xF0\x9F\x98\x80");
    /* pair split by the unit count: the high is unpaired */
    const uint16_t u[] = { 0xD83D, 0xDE00 };
    clrmux_frame_utf16_to_utf8(buf, sizeof buf, u, 1);
    assert_string_equal(buf, "\xEF\xBF\xBD");
    /* pair split by a NUL */
    const uint16_t v[] = { 0xD83D, 0, 0xDE00 };
    clrmux_frame_utf16_to_utf8(buf, sizeof buf, v, 3);
    assert_string_equal(buf, "\xEF\xBF\xBD");
}

static void test_utf16_truncation(void **state)
{
    (void)state;
    /* 'a' + U+1F600 (4 bytes) + 'b' */
    const uint16_t s[] = { 'a', 0xD83D, 0xDE00, 'b' };
    char buf[5];
    size_t n = clrmux_frame_utf16_to_utf8(buf, sizeof buf, s, 4);
    assert_int_equal(n, 6);
    /* the emoji needs 4 bytes, only 3 are left; 'b' would fit but nothing
     * is written after a character that did not fit */
    assert_string_equal(buf, "a");
    char buf6[6];
    n = clrmux_frame_utf16_to_utf8(buf6, sizeof buf6, s, 4);
    assert_int_equal(n, 6);
    assert_string_equal(buf6, "a\xF0\x9F\x98\x80");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_method),
        cmocka_unit_test(test_nested_type),
        cmocka_unit_test(test_generic_type_with_args),
        cmocka_unit_test(test_generic_type_without_args_strips_arity),
        cmocka_unit_test(test_nested_generic_distributes_args),
        cmocka_unit_test(test_generic_arity_mismatch_appends_all),
        cmocka_unit_test(test_generic_method),
        cmocka_unit_test(test_missing_parts),
        cmocka_unit_test(test_native_and_unknown),
        cmocka_unit_test(test_truncation_ascii),
        cmocka_unit_test(test_truncation_at_utf8_boundary),
        cmocka_unit_test(test_invalid_utf8_input_replaced),
        cmocka_unit_test(test_utf16_basic),
        cmocka_unit_test(test_utf16_surrogate_pairs),
        cmocka_unit_test(test_utf16_invalid_surrogates),
        cmocka_unit_test(test_utf16_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
