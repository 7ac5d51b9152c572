/* Activity spans: the record the managed agent hands the tracer for each Activity it records
 * (tracer/agent.h's `record`), its parser, and the queue such records wait in until the export
 * thread writes them (xspan.c).
 *
 * Record layout (little-endian, packed; strings UTF-8 with a 16-bit length, no NUL):
 *   u16 version (CLRMUX_XSPAN_VERSION), u16 header length (CLRMUX_XSPAN_HEADER)
 *   u8  trace_id[16]                    W3C byte order
 *   u64 span_id, parent_id              the 8 id bytes read big-endian (0: no parent)
 *   i64 start_ns, end_ns                Unix time
 *   u8  kind                            OTLP SpanKind: 1 internal, 2 server, 3 client,
 *                                       4 producer, 5 consumer
 *   u8  status                          OTLP status code: 0 unset, 1 ok, 2 error
 *   u8  flags                           CLRMUX_XSPAN_F_*
 *   u8  reserved
 *   u32 tid                             the OS thread that stopped the Activity
 *   str name, str status_message, str scope_name, str scope_version, str trace_state
 *   u16 n, then n attributes: u8 type (CLRMUX_XATTR_*), str key, the value: str (STRING),
 *       u8 (BOOL), i64 (INT), f64 (DOUBLE)
 *   u16 n, then n events: i64 time_ns, str name, u16 m, m attributes
 *   u16 n, then n links: u8 trace_id[16], u64 span_id, str trace_state, u16 m, m attributes
 * The agent mirrors this layout (src/tracer/agent/SpanWriter.cs). */
#ifndef CLRMUX_TRACER_XSPAN_H
#define CLRMUX_TRACER_XSPAN_H

#include <stddef.h>
#include <stdint.h>

#define CLRMUX_XSPAN_VERSION 1
#define CLRMUX_XSPAN_HEADER 60
#define CLRMUX_XSPAN_MAX (256 * 1024) /* bytes in one record */
#define CLRMUX_XSPAN_F_REMOTE_PARENT 1u /* the parent came from another process (traceparent) */
#define CLRMUX_XSPAN_F_UNSET_OMITTED 2u /* an UNSET status is left out, not written empty (method spans: pb/otlp_mspan.c) */

enum { CLRMUX_XATTR_STRING = 1, CLRMUX_XATTR_BOOL = 2, CLRMUX_XATTR_INT = 3, CLRMUX_XATTR_DOUBLE = 4 };

struct clrmux_xstr {
    const char *p; /* into the record, not NUL-terminated */
    uint16_t len;
};

struct clrmux_xattr {
    uint8_t type;
    struct clrmux_xstr key;
    struct clrmux_xstr s; /* STRING */
    int64_t i;            /* INT, BOOL (0/1) */
    double d;             /* DOUBLE */
};

/* A list of attributes inside a record (read with clrmux_xattr_next). */
struct clrmux_xattrs {
    const uint8_t *p, *end;
    uint16_t n;
};

/* A parsed record: views into it (valid while the record is). */
struct clrmux_xspan {
    uint8_t trace_id[16];
    uint64_t span_id, parent_id;
    int64_t start_ns, end_ns;
    uint8_t kind, status, flags;
    uint32_t tid;
    struct clrmux_xstr name, status_message, scope_name, scope_version, trace_state;
    struct clrmux_xattrs attrs;
    uint16_t nevents, nlinks;
    const uint8_t *events, *links, *end; /* read with clrmux_xevent_next / clrmux_xlink_next */
    size_t size;                         /* the record's bytes the parse read */
};

struct clrmux_xevent {
    int64_t time_ns;
    struct clrmux_xstr name;
    struct clrmux_xattrs attrs;
};

struct clrmux_xlink {
    uint8_t trace_id[16];
    uint64_t span_id;
    struct clrmux_xstr trace_state;
    struct clrmux_xattrs attrs;
};

/* Parses and checks record rec[0..len) whole (every length within it, kinds and types known).
 * Returns 0, or -1 (malformed: nothing in *out is to be used). */
int clrmux_xspan_parse(const uint8_t *rec, size_t len, struct clrmux_xspan *out);
/* The next attribute of l into *a (the list was checked by the parse). Returns 1, or 0 at the end. */
int clrmux_xattr_next(struct clrmux_xattrs *l, struct clrmux_xattr *a);
/* The next event / link of a parsed span: *cursor starts at x->events / x->links and *left at
 * x->nevents / x->nlinks. Returns 1, or 0 at the end. */
int clrmux_xevent_next(const uint8_t **cursor, uint16_t *left, struct clrmux_xevent *e);
int clrmux_xlink_next(const uint8_t **cursor, uint16_t *left, struct clrmux_xlink *l);

/* The records of a drained run recs[0..len) (as clrmux_xq_drain gives them: a u32 length and
 * the record, 4-byte aligned): the number of entries (an upper bound of the records) and, with
 * out, up to cap of them parsed into out[] (malformed ones skipped and counted in *nbad).
 * Returns how many were parsed. */
size_t clrmux_xspan_count_run(const uint8_t *recs, size_t len);
size_t clrmux_xspan_parse_run(const uint8_t *recs, size_t len, struct clrmux_xspan *out, size_t cap, size_t *nbad);
/* Whether a and b have the same instrumentation scope (name and version). */
int clrmux_xspan_same_scope(const struct clrmux_xspan *a, const struct clrmux_xspan *b);

/* ---- the queue (one per process) ---------------------------------------------------------
 * A ring of `bytes` (lazily mapped: nothing is touched until a record comes) under a mutex:
 * the agent's threads push whole records, the export thread drains them. */

/* 0, or -1 (no memory). Calling it again discards what is queued (tests). */
int clrmux_xq_init(size_t bytes);
/* Copies a record in (checks its version and header only). Returns 0; -1 malformed; -2 the
 * queue is full or not made (counted as dropped). */
int clrmux_xq_push(const uint8_t *rec, size_t len);
/* Moves whole records into out[0..cap), each as a u32 length and its bytes (4-byte aligned),
 * oldest first. Returns the bytes written (0: empty). Single consumer. */
size_t clrmux_xq_drain(uint8_t *out, size_t cap);
/* Records queued so far, dropped (queue full), waiting now. */
struct clrmux_xq_stats {
    uint64_t pushed, dropped, malformed;
    size_t waiting;
};
void clrmux_xq_stats(struct clrmux_xq_stats *s);

#endif
