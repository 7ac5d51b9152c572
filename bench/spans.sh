#!/usr/bin/env bash
# bench/spans.sh [--summary FILE]: clrmux's spans beside OpenTelemetry's, side by side (issue 12).
#
# 1. Cost of a span. tests/clr/otelapps/otelapp `spans CALLS ROUNDS` times three identical
#    one-line methods round after round in one process (thread CPU time, median of ROUNDS
#    after 5 warm-up rounds): Plain (never traced), Traced (traced by clrmux: the probes, the
#    Activity.Current check of a root span, spans to /dev/null) and Otel, which makes its span by
#    hand with the OpenTelemetry SDK (ActivitySource.StartActivity + Dispose, AlwaysOn sampler,
#    batch processor, an exporter that counts). One process per configuration: the tracer alone
#    (the probes without a GC transition, the default), the tracer with the built-in profiler
#    (every feature on: span labels, the join at ExecutionContext changes), the tracer with GC
#    transitions (suppress_gc_transition = false), without the join check and the agent, and
#    the first two again with the probes as native no-ops (the rewritten IL's own share).
#    Prints ns per span (the method's cost minus Plain's) and OpenTelemetry's / clrmux's.
# 2. Export. `otelapp load CALLS RATE` calls Traced CALLS times at RATE calls/s (0: full speed;
#    paced in steps of 1000 calls, the thread yielding its CPU while ahead: BENCH_PACE=spin spins)
#    with the default span buffer (262144 spans); from the tracer's shutdown log: spans written
#    and dropped, and the spans/s of the export thread (spans over its CPU time: drain, OTLP
#    JSON, write(2)), to /dev/null and to a file, and the time the export thread waited on the
#    run queue for a CPU (schedstat); as root, the 1 M/s runs again with the export thread in
#    the real-time class (chrt -f 1; BENCH_SPANS_RT=0: not run), so that it gets its CPU on a
#    busy machine.
#    Beside it, `otelapp pipeline CALLS RATE QUEUE [ENDPOINT]`:
#    the same calls with hand-made OpenTelemetry spans into the SDK's batch processor (default
#    queue of 2048, and a queue that holds every span: its drain rate), with a counting exporter,
#    then with the SDK's OTLP exporter (HTTP/protobuf) to a local sink (bench/sink.c).
# 3. The probes natively (bench/probes.c): ns per span beside the floor, each feature's share.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
CALLS=${BENCH_SPANS_CALLS:-50000}
ROUNDS=${BENCH_SPANS_ROUNDS:-21}
LOAD=${BENCH_SPANS_LOAD:-2000000}
LIB="${BENCH_SPANS_LIB:-$ROOT/build/libclrmux.so}" # BENCH_SPANS_LIB: another build's, to compare
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
command -v dotnet >/dev/null 2>&1 || { echo "spans: dotnet is not on PATH: benchmark skipped"; exit 0; }
[ -f "$LIB" ] || { echo "spans: build/libclrmux.so missing (make all)" >&2; exit 1; }
APP=build/clr/otelapp/otelapp.dll
export DOTNET_ROLL_FORWARD=Major # otelapp targets net8.0: run it on the SDK's runtime
tests/clr/build-otelapp.sh otelapp # (re)built when its sources changed
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-sbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
conf() { # conf NAME OUTPUT BUFFER extra...
    { printf '[loader]\nlog_level = info\n[child tracer]\nbuiltin = tracer\noutput = %s\nmetrics_output = /dev/null\n' "$2"
      [ -n "$3" ] && printf 'buffer_spans = %s\n' "$3"
      printf 'trace = otelapp!OtelApp.SpanBench::Traced\n'
      printf '%s\n' "${@:4}"; } >"$WORK/$1.conf"
}
run() { # run CONF args... (stdout: the app's line; the log in $WORK/CONF.log)
    rm -f "$WORK/$1.log"
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/$1.conf" CLRMUX_LOG_FILE="$WORK/$1.log" dotnet "$APP" "${@:2}"
}
f() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p"; }
BUF=$(((5 + ROUNDS) * CALLS * 2))
conf fast /dev/null "$BUF"
conf full /dev/null "$BUF" "[child profiler]" "builtin = profiler" "output_dir = $WORK/profiles"
conf slow /dev/null "$BUF" "suppress_gc_transition = false"
conf nojoin /dev/null "$BUF" "agent = false" "join_activity = false"
# the probes as native no-ops (a build of libclrmux.so with -DCLRMUX_BENCH_NOOP_PROBES, its agent
# beside it): what is left of a span is the rewritten IL's own work, the join check included
# (BENCH_SPANS_NOOP=0: not built, not run)
NOOPB=$ROOT/build/bench/noop
if [ "${BENCH_SPANS_NOOP:-1}" != 0 ] && [ -f "$ROOT/build/Clrmux.Agent.dll" ] &&
    make -s -C "$ROOT" BUILD="$NOOPB" CFLAGS="-O2 -DCLRMUX_BENCH_NOOP_PROBES" "$NOOPB/libclrmux.so" >/dev/null 2>"$WORK/noop.err"; then
    cp "$ROOT/build/Clrmux.Agent.dll" "$NOOPB/Clrmux.Agent.dll" # the agent and the profiler are found beside it
    cp "$ROOT/build/libclrmux_profiler.so" "$NOOPB/libclrmux_profiler.so"
    CONFIGS="fast full slow nojoin noop noopfull"
