#include "common/platform.h"

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

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

struct module_query {
    const char *base_name, *marker;
    char *path, *found;
    size_t pathsz, foundsz;
    int hit; /* 1 found, -1 path too long */
};

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct module_query *q = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *slash = strrchr(name, '/');
    if (strcmp(slash ? slash + 1 : name, q->base_name) != 0)
        return 0;
    if (snprintf(q->path, q->pathsz, "%s", name) >= (int)q->pathsz) {
        q->hit = -1;
        return 1;
    }
    q->hit = 1;
    if (!q->marker)
        return 1;
    size_t mlen = strlen(q->marker);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || ph->p_filesz < mlen)
            continue;
        /* the file-backed part of a loaded segment is mapped and readable */
        const char *seg = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *hit = memmem(seg, ph->p_filesz, q->marker, mlen);
        if (hit) {
            size_t left = (size_t)(seg + ph->p_filesz - hit), n = 0;
            while (n < left && n + 1 < q->foundsz && hit[n])
                n++;
            memcpy(q->found, hit, n);
            q->found[n] = 0;
            break;
        }
    }
    return 1;
}

int clrmux_loaded_module(const char *base_name, const char *marker, char *path, size_t pathsz, char *found,
                         size_t foundsz)
{
    if (!base_name || !path || pathsz == 0 || (marker && (!found || foundsz == 0)))
        return -1;
    path[0] = 0;
    if (found && foundsz)
        found[0] = 0;
    struct module_query q = {base_name, marker, path, found, pathsz, foundsz, 0};
    dl_iterate_phdr(module_cb, &q);
    return q.hit == 1 ? 0 : -1;
}

int clrmux_open(const char *path, int flags, int mode) { return open(path, flags | O_CLOEXEC, mode); }

int clrmux_write_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    while (len) {
        ssize_t n = write(fd, c, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0) {
            errno = EIO;
            return -EIO;
        }
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

int clrmux_stat(const char *path, struct stat *st) { return stat(path, st); }

void clrmux_fd_clear_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

long clrmux_thread_id(void) { return (long)syscall(SYS_gettid); }

void clrmux_word_wait(uint32_t *w, uint32_t expected, long timeout_ms)
{
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

void clrmux_word_wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

int clrmux_thread_name_of(uint32_t tid, char *name, size_t namesz)
{
    if (tid == (uint32_t)syscall(SYS_gettid) && namesz >= 16) {
        /* the calling thread (a span's first on its thread): one prctl instead of opening,
         * reading and closing its comm file */
        char comm[17] = "";
        if (prctl(PR_GET_NAME, comm, 0, 0, 0) == 0 && comm[0]) {
            comm[16] = 0;
            snprintf(name, namesz, "%s", comm);
            return 0;
        }
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", (unsigned)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, name, namesz - 1);
    close(fd);
    if (n <= 0)
        return -1;
    name[n] = 0;
    name[strcspn(name, "\n")] = 0;
    return 0;
}

int clrmux_host_name(char *out, size_t outsz)
{
    if (!outsz || gethostname(out, outsz - 1) != 0)
        return -1;
    out[outsz - 1] = 0;
    return 0;
}

int clrmux_random(void *buf, size_t n)
{
    return getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n ? 0 : -1;
}

struct module_names {
    char **v;
    size_t n, cap;
};

static int collect_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct module_names *ns = data;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return 1;
        ns->v = v;
        ns->cap = cap;
    }
    ns->v[ns->n] = strdup(info->dlpi_name);
    if (ns->v[ns->n])
        ns->n++;
    return 0;
}

int clrmux_each_module(int (*fn)(void *lib, const char *path, void *ctx), void *ctx)
{
    /* names are copied first: dlopen is not called under dl_iterate_phdr's lock */
    struct module_names ns = {0};
    dl_iterate_phdr(collect_module, &ns);
    int r = 0;
    for (size_t i = 0; i < ns.n; i++) {
        if (!r) {
            void *h = dlopen(ns.v[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h) {
                r = fn(h, ns.v[i], ctx);
                dlclose(h);
            }
        }
        free(ns.v[i]);
    }
    free(ns.v);
    return r;
}

int clrmux_pin_module_of(const void *addr)
{
    char self[4096];
    if (clrmux_module_path_of(addr, self, sizeof self) != 0)
        return -1;
    return dlopen(self, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) ? 0 : -1;
}

int clrmux_process_barrier_register(void)
{
    return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0 ? 0 : -1;
}

int clrmux_process_barrier(void) { return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0 ? 0 : -1; }
