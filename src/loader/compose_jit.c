/* Composition's JIT events (see compose.h): a method whose ReJIT owners were held back is
 * composed at its first JIT compilation, its owners see its JIT compilations as ReJIT
 * compilations, and a JIT-time child that sets the IL of such a method again (at another
 * generic instantiation's compilation, a tier-1 compilation, any later time) gets the ReJIT
 * owners' rewrites composed on top of its new body before the runtime sees it. Precompiled
 * code and inlining are refused while a request is held back. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/cor.h"
#include "common/hresult.h"
#include "common/ilsize.h"
#include "common/log.h"
#include "loader/compose.h"
#include "loader/compose_int.h"
#include "loader/mux.h"

#define find clrmux_compose_find
#define bit_of clrmux_bit_of
#define names_of clrmux_compose_names
#define method_name clrmux_compose_method_name

/* Sets `body` as the method's IL at JIT time (ICorProfilerInfo::SetILFunctionBody with a
 * buffer from the module's IMethodMalloc, which the runtime owns). */
static HRESULT set_jit_body(struct clrmux_mux *m, ModuleID mod, mdMethodDef tok, const BYTE *body, ULONG size)
{
    IMethodMalloc *mm = NULL;
    HRESULT hr = m->info->lpVtbl->GetILFunctionBodyAllocator(m->info, mod, &mm);
    if (FAILED(hr) || !mm)
        return FAILED(hr) ? hr : E_FAIL;
    BYTE *p = mm->lpVtbl->Alloc(mm, size);
    if (p) {
        memcpy(p, body, size);
        hr = m->info->lpVtbl->SetILFunctionBody(m->info, mod, tok, p);
    } else {
        hr = E_OUTOFMEMORY;
    }
    mm->lpVtbl->Release(mm);
    return hr;
}

uint64_t clrmux_compose_jit_as_rejit(struct clrmux_mux *m, FunctionID fid, ReJITID *id)
{
    struct clrmux_compose *cs = m->compose;
    *id = 0;
    if (!atomic_load_explicit(&cs->jit_work, memory_order_acquire))
        return 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return 0;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    uint64_t set = 0;
    if (r) {
        set = r->jit_as_rejit;
        if (r->pending && !r->compiled)
            set |= r->pending; /* about to be composed at this compilation */
        if (set && !r->fake_id)
            r->fake_id = cs->next_fake++;
        *id = r->fake_id;
    }
    pthread_mutex_unlock(&cs->lock);
    return set;
}

/* Delivers ReJITCompilationStarted (finished = 0) or ReJITCompilationFinished to the children
 * of `set` that monitor JIT compilation (the runtime raises them only for such a profiler). */
static void as_rejit_callbacks(struct clrmux_mux *m, uint64_t set, int finished, FunctionID fid, ReJITID id,
                               HRESULT status, BOOL safe)
{
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        if (!(set >> (i & 63) & 1) || !clrmux_child_live(c, 4) ||
            !(atomic_load(&c->mask_low) & COR_PRF_MONITOR_JIT_COMPILATION))
            continue;
        if (finished)
            c->cb->lpVtbl->ReJITCompilationFinished(c->cb, fid, id, status, safe);
        else
            c->cb->lpVtbl->ReJITCompilationStarted(c->cb, fid, id, safe);
    }
}

/* The first compilation of a method whose ReJIT owners were held back, after the JIT-time
 * children saw JITCompilationStarted: the owners' chain runs now and its body becomes the
 * method's IL, so that every thread, also one that raced with this compilation, runs the
 * composed code from the first call (a ReJIT requested now would leave such a thread one
 * call on the code without the owners' rewrites). Codegen flags cannot be given at JIT time:
 * an owner that sets them gets a ReJIT on top, built from the same base. The owners then see
 * this compilation (and the method's later JIT compilations) as ReJIT compilations of a
 * version of their own, as alone: GetReJITParameters, ReJITCompilationStarted/Finished with
 * a ReJIT ID clrmux makes up (above the runtime's), which their GetReJITIDs lists. */
