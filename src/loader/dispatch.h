/* Dispatch tables: for each ICorProfilerCallback method, the children that receive it.
 *
 * A route is the array of a callback's subscribers (live children that answered the method's
 * interface version and whose own mask asks for it, in loader.conf order). Every route of a
 * mux is rebuilt under mux->mask_lock whenever a child's mask, activity (Initialize failed,
 * detach) or detachability changes, and each route that changed is published with one
 * release store of its pointer in mux->routes[] (and of its `one` in mux->direct[]). The callback path is one acquire load, a
 * loop over the subscribers and each child's call: a child that did not ask for a callback
 * is not in its route and costs nothing.
 *
 * Direct routes: a route with exactly one subscriber that can never detach (see
 * clrmux_dispatch_rebuild) has `one` set, also published in mux->direct[]; the mux then
 * loads that pointer and calls the child as a tail call
 * without counting itself in for detach evacuation (detach.h), so the child's HRESULT reaches
 * the runtime as it would alone. A route with one subscriber that may detach is published in
 * mux->counted[] once membarrier(2) is registered: the mux counts itself in with one plain
 * add to its thread's record, loads that pointer, calls the child and counts itself out
 * (clrmux_evac_inc/dec). Any other route is walked under that same count once membarrier is
 * registered (the generated callbacks, mux.c), else inside clrmux_evac_enter/leave.
 *
 * Gates: a JIT route's callbacks also do clrmux's own work while some state outside the
 * children's masks holds (CLRMUX_GATE_*: compose's held-back ReJIT requests and JIT-time
 * compositions, compose tracking inlining for inliner ReJIT callbacks, an unhandled-exception
 * window open on some thread), and the thread routes once a child owns a thread
 * (ownthreads.h: that gate never opens again). While a route's gate is closed its direct[] and counted[]
 * pointers are NULL, so the callback path stays one load, a test and the child's call, and
 * the long way (mux.c) does the work. Closing is lock-free (clrmux_dispatch_gate_closed,
 * after the state changed, sequentially consistent); a rebuild re-reads the gates after its
 * stores, so a gate that closed meanwhile is never reopened by it. Reopening is a rebuild
 * (under mask_lock), made by whoever opens the gate under mask_lock, or by the first
 * callback of the route that finds it open (clrmux_dispatch_regate).
 *
 * Lifetime: routes are interned per mux (one object per distinct subscriber set and `one`
 * flag) and never freed while the mux lives, so a callback may hold a route it loaded for
 * as long as it likes. A rebuild that yields an existing set reuses its object: memory is
 * bounded by the distinct subscriber sets a process ever routes (typically a handful; at most
 * 2 per subset of children), not by the number of mask changes. */
#ifndef CLRMUX_DISPATCH_H
#define CLRMUX_DISPATCH_H

#include <stdint.h>

#include "clrmux/corprof.h"
#include "loader/versions.h"

struct clrmux_mux;
struct clrmux_child;

/* Route ids: CLRMUX_ROUTE_<Method> for every method of ICorProfilerCallback11 (with IUnknown's). */
enum clrmux_route_id {
#define CLRMUX_ROUTE_ID(I, D, R, N, P, A, ROUTE) CLRMUX_ROUTE_##N,
    CLRMUX_ALL_ICorProfilerCallback11(CLRMUX_ROUTE_ID, x)
#undef CLRMUX_ROUTE_ID
    CLRMUX_NROUTES
};

struct clrmux_route_entry {
    ICorProfilerCallback11 *cb;   /* the child's callback interface */
    struct clrmux_child *child;   /* for ownership filters (ReJIT) */
};

struct clrmux_route {
    /* the only subscriber, when it can never detach: called directly (tail call, not counted
     * for evacuation); NULL otherwise */
    ICorProfilerCallback11 *one;
    uint32_t n;                   /* subscribers in e[] */
    uint64_t set;                 /* bit per child index */
    struct clrmux_route *next;    /* the mux's intern list */
    struct clrmux_route_entry e[];
};

/* Gates (see above): bits of state that send a route's callbacks the long way. */
enum clrmux_gate {
    CLRMUX_GATE_JIT_WORK = 1, /* compose's jit_work is non-zero (compose_int.h) */
    CLRMUX_GATE_WINDOW = 2,   /* mux->windows is non-zero (mux.c, watch_exception) */
    CLRMUX_GATE_INLINING = 4, /* compose records inlining (clrmux_compose_tracks_inlining) */
    CLRMUX_GATE_OWN_THREADS = 8, /* a child brought in a thread of its own (ownthreads.h) */
};

/* The route with no subscriber (every route of a mux before its first rebuild). */
extern const struct clrmux_route clrmux_route_empty;

/* Recomputes every route of `mux` from its children and publishes those that changed. The
 * caller holds mux->mask_lock. A child is a route's subscriber when it is active, answered
 * the method's interface version and its own mask has one of the route's bits (ALL routes:
 * every active child of that version; REJIT routes: JIT compilation monitors, ReJITError:
 * every child answering ICorProfilerCallback4). A child can never detach (so a route whose
 * only subscriber it is may be direct) when the runtime would refuse its detach for good:
 * it lacks ICorProfilerCallback3, or after Initialize its mask holds an immutable flag, or it
 * set IL at JIT time or requested ReJIT. On OOM the old routes stay (logged). */
void clrmux_dispatch_rebuild(struct clrmux_mux *mux);

/* clrmux_dispatch_rebuild under mux->mask_lock (e.g. after Initialize, when immutable flags
 * are fixed and more routes may become direct). */
void clrmux_dispatch_update(struct clrmux_mux *mux);

/* Called after one of `gates` closed (its state changed, sequentially consistent): clears the
 * direct and counted pointers of every route behind those gates. Takes no lock; any thread. */
void clrmux_dispatch_gate_closed(struct clrmux_mux *mux, unsigned gates);

/* From the long way of route `id`'s callback, with no lock held: when the route's gates are
 * open again and it should have a direct or counted pointer but has none, rebuilds (takes
 * mask_lock). A few loads otherwise. */
void clrmux_dispatch_regate(struct clrmux_mux *mux, enum clrmux_route_id id);

/* Frees every route of a mux that no thread uses any more (tests; the live mux is never freed). */
void clrmux_dispatch_free(struct clrmux_mux *mux);

#endif
