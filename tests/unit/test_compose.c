/* Composition (src/loader/compose.c) against the fake runtime: chains of fake rewriters in
 * GetReJITParameters, later requests, revert by one owner, held-back requests for methods a
 * JIT-watching child has not seen yet, inliners, and instrumented-code maps.
 *
 * A fake rewriter's "IL" is a string: it reads the body through its own proxy's
 * GetILFunctionBody, records what it read (fc->seen) and sets that body plus its tag letter
 * through the function control it received. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fake_runtime.h"
#include "loader/compose.h"

#define MOD 0x7000
#define M1 0x06000001
#define M2 0x06000002

static void read_body(struct fake_child *fc, ModuleID mod, mdMethodDef method)
{
    LPCBYTE hdr = NULL;
    ULONG size = 0;
    fc->seen[0] = 0;
    if (SUCCEEDED(fc->info->lpVtbl->GetILFunctionBody(fc->info, mod, method, &hdr, &size)) && hdr) {
        memcpy(fc->seen, hdr, size);
        fc->seen[size] = 0;
    }
}

/* Appends its tag to the body it reads; sets codegen flag (1 << tag-'a') and a map
 * {0 -> 1}: its one byte at the end moves nothing, but the map shows the composition. */
static void rewriter(struct fake_child *fc, ModuleID mod, mdMethodDef method, ICorProfilerFunctionControl *ctl)
{
    read_body(fc, mod, method);
    char out[300];
    snprintf(out, sizeof out, "%s%c", fc->seen, fc->tag);
    assert_int_equal(ctl->lpVtbl->SetILFunctionBody(ctl, (ULONG)strlen(out), (LPCBYTE)out), S_OK);
    memset(out, 'X', sizeof out); /* the child's buffer is its own: clrmux must have copied */
    /* after its own SetILFunctionBody, a child still reads its input, as alone */
    LPCBYTE again = NULL;
    ULONG size = 0;
    fc->info->lpVtbl->GetILFunctionBody(fc->info, mod, method, &again, &size);
    assert_int_equal(size, strlen(fc->seen));
    assert_memory_equal(again, fc->seen, size);
    ctl->lpVtbl->SetCodegenFlags(ctl, 1u << (fc->tag - 'a'));
    COR_IL_MAP map[2] = {{0, 1, TRUE}, {4, 6, TRUE}};
    ctl->lpVtbl->SetILInstrumentedCodeMap(ctl, 2, map);
}

/* The rewrite alone (no codegen flags, no map). */
static void plain_rewriter(struct fake_child *fc, ModuleID mod, mdMethodDef method, ICorProfilerFunctionControl *ctl)
{
    read_body(fc, mod, method);
    char out[300];
    snprintf(out, sizeof out, "%s%c", fc->seen, fc->tag);
    assert_int_equal(ctl->lpVtbl->SetILFunctionBody(ctl, (ULONG)strlen(out), (LPCBYTE)out), S_OK);
}

/* Reads the body but leaves it alone. */
static void watcher(struct fake_child *fc, ModuleID mod, mdMethodDef method, ICorProfilerFunctionControl *ctl)
{
    (void)ctl;
    read_body(fc, mod, method);
}

/* JIT time: appends its tag through Info::SetILFunctionBody (the runtime keeps it), once per
 * method (a later compilation finds its tag in the IL it reads and leaves it). */
static void jit_rewriter(struct fake_child *fc, FunctionID fid)
{
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (FAILED(fc->info->lpVtbl->GetFunctionInfo(fc->info, fid, &cls, &mod, &tok)))
        return;
    read_body(fc, mod, tok);
    if (strchr(fc->seen, fc->tag))
        return;
    static char out[300];
    snprintf(out, sizeof out, "%s%c", fc->seen, fc->tag);
    fc->info->lpVtbl->SetILFunctionBody(fc->info, mod, tok, (LPCBYTE)out);
}

static const DWORD REJIT = COR_PRF_ENABLE_REJIT;

static struct clrmux_mux *setup(struct fake_runtime *rt, struct fake_child *kids, const char *tags,
                                const DWORD *masks, struct clrmux_child **cs)
{
    fake_runtime_init(rt, 15, 10);
    strcpy((char *)rt->il, "R");
    rt->il_size = 1;
    struct clrmux_mux *m = fake_mux_new(rt);
    for (int i = 0; tags[i]; i++) {
        fake_child_init(&kids[i], 11, masks[i], 0);
        kids[i].tag = tags[i];
        char name[2] = {tags[i], 0};
        cs[i] = fake_mux_add_child(m, &kids[i], name);
    }
    fake_mux_end_init(m);
    return m;
}

