/* libFuzzer target: loader.conf parsing (src/loader/config.c) of any text, and the process
 * filters it produces. Every input must parse without a crash, leak or unbounded growth. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loader/config.h"

static struct clrmux_config g_cfg; /* large (PATH_MAX paths): not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CLRMUX_CONFIG_MAX_BYTES)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    clrmux_config_load_string(text, "fuzz.conf", "/etc/clrmux", &g_cfg);
    if (g_cfg.ndiags > CLRMUX_MAX_DIAGS || g_cfg.nchildren > CLRMUX_MAX_CHILDREN || g_cfg.nkvs_total > CLRMUX_MAX_KEYS)
        abort();
    const char *why;
    clrmux_config_process_allowed(&g_cfg, "dotnet", "App", &why);
    clrmux_config_active_children(&g_cfg);
    clrmux_config_free(&g_cfg);
    free(text);
    return 0;
}
