/* Loader loops: clrmux loaded, directly or through another loader, as a child of itself.
 *
 * A loader.conf that lists libclrmux.so itself, another clrmux build, a second clrmux copy
 * that lists the first, or a chaining loader that loads clrmux again would recurse through
 * Initialize until the stack overflows. Two guards end every such loop at its first
 * repetition:
 *   - a child library that exports CLRMUX_LOOP_SYMBOL is a clrmux build: refused before
 *     DllGetClassObject is called (clrmux_is_clrmux_library);
 *   - a clrmux whose Initialize runs while some clrmux copy in the process (this one, or
 *     another build found through the loaded objects) is loading its children is a nested
 *     instance: it refuses to start (clrmux_loop_detect).
 * Thread-safety: the busy count is atomic; Initialize runs on one thread. */
#ifndef CLRMUX_LOOP_H
#define CLRMUX_LOOP_H

#include <stddef.h>

/* Exported by every clrmux build: `int clrmux_loader_busy(void)`, nonzero while that copy
 * loads its children. */
#define CLRMUX_LOOP_SYMBOL "clrmux_loader_busy"

/* Marks the start and end of this copy's child loading (nestable). */
void clrmux_loop_enter(void);
void clrmux_loop_leave(void);

/* Returns 1 when this copy of clrmux is loading its children now, 2 when another clrmux
 * build in this process is, and writes that copy's file path into who[whosz]; else 0. */
int clrmux_loop_detect(char *who, size_t whosz);

/* Returns 1 when the dlopen handle `lib` is a clrmux build (exports CLRMUX_LOOP_SYMBOL). */
int clrmux_is_clrmux_library(void *lib);

#endif
