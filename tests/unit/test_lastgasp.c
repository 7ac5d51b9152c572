/* The last gasp (src/common/lastgasp.c): flush functions called once with the cause, none
 * after unregister; in a forked child, SIGTERM runs the flush and still ends the process by
 * SIGTERM; an ignored signal stays ignored; a handler installed before clrmux's is still
 * called, also one installed while clrmux installs its own; handlers armed ahead of a
 * registration another thread makes later flush a signal that came in between, and end the
 * process at once when the arm is withdrawn; exit() flushes; a deferred registration is
 * counted at once but installs nothing until clrmux_lastgasp_start, from another thread (the
 * profiler's sampler thread), after which SIGTERM flushes it; the async-signal-safe log line. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/lastgasp.h"
#include "common/log.h"

static int calls;
static char last_cause[64];

static int last_final = -1;
static void flush_fn(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    assert_true(deadline_ns > clrmux_mono_ns());
    calls += *(int *)ctx;
    last_final = final;
    snprintf(last_cause, sizeof last_cause, "%s", cause);
}

static void *now_on_thread(void *arg)
{
    (void)arg;
    clrmux_lastgasp_now();
    return NULL;
}

static void test_fire_and_unregister(void **state)
{
    (void)state;
    int one = 1;
    calls = 0;
    assert_int_equal(clrmux_lastgasp_register(flush_fn, &one), 0);
    /* an unhandled exception: written now, not final, still registered */
    clrmux_lastgasp_now();
    assert_int_equal(calls, 1);
    assert_int_equal(last_final, 0);
    assert_string_equal(last_cause, "unhandled exception");
    clrmux_lastgasp_now(); /* once per thread: a second hook saw the same exception */
    assert_int_equal(calls, 1);
    pthread_t th; /* another thread's unhandled exception: written again */
    assert_int_equal(pthread_create(&th, NULL, now_on_thread, NULL), 0);
    pthread_join(th, NULL);
    assert_int_equal(calls, 2);
    assert_int_equal(last_final, 0);
    calls = 0;
    assert_int_equal(clrmux_lastgasp_fire("SIGTERM"), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(last_final, 1);
    assert_string_equal(last_cause, "SIGTERM");
    assert_int_equal(clrmux_lastgasp_fire("SIGINT"), 1); /* called at most once */
    assert_int_equal(calls, 1);
    assert_int_equal(clrmux_lastgasp_register(flush_fn, &one), 0);
    clrmux_lastgasp_unregister(flush_fn, &one);
    assert_int_equal(clrmux_lastgasp_fire("SIGTERM"), 1);
    assert_int_equal(calls, 1);
}

/* in a child: the flush writes a marker file */
static char marker[256];
static void marker_fn(void *ctx, const char *cause, int64_t deadline_ns, int final)
{
    (void)ctx, (void)deadline_ns, (void)final;
    FILE *f = fopen(marker, "w");
    if (f) {
        fputs(cause, f);
        fclose(f);
    }
}

static volatile sig_atomic_t prev_called;
static void prev_handler(int sig) { (void)sig, prev_called = 1; }

/* Forks; the child runs `body` and exits 0 if it returns. Returns the wait status; the
 * marker file's content in out (empty when absent). */
static int in_child(void (*body)(void), char *out, size_t outsz)
{
    snprintf(marker, sizeof marker, "%s/clrmux-lastgasp-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    unlink(marker);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        body();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    out[0] = 0;
    FILE *f = fopen(marker, "r");
    if (f) {
        if (!fgets(out, (int)outsz, f))
            out[0] = 0;
        fclose(f);
    }
    unlink(marker);
    return st;
}

static void body_sigterm(void)
{
    clrmux_lastgasp_register(marker_fn, NULL);
    raise(SIGTERM);
    sleep(5); /* not reached: SIGTERM's default action ends the process */
    _exit(7);
}

static void *start_on_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)clrmux_lastgasp_start();
}

/* registered in the table on this thread (the app's main thread: no thread created, no
 * handler installed), started from another */
