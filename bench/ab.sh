#!/usr/bin/env bash
# bench/ab.sh [-n RUNS] CONFIG...: an interleaved A/B of a hello-world's start-up, to compare
# builds and switches side by side in one run (bench/startup.sh is the fixed report).
#
# Each CONFIG is NAME[@DIR][+VAR=VALUE...]:
#   NAME   none     no profiler
#          direct   the no-op child (build/fake/libnoop.so) loaded directly as CORECLR_PROFILER
#          clrmux   clrmux with that child in its loader.conf
#          tracer   clrmux + the child + the built-in tracer (tracing the app's Main)
#          prof     clrmux + the child + the built-in profiler (its defaults)
#          full     clrmux + the child + the tracer + the profiler
#          builtins clrmux + the tracer + the profiler, no child
#   @DIR   use DIR/build/libclrmux.so (a worktree or a scratch build; the profiler's companion
#          is loaded from beside it) instead of this checkout's build
#   +VAR=VALUE  an environment variable for that configuration only (repeatable)
# e.g.  bench/ab.sh -n 40 direct full@/work/main full   (this build against main's)
#       bench/ab.sh full full+CLRMUX_LOG_LEVEL=debug
#
# The configurations run in turn (run i of each before run i+1 of any), so drift hits all alike.
# Prints, per configuration, the median wall time and the median CPU time (user + sys, bash's
# `time`), their ranges, and each median against the first configuration's. Not a test.
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

R=20
if [ "${1:-}" = "-n" ]; then R=$2; shift 2; fi
[ $# -ge 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
command -v dotnet >/dev/null 2>&1 || { echo "ab: dotnet is not on PATH" >&2; exit 1; }
APP="$ROOT/build/clr/hello/hello.dll"
NOOP="$ROOT/build/fake/libnoop.so"
[ -f "$NOOP" ] || { echo "ab: $NOOP missing (make all)" >&2; exit 1; }
[ -f "$APP" ] || (cd "$ROOT" && tests/clr/build-apps.sh >/dev/null) || { echo "ab: building the test apps failed" >&2; exit 1; }
CLRMUX_CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
NOOP_CLSID="{C0000001-0000-0000-0000-000000000001}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
child="[child noop]
path = $NOOP
clsid = $NOOP_CLSID"
tracer="[child tracer]
builtin = tracer
output = $WORK/spans-%p.otlp.jsonl
trace = hello!Program::<Main>\$"
prof="[child profiler]
builtin = profiler
output_dir = $WORK/profiles"
head="[loader]
log_level = warn"
printf '%s\n%s\n' "$head" "$child" >"$WORK/clrmux.conf"
printf '%s\n%s\n%s\n' "$head" "$child" "$tracer" >"$WORK/tracer.conf"
printf '%s\n%s\n%s\n' "$head" "$child" "$prof" >"$WORK/prof.conf"
printf '%s\n%s\n%s\n%s\n' "$head" "$child" "$tracer" "$prof" >"$WORK/full.conf"
printf '%s\n%s\n%s\n' "$head" "$tracer" "$prof" >"$WORK/builtins.conf"

CLEAN=(-u CORECLR_ENABLE_PROFILING -u CORECLR_PROFILER -u CORECLR_PROFILER_PATH -u CLRMUX_CONFIG
       -u CLRMUX_LOG_FILE -u CLRMUX_LOG_LEVEL)
# argv_K: the env(1) arguments of configuration K
N=0
for spec in "$@"; do
    IFS=+ read -r -a parts <<<"$spec"
    base=${parts[0]} name=${base%%@*} dir=$ROOT
    [ "$base" = "$name" ] || dir=${base#*@}
    lib="$dir/build/libclrmux.so"
    declare -a "argv_$N"
    declare -n a="argv_$N"
    a=("${CLEAN[@]}")
    case $name in
        none) ;;
        direct) a+=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$NOOP_CLSID" CORECLR_PROFILER_PATH="$NOOP") ;;
        clrmux|tracer|prof|full|builtins)
            [ -f "$lib" ] || { echo "ab: $lib missing" >&2; exit 1; }
            a+=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLRMUX_CLSID" CORECLR_PROFILER_PATH="$lib"
                CLRMUX_CONFIG="$WORK/$name.conf") ;;
        *) echo "ab: unknown configuration '$name' in '$spec'" >&2; exit 2 ;;
    esac
    a+=("${parts[@]:1}")
    # pre-flight, also the warm-up: the app prints hello
    out=$(env "${a[@]}" dotnet "$APP" 2>"$WORK/err") || { echo "ab: '$spec' failed:" >&2; cat "$WORK/err" >&2; exit 1; }
    [ "$out" = hello ] || { echo "ab: '$spec' printed '$out', not 'hello'" >&2; exit 1; }
    unset -n a
    N=$((N + 1))
done

now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }
TIMEFORMAT='%U %S'
for ((i = 0; i < R; i++)); do
    for ((k = 0; k < N; k++)); do
        declare -n a="argv_$k"
        t0=$(now_us)
        { time env "${a[@]}" dotnet "$APP" >/dev/null 2>&1 || { echo "ab: config $k run $i failed" >&2; exit 1; }; } 2>>"$WORK/cpu.$k"
        t1=$(now_us)
        echo $((t1 - t0)) >>"$WORK/wall.$k"
        unset -n a
    done
done

med() { sort -n "$1" | awk '{v[NR] = $1} END {printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1000}'; }
rng() { sort -n "$1" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1f-%.1f", lo / 1000, hi / 1000}'; }
echo "ab: $APP, $R interleaved runs per configuration; medians in ms, ratios to the first"
printf '  %-44s %9s %-13s %7s %9s %-13s %7s\n' configuration wall "(range)" ratio CPU "(range)" ratio
for ((k = 0; k < N; k++)); do
    awk '{print ($1 + $2) * 1000000}' "$WORK/cpu.$k" >"$WORK/cpuus.$k"
    w=$(med "$WORK/wall.$k") c=$(med "$WORK/cpuus.$k")
    [ "$k" -eq 0 ] && { w0=$w c0=$c; }
    printf '  %-44s %9s %-13s %7s %9s %-13s %7s\n' "${@:k+1:1}" "$w" "($(rng "$WORK/wall.$k"))" \
        "$(awk -v a="$w" -v b="$w0" 'BEGIN {printf "%.3f", a / b}')" "$c" "($(rng "$WORK/cpuus.$k"))" \
        "$(awk -v a="$c" -v b="$c0" 'BEGIN {printf "%.3f", a / b}')"
done
