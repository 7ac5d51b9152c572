#!/usr/bin/env bash
# Real-runtime tests of per-child detach: three recorder children (build/fake/librecorder.so);
# one calls RequestProfilerDetach from inside a callback: it receives nothing afterwards and
# gets ProfilerDetachSucceeded once, the others' callbacks and the app's output are unchanged;
# then all three detach (clrmux then detaches from the runtime), DETACH_RUNS times per runtime (default 50,
# the issue's "no crash in 50 runs" on each of .NET 8, 9 and 10)
# in a multi-threaded app, with no crash; a child with an immutable flag is refused as the
# runtime would refuse it alone and keeps working.
# Prints one line per check and "detach: N passed, N failed".
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10 by default, CLRMUX_TEST_RUNTIMES).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite detach "$@"

LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-detach.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
RUNS=${DETACH_RUNS:-50} # per runtime: 150 runs over .NET 8, 9 and 10

cat >"$WORK/three.conf" <<EOF
[loader]
log_level = info
[child a]
path = $FAKE/librecorder.so
clsid = {A0000001-0000-0000-0000-000000000001}
[child b]
path = $FAKE/librecorder.so
clsid = {B0000002-0000-0000-0000-000000000002}
[child c]
path = $FAKE/librecorder.so
clsid = {C0000003-0000-0000-0000-000000000003}
EOF
# run TAG APP [ARGS...] -- [VAR=VALUE...]
run() {
    local tag=$1 app=$2
    shift 2
    local args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/three.conf" CLRMUX_LOG_FILE="$WORK/$tag.log" RECORDER_MASK=0x24C \
        RECORDER_OUT_A0000001="$WORK/$tag.a" RECORDER_OUT_B0000002="$WORK/$tag.b" RECORDER_OUT_C0000003="$WORK/$tag.c" \
        "$@" "${DOTNET[@]}" "$CLR_APPS/$app/$app.dll" "${args[@]}" >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
}
DETERMINISTIC="AssemblyLoadStarted AssemblyLoadFinished ModuleLoadStarted ModuleLoadFinished ModuleAttachedToAssembly
 ExceptionThrown ExceptionSearchFunctionEnter ExceptionSearchFunctionLeave ExceptionSearchCatcherFound
 ExceptionUnwindFunctionEnter ExceptionCatcherEnter ExceptionCatcherLeave"
counts() {
    local f=$1 n
    shift
    for n in "$@"; do printf '%s %s\n' "$n" "$(awk -v n="$n" '$1==n {print $2}' "$f")"; done
}

"${DOTNET[@]}" "$CLR_APPS/sample/sample.dll" >"$WORK/base.out" 2>&1
run none sample
# shellcheck disable=SC2086
for tag in none; do [ -s "$WORK/$tag.b" ] || bad "recorders wrote their counts" "$(tail -n 5 "$WORK/$tag.log")"; done

# ---- one of three detaches --------------------------------------------------------------
run one sample -- RECORDER_DETACH_AT_A0000001=3
a="$WORK/one.a"
if [ "$(cat "$WORK/one.rc")" = 0 ] && cmp -s "$WORK/base.out" "$WORK/one.out"; then ok "one child detaches: the app's output is unchanged"
else bad "one child detaches: app output" "$(diff "$WORK/base.out" "$WORK/one.out" | head -5; tail -n 5 "$WORK/one.err")"; fi
if grep -q '^# RequestProfilerDetach hr=0x00000000$' "$a" && grep -q '^ProfilerDetachSucceeded 1$' "$a" \
    && grep -q '^# callbacks after detach 0$' "$a" && grep -q '^ModuleLoadFinished 3$' "$a" && ! grep -q '^Shutdown' "$a"; then
    ok "the detaching child: RequestProfilerDetach S_OK, no callback afterwards, ProfilerDetachSucceeded once, no Shutdown"
