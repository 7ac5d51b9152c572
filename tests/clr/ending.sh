#!/usr/bin/env bash
# Real-runtime tests of what clrmux saves however a process ends (src/common/lastgasp.c,
# src/common/unhandled.c) and of the tracer's output file (src/tracer/spanfile.c): the
# `ending` app (tests/clr/apps/ending) runs under the tracer and the profiler, calls a traced
# method 1000 times, then returns, exits, throws an unhandled exception, is sent SIGTERM,
# SIGINT or SIGQUIT, or faults in native code; every finished span must be in the file and
# the profile up to that point a readable pprof file. Unhandled exceptions from deep calls,
# a thread, a work item, a catch block, an async method; the profiler alone; caught
# exceptions of every kind call no last gasp. Also: NullReferenceException still
# works under clrmux's SIGSEGV handler, 2009 nested calls give 2009 spans, a kill during
# heavy writing leaves only whole lines, the size cap rotates and counts, a planted symlink
# is refused.
# Prints one line per check and "ending: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite ending "$@"

command -v python3 >/dev/null || { bad "python3 is needed"; clr_done; }
LIB="${CLRMUX_TEST_LIB:-$ROOT/build/libclrmux.so}" # another build to compare with
for f in "$LIB" "$(dirname "$LIB")/libclrmux_profiler.so"; do
    [ -f "$f" ] || { bad "$f missing: run 'make all'"; clr_done; }
done
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-ending.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT

