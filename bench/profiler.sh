#!/usr/bin/env bash
# bench/profiler.sh: the cost of the built-in continuous profiler (builtin = profiler) on a
# CPU-bound app that saturates every core.
#
# Runs build/clr/cpubound/cpubound.dll (Environment.ProcessorCount threads; prints ops=N)
# for BENCH_PROFILER_SECONDS (5) per run, BENCH_PROFILER_ROUNDS (3) interleaved rounds of
#   base: no profiler
#   prof: under clrmux (as tests/clr/run.sh runs apps) with only
#         [child profiler] builtin = profiler, output_dir in a temp dir, default rate
#   span: the same profiler beside the built-in tracer tracing CpuBound.Worker.Loop: a span is
#         open on every worker thread for the whole run, so every sample reads the thread's
#         span context and carries the `span id` labels (the cost of profiles that know their
#         span: span vs prof; the tracer adds one span per thread, nothing per kernel call)
# (the order within a round rotates). Each run is measured with /usr/bin/time -f
# '%e %U %S %M' (else a tiny getrusage wrapper built with gcc, else bash's `time` without
# RSS). Prints each run, the medians of ops/s, ops per CPU-second, CPU seconds and peak RSS,
# the ratios (of the medians, and the median of the same-round ratios), the profiler's CPU
# share, and the sampler's interval/pause figures from each run's shutdown log line.
# On a shared machine the CPU a run gets varies: ops per CPU-second is the steadier figure.
# Then bench/spanread.c (gcc -O2): ns per sample that reading the span context costs the
# sampler (no span open / a span open / another thread's by OS id), on libclrmux.so's exports.
# Not a timed test: nothing passes or fails on speed. Needs `make all`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

ROUNDS=${BENCH_PROFILER_ROUNDS:-3}
SECS=${BENCH_PROFILER_SECONDS:-5}
APP=build/clr/cpubound/cpubound.dll
LIB="$ROOT/build/libclrmux.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"

if ! command -v dotnet >/dev/null 2>&1; then
    echo "profiler: dotnet is not on PATH: profiler benchmark skipped"
    exit 0
fi
for f in build/libclrmux.so build/libclrmux_profiler.so; do
    [ -f "$f" ] || { echo "profiler: $f missing: run 'make all'" >&2; exit 1; }
done
tests/clr/build-apps.sh >/dev/null || { echo "profiler: building the C# test apps failed" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-pbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/loader.conf" <<EOF
[child profiler]
builtin = profiler
output_dir = $WORK/profiles
EOF
cat >"$WORK/span.conf" <<EOF
[child tracer]
builtin = tracer
output = $WORK/spans.otlp.jsonl
trace = cpubound!CpuBound.Worker::Loop
[child profiler]
builtin = profiler
output_dir = $WORK/span-profiles
EOF

# ---- how each run is measured: "wall user sys maxrss_kb" in $out.t ---------------------------
RSS_NOTE=
if [ -x /usr/bin/time ]; then
    MEASURE="/usr/bin/time -f '%e %U %S %M'"
    measure() { local t=$1; shift; /usr/bin/time -f '%e %U %S %M' -o "$t" "$@"; }
elif command -v gcc >/dev/null 2>&1; then
    MEASURE="getrusage wrapper (no /usr/bin/time)"
    cat >"$WORK/rus.c" <<'EOF'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) { /* rus OUT CMD...: writes "wall user sys maxrss_kb" to OUT */
    struct timespec a, b;
    struct rusage ru;
    int st;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid == 0) { execvp(argv[2], argv + 2); _exit(127); }
    if (pid < 0 || wait4(pid, &st, 0, &ru) < 0) return 126;
    clock_gettime(CLOCK_MONOTONIC, &b);
    FILE *f = fopen(argv[1], "w");
    if (!f) return 126;
    fprintf(f, "%.2f %.2f %.2f %ld\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9,
            ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss);
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
EOF
    gcc -O2 -o "$WORK/rus" "$WORK/rus.c"
    measure() { "$WORK/rus" "$@"; }
else
    MEASURE="bash time (no /usr/bin/time, no gcc: no peak RSS)"
    RSS_NOTE="peak RSS not measured (no /usr/bin/time and no gcc)"
    measure() {
        local t=$1 TIMEFORMAT='%R %U %S' rc=0
        shift
        { time "$@" 2>&3 >&4 || rc=$?; } 3>&2 4>&1 2>"$t.bt"
        echo "$(tail -n 1 "$t.bt") 0" >"$t"
        return $rc
    }
fi

