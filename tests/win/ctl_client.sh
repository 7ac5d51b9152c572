#!/usr/bin/env bash
# `clrmux ctl` on Windows (build/win-x64/clrmux.exe, src/cli/ctl.c + ctl_reach_win.c) under
# Wine, against processes that serve the control channel's named pipe (build/win-x64/ctl_serve.exe,
# tests/win/ctl_serve.c: the server of src/control/ctl_win.c in a process of its own):
#   - one without a mux (every command: "clrmux has not started in this process", exit 1),
#   - one with a mux of no children (status as text and JSON, naming that process's id: the
#     pipe of the process asked; log-level changes what the next status says; trace add
#     refused without a tracer, exit 1; a method name outside ASCII reaches the process as
#     UTF-8),
#   - one with no channel (not a .NET process), and a process id that is not there;
#   - one that took the pipe name of another process id (a client must refuse it);
#   - usage: --help, --version, an unknown command (exit 2, nothing sent), run/check/attach
#     said to be Linux-only.
# Wine's process ids are its Windows ones (GetCurrentProcessId): each server prints its own.
# Called by tests/cross.sh after `make windows` with WINE set (and WINEPREFIX, TMPDIR);
# prints one line per check and a closing "N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
WINE=${WINE:?WINE: the wine loader}
W="$ROOT/${BUILD:-build}/win-x64"
export WINEPREFIX=${WINEPREFIX:-$W/wineprefix} WINEDEBUG=-all
CLI="$W/clrmux.exe"
SERVE="$W/ctl_serve.exe"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-winctl.XXXXXX")
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - clrmux.exe ctl (wine): $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - clrmux.exe ctl (wine): $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -20; }
has() { grep -qF -- "$2" <<<"$1"; }

