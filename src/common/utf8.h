/* UTF-8 validity, one sequence at a time (RFC 3629), for the writers that must emit valid UTF-8
 * (OTLP JSON, OTLP protobuf strings): a header of its own so that libclrmux_otlp.so, which links
 * none of common/'s objects, uses the same rule. */
#ifndef CLRMUX_COMMON_UTF8_H
#define CLRMUX_COMMON_UTF8_H

#include <stddef.h>

/* The length (1-4) of the well-formed UTF-8 sequence at q[0..left), or 0 when q[0] does not
 * start one: a continuation byte, 0xC0/0xC1/0xF5-0xFF, a sequence cut short, an overlong form,
 * a surrogate, or past U+10FFFF. left > 0. NUL is a sequence of 1 (callers that cannot carry it
 * check it themselves). */
static inline size_t clrmux_utf8_seq(const unsigned char *q, size_t left)
{
    unsigned c = q[0];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    int ok = len && left >= len;
    for (size_t k = 1; ok && k < len; k++)
        ok = (q[k] & 0xC0) == 0x80;
    if (ok && len == 3)
        ok = !(c == 0xE0 && q[1] < 0xA0) && !(c == 0xED && q[1] >= 0xA0);
    if (ok && len == 4)
        ok = !(c == 0xF0 && q[1] < 0x90) && !(c == 0xF4 && q[1] >= 0x90);
    return ok ? len : 0;
}

#endif
