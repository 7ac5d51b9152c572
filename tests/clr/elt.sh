#!/usr/bin/env bash
# Real-runtime tests of enter/leave/tailcall hooks for every child (src/loader/elt.c): ELT
# children (fake_profilers/eltfast.c, eltinfo.c, elt2.c) on tests/clr/apps/eltapp, whose call
# counts are known (Fib 1973, Mix 1, Leaf 100), alone and two or three at once under clrmux,
# with and without FunctionIDMappers. Prints one line per check and "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite elt "$@"

LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
A="{A0000001-0000-0000-0000-000000000001}"
B="{B0000002-0000-0000-0000-000000000002}"
C="{C0000003-0000-0000-0000-000000000003}"
ELT=0x1000           # COR_PRF_MONITOR_ENTERLEAVE
ELT_INFO=0x0E001000  # + COR_PRF_ENABLE_FUNCTION_ARGS | RETVAL | FRAME_INFO
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-elt.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

APP=build/clr/eltapp/eltapp.dll
"${DOTNET[@]}" "$APP" >"$WORK/base.out" 2>&1
grep -q '^done$' "$WORK/base.out" && ok "eltapp runs without a profiler" || bad "eltapp runs without a profiler" "$(cat "$WORK/base.out")"

alone() { # alone TAG LIB MASK [VAR=VALUE...]
    local tag=$1 lib=$2 mask=$3
    shift 3
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$A" CORECLR_PROFILER_PATH="$FAKE/$lib" RECORDER_MASK="$mask" \
        RECORDER_OUT="$WORK/$tag.rec" "$@" "${DOTNET[@]}" "$APP" >"$WORK/$tag.out" 2>&1
}
under() { # under TAG CONF [VAR=VALUE...]
    local tag=$1 conf=$2
    shift 2
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$conf" \
        CLRMUX_LOG_FILE="$WORK/$tag.log" "$@" "${DOTNET[@]}" "$APP" >"$WORK/$tag.out" 2>&1
}
# counts_ok FILE ENTER_FIB ENTER_MIX ENTER_LEAF: enters and leaves as given, no foreign client data
counts_ok() {
    local f=$1
    grep -q "^enter Fib $2$" "$f" && grep -q "^leave Fib $2$" "$f" && grep -q "^enter Mix $3$" "$f" &&
        grep -q "^leave Mix $3$" "$f" && grep -q "^enter Leaf $4$" "$f" && grep -q "^leave Leaf $4$" "$f" &&
        grep -q "^# client-bad 0$" "$f"
}
check_counts() { # check_counts DESC FILE FIB MIX LEAF
    if [ -s "$2" ] && counts_ok "$2" "$3" "$4" "$5"; then ok "$1"; else bad "$1" "$(grep -v '^[A-Z]' "$2" 2>/dev/null)"; fi
}
same_output() { # same_output TAG
    if cmp -s "$WORK/base.out" "$WORK/$1.out"; then ok "$1: the app's output is unchanged"
    else bad "$1: the app's output is unchanged" "$(diff "$WORK/base.out" "$WORK/$1.out" | head)"; fi
}
ARGS_LINE='^# args Mix 7 40000000000 2.5 (ranges 3)$'
RET_LINE='^# retval Mix 40000000009.5$'

# ---- each child alone: the reference -------------------------------------------------------
alone fast_alone libeltfast.so $ELT ELT_MAPPER=1
check_counts "fast-path child alone counts every enter/leave" "$WORK/fast_alone.rec" 1973 1 100
alone info_alone libeltinfo.so $ELT_INFO ELT_MAPPER=2
check_counts "WithInfo child alone counts every enter/leave" "$WORK/info_alone.rec" 1973 1 100
grep -q "$ARGS_LINE" "$WORK/info_alone.rec" && grep -q "$RET_LINE" "$WORK/info_alone.rec" \
    && ok "WithInfo child alone reads Mix's arguments and return value" \
    || bad "WithInfo child alone reads Mix's arguments and return value" "$(grep '^#' "$WORK/info_alone.rec")"

# ---- one hooking child under clrmux: its own hooks go to the runtime -------------------------
cat >"$WORK/one.conf" <<EOF
[child fast]
path = $FAKE/libeltfast.so
clsid = $A
[child rec]
path = $FAKE/librecorder.so
clsid = $B
EOF
under one "$WORK/one.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 RECORDER_OUT_A0000001="$WORK/one_a.rec" \
    RECORDER_MASK_B0000002=0x4
same_output one
grep -q "enter/leave hooks for 1 child, its own hooks on the runtime" "$WORK/one.log" \
    && ok "one hooking child: its own mapper and hooks are set on the runtime" \
    || bad "one hooking child: its own mapper and hooks are set on the runtime" "$(grep -i 'enter/leave' "$WORK/one.log")"
check_counts "one hooking child beside a plain one sees every enter/leave once" "$WORK/one_a.rec" 1973 1 100

