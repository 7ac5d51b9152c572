/* The tracer's output file: safe open, whole lines, size cap and rotation (see spanfile.h). */
#include "tracer/spanfile.h"
#include "common/platform.h"
#if defined(_WIN32)
#include "common/trust.h"
#include <io.h>
#endif

#include <errno.h>
#include <fcntl.h>
#if defined(__linux__)
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct clrmux_spanfile {
    int fd;
    uint64_t size, max_bytes;
    unsigned max_files;
    int regular; /* 0: a character device (no cap, no rotation) */
    uint64_t reserved_to; /* blocks reserved up to this offset (prealloc) */
    int no_prealloc;      /* fallocate failed once: not tried again */
    uint64_t spans_in[CLRMUX_SPANFILE_MAX_FILES]; /* [0]: the current file, [i]: path.i */
    struct clrmux_spanfile_stats st;
    char path[]; /* followed by room for the rotated names */
};

/* One byte at offset off (pread; Windows: a seek, as the descriptor is not shared and every
 * write appends). */
static ssize_t read_at(int fd, char *c, off_t off)
{
#if defined(_WIN32)
    if (_lseeki64(fd, off, SEEK_SET) < 0)
        return -1;
    return read(fd, c, 1);
#else
    return pread(fd, c, 1, off);
#endif
}

/* Opens path for appending (read too: to look at its last byte), refusing what someone else
 * could have planted (spanfile.h). */
static int open_checked(const char *path, uint64_t *size, int *regular, char *err, size_t errsz)
{
    int fd = clrmux_open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            snprintf(err, errsz, "it is a symbolic link (not followed)");
        else if (e == ENXIO)
            snprintf(err, errsz, "it is not a regular file (a FIFO or socket)");
        else
            snprintf(err, errsz, "%s", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    char buf[160];
    if (fstat(fd, &st) != 0) {
        snprintf(buf, sizeof buf, "fstat failed: %s", strerror(errno));
        why = buf;
    } else if (S_ISCHR(st.st_mode)) {
        /* a character device (/dev/null, a terminal): only a privileged user can create one,
         * so nobody planted it; written, never rotated */
    } else if (!S_ISREG(st.st_mode)) {
        why = "it is not a regular file";
#if defined(_WIN32)
    } else if (clrmux_fd_owner_trusted(fd, buf, sizeof buf) != 0) {
        why = buf;
#else
    } else if (st.st_uid != geteuid()) {
        snprintf(buf, sizeof buf, "it is owned by uid %u, not by this process's user (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        why = buf;
#endif
    } else if (st.st_nlink > 1) {
        snprintf(buf, sizeof buf, "it has %lu hard links", (unsigned long)st.st_nlink);
        why = buf;
    }
    if (why) {
        snprintf(err, errsz, "%s; refused", why);
        close(fd);
        errno = EPERM;
        return -1;
    }
    clrmux_fd_clear_nonblock(fd);
    *regular = S_ISREG(st.st_mode);
    *size = *regular ? (uint64_t)st.st_size : 0;
    if (*regular && st.st_size > 0) { /* a writer killed mid-line: start ours on a line of their own */
        char last = '\n';
        if (read_at(fd, &last, st.st_size - 1) == 1 && last != '\n' && clrmux_write_all(fd, "\n", 1) == 0)
            (*size)++;
    }
    return fd;
}

#if defined(__linux__)
/* Deleting a file is cheap; freeing its pages is not: the last close of a 100 MB file just
 * written spends ~10 ms of CPU dropping its page cache (perf, this VM), and at 1 M spans/s
 * the default cap rotates a few times a second. So the name goes at once (unlink, which never
 * follows a symbolic link), and the inode's last reference, an O_PATH descriptor taken just
 * before (O_NOFOLLOW: no open of what it names, no side effect, no permission needed), is
 * closed by a short detached thread, 10 nice levels below its creator. At most REAPERS at a
 * time: past that, or without a thread, it is closed here. The disk space comes back when that
 * thread has closed it. */
#define REAPERS 2
static atomic_int reapers;

static void *reap(void *arg)
{
    /* its own name: perf and ps count its work apart from the export thread's, whose name it
     * would otherwise inherit (and tests find the export thread by its name) */
    pthread_setname_np(pthread_self(), "clrmux-reap");
    /* background work: below the export thread (setpriority with 0 is this thread on Linux) */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0)
        setpriority(PRIO_PROCESS, 0, nice + 10 > 19 ? 19 : nice + 10);
    close((int)(intptr_t)arg);
    atomic_fetch_sub(&reapers, 1);
    return NULL;
}

static int delete_file(const char *path)
{
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (unlink(path) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    if (fd < 0)
        return 0;
    if (atomic_fetch_add(&reapers, 1) < REAPERS) {
        pthread_attr_t a;
        pthread_t th;
        int ok = pthread_attr_init(&a) == 0;
        if (ok) {
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&a, 64 * 1024);
            ok = pthread_create(&th, &a, reap, (void *)(intptr_t)fd) == 0;
            pthread_attr_destroy(&a);
        }
        if (ok)
            return 0;
    }
    atomic_fetch_sub(&reapers, 1);
    close(fd);
    return 0;
}
#else
static int delete_file(const char *path)
{
    return unlink(path);
}
#endif

#if defined(__linux__)
/* Every block a buffered append adds to a file costs the writer the file system's block
 * bookkeeping (ext4's delayed allocation: a reservation, its extent status tree, quota): about
 * a quarter of write(2)'s CPU at the lines' ~400 bytes a span (this VM, 420 KB lines: 243 ->
 * 187 ns per KB). Blocks reserved ahead with fallocate(FALLOC_FL_KEEP_SIZE), PREALLOC bytes at
 * a time and never past the cap, take that work out of the writes; the file's size stays that
 * of what is written. What is reserved past the end when the file is rotated away or closed
 * stays with it (at most PREALLOC bytes on disk, not in its size) until it is deleted: giving
 * it back would mean truncating a file another process may be appending to. A file system
 * without fallocate fails it once and is not asked again. */
#define PREALLOC (2u << 20)
static void prealloc(struct clrmux_spanfile *f, size_t len)
{
    if (!f->regular || f->no_prealloc || f->size + len <= f->reserved_to)
        return;
    uint64_t from = f->size > f->reserved_to ? f->size : f->reserved_to;
    uint64_t to = f->size + len + PREALLOC;
    if (f->max_bytes && to > f->max_bytes)
        to = f->max_bytes > f->size + len ? f->max_bytes : f->size + len;
    if (to <= from)
        return;
    if (fallocate(f->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from)) == 0)
        f->reserved_to = to;
    else
        f->no_prealloc = 1; /* not supported (or no space: the write says so) */
}
#else
static void prealloc(struct clrmux_spanfile *f, size_t len)
{
    (void)f;
    (void)len;
}
#endif

