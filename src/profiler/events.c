/* Payloads of the runtime's EventPipe events the profiler reads (Microsoft-Windows-
 * DotNETRuntime, see ClrEtwAll.man): packed little-endian fields, no alignment. */
#include <string.h>

#include "profiler/framename.h"
#include "profiler/prof.h"

static int rd(const uint8_t *data, size_t len, size_t *off, void *out, size_t n)
{
    if (*off > len || len - *off < n)
        return -1;
    memcpy(out, data + *off, n);
    *off += n;
    return 0;
}

static int rd_ptr(const uint8_t *data, size_t len, size_t *off, size_t psz, uint64_t *out)
{
    if (psz == 4) {
        uint32_t v;
        if (rd(data, len, off, &v, 4))
            return -1;
        *out = v;
        return 0;
    }
    return rd(data, len, off, out, 8);
}

int prof_parse_alloc_tick(const uint8_t *data, size_t len, unsigned version, size_t pointer_size,
                          struct prof_alloc_tick *out)
{
    memset(out, 0, sizeof *out);
    size_t off = 0;
    uint32_t amount;
    if (!data || rd(data, len, &off, &amount, 4) || rd(data, len, &off, &out->kind, 4))
        return -1;
    out->bytes = amount;
    if (version < 2)
        return 0;
    uint16_t clr;
    uint64_t amount64;
    if (rd(data, len, &off, &clr, 2) || rd(data, len, &off, &amount64, 8) ||
        rd_ptr(data, len, &off, pointer_size, &out->type_id))
        return -1;
    out->bytes = amount64;
    /* TypeName: NUL-terminated UTF-16; count its units within the payload */
    size_t units = 0;
    while (off + 2 * units + 1 < len) {
        uint16_t u;
        memcpy(&u, data + off + 2 * units, 2);
        if (!u)
            break;
        units++;
    }
    if (units) {
        uint16_t tmp[256];
        size_t n = units < 256 ? units : 256;
        memcpy(tmp, data + off, n * 2);
        clrmux_frame_utf16_to_utf8(out->type_name, sizeof out->type_name, tmp, n);
    }
    return 0;
}

int prof_parse_contention_stop(const uint8_t *data, size_t len, unsigned version, double *duration_ns)
{
    size_t off = 0;
    uint8_t flags;
    uint16_t clr;
    *duration_ns = 0;
    if (!data || rd(data, len, &off, &flags, 1) || rd(data, len, &off, &clr, 2))
        return -1;
    if (version < 1)
        return 0;
    double d;
    if (rd(data, len, &off, &d, 8))
        return -1;
    *duration_ns = (d == d && d > 0) ? d : 0; /* NaN or negative: 0 */
    return 0;
}

size_t prof_event_stack_frames(unsigned long num_stack_frames, size_t max)
{
    size_t n = num_stack_frames / sizeof(UINT_PTR);
    return n < max ? n : max;
}
