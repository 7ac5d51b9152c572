/* The built-in tracer's private parts, shared by its files: tracer.c (the callbacks, the
 * ReJIT thread, metadata), tracer_rewrite.c (IL rewriting), tracer_exc.c (exception names), config.c (loader.conf keys,
 * OpenTelemetry's environment, the resource) and export.c (the export thread: spans,
 * metrics, OTLP/HTTP). Not a public interface. */
#ifndef CLRMUX_TRACER_TRACER_IMPL_H
#define CLRMUX_TRACER_TRACER_IMPL_H

#ifndef COBJMACROS
#define COBJMACROS
#endif
#include "common/lazymem.h"
#include "tracer/tracer.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/hresult.h"
#include "common/lastgasp.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/unhandled.h"
#include "common/utf16.h"
#include "loader/child_base.h"
#include "tracer/activity.h"
#include "tracer/probesig.h"
#include "tracer/il.h"
#include "tracer/otlp.h"
#include "tracer/otlp_http.h"
#include "tracer/otlp_pb.h"
#include "tracer/spanfile.h"
#include "tracer/spans.h"
#include "tracer/target.h"
#include "tracer/integ.h"
#include "tracer/xspan.h"
#include "tracer/agent.h"
#include "tracer/agent_boot.h"

#define ofRead 0x0u
#define ofWrite 0x1u
#define MAX_TARGETS 256
#define MAX_METHODS CLRMUX_SPAN_MAX_METHODS
#define METHOD_SLOTS 16384 /* power of two, > MAX_METHODS */
#define MAX_EXC_NAMES 4096 /* (type, message) pairs */
#define EXC_MSG_MAX 256
#define MAX_EXC_CACHE 512
#define THREAD_NAMES 1024 /* cache slots, power of two */
#define METRICS_MS_DEFAULT 60000 /* OTEL_METRIC_EXPORT_INTERVAL's default */
#define EXPORT_BATCH 1024
#define STAGE_MAX 65536 /* spans drained ahead of the encoder (the ring holds the rest) */
#define POLL_MS 50
#define REJIT_WAIT_SECONDS 10
#define EXPORT_DELAY_MAX_MS 200 /* the export thread starts at most this long after Initialize */
#define CONV_I 0xD3
#define HOLD_AFTER_UNHANDLED_MS 5000

/* The line being built: a buffer kept across batches (it grows to the largest line once),
 * filled through a stdio cookie (glibc's open_memstream costs ~10 us per span here). */
struct linebuf {
    char *p;
    size_t len, cap;
    int oom;
};

struct traced_method {
    ModuleID module;
    mdMethodDef token;
    int target;
    _Atomic int joins; /* rewritten with the Activity join */
    _Atomic int agent_pending; /* rewritten before the agent was ready (no JoinRoot, no async span) */
    char name[CLRMUX_TARGET_NAME_MAX + 130];
};

struct thread_name {
    uint32_t tid;
    int64_t read_ns; /* when /proc was last read */
    char name[64];
};

struct method_slot {
    _Atomic uint32_t idx1; /* index + 1; 0 = empty */
    ModuleID module;
    mdMethodDef token;
};

struct rejit_job {
    struct rejit_job *next;
    ULONG n;
    ModuleID *modules;
    mdMethodDef *tokens;
    _Atomic int done; /* set under rj_lock; the waiting thread also polls it (tracer_request_rejit) */
    HRESULT hr;
    /* or, when hook_base is set, no ReJIT: the unhandled-exception hook's token looked up in
     * CoreLib (hook_module, mapped at hook_base) ahead of the callbacks (common/unhandled.h);
     * nobody waits for it: the ReJIT thread frees it */
    ModuleID hook_module;
    const void *hook_base;
    int revert; /* RequestRevert instead of RequestReJIT (tracer_request_revert) */
    int inliners; /* RequestReJITWithInliners (tracer_rejit_inliners was set) */
#ifdef __linux__
    int moved;          /* the ReJIT thread's affinity narrowed for the job (the lookup: the CPUs
                           other than the app thread's; a RequestReJIT: the waiting thread's CPU) */
    cpu_set_t affinity; /* restored to this after it */
    int ran_cpu;        /* the CPU the RequestReJIT was made on (for the debug line) */
#endif
};

