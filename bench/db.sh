#!/usr/bin/env bash
# bench/db.sh: issue 23's figures, side by side in one run (not a test: nothing passes or fails).
#   1. A PostgreSQL call: Npgsql `SELECT 42` ExecuteScalar on one open connection to a real
#      PostgreSQL on loopback (started as tests/clr/servers.sh starts it, stopped at the end), ns
#      per call (tests/clr/otelapps/dbbench: best of 5 timings of N calls after N warm-up calls):
#        none     no profiler, no SDK
#        clrmux   under clrmux's tracer: Npgsql's ActivitySource recorded by the agent, completed
#                 by its DB enrichment, OTLP/HTTP protobuf to a local sink (bench/sink.c)
#        sdk      no profiler: the OpenTelemetry SDK 1.20.1 with Npgsql.OpenTelemetry's AddNpgsql()
#                 (Npgsql's source through the SDK), AlwaysOn, batch processor, OTLP exporter
#                 (HTTP/protobuf) to the same sink
#   2. A bytecode integration's attribute capture: Microsoft.Data.Sqlite `SELECT 42` on an
#      in-memory database (no source of its own), ns per call:
#        none     no profiler
#        tracer   under clrmux, instrument = none (the method untouched)
#        adonet   under clrmux, the shipped Microsoft.Data.Sqlite definition (a CLIENT span with
#                 db.system.name, db.query.text sanitized, db.namespace, operation, table)
#   3. Recording alone: an Activity of a source named Npgsql with the tags Npgsql 10 gives a
#      command, started and stopped in a loop, no database (dbbench act), ns per Activity,
#      for each N of BENCH_DB_ACT (default "2000 100000": the first ~12 000 spans of a process,
#      while the code on their path is still tier 0, and steady state): clrmux, sdk and, with
#      BENCH_DB_BASE, clrmux-base (OTLP to the same sink as part 1).
# A breakdown of clrmux's cost adds, with BENCH_DB_CONFIGS (default "none clrmux sdk"):
#        clrmux-nosrc   activity_sources = none: clrmux and its agent loaded, Npgsql's source not
#                       recorded (what being there costs)
#        clrmux-file    spans to /dev/null instead of OTLP/HTTP (the export's share)
#        clrmux-raw     sanitize_queries = false (the statement's sanitising share)
#        clrmux-base    the clrmux configuration with another build's libclrmux.so (and the
#                       Clrmux.Agent.dll and libclrmux_otlp.so beside it) from the folder
#                       BENCH_DB_BASE: a change measured side by side with what it changes
# Rounds alternate the configurations; the medians are printed with the ratios and each one's
# cost per call over `none` (part 1) or over `tracer` (part 2).
#   bench/db.sh [PG_CALLS [SQLITE_CALLS]]   (defaults 10000 and 20000: with 2000 Npgsql calls the agent's
#   span path was still tier-0 code for the whole run, a warm-up figure; knob BENCH_DB_ROUNDS, 5)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
NPG=${1:-10000}
NSQ=${2:-20000}
ROUNDS=${BENCH_DB_ROUNDS:-5}
CONFIGS=${BENCH_DB_CONFIGS:-none clrmux sdk}
LIB=$ROOT/build/libclrmux.so
for f in "$LIB" build/libclrmux_otlp.so build/Clrmux.Agent.dll; do
    [ -f "$f" ] || { echo "db: $f is missing (run make all)" >&2; exit 1; }
done
tests/clr/build-otelapp.sh dbbench || exit 1
APP=build/clr/dbbench/dbbench.dll
W=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-dbbench.XXXXXX")
. tests/clr/servers.sh
servers_start pg
SINKPID=""
trap '[ -n "$SINKPID" ] && kill $SINKPID 2>/dev/null; servers_stop; rm -rf "$W"' EXIT

gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$W/sink" bench/sink.c || exit 1
"$W/sink" "$W/sinkport" 3600 >"$W/sink.out" &
SINKPID=$!
for _ in $(seq 100); do [ -s "$W/sinkport" ] && break; sleep 0.1; done
SINK=http://127.0.0.1:$(cat "$W/sinkport")
conf() { printf '[child tracer]\nbuiltin = tracer\nservice_name = dbbench\n%s\n' "$1" >"$W/$2.conf"; }
conf "endpoint = $SINK/v1/traces
protocol = http/protobuf
buffer_spans = 1048576" clrmux
conf "endpoint = $SINK/v1/traces
activity_sources = none" clrmux-nosrc
conf "output = /dev/null
buffer_spans = 1048576" clrmux-file
conf "endpoint = $SINK/v1/traces
buffer_spans = 1048576
sanitize_queries = false" clrmux-raw
cp "$W/clrmux.conf" "$W/clrmux-base.conf"
conf "output = /dev/null
instrument = none" tracer
conf "output = /dev/null
buffer_spans = 1048576" adonet

one() { # one CONFIG ARGS...: ns per call
    local c=$1
    shift
    case $c in
    none | sdk) dotnet "$APP" "$@" 2>"$W/$c.err" ;;
    *) local lib=$LIB
        [ "$c" = clrmux-base ] && lib=${BENCH_DB_BASE:?clrmux-base needs BENCH_DB_BASE (a folder with a libclrmux.so)}/libclrmux.so
        env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}" \
        CORECLR_PROFILER_PATH="$lib" CLRMUX_CONFIG="$W/$c.conf" CLRMUX_LOG_FILE="$W/$c.log" \
        dotnet "$APP" "$@" 2>"$W/$c.err" ;;
    esac | sed -n 's/^ns_per_call //p'
}
median() { [ -s "$1" ] && sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "-" }'; }

