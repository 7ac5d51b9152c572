/* The control channel's protocol (see ctl_server.h for the channel itself): one request line
 * from the client, one reply from the process, then the connection closes.
 *
 *   request  := command [SP argument...] LF        at most CLRMUX_CTL_MAX_REQUEST bytes, LF
 *                                                  included (a CR before the LF is ignored)
 *   reply    := ("ok" | "error: " message) LF body  the body: text, or JSON with --json
 *
 * Commands (what each does: ctl_exec.h):
 *   status [--json]
 *   trace add TARGET | trace remove TARGET | trace list [--json]
 *                         TARGET: the rest of the line, as a `trace =` line of loader.conf
 *                         (Assembly!Namespace.Type::Method[(params)]; tracer/target.h)
 *   profile flush | profile start | profile stop
 *   log-level error|warn|info|debug|trace
 *
 * Everything here is pure (no I/O, no allocation, no global state) so that the parser is
 * fuzzed on its own (tests/fuzz/fuzz_ctl.c). A request is refused, with the reason, when it
 * is longer than the bound, holds a NUL or another control character (TAB aside), is not
 * UTF-8, names an unknown command or has arguments that command does not take. */
#ifndef CLRMUX_CONTROL_CTL_PROTO_H
#define CLRMUX_CONTROL_CTL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#if defined(__MINGW32__)
#define CLRMUX_CTL_PRINTF gnu_printf /* mingw-w64 with __USE_MINGW_ANSI_STDIO: C99 printf (%zu) */
#else
#define CLRMUX_CTL_PRINTF printf
#endif

#define CLRMUX_CTL_MAX_REQUEST 4096 /* bytes, the LF included */
#define CLRMUX_CTL_MAX_ARG 1024     /* a TARGET or LEVEL */

enum clrmux_ctl_op {
    CLRMUX_CTL_STATUS = 1,
    CLRMUX_CTL_TRACE_ADD,
    CLRMUX_CTL_TRACE_REMOVE,
    CLRMUX_CTL_TRACE_LIST,
    CLRMUX_CTL_PROFILE_FLUSH,
    CLRMUX_CTL_PROFILE_START,
    CLRMUX_CTL_PROFILE_STOP,
    CLRMUX_CTL_LOG_LEVEL,
};

struct clrmux_ctl_req {
    enum clrmux_ctl_op op;
    int json;                     /* --json given (status, trace list) */
    char arg[CLRMUX_CTL_MAX_ARG]; /* TARGET or LEVEL, trimmed; "" for the others */
};

/* The request in buf[0..len) (the line, without its LF; a trailing CR is ignored). Returns
 * 0 and fills *req, or -1 with the reason in err[errlen] (always NUL-terminated). */
int clrmux_ctl_parse(const char *buf, size_t len, struct clrmux_ctl_req *req, char *err, size_t errlen);

/* The name of an op, as written in a request ("trace add"). */
const char *clrmux_ctl_op_name(enum clrmux_ctl_op op);

/* Framing: the length of the first line in buf[0..len) (the bytes before its LF), or -1 when
 * no LF is there yet, or -2 when there is none within CLRMUX_CTL_MAX_REQUEST bytes (the
 * request is too long). */
long clrmux_ctl_line(const char *buf, size_t len);

/* A bounded reply buffer: text appended with clrmux_out_printf / clrmux_out_json_str never
 * overflows it; what does not fit is cut and `truncated` set. */
struct clrmux_out {
    char *p;
    size_t len, cap; /* cap: bytes of p, the NUL included */
    int truncated;
};
void clrmux_out_init(struct clrmux_out *o, char *buf, size_t cap);
void clrmux_out_printf(struct clrmux_out *o, const char *fmt, ...) __attribute__((format(CLRMUX_CTL_PRINTF, 2, 3)));
/* Appends s as a JSON string literal (quotes included): ", \ and control characters escaped,
 * bytes that are not UTF-8 replaced by U+FFFD. */
void clrmux_out_json_str(struct clrmux_out *o, const char *s);

/* A token bucket: at most `burst` requests at once, refilled at `per_second`; now_ns is any
 * monotonic clock. Returns 1 when a request may be served now (a token taken), else 0. */
struct clrmux_ctl_rate {
    double tokens;
    int64_t last_ns;
    double burst, per_second;
};
void clrmux_ctl_rate_init(struct clrmux_ctl_rate *r, double burst, double per_second, int64_t now_ns);
int clrmux_ctl_rate_take(struct clrmux_ctl_rate *r, int64_t now_ns);

#endif