else bad "the detaching child" "$(cat "$a" 2>/dev/null)"; fi
# shellcheck disable=SC2086
if [ "$(counts "$WORK/none.b" $DETERMINISTIC)" = "$(counts "$WORK/one.b" $DETERMINISTIC)" ] \
    && [ "$(counts "$WORK/none.c" $DETERMINISTIC)" = "$(counts "$WORK/one.c" $DETERMINISTIC)" ] \
    && grep -q '^Shutdown 1$' "$WORK/one.b" && ! grep -q ProfilerDetachSucceeded "$WORK/one.b" "$WORK/one.c"; then
    ok "the two others keep receiving the same callbacks (and Shutdown, no ProfilerDetachSucceeded)"
else bad "the two others" "$(diff <(counts "$WORK/none.b" $DETERMINISTIC) <(counts "$WORK/one.b" $DETERMINISTIC))"; fi
grep -q "child 'a': detached" "$WORK/one.log" && ! grep -q "clrmux detaches from the runtime" "$WORK/one.log" \
    && ok "the log names the detached child; clrmux stays attached for the others" \
    || bad "detach log" "$(grep -i detach "$WORK/one.log")"

# ---- refused as alone: an immutable flag ------------------------------------------------
run imm sample -- RECORDER_DETACH_AT_A0000001=3 RECORDER_MASK_A0000001=0x80024C
if grep -q '^# RequestProfilerDetach hr=0x80131372$' "$WORK/imm.a" && grep -q '^Shutdown 1$' "$WORK/imm.a" \
    && grep -q '^ModuleLoadFinished [1-9][0-9]*$' "$WORK/imm.a" && ! grep -q '^ModuleLoadFinished 3$' "$WORK/imm.a" \
    && grep -q "RequestProfilerDetach refused (HRESULT CORPROF_E_IMMUTABLE_FLAGS_SET (0x80131372)): its event mask holds an immutable flag" "$WORK/imm.log"; then
    ok "a child with an immutable flag: CORPROF_E_IMMUTABLE_FLAGS_SET (as alone), logged at warn, it keeps working"
else bad "immutable flag" "$(cat "$WORK/imm.a"; grep -i detach "$WORK/imm.log")"; fi

# ---- all three detach, repeatedly, in a multi-threaded app -------------------------------
crashes=0 notdetached=0 late=0 unloaded=0 first=""
for ((i = 1; i <= RUNS; i++)); do
    run all$i cpubound 0.6 -- RECORDER_MASK=0x2EC RECORDER_DETACH_AT_A0000001=3 RECORDER_DETACH_AT_B0000002=4 \
        RECORDER_DETACH_AT_C0000003=5
    if [ "$(cat "$WORK/all$i.rc")" != 0 ] || ! grep -q '^ops=' "$WORK/all$i.out"; then
        crashes=$((crashes + 1)); [ -z "$first" ] && first="run $i: rc $(cat "$WORK/all$i.rc"): $(tail -n 3 "$WORK/all$i.err")"
    fi
    for x in a b c; do
        grep -q '^ProfilerDetachSucceeded 1$' "$WORK/all$i.$x" 2>/dev/null || notdetached=$((notdetached + 1))
        grep -q '^# callbacks after detach 0$' "$WORK/all$i.$x" 2>/dev/null || late=$((late + 1))
    done
    grep -q "every child has detached: clrmux detaches from the runtime" "$WORK/all$i.log" || notdetached=$((notdetached + 1))
    grep -q "clrmux detached from the runtime" "$WORK/all$i.log" && unloaded=$((unloaded + 1))
    [ "$i" -gt 1 ] && rm -f "$WORK"/all$i.*
done
if [ "$crashes" = 0 ] && [ "$notdetached" = 0 ] && [ "$late" = 0 ] && [ "$unloaded" -gt 0 ]; then
    ok "all three detach, then clrmux detaches from the runtime: $RUNS runs, no crash, each child notified once, nothing after; the runtime completed clrmux's detach (ProfilerDetachSucceeded, then unload) in $unloaded runs"
else bad "all detach over $RUNS runs" "crashes=$crashes not-detached=$notdetached late-callbacks=$late runtime-detached=$unloaded $first"; fi

clr_done
