/* One overlapped read or write on a named pipe within a time limit (Windows), shared by the
 * control channel's server (ctl_win.c) and `clrmux.exe ctl` (src/cli/ctl_reach_win.c). */
#ifndef CLRMUX_CONTROL_CTL_PIPE_WIN_H
#define CLRMUX_CONTROL_CTL_PIPE_WIN_H
#if defined(_WIN32)
#include <windows.h>

/* Reads (writing 0) or writes (writing 1) up to LEN bytes at BUF on PIPE, a handle opened with
 * FILE_FLAG_OVERLAPPED, waiting on EV (a manual-reset event the caller owns; reset here) for at
 * most MS milliseconds, or until STOP (an event; NULL for none) is set. Returns the bytes moved
 * and sets *ERR: 0 (done; for a read in message mode, the message is whole), ERROR_MORE_DATA (a
 * read got a part of a message: read on), WAIT_TIMEOUT (the time limit or STOP: the I/O was
 * cancelled and nothing more moves), or the Win32 error of ReadFile/WriteFile/GetOverlappedResult
 * (ERROR_BROKEN_PIPE: the other end closed). */
DWORD clrmux_ctl_pipe_io(HANDLE pipe, HANDLE ev, HANDLE stop, void *buf, DWORD len, int writing, DWORD ms,
                         DWORD *err);

#endif
#endif
