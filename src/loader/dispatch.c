/* Dispatch tables: building, interning and publishing each callback's route (dispatch.h).
 * The callback side (one load, a loop, each child's call) is generated in mux.c. */
#include "loader/dispatch.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"
#include "loader/compose.h"
#include "loader/detach.h"
#include "loader/mux.h"

const struct clrmux_route clrmux_route_empty = {0};

/* What decides a route's subscribers: the kind of the method (gen/corprof_list.h), the
 * interface version a child must answer, and the mask bits it must ask for. */
enum { K_NONE, K_MASK, K_ALL };
struct route_spec {
    unsigned char kind, version;
    DWORD low, high;
};

#define SPEC_MASK(I, D, R, N, P, A, L, H) [CLRMUX_ROUTE_##N] = {K_MASK, CLRMUX_VER_##D, (DWORD)(L), (DWORD)(H)},
#define SPEC_MERGE SPEC_MASK
#define SPEC_JIT SPEC_MASK
#define SPEC_EVENTPIPE SPEC_MASK
#define SPEC_ALL(I, D, R, N, P, A, L, H) [CLRMUX_ROUTE_##N] = {K_ALL, CLRMUX_VER_##D, 0, 0},
/* ReJIT: the runtime raises ReJITCompilationStarted/Finished only for a profiler that
 * monitors JIT compilation, ReJITError for any; GetReJITParameters is composed (compose.c).
 * The mux filters these routes by the method's ReJIT owners. */
#define SPEC_REJIT(I, D, R, N, P, A, L, H)
#define SPEC_SELF(I, D, R, N, P, A, L, H)
#define SPEC_NONE(I, D, R, N, P, A, L, H)
#define SPEC(I, D, R, N, P, A, ROUTE) CLRMUX_ROUTE_APPLY(SPEC_, I, D, R, N, P, A, ROUTE)
static const struct route_spec specs[CLRMUX_NROUTES] = {
    CLRMUX_ALL_ICorProfilerCallback11(SPEC, x)
    [CLRMUX_ROUTE_ReJITCompilationStarted] = {K_MASK, 4, COR_PRF_MONITOR_JIT_COMPILATION, 0},
    [CLRMUX_ROUTE_ReJITCompilationFinished] = {K_MASK, 4, COR_PRF_MONITOR_JIT_COMPILATION, 0},
    [CLRMUX_ROUTE_ReJITError] = {K_ALL, 4, 0, 0},
};

/* Each JIT route's gates (dispatch.h): what makes its callback do clrmux's own work. The four
 * thread routes' gate comes from ownthreads.h's list (route_gates()). */
static const unsigned char jit_gates[CLRMUX_NROUTES] = {
    [CLRMUX_ROUTE_JITCompilationStarted] = CLRMUX_GATE_JIT_WORK | CLRMUX_GATE_WINDOW,
    [CLRMUX_ROUTE_JITCachedFunctionSearchStarted] = CLRMUX_GATE_JIT_WORK | CLRMUX_GATE_WINDOW,
    [CLRMUX_ROUTE_JITCompilationFinished] = CLRMUX_GATE_JIT_WORK,
    [CLRMUX_ROUTE_JITInlining] = CLRMUX_GATE_JIT_WORK | CLRMUX_GATE_INLINING,
};

static unsigned route_gates(int id)
{
    return jit_gates[id] | (clrmux_route_is_thread(id) ? CLRMUX_GATE_OWN_THREADS : 0u);
}

/* The gates closed now (sequentially consistent loads). */
static unsigned closed_gates(struct clrmux_mux *m)
{
    unsigned g = 0;
    if (m->compose_pending && atomic_load(m->compose_pending))
        g |= CLRMUX_GATE_JIT_WORK;
    if (atomic_load(&m->windows))
        g |= CLRMUX_GATE_WINDOW;
    if (m->compose && clrmux_compose_tracks_inlining(m))
        g |= CLRMUX_GATE_INLINING;
    if (atomic_load(&m->own.active))
        g |= CLRMUX_GATE_OWN_THREADS;
    return g;
}

void clrmux_dispatch_gate_closed(struct clrmux_mux *m, unsigned gates)
{
    for (int id = 0; id < CLRMUX_NROUTES; id++)
        if (route_gates(id) & gates) {
            atomic_store(&m->direct[id], NULL);
            atomic_store(&m->counted[id], NULL);
        }
}

void clrmux_dispatch_regate(struct clrmux_mux *m, enum clrmux_route_id id)
{
    const struct clrmux_route *r = atomic_load(&m->routes[id]);
    if (r->n != 1 || (!r->one && !atomic_load(&clrmux_evac_asymmetric)) || (route_gates(id) & closed_gates(m)))
        return;
    if (atomic_load(&m->direct[id]) || atomic_load(&m->counted[id]))
        return;
    clrmux_dispatch_update(m);
}

