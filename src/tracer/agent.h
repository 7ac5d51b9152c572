/* The tracer's managed agent (Clrmux.Agent.dll, src/tracer/agent/): the ABI between it and
 * libclrmux.so, and the native side of it.
 *
 * The agent is a startup hook that the tracer adds to the ones the runtime runs before Main
 * (tracer/agent_boot.h), loaded only when the tracer is on and the agent file is trusted. It
 * finds libclrmux.so in its own folder (NativeLibrary), calls clrmux_agent_api, and from then
 * on works through the table: no P/Invoke, no marshalling (function pointers with blittable
 * arguments). Its parts:
 *   - async spans: the rewritten IL of a method that returns a Task calls the agent's managed
 *     entry points (registered with register_managed) to keep the span open until the task
 *     completes and to carry the span's context in an AsyncLocal (tracer/spans.h);
 *   - Activities: an ActivityListener records the process's Activities (ASP.NET Core,
 *     HttpClient, gRPC, any ActivitySource) as spans (record, tracer/xspan.h), through the
 *     tracer's pipeline.
 * The agent mirrors these structs in C# (src/tracer/agent/Native.cs): change both together and
 * bump CLRMUX_AGENT_ABI. */
#ifndef CLRMUX_TRACER_AGENT_H
#define CLRMUX_TRACER_AGENT_H

#include <stdint.h>

#include "tracer/spans.h"

#define CLRMUX_AGENT_ABI 3
#define CLRMUX_AGENT_DLL "Clrmux.Agent.dll"
#define CLRMUX_AGENT_SYMBOL "clrmux_agent_api"

/* The managed entry points the rewritten IL calls with `calli` (managed calling convention:
 * RuntimeMethodHandle.GetFunctionPointer of static methods of the agent). */
struct clrmux_agent_managed {
    uint32_t size; /* sizeof, as the agent knows it */
    uint32_t reserved;
    void *async_enter;   /* object AsyncEnter(int64 slot): the span's context becomes the
                            AsyncLocal's; returns a token for AsyncRestore (opaque here) */
    void *async_restore; /* void AsyncRestore(object token): the caller's context comes back */
    void *on_task;       /* void OnTask(object task, int64 slot): detaches span `slot` and
                            finishes it when the task completes */
    void *on_value_task; /* object OnValueTask(object boxed, int64 slot): the same for a
                            boxed ValueTask or ValueTask<T> that has not completed successfully;
                            returns the boxed ValueTask the method returns instead (it wraps
                            the task the span waits for: the original may be consumed once) */
    void *join_root;     /* void JoinRoot(): a root span just opened on this thread; the agent
                            joins it to the flow's innermost context (an async span's or an
                            Activity's) through `join` */
    void *integ_enter;   /* void IntegEnter(object this, object a0, object a1, object a2, object a3,
                            object[] more, int64 slot, int32 integ): a bytecode integration's
                            call (integ.h): the agent reads its attributes and attaches them to
                            span `slot`; more: arguments 4.. when the definition reads them, else
                            null */
    void *integ_exit;    /* void IntegExit(object ret, int64 slot, int32 integ): the call returned
                            ret (a definition that reads `return`); integ | CLRMUX_INTEG_ASYNC:
                            ret is the Task or boxed ValueTask whose result is read */
    void *empty_context; /* a strong GC handle (GCHandle.ToIntPtr: the address of the slot that
                            holds the object) of the runtime's ExecutionContext of a flow with no
                            AsyncLocal value (ExecutionContext.Default, what Capture() returns
                            there), or NULL: the rewritten IL compares Capture() with it and calls
                            join_root only when they differ (nothing to join in that flow) */
};

/* Flags of struct clrmux_agent_api. */
#define CLRMUX_AGENT_F_ACTIVITIES 1u /* record Activities (some instrumentation or source is on) */
#define CLRMUX_AGENT_F_PUSH 2u       /* keep each thread's async context current at every
                                        ExecutionContext change (ctx_set): the profiler's labels
                                        want it; else contexts are read when a root span opens */
#define CLRMUX_AGENT_F_RAW_QUERIES 4u /* sanitize_queries = false: db.query.text as the library gave
                                         it, literals included */

