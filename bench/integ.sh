#!/usr/bin/env bash
# bench/integ.sh: the cost of a bytecode integration (docs/integrations.md) per call. The same
# Microsoft.Data.Sqlite `SELECT 42` ExecuteScalar on an in-memory database (tests/clr/otelapps/
# dbapp, sqlite-bench: the best of 5 timings of N calls, after 20000 warm-up calls), run side by
# side in one run, alternating, BENCH_INTEG_ROUNDS times, the median of each printed:
#   none      without clrmux
#   tracer    under clrmux, the tracer on, instrument = none (no integration: the method untouched)
#   adonet    under clrmux, the shipped Microsoft.Data.Sqlite definition (a CLIENT span per call
#             with db.system.name, db.query.text sanitized, db.namespace, operation, table)
# and the integration's cost per call (adonet - tracer). Not a test: nothing passes or fails.
#   bench/integ.sh [N]      (default 20000 calls per timing)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
N=${1:-20000}
ROUNDS=${BENCH_INTEG_ROUNDS:-5}
tests/clr/build-otelapp.sh dbapp || exit 1
W=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-integ.XXXXXX")
trap 'rm -rf "$W"' EXIT
printf '[child tracer]\nbuiltin = tracer\noutput = /dev/null\ninstrument = none\n' >"$W/tracer.conf"
printf '[child tracer]\nbuiltin = tracer\noutput = /dev/null\nbuffer_spans = 1048576\n' >"$W/adonet.conf"
one() { # one CONFIG: ns per call
    if [ "$1" = none ]; then
        dotnet build/clr/dbapp/dbapp.dll sqlite-bench "$N"
    else
        env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}" \
            CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" CLRMUX_CONFIG="$W/$1.conf" CLRMUX_LOG_FILE="$W/$1.log" \
            dotnet build/clr/dbapp/dbapp.dll sqlite-bench "$N"
    fi | sed -n 's/^ns_per_call //p'
}
for r in $(seq 1 "$ROUNDS"); do
    for c in none tracer adonet; do
        one $c >>"$W/$c.ns"
    done
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
none=$(median "$W/none.ns") tracer=$(median "$W/tracer.ns") adonet=$(median "$W/adonet.ns")
echo "integ: Microsoft.Data.Sqlite ExecuteScalar, median of $ROUNDS rounds (best of 5 x $N calls each):"
echo "  without clrmux               $none ns/call"
echo "  tracer, no integration       $tracer ns/call ($(awk -v a="$tracer" -v b="$none" 'BEGIN{printf "%.2f", a/b}')x)"
echo "  tracer, the sqlite definition $adonet ns/call ($(awk -v a="$adonet" -v b="$none" 'BEGIN{printf "%.2f", a/b}')x);" \
     "the integration costs $((adonet - tracer)) ns per call"
