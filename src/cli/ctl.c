/* `clrmux ctl PID COMMAND [ARGS...]`: the client of a process's control channel (the
 * protocol: src/control/ctl_proto.h; where it listens: src/control/ctl_path.h), on Linux and
 * Windows alike: the arguments, the request line (checked here with the process's own parser,
 * so a usage error is said before anything is sent), the reply printed (its body on stdout,
 * exit 0; the process's error on stderr, exit 1). Reaching the process and saying why it
 * cannot be reached is the platform's half (ctl_reach.h). */
#include "cli/ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl_reach.h"
#include "control/ctl_proto.h"

static const char *const ctl_usage =
    "usage: clrmux ctl PID COMMAND [ARGS...]\n"
    "  status [--json]                       children, tracer targets and counts, profiler, log\n"
    "  trace add 'Asm!Ns.Type::Method'       trace a method from its next call (ReJIT)\n"
    "  trace remove 'Asm!Ns.Type::Method'    stop tracing it (clrmux's rewrite reverted)\n"
    "  trace list [--json]\n"
    "  profile flush|start|stop              write the current profile now; stop/start the sampler\n"
    "  log-level error|warn|info|debug|trace\n";

int clrmux_cmd_ctl(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        fputs(ctl_usage, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    char *end = NULL;
    errno = 0;
    long pid = strtol(argv[0], &end, 10);
    if (errno || !end || *end || pid <= 0) {
        fprintf(stderr, "clrmux ctl: '%s' is not a process id\n%s", argv[0], ctl_usage);
        return 2;
    }
    if (argc < 2) {
        fprintf(stderr, "clrmux ctl: no command\n%s", ctl_usage);
        return 2;
    }
    char req[CLRMUX_CTL_MAX_REQUEST];
    size_t len = 0;
    for (int i = 1; i < argc; i++) {
        int n = snprintf(req + len, sizeof req - len, "%s%s", i > 1 ? " " : "", argv[i]);
        if (n < 0 || (size_t)n >= sizeof req - len - 1) {
            fprintf(stderr, "clrmux ctl: the command is longer than %d bytes\n", CLRMUX_CTL_MAX_REQUEST - 2);
            return 2;
        }
        len += (size_t)n;
    }
    struct clrmux_ctl_req parsed;
    char err[600];
    if (clrmux_ctl_parse(req, len, &parsed, err, sizeof err) != 0) { /* said here rather than by the process */
        fprintf(stderr, "clrmux ctl: %s\n%s", err, ctl_usage);
        return 2;
    }
    req[len++] = '\n';

    char *reply = NULL;
    size_t got = 0;
    if (clrmux_ctl_reach(pid, req, len, &reply, &got) != 0)
        return 1;
    reply[got] = 0;
    if (!strncmp(reply, "ok\n", 3)) {
        fwrite(reply + 3, 1, got - 3, stdout);
        free(reply);
        return 0;
    }
    if (!strncmp(reply, "error: ", 7)) {
        fprintf(stderr, "clrmux ctl: %s%s", reply + 7, got && reply[got - 1] == '\n' ? "" : "\n");
        free(reply);
        return 1;
    }
    fprintf(stderr, "clrmux ctl: process %ld %s\n", pid, got ? "sent a reply that is not clrmux's" : "closed the connection without a reply");
    free(reply);
    return 1;
}