void clrmux_compose_jit_started(struct clrmux_mux *m, FunctionID fid, BOOL safe, uint64_t as_rejit, ReJITID as_id)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire)) {
        if (as_rejit)
            as_rejit_callbacks(m, as_rejit, 0, fid, as_id, S_OK, safe);
        return;
    }
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    uint64_t owners = 0;
    int with_inliners = 0;
    DWORD flags = 0;
    if (r && r->pending && !r->compiled) {
        owners = r->pending;
        r->pending = 0;
        clrmux_compose_count(m, &cs->npending, -1);
        with_inliners = r->with_inliners;
        flags = r->inliner_flags;
    }
    if (r)
        r->compiled = 1;
    pthread_mutex_unlock(&cs->lock);
    if (!owners) {
        if (as_rejit)
            as_rejit_callbacks(m, as_rejit, 0, fid, as_id, S_OK, safe);
        return;
    }
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    struct body *base = NULL;
    if (SUCCEEDED(m->info->lpVtbl->GetILFunctionBody(m->info, mod, tok, &il, &il_size)) && il && il_size &&
        (base = malloc(sizeof *base + il_size))) {
        base->next = NULL;
        base->size = il_size;
        memcpy(base->data, il, il_size);
    }
    struct chain ch = {.module = mod, .method = tok};
    struct chain_result res;
    memset(&res, 0, sizeof res);
    HRESULT hr = E_FAIL;
    if (base) {
        /* the runtime's IL now (with the JIT-time rewrites): the base later compositions start from */
        ch.in = base->data;
        ch.in_size = base->size;
        clrmux_compose_run_chain(m, r, &ch, owners, owners, &res);
        hr = res.nbodies ? set_jit_body(m, mod, tok, res.body, res.size) : S_OK;
    }
    char names[256], mname[600];
    names_of(m, owners, names, sizeof names);
    method_name(m, mod, tok, mname, sizeof mname);
    if (SUCCEEDED(hr)) {
        pthread_mutex_lock(&cs->lock);
        if (res.nbodies) {
            free(r->base);
            r->base = base;
            base = NULL;
        }
        /* alone, each owner's request made this first compilation a ReJIT of its own */
        uint64_t as = owners & r->owners;
        if (as && !r->jit_as_rejit)
            clrmux_compose_count(m, &cs->nas_rejit, 1);
        r->jit_as_rejit |= as;
        if (!r->fake_id)
            r->fake_id = cs->next_fake++;
        as_id = r->fake_id;
        as_rejit |= as;
        clrmux_compose_ver_add(r, r->fake_id, as);
        pthread_mutex_unlock(&cs->lock);
        if (res.nbodies)
            LOG_DEBUG("ReJIT composition of %s (module 0x%lx) at its first JIT compilation (held back): %s; "
                      "%d rewrite(s), final body %u bytes%s", mname, (unsigned long)mod, names, res.nbodies,
                      (unsigned)res.size, res.map ? "; instrumented-code map not given at JIT time" : "");
    } else {
        LOG_WARN("ReJIT composition of %s (module 0x%lx) at its first JIT compilation (held back) for %s: the "
                 "runtime refused the body: HRESULT %s; a ReJIT follows", mname, (unsigned long)mod, names,
                 HR_STR(hr));
    }
    clrmux_compose_keep_bodies(cs, r, &ch);
    free(res.map);
    free(base);
    if (as_rejit)
        as_rejit_callbacks(m, as_rejit, 0, fid, as_id, S_OK, safe);
    if (FAILED(hr) || res.any_flags) {
        /* the runtime refused the body, or codegen flags: a ReJIT it is, built from the base */
        pthread_mutex_lock(&cs->lock);
        r->announce |= owners;
        pthread_mutex_unlock(&cs->lock);
        HRESULT h2 = clrmux_compose_runtime_rejit(m, owners, with_inliners, flags, 1, &mod, &tok);
        if (FAILED(h2))
            LOG_WARN("ReJIT of %s for %s requested at its first compilation (%s) refused by the runtime: HRESULT %s",
                     mname, names, FAILED(hr) ? "the JIT-time body was refused" : "codegen flags", HR_STR(h2));
        else
            LOG_DEBUG("ReJIT of %s for %s requested at its first compilation (%s)", mname, names,
                      FAILED(hr) ? "the JIT-time body was refused" : "codegen flags");
    }
}

