#!/usr/bin/env bash
# bench/otel.sh: the cost of a traced call with and without a current Activity, and with
# head sampling at 1.0 and 0.01, side by side in one run.
#
# tests/clr/otelapps/otelapp in `bench N MODE` mode times N calls of OtelApp.Work::Handle,
# each calling Inner (2 traced calls per iteration), after a warm-up, and prints ns per
# iteration (the thread's own CPU time, so that a loaded machine does not inflate it). Each configuration runs REPEAT times (median). Configurations:
#   baseline        no profiler
#   1.0 / no Act.   tracer, sample_ratio 1, no current Activity (the join's check runs: one
#                   Activity.Current read per root span)
#   1.0 / no join   the same with join_activity = false: the join's no-Activity cost is the
#                   difference
#   0.01 / no Act.  sample_ratio 0.01: 99% of the calls only counted in the metrics
#   1.0 / Activity  inside one recorded Activity: every root span joins it (Id read + parse)
#   unrecorded Act. inside an Activity that is not recorded: parent-based, spans not recorded
# Spans go to /dev/null (the exporter formats them all); the ring holds every span of a run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
N=${BENCH_OTEL_CALLS:-200000}
REPEAT=${BENCH_OTEL_REPEAT:-3}
LIB="$ROOT/build/libclrmux.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
command -v dotnet >/dev/null 2>&1 || { echo "otel: dotnet is not on PATH: benchmark skipped"; exit 0; }
[ -f "$LIB" ] || { echo "otel: build/libclrmux.so missing (make all)" >&2; exit 1; }
APP=build/clr/otelapp/otelapp.dll
export DOTNET_ROLL_FORWARD=Major # otelapp targets net8.0: run it on the SDK's runtime
tests/clr/build-otelapp.sh otelapp # (re)built when its sources changed
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-obench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
BUF=$((N * 2 * 11 / 10 + 1024))
conf() { # conf NAME extra...
    { printf '[child tracer]\nbuiltin = tracer\noutput = /dev/null\nmetrics_output = /dev/null\nbuffer_spans = %d\n' "$BUF"
      printf 'trace = otelapp!OtelApp.Work::Handle\ntrace = otelapp!OtelApp.Work::Inner\n'
      printf '%s\n' "${@:2}"; } >"$WORK/$1.conf"
}
conf s100
conf s001 "sample_ratio = 0.01"
conf nojoin "join_activity = false"
one() { # one CONF MODE -> ns per iteration
    if [ "$1" = none ]; then
        dotnet "$APP" bench "$N" "$2"
    else
        env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
            CLRMUX_CONFIG="$WORK/$1.conf" CLRMUX_LOG_FILE="$WORK/$1.log" dotnet "$APP" bench "$N" "$2"
    fi | sed -n 's/^calls [0-9]* ns_per_call \([0-9.]*\).*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A R
CASES=("baseline:none:none" "1.0 / no Activity:s100:none" "1.0 / no join (join_activity=false):nojoin:none"
       "0.01 / no Activity:s001:none" "1.0 / recorded Activity:s100:activity" "1.0 / unrecorded Activity:s100:unrecorded"
       "0.01 / recorded Activity:s001:activity")
for r in $(seq "$REPEAT"); do # interleaved: a slow moment of the machine hits every case alike
    for c in "${CASES[@]}"; do
        IFS=: read -r name cf mode <<<"$c"
        R[$name]+="$(one "$cf" "$mode") "
    done
done
base=$(tr ' ' '\n' <<<"${R[baseline]}" | grep . | median)
echo "bench/otel.sh: $N iterations of Handle -> Inner (2 traced calls each), median of $REPEAT runs"
printf '  %-38s %10s %14s %8s\n' "configuration" "ns/iter" "ns/traced call" "ratio"
for c in "${CASES[@]}"; do
    IFS=: read -r name cf mode <<<"$c"
    v=$(tr ' ' '\n' <<<"${R[$name]}" | grep . | median)
    awk -v n="$name" -v v="$v" -v b="$base" 'BEGIN { printf "  %-38s %10.1f %14.1f %7.2fx\n", n, v, (v - b) / 2, v / b }'
done