struct tracer {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    char child[CLRMUX_NAME_MAX];
    ICorProfilerInfo5 *info;
    /* the same Info's ICorProfilerInfo10 (NULL before .NET Core 3.0): RequestReJITWithInliners */
    ICorProfilerInfo10 *info10;
    struct clrmux_tracer_host host; /* the loader's services (tracer.h) */
    int attaching; /* loaded by InitializeForAttach */

    struct clrmux_target *targets;
    int ntargets;
    _Atomic int *target_hits;
    int output_set;      /* `output =` given explicitly */
    int service_set;
    size_t buffer_spans;
    long flush_ms;
    double sample_ratio;
    int join_activity;   /* join_activity = true (default) */
    int agent;           /* agent = true (default): the managed agent (tracer/agent.h) may load */
    int sanitize_queries; /* sanitize_queries = true (default): literals of db.query.text replaced by ? */
    char integ_file[PATH_MAX]; /* integrations = FILE: the user's definitions (integ.h) */
    struct clrmux_integ *integs; /* the shipped definitions, then the user's */
    int ninteg;
    uint8_t *ibuf;              /* an integration's span record being built (export thread) */
    _Atomic int agent_ready; /* the agent registered its entry points: Task methods get async spans */
    int agent_boot;      /* ProcessStartupHooks is registered for the agent's rewrite (its index + 1) */
    struct clrmux_agent_boot boot; /* its token, the String methods, the path (agent_boot.h) */
    int suppress_gc;     /* suppress_gc_transition = true (default; off before .NET 6): tracer/probesig.h */
    char protocol[16];   /* http/protobuf (default) | http/json, for the endpoints */
    const struct clrmux_otlp_pb_api *pb; /* libclrmux_otlp.so when http/protobuf */
    long timeout_ms;
    long metrics_ms;
    int64_t start_ns;

    /* traced methods: registered under reg_lock, read lock-free */
    pthread_mutex_t reg_lock;
    struct traced_method *methods;
    _Atomic uint32_t nmethods;
    struct method_slot *slots;
    /* a Bloom filter of the registered (module, token) pairs, one bit each, checked before the
     * slots: a lookup of a method that is not traced (every JITInlining and cached-code search
     * of start-up) stays in these 512 bytes instead of touching a random page of the 256 KB
     * lazily mapped slot table (measured: ~1.5 ms of CPU in a hello world's start-up) */
    _Atomic uint64_t method_filter[64];

    /* the ReJIT thread */
    pthread_mutex_t rj_lock;
    pthread_cond_t rj_cond;
    struct rejit_job *rj_head, *rj_tail;
    int rj_started, rj_stop;
    int rj_starting; /* the ReJIT thread starts the export thread and the last gasp (start_background) */
    int rj_barrier;  /* the ReJIT thread makes clrmux's membarrier registration (loader/detach.h) */
    int rj_gasp_entry; /* the last gasp's table entry made by Initialize (the ReJIT thread starts it) */
    pthread_t rj_thread;
#ifdef __linux__
    int rj_affinity_ok;
    cpu_set_t rj_affinity; /* the ReJIT thread's own (Initialize's thread's, which it inherits) */
#endif

    /* IL rewriting (metadata emission is serialised) */
    pthread_mutex_t rw_lock;
    _Atomic uint32_t rewritten, skipped;
    _Atomic uint64_t rewrite_ns;

