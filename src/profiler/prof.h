/* The built-in continuous profiler (`builtin = profiler`): internal interfaces.
 *
 *   callbacks (any thread)      sampler thread (ours, not a managed thread)
 *   ThreadCreated/... -------> thread registry (prof_threads)
 *   ExceptionThrown  --\
 *   EventPipeEvent   ---+----> raw queue (prof_rawq: FunctionIDs / IPs, no names) --\
 *   tick: SuspendRuntime, DoStackSnapshot per thread, ResumeRuntime ----------------+
 *                                                                                    v
 *                drain: names (prof_names cache) -> pprof builder -> file per period
 *
 * Only the sampler thread resolves names and touches the pprof builder; the callback
 * paths and the suspended phase copy raw ids into fixed buffers (drops are counted). */
#ifndef CLRMUX_PROFILER_PROF_H
#define CLRMUX_PROFILER_PROF_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clrmux/corprof.h"
#include "loader/config.h"
#include "common/spanctx.h"
#include "profiler/companion.h"

/* ---- configuration ([child NAME] section with builtin = profiler) ------------------- */

struct prof_config {
    char output_dir[PATH_MAX]; /* absolute */
    int period_s;              /* seconds per file [60] */
    int interval_ms;           /* sampling interval [10] */
    int pause_budget_pct;      /* stretch the interval so that stop-the-world pauses stay
                                  under this share of wall time; 0 = never [1] */
    int cpu, wall, exceptions, allocations, contention; /* [true] each */
    int eventpipe_delay_ms; /* ms after Initialize before the allocation/contention EventPipe session
                               starts [1000]; 0: in Initialize, from the first instruction */
    int sampler;               /* PROF_SAMPLER_SIGNAL (default where supported) or _SUSPEND */
    char endpoint[2048];       /* Pyroscope server URL; "" = no push */
    char app_name[256];        /* Pyroscope application name [process name] */
    char headers[2048];        /* extra request headers, key=value,... (X-Scope-OrgID=...) */
};
enum { PROF_SAMPLER_SIGNAL = 0, PROF_SAMPLER_SUSPEND = 1 };

/* ---- pushing profiles to Pyroscope (push.c) -------------------------------------------- */

struct prof_push;
/* A sender to <endpoint>/ingest (libcurl dlopened). NULL with the reason in err. */
struct prof_push *prof_push_open(const char *endpoint, const char *app, const char *headers, char *err, size_t errlen);
/* Queues one profile (gzip'd pprof, malloc'd, taken) covering [from_ns, until_ns) Unix time. */
void prof_push_send(struct prof_push *p, uint8_t *pprof_gz, size_t len, int64_t from_ns, int64_t until_ns);
/* Sends what is due for at most budget_ms; at the end, everything within within_ms. */
void prof_push_pump(struct prof_push *p, long budget_ms);
void prof_push_finish(struct prof_push *p, long within_ms);

/* Fills *pc from the section's keys (defaults for absent keys). A bad value is one log line
 * (with the key's line) and the default is kept; unknown keys are one warning each.
 * Relative output_dir is resolved against config_dir. Returns 0. */
int prof_config_parse(struct prof_config *pc, const struct clrmux_child_conf *cc, const char *config_dir);

/* ---- thread registry ------------------------------------------------------------------ */

#define PROF_MAX_THREADS 4096
#define PROF_THREAD_NAME 64

struct prof_thread {
    ThreadID id; /* 0: free slot */
    uint32_t tid; /* OS thread id (0 until known) */
    char name[PROF_THREAD_NAME];
    int64_t last_cpu_ns;  /* sampler's state: thread CPU clock at its last sample */
    int64_t last_wall_ns; /* monotonic time of its last sample (0: none yet) */
};

struct prof_threads {
    pthread_mutex_t lock;
    size_t high; /* slots [0, high) may be in use */
    uint64_t dropped; /* ThreadCreated with no free slot */
    uint64_t gen;     /* bumped when a thread is added or removed, or its OS id or name changes */
    struct prof_thread t[PROF_MAX_THREADS];
};

