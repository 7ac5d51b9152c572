/* POSIX calls the unit tests use that mingw-w64's C runtime lacks, for their Windows builds
 * (make windows: the tests run under Wine). Force-included (-include) by the Makefile. */
#ifndef CLRMUX_TESTS_WIN_POSIX_COMPAT_H
#define CLRMUX_TESTS_WIN_POSIX_COMPAT_H
#include <direct.h>
#include <io.h>
#include <stdlib.h>

/* mkdtemp(3): the XXXXXX of `t` replaced, the folder created; NULL on failure. */
static inline char *mkdtemp(char *t) { return _mktemp(t) && _mkdir(t) == 0 ? t : NULL; }
/* setenv(3) / unsetenv(3) through the C runtime's environment (_putenv_s; an empty value
 * removes a variable there, as unsetenv does). */
static inline int setenv(const char *name, const char *value, int overwrite)
{
    if (!overwrite && getenv(name))
        return 0;
    return _putenv_s(name, value) == 0 ? 0 : -1;
}
static inline int unsetenv(const char *name) { return _putenv_s(name, "") == 0 ? 0 : -1; }
/* realpath(3): the absolute form of `path` (_fullpath), NULL when the file does not exist. */
static inline char *realpath(const char *path, char *resolved)
{
    return _access(path, 0) == 0 ? _fullpath(resolved, path, 260) : NULL;
}
#endif
