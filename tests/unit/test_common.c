/* src/common: HRESULT names (hresult.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "clrmux/corprof.h"
#include "common/hresult.h"
#include "common/ilsize.h"

static void test_hresult_names(void **state)
{
    (void)state;
    assert_string_equal(clrmux_hresult_name(CORPROF_E_RUNTIME_UNINITIALIZED), "CORPROF_E_RUNTIME_UNINITIALIZED");
    assert_string_equal(clrmux_hresult_name(CORPROF_E_PROFILER_CANCEL_ACTIVATION), "CORPROF_E_PROFILER_CANCEL_ACTIVATION");
    assert_string_equal(clrmux_hresult_name(CORPROF_E_IMMUTABLE_FLAGS_SET), "CORPROF_E_IMMUTABLE_FLAGS_SET");
    assert_string_equal(clrmux_hresult_name(E_NOINTERFACE), "E_NOINTERFACE");
    assert_string_equal(clrmux_hresult_name(E_FAIL), "E_FAIL");
    assert_string_equal(clrmux_hresult_name(E_OUTOFMEMORY), "E_OUTOFMEMORY");
    assert_string_equal(clrmux_hresult_name(S_OK), "S_OK");
    assert_null(clrmux_hresult_name((int32_t)0x8badf00d));
}

static void test_hresult_str(void **state)
{
    (void)state;
    char buf[CLRMUX_HRESULT_STR_MAX];
    assert_string_equal(clrmux_hresult_str(CORPROF_E_RUNTIME_UNINITIALIZED, buf),
                        "CORPROF_E_RUNTIME_UNINITIALIZED (0x80131371)");
    assert_string_equal(clrmux_hresult_str((int32_t)0x8badf00d, buf), "0x8BADF00D");
    assert_string_equal(HR_STR(E_POINTER), "E_POINTER (0x80004003)");
    /* every corprof.h CORPROF_E_* the ABI headers define has a name */
    static const HRESULT all[] = {
        CORPROF_E_FUNCTION_NOT_COMPILED, CORPROF_E_DATAINCOMPLETE, CORPROF_E_FUNCTION_NOT_IL,
        CORPROF_E_NOT_MANAGED_THREAD, CORPROF_E_CALL_ONLY_FROM_INIT, CORPROF_E_NOT_YET_AVAILABLE,
        CORPROF_E_STACKSNAPSHOT_UNSAFE, CORPROF_E_UNSUPPORTED_CALL_SEQUENCE, CORPROF_E_REJIT_NOT_ENABLED,
        CORPROF_E_SUSPENSION_IN_PROGRESS, CORPROF_E_NOT_GC_OBJECT, CORPROF_E_MODULE_IS_ENC,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *n = clrmux_hresult_name(all[i]);
        assert_non_null(n);
        assert_true(strncmp(n, "CORPROF_E_", 10) == 0);
    }
}

/* ECMA-335 II.25.4: a body's size from its own headers (what SetILFunctionBody's runtime reads). */
static void test_il_body_size(void **state)
{
    (void)state;
    const uint8_t tiny[] = {(3 << 2) | 2, 0x00, 0x00, 0x2A};
    assert_int_equal(clrmux_il_body_size(tiny, sizeof tiny), 4);
    assert_int_equal(clrmux_il_body_size(tiny, 3), 0); /* past the bound */
    uint8_t fat[64] = {0};
    fat[0] = 0x03 | 0x10, fat[1] = 0x30; /* fat, InitLocals, 3 dwords */
    fat[4] = 5;                          /* code size */
    assert_int_equal(clrmux_il_body_size(fat, sizeof fat), 17);
    fat[0] |= 0x08;                      /* MoreSects: at 20 (17 rounded up to 4) */
    fat[20] = 0x01, fat[21] = 4 + 12;    /* small EH table, one clause */
    assert_int_equal(clrmux_il_body_size(fat, sizeof fat), 36);
    fat[20] = 0x01 | 0x40 | 0x80, fat[21] = 4 + 24, fat[22] = 0, fat[23] = 0; /* fat EH table, more */
    fat[48] = 0x01, fat[49] = 4 + 12;
    assert_int_equal(clrmux_il_body_size(fat, sizeof fat), 64);
    assert_int_equal(clrmux_il_body_size(fat, 63), 0);
    fat[49] = 2; /* a section smaller than its own header */
    assert_int_equal(clrmux_il_body_size(fat, sizeof fat), 0);
    fat[1] = 0x20; /* fat header of 2 dwords */
    assert_int_equal(clrmux_il_body_size(fat, sizeof fat), 0);
    const uint8_t bad[] = {0x50, 0x51};
    assert_int_equal(clrmux_il_body_size(bad, sizeof bad), 0);
    assert_int_equal(clrmux_il_body_size(NULL, 10), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hresult_names),
        cmocka_unit_test(test_il_body_size),
        cmocka_unit_test(test_hresult_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
