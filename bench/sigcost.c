/* bench/sigcost.c: what the signal sampler costs the thread it samples, measured on that
 * thread's own CPU clock (so other processes on the machine do not enter the figure).
 *
 *   sigcost [rounds] [ms_per_round] [interval_ms] [blocked]
 *
 * A worker thread runs a fixed integer kernel and counts the kernels done; it is sampled by
 * the signal sampler (src/profiler/sigsampler.c: its CPU timer and wall signals, the sampler
 * ticks on this thread) in every other round. The CPU the kernel gets includes our handler
 * and the kernel's signal delivery, both charged to the worker: the ratio of kernels per
 * worker-CPU-second with and without sampling is the cost per busy thread. `blocked` more
 * threads wait on a condition variable, sampled too (their wall ticks cost the sampler
 * thread, not the worker). Prints each round and the median ratio. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profiler/prof.h"

static atomic_int g_run, g_quit;
static atomic_llong g_ops;
static atomic_int g_worker_tid;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static int64_t ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t kernel(uint64_t x)
{
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static atomic_llong g_cpu_ns;
static void *worker(void *arg)
{
    (void)arg;
    atomic_store(&g_worker_tid, (int)syscall(SYS_gettid));
    uint64_t x = 1;
    while (!atomic_load(&g_quit)) {
        while (!atomic_load(&g_run) && !atomic_load(&g_quit))
            usleep(1000);
        int64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);
        long long ops = 0;
        while (atomic_load_explicit(&g_run, memory_order_relaxed)) {
            x = kernel(x);
            ops++;
        }
        atomic_store(&g_cpu_ns, ns(CLOCK_THREAD_CPUTIME_ID) - c0);
        atomic_store(&g_ops, ops);
    }
    return (void *)(uintptr_t)x;
}

static atomic_int g_blocked_ready;
static void *blocked(void *arg)
{
    atomic_int *tid = arg;
    atomic_store(tid, (int)syscall(SYS_gettid));
    atomic_fetch_add(&g_blocked_ready, 1);
    pthread_mutex_lock(&g_mu);
    while (!atomic_load(&g_quit))
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 10, ms = argc > 2 ? atoi(argv[2]) : 1000;
    int interval = argc > 3 ? atoi(argv[3]) : 10, nblocked = argc > 4 ? atoi(argv[4]) : 200;
    if (rounds < 2 || ms < 100 || interval < 1 || nblocked < 0 || nblocked > 4000) {
        fprintf(stderr, "usage: sigcost [rounds>=2] [ms>=100] [interval_ms] [blocked<=4000]\n");
        return 2;
    }
    char why[256];
    struct prof_sig *s = prof_sig_start(interval, 1, 1, NULL, why, sizeof why);
    if (!s) {
        fprintf(stderr, "sigcost: the signal sampler cannot run here: %s\n", why);
        return 1;
    }
    struct prof_rawq q;
    if (prof_rawq_init(&q, 1 << 16, 1 << 22) != 0)
        return 1;
    pthread_t w;
    pthread_create(&w, NULL, worker, NULL);
    pthread_t *bt = calloc((size_t)nblocked + 1, sizeof *bt);
    atomic_int *btid = calloc((size_t)nblocked + 1, sizeof *btid);
    struct prof_thread_view *v = calloc((size_t)nblocked + 1, sizeof *v);
    for (int i = 0; i < nblocked; i++) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 128 * 1024);
        pthread_create(&bt[i], &a, blocked, &btid[i]);
        pthread_attr_destroy(&a);
    }
    while (!atomic_load(&g_worker_tid) || atomic_load(&g_blocked_ready) < nblocked)
        usleep(1000);
    v[0].slot = 0, v[0].t.id = 1, v[0].t.tid = (uint32_t)atomic_load(&g_worker_tid);
    for (int i = 0; i < nblocked; i++)
        v[i + 1].slot = (size_t)i + 1, v[i + 1].t.id = (ThreadID)i + 2, v[i + 1].t.tid = (uint32_t)atomic_load(&btid[i]);

    double *ratio = calloc((size_t)rounds, sizeof *ratio), base = 0;
    int64_t sampler_cpu = 0, sampled_ms = 0;
    int prev = 0;
    printf("sigcost: worker kernels per worker-CPU-second, %d ms rounds, sampled every other round at %d ms, "
           "%d blocked threads\n", ms, interval, nblocked);
    for (int r = 0; r < 2 * rounds; r++) {
        int sampled = r % 2;
        int64_t t_end = ns(CLOCK_MONOTONIC) + (int64_t)ms * 1000000, next = ns(CLOCK_MONOTONIC);
        int64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);
        atomic_store(&g_ops, -1);
        atomic_store(&g_run, 1);
        while (ns(CLOCK_MONOTONIC) < t_end) { /* the sampler thread's loop, as profiler.c runs it */
            prof_sig_tick(s, v, sampled ? (size_t)nblocked + 1 : 0, r == 0 || sampled != prev, &q);
            prev = sampled;
            struct prof_rawbuf *b = prof_rawq_swap(&q);
            prof_rawbuf_clear(b);
            next += (int64_t)interval * 1000000;
            struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
        atomic_store(&g_run, 0);
        if (sampled) {
            sampler_cpu += ns(CLOCK_THREAD_CPUTIME_ID) - c0;
            sampled_ms += ms;
        }
        while (atomic_load(&g_ops) < 0)
            usleep(1000);
        double rate = (double)atomic_load(&g_ops) / ((double)atomic_load(&g_cpu_ns) / 1e9);
        if (!sampled) {
            base = rate;
            printf("  round %2d  unsampled %12.0f\n", r / 2 + 1, rate);
        } else {
            ratio[r / 2] = rate / base;
            printf("  round %2d  sampled   %12.0f  ratio %.4f\n", r / 2 + 1, rate, ratio[r / 2]);
        }
    }
    prof_sig_tick(s, v, 0, 1, &q);
    struct prof_sig_stats st;
    prof_sig_get_stats(s, &st);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp);
    double med = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
    printf("median ratio sampled/unsampled: %.4f (cost per busy thread %.2f%%); %llu cpu walks (%.1f per CPU-second), "
           "%llu wall signals, handler %.2f us per walk; sampler thread %.2f%% of a CPU\n",
           med, (1 - med) * 100, (unsigned long long)st.cpu_samples,
           st.cpu_ns ? (double)st.cpu_samples * 1e9 / (double)st.cpu_ns : 0.0, (unsigned long long)st.wall_signals,
           st.handler_ns_avg / 1000.0, sampled_ms ? (double)sampler_cpu / 1e6 / (double)sampled_ms * 100 : 0.0);
    atomic_store(&g_quit, 1);
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(w, NULL);
    for (int i = 0; i < nblocked; i++)
        pthread_join(bt[i], NULL);
    prof_sig_stop(s);
    return 0;
}
