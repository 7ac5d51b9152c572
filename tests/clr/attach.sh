#!/usr/bin/env bash
# Real-runtime test of attaching clrmux to a running process (InitializeForAttach): a C# app
# (tests/clr/apps/eltapp serve) runs without any profiler; `build/clrmux attach PID --config
# FILE` (the launcher; its C# tool: make attach-tool) loads clrmux with a recorder child, a version-2 child (cannot attach: skipped), the
# built-in tracer (tracing Program::Work, ReJIT after attach) and the built-in profiler; then
# spans and a profile appear and the recorder saw InitializeForAttach and
# ProfilerAttachComplete. Prints one line per check and "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite attach "$@"
FAKE="$ROOT/build/fake"
if [ ! -x build/clrmux ] || ! make -s attach-tool >"${TMPDIR:-/tmp}/clrmux-attach-tool.log" 2>&1; then
    bad "build/clrmux and the attach tool are built (make all attach-tool)" "$(tail -n 20 "${TMPDIR:-/tmp}/clrmux-attach-tool.log" 2>/dev/null)"
    clr_done
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-attach.XXXXXX")
APP_PID=
cleanup() { [ -n "$APP_PID" ] && kill "$APP_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

cat >"$WORK/loader.conf" <<EOF
[loader]
log_level = debug
log_file = clrmux.log
[child rec]
path = $FAKE/librecorder.so
clsid = {A0000001-0000-0000-0000-000000000001}
[child old]
path = $FAKE/libv2only.so
clsid = {B0000002-0000-0000-0000-000000000002}
[child tracer]
builtin = tracer
output = spans.jsonl
flush_interval_ms = 200
trace = eltapp!Program::Work
[child profiler]
builtin = profiler
output_dir = profiles
period_s = 1
EOF
# the recorder's variables reach the child through the app's environment
RECORDER_MASK_A0000001=0x4 RECORDER_OUT_A0000001="$WORK/rec.out" \
    "${DOTNET[@]}" build/clr/eltapp/eltapp.dll serve "$WORK/stop" 60 >"$WORK/app.out" 2>&1 &
APP_PID=$!
for _ in $(seq 100); do grep -q '^ready' "$WORK/app.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$WORK/app.out" && ok "the app runs without a profiler" || bad "the app runs without a profiler" "$(cat "$WORK/app.out")"
sleep 0.5

if build/clrmux attach "$APP_PID" --config "$WORK/loader.conf" >"$WORK/attach.out" 2>&1; then
    ok "clrmux attach $APP_PID exits 0"
else bad "clrmux attach exits 0" "$(cat "$WORK/attach.out")"; fi
# let the tracer rewrite Work and the profiler take a period's worth of samples
for _ in $(seq 100); do [ -s "$WORK/spans.jsonl" ] && break; sleep 0.1; done
sleep 2
touch "$WORK/stop"
wait "$APP_PID"
rc=$?
APP_PID=
[ "$rc" = 0 ] && grep -q '^done$' "$WORK/app.out" && ok "the app runs on and ends normally" || bad "the app runs on and ends normally" "rc=$rc $(tail -n 3 "$WORK/app.out")"

LOG="$WORK/clrmux.log"
grep -q "attaching to a running process: config $WORK/loader.conf" "$LOG" 2>/dev/null \
    && ok "clrmux reads the config named by the attach request" || bad "clrmux reads the config named by the attach request" "$(head -5 "$LOG" 2>/dev/null)"
grep -q "child 'old'.*cannot attach" "$LOG" && ok "a child without ICorProfilerCallback3 is skipped with a log line" \
    || bad "a child without ICorProfilerCallback3 is skipped with a log line" "$(grep "child 'old'" "$LOG")"
grep -q '^InitializeForAttach 1$' "$WORK/rec.out" 2>/dev/null && grep -q '^ProfilerAttachComplete 1$' "$WORK/rec.out" \
    && ! grep -q '^Initialize ' "$WORK/rec.out" \
    && ok "the fake child sees InitializeForAttach and ProfilerAttachComplete (not Initialize)" \
    || bad "the fake child sees InitializeForAttach and ProfilerAttachComplete" "$(cat "$WORK/rec.out" 2>/dev/null)"
spans=$(grep -o '"name":"Program.Work"' "$WORK/spans.jsonl" 2>/dev/null | wc -l)
[ "$spans" -gt 0 ] && ok "the built-in tracer writes spans of Program.Work after attach ($spans)" \
    || bad "the built-in tracer writes spans after attach" "$(grep -i tracer "$LOG" | tail -5)"
prof=$(ls "$WORK"/profiles/*.pb.gz 2>/dev/null | wc -l)
[ "$prof" -gt 0 ] && ok "the built-in profiler writes profiles after attach ($prof)" \
    || bad "the built-in profiler writes profiles after attach" "$(grep -i profiler "$LOG" | tail -5)"

clr_done
