/* The Windows platform layer (src/common/platform_win.c) in a real Windows process (under
 * Wine in make test: tests/cross.sh windows): a DLL loaded by a UTF-16 path with non-ASCII
 * characters, its export, its own path from an address in it, the process's names, a loaded
 * module with the marker in its sections, and files opened without following reparse points.
 * A plain C program (no cmocka for mingw-w64 here): prints "ok"/"FAIL" per check and exits 1
 * when one failed. Usage: test_platform.exe DIR (DIR holds testdll.dll). */
#include <errno.h>
#include <io.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "common/platform.h"

static int failed, passed;
#define CHECK(cond, ...)                                                                                    \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            passed++;                                                                                       \
            printf("ok   - " __VA_ARGS__);                                                                  \
        } else {                                                                                            \
            failed++;                                                                                       \
            printf("FAIL - " __VA_ARGS__);                                                                  \
        }                                                                                                   \
        printf("\n");                                                                                       \
    } while (0)

static int copy_file_utf8(const char *from, const char *to)
{
    wchar_t wf[1024], wt[1024];
    MultiByteToWideChar(CP_UTF8, 0, from, -1, wf, 1024);
    MultiByteToWideChar(CP_UTF8, 0, to, -1, wt, 1024);
    return CopyFileW(wf, wt, FALSE) ? 0 : -1;
}

