/* The control channel: every process under clrmux listens for `clrmux ctl PID COMMAND` (the
 * protocol: ctl_proto.h; what the commands do: ctl_exec.h; where it listens: ctl_path.h).
 *
 * One thread of clrmux's own (clrmux-ctl) serves one client at a time:
 *   - Linux: a Unix domain socket in a folder only the process's user can enter (0700, its
 *     owner checked, never followed through a symbolic link); each peer's credentials
 *     (SO_PEERCRED) must be the process's effective user or root, else it is refused and the
 *     refusal logged. Windows: a named pipe whose DACL admits the process's user, SYSTEM and
 *     Administrators, remote clients rejected, the client's token checked the same way.
 *   - A request is read within CLRMUX_CTL_IO_MS and at most CLRMUX_CTL_MAX_REQUEST bytes; the
 *     reply is written within CLRMUX_CTL_IO_MS (a client that does not read is dropped). At
 *     most CLRMUX_CTL_BURST requests at once and CLRMUX_CTL_RATE a second are served; the
 *     rest get "error: busy". Refusals are logged at most CLRMUX_CTL_LOG_BURST times per
 *     minute (then a count).
 *   - The thread never runs a runtime callback and holds no lock a runtime thread waits for
 *     beyond a few microseconds (tracer_ctl.h, companion.h): a runtime thread never waits for
 *     a client.
 * It starts off the app's main thread, right after clrmux's process-wide barrier registration
 * (loader/detach.h's clrmux_barrier_then), and also makes the runtime write its perf map when
 * loader.conf asks (perf_map = true: ctl_perfmap.h). */
#ifndef CLRMUX_CONTROL_CTL_SERVER_H
#define CLRMUX_CONTROL_CTL_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define CLRMUX_CTL_IO_MS 2000
#define CLRMUX_CTL_BURST 20
#define CLRMUX_CTL_RATE 10
#define CLRMUX_CTL_LOG_BURST 10
#define CLRMUX_CTL_REPLY_MAX (512u << 10)

struct clrmux_out;

/* Initialize (mux.c), before the children's Initialize: what the channel's thread will do
 * (control: listen, from loader.conf's enable_control; perf_map: ctl_perfmap.h). Returns 1 when
 * the thread is wanted: the caller then has clrmux_ctl_start run off the app's main thread
 * (loader/detach.h's clrmux_barrier_then). */
int clrmux_ctl_configure(int control, int perf_map);
/* Starts the channel's thread (arg unused; a clrmux_barrier_then function). */
void clrmux_ctl_start(void *arg);

/* Shutdown (mux.c): the channel stops accepting and its socket is removed. A command under
 * way finishes on its own (the thread is not waited for). */
void clrmux_ctl_shutdown(void);

/* The three above as the mux takes them (loader/mux.h, clrmux_mux_create): what the library's
 * entry (src/entry/exports.c) gives every mux it creates. */
struct clrmux_mux_control;
extern const struct clrmux_mux_control clrmux_control_channel;

#ifdef CLRMUX_TESTING
/* Tests: starts the channel's thread now, without a mux (commands then answer that clrmux has
 * not started, unless the test set clrmux_the_mux), and waits until it listens (2 s at most).
 * 0, or -1. clrmux_ctl_shutdown stops it. */
int clrmux_ctl_test_start(void);
#endif

/* ---- shared by the transports (ctl_unix.c, ctl_win.c) ---------------------------------- */

/* Serves one request read from a peer: the reply into reply, the command logged (changes at
 * info, reads at debug). `who` names the peer for the log ("uid 0 pid 123"). */
void clrmux_ctl_handle(const char *req, size_t len, const char *who, struct clrmux_out *reply);

/* Whether a refusal may be logged now (at most CLRMUX_CTL_LOG_BURST a minute); *suppressed:
 * how many were not logged since the last one that was. */
int clrmux_ctl_may_log(int64_t now_ns, uint64_t *suppressed);

#endif
