/* The control channel's names (ctl_path.h). Pure string work, also built into the launcher. */
#include "control/ctl_path.h"

#include <stdio.h>
#include <string.h>

static int fits(int n, size_t outsz) { return n >= 0 && (size_t)n < outsz ? 0 : -1; }

int clrmux_ctl_base(const char *control_dir, const char *tmpdir, char *out, size_t outsz)
{
    const char *b = control_dir && control_dir[0] == '/' ? control_dir : tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp";
    size_t n = strlen(b);
    while (n > 1 && b[n - 1] == '/')
        n--;
    if (n >= outsz)
        return -1;
    memcpy(out, b, n);
    out[n] = 0;
    return 0;
}

int clrmux_ctl_dir(const char *base, unsigned long uid, char *out, size_t outsz)
{
    return fits(snprintf(out, outsz, "%s%sclrmux-%lu", base, strcmp(base, "/") ? "/" : "", uid), outsz);
}

int clrmux_ctl_sock_name(long pid, char *out, size_t outsz)
{
    return fits(snprintf(out, outsz, "ctl-%ld.sock", pid), outsz);
}

int clrmux_ctl_pipe_name(unsigned long pid, char *out, size_t outsz)
{
    return fits(snprintf(out, outsz, "\\\\.\\pipe\\clrmux-ctl-%lu", pid), outsz);
}