void clrmux_compose_jit_finished(struct clrmux_mux *m, FunctionID fid, HRESULT status, BOOL safe, uint64_t as_rejit,
                                 ReJITID as_id)
{
    struct clrmux_compose *cs = m->compose;
    if (as_rejit)
        as_rejit_callbacks(m, as_rejit, 1, fid, as_id, status, safe);
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire))
        return;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    uint64_t pending = 0;
    int with_inliners = 0;
    DWORD flags = 0;
    if (r) {
        r->compiled = 1;
        pending = r->pending;
        if (pending) {
            r->pending = 0;
            r->announce |= pending;
            clrmux_compose_count(m, &cs->npending, -1);
            with_inliners = r->with_inliners;
            flags = r->inliner_flags;
        }
    }
    pthread_mutex_unlock(&cs->lock);
    if (!pending)
        return;
    /* on the JIT thread, after JITCompilationFinished: the runtime makes this ReJIT win */
    HRESULT hr = clrmux_compose_runtime_rejit(m, pending, with_inliners, flags, 1, &mod, &tok);
    char names[256];
    names_of(m, pending, names, sizeof names);
    if (FAILED(hr))
        LOG_WARN("held-back ReJIT of method 0x%08x (module 0x%lx) for %s refused by the runtime: HRESULT %s",
                 (unsigned)tok, (unsigned long)mod, names, HR_STR(hr));
    else
        LOG_DEBUG("held-back ReJIT of method 0x%08x (module 0x%lx) for %s requested after its first compilation",
                  (unsigned)tok, (unsigned long)mod, names);
}

int clrmux_compose_may_inline(struct clrmux_mux *m, FunctionID callee)
{
    /* the runtime does not inline a method with a ReJIT request in force: neither while the
     * request is held back */
    return clrmux_compose_cache_search(m, callee);
}

int clrmux_compose_cache_search(struct clrmux_mux *m, FunctionID fid)
{
    struct clrmux_compose *cs = m->compose;
    if (!atomic_load_explicit(&cs->npending, memory_order_acquire))
        return 1;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID cls = 0;
    if (FAILED(m->info->lpVtbl->GetFunctionInfo(m->info, fid, &cls, &mod, &tok)))
        return 1;
    pthread_mutex_lock(&cs->lock);
    struct rec *r = find(cs, mod, tok);
    int refuse = r && r->pending && !r->compiled;
    pthread_mutex_unlock(&cs->lock);
    return !refuse;
}


/* ---- a JIT-time rewrite of a method composed at JIT time -------------------------------- */

/* Bodies past this are not taken as read from their own header (the API gives no size). */
#define MAX_JIT_BODY ((size_t)64 << 20)

/* The body the child set, as the runtime would read it: sized by its own header; a body
 * whose header clrmux cannot read goes to the runtime first and is read back from it (then
 * `*given` is set: the runtime has it already). NULL when the runtime refused it (*hr). */
static struct body *child_body(struct clrmux_mux *m, const char *child, ModuleID mod, mdMethodDef tok, LPCBYTE hdr,
                               int *given, HRESULT *hr)
{
    *given = 0;
    *hr = S_OK;
    size_t n = clrmux_il_body_size(hdr, MAX_JIT_BODY);
    LPCBYTE p = hdr;
    if (!n) {
        *hr = m->info->lpVtbl->SetILFunctionBody(m->info, mod, tok, hdr);
        if (FAILED(*hr))
            return NULL;
        *given = 1;
        ULONG sz = 0;
        p = NULL;
        if (FAILED(m->info->lpVtbl->GetILFunctionBody(m->info, mod, tok, &p, &sz)) || !p || !sz)
            return NULL;
        n = sz;
        LOG_DEBUG("child '%s': SetILFunctionBody of method 0x%08x with a header clrmux does not read (first byte "
                  "0x%02x): given to the runtime first, read back (%u bytes)", child, (unsigned)tok,
                  hdr ? hdr[0] : 0, (unsigned)n);
    }
    struct body *b = malloc(sizeof *b + n);
    if (b) {
        b->next = NULL;
        b->size = (ULONG)n;
        memcpy(b->data, p, n);
    }
    return b;
}

