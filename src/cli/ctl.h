/* `clrmux ctl PID COMMAND [ARGS...]` (ctl.c): the client of a process's control channel. */
#ifndef CLRMUX_CLI_CTL_H
#define CLRMUX_CLI_CTL_H

/* argv: PID, then the command's words. Returns the launcher's exit status: 0 (the reply's
 * body printed on stdout), 1 (the process's error, or why it cannot be reached, on stderr),
 * 2 (a usage error). */
int clrmux_cmd_ctl(int argc, char **argv);

#endif
