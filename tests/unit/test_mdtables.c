/* src/common/mdtables.c: method tokens read from ECMA-335 metadata tables, against the
 * runtime's own System.Private.CoreLib.dll (CLRMUX_TEST_CORELIB, or the first one under
 * /usr/share/dotnet and /usr/lib/dotnet), as on disk and laid out as the runtime maps it, and
 * against that file cut short and damaged (ASan: nothing read out of bounds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <cmocka.h>

#include "common/mdtables.h"

static uint8_t *g_file;
static size_t g_len;

static int load_corelib(void **state)
{
    (void)state;
    const char *path = getenv("CLRMUX_TEST_CORELIB");
    glob_t g = {0};
    if (!path || !*path) {
        if (glob("/usr/share/dotnet/shared/Microsoft.NETCore.App/*/System.Private.CoreLib.dll", 0, NULL, &g) != 0 &&
            glob("/usr/lib/dotnet/shared/Microsoft.NETCore.App/*/System.Private.CoreLib.dll", 0, NULL, &g) != 0) {
            const char *ci = getenv("CI");
            fprintf(stderr, "test_mdtables: no System.Private.CoreLib.dll (install the .NET SDK or set "
                            "CLRMUX_TEST_CORELIB)%s\n", ci && !strcmp(ci, "true") ? "" : ": skipped");
            return ci && !strcmp(ci, "true") ? -1 : 0;
        }
        path = g.gl_pathv[g.gl_pathc - 1];
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    g_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_file = malloc(g_len);
    int ok = g_file && fread(g_file, 1, g_len, f) == g_len;
    fclose(f);
    globfree(&g);
    return ok ? 0 : -1;
}

static int free_corelib(void **state)
{
    (void)state;
    free(g_file);
    return 0;
}

static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* The file laid out as loaded: headers, then each section at its RVA (as the runtime maps it). */
static uint8_t *map_image(size_t *size)
{
    uint32_t pe = rd32(g_file + 0x3c);
    unsigned nsec = rd16(g_file + pe + 6), optsize = rd16(g_file + pe + 20);
    *size = rd32(g_file + pe + 24 + 56);
    uint8_t *img = calloc(1, *size);
    assert_non_null(img);
    uint32_t headers = rd32(g_file + pe + 24 + 60);
    memcpy(img, g_file, headers);
    for (unsigned i = 0; i < nsec; i++) {
        const uint8_t *s = g_file + pe + 24 + optsize + 40 * i;
        uint32_t va = rd32(s + 12), raw_size = rd32(s + 16), raw = rd32(s + 20);
        assert_true(va + raw_size <= *size || rd32(s + 8) < raw_size);
        memcpy(img + va, g_file + raw, raw_size < *size - va ? raw_size : *size - va);
    }
    return img;
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_methods_in_corelib),
        cmocka_unit_test(test_mapped_layout_gives_the_same_tokens),
        cmocka_unit_test(test_cut_short_and_damaged),
    };
    return cmocka_run_group_tests(tests, load_corelib, free_corelib);
}