    /* exception type names */
    pthread_mutex_t exc_lock;
    uint32_t nexc_cache;
    char (*exc_names)[160];
    char (*exc_msgs)[EXC_MSG_MAX];
    _Atomic uint32_t nexc;
    ClassID exception_cls;      /* System.Exception, once found */
    ULONG message_offset;       /* of its _message field; 0 = unknown */
    ULONG str_len_off, str_buf_off;
    int message_tried;

    /* Activity join: the class Activity is initialized (activity.h), in ds_module
     * (DiagnosticSource, once loaded); join_rejit: methods rewritten before without the
     * join are to be rewritten again (by the export thread, tracer_activity_poll) */
    _Atomic int ds_loaded;
    struct clrmux_activity_class activity; /* written before ds_module is published */
    _Atomic ModuleID ds_module;
    _Atomic ClassID activity_cls; /* from the first JIT callback for one of Activity's methods */
    _Atomic int join_rejit;

    /* export */
    /* what the export thread does on each pass besides exporting (tracer.c gives
     * tracer_activity_poll at creation: the export thread calls up into it only through this) */
    void (*export_pass)(struct tracer *t, int rejit);
    pthread_mutex_t ex_lock;
    pthread_cond_t ex_cond;
    int ex_stop, ex_started;
    pthread_t ex_thread;
    _Atomic long ex_tid; /* the export thread's OS id (0 until it runs): its schedstat */
    struct clrmux_spanfile *out; /* the output file (NULL: none) */
    uint64_t max_file_bytes;     /* `max_file_mb` (0: no cap) */
    unsigned max_files;          /* `max_files` */
    uint64_t rotation_errors, render_errors, deleted_logged;
    struct clrmux_curl *curl; /* OTLP/HTTP (endpoint set and libcurl loaded) */
    struct clrmux_http *http;
    uint64_t queued, requests, request_errors;
    uint8_t *xbuf;             /* Activity span records drained (export.c), made at the first */
    uint64_t xwritten, xbad;   /* Activity spans written, malformed records skipped */
    _Atomic int xmalformed_logged;
    struct clrmux_span *stage; /* drained spans waiting to be written: [shead, nstage) */
    size_t stage_cap, shead, nstage;
    struct thread_name *tnames;
    struct clrmux_spanfile *mout;
    int mout_pending; /* metrics_output still to be opened (tracer_open_metrics, under wr_lock) */
    struct clrmux_curl *mcurl;
    struct clrmux_http *mhttp;
    uint64_t metric_lines;
    uint64_t written, lines, dropped_logged;
    uint64_t encoded, encode_cpu_ns; /* spans the export thread encoded, and its CPU time doing it */
    uint64_t ex_run_ns, ex_wait_ns;  /* the export thread's time on a CPU and waiting for one,
                                        as Shutdown reports it (tracer_export_thread_times) */
    /* the export thread's own account, updated by it after each pass and as it ends: its CPU
     * clock (CLOCK_THREAD_CPUTIME_ID) and its run-queue wait (its schedstat, read through a
     * descriptor it keeps); ex_ended once the figures are final */
    _Atomic uint64_t ex_own_run_ns, ex_own_wait_ns;
    _Atomic int ex_ended;
    int64_t batch_now_ns;            /* the wall clock at the current batch (thread names' cache) */
    struct clrmux_unhandled_hook unhandled; /* AppContext.OnUnhandledException: flush first */
    struct linebuf line;                    /* the OTLP JSON line being written */
    /* the writer: the export thread, Shutdown, or the last gasp (common/lastgasp.h), which
     * sets `final`: nothing is written after it */
    pthread_mutex_t wr_lock;
    int final;
    _Atomic int64_t hold_until_ns; /* after an unhandled exception: no write until then */
    _Atomic int gasp_waiting;      /* the last gasp or Shutdown waits for wr_lock: the export
                                      thread lets go */
    int write_failed;
    _Atomic int shut_down;
    /* The large members last, those written at start-up first: struct tracer is mapped zero
     * pages (clrmux_lazy_calloc), each page faulted in at its first write (17-90 us on a VM);
     * with the small members packed ahead of them, start-up writes ~5 of its 11 pages, not 8. */
    char service[256];
    char output[PATH_MAX];
    char conf[PATH_MAX];
    char metrics_output[PATH_MAX]; /* "" = no metrics file */
    char agent_path[PATH_MAX];     /* Clrmux.Agent.dll beside libclrmux.so, when trusted; "" = no agent */
    char instrument[128];          /* built-in instrumentations on (agent.h), comma-separated */
    char activity_sources[1024];   /* other ActivitySources recorded: patterns, comma-separated */
    struct clrmux_resource res;
    /* written only when set, or later */
    char endpoint[2048]; /* OTLP/HTTP; "" = none */
    char metrics_endpoint[2048];
    char headers[4096];  /* OTEL_EXPORTER_OTLP_HEADERS */
    struct { ClassID cls; uint32_t id; } exc_cache[MAX_EXC_CACHE]; /* class -> an id of its type name */
    /* targets removed at run time (tracer_ctl.h): they match no module and their methods are
     * not rewritten again for the Activity join; written only by tracer_ctl.c */
    _Atomic unsigned char target_off[MAX_TARGETS];
};

