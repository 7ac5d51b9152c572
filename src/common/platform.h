/* The small platform interface: dynamic libraries and process identity.
 * Linux/macOS use dlfcn (platform_posix.c); Windows uses LoadLibraryExW / GetProcAddress /
 * GetModuleFileNameW behind the same functions (platform_win.c), with UTF-8 paths converted to
 * UTF-16 there. */
#ifndef CLRMUX_PLATFORM_H
#define CLRMUX_PLATFORM_H

#include <stddef.h>

/* Opens a shared library by absolute path. Returns a handle, or NULL with a
 * human-readable reason (the loader's own message) copied into err[errsz]. */
void *clrmux_lib_open(const char *path, char *err, size_t errsz);
/* Looks a symbol up in a handle from clrmux_lib_open. Returns NULL when absent. */
void *clrmux_lib_sym(void *lib, const char *name);
/* The absolute path of the shared object that contains `addr` (e.g. a function of
 * libclrmux.so itself), found with dladdr, never from environment variables. Returns 0, or
 * -1 when it cannot be found or does not fit in out[outsz]. */
int clrmux_module_path_of(const void *addr, char *out, size_t outsz);
/* The process's name as filters match it: the executable's base name ("dotnet", "MyApp")
 * into exe[exesz], and, when the executable is the `dotnet` host running an app
 * (`dotnet [options] path/App.dll`), the app's base name without ".dll" into app[appsz]
 * (else ""). Returns 0, or -1 when /proc (or the OS equivalent) cannot be read. */
int clrmux_process_names(char *exe, size_t exesz, char *app, size_t appsz);
/* Finds the loaded shared object whose file name is `base_name` (e.g. "libcoreclr.so"; on
 * Linux through dl_iterate_phdr). Its absolute path goes to path[pathsz]; when `marker` is
 * not NULL, the NUL-terminated string that starts with `marker` in its mapped file-backed
 * segments (e.g. the "@(#)Version " string of the runtime) goes to found[foundsz] ("" when
 * absent). Returns 0, or -1 when no such object is loaded or its path does not fit. */
int clrmux_loaded_module(const char *base_name, const char *marker, char *path, size_t pathsz, char *found,
                         size_t foundsz);

#if defined(_WIN32)
#include <stdio.h>
/* Windows: opens the file at UTF-8 `path` with fopen's `mode` ("r", "w", "a", with "b"),
 * without following a reparse point: a symbolic link or junction at `path` is refused, as
 * O_NOFOLLOW does on Linux. Returns the stream (the caller fcloses it), or NULL with the
 * reason in err[errsz]. */
FILE *clrmux_fopen_noreparse(const char *path, const char *mode, char *err, size_t errsz);
#endif

#endif
