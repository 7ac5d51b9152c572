/* Unit tests for the signal sampler: the frame-pointer walk over synthetic stacks (bounds,
 * ordering, loops, depth, unreadable memory, the stack scan past frameless frames), the
 * /proc/self/maps lookups, and the sampler itself in this process: CPU timers and wall
 * signals on real threads, stacks that contain the functions the threads run, wall time of
 * a blocked thread without repeated signals, chaining to a previous SIGPROF handler, and
 * the check that notices a replaced handler. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profiler/prof.h"

#define U(p) ((uint64_t)(uintptr_t)(p))

/* A synthetic stack: 64 words, frame records at the given indices. */
static uint64_t stk[64] __attribute__((aligned(16)));

static void chain3(void)
{
    memset(stk, 0, sizeof stk);
    stk[4] = U(&stk[10]), stk[5] = 0x1001; /* frame record: saved RBP, return address */
    stk[10] = U(&stk[20]), stk[11] = 0x2001;
    stk[20] = 0, stk[21] = 0x3001; /* outermost */
}

/* process_vm_readv (the safe reads) is missing under qemu-user (ENOSYS), where the arm64 unit
 * tests run: the safe-read checks are skipped there and run on real kernels. */
static int have_vm_readv(void)
{
    uint64_t v[2] = {1, 2}, o[2];
    if (prof_safe_read16(U(v), o) == 0)
        return 1;
    if (errno == ENOSYS) {
        fprintf(stderr, "process_vm_readv: ENOSYS (qemu-user?): safe-read checks skipped\n");
        return 0;
    }
    return 1; /* another failure: let the checks below report it */
}

static void test_walk_chain(void **state)
{
    (void)state;
    chain3();
    int safe_max = have_vm_readv() ? 2 : 1;
    struct prof_walk_regs r = {.ip = 0x999, .sp = U(&stk[0]), .fp = U(&stk[4])};
    uint64_t out[16];
    int st = -1;
    for (int safe = 0; safe < safe_max; safe++) { /* direct reads within bounds, then safe reads */
        size_t n = prof_fp_walk(&r, safe ? 0 : U(&stk[64]), NULL, out, 16, &st);
        assert_int_equal(n, 4);
        assert_int_equal(st, PROF_WALK_OK);
        assert_true(out[0] == 0x999 && out[1] == 0x1000 && out[2] == 0x2000 && out[3] == 0x3000);
    }
    /* depth */
    size_t n = prof_fp_walk(&r, U(&stk[64]), NULL, out, 2, &st);
    assert_int_equal(n, 2);
    assert_int_equal(st, PROF_WALK_DEPTH);
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 0, &st), 0);
}

static void test_walk_guards(void **state)
{
    (void)state;
    uint64_t out[16];
    int st;
    chain3();
    struct prof_walk_regs r = {.ip = 0x999, .sp = U(&stk[6]), .fp = U(&stk[4])}; /* fp below sp */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st), 1);
    assert_int_equal(st, PROF_WALK_BROKEN);
    r.sp = U(&stk[0]);
    r.fp = U(&stk[4]) + 4; /* misaligned */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st), 1);
    assert_int_equal(st, PROF_WALK_BROKEN);
    r.fp = U(&stk[4]); /* the stack ends before the second record */
    assert_int_equal(prof_fp_walk(&r, U(&stk[11]), NULL, out, 16, &st), 2);
    assert_int_equal(st, PROF_WALK_BROKEN);
    stk[10] = U(&stk[4]); /* a loop: the chain must increase */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st), 3);
    assert_int_equal(st, PROF_WALK_BROKEN);
    chain3();
    stk[10] = U(&stk[10]); /* a self loop */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st), 3);
    assert_int_equal(st, PROF_WALK_BROKEN);
}