# ---- two fast-path-compatible children: clrmux installs the fast-path stubs ------------------
cat >"$WORK/two.conf" <<EOF
[child fast]
path = $FAKE/libeltfast.so
clsid = $A
[child two]
path = $FAKE/libelt2.so
clsid = $C
EOF
under two "$WORK/two.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 RECORDER_OUT_A0000001="$WORK/two_a.rec" \
    RECORDER_MASK_C0000003=$ELT RECORDER_OUT_C0000003="$WORK/two_c.rec"
same_output two
grep -q "enter/leave hooks for 2 child(ren), fast path" "$WORK/two.log" && ok "two ELT3/ELT2 children without slow-path flags: fast path installed" \
    || bad "fast path installed" "$(grep -i 'enter/leave' "$WORK/two.log")"
check_counts "fast path: ELT3 child with a mapper sees every enter/leave once, with its own client data" "$WORK/two_a.rec" 1973 1 100
check_counts "fast path: ELT2 child without a mapper sees every enter/leave once, with the FunctionID" "$WORK/two_c.rec" 1973 1 100
if diff <(grep -E '^(enter|leave) ' "$WORK/fast_alone.rec") <(grep -E '^(enter|leave) ' "$WORK/two_a.rec") >/dev/null; then
    ok "fast path: the ELT3 child's counts equal its counts alone"
else bad "fast path: the ELT3 child's counts equal its counts alone"; fi

# ---- three children, one WithInfo (slow-path flags): WithInfo hooks, each child its generation --
cat >"$WORK/three.conf" <<EOF
[child fast]
path = $FAKE/libeltfast.so
clsid = $A
[child info]
path = $FAKE/libeltinfo.so
clsid = $B
[child two]
path = $FAKE/libelt2.so
clsid = $C
EOF
under three "$WORK/three.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 RECORDER_OUT_A0000001="$WORK/three_a.rec" \
    RECORDER_MASK_B0000002=$ELT_INFO ELT_MAPPER_B0000002=2 RECORDER_OUT_B0000002="$WORK/three_b.rec" \
    RECORDER_MASK_C0000003=$ELT_INFO ELT_MAPPER_C0000003=1 ELT_ONLY_C0000003=Fib,Mix RECORDER_OUT_C0000003="$WORK/three_c.rec"
same_output three
grep -q "enter/leave hooks for 3 child(ren), WithInfo (slow) path" "$WORK/three.log" && ok "three children, one with slow-path flags: WithInfo hooks installed" \
    || bad "WithInfo hooks installed" "$(grep -i 'enter/leave' "$WORK/three.log")"
check_counts "WithInfo path: fast-path ELT3 child (mapper) sees every enter/leave once" "$WORK/three_a.rec" 1973 1 100
check_counts "WithInfo path: ELT3WithInfo child (mapper2) sees every enter/leave once" "$WORK/three_b.rec" 1973 1 100
check_counts "WithInfo path: ELT2 child whose mapper hooks only Fib and Mix sees only them" "$WORK/three_c.rec" 1973 1 0
grep -q "$ARGS_LINE" "$WORK/three_b.rec" && grep -q "$RET_LINE" "$WORK/three_b.rec" \
    && ok "WithInfo child reads Mix's arguments and return value through its proxy" \
    || bad "WithInfo child reads Mix's arguments and return value through its proxy" "$(grep '^#' "$WORK/three_b.rec")"
grep -q "$ARGS_LINE" "$WORK/three_c.rec" && grep -q "$RET_LINE" "$WORK/three_c.rec" \
    && ok "ELT2 child gets Mix's arguments and return value in its hooks" \
    || bad "ELT2 child gets Mix's arguments and return value in its hooks" "$(grep '^#' "$WORK/three_c.rec")"

# ---- a child without COR_PRF_MONITOR_ENTERLEAVE is never called; one without hooks pays nothing
cat >"$WORK/off.conf" <<EOF
[child fast]
path = $FAKE/libeltfast.so
clsid = $A
[child rec]
path = $FAKE/librecorder.so
clsid = $B
EOF
under off "$WORK/off.conf" RECORDER_MASK_A0000001=0x4 RECORDER_OUT_A0000001="$WORK/off_a.rec" RECORDER_MASK_B0000002=0x4
check_counts "a hooking child without COR_PRF_MONITOR_ENTERLEAVE is not called" "$WORK/off_a.rec" 0 0 0
cat >"$WORK/none.conf" <<EOF
[child rec]
path = $FAKE/librecorder.so
clsid = $B
EOF
under none "$WORK/none.conf" RECORDER_MASK_B0000002=0x4
if ! grep -q "enter/leave hooks" "$WORK/none.log"; then ok "no child sets hooks: clrmux installs none"
else bad "no child sets hooks: clrmux installs none" "$(grep 'enter/leave' "$WORK/none.log")"; fi

clr_done
