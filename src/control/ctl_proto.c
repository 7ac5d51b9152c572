/* The control channel's request parser, framing, reply buffer and rate limit (ctl_proto.h).
 * Pure: no I/O, no allocation. */
#include "control/ctl_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(CLRMUX_CTL_PRINTF, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* The length of the UTF-8 sequence at s[0..n), or 0 when it is not one (overlong forms,
 * surrogates and code points above U+10FFFF refused). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    unsigned cp = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

long clrmux_ctl_line(const char *buf, size_t len)
{
    size_t n = len < CLRMUX_CTL_MAX_REQUEST ? len : CLRMUX_CTL_MAX_REQUEST;
    const char *lf = memchr(buf, '\n', n);
    if (lf)
        return (long)(lf - buf);
    return len >= CLRMUX_CTL_MAX_REQUEST ? -2 : -1;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* The next word of s[*i..n) into w[wsz] (0: none left; -1: longer than wsz - 1). */
static int word(const char *s, size_t n, size_t *i, char *w, size_t wsz)
{
    while (*i < n && is_space(s[*i]))
        (*i)++;
    size_t start = *i;
    while (*i < n && !is_space(s[*i]))
        (*i)++;
    size_t len = *i - start;
    if (!len)
        return 0;
    if (len >= wsz)
        return -1;
    memcpy(w, s + start, len);
    w[len] = 0;
    return 1;
}

/* The rest of s[*i..n), trimmed, into out[outsz]. Returns its length, or -1 when too long. */
static long rest(const char *s, size_t n, size_t i, char *out, size_t outsz)
{
    while (i < n && is_space(s[i]))
        i++;
    while (n > i && is_space(s[n - 1]))
        n--;
    if (n - i >= outsz)
        return -1;
    memcpy(out, s + i, n - i);
    out[n - i] = 0;
    return (long)(n - i);
}

static const struct {
    const char *name;
    enum clrmux_ctl_op op;
} k_ops[] = {
    {"status", CLRMUX_CTL_STATUS},           {"trace add", CLRMUX_CTL_TRACE_ADD},
    {"trace remove", CLRMUX_CTL_TRACE_REMOVE}, {"trace list", CLRMUX_CTL_TRACE_LIST},
    {"profile flush", CLRMUX_CTL_PROFILE_FLUSH}, {"profile start", CLRMUX_CTL_PROFILE_START},
    {"profile stop", CLRMUX_CTL_PROFILE_STOP}, {"log-level", CLRMUX_CTL_LOG_LEVEL},
};

const char *clrmux_ctl_op_name(enum clrmux_ctl_op op)
{
    for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
        if (k_ops[i].op == op)
            return k_ops[i].name;
    return "?";
}

#define COMMANDS "status, trace add|remove|list, profile flush|start|stop, log-level"

int clrmux_ctl_parse(const char *buf, size_t len, struct clrmux_ctl_req *req, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    memset(req, 0, sizeof *req);
    if (len && buf[len - 1] == '\r')
        len--;
    if (len >= CLRMUX_CTL_MAX_REQUEST) {
        fail(err, errlen, "request longer than %d bytes", CLRMUX_CTL_MAX_REQUEST - 1);
        return -1;
    }
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)buf[i];
        if (c < 0x20 && c != '\t') {
            fail(err, errlen, "control character 0x%02X at byte %zu", c, i);
            return -1;
        }
        if (c == 0x7F) {
            fail(err, errlen, "control character 0x7F at byte %zu", i);
            return -1;
        }
        size_t k = utf8_seq((const unsigned char *)buf + i, len - i);
        if (!k) {
            fail(err, errlen, "not UTF-8 at byte %zu", i);
            return -1;
        }
        i += k;
    }
    size_t i = 0;
    char w1[32], w2[32];
    int r = word(buf, len, &i, w1, sizeof w1);
    if (r == 0) {
        fail(err, errlen, "empty request (commands: " COMMANDS ")");
        return -1;
    }
    if (r < 0) {
        fail(err, errlen, "unknown command (commands: " COMMANDS ")");
        return -1;
    }
    char name[72];
    size_t after1 = i;
    if (!strcmp(w1, "trace") || !strcmp(w1, "profile")) {
        r = word(buf, len, &i, w2, sizeof w2);
        if (r <= 0) {
            fail(err, errlen, "'%s' needs a subcommand (%s)", w1,
                 w1[0] == 't' ? "add TARGET, remove TARGET, list" : "flush, start, stop");
            return -1;
        }
        snprintf(name, sizeof name, "%s %s", w1, w2);
    } else {
        snprintf(name, sizeof name, "%s", w1);
        i = after1;
    }
    int found = 0;
    for (size_t k = 0; k < sizeof k_ops / sizeof k_ops[0]; k++)
        if (!strcmp(k_ops[k].name, name)) {
            req->op = k_ops[k].op;
            found = 1;
        }
    if (!found) {
        fail(err, errlen, "unknown command '%.64s' (commands: " COMMANDS ")", name);
        return -1;
    }
    switch (req->op) {
    case CLRMUX_CTL_TRACE_ADD:
    case CLRMUX_CTL_TRACE_REMOVE:
    case CLRMUX_CTL_LOG_LEVEL: {
        long n = rest(buf, len, i, req->arg, sizeof req->arg);
        if (n < 0) {
            fail(err, errlen, "%s: argument longer than %d bytes", name, CLRMUX_CTL_MAX_ARG - 1);
            return -1;
        }
        if (n == 0) {
            fail(err, errlen, "%s needs %s", name, req->op == CLRMUX_CTL_LOG_LEVEL ? "a level (error|warn|info|debug|trace)"
                                                                                : "a target (Assembly!Namespace.Type::Method)");
            return -1;
        }
        if (req->op == CLRMUX_CTL_LOG_LEVEL && strpbrk(req->arg, " \t")) {
            fail(err, errlen, "log-level takes one word (error|warn|info|debug|trace)");
            return -1;
        }
        return 0;
    }
    case CLRMUX_CTL_STATUS:
    case CLRMUX_CTL_TRACE_LIST: {
        char w[32];
        while ((r = word(buf, len, &i, w, sizeof w)) != 0) {
            if (r > 0 && !strcmp(w, "--json") && !req->json) {
                req->json = 1;
                continue;
            }
            fail(err, errlen, "%s: unexpected argument (only --json)", name);
            return -1;
        }
        return 0;
    }
    default: {
        char w[32];
        if (word(buf, len, &i, w, sizeof w) != 0) {
            fail(err, errlen, "%s takes no argument", name);
            return -1;
        }
        return 0;
    }
    }
}