static void test_walk_unreadable(void **state)
{
    (void)state;
    if (!have_vm_readv())
        skip();
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    uint64_t *w = (uint64_t *)m;
    w[0] = U(m + pg); /* points into the page made unreadable below */
    w[1] = 0x4001;
    assert_int_equal(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
    uint64_t two[2];
    assert_int_equal(prof_safe_read16(U(m), two), 0);
    assert_true(two[1] == 0x4001);
    assert_int_equal(prof_safe_read16(U(m + pg), two), -1);
    assert_int_equal(prof_safe_read16(8, two), -1);
    struct prof_walk_regs r = {.ip = 1, .sp = U(m), .fp = U(m)};
    uint64_t out[8];
    int st;
    /* no known bounds: every read is a safe read; the PROT_NONE page ends the walk */
    assert_int_equal(prof_fp_walk(&r, 0, NULL, out, 8, &st), 2);
    assert_int_equal(st, PROF_WALK_BROKEN);
    assert_true(out[1] == 0x4000);
    munmap(m, (size_t)pg * 2);
}

static void test_walk_scan(void **state)
{
    (void)state;
    static struct prof_code_ranges code;
    code.n = 2;
    code.r[0].lo = 0x1000, code.r[0].hi = 0x3000;
    code.r[1].lo = 0x8000, code.r[1].hi = 0x9000;
    assert_true(prof_is_code(&code, 0x1000) && prof_is_code(&code, 0x2fff) && prof_is_code(&code, 0x8800));
    assert_false(prof_is_code(&code, 0xfff) || prof_is_code(&code, 0x3000) || prof_is_code(&code, 0x9000));
    assert_false(prof_is_code(NULL, 0x1000));
    memset(stk, 0, sizeof stk);
    /* a frameless leaf (RBP holds no frame pointer) below a real chain, with noise first */
    stk[1] = U(&stk[3]);   /* points up, but the next word is not code */
    stk[2] = 0x5555;
    stk[4] = U(&stk[30]), stk[5] = 0x2222; /* looks like a record, but the next one is bad */
    stk[30] = 5, stk[31] = 0x1111;
    stk[8] = U(&stk[12]), stk[9] = 0x1501; /* the first true record */
    stk[12] = U(&stk[16]), stk[13] = 0x8801;
    stk[16] = 0, stk[17] = 0x2501;
    uint64_t out[16];
    int st;
    struct prof_walk_regs r = {.ip = 0x777, .sp = U(&stk[0]), .fp = 0};
    size_t n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(st, PROF_WALK_OK);
    assert_int_equal(n, 4);
    assert_true(out[0] == 0x777 && out[1] == 0x1500 && out[2] == 0x8800 && out[3] == 0x2500);
    /* a garbage RBP: the same */
    r.fp = 0x13;
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st), 4);
    /* without code ranges (or without known bounds) there is no scan */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st), 1);
    assert_int_equal(st, PROF_WALK_BROKEN);
    r.fp = 0;
    assert_int_equal(prof_fp_walk(&r, 0, &code, out, 16, &st), 1);
    assert_int_equal(st, PROF_WALK_OK);
}

/* The OSR shape measured on .NET 8, 9 and 10 (x64, see prof.h): the OSR frame's record links
 * to the caller's record and holds the Tier0 code's return address from the patchpoint
 * helper; the Tier0 frame's record [caller's frame pointer, return into the caller] lies
 * between them. */
static void osr_chain(void)
{
    memset(stk, 0, sizeof stk);
    stk[4] = U(&stk[20]), stk[5] = 0x1201;  /* OSR frame: [caller's fp, Tier0's helper call] */
    stk[6] = U(&stk[20]), stk[7] = 0x5555;  /* noise in the Tier0 frame: not code */
    stk[8] = 0x1234;
    stk[14] = U(&stk[20]), stk[15] = 0x2301; /* the Tier0 frame's record, skipped by the chain */
    stk[20] = U(&stk[30]), stk[21] = 0x8401; /* the caller's record */
    stk[30] = 0, stk[31] = 0x2501;
}

/* fake GetFunctionFromIP: 0x1000-0x1fff is method 1 (its Tier0 and OSR code), 0x2000-0x2fff
 * method 2, 0x8000-0x8fff not managed */
static uint64_t fake_fid(void *ctx, uint64_t ip)
{
    (*(int *)ctx)++;
    return ip >= 0x1000 && ip < 0x2000 ? 1 : ip >= 0x2000 && ip < 0x3000 ? 2 : 0;
}

/* fake native code: 0x8000-0x8fff */
static int fake_native(void *ctx, uint64_t ip)
{
    (void)ctx;
    return ip >= 0x8000 && ip < 0x9000;
}

