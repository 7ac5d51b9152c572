#!/usr/bin/env bash
# Real-runtime tests of the control channel (`clrmux ctl`, src/control) and of the runtime's
# perf map on request (perf_map = true, `clrmux run --perf-map`).
#
# The compose app in its ctl mode (tests/clr/apps/compose: COMPOSE_MODE=ctl) runs under
# clrmux with no `trace =` line, beside the IL-rewriting child A (fake_profilers/ilrewriter.c,
# rewriting Compose.Work::Compute through ReJIT from the start) and the built-in profiler:
#   phase 1  a thread calls Compute in a loop (hot, tier 1): `trace add` while it runs (also of
#            Leaf, which Mid inlined: traced where it was inlined, Mid re-JIT-compiled); status
#            (text, JSON); another user (nobody) refused, by the folder and by SO_PEERCRED (a
#            hard link of the socket where nobody may reach it); garbage, oversize, slow clients,
#            clients killed mid-command: nothing changes (status, targets, log level as before)
#   phase 2  after exactly 200 calls: `status` numbers against the span file and the profile
#            folder; `profile flush` (the file it names exists), stop, start; `trace remove`
#   then     200 more calls: no span; A's counter counts every call throughout
# Then: a process with enable_control = false (and perf_map = true: the runtime's perf map,
# through EnablePerfMap, names Compute); a .NET process not under clrmux (`clrmux attach`);
# `clrmux run --perf-map`.
#
# Usage: tests/clr/control.sh   (one line per check; "control: N passed, N failed")
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10 by default, CLRMUX_TEST_RUNTIMES).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite control "$@"