/* ---- the reply buffer ----------------------------------------------------------------- */

void clrmux_out_init(struct clrmux_out *o, char *buf, size_t cap)
{
    o->p = buf;
    o->cap = cap;
    o->len = 0;
    o->truncated = 0;
    if (cap)
        buf[0] = 0;
}

static void out_put(struct clrmux_out *o, const char *s, size_t n)
{
    if (!o->cap)
        return;
    size_t room = o->cap - 1 - o->len;
    if (n > room) {
        n = room;
        o->truncated = 1;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
}

void clrmux_out_printf(struct clrmux_out *o, const char *fmt, ...)
{
    if (!o->cap || o->len + 1 >= o->cap) {
        if (o->cap)
            o->truncated = 1;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->cap - o->len;
    int n = vsnprintf(o->p + o->len, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= room) {
        o->len = o->cap - 1;
        o->truncated = 1;
    } else {
        o->len += (size_t)n;
    }
}

void clrmux_out_json_str(struct clrmux_out *o, const char *s)
{
    out_put(o, "\"", 1);
    size_t n = s ? strlen(s) : 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            out_put(o, e, 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            out_put(o, e, 6);
            i++;
        } else {
            size_t k = utf8_seq((const unsigned char *)s + i, n - i);
            if (!k) {
                out_put(o, "\xEF\xBF\xBD", 3);
                i++;
            } else {
                out_put(o, s + i, k);
                i += k;
            }
        }
    }
    out_put(o, "\"", 1);
}

/* ---- rate limit ----------------------------------------------------------------------- */

void clrmux_ctl_rate_init(struct clrmux_ctl_rate *r, double burst, double per_second, int64_t now_ns)
{
    r->burst = burst;
    r->per_second = per_second;
    r->tokens = burst;
    r->last_ns = now_ns;
}

int clrmux_ctl_rate_take(struct clrmux_ctl_rate *r, int64_t now_ns)
{
    if (now_ns > r->last_ns) {
        r->tokens += (double)(now_ns - r->last_ns) / 1e9 * r->per_second;
        if (r->tokens > r->burst)
            r->tokens = r->burst;
        r->last_ns = now_ns;
    }
    if (r->tokens < 1.0)
        return 0;
    r->tokens -= 1.0;
    return 1;
}