/* 1 when the runtime would refuse the child's RequestProfilerDetach for good (detach.c
 * checks the same under mask_lock): nothing can make it detachable again, so callbacks may
 * reach it without counting themselves in for evacuation. */
static int never_detaches(const struct clrmux_mux *m, struct clrmux_child *c)
{
    if (c->version < 3 || atomic_load(&c->set_il) || atomic_load(&c->used_rejit))
        return 1;
    /* immutable flags are fixed once Initialize is over (and refused after it) */
    return !atomic_load(&m->initializing) &&
           ((atomic_load(&c->mask_low) & m->immutable_low) || (atomic_load(&c->mask_high) & m->immutable_high));
}

static int subscribes(struct clrmux_child *c, const struct route_spec *s)
{
    if (!atomic_load(&c->active) || c->version < s->version)
        return 0;
    if (s->kind == K_ALL)
        return 1;
    return (atomic_load(&c->mask_low) & s->low) || (atomic_load(&c->mask_high) & s->high);
}

/* The interned route for (set, direct); NULL on OOM. */
static const struct clrmux_route *intern(struct clrmux_mux *m, uint64_t set, int direct)
{
    if (!set)
        return &clrmux_route_empty;
    for (struct clrmux_route *r = m->route_pool; r; r = r->next)
        if (r->set == set && (r->one != NULL) == direct)
            return r;
    unsigned n = (unsigned)__builtin_popcountll(set);
    struct clrmux_route *r = calloc(1, sizeof *r + n * sizeof r->e[0]);
    if (!r)
        return NULL;
    r->set = set;
    for (int i = 0; i < m->nchildren && i < 64; i++)
        if (set >> i & 1) {
            r->e[r->n].cb = m->children[i].cb;
            r->e[r->n].child = &m->children[i];
            r->n++;
        }
    if (direct)
        r->one = r->e[0].cb;
    r->next = m->route_pool;
    m->route_pool = r;
    return r;
}

void clrmux_dispatch_rebuild(struct clrmux_mux *m)
{
    int n = m->nchildren < 64 ? m->nchildren : 64;
    int asym = atomic_load(&clrmux_evac_asymmetric);
    const unsigned closed = closed_gates(m);
    uint64_t pinned = 0;
    for (int i = 0; i < n; i++)
        if (never_detaches(m, &m->children[i]))
            pinned |= 1ull << i;
    for (int id = 0; id < CLRMUX_NROUTES; id++) {
        const struct route_spec *s = &specs[id];
        uint64_t set = 0;
        if (s->kind != K_NONE)
            for (int i = 0; i < n; i++)
                if (subscribes(&m->children[i], s))
                    set |= 1ull << i;
        int direct = set && !(set & (set - 1)) && (set & pinned);
        const struct clrmux_route *r = intern(m, set, direct);
        if (!r) {
            LOG_ERROR("out of memory building the dispatch table; callback routing keeps its previous state");
            break; /* (the gates are still read again below) */
        }
        if (r != atomic_load_explicit(&m->routes[id], memory_order_relaxed))
            atomic_store_explicit(&m->routes[id], r, memory_order_release);
        ICorProfilerCallback11 *one = r->one;
        /* a sole subscriber that may detach: counted in with plain stores (needs membarrier) */
        ICorProfilerCallback11 *counted = !r->one && r->n == 1 && asym ? r->e[0].cb : NULL;
        if (route_gates(id) & closed)
            one = counted = NULL; /* the long way does clrmux's work (dispatch.h, gates) */
        /* (sequentially consistent: the gates are read again after these stores, below) */
        if (one != atomic_load_explicit(&m->direct[id], memory_order_relaxed))
            atomic_store(&m->direct[id], one);
        if (counted != atomic_load_explicit(&m->counted[id], memory_order_relaxed))
            atomic_store(&m->counted[id], counted);
    }
    /* a gate that closed while the pointers above were published: its routes go again (the
     * closing thread may have cleared them before those stores) */
    const unsigned now = closed_gates(m);
    if (now & ~closed)
        clrmux_dispatch_gate_closed(m, now & ~closed);
}

void clrmux_dispatch_update(struct clrmux_mux *m)
{
    pthread_mutex_lock(&m->mask_lock);
    clrmux_dispatch_rebuild(m);
    pthread_mutex_unlock(&m->mask_lock);
}

void clrmux_dispatch_free(struct clrmux_mux *m)
{
    for (int id = 0; id < CLRMUX_NROUTES; id++) {
        atomic_store(&m->direct[id], NULL);
        atomic_store(&m->counted[id], NULL);
        atomic_store(&m->routes[id], &clrmux_route_empty);
    }
    while (m->route_pool) {
        struct clrmux_route *r = m->route_pool;
        m->route_pool = r->next;
        free(r);
    }
}
