/* Who may put code or configuration into the process: the rule sshd (StrictModes) and sudo
 * apply to the files they trust.
 *
 * A path is trusted when its real file (symlinks resolved) and every folder above it, up
 * to "/", are owned by root or by the process's effective user and are writable by neither
 * group nor others. A sticky folder (mode +t, like /tmp) may be group- or world-writable:
 * no one else can replace the entries under it, and those entries are checked on their own
 * (so a `mktemp -d` folder in /tmp is trusted). When the path given is a symlink, the link
 * itself and the folders that hold it are checked too (a link planted in /tmp by another
 * user is refused). */
#ifndef CLRMUX_TRUST_H
#define CLRMUX_TRUST_H

#include <stddef.h>

/* Checks `path` as above. Writes its resolved real path into real[realsz] (or "" when it
 * does not resolve). Returns 0 when trusted; -1 when not, with a one-line reason in
 * why[whysz] naming the offending file or folder, its owner or mode ("/tmp/x is
 * world-writable (mode 0777)"), or why it cannot be checked (errno text). */
int clrmux_path_trusted(const char *path, char *real, size_t realsz, char *why, size_t whysz);

#if defined(_WIN32)
/* Windows: whether the open file `fd` is owned by a principal clrmux trusts (this process's
 * user, BUILTIN\Administrators, LocalSystem, TrustedInstaller: the owners clrmux_path_trusted
 * accepts), the counterpart of comparing st_uid with geteuid(). Returns 0, or -1 with a
 * one-line reason in why[whysz] (its owner, or why it cannot be read). */
int clrmux_fd_owner_trusted(int fd, char *why, size_t whysz);
#endif

#endif
