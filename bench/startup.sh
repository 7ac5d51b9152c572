#!/usr/bin/env bash
# bench/startup.sh [--summary FILE] [R]: start-up cost of a hello-world .NET app.
#
# Runs build/clr/hello/hello.dll R times (default 10, or BENCH_STARTUP_RUNS) in each of
#   none    no profiler
#   clrmux  clrmux with one no-op child (build/fake/libnoop.so) in its loader.conf
#   full    clrmux with the same child, the built-in tracer (tracing the app's Main, spans to a
#           file) and the built-in profiler (its default cpu and wall sampling, pprof at exit)
#   direct  the same no-op child loaded directly as CORECLR_PROFILER
# and, to show where full's time goes, the child beside only one of them:
#   tracer  the child + the tracer;  prof  the child + the profiler;  prof_ep0  the child + the
#           profiler with its EventPipe session from the first instruction (eventpipe_delay_ms
#           = 0; by default it starts 1 s after Initialize, after this app has exited);
#           prof_noep  the child + the profiler without the session (allocations = false,
#           contention = false)
# and the second reading of the goal, the multiplexer's own cost:
#   builtins  clrmux hosting only the tracer and the profiler (no other child), against none.
#   The built-ins cannot be the runtime's only profiler themselves: libclrmux_profiler.so
#   exports no DllGetClassObject (only clrmux_profiler_create, which takes its [child] section
#   and clrmux's log, last-gasp and span-context functions), and the tracer is compiled into
#   libclrmux.so with no entry of its own; so clrmux's own share is clrmux/direct (clrmux + the
#   child against the same child loaded directly), and builtins/none is what the two cost an app.
# interleaved (none, clrmux, full, direct, tracer, ...) so that drift hits all alike, and prints
# the median wall time of each and the ratios clrmux/none, clrmux/direct and full/direct
# (issue 12's goal: full/direct <= 1.01), and tracer, prof, prof_noep / direct. The child asks
# for BENCH_STARTUP_MASK (hex low event mask, default 0x224: module loads, JIT, threads) in
# both profiled configurations, so the runtime delivers the same callbacks to it either way.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
R=${1:-${BENCH_STARTUP_RUNS:-10}}
MASK=${BENCH_STARTUP_MASK:-0x224}
APP=build/clr/hello/hello.dll
LIB="$ROOT/build/libclrmux.so"
NOOP="$ROOT/build/fake/libnoop.so"
CLRMUX_CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
NOOP_CLSID="{C0000001-0000-0000-0000-000000000001}"

if ! command -v dotnet >/dev/null 2>&1; then
    echo "startup: dotnet is not on PATH: start-up benchmark skipped"
    exit 0
