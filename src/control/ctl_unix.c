/* The control channel over a Unix domain socket (Linux; ctl_server.h): the folder, the socket,
 * the peer check, bounded reads and writes, the thread and its start and stop. */
#include "control/ctl_server.h"

#if !defined(_WIN32)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/lastgasp.h"
#include "common/log.h"
#include "control/ctl_path.h"
#include "control/ctl_perfmap.h"
#include "control/ctl_proto.h"

static struct {
    int perf_map, control;
    _Atomic int stop;
    int wake[2]; /* a pipe: a byte written wakes the thread's poll */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    _Atomic int listening;
    long owner;  /* the process that made the socket: a child forked from it does not remove it */
    struct clrmux_ctl_rate rate;
} g = {.wake = {-1, -1}};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The folder BASE/clrmux-UID: made 0700, or an existing one checked (a folder, not a link,
 * ours, no access for group or others). Returns 0, or -1 with the reason in why. */
static int own_folder(const char *dir, char *why, size_t whylen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s: %s", dir, errno == ELOOP || errno == ENOTDIR ? "not a folder (a symbolic link?)"
                                                                            : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    if (st.st_uid != geteuid()) {
        snprintf(why, whylen, "%s is owned by uid %lu, not by this process's user (uid %lu)", dir,
                 (unsigned long)st.st_uid, (unsigned long)geteuid());
        rc = -1;
    } else if ((st.st_mode & 077) && fchmod(fd, 0700) != 0) {
        snprintf(why, whylen, "%s has mode %04o and cannot be made 0700: %s", dir, (unsigned)(st.st_mode & 07777),
                 strerror(errno));
        rc = -1;
    }
    close(fd);
    return rc;
}

/* Sockets of processes that ended without removing theirs (killed): a connection is refused */
static void remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid;
        char tail[8];
        if (sscanf(e->d_name, "ctl-%ld.%7s", &pid, tail) != 2 || strcmp(tail, "sock") || pid == (long)getpid())
            continue;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, e->d_name) >= sizeof sa.sun_path)
            continue;
        struct stat st;
        if (lstat(sa.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode))
            continue;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0); /* never waits */
        if (fd < 0)
            continue;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == ECONNREFUSED) {
            unlink(sa.sun_path);
            LOG_DEBUG("control: removed the stale socket %s", sa.sun_path);
        }
        close(fd);
    }
    closedir(d);
}

static void unlink_socket(void)
{
    if (g.owner == (long)getpid() && atomic_exchange(&g.listening, 0) && g.path[0])
        unlink(g.path);
}

/* The listening socket, or -1 (logged). */
static int listen_socket(void)
{
    char base[4096], dir[4096], name[64], why[4400];
    if (clrmux_ctl_base(getenv(CLRMUX_CTL_DIR_ENV), getenv("TMPDIR"), base, sizeof base) != 0 ||
        clrmux_ctl_dir(base, (unsigned long)geteuid(), dir, sizeof dir) != 0 ||
        clrmux_ctl_sock_name((long)getpid(), name, sizeof name) != 0 ||
        (size_t)snprintf(g.path, sizeof g.path, "%s/%s", dir, name) >= sizeof g.path) {
        g.path[0] = 0;
        LOG_ERROR("control: the socket's path under %s is longer than a Unix socket's %zu bytes (set %s to a "
                  "shorter folder); no control channel", base, sizeof g.path - 1, CLRMUX_CTL_DIR_ENV);
        return -1;
    }
    if (own_folder(dir, why, sizeof why) != 0) {
        g.path[0] = 0;
        LOG_ERROR("control: %s; no control channel (`clrmux ctl` cannot reach this process)", why);
        return -1;
    }
    remove_stale(dir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        LOG_ERROR("control: socket: %s; no control channel", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, g.path, sizeof g.path);
    unlink(g.path); /* ours: a process of this id (in this folder's namespace) that died */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || chmod(g.path, 0600) != 0 || listen(fd, 8) != 0) {
        LOG_ERROR("control: %s: %s; no control channel", g.path, strerror(errno));
        close(fd);
        unlink(g.path);
        return -1;
    }
    g.owner = (long)getpid();
    atomic_store(&g.listening, 1);
    atexit(unlink_socket); /* an exit without Shutdown; a kill leaves it (the next process removes it) */
    LOG_INFO("control: listening on %s (clrmux ctl %ld status)", g.path, (long)getpid());
    return fd;
}

