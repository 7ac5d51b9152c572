/* Unit tests for the event masks of the mux (src/loader/mux.c): the union the runtime gets,
 * each child's own view through its proxy, immutable flags after Initialize and the
 * runtime's refusals, with fake children wired into a mux by hand (tests/unit/fake_runtime.h). */
#include "mux_fixture.h"

static void test_mask_union_and_own_view(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_BASIC_GC);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    assert_int_equal(a.init_mask_hr, S_OK);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS, 0);
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    assert_int_equal(b.init_mask_hr, S_OK);
    fake_mux_end_init(m);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_BASIC_GC);

    /* each child reads back its own mask, not the union the runtime holds */
    DWORD lo;
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    lo = 0xDEADBEEF;
    assert_int_equal(pa->lpVtbl->GetEventMask(pa, &lo), S_OK);
    assert_int_equal(lo, COR_PRF_MONITOR_MODULE_LOADS);
    assert_mask(ca, COR_PRF_MONITOR_MODULE_LOADS, 0);
    assert_mask(cb, COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_BASIC_GC);

    /* SetEventMask (version 1) changes the low word only */
    ICorProfilerInfo15 *pb = fake_child_info(cb);
    assert_int_equal(pb->lpVtbl->SetEventMask(pb, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC), S_OK);
    assert_mask(cb, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC);
    fake_mux_free(m);
}

static void test_mask_removal_shrinks_union_only_when_unshared(void **state)
{
    (void)state;
    enum { A, B };
    static const struct child_spec spec[] = {
        {"a", 11, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS,
         COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE, NULL},
        {"b", 11, COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC, NULL},
    };
    /* each step: one child sets its mask, then the union the runtime must hold */
    static const struct {
        const char *why;
        int child;
        DWORD low, high, union_low, union_high;
    } steps[] = {
        {"a drops THREADS, which b still has: the union keeps it", A, COR_PRF_MONITOR_MODULE_LOADS,
         COR_PRF_HIGH_MONITOR_EVENT_PIPE, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC,
         COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE},
        {"a drops MODULE_LOADS and EVENT_PIPE, which only it had: the union loses them", A, 0, 0,
         COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC},
        {"b drops THREADS and BASIC_GC, now nobody's", B, COR_PRF_MONITOR_GC, 0, COR_PRF_MONITOR_GC, 0},
    };
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 2, fc, c);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_GC,
                 COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        HRESULT hr = set_mask2(c[steps[i].child], steps[i].low, steps[i].high);
        if (hr != S_OK)
            fail_msg("%s: SetEventMask2 returned 0x%08X", steps[i].why, (unsigned)hr);
        assert_mask(c[steps[i].child], steps[i].low, steps[i].high);
        assert_union(&rt, steps[i].union_low, steps[i].union_high);
    }
    assert_mask(c[A], 0, 0);
    assert_mask(c[B], COR_PRF_MONITOR_GC, 0);
    fake_mux_free(m);
}

static void test_mask_immutable_flags_after_initialize(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    const DWORD a_low = COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_OBJECT_ALLOCATED;
    struct fake_child a, b;
    fake_child_init(&a, 11, a_low, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_THREADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    /* while the mux initialises, immutable flags may be set */
    assert_int_equal(a.init_mask_hr, S_OK);
    fake_mux_end_init(m);
    const DWORD union_low = a_low | COR_PRF_MONITOR_THREADS;
    assert_int_equal(rt.mask_low, union_low);

    const int calls = rt.set_mask_calls;
    /* every immutable bit, added or removed, is refused and changes nothing */
    for (int bit = 0; bit < 32; bit++) {
        DWORD f = 1u << bit;
        if (!(f & (DWORD)COR_PRF_MONITOR_IMMUTABLE))
            continue;
        HRESULT hr = set_mask2(ca, a_low ^ f, 0);
        if (hr != E_FAIL)
            fail_msg("toggling immutable bit 0x%08X: hr 0x%08X", (unsigned)f, (unsigned)hr);
        assert_mask(ca, a_low, 0);
    }
    assert_int_equal(set_mask2(cb, COR_PRF_MONITOR_THREADS, COR_PRF_HIGH_DISABLE_TIERED_COMPILATION),
                     E_FAIL);
    assert_mask(cb, COR_PRF_MONITOR_THREADS, 0);
    assert_int_equal(rt.set_mask_calls, calls);
    assert_union(&rt, union_low, 0);

    /* a mutable change in the same call as an unchanged immutable flag succeeds */
    assert_int_equal(set_mask2(ca, a_low | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC), S_OK);
    assert_mask(ca, a_low | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC);
    assert_union(&rt, union_low | COR_PRF_MONITOR_GC, COR_PRF_HIGH_BASIC_GC);
    /* .NET 10: DISABLE_INLINING / DISABLE_OPTIMIZATIONS are mutable */
    assert_int_equal(set_mask2(cb, COR_PRF_MONITOR_THREADS | COR_PRF_DISABLE_INLINING | COR_PRF_DISABLE_OPTIMIZATIONS, 0),
                     S_OK);
    assert_true(rt.mask_low & COR_PRF_DISABLE_INLINING);
    fake_mux_free(m);
}

static void test_mask_runtime_refusal(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    rt.refuse_low = COR_PRF_MONITOR_GC;
    rt.refuse_high = COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS;
    rt.refuse_hr = CORPROF_E_INCONSISTENT_WITH_FLAGS;
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, c;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&c, 11, COR_PRF_MONITOR_GC | COR_PRF_MONITOR_THREADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cc = fake_mux_add_child(m, &c, "c");
    /* in Initialize: the child gets the runtime's HRESULT and keeps no mask */
    assert_int_equal(c.init_mask_hr, CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_mask(cc, 0, 0);
    fake_mux_end_init(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);

    /* later: same, every time it is asked (the refused union is not taken as applied) */
    for (int i = 0; i < 2; i++)
        assert_int_equal(set_mask2(ca, COR_PRF_MONITOR_MODULE_LOADS, COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS),
                         CORPROF_E_INCONSISTENT_WITH_FLAGS);
    assert_mask(ca, COR_PRF_MONITOR_MODULE_LOADS, 0);
    assert_union(&rt, COR_PRF_MONITOR_MODULE_LOADS, 0);
    /* and a refused child's later, acceptable mask works (the mux's record of the union
     * was not changed by the refusal) */
    assert_int_equal(set_mask2(cc, COR_PRF_MONITOR_THREADS, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS);
    assert_int_equal(set_mask2(ca, 0, 0), S_OK);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_THREADS);
    fake_mux_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask_union_and_own_view),
        cmocka_unit_test(test_mask_removal_shrinks_union_only_when_unshared),
        cmocka_unit_test(test_mask_immutable_flags_after_initialize),
        cmocka_unit_test(test_mask_runtime_refusal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
