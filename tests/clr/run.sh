#!/usr/bin/env bash
# Real-runtime tests: C# apps (tests/clr/apps) run under clrmux with real child profilers
# (build/fake). Prints one line per check and a closing "N passed, N failed" line.
# Without dotnet: a loud skip, or a failure under CI (CI=true).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite clr --core31 "$@"

LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-clr.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# app NAME: run build/clr/NAME/NAME.dll with the current environment; stdout to $WORK/NAME.out
run_app() {
    local app=$1 tag=$2
    shift 2
    env "$@" "${DOTNET[@]}" "$CLR_APPS/$app/$app.dll" >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
}
under_clrmux() { # under_clrmux TAG CONF APP [VAR=VALUE...]
    local tag=$1 conf=$2 app=$3
    shift 3
    run_app "$app" "$tag" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$conf" CLRMUX_LOG_FILE="$WORK/$tag.log" "$@"
}
# counts FILE NAMES...: the "Name count" lines of a recorder output for the given callbacks
counts() {
    local f=$1
    shift
    for n in "$@"; do printf '%s %s\n' "$n" "$(awk -v n="$n" '$1==n {print $2}' "$f")"; done
}

REC_A="{A0000001-0000-0000-0000-000000000001}"
REC_B="{B0000002-0000-0000-0000-000000000002}"
# module+assembly loads, threads, exceptions
MASK_A=0x24C
# module loads only
MASK_B=0x4
DETERMINISTIC="AssemblyLoadStarted AssemblyLoadFinished ModuleLoadStarted ModuleLoadFinished ModuleAttachedToAssembly
 ExceptionThrown ExceptionSearchFunctionEnter ExceptionSearchFunctionLeave ExceptionSearchCatcherFound
 ExceptionUnwindFunctionEnter ExceptionCatcherEnter ExceptionCatcherLeave ThreadCreated ThreadNameChanged"
# callbacks whose counts vary from run to run of the same app alone: ThreadDestroyed (timing
# of the exit); on .NET Core 3.1 also the thread counts (its thread pool and tiering start
# 8 to 10 threads alone, by load)
VARIES='^ThreadDestroyed '
if [ "$CLR_RT" = 3 ]; then
    DETERMINISTIC=${DETERMINISTIC/ThreadCreated/}
    VARIES='^Thread(Destroyed|Created|AssignedToOSThread) '
fi

# ---- baseline -------------------------------------------------------------------------------
run_app sample base
check "sample runs without a profiler" test "$(cat "$WORK/base.rc")" = 0
grep -q '^done$' "$WORK/base.out" && ok "sample prints its results" || bad "sample prints its results" "$(cat "$WORK/base.out")"

# ---- transparency: recorder alone vs the same recorder as a child beside another ------------
run_app sample direct CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$REC_A" CORECLR_PROFILER_PATH="$FAKE/librecorder.so" \
    RECORDER_MASK=$MASK_A RECORDER_OUT="$WORK/direct.rec"
cat >"$WORK/two.conf" <<EOF
[loader]
log_level = debug
[child a]
path = $FAKE/librecorder.so
clsid = $REC_A
[child b]
path = $FAKE/librecorder.so
clsid = $REC_B
EOF
under_clrmux two "$WORK/two.conf" sample RECORDER_MASK_A0000001=$MASK_A RECORDER_OUT_A0000001="$WORK/two_a.rec" \
    RECORDER_MASK_B0000002=$MASK_B RECORDER_OUT_B0000002="$WORK/two_b.rec"
if cmp -s "$WORK/base.out" "$WORK/two.out"; then ok "app output under clrmux equals the output without a profiler"
else bad "app output under clrmux equals the output without a profiler" "$(diff "$WORK/base.out" "$WORK/two.out")"; fi
if [ -s "$WORK/direct.rec" ] && [ -s "$WORK/two_a.rec" ]; then
    # shellcheck disable=SC2086
    d=$(counts "$WORK/direct.rec" $DETERMINISTIC); m=$(counts "$WORK/two_a.rec" $DETERMINISTIC)
    if [ "$d" = "$m" ] && grep -q '^ExceptionThrown 5$' <<<"$d" && grep -q '^ModuleLoadFinished [1-9]' <<<"$d"; then
        ok "child under clrmux sees the same deterministic callbacks as loaded alone"
    else bad "child under clrmux sees the same deterministic callbacks as loaded alone" "$(diff <(echo "$d") <(echo "$m"))"; fi
    if diff <(grep -v '^#' "$WORK/direct.rec" | grep -Ev "$VARIES") <(grep -v '^#' "$WORK/two_a.rec" | grep -Ev "$VARIES") >/dev/null; then
        ok "child under clrmux receives exactly the callback set it receives alone"
    else bad "child under clrmux receives exactly the callback set it receives alone" \
        "$(diff <(grep -v '^#' "$WORK/direct.rec") <(grep -v '^#' "$WORK/two_a.rec"))"; fi
