/* POSIX calls the unit tests use that mingw-w64's C runtime lacks, for their Windows builds
 * (make windows: the tests run under Wine). Force-included (-include) by the Makefile. */
#ifndef CLRMUX_TESTS_WIN_POSIX_COMPAT_H
#define CLRMUX_TESTS_WIN_POSIX_COMPAT_H
#include <direct.h>
#include <io.h>
#include <stdlib.h>

/* mkdtemp(3): the XXXXXX of `t` replaced, the folder created; NULL on failure. */
static inline char *mkdtemp(char *t) { return _mktemp(t) && _mkdir(t) == 0 ? t : NULL; }
#endif
