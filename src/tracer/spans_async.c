/* Async spans and the thread's async context (see spans.h): a span detached from its thread's
 * stack when its method returns a Task and finished when the task completes, and the context
 * the managed agent's AsyncLocal hands each thread as its ExecutionContext changes. */
#include "tracer/spans_int.h"

#include <stdatomic.h>
#include <string.h>

static void ctx_of(const struct tstate *t, const struct open_span *o, struct clrmux_span_ctx *out)
{
    const struct seg *s = &t->seg[o->seg];
    memcpy(out->trace_id, s->trace_id, 16);
    out->span_id = o->span_id;
    out->local_root = s->local_root;
    out->sampled = s->sampled;
    out->reserved = 0;
}

int clrmux_span_peek(int64_t slot, struct clrmux_span_ctx *out)
{
    struct tstate *t = spans_tls;
    if (!t || slot < 0 || slot >= (int64_t)t->depth)
        return 0;
    ctx_of(t, &t->stack[slot], out);
    return 1;
}

static uint32_t join_word; /* clrmux_spans_join_word */

const uint32_t *clrmux_spans_join_word(void) { return &join_word; }

void clrmux_spans_join_possible(void)
{
    if (!__atomic_load_n(&join_word, __ATOMIC_RELAXED))
        __atomic_store_n(&join_word, 1, __ATOMIC_RELAXED);
}

int clrmux_span_async_enter(int64_t slot, struct clrmux_span_ctx *out)
{
    struct tstate *t = spans_tls;
    if (!t || slot < 0 || slot >= (int64_t)t->depth)
        return 0;
    clrmux_spans_join_possible(); /* the flow has a context from now on: root spans look */
    t->stack[slot].entered = 1;
    ctx_of(t, &t->stack[slot], out);
    return 1;
}

int clrmux_span_detach(int64_t slot, struct clrmux_async_span *out)
{
    struct tstate *t = spans_tls;
    if (slot < 0) {
        clrmux_span_exit(slot); /* the frame without a span returns, as exit counts it */
        return 0;
    }
    if (!t || slot >= (int64_t)t->depth)
        return 0;
    if ((int64_t)t->depth > slot + 1) /* left without their exit probe: closed as exit does */
        clrmux_span_exit(slot + 1);
    uint32_t d = --t->depth;
    const struct open_span *o = &t->stack[d];
    const struct seg *s = &t->seg[o->seg];
    memset(out, 0, sizeof *out);
    memcpy(out->trace_id, s->trace_id, 16);
    out->span_id = o->span_id;
    out->parent_id = o->segroot ? s->root_parent : t->stack[d - 1].span_id;
    out->start = o->start;
    out->method = o->method;
    out->tid = t->tid;
    out->flags = (uint16_t)(o->flags | (s->joined ? CLRMUX_SPAN_JOINED : 0));
    out->sampled = s->sampled;
    if (d == 0)
        t->pending_exc = 0;
    spans_ctx_update(t);
    return 1;
}

void clrmux_span_finish(const struct clrmux_async_span *s, uint32_t exc, int error)
{
    uint64_t end = ticks();
    struct tstate *t = spans_tls;
    if (!t && !(t = spans_tstate_new()))
        return;
    spans_record_async(t, s, end < s->start ? s->start : end, exc > UINT16_MAX ? 0 : (uint16_t)exc, error);
}

void clrmux_span_ctx_set(const struct clrmux_span_ctx *c)
{
    struct tstate *t = spans_tls;
    if (!t && (!c || !c->span_id || !(t = spans_tstate_new())))
        return; /* no state and no context: nothing to clear */
    struct actx *a = &t->actx;
    if (c && c->span_id) {
        clrmux_spans_join_possible();
        memcpy(a->trace_id, c->trace_id, 16);
        a->local_root = c->local_root;
        a->sampled = (uint8_t)(c->sampled & 1);
        a->span_id = c->span_id;
    } else {
        a->span_id = 0;
    }
    if (!t->depth)
        spans_ctx_update(t);
}

int clrmux_span_ctx_current(struct clrmux_span_ctx *out)
{
    struct tstate *t = spans_tls;
    if (!t)
        return 0;
    const struct actx *a = &t->actx;
    if (t->depth) {
        const struct open_span *o = &t->stack[t->depth - 1];
        if (a->span_id == o->actx_span || a->span_id == o->span_id) {
            ctx_of(t, o, out);
            return 1;
        }
    }
    if (!a->span_id)
        return 0;
    memcpy(out->trace_id, a->trace_id, 16);
    out->span_id = a->span_id;
    out->local_root = a->local_root;
    out->sampled = a->sampled;
    out->reserved = 0;
    return 1;
}

void clrmux_span_join_ctx(const struct clrmux_span_ctx *c)
{
    struct tstate *t = spans_tls;
    if (!t || t->depth != 1 || !c || !c->span_id)
        return;
    struct seg *s = &t->seg[0];
    memcpy(s->trace_id, c->trace_id, 16);
    s->root_parent = c->span_id;
    s->local_root = c->local_root ? c->local_root : c->span_id;
    s->sampled = (uint8_t)(c->sampled & 1);
    s->joined = 1;
    spans_ctx_update(t);
}

int clrmux_span_ctx_top(struct clrmux_span_ctx *out)
{
    struct tstate *t = spans_tls;
    if (!t || !t->depth || !out)
        return 0;
    ctx_of(t, &t->stack[t->depth - 1], out);
    return 1;
}