/* clrmux_each_module's callback: 7 for the test's child DLL when its export is found */
static int find_child(void *lib, const char *path, void *ctx)
{
    (void)ctx;
    const char *base = strrchr(path, '/');
    return base && _stricmp(base + 1, "child.dll") == 0 && clrmux_lib_sym(lib, "clrmux_test_answer") ? 7 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_platform.exe DIR\n");
        return 2;
    }
    char err[512], dir[1024], path[1024], got[4096], found[256];
    /* a folder whose name needs UTF-16: "ünï 子" */
    snprintf(dir, sizeof dir, "%s\\\xC3\xBCn\xC3\xAF \xE5\xAD\x90", argv[1]);
    wchar_t wdir[1024];
    MultiByteToWideChar(CP_UTF8, 0, dir, -1, wdir, 1024);
    CreateDirectoryW(wdir, NULL);
    snprintf(path, sizeof path, "%s\\child.dll", dir);
    char src[1024];
    snprintf(src, sizeof src, "%s\\testdll.dll", argv[1]);
    CHECK(copy_file_utf8(src, path) == 0, "the test DLL copied to a non-ASCII folder");

    void *h = clrmux_lib_open(path, err, sizeof err);
    CHECK(h != NULL, "clrmux_lib_open loads a DLL by a UTF-8 path with non-ASCII characters (%s)", h ? "" : err);
    int (*answer)(void) = NULL;
    if (h) {
        void *sym = clrmux_lib_sym(h, "clrmux_test_answer");
        memcpy(&answer, &sym, sizeof answer);
    }
    CHECK(answer && answer() == 42, "clrmux_lib_sym finds its export and it runs");
    CHECK(h && clrmux_lib_sym(h, "no_such_export") == NULL, "clrmux_lib_sym: NULL for a missing export");
    err[0] = 0;
    char missing[1100];
    snprintf(missing, sizeof missing, "%s\\missing.dll", dir);
    CHECK(clrmux_lib_open(missing, err, sizeof err) == NULL && strstr(err, "LoadLibraryExW: error 126"),
          "clrmux_lib_open: a missing DLL gives the loader's reason (%s)", err);

    /* clrmux's own paths use '/' (every Windows file API accepts it): the expected path too */
    char slashed[1024];
    snprintf(slashed, sizeof slashed, "%s", path);
    for (char *c = slashed; *c; c++)
        if (*c == '\\')
            *c = '/';
    got[0] = 0;
    int rc = answer ? clrmux_module_path_of((const void *)answer, got, sizeof got) : -1;
    CHECK(rc == 0 && _stricmp(got, slashed) == 0, "clrmux_module_path_of: the DLL's own UTF-8 path (%s)", got);
    rc = clrmux_module_path_of((const void *)&main, got, sizeof got);
    CHECK(rc == 0 && strstr(got, "test_platform.exe"), "clrmux_module_path_of: the executable (%s)", got);
    CHECK(clrmux_module_path_of((const void *)&main, got, 4) == -1, "clrmux_module_path_of: -1 when it does not fit");

    char exe[256], app[256];
    rc = clrmux_process_names(exe, sizeof exe, app, sizeof app);
    CHECK(rc == 0 && strcmp(exe, "test_platform") == 0 && app[0] == 0,
          "clrmux_process_names: exe \"%s\" (without .exe), app \"%s\"", exe, app);

    found[0] = 0;
    rc = clrmux_loaded_module("child.dll", "@(#)Version ", got, sizeof got, found, sizeof found);
    CHECK(rc == 0 && _stricmp(got, slashed) == 0 && strcmp(found, "@(#)Version 9.8.7 clrmux test dll") == 0,
          "clrmux_loaded_module: the loaded DLL's path and the marker in its sections (\"%s\")", found);
    rc = clrmux_loaded_module("kernel32.dll", NULL, got, sizeof got, NULL, 0);
    CHECK(rc == 0 && strstr(got, "kernel32"), "clrmux_loaded_module: kernel32.dll (%s)", got);
    CHECK(clrmux_loaded_module("coreclr.dll", NULL, got, sizeof got, NULL, 0) == -1,
          "clrmux_loaded_module: -1 for a module that is not loaded");

    /* files without following reparse points */
    char conf[1100], link[1100];
    snprintf(conf, sizeof conf, "%s\\loader.conf", dir);
    FILE *f = clrmux_fopen_noreparse(conf, "w", err, sizeof err);
    CHECK(f != NULL, "clrmux_fopen_noreparse creates a file in a non-ASCII folder (%s)", f ? "" : err);
    if (f) {
        fputs("[loader]\n", f);
        fclose(f);
    }
    f = clrmux_fopen_noreparse(conf, "r", err, sizeof err);
    char line[64] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    CHECK(strcmp(line, "[loader]\n") == 0, "clrmux_fopen_noreparse reads it back");
    CHECK(clrmux_fopen_noreparse(dir, "r", err, sizeof err) == NULL, "clrmux_fopen_noreparse: a directory is refused (%s)", err);
    snprintf(link, sizeof link, "%s\\link.conf", dir);
    wchar_t wlink[1100], wconf[1100];
    MultiByteToWideChar(CP_UTF8, 0, link, -1, wlink, 1100);
    MultiByteToWideChar(CP_UTF8, 0, conf, -1, wconf, 1100);
    if (CreateSymbolicLinkW(wlink, wconf, 0x2 /* SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE */)) {
        err[0] = 0;
        f = clrmux_fopen_noreparse(link, "r", err, sizeof err);
        /* Windows: "it is a reparse point"; Wine cannot open its links with
         * FILE_FLAG_OPEN_REPARSE_POINT at all (file not found): either way not followed */
        CHECK(f == NULL, "clrmux_fopen_noreparse: a symbolic link is not followed (%s)", err);
        if (f)
            fclose(f);
    } else {
        printf("skip - CreateSymbolicLinkW failed (error %lu): the reparse-point refusal is not checked here\n",
               (unsigned long)GetLastError());
    }

    /* clrmux_open: a descriptor; O_NOFOLLOW refuses a link (or Wine: cannot open it) */
    int fd = clrmux_open(conf, O_RDONLY | O_NOFOLLOW, 0);
    CHECK(fd >= 0, "clrmux_open reads a file with O_NOFOLLOW (errno %d)", fd < 0 ? errno : 0);
    if (fd >= 0)
        _close(fd);
    errno = 0;
    CHECK(clrmux_open(missing, O_RDONLY, 0) == -1 && errno == ENOENT, "clrmux_open: ENOENT for a missing file");
    if (GetFileAttributesW(wlink) != INVALID_FILE_ATTRIBUTES) {
        fd = clrmux_open(link, O_RDONLY | O_NOFOLLOW, 0);
        CHECK(fd == -1, "clrmux_open: O_NOFOLLOW does not follow a symbolic link (errno %d)", errno);
    }
    /* the loaded modules, the pin, the barrier, absolute paths */
    CHECK(clrmux_each_module(find_child, NULL) == 7, "clrmux_each_module sees child.dll and its export");
    CHECK(answer && clrmux_pin_module_of((const void *)answer) == 0, "clrmux_pin_module_of pins child.dll");
    CHECK(clrmux_process_barrier_register() == 0 && clrmux_process_barrier() == 0,
          "clrmux_process_barrier (FlushProcessWriteBuffers)");
    CHECK(clrmux_path_is_absolute("C:\\x") && clrmux_path_is_absolute("c:/x") && clrmux_path_is_absolute("\\\\srv\\s") &&
              clrmux_path_is_absolute("/x") && !clrmux_path_is_absolute("x/y") && !clrmux_path_is_absolute("C:x"),
          "clrmux_path_is_absolute: drive, UNC and rooted paths; relative and drive-relative are not");
    CHECK(clrmux_thread_id() == (long)GetCurrentThreadId(), "clrmux_thread_id");
    printf("windows platform: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
