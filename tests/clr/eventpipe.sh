#!/usr/bin/env bash
# Real-runtime tests of one EventPipe session for all children (src/loader/eventpipe.c): two
# children (fake_profilers/epchild.c) enable the same provider at different keywords and
# levels; each must receive, event id by event id, what it receives loaded alone. App:
# tests/clr/apps/eltapp in "ep" mode (5 exceptions, 3 induced GCs). Event ids whose counts
# vary from run to run even alone (29 FinalizeObject, 10 AllocationTick, 13/14 the background
# GC thread's creation and end, which may fall before the session starts) are checked for
# presence, not count. Prints one line per check and "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite eventpipe "$@"
LIB="$ROOT/build/libclrmux.so"
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
A="{A0000001-0000-0000-0000-000000000001}"
B="{B0000002-0000-0000-0000-000000000002}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-ep.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$FAKE/libepchild.so" "$WORK/libepchild2.so" # a second library instance
APP=build/clr/eltapp/eltapp.dll
# (200, 201: IncreaseMemoryPressure, DecreaseMemoryPressure: GC.AddMemoryPressure calls that vary with timing; one extra 200 seen once on .NET 9)
VARYING='^ep (10|13|14|29|200|201) '
# a: Exception keyword (0x8000) at Error (2); b: GC|Exception (0x8001) at Verbose (5)
A_ENV=(EP_KEYWORDS=8000 EP_LEVEL=2)
B_ENV=(EP_KEYWORDS=8001 EP_LEVEL=5)

alone() { # alone TAG VAR=VALUE...
    local tag=$1
    shift
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$A" CORECLR_PROFILER_PATH="$FAKE/libepchild.so" \
        RECORDER_OUT="$WORK/$tag.rec" "$@" "${DOTNET[@]}" "$APP" ep >"$WORK/$tag.out" 2>&1
}
alone a_alone "${A_ENV[@]}"
alone b_alone "${B_ENV[@]}"
alone a2_alone "${A_ENV[@]}" EP_SESSIONS=2
grep -q '^ep 80 5$' "$WORK/a_alone.rec" && ok "reference: a alone receives the 5 ExceptionThrown events" \
    || bad "reference: a alone receives the 5 ExceptionThrown events" "$(cat "$WORK/a_alone.rec" "$WORK/a_alone.out")"

cat >"$WORK/two.conf" <<EOF
[loader]
log_level = debug
[child a]
path = $FAKE/libepchild.so
clsid = $A
[child b]
path = $WORK/libepchild2.so
clsid = $B
EOF
under() { # under TAG VAR=VALUE...
    local tag=$1
    shift
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/two.conf" \
        CLRMUX_LOG_FILE="$WORK/$tag.log" RECORDER_OUT_A0000001="$WORK/${tag}_a.rec" RECORDER_OUT_B0000002="$WORK/${tag}_b.rec" \
        "$@" "${DOTNET[@]}" "$APP" ep >"$WORK/$tag.out" 2>&1
}
under two EP_KEYWORDS_A0000001=8000 EP_LEVEL_A0000001=2 EP_KEYWORDS_B0000002=8001 EP_LEVEL_B0000002=5
cmp -s "$WORK/a_alone.out" "$WORK/two.out" && ok "the app's output is unchanged" || bad "the app's output is unchanged"
same() { # same DESC ALONE MUX
    if [ -s "$3" ] && diff <(grep '^ep ' "$2" | grep -Ev "$VARYING") <(grep '^ep ' "$3" | grep -Ev "$VARYING") >/dev/null; then
        ok "$1"
    else bad "$1" "$(diff <(grep '^ep ' "$2" | grep -Ev "$VARYING") <(grep '^ep ' "$3" | grep -Ev "$VARYING"))"; fi
}
same "child a (Exception, Error) receives under clrmux exactly the events it receives alone" "$WORK/a_alone.rec" "$WORK/two_a.rec"
same "child b (GC|Exception, Verbose) receives under clrmux exactly the events it receives alone" "$WORK/b_alone.rec" "$WORK/two_b.rec"
if grep -Eq '^ep (2|10|250) ' "$WORK/two_a.rec"; then bad "a receives no GC, no Verbose and no Informational events of b's session" "$(grep '^ep' "$WORK/two_a.rec")"
else ok "a receives no GC, no Verbose and no Informational events of b's session"; fi
grep -Eq '^ep 10 [1-9]' "$WORK/two_b.rec" && ok "b receives its Verbose GC events (AllocationTick)" || bad "b receives its Verbose GC events (AllocationTick)"
n=$(grep -c "runtime session started" "$WORK/two.log"); r=$(grep -c "runtime session replaced" "$WORK/two.log")
[ "$n" = 1 ] && [ "$r" = 0 ] && ok "one runtime session for both children" || bad "one runtime session for both children" "started $n, replaced $r"

# a child with two identical sessions receives each event twice, as alone (event id 1 left
# out: Microsoft-DotNETCore-EventPipe's ProcessInfo, which the runtime also writes when a
# second session starts during start-up; clrmux gives each view one, at the end)
under twice EP_KEYWORDS_A0000001=8000 EP_LEVEL_A0000001=2 EP_SESSIONS_A0000001=2 EP_KEYWORDS_B0000002=8001 EP_LEVEL_B0000002=5
VARYING='^ep (1|10|13|14|29|200|201) '
same "a child with two sessions receives each event once per session, as alone" "$WORK/a2_alone.rec" "$WORK/twice_a.rec"
grep -q '^ep 80 10$' "$WORK/twice_a.rec" && ok "... ExceptionThrown 10 times (5 per session)" || bad "... ExceptionThrown 10 times (5 per session)"

clr_done
