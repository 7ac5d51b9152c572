/* The W3C trace context (traceparent) a thread's root span joins (clrmux_span_join*, see
 * spans.h): parsed here and written into the calling thread's first segment. */
#include "tracer/spans_int.h"

#include <string.h>

/* ---- joining a W3C trace context (https://www.w3.org/TR/trace-context/ traceparent) ---- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int hex_bytes(const char *s, uint8_t *out, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        int h = hexval(s[2 * i]), l = hexval(s[2 * i + 1]);
        if (h < 0 || l < 0)
            return -1;
        out[i] = (uint8_t)(h << 4 | l);
        any |= out[i];
    }
    return any ? 0 : -1; /* all-zero ids are invalid (W3C Trace Context) */
}

int clrmux_span_join_w3c(const char *id, size_t len)
{
    struct tstate *t = spans_tls;
    uint8_t trace[16], span[8], flags;
    if (!t || t->depth != 1 || len != 55 || id[0] != '0' || id[1] != '0' || id[2] != '-' || id[35] != '-' ||
        id[52] != '-')
        return -1;
    if (hex_bytes(id + 3, trace, 16) || hex_bytes(id + 36, span, 8) || hexval(id[53]) < 0 || hexval(id[54]) < 0)
        return -1;
    flags = (uint8_t)(hexval(id[53]) << 4 | hexval(id[54]));
    struct seg *s = &t->seg[0];
    memcpy(s->trace_id, trace, 16);
    uint64_t p = 0;
    for (int i = 0; i < 8; i++)
        p = p << 8 | span[i];
    s->root_parent = p;
    s->joined = 1;
    s->sampled = flags & 1;
    spans_ctx_update(t);
    return 0;
}

void clrmux_span_join(const void *id)
{
    if (!id)
        return;
    const unsigned char *o = id;
    int32_t len;
    memcpy(&len, o + 8, 4);
    if (len != 55)
        return;
    char buf[56];
    for (int i = 0; i < 55; i++) {
        uint16_t c;
        memcpy(&c, o + 12 + 2 * i, 2);
        if (c > 0x7f)
            return;
        buf[i] = (char)c;
    }
    clrmux_span_join_w3c(buf, 55);
}
