/* The signal sampler's side on the sampler thread (sigsampler.c has the handler and the
 * start): each tick arms the new managed threads (a slot, a CPU timer), drains the walks
 * their handlers left in the slots' rings into the raw queue, looks up the stacks first seen
 * and the executable ranges in /proc/self/maps, and decides per thread whether its wall time
 * needs a signal (a thread that did not run keeps its stack; one that runs is walked by its
 * CPU timer). See sigsampler.c's top comment for the whole. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/lazymem.h"
#include "common/log.h"
#include "profiler/prof.h"

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include "profiler/sigsampler_int.h"

static void push(struct prof_sig *s, struct slot *sl, struct prof_rawq *q, const uint64_t *f, uint16_t n,
                 const struct clrmux_span_ids *span, int status, int64_t cpu_ns, int64_t wall_ns)
{
    struct prof_raw r;
    memset(&r, 0, offsetof(struct prof_raw, type) + 1);
    if (span && span->span_id)
        r.span = *span;
    r.kind = PROF_K_SAMPLE;
    r.tid = sl->tid;
    r.truncated = status != PROF_WALK_OK;
    r.v0 = cpu_ns;
    r.v1 = wall_ns;
    _Static_assert(sizeof r.tname == sizeof sl->name, "thread name sizes");
    memcpy(r.tname, sl->name, sizeof r.tname); /* NUL-terminated: snprintf'd into sl->name */
    for (uint16_t i = 0; i < n; i++)
        s->frames[i] = (f[i] & PROF_FRAME_TAG_MASK) == PROF_FRAME_OSR_CALLER ? f[i] /* prof_osr_fold */
                                                                             : PROF_FRAME_MANAGED_IP | f[i];
    prof_rawq_push(q, &r, s->frames, n);
}

static void flush_accum(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    if (sl->wall_accum > 0 && sl->have_last)
        push(s, sl, q, sl->last_f, sl->last_n, &sl->last_span, sl->last_status, 0, sl->wall_accum);
    sl->wall_accum = 0;
}

static void drain_slot(struct prof_sig *s, struct slot *sl, struct prof_rawq *q, int64_t now)
{
    uint64_t t = atomic_load_explicit(&sl->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&sl->head, memory_order_acquire);
    if (t != h && sl->idle_level && sl->have_last && now > sl->last_wall) {
        /* it was idle, checked less often, and has been walked: the wall time until this
         * tick stays with the old stack, and the thread is checked again this tick */
        sl->wall_accum += now - sl->last_wall;
        s->st.wall_ns += now - sl->last_wall;
        sl->last_wall = now;
        sl->idle_level = sl->skip = 0;
    }
    for (; t != h; t++) {
        struct ent *e = &sl->ring[t % RING];
        if (e->status == PROF_WALK_BROKEN)
            s->st.truncated++;
        else if (e->status == PROF_WALK_DEPTH)
            s->st.depth_cut++;
        /* the wall time of a running thread waits for its next walk: this one */
        int64_t next = sl->wall_next;
        sl->wall_next = 0;
        if (e->wall) {
            flush_accum(s, sl, q);
            if (e->v + next > 0)
                push(s, sl, q, e->f, e->n, &e->span, e->status, 0, e->v + next);
        } else {
            s->st.cpu_samples++;
            s->st.cpu_ns += e->v;
            sl->cpu_walk_tick = s->tick_no;
            sl->cpu_samples++;
            if (sl->cpu_samples > s->st.max_thread_cpu_samples)
                s->st.max_thread_cpu_samples = sl->cpu_samples;
            push(s, sl, q, e->f, e->n, &e->span, e->status, e->v, next);
        }
        /* the newest stack, for wall time of a thread that does not run */
        flush_accum(s, sl, q);
        memcpy(sl->last_f, e->f, (size_t)e->n * sizeof e->f[0]);
        sl->last_n = e->n;
        sl->last_span = e->span;
        sl->last_status = e->status;
        sl->have_last = 1;
        /* a wall walk stands while the thread's CPU clock stays where the sampler read it
         * before signalling (the handler itself costs the thread a few microseconds); a cpu
         * walk's thread was running. A walk made before the stack mapping was known could not
         * scan past frameless frames: when it broke, or stopped at its first frame (a zero
         * frame pointer, where a bounded walk scans), walk this thread again rather than reuse
         * it (a chain followed to its outermost frame needed no scan). */
        sl->wall_cpu_seen =
            (e->safe && (e->status != PROF_WALK_OK || e->n < 2)) || !e->wall ? -1 : sl->sent_cpu;
    }
    atomic_store_explicit(&sl->tail, t, memory_order_release);
}