static HRESULT rejit(struct clrmux_child *c, mdMethodDef method)
{
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {method};
    ICorProfilerInfo15 *p = fake_child_info(c);
    return p->lpVtbl->RequestReJIT(p, 1, mods, methods);
}

static void test_rejit_chain_in_file_order(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[3];
    struct clrmux_child *c[3];
    /* c does not monitor JIT compilation: the runtime would not raise ReJITCompilation* to it */
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[3] = {REJIT | JIT, REJIT | JIT, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "abc", masks, c);
    fake_runtime_add_function(&rt, 0x501, MOD, M1); /* compiled already: nothing held back */
    for (int i = 0; i < 3; i++)
        k[i].rejit_hook = rewriter;
    k[1].rejit_hook = watcher; /* b only reads */
    /* requests in reverse order: the chain still follows loader.conf */
    assert_int_equal(rejit(c[2], M1), S_OK);
    assert_int_equal(rejit(c[1], M1), S_OK);
    assert_int_equal(rejit(c[0], M1), S_OK);
    assert_int_equal(rt.rejit_calls, 3);

    struct fake_fc fc;
    fake_fc_init(&fc);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal(k[0].seen, "R");   /* the first child reads the runtime's IL */
    assert_string_equal(k[1].seen, "Ra");  /* the next reads the previous link */
    assert_string_equal(k[2].seen, "Ra");  /* a watcher passes the body on */
    assert_int_equal(fc.set_body_calls, 1); /* the final body is set once */
    assert_string_equal((char *)fc.body, "Rac");
    assert_int_equal(fc.set_flags_calls, 1);
    assert_int_equal(fc.flags, 1u | 4u); /* union of a's and c's */
    /* maps {0->1, 4->6} twice: 0 -> 1 -> 2 (1 moves with the entry at 0), 4 -> 6 -> 8 */
    assert_int_equal(fc.set_map_calls, 1);
    assert_int_equal(fc.nmap, 2);
    assert_int_equal(fc.map[0].oldOffset, 0);
    assert_int_equal(fc.map[0].newOffset, 2);
    assert_false(fc.map[0].fAccurate);
    assert_int_equal(fc.map[1].oldOffset, 4);
    assert_int_equal(fc.map[1].newOffset, 8);
    assert_false(fc.map[1].fAccurate);

    /* outside a composition, GetILFunctionBody is the runtime's again */
    read_body(&k[1], MOD, M1);
    assert_string_equal(k[1].seen, "R");

    /* ReJIT compilation callbacks reach the owners that monitor JIT compilation */
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x501, 1, TRUE);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[2], ReJITCompilationStarted), 0);
    fake_mux_free(m);
}

static void test_later_request_rebuilds_from_all_owners(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    DWORD masks[2] = {REJIT, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    k[0].rejit_hook = k[1].rejit_hook = rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    struct fake_fc fc;

    assert_int_equal(rejit(c[1], M1), S_OK);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rb");
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 0);

    /* a asks later: the runtime makes a new version, which holds both rewrites */
    assert_int_equal(rejit(c[0], M1), S_OK);
    assert_int_equal(rt.rejit_calls, 2);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rab");
    assert_string_equal(k[1].seen, "Ra");

    /* another method stays b-free */
    assert_int_equal(rejit(c[0], M2), S_OK);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M2, &fc.iface);
    assert_string_equal((char *)fc.body, "Ra");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 2);
    fake_mux_free(m);
}

