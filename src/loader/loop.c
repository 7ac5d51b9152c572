/* Loader-loop guards: the exported busy marker and the search for a busy clrmux copy. */
#include "loader/loop.h"

#include <dlfcn.h>
#include <link.h>
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

int clrmux_is_clrmux_library(void *lib) { return lib && dlsym(lib, CLRMUX_LOOP_SYMBOL) != NULL; }

struct names {
    char **v;
    size_t n, cap;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct names *ns = data;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return 1;
        ns->v = v;
        ns->cap = cap;
    }
    ns->v[ns->n] = strdup(info->dlpi_name);
    if (ns->v[ns->n])
        ns->n++;
    return 0;
}

int clrmux_loop_detect(char *who, size_t whosz)
{
    if (atomic_load(&g_busy)) {
        if (clrmux_module_path_of((const void *)&clrmux_loader_busy, who, whosz) != 0)
            snprintf(who, whosz, "this library");
        return 1;
    }
    /* other clrmux builds: every loaded object that exports the marker (names are copied
     * first; dlopen is not called under dl_iterate_phdr's lock) */
    struct names ns = {0};
    dl_iterate_phdr(collect, &ns);
    int found = 0;
    for (size_t i = 0; i < ns.n; i++) {
        if (!found) {
            void *h = dlopen(ns.v[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h) {
                int (*busy)(void) = (int (*)(void))dlsym(h, CLRMUX_LOOP_SYMBOL);
                if (busy && busy()) {
                    found = 2;
                    snprintf(who, whosz, "%s", ns.v[i]);
                }
                dlclose(h);
            }
        }
        free(ns.v[i]);
    }
    free(ns.v);
    return found;
}
