/* Builds Activity span records (src/tracer/xspan.h's layout) for the tests, as the agent's
 * SpanWriter writes them. */
#ifndef CLRMUX_TEST_XSPAN_BUILD_H
#define CLRMUX_TEST_XSPAN_BUILD_H

#include <stdint.h>
#include <string.h>

#include "tracer/xspan.h"

struct xb {
    uint8_t b[8192];
    size_t n;
};

static inline void xb_u(struct xb *x, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        x->b[x->n++] = (uint8_t)(v >> (8 * i));
}
static inline void xb_str(struct xb *x, const char *s)
{
    size_t n = strlen(s);
    xb_u(x, n, 2);
    memcpy(x->b + x->n, s, n);
    x->n += n;
}
/* the fixed header; then the five strings */
static inline void xb_head(struct xb *x, const uint8_t trace[16], uint64_t span, uint64_t parent, int64_t start,
                           int64_t end, int kind, int status, const char *name, const char *msg, const char *scope,
                           const char *version, const char *state)
{
    x->n = 0;
    xb_u(x, CLRMUX_XSPAN_VERSION, 2);
    xb_u(x, CLRMUX_XSPAN_HEADER, 2);
    memcpy(x->b + x->n, trace, 16);
    x->n += 16;
    xb_u(x, span, 8);
    xb_u(x, parent, 8);
    xb_u(x, (uint64_t)start, 8);
    xb_u(x, (uint64_t)end, 8);
    xb_u(x, (uint64_t)kind, 1);
    xb_u(x, (uint64_t)status, 1);
    xb_u(x, 0, 1);
    xb_u(x, 0, 1);
    xb_u(x, 1234, 4);
    xb_str(x, name);
    xb_str(x, msg);
    xb_str(x, scope);
    xb_str(x, version);
    xb_str(x, state);
}
static inline void xb_attr_str(struct xb *x, const char *k, const char *v)
{
    xb_u(x, CLRMUX_XATTR_STRING, 1);
    xb_str(x, k);
    xb_str(x, v);
}
static inline void xb_attr_int(struct xb *x, const char *k, int64_t v)
{
    xb_u(x, CLRMUX_XATTR_INT, 1);
    xb_str(x, k);
    xb_u(x, (uint64_t)v, 8);
}

#endif
