#!/usr/bin/env bash
# bench/exceptions.sh [--summary FILE] [BASE_BUILD_DIR]: the cost of a caught exception under
# clrmux, whose loader watches the exception callbacks for unhandled exceptions
# (src/common/unhandled.h).
#
# tests/clr/apps/ending in `throws` mode throws BENCH_EXC_THROWS exceptions 5 calls deep
# (through finally blocks and a declining filter), catches them in Main, and prints the CPU
# time of its thread in a second round (the first warms up; CPU time, not wall time: the
# other processes of a busy machine change it less). The configurations run interleaved, round after
# round (BENCH_EXC_ROUNDS), on the SDK's runtime; medians are compared side by side:
#   none        no profiler
#   noop-exc    a no-op profiler (fake_profilers/noop.c) asking for COR_PRF_MONITOR_EXCEPTIONS,
#               loaded directly: what the runtime's exception callbacks cost by themselves
#   tracer      clrmux with the tracer (which asks for the exception callbacks; the loader's
#               watch rides on them)
#   quiet-prof  clrmux with the profiler, every kind of sample off (exceptions = false): the
#               loader adds the exception callbacks for its watch
# With BASE_BUILD_DIR (another build's build/ folder, e.g. of main), tracer-base and
# quiet-prof-base run that build's libclrmux.so the same way: the ratios this/base are the
# watch's own cost.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
BASE=${1:-}
THROWS=${BENCH_EXC_THROWS:-20000}
ROUNDS=${BENCH_EXC_ROUNDS:-5}
if ! command -v dotnet >/dev/null 2>&1; then echo "exceptions: dotnet is not on PATH: benchmark skipped"; exit 0; fi
tests/clr/build-apps.sh >/dev/null
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-excbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/tracer.conf" <<CONF_END
[child tracer]
builtin = tracer
output = $WORK/spans.jsonl
trace = ending!Ending.Work::Step
CONF_END
cat >"$WORK/prof.conf" <<CONF_END
[child profiler]
builtin = profiler
output_dir = $WORK/profiles
cpu = false
wall = false
exceptions = false
allocations = false
contention = false
CONF_END
APP=build/clr/ending/ending.dll
run() { # run NAME VAR=VALUE...
    local name=$1
    shift
    (cd "$WORK" && env "$@" dotnet "$ROOT/$APP" throws "$THROWS") | awk '/^throws/ {print $4}' >>"$WORK/$name"
}
mux() { echo CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$1/libclrmux.so" CLRMUX_LOG_LEVEL=error; }
CONFIGS="none noop-exc tracer quiet-prof"
[ -n "$BASE" ] && CONFIGS+=" tracer-base quiet-prof-base"
for r in $(seq "$ROUNDS"); do
    run none
    run noop-exc CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="{A0000001-0000-0000-0000-000000000001}" \
        CORECLR_PROFILER_PATH="$ROOT/build/fake/libnoop.so" RECORDER_MASK=0x40
    # shellcheck disable=SC2046
    run tracer $(mux "$ROOT/build") CLRMUX_CONFIG="$WORK/tracer.conf"
    # shellcheck disable=SC2046
    run quiet-prof $(mux "$ROOT/build") CLRMUX_CONFIG="$WORK/prof.conf"
    if [ -n "$BASE" ]; then
        # shellcheck disable=SC2046
        run tracer-base $(mux "$BASE") CLRMUX_CONFIG="$WORK/tracer.conf"
        # shellcheck disable=SC2046
        run quiet-prof-base $(mux "$BASE") CLRMUX_CONFIG="$WORK/prof.conf"
    fi
done
median() { sort -g "$WORK/$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
declare -A M
for c in $CONFIGS; do M[$c]=$(median "$c"); done
echo "exceptions: us of CPU per caught exception (6 frames, 5 finally blocks, 5 filters), median of $ROUNDS interleaved rounds of $THROWS"
for c in $CONFIGS; do
    printf '  %-16s %8.2f us  (%s x none)\n' "$c" "$(echo "${M[$c]} * 1000 / $THROWS" | bc -l)" \
        "$(echo "scale=2; ${M[$c]} / ${M[none]}" | bc -l)"
done
if [ -n "$BASE" ]; then
    rt=$(echo "scale=3; ${M[tracer]} / ${M[tracer-base]}" | bc -l)
    rq=$(echo "scale=3; ${M[quiet-prof]} / ${M[quiet-prof-base]}" | bc -l)
    echo "  tracer / tracer-base         : ${rt}x  (the watch on callbacks the tracer asks for anyway)"
    echo "  quiet-prof / quiet-prof-base : ${rq}x  (the watch adds the exception callbacks)"
fi
if [ -n "$SUMMARY" ]; then
    { printf 'exceptions us/throw'; for c in $CONFIGS; do printf ' %s=%s' "$c" "$(echo "scale=2; ${M[$c]} * 1000 / $THROWS" | bc -l)"; done; echo; } >>"$SUMMARY"
fi
