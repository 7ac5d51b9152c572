#!/usr/bin/env bash
# bench/sampler.sh: what CPU and wall sampling costs a busy app, by sampler.
#
# The app: build/clr/cpubound/cpubound.dll SECS 2 200 1 - two threads running a CPU-bound
# kernel (both cores), 200 threads blocked on an event, and a latency thread that reads the
# clock in a loop and reports the longest gap between two reads (maxgap_us) and the 99.9th
# percentile over 1-ms windows of each window's longest gap (p999gap_us): a stop-the-world
# pause shows there. BENCH_SAMPLER_ROUNDS (3) interleaved rounds (the order rotates each
# round) of BENCH_SAMPLER_SECONDS (5) per run, of:
#   none       no profiler
#   noop       clrmux with one no-op child (build/fake/libnoop.so): the loader's own cost
#   nosample   clrmux [child profiler] with cpu = false, wall = false: the profiler loaded
#              (its masks, the loader's exception watch) but not sampling
#   suspend    clrmux [child profiler] sampler = suspend (SuspendRuntime + DoStackSnapshot),
#              default pause budget 1% (the interval stretches with the pause)
#   suspend100 the same at a fixed 10 ms (pause_budget_percent = 0)
#   signal     clrmux [child profiler] sampler = signal (default), 10 ms
#   trace      dotnet-trace collect --providers Microsoft-DotNETCore-SampleProfiler (the
#              runtime's EventPipe sample profiler, 1 ms, stops the runtime per sample) launching
#              the app; dotnet-trace is installed from the NuGet source into build/tools
# The profilers collect cpu and wall only. Prints each run, then per sampler the medians of:
# throughput (ops/s) as a ratio to `none` (paired by round), the p99.9 and max gap, the
# delivered samples per second per busy thread (clrmux: from the shutdown log line) and the
# sampler thread's CPU. Not a timed test: nothing passes or fails. Needs `make all`.
#
# First, bench/sigcost.c (built here with gcc): the signal sampler's cost to the thread it
# samples, on that thread's own CPU clock (kernels per worker-CPU-second, sampled every other
# round, 200 blocked threads beside it) - a figure that other processes on the machine
# disturb far less than throughput. BENCH_SIGCOST_ROUNDS (8) rounds of 1 s.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

ROUNDS=${BENCH_SAMPLER_ROUNDS:-3}
SECS=${BENCH_SAMPLER_SECONDS:-5}
KINDS=${BENCH_SAMPLER_KINDS:-none noop nosample suspend suspend100 signal trace}
APP=build/clr/cpubound/cpubound.dll
ARGS=("$SECS" 2 200 1)
LIB="$ROOT/build/libclrmux.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
TRACE=build/tools/dotnet-trace

if ! command -v dotnet >/dev/null 2>&1; then
    echo "sampler: dotnet is not on PATH: sampler benchmark skipped"
    exit 0
fi
for f in build/libclrmux.so build/libclrmux_profiler.so; do
    [ -f "$f" ] || { echo "sampler: $f missing: run 'make all'" >&2; exit 1; }
done
tests/clr/build-apps.sh >/dev/null || { echo "sampler: building the C# test apps failed" >&2; exit 1; }
if [[ " $KINDS " == *" trace "* ]] && [ ! -x "$TRACE" ]; then
    dotnet tool install dotnet-trace --tool-path build/tools >/dev/null 2>&1 \
        || { echo "sampler: cannot install dotnet-trace into build/tools: the trace runs are skipped"; KINDS=${KINDS/trace/}; }
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-sbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
conf() { # conf NAME EXTRA-LINES
    printf '[child profiler]\nbuiltin = profiler\noutput_dir = %s\nexceptions = false\nallocations = false\ncontention = false\nperiod_s = 3600\n%s\n' \
        "$WORK/profiles-$1" "$2" >"$WORK/$1.conf"
}
conf suspend "sampler = suspend"
conf suspend100 $'sampler = suspend\npause_budget_percent = 0'
conf signal "sampler = signal"
conf nosample $'sampler = signal\ncpu = false\nwall = false'
printf '[child noop]\npath = %s\nclsid = {B0000002-0000-0000-0000-000000000002}\n' "$ROOT/build/fake/libnoop.so" >"$WORK/noop.conf"

