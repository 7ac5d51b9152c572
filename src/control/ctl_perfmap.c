/* The runtime's perf map on request (ctl_perfmap.h): the EnablePerfMap diagnostics IPC
 * command, sent to this process's own diagnostics socket. */
#include "control/ctl_perfmap.h"

#if !defined(_WIN32)
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define IPC_MAGIC "DOTNET_IPC_V1" /* 14 bytes with its NUL */
#define IPC_HEADER 20             /* magic[14], uint16 size, uint8 command set, uint8 command id, uint16 reserved */
#define CMDSET_PROCESS 0x04
#define CMD_ENABLE_PERFMAP 0x05
#define CMDSET_SERVER 0xFF
#define CMD_OK 0x00
#define PERFMAP_TYPE_PERFMAP 3u   /* PerfMapType::PERFMAP: /tmp/perf-PID.map (no jitdump) */

/* The diagnostics socket of this process: dotnet-diagnostic-PID-KEY-socket in TMPDIR (the
 * runtime's default listen port). Returns 0 with its path, or -1. */
static int find_socket(char *out, size_t outsz)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tmp && tmp[0] == '/' ? tmp : "/tmp");
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dotnet-diagnostic-%ld-", (long)getpid());
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || l < 7 || strcmp(e->d_name + l - 7, "-socket") != 0)
            continue;
        if ((size_t)snprintf(out, outsz, "%s/%s", dir, e->d_name) < outsz)
            found = 0;
        break;
    }
    closedir(d);
    return found;
}

static int io_all(int fd, void *buf, size_t len, int writing, int timeout_ms)
{
    size_t done = 0;
    while (done < len) {
        struct pollfd p = {fd, writing ? POLLOUT : POLLIN, 0};
        int r = poll(&p, 1, timeout_ms);
        if (r <= 0)
            return -1;
        ssize_t k = writing ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

int clrmux_ctl_perfmap_enable(void)
{
    const char *env = getenv("DOTNET_PerfMapEnabled");
    if (!env)
        env = getenv("COMPlus_PerfMapEnabled");
    if (env && *env && strcmp(env, "0") != 0) {
        LOG_INFO("perf_map: DOTNET_PerfMapEnabled=%s is set: the runtime writes its perf map already", env);
        return 0;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (find_socket(sa.sun_path, sizeof sa.sun_path) != 0) {
        LOG_WARN("perf_map: no diagnostics socket of this process in $TMPDIR (DOTNET_EnableDiagnostics=0?); no perf "
                 "map (DOTNET_PerfMapEnabled=1 at start, or `clrmux run --perf-map`, makes one)");
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        LOG_WARN("perf_map: cannot connect to %s: %s; no perf map", sa.sun_path, strerror(errno));
        goto out;
    }
    unsigned char msg[IPC_HEADER + 4];
    memset(msg, 0, sizeof msg);
    memcpy(msg, IPC_MAGIC, sizeof IPC_MAGIC);
    uint16_t size = sizeof msg;
    memcpy(msg + 14, &size, 2); /* little-endian, as the runtime reads it (x64, arm64) */
    msg[16] = CMDSET_PROCESS;
    msg[17] = CMD_ENABLE_PERFMAP;
    uint32_t type = PERFMAP_TYPE_PERFMAP;
    memcpy(msg + IPC_HEADER, &type, 4);
    unsigned char ans[IPC_HEADER + 4];
    if (io_all(fd, msg, sizeof msg, 1, 2000) != 0 || io_all(fd, ans, sizeof ans, 0, 2000) != 0) {
        LOG_WARN("perf_map: the runtime did not answer EnablePerfMap on %s within 2 s; no perf map", sa.sun_path);
        goto out;
    }
    uint32_t code;
    memcpy(&code, ans + IPC_HEADER, 4);
    if (memcmp(ans, IPC_MAGIC, sizeof IPC_MAGIC) != 0 || ans[16] != CMDSET_SERVER) {
        LOG_WARN("perf_map: unexpected answer to EnablePerfMap on %s; no perf map", sa.sun_path);
    } else if (ans[17] != CMD_OK || code != 0) {
        LOG_WARN("perf_map: the runtime refused EnablePerfMap (0x%08X: it needs .NET 8 or later); set "
                 "DOTNET_PerfMapEnabled=1 at start instead (`clrmux run --perf-map`)", (unsigned)code);
    } else {
        LOG_INFO("perf_map: the runtime writes its perf map, methods compiled so far included: /tmp/perf-%ld.map",
                 (long)getpid());
        rc = 0;
    }
out:
    close(fd);
    return rc;
}

#else

#include "common/log.h"

int clrmux_ctl_perfmap_enable(void)
{
    LOG_WARN("perf_map: perf maps are a Linux feature; ignored on Windows");
    return -1;
}

#endif
