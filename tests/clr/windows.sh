#!/usr/bin/env bash
# A real .NET runtime on Windows x64 under Wine: the sample app published self-contained for
# win-x64 (the Microsoft.NETCore.App.Runtime.win-x64 pack, .NET 10) runs under Wine alone and
# with the recorder child built by mingw-w64 (build/win-x64/fake/librecorder.dll) as the runtime's
# profiler (CORECLR_PROFILER_PATH_64): the COM ABI of include/clrmux/corprof.h against the
# Windows runtime. Called by tests/cross.sh after `make windows` with WINE set.
# Then the same app with clrmux itself (build/win-x64/libclrmux.dll) as the profiler: two
# recorder children listed in a loader.conf beside the DLL (each sees what it saw alone, the
# app's output is unchanged), a loader.conf named by CLRMUX_CONFIG (its log_file, a backslashed
# child path in a non-ASCII folder), a configuration in a folder others may write (refused, the app runs
# unprofiled), the built-in profiler (not in the Windows build: logged, skipped, the other
# children run), and the built-in tracer (spans of a method and the one it calls, with their
# parent/child ids, in an OTLP JSON file; alone and beside a recorder child). Then `clrmux.exe
# ctl` (build/win-x64/clrmux.exe) asks the app held before its end (SAMPLE_HOLD=1) over its
# named pipe: status and trace list with the tracer's counts, trace add of a method called
# after it (a span per call: ReJIT), a refused trace add; and the app without clrmux.
# Prints one line per check and a closing "N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0
WINE=${WINE:?WINE: the wine loader}
W="$ROOT/${BUILD:-build}/win-x64"
PUB="$W/clr/pub"
REC="$W/fake/librecorder.dll" # the recorder child as the mux tests use it, copied as recorder.dll
export WINEPREFIX="$W/wineprefix" WINEDEBUG=-all
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-win.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - win-x64 .NET (wine): $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - win-x64 .NET (wine): $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -20; }
finish() { echo "win-x64 .NET (wine): $PASS passed, $FAIL failed"; [ "$FAIL" = 0 ]; exit $?; }
winpath() { echo "Z:$(sed 's|/|\\|g' <<<"$1")"; }

app=sample
if ! [ -f "$PUB/$app/$app.exe" ] || [ -n "$(find tests/clr/apps/$app tests/clr/apps/samplelib -newer "$PUB/$app/$app.exe" -type f -print -quit)" ]; then
    if ! dotnet publish tests/clr/apps/$app/$app.csproj -c Release -r win-x64 --self-contained -p:UseAppHost=true \
            -p:ClrAppsOut="${BUILD:-build}/win-x64/clr" -p:ClrAppsTargetFramework=net10.0 -o "$PUB/$app" \
            --disable-build-servers -nodeReuse:false -p:UseSharedCompilation=false -v:quiet -clp:NoSummary \
            >"$WORK/publish.log" 2>&1 || [ ! -f "$PUB/$app/$app.exe" ]; then
        bad "dotnet publish -r win-x64 --self-contained $app" "$(tail -n 20 "$WORK/publish.log")"
        finish
    fi
fi
ok "sample published self-contained for win-x64 (runtime pack $(grep -o "Runtime.win-x64/[0-9.]*" "$PUB/$app/$app.deps.json" | head -1 | cut -d/ -f2))"

run() { # run TAG [VAR=VALUE...]
    local tag=$1
    shift
    env "$@" timeout 300 "$WINE" "$PUB/$app/$app.exe" >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
}
base_ok() { [ "$(cat "$WORK/base.rc")" = 0 ] && grep -q '^done' "$WORK/base.out"; }
# The unprofiled run checks Wine, not clrmux: when it fails (seen once on a fresh CI machine,
# its output lost) it is printed, Wine's server is restarted and the run tried once more; every
# profiled run below counts its first attempt.
run base
if ! base_ok; then
    echo "note - win-x64 .NET (wine): the unprofiled run failed (rc $(cat "$WORK/base.rc")); Wine's server restarted, one more try:"
    tail -n 20 "$WORK/base.out" "$WORK/base.err" | sed 's/^/       /'
    WINESERVER=$(dirname "$WINE")/wineserver
    [ -x "$WINESERVER" ] || WINESERVER=wineserver
    timeout 60 "$WINESERVER" -k 2>/dev/null
    sleep 1
    run base