fi
[ -f "$LIB" ] && [ -f "$NOOP" ] || { echo "startup: build/libclrmux.so or build/fake/libnoop.so missing (make all)" >&2; exit 1; }
tests/clr/build-apps.sh >/dev/null || { echo "startup: building the C# test apps failed" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-startup.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/loader.conf" <<EOF
[loader]
log_level = warn
[child noop]
path = $NOOP
clsid = $NOOP_CLSID
EOF
cp "$WORK/loader.conf" "$WORK/full.conf"
cat >>"$WORK/full.conf" <<EOF
[child tracer]
builtin = tracer
output = $WORK/spans-%p.otlp.jsonl
trace = hello!Program::<Main>\$
[child profiler]
builtin = profiler
output_dir = $WORK/profiles
EOF
{ cat "$WORK/loader.conf"; sed -n '/^\[child tracer\]/,/^trace =/p' "$WORK/full.conf"; } >"$WORK/tracer.conf"
{ cat "$WORK/loader.conf"; sed -n '/^\[child profiler\]/,$p' "$WORK/full.conf"; } >"$WORK/prof.conf"
{ cat "$WORK/prof.conf"; printf 'allocations = false\ncontention = false\n'; } >"$WORK/prof_noep.conf"
{ cat "$WORK/prof.conf"; printf 'eventpipe_delay_ms = 0\n'; } >"$WORK/prof_ep0.conf"
{ printf '[loader]\nlog_level = warn\n'; sed -n '/^\[child tracer\]/,$p' "$WORK/full.conf"; } >"$WORK/builtins.conf"

# The three configurations as env(1) arguments; every run goes through env(1) alike.
CLEAN=(-u CORECLR_ENABLE_PROFILING -u CORECLR_PROFILER -u CORECLR_PROFILER_PATH -u CLRMUX_CONFIG
       -u CLRMUX_LOG_FILE -u CLRMUX_LOG_LEVEL -u RECORDER_MASK -u RECORDER_OUT)
cfg_none=("${CLEAN[@]}")
cfg_clrmux=("${CLEAN[@]}" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLRMUX_CLSID" CORECLR_PROFILER_PATH="$LIB"
            CLRMUX_CONFIG="$WORK/loader.conf" RECORDER_MASK="$MASK")
cfg_full=("${CLEAN[@]}" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLRMUX_CLSID" CORECLR_PROFILER_PATH="$LIB"
          CLRMUX_CONFIG="$WORK/full.conf" RECORDER_MASK="$MASK")
cfg_direct=("${CLEAN[@]}" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$NOOP_CLSID" CORECLR_PROFILER_PATH="$NOOP"
            RECORDER_MASK="$MASK")
cfg_tracer=("${cfg_full[@]/#CLRMUX_CONFIG=*/CLRMUX_CONFIG=$WORK/tracer.conf}")
cfg_prof=("${cfg_full[@]/#CLRMUX_CONFIG=*/CLRMUX_CONFIG=$WORK/prof.conf}")
cfg_prof_noep=("${cfg_full[@]/#CLRMUX_CONFIG=*/CLRMUX_CONFIG=$WORK/prof_noep.conf}")
cfg_prof_ep0=("${cfg_full[@]/#CLRMUX_CONFIG=*/CLRMUX_CONFIG=$WORK/prof_ep0.conf}")
cfg_builtins=("${cfg_full[@]/#CLRMUX_CONFIG=*/CLRMUX_CONFIG=$WORK/builtins.conf}")
CONFIGS=(none clrmux full direct tracer prof prof_ep0 prof_noep builtins)

# Microseconds since the epoch, without forking (bash 5's EPOCHREALTIME), else date(1).
now_us() {
    if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME//[!0-9]/}"
    else echo $(( $(date +%s%N) / 1000 )); fi
}

# Pre-flight (also the warm-up): each configuration prints "hello", and the profiled ones
# really load libnoop.so (the dynamic loader's log), clrmux with its one child active.
for c in "${CONFIGS[@]}"; do
    declare -n cfg="cfg_$c"
    out=$(env "${cfg[@]}" LD_DEBUG=files LD_DEBUG_OUTPUT="$WORK/ld.$c" CLRMUX_LOG_LEVEL=info \
          CLRMUX_LOG_FILE="$WORK/clrmux.$c.log" dotnet "$APP" 2>"$WORK/err.$c") \
        || { echo "startup: '$c' run failed:" >&2; cat "$WORK/err.$c" >&2; exit 1; }
    [ "$out" = hello ] || { echo "startup: '$c' printed '$out', not 'hello'" >&2; exit 1; }
    loaded=$(cat "$WORK/ld.$c".* 2>/dev/null | grep -c "file=$NOOP" || true)
    if [ "$c" = none ] || [ "$c" = builtins ]; then
        [ "$loaded" -eq 0 ] || { echo "startup: '$c': libnoop.so loaded?" >&2; exit 1; }
        unset -n cfg; continue
    fi
    if [ "$loaded" -eq 0 ]; then
        echo "startup: '$c': the runtime did not load libnoop.so" >&2; cat "$WORK/err.$c" "$WORK/clrmux.$c.log" 2>/dev/null >&2; exit 1
    fi
    unset -n cfg
done
grep -q "1 child profiler(s) active" "$WORK/clrmux.clrmux.log" \
    || { echo "startup: clrmux did not activate its child:" >&2; cat "$WORK/clrmux.clrmux.log" >&2; exit 1; }
grep -q "3 child profiler(s) active" "$WORK/clrmux.full.log" \
    || { echo "startup: clrmux did not activate the child, the tracer and the profiler:" >&2; cat "$WORK/clrmux.full.log" >&2; exit 1; }
grep -q "2 child profiler(s) active" "$WORK/clrmux.builtins.log" \
    || { echo "startup: 'builtins': clrmux did not activate the tracer and the profiler:" >&2; cat "$WORK/clrmux.builtins.log" >&2; exit 1; }
for c in tracer prof prof_ep0 prof_noep; do
    grep -q "2 child profiler(s) active" "$WORK/clrmux.$c.log" \
        || { echo "startup: '$c': clrmux did not activate its two children:" >&2; cat "$WORK/clrmux.$c.log" >&2; exit 1; }
done
grep -q "EventPipe session started" "$WORK/clrmux.prof_ep0.log" \
    || { echo "startup: 'prof_ep0': the profiler did not start its EventPipe session" >&2; exit 1; }
for c in prof prof_noep; do
    if grep -q "EventPipe session started" "$WORK/clrmux.$c.log"; then
        echo "startup: '$c': the profiler started an EventPipe session during a hello world" >&2; exit 1
    fi
done

TIMEFORMAT='%U %S'
for ((i = 0; i < R; i++)); do
    for c in "${CONFIGS[@]}"; do
        declare -n cfg="cfg_$c"
        t0=$(now_us)
        # bash's `time`: the process's CPU time (user + sys), far less sensitive than wall time
        # to other load on the machine
        { time env "${cfg[@]}" dotnet "$APP" >/dev/null 2>&1 || { echo "startup: '$c' run $i failed" >&2; exit 1; }; } \
            2>>"$WORK/cpu.$c"
        t1=$(now_us)
        echo $((t1 - t0)) >>"$WORK/t.$c"
        unset -n cfg
    done
done

median_ms() { sort -n "$1" | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f", m / 1000}'; }
none=$(median_ms "$WORK/t.none")
clrmux=$(median_ms "$WORK/t.clrmux")
direct=$(median_ms "$WORK/t.direct")
full=$(median_ms "$WORK/t.full")
r_none=$(awk -v a="$clrmux" -v b="$none" 'BEGIN {printf "%.3f", a / b}')
r_direct=$(awk -v a="$clrmux" -v b="$direct" 'BEGIN {printf "%.3f", a / b}')
r_full=$(awk -v a="$full" -v b="$direct" 'BEGIN {printf "%.3f", a / b}')
cpu_ms() { awk '{print ($1 + $2) * 1000000}' "$1" >"$1.us"; median_ms "$1.us"; }
for c in "${CONFIGS[@]}"; do declare "cpu_$c=$(cpu_ms "$WORK/cpu.$c")"; done
c_direct=$(awk -v a="$cpu_clrmux" -v b="$cpu_direct" 'BEGIN {printf "%.3f", a / b}')
c_full=$(awk -v a="$cpu_full" -v b="$cpu_direct" 'BEGIN {printf "%.3f", a / b}')

range_ms() { sort -n "$1" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1f-%.1f", lo / 1000, hi / 1000}'; }
builtins=$(median_ms "$WORK/t.builtins")
r_builtins=$(awk -v a="$builtins" -v b="$none" 'BEGIN {printf "%.3f", a / b}')
c_builtins=$(awk -v a="$cpu_builtins" -v b="$cpu_none" 'BEGIN {printf "%.3f", a / b}')
echo "startup: dotnet $APP, $R runs per configuration (interleaved), child event mask $MASK"
printf '  %-40s %8s    %-15s %10s\n' "" "median" "(min-max)" "CPU median"
printf '  %-40s %8s ms (%-13s) %7s ms\n' "no profiler" "$none" "$(range_ms "$WORK/t.none")" "$cpu_none" \
    "clrmux + 1 no-op child (libnoop.so)" "$clrmux" "$(range_ms "$WORK/t.clrmux")" "$cpu_clrmux" \
    "clrmux + the child + tracer + profiler" "$full" "$(range_ms "$WORK/t.full")" "$cpu_full" \
    "no-op child alone as CORECLR_PROFILER" "$direct" "$(range_ms "$WORK/t.direct")" "$cpu_direct" \
    "clrmux + tracer + profiler, no child" "$builtins" "$(range_ms "$WORK/t.builtins")" "$cpu_builtins"
echo "  (a) the goal as issue 12 states it: clrmux with the tracer, the profiler and a child vs the child alone"
printf '  %-40s %8s   (CPU %s)\n' "ratio full (tracer + profiler)/direct" "$r_full" "$c_full"
echo "  (b) the multiplexer's own cost (the built-ins cannot be loaded without clrmux: see the top of this file)"
printf '  %-40s %8s   (CPU %s)\n' "ratio clrmux/direct" "$r_direct" "$c_direct" \
    "ratio clrmux/none" "$r_none" "-" "ratio builtins (tracer + profiler)/none" "$r_builtins" "$c_builtins"
echo "  where full's time goes (clrmux + the child + one of them):"
for c in tracer prof prof_ep0 prof_noep; do
    case $c in tracer) label="+ tracer" ;; prof) label="+ profiler" ;; prof_ep0) label="+ profiler, EventPipe from the start" ;;
               *) label="+ profiler, no EventPipe session" ;; esac
    m=$(median_ms "$WORK/t.$c")
    declare -n cpu="cpu_$c"
    printf '  %-40s %8s ms (%-13s) %7s ms   /direct %s (CPU %s)\n' "$label" "$m" "$(range_ms "$WORK/t.$c")" "$cpu" \
        "$(awk -v a="$m" -v b="$direct" 'BEGIN {printf "%.3f", a / b}')" \
        "$(awk -v a="$cpu" -v b="$cpu_direct" 'BEGIN {printf "%.3f", a / b}')"
    unset -n cpu
done
if [ -n "$SUMMARY" ]; then
    printf 'none %s\nclrmux %s\nfull %s\ndirect %s\nclrmux/none %s\nclrmux/direct %s\nfull/direct %s\ncpu_clrmux/direct %s\ncpu_full/direct %s\nbuiltins %s\nbuiltins/none %s\ncpu_builtins/none %s\nruns %s\n' \
        "$none" "$clrmux" "$full" "$direct" "$r_none" "$r_direct" "$r_full" "$c_direct" "$c_full" "$builtins" \
        "$r_builtins" "$c_builtins" "$R" >"$SUMMARY"
fi