static void test_revert_by_one_owner(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    DWORD masks[2] = {REJIT, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    k[0].rejit_hook = k[1].rejit_hook = rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(rejit(c[0], M1), S_OK);
    assert_int_equal(rejit(c[1], M1), S_OK);

    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    HRESULT status[1] = {E_FAIL};
    ICorProfilerInfo15 *pa = fake_child_info(c[0]);
    assert_int_equal(pa->lpVtbl->RequestRevert(pa, 1, mods, methods, status), S_OK);
    assert_int_equal(status[0], S_OK);
    assert_int_equal(rt.revert_calls, 0); /* b still rewrites it: rebuilt, not reverted */
    assert_int_equal(rt.rejit_calls, 3);
    assert_int_equal(clrmux_compose_owners(m, MOD, M1), 2);
    struct fake_fc fc;
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rb");
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 0);

    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    status[0] = E_FAIL;
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, status), S_OK);
    assert_int_equal(rt.revert_calls, 1); /* the last owner: the runtime reverts */
    assert_int_equal(rt.revert_methods[0], M1);
    assert_int_equal(status[0], S_OK);
    assert_int_equal(rt.rejit_calls, 3);
    assert_int_equal(clrmux_compose_owners(m, MOD, M1), 0);
    fake_mux_free(m);
}

static void test_held_back_until_first_jit(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    /* a rewrites at JIT time, b rewrites through ReJIT */
    DWORD masks[2] = {COR_PRF_MONITOR_JIT_COMPILATION, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    k[0].jit_hook = jit_rewriter;
    k[1].rejit_hook = plain_rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    DWORD before = rt.mask_low;

    assert_int_equal(rejit(c[1], M1), S_OK); /* not compiled yet: held back */
    assert_int_equal(rt.rejit_calls, 0);
    assert_true(rt.mask_low & COR_PRF_MONITOR_CACHE_SEARCHES); /* clrmux's own flag... */
    assert_int_equal(rt.mask_low & ~(DWORD)COR_PRF_MONITOR_CACHE_SEARCHES, before);
    BOOL use = TRUE;
    fake_runtime_add_function(&rt, 0x501, MOD, M1);
    mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x501, &use);
    assert_false(use); /* ...to refuse precompiled code for it */
    BOOL inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x777, 0x501, &inl);
    assert_false(inl); /* nor inlined, as the runtime treats a method with a ReJIT request */
    assert_int_equal(FC_CALLS(&k[0], JITCachedFunctionSearchStarted), 0); /* not routed to a child that did not ask */

    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_int_equal(FC_CALLS(&k[0], JITCompilationStarted), 1); /* a sees the first compilation */
    /* the held-back owner's chain ran after a's JIT-time rewrite; its body is the method's IL,
     * so every thread runs it from the first call; no ReJIT needed */
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    assert_string_equal(k[1].seen, "Ra");
    assert_string_equal((char *)rt.il, "Rab");
    mux->lpVtbl->JITCompilationFinished(mux, 0x501, S_OK, TRUE);
    assert_int_equal(rt.rejit_calls, 0);
    /* outside a composition, children read the IL before the ReJIT owners' rewrites */
    read_body(&k[0], MOD, M1);
    assert_string_equal(k[0].seen, "Ra");
    /* a second compilation (tier 1) composes nothing again */
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    use = TRUE;
    mux->lpVtbl->JITCachedFunctionSearchStarted(mux, 0x501, &use);
    assert_true(use);
    BOOL inl2 = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x777, 0x501, &inl2);
    assert_true(inl2);
    /* a later ReJIT builds from that base: b's rewrite once, not twice */
    assert_int_equal(rejit(c[1], M1), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    struct fake_fc fc;
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal(k[1].seen, "Ra");
    assert_string_equal((char *)fc.body, "Rab");
    /* the last owner's revert rebuilds the base (the runtime's own IL holds b's rewrite) */
    ModuleID rmods[1] = {MOD};
    mdMethodDef rmethods[1] = {M1};
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, rmods, rmethods, NULL), S_OK);
    assert_int_equal(rt.revert_calls, 0);
    assert_int_equal(rt.rejit_calls, 2);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 2);
    assert_string_equal((char *)fc.body, "Ra");

    /* an owner that sets codegen flags (JIT time cannot take them) gets a ReJIT on top */
    k[1].rejit_hook = rewriter;
    assert_int_equal(rejit(c[1], M2), S_OK); /* M2 not compiled yet: held back */
    int before_rejits = rt.rejit_calls;
    fake_runtime_add_function(&rt, 0x502, MOD, M2);
    mux->lpVtbl->JITCompilationStarted(mux, 0x502, TRUE);
    assert_int_equal(rt.rejit_calls, before_rejits + 1);
    assert_int_equal(rt.rejit_methods[0], M2);

    /* a method that has code already is requested at once */
    fake_runtime_add_function(&rt, 0x503, MOD, 0x06000003);
    before_rejits = rt.rejit_calls;
    assert_int_equal(rejit(c[1], 0x06000003), S_OK);
    assert_int_equal(rt.rejit_calls, before_rejits + 1);
    fake_mux_free(m);
}

