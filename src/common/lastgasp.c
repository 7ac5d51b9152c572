/* The last gasp on POSIX: flush at exit and on fatal signals, chained to the runtime's
 * handlers (see lastgasp.h); the flush functions' table is lastgasp_registry.c's. */
#include "common/lastgasp.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/lastgasp_registry.h"
#include "common/log.h"

/* the signals handled, and whether the runtime may handle them itself (faults) */
static const struct {
    int sig;
    int fault;
    const char *name;
} k_sigs[] = {
    {SIGTERM, 0, "SIGTERM"}, {SIGINT, 0, "SIGINT"},   {SIGQUIT, 0, "SIGQUIT"}, {SIGHUP, 0, "SIGHUP"},
    {SIGABRT, 0, "SIGABRT"}, {SIGSEGV, 1, "SIGSEGV"}, {SIGBUS, 1, "SIGBUS"},   {SIGILL, 1, "SIGILL"},
    {SIGFPE, 1, "SIGFPE"},
};
#define NSIGS (sizeof k_sigs / sizeof k_sigs[0])

static struct sigaction g_prev[NSIGS];
static sem_t g_sem;
static _Atomic int g_state;      /* 0 idle, 1 flushing, 2 done */
static _Atomic int g_cause = -1; /* index in k_sigs, or CAUSE_EXIT, CAUSE_UNHANDLED */
#define CAUSE_EXIT (-1)
#define CAUSE_UNHANDLED (-2)
static _Atomic pid_t g_tid;      /* the last-gasp thread */
static _Atomic int g_exit_requested;
static _Atomic unsigned g_faults; /* faults handled (SIGPROF may stay blocked after one) */
static pthread_mutex_t g_install_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_sem_ready;          /* g_sem initialised (under g_install_lock) */
static _Atomic int g_thread_up;  /* the thread was created */
static _Atomic int g_coming;     /* arms (and thread starts) under way: a thread may still come */
static _Atomic pid_t g_starter;  /* the thread creating it (a signal on it waits for nothing) */

static const char *cause_name(int c)
{
    return c >= 0 && (size_t)c < NSIGS ? k_sigs[c].name : c == CAUSE_UNHANDLED ? "unhandled exception" : "exit";
}

static void run_flushes(void)
{
    int c = atomic_load(&g_cause);
    clrmux_lastgasp_run(cause_name(c), c != CAUSE_UNHANDLED);
}

static void *lastgasp_thread(void *arg)
{
    (void)arg;
    clrmux_block_termination_signals();
    /* named by itself (one prctl), not by its creator: naming another thread opens, writes
     * and closes /proc/self/task/<tid>/comm, ~35 us of the runtime's start-up thread here */
    pthread_setname_np(pthread_self(), "clrmux-lastgasp");
    atomic_store(&g_tid, (pid_t)syscall(SYS_gettid));
    for (;;) {
        while (sem_wait(&g_sem) != 0 && errno == EINTR) {
        }
        if (atomic_load(&g_state) == 1) {
            run_flushes();
            atomic_store(&g_state, 2);
        }
    }
    return NULL;
}

/* Wakes the thread (once) and waits for it, at most CLRMUX_LASTGASP_WAIT_MS.
 * Async-signal-safe. Returns 1 when the flush is done. */
static int trigger_and_wait(int cause)
{
    if ((pid_t)syscall(SYS_gettid) == atomic_load(&g_tid))
        return 0; /* a fault inside a flush: do not wait for ourselves */
    if (!atomic_load(&g_thread_up) &&
        (!atomic_load(&g_coming) || (pid_t)syscall(SYS_gettid) == atomic_load(&g_starter)))
        return 0; /* no thread, and none coming (an arm withdrawn, a thread that could not start,
                     or the one that would start it is the one interrupted) */
    int expected = 0;
    if (atomic_compare_exchange_strong(&g_state, &expected, 1)) {
        atomic_store(&g_cause, cause);
        sem_post(&g_sem);
    }
    int64_t deadline = clrmux_mono_ns() + (int64_t)CLRMUX_LASTGASP_WAIT_MS * 1000000;
    while (atomic_load(&g_state) != 2 && clrmux_mono_ns() < deadline &&
           (atomic_load(&g_thread_up) || atomic_load(&g_coming))) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&g_state) == 2)
        return 1;
    clrmux_log_signal_safe(CLRMUX_LOG_ERROR, "the last gasp did not finish in time (" "3000" " ms): "
                                             "data not yet written is lost");
    return 0;
}

