/* Per-child detach (src/loader/detach.c) against the fake runtime: refusals as the runtime
 * would answer a child alone, no callback after the request, ProfilerDetachSucceeded once
 * after evacuation, the mask union without the child, and clrmux's own detach when every
 * child has left; the membarrier registration made by an adopting built-in child's thread or
 * by clrmux's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "fake_runtime.h"

static void wait_for(const unsigned long *counter, unsigned long want)
{
    for (int i = 0; i < 2000 && __atomic_load_n(counter, __ATOMIC_ACQUIRE) < want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static HRESULT detach(struct clrmux_child *c)
{
    ICorProfilerInfo15 *p = fake_child_info(c);
    return p->lpVtbl->RequestProfilerDetach(p, 100);
}

static void test_refusals_as_alone(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_function(&rt, 0x500, 0x7000, 0x06000001);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child imm, old, rj, il;
    fake_child_init(&imm, 11, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_ENABLE_OBJECT_ALLOCATED, 0);
    fake_child_init(&old, 2, COR_PRF_MONITOR_MODULE_LOADS, 0);
    fake_child_init(&rj, 11, COR_PRF_ENABLE_REJIT, 0);
    fake_child_init(&il, 11, COR_PRF_MONITOR_JIT_COMPILATION, 0);
    struct clrmux_child *ci = fake_mux_add_child(m, &imm, "imm");
    struct clrmux_child *co = fake_mux_add_child(m, &old, "old");
    struct clrmux_child *cr = fake_mux_add_child(m, &rj, "rejit");
    struct clrmux_child *cl = fake_mux_add_child(m, &il, "il");
    assert_int_equal(detach(ci), CORPROF_E_PROFILER_NOT_YET_INITIALIZED); /* during Initialize */
    fake_mux_end_init(m);
    assert_int_equal(detach(ci), CORPROF_E_IMMUTABLE_FLAGS_SET);
    assert_int_equal(detach(co), CORPROF_E_CALLBACK3_REQUIRED);
    ModuleID mods[1] = {0x7000};
    mdMethodDef methods[1] = {0x06000001};
    ICorProfilerInfo15 *pr = fake_child_info(cr);
    assert_int_equal(pr->lpVtbl->RequestReJIT(pr, 1, mods, methods), S_OK);
    assert_int_equal(detach(cr), CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT);
    static const char body[] = "X";
    ICorProfilerInfo15 *pl = fake_child_info(cl);
    assert_int_equal(pl->lpVtbl->SetILFunctionBody(pl, 0x7000, 0x06000001, (LPCBYTE)body), S_OK);
    assert_int_equal(detach(cl), CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT);
    /* all still receive their callbacks */
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    assert_int_equal(FC_CALLS(&imm, ModuleLoadFinished), 1);
    assert_int_equal(FC_CALLS(&old, ModuleLoadFinished), 1);
    assert_int_equal(atomic_load(&rt.detach_calls), 0);
    mux->lpVtbl->Shutdown(mux);
    fake_mux_free(m);
}

static void test_one_then_all_detach(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    struct clrmux_mux *m = fake_mux_new(&rt);
    struct fake_child a, b;
    fake_child_init(&a, 11, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS, 0);
    fake_child_init(&b, 11, COR_PRF_MONITOR_MODULE_LOADS, 0);
    struct clrmux_child *ca = fake_mux_add_child(m, &a, "a");
    struct clrmux_child *cb = fake_mux_add_child(m, &b, "b");
    fake_mux_end_init(m);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS);

    assert_int_equal(detach(ca), S_OK);
    assert_int_equal(detach(ca), CORPROF_E_PROFILER_DETACHING);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS); /* a's bits left the union */
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    assert_int_equal(pa->lpVtbl->SetEventMask(pa, COR_PRF_MONITOR_GC), CORPROF_E_PROFILER_DETACHING);
    assert_int_equal(rt.mask_low, COR_PRF_MONITOR_MODULE_LOADS);
    mux->lpVtbl->ModuleLoadFinished(mux, 0x7000, S_OK);
    mux->lpVtbl->ThreadCreated(mux, 0x99);
    assert_int_equal(FC_CALLS(&a, ModuleLoadFinished), 0);
    assert_int_equal(FC_CALLS(&b, ModuleLoadFinished), 1);
    wait_for(&a.counts[FC_ProfilerDetachSucceeded], 1);
    assert_int_equal(FC_CALLS(&a, ProfilerDetachSucceeded), 1);
    assert_int_equal(FC_CALLS(&b, ProfilerDetachSucceeded), 0);
    assert_int_equal(atomic_load(&rt.detach_calls), 0); /* b is still there */

    assert_int_equal(detach(cb), S_OK);
    wait_for(&b.counts[FC_ProfilerDetachSucceeded], 1);
    assert_int_equal(FC_CALLS(&b, ProfilerDetachSucceeded), 1);
    for (int i = 0; i < 2000 && atomic_load(&rt.detach_calls) == 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&rt.detach_calls), 1); /* every child left: clrmux leaves */
    mux->lpVtbl->ProfilerDetachSucceeded(mux); /* the runtime's: reaches no child again */
    assert_int_equal(FC_CALLS(&a, ProfilerDetachSucceeded), 1);
    assert_int_equal(FC_CALLS(&b, ProfilerDetachSucceeded), 1);
    clrmux_detach_shutdown(m);
    fake_mux_free(m);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The membarrier registration's hand-off (detach.h): a built-in child's thread that adopted it
 * makes it, and clrmux then starts no thread of its own for it; without an adopter (or after
 * a disown) clrmux's own thread makes it. */
static void test_barrier_handoff(void **state)
{
    (void)state;
    clrmux_barrier_test_reset();
    assert_int_equal(clrmux_barrier_adopt(), 0); /* not asked yet (no mux started) */
    clrmux_pin_self(NULL, NULL);
    assert_int_equal(clrmux_barrier_test_state(), 1);
    assert_int_equal(clrmux_barrier_adopt(), 1);
    assert_int_equal(clrmux_barrier_adopt(), 0); /* one adopter */
    clrmux_barrier_start(NULL);                  /* adopted: no thread of clrmux's */
    sleep_ms(30);
    assert_int_equal(clrmux_barrier_test_state(), 1);
    clrmux_barrier_register_adopted();
    assert_int_equal(clrmux_barrier_test_state(), 2);
    assert_int_equal(atomic_load(&clrmux_barrier_test_adopted_runs), 1);
    clrmux_barrier_register_adopted(); /* once */
    assert_int_equal(atomic_load(&clrmux_barrier_test_adopted_runs), 1);

    /* adopted, then the adopter's thread could not be created: clrmux's own thread */
    clrmux_barrier_test_reset();
    clrmux_pin_self(NULL, NULL);
    assert_int_equal(clrmux_barrier_adopt(), 1);
    clrmux_barrier_disown();
    clrmux_barrier_start(NULL);
    clrmux_barrier_register_adopted(); /* not the owner: does nothing */
    for (int i = 0; i < 2000 && clrmux_barrier_test_state() != 2; i++)
        sleep_ms(1);
    assert_int_equal(clrmux_barrier_test_state(), 2);
    assert_int_equal(atomic_load(&clrmux_barrier_test_adopted_runs), 0);
    assert_int_equal(clrmux_barrier_adopt(), 0); /* over */
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
        cmocka_unit_test_teardown(test_refusals_as_alone, teardown),
        cmocka_unit_test_teardown(test_one_then_all_detach, teardown),
        cmocka_unit_test(test_barrier_handoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
