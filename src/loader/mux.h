/* The mux: clrmux's ICorProfilerCallback11, its children and their ICorProfilerInfo proxies.
 *
 *   runtime --callback--> mux --for each child whose own mask asks--> child callback
 *   child --Info call--> proxy (one per child) --> records mask / ReJIT / ELT ownership
 *                                              \-> forwards everything else to the runtime
 *
 * Threads: the child array is written only during the mux's Initialize and is read-only
 * afterwards. The callback path reads each callback's route (dispatch.h: the children that
 * receive it), rebuilt under mux->mask_lock, which serialises mask changes; it takes no lock. */
#ifndef CLRMUX_MUX_H
#define CLRMUX_MUX_H

#include <pthread.h>
#include <stdatomic.h>

#include "clrmux/corprof.h"
#include "loader/compose.h"
#include "loader/config.h"
#include "loader/detach.h"
#include "loader/dispatch.h"
#include "loader/ownthreads.h"
#include "loader/runtime_version.h"
#include "common/unhandled.h"

struct clrmux_mux;

/* A child's view of ICorProfilerInfo: one COM object answering ICorProfilerInfo..15 (each
 * version the runtime answers). */
struct clrmux_proxy {
    ICorProfilerInfo15 iface;
    _Atomic LONG refs;
    struct clrmux_mux *mux;
    struct clrmux_child *child;
};

struct clrmux_child {
    char name[CLRMUX_NAME_MAX];
    int index;                /* position in mux->children: bit in ReJIT ownership masks */
    ICorProfilerCallback11 *cb; /* the highest interface the child answered (a prefix of 11) */
    int version;              /* 2..11: the highest ICorProfilerCallbackN it answered */
    struct clrmux_proxy proxy;
    _Atomic DWORD mask_low;   /* the child's own event mask (COR_PRF_MONITOR) */
    _Atomic DWORD mask_high;  /* and COR_PRF_HIGH_MONITOR */
    _Atomic int active;       /* 1 once its Initialize succeeded */
    _Atomic unsigned long calls; /* callbacks delivered (statistics) */
    _Atomic int set_il;       /* called ICorProfilerInfo::SetILFunctionBody (cannot detach) */
    _Atomic int used_rejit;   /* requested ReJIT or a revert (cannot detach) */
    _Atomic int detach_state; /* 0, 1 = detaching (inactive, being evacuated), 2 = detached */
};

struct clrmux_mux {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    /* each callback's subscribers (dispatch.h): written under mask_lock, read with one
     * acquire load per callback; never NULL (clrmux_route_empty) */
    _Atomic(const struct clrmux_route *) routes[CLRMUX_NROUTES];
    /* routes[i]->one, one load nearer: the callback's only subscriber when it never detaches */
    _Atomic(ICorProfilerCallback11 *) direct[CLRMUX_NROUTES];
    /* the callback's only subscriber when it may detach, once membarrier(2) is registered
     * (detach.h): called between two plain stores to the thread's evacuation counter */
    _Atomic(ICorProfilerCallback11 *) counted[CLRMUX_NROUTES];
    struct clrmux_route *route_pool; /* every route ever built (interned; under mask_lock) */
    const _Atomic int *compose_pending; /* held-back ReJIT requests (compose.c): non-zero sends JIT callbacks the long way */
    ICorProfilerInfo15 *info; /* the runtime's Info, highest version answered */
    int info_version;         /* 0 until Initialize; 1..15 */
    int runtime_major;        /* the runtime's major version (runtime_version.h); 0 = unknown */
    struct clrmux_runtime_version runtime_version; /* what the log names */
    /* 1 once the runtime called ICorProfilerCallback11::LoadAsNotificationOnly (runtimes
     * without that interface never do): only then is a child asked it */
    int runtime_asked_notification_only;
    struct clrmux_child *children;
    int nchildren;
    _Atomic int initializing; /* 1 while the children's Initialize run */
    int attaching;            /* 1: loaded by InitializeForAttach (children get InitializeForAttach) */
    pthread_mutex_t mask_lock;
    DWORD applied_low, applied_high; /* the union last set on the runtime */
    DWORD immutable_low, immutable_high;
    struct clrmux_compose *compose;              /* ReJIT owners and compositions (compose.h) */
    _Atomic DWORD own_low;    /* flags clrmux itself needs on the runtime (beside the children's) */
    _Atomic int watch_unhandled; /* 1: the exception callbacks feed common/unhandled.h */
    /* .NET 10: JIT and ReadyToRun-lookup callbacks while an exception is at a thread's
     * outermost frame (mux.c, watch_exception) */
    _Atomic int windows;         /* threads with such an exception */
    _Atomic DWORD window_low;    /* the flags they add to the union (0 when none) */
    struct clrmux_unhandled_hook hook; /* AppContext.OnUnhandledException (common/unhandled.h) */
    _Atomic(struct clrmux_elt *) elt;            /* enter/leave hooks (loader/elt.c); NULL until a child sets some */
    _Atomic(struct clrmux_ep *) ep;              /* EventPipe views (loader/eventpipe.c); NULL until a child starts one */
    struct clrmux_own_threads own; /* threads a child brought in itself (ownthreads.h) */
    struct clrmux_config cfg;
    _Atomic int shut_down;
    const struct clrmux_mux_control *control; /* the control channel (NULL: none) */
};