fi
if base_ok; then ok "sample runs under Wine without a profiler"
else bad "sample runs under Wine without a profiler" "rc $(cat "$WORK/base.rc")
$(tail -n 20 "$WORK/base.out" "$WORK/base.err")"; finish; fi

run rec CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="{A0000001-0000-0000-0000-000000000001}" \
    CORECLR_PROFILER_PATH_64="$(winpath "$REC")" RECORDER_MASK=0x24C RECORDER_OUT="$(winpath "$WORK/rec.txt")"
if [ "$(cat "$WORK/rec.rc")" = 0 ] && cmp -s <(tr -d '\r' <"$WORK/base.out") <(tr -d '\r' <"$WORK/rec.out"); then
    ok "with the mingw-built recorder as its profiler: the app's output is unchanged"
else bad "with the mingw-built recorder as its profiler: the app's output is unchanged" "$(tail -n 5 "$WORK/rec.out" "$WORK/rec.err")"; fi
r=$(tr -d '\r' <"$WORK/rec.txt" 2>/dev/null)
if grep -q '^Initialize 1$' <<<"$r" && grep -q '^ExceptionThrown 5$' <<<"$r" && grep -q '^ModuleLoadFinished [1-9]' <<<"$r" \
        && grep -q '^Shutdown 1$' <<<"$r" && grep -q '^# GetEventMask2 low=0x0000024C' <<<"$r"; then
    ok "the runtime loads the recorder DLL, sets its mask, and calls Initialize, module, exception and Shutdown callbacks"
else bad "the runtime loads the recorder DLL and calls its callbacks" "$r"; fi

# ---- libclrmux.dll: two recorders as children, loader.conf beside the DLL ---------------------
CLRMUX="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
DET="AssemblyLoadStarted AssemblyLoadFinished ModuleLoadStarted ModuleLoadFinished ModuleAttachedToAssembly
 ExceptionThrown ExceptionSearchFunctionEnter ExceptionSearchFunctionLeave ExceptionSearchCatcherFound
 ExceptionUnwindFunctionEnter ExceptionCatcherEnter ExceptionCatcherLeave ThreadCreated Shutdown"
counts() { local f=$1; shift; for n in "$@"; do printf '%s %s\n' "$n" "$(tr -d '\r' <"$f" | awk -v n="$n" '$1==n {print $2}')"; done; }
same_output() { # same_output TAG LABEL: the app's output is the unprofiled run's
    if [ "$(cat "$WORK/$1.rc")" = 0 ] && cmp -s <(tr -d '\r' <"$WORK/base.out") <(tr -d '\r' <"$WORK/$1.out"); then ok "$2: the app's output is unchanged"
    else bad "$2: the app's output is unchanged" "$(tail -n 5 "$WORK/$1.out" "$WORK/$1.err")"; fi
}
# the trust check (common/trust_win.c) reads owners and ACLs: Wine shows a world-writable
# folder (such as /tmp, whose sticky bit Windows has no word for) as writable by Everyone, so
# the DLL and its configuration live in build/win-x64, not under mktemp's /tmp
D="${CLRMUX_WIN_TRUSTED:-$W}/clrmux-run" # tests/cross.sh: a folder nobody else may write
rm -rf "$D" && mkdir -p "$D" && chmod 755 "$D"
cp "$W/libclrmux.dll" "$D/" && cp "$REC" "$D/recorder.dll"
cat >"$D/loader.conf" <<CONF
[loader]
log_level = debug
[child a]
path = recorder.dll
clsid = {A0000001-0000-0000-0000-000000000001}
[child b]
path = recorder.dll
clsid = {B0000002-0000-0000-0000-000000000002}
CONF
PROF=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLRMUX" CORECLR_PROFILER_PATH_64="$(winpath "$D/libclrmux.dll")")
run two "${PROF[@]}" RECORDER_MASK_A0000001=0x24C RECORDER_OUT_A0000001="$(winpath "$WORK/two_a.rec")" \
    RECORDER_MASK_B0000002=0x4 RECORDER_OUT_B0000002="$(winpath "$WORK/two_b.rec")"