LIB="$ROOT/build/libclrmux.so"
CLI="$ROOT/build/clrmux"
ILRW="$ROOT/build/fake/libilrewriter.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-control.XXXXXX")
APP_PID=
cleanup() {
    [ -n "$APP_PID" ] && kill -9 "$APP_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
[ -f "$LIB" ] && [ -x "$CLI" ] && [ -f "$ILRW" ] || { bad "build/ is incomplete (run make all)"; clr_done; }
PY=$(command -v /usr/bin/python3 || command -v python3)

# waits up to $2 s for file $1
wait_file() { local i; for ((i = 0; i < ${2:-60} * 20; i++)); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }
ctl() { "$CLI" ctl "$APP_PID" "$@"; }
# a raw client: bytes ($1, python literal), then waits $2 s before reading; prints the reply
raw() {
    "$PY" - "$SOCK" "$1" "${2:-0}" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
data = eval(sys.argv[2])  # a bytes expression of this script
try:
    s.sendall(data)
except OSError as e:
    pass
time.sleep(float(sys.argv[3]))
out = b""
s.settimeout(10)
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except OSError:
    pass
sys.stdout.write(out.decode("utf-8", "replace"))
EOF
}
ns() { date +%s%N; }

# ---- the process ------------------------------------------------------------------------
SYNC="$WORK/sync"
mkdir -p "$SYNC" "$WORK/profiles"
chmod 700 "$WORK"
cat >"$WORK/loader.conf" <<EOF
[loader]
log_level = debug
[child A]
path = $ILRW
clsid = {A0000001-0000-0000-0000-000000000001}
[child tracer]
builtin = tracer
output = $WORK/spans.jsonl
metrics_output = $WORK/metrics.jsonl
flush_interval_ms = 10
[child profiler]
builtin = profiler
output_dir = $WORK/profiles
period_s = 3600
EOF
# the baseline: the same app and mode without a profiler (no sync folder: no waits)
COMPOSE_MODE=ctl "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >"$WORK/base.out" 2>/dev/null </dev/null &
BASE_PID=$!
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/loader.conf" \
    CLRMUX_LOG_FILE="$WORK/clrmux.log" DOTNET_TieredCompilation=1 DOTNET_TC_CallCountingDelayMs=0 \
    ILRW_SYNC_DIR="$SYNC" COMPOSE_ACKS=2 COMPOSE_MODE=ctl COMPOSE_SYNC_S=180 ILRW_MODE_A0000001=rejit \
    ILRW_TARGETS_A0000001=Compute ILRW_COUNTER_A0000001=A ILRW_REJIT_AT_A0000001=0 ILRW_OUT_A0000001="$WORK/A.out" \
    "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >"$WORK/app.out" 2>"$WORK/app.err" </dev/null &
APP_PID=$!
wait "$BASE_PID"
SOCK=/tmp/clrmux-$(id -u)/ctl-$APP_PID.sock
[ -n "${CLRMUX_CONTROL_DIR:-${TMPDIR:-}}" ] && SOCK=${CLRMUX_CONTROL_DIR:-$TMPDIR}/clrmux-$(id -u)/ctl-$APP_PID.sock
wait_file "$SYNC/phase0" || { bad "the app reached its first phase" "$(tail -5 "$WORK/app.err")"; clr_done; }
touch "$SYNC/ack0.script"
wait_file "$SYNC/phase1" || { bad "the app reached phase 1" "$(tail -5 "$WORK/app.err")"; clr_done; }
wait_file "$SOCK" 10 || { bad "the control socket $SOCK appears" "$(grep control "$WORK/clrmux.log")"; clr_done; }

# ---- phase 1: the method runs hot ---------------------------------------------------------
ls -ld "$(dirname "$SOCK")" "$SOCK" >"$WORK/modes" 2>&1
if grep -q '^drwx------' "$WORK/modes" && grep -q '^srw-------' "$WORK/modes"; then
    ok "the socket $SOCK is 0600 in a 0700 folder"
else bad "socket and folder modes" "$(cat "$WORK/modes")"; fi

st=$(ctl status)
if [ $? = 0 ] && grep -q "^  A  *active" <<<"$st" && grep -q "^  tracer  *active .*builtin tracer" <<<"$st" \
    && grep -q "^  profiler  *active .*builtin profiler" <<<"$st" && grep -q "tracer 'tracer': 0 target(s)" <<<"$st" \
    && grep -q "^log     $WORK/clrmux.log (level DEBUG)" <<<"$st"; then
    ok "status: the three children active, the tracer without a target, the log"
else bad "status (text)" "$st"; fi
ctl status --json >"$WORK/status0.json"
if "$PY" -c "
import json, sys
s = json.load(open(sys.argv[1]))
assert s['pid'] == int(sys.argv[2]), s['pid']
assert [c['name'] for c in s['children']] == ['A', 'tracer', 'profiler']
assert all(c['state'] == 'active' for c in s['children'])
assert s['tracer']['targets'] == [] and s['tracer']['output'] == sys.argv[3] + '/spans.jsonl'
assert s['profilers'][0]['child'] == 'profiler' and s['profilers'][0]['sampling'] in (True, False)
assert s['log']['level'] == 'DEBUG'
" "$WORK/status0.json" "$APP_PID" "$WORK" 2>"$WORK/json.err"; then
    ok "status --json: valid JSON with the same children, tracer and profiler"
else bad "status --json" "$(cat "$WORK/json.err"; head -c 600 "$WORK/status0.json")"; fi

# another user: the folder stops `clrmux ctl` run as nobody ...
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
    out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$CLI" ctl "$APP_PID" status 2>&1)
    rc=$?
    if [ $rc = 1 ] && grep -q "permission denied: only the user of process $APP_PID (uid 0) or root may control it" <<<"$out"; then
        ok "another user (nobody) is refused by clrmux ctl: $out"
    else bad "clrmux ctl as nobody" "rc $rc: $out"; fi
    # ... and SO_PEERCRED stops it where the folder would not (a hard link of the socket in a
    # folder nobody may enter, the link's mode opened)
    mkdir -m 0755 "$WORK/open" && ln "$SOCK" "$WORK/open/s.sock" && chmod 0666 "$WORK/open/s.sock"
    chmod 0711 "$WORK"
    out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$PY" - "$WORK/open/s.sock" 2>&1 <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:  # refused at once: the reply may come before the request is sent
    s.sendall(b"trace add compose!Compose.Work::Compute\n")
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass
print(s.recv(4096).decode())
EOF
)
    chmod 0700 "$WORK"
    rm -f "$WORK/open/s.sock"
    nob=$(id -u nobody)
    if grep -q "error: permission denied" <<<"$out" && grep -q "control: uid $nob pid [0-9]* refused: only this process's user (uid 0) or root may control it" "$WORK/clrmux.log"; then
        ok "a peer of another uid ($nob) reaching the socket is refused by SO_PEERCRED and logged"
    else bad "SO_PEERCRED refusal" "$out