static int is_dfl(const struct sigaction *a) { return !(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL; }
static int is_ign(const struct sigaction *a) { return !(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN; }

static void call_prev(const struct sigaction *a, int sig, siginfo_t *si, void *uc)
{
    if (a->sa_flags & SA_SIGINFO)
        a->sa_sigaction(sig, si, uc);
    else
        a->sa_handler(sig);
}

static void handler(int sig, siginfo_t *si, void *uc);

/* 1 when the faulting instruction (the signal's context) lies in a native library the runtime
 * does not handle faults in: an ELF object (_dl_find_object, glibc 2.35+, async-signal-safe)
 * other than the main program and libcoreclr.so. 0 when unknown (JIT-compiled code and
 * ReadyToRun images are no ELF objects): the runtime's handler then goes first. */
static int fault_in_native_library(const siginfo_t *si, const void *uc)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35) && (defined(__x86_64__) || defined(__aarch64__))
    if (!si || si->si_code <= 0 || !uc)
        return 0; /* sent with kill(): no faulting instruction */
    const ucontext_t *u = uc;
#if defined(__x86_64__)
    void *pc = (void *)u->uc_mcontext.gregs[REG_RIP];
#else
    void *pc = (void *)u->uc_mcontext.pc;
#endif
    struct dl_find_object fo;
    if (_dl_find_object(pc, &fo) != 0 || !fo.dlfo_link_map)
        return 0;
    const char *name = fo.dlfo_link_map->l_name;
    if (!name || !*name)
        return 0; /* the main program */
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    return strcmp(base, "libcoreclr.so") != 0;
#else
    (void)si, (void)uc;
    return 0;
#endif
}

static int still_ours(int sig)
{
    struct sigaction cur;
    return sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == handler;
}

/* The default action again, delivered when the handler returns (the signal is blocked in
 * the handler). */
static void reraise_default(int i, int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, is_dfl(&g_prev[i]) ? &g_prev[i] : &dfl, NULL);
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
}

static void handler(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    size_t i = 0;
    while (i < NSIGS && k_sigs[i].sig != sig)
        i++;
    if (i == NSIGS) {
        errno = saved;
        return;
    }
    const struct sigaction *prev = &g_prev[i];
    if (k_sigs[i].fault) {
        atomic_fetch_add_explicit(&g_faults, 1, memory_order_relaxed);
        if (!is_dfl(prev) && !is_ign(prev)) {
            if (fault_in_native_library(si, uc))
                trigger_and_wait((int)i); /* not the runtime's to handle: flush before its handler */
            call_prev(prev, sig, si, uc);
            if (still_ours(sig)) { /* handled (a managed exception), or not ours to judge */
                errno = saved;
                return;
            }
            trigger_and_wait((int)i); /* the runtime restored the default: the fault repeats and ends it */
        } else {
            trigger_and_wait((int)i);
            if (si && si->si_code <= 0) /* sent with kill(): returning would not repeat it */
                reraise_default((int)i, sig);
            else
                sigaction(sig, prev, NULL);
        }
        errno = saved;
        return;
    }
    if (is_ign(prev)) {
        errno = saved;
        return;
    }
    trigger_and_wait((int)i);
    if (is_dfl(prev))
        reraise_default((int)i, sig);
    else
        call_prev(prev, sig, si, uc);
    errno = saved;
}

static void at_exit(void)
{
    if (clrmux_lastgasp_registered() && !atomic_exchange(&g_exit_requested, 1))
        trigger_and_wait(CAUSE_EXIT);
}

void clrmux_lastgasp_now(void)
{
    static __thread int seen; /* this thread's exception was seen already (another hook) */
    if (!clrmux_lastgasp_started() || seen)
        return;
    seen = 1;
    trigger_and_wait(CAUSE_UNHANDLED);
    int done = 2;
    if (atomic_load(&g_cause) == CAUSE_UNHANDLED) /* not final: a later end can flush again */
        atomic_compare_exchange_strong(&g_state, &done, 0);
}