static void test_no_hold_back_without_jit_watchers(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    /* the requester itself watches JIT: alone it would lose that JITCompilationStarted too */
    DWORD masks[2] = {REJIT | COR_PRF_MONITOR_JIT_COMPILATION, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    assert_int_equal(rejit(c[0], M1), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    assert_false(rt.mask_low & COR_PRF_MONITOR_CACHE_SEARCHES);
    /* b's request is held back: a watches JIT compilation */
    assert_int_equal(rejit(c[1], M2), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    /* a revert of a held-back request never reaches the runtime */
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M2};
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, NULL), S_OK);
    assert_int_equal(rt.revert_calls, 0);
    fake_runtime_add_function(&rt, 0x502, MOD, M2);
    fake_mux_cb(m)->lpVtbl->JITCompilationFinished(fake_mux_cb(m), 0x502, S_OK, TRUE);
    assert_int_equal(rt.rejit_calls, 1);
    fake_mux_free(m);
}

static void test_held_back_owner_joins_a_rejit_first_compilation(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[3];
    struct clrmux_child *c[3];
    DWORD masks[3] = {COR_PRF_MONITOR_JIT_COMPILATION, REJIT, REJIT};
    struct clrmux_mux *m = setup(&rt, k, "abc", masks, c);
    k[1].rejit_hook = k[2].rejit_hook = rewriter;
    assert_int_equal(rejit(c[1], M1), S_OK); /* held back: a watches JIT */
    assert_int_equal(rt.rejit_calls, 0);
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    ICorProfilerInfo15 *pc = fake_child_info(c[2]);
    /* with inliners: never held back (the target may only ever run inlined) */
    assert_int_equal(pc->lpVtbl->RequestReJITWithInliners(pc, COR_PRF_REJIT_BLOCK_INLINING, 1, mods, methods), S_OK);
    assert_int_equal(rt.rejit_calls, 1);
    struct fake_fc fc;
    fake_fc_init(&fc);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rbc"); /* b joined the first compilation */
    fake_runtime_add_function(&rt, 0x501, MOD, M1);
    mux->lpVtbl->JITCompilationFinished(mux, 0x501, S_OK, TRUE);
    assert_int_equal(rt.rejit_calls, 1); /* nothing left to request */
    fake_mux_free(m);
}

static void test_inliners_reach_the_requester(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    DWORD masks[2] = {REJIT | COR_PRF_MONITOR_JIT_COMPILATION, REJIT | COR_PRF_MONITOR_JIT_COMPILATION};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    fake_runtime_add_function(&rt, 0x501, MOD, M1);
    k[0].rejit_hook = k[1].rejit_hook = rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    ICorProfilerInfo15 *pa = fake_child_info(c[0]);
    const DWORD flags = COR_PRF_REJIT_BLOCK_INLINING | COR_PRF_REJIT_INLINING_CALLBACKS;
    assert_int_equal(pa->lpVtbl->RequestReJITWithInliners(pa, flags, 1, mods, methods), S_OK);
    assert_int_equal(rt.rejit_inliner_calls, 1);
    assert_int_equal(rt.rejit_inliner_flags, flags);
    assert_int_equal(rejit(c[1], M1), S_OK); /* b owns the target too, without inliners */

    /* the runtime re-JITs M2, which had inlined M1: only a asked for that */
    struct fake_fc fc;
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M2, &fc.iface);
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 1);
    assert_int_equal(k[0].last_method, M2);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 0);
    fake_runtime_add_function(&rt, 0x502, MOD, M2);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x502, 2, TRUE);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 0);
    /* the target itself: both */
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rab");

    /* a revert by b rebuilds with a's inliner flags */
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, NULL), S_OK);
    assert_int_equal(rt.rejit_inliner_calls, 2);
    fake_mux_free(m);
}

/* The ReJIT IDs a child's GetReJITIDs lists for `fid` (count; ids[] receives up to 8). */
static ULONG child_rejit_ids(struct clrmux_child *c, FunctionID fid, ReJITID *ids)
{
    ICorProfilerInfo15 *p = fake_child_info(c);
    ULONG n = 99;
    assert_true(SUCCEEDED(p->lpVtbl->GetReJITIDs(p, fid, 8, &n, ids)));
    return n;
}