static void rotated_name(const struct clrmux_spanfile *f, unsigned i, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s.%u", f->path, i);
}

struct clrmux_spanfile *clrmux_spanfile_open(const char *path, uint64_t max_bytes, unsigned max_files, char *err,
                                             size_t errsz)
{
    if (max_files < 1)
        max_files = 1;
    if (max_files > CLRMUX_SPANFILE_MAX_FILES)
        max_files = CLRMUX_SPANFILE_MAX_FILES;
    size_t plen = strlen(path);
    struct clrmux_spanfile *f = calloc(1, sizeof *f + plen + 1);
    if (!f) {
        snprintf(err, errsz, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    memcpy(f->path, path, plen + 1);
    f->max_bytes = max_bytes;
    f->max_files = max_files;
    f->fd = open_checked(path, &f->size, &f->regular, err, errsz);
    if (f->fd < 0) {
        int e = errno;
        free(f);
        errno = e;
        return NULL;
    }
    return f;
}

/* Moves the current file aside (or empties it) and opens a new one. */
static int rotate(struct clrmux_spanfile *f, char *err, size_t errsz)
{
    size_t n = strlen(f->path) + 16;
    char *a = malloc(n), *b = malloc(n);
    int rc = -1;
    if (!a || !b) {
        snprintf(err, errsz, "out of memory rotating %s", f->path);
        errno = ENOMEM;
        goto out;
    }
    f->st.rotations++;
    if (f->max_files == 1) {
        if (ftruncate(f->fd, 0) != 0) {
            snprintf(err, errsz, "cannot empty %s: %s", f->path, strerror(errno));
            goto out;
        }
        f->st.files_deleted++;
        f->st.spans_dropped += f->spans_in[0];
        f->spans_in[0] = 0;
        f->size = 0;
        f->reserved_to = 0;
        rc = 0;
        goto out;
    }
    unsigned last = f->max_files - 1;
    rotated_name(f, last, a, n);
    if (delete_file(a) == 0) {
        f->st.files_deleted++;
        f->st.spans_dropped += f->spans_in[last];
    }
    for (unsigned i = last; i > 1; i--) {
        rotated_name(f, i - 1, a, n);
        rotated_name(f, i, b, n);
        if (rename(a, b) != 0 && errno != ENOENT) {
            snprintf(err, errsz, "cannot rename %s to %s: %s", a, b, strerror(errno));
            goto out;
        }
        f->spans_in[i] = f->spans_in[i - 1];
        f->spans_in[i - 1] = 0;
    }
    rotated_name(f, 1, b, n);
    if (rename(f->path, b) != 0) {
        snprintf(err, errsz, "cannot rename %s to %s: %s", f->path, b, strerror(errno));
        goto out;
    }
    f->spans_in[1] = f->spans_in[0];
    f->spans_in[0] = 0;
    uint64_t size = 0;
    char why[300];
    int regular = 1;
    int fd = open_checked(f->path, &size, &regular, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errsz, "cannot open %s after rotating it: %s", f->path, why);
        goto out;
    }
    close(f->fd);
    f->fd = fd;
    f->size = size;
    f->reserved_to = 0;
    rc = 0;
out:
    free(a);
    free(b);
    return rc;
}

int clrmux_spanfile_write(struct clrmux_spanfile *f, const char *line, size_t len, size_t nspans, char *err,
                          size_t errsz)
{
    int rc = 0;
    if (f->regular && f->max_bytes && f->size > 0 && f->size + len > f->max_bytes && rotate(f, err, errsz) != 0) {
        /* keep the cap: empty the current file instead (its spans are counted as dropped) */
        int e = errno;
        if (ftruncate(f->fd, 0) == 0) {
            f->st.files_deleted++;
            f->st.spans_dropped += f->spans_in[0];
            f->spans_in[0] = 0;
            f->size = 0;
            f->reserved_to = 0;
        }
        errno = e;
        rc = 1;
    }
    prealloc(f, len);
    if (clrmux_write_all(f->fd, line, len) != 0) {
        snprintf(err, errsz, "writing %s failed: %s", f->path, strerror(errno));
        return -1;
    }
    f->size += len;
    f->spans_in[0] += nspans;
    f->st.lines++;
    f->st.spans += nspans;
    f->st.bytes += len;
    return rc;
}

void clrmux_spanfile_stats(const struct clrmux_spanfile *f, struct clrmux_spanfile_stats *out)
{
    if (f)
        *out = f->st;
    else
        memset(out, 0, sizeof *out);
}

void clrmux_spanfile_close(struct clrmux_spanfile *f)
{
    if (!f)
        return;
    close(f->fd);
    free(f);
}
