/* libFuzzer target: UTF-16 <-> UTF-8 conversion (src/common/utf16.c) and the profiler's
 * own UTF-16 reader (src/profiler/framename.c), with small and large output buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf16.h"
#include "profiler/framename.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    size_t units = size / 2;
    WCHAR *w = malloc((units ? units : 1) * sizeof *w);
    if (!w)
        return 0;
    memcpy(w, data, units * 2);
    char out[4 * 4096 + 4];
    size_t caps[] = {0, 1, 2, 3, 4, 7, sizeof out};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        size_t n = clrmux_utf16_to_utf8(w, units, out, caps[i]);
        if (caps[i] && (n >= caps[i] || out[n] != 0 || strlen(out) != n))
            abort();
        clrmux_frame_utf16_to_utf8(out, caps[i], (const uint16_t *)w, units);
    }
    /* UTF-8 -> UTF-16 -> UTF-8 */
    char *s = malloc(size + 1);
    WCHAR back[8200];
    if (s) {
        memcpy(s, data, size);
        s[size] = 0;
        size_t n16 = clrmux_utf8_to_utf16(s, back, sizeof back / sizeof back[0]);
        if (n16 >= sizeof back / sizeof back[0] || back[n16] != 0)
            abort();
        clrmux_utf8_to_utf16(s, back, 3);
        clrmux_utf16_to_utf8(back, n16, out, sizeof out);
        free(s);
    }
    free(w);
    return 0;
}