else
    [ "${BENCH_SPANS_NOOP:-1}" != 0 ] && echo "spans: the no-op probes' build failed: $(tail -3 "$WORK/noop.err" 2>/dev/null)" >&2
    CONFIGS="fast full slow nojoin"
fi

echo "spans: otelapp spans $CALLS $ROUNDS (median of $ROUNDS rounds, thread CPU time, one process per line)"
printf '  %-44s %9s %9s %9s %10s %10s %8s\n' "probes" "plain ns" "clrmux" "OTel SDK" "clrmux/sp" "OTel/span" "OTel/clrmux"
declare -A SP # ns per span (the method's minus Plain's), by configuration
for c in $CONFIGS; do
    lg=$c # its configuration (and log): the no-op rows run the first two with the no-op build
    lib=$LIB
    case $c in noop) lg=fast lib=$NOOPB/libclrmux.so ;; noopfull) lg=full lib=$NOOPB/libclrmux.so ;; esac
    out=$(LIB=$lib run "$lg" spans "$CALLS" "$ROUNDS")
    p=$(f plain_ns <<<"$out"); tr=$(f traced_ns <<<"$out"); o=$(f otel_ns <<<"$out")
    [ -n "$p" ] && [ -n "$tr" ] && [ -n "$o" ] || { echo "spans: unexpected output: $out" >&2; cat "$WORK/$lg.log" >&2; exit 1; }
    case $c in
    fast) label="tracer alone (no GC transition, join check)" ;;
    full) label="tracer + profiler (labels; join at EC changes)" ;;
    slow) label="tracer alone, with GC transition" ;;
    nojoin) label="tracer alone, no join check, no agent" ;;
    noop) label="tracer alone, probes as native no-ops" ;;
    *) label="tracer + profiler, probes as native no-ops" ;;
    esac
    awk -v l="$label" -v p="$p" -v t="$tr" -v o="$o" 'BEGIN { printf "  %-44s %9.2f %9.2f %9.2f %10.2f %10.2f %7.1fx\n", l, p, t, o, t - p, o - p, (o - p) / (t - p) }'
    [ -n "$SUMMARY" ] && awk -v c="$c" -v p="$p" -v t="$tr" -v o="$o" 'BEGIN { printf "span_%s %.2f %.2f %.1f\n", c, t - p, o - p, (o - p) / (t - p) }' >>"$SUMMARY"
    SP[$c]=$(awk -v p="$p" -v t="$tr" 'BEGIN { printf "%.2f", t - p }')
    [ "$c" = fast ] && fast_otel=$(awk -v p="$p" -v o="$o" 'BEGIN { printf "%.2f", o - p }')
    grep -q 'tracer: 1 method(s) rewritten' "$WORK/$lg.log" || { echo "spans: Traced was not rewritten:" >&2; cat "$WORK/$lg.log" >&2; exit 1; }
    [ "$lg" = full ] && ! grep -q "builtin profiler from" "$WORK/$lg.log" && echo "spans: ($c) the profiler did not load: $(grep -m1 'profiler' "$WORK/$lg.log")" >&2
