/* Unit tests for the signal sampler's tick (src/profiler/sigtick.c) that need a sampler of
 * their own (one per process: test_stackwalk.c has the other): a thread that runs from its
 * arming on is not sent a wall signal on the next tick, before its CPU timer's first walk
 * (the CPU clock read when the thread is armed is the first check's); a thread that sleeps
 * is signalled and walked. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profiler/prof.h"

static atomic_int g_stop, g_spin_tid, g_sleep_tid;
static volatile uint64_t g_sink;

static void *spinner(void *arg)
{
    (void)arg;
    atomic_store(&g_spin_tid, (int)syscall(SYS_gettid));
    uint64_t x = 1;
    while (!atomic_load(&g_stop))
        x = x * 6364136223846793005ull + 1;
    g_sink = x;
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    atomic_store(&g_sleep_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&g_stop))
        usleep(2000);
    return NULL;
}

static int64_t thread_cpu(int tid)
{
    struct timespec ts;
    clockid_t c = (clockid_t)((~(unsigned)tid) << 3) | 6;
    return clock_gettime(c, &ts) == 0 ? (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec : -1;
}

static int64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_running_thread_not_signalled_before_its_first_walk(void **state)
{
    (void)state;
    char why[256] = "";
    /* 100 ms: the spinner's CPU timer does not expire between the two ticks (20 ms) */
    struct prof_sig *s = prof_sig_start(100, 1, 1, NULL, why, sizeof why);
    if (!s)
        fail_msg("prof_sig_start: %s", why);
    struct prof_rawq q;
    assert_int_equal(prof_rawq_init(&q, 1024, 64 * 1024), 0);
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, spinner, NULL), 0);
    assert_int_equal(pthread_create(&b, NULL, sleeper, NULL), 0);
    while (!atomic_load(&g_spin_tid) || !atomic_load(&g_sleep_tid))
        usleep(1000);
    struct prof_thread_view views[2];
    memset(views, 0, sizeof views);
    views[0].slot = 1, views[0].t.id = 0x1111, views[0].t.tid = (uint32_t)atomic_load(&g_spin_tid);
    snprintf(views[0].t.name, sizeof views[0].t.name, "spinner");
    views[1].slot = 2, views[1].t.id = 0x2222, views[1].t.tid = (uint32_t)atomic_load(&g_sleep_tid);
    snprintf(views[1].t.name, sizeof views[1].t.name, "sleeper");

    int64_t c0 = thread_cpu(atomic_load(&g_spin_tid)), t0 = mono();
    prof_sig_tick(s, views, 2, 1, &q); /* arms both */
    usleep(20000);
    int64_t c1 = thread_cpu(atomic_load(&g_spin_tid)), t1 = mono();
    prof_sig_tick(s, views, 2, 0, &q); /* the first wall check of each */
    struct prof_sig_stats st;
    prof_sig_get_stats(s, &st);
    usleep(5000); /* the sleeper's walk */
    prof_sig_flush_wall(s, &q);
    prof_sig_stop(s);
    atomic_store(&g_stop, 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);

    print_message("  spinner ran %.1f of %.1f ms; %llu wall signals, %llu on a running thread's next walk, "
                  "%llu cpu samples\n", (double)(c1 - c0) / 1e6, (double)(t1 - t0) / 1e6,
                  (unsigned long long)st.wall_signals, (unsigned long long)st.wall_from_cpu,
                  (unsigned long long)st.cpu_samples);
    assert_int_equal(st.threads, 2);
    if ((c1 - c0) * 10 < (t1 - t0) * 6) { /* a machine too busy to tell a running thread */
        print_message("  the spinner ran less than 60%% of the time: not checked\n");
        return;
    }
    assert_int_equal(st.cpu_samples, 0);  /* no walk of the spinner yet */
    assert_int_equal(st.wall_from_cpu, 1); /* its wall time waits for its CPU timer's walk */
    assert_int_equal(st.wall_signals, 1);  /* the sleeper only */

    /* the sleeper's walk carried its wall time; the spinner's waited for a walk that did not
     * come before the flush, which keeps it without a stack (a truncated sample) */
    struct prof_rawbuf *buf = prof_rawq_swap(&q);
    int sleeper_walks = 0;
    int64_t spinner_wall = 0;
    for (uint32_t i = 0; i < buf->nrecs; i++) {
        const struct prof_raw *r = &buf->recs[i];
        sleeper_walks += r->tid == views[1].t.tid && r->v1 > 0 && r->nframes > 0;
        if (r->tid == views[0].t.tid && r->nframes == 0 && r->truncated)
            spinner_wall += r->v1;
    }
    assert_true(sleeper_walks >= 1);
    assert_true(spinner_wall >= (t1 - t0) * 8 / 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_running_thread_not_signalled_before_its_first_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