void prof_threads_init(struct prof_threads *r);
void prof_threads_add(struct prof_threads *r, ThreadID id, uint32_t tid);
void prof_threads_remove(struct prof_threads *r, ThreadID id);
void prof_threads_set_tid(struct prof_threads *r, ThreadID id, uint32_t tid);
void prof_threads_set_name(struct prof_threads *r, ThreadID id, const char *utf8);
/* Copies the OS id and name of thread `id`. Returns 0, or -1 when it is not registered. */
int prof_threads_lookup(struct prof_threads *r, ThreadID id, uint32_t *tid, char *name, size_t namesz);
/* Copies every registered thread (with its slot index in `slot`) into out[cap]. */
struct prof_thread_view {
    size_t slot;
    struct prof_thread t;
};
size_t prof_threads_snapshot(struct prof_threads *r, struct prof_thread_view *out, size_t cap);
/* The same, only when the registry changed (a thread added or removed, an OS id or a name
 * changed) since the copy made when the generation was *gen: returns 1 with out[*n] and *gen
 * updated, or 0 (out, *n and *gen untouched: the previous copy still holds). Start with
 * *gen = UINT64_MAX. */
int prof_threads_snapshot_changed(struct prof_threads *r, uint64_t *gen, struct prof_thread_view *out,
                                  size_t cap, size_t *n);
/* Stores the sampler's state for slot `slot` if it still holds thread `id`. */
void prof_threads_set_last(struct prof_threads *r, size_t slot, ThreadID id, int64_t cpu_ns, int64_t wall_ns);
size_t prof_threads_count(struct prof_threads *r);

/* ---- raw samples ---------------------------------------------------------------------- */

/* A raw frame: a FunctionID, or a tagged instruction pointer. */
#define PROF_FRAME_TAG_MASK (3ull << 62)
#define PROF_FRAME_FUNCTION (0ull << 62)  /* FunctionID from DoStackSnapshot */
#define PROF_FRAME_NATIVE (1ull << 62)    /* IP outside managed code: one frame per module */
#define PROF_FRAME_MANAGED_IP (2ull << 62) /* IP from an EventPipe stack: GetFunctionFromIP */
#define PROF_FRAME_OSR_CALLER (3ull << 62) /* signal walk: a return address found under an
                                              OSR-shaped frame record (prof_fp_walk), kept or
                                              dropped by prof_osr_fold */
#define PROF_MAX_FRAMES 256

enum prof_kind { PROF_K_SAMPLE = 0, PROF_K_EXCEPTION, PROF_K_ALLOC, PROF_K_LOCK };

struct prof_raw {
    uint8_t kind;      /* enum prof_kind */
    uint8_t truncated; /* the walk stopped at PROF_MAX_FRAMES */
    uint16_t nframes;
    uint32_t tid;   /* OS thread id (0: unknown) */
    uint32_t first; /* index of the first frame in the buffer's frame array */
    int64_t v0, v1; /* sample: cpu ns, wall ns; exception: count; alloc: count, bytes;
                       lock: count, ns */
    struct clrmux_span_ids span; /* the tracer's open span on the thread (span_id 0: none):
                                    the `span id`, `local root span id`, `trace id` labels */
    ClassID class_id; /* exception type, resolved when drained (0: none) */
    char type[128];   /* allocated type name (UTF-8), "" for none */
    char tname[PROF_THREAD_NAME];
};

struct prof_rawbuf {
    struct prof_raw *recs;
    uint64_t *frames;
    uint32_t nrecs, cap_recs;
    uint32_t nframes, cap_frames;
};

/* Two buffers: producers fill one while the sampler drains the other. */
struct prof_rawq {
    pthread_mutex_t lock;
    struct prof_rawbuf buf[2];
    int cur;
    int closed;       /* after the last file: pushes are ignored */
    uint64_t dropped; /* pushes refused because the buffer was full */
};

/* Allocates both buffers. Returns 0 or -ENOMEM. */
int prof_rawq_init(struct prof_rawq *q, uint32_t cap_recs, uint32_t cap_frames);
void prof_rawq_free(struct prof_rawq *q);
/* Copies r (its first field is ignored) and frames[n] into the current buffer. Returns 0,
 * or -ENOSPC (counted in dropped) when the buffer is full, or -EPIPE when closed. */
int prof_rawq_push(struct prof_rawq *q, const struct prof_raw *r, const uint64_t *frames, uint16_t n);
/* Makes the other buffer current and returns the filled one; the caller (one drainer
 * only) reads it and empties it with prof_rawbuf_clear before the next swap. */
struct prof_rawbuf *prof_rawq_swap(struct prof_rawq *q);
static inline void prof_rawbuf_clear(struct prof_rawbuf *b) { b->nrecs = b->nframes = 0; }
/* Returns the drop count and zeroes it. */
uint64_t prof_rawq_take_dropped(struct prof_rawq *q);
void prof_rawq_close(struct prof_rawq *q);