static void disarm(struct slot *sl)
{
    if (sl->has_timer) {
        timer_delete(sl->timer);
        sl->has_timer = 0;
    }
    atomic_store(&sl->owner, 0);
    while (atomic_load(&sl->busy))
        sched_yield();
}

/* The wall time not pushed yet goes to the last stack: the ticks skipped while the thread is
 * idle (counted, not added yet) and a running thread's time that waits for its next walk. */
static void settle_wall(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    drain_slot(s, sl, q, s->tick_now);
    if (sl->skip && sl->have_last && s->tick_now > sl->last_wall) {
        sl->wall_accum += s->tick_now - sl->last_wall;
        s->st.wall_ns += s->tick_now - sl->last_wall;
        sl->last_wall = s->tick_now;
    }
    if (!sl->have_last && sl->wall_next > 0) /* a running thread not walked yet: its wall
                                                 time is kept, without a stack */
        push(s, sl, q, sl->last_f, 0, NULL, PROF_WALK_BROKEN, 0, sl->wall_next);
    else
        sl->wall_accum += sl->wall_next;
    sl->wall_next = 0;
    flush_accum(s, sl, q);
}

static void retire(struct prof_sig *s, struct slot *sl, struct prof_rawq *q)
{
    disarm(sl);
    settle_wall(s, sl, q);
    sl->id = 0;
    sl->tid = 0;
}

/* The stack pointer of thread tid from /proc/self/task/<tid>/syscall ("nr args... sp pc", or
 * "-1 sp pc" when blocked outside a system call), or 0 when it runs or cannot be read. */
static uint64_t blocked_sp(uint32_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (strncmp(buf, "running", 7) == 0)
        return 0;
    uint64_t tok[9];
    size_t k = 0;
    char *p = buf, *end;
    while (k < 9) {
        unsigned long long v = strtoull(p, &end, 0);
        if (end == p)
            break;
        tok[k++] = v;
        p = end;
    }
    return k >= 3 ? tok[k - 2] : 0;
}

static void arm(struct prof_sig *s, struct slot *sl, size_t idx, const struct prof_thread *t, int64_t now)
{
    int64_t cpu = thread_cpu_ns(t->tid);
    sl->id = t->id;
    sl->tid = t->tid;
    sl->have_last = 0;
    sl->last_n = 0;
    sl->last_span.span_id = 0;
    sl->wall_cpu_seen = -1;
    sl->last_wall = now;
    sl->wall_accum = 0;
    sl->wall_next = 0;
    /* the CPU clock read here is the first check's: a thread that runs from its arming on
     * (the app's main thread, armed on the first tick) is not signalled on the next */
    sl->chk_cpu = cpu >= 0 ? cpu : 0;
    sl->chk_mono = cpu >= 0 ? now : 0;
    sl->cpu_samples = 0;
    sl->idle_level = sl->skip = 0;
    sl->cpu_walk_tick = 0;
    atomic_store(&sl->owner_self, 0);
    atomic_store(&sl->head, 0);
    atomic_store(&sl->tail, 0);
    atomic_store(&sl->map_lo, 0);
    atomic_store(&sl->map_hi, 0);
    atomic_store(&sl->seen_sp, 0);
    atomic_store(&sl->cpu_carry, 0);
    atomic_store(&sl->wall_pending, 0);
    atomic_store(&sl->wall_inflight, 0);
    atomic_store(&sl->owner, t->tid);
    /* a thread blocked in a system call shows its stack pointer in /proc: its stack mapping
     * is then looked up in this tick, before its first walk (a walk without it reads each
     * frame by a system call, cannot scan frameless frames, and is made again) */
    uint64_t sp = blocked_sp(t->tid);
    if (sp)
        atomic_store(&sl->seen_sp, sp);
    s->st.threads++;
    if (!s->cpu || cpu < 0)
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_value.sival_int = (int)((SIG_MAGIC << 16) | (uint32_t)idx);
    sev._sigev_un._tid = (pid_t)t->tid;
    struct itimerspec its = {
        .it_interval = {.tv_sec = s->interval_ns / 1000000000, .tv_nsec = s->interval_ns % 1000000000},
        .it_value = {.tv_sec = s->interval_ns / 1000000000, .tv_nsec = s->interval_ns % 1000000000},
    };
    if (timer_create(thread_clock(t->tid), &sev, &sl->timer) != 0) {
        s->st.timer_failures++;
        if (!s->timer_logged++)
            LOG_WARN("profiler: timer_create for thread %u failed: %s; that thread has wall samples only "
                     "(logged once)", t->tid, strerror(errno));
        return;
    }
    if (timer_settime(sl->timer, 0, &its, NULL) != 0) {
        timer_delete(sl->timer);
        s->st.timer_failures++;
        return;
    }
    sl->has_timer = 1;
}

