#!/usr/bin/env bash
# bench/notify.sh [--summary FILE]: ns per callback per extra child, clrmux against the
# runtime's own notification profilers, on a callback-heavy app (tests/clr/apps/callbacks).
#
# Workloads (the app times its own loop, so start-up does not count):
#   alloc  BENCH_NOTIFY_ALLOCS small allocations (2000000): one ObjectAllocated each; the
#          children ask for COR_PRF_MONITOR_OBJECT_ALLOCATED | COR_PRF_ENABLE_OBJECT_ALLOCATED
#          (an immutable flag: they can never detach, clrmux calls a sole subscriber directly)
#   throw  BENCH_NOTIFY_THROWS exceptions (10000), 15 exception callbacks each; the children
#          ask for COR_PRF_MONITOR_EXCEPTIONS only (they may detach: clrmux counts every call
#          in for evacuation)
# Configurations (every child is build/fake/libnoop.so with its own CLSID):
#   direct    one child as CORECLR_PROFILER
#   notify K  one child as CORECLR_PROFILER and K-1 in CORECLR_NOTIFICATION_PROFILERS (the list
#             ends with ';': the runtime ignores its last entry otherwise)
#   clrmux K  clrmux as CORECLR_PROFILER with K children
# for K = 2 and 4, run in interleaved rounds (BENCH_NOTIFY_ROUNDS, 5); medians. A pre-flight run
# with librecorder.so children counts the callbacks per item and checks that every child of
# every configuration received them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1

SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
R=${BENCH_NOTIFY_ROUNDS:-5}
ALLOCS=${BENCH_NOTIFY_ALLOCS:-2000000}
THROWS=${BENCH_NOTIFY_THROWS:-10000}
APP=build/clr/callbacks/callbacks.dll
LIB="$ROOT/build/libclrmux.so"
CLRMUX_CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"

if ! command -v dotnet >/dev/null 2>&1; then
    echo "notify: dotnet is not on PATH: benchmark skipped"
    exit 0
fi
for f in "$LIB" build/fake/libnoop.so build/fake/librecorder.so; do
    [ -f "$f" ] || { echo "notify: $f missing (make all)" >&2; exit 1; }
done
tests/clr/build-apps.sh >/dev/null || { echo "notify: building the C# test apps failed" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-notify.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

tag() { printf 'B%07X' "$1"; }                 # child j's CLSID Data1 (the fake's env tag)
clsid() { printf '{%s-0000-0000-0000-0000000000%02X}' "$(tag "$1")" "$1"; }
CLEAN=(-u CORECLR_ENABLE_PROFILING -u CORECLR_PROFILER -u CORECLR_PROFILER_PATH -u CLRMUX_CONFIG
       -u CORECLR_ENABLE_NOTIFICATION_PROFILERS -u CORECLR_NOTIFICATION_PROFILERS -u CLRMUX_LOG_FILE
       -u CLRMUX_LOG_LEVEL -u RECORDER_MASK -u RECORDER_OUT)

# env(1) arguments of one configuration: config_env MODE K LIBFILE MASK OUTPREFIX
config_env() {
    local mode=$1 k=$2 child="$ROOT/build/fake/$3" mask=$4 out=$5 j list=""
    ENVS=("${CLEAN[@]}")
    for ((j = 1; j <= k; j++)); do
        ENVS+=("RECORDER_MASK_$(tag "$j")=$mask")
        [ -n "$out" ] && ENVS+=("RECORDER_OUT_$(tag "$j")=$out.$j")
    done
    case $mode in
    direct | notify)
        ENVS+=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$(clsid 1)" CORECLR_PROFILER_PATH="$child")
        if [ "$mode" = notify ] && [ "$k" -gt 1 ]; then
            for ((j = 2; j <= k; j++)); do
                list+="$child=$(clsid "$j");"
                ENVS+=("RECORDER_NOTIFICATION_ONLY_$(tag "$j")=1")
            done
            ENVS+=(CORECLR_ENABLE_NOTIFICATION_PROFILERS=1 CORECLR_NOTIFICATION_PROFILERS="$list")
        fi ;;
    clrmux)
        local conf="$WORK/loader.$k.$3.conf"
        { echo "[loader]"; echo "log_level = warn"
          for ((j = 1; j <= k; j++)); do printf '[child c%d]\npath = %s\nclsid = %s\n' "$j" "$child" "$(clsid "$j")"; done
        } >"$conf"
        ENVS+=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLRMUX_CLSID" CORECLR_PROFILER_PATH="$LIB"
               CLRMUX_CONFIG="$conf") ;;
    esac
}

CONFIGS=("direct 1" "notify 2" "clrmux 2" "notify 4" "clrmux 4" "clrmux 1")
WORKLOADS=("alloc $ALLOCS 800100" "throw $THROWS 40")