/* ---- EventPipe payloads (Microsoft-Windows-DotNETRuntime) ----------------------------- */

#define PROF_EVENT_ALLOCATION_TICK 10
#define PROF_EVENT_CONTENTION_STOP 91
#define PROF_KEYWORD_GC 0x1ull
#define PROF_KEYWORD_CONTENTION 0x4000ull

struct prof_alloc_tick {
    uint64_t bytes;   /* AllocationAmount64 (v2+), else AllocationAmount */
    uint32_t kind;    /* 0 small, 1 large, 2 pinned */
    uint64_t type_id; /* ClassID (v2+), else 0 */
    char type_name[128]; /* UTF-8 (v2+), else "" */
};
/* Parses GCAllocationTick_V0..V4 (packed, little-endian, pointers of pointer_size bytes).
 * Returns 0, or -1 when the payload is too short for its version. */
int prof_parse_alloc_tick(const uint8_t *data, size_t len, unsigned version, size_t pointer_size,
                          struct prof_alloc_tick *out);
/* Parses ContentionStop (v1+: ContentionFlags u8, ClrInstanceID u16, DurationNs double).
 * Stores the duration (0 for v0), returns 0, or -1 when too short. */
int prof_parse_contention_stop(const uint8_t *data, size_t len, unsigned version, double *duration_ns);
/* EventPipeEventDelivered's numStackFrames: the runtime passes the stack's size in bytes
 * (ep_stack_contents_get_size), not a frame count. Returns a number of frames that is safe
 * to read either way (never more than the bytes passed allow), at most `max`. */
size_t prof_event_stack_frames(unsigned long num_stack_frames, size_t max);

/* ---- names (sampler thread only) ------------------------------------------------------ */

struct prof_names;
/* info: the child's ICorProfilerInfo proxy (version >= 3). */
struct prof_names *prof_names_create(ICorProfilerInfo3 *info, size_t max_entries, size_t arena_bytes);
void prof_names_destroy(struct prof_names *n);
/* Call before resolving one sample's frames: clears the cache when it is nearly full, so
 * that the pointers returned for one sample stay valid until the next call. */
void prof_names_begin(struct prof_names *n);
/* Names: never NULL, valid until the next prof_names_begin. */
const char *prof_names_function(struct prof_names *n, FunctionID f);
const char *prof_names_class(struct prof_names *n, ClassID c);
const char *prof_names_native(struct prof_names *n, uintptr_t ip);
/* GetFunctionFromIP, cached. 0 when ip is not managed code. */
FunctionID prof_names_ip_function(struct prof_names *n, uintptr_t ip);
uint64_t prof_names_resets(const struct prof_names *n);
/* How many modules' names were read from their metadata tables (common/mdtables.h), and how
 * many through the runtime's metadata importer (GetModuleMetaData), so far. */
void prof_names_sources(const struct prof_names *n, uint64_t *tables, uint64_t *importer);

/* ---- the signal sampler (Linux x64; sigsampler.c, stackwalk.c) ---------------------- */

/* The registers a walk starts from: the interrupted instruction, stack and frame pointers. */
struct prof_walk_regs {
    uint64_t ip, sp, fp;
};
enum { PROF_WALK_OK = 0, PROF_WALK_DEPTH = 1, PROF_WALK_BROKEN = 2 };
/* Executable ranges of the process (/proc/self/maps), sorted, for the walk's stack scan. */
#define PROF_CODE_RANGES 4096
#define PROF_SCAN_BYTES 2048 /* how far up the stack a scan looks for the next frame record */
struct prof_code_ranges {
    uint32_t n;
    struct {
        uint64_t lo, hi;
    } r[PROF_CODE_RANGES];
};
/* Loads the executable mappings of /proc/self/maps into *c (not async-signal-safe). 0 or -1. */
int prof_code_ranges_load(struct prof_code_ranges *c);
/* 1 when a is inside one of c's ranges (binary search; async-signal-safe). */
int prof_is_code(const struct prof_code_ranges *c, uint64_t a);
/* Walks the frame-pointer chain from r into out[max] (leaf first: r->ip, then each return
 * address - 1). Async-signal-safe, no allocation. With stack_hi != 0 the caller guarantees
 * that [r->sp, stack_hi) is mapped (the thread's stack) and every read stays inside it;
 * with stack_hi == 0 every read goes through prof_safe_read16. Where RBP is not a frame
 * pointer (0 or out of bounds: a leaf in libc's system call wrappers), and stack_hi and
 * code are given, the walk scans up to PROF_SCAN_BYTES of the stack for the next frame
 * record whose return addresses are in code (at most twice per walk). Returns the number
 * of frames; *status: PROF_WALK_OK (the chain ended with a zero frame pointer or return
 * address), PROF_WALK_DEPTH (max reached) or PROF_WALK_BROKEN (a frame pointer out of
 * bounds, misaligned, not increasing, or unreadable, and no frame record found above it:
 * what was walked is kept). */
