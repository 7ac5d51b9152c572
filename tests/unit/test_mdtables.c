/* src/common/mdtables.c: method tokens, type and method names and nesting read from ECMA-335
 * metadata tables, against the runtime's own System.Private.CoreLib.dll (corelib.h:
 * CLRMUX_TEST_CORELIB, or the SDK's newest), as on disk and laid out as
 * the runtime maps it, and against that file cut short and damaged (ASan: nothing read out of
 * bounds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "corelib.h"

#include "common/mdtables.h"

static uint8_t *g_file;
static size_t g_len;

/* CoreLib's file (corelib.h: CLRMUX_TEST_CORELIB or the SDK's newest); without one the tests
 * skip, or the group fails under CI */
static int load_corelib(void **state)
{
    (void)state;
    g_file = corelib_read("test_mdtables", &g_len);
    return g_file || !corelib_required() ? 0 : -1;
}

static int free_corelib(void **state)
{
    (void)state;
    free(g_file);
    return 0;
}

/* The file laid out as loaded: headers, then each section at its RVA (as the runtime maps it). */
static uint8_t *map_image(size_t *size) { return corelib_map(g_file, g_len, size); }

static void test_finds_methods_in_corelib(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    uint32_t tok = 1, tok2 = 1, tok3 = 1;
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object", "ToString", &tok), 0);
    assert_int_equal(tok >> 24, 0x06);
    assert_true((tok & 0xffffff) > 0);
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object", "GetHashCode", &tok2), 0);
    assert_int_equal(tok2 >> 24, 0x06);
    assert_int_not_equal(tok, tok2);
    /* no such method, type or namespace: read, not found */
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object", "NoSuchMethod", &tok3), 0);
    assert_int_equal(tok3, 0);
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "NoSuchType", "ToString", &tok3), 0);
    assert_int_equal(tok3, 0);
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "Sys", "Object", "ToString", &tok3), 0);
    assert_int_equal(tok3, 0);
    /* a nested name never matches a top-level lookup by its full name */
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object+X", "ToString", &tok3), 0);
    assert_int_equal(tok3, 0);
}

static void test_mapped_layout_gives_the_same_tokens(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    size_t size = 0;
    uint8_t *img = map_image(&size);
    assert_int_equal(clrmux_md_mapped_size(img), size);
    uint32_t a = 0, b = 0;
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "AppContext", "GetData", &a), 0);
    assert_int_equal(clrmux_md_find_method(img, size, 1, "System", "AppContext", "GetData", &b), 0);
    assert_int_equal(a >> 24, 0x06);
    assert_int_equal(a, b);
    /* the flat file read as if mapped: its RVAs point elsewhere, so it is refused or not found,
     * never misread as another token of that name */
    uint32_t c = 0;
    int rc = clrmux_md_find_method(g_file, g_len, 1, "System", "AppContext", "GetData", &c);
    assert_true(rc == -1 || c == 0 || c == a);
    free(img);
}

static void test_cut_short_and_damaged(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    uint32_t want = 0, tok = 0;
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object", "ToString", &want), 0);
    /* every prefix length on a coarse grid, and around the headers */
    for (size_t len = 0; len < g_len; len += len < 4096 ? 61 : g_len / 97) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, g_file, len);
        int rc = clrmux_md_find_method(cut, len, 0, "System", "Object", "ToString", &tok);
        assert_true(rc == -1 ? tok == 0 : (tok == 0 || tok == want));
        free(cut);
    }
    /* bytes flipped across the headers and the metadata */
    uint8_t *bad = malloc(g_len);
    srand(7);
    for (int round = 0; round < 300; round++) {
        memcpy(bad, g_file, g_len);
        for (int k = 0; k < 8; k++)
            bad[(size_t)rand() % (round < 150 ? 4096 : g_len)] ^= (uint8_t)(1 + rand() % 255);
        (void)clrmux_md_find_method(bad, g_len, round & 1, "System", "Object", "ToString", &tok);
    }
    free(bad);
    assert_int_equal(clrmux_md_find_method(NULL, 0, 1, "System", "Object", "ToString", &tok), -1);
    assert_int_equal(tok, 0);
    uint8_t zeros[4096] = {0};
    assert_int_equal(clrmux_md_mapped_size(zeros), 0);
}

/* The TypeDef named ns.name nested (directly) in the TypeDef outer_ns.outer (NULL: top-level). */
static uint32_t find_type(const struct clrmux_md *md, const char *ns, const char *name, const char *outer_ns,
                          const char *outer)
{
    for (uint32_t rid = 1; rid <= md->typedefs; rid++) {
        const char *a, *b;
        uint32_t td = 0x02000000u | rid, enc = 1;
        assert_int_equal(clrmux_md_type_name(md, td, &a, &b), 0);
        if (strcmp(a, ns) || strcmp(b, name))
            continue;
        assert_int_equal(clrmux_md_enclosing_type(md, td, &enc), 0);
        if (!outer && enc == 0)
            return td;
        if (outer && enc && clrmux_md_type_name(md, enc, &a, &b) == 0 && !strcmp(a, outer_ns) && !strcmp(b, outer))
            return td;
    }
    return 0;
}

