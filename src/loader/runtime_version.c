/* Which .NET runtime clrmux runs in (runtime_version.h): ICorProfilerInfo3::
 * GetRuntimeInformation on .NET 5 and later (their exact version); .NET Core 3.1 and earlier
 * answer 4.0.30319, so there the shared framework's folder name of libcoreclr.so, else its
 * "@(#)Version" string. */
#include "loader/runtime_version.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform.h"

#define SCCSID_MARKER "@(#)Version "

/* "8.0.33" or "10.0.0-rc.1.2": three dot-separated numbers, an optional "-suffix" */
static int folder_version(const char *s, int *major)
{
    int parts = 0;
    const char *p = s;
    for (;;) {
        if (!isdigit((unsigned char)*p))
            return 0;
        if (parts == 0)
            *major = atoi(p);
        while (isdigit((unsigned char)*p))
            p++;
        parts++;
        if (*p == '.' && parts < 3) {
            p++;
            continue;
        }
        break;
    }
    return parts == 3 && (*p == 0 || *p == '-') && *major > 0;
}

void clrmux_runtime_version_decide(const char *coreclr_path, const char *sccsid, int info_major, int info_minor,
                                   int info_build, int info_qfe, struct clrmux_runtime_version *out)
{
    out->major = 0;
    snprintf(out->text, sizeof out->text, "unknown");
    if (info_major >= 5) { /* .NET 5 and later answer their exact version (8.0.33.0) */
        out->major = info_major;
        snprintf(out->text, sizeof out->text, "%d.%d.%d", info_major, info_minor, info_build);
        return;
    }
    if (coreclr_path && *coreclr_path) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s", coreclr_path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            const char *folder = strrchr(dir, '/');
            folder = folder ? folder + 1 : dir;
            int major = 0;
            if (folder_version(folder, &major)) {
                out->major = major;
                snprintf(out->text, sizeof out->text, "%.40s", folder);
                return;
            }
        }
    }
    if (sccsid && strncmp(sccsid, SCCSID_MARKER, strlen(SCCSID_MARKER)) == 0) {
        const char *v = sccsid + strlen(SCCSID_MARKER);
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (sscanf(v, "%u.%u.%u.%u", &a, &b, &c, &d) == 4) {
            if (a >= 5) { /* .NET 5 and later: the file version starts with major.minor */
                out->major = (int)a;
                snprintf(out->text, sizeof out->text, "%u.%u (file version %u.%u.%u.%u)", a, b, a, b, c, d);
                return;
            }
            if (a == 4 && b >= 700) { /* .NET Core 3.x */
                out->major = 3;
                snprintf(out->text, sizeof out->text, "Core 3.x (file version %u.%u.%u.%u)", a, b, c, d);
                return;
            }
            if (a == 4) { /* .NET Core 2.x: 4.6.x */
                out->major = 2;
                snprintf(out->text, sizeof out->text, "Core 2.x (file version %u.%u.%u.%u)", a, b, c, d);
                return;
            }
        }
    }
    if (info_major > 0) {
        /* 4.0.30319: .NET Core 3.1 or earlier, which one cannot be told from this */
        out->major = info_major;
        snprintf(out->text, sizeof out->text, "Core (GetRuntimeInformation says %d.%d.%d.%d)", info_major, info_minor,
                 info_build, info_qfe);
    }
}

void clrmux_runtime_version_detect(int info_major, int info_minor, int info_build, int info_qfe,
                                   struct clrmux_runtime_version *out)
{
    char path[1024] = "", sccsid[160] = "";
    if (info_major < 5 && clrmux_loaded_module("libcoreclr.so", NULL, path, sizeof path, NULL, 0) == 0) {
        clrmux_runtime_version_decide(path, NULL, 0, 0, 0, 0, out);
        if (out->major > 0)
            return; /* the folder named the version: no need to read the image */
        clrmux_loaded_module("libcoreclr.so", SCCSID_MARKER, path, sizeof path, sccsid, sizeof sccsid);
    }
    clrmux_runtime_version_decide(path, sccsid, info_major, info_minor, info_build, info_qfe, out);
}