done
echo "  (ns per call; clrmux/sp and OTel/span: the method's cost minus Plain's; OTel/clrmux: their ratio)"
echo "  (no join check: agent = false, join_activity = false: a root span does not look for an Activity or an async"
echo "   context to join; the check's share, from two processes (noisy on a shared machine): $(awk -v a="${SP[fast]}" -v b="${SP[nojoin]}" 'BEGIN { printf "%.2f", a - b }') ns)"
echo "  (tracer alone: no reader of the span labels, so the probes skip them, and a root span compares the flow's"
echo "   ExecutionContext with the empty one inline, calling the agent only when they differ; tracer + profiler:"
echo "   every feature on, the labels kept for the profiler's samples, and the agent keeps each thread's context"
echo "   current at ExecutionContext changes, so a span makes no join check; the metrics are folded by the export"
echo "   thread from the drained spans, no per-call work)"
[ -n "${SP[noop]:-}" ] && echo "  (probes as native no-ops: the rewritten IL's own share of a span, tracer alone ${SP[noop]} ns, with the profiler ${SP[noopfull]:-?} ns)"
# The time source's cost on this machine (bench/clocks.c) beside the span costs just measured:
# two TSC reads are the floor under a span timed as the probes time it.
if command -v gcc >/dev/null 2>&1 && gcc -std=c11 -D_GNU_SOURCE -O2 -o "$WORK/clocks" bench/clocks.c; then
    echo
    echo "clocks: ns per read on this machine (bench/clocks.c, thread CPU time, best of 5 x 2M)"
    cw=$("$WORK/clocks" | tee "$WORK/clocks.out" | tail -1)
    head -n -1 "$WORK/clocks.out"
    fl=$(f span_floor <<<"$cw")
    if [ -n "$fl" ]; then
        awk -v fl="$fl" -v t="${SP[fast]}" -v o="$fast_otel" 'BEGIN { printf "  clrmux/sp %.2f ns = the floor %.2f + %.2f ns; OTel/span / floor = %.1fx: the best ratio a TSC-timed span could show in this run\n", t, fl, t - fl, o / fl }'
        [ -n "${SP[full]:-}" ] && awk -v fl="$fl" -v t="${SP[full]}" 'BEGIN { printf "  clrmux/sp with the profiler (every feature on) %.2f ns = the floor %.2f + %.2f ns\n", t, fl, t - fl }'
        [ -n "$SUMMARY" ] && echo "span_floor $fl $(f rdtsc <<<"$cw") $(f clock_monotonic <<<"$cw")" >>"$SUMMARY"
    fi
fi
# The probes' native cost beside the floor, and each feature's share (bench/probes.c): the
# probes built as libclrmux.so builds them, and without one feature each, timed in turn in one
# process with the floor.
PSRCS="$(echo src/tracer/spans*.c) src/tracer/usdt.c src/common/platform_posix.c" # the probes' files, as they are split
PCF="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -Isrc -g -fPIC -pthread -O2 -fno-omit-frame-pointer"
PB=build/bench
mkdir -p "$PB"
# shellcheck disable=SC2086
if command -v gcc >/dev/null 2>&1 &&
    gcc $PCF -shared -o "$PB/libprobes_full.so" $PSRCS -ldl &&
    gcc $PCF -shared -DCLRMUX_BENCH_NO_LABELS -o "$PB/libprobes_nolabels.so" $PSRCS -ldl &&
    gcc $PCF -shared -DCLRMUX_NO_USDT -o "$PB/libprobes_nousdt.so" $PSRCS -ldl &&
    gcc $PCF -shared -DCLRMUX_NO_USDT -DCLRMUX_BENCH_NO_LABELS -o "$PB/libprobes_bare.so" $PSRCS -ldl &&
    gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -Isrc -o "$PB/probes" bench/probes.c -ldl; then
    echo
    echo "probes: ns per span natively (clrmux_span_enter_fast + clrmux_span_exit; bench/probes.c, thread CPU time,"
    echo "  median of ${BENCH_PROBES_ROUNDS:-21} rounds of 200000, the builds and the floor in turn in one process)"
    pout=$("$PB/probes" "${BENCH_PROBES_ROUNDS:-21}" 200000 "full=$ROOT/$PB/libprobes_full.so" \
        "nolabels=$ROOT/$PB/libprobes_nolabels.so" "nousdt=$ROOT/$PB/libprobes_nousdt.so" "bare=$ROOT/$PB/libprobes_bare.so")
    grep -v '^probes_summary' <<<"$pout"
    pfull=$(sed -n 's/^probes_summary floor=\([0-9.]*\) full=\([0-9.]*\).*/\1 \2/p' <<<"$pout")
    echo "  (the metrics of a recorded span are counted by the export thread as it drains it: no per-call work)"
    [ -n "$SUMMARY" ] && grep '^probes_summary' <<<"$pout" >>"$SUMMARY"