same_output two "libclrmux.dll with two recorder children"
# shellcheck disable=SC2086
d=$(counts "$WORK/rec.txt" $DET 2>/dev/null); m=$(counts "$WORK/two_a.rec" $DET 2>/dev/null)
if [ -s "$WORK/two_a.rec" ] && [ "$d" = "$m" ] && grep -q '^ExceptionThrown 5$' <<<"$d" && grep -q '^ModuleLoadFinished [1-9]' <<<"$d"; then
    ok "a recorder under libclrmux.dll sees the same deterministic callbacks as alone ($(grep -c . <<<"$d") kinds)"
else bad "a recorder under libclrmux.dll sees the same deterministic callbacks as alone" "$(diff <(echo "$d") <(echo "$m"); tail -n 5 "$WORK/two.err")"; fi
b=$(tr -d '\r' <"$WORK/two_b.rec" 2>/dev/null)
if grep -q '^ModuleLoadFinished [1-9]' <<<"$b" && ! grep -q '^ExceptionThrown' <<<"$b" && grep -q '^Shutdown 1$' <<<"$b"; then
    ok "the second recorder (mask 0x4) gets its module loads, no exceptions, and Shutdown"
else bad "the second recorder (mask 0x4) gets its module loads, no exceptions, and Shutdown" "$b"; fi
e=$(tr -d '\r' <"$WORK/two.err")
if grep -q "config Z:/.*/clrmux-run/loader.conf" <<<"$e" && grep -q "union low=0x0000024C" <<<"$e" \
        && grep -q "INFO  runtime: .NET 10" <<<"$e" && grep -q "2 child profiler(s) active" <<<"$e"; then
    ok "libclrmux.dll finds loader.conf beside itself, loads both children, gives the runtime the union of the masks; the log names .NET 10"
else bad "libclrmux.dll finds loader.conf beside itself and loads both children" "$e"; fi

# ---- CLRMUX_CONFIG, log_file, a backslashed non-ASCII child path, the built-ins -----------------
mkdir -p "$D/conf" "$D/ünï 子" && chmod 755 "$D/conf" "$D/ünï 子"
cp "$REC" "$D/ünï 子/recorder.dll"
cat >"$D/conf/other.conf" <<CONF
[loader]
log_file = clrmux-%p.log
[child a]
path = $(winpath "$D/ünï 子/recorder.dll")
clsid = {A0000001-0000-0000-0000-000000000001}
[child prof]
builtin = profiler
[child tracer]
builtin = tracer
CONF
run env "${PROF[@]}" CLRMUX_CONFIG="$(winpath "$D/conf/other.conf")" RECORDER_MASK_A0000001=0x24C \
    RECORDER_OUT_A0000001="$(winpath "$WORK/env_a.rec")"
same_output env "CLRMUX_CONFIG with the built-ins listed"
e=$(cat "$WORK/env.err" "$D"/conf/clrmux-*.log 2>/dev/null | tr -d '\r')
if grep -q "config Z:.*conf.other.conf" <<<"$e" && grep -q "child 'a': loaded (Z:/.*/ünï 子/recorder.dll" "$D"/conf/clrmux-*.log \
        && grep -q '^Shutdown 1$' <(tr -d '\r' <"$WORK/env_a.rec"); then
    ok "CLRMUX_CONFIG names the configuration; its log_file is written; a child in a non-ASCII folder, named with backslashes, loads"
else bad "CLRMUX_CONFIG names the configuration; its log_file is written; a non-ASCII backslashed child path loads" "$e"; fi
if grep -q "child 'prof': the built-in profiler (builtin = profiler) is unavailable on Windows" <<<"$e" \
        && grep -q "2 child profiler(s) active" <<<"$e"; then
    ok "builtin = profiler: logged as unavailable on Windows, skipped; the recorder and the built-in tracer run"
else bad "builtin = profiler: logged as unavailable on Windows, skipped; the other children run" "$e"; fi