/* What the agent gets from clrmux_agent_api. Strings are UTF-8, owned by the tracer, valid
 * for the process's life. Calls are cdecl; none blocks for long; `span_peek`, `span_detach`,
 * `span_async_enter`, `span_failed`, `ctx_current`, `ctx_top` and `join` neither block, lock nor
 * allocate (the agent calls them without a
 * GC transition); `ctx_set` allocates a thread's span state once. */
struct clrmux_agent_api {
    uint32_t abi, size;
    const char *instrument;       /* built-in instrumentations on: "aspnetcore,httpclient,grpc,adonet,redis,rabbitmq,kafka" */
    const char *activity_sources; /* other ActivitySource names recorded: comma-separated
                                     patterns, `*` matches any run of characters; "" none */
    double sample_ratio;          /* head sampling of new root traces, 0..1 */
    uint32_t flags;               /* CLRMUX_AGENT_F_* */
    uint32_t reserved;
    /* 0, or -1 (a NULL pointer, an unknown size): the async rewrite stays off */
    int32_t (*register_managed)(const struct clrmux_agent_managed *m);
    int32_t (*span_peek)(int64_t slot, struct clrmux_span_ctx *out);           /* spans.h */
    int32_t (*span_detach)(int64_t slot, struct clrmux_async_span *out);       /* spans.h */
    void (*span_finish)(const struct clrmux_async_span *s, uint32_t exc, int32_t error);
    void (*ctx_set)(const struct clrmux_span_ctx *c);                          /* spans.h */
    int32_t (*ctx_current)(struct clrmux_span_ctx *out);                       /* spans.h */
    void (*join)(const struct clrmux_span_ctx *c);                             /* spans.h */
    int32_t (*ctx_top)(struct clrmux_span_ctx *out);                           /* spans.h */
    /* an exception name id for (type, message) (UTF-16, lengths in code units; msg may be
     * NULL), 0 when the table is full */
    uint32_t (*exc_intern)(const uint16_t *type, int32_t type_len, const uint16_t *msg, int32_t msg_len);
    /* an Activity span (tracer/xspan.h's record, len bytes): 0 queued, -1 malformed (logged
     * once), -2 dropped (the queue is full: counted) */
    int32_t (*record)(const uint8_t *rec, int32_t len);
    /* a log line from the agent (level: common/log.h; UTF-16, len code units) */
    void (*log)(int32_t level, const uint16_t *msg, int32_t len);
    /* AsyncEnter: span_peek, and the span becomes an async context (spans.h) */
    int32_t (*span_async_enter)(int64_t slot, struct clrmux_span_ctx *out);
    /* 1 when span_id was an async context whose method an exception left (spans.h) */
    int32_t (*span_failed)(uint64_t span_id);
    /* nonzero once span_failed can answer 1 (read without a call) */
    const uint32_t *failed_any;
    /* a bytecode integration's attributes for open span span_id (integ.h's blob): 0, or -1 */
    int32_t (*span_attach)(uint64_t span_id, const uint8_t *blob, int32_t len);
    /* integration `id`'s spec (integ.h: "key=value" lines, UTF-8, *len bytes), or NULL */
    const char *(*integ_spec)(int32_t id, int32_t *len);
};

/* Exported from libclrmux.so: the table when abi is CLRMUX_AGENT_ABI and a tracer set up the
 * agent's host (clrmux_agent_host_set), else NULL. */
const struct clrmux_agent_api *clrmux_agent_api(int32_t abi);

/* The tracer's side of the table (its callbacks and configuration), set before the agent can
 * load. */
struct clrmux_agent_host {
    const char *instrument, *activity_sources;
    double sample_ratio;
    uint32_t flags;
    uint32_t (*exc_intern)(const char *type, const char *msg); /* UTF-8 */
    int32_t (*record)(const uint8_t *rec, int32_t len);
    /* the agent registered its entry points (on the thread that runs the startup hooks) */
    void (*registered)(void);
    const char *(*integ_spec)(int32_t id, int32_t *len); /* as clrmux_agent_api's */
};
void clrmux_agent_host_set(const struct clrmux_agent_host *h);

/* The agent's entry points once registered (all set but empty_context), else NULL. */
const struct clrmux_agent_managed *clrmux_agent_managed_get(void);

/* 1 when the agent keeps each thread's context current at every ExecutionContext change
 * (CLRMUX_AGENT_F_PUSH, decided before the agent registers): its JoinRoot then has nothing to
 * do and the rewritten IL leaves the call out; else 0. */
int clrmux_agent_pushes(void);

#endif