# run TAG CONF SIGNAL MODE [N]: ending under clrmux in $WORK/TAG/ (its own folder: spans.jsonl,
# profiles/); SIGNAL (or "-") is sent once the app printed "ready". SIGINT and SIGQUIT are
# reset to their default first (a shell's background job starts with them ignored).
run() {
    local tag=$1 conf=$2 sig=$3
    shift 3
    mkdir -p "$WORK/$tag"
    cp "$conf" "$WORK/$tag/loader.conf"
    python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGQUIT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" \
        CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/$tag/loader.conf" CLRMUX_LOG_FILE="$WORK/$tag/log" \
        "${DOTNET[@]}" "$CLR_APPS/ending/ending.dll" "$@" >"$WORK/$tag/out" 2>"$WORK/$tag/err" &
    local pid=$!
    # a watchdog: a process that does not end within 120 s is a hang (killed, rc 137, logged)
    ( sleep 120; kill -9 "$pid" 2>/dev/null && echo "killed after 120 s: hung" >>"$WORK/$tag/err" ) >/dev/null 2>&1 &
    local watchdog=$!
    if [ "$sig" != - ]; then
        for _ in $(seq 300); do grep -q ready "$WORK/$tag/out" && break; sleep 0.05; done
        sleep "${KILL_AFTER:-0}"
        kill -s "$sig" "$pid"
    fi
    { wait "$pid"; } 2>/dev/null
    echo $? >"$WORK/$tag/rc"
    kill "$watchdog" 2>/dev/null
}
# spans TAG [FILE...]: "name count" per span name, "bad N" (lines that are not JSON), "lines N",
# "roots N", "orphans N" (a parentSpanId that is no span of the files)
spans() {
    local tag=$1
    shift
    local files=("$@")
    [ ${#files[@]} = 0 ] && files=("$WORK/$tag/spans.jsonl")
    python3 - "${files[@]}" <<'PY_END'
import collections, json, sys
names, bad, lines, ids, parents = collections.Counter(), 0, 0, set(), []
for path in sys.argv[1:]:
    try:
        f = open(path, 'rb')
    except FileNotFoundError:
        continue
    for raw in f:
        lines += 1
        try:
            req = json.loads(raw)
        except Exception:
            bad += 1
            continue
        for rs in req["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    names[s["name"]] += 1
                    ids.add(s["spanId"])
                    parents.append(s.get("parentSpanId"))
for n, c in sorted(names.items()):
    print(n, c)
print("bad", bad)
print("lines", lines)
print("roots", sum(1 for p in parents if not p))
print("orphans", sum(1 for p in parents if p and p not in ids))
PY_END
}
# profile_ok TAG: exactly one profile, read by go tool pprof (or, without go, a gzip'd
# protobuf), and with go it has samples (the sampling interval stretches on a loaded machine:
# how many, and of what, is not checked)
profile_ok() {
    local files=("$WORK/$1"/profiles/*.pb.gz)
    [ ${#files[@]} = 1 ] && [ -s "${files[0]}" ] || return 1
    if command -v go >/dev/null 2>&1; then
        go tool pprof -raw "${files[0]}" 2>/dev/null | awk '/^Samples:/ {s = 1; next} s && /^ *[0-9]+( +[0-9]+)*:/ {n++}
            /^Locations/ {s = 0} END {exit !(n > 0)}'
    else
        python3 -c 'import gzip, sys; sys.exit(0 if len(gzip.open(sys.argv[1]).read()) > 100 else 1)' "${files[0]}"
    fi
}

cat >"$WORK/both.conf" <<'CONF_END'
[loader]
log_level = info
[child tracer]
builtin = tracer
output = spans.jsonl
; no periodic write during the run: what is in the file was written at the end
flush_interval_ms = 600000
trace = ending!Ending.Work::Step
trace = ending!Ending.Work::Recurse
[child profiler]
builtin = profiler
output_dir = profiles
period_s = 60
CONF_END

# ---- each way to end: every finished span written, the profile up to then readable --------
# tag, signal, mode, expected exit code, what the log says
while read -r tag sig mode code cause; do
    run "$tag" "$WORK/both.conf" "$sig" "$mode" 1000
    got=$(spans "$tag")
    rc=$(cat "$WORK/$tag/rc")
    what=$mode
    [ "$sig" != - ] && what="$mode + SIG$sig"
    if [ "$rc" = "$code" ] && grep -qx "Ending.Work.Step 1000" <<<"$got" && grep -qx "bad 0" <<<"$got"; then
        ok "$what (exit $rc): all 1000 finished spans written"
    else
        bad "$what: all 1000 finished spans written (exit $rc, want $code)" "$got
$(grep -E 'WARN|ERROR' "$WORK/$tag/log"; tail -n 3 "$WORK/$tag/err")"
    fi
    if profile_ok "$tag"; then ok "$what: the profile up to the end is one readable pprof file with samples"
    else bad "$what: a readable profile" "$(ls "$WORK/$tag/profiles"; grep profiler "$WORK/$tag/log" | tail -5)"; fi
    if [ "$cause" = shutdown ]; then
        if grep -q "tracer: [0-9]* method(s) rewritten" "$WORK/$tag/log" && ! grep -q "last gasp" "$WORK/$tag/log"; then
            ok "$what: the runtime's Shutdown wrote everything (no last gasp)"
        else bad "$what: Shutdown, no last gasp" "$(grep -E 'tracer|gasp' "$WORK/$tag/log")"; fi
    else
        if grep -q "the process is ending ($cause) without the runtime's Shutdown" "$WORK/$tag/log" \
            && grep -q "tracer: last gasp ($cause): every span finished so far is saved" "$WORK/$tag/log" \
            && grep -q "profiler 'profiler': last gasp ($cause): the current period" "$WORK/$tag/log"; then
            ok "$what: the log says how it ended, what was saved and what was lost"
        else bad "$what: the last gasp logged" "$(grep -E 'WARN|ERROR|gasp' "$WORK/$tag/log")"; fi
    fi
done <<'CASES_END'
return - return 0 shutdown
exit - exit 3 shutdown
throw - throw 134 unhandled exception
term TERM wait 143 SIGTERM
int INT wait 130 SIGINT
quit QUIT wait 131 SIGQUIT
segv - segv 139 SIGSEGV
CASES_END

# ---- unhandled exceptions wherever they start: seen by the loader's exception watch ---------
# (src/common/unhandled.h; .NET 8 and 9 call no AppContext.OnUnhandledException here)
for mode in throw-deep throw-thread throw-pool throw-wrap-deep throw-async throw-wrap throw-rethrow; do
    run "$mode" "$WORK/both.conf" - "$mode" 1000
    got=$(spans "$mode")
    rc=$(cat "$WORK/$mode/rc")
    if [ "$rc" = 134 ] && grep -qx "Ending.Work.Step 1000" <<<"$got" && grep -qx "bad 0" <<<"$got" && profile_ok "$mode" \
        && grep -q "tracer: last gasp (unhandled exception): every span finished so far is saved" "$WORK/$mode/log" \
        && [ "$(grep -c "the process is ending (unhandled exception)" "$WORK/$mode/log")" = 1 ]; then
        ok "$mode (exit 134): all 1000 finished spans and one readable profile written, one last gasp"
    else
        bad "$mode: all 1000 spans, one profile, one last gasp (exit $rc)" "$got
$(grep -E 'WARN|ERROR|gasp' "$WORK/$mode/log"; tail -n 3 "$WORK/$mode/err")"
    fi
done

# ---- the tracer alone: its last gasp counts for the exception watch from Initialize on ------
# (the loader decides right after Initialize whether to watch unhandled exceptions; the
# tracer's last gasp is started later by its ReJIT thread, but its entry is made at once)
sed '/^\[child profiler\]/,$d' "$WORK/both.conf" >"$WORK/tracer.conf"
for mode in throw throw-deep; do
    run "tracer-$mode" "$WORK/tracer.conf" - "$mode" 1000
    got=$(spans "tracer-$mode")
    rc=$(cat "$WORK/tracer-$mode/rc")
    if [ "$rc" = 134 ] && grep -qx "Ending.Work.Step 1000" <<<"$got" && grep -qx "bad 0" <<<"$got" \
        && grep -q "tracer: last gasp (unhandled exception): every span finished so far is saved" "$WORK/tracer-$mode/log"; then
        ok "tracer alone, $mode (exit 134): all 1000 finished spans written by the last gasp"
    else
        bad "tracer alone, $mode: all 1000 spans written by the last gasp (exit $rc)" "$got
$(grep -E 'WARN|ERROR|gasp' "$WORK/tracer-$mode/log"; tail -n 3 "$WORK/tracer-$mode/err")"
    fi
done

# ---- exceptions that are caught, in every way, are no unhandled exception ------------------
run caught "$WORK/both.conf" - caught 100
if [ "$(cat "$WORK/caught/rc")" = 0 ] && grep -qx "caught 302" "$WORK/caught/out" && ! grep -q "last gasp" "$WORK/caught/log" \
    && grep -q "tracer: [0-9]* method(s) rewritten" "$WORK/caught/log"; then
    ok "302 exceptions caught (in Main, through reflection, in a static constructor, on a thread, after await): no last gasp"
else bad "caught exceptions: no last gasp" "$(cat "$WORK/caught/out"; grep -E 'WARN|ERROR|gasp' "$WORK/caught/log")"; fi

# ---- the profiler alone: the loader's watch flushes its current period --------------------
cat >"$WORK/prof.conf" <<'CONF_END'
[loader]
log_level = info
[child profiler]
builtin = profiler
output_dir = profiles
period_s = 60
CONF_END
# cpu_in TAG METHOD: TAG's profile has cpu samples of Ending.Work.METHOD itself (its own, flat
# time: go tool pprof; without go, the profile's strings only)
cpu_in() {
    local f=("$WORK/$1"/profiles/*.pb.gz)
    [ -s "${f[0]}" ] || return 1
    if command -v go >/dev/null 2>&1; then
        go tool pprof -top -sample_index=0 "${f[0]}" 2>/dev/null | grep -qE "^ *[1-9][0-9.]*m?s .* Ending\.Work\.$2\$"
    else
        python3 -c 'import gzip, sys; sys.exit(0 if sys.argv[2].encode() in gzip.open(sys.argv[1]).read() else 1)' \
            "${f[0]}" "Ending.Work.$2"
    fi
}
# (throw-rethrow: on .NET 10 only AppContext.OnUnhandledException shows an exception thrown
# from a catch block of the thread's outermost frame; the loader looks for it then)
for mode in throw throw-thread throw-wrap-deep throw-rethrow; do
    tag="prof-$mode"
    run "$tag" "$WORK/prof.conf" - "$mode" 1000
    rc=$(cat "$WORK/$tag/rc")
    if [ "$rc" = 134 ] && profile_ok "$tag" && cpu_in "$tag" Spin \
        && grep -q "profiler 'profiler': last gasp (unhandled exception): the current period" "$WORK/$tag/log"; then
        ok "profiler alone, $mode (exit 134): one readable profile holding the period's samples (Ending.Work.Spin)"
    else
        bad "profiler alone, $mode: one readable profile with the period's samples (exit $rc)" "$(ls "$WORK/$tag/profiles")
$(grep -E 'WARN|ERROR|gasp|profiler' "$WORK/$tag/log" | tail -5)"
    fi
done

# ---- the unhandled-exception event raised without an exception (.NET 10): nothing stops ----
if [ "$CLR_RT" -ge 10 ]; then
run raise "$WORK/both.conf" - raise 1000
got=$(spans raise)
nprof=$(ls "$WORK"/raise/profiles/*.pb.gz 2>/dev/null | wc -l)
if [ "$(cat "$WORK/raise/rc")" = 0 ] && grep -qx raised "$WORK/raise/out" && grep -qx "Ending.Work.Step 2000" <<<"$got" \
    && grep -qx "bad 0" <<<"$got" && [ "$nprof" = 2 ] && grep -q "tracer: last gasp (unhandled exception)" "$WORK/raise/log" \
    && grep -q "2000 span(s) written to" "$WORK/raise/log"; then
    ok "RaiseAppDomainUnhandledExceptionEvent (the process goes on): spans written at the event, tracing and profiling go on (2000 spans, 2 profiles, Shutdown as usual)"
else bad "RaiseAppDomainUnhandledExceptionEvent: the process goes on, clrmux too" "rc $(cat "$WORK/raise/rc"), $nprof profiles; $got
$(grep -E 'WARN|ERROR|tracer: [0-9]' "$WORK/raise/log")"; fi
fi

# ---- faults the runtime handles still work beside clrmux's SIGSEGV handler ------------------
run nre "$WORK/both.conf" - nre 1000
# the thread that took the faults is still sampled afterwards: the fault handlers block SIGPROF
# while they run and ExceptionThrown unblocks it (lastgasp.h); were it left blocked,
# Ending.Work.SpinAfterFaults (~300 ms of CPU after the 1000 faults) would get no cpu sample
if [ "$(cat "$WORK/nre/rc")" = 0 ] && grep -qx "nre 1000" "$WORK/nre/out" && ! grep -q "last gasp" "$WORK/nre/log" \
    && cpu_in nre SpinAfterFaults; then
    ok "1000 NullReferenceExceptions (faults in managed code) are caught as before; no last gasp; the thread is still sampled after them (SpinAfterFaults)"
else
    rc=$(cat "$WORK/nre/rc")
    why=""
    [ "$rc" -gt 128 ] 2>/dev/null && why=" (killed by signal $((rc - 128)): $(kill -l $((rc - 128)) 2>/dev/null))"
    bad "NullReferenceException under clrmux" "exit code $rc$why
stdout: $(tr '\n' ' ' <"$WORK/nre/out")
stderr (last 15 lines):
$(tail -n 15 "$WORK/nre/err")
log (last 15 lines):
$(tail -n 15 "$WORK/nre/log" 2>/dev/null | cut -c1-400)"
fi

# ---- deep recursion: a span for every call ---------------------------------------------------
run deep "$WORK/both.conf" - deep 2009
got=$(spans deep)
if grep -qx "deep 2009" "$WORK/deep/out" && grep -qx "Ending.Work.Recurse 2009" <<<"$got" && grep -qx "roots 1" <<<"$got" \
    && grep -qx "orphans 0" <<<"$got" && grep -q " 0 not recorded" "$WORK/deep/log"; then
    ok "2009 nested calls of a traced method: 2009 spans, one root, every parent present"
else bad "deep recursion: 2009 spans" "$got
$(grep tracer "$WORK/deep/log" | tail -3)"; fi

# ---- a kill while batches are written: only whole lines --------------------------------------
cat >"$WORK/flood.conf" <<'CONF_END'
[child tracer]
builtin = tracer
output = spans.jsonl
flush_interval_ms = 10
max_file_mb = 8
max_files = 2
trace = ending!Ending.Work::Step
CONF_END
for sig in TERM INT; do
    KILL_AFTER=1.5 run "flood$sig" "$WORK/flood.conf" "$sig" flood
    got=$(spans "flood$sig" "$WORK/flood$sig"/spans.jsonl*)
    lines=$(sed -n 's/^lines //p' <<<"$got")
    if grep -qx "bad 0" <<<"$got" && [ "${lines:-0}" -ge 20 ] && grep -q "tracer: last gasp (SIG$sig): every span finished so far is saved" "$WORK/flood$sig/log"; then
        ok "SIG$sig during heavy writing (4 threads, a line every 10 ms): $lines lines, every one whole JSON"
    else bad "SIG$sig during heavy writing: whole lines only" "$got
$(grep -E 'WARN|ERROR' "$WORK/flood$sig/log" | tail -3)"; fi
done

# ---- the size cap: rotation, files kept, drops counted ---------------------------------------
cat >"$WORK/rot.conf" <<'CONF_END'
[child tracer]
builtin = tracer
output = spans.jsonl
buffer_spans = 1048576
max_file_mb = 1
max_files = 3
trace = ending!Ending.Work::Step
CONF_END
run rot "$WORK/rot.conf" - burst 50000
files=("$WORK"/rot/spans.jsonl*)
sizes=$(stat -c %s "${files[@]}" | sort -n | tr '\n' ' ')
got=$(spans rot "${files[@]}")
kept=$(sed -n 's/^Ending.Work.Step //p' <<<"$got")
summary=$(grep -o "[0-9]* span(s) written to [^ ]* in [0-9]* line(s) ([0-9]* rotation(s); [0-9]* old file(s) deleted, holding [0-9]* span(s)), [0-9]* dropped (buffer full)" "$WORK/rot/log")
read -r written deleted buffer_dropped < <(sed -E 's/^([0-9]+) span.*holding ([0-9]+) span.*, ([0-9]+) dropped.*/\1 \2 \3/' <<<"$summary")
names=$(cd "$WORK/rot" && ls spans.jsonl* | tr '\n' ' ')
if [ "$names" = "spans.jsonl spans.jsonl.1 spans.jsonl.2 " ] && [ "$(stat -c %s "${files[@]}" | sort -n | tail -1)" -le 1048576 ] \
    && grep -qx "bad 0" <<<"$got" && [ -n "$summary" ] && [ $((kept + deleted)) = "$written" ] \
    && [ $((written + buffer_dropped)) = 200000 ] && grep -q "reached max_file_mb = 1 with max_files = 3" "$WORK/rot/log"; then
    ok "max_file_mb = 1, max_files = 3: files $names(bytes: $sizes), whole lines; $kept spans kept + $deleted in deleted files = $written written (+ $buffer_dropped buffer drops = 200000)"
else bad "rotation" "names: $names sizes: $sizes kept: $kept summary: $summary
$(grep -E 'WARN|ERROR|tracer' "$WORK/rot/log" | tail -4)"; fi

# ---- a planted symlink as the output: refused, the app runs on ------------------------------
mkdir -p "$WORK/link"
echo precious >"$WORK/victim"
ln -s "$WORK/victim" "$WORK/link/spans.jsonl"
run link "$WORK/flood.conf" - return 10
if [ "$(cat "$WORK/link/rc")" = 0 ] && [ "$(cat "$WORK/victim")" = precious ] \
    && grep -q "child 'tracer': cannot open output $WORK/link/spans.jsonl: it is a symbolic link (not followed); tracer disabled" "$WORK/link/log"; then
    ok "output is a planted symlink: refused with the reason, the target untouched, the app runs on"
else bad "planted symlink as output" "$(cat "$WORK/victim"; grep -E 'ERROR|WARN' "$WORK/link/log")"; fi

# ---- a planted symlink as the metrics file: refused, spans still written -----------------------
mkdir -p "$WORK/mlink"
echo precious >"$WORK/mvictim"
ln -s "$WORK/mvictim" "$WORK/mlink/metrics.jsonl"
sed 's/^max_files = 2$/max_files = 2\nmetrics_output = metrics.jsonl/' "$WORK/flood.conf" >"$WORK/mlink.conf"
run mlink "$WORK/mlink.conf" - return 10
got=$(spans mlink)
if [ "$(cat "$WORK/mlink/rc")" = 0 ] && [ "$(cat "$WORK/mvictim")" = precious ] && grep -qx "Ending.Work.Step 10" <<<"$got" \
    && grep -q "tracer: cannot open the metrics output $WORK/mlink/metrics.jsonl: it is a symbolic link (not followed); no metrics file" "$WORK/mlink/log"; then
    ok "metrics file is a planted symlink: refused with the reason, the target untouched, spans still written"
else bad "planted symlink as metrics output" "$(cat "$WORK/mvictim"; echo "$got"; grep -E 'ERROR|WARN' "$WORK/mlink/log")"; fi

clr_done
