/* The USDT probes clrmux:span_start and clrmux:span_end (usdt.h): their semaphores, and
 * the functions the span probes call when a tool has attached. */
#include "tracer/usdt.h"

#include <stdatomic.h>
#include <stddef.h>

#ifdef CLRMUX_USDT
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

__extension__ volatile unsigned short clrmux_span_start_semaphore __attribute__((used, section(".probes")));
__extension__ volatile unsigned short clrmux_span_end_semaphore __attribute__((used, section(".probes")));

#ifdef CLRMUX_BENCH_SEMAPHORES
/* bench/usdt.sh's builds only: the semaphores' addresses, for bench/usdt.c to set them by hand
 * (they stay hidden, so the probes reach them as libclrmux.so's do, without the GOT) */
__attribute__((visibility("default"))) volatile unsigned short *clrmux_bench_semaphore(int end)
{
    return end ? &clrmux_span_end_semaphore : &clrmux_span_start_semaphore;
}
#endif
#endif

static _Atomic(clrmux_usdt_name_fn) name_fn;
static void *_Atomic name_ctx;

void clrmux_usdt_set_names(clrmux_usdt_name_fn fn, void *ctx)
{
    atomic_store(&name_ctx, ctx);
    atomic_store(&name_fn, fn);
}

static const char *name_of(uint32_t method)
{
    clrmux_usdt_name_fn fn = atomic_load(&name_fn);
    const char *n = fn ? fn(atomic_load(&name_ctx), method) : NULL;
    return n ? n : "?";
}

static void hex32(const uint8_t id[16], char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[32] = 0;
}

__attribute__((noinline)) void clrmux_usdt_span_start(uint32_t method, uint64_t span_id, const uint8_t trace_id[16])
{
#ifdef CLRMUX_USDT
    char trace[33];
    hex32(trace_id, trace);
    const char *name = name_of(method);
    STAP_PROBE3(clrmux, span_start, name, span_id, trace);
#else
    (void)method, (void)span_id, (void)trace_id, (void)name_of, (void)hex32;
#endif
}

__attribute__((noinline)) void clrmux_usdt_span_end(uint32_t method, uint64_t span_id, const uint8_t trace_id[16],
                                                   uint64_t duration_ns, int error)
{
#ifdef CLRMUX_USDT
    char trace[33];
    hex32(trace_id, trace);
    const char *name = name_of(method);
    STAP_PROBE5(clrmux, span_end, name, span_id, trace, duration_ns, error);
#else
    (void)method, (void)span_id, (void)trace_id, (void)duration_ns, (void)error;
#endif
}