$(grep 'control:' "$WORK/clrmux.log" | tail -3)"; fi
else
    echo "skip - [.NET $CLR_RTV] another user's refusal: needs root, setpriv and the user nobody"
fi

# hostile and clumsy clients change nothing
r1=$(raw 'b"\x00\x01\xff garbage\n"')
r2=$(raw 'b"a" * (1 << 20)')
r3=$(raw 'b"trace add compose!Compose.Work::Comp"' 3)
r4=$(raw 'b"status --json --json --yaml\n"')
r5=$(raw 'b"log-level loud\n"')
# clients killed mid-command: after sending a request, before reading it; with half a request
"$PY" -c "
import socket, sys, os, signal
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'status --json\n')
os.kill(os.getpid(), signal.SIGKILL)" "$SOCK" 2>/dev/null
"$PY" -c "
import socket, sys, os, signal
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'trace add compose!Compose.W')
os.kill(os.getpid(), signal.SIGKILL)" "$SOCK" 2>/dev/null
ctl status --json >"$WORK/status0b.json" 2>&1 &
CTLP=$!
kill -9 $CTLP 2>/dev/null
wait $CTLP 2>/dev/null
sleep 2.2 # the half request's read times out
ctl status --json >"$WORK/status1.json"
if grep -q "^error: control character 0x00 at byte 0" <<<"$r1" && grep -q "^error: request longer than 4095 bytes" <<<"$r2" \
    && grep -q "^error: no complete request within 2 s" <<<"$r3" && grep -q "^error: status: unexpected argument" <<<"$r4" \
    && grep -q "^error: log level 'loud' is not one of" <<<"$r5" \
    && "$PY" -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert b['tracer']['targets'] == [] and b['log']['level'] == a['log']['level'] == 'DEBUG'
assert [c['state'] for c in a['children']] == [c['state'] for c in b['children']]
" "$WORK/status0.json" "$WORK/status1.json"; then
    ok "garbage, 1 MB, a slow client, bad arguments, clients killed mid-command: each an error or nothing, no change"
else bad "hostile clients" "r1=$r1
r2=$r2
r3=$r3
r4=$r4
r5=$r5
$(head -c 300 "$WORK/status1.json")"; fi

# trace add while Compute runs hot
ADD0=$(ns)
out=$(ctl trace add 'compose!Compose.Work::Compute')
rc=$?
ADD1=$(ns)
if [ $rc = 0 ] && grep -q "compose!Compose.Work::Compute added: 1 method(s) rewritten through ReJIT" <<<"$out"; then
    ok "trace add on a method running hot: $out"
else bad "trace add" "rc $rc: $out"; fi
out=$(ctl trace add 'compose!Compose.Work::Leaf')
if [ $? = 0 ] && grep -q "compose!Compose.Work::Leaf added: 1 method(s) rewritten through ReJIT" <<<"$out"; then
    ok "trace add on a method inlined into a hot caller: $out"
else bad "trace add of an inlined method" "$out"; fi
out=$(ctl trace add 'compose!Compose.Work::NoSuchMethod' 2>&1)
if [ $? = 1 ] && grep -q "matches no method in compose" <<<"$out"; then ok "trace add of a method that does not exist: $out"
else bad "trace add of a missing method" "$out"; fi
out=$(ctl trace add 'not a target' 2>&1)
if [ $? = 1 ] && grep -q "bad target" <<<"$out"; then ok "trace add of a malformed target: $out"
else bad "trace add of a malformed target" "$out"; fi
out=$(ctl trace list)
if grep -q "^traced  compose!Compose.Work::Compute  (control)  1 method(s)" <<<"$out"; then ok "trace list: $(head -1 <<<"$out")"
else bad "trace list" "$out"; fi
sleep 0.3
touch "$SYNC/ack1.script"