static void test_walk_osr(void **state)
{
    (void)state;
    static struct prof_code_ranges code;
    code.n = 2;
    code.r[0].lo = 0x1000, code.r[0].hi = 0x3000;
    code.r[1].lo = 0x8000, code.r[1].hi = 0x9000;
    osr_chain();
    struct prof_walk_regs r = {.ip = 0x1050, .sp = U(&stk[0]), .fp = U(&stk[4])};
    uint64_t out[16];
    int st;
    size_t n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(st, PROF_WALK_OK);
    assert_int_equal(n, 5);
    assert_true(out[0] == 0x1050 && out[1] == 0x1200 && out[2] == (0x2300 | PROF_FRAME_OSR_CALLER) &&
                out[3] == 0x8400 && out[4] == 0x2500);
    /* the OSR code and the Tier0 call are one method: the caller replaces the Tier0 frame */
    int calls = 0;
    uint64_t f[16];
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    size_t m = prof_osr_fold(f, n, fake_fid, fake_native, &calls);
    assert_int_equal(m, 4);
    assert_true(f[0] == (PROF_FRAME_MANAGED_IP | 0x1050) && f[1] == (PROF_FRAME_MANAGED_IP | 0x2300) &&
                f[2] == (PROF_FRAME_MANAGED_IP | 0x8400) && f[3] == (PROF_FRAME_MANAGED_IP | 0x2500));
    /* a frame below the OSR frame (a method it called): the same */
    r.ip = 0x2050;
    stk[0] = U(&stk[4]), stk[1] = 0x1101;
    r.fp = U(&stk[0]);
    n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(n, 6);
    assert_true(out[1] == 0x1100 && out[2] == 0x1200 && out[3] == (0x2300 | PROF_FRAME_OSR_CALLER));
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    assert_int_equal(prof_osr_fold(f, n, fake_fid, fake_native, &calls), 5);
    assert_true(f[1] == (PROF_FRAME_MANAGED_IP | 0x1100) && f[2] == (PROF_FRAME_MANAGED_IP | 0x2300) &&
                f[3] == (PROF_FRAME_MANAGED_IP | 0x8400));
    /* not one method around the record (an ordinary frame whose caller's frame happens to
     * hold such a pair): the candidate is dropped, nothing else changes */
    r.ip = 0x2050, r.fp = U(&stk[4]);
    n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    assert_int_equal(prof_osr_fold(f, n, fake_fid, fake_native, &calls), 4);
    assert_true(f[0] == (PROF_FRAME_MANAGED_IP | 0x2050) && f[1] == (PROF_FRAME_MANAGED_IP | 0x1200) &&
                f[2] == (PROF_FRAME_MANAGED_IP | 0x8400));
    /* native frames (fid 0) are never one method */
    r.ip = 0x8050;
    stk[5] = 0x8201;
    n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    assert_int_equal(prof_osr_fold(f, n, fake_fid, fake_native, &calls), 4);
    assert_true(f[1] == (PROF_FRAME_MANAGED_IP | 0x8200));
    stk[5] = 0x1201;
    /* a pair whose return address is in no code range the handler knows (JIT code newer
     * than the ranges) is offered too, after any that is: the fold keeps it only if the
     * runtime or a module knows it as code */
    r.ip = 0x1050;
    osr_chain();
    stk[14] = stk[15] = 0;
    n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    assert_int_equal(n, 5);
    assert_true(out[2] == (0x5554 | PROF_FRAME_OSR_CALLER)); /* the noise pair at stk[6] */
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    assert_int_equal(prof_osr_fold(f, n, fake_fid, fake_native, &calls), 4);
    assert_true(f[0] == (PROF_FRAME_MANAGED_IP | 0x1050) && f[1] == (PROF_FRAME_MANAGED_IP | 0x1200) &&
                f[2] == (PROF_FRAME_MANAGED_IP | 0x8400));
    osr_chain();
    /* without code ranges: the first pair (the noise) is offered, and dropped by the fold */
    n = prof_fp_walk(&r, U(&stk[64]), NULL, out, 16, &st);
    assert_int_equal(n, 5);
    assert_true(out[2] == (0x5554 | PROF_FRAME_OSR_CALLER));
    /* a native caller (an OSR'd Main called by the runtime) is kept */
    stk[15] = 0x8301;
    n = prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st);
    for (size_t i = 0; i < n; i++)
        f[i] = (out[i] & PROF_FRAME_TAG_MASK) ? out[i] : PROF_FRAME_MANAGED_IP | out[i];
    assert_int_equal(prof_osr_fold(f, n, fake_fid, fake_native, &calls), 4);
    assert_true(f[1] == (PROF_FRAME_MANAGED_IP | 0x8300));
    stk[15] = 0x2301;
    /* no known bounds: no look (nothing is read outside the chain) */
    if (have_vm_readv())
        assert_int_equal(prof_fp_walk(&r, 0, &code, out, 16, &st), 4);
    /* the per-record limit: a Tier0 record further than PROF_OSR_SCAN_BYTES is not seen */
    {
        static uint64_t big[320] __attribute__((aligned(16)));
        memset(big, 0, sizeof big);
        big[0] = U(&big[300]), big[1] = 0x1201;
        big[2 + PROF_OSR_SCAN_BYTES / 8] = U(&big[300]), big[3 + PROF_OSR_SCAN_BYTES / 8] = 0x2301;
        big[300] = 0, big[301] = 0x8401;
        struct prof_walk_regs rb = {.ip = 0x1050, .sp = U(&big[0]), .fp = U(&big[0])};
        assert_int_equal(prof_fp_walk(&rb, U(&big[320]), &code, out, 16, &st), 3);
        big[1 + PROF_OSR_SCAN_BYTES / 8] = U(&big[300]), big[2 + PROF_OSR_SCAN_BYTES / 8] = 0x2301;
        assert_int_equal(prof_fp_walk(&rb, U(&big[320]), &code, out, 16, &st), 4);
    }
    /* the depth limit holds: the candidate is not written past max */
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), &code, out, 2, &st), 2);
    assert_int_equal(st, PROF_WALK_DEPTH);
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), &code, out, 3, &st), 3);
    assert_true(out[2] == (0x2300 | PROF_FRAME_OSR_CALLER));
    /* the Tier0 record must lie below the caller's: a pair at or above it is not looked at */
    osr_chain();
    stk[6] = stk[14] = stk[15] = 0;
    stk[22] = U(&stk[20]), stk[23] = 0x2301;
    assert_int_equal(prof_fp_walk(&r, U(&stk[64]), &code, out, 16, &st), 4);
    assert_true(calls > 0);
}

