/* Composition internals shared by the compose*.c files, each calling only the ones below it:
 *   compose_jit.c    the JIT events (held-back requests, methods composed at JIT time)
 *   compose.c        requests and reverts by one owner, a child's leaving
 *   compose_chain.c  the chain of owners in GetReJITParameters, each owner's last link cached
 *   compose_view.c   what each child sees of the ReJIT versions: ReJIT IDs, ReJIT callbacks,
 *                    inliners
 *   compose_state.c  the state and the per-method records' table, names for log lines, the
 *                    runtime ReJIT request made on behalf of children
 * (tests/circles.sh keeps it so). Not for use outside src/loader/compose*.c. */
#ifndef CLRMUX_COMPOSE_INT_H
#define CLRMUX_COMPOSE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "clrmux/corprof.h"
#include "loader/compose.h"
#include "loader/dispatch.h"
#include "loader/mux.h"

#define NBUCKETS 4096

struct body {
    struct body *next;
    ULONG size;
    BYTE data[];
};

/* One owner's last link of a method's chain: what it set, given which input (cached so that a
 * rebuild asked by another child reuses it instead of calling the owner again, as alone). */
struct link {
    struct link *next;
    int child;           /* index */
    uint64_t in_hash;    /* FNV-1a of the input body (0 with in_size 0: the runtime's IL) */
    ULONG in_size;
    struct body *out;    /* the body it set (malloc'd), or NULL: it set none */
    int has_flags;
    DWORD flags;
    COR_IL_MAP *map;     /* malloc'd, or NULL */
    ULONG nmap;
};

/* A ReJIT version of a method and the children that see it (GetReJITIDs, ReJIT callbacks). */
struct ver {
    ReJITID id;
    uint64_t seen;
};

struct rec {
    struct rec *next;
    ModuleID module;
    mdMethodDef method;
    uint64_t owners;      /* requests in force */
    uint64_t pending;     /* held back until the first compilation */
    uint64_t jit_writers; /* Info::SetILFunctionBody at JIT time */
    uint64_t announce;    /* owners whose own request awaits its composition: called afresh in it,
                             they see the version it makes */
    uint64_t inliner_cb;  /* owners that asked for inlining callbacks on it */
    uint64_t cur_seen;    /* who sees the version last composed (for an ID not attributed yet) */
    int has_cur;
    uint64_t jit_as_rejit; /* held-back owners composed at JIT time: they see the method's JIT
                              compilations as ReJIT compilations of fake_id, as alone */
    ReJITID fake_id;
    int with_inliners;    /* some owner used RequestReJITWithInliners... */
    DWORD inliner_flags;  /* ...with these flags (OR) */
    int compiled;         /* JITCompilationStarted seen (or code found) */
    int inliner;          /* re-JITted because it inlined a requested method */
    struct body *bodies;  /* intermediate bodies of the last composition */
    struct body *base;    /* composed at JIT time: the method's IL before the ReJIT owners' */
    struct body *old_bases; /* bases a later JIT-time rewrite replaced (a child may still hold one
                               that GetILFunctionBody gave it): freed with the record */
    struct link *links;   /* each owner's last link */
    struct ver *vers;     /* the method's ReJIT IDs seen so far and their audiences */
    int nvers, capvers;
};

struct edge {
    struct edge *next;
    FunctionID caller, callee;
};

struct clrmux_compose {
    pthread_mutex_t lock;
    struct rec *buckets[NBUCKETS];
    _Atomic int nrecs;
    _Atomic int npending;                /* records with pending != 0 */
    _Atomic int nas_rejit;               /* records with jit_as_rejit != 0 */
    _Atomic int track_inlining;          /* two or more children have COR_PRF_ENABLE_REJIT */
    _Atomic int jit_work;                /* npending + nas_rejit: JIT callbacks need compose work */
    _Atomic uint64_t inliner_children;   /* asked for COR_PRF_REJIT_INLINING_CALLBACKS */
    ReJITID next_fake;                   /* under lock */
    /* inlining seen in JITInlining (caller inlined callee), for inliner callbacks */
    pthread_mutex_t edge_lock;
    struct edge **edges;                 /* NBUCKETS, allocated at the first edge */
    long nedges;
    int edges_full;
};

/* compose_state.c */