size_t prof_fp_walk(const struct prof_walk_regs *r, uint64_t stack_hi, const struct prof_code_ranges *code,
                    uint64_t *out, size_t max, int *status);
/* OSR frames (on-stack replacement, .NET 7+; measured on .NET 8, 9, 10, x64): the runtime
 * enters the optimized OSR version of a Tier0 method from the Tier0 frame's patchpoint helper
 * call. The OSR frame record is [the Tier0 frame's saved RBP (the caller's frame pointer),
 * the return address of Tier0's call to the helper], so the chain skips the Tier0 frame's own
 * record [caller's frame pointer, return address into the caller], which lies between the
 * OSR record and the caller's: the caller is lost and the method appears twice. So for each
 * record [N, R] the walk (only with known stack bounds: direct reads) looks in
 * (record + 16, N) for a word equal to N followed by a nonzero word (at most
 * PROF_OSR_SCAN_BYTES above each record, PROF_OSR_SCAN_WALK_BYTES per walk) and, when found,
 * adds that word after R - 1 as (word - 1) | PROF_FRAME_OSR_CALLER. Whether the record was an
 * OSR frame, and the word a return address, is decided off the signal path by prof_osr_fold
 * (the code ranges the handler sees are up to 5 s old: fresh JIT code is not in them). Other
 * frames never carry a tag. */
#define PROF_OSR_SCAN_BYTES 1024
#define PROF_OSR_SCAN_WALK_BYTES 8192
/* Folds the OSR caller candidates of one signal walk (off the signal path), in place: f[n]
 * as pushed (tags as above; untagged or PROF_FRAME_MANAGED_IP frames are IPs), fid(ctx, ip)
 * the managed function of an IP (0: not managed), native_code(ctx, ip) 1 when ip is in a
 * loaded module's executable code. A candidate at i is an OSR frame's caller when the two
 * frames before it (as folded so far) are the same managed function (the OSR code, or a
 * return address into it, and the Tier0 code's helper call) and it is managed or native code:
 * the Tier0 frame (i - 1) is replaced by the candidate, tagged PROF_FRAME_MANAGED_IP. Any
 * other candidate is dropped (nothing is invented). Returns the new count (<= n). */
size_t prof_osr_fold(uint64_t *f, size_t n, uint64_t (*fid)(void *ctx, uint64_t ip),
                     int (*native_code)(void *ctx, uint64_t ip), void *ctx);
/* 1 when ip is inside an executable segment (PT_LOAD, PF_X) of a loaded module
 * (dl_iterate_phdr: not async-signal-safe), else 0. */
int prof_native_code(uint64_t ip);
/* Reads 16 bytes at addr without faulting (process_vm_readv on this process). 0 or -1. */
int prof_safe_read16(uint64_t addr, uint64_t out[2]);
/* The read-write mapping of /proc/self/maps that contains addr: 0 and [*lo, *hi), or -1.
 * Not for a signal handler (reads /proc/self/maps). */
int prof_stack_mapping(uint64_t addr, uint64_t *lo, uint64_t *hi);
/* The same for addr[n] in one pass over the file: lo[i], hi[i] (both 0 when not found in a
 * read-write mapping). Returns the number found. */
size_t prof_stack_mappings(const uint64_t *addr, size_t n, uint64_t *lo, uint64_t *hi);
/* Both in one pass over /proc/self/maps: *c loaded as prof_code_ranges_load does (c NULL:
 * not), the stack mappings of addr[n] as prof_stack_mappings finds them, and (main_stack not
 * NULL) the main thread's stack mapping, "[stack]", into main_stack[0..1] (0, 0: none).
 * Returns the number of addresses found, or (size_t)-1 when the file cannot be opened (c
 * untouched). */
size_t prof_maps_scan(struct prof_code_ranges *c, const uint64_t *addr, size_t n, uint64_t *lo, uint64_t *hi,
                      uint64_t main_stack[2]);

