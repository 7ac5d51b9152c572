/* libFuzzer target: the tracer's `trace =` target parser and type canonicalisation
 * (src/tracer/target.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/target.h"

static struct clrmux_target g_t;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char err[400];
    if (clrmux_target_parse(text, &g_t, err, sizeof err) == 0) {
        /* a parsed target matches its own parameter names */
        if (g_t.has_params && !clrmux_target_params_match(&g_t, g_t.params, g_t.nparams))
            abort();
    }
    char canon[CLRMUX_TARGET_NAME_MAX];
    if (clrmux_target_canon_type(text, canon, sizeof canon) == 0)
        clrmux_target_type_matches(canon, canon);
    free(text);
    return 0;
}
