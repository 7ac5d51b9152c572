/* Threads a child brings into the runtime itself (ICorProfilerInfo4::InitializeCurrentThread
 * on a thread of its own, e.g. the tracer's ReJIT thread, a vendor's worker) are that child's
 * own: the runtime reports such a thread to its one profiler (ThreadCreated and
 * ThreadAssignedToOSThread on that thread when the runtime first needs a Thread object for
 * it, e.g. in RequestReJIT: measured on .NET 10, not inside InitializeCurrentThread; later
 * ThreadNameChanged and ThreadDestroyed), and alone only that child would have seen it. So
 * those four callbacks about an owned thread reach its owner only (when its mask asks for
 * them); a thread clrmux brings in for itself with clrmux_own_thread_initialize(mux, NULL)
 * reaches no child (clrmux's detach thread does not: it exists only after a detach).
 *
 * Cost: nothing until the first such thread; from then on the four thread callbacks leave
 * the direct and counted paths (their gate in dispatch.h) and their walk looks the ThreadID up in a table
 * of CLRMUX_OWN_THREADS slots (rare callbacks: one per thread start, name change and end).
 * A thread that later runs managed code is still reported to its owner only; the other
 * children then see callbacks on a ThreadID they were never told about (as they would if it
 * had been created before they attached). A full table is logged once; further threads are
 * reported to every subscriber, as before. */
#ifndef CLRMUX_OWNTHREADS_H
#define CLRMUX_OWNTHREADS_H

#include <stdatomic.h>
#include <stdint.h>

#include "clrmux/corprof.h"
#include "loader/dispatch.h"

struct clrmux_mux;
struct clrmux_child;

#define CLRMUX_OWN_THREADS 32

struct clrmux_own_threads {
    _Atomic int active; /* 1 once a thread was brought in (read by clrmux_dispatch_rebuild) */
    _Atomic int full_logged;
    struct {
        _Atomic uintptr_t tid;                 /* the runtime's ThreadID; 0 = free */
        struct clrmux_child *_Atomic owner;    /* NULL: clrmux's own thread */
    } slot[CLRMUX_OWN_THREADS];
};

/* Whether callback `id` is about one thread given as its first argument. */
static inline int clrmux_route_is_thread(int id)
{
    return id == CLRMUX_ROUTE_ThreadCreated || id == CLRMUX_ROUTE_ThreadAssignedToOSThread ||
           id == CLRMUX_ROUTE_ThreadNameChanged || id == CLRMUX_ROUTE_ThreadDestroyed;
}

/* ICorProfilerInfo4::InitializeCurrentThread on mux->info for `owner` (NULL: for clrmux
 * itself), which marks the calling thread as the owner's for the rest of its life: the
 * ThreadCreated / ThreadAssignedToOSThread the runtime makes on it, and later callbacks about
 * that ThreadID, go to `owner` only. Called inside a callback (the thread is the runtime's),
 * it only forwards. Returns the runtime's HRESULT (E_NOTIMPL when the
 * runtime has no ICorProfilerInfo4). The first call closes the thread routes' gate
 * (dispatch.h), lock-free. */
HRESULT clrmux_own_thread_initialize(struct clrmux_mux *mux, struct clrmux_child *owner);

/* For the walk of thread callback `id` about ThreadID `tid`: 1 when the thread is owned (a
 * ThreadCreated/ThreadAssignedToOSThread made on a thread marked by
 * clrmux_own_thread_initialize records it; a ThreadDestroyed frees its slot), with *only = its owner (NULL: no
 * child); 0 when every subscriber gets it. */
int clrmux_own_thread_filter(struct clrmux_mux *mux, int id, uintptr_t tid, struct clrmux_child **only);

#endif