/* A later request by another owner: the first owner is not asked again (its last link is
 * reused: its input is unchanged) and sees nothing of the new version, as alone. */
static void test_later_request_does_not_call_earlier_owner(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[2] = {REJIT | JIT, REJIT | JIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    fake_runtime_add_function(&rt, 0x501, MOD, M1); /* compiled: nothing held back */
    k[0].rejit_hook = k[1].rejit_hook = rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    struct fake_fc fc;

    assert_int_equal(rejit(c[0], M1), S_OK);
    ReJITID id_a = fake_runtime_last_rejit_id(&rt, MOD, M1);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x501, id_a, TRUE);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x501, id_a, S_OK, TRUE);
    assert_string_equal((char *)fc.body, "Ra");
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 0);

    assert_int_equal(rejit(c[1], M1), S_OK);
    ReJITID id_b = fake_runtime_last_rejit_id(&rt, MOD, M1);
    assert_true(id_b != id_a);
    ReJITID ids[8];
    /* before the new version is composed, it is already b's alone */
    assert_int_equal(child_rejit_ids(c[1], 0x501, ids), 1);
    assert_int_equal(ids[0], id_b);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Rab"); /* both rewrites... */
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 1); /* ...a not asked again */
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    assert_string_equal(k[1].seen, "Ra");
    assert_int_equal(fc.flags, 1u | 2u); /* a's codegen flags and map kept from its last link */
    assert_int_equal(fc.set_map_calls, 1);
    assert_int_equal(fc.map[0].newOffset, 2);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x501, id_b, TRUE);
    mux->lpVtbl->ReJITCompilationFinished(mux, 0x501, id_b, S_OK, TRUE);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationFinished), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 1);
    assert_int_equal(k[1].last_rejit_id, id_b);
    /* each child's GetReJITIDs: its own version only */
    assert_int_equal(child_rejit_ids(c[0], 0x501, ids), 1);
    assert_int_equal(ids[0], id_a);
    assert_int_equal(child_rejit_ids(c[1], 0x501, ids), 1);
    assert_int_equal(ids[0], id_b);
    /* the runtime's contract: a short buffer gets S_FALSE and the full count */
    ICorProfilerInfo15 *pa = fake_child_info(c[0]);
    ULONG n = 0;
    assert_int_equal(pa->lpVtbl->GetReJITIDs(pa, 0x501, 0, &n, NULL), S_FALSE);
    assert_int_equal(n, 1);

    /* a re-requests its own method: it is asked afresh (b not: a set the same body again, so
     * b's input is what b rewrote last time) */
    assert_int_equal(rejit(c[0], M1), S_OK);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 2);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    assert_string_equal((char *)fc.body, "Rab");
    assert_int_equal(child_rejit_ids(c[0], 0x501, ids), 2);

    /* a revert by b: a's rewrite is rebuilt from a's last link; nobody sees the rebuilt version */
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, NULL), S_OK);
    ReJITID id_r = fake_runtime_last_rejit_id(&rt, MOD, M1);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "Ra");
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 2);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x501, id_r, TRUE);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 1);
    assert_int_equal(child_rejit_ids(c[0], 0x501, ids), 2);
    assert_int_equal(child_rejit_ids(c[1], 0x501, ids), 1);
    fake_mux_free(m);
}

/* A held-back owner sees its method's first compilation as a ReJIT compilation of a version
 * of its own, as alone: no JITCompilationStarted/Finished, GetReJITParameters, then
 * ReJITCompilationStarted/Finished with a ReJIT ID that its GetReJITIDs lists. */
