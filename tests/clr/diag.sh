#!/usr/bin/env bash
# Real-runtime test with the .NET diagnostics tools (dotnet-trace, dotnet-counters,
# dotnet-dump: `dotnet tool install` from the NuGet source into build/diagtools, versions
# below) against an app under clrmux with both built-ins: tests/clr/apps/shapes (allocations,
# lock contention, exceptions, sleeping threads) with the tracer (a span per ShapeException
# constructed, ~1000/s) and the profiler (its EventPipe session from the start, the signal
# sampler). Per runtime, two runs:
#   seq:     dotnet-trace collect, dotnet-counters collect, dotnet-counters monitor,
#            dotnet-dump collect, dotnet-trace collect again, one after the other;
#   overlap: dotnet-trace collect and dotnet-counters collect at once, dotnet-dump collect while
#            they run; then dotnet-counters monitor and a second dotnet-trace collect at once;
#   exit:    DIAG_EXIT_RUNS (10) short runs (3 s) with dotnet-trace and dotnet-counters
#            attached as the app starts, their sessions live at its exit (the hang of issue 24
#            came from dotnet-counters' session enable during the app's first traced calls).
# (dotnet-counters collect runs 6 s at a 1 s refresh: its first rows can take 3-4 s on a loaded
# machine with three tools starting at once.)
# Checks: no hang (the app ends by itself in time; each tool ends in time: on a hang the
# test prints every thread's stack with gdb and kills the app), each tool exits 0 and its
# output is readable (the trace converts to speedscope, the CSV has System.Runtime rows,
# monitor printed counters, `dotnet-dump analyze` lists the managed threads), and clrmux's own
# output is complete (the profile reads with pprof and has cpu samples and allocation
# samples; one span per exception thrown, as the app counts them; no ERROR in the log).
# Prints one line per check and "diag: N passed, N failed".
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10 by default, CLRMUX_TEST_RUNTIMES).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export GOTOOLCHAIN=local HOME=${HOME:-/tmp}
. tests/clr/lib.sh
clr_suite diag "$@"

# CLRMUX_DIAG_LIB: another libclrmux.so (with its libclrmux_profiler.so beside it), e.g. an
# older build to measure the hang rate before a fix; DIAG_ROUNDS: the two runs, that many times
LIB=${CLRMUX_DIAG_LIB:-$ROOT/build/libclrmux.so}
ROUNDS=${DIAG_ROUNDS:-1}
# DIAG_EXIT_RUNS: the short runs with the sessions live at the app's exit, per round
EXIT_RUNS=${DIAG_EXIT_RUNS:-10}
EXIT_HANGS=0
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
TOOLS="$ROOT/build/diagtools"
VERSION=10.0.750501
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-diag.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
[ -f "$LIB" ] && [ -f "$(dirname "$LIB")/libclrmux_profiler.so" ] || { bad "build/ is incomplete (run make all)"; clr_done; }

# ---- the tools (once for all runtimes; they run on the SDK's runtime) -------------------------
for t in dotnet-trace dotnet-counters dotnet-dump; do
    if [ ! -x "$TOOLS/$t" ] || ! grep -qi "$VERSION" <<<"$(dotnet tool list --tool-path "$TOOLS" 2>/dev/null | grep -i "^$t ")"; then
        dotnet tool uninstall --tool-path "$TOOLS" "$t" >/dev/null 2>&1
        if ! dotnet tool install --tool-path "$TOOLS" "$t" --version "$VERSION" >"$WORK/install-$t.log" 2>&1; then
            bad "dotnet tool install $t $VERSION" "$(tail -n 5 "$WORK/install-$t.log")"
            clr_done
        fi
    fi
done
ok "dotnet-trace, dotnet-counters, dotnet-dump $VERSION installed"

# tool NAME TIMEOUT_S COMMAND...: one tool run; "NAME rc" appended to $RUN/tools
tool() {
    local name=$1 secs=$2
    shift 2
    timeout -k 5 "$secs" "$TOOLS/$@" </dev/null >"$RUN/$name.out" 2>&1
    echo "$name $?" >>"$RUN/tools"
}

