/* One overlapped read or write on a named pipe within a time limit (Windows; ctl_pipe_win.h). */
#include "control/ctl_pipe_win.h"

#if defined(_WIN32)
#include <string.h>

DWORD clrmux_ctl_pipe_io(HANDLE pipe, HANDLE ev, HANDLE stop, void *buf, DWORD len, int writing, DWORD ms,
                         DWORD *err)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.hEvent = ev;
    ResetEvent(ev);
    DWORD n = 0;
    BOOL done = writing ? WriteFile(pipe, buf, len, &n, &ov) : ReadFile(pipe, buf, len, &n, &ov);
    DWORD e = done ? 0 : GetLastError();
    if (e == ERROR_IO_PENDING) {
        HANDLE hs[2] = {ev, stop};
        if (WaitForMultipleObjects(stop ? 2 : 1, hs, FALSE, ms) != WAIT_OBJECT_0) {
            CancelIo(pipe);
            GetOverlappedResult(pipe, &ov, &n, TRUE);
            *err = WAIT_TIMEOUT;
            return 0;
        }
        e = GetOverlappedResult(pipe, &ov, &n, FALSE) ? 0 : GetLastError();
    }
    *err = e;
    return n;
}
#endif
