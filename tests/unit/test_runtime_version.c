/* Unit tests of the runtime version clrmux logs and acts on (src/loader/runtime_version.c):
 * GetRuntimeInformation on .NET 5+, the shared framework's folder name and the
 * "@(#)Version" string of libcoreclr.so for .NET Core 3.1 (which says 4.0.30319), and the
 * loaded-module lookup behind them (src/common/platform_posix.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/platform.h"
#include "loader/runtime_version.h"
#include "platform_fixture.h"

static void decide(const char *path, const char *sccsid, int a, int b, int c, int d, int want_major,
                   const char *want_text)
{
    struct clrmux_runtime_version v;
    clrmux_runtime_version_decide(path, sccsid, a, b, c, d, &v);
    assert_int_equal(v.major, want_major);
    assert_string_equal(v.text, want_text);
}

static void test_net5_and_later_from_runtime_information(void **state)
{
    (void)state;
    decide(NULL, NULL, 8, 0, 33, 0, 8, "8.0.33");
    decide("/opt/app/libcoreclr.so", NULL, 10, 0, 12, 0, 10, "10.0.12");
    /* the folder name does not override an exact answer */
    decide("/x/shared/Microsoft.NETCore.App/9.0.1/libcoreclr.so", NULL, 9, 0, 22, 0, 9, "9.0.22");
}

static void test_core31_from_folder_name(void **state)
{
    (void)state;
    decide("/usr/share/dotnet/shared/Microsoft.NETCore.App/3.1.3/libcoreclr.so",
           "@(#)Version 4.700.20.11803 @Commit: c5d3d752", 4, 0, 30319, 0, 3, "3.1.3");
    decide("/r/shared/Microsoft.NETCore.App/5.0.0-rc.2.20475.5/libcoreclr.so", NULL, 4, 0, 30319, 0, 5,
           "5.0.0-rc.2.20475.5");
}

static void test_core31_self_contained_from_sccsid(void **state)
{
    (void)state;
    /* an app folder is not a version: the file version says 3.x */
    decide("/srv/myapp/libcoreclr.so", "@(#)Version 4.700.20.11803 @Commit: c5d3d752", 4, 0, 30319, 0, 3,
           "Core 3.x (file version 4.700.20.11803)");
    decide("/srv/myapp/libcoreclr.so", "@(#)Version 4.6.27817.3 @Commit: abc", 4, 0, 30319, 0, 2,
           "Core 2.x (file version 4.6.27817.3)");
    decide("/srv/myapp/libcoreclr.so", "@(#)Version 8.0.3326.52219 @Commit: da7a9bea", 0, 0, 0, 0, 8,
           "8.0 (file version 8.0.3326.52219)");
}

static void test_fallbacks(void **state)
{
    (void)state;
    decide(NULL, NULL, 4, 0, 30319, 0, 4, "Core (GetRuntimeInformation says 4.0.30319.0)");
    decide("", "", 0, 0, 0, 0, 0, "unknown");
    /* folder names that are not versions, malformed strings */
    decide("/a/8.0/libcoreclr.so", "@(#)Version x.y", 0, 0, 0, 0, 0, "unknown");
    decide("/a/8.0.1.2/libcoreclr.so", NULL, 0, 0, 0, 0, 0, "unknown");
    decide("/a/v8.0.1/libcoreclr.so", NULL, 0, 0, 0, 0, 0, "unknown");
    decide("libcoreclr.so", "Version 8.0.1.2", 0, 0, 0, 0, 0, "unknown");
}

static void test_loaded_module_lookup(void **state)
{
    (void)state;
    char path[1024], found[128];
    /* libc (kernel32) is loaded in every process; a marker it does not hold is "" */
    assert_int_equal(clrmux_loaded_module(SYSTEM_LIB, "clrmux-no-such-marker-", path, sizeof path, found, sizeof found),
                     0);
    assert_non_null(strstr(path, SYSTEM_LIB));
    assert_string_equal(found, "");
    /* a marker it holds: the whole NUL-terminated string from there */
    assert_int_equal(clrmux_loaded_module(SYSTEM_LIB, SYSTEM_LIB_MARKER, path, sizeof path, found, sizeof found), 0);
    assert_memory_equal(found, SYSTEM_LIB_MARKER, strlen(SYSTEM_LIB_MARKER));
    /* not loaded, or a path that does not fit */
    assert_int_equal(clrmux_loaded_module("libcoreclr.so", NULL, path, sizeof path, NULL, 0), -1);
    char tiny[4];
    assert_int_equal(clrmux_loaded_module(SYSTEM_LIB, NULL, tiny, sizeof tiny, NULL, 0), -1);
    /* the detection outside a runtime falls back to what it is given */
    struct clrmux_runtime_version v;
    clrmux_runtime_version_detect(4, 0, 30319, 0, &v);
    assert_int_equal(v.major, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net5_and_later_from_runtime_information),
        cmocka_unit_test(test_core31_from_folder_name),
        cmocka_unit_test(test_core31_self_contained_from_sccsid),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_loaded_module_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