#ifdef CLRMUX_TESTING
void (*clrmux_lastgasp_test_between)(int sig);
#endif

static unsigned g_installed_sigs; /* bit i: k_sigs[i] handled (under g_install_lock) */
static int g_atexit;

/* Installs the handlers not installed yet: SIGTERM and SIGINT only when `early` (an arm),
 * else all of them, and the atexit handler. Under g_install_lock. */
static void install(int early)
{
    for (size_t i = 0; i < NSIGS; i++) {
        if ((g_installed_sigs & (1u << i)) || (early && k_sigs[i].sig != SIGTERM && k_sigs[i].sig != SIGINT))
            continue;
        g_installed_sigs |= 1u << i;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        if (sigaction(k_sigs[i].sig, NULL, &g_prev[i]) != 0)
            continue;
        if (is_ign(&g_prev[i]) && !k_sigs[i].fault)
            continue; /* ignored (nohup, a parent's choice): stays ignored, nothing to flush for */
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sa.sa_mask = g_prev[i].sa_mask; /* what the previous handler expects blocked (the PAL's
                                           SIGSEGV handler: its activation signal) */
        if (k_sigs[i].fault)
            sigaddset(&sa.sa_mask, SIGPROF); /* no room for it on the alternate stack (lastgasp.h) */
        /* installed and the handler it replaces read back in one call: this may run on a
         * background thread (the tracer registers from its ReJIT thread) while the app's main
         * thread installs its own (System.Native's SIGTERM/SIGINT handlers): one installed
         * since the read above is chained to, never silently replaced */
#ifdef CLRMUX_TESTING
        if (clrmux_lastgasp_test_between)
            clrmux_lastgasp_test_between(k_sigs[i].sig);
#endif
        struct sigaction replaced;
        if (sigaction(k_sigs[i].sig, &sa, &replaced) == 0)
            g_prev[i] = replaced;
    }
    if (!early && !g_atexit) {
        atexit(at_exit);
        g_atexit = 1;
    }
}

/* The semaphore, then the handlers not yet installed (install). */
static int install_once(int early)
{
    pthread_mutex_lock(&g_install_lock);
    if (!g_sem_ready && sem_init(&g_sem, 0, 0) == 0)
        g_sem_ready = 1;
    if (g_sem_ready)
        install(early);
    const int rc = g_sem_ready ? 0 : -1;
    pthread_mutex_unlock(&g_install_lock);
    return rc;
}

int clrmux_lastgasp_arm(void)
{
    if (install_once(1) != 0)
        return -1;
    atomic_fetch_add(&g_coming, 1);
    return 0;
}

void clrmux_lastgasp_disarm(void) { atomic_fetch_sub(&g_coming, 1); }

/* The first registration's start (the registry's lock held): the handlers (unless an arm
 * installed them), then the thread; a signal in between waits for it (g_coming). */
static int start(void)
{
    atomic_store(&g_starter, (pid_t)syscall(SYS_gettid));
    atomic_fetch_add(&g_coming, 1);
    int rc = -1;
    if (install_once(0) == 0) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, lastgasp_thread, NULL) == 0) {
            atomic_store(&g_thread_up, 1);
            rc = 0;
        }
        pthread_attr_destroy(&attr);
    }
    atomic_fetch_sub(&g_coming, 1);
    atomic_store(&g_starter, 0);
    if (rc != 0)
        LOG_ERROR("cannot start the last-gasp thread: data is lost if the process ends without Shutdown");
    return rc;
}

int clrmux_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx) { return clrmux_lastgasp_add(fn, ctx, start); }
int clrmux_lastgasp_start(void) { return clrmux_lastgasp_add(NULL, NULL, start); }

void clrmux_lastgasp_after_exception(void)
{
    if (!atomic_load_explicit(&g_faults, memory_order_relaxed))
        return;
    sigset_t prof;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
}

int clrmux_lastgasp_fire(const char *cause)
{
    int c = -1;
    for (size_t i = 0; cause && i < NSIGS; i++)
        if (strcmp(cause, k_sigs[i].name) == 0)
            c = (int)i;
    int rc = clrmux_lastgasp_started() ? trigger_and_wait(c) : 0;
    int done = 2;
    atomic_compare_exchange_strong(&g_state, &done, 0); /* tests fire more than once */
    return rc;
}