/* The stacks first seen by this tick's walks, and the executable ranges when they are due
 * (code_due), in one pass over /proc/self/maps (a start-up's first tick needs both: two
 * passes were 1-2 ms of the sampler thread on a VM, measured with perf) */
static void lookup_stacks(struct prof_sig *s, size_t npend, int code_due)
{
    if (code_due) {
        struct prof_code_ranges *cur = atomic_load(&s->code);
        struct prof_code_ranges *next = cur == s->code_buf[0] ? s->code_buf[1] : s->code_buf[0];
        uint64_t main_stack[2];
        if (prof_maps_scan(next, s->pend_sp, npend, s->pend_lo, s->pend_hi, main_stack) != (size_t)-1) {
            atomic_store_explicit(&s->code, next, memory_order_release);
            /* the main thread's stack is known by name: its first walks (a hello world's
             * busiest thread, armed on this first tick) need not read each frame by a system
             * call, nor wait for a second pass over the maps */
            for (size_t idx = 0; main_stack[1] && idx < s->high; idx++) {
                struct slot *sl = atomic_load(&s->slots[idx]);
                if (sl && sl->id && sl->tid == (uint32_t)prof_sig_pid && !atomic_load(&sl->map_hi) &&
                    !atomic_load(&sl->seen_sp)) {
                    atomic_store(&sl->map_lo, main_stack[0]);
                    atomic_store_explicit(&sl->map_hi, main_stack[1], memory_order_release);
                }
            }
        }
        s->code_loaded = s->tick_now;
    } else if (npend) {
        prof_stack_mappings(s->pend_sp, npend, s->pend_lo, s->pend_hi); /* one pass over the maps */
    }
    for (size_t i = 0; i < npend; i++) {
        struct slot *sl = atomic_load(&s->slots[s->pend_idx[i]]);
        if (sl && s->pend_hi[i]) {
            atomic_store(&sl->map_lo, s->pend_lo[i]);
            atomic_store_explicit(&sl->map_hi, s->pend_hi[i], memory_order_release);
        }
    }
}

/* A zeroed slot with its ring and frames, or NULL (out of memory). Slots come from chunks of
 * SLOT_CHUNK, next to each other; like their rings, they are never freed (a late signal may
 * still find one). A chunk, its rings and its frames are one mapping (common/lazymem.h),
 * touched as threads come (calloc cleared ~10 KB of rings and frames per thread, and
 * LeakSanitizer does not see pointers kept in the mapped prof_sig). */
static struct slot *new_slot(struct prof_sig *s)
{
    if (s->chunk_used == SLOT_CHUNK || !s->chunk) {
        size_t per = sizeof(struct slot) + RING * sizeof(struct ent) + PROF_MAX_FRAMES * sizeof(uint64_t);
        char *m = clrmux_lazy_calloc(SLOT_CHUNK, per);
        if (!m)
            return NULL;
        struct slot *c = (struct slot *)(void *)m;
        struct ent *rings = (struct ent *)(void *)(m + SLOT_CHUNK * sizeof(struct slot));
        uint64_t *frames = (uint64_t *)(void *)((char *)rings + SLOT_CHUNK * RING * sizeof(struct ent));
        for (size_t i = 0; i < SLOT_CHUNK; i++) {
            c[i].ring = rings + i * RING;
            c[i].last_f = frames + i * PROF_MAX_FRAMES;
        }
        s->chunk = c;
        s->chunk_used = 0;
    }
    struct slot *sl = &s->chunk[s->chunk_used++];
    /* the ring's pages faulted in here, on the sampler thread, not by the thread's first
     * walks in its signal handler */
    for (volatile char *b = (volatile char *)sl->ring; b < (volatile char *)(sl->ring + RING); b += 4096)
        *b = 0;
    ((volatile char *)(sl->ring + RING))[-1] = 0;
    return sl;
}

