/* libFuzzer target: EventPipe payload reading (src/profiler/events.c): AllocationTick and
 * ContentionStop payloads of every version and pointer size. */
#include <stdint.h>
#include <stdlib.h>

#include "profiler/prof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    unsigned version = data[0] & 7;
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    struct prof_alloc_tick t;
    prof_parse_alloc_tick(p, len, version, 4, &t);
    if (prof_parse_alloc_tick(p, len, version, 8, &t) == 0 && t.type_name[sizeof t.type_name - 1] != 0)
        abort();
    double d;
    if (prof_parse_contention_stop(p, len, version, &d) == 0 && !(d >= 0))
        abort();
    prof_event_stack_frames((unsigned long)len * 97, 512);
    return 0;
}
