/* The OTLP JSON renderers' private parts, shared by otlp.c (method spans, metrics) and
 * otlp_xspan.c (Activity spans): a bounded output buffer with hand-written conversions (several
 * times faster than stdio per field) and the resource. Not a public interface. */
#ifndef CLRMUX_TRACER_OTLP_INT_H
#define CLRMUX_TRACER_OTLP_INT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "tracer/otlp.h"

/* A span is formatted into a stack buffer with hand-written conversions and written with
 * one fwrite: several times faster than fprintf per field. */
struct buf {
    char *p, *end;
    int overflow;
};

static inline void put(struct buf *b, const char *s, size_t n)
{
    if ((size_t)(b->end - b->p) < n) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p, s, n);
    b->p += n;
}
#define PUTS(b, lit) put((b), (lit), sizeof(lit) - 1)

/* lowercase hex, a byte (two digits) per step */
static inline void put_hex(struct buf *b, const uint8_t *v, size_t n)
{
#define H4(x) #x "0" #x "1" #x "2" #x "3" #x "4" #x "5" #x "6" #x "7" #x "8" #x "9" #x "a" #x "b" #x "c" #x "d" #x "e" #x "f"
    static const char pairs[513] = H4(0) H4(1) H4(2) H4(3) H4(4) H4(5) H4(6) H4(7) H4(8) H4(9) H4(a) H4(b) H4(c) H4(d)
        H4(e) H4(f);
#undef H4
    if ((size_t)(b->end - b->p) < 2 * n) {
        b->overflow = 1;
        return;
    }
    for (size_t i = 0; i < n; i++, b->p += 2)
        memcpy(b->p, pairs + 2 * v[i], 2);
}

static inline void put_hex64(struct buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (56 - 8 * i));
    put_hex(b, x, 8);
}

/* decimal: in chunks of 8 digits (a timestamp in ns has 19), each converted two digits per
 * step with 32-bit operations that do not wait on one another */
static inline void put_u64(struct buf *b, uint64_t v)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    char tmp[24];
    int n = 0;
    while (v >= 100000000) { /* 8 digits, leading zeros kept */
        uint32_t x = (uint32_t)(v % 100000000);
        v /= 100000000;
        uint32_t hi = x / 10000, lo = x % 10000;
        n += 8;
        char *d = tmp + sizeof tmp - n;
        memcpy(d, pairs + 2 * (hi / 100), 2);
        memcpy(d + 2, pairs + 2 * (hi % 100), 2);
        memcpy(d + 4, pairs + 2 * (lo / 100), 2);
        memcpy(d + 6, pairs + 2 * (lo % 100), 2);
    }
    uint32_t w = (uint32_t)v; /* the leading chunk: no leading zeros */
    while (w >= 100) {
        unsigned d = w % 100;
        w /= 100;
        n += 2;
        memcpy(tmp + sizeof tmp - n, pairs + 2 * d, 2);
    }
    if (w >= 10) {
        n += 2;
        memcpy(tmp + sizeof tmp - n, pairs + 2 * w, 2);
    } else {
        tmp[sizeof tmp - ++n] = (char)('0' + w);
    }
    put(b, tmp + sizeof tmp - n, (size_t)n);
}

static inline void put_i64(struct buf *b, int64_t v)
{
    if (v < 0) {
        PUTS(b, "-");
        put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(b, (uint64_t)v);
    }
}

/* A JSON string literal; names are short, so a long one just overflows the span's buffer
 * and the span falls back to the slow path. */
static inline void put_json(struct buf *b, const char *s)
{
    static const char digits[] = "0123456789abcdef";
    PUTS(b, "\"");
    const unsigned char *q = (const unsigned char *)(s ? s : "");
    const unsigned char *plain = q; /* the run that needs no escape: one copy */
    while (*plain >= 0x20 && *plain != '"' && *plain != '\\')
        plain++;
    put(b, (const char *)q, (size_t)(plain - q));
    for (q = plain; *q; q++) {
        if (*q >= 0x20 && *q != '"' && *q != '\\') {
            if (b->p == b->end) {
                b->overflow = 1;
                return;
            }
            *b->p++ = (char)*q;
            continue;
        }
        switch (*q) {
        case '"': PUTS(b, "\\\""); break;
        case '\\': PUTS(b, "\\\\"); break;
        case '\n': PUTS(b, "\\n"); break;
        case '\r': PUTS(b, "\\r"); break;
        case '\t': PUTS(b, "\\t"); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', digits[*q >> 4], digits[*q & 15]};
            put(b, u, 6);
        }
        }
    }
    PUTS(b, "\"");
}

/* A JSON string literal of s[0..n) (not NUL-terminated; from another process's or the
 * agent's data): escaped as put_json does, NUL included, and any byte that is not part of a
 * well-formed UTF-8 sequence written as U+FFFD, so the line stays valid JSON. */
static inline void put_jsonn(struct buf *b, const char *s, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *q = (const unsigned char *)s, *end = q + n;
    PUTS(b, "\"");
    while (q < end && !b->overflow) {
        unsigned c = *q;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            const unsigned char *r = q;
            while (r < end && *r >= 0x20 && *r < 0x80 && *r != '"' && *r != '\\')
                r++;
            put(b, (const char *)q, (size_t)(r - q));
            q = r;
            continue;
        }
        if (c < 0x80) {
            switch (c) {
            case '"': PUTS(b, "\\\""); break;
            case '\\': PUTS(b, "\\\\"); break;
            case '\n': PUTS(b, "\\n"); break;
            case '\r': PUTS(b, "\\r"); break;
            case '\t': PUTS(b, "\\t"); break;
            default: {
                char u[6] = {'\\', 'u', '0', '0', digits[c >> 4], digits[c & 15]};
                put(b, u, 6);
            }
            }
            q++;
            continue;
        }
        /* a multi-byte sequence (RFC 3629) */
        size_t len = clrmux_utf8_seq(q, (size_t)(end - q));
        if (len) {
            put(b, (const char *)q, len);
            q += len;
        } else {
            PUTS(b, "\xEF\xBF\xBD"); /* U+FFFD */
            q++;
        }
    }
    PUTS(b, "\"");
}

static inline void put_resource(struct buf *b, const struct clrmux_resource *r)
{
    PUTS(b, "{\"attributes\":[");
    for (size_t i = 0; i < r->n; i++) {
        if (i)
            PUTS(b, ",");
        PUTS(b, "{\"key\":");
        put_json(b, r->attrs[i].key);
        if (r->attrs[i].is_int)
            PUTS(b, ",\"value\":{\"intValue\":");
        else
            PUTS(b, ",\"value\":{\"stringValue\":");
        put_json(b, r->attrs[i].value);
        PUTS(b, "}}");
    }
    PUTS(b, "]}");
}

/* makes room for `need` more bytes in m; 0, or -1 (out of memory) */
static inline int mem_reserve(struct clrmux_otlp_mem *m, size_t need)
{
    if (m->cap - m->len >= need)
        return 0;
    size_t cap = m->cap ? m->cap : 65536;
    while (cap - m->len < need)
        cap *= 2;
    char *p = realloc(m->p, cap);
    if (!p)
        return -1;
    m->p = p;
    m->cap = cap;
    return 0;
}

#endif
