/* The control channel as the mux takes it (loader/mux.h's struct clrmux_mux_control), given
 * by the library's entry (src/entry/exports.c) to every mux it creates: the transport's
 * configure, start and shutdown (ctl_unix.c or ctl_win.c). On its own so that the transports
 * need not include loader/mux.h: its COM types (clrmux/com.h) clash with windows.h. */
#include "control/ctl_server.h"
#include "loader/mux.h"

const struct clrmux_mux_control clrmux_control_channel = {clrmux_ctl_configure, clrmux_ctl_start, clrmux_ctl_shutdown};
