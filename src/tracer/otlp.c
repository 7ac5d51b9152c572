/* OTLP JSON lines (see otlp.h). */
#include "tracer/otlp.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void clrmux_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* A span is formatted into a stack buffer with hand-written conversions and written with
 * one fwrite: several times faster than fprintf per field. */
struct buf {
    char *p, *end;
    int overflow;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if ((size_t)(b->end - b->p) < n) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p, s, n);
    b->p += n;
}
#define PUTS(b, lit) put((b), (lit), sizeof(lit) - 1)

static void put_hex(struct buf *b, const uint8_t *v, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    if ((size_t)(b->end - b->p) < 2 * n) {
        b->overflow = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        *b->p++ = digits[v[i] >> 4];
        *b->p++ = digits[v[i] & 15];
    }
}

static void put_hex64(struct buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (56 - 8 * i));
    put_hex(b, x, 8);
}

static void put_u64(struct buf *b, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(b, tmp + sizeof tmp - n, (size_t)n);
}

static void put_i64(struct buf *b, int64_t v)
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
static void put_json(struct buf *b, const char *s)
{
    static const char digits[] = "0123456789abcdef";
    PUTS(b, "\"");
    for (const unsigned char *q = (const unsigned char *)(s ? s : ""); *q; q++) {
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

static void put_span(struct buf *b, const struct clrmux_span *s, size_t i, const struct clrmux_otlp_names *names)
{
    const char *name = names && names->method ? names->method(names->ctx, s->method) : NULL;
    if (i)
        PUTS(b, ",");
    PUTS(b, "{\"traceId\":\"");
    put_hex(b, s->trace_id, 16);
    PUTS(b, "\",\"spanId\":\"");
    put_hex64(b, s->span_id);
    PUTS(b, "\"");
    if (s->parent_id) {
        PUTS(b, ",\"parentSpanId\":\"");
        put_hex64(b, s->parent_id);
        PUTS(b, "\"");
    }
    PUTS(b, ",\"name\":");
    if (name) {
        put_json(b, name);
    } else {
        PUTS(b, "\"method#");
        put_u64(b, s->method);
        PUTS(b, "\"");
    }
    PUTS(b, ",\"kind\":1,\"startTimeUnixNano\":\"");
    put_i64(b, s->start_ns);
    PUTS(b, "\",\"endTimeUnixNano\":\"");
    put_i64(b, s->end_ns);
    PUTS(b, "\",\"attributes\":[{\"key\":\"thread.id\",\"value\":{\"intValue\":\"");
    put_u64(b, s->tid);
    PUTS(b, "\"}}");
    const char *exc = NULL;
    if (s->flags & CLRMUX_SPAN_ERROR) {
        exc = s->exc && names && names->exception ? names->exception(names->ctx, s->exc) : NULL;
        if (exc) {
            PUTS(b, ",{\"key\":\"exception.type\",\"value\":{\"stringValue\":");
            put_json(b, exc);
            PUTS(b, "}}");
        }
    }
    PUTS(b, "]");
    if (s->flags & CLRMUX_SPAN_ERROR) {
        PUTS(b, ",\"status\":{\"code\":2");
        if (exc) {
            PUTS(b, ",\"message\":");
            put_json(b, exc);
        }
        PUTS(b, "}}");
    } else {
        PUTS(b, ",\"status\":{}}");
    }
}

int clrmux_otlp_write_line(FILE *f, const char *service_name, long pid, const struct clrmux_span *spans, size_t n,
                           const struct clrmux_otlp_names *names)
{
    if (!n)
        return 0;
    fputs("{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":", f);
    clrmux_json_string(f, service_name);
    fprintf(f, "}},{\"key\":\"process.pid\",\"value\":{\"intValue\":\"%ld\"}},"
               "{\"key\":\"telemetry.sdk.name\",\"value\":{\"stringValue\":\"clrmux\"}}]},"
               "\"scopeSpans\":[{\"scope\":{\"name\":\"clrmux\"},\"spans\":[", pid);
    for (size_t i = 0; i < n; i++) {
        char text[4096];
        struct buf b = {text, text + sizeof text, 0};
        put_span(&b, &spans[i], i, names);
        if (!b.overflow) {
            fwrite(text, 1, (size_t)(b.p - text), f);
        } else { /* very long names: a heap buffer of the size they need */
            size_t need = 1024;
            const char *nm = names && names->method ? names->method(names->ctx, spans[i].method) : NULL;
            const char *ex = names && names->exception ? names->exception(names->ctx, spans[i].exc) : NULL;
            need += 6 * ((nm ? strlen(nm) : 0) + 2 * (ex ? strlen(ex) : 0));
            char *heap = malloc(need);
            if (!heap)
                return -1;
            struct buf h = {heap, heap + need, 0};
            put_span(&h, &spans[i], i, names);
            fwrite(heap, 1, (size_t)(h.p - heap), f);
            free(heap);
        }
    }
    fputs("]}]}]}\n", f);
    return ferror(f) ? -1 : 0;
}
