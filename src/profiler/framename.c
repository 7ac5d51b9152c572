/*
 * Frame-name formatting and UTF-16 -> UTF-8 conversion. See framename.h.
 *
 * All output goes through one writer that appends whole characters: a
 * character is written only if it fits completely (leaving room for the
 * NUL); after the first character that does not fit, nothing more is
 * written, but the full length keeps being counted for the return value.
 */
#include "profiler/framename.h"

#include <stdbool.h>
#include <string.h>

struct writer {
    char *buf;
    size_t cap;  /* bytes available including the NUL */
    size_t len;  /* bytes written */
    size_t need; /* bytes of the complete result */
    bool full;   /* a character did not fit: stop writing */
};

static void w_init(struct writer *w, char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = buf ? cap : 0;
    w->len = 0;
    w->need = 0;
    w->full = false;
}

/* Appends one complete character of k (1..4) bytes. */
static void w_char(struct writer *w, const unsigned char *p, size_t k)
{
    w->need += k;
    if (w->full)
        return;
    if (w->cap == 0 || k > w->cap - 1 - w->len) {
        w->full = true;
        return;
    }
    memcpy(w->buf + w->len, p, k);
    w->len += k;
}

static void w_codepoint(struct writer *w, uint32_t c)
{
    unsigned char b[4];
    size_t k;
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        k = 1;
    } else if (c < 0x800) {
        b[0] = (unsigned char)(0xC0 | c >> 6);
        b[1] = (unsigned char)(0x80 | (c & 0x3F));
        k = 2;
    } else if (c < 0x10000) {
        b[0] = (unsigned char)(0xE0 | c >> 12);
        b[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        b[2] = (unsigned char)(0x80 | (c & 0x3F));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | c >> 18);
        b[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
        b[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        b[3] = (unsigned char)(0x80 | (c & 0x3F));
        k = 4;
    }
    w_char(w, b, k);
}

#define REPLACEMENT 0xFFFDu

/* Appends s[0..n) as UTF-8, replacing each maximal invalid subpart
 * (Unicode 15, section 3.9, "U+FFFD substitution of maximal subparts")
 * with U+FFFD. */
static void w_utf8(struct writer *w, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            w_char(w, &p[i], 1);
            i++;
            continue;
        }
        size_t k;                       /* total length of the sequence */
        unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            k = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            w_codepoint(w, REPLACEMENT);
            i++;
            continue;
        }
        size_t j = 1;
        while (j < k && i + j < n) {
            unsigned char t = p[i + j];
            unsigned char tlo = j == 1 ? lo : 0x80;
            unsigned char thi = j == 1 ? hi : 0xBF;
            if (t < tlo || t > thi)
                break;
            j++;
        }
        if (j == k)
            w_char(w, &p[i], k);
        else
            w_codepoint(w, REPLACEMENT);
        i += j;
    }
}

static void w_str(struct writer *w, const char *s)
{
    w_utf8(w, s, strlen(s));
}

static size_t w_finish(struct writer *w)
{
    if (w->cap > 0)
        w->buf[w->len] = '\0';
    return w->need;
}

static bool nonempty(const char *s)
{
    return s && *s;
}

/* Writes "<a, b, ...>" for args[0..n). */
static void w_args(struct writer *w, const char *const *args, size_t n)
{
    w_str(w, "<");
    for (size_t i = 0; i < n; i++) {
        if (i)
            w_str(w, ", ");
        w_str(w, args[i] ? args[i] : "?");
    }
    w_str(w, ">");
}

/* Length of segment seg[0..len) without a trailing "`N" arity suffix
 * (backtick + 1..4 digits); stores the arity in *arity (0 if none). */
