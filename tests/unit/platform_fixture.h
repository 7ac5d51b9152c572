/* What differs between the platforms the unit tests run on (Linux; Windows x64 under Wine,
 * make windows), so that the tests themselves are written once: the fake child libraries'
 * file names (build/fake/lib<name>.so, build/win-x64/fake/lib<name>.dll: FAKE_EXT), the null
 * device, and a system library every process has loaded with a string it holds
 * (SYSTEM_LIB, SYSTEM_LIB_MARKER: libc's banner, a kernel32 export's name). On Windows
 * tests/win/posix_compat.h (force-included) supplies the POSIX calls the C runtime lacks. */
#ifndef CLRMUX_TESTS_PLATFORM_FIXTURE_H
#define CLRMUX_TESTS_PLATFORM_FIXTURE_H

#if defined(_WIN32)
#define FAKE_EXT ".dll"
#define NULL_DEVICE "NUL"
#define SYSTEM_LIB "kernel32.dll"
#define SYSTEM_LIB_MARKER "GetModuleHandleW"
#else
#define FAKE_EXT ".so"
#define NULL_DEVICE "/dev/null"
#define SYSTEM_LIB "libc.so.6"
#define SYSTEM_LIB_MARKER "GNU C Library"
#endif

#endif
