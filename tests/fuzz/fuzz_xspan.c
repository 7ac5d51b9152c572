/* libFuzzer target: Activity span records (src/tracer/xspan.c's parser) and their OTLP JSON
 * (src/tracer/otlp_xspan.c): any bytes, as one record and as a drained run of records; a
 * record the parser accepts renders to a line that ends with a newline. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/otlp.h"
#include "tracer/xspan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    struct clrmux_xspan x;
    int ok = clrmux_xspan_parse(data, size, &x) == 0;
    if (ok) { /* walk everything the parse vouched for */
        struct clrmux_xattr a;
        struct clrmux_xattrs l = x.attrs;
        while (clrmux_xattr_next(&l, &a))
            ;
        const uint8_t *c = x.events;
        uint16_t left = x.nevents;
        struct clrmux_xevent e;
        while (clrmux_xevent_next(&c, &left, &e))
            ;
        c = x.links, left = x.nlinks;
        struct clrmux_xlink k;
        while (clrmux_xlink_next(&c, &left, &k))
            ;
    }
    /* as the queue drains it: a u32 length, the record, padding */
    uint8_t *run = malloc(size + 8);
    if (!run)
        return 0;
    uint32_t n = (uint32_t)size;
    memcpy(run, &n, 4);
    memcpy(run + 4, data, size);
    memset(run + 4 + size, 0, 4);
    struct clrmux_resource res = {0};
    struct clrmux_otlp_mem m = {0};
    size_t nout = 0, nbad = 0;
    if (clrmux_otlp_render_xspans(&m, &res, run, 4 + ((size + 3) & ~(size_t)3), &nout, &nbad) == 0) {
        if (nout != (size_t)ok || (nout && (!m.len || m.p[m.len - 1] != '\n')))
            abort();
    }
    /* the raw bytes as a drained run of any shape */
    m.len = 0;
    clrmux_otlp_render_xspans(&m, &res, data, size, &nout, &nbad);
    free(m.p);
    free(run);
    return 0;
}
