#!/usr/bin/env bash
# Real-runtime test of the USDT probes clrmux:span_start and clrmux:span_end (src/tracer/usdt.h)
# with bpftrace: tests/clr/apps/usdtapp under clrmux with the built-in tracer tracing
# UsdtApp.Work::Spin (~200 us a call, every 10th left by an exception); bpftrace attaches to
# the process (-p) before the calls start and prints every span_start and span_end, and the
# latency histogram of docs/control.md. Checked: both probes fire once per call, with the method's name,
# the span id and trace id of the span in the span file, the error flag of its status, and a
# duration within 10% of the span's; the semaphores are set while bpftrace is attached (the
# probes are off, a load and a branch, otherwise).
#
# Where BPF cannot run (no bpftrace, no privilege, a kernel without BPF or uprobes) the test
# says so loudly and skips; under CI (CI=true) that is a failure only where the kernel allows
# BPF (a bpf(BPF_PROG_LOAD) of a two-instruction socket filter succeeds): then the environment,
# not the kernel, is missing something.
#
# Usage: tests/clr/usdt.sh   (one line per check; "usdt: N passed, N failed")
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite usdt "$@"

LIB="$ROOT/build/libclrmux.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-usdt.XXXXXX")
APP_PID=
BT_PID=
cleanup() {
    [ -n "$BT_PID" ] && kill -INT "$BT_PID" 2>/dev/null
    [ -n "$APP_PID" ] && kill -9 "$APP_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
PY=$(command -v /usr/bin/python3 || command -v python3)

banner() {
    echo "##########################################################################"
    echo "## $1"
    echo "##########################################################################"
}
# 0 when the kernel lets this process load a BPF program (a socket filter: r0 = 0; exit)
kernel_allows_bpf() {
    "$PY" - <<'EOF'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
insns = struct.pack("<BBhi", 0xb7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)
buf = ctypes.create_string_buffer(insns)
lic = ctypes.create_string_buffer(b"GPL")
attr = ctypes.create_string_buffer(128)
struct.pack_into("<IIQQ", attr, 0, 1, 2, ctypes.addressof(buf), ctypes.addressof(lic))  # SOCKET_FILTER
import platform
nr = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), 321)  # the bpf system call's number
fd = libc.syscall(nr, 5, attr, 128)  # bpf(BPF_PROG_LOAD)
if fd < 0:
    print(os.strerror(ctypes.get_errno()))
    sys.exit(1)
os.close(fd)
EOF
}
cannot_run() { # cannot_run WHY
    banner "the USDT probes' test did NOT run: $1"
    local k
    if k=$(kernel_allows_bpf 2>&1); then
        if [ "${CI:-}" = "true" ]; then
            bad "BPF: the kernel allows it, but $1 (CI=true: a failure)"
        else
            echo "     (the kernel allows BPF here: install or fix what is missing to run it)"
        fi
    else
        echo "     (this kernel does not let this process load BPF programs: $k; not a failure, even under CI)"
    fi
    clr_done
}
[ -f "$LIB" ] || { bad "build/libclrmux.so missing (make all)"; clr_done; }
if ! readelf -n "$LIB" 2>/dev/null | grep -q "Name: span_end"; then
    bad "libclrmux.so has no USDT probes (built without <sys/sdt.h>: systemtap-sdt-dev, scripts/setup.sh)"
    clr_done
fi
command -v bpftrace >/dev/null 2>&1 || cannot_run "bpftrace is not installed (scripts/setup.sh test installs it)"
if ! out=$(timeout 60 bpftrace -e 'BEGIN { printf("bpf-ok\n"); exit(); }' 2>&1) || ! grep -q bpf-ok <<<"$out"; then
    cannot_run "bpftrace cannot run here: $(grep -v RLIMIT_MEMLOCK <<<"$out" | head -3 | tr '\n' ' ')"
fi

# ---- the run ----------------------------------------------------------------------------
CALLS=100
printf '[child tracer]\nbuiltin = tracer\noutput = %s\nflush_interval_ms = 10\ntrace = usdtapp!UsdtApp.Work::Spin\n' \
    "$WORK/spans.jsonl" >"$WORK/loader.conf"
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/loader.conf" \
    CLRMUX_LOG_FILE="$WORK/clrmux.log" "${DOTNET[@]}" "$CLR_APPS/usdtapp/usdtapp.dll" "$WORK/go" $CALLS \
    >"$WORK/app.out" 2>"$WORK/app.err" </dev/null &
APP_PID=$!
# the semaphores' addresses (readelf: in the library's file) and where the library is mapped
SEM=$(readelf -n "$LIB" | awk '/Name: span_end/ {getline; for (i = 1; i <= NF; i++) if ($i == "Semaphore:") print $(i+1)}')
sem_value() { # the span_end semaphore in the running process
    "$PY" - "$APP_PID" "$LIB" "$SEM" <<'EOF'
import sys, os
pid, lib, sem = int(sys.argv[1]), os.path.realpath(sys.argv[2]), int(sys.argv[3], 16)
# the semaphore's file offset: from its section's address and offset (.probes)
import subprocess
secs = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True).stdout
off = None
for l in secs.splitlines():
    p = l.replace("[ ", "[").split()
    if len(p) > 5 and p[1] == ".probes":
        addr, foff = int(p[3], 16), int(p[4], 16)
        off = sem - addr + foff