# ---- phase 2: 200 calls made; the numbers, the profile, then trace remove -------------------
wait_file "$SYNC/phase2" || { bad "the app reached phase 2" "$(tail -5 "$WORK/app.err")"; clr_done; }
# status matches the files once the export thread has written what the probes recorded
agree=0
for i in $(seq 50); do
    sleep 0.1
    ctl status --json >"$WORK/status2.json" || continue
    if "$PY" - "$WORK/status2.json" "$WORK/spans.jsonl" >"$WORK/agree" 2>&1 <<'EOF'; then agree=1; break; fi
import json, sys
s = json.load(open(sys.argv[1]))
spans = compute = lines = 0
for line in open(sys.argv[2]):
    lines += 1
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            spans += len(ss["spans"])
            compute += sum(1 for sp in ss["spans"] if sp["name"] == "Compose.Work.Compute")
t = s["tracer"]
calls = sum(x["calls"] for x in t["targets"] if x["target"] in ("compose!Compose.Work::Compute", "compose!Compose.Work::Leaf"))
print("status: written %d lines %d calls %d dropped %d; file: %d spans (%d of Compute) in %d lines" % (
    t["spans"]["written"], t["spans"]["lines"], calls, t["spans"]["dropped"], spans, compute, lines))
assert t["spans"]["written"] == spans and t["spans"]["lines"] == lines
assert calls == spans + t["spans"]["dropped"] + t["spans"]["unsampled"] and compute >= 201
owned = {c["name"]: c["rejit_methods"] for c in s["children"]}
print("ReJIT owners: %s" % owned)
assert owned == {"A": 1, "tracer": 2, "profiler": 0}
EOF
done
if [ $agree = 1 ]; then ok "status numbers match the span file: $(cat "$WORK/agree")"
else bad "status numbers against the span file" "$(cat "$WORK/agree")"; fi
out=$(ctl profile flush)
pf=$(sed -n "s/^profiler 'profiler': wrote \(.*\) ([0-9.]* s period)$/\1/p" <<<"$out")
ctl status --json >"$WORK/status3.json"
if [ -n "$pf" ] && [ -s "$pf" ] && "$PY" -c "
import json, sys, os
p = json.load(open(sys.argv[1]))['profilers'][0]
files = [f for f in os.listdir(sys.argv[3]) if f.endswith('.pb.gz')]
assert p['last_file'] == sys.argv[2], p
assert p['files'] == len(files) == 1, (p['files'], files)
" "$WORK/status3.json" "$pf" "$WORK/profiles"; then
    ok "profile flush wrote $(basename "$pf"); status names it and counts the profile folder's files"
else bad "profile flush" "$out
$(head -c 400 "$WORK/status3.json")"; fi
o1=$(ctl profile stop) && o2=$(ctl profile stop) && o3=$(ctl profile start)
if grep -q "sampler is stopped" <<<"$o1" && grep -q "already stopped" <<<"$o2" && grep -q "runs again" <<<"$o3"; then
    ok "profile stop, stop again, start"
else bad "profile stop/start" "$o1 / $o2 / $o3"; fi
out=$(ctl trace remove 'compose!Compose.Work::Compute')
if [ $? = 0 ] && grep -q "removed: the tracer's rewrite of 1 method(s) reverted" <<<"$out"; then ok "trace remove: $out"
else bad "trace remove" "$out"; fi
out=$(ctl trace remove 'compose!Compose.Work::Leaf')
if [ $? = 0 ] && grep -q "removed: the tracer's rewrite of 1 method(s) reverted" <<<"$out"; then ok "trace remove of the inlined method: $out"
else bad "trace remove of Leaf" "$out"; fi
ctl status --json >"$WORK/status4.json"
if "$PY" -c "
import json, sys
c = {c['name']: c['rejit_methods'] for c in json.load(open(sys.argv[1]))['children']}
assert c == {'A': 1, 'tracer': 0, 'profiler': 0}, c
" "$WORK/status4.json" 2>"$WORK/own.err"; then ok "status after the remove: the tracer owns no ReJIT, A still owns Compute's"
else bad "ReJIT owners after the remove" "$(cat "$WORK/own.err")"; fi
out=$(ctl log-level info)
if [ "$out" = "log level INFO (was DEBUG)" ]; then ok "log-level: $out"; else bad "log-level" "$out"; fi
touch "$SYNC/ack2.script"