if [ -n "${CLRMUX_PG_PORT:-}" ]; then
    for r in $(seq 1 "$ROUNDS"); do
        for c in none clrmux sdk $CONFIGS; do
            [ -f "$W/pg-$c.round$r" ] && continue
            touch "$W/pg-$c.round$r"
            if [ $c = sdk ]; then
                one sdk pg-sdk "$CLRMUX_PG_PORT" "$NPG" "$SINK" >>"$W/pg-sdk.ns"
            else
                one $c pg "$CLRMUX_PG_PORT" "$NPG" >>"$W/pg-$c.ns"
            fi
        done
    done
    none=$(median "$W/pg-none.ns") clr=$(median "$W/pg-clrmux.ns") sdk=$(median "$W/pg-sdk.ns")
    if [ -n "$none" ] && [ -n "$clr" ] && [ -n "$sdk" ]; then
        echo "db: Npgsql ExecuteScalar against PostgreSQL on loopback, median of $ROUNDS rounds (best of 5 x $NPG calls each):"
        echo "  without tracing                       $none ns/call"
        echo "  clrmux (Npgsql's source, OTLP)        $clr ns/call ($(ratio "$clr" "$none")x): +$((clr - none)) ns per call"
        echo "  OpenTelemetry SDK + AddNpgsql (OTLP)  $sdk ns/call ($(ratio "$sdk" "$none")x): +$((sdk - none)) ns per call"
        for c in $CONFIGS; do
            case $c in none | clrmux | sdk) continue ;; esac
            v=$(median "$W/pg-$c.ns")
            [ -n "$v" ] && printf '  %-37s %s ns/call (%sx): +%s ns per call\n' "$c" "$v" "$(ratio "$v" "$none")" $((v - none))
        done
        echo "  SDK / clrmux, cost per call: $(ratio $((sdk - none)) $((clr - none)))x; time per call: $(ratio "$sdk" "$clr")x"
        grep -h 'spans' "$W/clrmux.log" 2>/dev/null | tail -2 | sed 's/^/  clrmux log (last round): /'
        echo "  sink: $(kill -TERM $SINKPID 2>/dev/null; wait $SINKPID 2>/dev/null; tr '\n' ' ' <"$W/sink.out")"
        SINKPID=""
    else
        echo "db: a PostgreSQL configuration printed nothing:"
        tail -5 "$W"/*.err
    fi
else
    echo "##########################################################################"
    echo "## db: PostgreSQL did not start: no PostgreSQL figures (scripts/setup.sh test installs it)"
    echo "##########################################################################"
fi

ACTS=${BENCH_DB_ACT:-2000 100000}
ACTC="clrmux sdk"
[ -n "${BENCH_DB_BASE:-}" ] && ACTC="clrmux clrmux-base sdk"
if [ -n "$ACTS" ]; then
    [ -n "$SINKPID" ] && kill $SINKPID 2>/dev/null # part 1's, when PostgreSQL did not start
    "$W/sink" "$W/sinkport2" 3600 >/dev/null &
    SINKPID=$!
    for _ in $(seq 100); do [ -s "$W/sinkport2" ] && break; sleep 0.1; done
    SINK2=http://127.0.0.1:$(cat "$W/sinkport2")
    sed -i "s|^endpoint = .*|endpoint = $SINK2/v1/traces|" "$W/clrmux.conf" "$W/clrmux-base.conf"
    for r in $(seq 1 "$ROUNDS"); do
        for n in $ACTS; do
            for c in $ACTC; do
                if [ $c = sdk ]; then
                    one sdk act-sdk "$n" "$SINK2" >>"$W/act$n-$c.ns"
                else
                    one $c act "$n" >>"$W/act$n-$c.ns"
                fi
            done
        done
    done
    kill $SINKPID 2>/dev/null
    wait $SINKPID 2>/dev/null
    SINKPID=""
    echo "db: an Npgsql-like Activity recorded, no database, median of $ROUNDS rounds (best of 5 x N after N):"
    for n in $ACTS; do
        line="  N=$n:"
        for c in $ACTC; do
            line="$line $c $(median "$W/act$n-$c.ns") ns"
        done
        echo "$line"
    done
fi

for r in $(seq 1 "$ROUNDS"); do
    for c in none tracer adonet; do
        one $c sqlite "$NSQ" >>"$W/sq-$c.ns"
    done
done
none=$(median "$W/sq-none.ns") tracer=$(median "$W/sq-tracer.ns") adonet=$(median "$W/sq-adonet.ns")
echo "db: Microsoft.Data.Sqlite ExecuteScalar (bytecode integration), median of $ROUNDS rounds (best of 5 x $NSQ calls each):"
echo "  without clrmux                 $none ns/call"
echo "  tracer, no integration         $tracer ns/call ($(ratio "$tracer" "$none")x)"
echo "  tracer, the sqlite definition  $adonet ns/call ($(ratio "$adonet" "$none")x): the integration costs $((adonet - tracer)) ns per call"
