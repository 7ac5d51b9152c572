#!/usr/bin/env bash
# bench/tracer.sh [--summary FILE]: the cost of a traced call and of rewriting a method.
#
# Runs tests/clr/apps/tracebench under clrmux with the built-in tracer tracing only
# TraceBench.Calls::Traced, not its identical twin TraceBench.Calls::Plain. The app times
# both in the same process, round after round (5 warm-up rounds, then BENCH_TRACE_ROUNDS
# measured ones of BENCH_TRACE_CALLS calls each, with a pause so that the exporter drains
# the spans between rounds), and prints the medians. This script prints ns per call traced
# vs untraced, ns per span added (traced - untraced), the ratio traced/untraced, the spans
# written and dropped (0 dropped: every traced call paid the full probe cost), and the time
# to rewrite a method (from the tracer's shutdown line: "N method(s) rewritten (X us each on
# average)"). Spans go to /dev/null: the export thread does all of its work (formatting OTLP
# JSON) but nothing is stored.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
CALLS=${BENCH_TRACE_CALLS:-50000}
ROUNDS=${BENCH_TRACE_ROUNDS:-40}
PAUSE=${BENCH_TRACE_PAUSE_MS:-60}
APP=build/clr/tracebench/tracebench.dll
LIB="$ROOT/build/libclrmux.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"

if ! command -v dotnet >/dev/null 2>&1; then
    echo "tracer: dotnet is not on PATH: tracer benchmark skipped"
    exit 0
fi
[ -f "$LIB" ] || { echo "tracer: build/libclrmux.so missing (make all)" >&2; exit 1; }
tests/clr/build-apps.sh >/dev/null || { echo "tracer: building the C# test apps failed" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-tbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# the ring (64 bytes per span; the default 65536 spans at least) holds two rounds: no span is dropped
BUF=$((CALLS * 2 > 65536 ? CALLS * 2 : 65536))
cat >"$WORK/loader.conf" <<EOF
[loader]
log_level = info
[child tracer]
builtin = tracer
output = /dev/null
buffer_spans = $BUF
trace = tracebench!TraceBench.Calls::Traced
EOF

env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
    CLRMUX_CONFIG="$WORK/loader.conf" CLRMUX_LOG_FILE="$WORK/clrmux.log" \
    dotnet "$APP" "$CALLS" "$ROUNDS" "$PAUSE" >"$WORK/out" 2>"$WORK/err" \
    || { echo "tracer: tracebench failed:" >&2; cat "$WORK/out" "$WORK/err" "$WORK/clrmux.log" >&2; exit 1; }

field() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" "$WORK/out"; }
plain=$(field plain_ns_per_call)
traced=$(field traced_ns_per_call)
sumline=$(grep -o 'tracer: [0-9]* method(s) rewritten.*' "$WORK/clrmux.log" || true)
nrw=$(sed -n 's/^tracer: \([0-9]*\) method(s) rewritten.*/\1/p' <<<"$sumline")
rw_us=$(sed -n 's/.*rewritten (\([0-9]*\) us each on average).*/\1/p' <<<"$sumline")
written=$(sed -n 's/.* \([0-9]*\) span(s) written.*/\1/p' <<<"$sumline")
dropped=$(sed -n 's/.* \([0-9]*\) dropped (buffer full).*/\1/p' <<<"$sumline")
if [ -z "$plain" ] || [ -z "$traced" ] || [ "$nrw" != 1 ]; then
    echo "tracer: unexpected results:" >&2; cat "$WORK/out" >&2; grep tracer "$WORK/clrmux.log" >&2; exit 1
fi
expected=$(((5 + ROUNDS) * CALLS))
added=$(awk -v t="$traced" -v p="$plain" 'BEGIN {printf "%.1f", t - p}')
ratio=$(awk -v t="$traced" -v p="$plain" 'BEGIN {printf "%.1f", t / p}')

echo "tracer: dotnet $APP $CALLS $ROUNDS $PAUSE under clrmux, tracing TraceBench.Calls::Traced only;"
echo "  median of $ROUNDS rounds of $CALLS calls each (after 5 warm-up rounds), in one process"
printf '  %-40s %8s ns\n' "untraced call (Plain)" "$plain" "traced call (Traced)" "$traced" \
    "added per span (traced - untraced)" "$added"
printf '  %-40s %8s\n' "ratio traced/untraced" "$ratio"
printf '  %-40s %8s us\n' "IL rewrite per method (shutdown log)" "$rw_us"
printf '  %-40s %8s of %s (%s dropped)\n' "spans exported" "$written" "$expected" "$dropped"
[ "${dropped:-0}" = 0 ] || echo "  note: spans were dropped (buffer full): the traced figure is then too low"
if [ -n "$SUMMARY" ]; then
    printf 'plain %s\ntraced %s\nadded %s\nratio %s\nrewrite_us %s\nwritten %s\ndropped %s\n' \
        "$plain" "$traced" "$added" "$ratio" "$rw_us" "$written" "$dropped" >"$SUMMARY"
fi