/* tracer.c: the process's tracer (NULL until one is created); tracer_ctl.c finds it here */
extern _Atomic(struct tracer *) the_tracer;

/* export.c: names for the exporter (struct clrmux_otlp_names callbacks; ctx: the tracer; also
 * the USDT probes' method names) */
const char *tracer_method_name(void *ctx, uint32_t id);
const char *tracer_exc_name(void *ctx, uint32_t id);
/* tracer_meta.c: UTF-16 to UTF-8, and type names from metadata */
void tracer_to_utf8(const WCHAR *s, size_t len, char *out, size_t n);
/* The full name of a TypeDef ("Ns.Outer+Inner") or TypeRef into out[outsz] (depth: 0 from
 * outside; bounds the nesting). Returns 0, or -1 when metadata cannot name it. */
int tracer_type_full_name(IMetaDataImport2 *imp, mdToken tok, char *out, size_t outsz, int depth);

/* tracer.c: once DiagnosticSource is loaded and until the class Activity is initialized,
 * checks whether it is (activity.h) and then lets rewrites join Activity.Current; with
 * `rejit`, also rewrites again the methods rewritten before without the join (the export
 * thread: it may wait for the ReJIT thread). Cheap when there is nothing to do. */
void tracer_activity_poll(struct tracer *t, int rejit);

/* tracer_rewrite.c: rewrites method idx (module mod, token tok) through fc. Returns 0, or -1
 * with a reason in why[whylen]. */
int tracer_rewrite(struct tracer *t, ModuleID mod, mdMethodDef tok, uint32_t idx, ICorProfilerFunctionControl *fc,
                   char *why, size_t whylen);

/* tracer_exc.c: the id of the (type name, message) pair of a thrown exception
 * (1..MAX_EXC_NAMES), or 0 when it cannot be named or the table is full. */
uint32_t tracer_exception_name_id(struct tracer *t, ObjectID obj, ClassID cls);
/* The id of (type, msg) (UTF-8; msg may be NULL), interned as above: an exception the agent
 * saw (a faulted task's). */
uint32_t tracer_exc_intern(struct tracer *t, const char *type, const char *msg);

/* config.c: the section's keys over OpenTelemetry's environment; the resource. Returns 0, or
 * -1 (out of memory, a path too long: logged). */
int tracer_configure(struct tracer *t, const struct clrmux_child_conf *cc, const char *cfg_path, const char *cfg_dir);

/* tracer_agent.c: the managed agent may load (.NET 8+, its file trusted): sets agent_path and
 * the agent's host (tracer/agent.h; `registered` is called when it registers its entry points).
 * Returns 0, or -1 (logged: no agent). */