# run KIND I [VAR=VALUE...]: one run; appends "KIND ops wall user sys rss_kb I" to $WORK/runs
run() {
    local kind=$1 i=$2 tag="$WORK/$1.$2"
    shift 2
    measure "$tag.t" env "$@" dotnet "$APP" "$SECS" >"$tag.out" 2>"$tag.err" \
        || { echo "profiler: $kind run $i failed:" >&2; cat "$tag.out" "$tag.err" "$tag.log" >&2 2>/dev/null; exit 1; }
    local ops
    ops=$(sed -n 's/^ops=//p' "$tag.out")
    [ -n "$ops" ] || { echo "profiler: no ops= from $kind run $i" >&2; cat "$tag.out" "$tag.err" >&2; exit 1; }
    echo "$kind $ops $(cat "$tag.t") $i" >>"$WORK/runs"
}
base() { run base "$1"; }
prof() {
    run prof "$1" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/loader.conf" CLRMUX_LOG_FILE="$WORK/prof.$1.log"
    grep -q "profiler 'profiler': shut down" "$WORK/prof.$1.log" \
        || { echo "profiler: the profiler did not run (no shutdown line):" >&2; cat "$WORK/prof.$1.log" >&2; exit 1; }
}
span() {
    run span "$1" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/span.conf" CLRMUX_LOG_FILE="$WORK/span.$1.log"
    grep -q "profiler 'profiler': shut down" "$WORK/span.$1.log" \
        || { echo "profiler: the profiler did not run (no shutdown line):" >&2; cat "$WORK/span.$1.log" >&2; exit 1; }
}

CORES=$(nproc)
echo "profiler: dotnet $APP $SECS on $CORES cores, $ROUNDS interleaved rounds, base (no profiler) vs"
echo "  prof (clrmux, [child profiler] builtin = profiler, default rate) vs span (the same beside the tracer,"
echo "  a span open on every worker: every sample labelled); measured with $MEASURE"
dotnet "$APP" 0 >/dev/null # warm the file cache
: >"$WORK/runs"
for i in $(seq "$ROUNDS"); do
    case $((i % 3)) in
    1) base "$i"; prof "$i"; span "$i" ;;
    2) prof "$i"; span "$i"; base "$i" ;;
    0) span "$i"; base "$i"; prof "$i" ;;
    esac
done

# ---- figures ------------------------------------------------------------------------------------
med() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
col() { # col KIND EXPR: one value per run of KIND ($2 ops, $3 wall, $4 user, $5 sys, $6 rss)
    awk -v k="$1" -v s="$SECS" "\$1 == k {print $2}" "$WORK/runs"
}
printf '  %-5s %-5s %12s %8s %8s %9s %12s\n' round run "ops/s" "wall s" "CPU s" "RSS MB" "ops/CPU-s"
awk -v s="$SECS" '{printf "  %-5s %-5s %12.0f %8.2f %8.2f %9s %12.0f\n", $7, $1, $2 / s, $3, $4 + $5,
    ($6 > 0 ? sprintf("%.1f", $6 / 1024) : "-"), $2 / ($4 + $5)}' "$WORK/runs"

bops=$(col base '$2 / s' | med); pops=$(col prof '$2 / s' | med)
bcpu=$(col base '$4 + $5' | med); pcpu=$(col prof '$4 + $5' | med)
bopc=$(col base '$2 / ($4 + $5)' | med); popc=$(col prof '$2 / ($4 + $5)' | med)
brss=$(col base '$6' | med); prss=$(col prof '$6' | med)
# paired per-round ratios (prof / base of the same round): "ops/s-ratio ops-per-CPU-s-ratio" per round
awk '$1 == "base" {b[++nb] = $2; bc[nb] = $4 + $5} $1 == "prof" {p[++np] = $2; pc[np] = $4 + $5}
     END {for (i = 1; i <= nb; i++) printf "%.4f %.4f\n", p[i] / b[i], (p[i] / pc[i]) / (b[i] / bc[i])}' "$WORK/runs" >"$WORK/pairs"
pt=$(awk '{print $1}' "$WORK/pairs" | med); pc=$(awk '{print $2}' "$WORK/pairs" | med)
# sampler thread CPU (shutdown lines) over the process CPU, per profiled run
for i in $(seq "$ROUNDS"); do
    ms=$(grep -o 'sampler thread CPU [0-9.]* ms' "$WORK/prof.$i.log" | tail -n 1 | awk '{print $4}')
    awk -v k=prof -v n="$i" -v ms="$ms" '$1 == k && ++c == n {print ms / 1000 / ($4 + $5)}' "$WORK/runs"
done >"$WORK/sampler"
ss=$(med <"$WORK/sampler")