fi
echo
echo "export: otelapp load $LOAD RATE, tracing Traced, default buffer_spans (262144): one export thread"
printf '  %-30s %12s %12s %12s %16s %14s\n' "output, rate" "calls/s" "written" "dropped" "export spans/s" "CPU wait ms"
conf devnull /dev/null ""
conf file "$WORK/spans.jsonl" ""
# the 1 M/s runs again with the export thread (named clrmux-export) in the real-time class
# (chrt -f 1, root only; BENCH_SPANS_RT=0: not run): it gets a CPU as soon as it wakes on a
# busy machine, so what it drops then is what it cannot keep up with. It sleeps on a futex
# between drains, so it takes only the CPU it needs.
run_rt() { # run_rt CONF args...: run, with the export thread switched to SCHED_FIFO 1
    rm -f "$WORK/$1.log"
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/$1.conf" CLRMUX_LOG_FILE="$WORK/$1.log" dotnet "$APP" "${@:2}" >"$WORK/rt.out" &
    local pid=$! i t
    for ((i = 0; i < 500; i++)); do
        for t in /proc/$pid/task/*; do
            [ "$(cat "$t/comm" 2>/dev/null)" = clrmux-export ] && chrt -f -p 1 "${t##*/}" && break 2
        done
        sleep 0.005
    done
    [ "$i" -lt 500 ] || echo "spans: the export thread was not found: not raised" >&2
    wait "$pid"
    cat "$WORK/rt.out"
}
declare -A ex # run -> written dropped export-spans/s (the summary)
runs="devnull:1000000 devnull:0 file:1000000 file:0"
[ "$(id -u)" = 0 ] && [ "${BENCH_SPANS_RT:-1}" != 0 ] && command -v chrt >/dev/null 2>&1 &&
    runs="$runs devnull:1000000:rt file:1000000:rt"