void prof_sig_tick(struct prof_sig *s, const struct prof_thread_view *v, size_t n, int changed,
                   struct prof_rawq *q)
{
    int64_t now = mono_ns();
    s->tick_no++;
    s->tick_now = now;
    /* JIT'd code and libraries come and go: the executable ranges are reloaded every 5 s
     * into the copy the handler does not use (a handler still reading a 5-s old copy reads
     * valid, bounded memory); loaded by lookup_stacks below, with this tick's new stacks */
    int code_due = !s->code_loaded || now - s->code_loaded >= CODE_RELOAD_NS;
    if (changed)
        memset(s->present, 0, sizeof s->present);
    for (size_t i = 0; changed && i < n; i++) {
        const struct prof_thread *t = &v[i].t;
        size_t idx = v[i].slot;
        if (!t->tid || idx >= PROF_MAX_THREADS)
            continue;
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl) {
            sl = new_slot(s);
            if (!sl)
                continue;
            atomic_store_explicit(&s->slots[idx], sl, memory_order_release);
        }
        if (idx + 1 > s->high)
            s->high = idx + 1;
        s->present[idx] = 1;
        if (sl->id != t->id || sl->tid != t->tid) {
            if (sl->id)
                retire(s, sl, q);
            arm(s, sl, idx, t, now);
        }
        if (strcmp(sl->name, t->name) != 0)
            snprintf(sl->name, sizeof sl->name, "%s", t->name);
    }
    size_t npend = 0;
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl || !sl->id)
            continue;
        if (!s->present[idx]) {
            retire(s, sl, q);
            continue;
        }
        drain_slot(s, sl, q, now);
        uint64_t sp = atomic_load(&sl->seen_sp);
        if (sp && !atomic_load(&sl->map_hi)) {
            s->pend_idx[npend] = (uint16_t)idx;
            s->pend_sp[npend++] = sp;
            atomic_store(&sl->seen_sp, 0);
        }
    }
    /* the stacks first seen by this tick's walks are looked up before any wall signal: a
     * walk made without its stack's bounds reads each frame by a system call and, when it
     * breaks, is made again */
    lookup_stacks(s, npend, code_due);
    for (size_t idx = 0; s->wall && idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (!sl || !sl->id)
            continue;
        if (sl->skip) { /* long idle: checked less often; this tick's wall time accrues to its
                           unchanged stack (counted here, added at the next check) */
            sl->skip--;
            s->st.wall_samples++;
            continue;
        }
        int64_t d = now - sl->last_wall;
        if (d <= 0)
            continue;
        /* walked by its CPU timer during this tick or the previous one */
        int fresh = sl->have_last && sl->cpu_walk_tick && s->tick_no - sl->cpu_walk_tick <= 1;
        int inflight = atomic_load(&sl->wall_inflight);
        int64_t cpu = 0;
        if (!fresh && !inflight && (cpu = thread_cpu_ns(sl->tid)) < 0)
            continue; /* gone: ThreadDestroyed follows */
        sl->last_wall = now;
        s->st.wall_samples++; /* one per thread per tick */
        s->st.wall_ns += d;
        if (inflight) { /* the previous signal is not handled yet: its walk carries d too */
            atomic_fetch_add(&sl->wall_pending, d);
            /* SIGPROF is not a real-time signal: a wall signal sent while the thread's CPU
             * timer signal was pending is merged into it (rt_tgsigqueueinfo succeeds, the
             * kernel drops the second). A cpu walk drained after the send stands for it:
             * its stack gets the wall time (a wall signal that still arrives carries 0) */
            if (sl->cpu_walk_tick > sl->sent_tick && atomic_exchange(&sl->wall_inflight, 0)) {
                sl->wall_accum += atomic_exchange(&sl->wall_pending, 0);
                s->st.wall_merged++;
                continue;
            }
            if (s->tick_no - sl->sent_tick > WALL_STUCK_TICKS) {
                /* a thread that blocks SIGPROF (or never runs): stop waiting for it, give
                 * its wall time to its last stack and signal it again later */
                if (atomic_exchange(&sl->wall_inflight, 0)) {
                    int64_t pend = atomic_exchange(&sl->wall_pending, 0);
                    if (sl->have_last)
                        sl->wall_accum += pend;
                    else
                        push(s, sl, q, sl->last_f, 0, NULL, PROF_WALK_BROKEN, 0, pend);
                    s->st.unresponsive++;
                }
            }
            continue;
        }
        if (fresh) {
            /* it runs: its CPU timer walked it within the last two intervals, and its next
             * walk is a sample of where it is, as good as a new walk, without a signal or a
             * clock read; d goes into that walk's record (if the thread blocks before, a
             * check finds it idle and the wall walk of where it waits carries d) */
            sl->wall_next += d;
            s->st.wall_from_cpu++;
            sl->idle_level = sl->skip = 0;
            continue;
        }
        /* it used half or more of the time since the last clock read (a recent one): it
         * runs, and its CPU timer will walk it within about two intervals; that walk carries
         * d. If it stops running before, the next check finds it idle and signals it: the
         * walk of where it waits then carries d. No signal for a thread that runs, also
         * before its first walk when its CPU timer will make one (a hello world's main thread
         * took a wall signal on the second tick, in the middle of start-up). */
        int64_t since = now - sl->chk_mono;
        int running = (sl->have_last || sl->has_timer) && sl->chk_mono && since > 0 && since <= WALL_DEFER_WINDOW * s->interval_ns &&
                      (cpu - sl->chk_cpu) * 2 >= since && sl->wall_next < WALL_DEFER_WINDOW * s->interval_ns;
        sl->chk_cpu = cpu;
        sl->chk_mono = now;
        if (running) {
            sl->wall_next += d;
            s->st.wall_from_cpu++;
            sl->idle_level = sl->skip = 0;
            continue;
        }
        if (sl->have_last && !sl->wall_next && sl->wall_cpu_seen >= 0 && cpu - sl->wall_cpu_seen < WALL_RAN_NS) {
            sl->wall_accum += d; /* did not run: same stack */
            s->st.wall_reused++;
            sl->idle_level = sl->idle_level * 2 + 1 < WALL_MAX_SKIP ? sl->idle_level * 2 + 1 : WALL_MAX_SKIP;
            sl->skip = sl->idle_level;
            continue;
        }
        /* it ran: the part of d it spent blocked (d minus its CPU time and one interval)
         * stays with the old stack, the rest goes to the new walk */
        int64_t ran = sl->wall_cpu_seen >= 0 ? cpu - sl->wall_cpu_seen + s->interval_ns : d;
        int64_t newpart = ran < d ? ran : d;
        if (sl->have_last)
            sl->wall_accum += d - newpart;
        else
            newpart = d;
        sl->idle_level = sl->skip = 0;
        flush_accum(s, sl, q);
        atomic_fetch_add(&sl->wall_pending, newpart + sl->wall_next);
        sl->wall_next = 0;
        atomic_store(&sl->wall_inflight, 1);
        sl->sent_tick = s->tick_no;
        sl->sent_cpu = cpu;
        if (send_to(sl->tid, (SIG_MAGIC << 16) | SIG_WALL | (uint32_t)idx) != 0)
            atomic_store(&sl->wall_inflight, 0);
        else
            s->st.wall_signals++;
    }
}