# run KIND ROUND: appends "KIND round ops maxgap p999gap wall user sys samples_per_busy_thread_s sampler_ms" to runs
run() {
    local kind=$1 i=$2 tag="$WORK/$1.$2" env=() cmd=(dotnet "$APP" "${ARGS[@]}")
    case $kind in
    suspend | suspend100 | signal | nosample | noop)
        env=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB"
            CLRMUX_CONFIG="$WORK/$kind.conf" CLRMUX_LOG_FILE="$tag.log") ;;
    trace)
        cmd=("$TRACE" collect --providers Microsoft-DotNETCore-SampleProfiler --show-child-io -o "$tag.nettrace" --
            dotnet "$APP" "${ARGS[@]}") ;;
    esac
    /usr/bin/time -f '%e %U %S' -o "$tag.t" env "${env[@]}" "${cmd[@]}" >"$tag.out" 2>"$tag.err" \
        || { echo "sampler: $kind run $i failed:" >&2; cat "$tag.out" "$tag.err" >&2; exit 1; }
    local ops gaps rate=- sms=-
    ops=$(sed -n 's/^ops=//p' "$tag.out")
    gaps=$(sed -n 's/^maxgap_us=\([0-9]*\) p999gap_us=\([0-9]*\)/\1 \2/p' "$tag.out")
    [ -n "$ops" ] && [ -n "$gaps" ] || { echo "sampler: no figures from $kind run $i" >&2; cat "$tag.out" "$tag.err" >&2; exit 1; }
    if [ -f "$tag.log" ]; then
        local line
        line=$(grep "shut down" "$tag.log" | tail -n 1 || true) # none for the no-op child
        sms=$(sed -n 's/.*sampler thread CPU \([0-9.]*\) ms.*/\1/p' <<<"$line")
        if [ "$kind" = signal ]; then # the busiest thread's cpu samples over the run / per CPU-second
            rate=$(sed -n 's/.*(\([0-9.]*\) per CPU-second of a thread, busiest thread \([0-9]*\)).*/\1 \2/p' <<<"$line" \
                | awk -v s="$SECS" '{printf "%.1f/%.0f", $2 / s, $1}')
        else # every tick samples every thread
            rate=$(sed -n 's/.* \([0-9]*\) ticks (interval avg.*/\1/p' <<<"$line" | awk -v s="$SECS" '{printf "%.1f", $1 / s}')
        fi
    fi
    echo "$kind $i $ops $gaps $(cat "$tag.t") $rate $sms" >>"$WORK/runs"
}

echo "== the signal sampler's cost to a busy thread, in-process (bench/sigcost.c)"
mkdir -p build/bench
gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -Isrc -pthread -o build/bench/sigcost bench/sigcost.c \
    src/profiler/sigsampler.c src/profiler/stackwalk.c src/profiler/rawq.c src/common/log.c src/common/platform_posix.c -ldl
build/bench/sigcost "${BENCH_SIGCOST_ROUNDS:-8}" 1000 10 200 | tail -1
echo

set -- $KINDS
echo "sampler: dotnet $APP ${ARGS[*]} (2 busy threads, 200 blocked, a latency thread) on $(nproc) cores,"
echo "  $ROUNDS interleaved rounds of: $*"
dotnet "$APP" 0 >/dev/null # warm the file cache
: >"$WORK/runs"
for i in $(seq "$ROUNDS"); do
    kinds=("$@")
    for k in $(seq 0 $(($# - 1))); do
        run "${kinds[$(((k + i - 1) % $#))]}" "$i"
    done
done

printf '  %-10s %-5s %10s %10s %10s %7s %7s %14s %11s\n' run round "ops/s" "maxgap us" "p99.9 us" "wall s" "CPU s" "samples/s/thr" "sampler ms"
awk -v s="$SECS" '{printf "  %-10s %-5s %10.0f %10s %10s %7s %7.2f %14s %11s\n", $1, $2, $3 / s, $4, $5, $6, $7 + $8, $9, $10}' "$WORK/runs"

med() { sort -g | awk '{v[NR] = $1} END {if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "medians over $ROUNDS rounds (ratios: paired with the same round's none run):"
printf '  %-10s %10s %10s %10s %8s %10s %8s %16s %10s\n' sampler "throughput" "ops/CPU-s" "p99.9 gap" "p99.9 x" "max gap" "CPU s" "samples/s/thread" "sampler ms"
for k in $KINDS; do
    tp=$(awk -v k="$k" '$1 == "none" {b[$2] = $3} $1 == k {p[$2] = $3} END {for (r in p) if (b[r]) print p[r] / b[r]}' "$WORK/runs" | med)
    tc=$(awk -v k="$k" '$1 == "none" {b[$2] = $3 / ($7 + $8)} $1 == k {p[$2] = $3 / ($7 + $8)} END {for (r in p) if (b[r]) print p[r] / b[r]}' "$WORK/runs" | med)
    gx=$(awk -v k="$k" '$1 == "none" {b[$2] = $5} $1 == k {p[$2] = $5} END {for (r in p) if (b[r]) print p[r] / b[r]}' "$WORK/runs" | med)
    p999=$(awk -v k="$k" '$1 == k {print $5}' "$WORK/runs" | med)
    mx=$(awk -v k="$k" '$1 == k {print $4}' "$WORK/runs" | med)
    cpu=$(awk -v k="$k" '$1 == k {print $7 + $8}' "$WORK/runs" | med)
    rate=$(awk -v k="$k" '$1 == k && $9 != "-" {print $9}' "$WORK/runs" | sort -t/ -g | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : "-"}')
    sms=$(awk -v k="$k" '$1 == k && $10 != "-" {print $10}' "$WORK/runs" | med)
    printf '  %-10s %10.4f %10.4f %7s us %8.2f %7s us %8.2f %16s %10s\n' "$k" "$tp" "$tc" "$p999" "$gx" "$mx" "$cpu" "$rate" "$sms"
done
echo "  (throughput and ops/CPU-s: ratios to none; samples/s/thread: signal = the busiest thread's cpu samples per"
echo "   second of wall / per CPU-second of the threads; suspend = ticks per second, each tick samples every thread;"
echo "   trace: the SampleProfiler's nominal 1000/s, not measured here. On a machine shared with other work the CPU a"
echo "   run gets varies: ops per CPU-second is then the steadier figure, and gaps include the other work's preemption)"