else
    bad "recorders wrote their counts" "$(cat "$WORK/two.err" "$WORK/two.log" 2>/dev/null | tail -20)"
fi
outside=$(grep -v '^#' "$WORK/two_b.rec" 2>/dev/null | awk '{print $1}' | grep -vxE 'Initialize|Shutdown|LoadAsNotificationOnly|ModuleLoadStarted|ModuleLoadFinished|ModuleUnloadStarted|ModuleUnloadFinished|ModuleAttachedToAssembly')
if [ -s "$WORK/two_b.rec" ] && [ -z "$outside" ] && grep -q '^ModuleLoadFinished [1-9]' "$WORK/two_b.rec"; then
    ok "a child receives no callback outside its own mask"
else bad "a child receives no callback outside its own mask" "$outside"; fi
grep -q "^# GetEventMask2 low=0x0000024C high=0x00000000" "$WORK/two_a.rec" && grep -q "^# GetEventMask2 low=0x00000004 high=0x00000000" "$WORK/two_b.rec" \
    && ok "GetEventMask2 answers each child with its own mask" || bad "GetEventMask2 answers each child with its own mask" "$(grep '^#' "$WORK"/two_*.rec)"
grep -q "union low=0x0000024C" "$WORK/two.log" && ok "the runtime gets the union of the children's masks" \
    || bad "the runtime gets the union of the children's masks" "$(grep union "$WORK/two.log")"
grep -q "INFO  runtime: .NET $CLR_RTV, ICorProfilerInfo" "$WORK/two.log" && ok "the log names the runtime: .NET $CLR_RTV" \
    || bad "the log names the runtime: .NET $CLR_RTV" "$(grep 'runtime' "$WORK/two.log")"
# ICorProfilerCallback11::LoadAsNotificationOnly: asked by runtimes that have it (not 3.1);
# a child under clrmux is asked exactly when it would be alone
if [ "$CLR_RT" -ge 5 ]; then n=1; else n=""; fi
if [ "$(awk '$1 == "LoadAsNotificationOnly" {print $2}' "$WORK/direct.rec" 2>/dev/null)" = "$n" ] \
    && [ "$(awk '$1 == "LoadAsNotificationOnly" {print $2}' "$WORK/two_a.rec" 2>/dev/null)" = "$n" ]; then
    ok "LoadAsNotificationOnly reaches the child ${n:-0} time(s), as alone"
else bad "LoadAsNotificationOnly reaches the child as alone" "$(grep -H LoadAs "$WORK/direct.rec" "$WORK/two_a.rec")"; fi

# GC and JIT callbacks reach a child that asks for them (counts vary with the runtime's own
# GCs and tiering, so they are checked for presence, not equality)
cat >"$WORK/gcjit.conf" <<EOF
[child a]
path = $FAKE/librecorder.so
clsid = $REC_A
[child b]
path = $FAKE/librecorder.so
clsid = $REC_B
EOF
under_clrmux gcjit "$WORK/gcjit.conf" sample RECORDER_MASK_A0000001=0xA0 RECORDER_OUT_A0000001="$WORK/gcjit_a.rec" \
    RECORDER_MASK_B0000002=0x8 RECORDER_OUT_B0000002="$WORK/gcjit_b.rec"
gcs=$(awk '$1=="GarbageCollectionStarted" {print $2}' "$WORK/gcjit_a.rec" 2>/dev/null)
jits=$(awk '$1=="JITCompilationStarted" {print $2}' "$WORK/gcjit_a.rec" 2>/dev/null)
if [ "${gcs:-0}" -ge 3 ] && [ "${jits:-0}" -ge 10 ] && grep -q '^AssemblyLoadFinished [1-9]' "$WORK/gcjit_b.rec" \
    && ! grep -qE '^(GarbageCollection|JIT)' "$WORK/gcjit_b.rec" && cmp -s "$WORK/base.out" "$WORK/gcjit.out"; then
    ok "GC ($gcs collections) and JIT ($jits compilations) callbacks reach only the child that asked"
else bad "GC and JIT callbacks" "$(cat "$WORK/gcjit_a.rec" "$WORK/gcjit_b.rec" 2>/dev/null | head -20)"; fi

