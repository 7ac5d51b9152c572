/* libFuzzer target: the control channel's request handling (src/control/ctl_proto.c):
 * framing, the parser, the reply buffer's JSON strings. Whatever the bytes, nothing is read
 * or written out of bounds, a refusal always says why, an accepted request is a known command
 * whose argument is bounded and free of control characters, and a JSON string is closed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    /* the bytes as they arrive: the first line, as the server frames it */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    long line = clrmux_ctl_line(buf, size);
    if (line < -2 || line >= CLRMUX_CTL_MAX_REQUEST || (line >= 0 && buf[line] != '\n'))
        abort();
    size_t len = line >= 0 ? (size_t)line : size;
    struct clrmux_ctl_req req;
    char err[600];
    if (clrmux_ctl_parse(buf, len, &req, err, sizeof err) == 0) {
        if (req.op < CLRMUX_CTL_STATUS || req.op > CLRMUX_CTL_LOG_LEVEL || !strcmp(clrmux_ctl_op_name(req.op), "?"))
            abort();
        size_t al = strnlen(req.arg, sizeof req.arg);
        if (al == sizeof req.arg)
            abort();
        for (size_t i = 0; i < al; i++)
            if ((unsigned char)req.arg[i] < 0x20 && req.arg[i] != '\t')
                abort();
    } else if (!err[0]) {
        abort();
    }
    /* the same bytes as a JSON string, into a reply of a size the input chooses */
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    size_t cap = size ? (size_t)data[0] + 1 : 1;
    char *out = malloc(cap);
    struct clrmux_out o;
    clrmux_out_init(&o, out, cap);
    clrmux_out_json_str(&o, s);
    if (o.len >= cap || out[o.len] != 0 || (!o.truncated && (o.len < 2 || out[o.len - 1] != '"')))
        abort();
    free(out);
    free(s);
    free(buf);
    return 0;
}
