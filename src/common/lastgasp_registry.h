/* The last gasp's registry, shared by its POSIX (lastgasp.c) and Windows (lastgasp_win.c)
 * halves: the table of flush functions behind one lock, and the flush loop that runs them.
 * Internal to those two files (the public interface is lastgasp.h). */
#ifndef CLRMUX_COMMON_LASTGASP_REGISTRY_H
#define CLRMUX_COMMON_LASTGASP_REGISTRY_H

#include "common/lastgasp.h"

/* Adds fn(ctx) to the table. The first call runs start() under the table's lock (the
 * platform's thread and handlers); start returns 0, or -1 (logged by it), and then nothing is
 * added. Returns 0, or -1 (table full, or start failed). start NULL: fn(ctx) is added without
 * starting anything (clrmux_lastgasp_register_deferred); fn NULL: only start, if not yet
 * (clrmux_lastgasp_start), 0 when started. */
int clrmux_lastgasp_add(clrmux_lastgasp_fn fn, void *ctx, int (*start)(void));
/* Whether start() succeeded (the handlers are installed). */
int clrmux_lastgasp_started(void);
/* Runs every registered flush function once, on the calling thread, with the lock held and a
 * deadline CLRMUX_LASTGASP_BUDGET_MS from now; final (the process is ending): each is then
 * removed, so that it runs at most once. Logs the cause and the time taken when any ran. */
void clrmux_lastgasp_run(const char *cause, int final);

#endif
