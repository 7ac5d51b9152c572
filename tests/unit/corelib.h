/* tests/unit/corelib.h: the runtime's own System.Private.CoreLib.dll for the unit tests that
 * read real ECMA-335 metadata (test_mdtables, test_unhandled), as on disk and laid out as the
 * runtime maps it. Header-only (static functions), after <cmocka.h>; builds for Linux and
 * Windows (opendir, so also under Wine, where the Linux SDK is seen through drive Z:).
 *
 * Which file: CLRMUX_TEST_CORELIB when set, else the highest version (numerically: 10.0 above
 * 9.0) under the SDK's shared/Microsoft.NETCore.App folders. Without one a test skips, except
 * under CI (CI=true), where it fails: a machine with the SDK must run these tests. */
#ifndef CLRMUX_TEST_CORELIB_H
#define CLRMUX_TEST_CORELIB_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether version folder name a is above b ("10.0.2" above "9.0.11"): dot-separated numbers
 * compared in turn, a longer version above its prefix. */
static int corelib_version_above(const char *a, const char *b)
{
    for (;;) {
        char *ea, *eb;
        unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
        if (x != y)
            return x > y;
        if (*ea != '.' || *eb != '.')
            return *ea == '.' && *eb != '.';
        a = ea + 1;
        b = eb + 1;
    }
}

/* Whether a missing CoreLib fails the test (CI) rather than skipping it. */
static int corelib_required(void)
{
    const char *ci = getenv("CI");
    return ci && !strcmp(ci, "true");
}

/* CoreLib's file read into a malloc'd buffer (*len bytes; the caller frees it), or NULL with
 * a line on stderr naming `test` when there is none (or it cannot be read). */
static uint8_t *corelib_read(const char *test, size_t *len)
{
    static const char *const roots[] = {
#ifdef _WIN32
        "Z:/usr/share/dotnet/shared/Microsoft.NETCore.App", "Z:/usr/lib/dotnet/shared/Microsoft.NETCore.App",
        "C:/Program Files/dotnet/shared/Microsoft.NETCore.App",
#else
        "/usr/share/dotnet/shared/Microsoft.NETCore.App", "/usr/lib/dotnet/shared/Microsoft.NETCore.App",
#endif
    };
    char path[1024] = "";
    const char *env = getenv("CLRMUX_TEST_CORELIB");
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    for (size_t i = 0; i < sizeof roots / sizeof *roots && !path[0]; i++) {
        DIR *d = opendir(roots[i]);
        if (!d)
            continue;
        char best[256] = "";
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && strlen(e->d_name) < sizeof best &&
                (!best[0] || corelib_version_above(e->d_name, best)))
                snprintf(best, sizeof best, "%s", e->d_name);
        closedir(d);
        if (best[0])
            snprintf(path, sizeof path, "%s/%s/System.Private.CoreLib.dll", roots[i], best);
    }
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    uint8_t *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        *len = (size_t)n;
        return buf;
    }
    if (f)
        fclose(f);
    free(buf);
    fprintf(stderr, "%s: no readable System.Private.CoreLib.dll%s%s (install the .NET SDK or set CLRMUX_TEST_CORELIB)%s\n",
            test, path[0] ? " at " : "", path, corelib_required() ? "" : ": skipped");
    return NULL;
}

static uint32_t corelib_rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t corelib_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* The PE file `file` (len bytes, a well-formed image: the runtime's own CoreLib) laid out as
 * the runtime maps it: headers, then each section at its RVA; a calloc'd buffer of SizeOfImage
 * bytes (*size; the caller frees it). Fails the test without memory. */
static uint8_t *corelib_map(const uint8_t *file, size_t len, size_t *size)
{
    uint32_t pe = corelib_rd32(file + 0x3c);
    assert_true(pe + 24 + 64 <= len);
    unsigned nsec = corelib_rd16(file + pe + 6), optsize = corelib_rd16(file + pe + 20);
    *size = corelib_rd32(file + pe + 24 + 56); /* SizeOfImage */
    uint8_t *img = calloc(1, *size);
    assert_non_null(img);
    uint32_t headers = corelib_rd32(file + pe + 24 + 60); /* SizeOfHeaders */
    memcpy(img, file, headers < *size ? headers : *size);
    for (unsigned i = 0; i < nsec; i++) {
        const uint8_t *s = file + pe + 24 + optsize + 40 * i;
        uint32_t va = corelib_rd32(s + 12), raw_size = corelib_rd32(s + 16), raw = corelib_rd32(s + 20);
        assert_true((size_t)raw + raw_size <= len);
        if (va < *size)
            memcpy(img + va, file + raw, raw_size < *size - va ? raw_size : *size - va);
    }
    return img;
}

#endif