static void test_held_back_owner_sees_a_rejit(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[2] = {JIT, REJIT | JIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    k[0].jit_hook = jit_rewriter;
    k[1].rejit_hook = plain_rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(rejit(c[1], M1), S_OK); /* held back */
    fake_runtime_add_function(&rt, 0x501, MOD, M1);
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    mux->lpVtbl->JITCompilationFinished(mux, 0x501, S_OK, TRUE);
    assert_int_equal(FC_CALLS(&k[0], JITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[0], JITCompilationFinished), 1);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationStarted), 0);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationFinished), 0);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationFinished), 1);
    assert_string_equal((char *)rt.il, "Rab");
    ReJITID made_up = k[1].last_rejit_id;
    assert_true(made_up >= CLRMUX_FAKE_REJITID_BASE);
    ReJITID ids[8];
    assert_int_equal(child_rejit_ids(c[1], 0x501, ids), 1);
    assert_int_equal(ids[0], made_up);
    assert_int_equal(child_rejit_ids(c[0], 0x501, ids), 0);
    assert_int_equal(clrmux_compose_runtime_rejitid(made_up), 0);
    /* tier 1: again a ReJIT compilation of that version for b, a JIT compilation for a */
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_int_equal(FC_CALLS(&k[0], JITCompilationStarted), 2);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationStarted), 0);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 2);
    assert_int_equal(k[1].last_rejit_id, made_up);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    /* after its revert, b's method is back to JIT compilations */
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, NULL), S_OK);
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_int_equal(FC_CALLS(&k[1], JITCompilationStarted), 1);
    fake_mux_free(m);
}

/* Two children ask for inlining callbacks on different methods: an inliner reaches the one
 * whose method it inlined (JITInlining recorded), as alone. */
static void test_inliner_reaches_only_the_inlinee_requester(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[2] = {REJIT | JIT, REJIT | JIT};
    struct clrmux_mux *m = setup(&rt, k, "ab", masks, c);
    fake_runtime_add_function(&rt, 0x501, MOD, M1);
    fake_runtime_add_function(&rt, 0x502, MOD, M2);
    fake_runtime_add_function(&rt, 0x503, MOD, 0x06000003);
    fake_runtime_add_function(&rt, 0x504, MOD, 0x06000004);
    k[0].rejit_hook = k[1].rejit_hook = rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    BOOL inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x503, 0x501, &inl); /* 3 inlined 1 */
    assert_true(inl);
    inl = TRUE;
    mux->lpVtbl->JITInlining(mux, 0x504, 0x503, &inl); /* 4 inlined 3 (and with it 1) */
    const DWORD flags = COR_PRF_REJIT_BLOCK_INLINING | COR_PRF_REJIT_INLINING_CALLBACKS;
    ModuleID mods[1] = {MOD};
    mdMethodDef m1[1] = {M1}, m2[1] = {M2};
    ICorProfilerInfo15 *pa = fake_child_info(c[0]), *pb = fake_child_info(c[1]);
    assert_int_equal(pa->lpVtbl->RequestReJITWithInliners(pa, flags, 1, mods, m1), S_OK);
    assert_int_equal(pb->lpVtbl->RequestReJITWithInliners(pb, flags, 1, mods, m2), S_OK);
    struct fake_fc fc;
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, 0x06000003, &fc.iface);
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 0);
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, 0x06000004, &fc.iface);
    assert_int_equal(FC_CALLS(&k[0], GetReJITParameters), 2);
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 0);
    mux->lpVtbl->ReJITCompilationStarted(mux, 0x504, 77, TRUE);
    assert_int_equal(FC_CALLS(&k[0], ReJITCompilationStarted), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 0);
    fake_mux_free(m);
}

static void test_function_control_misuse(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[1];
    struct clrmux_child *c[1];
    DWORD masks[1] = {REJIT};
    struct clrmux_mux *m = setup(&rt, k, "a", masks, c);
    k[0].rejit_hook = watcher;
    assert_int_equal(rejit(c[0], M1), S_OK);
    struct fake_fc fc;
    fake_fc_init(&fc);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    /* nobody rewrote: the runtime's function control is left alone */
    assert_int_equal(fc.set_body_calls + fc.set_flags_calls + fc.set_map_calls, 0);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, NULL); /* no function control: no crash */
    fake_mux_free(m);
}

static void test_il_map_composition(void **state)
{
    (void)state;
    COR_IL_MAP first[3] = {{0, 10, TRUE}, {5, 20, TRUE}, {9, 30, FALSE}};
    COR_IL_MAP second[2] = {{10, 12, TRUE}, {25, 40, TRUE}};
    COR_IL_MAP out[3];
    clrmux_compose_il_maps(first, 3, second, 2, out);
    assert_int_equal(out[0].oldOffset, 0);
    assert_int_equal(out[0].newOffset, 12);
    assert_true(out[0].fAccurate);
    assert_int_equal(out[1].newOffset, 22); /* 20 moves with the entry at 10 */
    assert_false(out[1].fAccurate);
    assert_int_equal(out[2].newOffset, 45);
    assert_false(out[2].fAccurate);
    COR_IL_MAP below[1] = {{100, 200, TRUE}};
    clrmux_compose_il_maps(first, 1, below, 1, out); /* nothing below: unchanged */
    assert_int_equal(out[0].newOffset, 10);
    assert_true(out[0].fAccurate);
}

