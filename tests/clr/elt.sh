#!/usr/bin/env bash
# Real-runtime tests of enter/leave/tailcall hooks for every child (src/loader/elt.c): ELT
# children (fake_profilers/eltfast.c, eltinfo.c, elt2.c) on tests/clr/apps/eltapp, whose call
# counts are known (Fib 1973, Mix 1, Leaf 100), alone and two or three at once under clrmux,
# with and without FunctionIDMappers. The children's configs, the count checks and the cases
# shared with arm64.sh are in tests/clr/elt_cases.sh. Prints one line per check and
# "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite elt "$@"

LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-elt.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. tests/clr/elt_cases.sh

APP=build/clr/eltapp/eltapp.dll
"${DOTNET[@]}" "$APP" >"$WORK/base.out" 2>&1
grep -q '^done$' "$WORK/base.out" && ok "eltapp runs without a profiler" || bad "eltapp runs without a profiler" "$(cat "$WORK/base.out")"

alone() { # alone TAG LIB MASK [VAR=VALUE...]
    local tag=$1 lib=$2 mask=$3
    shift 3
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$ELT_A" CORECLR_PROFILER_PATH="$FAKE/$lib" RECORDER_MASK="$mask" \
        RECORDER_OUT="$WORK/$tag.rec" "$@" "${DOTNET[@]}" "$APP" >"$WORK/$tag.out" 2>&1
}
under() { # under TAG CONF [VAR=VALUE...]
    local tag=$1 conf=$2
    shift 2
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$conf" \
        CLRMUX_LOG_FILE="$WORK/$tag.log" "$@" "${DOTNET[@]}" "$APP" >"$WORK/$tag.out" 2>&1
}
same_output() { # same_output TAG [DESC]
    if cmp -s "$WORK/base.out" "$WORK/$1.out"; then ok "${2:-$1}: the app's output is unchanged"
    else bad "${2:-$1}: the app's output is unchanged" "$(diff "$WORK/base.out" "$WORK/$1.out" | head)"; fi
}

# ---- each child alone: the reference -------------------------------------------------------
elt_case_fast_alone alone
alone info_alone libeltinfo.so $ELT_INFO ELT_MAPPER=2
elt_check_counts "WithInfo child alone counts every enter/leave" "$WORK/info_alone.rec" 1973 1 100
elt_check_args "WithInfo child alone reads Mix's arguments and return value" "$WORK/info_alone.rec"

# ---- one hooking child under clrmux: its own hooks go to the runtime -------------------------
elt_conf "$WORK/one.conf" fast rec
under one "$WORK/one.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 RECORDER_OUT_A0000001="$WORK/one_a.rec" \
    RECORDER_MASK_B0000002=0x4
same_output one
elt_check_log "one hooking child: its own mapper and hooks are set on the runtime" "$WORK/one.log" \
    "enter/leave hooks for 1 child, its own hooks on the runtime"
elt_check_counts "one hooking child beside a plain one sees every enter/leave once" "$WORK/one_a.rec" 1973 1 100

# ---- two fast-path-compatible children: clrmux installs the fast-path stubs ------------------
elt_case_fast_path under same_output two
if diff <(grep -E '^(enter|leave) ' "$WORK/fast_alone.rec") <(grep -E '^(enter|leave) ' "$WORK/two_a.rec") >/dev/null; then
    ok "fast path: the ELT3 child's counts equal its counts alone"
else bad "fast path: the ELT3 child's counts equal its counts alone"; fi

# ---- three children, one WithInfo (slow-path flags): WithInfo hooks, each child its generation --
elt_conf "$WORK/three.conf" fast info two
under three "$WORK/three.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 RECORDER_OUT_A0000001="$WORK/three_a.rec" \
    RECORDER_MASK_B0000002=$ELT_INFO ELT_MAPPER_B0000002=2 RECORDER_OUT_B0000002="$WORK/three_b.rec" \
    RECORDER_MASK_C0000003=$ELT_INFO ELT_MAPPER_C0000003=1 ELT_ONLY_C0000003=Fib,Mix RECORDER_OUT_C0000003="$WORK/three_c.rec"
same_output three
elt_check_log "three children, one with slow-path flags: WithInfo hooks installed" "$WORK/three.log" \
    "enter/leave hooks for 3 child(ren), WithInfo (slow) path"
elt_check_counts "WithInfo path: fast-path ELT3 child (mapper) sees every enter/leave once" "$WORK/three_a.rec" 1973 1 100
elt_check_counts "WithInfo path: ELT3WithInfo child (mapper2) sees every enter/leave once" "$WORK/three_b.rec" 1973 1 100
elt_check_counts "WithInfo path: ELT2 child whose mapper hooks only Fib and Mix sees only them" "$WORK/three_c.rec" 1973 1 0
elt_check_args "WithInfo child reads Mix's arguments and return value through its proxy" "$WORK/three_b.rec"
elt_check_args "ELT2 child gets Mix's arguments and return value in its hooks" "$WORK/three_c.rec"

# ---- a child without COR_PRF_MONITOR_ENTERLEAVE is never called; one without hooks pays nothing
elt_conf "$WORK/off.conf" fast rec
under off "$WORK/off.conf" RECORDER_MASK_A0000001=0x4 RECORDER_OUT_A0000001="$WORK/off_a.rec" RECORDER_MASK_B0000002=0x4
elt_check_counts "a hooking child without COR_PRF_MONITOR_ENTERLEAVE is not called" "$WORK/off_a.rec" 0 0 0
elt_conf "$WORK/none.conf" rec
under none "$WORK/none.conf" RECORDER_MASK_B0000002=0x4
if ! grep -q "enter/leave hooks" "$WORK/none.log"; then ok "no child sets hooks: clrmux installs none"
else bad "no child sets hooks: clrmux installs none" "$(grep 'enter/leave' "$WORK/none.log")"; fi

clr_done