# ---- phase 3 and the end ----------------------------------------------------------------
wait_file "$SYNC/phase3" || { bad "the app reached phase 3" "$(tail -5 "$WORK/app.err")"; clr_done; }
out=$(ctl trace list)
if grep -q "^removed compose!Compose.Work::Compute" <<<"$out"; then ok "trace list after remove: $(head -1 <<<"$out")"
else bad "trace list after remove" "$out"; fi
touch "$SYNC/ack3.script"
wait "$APP_PID"
rc=$?
APP_PID_DONE=$APP_PID
APP_PID=
problems=""
[ $rc = 0 ] || problems+="exit code $rc; "
cmp -s "$WORK/base.out" "$WORK/app.out" || problems+="stdout differs from the run without a profiler; "
grep -q InvalidProgramException "$WORK/app.out" "$WORK/app.err" && problems+="InvalidProgramException; "
grep -q "not acknowledged" "$WORK/app.err" && problems+="a phase was not acknowledged; "
[ -e "$SOCK" ] && problems+="the socket is still there; "
[ -z "$problems" ] && ok "the app ran to its end (exit 0, its output unchanged), the socket removed" \
    || bad "the app's run" "$problems $(tail -3 "$WORK/app.err")"
read -r _ _ T1 T2 T3 T4 < <(grep '^ctl marks' "$WORK/app.err")
HOT=$(awk '$1=="ctl" && $2=="hot" && $3 ~ /^[0-9]+$/ {print $3}' "$WORK/app.err")
"$PY" - "$WORK/spans.jsonl" "$T1" "$T2" "$T3" "$ADD0" "$HOT" >"$WORK/phases" 2>&1 <<'EOF'
import json, sys
t1, t2, t3, add0, hot = (int(x) for x in sys.argv[2:7])
starts, leaf = [], []
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            starts += [int(sp["startTimeUnixNano"]) for sp in ss["spans"] if sp["name"] == "Compose.Work.Compute"]
            leaf += [int(sp["startTimeUnixNano"]) for sp in ss["spans"] if sp["name"] == "Compose.Work.Leaf"]
before_add = sum(1 for s in starts if s < add0)
hot_spans = sum(1 for s in starts if add0 <= s < t1)
exact = sum(1 for s in starts if t1 <= s <= t2)
after = sum(1 for s in starts if s >= t3)
leaf_exact = sum(1 for s in leaf if t1 <= s <= t2)
leaf_other = sum(1 for s in leaf if s < add0 or s >= t3)
print("spans: %d before the add, %d of the %d hot calls, %d of the 200 calls, %d after the remove; "
      "Leaf (inlined into Mid before the add): %d of the 400 calls, %d before the add or after the remove" % (
    before_add, hot_spans, hot, exact, after, leaf_exact, leaf_other))
assert before_add == 0 and 1 <= hot_spans <= hot and exact == 200 and after == 0
assert leaf_exact == 400 and leaf_other == 0
EOF
if [ $? = 0 ]; then ok "one span per call from the add to the remove: $(cat "$WORK/phases")"
else bad "spans per phase" "$(cat "$WORK/phases")"; fi
A=$(awk '$1=="counter" && $2=="A" {print $3}' "$WORK/app.err")
if [ -n "$HOT" ] && [ "$A" = $((HOT + 400)) ] && grep -q '^rewrite_failures 0$' "$WORK/A.out" && grep -q '^rejit_errors 0$' "$WORK/A.out"; then
    ok "the other rewriter (child A) counted every call throughout: $A = $HOT hot + 400"
else bad "child A's counter" "A=$A hot=$HOT $(cat "$WORK/A.out" 2>/dev/null | tr '\n' ' ')"; fi
if grep -q "tracer: control: compose!Compose.Work::Compute added: ReJIT requested for 1 method(s)" "$WORK/clrmux.log" \
    && grep -q "control: 'trace remove compose!Compose.Work::Compute' from uid $(id -u) pid [0-9]*: done" "$WORK/clrmux.log"; then
    ok "the changes are logged with who made them"
