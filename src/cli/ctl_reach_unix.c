/* Reaching a process's control channel on Linux (ctl_reach.h), for `clrmux ctl` (ctl.c).
 *
 * It finds the process's socket from what /proc says of it (its effective user, its
 * CLRMUX_CONTROL_DIR or TMPDIR, its id in its own PID namespace) and reaches it through
 * /proc/PID/root (a process in another mount namespace, a service with PrivateTmp), sends the
 * request line and reads the reply until the process closes the connection. When the process
 * has no control channel it says why: not a process, not .NET, not under clrmux (then
 * `clrmux attach`), or clrmux there without one. */
#if !defined(_WIN32)
#include "cli/ctl_reach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl_path.h"

#define REPLY_TIMEOUT_MS 60000 /* trace add waits for the ReJIT thread, 10 s per module at most */

/* The value of `key` in the NUL-separated file /proc/PID/environ, or 0 with out "" (-1 when
 * the file cannot be read). */
static int environ_of(long pid, const char *key, char *out, size_t outsz)
{
    char path[64];
    out[0] = 0;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t kl = strlen(key);
    for (size_t i = 0; i < n;) {
        const char *e = buf + i;
        size_t l = strlen(e);
        if (l > kl && !strncmp(e, key, kl) && e[kl] == '=') {
            snprintf(out, outsz, "%s", e + kl + 1);
            break;
        }
        i += l + 1;
    }
    return 0;
}

/* From /proc/PID/status: the effective uid and the id in the process's own PID namespace. */
static int status_of(long pid, unsigned long *euid, long *nspid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int got = 0;
    *nspid = pid;
    while (fgets(line, sizeof line, f)) {
        unsigned long r, e;
        if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
            *euid = e;
            got = 1;
        } else if (!strncmp(line, "NSpid:", 6)) {
            char *last = strrchr(line, '\t');
            if (!last)
                last = strrchr(line, ' ');
            if (last)
                *nspid = strtol(last + 1, NULL, 10);
        }
    }
    fclose(f);
    return got ? 0 : -1;
}

/* Whether /proc/PID/maps names a file whose base name starts with `prefix`: 1, 0, or -1
 * (unreadable). */
static int maps_have(long pid, const char *prefix)
{
    char path[64], line[4096 + 128];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *slash = strrchr(line, '/');
        if (slash && !strncmp(slash + 1, prefix, strlen(prefix)))
            found = 1;
    }
    fclose(f);
    return found;
}

/* Why process pid has no socket to connect to (errno of the connect in err). */
static void explain(long pid, unsigned long uid, const char *sock, int err)
{
    if (err == EACCES || err == EPERM) {
        fprintf(stderr, "clrmux ctl: permission denied: only the user of process %ld (uid %lu) or root may control it\n",
                pid, uid);
        return;
    }
    if (err == ECONNREFUSED) {
        fprintf(stderr, "clrmux ctl: nothing listens on %s: clrmux in process %ld has stopped its control channel (it "
                        "is shutting down), or the socket is left from an ended process\n", sock, pid);
        return;
    }
    int clrmux = maps_have(pid, "libclrmux.so");
    int dotnet = maps_have(pid, "libcoreclr.so");
    if (clrmux == 1)
        fprintf(stderr, "clrmux ctl: clrmux runs in process %ld but has no control channel (%s: %s): its loader.conf "
                        "says enable_control = false, an older clrmux, clrmux still starting, or the channel could not "
                        "start (its log says why)\n", pid, sock, strerror(err));
    else if (dotnet == 1)
        fprintf(stderr, "clrmux ctl: process %ld is a .NET process that does not run under clrmux; `clrmux attach %ld "
                        "--config FILE` loads clrmux into it (then `clrmux ctl %ld ...` works)\n", pid, pid, pid);
    else if (dotnet == 0)
        fprintf(stderr, "clrmux ctl: process %ld is not a .NET process (no libcoreclr.so in it), so not under clrmux\n",
                pid);
    else
        fprintf(stderr, "clrmux ctl: no control channel at %s (%s), and process %ld's mappings cannot be read to say "
                        "why: is it under clrmux? (`clrmux attach %ld --config FILE` loads clrmux into a .NET "
                        "process)\n", sock, strerror(err), pid, pid);
}

int clrmux_ctl_reach(long pid, const char *req, size_t len, char **out, size_t *out_len)
{
    unsigned long uid = 0;
    long nspid = pid;
    if (status_of(pid, &uid, &nspid) != 0) {
        fprintf(stderr, "clrmux ctl: no process %ld\n", pid);
        return 1;
    }
    char cdir[4096], tmpdir[4096], base[4096], dir[4096], name[64], root[64], where[8300];
    if (environ_of(pid, CLRMUX_CTL_DIR_ENV, cdir, sizeof cdir) != 0) { /* not ours to read: as we would */
        snprintf(cdir, sizeof cdir, "%s", getenv(CLRMUX_CTL_DIR_ENV) ? getenv(CLRMUX_CTL_DIR_ENV) : "");
        snprintf(tmpdir, sizeof tmpdir, "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "");
    } else {
        environ_of(pid, "TMPDIR", tmpdir, sizeof tmpdir);
    }
    if (clrmux_ctl_base(cdir, tmpdir, base, sizeof base) != 0 || clrmux_ctl_dir(base, uid, dir, sizeof dir) != 0 ||
        clrmux_ctl_sock_name(nspid, name, sizeof name) != 0) {
        fprintf(stderr, "clrmux ctl: the control folder of process %ld is too long a path\n", pid);
        return 1;
    }
    /* through the process's own view of the file system when we may see it (its mount
     * namespace: containers, PrivateTmp), else ours; then by a relative name from the folder,
     * which has no length limit */
    snprintf(root, sizeof root, "/proc/%ld/root", pid);
    snprintf(where, sizeof where, "%s%s", root, dir);
    if (chdir(where) != 0) {
        int e = errno;
        if ((e == EACCES || e == EPERM) && access(root, X_OK) == 0) {
            explain(pid, uid, dir, e);
            return 1;
        }
        snprintf(where, sizeof where, "%s", dir);
        if (chdir(where) != 0) {
            e = errno;
            snprintf(where, sizeof where, "%s/%s", dir, name);
            explain(pid, uid, where, e);
            return 1;
        }
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", name);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        snprintf(where, sizeof where, "%s/%s", dir, name);
        explain(pid, uid, where, e);
        return 1;
    }
    for (size_t done = 0; done < len;) {
        ssize_t k = send(fd, req + done, len - done, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            fprintf(stderr, "clrmux ctl: process %ld closed the connection: %s\n", pid, strerror(errno));
            return 1;
        }
        done += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    size_t cap = 1 << 16, got = 0;
    char *reply = malloc(cap + 1);
    if (!reply) {
        fprintf(stderr, "clrmux ctl: out of memory\n");
        close(fd);
        return 1;
    }
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, REPLY_TIMEOUT_MS);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            fprintf(stderr, "clrmux ctl: no reply from process %ld within %d s\n", pid, REPLY_TIMEOUT_MS / 1000);
            return 1;
        }
        if (got == cap) {
            char *more = realloc(reply, cap * 2 + 1);
            if (!more)
                break;
            reply = more;
            cap *= 2;
        }
        ssize_t k = recv(fd, reply + got, cap - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    reply[got] = 0;
    *out = reply;
    *out_len = got;
    return 0;
}
#endif
