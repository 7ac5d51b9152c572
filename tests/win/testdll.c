/* A DLL for tests/win/test_platform.c: one export, and a version marker in its read-only
 * data for clrmux_loaded_module to find. */
#include <stdint.h>

__attribute__((used)) static const char marker[] = "@(#)Version 9.8.7 clrmux test dll";

__declspec(dllexport) int clrmux_test_answer(void) { return 42 + (int)(marker[0] == '@') - 1; }