else bad "control log lines" "$(grep control "$WORK/clrmux.log" | tail -5)"; fi

# ---- enable_control = false, with perf_map = true ------------------------------------------
mkdir -p "$WORK/sync2" "$WORK/perf"
printf '[loader]\nenable_control = false\nperf_map = true\n[child tracer]\nbuiltin = tracer\noutput = %s\ntrace = compose!Compose.Work::Compute\n' \
    "$WORK/spans2.jsonl" >"$WORK/off.conf"
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/off.conf" \
    CLRMUX_LOG_FILE="$WORK/off.log" DOTNET_PerfMapJitDumpPath="$WORK/perf" ILRW_SYNC_DIR="$WORK/sync2" COMPOSE_ACKS=1 \
    COMPOSE_MODE=ctl COMPOSE_SYNC_S=60 "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >/dev/null 2>"$WORK/off.err" </dev/null &
APP_PID=$!
wait_file "$WORK/sync2/phase0"
touch "$WORK/sync2/ack0.x"
wait_file "$WORK/sync2/phase1"
out=$("$CLI" ctl "$APP_PID" status 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q "clrmux runs in process $APP_PID but has no control channel.*enable_control = false" <<<"$out" \
    && grep -q "control: off (enable_control = false)" "$WORK/off.log"; then
    ok "enable_control = false: no channel, and clrmux ctl says why"
else bad "enable_control = false" "rc $rc: $out"; fi
for i in 1 2 3; do touch "$WORK/sync2/ack$i.x"; done
wait "$APP_PID"
PM="$WORK/perf/perf-$APP_PID.map"
APP_PID=
if [ "$CLR_RT" -ge 8 ] && grep -q "perf_map: the runtime writes its perf map" "$WORK/off.log" && [ -s "$PM" ] \
    && grep -q "Compose.Work::Compute" "$PM"; then
    ok "perf_map = true: the runtime wrote $(basename "$PM") ($(wc -l <"$PM") lines), Compose.Work::Compute in it"
else bad "perf_map = true" "$(grep perf_map "$WORK/off.log") $(ls "$WORK/perf")"; fi

# ---- a .NET process not under clrmux -------------------------------------------------------
mkdir -p "$WORK/sync3"
env ILRW_SYNC_DIR="$WORK/sync3" COMPOSE_ACKS=1 COMPOSE_MODE=ctl COMPOSE_SYNC_S=60 \
    "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >/dev/null 2>&1 </dev/null &
APP_PID=$!
PLAIN=$APP_PID
wait_file "$WORK/sync3/phase0"
out=$("$CLI" ctl "$APP_PID" status 2>&1)
rc=$?
for i in 0 1 2 3; do touch "$WORK/sync3/ack$i.x"; done
wait "$APP_PID"
APP_PID=
if [ $rc = 1 ] && grep -q "is a .NET process that does not run under clrmux; \`clrmux attach $PLAIN" <<<"$out"; then
    ok "a .NET process not under clrmux: $out"
else bad "a process not under clrmux" "rc $rc: $out"; fi

# ---- clrmux run --perf-map ------------------------------------------------------------------
mkdir -p "$WORK/runperf" "$WORK/runout"
( cd "$WORK" && DOTNET_PerfMapJitDumpPath="$WORK/runperf" "$CLI" run --perf-map --output-dir "$WORK/runout" \
    --trace 'compose!Compose.Work::Compute' -- "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >"$WORK/run.out" 2>"$WORK/run.err" )
pm=$(ls "$WORK/runperf"/perf-*.map 2>/dev/null | head -1)
if [ -n "$pm" ] && grep -q "Compose.Work::Compute" "$pm" && grep -q "the runtime writes its perf map" "$WORK/run.err"; then
    ok "clrmux run --perf-map: the runtime wrote $(basename "$pm"), Compose.Work::Compute in it"
else bad "clrmux run --perf-map" "$(cat "$WORK/run.err") $(ls "$WORK/runperf")"; fi

clr_done
