/* clrmux_path_trusted: ownership and mode checks of a file and the folders above it. */
#include "common/trust.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One file or folder: owned by root or `euid`, not group/world-writable unless a sticky
 * folder. Returns 0 or -1 with why[] set. */
static int check_entry(const char *p, uid_t euid, char *why, size_t whysz)
{
    struct stat st;
    if (lstat(p, &st) != 0) {
        snprintf(why, whysz, "cannot check %s: %s", p, strerror(errno));
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != euid) {
        snprintf(why, whysz, "%s is owned by uid %u, neither root nor this process's user (uid %u)", p,
                 (unsigned)st.st_uid, (unsigned)euid);
        return -1;
    }
    if (S_ISLNK(st.st_mode))
        return 0; /* a link's own mode means nothing; its folder is checked */
    if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))
        return 0; /* sticky: only an entry's owner can replace it, and entries are checked */
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, whysz, "%s is %s-writable (mode %04o)", p, (st.st_mode & S_IWOTH) ? "world" : "group",
                 (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

/* `p` (absolute, no symlinks) and every folder above it. */
static int check_chain(const char *p, uid_t euid, char *why, size_t whysz)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", p) >= (int)sizeof buf) {
        snprintf(why, whysz, "path too long");
        return -1;
    }
    for (;;) {
        if (check_entry(buf[0] ? buf : "/", euid, why, whysz) != 0)
            return -1;
        char *slash = strrchr(buf, '/');
        if (!slash || !buf[0])
            return 0;
        *slash = 0; /* "/a/b" -> "/a" -> "" (the root) */
    }
}

int clrmux_path_trusted(const char *path, char *real, size_t realsz, char *why, size_t whysz)
{
    uid_t euid = geteuid();
    char resolved[PATH_MAX];
    if (realsz)
        real[0] = 0;
    if (!realpath(path, resolved)) {
        snprintf(why, whysz, "cannot resolve %s: %s", path, strerror(errno));
        return -1;
    }
    if (realsz)
        snprintf(real, realsz, "%s", resolved);
    if (check_chain(resolved, euid, why, whysz) != 0)
        return -1;
    /* the name as given: a symlink, and the folder that holds it, can be replaced too */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char dir[PATH_MAX], rdir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            snprintf(dir, sizeof dir, "/");
        else if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
        if (!realpath(dir, rdir)) {
            snprintf(why, whysz, "cannot resolve %s: %s", dir, strerror(errno));
            return -1;
        }
        if (check_chain(rdir, euid, why, whysz) != 0)
            return -1;
        if (st.st_uid != 0 && st.st_uid != euid) {
            snprintf(why, whysz, "%s is a symlink owned by uid %u, neither root nor this process's user (uid %u)",
                     path, (unsigned)st.st_uid, (unsigned)euid);
            return -1;
        }
    }
    return 0;
}