HRESULT clrmux_compose_jit_set_body(struct clrmux_mux *m, struct clrmux_child *child, ModuleID mod, mdMethodDef tok,
                                    LPCBYTE header)
{
    struct clrmux_compose *cs = m->compose;
    struct rec *r = NULL;
    int rebase = 0;
    if (header && atomic_load_explicit(&cs->nrecs, memory_order_acquire)) {
        pthread_mutex_lock(&cs->lock);
        r = find(cs, mod, tok);
        rebase = r && r->base;
        pthread_mutex_unlock(&cs->lock);
    }
    LOG_TRACE("child '%s': SetILFunctionBody of method 0x%08x (module 0x%lx)%s", child->name, (unsigned)tok,
              (unsigned long)mod, rebase ? ", composed at JIT time" : "");
    if (!rebase) {
        /* no ReJIT owner's rewrite in the method's IL: the runtime keeps the body as it is */
        HRESULT hr = m->info->lpVtbl->SetILFunctionBody(m->info, mod, tok, header);
        if (SUCCEEDED(hr))
            clrmux_compose_note_jit_writer(m, child, mod, tok);
        return hr;
    }
    /* Composed at JIT time: the method's IL holds the held-back owners' rewrites on top of the
     * base (the JIT-time children's). The child's new body replaces the base (it reads it back
     * as alone), and the owners' rewrites are composed on top of it before the runtime takes it,
     * so that no compilation, on any thread, reads the IL without them. An owner whose input is
     * unchanged (a child that rewrites each instantiation from its own copy of the original
     * IL sets the same body again) gets its last rewrite reused, not called, as alone. */
    int given = 0;
    HRESULT hr = S_OK;
    struct body *nb = child_body(m, child->name, mod, tok, header, &given, &hr);
    if (!nb) {
        if (FAILED(hr))
            return hr;
        return given ? S_OK : E_OUTOFMEMORY;
    }
    pthread_mutex_lock(&cs->lock);
    struct body *old = r->base;
    if (old && old->size == nb->size && !memcmp(old->data, nb->data, nb->size)) {
        free(nb); /* the same body again: the base stays (a child may hold its pointer) */
        nb = old;
    } else {
        r->base = nb;
        if (old) {
            old->next = r->old_bases;
            r->old_bases = old;
        }
    }
    const uint64_t owners = r->jit_as_rejit & r->owners;
    pthread_mutex_unlock(&cs->lock);
    struct chain ch = {.module = mod, .method = tok, .in = nb->data, .in_size = nb->size};
    struct chain_result res;
    memset(&res, 0, sizeof res);
    if (owners)
        clrmux_compose_run_chain(m, r, &ch, owners, 0, &res);
    const BYTE *body = res.nbodies && res.body ? res.body : nb->data;
    const ULONG size = res.nbodies && res.body ? res.size : nb->size;
    hr = owners || !given ? set_jit_body(m, mod, tok, body, size) : S_OK; /* (given: the runtime has it) */
    char names[256], mname[600];
    names_of(m, res.called | res.reused, names, sizeof names);
    method_name(m, mod, tok, mname, sizeof mname);
    if (FAILED(hr)) {
        LOG_WARN("child '%s': JIT-time rewrite of %s (module 0x%lx) composed with the ReJIT owners' (%s): the "
                 "runtime refused the body: HRESULT %s", child->name, mname, (unsigned long)mod,
                 owners ? names : "none", HR_STR(hr));
    } else if (clrmux_log_get_level() >= CLRMUX_LOG_DEBUG) {
        char reused[256], recalled[256];
        names_of(m, res.reused, reused, sizeof reused);
        names_of(m, res.recalled, recalled, sizeof recalled);
        LOG_DEBUG("JIT-time rewrite of %s (module 0x%lx) by '%s' after its composition at JIT time: the ReJIT "
                  "owners' rewrites composed on top again: %s; final body %u bytes%s%s%s%s%s", mname,
                  (unsigned long)mod, child->name, owners ? names : "no owner left", (unsigned)size,
                  res.any_flags ? ", codegen flags (not given at JIT time)" : "",
                  res.reused ? "; last rewrite reused, not called (as alone): " : "", res.reused ? reused : "",
                  res.recalled ? "; called again, their input changed: " : "", res.recalled ? recalled : "");
    }
    clrmux_compose_keep_bodies(cs, r, &ch);
    free(res.map);
    if (SUCCEEDED(hr) || given)
        clrmux_compose_note_jit_writer(m, child, mod, tok);
    return given && FAILED(hr) ? S_OK : hr;
}