# Pre-flight with recorders (fewer items): callbacks per item, and every child got them all.
declare -A PER_ITEM
for w in "${WORKLOADS[@]}"; do
    set -- $w
    name=$1 mask=$3 n=$(( $2 / 10 ))
    for c in "${CONFIGS[@]}"; do
        set -- $c
        config_env "$1" "$2" librecorder.so "$mask" "$WORK/rec.$name.$1.$2"
        env "${ENVS[@]}" dotnet "$APP" "$name" "$n" >"$WORK/pre.out" 2>&1 \
            || { echo "notify: pre-flight '$c' $name failed:" >&2; cat "$WORK/pre.out" >&2; exit 1; }
        counts=()
        for ((j = 1; j <= $2; j++)); do
            f="$WORK/rec.$name.$1.$2.$j"
            [ -f "$f" ] || { echo "notify: '$c' $name: child $j wrote no record (not loaded?)" >&2; cat "$WORK/pre.out" >&2; exit 1; }
            counts+=("$(grep -v '^#' "$f" | awk '$1 ~ /^(ObjectAllocated|Exception)/ {s += $2} END {print s + 0}')")
        done
        for x in "${counts[@]}"; do
            [ "$x" = "${counts[0]}" ] && [ "$x" -gt 0 ] \
                || { echo "notify: '$c' $name: the children received different callback counts: ${counts[*]}" >&2; exit 1; }
        done
        if [ "$c" = "direct 1" ]; then
            # the app's warm-up adds min(n, 1000) items
            PER_ITEM[$name]=$(awk -v x="${counts[0]}" -v n="$n" 'BEGIN {w = n < 1000 ? n : 1000; printf "%.2f", x / (n + w)}')
        fi
    done
done

for ((i = 0; i < R; i++)); do
    for w in "${WORKLOADS[@]}"; do
        set -- $w
        name=$1 n=$2 mask=$3
        for c in "${CONFIGS[@]}"; do
            set -- $c
            config_env "$1" "$2" libnoop.so "$mask" ""
            out=$(env "${ENVS[@]}" dotnet "$APP" "$name" "$n" 2>&1) || { echo "notify: '$c' $name failed: $out" >&2; exit 1; }
            ns=$(echo "$out" | sed -n 's/.*ns=\([0-9]*\).*/\1/p')
            echo "$ns" >>"$WORK/t.$name.$1.$2"
        done
    done
done

median() { sort -n "$1" | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f", m}'; }
echo "notify: tests/clr/apps/callbacks, median of $R interleaved rounds; children: libnoop.so (returns S_OK)"
printf '  %-7s %-34s %12s %14s %24s\n' workload configuration "ns/item" "ns/callback" "ns per callback per extra child"
: >"$WORK/sum"
for w in "${WORKLOADS[@]}"; do
    set -- $w
    name=$1 n=$2
    per=${PER_ITEM[$name]}
    base=$(median "$WORK/t.$name.direct.1")
    for c in "${CONFIGS[@]}"; do
        set -- $c
        t=$(median "$WORK/t.$name.$1.$2")
        label=$([ "$1" = direct ] && echo "1 child as CORECLR_PROFILER" || { [ "$1" = notify ] && echo "1 + $(($2 - 1)) notification profiler(s)" || echo "clrmux, $2 child(ren)"; })
        item=$(awk -v t="$t" -v n="$n" 'BEGIN {printf "%.1f", t / n}')
        cbns=$(awk -v t="$t" -v n="$n" -v p="$per" 'BEGIN {printf "%.2f", t / (n * p)}')
        extra=-
        [ "$2" -gt 1 ] && extra=$(awk -v t="$t" -v b="$base" -v n="$n" -v p="$per" -v k="$2" 'BEGIN {printf "%.2f", (t - b) / (n * p * (k - 1))}')
        printf '  %-7s %-34s %12s %14s %24s\n' "$name" "$label" "$item" "$cbns" "$extra"
        echo "$name $1$2 $item $cbns $extra" >>"$WORK/sum"
    done
    echo "  ($name: $per callbacks per item, $n items per run)"
done
get() { awk -v w="$1" -v c="$2" -v f="$3" '$1 == w && $2 == c {print $f}' "$WORK/sum"; }
for w in alloc throw; do
    for k in 2 4; do
        printf '  %s, %d children: clrmux/notification wall time %s (per extra child per callback: clrmux %s ns, notification profilers %s ns)\n' \
            "$w" "$k" "$(awk -v a="$(get $w clrmux$k 3)" -v b="$(get $w notify$k 3)" 'BEGIN {printf "%.3f", a / b}')" \
            "$(get $w clrmux$k 5)" "$(get $w notify$k 5)"
    done
done
[ -n "$SUMMARY" ] && cp "$WORK/sum" "$SUMMARY"
exit 0