# ---- fault cases, each in a real process: the app runs on, the log names the fault ----------
printf 'this is not an ELF file\n' >"$WORK/notelf.so"
fault_case() { # fault_case NAME "SECTION-TEXT" LOG-REGEX
    local name=$1 section=$2 regex=$3
    cat >"$WORK/f_$name.conf" <<EOF
[loader]
log_level = info
[child good]
path = $FAKE/librecorder.so
clsid = $REC_A
$section
EOF
    rm -f "$WORK/f_$name.rec"
    under_clrmux "f_$name" "$WORK/f_$name.conf" sample RECORDER_MASK_A0000001=$MASK_A RECORDER_OUT_A0000001="$WORK/f_$name.rec"
    if cmp -s "$WORK/base.out" "$WORK/f_$name.out" && [ "$(cat "$WORK/f_$name.rc")" = 0 ] && grep -Eq "$regex" "$WORK/f_$name.log" \
        && grep -q '^ExceptionThrown 5$' "$WORK/f_$name.rec"; then
        ok "fault '$name': app output unchanged, the good child works, the log says: $(grep -Eo "$regex" "$WORK/f_$name.log" | head -1)"
    else
        bad "fault '$name'" "$(diff "$WORK/base.out" "$WORK/f_$name.out"; tail -n 5 "$WORK/f_$name.log" 2>/dev/null; tail -n 5 "$WORK/f_$name.err")"
    fi
}
fault_case missing_file "[child missing]
path = $WORK/does-not-exist.so
clsid = $REC_B" "child 'missing': .*does-not-exist.so: No such file"
fault_case not_elf "[child notelf]
path = $WORK/notelf.so
clsid = $REC_B" "child 'notelf': cannot load .* as a shared library"
fault_case no_export "[child noexport]
path = $FAKE/libnoexport.so
clsid = $REC_B" "child 'noexport': .* exports no DllGetClassObject"
fault_case bad_clsid "[child badclsid]
path = $FAKE/librecorder.so
clsid = {not-a-guid}" "f_bad_clsid.conf:[0-9]+: \[child badclsid\]: clsid '\{not-a-guid\}' is not a GUID"
fault_case create_fails "[child nocreate]
path = $FAKE/libfailcreate.so
clsid = $REC_B" "child 'nocreate': CreateInstance\\(IID_ICorProfilerCallback2\\) failed with HRESULT E_OUTOFMEMORY \\(0x8007000E\\)"
fault_case init_fails "[child failing]
path = $FAKE/libfailinit.so
clsid = $REC_B" "child 'failing': Initialize failed with HRESULT E_FAIL \\(0x80004005\\)"
fault_case v1_only "[child old]
path = $FAKE/libv1only.so
clsid = $REC_B" "child 'old': implements only ICorProfilerCallback \(version 1\)"
fault_case malformed_line "this line has no equals sign
[child x]
path" "f_malformed_line.conf:6: malformed line"
fault_case unknown_key "[child good2]
path = $FAKE/librecorder.so
clsid = $REC_B
colour = blue" "f_unknown_key.conf:9: \[child good2\]: unknown key 'colour'"
fault_case duplicate_name "[child good]
path = $FAKE/libnoop.so
clsid = $REC_B" "f_duplicate_name.conf:6: \[child good\]: duplicate child name"
fault_case no_path "[child nothing]
enabled = true" "\[child nothing\]: needs 'path'"

# a child that implements only ICorProfilerCallback3 is called only through version 3
cat >"$WORK/cb3.conf" <<EOF
[child v3]
path = $FAKE/libcb3only.so
clsid = $REC_B
EOF
under_clrmux cb3 "$WORK/cb3.conf" sample RECORDER_MASK_B0000002=0x24C RECORDER_OUT_B0000002="$WORK/cb3.rec"
if cmp -s "$WORK/base.out" "$WORK/cb3.out" && grep -q '^ExceptionThrown 5$' "$WORK/cb3.rec" && grep -q "ICorProfilerCallback3" "$WORK/cb3.log" \
    && ! grep -q LoadAsNotificationOnly "$WORK/cb3.rec"; then ok "a child with only ICorProfilerCallback3 works and gets no newer callback"
else bad "a child with only ICorProfilerCallback3" "$(cat "$WORK/cb3.log" "$WORK/cb3.rec" 2>/dev/null | tail -8)"; fi

# a child that changes its mask after Initialize gets the HRESULTs it gets alone: an immutable
# flag refused with E_FAIL, COR_PRF_DISABLE_INLINING refused before .NET 10 (immutable there)
# and applied on 10, a mutable flag applied and its callbacks delivered
LATE_B="{B0000002-0000-0000-0000-000000000002}"
run_app sample latealone CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$LATE_B" CORECLR_PROFILER_PATH="$FAKE/liblatemask.so" \
    RECORDER_MASK=0x4 RECORDER_OUT="$WORK/latealone.rec"