for r in $runs; do
    o=${r%%:*}; rate=${r#*:}; rate=${rate%%:*}
    rt=; [ "${r##*:}" = rt ] && rt=1
    rm -f "$WORK/spans.jsonl"
    if [ -n "$rt" ]; then out=$(run_rt "$o" load "$LOAD" "$rate"); else out=$(run "$o" load "$LOAD" "$rate"); fi
    cps=$(f calls_per_s <<<"$out")
    line=$(grep -o 'span(s) written to .*' "$WORK/$o.log" | head -1)
    w=$(grep -o 'rewritten.* \([0-9]*\) span(s) written' "$WORK/$o.log" | sed 's/.* \([0-9]*\) span(s) written/\1/')
    d=$(sed -n 's/.* \([0-9]*\) dropped (buffer full).*/\1/p' "$WORK/$o.log" | head -1)
    eps=$(sed -n 's/.*CPU time (\([0-9]*\) spans\/s).*/\1/p' "$WORK/$o.log" | head -1)
    wt=$(sed -n 's/.*waited \([0-9.]*\) ms for a CPU.*/\1/p' "$WORK/$o.log" | head -1)
    [ -n "$line" ] || { echo "spans: no shutdown line:" >&2; cat "$WORK/$o.log" >&2; exit 1; }
    label="$([ "$o" = devnull ] && echo /dev/null || echo file), $([ "$rate" = 0 ] && echo "full speed" || echo "1 M/s")"
    [ -n "$rt" ] && label="$label, export RT"
    printf '  %-30s %12s %12s %12s %16s %14s\n' "$label" "$cps" "$w" "$d" "$eps" "${wt:-?}"
    ex["$r"]="$w ${d:-0} $eps"
    [ -n "$SUMMARY" ] && echo "export_${o}_$rate${rt:+_rt} $cps $w $d $eps ${wt:-?}" >>"$SUMMARY"
done
echo "  (export spans/s: spans over the export thread's CPU time; CPU wait: its time on the run queue)"
echo "  (load average now: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"
echo
echo "OpenTelemetry SDK: otelapp pipeline $LOAD RATE QUEUE (hand-made spans, batch processor, counting exporter)"
printf '  %-30s %12s %12s %12s %16s\n' "queue, rate" "calls/s" "exported" "dropped" "exported/s"
for q in 2048 "$LOAD"; do
    for rate in 1000000 0; do
        out=$(dotnet "$APP" pipeline "$LOAD" "$rate" "$q")
        label="queue $q, $([ "$rate" = 0 ] && echo "full speed" || echo "1 M/s")"
        printf '  %-30s %12s %12s %12s %16s\n' "$label" "$(f calls_per_s <<<"$out")" "$(f exported <<<"$out")" \
            "$(f dropped <<<"$out")" "$(f exported_per_s <<<"$out")"
        [ -n "$SUMMARY" ] && echo "otel_${q}_$rate $(f calls_per_s <<<"$out") $(f exported <<<"$out") $(f dropped <<<"$out") $(f exported_per_s <<<"$out")" >>"$SUMMARY"
    done
done
echo "  (exported/s: spans exported over the time from the first call to the end of ForceFlush)"
# The SDK's OTLP exporter (HTTP/protobuf) to a local sink (bench/sink.c: reads each request and
# answers 200), through the same batch processor: the SDK's encoding and sending, as clrmux's
# rows above include its encoding and writing.
if command -v gcc >/dev/null 2>&1 && gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o "$WORK/sink" bench/sink.c; then
    "$WORK/sink" "$WORK/sinkport" 600 >"$WORK/sink.out" &
    SINK_PID=$!
    for _ in $(seq 100); do [ -s "$WORK/sinkport" ] && break; sleep 0.1; done
    if [ -s "$WORK/sinkport" ]; then
        echo
        echo "OpenTelemetry SDK: otelapp pipeline $LOAD RATE QUEUE ENDPOINT (batch processor, OTLP exporter, HTTP/protobuf to a local sink)"
        printf '  %-30s %12s %12s %12s %16s\n' "queue, rate" "calls/s" "exported" "dropped" "exported/s"
        for q in 2048 "$LOAD"; do
            for rate in 1000000 0; do
                out=$(dotnet "$APP" pipeline "$LOAD" "$rate" "$q" "http://127.0.0.1:$(cat "$WORK/sinkport")")
                label="queue $q, $([ "$rate" = 0 ] && echo "full speed" || echo "1 M/s")"
                printf '  %-30s %12s %12s %12s %16s\n' "$label" "$(f calls_per_s <<<"$out")" "$(f exported <<<"$out")" \
                    "$(f dropped <<<"$out")" "$(f exported_per_s <<<"$out")"
                [ -n "$SUMMARY" ] && echo "otlp_${q}_$rate $(f calls_per_s <<<"$out") $(f exported <<<"$out") $(f dropped <<<"$out") $(f exported_per_s <<<"$out")" >>"$SUMMARY"
                [ "$q" = "$LOAD" ] && [ "$rate" = 0 ] && otlp_eps=$(f exported_per_s <<<"$out")
            done
        done
        echo "  (calls/s below the rate: the SDK's span and its export took the app's thread's CPU)"
    fi
    kill "$SINK_PID" 2>/dev/null
    wait "$SINK_PID" 2>/dev/null
fi
# Each goal's figure beside its anchor (issue 27), from the runs above.
echo
echo "summary: each figure beside its anchor (issue 27's goals)"
if [ -n "${fl:-}" ] && [ -n "${SP[fast]:-}" ]; then
    awk -v fl="$fl" -v t="${SP[fast]}" -v o="$fast_otel" 'BEGIN { printf "  span in the app, tracer alone: %.2f ns = the floor %.2f + %.2f ns (goal: + 8 at most); OpenTelemetry'"'"'s span %.2f ns (%.1fx)\n", t, fl, t - fl, o, o / t }'
    [ -n "${SP[full]:-}" ] && awk -v fl="$fl" -v t="${SP[full]}" 'BEGIN { printf "  span in the app, tracer + profiler (every feature on): %.2f ns = the floor %.2f + %.2f ns (goal: + 8 at most)\n", t, fl, t - fl }'
    [ -n "${SP[noop]:-}" ] && echo "  of which the rewritten IL's own work (probes as native no-ops): ${SP[noop]} ns alone, ${SP[noopfull]:-?} ns with the profiler"
fi
if [ -n "${pfull:-}" ]; then
    awk -v p="$pfull" 'BEGIN { split(p, a, " "); printf "  span natively (bench/probes.c): %.2f ns = the floor %.2f + %.2f ns\n", a[2], a[1], a[2] - a[1] }'
fi
if [ -n "${ex[file:1000000]:-}" ]; then
    read -r fw fd fe <<<"${ex[file:1000000]}"
    read -r _ _ ne <<<"${ex[devnull:1000000]:-0 0 0}"
    awk -v w="$fw" -v d="$fd" -v fe="$fe" -v ne="$ne" -v n="$LOAD" -v o="${otlp_eps:-}" 'BEGIN {
        printf "  export at 1 M/s to a file: %d written, %d dropped of %d calls (goal: 0 dropped, normal priority)\n", w, d, n
        printf "  export thread: %.2f M spans/s of its CPU to a file, %.2f M/s to /dev/null", fe / 1e6, ne / 1e6
        if (o != "" && o > 0) printf "; OpenTelemetry'"'"'s batch processor + OTLP exporter to a local sink %.2f M spans/s (file / OTLP: %.1fx)", o / 1e6, fe / o
        printf "\n" }'
fi