/* The run-time control channel's entry points (src/control/ctl_server.h), which the mux calls
 * at its Initialize and Shutdown. Given by the caller of clrmux_mux_create (the library's
 * entry, src/entry/exports.c: clrmux_control_channel), because src/control sits above the
 * loader (its commands read the mux) and the loader calls only downward. */
struct clrmux_mux_control {
    /* in Initialize, before the children's: 1 when the channel's thread is wanted */
    int (*configure)(int control, int perf_map);
    /* starts that thread (run off the app's main thread, after the membarrier registration) */
    void (*start)(void *arg);
    /* in Shutdown: stops accepting commands */
    void (*shutdown)(void);
};

/* Creates a mux with one reference (the class factory's CreateInstance), with `control` (NULL:
 * no control channel; not copied, must outlive the mux). NULL on OOM. */
struct clrmux_mux *clrmux_mux_create(const struct clrmux_mux_control *control);

/* Gives `child` its proxy's starting state. */
void clrmux_proxy_init(struct clrmux_proxy *p, struct clrmux_mux *mux, struct clrmux_child *child);

/* Sets child's mask and applies the union of every active child's mask (plus `child`, even
 * while it is still initialising) on the runtime. After the mux's Initialize, a change of
 * an immutable flag is refused with E_FAIL, as the runtime refuses it (not with
 * CORPROF_E_IMMUTABLE_FLAGS_SET: measured on .NET 8, 9 and 10); a union the runtime refuses is refused with the runtime's HRESULT and nothing changes. */
HRESULT clrmux_set_child_mask(struct clrmux_mux *mux, struct clrmux_child *child, DWORD low, DWORD high);
/* Recomputes the union (e.g. after a child was dropped) and sets it. */
HRESULT clrmux_apply_union(struct clrmux_mux *mux);

/* Adds COR_PRF_MONITOR flags that clrmux itself needs (never routed to a child that did not
 * ask for them) to the union and applies it. */
HRESULT clrmux_add_own_mask(struct clrmux_mux *mux, DWORD low);

/* Loads every enabled child of mux->cfg (file order) and calls its Initialize with its
 * proxy. Children that fail are logged and dropped. Returns the number of active children. */
int clrmux_load_children(struct clrmux_mux *mux);

/* Whether a child may receive callbacks of interface version `version` (it answered that
 * version and is active: initialised, not detached). */
static inline int clrmux_child_live(const struct clrmux_child *c, int version)
{
    return c->version >= version && atomic_load_explicit(&c->active, memory_order_acquire);
}

/* Whether a child with these masks receives a callback routed by (low, high). */
static inline int clrmux_route_match(const struct clrmux_child *c, DWORD low, DWORD high)
{
    return (atomic_load_explicit(&c->mask_low, memory_order_relaxed) & low) ||
           (atomic_load_explicit(&c->mask_high, memory_order_relaxed) & high);
}

/* The live mux (NULL before the runtime creates one). The control channel and tests use it. */
extern struct clrmux_mux *clrmux_the_mux;

#endif