/* Like Microsoft's CLR Instrumentation Engine: at every JITCompilationStarted (each generic
 * instantiation, tier 1) it sets its rewrite of the method's original IL, made from its own
 * copy, never reading the current IL: a tiny-header ECMA-335 body (II.25.4.2) of two code
 * bytes, 'R' and `orig_variant` (its tag unless a test changes it); or, with orig_raw set,
 * that string as it is (a body whose header clrmux cannot read). */
static char orig_variant;
static const char *orig_raw;
static int orig_sets;
static void jit_from_original(struct fake_child *fc, FunctionID fid)
{
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (FAILED(fc->info->lpVtbl->GetFunctionInfo(fc->info, fid, &cls, &mod, &tok)))
        return;
    static char out[8];
    if (orig_raw)
        snprintf(out, sizeof out, "%s", orig_raw);
    else
        snprintf(out, sizeof out, "%cR%c", (2 << 2) | 2, orig_variant ? orig_variant : fc->tag);
    assert_int_equal(fc->info->lpVtbl->SetILFunctionBody(fc->info, mod, tok, (LPCBYTE)out), S_OK);
    orig_sets++;
}

/* A held-back owner's rewrite survives a JIT-time child that sets the method's IL again at
 * a later compilation (issue 24: CLRIE beside the tracer lost the tracer's rewrite of a
 * generic method's second instantiation): the owner's rewrite is composed on top of the new
 * body before the runtime takes it; its last rewrite is reused (not called) when the new
 * body is the same, it is called again when it changed; the child reads back its own body. */
static void test_jit_rewrite_again_keeps_held_back_owner(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[2];
    struct clrmux_child *c[2];
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[2] = {JIT, REJIT | JIT};
    struct clrmux_mux *m = setup(&rt, k, "cb", masks, c);
    memcpy(rt.il, "\x06R", 3); /* tiny header, one code byte */
    rt.il_size = 2;
    orig_variant = 0, orig_raw = NULL, orig_sets = 0;
    k[0].jit_hook = jit_from_original;
    k[1].rejit_hook = plain_rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(rejit(c[1], M1), S_OK); /* held back */
    fake_runtime_add_function(&rt, 0x501, MOD, M1); /* Max<int> */
    fake_runtime_add_function(&rt, 0x601, MOD, M1); /* Max<double>: the same IL */
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    mux->lpVtbl->JITCompilationFinished(mux, 0x501, S_OK, TRUE);
    assert_string_equal((char *)rt.il, "\x0aRcb");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);

    /* the second instantiation: c sets its body again; b's rewrite stays, b is not called */
    mux->lpVtbl->JITCompilationStarted(mux, 0x601, TRUE);
    assert_int_equal(orig_sets, 2);
    assert_string_equal((char *)rt.il, "\x0aRcb");
    mux->lpVtbl->JITCompilationFinished(mux, 0x601, S_OK, TRUE);
    assert_string_equal((char *)rt.il, "\x0aRcb");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);
    assert_int_equal(FC_CALLS(&k[1], ReJITCompilationStarted), 2); /* as alone: its version's compilations */
    assert_int_equal(FC_CALLS(&k[1], JITCompilationStarted), 0);
    read_body(&k[0], MOD, M1); /* c reads back what it set, without b's rewrite */
    assert_string_equal(k[0].seen, "\x0aRc");
    assert_int_equal(rt.rejit_calls, 0);

    /* tier 1 of the first instantiation: the same */
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_string_equal((char *)rt.il, "\x0aRcb");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 1);

    /* a new body (c's rewrite changed): b rebuilds its rewrite on it (called again) */
    orig_variant = 'd';
    mux->lpVtbl->JITCompilationStarted(mux, 0x601, TRUE);
    assert_string_equal((char *)rt.il, "\x0aRdb");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 2);
    assert_string_equal(k[1].seen, "\x0aRd");
    /* a later ReJIT request by b builds from the newest base */
    assert_int_equal(rejit(c[1], M1), S_OK);
    struct fake_fc fc;
    fake_fc_init(&fc);
    mux->lpVtbl->GetReJITParameters(mux, MOD, M1, &fc.iface);
    assert_string_equal((char *)fc.body, "\x0aRdb");

    /* a body whose header clrmux cannot read: given to the runtime, read back, composed */
    orig_raw = "PQ";
    mux->lpVtbl->JITCompilationStarted(mux, 0x501, TRUE);
    assert_string_equal((char *)rt.il, "PQb");
    read_body(&k[0], MOD, M1);
    assert_string_equal(k[0].seen, "PQ");

    /* after b's revert, c's next body is the method's IL as it is */
    orig_raw = NULL;
    orig_variant = 0;
    ModuleID mods[1] = {MOD};
    mdMethodDef methods[1] = {M1};
    ICorProfilerInfo15 *pb = fake_child_info(c[1]);
    assert_int_equal(pb->lpVtbl->RequestRevert(pb, 1, mods, methods, NULL), S_OK);
    int calls = FC_CALLS(&k[1], GetReJITParameters);
    mux->lpVtbl->JITCompilationStarted(mux, 0x601, TRUE);
    assert_string_equal((char *)rt.il, "\x0aRc");
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), calls);
    fake_mux_free(m);
}

