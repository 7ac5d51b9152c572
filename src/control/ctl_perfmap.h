/* `perf_map = true` in loader.conf's [loader]: the runtime writes /tmp/perf-PID.map (the JIT's
 * code addresses and method names that `perf report` and bpftrace read), as with
 * DOTNET_PerfMapEnabled, which the runtime reads only before it loads its profiler (clrmux's
 * Initialize is too late to set it; `clrmux run --perf-map` sets it for the command).
 *
 * The runtime's own diagnostics IPC command EnablePerfMap (.NET 8 and later: the process
 * command set 0x04, command 0x05, DiagnosticsClient.EnablePerfMap) is sent to the process's
 * own diagnostics socket ($TMPDIR/dotnet-diagnostic-PID-*-socket); the runtime then also
 * writes the methods compiled before. Older runtimes answer it with an error, which is logged
 * with what to do instead. Linux only. */
#ifndef CLRMUX_CONTROL_CTL_PERFMAP_H
#define CLRMUX_CONTROL_CTL_PERFMAP_H

/* Sends EnablePerfMap (perf map only) and waits for the answer, 2 s at most. Logs the outcome
 * (the map's path, or why not). Returns 0 when the runtime answered S_OK, else -1. For the
 * control channel's thread. */
int clrmux_ctl_perfmap_enable(void);

#endif
