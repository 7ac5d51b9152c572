/* Bytecode integrations: definitions of library methods whose calls become spans with a kind,
 * a name and attributes read from the call (docs/integrations.md), the ones clrmux ships and
 * those of a user's file (`integrations = FILE` in [child tracer]), and the attributes that the
 * managed agent attaches to a call's span, which the exporter turns into a span of the
 * definition's kind (an Activity-style record, tracer/xspan.h).
 *
 * A definition file (errors are logged with FILE:LINE, that definition or line skipped):
 *
 *   [integration NAME]
 *   target    = Assembly!Namespace.Type::Method(paramtypes)   ; one or more (tracer/target.h)
 *   versions  = 6.0 - 11.*            ; the assembly's major.minor range (default: any)
 *   kind      = client | producer | consumer | server | internal
 *   name      = {db.operation.name} {db.collection.name}      ; {attribute} placeholders
 *   attribute = KEY = this.Prop.Prop | argN.Prop | return.Prop | 'constant'  ; one or more
 *   inject    = argN.Prop             ; a header collection: W3C traceparent written into it
 *   extract   = argN.Prop | return.Prop  ; a header collection: its traceparent, the message's
 *                                     ; creation context, becomes a link of the span
 *   extract_as = link | parent        ; parent: the span's parent too (default: link)
 *
 * Everything but the attach table is pure (no runtime calls), so that it is unit-tested. */
#ifndef CLRMUX_TRACER_INTEG_H
#define CLRMUX_TRACER_INTEG_H

#include <stddef.h>
#include <stdint.h>

#include "tracer/spans.h"

#define CLRMUX_INTEG_MAX 64
#define CLRMUX_INTEG_SPEC_MAX 2048
#define CLRMUX_INTEG_MAX_ARG 63 /* the highest argN a path may name */
#define CLRMUX_INTEG_ASYNC 0x40000000 /* IntegExit's integ bit: ret is the method's task (agent.h) */

struct clrmux_integ {
    char name[64];
    uint8_t kind;                  /* OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer */
    int vmin[2], vmax[2];          /* major.minor range; -1: open */
    /* what the agent reads (Clrmux.Agent's Integrations): lines "kind=N", "name=T", "versions=R",
     * "inject=P", "attr=KEY\tVALUE", '\n'-separated */
    char spec[CLRMUX_INTEG_SPEC_MAX];
    size_t spec_len;
    int has_exit;                  /* an attribute or extract reads `return`: IntegExit is called */
    int max_arg;                   /* the highest N of the argN paths it reads (-1: none); past 3,
                                      the call passes its arguments 4..max_arg in an object[] */
    int line;
};

/* A target line of a definition: add(ctx, text, integ_index, file, line) registers it as a trace
 * target; returns 0, or -1 with a reason in err (logged with file:line by the parser). */
typedef int (*clrmux_integ_add_target)(void *ctx, const char *target, int integ, const char *file, int line,
                                       char *err, size_t errlen);

/* Parses definitions from text (file names it in the log lines) into defs[*n..max), calling
 * add for each target. Bad lines are logged (FILE:LINE: why) and skipped; a definition with no
 * valid target or no kind is skipped. Returns the number of errors logged. */
int clrmux_integ_parse(const char *text, const char *file, struct clrmux_integ *defs, int *n, int max,
                       clrmux_integ_add_target add, void *ctx);

/* The definitions clrmux ships, as definition-file text, each under the name of the built-in
 * instrumentation (`instrument =`) that turns it on: adonet (Microsoft.Data.Sqlite, MySql.Data,
 * Microsoft.Data.SqlClient:
 * providers without an ActivitySource), redis (StackExchange.Redis), rabbitmq (RabbitMQ.Client
 * 5 and 6: publish, basic.get, 6's push consumers), kafka (Confluent.Kafka). Ends with
 * {NULL, NULL}. */
struct clrmux_integ_shipped {
    const char *instrument, *text;
};
extern const struct clrmux_integ_shipped clrmux_integ_shipped[];

/* ---- attached attributes (process-wide) ----
 * The agent attaches, to an open span, the definition's kind, name and attributes as a blob:
 *   u8 kind, str name, str scope, u8 ctx, [u8 trace_id[16], u64 span_id], u16 n, n attributes
 *   (xspan.h's encoding)
 * ctx 0: no extracted context; 1: the extracted (remote) context is the span's parent and a link
 * (the span's own parent, if it had one, a second link); 2: it is a link, the parent stays.
 * The exporter takes it when the span is drained and writes the span as an xspan record; kind 0
 * (a blob of that byte alone) drops the span (a consumer's call that returned nothing). */
int clrmux_integ_attach(uint64_t span_id, const uint8_t *blob, size_t len); /* 0, -1 full/bad */
/* Nonzero when some blob waits (a cheap check before clrmux_integ_take). */
int clrmux_integ_any(void);
/* Removes span_id's blob: returns it (malloc'd, the caller frees) and its length, or NULL. */
uint8_t *clrmux_integ_take(uint64_t span_id, size_t *len);

/* Writes finished span s with its blob as an xspan record into out[cap]: the blob's kind, name,
 * scope and attributes, s's ids, times and thread, status ERROR with error.type = exc_type (and
 * status message) when s failed. Returns the record's length, or 0 (malformed blob, no room). */
size_t clrmux_integ_record(const struct clrmux_span *s, const uint8_t *blob, size_t blen, const char *exc_type,
                           uint8_t *out, size_t cap);

#endif