# start NAME SECONDS: the app under clrmux; APP_PID
start() {
    RUN=$WORK/$1
    mkdir -p "$RUN"
    : >"$RUN/tools"
    {
        printf '[loader]\nlog_level = info\n'
        printf '[child tracer]\nbuiltin = tracer\noutput = spans.otlp.jsonl\ntrace = shapes!Shapes.ShapeException::.ctor\n'
        printf '[child profiler]\nbuiltin = profiler\noutput_dir = profiles\nperiod_s = 3600\neventpipe_delay_ms = 0\n'
        printf 'sampling_interval_ms = 10\nsampler = signal\n'
    } >"$RUN/loader.conf"
    (cd "$RUN" && exec env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$RUN/loader.conf" CLRMUX_LOG_FILE="$RUN/log" \
        "${DOTNET[@]}" "$CLR_APPS/shapes/shapes.dll" "$(($2 * 1000))" >"$RUN/out" 2>"$RUN/err") &
    APP_PID=$!
    sleep "${3:-1.5}" # the runtime and its diagnostics port are up
}

# finish NAME DEADLINE_S: the app must end by itself within DEADLINE_S; else its threads' stacks
finish() {
    local name=$1 deadline=$2 i rc
    for ((i = 0; i < deadline * 10; i++)); do
        kill -0 "$APP_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$APP_PID" 2>/dev/null; then
        local pid
        pid=$(pgrep -P "$APP_PID" -n 2>/dev/null || echo "$APP_PID")
        timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 25" >"$RUN/gdb.txt" 2>&1
        kill -9 "$APP_PID" "$pid" 2>/dev/null
        wait "$APP_PID" 2>/dev/null
        bad "$name: the app ends by itself (no hang)" "$(grep -E '^Thread|^#' "$RUN/gdb.txt" | head -n 80)"
        return 1
    fi
    wait "$APP_PID"
    rc=$?
    if [ $rc = 0 ] && grep -q '^shapes done' "$RUN/out"; then [ -n "${quiet:-}" ] || ok "$name: the app ends by itself (no hang), exit 0"
    else bad "$name: the app ends by itself (no hang), exit 0" "exit $rc; $(tail -n 5 "$RUN/err")"; fi
}

# outputs NAME: each tool's exit code and output, clrmux's profile and spans
outputs() {
    local name=$1 t rc f
    while read -r t rc; do
        if [ "$rc" = 0 ]; then ok "$name: $t ends in time, exit 0"
        else bad "$name: $t ends in time, exit 0" "exit $rc (124: timed out); $(tail -n 5 "$RUN/$t.out")"; fi
    done <"$RUN/tools"
    for f in "$RUN"/trace*.nettrace; do
        [ -e "$f" ] || { bad "$name: dotnet-trace wrote a trace"; continue; }
        if timeout 120 "$TOOLS/dotnet-trace" convert --format Speedscope -o "${f%.nettrace}" "$f" >"$f.convert" 2>&1 &&
            python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["profiles"] and d["shared"]["frames"]' \
                "${f%.nettrace}.speedscope.json" 2>/dev/null; then
            ok "$name: $(basename "$f") is readable (converted to speedscope, with samples)"
        else
            bad "$name: $(basename "$f") is readable (converted to speedscope, with samples)" "$(tail -n 5 "$f.convert")"
        fi
    done
    local rows
    rows=$(grep -c 'System.Runtime' "$RUN/counters.csv" 2>/dev/null)
    if [ "${rows:-0}" -ge 1 ]; then
        ok "$name: dotnet-counters collect wrote System.Runtime rows"
    else
        bad "$name: dotnet-counters collect wrote System.Runtime rows" "$(head -n 5 "$RUN/counters.csv" 2>/dev/null; tail -n 5 "$RUN/counters.out")"
    fi
    if grep -q 'System.Runtime' "$RUN/monitor.out"; then ok "$name: dotnet-counters monitor printed counters"
    else bad "$name: dotnet-counters monitor printed counters" "$(tail -n 5 "$RUN/monitor.out")"; fi
    if timeout 120 "$TOOLS/dotnet-dump" analyze "$RUN/app.dmp" -c clrthreads -c exit >"$RUN/analyze.out" 2>&1 &&
        grep -q 'ThreadCount:' "$RUN/analyze.out" && grep -q 'Finalizer' "$RUN/analyze.out"; then
        ok "$name: the dump is readable (dotnet-dump analyze: clrthreads)"
    else
        bad "$name: the dump is readable (dotnet-dump analyze: clrthreads)" "$(tail -n 8 "$RUN/analyze.out")"
    fi
    # clrmux's own output
    local top thrown spans
    top=$(go tool pprof -top -sample_index=cpu "$RUN"/profiles/*.pb.gz 2>/dev/null)
    local allocs
    allocs=$(go tool pprof -top -sample_index=alloc-samples "$RUN"/profiles/*.pb.gz 2>/dev/null)
    if grep -q 'Shapes.Cpu.SpinHot' <<<"$top" && grep -q 'Shapes.Alloc' <<<"$allocs"; then
        ok "$name: clrmux's profile is complete (cpu samples of SpinHot, allocation samples of AllocLoop)"
    else
        bad "$name: clrmux's profile is complete (cpu samples of SpinHot, allocation samples of AllocLoop)" \
            "$(ls "$RUN/profiles" 2>&1; head -n 12 <<<"$top")"
    fi
    thrown=$(sed -n 's/^.*thrown=\([0-9]*\).*$/\1/p' "$RUN/err" | tail -n 1)
    spans=$(python3 -c 'import json,sys; print(sum(len(ss["spans"]) for l in open(sys.argv[1]) for rs in json.loads(l)["resourceSpans"] for ss in rs["scopeSpans"]))' \
        "$RUN/spans.otlp.jsonl" 2>/dev/null)
    if [ -n "$thrown" ] && [ "$spans" = "$thrown" ]; then
        ok "$name: one span per exception constructed ($spans)"
    else
        bad "$name: one span per exception constructed" "spans ${spans:-none}, thrown ${thrown:-unknown}"
    fi
    if grep -q ' ERROR ' "$RUN/log"; then bad "$name: no ERROR in clrmux's log" "$(grep ' ERROR ' "$RUN/log" | head -n 5)"
    else ok "$name: no ERROR in clrmux's log"; fi
    [ "$ROUNDS" -gt 1 ] && rm -f "$RUN"/*.dmp "$RUN"/*.nettrace "$RUN"/*.speedscope.json
    return 0
}

for ((round = 1; round <= ROUNDS; round++)); do
    r=""
    [ "$ROUNDS" -gt 1 ] && r="-$round"
    # ---- in sequence ------------------------------------------------------------------------------
    start seq$r 18
    tool trace1 60 dotnet-trace collect -p "$APP_PID" --duration 00:00:00:02 -o "$RUN/trace1.nettrace"
    tool counters 60 dotnet-counters collect -p "$APP_PID" --refresh-interval 1 --duration 00:00:00:06 -o "$RUN/counters.csv"
    tool monitor 60 dotnet-counters monitor -p "$APP_PID" --duration 00:00:00:02
    tool dump 60 dotnet-dump collect -p "$APP_PID" --type Mini -o "$RUN/app.dmp"
    tool trace2 60 dotnet-trace collect -p "$APP_PID" --duration 00:00:00:02 -o "$RUN/trace2.nettrace"
    finish seq$r 60 && outputs seq$r

    # ---- overlapping ----------------------------------------------------------------------------
    # (one dotnet-counters at a time: a second one at once is refused by the app's runtime, with
    # no profiler too: "Another metrics collection session is already in progress for the
    # target process. Concurrent sessions are not supported.")
    start overlap$r 14
    tool trace1 60 dotnet-trace collect -p "$APP_PID" --duration 00:00:00:04 -o "$RUN/trace1.nettrace" &
    t1=$!
    tool counters 60 dotnet-counters collect -p "$APP_PID" --refresh-interval 1 --duration 00:00:00:06 -o "$RUN/counters.csv" &
    t2=$!
    sleep 1.5
    tool dump 60 dotnet-dump collect -p "$APP_PID" --type Mini -o "$RUN/app.dmp"
    wait "$t1" "$t2"
    tool monitor 60 dotnet-counters monitor -p "$APP_PID" --duration 00:00:00:02 &
    t3=$!
    tool trace2 60 dotnet-trace collect -p "$APP_PID" --duration 00:00:00:02 -o "$RUN/trace2.nettrace"
    wait "$t3"
    finish overlap$r 60 && outputs overlap$r

    # ---- sessions that start while the app starts (live at its exit) ----------------------------
    # (dotnet-counters' session enable loads DiagnosticSource and, holding EventListener's lock,
    # first uses ArrayPool; before the fix the tracer then made every traced method join
    # Activity.Current, whose first read initialized Activity, and with it ArrayPoolEventSource,
    # on the traced thread: the deadlock of issue 24 item 2, in 6 of 60 such runs on .NET 10
    # and 7 of 30 on .NET 9)
    for ((k = 1; k <= EXIT_RUNS; k++)); do
        start exit$r-$k 3 0.6
        tool trace 30 dotnet-trace collect -p "$APP_PID" --duration 00:00:00:02 -o "$RUN/trace.nettrace" &
        t1=$!
        sleep 0.3
        tool counters 30 dotnet-counters collect -p "$APP_PID" --refresh-interval 1 --duration 00:00:00:05 \
            -o "$RUN/counters.csv" &
        t2=$!
        quiet=1 finish exit$r-$k 30 || EXIT_HANGS=$((EXIT_HANGS + 1))
        wait "$t1" "$t2"
        rm -f "$RUN"/*.nettrace
    done
done
if [ "$EXIT_HANGS" = 0 ]; then ok "start-up attaches: $((ROUNDS * EXIT_RUNS)) short runs with dotnet-trace and dotnet-counters attached as the app starts: no hang"
else bad "start-up attaches: $EXIT_HANGS of $((ROUNDS * EXIT_RUNS)) short runs hung (dotnet-trace and dotnet-counters attached as the app starts)"; fi
clr_done
