#!/usr/bin/env bash
# bench/elt.sh [--summary FILE]: the cost of an enter/leave-hooked call through clrmux.
#
# tests/clr/apps/eltapp in bench mode calls a small method (Leaf) BENCH_ELT_CALLS times after
# a warm-up and prints ns per call. Every call costs one enter and one leave hook. The
# configurations run interleaved, round after round (BENCH_ELT_ROUNDS), and the medians are
# compared side by side:
#   none        no profiler
#   alone       the fast-path ELT child (fake_profilers/eltfast.c, with a FunctionIDMapper)
#               loaded directly by the runtime (its own register-preserving stubs)
#   clrmux-1    the same child under clrmux, the only one that hooks: clrmux gives the runtime
#               the child's own mapper and hooks
#   clrmux-2    two copies of that child under clrmux: multiplexed (clrmux's stubs, mapper and
#               dispatch, then each child's hook)
#   clrmux-3    three copies (fast path, multiplexed)
#   info-alone  the WithInfo child (eltinfo.c, args+retval+frame info) loaded directly
#   info-clrmux the same child under clrmux
# The hook cost is ns/call minus "none"; the ratios divide clrmux's hook cost by the child's
# own cost alone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
CALLS=${BENCH_ELT_CALLS:-20000000}
ROUNDS=${BENCH_ELT_ROUNDS:-5}
if ! command -v dotnet >/dev/null 2>&1; then echo "elt: dotnet is not on PATH: ELT benchmark skipped"; exit 0; fi
tests/clr/build-apps.sh >/dev/null
LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-eltbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# copies of the fast child: a different file is a different library instance
cp "$FAKE/libeltfast.so" "$WORK/libeltfast2.so"
cp "$FAKE/libeltfast.so" "$WORK/libeltfast3.so"
printf '[child a]\npath = %s\nclsid = {A0000001-0000-0000-0000-000000000001}\n' "$FAKE/libeltfast.so" >"$WORK/one.conf"
{ cat "$WORK/one.conf"
  printf '[child b]\npath = %s\nclsid = {B0000002-0000-0000-0000-000000000002}\n' "$WORK/libeltfast2.so"; } >"$WORK/two.conf"
{ cat "$WORK/two.conf"
  printf '[child c]\npath = %s\nclsid = {C0000003-0000-0000-0000-000000000003}\n' "$WORK/libeltfast3.so"; } >"$WORK/three.conf"
printf '[child i]\npath = %s\nclsid = {A0000001-0000-0000-0000-000000000001}\n' "$FAKE/libeltinfo.so" >"$WORK/info.conf"
APP=build/clr/eltapp/eltapp.dll
PROF=(CORECLR_ENABLE_PROFILING=1 ELT_MAPPER=1)
MUX=(CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_LOG_LEVEL=error)
run() { # run NAME VAR=VALUE...
    local name=$1
    shift
    env "$@" dotnet "$APP" bench "$CALLS" | awk '/^ns\/call/ {print $2}' >>"$WORK/$name"
}
CONFIGS="none alone clrmux-1 clrmux-2 clrmux-3 info-alone info-clrmux"
for r in $(seq "$ROUNDS"); do
    run none
    run alone "${PROF[@]}" CORECLR_PROFILER="{A0000001-0000-0000-0000-000000000001}" CORECLR_PROFILER_PATH="$FAKE/libeltfast.so" RECORDER_MASK=0x1000
    run clrmux-1 "${PROF[@]}" "${MUX[@]}" CLRMUX_CONFIG="$WORK/one.conf" RECORDER_MASK=0x1000
    run clrmux-2 "${PROF[@]}" "${MUX[@]}" CLRMUX_CONFIG="$WORK/two.conf" RECORDER_MASK=0x1000
    run clrmux-3 "${PROF[@]}" "${MUX[@]}" CLRMUX_CONFIG="$WORK/three.conf" RECORDER_MASK=0x1000
    run info-alone "${PROF[@]}" CORECLR_PROFILER="{A0000001-0000-0000-0000-000000000001}" CORECLR_PROFILER_PATH="$FAKE/libeltinfo.so" RECORDER_MASK=0x0E001000
    run info-clrmux "${PROF[@]}" "${MUX[@]}" CLRMUX_CONFIG="$WORK/info.conf" RECORDER_MASK=0x0E001000
done
median() { sort -g "$WORK/$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
declare -A M
for c in $CONFIGS; do M[$c]=$(median "$c"); done
echo "ELT: ns per call of a hooked method (enter + leave), median of $ROUNDS interleaved rounds of $CALLS calls"
for c in $CONFIGS; do printf '  %-12s %8.2f ns/call  (hooks: %6.2f ns)\n' "$c" "${M[$c]}" "$(echo "${M[$c]} - ${M[none]}" | bc -l)"; done
ratio() { echo "scale=2; (${M[$1]} - ${M[none]}) / (${M[$2]} - ${M[none]})" | bc -l; }
r1=$(ratio clrmux-1 alone); r2=$(ratio clrmux-2 alone); r3=$(ratio clrmux-3 alone); ri=$(ratio info-clrmux info-alone)
echo "  hook cost clrmux-1 / alone          : ${r1}x  (one hooking child: its own hooks on the runtime)"
echo "  hook cost clrmux-2 / alone          : ${r2}x  (two children called per hook, multiplexed)"
echo "  hook cost clrmux-3 / alone          : ${r3}x  (three children called per hook)"
echo "  hook cost info-clrmux / info-alone  : ${ri}x  (WithInfo, args+retval+frame info)"
if [ -n "$SUMMARY" ]; then
    { echo "elt ns/call none=${M[none]} alone=${M[alone]} clrmux-1=${M[clrmux-1]} clrmux-2=${M[clrmux-2]} clrmux-3=${M[clrmux-3]} info-alone=${M[info-alone]} info-clrmux=${M[info-clrmux]}"
      echo "elt hook-cost ratios clrmux-1/alone=${r1} clrmux-2/alone=${r2} clrmux-3/alone=${r3} info-clrmux/info-alone=${ri}"; } >>"$SUMMARY"
fi