static void test_maps(void **state)
{
    (void)state;
    int local = 0;
    uint64_t lo = 0, hi = 0;
    assert_int_equal(prof_stack_mapping(U(&local), &lo, &hi), 0);
    assert_true(lo <= U(&local) && U(&local) < hi);
    assert_int_equal(prof_stack_mapping(U(&test_maps), &lo, &hi), -1); /* code is not rw */
    struct prof_code_ranges *c = malloc(sizeof *c);
    assert_non_null(c);
    assert_int_equal(prof_code_ranges_load(c), 0);
    assert_true(c->n > 0);
    assert_true(prof_is_code(c, U(&test_maps)));
    assert_true(prof_is_code(c, U(&memcpy)));
    assert_false(prof_is_code(c, U(&local)));
    free(c);
}

/* ---- the sampler in this process ----------------------------------------------------- */

static atomic_int g_stop;
static atomic_uintptr_t g_spin_ret, g_block_ret;
static atomic_int g_spinner_tid, g_blocker_tid;
static volatile uint64_t g_sink;

__attribute__((noinline)) static void spin_leaf(void)
{
    atomic_store(&g_spin_ret, (uintptr_t)__builtin_return_address(0));
    uint64_t x = 1;
    for (int i = 0; i < 200000; i++)
        x = x * 6364136223846793005ull + 1;
    g_sink += x;
}

/* The span context the handler reads (the tracer's role, played here): the spinner runs
 * inside a span for its whole life, the other threads have no record. */
static __thread struct clrmux_span_context *t_ctx;
static struct clrmux_span_context g_spin_ctx = {.span_id = 0xabcdef0123456789ull, .local_root_id = 0x1111222233334444ull,
                                                .trace_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
static struct clrmux_span_context *test_peek(void) { return t_ctx; }

static void *spinner(void *arg)
{
    (void)arg;
    g_spin_ctx.tid = (uint32_t)syscall(SYS_gettid);
    g_spin_ctx.depth = 2;
    t_ctx = &g_spin_ctx;
    atomic_store(&g_spinner_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&g_stop))
        spin_leaf();
    return NULL;
}

__attribute__((noinline)) static void block_leaf(void)
{
    atomic_store(&g_block_ret, (uintptr_t)__builtin_return_address(0));
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 400 * 1000 * 1000};
    nanosleep(&ts, NULL); /* libc: no frame pointer; interrupted by wall signals (EINTR) */
}