/* Two held-back owners and a JIT-time child that rewrites every compilation: both owners'
 * rewrites, in file order, on every instantiation; a child that rewrites once (reads the
 * IL, finds its tag) beside them changes nothing. */
static void test_jit_rewrite_again_two_owners(void **state)
{
    (void)state;
    struct fake_runtime rt;
    struct fake_child k[4];
    struct clrmux_child *c[4];
    const DWORD JIT = COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD masks[4] = {JIT, REJIT, JIT, REJIT | JIT};
    struct clrmux_mux *m = setup(&rt, k, "cxay", masks, c);
    memcpy(rt.il, "\x06R", 3);
    rt.il_size = 2;
    orig_variant = 0, orig_raw = NULL, orig_sets = 0;
    k[0].jit_hook = jit_from_original;
    k[2].jit_hook = jit_rewriter;
    k[1].rejit_hook = k[3].rejit_hook = plain_rewriter;
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(rejit(c[1], M1), S_OK);
    assert_int_equal(rejit(c[3], M1), S_OK);
    for (FunctionID f = 0x501; f < 0x505; f++) {
        fake_runtime_add_function(&rt, f, MOD, M1);
        mux->lpVtbl->JITCompilationStarted(mux, f, TRUE);
        mux->lpVtbl->JITCompilationFinished(mux, f, S_OK, TRUE);
        assert_string_equal((char *)rt.il, f == 0x501 ? "\x0aRcaxy" : "\x0aRcxy");
    }
    /* (a rewrote once, on the first body; c's later bodies replace it, as they would alone) */
    assert_int_equal(FC_CALLS(&k[1], GetReJITParameters), 2); /* first, then on c's new base */
    assert_int_equal(FC_CALLS(&k[3], GetReJITParameters), 2);
    fake_mux_free(m);
}

static int teardown(void **state)
{
    (void)state;
    fake_mux_free_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rejit_chain_in_file_order, teardown),
        cmocka_unit_test_teardown(test_later_request_rebuilds_from_all_owners, teardown),
        cmocka_unit_test_teardown(test_revert_by_one_owner, teardown),
        cmocka_unit_test_teardown(test_held_back_until_first_jit, teardown),
        cmocka_unit_test_teardown(test_no_hold_back_without_jit_watchers, teardown),
        cmocka_unit_test_teardown(test_held_back_owner_joins_a_rejit_first_compilation, teardown),
        cmocka_unit_test_teardown(test_inliners_reach_the_requester, teardown),
        cmocka_unit_test_teardown(test_later_request_does_not_call_earlier_owner, teardown),
        cmocka_unit_test_teardown(test_held_back_owner_sees_a_rejit, teardown),
        cmocka_unit_test_teardown(test_inliner_reaches_only_the_inlinee_requester, teardown),
        cmocka_unit_test_teardown(test_function_control_misuse, teardown),
        cmocka_unit_test_teardown(test_jit_rewrite_again_keeps_held_back_owner, teardown),
        cmocka_unit_test_teardown(test_jit_rewrite_again_two_owners, teardown),
        cmocka_unit_test(test_il_map_composition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
