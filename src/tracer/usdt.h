/* USDT probes of libclrmux.so for perf, bpftrace and SystemTap (<sys/sdt.h>, Debian's
 * systemtap-sdt-dev), fired by the span probes (spans.c) for every call of a traced method:
 *
 *   clrmux:span_start(const char *method, u64 span_id, const char *trace_id)
 *   clrmux:span_end  (const char *method, u64 span_id, const char *trace_id,
 *                     u64 duration_ns, int error)
 *
 * method: "Namespace.Type.Method", as the span's name; span_id: the span's id as a number
 * (printf("%016lx") gives the spans file's spanId; 0 for a span of a trace that is not
 * sampled, the root aside); trace_id: its 32 lowercase hex digits, the spans file's traceId
 * (at span_start, before a join to Activity.Current: a joined root span's end has the
 * Activity's); duration_ns: the span's duration (the tick clock's, as the file's); error: 1
 * when the method was left by an exception. The strings live only during the probe.
 *
 * Each probe is behind a USDT semaphore: until a tool attaches to it, the span probes only
 * load that 2-byte word and branch over the call (bench/usdt.sh measures it). A build
 * without <sys/sdt.h> (Windows, a Linux build without systemtap-sdt-dev) has no probes and
 * that branch is compiled out. */
#ifndef CLRMUX_TRACER_USDT_H
#define CLRMUX_TRACER_USDT_H

#include <stdint.h>

#if defined(__linux__) && defined(__has_include) && !defined(CLRMUX_NO_USDT)
#if __has_include(<sys/sdt.h>)
#define CLRMUX_USDT 1
#endif
#endif

#ifdef CLRMUX_USDT
/* the semaphores (sys/sdt.h's names: provider_probe_semaphore), in section .probes; a tool
 * that attaches adds 1, and takes it off when it detaches */
extern volatile unsigned short clrmux_span_start_semaphore __attribute__((visibility("hidden")));
extern volatile unsigned short clrmux_span_end_semaphore __attribute__((visibility("hidden")));
#define CLRMUX_USDT_ON(probe) __builtin_expect(clrmux_##probe##_semaphore != 0, 0)
#else
#define CLRMUX_USDT_ON(probe) 0
#endif

/* The probes' slow side, called only when CLRMUX_USDT_ON(...) (never inlined). */
void clrmux_usdt_span_start(uint32_t method, uint64_t span_id, const uint8_t trace_id[16]);
void clrmux_usdt_span_end(uint32_t method, uint64_t span_id, const uint8_t trace_id[16], uint64_t duration_ns,
                          int error);

/* The names of the method indexes the span probes carry (the tracer's registry: tracer.c
 * registers it in Initialize). fn returns NULL for an unknown index; until it is set the
 * name is "?". */
typedef const char *(*clrmux_usdt_name_fn)(void *ctx, uint32_t method);
void clrmux_usdt_set_names(clrmux_usdt_name_fn fn, void *ctx);

#endif