static void *blocker(void *arg)
{
    (void)arg;
    atomic_store(&g_blocker_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&g_stop))
        block_leaf();
    return NULL;
}

static atomic_int g_deaf_tid;
static void *deaf(void *arg) /* blocks SIGPROF: its signals are never handled */
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&g_deaf_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&g_stop))
        usleep(20000);
    return NULL;
}

static atomic_int g_prev_calls;
static void prev_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    atomic_fetch_add(&g_prev_calls, 1);
}

static int has_frame(const uint64_t *f, uint16_t n, uint64_t want)
{
    for (uint16_t i = 0; i < n; i++)
        if ((f[i] & ~PROF_FRAME_TAG_MASK) == want)
            return 1;
    return 0;
}

static void test_sampler_in_process(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prev_handler;
    sa.sa_flags = SA_SIGINFO;
    assert_int_equal(sigaction(SIGPROF, &sa, NULL), 0);

    char why[256] = "";
    struct prof_sig *s = prof_sig_start(5, 1, 1, test_peek, why, sizeof why);
    if (!s)
        fail_msg("prof_sig_start: %s", why);
    char why2[64];
    assert_null(prof_sig_start(5, 1, 1, NULL, why2, sizeof why2)); /* one per process */

    /* a SIGPROF that is not ours reaches the handler installed before */
    kill(getpid(), SIGPROF);
    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGPROF, v);
    assert_int_equal(atomic_load(&g_prev_calls), 2);

    struct prof_rawq q;
    assert_int_equal(prof_rawq_init(&q, 8192, 256 * 1024), 0);
    pthread_t a, b, c;
    atomic_store(&g_stop, 0);
    assert_int_equal(pthread_create(&a, NULL, spinner, NULL), 0);
    assert_int_equal(pthread_create(&b, NULL, blocker, NULL), 0);
    assert_int_equal(pthread_create(&c, NULL, deaf, NULL), 0);
    while (!atomic_load(&g_spinner_tid) || !atomic_load(&g_blocker_tid) || !atomic_load(&g_spin_ret) ||
           !atomic_load(&g_block_ret) || !atomic_load(&g_deaf_tid))
        usleep(1000);
    struct prof_thread_view views[3];
    memset(views, 0, sizeof views);
    views[0].slot = 3, views[0].t.id = 0x1111, views[0].t.tid = (uint32_t)atomic_load(&g_spinner_tid);
    snprintf(views[0].t.name, sizeof views[0].t.name, "spinner");
    views[1].slot = 7, views[1].t.id = 0x2222, views[1].t.tid = (uint32_t)atomic_load(&g_blocker_tid);
    snprintf(views[1].t.name, sizeof views[1].t.name, "blocker");
    views[2].slot = 9, views[2].t.id = 0x3333, views[2].t.tid = (uint32_t)atomic_load(&g_deaf_tid);
    snprintf(views[2].t.name, sizeof views[2].t.name, "deaf");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 110; i++) { /* ~0.55 s at 5 ms */
        prof_sig_tick(s, views, 3, i == 0, &q); /* the same views after the first tick */
        usleep(5000);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    prof_sig_flush_wall(s, &q);
    prof_sig_tick(s, views, 0, 1, &q); /* both threads gone from the registry: disarmed */
    atomic_store(&g_stop, 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);

    struct prof_sig_stats st;
    prof_sig_get_stats(s, &st);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("  %.2f s: %llu cpu samples (%.0f ms cpu), %llu wall (%llu signals, %llu reused), %llu truncated, "
                  "%llu safe walks\n", secs, (unsigned long long)st.cpu_samples, (double)st.cpu_ns / 1e6,
                  (unsigned long long)st.wall_samples, (unsigned long long)st.wall_signals,
                  (unsigned long long)st.wall_reused, (unsigned long long)st.truncated,
                  (unsigned long long)st.safe_walks);
    /* the spinner used ~secs of CPU (less on a busy machine): one sample per 5 ms of it */
    assert_true(st.cpu_samples >= 10);
    assert_true(st.cpu_ns > 0 && st.cpu_samples * 1e9 / (double)st.cpu_ns > 150); /* ~200 per CPU-second */
    assert_int_equal(st.threads, 3);
    /* the thread that blocks SIGPROF: its wall signal is given up after 100 ticks */
    assert_true(st.unresponsive >= 1);
    /* 110 ticks, 3 threads: every tick covers each. The blocker does not run between walks:
     * it is checked less and less often and needs few signals; the spinner needs at most
     * one per tick (none when its CPU timer walked it during the tick) */
    assert_true(st.wall_samples >= 3 * 105);
    assert_true(st.wall_reused >= 3);
    assert_true(st.wall_signals <= 110 + 14);

    struct prof_rawbuf *buf = prof_rawq_swap(&q);
    uint64_t spin_ret = (uint64_t)atomic_load(&g_spin_ret) - 1, block_ret = (uint64_t)atomic_load(&g_block_ret) - 1;
    size_t cpu = 0, cpu_in_spin = 0, wall_blocker = 0, wall_blocker_in_block = 0;
    int64_t wall_blocker_ns = 0, wall_deaf_ns = 0;
    for (uint32_t i = 0; i < buf->nrecs; i++) {
        const struct prof_raw *r = &buf->recs[i];
        const uint64_t *f = &buf->frames[r->first];
        assert_int_equal(r->kind, PROF_K_SAMPLE);
        assert_true(r->nframes >= 1 || r->tid == views[2].t.tid); /* the deaf thread has no walk */
        assert_true(r->nframes == 0 || (f[0] & PROF_FRAME_TAG_MASK) == PROF_FRAME_MANAGED_IP);
        if (r->tid == views[0].t.tid) { /* every walk of the spinner: inside its span */
            assert_true(r->span.span_id == g_spin_ctx.span_id && r->span.local_root_id == g_spin_ctx.local_root_id);
            assert_memory_equal(r->span.trace_id, (const void *)g_spin_ctx.trace_id, 16);
        } else {
            assert_true(r->span.span_id == 0); /* no span: no labels */
        }
        if (r->v0 > 0 && r->tid == views[0].t.tid) {
            cpu++;
            cpu_in_spin += has_frame(f, r->nframes, spin_ret);
            assert_string_equal(r->tname, "spinner");
        }
        if (r->v1 > 0 && r->tid == views[2].t.tid)
            wall_deaf_ns += r->v1;
        if (r->v1 > 0 && r->tid == views[1].t.tid) {
            wall_blocker++;
            wall_blocker_ns += r->v1;
            wall_blocker_in_block += has_frame(f, r->nframes, block_ret);
        }
    }
    print_message("  spinner: %zu cpu samples, %zu in spin_leaf; blocker: %zu wall samples (%.0f ms), %zu through "
                  "nanosleep into block_leaf's caller\n", cpu, cpu_in_spin, wall_blocker, (double)wall_blocker_ns / 1e6,
                  wall_blocker_in_block);
    assert_true(cpu >= 10);
    assert_true(cpu_in_spin * 10 >= cpu * 9); /* the spinner is in spin_leaf nearly always */
    /* wall time of the blocker: about the measured span, attributed through libc's
     * frameless nanosleep to block_leaf's caller (the stack scan) */
    assert_true(wall_blocker_ns > (int64_t)(secs * 0.8e9) && wall_blocker_ns < (int64_t)(secs * 1.2e9));
    /* (under qemu-user the safe reads fail: a walk made before the stack mapping was known
     * stops at its first frame there) */
    size_t unreadable = have_vm_readv() ? 0 : (size_t)st.safe_walks;
    assert_true((wall_blocker_in_block + unreadable) * 10 >= wall_blocker * 8);
    /* the deaf thread's wall time is kept (without a stack) when its signal is given up */
    assert_true(wall_deaf_ns > (int64_t)(secs * 0.5e9));
    prof_rawbuf_clear(buf);

    /* a replaced handler is noticed */
    assert_int_equal(prof_sig_check(s, why, sizeof why), 0);
    struct sigaction ours;
    sigaction(SIGPROF, &sa, &ours);
    assert_int_equal(prof_sig_check(s, why, sizeof why), -1);
    assert_non_null(strstr(why, "replaced"));
    sigaction(SIGPROF, &ours, NULL);
    prof_sig_stop(s);
    prof_rawq_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_chain),
        cmocka_unit_test(test_walk_guards),
        cmocka_unit_test(test_walk_unreadable),
        cmocka_unit_test(test_walk_scan),
        cmocka_unit_test(test_walk_osr),
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_sampler_in_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
