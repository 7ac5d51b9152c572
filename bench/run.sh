#!/usr/bin/env bash
# bench/run.sh (make bench): clrmux's benchmarks, each printing ratios measured side by side
# in this one run. Not a timed test: nothing passes or fails on speed. See bench/README.md.
#
#   1. dispatch: ns per callback through clrmux (k = 1, 2, 4, 8 no-op children) vs directly
#      on one no-op child, in-process (bench/dispatch.c)
#   2. callgrind (if valgrind is installed): instructions per dispatched callback
#   3. startup: median wall time of a hello-world .NET app (bench/startup.sh)
#   4. tracer: ns per traced vs untraced call, ns per span, IL rewrite time (bench/tracer.sh)
#   5. profiler: throughput, ops per CPU-second, CPU share and peak RSS with/without (bench/profiler.sh)
#   6. sampler: no profiler vs suspend vs signal sampler vs dotnet-trace's SampleProfiler beside
#      200 blocked threads: throughput, longest gaps, delivered samples (bench/sampler.sh)
#   7. elt: ns per enter/leave-hooked call, one ELT child alone vs under clrmux, and three (bench/elt.sh)
#   8. otel: ns per traced call with/without Activity.Current, sample_ratio 1.0 vs 0.01 (bench/otel.sh)
#   9. notify: ns per callback per extra child, clrmux vs CORECLR_NOTIFICATION_PROFILERS (bench/notify.sh)
#  10. exceptions: CPU per caught exception with the loader's unhandled-exception watch
#      (bench/exceptions.sh)
#  11. spans: a span beside a hand-made OpenTelemetry SDK span; the exporter's spans/s and drops
#      at 1 M/s and full speed beside the SDK's batch processor (bench/spans.sh)
#  12. usdt: a span with the USDT probes' semaphores off beside the span without USDT sites
#      (bench/usdt.sh)
#
# Knobs (environment): BENCH_N (millions of calls per timing, default 10), BENCH_ROUNDS (5),
# BENCH_CG_N (calls per callgrind run, 200000), BENCH_STARTUP_RUNS (10), BENCH_STARTUP_MASK,
# BENCH_TRACE_CALLS (calls per round, 50000), BENCH_TRACE_ROUNDS (40), BENCH_TRACE_PAUSE_MS (60).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${BENCH_N:-10}
ROUNDS=${BENCH_ROUNDS:-5}
CG_N=${BENCH_CG_N:-200000}

for f in build/libclrmux.so build/fake/libnoop.so build/fake/librecorder.so; do
    [ -f "$f" ] || { echo "bench: $f missing: run 'make all' (or 'make bench')" >&2; exit 1; }
done
mkdir -p build/bench
BIN=build/bench/dispatch
gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -o "$BIN" bench/dispatch.c -ldl -lpthread
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== 1. dispatch cost, in-process ($BIN -n $N -r $ROUNDS table)"
"$BIN" -n "$N" -r "$ROUNDS" --summary "$WORK/dispatch.sum" table
echo

