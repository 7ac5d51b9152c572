/* What both transports of the control channel share (ctl_server.h): serving one request
 * with its log line, and the limit on refusal log lines. The transports: ctl_unix.c (Unix
 * domain socket), ctl_win.c (named pipe). */
#include "control/ctl_server.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "control/ctl_exec.h"
#include "control/ctl_proto.h"

void clrmux_ctl_handle(const char *req, size_t len, const char *who, struct clrmux_out *reply)
{
    int ok = 0;
    clrmux_ctl_serve(req, len, reply, &ok);
    /* the command as the log shows it: the request line, cut, control bytes made visible */
    char shown[160];
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < sizeof shown; i++) {
        unsigned char c = (unsigned char)req[i];
        if (c < 0x20 || c == 0x7F) {
            snprintf(shown + k, sizeof shown - k, "\\x%02X", c);
            k += 4;
        } else {
            shown[k++] = (char)c;
        }
    }
    shown[k] = 0;
    const char *more = len > k ? "..." : "";
    int reads = !strncmp(req, "status", 6) || !strncmp(req, "trace list", 10);
    if (!ok) {
        char why[200];
        const char *e = reply->p + (reply->len >= 7 ? 7 : 0); /* after "error: " */
        snprintf(why, sizeof why, "%.*s", (int)strcspn(e, "\n"), e);
        LOG_INFO("control: '%s%s' from %s refused: %s", shown, more, who, why);
    } else if (reads) {
        LOG_DEBUG("control: '%s' from %s", shown, who);
    } else {
        LOG_INFO("control: '%s%s' from %s: done", shown, more, who);
    }
}

int clrmux_ctl_may_log(int64_t now_ns, uint64_t *suppressed)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int64_t window;
    static int used;
    static uint64_t skipped;
    pthread_mutex_lock(&lock);
    if (now_ns - window >= 60000000000ll) {
        window = now_ns;
        used = 0;
    }
    int may = used < CLRMUX_CTL_LOG_BURST;
    if (may) {
        used++;
        *suppressed = skipped;
        skipped = 0;
    } else {
        skipped++;
    }
    pthread_mutex_unlock(&lock);
    return may;
}