static size_t strip_arity(const char *seg, size_t len, size_t *arity)
{
    size_t d = 0;
    while (d < len && d < 5 && seg[len - 1 - d] >= '0' &&
           seg[len - 1 - d] <= '9')
        d++;
    *arity = 0;
    if (d == 0 || d > 4 || d == len || seg[len - 1 - d] != '`')
        return len;
    size_t a = 0;
    for (size_t i = len - d; i < len; i++)
        a = a * 10 + (size_t)(seg[i] - '0');
    *arity = a;
    return len - d - 1;
}

static void w_type(struct writer *w, const char *type, const char *const *args,
                   size_t n_args)
{
    size_t tlen = strlen(type);

    /* First pass: do the segment arities account for every argument? */
    size_t total = 0;
    for (size_t start = 0; start <= tlen;) {
        const char *plus = memchr(type + start, '+', tlen - start);
        size_t end = plus ? (size_t)(plus - type) : tlen;
        size_t ar;
        strip_arity(type + start, end - start, &ar);
        total += ar;
        start = end + 1;
    }
    bool distribute = n_args > 0 && total == n_args;

    size_t next_arg = 0;
    for (size_t start = 0; start <= tlen;) {
        const char *plus = memchr(type + start, '+', tlen - start);
        size_t end = plus ? (size_t)(plus - type) : tlen;
        size_t ar;
        size_t keep = strip_arity(type + start, end - start, &ar);
        w_utf8(w, type + start, keep);
        if (distribute && ar > 0) {
            w_args(w, args + next_arg, ar);
            next_arg += ar;
        }
        if (plus)
            w_str(w, "+");
        start = end + 1;
    }
    if (n_args > 0 && !distribute)
        w_args(w, args, n_args);
}

size_t clrmux_frame_name_managed(char *buf, size_t cap, const char *type_name,
                                 const char *method_name,
                                 const char *const *type_args,
                                 size_t n_type_args,
                                 const char *const *method_args,
                                 size_t n_method_args)
{
    struct writer w;
    w_init(&w, buf, cap);
    if (!type_args)
        n_type_args = 0;
    if (!method_args)
        n_method_args = 0;
    bool has_type = nonempty(type_name);
    bool has_method = nonempty(method_name);
    if (!has_type && !has_method) {
        w_str(&w, CLRMUX_FRAME_UNKNOWN);
        return w_finish(&w);
    }
    if (has_type) {
        w_type(&w, type_name, type_args, n_type_args);
        w_str(&w, ".");
    }
    w_str(&w, has_method ? method_name : CLRMUX_FRAME_UNKNOWN);
    if (has_method && n_method_args > 0)
        w_args(&w, method_args, n_method_args);
    return w_finish(&w);
}

size_t clrmux_frame_name_native(char *buf, size_t cap, const char *module_path)
{
    struct writer w;
    w_init(&w, buf, cap);
    w_str(&w, CLRMUX_FRAME_NATIVE_PREFIX);
    if (module_path) {
        const char *base = strrchr(module_path, '/');
        base = base ? base + 1 : module_path;
        if (*base) {
            w_str(&w, " ");
            w_str(&w, base);
        }
    }
    return w_finish(&w);
}

size_t clrmux_frame_name_unknown(char *buf, size_t cap)
{
    struct writer w;
    w_init(&w, buf, cap);
    w_str(&w, CLRMUX_FRAME_UNKNOWN);
    return w_finish(&w);
}

size_t clrmux_frame_utf16_to_utf8(char *buf, size_t cap,
                                  const uint16_t *src, size_t n_units)
{
    struct writer w;
    w_init(&w, buf, cap);
    if (!src)
        n_units = 0;
    for (size_t i = 0; i < n_units && src[i] != 0; i++) {
        uint32_t u = src[i];
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (i + 1 < n_units && src[i + 1] >= 0xDC00 &&
                src[i + 1] <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (src[i + 1] - 0xDC00u);
                i++;
            } else {
                u = REPLACEMENT;
            }
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            u = REPLACEMENT;
        }
        w_codepoint(&w, u);
    }
    return w_finish(&w);
}