static void test_names_and_nesting_in_corelib(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    struct clrmux_md md;
    assert_int_equal(clrmux_md_open(&md, g_file, g_len, 0), 0);
    assert_true(md.typedefs > 1000 && md.methoddefs > 10000 && md.nested > 100);
    /* a method's name and owner */
    uint32_t tok = 0, owner = 0;
    const char *name = NULL, *ns = NULL, *tname = NULL;
    assert_int_equal(clrmux_md_find_method(g_file, g_len, 0, "System", "Object", "GetHashCode", &tok), 0);
    assert_int_equal(clrmux_md_method_name(&md, tok, &name, &owner), 0);
    assert_string_equal(name, "GetHashCode");
    assert_int_equal(clrmux_md_type_name(&md, owner, &ns, &tname), 0);
    assert_string_equal(ns, "System");
    assert_string_equal(tname, "Object");
    uint32_t outer = 1;
    assert_int_equal(clrmux_md_enclosing_type(&md, owner, &outer), 0);
    assert_int_equal(outer, 0); /* top-level */
    /* every method of every type: owned by the type whose list holds it */
    uint32_t checked = 0;
    for (uint32_t rid = 1; rid <= md.typedefs; rid++) {
        const char *a, *b;
        assert_int_equal(clrmux_md_type_name(&md, 0x02000000u | rid, &a, &b), 0);
        uint32_t m = 0;
        if (*b == '<' || clrmux_md_find_method(g_file, g_len, 0, a, b, ".ctor", &m) != 0 || !m)
            continue;
        uint32_t own = 0;
        const char *mn;
        assert_int_equal(clrmux_md_method_name(&md, m, &mn, &own), 0);
        assert_string_equal(mn, ".ctor");
        const char *oa, *ob;
        assert_int_equal(clrmux_md_type_name(&md, own, &oa, &ob), 0);
        assert_string_equal(oa, a);
        assert_string_equal(ob, b);
        checked++;
    }
    assert_true(checked > 500);
    /* nesting, one and two levels: List`1+Enumerator, RuntimeType+RuntimeTypeCache+MemberInfoCache`1 */
    uint32_t en = find_type(&md, "", "Enumerator", "System.Collections.Generic", "List`1");
    assert_int_not_equal(en, 0);
    uint32_t cache = find_type(&md, "", "RuntimeTypeCache", "System", "RuntimeType");
    assert_int_not_equal(cache, 0);
    uint32_t mic = find_type(&md, "", "MemberInfoCache`1", "", "RuntimeTypeCache");
    assert_int_not_equal(mic, 0);
    assert_int_equal(clrmux_md_enclosing_type(&md, mic, &outer), 0);
    assert_int_equal(outer, cache);
    assert_int_equal(clrmux_md_enclosing_type(&md, cache, &outer), 0);
    assert_int_equal(clrmux_md_type_name(&md, outer, &ns, &tname), 0);
    assert_string_equal(tname, "RuntimeType");
    /* NestedClass not marked sorted: read by a linear scan, the same answers */
    uint8_t *copy = malloc(g_len);
    memcpy(copy, g_file, g_len);
    struct clrmux_md md2;
    assert_int_equal(clrmux_md_open(&md2, copy, g_len, 0), 0);
    assert_int_equal(md2.nested_sorted, 1);
    copy[md2.tables - copy + 16 + 5] &= (uint8_t)~(1u << (0x29 - 40)); /* the Sorted mask's bit 0x29 */
    assert_int_equal(clrmux_md_open(&md2, copy, g_len, 0), 0);
    assert_int_equal(md2.nested_sorted, 0);
    for (uint32_t rid = 1; rid <= md.typedefs; rid += 7) {
        uint32_t o1 = 1, o2 = 2;
        assert_int_equal(clrmux_md_enclosing_type(&md, 0x02000000u | rid, &o1), 0);
        assert_int_equal(clrmux_md_enclosing_type(&md2, 0x02000000u | rid, &o2), 0);
        assert_int_equal(o1, o2);
    }
    free(copy);
    /* tokens that are not rows of these tables */
    uint32_t bad[] = {0, 0x02000000u, 0x06000000u, 0x02000000u | (md.typedefs + 1), 0x06000000u | (md.methoddefs + 1),
                      0x01000001u, 0x04000001u, 0xff000001u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(clrmux_md_type_name(&md, bad[i], &ns, &tname), (bad[i] >> 24 == 0x02 && (bad[i] & 0xffffff) &&
                                                                         (bad[i] & 0xffffff) <= md.typedefs) ? 0 : -1);
        assert_int_equal(clrmux_md_method_name(&md, bad[i], &name, &owner), -1);
        assert_null(name);
        assert_int_equal(owner, 0);
        assert_int_equal(clrmux_md_enclosing_type(&md, bad[i], &outer), -1);
        assert_int_equal(outer, 0);
    }
    /* a closed (failed) view answers nothing */
    assert_int_equal(clrmux_md_open(&md2, g_file, 100, 0), -1);
    assert_int_equal(clrmux_md_type_name(&md2, owner | 0x02000001u, &ns, &tname), -1);
    assert_int_equal(clrmux_md_method_name(&md2, tok, &name, &owner), -1);
}