echo "medians ($ROUNDS runs each):"
awk -v bo="$bops" -v po="$pops" -v bc="$bcpu" -v pc="$pcpu" -v bpc="$bopc" -v ppc="$popc" -v br="$brss" -v pr="$prss" \
    -v pt="$pt" -v pcr="$pc" -v ss="$ss" -v note="$RSS_NOTE" 'BEGIN {
    printf "  %-34s %12.0f without  %12.0f with\n", "ops/s", bo, po
    printf "  %-34s %.4f (median of paired per-round ratios %.4f)\n", "throughput ratio with/without", po / bo, pt
    printf "  %-34s %12.0f without  %12.0f with\n", "ops per CPU-second", bpc, ppc
    printf "  %-34s %.4f (median of paired per-round ratios %.4f)\n", "ops per CPU-second ratio", ppc / bpc, pcr
    printf "  %-34s %12.2f without  %12.2f with\n", "process CPU seconds", bc, pc
    printf "  %-34s %+.2f%% (extra CPU s / total CPU s, at equal ops: 1 - with/without ops per CPU-s)\n", "profiler CPU share", (1 - ppc / bpc) * 100
    printf "  %-34s %.3f%% (sampler thread CPU / process CPU)\n", "sampler thread CPU share", ss * 100
    if (note != "") printf "  %-34s %s\n", "peak RSS", note
    else printf "  %-34s %12.1f MB without  %12.1f MB with  (%+.1f MB)\n", "peak RSS", br / 1024, pr / 1024, (pr - br) / 1024
}'

# ---- span labels: span vs prof -------------------------------------------------------------------
sops=$(col span '$2 / s' | med); sopc=$(col span '$2 / ($4 + $5)' | med)
awk '$1 == "prof" {p[++np] = $2; pc[np] = $4 + $5} $1 == "span" {q[++nq] = $2; qc[nq] = $4 + $5}
     END {for (i = 1; i <= np && i <= nq; i++) printf "%.4f %.4f\n", q[i] / p[i], (q[i] / qc[i]) / (p[i] / pc[i])}' "$WORK/runs" >"$WORK/spairs"
st=$(awk '{print $1}' "$WORK/spairs" | med); sc=$(awk '{print $2}' "$WORK/spairs" | med)
handler() { cat "$WORK/$1".*.log | { grep -o "handler [0-9.]* us per walk" || true; } | awk '{print $2}' | med; }
labelled=$( (go tool pprof -tags -sample_index=cpu "$WORK"/span-profiles/*.pb.gz 2>/dev/null || true) | awk '/^ span id: Total/ {print $4}' | head -1)
echo "span labels (span: a span open on every worker thread, every sample labelled, vs prof):"
awk -v po="$pops" -v so="$sops" -v ppc="$popc" -v spc="$sopc" -v st="$st" -v sc="$sc" -v hp="$(handler prof)" -v hs="$(handler span)" 'BEGIN {
    printf "  %-34s %12.0f prof  %12.0f span\n", "ops/s", po, so
    printf "  %-34s %.4f (median of paired per-round ratios %.4f)\n", "throughput ratio span/prof", so / po, st
    printf "  %-34s %.4f (median of paired per-round ratios %.4f)\n", "ops per CPU-second ratio span/prof", spc / ppc, sc
    printf "  %-34s %s us prof  %s us span (median of the runs)\n", "signal handler time per walk", hp, hs
}'
[ -n "$labelled" ] && echo "  (the span runs' cpu profiles, merged: 'span id' labels on $labelled of their CPU)"

if command -v gcc >/dev/null 2>&1 && gcc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -o "$WORK/spanread" bench/spanread.c -ldl; then
    echo "  reading the span context (bench/spanread.c, best of 5 x 20M):"
    "$WORK/spanread" "$LIB"
fi

# ---- the sampler, from each profiled run's shutdown line -----------------------------------------
echo "sampler (shutdown log line of each profiled run; paused = ticks x (suspend + walks) / the run's wall time):"
for i in $(seq "$ROUNDS"); do
    line=$(grep -o "profiler 'profiler': shut down.*" "$WORK/prof.$i.log" | tail -1)
    cpu=$(awk -v k=prof -v n="$i" '$1 == k && ++c == n {print $4 + $5}' "$WORK/runs")
    wall=$(awk -v k=prof -v n="$i" '$1 == k && ++c == n {print $3}' "$WORK/runs")
    sed -E 's/.* ([0-9]+) ticks \(interval avg ([0-9.]+) ms\): SuspendRuntime avg ([0-9.]+) us, stack walks avg ([0-9.]+) us, ResumeRuntime avg ([0-9.]+) us, suspend\+walks max ([0-9.]+) us, ([0-9]+) suspend failures.*sampler thread CPU ([0-9.]+) ms.*/\1 \2 \3 \4 \5 \6 \7 \8/' <<<"$line" |
        awk -v i="$i" -v w="$wall" -v cpu="$cpu" 'NF == 8 {
            printf "  run %d: %d ticks, interval avg %s ms; SuspendRuntime avg %s us, stack walks avg %s us, ResumeRuntime avg %s us,\n", i, $1, $2, $3, $4, $5
            printf "         suspend+walks max %s us, %d suspend failures; paused %.2f%% of wall; sampler thread CPU %s ms (%.3f%% of the process CPU)\n", $6, $7, $1 * ($3 + $4) / 1e4 / w, $8, $8 / 10 / cpu
        } NF != 8 {print "  run " i ": " $0}'
done