static void body_deferred(void)
{
    if (clrmux_lastgasp_register_deferred(marker_fn, NULL) != 0 || clrmux_lastgasp_registered() != 1)
        _exit(10);
    struct sigaction cur;
    if (sigaction(SIGTERM, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
        _exit(11); /* nothing installed yet */
    pthread_t th;
    void *rc = (void *)1;
    if (pthread_create(&th, NULL, start_on_thread, NULL) != 0 || pthread_join(th, &rc) != 0 || rc != NULL)
        _exit(12);
    if (sigaction(SIGTERM, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO))
        _exit(13); /* installed now */
    if (clrmux_lastgasp_start() != 0) /* a second start: nothing more */
        _exit(14);
    raise(SIGTERM);
    sleep(5);
    _exit(7);
}

static void body_ignored(void)
{
    signal(SIGHUP, SIG_IGN);
    clrmux_lastgasp_register(marker_fn, NULL);
    raise(SIGHUP);
    _exit(0);
}

static void body_chained(void)
{
    signal(SIGQUIT, prev_handler); /* a handler before clrmux's (as the runtime's) */
    clrmux_lastgasp_register(marker_fn, NULL);
    raise(SIGQUIT);
    _exit(prev_called ? 5 : 6);
}

/* the runtime's handler installed by another thread while clrmux installs its own (the
 * tracer registers from its ReJIT thread as the app's main thread starts): still called */
static void install_prev_quit(int sig)
{
    if (sig == SIGQUIT)
        signal(SIGQUIT, prev_handler);
}
static void body_raced(void)
{
    signal(SIGQUIT, SIG_DFL); /* as in an app: a shell's background job inherits it ignored */
    clrmux_lastgasp_test_between = install_prev_quit;
    clrmux_lastgasp_register(marker_fn, NULL);
    raise(SIGQUIT);
    _exit(prev_called ? 5 : 6);
}

/* the handlers armed on one thread (the tracer's Initialize, on the runtime's start-up
 * thread), the registration made 100 ms later by another (its ReJIT thread): a SIGTERM in
 * between waits for it and is flushed */
static void *register_later(void *arg)
{
    (void)arg;
    clrmux_block_termination_signals();
    usleep(100000);
    clrmux_lastgasp_register(marker_fn, NULL);
    return NULL;
}
static void body_armed(void)
{
    if (clrmux_lastgasp_arm() != 0)
        _exit(8);
    pthread_t th;
    if (pthread_create(&th, NULL, register_later, NULL) != 0)
        _exit(9);
    raise(SIGTERM);
    sleep(5); /* not reached */
    _exit(7);
}

/* armed, then withdrawn without a registration: a SIGTERM ends the process at once */
static void body_disarmed(void)
{
    if (clrmux_lastgasp_arm() != 0)
        _exit(8);
    clrmux_lastgasp_disarm();
    raise(SIGTERM);
    sleep(5); /* not reached */
    _exit(7);
}

static void body_exit(void)
{
    clrmux_lastgasp_register(marker_fn, NULL);
    exit(4);
}

/* a runtime's fault handler that ends the process in its own handling (a crash dump, a
 * clean-up that fails): a fault in a native library (libc's strlen) is flushed before it */
static void prev_dies(int sig, siginfo_t *si, void *uc) { (void)sig, (void)si, (void)uc, _exit(9); }
static void body_native_fault(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prev_dies;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    clrmux_lastgasp_register(marker_fn, NULL);
    const char *volatile bad = (const char *)1;
    _exit((int)strlen(bad) + 20); /* not reached */
}

/* a runtime that handles a fault outside any native library (here: the main program, as
 * in a single-file app; in a real process JIT-compiled code) resumes elsewhere: no flush */
static sigjmp_buf resume;
static void prev_handles(int sig, siginfo_t *si, void *uc) { (void)sig, (void)si, (void)uc, siglongjmp(resume, 1); }
static void body_handled_fault(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prev_handles;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    clrmux_lastgasp_register(marker_fn, NULL);
    if (sigsetjmp(resume, 1) == 0)
        *(volatile int *)8 = 1;
    _exit(3);
}

static void test_signals_in_child(void **state)
{
    (void)state;
    char cause[64];
    int st = in_child(body_sigterm, cause, sizeof cause);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_string_equal(cause, "SIGTERM");

    st = in_child(body_deferred, cause, sizeof cause);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_string_equal(cause, "SIGTERM");

    st = in_child(body_ignored, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(cause, ""); /* ignored: nothing to flush for */

    st = in_child(body_chained, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 5);
    assert_string_equal(cause, "SIGQUIT");

    st = in_child(body_raced, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 5); /* not SIGQUIT's default end */
    assert_string_equal(cause, "SIGQUIT");

    st = in_child(body_native_fault, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 9);
    assert_string_equal(cause, "SIGSEGV"); /* flushed before the runtime's handler ended it */

    st = in_child(body_handled_fault, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    assert_string_equal(cause, ""); /* handled by the runtime: nothing to flush */

    st = in_child(body_armed, cause, sizeof cause);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_string_equal(cause, "SIGTERM"); /* flushed once the registration came */

    int64_t t0 = clrmux_mono_ns();
    st = in_child(body_disarmed, cause, sizeof cause);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_string_equal(cause, "");
    assert_true(clrmux_mono_ns() - t0 < 1000000000LL); /* nothing waited for */

    st = in_child(body_exit, cause, sizeof cause);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 4);
    assert_string_equal(cause, "exit");
}

static char captured[600];
static void test_signal_safe_log(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    clrmux_log_signal_safe(CLRMUX_LOG_ERROR, "the last gasp did not finish");
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    ssize_t n = read(fds[0], captured, sizeof captured - 1);
    close(fds[0]);
    assert_true(n > 0);
    captured[n] = 0;
    char expect[64];
    snprintf(expect, sizeof expect, "clrmux[%d] ", (int)getpid());
    assert_memory_equal(captured, expect, strlen(expect));
    /* "clrmux[pid] YYYY-MM-DDTHH:MM:SS.mmmZ ERROR the last gasp did not finish\n" as clrmux_log */
    const char *t = captured + strlen(expect);
    assert_true(t[4] == '-' && t[7] == '-' && t[10] == 'T' && t[13] == ':' && t[19] == '.' && t[23] == 'Z');
    assert_string_equal(t + 25, "ERROR the last gasp did not finish\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signal_safe_log),
        cmocka_unit_test(test_signals_in_child),
        cmocka_unit_test(test_fire_and_unregister),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