void prof_sig_flush_wall(struct prof_sig *s, struct prof_rawq *q)
{
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (sl && sl->id)
            settle_wall(s, sl, q); /* a file is written now */
    }
}

void prof_sig_stop(struct prof_sig *s)
{
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (sl && sl->id)
            disarm(sl);
    }
}

void prof_sig_pause(struct prof_sig *s, struct prof_rawq *q)
{
    for (size_t idx = 0; idx < s->high; idx++) {
        struct slot *sl = atomic_load(&s->slots[idx]);
        if (sl && sl->id)
            retire(s, sl, q); /* its id cleared: the next tick that copies the threads arms it again */
    }
}

void prof_sig_get_stats(struct prof_sig *s, struct prof_sig_stats *out)
{
    *out = s->st;
    out->ring_drops = atomic_load(&s->ring_drops);
    out->stale_signals = atomic_load(&s->stale);
    out->foreign_signals = atomic_load(&s->foreign);
    out->safe_walks = atomic_load(&s->safe_walks);
    uint64_t calls = atomic_load(&s->handler_calls), cyc = atomic_load(&s->handler_cycles);
    double ns_per_cycle = (double)(mono_ns() - s->mono0) / (double)(cycles() - s->tsc0 + 1);
    out->handler_ns_avg = calls ? (double)cyc * ns_per_cycle / (double)calls : 0.0;
}

#endif