/* The file laid out as mapped, and as the flat layout's extent, give the same names. */
static void test_layouts_give_the_same_names(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    size_t size = 0;
    uint8_t *img = map_image(&size);
    /* the end of the last section's raw data: the file may go on (a signature, debug data) */
    size_t flat_size = clrmux_md_flat_size(g_file);
    assert_true(flat_size <= g_len && flat_size > g_len / 2);
    struct clrmux_md flat, mapped;
    assert_int_equal(clrmux_md_open(&flat, g_file, flat_size, 0), 0);
    assert_int_equal(clrmux_md_open(&mapped, img, clrmux_md_mapped_size(img), 1), 0);
    for (uint32_t rid = 1; rid <= flat.methoddefs; rid += 13) {
        const char *a, *b;
        uint32_t oa, ob;
        assert_int_equal(clrmux_md_method_name(&flat, 0x06000000u | rid, &a, &oa), 0);
        assert_int_equal(clrmux_md_method_name(&mapped, 0x06000000u | rid, &b, &ob), 0);
        assert_string_equal(a, b);
        assert_int_equal(oa, ob);
        assert_int_not_equal(oa, 0);
    }
    free(img);
    uint8_t zeros[4096] = {0};
    assert_int_equal(clrmux_md_flat_size(zeros), 0);
    assert_int_equal(clrmux_md_flat_size(NULL), 0);
}

/* Every lookup on damaged images stays in bounds (ASan) and answers -1 or a string that ends
 * within the image. */
static void test_lookups_on_damaged_images(void **state)
{
    (void)state;
    if (!g_file)
        skip();
    struct clrmux_md good;
    assert_int_equal(clrmux_md_open(&good, g_file, g_len, 0), 0);
    size_t tables_at = (size_t)(good.tables - g_file), strings_at = (size_t)(good.strings - g_file);
    uint8_t *bad = malloc(g_len);
    srand(11);
    for (int round = 0; round < 200; round++) {
        memcpy(bad, g_file, g_len);
        for (int k = 0; k < 16; k++) {
            size_t at = round % 3 == 0 ? tables_at + (size_t)rand() % 64                 /* the #~ header */
                        : round % 3 == 1 ? tables_at + (size_t)rand() % good.tables_len /* the tables */
                                         : strings_at + (size_t)rand() % good.strings_len; /* the heap */
            bad[at] ^= (uint8_t)(1 + rand() % 255);
        }
        /* the heap's last byte no longer NUL: no string may run past it */
        if (round % 3 == 2)
            bad[strings_at + good.strings_len - 1] = 'x';
        struct clrmux_md md;
        if (clrmux_md_open(&md, bad, g_len, 0) != 0)
            continue;
        for (int k = 0; k < 200; k++) {
            uint32_t rid = (uint32_t)rand() % (md.typedefs + 2), mid = (uint32_t)rand() % (md.methoddefs + 2);
            const char *a, *b;
            uint32_t o;
            if (clrmux_md_type_name(&md, 0x02000000u | rid, &a, &b) == 0)
                assert_true(strlen(a) + (size_t)(a - (const char *)bad) < g_len && strlen(b) < g_len);
            if (clrmux_md_method_name(&md, 0x06000000u | mid, &a, &o) == 0)
                assert_true(strlen(a) + (size_t)(a - (const char *)bad) < g_len);
            (void)clrmux_md_enclosing_type(&md, 0x02000000u | rid, &o);
        }
    }
    free(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_methods_in_corelib),
        cmocka_unit_test(test_mapped_layout_gives_the_same_tokens),
        cmocka_unit_test(test_cut_short_and_damaged),
        cmocka_unit_test(test_names_and_nesting_in_corelib),
        cmocka_unit_test(test_layouts_give_the_same_names),
        cmocka_unit_test(test_lookups_on_damaged_images),
    };
    return cmocka_run_group_tests(tests, load_corelib, free_corelib);
}