/* While this thread is in a runtime RequestReJIT made for these children (a ReJITError the
 * runtime raises then reaches them). */
extern __thread uint64_t clrmux_compose_tls_requesters;
extern __thread int clrmux_compose_tls_in_request;

/* Counts a record in or out of npending / nas_rejit, and of jit_work with it. When jit_work
 * leaves 0, the JIT routes' direct and counted pointers go (dispatch.h, gates) before the
 * caller goes on, so that every JIT callback that starts after it takes the long way; they
 * come back at the first JIT callback after jit_work is 0 again (clrmux_dispatch_regate). */
static inline void clrmux_compose_count(struct clrmux_mux *m, _Atomic int *counter, int delta)
{
    atomic_fetch_add(counter, delta);
    if (atomic_fetch_add(&m->compose->jit_work, delta) == 0 && delta > 0)
        clrmux_dispatch_gate_closed(m, CLRMUX_GATE_JIT_WORK);
}

static inline uint64_t clrmux_bit_of(const struct clrmux_child *c) { return 1ull << (c->index & 63); }

/* Asks the runtime for a ReJIT on behalf of `requesters` (whom a ReJITError it raises during
 * the call reaches; 0 for a rebuild nobody asked for). */
HRESULT clrmux_compose_runtime_rejit(struct clrmux_mux *m, uint64_t requesters, int with_inliners, DWORD flags,
                                     ULONG n, ModuleID *mods, mdMethodDef *methods);

/* Under cs->lock. */
struct rec *clrmux_compose_find(struct clrmux_compose *cs, ModuleID module, mdMethodDef method);
/* Under cs->lock. NULL on OOM (logged). */
struct rec *clrmux_compose_find_or_add(struct clrmux_compose *cs, ModuleID module, mdMethodDef method);
/* "'a' -> 'b'" for log lines. */
void clrmux_compose_names(struct clrmux_mux *m, uint64_t set, char *out, size_t outsz);
/* "Namespace.Type::Method (0x06000001)" for log lines. */
void clrmux_compose_method_name(struct clrmux_mux *m, ModuleID module, mdMethodDef method, char *out, size_t outsz);
void clrmux_compose_free_bodies(struct body *b);
void clrmux_compose_free_links(struct link *l);

/* compose_view.c */

/* Records `seen` as the audience of the method's newest ReJIT ID not attributed yet (asked of
 * the runtime through GetReJITIDs); when the runtime cannot tell, the next unknown ID met in a
 * ReJIT callback gets it (rec->cur_seen). Takes cs->lock. */
void clrmux_compose_attribute_newest(struct clrmux_mux *m, struct rec *r, uint64_t seen);
/* Under cs->lock: adds or widens an ID's audience. */
void clrmux_compose_ver_add(struct rec *r, ReJITID id, uint64_t seen);
/* The children that asked for inlining callbacks on a method `r` inlined (JITInlining edges);
 * every child that asked for inlining callbacks when no edge is known. Takes no lock held. */
uint64_t clrmux_compose_inliner_audience(struct clrmux_mux *m, ModuleID module, mdMethodDef method);

/* The chain (compose_chain.c). */
struct chain {
    struct chain *prev;
    ModuleID module;
    mdMethodDef method;
    const BYTE *in; /* the body the current link reads; NULL = the runtime's */
    ULONG in_size;
    struct body *bodies; /* allocated by this chain */
};

struct chain_result {
    const BYTE *body; /* the final body (in ch.bodies, a link or the base), NULL when nobody rewrote */
    ULONG size;
    int any_flags, nbodies;
    DWORD flags;
    COR_IL_MAP *map; /* malloc'd, or NULL */
    ULONG nmap;
    uint64_t called;   /* owners called */
    uint64_t reused;   /* owners whose last link was reused (not called: as alone) */
    uint64_t recalled; /* owners called again although they asked nothing: their input changed */
};

/* Runs the owners in file order; `fresh` (the requesters) are always called, the other owners
 * reuse their last link when its input is the same. */
void clrmux_compose_run_chain(struct clrmux_mux *m, struct rec *r, struct chain *ch, uint64_t owners, uint64_t fresh,
                              struct chain_result *res);
/* Keeps the chain's bodies with the record until its next composition. */
void clrmux_compose_keep_bodies(struct clrmux_compose *cs, struct rec *r, struct chain *ch);

#endif