struct prof_sig;
struct prof_sig_stats {
    uint64_t cpu_samples, wall_samples, wall_signals, wall_reused, wall_from_cpu;
    uint64_t truncated, depth_cut, ring_drops, stale_signals, foreign_signals, timer_failures;
    uint64_t safe_walks; /* walks before the thread's stack mapping was known */
    uint64_t unresponsive; /* wall signals given up after 100 ticks (SIGPROF blocked) */
    uint64_t wall_merged;  /* wall signals merged into a pending CPU timer SIGPROF (a cpu walk
                              drained after the send stood for them) */
    int64_t cpu_ns;      /* CPU time carried by the cpu samples */
    int64_t wall_ns;     /* thread time covered by the wall samples */
    uint64_t max_thread_cpu_samples; /* the busiest thread's cpu samples */
    uint64_t threads;    /* threads armed so far */
    double handler_ns_avg; /* time in our handler per walk (TSC), delivery not included */
};
/* The tracer's span context of the calling thread (async-signal-safe), or NULL. */
typedef struct clrmux_span_context *(*prof_span_peek_fn)(void);
/* Installs the SIGPROF handler (chaining to a previous one) and checks that this process
 * can use it: a signal to the calling thread reaches the handler and a per-thread CPU timer
 * can be created. interval_ms: the CPU timers' period and the wall rate. peek (may be NULL:
 * no span labels): called in the handler to label each walk with the thread's open span.
 * Returns NULL with the reason in why[] when the signal sampler cannot run here (the caller
 * falls back to the suspend sampler). One per process. */
struct prof_sig *prof_sig_start(int interval_ms, int cpu, int wall, prof_span_peek_fn peek, char *why,
                                size_t whysz);
/* One sampler tick (sampler thread only): arms a CPU timer for each new thread of v[n]
 * (views of the registry: slot = index), disarms the threads gone, moves the walked stacks
 * into q as PROF_K_SAMPLE records (v0 cpu ns or v1 wall ns; frames PROF_FRAME_MANAGED_IP),
 * and for wall time signals each thread that ran since its last wall sample but is not
 * running now (a thread that did not run keeps its last stack: its wall time is added to it
 * without a signal; a running thread's wall time goes to its CPU timer's walks).
 * changed: 0 when v[n] is the same as in the previous call (the thread list is then not
 * looked at), else 1. */
void prof_sig_tick(struct prof_sig *s, const struct prof_thread_view *v, size_t n, int changed,
                   struct prof_rawq *q);
/* Pushes the wall time accumulated on unchanged stacks into q (before a file is written). */
void prof_sig_flush_wall(struct prof_sig *s, struct prof_rawq *q);
/* 0 while our handler is still installed for SIGPROF; -1 (reason in why[]) when someone
 * replaced it: the caller must stop the signal sampler. */
int prof_sig_check(struct prof_sig *s, char *why, size_t whysz);
/* Disarms every timer and waits for handlers in progress; the handler stays installed and
 * ignores late signals. s stays valid for prof_sig_get_stats. */
void prof_sig_stop(struct prof_sig *s);
/* `profile stop` (sampler thread only): disarms every thread's timer and settles its wall
 * time into q, forgetting the threads; the next prof_sig_tick with changed = 1 arms the live
 * ones again (`profile start`). */
void prof_sig_pause(struct prof_sig *s, struct prof_rawq *q);
void prof_sig_get_stats(struct prof_sig *s, struct prof_sig_stats *out);

/* ---- output file names ---------------------------------------------------------------- */

/* "<dir>/<process>-<pid>-<YYYYMMDDTHHMMSSZ>.pb.gz" (start in UTC). Returns 0, or -1 when it
 * does not fit. Characters other than [A-Za-z0-9._-] in `process` become '_'. */
int prof_output_path(char *out, size_t outsz, const char *dir, const char *process, long pid,
                     int64_t start_unix_ns);

/* ---- the profiler --------------------------------------------------------------------- */

struct prof_stats {
    uint64_t ticks, suspend_failures, snapshots, snapshot_failures;
    uint64_t pause_ns_total, pause_ns_max;
    uint64_t exceptions, allocations, contentions, events_other;
    uint64_t files, file_failures;
};

struct profiler;
/* In hostlog.c (companion build only). */
void prof_hostlog_set(const struct clrmux_profiler_host *host);
/* The host's last gasp (common/lastgasp.h): through `host` in the companion, directly in
 * the unit tests' build. */
int prof_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx);
int prof_lastgasp_register_deferred(clrmux_lastgasp_fn fn, void *ctx);
int prof_lastgasp_start(void);
void prof_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx);

#endif
