/* Where a process's control channel listens, shared by the process (ctl_unix.c, ctl_win.c)
 * and the client (`clrmux ctl`, src/cli/ctl.c).
 *
 * Linux: a Unix domain socket BASE/clrmux-UID/ctl-PID.sock. BASE is the process's
 * CLRMUX_CONTROL_DIR, else its TMPDIR, else /tmp (the client reads them from
 * /proc/PID/environ, which the process's own user and root may read); UID is the process's
 * effective user id, PID its id in its own PID namespace. The folder is the user's, mode 0700:
 * only that user (and root) can reach the socket.
 * Windows: the named pipe \\.\pipe\clrmux-ctl-PID. */
#ifndef CLRMUX_CONTROL_CTL_PATH_H
#define CLRMUX_CONTROL_CTL_PATH_H

#include <stddef.h>

#define CLRMUX_CTL_DIR_ENV "CLRMUX_CONTROL_DIR"

/* BASE from the value of CLRMUX_CONTROL_DIR and TMPDIR (either may be NULL or ""), into
 * out[outsz]: "/tmp" when both are unset. A relative value is ignored. Returns 0, or -1 when
 * it does not fit. */
int clrmux_ctl_base(const char *control_dir, const char *tmpdir, char *out, size_t outsz);
/* "BASE/clrmux-UID" into out[outsz]; 0, or -1 when it does not fit. */
int clrmux_ctl_dir(const char *base, unsigned long uid, char *out, size_t outsz);
/* "ctl-PID.sock" into out[outsz]; 0, or -1. */
int clrmux_ctl_sock_name(long pid, char *out, size_t outsz);
/* "\\.\pipe\clrmux-ctl-PID" into out[outsz]; 0, or -1. */
int clrmux_ctl_pipe_name(unsigned long pid, char *out, size_t outsz);

#endif