SERVERS=()
cleanup() {
    exec 3>&- 4>&- 5>&- 6>&- 2>/dev/null
    local p i
    for p in "${SERVERS[@]}"; do
        for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill "$p" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# start MODE FD [ARG]: ctl_serve.exe MODE [ARG] with its standard input the fifo held open on FD
# (closing FD ends it); it prints its Windows process id into MODE.out
start() {
    local mode=$1 fd=$2
    shift 2
    mkfifo "$WORK/$mode.in"
    # (the fifos' write ends of the others are not inherited: only FD may hold each open;
    # wineserver, when this starts it, keeps none either)
    "$WINE" "$SERVE" "$mode" "$@" <"$WORK/$mode.in" >"$WORK/$mode.out" 2>"$WORK/$mode.err" 3>&- 4>&- 5>&- 6>&- &
    SERVERS+=($!)
    eval "exec $fd>\"\$WORK/\$mode.in\""
}
for f in "$CLI" "$SERVE"; do
    [ -f "$f" ] || { bad "$f is not built (make windows)"; echo "$PASS passed, $FAIL failed"; exit 1; }
done
start bare 3
start mux 4
start idle 5
start squat 6 4000004 # takes the pipe name of process 4000004, which is not there
for i in $(seq 600); do # the first Wine process of a prefix may take a while
    grep -q '^pid ' "$WORK/bare.out" && grep -q '^pid ' "$WORK/mux.out" && grep -q '^pid ' "$WORK/idle.out" \
        && grep -q '^pid ' "$WORK/squat.out" && break
    sleep 0.1
done
pid_of() { awk '/^pid /{print $2}' "$WORK/$1.out" | tr -d '\r'; }
BARE=$(pid_of bare) MUX=$(pid_of mux) IDLE=$(pid_of idle) SQUAT=$(pid_of squat)
if [ -z "$BARE" ] || [ -z "$MUX" ] || [ -z "$IDLE" ] || [ -z "$SQUAT" ]; then
    bad "the serving processes did not start (pids '$BARE' '$MUX' '$IDLE' '$SQUAT')" "$(cat "$WORK"/*.err)"
    echo "$PASS passed, $FAIL failed"
    exit 1
fi

# cli ARGS...: runs clrmux.exe; rc, out and err (without Windows's CRs) set
cli() {
    LC_ALL=C.UTF-8 "$WINE" "$CLI" "$@" >"$WORK/out" 2>"$WORK/err" 3>&- 4>&- 5>&- 6>&-
    rc=$?
    out=$(tr -d '\r' <"$WORK/out")
    err=$(tr -d '\r' <"$WORK/err")
}
both() { printf '%s\n--- stderr:\n%s\n' "$out" "$err"; }

# ---- usage ------------------------------------------------------------------------------
cli --version
[ $rc = 0 ] && [[ $out == "clrmux "*" (Windows x64: ctl only)" ]] && ok "--version: '$out'" || bad "--version (rc=$rc)" "$(both)"
cli --help
[ $rc = 0 ] && has "$out" "clrmux ctl PID status" && has "$out" "run, check and attach are Linux-only" \
    && ok "--help: ctl's usage, run/check/attach said to be Linux-only" || bad "--help (rc=$rc)" "$(both)"
cli run -- app.exe
[ $rc = 2 ] && has "$err" "clrmux: 'run' is Linux-only" && ok "run: Linux-only, exit 2" || bad "run (rc=$rc)" "$(both)"
cli ctl --help
[ $rc = 0 ] && has "$out" "usage: clrmux ctl PID COMMAND" && ok "ctl --help" || bad "ctl --help (rc=$rc)" "$(both)"
cli ctl "$MUX" frobnicate
[ $rc = 2 ] && has "$err" "clrmux ctl: unknown command 'frobnicate'" && ok "an unknown command: said by the client, exit 2" \
    || bad "an unknown command (rc=$rc)" "$(both)"

# ---- a process without a mux --------------------------------------------------------------
cli ctl "$BARE" status
[ $rc = 1 ] && [ "$err" = "clrmux ctl: clrmux has not started in this process" ] && [ -z "$out" ] \
    && ok "status of a process where clrmux has not started: its error on stderr, exit 1" \
    || bad "status without a mux (rc=$rc)" "$(both)"

# ---- a process with a mux ------------------------------------------------------------------
cli ctl "$MUX" status
[ $rc = 0 ] && [[ $(head -n 1 <<<"$out") == "clrmux "*" in process $MUX (ctl_serve), .NET 10.0.test, "* ]] \
    && has "$out" "config  C:/clrmux/loader.conf" && has "$out" "(level INFO)" && [ -z "$err" ] \
    && ok "status: the reply's body on stdout, exit 0 ($(head -n 1 <<<"$out"))" || bad "status (rc=$rc)" "$(both)"
cli ctl "$MUX" status --json
[[ $rc = 0 && $out == "{\"pid\":$MUX,"*'"config":"C:/clrmux/loader.conf"'* ]] \
    && ok "status --json: one JSON object, of process $MUX" || bad "status --json (rc=$rc)" "$(both)"
cli ctl "$MUX" log-level debug
[ $rc = 0 ] && [ "$out" = "log level DEBUG (was INFO)" ] && ok "log-level debug: '$out'" || bad "log-level (rc=$rc)" "$(both)"
cli ctl "$MUX" status
[ $rc = 0 ] && has "$out" "(level DEBUG)" && ok "status after it says level DEBUG" || bad "status after log-level (rc=$rc)" "$(both)"
cli ctl "$MUX" trace add 'Shop!Shop.Cart::Total'
[ $rc = 1 ] && [[ $err == "clrmux ctl: no built-in tracer in this process"* ]] && [ -z "$out" ] \
    && ok "trace add without a tracer: refused by the process, exit 1" || bad "trace add (rc=$rc)" "$(both)"
cli ctl "$MUX" trace add 'Café!Ns.Tÿpe::Ünïcode'
sleep 0.3
[ $rc = 1 ] && grep -qF "'trace add Café!Ns.Tÿpe::Ünïcode' from pid" "$WORK/mux.err" \
    && ok "a method name outside ASCII reaches the process as UTF-8 (its log line)" \
    || bad "a non-ASCII target (rc=$rc)" "$(both; grep -a 'trace add' "$WORK/mux.err")"
grep -q frobnicate "$WORK/mux.err" && bad "the unknown command reached the process" "$(grep -a frobnicate "$WORK/mux.err")" \
    || ok "the unknown command never reached the process"

# ---- processes that cannot be reached ------------------------------------------------------
cli ctl "$IDLE" status
[ $rc = 1 ] && [ "$err" = "clrmux ctl: process $IDLE is not a .NET process (no coreclr.dll in it), so not under clrmux" ] \
    && ok "a process without the pipe: '$err'" || bad "a process without the pipe (rc=$rc)" "$(both)"
cli ctl 4000000 status
[ $rc = 1 ] && [ "$err" = "clrmux ctl: no process 4000000" ] && ok "no such process: '$err'" || bad "no such process (rc=$rc)" "$(both)"

cli ctl 4000004 status
[ $rc = 1 ] && [ "$err" = "clrmux ctl: \\\\.\\pipe\\clrmux-ctl-4000004 is held by process $SQUAT, not by process 4000004: not its control channel; nothing sent" ] \
    && ! has "$out" squatted && ok "a pipe name taken by another process (GetNamedPipeServerProcessId): refused, exit 1" \
    || bad "a pipe name taken by another process (rc=$rc)" "$(both)"

# ---- the servers end when their input closes ------------------------------------------------
exec 3>&- 4>&- 5>&- 6>&-
ended=1
for p in "${SERVERS[@]}"; do
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && ended=0
done
[ $ended = 1 ] && ok "the serving processes ended" || bad "a serving process did not end within 10 s"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
