#include "common/platform.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *clrmux_lib_open(const char *path, char *err, size_t errsz)
{
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, errsz, "%s", e ? e : "dlopen failed");
    }
    return h;
}

void *clrmux_lib_sym(void *lib, const char *name) { return dlsym(lib, name); }

int clrmux_module_path_of(const void *addr, char *out, size_t outsz)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fname)
        return -1;
    char resolved[4096];
    const char *p = info.dli_fname;
    if (realpath(p, resolved))
        p = resolved;
    if (strlen(p) + 1 > outsz)
        return -1;
    strcpy(out, p);
    return 0;
}

static void base_name(const char *path, char *out, size_t outsz)
{
    const char *slash = strrchr(path, '/');
    snprintf(out, outsz, "%s", slash ? slash + 1 : path);
}

int clrmux_process_names(char *exe, size_t exesz, char *app, size_t appsz)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    base_name(buf, exe, exesz);
    app[0] = 0;
    if (strcmp(exe, "dotnet") != 0)
        return 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* argv[0] is the host; the app is the first argument ending in .dll */
    for (char *p = buf + strlen(buf) + 1; p < buf + n; p += strlen(p) + 1) {
        size_t len = strlen(p);
        if (len > 4 && strcmp(p + len - 4, ".dll") == 0) {
            base_name(p, app, appsz);
            app[strlen(app) - 4] = 0;
            break;
        }
    }
    return 0;
}