# ---- the built-in tracer (libclrmux.dll): spans of Sample.Work::TryFail and ::Fail ---------------
# TryFail calls Fail, which throws (5 times): 5 TryFail spans, each the parent of one Fail span
# (same trace id) whose status is an error
check_spans() { # check_spans FILE: prints what is wrong, nothing when the spans are right
    python3 - "$1" <<'PY'
import json, sys
spans = []
try:
    for line in open(sys.argv[1], encoding="utf-8"):
        if line.strip():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    spans += ss["spans"]
except Exception as e:
    print("cannot read the spans: %s" % e); sys.exit()
tf = [s for s in spans if s["name"].endswith("TryFail")]
f = [s for s in spans if s["name"].endswith("Fail") and not s["name"].endswith("TryFail")]
by_id = {s["spanId"]: s for s in tf}
probs = []
if len(tf) != 5 or len(f) != 5:
    probs.append("%d TryFail and %d Fail spans, not 5 and 5: %s" % (len(tf), len(f), sorted({s["name"] for s in spans})))
for s in f:
    p = by_id.get(s.get("parentSpanId", ""))
    if not p or p["traceId"] != s["traceId"]:
        probs.append("Fail span %s: its parent %s is no TryFail span of its trace" % (s["spanId"], s.get("parentSpanId")))
    if s.get("status", {}).get("code") != 2:
        probs.append("Fail span %s: status %s, not an error" % (s["spanId"], s.get("status")))
    if not (int(p["startTimeUnixNano"]) <= int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"]) <= int(p["endTimeUnixNano"])) if p else False:
        probs.append("Fail span %s does not lie within its parent" % s["spanId"])
for s in tf:
    if s.get("parentSpanId"):
        probs.append("TryFail span %s has a parent (%s)" % (s["spanId"], s["parentSpanId"]))
print("\n".join(probs))
PY
}
cat >"$D/tracer.conf" <<CONF
[loader]
log_level = debug
[child tracer]
builtin = tracer
output = spans-%p.otlp.jsonl
metrics_output = metrics-%p.otlp.jsonl
trace = sample!Sample.Work::TryFail
trace = sample!Sample.Work::Fail
CONF
rm -f "$D"/spans-*.otlp.jsonl "$D"/metrics-*.otlp.jsonl
run tracer "${PROF[@]}" CLRMUX_CONFIG="$(winpath "$D/tracer.conf")"
same_output tracer "libclrmux.dll with builtin = tracer"
e=$(tr -d '\r' <"$WORK/tracer.err")
sp=$(ls "$D"/spans-*.otlp.jsonl 2>/dev/null | head -1)
if [ -n "$sp" ] && [ -z "$(check_spans "$sp")" ] && grep -q "1 child profiler(s) active" <<<"$e"; then
    ok "builtin = tracer in libclrmux.dll: 5 TryFail spans, each the parent of an error Fail span of its trace, in $(basename "$sp") (OTLP JSON)"
else bad "builtin = tracer in libclrmux.dll: the spans of TryFail and Fail" "$( [ -n "$sp" ] && check_spans "$sp"; tail -n 15 <<<"$e")"; fi
mt=$(ls "$D"/metrics-*.otlp.jsonl 2>/dev/null | head -1)
if [ -n "$mt" ] && grep -q '"clrmux.method.calls"' "$mt" && grep -q 'Sample.Work' "$mt"; then
    ok "the tracer's per-method metrics are written ($(basename "$mt"))"
else bad "the tracer's per-method metrics are written" "$(ls "$D"; tail -n 5 <<<"$e")"; fi

# the tracer beside a recorder child: the recorder sees what it saw alone, the spans are the same
cat >"$D/tracer2.conf" <<CONF
[loader]
[child a]
path = recorder.dll
clsid = {A0000001-0000-0000-0000-000000000001}
[child tracer]
builtin = tracer
output = spans2-%p.otlp.jsonl
trace = sample!Sample.Work::TryFail
trace = sample!Sample.Work::Fail
CONF
rm -f "$D"/spans2-*.otlp.jsonl
run tracer2 "${PROF[@]}" CLRMUX_CONFIG="$(winpath "$D/tracer2.conf")" RECORDER_MASK_A0000001=0x24C \
    RECORDER_OUT_A0000001="$(winpath "$WORK/tracer2_a.rec")"
same_output tracer2 "libclrmux.dll with a recorder and the tracer"
sp=$(ls "$D"/spans2-*.otlp.jsonl 2>/dev/null | head -1)
# shellcheck disable=SC2086
# ThreadCreated included: the tracer's ReJIT thread is the tracer's own (src/loader/ownthreads.h)
d=$(counts "$WORK/rec.txt" $DET 2>/dev/null); m=$(counts "$WORK/tracer2_a.rec" $DET 2>/dev/null)
if [ -n "$sp" ] && [ -z "$(check_spans "$sp")" ] && [ "$d" = "$m" ]; then
    ok "the tracer beside a recorder child: the same spans, and the recorder sees the same deterministic callbacks as alone (ThreadCreated too)"
else bad "the tracer beside a recorder child" "$( [ -n "$sp" ] && check_spans "$sp"; diff <(echo "$d") <(echo "$m"); tail -n 8 "$WORK/tracer2.err")"; fi

# ---- a configuration others may write is refused ------------------------------------------------
mkdir -p "$D/open" && cp "$D/loader.conf" "$D/open/loader.conf" && chmod 777 "$D/open"
run open "${PROF[@]}" CLRMUX_CONFIG="$(winpath "$D/open/loader.conf")" RECORDER_OUT_A0000001="$(winpath "$WORK/open_a.rec")"
same_output open "a configuration in a folder Everyone may write"
e=$(tr -d '\r' <"$WORK/open.err")
if grep -q "refused: .*open is writable by Everyone" <<<"$e" && ! [ -e "$WORK/open_a.rec" ]; then
    ok "a configuration in a folder Everyone may write (its ACL, as Wine maps mode 0777) is refused; no child loads"
else bad "a configuration in a folder Everyone may write is refused" "$e"; fi
# ---- clrmux ctl (build/win-x64/clrmux.exe) asks the running process ---------------------------
# the app held before its end (SAMPLE_HOLD=1: "hold pid N" on stderr, then it waits for its input
# to close), under clrmux with the tracer, and without a profiler
CLI="$W/clrmux.exe"
hold() { # hold TAG [VAR=VALUE...]: the app in the background, its input a fifo held on fd 7; HELD_PID
    local tag=$1 i
    shift
    rm -f "$WORK/$tag.in" && mkfifo "$WORK/$tag.in"
    env "$@" SAMPLE_HOLD=1 timeout 300 "$WINE" "$PUB/$app/$app.exe" <"$WORK/$tag.in" >"$WORK/$tag.out" \
        2>"$WORK/$tag.err" 7>&- &
    HELD=$!
    exec 7>"$WORK/$tag.in"
    HELD_PID=""
    for i in $(seq 600); do
        HELD_PID=$(tr -d '\r' <"$WORK/$tag.err" | awk '/^hold pid /{print $3}')
        [ -n "$HELD_PID" ] && break
        kill -0 "$HELD" 2>/dev/null || break
        sleep 0.1
    done
}
release() { # release TAG: closes its input; the app's exit status into TAG.rc
    exec 7>&-
    wait "$HELD"
    echo $? >"$WORK/$1.rc"
}
ctl() { LC_ALL=C.UTF-8 "$WINE" "$CLI" ctl "$@" >"$WORK/ctl.out" 2>"$WORK/ctl.err" 7>&-; rc=$?; out=$(tr -d '\r' <"$WORK/ctl.out"); err=$(tr -d '\r' <"$WORK/ctl.err"); }
if ! [ -f "$CLI" ]; then
    bad "clrmux ctl: $CLI is not built (make windows)"
else
    hold held "${PROF[@]}" CLRMUX_CONFIG="$(winpath "$D/tracer.conf")"
    if [ -z "$HELD_PID" ]; then
        bad "clrmux ctl: the held app did not start" "$(tail -n 10 "$WORK/held.err")"
    else
        # the calls are counted as the export thread drains the span buffer (a poll interval
        # after they end, once the thread has started): asked again until they are, 20 s at most
        status_ok() {
            [ $rc = 0 ] && [[ $(head -n 1 <<<"$out") == "clrmux "*" in process $HELD_PID ("*", .NET 10."* ]] \
                && grep -qE '^  traced  sample!Sample.Work::TryFail  \(.*tracer\.conf:[0-9]+\)  1 method\(s\), 5 call\(s\), 0 error\(s\)$' <<<"$out" \
                && grep -qE '^  traced  sample!Sample.Work::Fail  \(.*tracer\.conf:[0-9]+\)  1 method\(s\), 5 call\(s\), 5 error\(s\)$' <<<"$out"
        }
        for i in $(seq 40); do
            ctl "$HELD_PID" status
            status_ok && break
            sleep 0.5
        done
        if status_ok; then
            ok "clrmux.exe ctl PID status in a process under libclrmux.dll: the tracer's targets with 5 calls each ($(head -n 1 <<<"$out"))"
        else bad "clrmux.exe ctl PID status in a process under libclrmux.dll (rc=$rc)" "$out
$err"; fi
        ctl "$HELD_PID" trace list --json
        if [ $rc = 0 ] && [[ $out == '[{"target":"sample!Sample.Work::TryFail",'*'"calls":5,"errors":0}'* ]]; then
            ok "clrmux.exe ctl PID trace list --json: the targets as JSON"
        else bad "clrmux.exe ctl PID trace list --json (rc=$rc)" "$out
$err"; fi
        ctl "$HELD_PID" trace add 'sample!Sample.Work::Fib'
        if [ $rc = 0 ] && [[ $out == "sample!Sample.Work::Fib added: 1 method(s) rewritten through ReJIT"* ]]; then
            ok "clrmux.exe ctl PID trace add: '$out'"
        else bad "clrmux.exe ctl PID trace add (rc=$rc)" "$out
$err"; fi
        ctl "$HELD_PID" trace add 'sample!Sample.Work::NoSuchMethod'
        [ $rc = 1 ] && [[ $err == "clrmux ctl: "* ]] && [ -z "$out" ] && ok "clrmux.exe ctl PID trace add of a method that is not there: refused, exit 1 ('$err')" \
            || bad "clrmux.exe ctl PID trace add of a method that is not there (rc=$rc)" "$out
$err"
    fi
    release held
    if [ "$(cat "$WORK/held.rc")" = 0 ] && cmp -s <(tr -d '\r' <"$WORK/base.out") <(tr -d '\r' <"$WORK/held.out"); then
        ok "the app asked by clrmux ctl ends as without: its output is unchanged"
    else bad "the app asked by clrmux ctl ends as without (rc $(cat "$WORK/held.rc"))" "$(tail -n 8 "$WORK/held.err")"; fi
    # after its input closes the app calls Fib(5): 15 calls, each a span since the trace add
    sp="$D/spans-$HELD_PID.otlp.jsonl"
    fib=$(python3 -c 'import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.strip():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                n += sum(1 for s in ss["spans"] if s["name"].endswith("Fib"))
print(n)' "$sp" 2>&1)
    if [ -n "$HELD_PID" ] && [ "$fib" = 15 ] && [ -z "$(check_spans "$sp")" ]; then
        ok "after clrmux.exe ctl trace add, each of the 15 later calls of Fib has its span (ReJIT on Windows), beside the 5 + 5 of loader.conf"
    else bad "after clrmux.exe ctl trace add, the 15 later calls of Fib have spans" "Fib spans: $fib; $(check_spans "$sp")"; fi
    hold bare
    if [ -n "$HELD_PID" ]; then
        ctl "$HELD_PID" status
        [ $rc = 1 ] && [[ $err == "clrmux ctl: process $HELD_PID is a .NET process that does not run under clrmux; "* ]] \
            && ok "clrmux.exe ctl PID of a .NET process without clrmux: '${err:0:90}...'" \
            || bad "clrmux.exe ctl PID of a .NET process without clrmux (rc=$rc)" "$out
$err"
    else bad "clrmux ctl: the held app without a profiler did not start" "$(tail -n 10 "$WORK/bare.err")"; fi
    release bare
fi
finish