cat >"$WORK/late.conf" <<EOF
[child late]
path = $FAKE/liblatemask.so
clsid = $LATE_B
EOF
under_clrmux late "$WORK/late.conf" sample RECORDER_MASK_B0000002=0x4 RECORDER_OUT_B0000002="$WORK/late.rec"
if [ "$CLR_RT" -ge 10 ]; then inl=0x00000000; else inl=0x80004005; fi
want="# late immutable change hr=0x80004005
# late disable-inlining change hr=$inl
# late mutable change hr=0x00000000"
if [ "$(grep '^# late' "$WORK/late.rec" 2>/dev/null)" = "$want" ] && [ "$(grep '^# late' "$WORK/latealone.rec" 2>/dev/null)" = "$want" ] \
    && grep -q '^ThreadCreated [1-9]' "$WORK/late.rec" && cmp -s "$WORK/base.out" "$WORK/late.out"; then
    ok "late mask change, as alone: immutable flag refused (E_FAIL), DISABLE_INLINING $([ "$inl" = 0x00000000 ] && echo applied || echo refused), mutable flag applied and delivered"
else bad "late mask change, as alone" "$(echo "alone:"; cat "$WORK/latealone.rec"; echo "under clrmux:"; cat "$WORK/late.rec") 2>&1"; fi

# no usable config: the application runs unprofiled
under_clrmux noconf "$WORK/none.conf" sample
if cmp -s "$WORK/base.out" "$WORK/noconf.out" && grep -q "cannot read .*none.conf" "$WORK/noconf.log" && grep -q "runs unprofiled" "$WORK/noconf.log"; then
    ok "missing loader.conf: the app runs unprofiled and the log says so"
else bad "missing loader.conf" "$(cat "$WORK/noconf.log" "$WORK/noconf.err" 2>/dev/null | tail -5)"; fi
: >"$WORK/empty.conf"
under_clrmux empty "$WORK/empty.conf" sample
if cmp -s "$WORK/base.out" "$WORK/empty.out" && grep -q "runs unprofiled" "$WORK/empty.log"; then ok "empty loader.conf: the app runs unprofiled"
else bad "empty loader.conf" "$(tail -n 5 "$WORK/empty.log")"; fi
cat >"$WORK/excl.conf" <<EOF
[loader]
exclude_processes = csc; sample
[child a]
path = $FAKE/librecorder.so
clsid = $REC_A
EOF
rm -f "$WORK/excl.rec"
under_clrmux excl "$WORK/excl.conf" sample RECORDER_OUT_A0000001="$WORK/excl.rec"
if cmp -s "$WORK/base.out" "$WORK/excl.out" && grep -q "not profiled: listed in exclude_processes" "$WORK/excl.log" && [ ! -e "$WORK/excl.rec" ]; then
    ok "exclude_processes: the app (matched by its dll name) runs unprofiled"
else bad "exclude_processes" "$(tail -n 5 "$WORK/excl.log")"; fi
cat >"$WORK/incl.conf" <<EOF
[loader]
include_processes = SomethingElse
[child a]
path = $FAKE/librecorder.so
clsid = $REC_A
EOF
under_clrmux incl "$WORK/incl.conf" sample
grep -q "not profiled: not listed in include_processes" "$WORK/incl.log" && ok "include_processes: other processes are not profiled" \
    || bad "include_processes" "$(tail -n 5 "$WORK/incl.log")"

# the loader finds loader.conf beside itself (no CLRMUX_CONFIG), relative child paths from there
mkdir -p "$WORK/install/children"
cp "$LIB" "$WORK/install/"
cp "$FAKE/librecorder.so" "$WORK/install/children/"
cat >"$WORK/install/loader.conf" <<EOF
[child rel]
path = children/librecorder.so
clsid = $REC_A
EOF
(cd / && env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$WORK/install/libclrmux.so" \
    CLRMUX_LOG_FILE="$WORK/beside.log" RECORDER_MASK_A0000001=$MASK_A RECORDER_OUT_A0000001="$WORK/beside.rec" \
    "${DOTNET[@]}" "$CLR_APPS/sample/sample.dll" >"$WORK/beside.out" 2>&1)
if grep -q '^ExceptionThrown 5$' "$WORK/beside.rec" 2>/dev/null && grep -q "config $WORK/install/loader.conf" "$WORK/beside.log"; then
    ok "loader.conf is found beside libclrmux.so and relative paths resolve from its folder"
else bad "loader.conf beside the library" "$(tail -n 5 "$WORK/beside.log" 2>/dev/null)"; fi

clr_done
