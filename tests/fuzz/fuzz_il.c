/* libFuzzer target: the IL method-body parser, emitter and wrap rewriter
 * (src/tracer/il.c). Round trips: a parsed body re-emits to bytes that parse; a wrapped
 * body emits to bytes that parse (what the tracer hands the runtime must be valid to our
 * own parser). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tracer/il.h"

static void must_reparse(const uint8_t *out, size_t len, const char *what)
{
    clrmux_il_body again = {0};
    size_t used = 0;
    char err[256];
    int rc = clrmux_il_parse(out, len, &again, &used, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "%s: emitted body does not parse: %s\n", what, err);
        abort();
    }
    clrmux_il_body_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    clrmux_il_body b = {0};
    size_t used = 0;
    char err[256];
    if (clrmux_il_parse(data, size, &b, &used, err, sizeof err) != 0)
        return 0;
    uint8_t *out = NULL;
    size_t len = 0;
    if (clrmux_il_emit(&b, &out, &len, err, sizeof err) == 0) {
        must_reparse(out, len, "parse+emit");
        free(out);
    }
    /* the tracer's wrap: entry/exit probes as calli-like token calls, return local, and (by the
     * input's last byte) the normal exit after the protected region */
    static const uint8_t entry[] = {0x28, 0x01, 0x00, 0x00, 0x0A};
    static const uint8_t exitp[] = {0x28, 0x02, 0x00, 0x00, 0x0A};
    clrmux_il_wrap_spec s = {0};
    s.entry = entry, s.entry_len = sizeof entry;
    s.exit = exitp, s.exit_len = sizeof exitp;
    s.ret_local = (size > 0 && (data[size - 1] & 1)) ? 0 : CLRMUX_IL_NO_LOCAL;
    s.local_sig_tok = 0x11000001;
    s.extra_max_stack = 2;
    if (size > 0 && (data[size - 1] & 2)) { /* the tracer's form: fault clause, exit after the region */
        static const uint8_t normal[] = {0x28, 0x03, 0x00, 0x00, 0x0A};
        s.exit_normal = normal, s.exit_normal_len = sizeof normal;
    }
    if (clrmux_il_wrap(&b, &s, err, sizeof err) == 0) {
        out = NULL;
        if (clrmux_il_emit(&b, &out, &len, err, sizeof err) == 0) {
            must_reparse(out, len, "wrap+emit");
            free(out);
        }
    }
    clrmux_il_body_free(&b);
    return 0;
}