int tracer_agent_setup(struct tracer *t, void (*registered)(void));

/* rejit.c */
void *tracer_rejit_thread(void *arg); /* pthread body; arg: the tracer */
/* Starts the ReJIT thread in Initialize (the last gasp's entry made, the membarrier registration adopted);
 * 0, or -1 when it could not be created. */
int tracer_start_rejit_thread(struct tracer *t);
/* queues the hook's token lookup in CoreLib (`mod`, mapped at `base`) for the ReJIT thread;
 * does not wait (a failed allocation leaves the lookup to the first JIT callback) */
void tracer_queue_hook_lookup(struct tracer *t, ModuleID mod, const void *base);
/* queues RequestReJIT of `n` methods (`tokens`) of module `mod` (named `assembly` in the log)
 * and waits until the ReJIT thread has made it, REJIT_WAIT_SECONDS at most; errors are logged */
void tracer_request_rejit(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly);
/* set on the control channel's thread while it runs `trace add` (tracer_ctl.c): the
 * tracer_request_rejit calls made there ask for RequestReJITWithInliners(
 * COR_PRF_REJIT_BLOCK_INLINING) where the runtime has ICorProfilerInfo10 (else RequestReJIT):
 * the callers that had inlined the methods are re-JIT-compiled too, and the methods are not
 * inlined again (a target added at run time may be hot and inlined). Not at start-up: a method
 * not yet compiled is inlined nowhere, and a rewrite with inliners is not held back for another
 * child's JIT-time rewrite (loader/compose.h) */
extern __thread int tracer_rejit_inliners;
/* the same with RequestRevert (the tracer's rewrite of those methods goes; tracer_ctl.c);
 * returns the HRESULT, or E_FAIL when it was not made within REJIT_WAIT_SECONDS */
HRESULT tracer_request_revert(struct tracer *t, ModuleID mod, mdMethodDef *tokens, ULONG n, const char *assembly);
/* tracer_end.c: the last gasp (common/lastgasp.h's clrmux_lastgasp_fn), registered by the ReJIT
 * thread; and the closing summary: at Shutdown (cause NULL: INFO lines) or at the last gasp
 * (a WARN line with `flushed`, what that flush wrote, and what could not be saved) */
void tracer_last_gasp(void *ctx, const char *cause, int64_t deadline_ns, int final);
void tracer_log_summary(struct tracer *t, const char *cause, uint64_t flushed);

/* export.c */
const struct clrmux_otlp_pb_api *tracer_load_pb(void); /* libclrmux_otlp.so, or NULL */
void *tracer_export_thread(void *arg);                  /* pthread body; arg: the tracer */
/* drain the span buffer, write batches (under wr_lock); 1 when it stopped at its budget (two
 * stages' worth of spans) with a batch or more left to write (with flush: any span), else 0 */
int tracer_export_pending(struct tracer *t, int flush);
/* tracer_export_pending(t, 1) until every finished span is written (at most 64 calls, and
 * not past deadline_mono_ns (clrmux_mono_ns) unless it is 0); under wr_lock */
void tracer_export_all(struct tracer *t, int64_t deadline_mono_ns);
void tracer_export_metrics(struct tracer *t);           /* one metrics export */
void tracer_open_metrics(struct tracer *t);             /* opens metrics_output once, if still to be (under wr_lock) */
void tracer_finish_http(struct tracer *t);              /* Shutdown: send what is queued, bounded */
/* thread tid's run and run-queue wait times in ns (Linux schedstat; 0 when unknown) */
void tracer_sched_times(long tid, uint64_t *run, uint64_t *wait);
/* The export thread's time on a CPU and waiting for one so far, in ns, whatever state it is in
 * (running, waiting, ended: its own account, or its live schedstat when that is newer); both
 * 0 when it never ran. */
void tracer_export_thread_times(struct tracer *t, uint64_t *run, uint64_t *wait);

#endif
