/* The platform half of `clrmux ctl` (ctl.c holds the rest: arguments, the request line, the
 * reply's printing): reaching a process's control channel and taking its reply.
 *   ctl_reach_unix.c   Linux: the Unix domain socket found from /proc/PID (control/ctl_path.h)
 *   ctl_reach_win.c    Windows: the named pipe \\.\pipe\clrmux-ctl-PID */
#ifndef CLRMUX_CLI_CTL_REACH_H
#define CLRMUX_CLI_CTL_REACH_H

#include <stddef.h>

/* Sends req[0..len) (one request line, its LF included) to the control channel of process
 * pid and takes the whole reply. Returns 0 with *reply (malloc'd, NUL-terminated, bytes
 * *got; the caller frees it; *got 0 when the process closed without a reply), or 1 after
 * saying on stderr ("clrmux ctl: ...") why the process cannot be reached or did not answer in
 * time: no such process, not .NET, not under clrmux, no channel, not allowed. */
int clrmux_ctl_reach(long pid, const char *req, size_t len, char **reply, size_t *got);

#endif
