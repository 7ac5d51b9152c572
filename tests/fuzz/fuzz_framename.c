/* libFuzzer target: frame names (src/profiler/framename.c): the input is split at NUL
 * bytes into a type name, a method name and generic arguments; every buffer size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/framename.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192 || size < 1)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text + 0, data + 1, size - 1);
    text[size - 1] = 0;
    text[size] = 0;
    const char *parts[16];
    size_t n = 0;
    for (char *p = text; p <= text + size - 1 && n < 16; p += strlen(p) + 1)
        parts[n++] = p;
    const char *type = n > 0 ? parts[0] : NULL, *method = n > 1 ? parts[1] : NULL;
    size_t rest = n > 2 ? n - 2 : 0, ntype = rest ? data[0] % (rest + 1) : 0;
    const char *const *targs = rest ? parts + 2 : NULL, *const *margs = rest ? parts + 2 + ntype : NULL;
    char buf[4096];
    size_t caps[] = {0, 1, 5, 64, sizeof buf};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        size_t need = clrmux_frame_name_managed(buf, caps[i], type, method, targs, ntype, margs, rest - ntype);
        if (caps[i] && need < caps[i] && strlen(buf) != need)
            abort();
        clrmux_frame_name_native(buf, caps[i], type);
        clrmux_frame_name_unknown(buf, caps[i]);
    }
    free(text);
    return 0;
}