echo "== 2. instructions per dispatched callback (callgrind)"
if command -v valgrind >/dev/null 2>&1; then
    # Ir counted only inside loop_thread / loop_inline (--toggle-collect), for N calls minus
    # the same run with 0 calls, divided by N.
    # The harness calls at once after Initialize, as the runtime does (BENCH_DISPATCH_AT_ONCE:
    # no wait for clrmux's membarrier(2) registration, which its own thread makes meanwhile).
    # k1nomb: k1 with membarrier(2) failing (bench/nomembarrier.c, LD_PRELOAD), as under a
    # seccomp filter that leaves it out: a child that may detach then goes the long way.
    gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -shared -fPIC -o "$WORK/nomembarrier.so" bench/nomembarrier.c -ldl
    ir() { # ir CONFIG CB CALLS
        local out="$WORK/cg.$1.$2.$3" cfg=$1 pre=
        [ "$cfg" = k1nomb ] && cfg=k1 pre="$WORK/nomembarrier.so"
        env BENCH_DISPATCH_AT_ONCE=1 ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --toggle-collect="loop_$2" --callgrind-out-file="$out" \
            "$BIN" one "$cfg" "$2" "$3" >/dev/null 2>"$out.err" \
            || { echo "bench: callgrind run failed:" >&2; cat "$out.err" >&2; exit 1; }
        awk '/^(summary|totals):/ {print $2; exit}' "$out"
    }
    # k1/k4s1/k8: children that may detach (clrmux counts each call in for evacuation);
    # k1p/k4s1p/k8p: the subscribed children also ask for an immutable flag, so they can never
    # detach and a sole subscriber is called directly (a tail call)
    printf '%-14s %-34s %11s %12s %16s\n' callback configuration "instr/call" "vs direct" "ratio vs direct"
    for cb in thread inline; do
        name=$([ "$cb" = thread ] && echo ThreadCreated || echo JITInlining)
        base=
        for cfg in direct:"direct (1 child, no clrmux)" k1:"clrmux k=1" k1p:"clrmux k=1, never detaches" \
                   k4s1:"clrmux k=4, 1 subscribed" k4s1p:"clrmux k=4, 1 subscr., never det." \
                   k8:"clrmux k=8" k8p:"clrmux k=8, never detach" \
                   k2r:"clrmux k=2 s1, ENABLE_REJIT x2" k1nomb:"clrmux k=1, no membarrier(2)"; do
            key=${cfg%%:*} label=${cfg#*:}
            a=$(ir "$key" "$cb" 0)
            b=$(ir "$key" "$cb" "$CG_N")
            per=$(awk -v a="$a" -v b="$b" -v n="$CG_N" 'BEGIN {printf "%.1f", (b - a) / n}')
            [ -z "$base" ] && base=$per
            extra=$(awk -v p="$per" -v d="$base" 'BEGIN {printf "%+.1f", p - d}')
            ratio=$(awk -v p="$per" -v d="$base" 'BEGIN {printf "%.2f", p / d}')
            printf '%-14s %-34s %11s %12s %16s\n' "$name" "$label" "$per" "$extra" "$ratio"
            echo "$cb $key $per $ratio $extra" >>"$WORK/cg.sum"
        done
    done
    echo "(N = $CG_N calls per run; Ir(N) - Ir(0) inside the dispatch loop, / N)"
else
    echo "valgrind is not installed: skipped"
fi
echo

echo "== 3. start-up of a hello-world app (bench/startup.sh)"
bench/startup.sh --summary "$WORK/startup.sum" "${BENCH_STARTUP_RUNS:-10}"
echo

echo "== 4. cost of a traced call (bench/tracer.sh)"
bench/tracer.sh --summary "$WORK/tracer.sum"
echo

echo "== 5. the built-in profiler on a CPU-bound app (bench/profiler.sh)"
bench/profiler.sh
echo

echo "== 6. samplers side by side: none, suspend, signal, dotnet-trace (bench/sampler.sh)"
bench/sampler.sh
echo

echo "== 7. enter/leave hooks (bench/elt.sh)"
bench/elt.sh --summary "$WORK/elt.sum"
echo
echo "== 8. traced calls with/without a current Activity, sampling 1.0 / 0.01 (bench/otel.sh)"
bench/otel.sh
echo

echo "== 9. clrmux vs the runtime's notification profilers, callback-heavy app (bench/notify.sh)"
bench/notify.sh --summary "$WORK/notify.sum"
echo

echo "== 10. caught exceptions under the unhandled-exception watch (bench/exceptions.sh)"
bench/exceptions.sh --summary "$WORK/exc.sum"
echo
echo "== 11. clrmux's spans beside OpenTelemetry's: cost, export, drops (bench/spans.sh)"
bench/spans.sh --summary "$WORK/spans.sum"
echo
echo "== 12. the USDT probes while no tool is attached (bench/usdt.sh)"
bench/usdt.sh --summary "$WORK/usdt.sum"
echo

# ---- summary ----------------------------------------------------------------------------------
get() { awk -v a="$2" -v b="$3" -v f="$4" '$1 == a && $2 == b {print $f}' "$1" 2>/dev/null; }
echo "== summary (ratios are clrmux / direct unless stated)"
printf '%-34s %12s %12s %12s %12s\n' "" direct "clrmux k=1" "clrmux k=2" "clrmux k=4" 
for cb in thread inline; do
    name=$([ "$cb" = thread ] && echo ThreadCreated || echo JITInlining)
    printf '%-34s %12s %12s %12s %12s   (k=8: %s ns, x%s)\n' "$name ns/call" \
        "$(get "$WORK/dispatch.sum" $cb direct 3)" "$(get "$WORK/dispatch.sum" $cb k1 3)" \
        "$(get "$WORK/dispatch.sum" $cb k2 3)" "$(get "$WORK/dispatch.sum" $cb k4 3)" \
        "$(get "$WORK/dispatch.sum" $cb k8 3)" "$(get "$WORK/dispatch.sum" $cb k8 4)"
    printf '%-34s %12s %12s %12s %12s\n' "$name ratio" "1.00" \
        "$(get "$WORK/dispatch.sum" $cb k1 4)" "$(get "$WORK/dispatch.sum" $cb k2 4)" "$(get "$WORK/dispatch.sum" $cb k4 4)"
    if [ -f "$WORK/cg.sum" ]; then
        printf '%-34s %12s %12s %12s %12s   (k=1 never detaching: %s, %s; k=4 with 1 subscribed: %s; k=8: %s)\n' \
            "$name instr/call" "$(get "$WORK/cg.sum" $cb direct 3)" "$(get "$WORK/cg.sum" $cb k1 3)" "-" "-" \
            "$(get "$WORK/cg.sum" $cb k1p 3)" "$(get "$WORK/cg.sum" $cb k1p 5)" "$(get "$WORK/cg.sum" $cb k4s1 3)" \
            "$(get "$WORK/cg.sum" $cb k8 3)"
    fi
done
if [ -f "$WORK/startup.sum" ]; then
    s() { awk -v k="$1" '$1 == k {print $2}' "$WORK/startup.sum"; }
    printf 'hello start-up, median of %s: none %s ms, clrmux %s ms, direct %s ms; clrmux/none %s, clrmux/direct %s (CPU %s); with tracer + profiler %s ms, /direct %s (CPU %s)\n' \
        "$(s runs)" "$(s none)" "$(s clrmux)" "$(s direct)" "$(s clrmux/none)" "$(s clrmux/direct)" \
        "$(s cpu_clrmux/direct)" "$(s full)" "$(s full/direct)" "$(s cpu_full/direct)"
fi
if [ -f "$WORK/tracer.sum" ]; then
    t() { awk -v k="$1" '$1 == k {print $2}' "$WORK/tracer.sum"; }
    printf 'traced call: %s ns vs %s ns untraced; %s ns per span, ratio %s; IL rewrite %s us per method (%s dropped)\n' \
        "$(t traced)" "$(t plain)" "$(t added)" "$(t ratio)" "$(t rewrite_us)" "$(t dropped)"
fi
if [ -f "$WORK/spans.sum" ]; then
    sp() { awk -v k="$1" '$1 == k {print $'"$2"'}' "$WORK/spans.sum"; }
    printf 'span: clrmux %s ns%s, hand-made OpenTelemetry SDK span %s ns: OTel/clrmux %sx (with a GC transition: %s ns, %sx)\n' \
        "$(sp span_fast 2)" "$([ -n "$(sp span_floor 2)" ] && awk -v t="$(sp span_fast 2)" -v f="$(sp span_floor 2)" 'BEGIN { printf " = the floor %.2f + %.2f", f, t - f }')" \
        "$(sp span_fast 3)" "$(sp span_fast 4)" "$(sp span_slow 2)" "$(sp span_slow 4)"
    [ -n "$(sp span_full 2)" ] && printf 'span with the profiler too (every feature on): %s ns%s\n' "$(sp span_full 2)" \
        "$([ -n "$(sp span_floor 2)" ] && awk -v t="$(sp span_full 2)" -v f="$(sp span_floor 2)" 'BEGIN { printf " = the floor %.2f + %.2f", f, t - f }')"
    [ -n "$(sp span_floor 2)" ] && printf 'span floor (two TSC reads, bench/clocks.c): %s ns (rdtsc %s ns, clock_gettime %s ns)\n' \
        "$(sp span_floor 2)" "$(sp span_floor 3)" "$(sp span_floor 4)"
    printf 'export spans/s (export thread CPU): /dev/null %s, file %s; dropped of %s at 1 M/s: /dev/null %s, file %s; at full speed: %s, %s\n' \
        "$(sp export_devnull_0 5)" "$(sp export_file_0 5)" "${BENCH_SPANS_LOAD:-2000000}" "$(sp export_devnull_1000000 4)" \
        "$(sp export_file_1000000 4)" "$(sp export_devnull_0 4)" "$(sp export_file_0 4)"
    printf 'OpenTelemetry batch processor: exported/s %s (queue = all), dropped at 1 M/s %s, at full speed %s (queue 2048); with its OTLP exporter to a local sink: exported/s %s\n' \
        "$(sp "otel_${BENCH_SPANS_LOAD:-2000000}_0" 5)" "$(sp otel_2048_1000000 4)" "$(sp otel_2048_0 4)" \
        "$(sp "otlp_${BENCH_SPANS_LOAD:-2000000}_0" 5)"
fi
if [ -f "$WORK/usdt.sum" ]; then
    sed -n 's/^usdt_summary plain=\([^ ]*\) off=\([^ ]*\) set=\([^ ]*\) diff=\([^ ]*\) q1=\([^ ]*\) q3=\([^ ]*\)/span with USDT sites, no tool: \2 ns vs \1 ns without (paired difference \4 ns, quartiles \5 .. \6); semaphores set: \3 ns/p' "$WORK/usdt.sum"
fi
if [ -f "$WORK/elt.sum" ]; then
    cat "$WORK/elt.sum"
fi
if [ -f "$WORK/notify.sum" ]; then
    awk '$2 ~ /^(clrmux|notify)[24]$/ {printf "%s %s: %s ns/callback, %s ns per callback per extra child\n", $1, $2, $4, $5}' "$WORK/notify.sum"
fi
if [ -f "$WORK/exc.sum" ]; then
    cat "$WORK/exc.sum"
fi
