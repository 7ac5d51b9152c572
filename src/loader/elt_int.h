/* The enter/leave/tailcall state shared by elt.c (what children set, clrmux's mapper, the
 * install) and elt_dispatch.c (the dispatchers the runtime's hooks reach): the records, the
 * per-child hooks, and the dispatchers' entry points. Internal to src/loader. */
#ifndef CLRMUX_ELT_INT_H
#define CLRMUX_ELT_INT_H

#include <pthread.h>

#include "loader/elt.h"
#include "loader/mux.h"

#if defined(_WIN32)
#define CLRMUX_ELT_HIDDEN
#else
#define CLRMUX_ELT_HIDDEN __attribute__((visibility("hidden")))
#endif

/* The fast-path stubs (elt_amd64.S, elt_arm64.S) take the registers the JIT uses on Linux
 * x64 and arm64 and on Windows x64 (the id in rcx there). CLRMUX_ELT_CALL_REGS: a child's own
 * fast-path hook is called with the JIT's special registers (Linux), not as a plain C function
 * of one argument (Windows x64, where the JIT's convention is the C one). */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(_WIN32)
#define CLRMUX_ELT_STUBS 1
#define CLRMUX_ELT_CALL_REGS 1
#elif defined(__x86_64__) && defined(_WIN32)
#define CLRMUX_ELT_STUBS 1
#define CLRMUX_ELT_CALL_REGS 0
#else
#define CLRMUX_ELT_STUBS 0
#define CLRMUX_ELT_CALL_REGS 0
#endif

#define SLOW_FLAGS ((DWORD)(COR_PRF_ENABLE_FUNCTION_ARGS | COR_PRF_ENABLE_FUNCTION_RETVAL | COR_PRF_ENABLE_FRAME_INFO))
#define ELT_MAGIC 0x636c726d7578454cull /* "clrmuxEL": marks a record made by clrmux's mapper */
#define ARENA_CHUNK (64 * 1024)

/* What one child set through its proxy. */
struct elt_child {
    enum clrmux_elt_gen gen;
    void *enter, *leave, *tailcall;
    int mapper2;        /* 0: FunctionIDMapper, 1: FunctionIDMapper2 */
    void *mapper;       /* NULL: the child gets the FunctionID as its client data, every function */
    void *mapper_data;  /* FunctionIDMapper2's clientData */
};

/* A hooking child, fixed when the hooks are installed (hooks can be set only in Initialize). */
struct elt_slot {
    struct clrmux_child *child;
    enum clrmux_elt_gen gen;
    void *enter, *leave, *tailcall;
};

/* One function as clrmux's mapper saw it: returned to the runtime as the FunctionIDOrClientID
 * that the hooks receive. */
struct elt_fn {
    uint64_t magic;
    FunctionID fid;
    uint64_t hooked;    /* bit per slot: that child hooks this function */
    UINT_PTR client[];  /* per slot: the client data its mapper returned (or the FunctionID) */
};

struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    _Alignas(16) unsigned char data[];
};

struct clrmux_elt {
    struct clrmux_mux *mux;
    pthread_mutex_t lock; /* children's mappers and the arena */
    struct elt_child per[CLRMUX_MAX_CHILDREN];
    int nslots;
    struct elt_slot slots[CLRMUX_MAX_CHILDREN];
    int installed; /* 0 none, 1 fast path, 2 WithInfo, 3 one child's own hooks */
    struct arena_chunk *arena;
};

/* The installed state the hooks read (one mux per process; elt_dispatch.c), set by
 * clrmux_elt_install and cleared by clrmux_elt_free. */
extern struct clrmux_elt *clrmux_elt_g CLRMUX_ELT_HIDDEN;

/* ---- elt_dispatch.c ---- */

/* The WithInfo hooks (slow path): what clrmux installs with SetEnterLeaveFunctionHooks3WithInfo;
 * the runtime's ProfileEnter/Leave/Tailcall call them as ordinary C functions. */
void STDMETHODCALLTYPE clrmux_elt_enter_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info) CLRMUX_ELT_HIDDEN;
void STDMETHODCALLTYPE clrmux_elt_leave_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info) CLRMUX_ELT_HIDDEN;
void STDMETHODCALLTYPE clrmux_elt_tailcall_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info) CLRMUX_ELT_HIDDEN;

/* The fast-path stubs (elt_amd64.S, elt_arm64.S): what the JIT calls directly; they save every
 * volatile register and call clrmux_elt_fast_enter/leave/tailcall (elt_dispatch.c). */
extern void clrmux_elt_enter3_stub(FunctionIDOrClientID id);
extern void clrmux_elt_leave3_stub(FunctionIDOrClientID id);
extern void clrmux_elt_tailcall3_stub(FunctionIDOrClientID id);

#endif