maps = open("/proc/%d/maps" % pid).read().splitlines()
for l in maps:
    f = l.split()
    if len(f) >= 6 and os.path.realpath(f[5]) == lib:
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        moff = int(f[2], 16)
        if moff <= off < moff + (hi - lo):
            with open("/proc/%d/mem" % pid, "rb") as m:
                m.seek(lo + off - moff)
                print(int.from_bytes(m.read(2), "little"))
            sys.exit(0)
print("?")
EOF
}
for i in $(seq 100); do grep -q "control: listening\|tracer: .* target" "$WORK/clrmux.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
before=$(sem_value)
timeout 120 bpftrace -p "$APP_PID" -e "
usdt:$LIB:clrmux:span_start { printf(\"S %s %016lx %s\n\", str(arg0), arg1, str(arg2)); }
usdt:$LIB:clrmux:span_end { printf(\"E %s %016lx %s %d %d\n\", str(arg0), arg1, str(arg2), arg3, arg4);
                            @us[str(arg0)] = hist(arg3 / 1000); }" >"$WORK/bt.out" 2>"$WORK/bt.err" &
BT_PID=$!
for i in $(seq 600); do grep -q "Attaching" "$WORK/bt.out" && break; kill -0 $BT_PID 2>/dev/null || break; sleep 0.1; done
sleep 0.5
during=$(sem_value)
if ! grep -q "Attaching" "$WORK/bt.out"; then
    touch "$WORK/go"
    wait "$APP_PID"
    APP_PID=
    cannot_run "bpftrace could not attach to the process: $(grep -v RLIMIT_MEMLOCK "$WORK/bt.err" | head -3 | tr '\n' ' ')"
fi
touch "$WORK/go"
wait "$APP_PID"
rc=$?
APP_PID=
sleep 0.5
kill -INT "$BT_PID" 2>/dev/null
wait "$BT_PID"
BT_PID=
if [ $rc = 0 ] && [ "$(cat "$WORK/app.out")" = "done $((CALLS / 10))" ]; then ok "usdtapp ran under clrmux with bpftrace attached ($CALLS calls)"
else bad "usdtapp's run" "exit $rc: $(cat "$WORK/app.out") $(tail -3 "$WORK/app.err")"; fi
if [ "$before" = 0 ] && [ "${during:-0}" -ge 1 ] 2>/dev/null; then
    ok "the span_end semaphore: 0 before bpftrace attached, $during while attached"
else bad "the span_end semaphore" "before '$before', while attached '$during'"; fi

"$PY" - "$WORK/bt.out" "$WORK/spans.jsonl" $CALLS >"$WORK/check" 2>&1 <<'EOF'
import json, sys
calls = int(sys.argv[3])
starts, ends = {}, {}
hist = False
for line in open(sys.argv[1]):
    p = line.split()
    if p and p[0] == "S" and len(p) == 4:
        starts[p[2]] = (p[1], p[3])
    elif p and p[0] == "E" and len(p) == 6:
        ends[p[2]] = (p[1], p[3], int(p[4]), int(p[5]))
    elif line.startswith("@us[UsdtApp.Work.Spin]"):
        hist = True
spans = {}
for line in open(sys.argv[2]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                err = sp.get("status", {}).get("code") in (2, "STATUS_CODE_ERROR")
                spans[sp["spanId"]] = (sp["name"], sp["traceId"], int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"]), err)
problems = []
if len(spans) != calls:
    problems.append("%d spans in the file, expected %d" % (len(spans), calls))
worst = 0.0
for sid, (name, tid, dur, err) in spans.items():
    e, s = ends.get(sid), starts.get(sid)
    if not e or not s:
        problems.append("span %s: no %s" % (sid, "span_end" if not e else "span_start"))
        continue
    if e[0] != name or s[0] != name or e[1] != tid or s[1] != tid:
        problems.append("span %s: probes say %s/%s, the file %s/%s" % (sid, e[0], e[1], name, tid))
    if e[3] != int(err):
        problems.append("span %s: error flag %d, the file's status %s" % (sid, e[3], err))
    rel = abs(e[2] - dur) / dur
    worst = max(worst, rel)
    if rel > 0.10:
        problems.append("span %s: duration %d ns by the probe, %d ns in the file" % (sid, e[2], dur))
errors = sum(1 for v in ends.values() if v[3])
print("%d span_start, %d span_end for %d spans in the file; %d with the error flag; durations within %.3f%%; histogram %s" % (
    len(starts), len(ends), len(spans), errors, worst * 100, "printed" if hist else "MISSING"))
if len(ends) != calls or len(starts) != calls or errors != calls // 10 or not hist:
    problems.append("counts")
for p in problems[:10]:
    print(p)
sys.exit(1 if problems else 0)
EOF
if [ $? = 0 ]; then ok "bpftrace saw every span: $(head -1 "$WORK/check")"
else bad "the probes against the span file" "$(cat "$WORK/check")
$(grep -v RLIMIT "$WORK/bt.err" | head -5)"; fi
clr_done
