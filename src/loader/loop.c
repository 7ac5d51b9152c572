/* Loader-loop guards: the exported busy marker and the search for a busy clrmux copy. */
#include "loader/loop.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/clrmux.h"
#include "common/platform.h"

static _Atomic int g_busy;

CLRMUX_EXPORT int clrmux_loader_busy(void) { return atomic_load(&g_busy); }

void clrmux_loop_enter(void) { atomic_fetch_add(&g_busy, 1); }
void clrmux_loop_leave(void) { atomic_fetch_sub(&g_busy, 1); }

int clrmux_is_clrmux_library(void *lib) { return lib && clrmux_lib_sym(lib, CLRMUX_LOOP_SYMBOL) != NULL; }

struct found {
    char *who;
    size_t whosz;
};

/* another clrmux build: a loaded object that exports the marker and says it is busy */
static int busy_copy(void *lib, const char *path, void *ctx)
{
    struct found *f = ctx;
    int (*busy)(void) = (int (*)(void))clrmux_lib_sym(lib, CLRMUX_LOOP_SYMBOL);
    if (!busy || !busy())
        return 0;
    snprintf(f->who, f->whosz, "%s", path);
    return 2;
}

int clrmux_loop_detect(char *who, size_t whosz)
{
    if (atomic_load(&g_busy)) {
        if (clrmux_module_path_of((const void *)&clrmux_loader_busy, who, whosz) != 0)
            snprintf(who, whosz, "this library");
        return 1;
    }
    struct found f = {who, whosz};
    int r = clrmux_each_module(busy_copy, &f);
    return r > 0 ? r : 0;
}