/* Writes all of p within the deadline (MONOTONIC ns). 0, or -1 (timeout, the peer gone). */
static int send_all(int fd, const char *p, size_t len, int64_t deadline)
{
    size_t done = 0;
    while (done < len) {
        int64_t left = (deadline - now_ns()) / 1000000;
        if (left <= 0)
            return -1;
        struct pollfd pf = {fd, POLLOUT, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (pf.revents & (POLLERR | POLLHUP | POLLNVAL)))
            return -1;
        ssize_t k = send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static void reply_error(int fd, const char *msg)
{
    char line[512];
    int n = snprintf(line, sizeof line, "error: %s\n", msg);
    send_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, now_ns() + 200000000);
}

static void refuse_log(const char *fmt, const char *who)
{
    uint64_t skipped = 0;
    if (clrmux_ctl_may_log(now_ns(), &skipped)) {
        char msg[300];
        snprintf(msg, sizeof msg, fmt, who);
        if (skipped)
            LOG_WARN("%s (%llu more refusals not logged)", msg, (unsigned long long)skipped);
        else
            LOG_WARN("%s", msg);
    }
}

/* One client: its credentials, the rate, its request (bounded in size and time), the reply. */
static void serve(int fd, char *reply, size_t reply_cap)
{
    struct ucred cr;
    socklen_t crl = sizeof cr;
    char who[96];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0) {
        refuse_log("control: a client whose credentials cannot be read (%s) refused", strerror(errno));
        return;
    }
    snprintf(who, sizeof who, "uid %lu pid %ld", (unsigned long)cr.uid, (long)cr.pid);
    if (cr.uid != geteuid() && cr.uid != 0) {
        char fmt[160];
        snprintf(fmt, sizeof fmt, "control: %%s refused: only this process's user (uid %lu) or root may control it",
                 (unsigned long)geteuid());
        refuse_log(fmt, who);
        reply_error(fd, "permission denied: only the process's user or root may control it");
        return;
    }
    if (!clrmux_ctl_rate_take(&g.rate, now_ns())) {
        refuse_log("control: %s refused: more than " "20 requests at once or 10 a second (busy)", who);
        reply_error(fd, "busy: at most 10 requests a second; try again");
        return;
    }
    char req[CLRMUX_CTL_MAX_REQUEST];
    size_t len = 0;
    long line = -1;
    int eof = 0;
    const int64_t deadline = now_ns() + (int64_t)CLRMUX_CTL_IO_MS * 1000000;
    while (line == -1 && !eof) {
        int64_t left = (deadline - now_ns()) / 1000000;
        if (left <= 0)
            break;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t k = recv(fd, req + len, sizeof req - len, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            eof = 1;
            break;
        }
        len += (size_t)k;
        line = clrmux_ctl_line(req, len);
    }
    if (line == -2) {
        refuse_log("control: %s refused: a request longer than 4095 bytes", who);
        reply_error(fd, "request longer than 4095 bytes");
        return;
    }
    if (line < 0 && !eof) {
        refuse_log("control: %s refused: no complete request within 2 s", who);
        reply_error(fd, "no complete request within 2 s");
        return;
    }
    if (line < 0 && !len) {
        LOG_DEBUG("control: %s closed without a request", who);
        return;
    }
    struct clrmux_out out;
    clrmux_out_init(&out, reply, reply_cap);
    clrmux_ctl_handle(req, line >= 0 ? (size_t)line : len, who, &out);
    if (send_all(fd, out.p, out.len, now_ns() + (int64_t)CLRMUX_CTL_IO_MS * 1000000) != 0)
        LOG_DEBUG("control: %s did not take its reply (gone, or not reading within 2 s)", who);
}

/* The connection's end: what the client still sends is read and dropped (200 ms, 8 MB at
 * most) until it closes its end, then ours is closed. Closing with unread input would reset
 * the connection, and the client would lose the reply it has not read yet (an oversize or
 * refused request's error). */
static void finish(int fd)
{
    shutdown(fd, SHUT_WR);
    char sink[16384];
    size_t dropped = 0;
    const int64_t deadline = now_ns() + 200000000;
    while (dropped < (8u << 20)) {
        int64_t left = (deadline - now_ns()) / 1000000;
        struct pollfd pf = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            break;
        ssize_t k = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            break;
        dropped += (size_t)k;
    }
    close(fd);
}

static void *ctl_main(void *arg)
{
    (void)arg;
    clrmux_block_termination_signals();
    pthread_setname_np(pthread_self(), "clrmux-ctl");
    if (g.perf_map)
        clrmux_ctl_perfmap_enable();
    if (!g.control || atomic_load(&g.stop))
        return NULL;
    int lfd = listen_socket();
    char *reply = lfd >= 0 ? malloc(CLRMUX_CTL_REPLY_MAX) : NULL;
    if (!reply) {
        if (lfd >= 0) {
            LOG_ERROR("control: out of memory; no control channel");
            close(lfd);
            unlink_socket();
        }
        return NULL;
    }
    clrmux_ctl_rate_init(&g.rate, CLRMUX_CTL_BURST, CLRMUX_CTL_RATE, now_ns());
    while (!atomic_load(&g.stop)) {
        struct pollfd pf[2] = {{lfd, POLLIN, 0}, {g.wake[0], POLLIN, 0}};
        int r = poll(pf, 2, -1);
        if (r < 0 && errno != EINTR)
            break;
        if (atomic_load(&g.stop))
            break;
        if (r <= 0 || !(pf[0].revents & POLLIN))
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
            continue;
        serve(cfd, reply, CLRMUX_CTL_REPLY_MAX);
        finish(cfd);
    }
    close(lfd);
    unlink_socket();
    free(reply);
    return NULL;
}

void clrmux_ctl_start(void *arg)
{
    (void)arg;
    if (atomic_load(&g.stop))
        return;
    if (pipe2(g.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        LOG_ERROR("control: pipe: %s; no control channel", strerror(errno));
        return;
    }
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t saved;
    clrmux_block_termination_signals_saving(&saved); /* born with them blocked */
    int ok = pthread_attr_init(&attr) == 0 && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
             pthread_attr_setstacksize(&attr, 1u << 20) == 0 && pthread_create(&tid, &attr, ctl_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attr);
    if (!ok)
        LOG_ERROR("control: cannot start its thread; no control channel");
}

int clrmux_ctl_configure(int control, int perf_map)
{
    g.control = control;
    g.perf_map = perf_map;
    if (!control)
        LOG_INFO("control: off (enable_control = false)");
    return control || perf_map;
}

#ifdef CLRMUX_TESTING
int clrmux_ctl_test_start(void)
{
    g.control = 1;
    clrmux_ctl_start(NULL);
    for (int i = 0; i < 400 && !atomic_load(&g.listening); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&g.listening) ? 0 : -1;
}
#endif

void clrmux_ctl_shutdown(void)
{
    atomic_store(&g.stop, 1);
    unlink_socket();
    if (g.wake[1] >= 0) {
        char b = 1;
        ssize_t r = write(g.wake[1], &b, 1);
        (void)r;
    }
}


#endif
