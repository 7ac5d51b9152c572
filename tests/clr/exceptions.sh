#!/usr/bin/env bash
# Real-runtime tests of exceptions through traced methods (issue 24, item 4): a child that
# records the exception callbacks (fake_profilers/exseq.c, as the runtime's own exception test
# profiler does) must see the same sequence beside the built-in tracer, tracing the very
# methods the exceptions cross, as it sees when it is the process's only profiler. The
# tracer's rewrite has no exception clause for it to see (no ExceptionSearchFilterEnter or
# ExceptionUnwindFinallyEnter of its own): a span ends in the tracer's unwind callbacks, with
# status ERROR and the exception. The app is tests/clr/apps/exctest (its header lists the
# spans expected). Prints one line per check and "exceptions: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite exceptions "$@"

LIB="$ROOT/build/libclrmux.so"
SEQ="$ROOT/build/fake/libexseq.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
SEQ_CLSID="{5E0E5E0E-0000-4000-8000-000000000024}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-exceptions.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
[ -f "$LIB" ] && [ -f "$SEQ" ] || { bad "$LIB or $SEQ is missing (run make all)"; clr_done; }
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed to read the spans"; clr_done; }

APP=("${DOTNET[@]}" "$CLR_APPS/exctest/exctest.dll")
# RECORDER_MASK 40: COR_PRF_MONITOR_EXCEPTIONS (corprof.idl)
run() { # run TAG [VAR=VALUE...]: stdout+stderr in TAG.out, exit code in TAG.rc
    local tag=$1
    shift
    env RECORDER_MASK=40 RECORDER_OUT="$WORK/$tag.seq" "$@" "${APP[@]}" >"$WORK/$tag.out" 2>&1
    echo $? >"$WORK/$tag.rc"
}
under_clrmux() { # under_clrmux TAG CONF
    run "$1" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$2" CLRMUX_LOG_FILE="$WORK/$1.log"
}
TARGETS=
for m in Main Thrower Middle Catcher Rethrower CatchRethrow CaughtInside FinallyThrows FilterCatches Deep \
    FinallyCatches SyncThrowTask AfterTask ThrowAfterAwait AsyncScenario; do
    TARGETS+="trace = exctest!Exc.ExcTest::$m"$'\n'
done
conf() { # conf NAME [with-seq] [with-tracer] [tracer lines...]
    local name=$1 seq=$2 tracer=$3
    shift 3
    {
        printf '[loader]\nlog_level = info\n'
        [ "$seq" = 1 ] && printf '[child exseq]\npath = %s\nclsid = %s\n' "$SEQ" "$SEQ_CLSID"
        if [ "$tracer" = 1 ]; then
            printf '[child tracer]\nbuiltin = tracer\noutput = %s\n%s' "$WORK/$name.spans" "$TARGETS"
            for l in "$@"; do echo "$l"; done
        fi
    } >"$WORK/$name.conf"
    echo "$WORK/$name.conf"
}
# same_seq A B: the main thread's sequence equal line for line; the other threads' (pool
# threads, whose split between threads varies from run to run) equal as a multiset; counts equal
same_seq() {
    python3 - "$WORK/$1.seq" "$WORK/$2.seq" <<'PYEOF'
import collections, sys
def load(p):
    counts, threads, cur = [], [], None
    for line in open(p):
        line = line.rstrip("\n")
        if line.startswith("# thread "):
            cur = []
            threads.append(cur)
        elif cur is not None:
            cur.append(line)
        elif not line.startswith("#"):
            counts.append(line)
    return counts, threads
(ca, ta), (cb, tb) = load(sys.argv[1]), load(sys.argv[2])
ok = ca == cb and ta and tb and ta[0] == tb[0] and \
    collections.Counter(l for t in ta[1:] for l in t) == collections.Counter(l for t in tb[1:] for l in t)
if not ok:
    import difflib
    a = ca + ["--"] + (ta[0] if ta else [])
    b = cb + ["--"] + (tb[0] if tb else [])
    print("\n".join(list(difflib.unified_diff(a, b, "alone", "beside", lineterm="", n=1))[:40]))
sys.exit(0 if ok else 1)
PYEOF
}

# ---- baselines: no profiler; the recorder as the process's only profiler ---------------------
run base
if [ "$(cat "$WORK/base.rc")" = 0 ] && [ "$(tail -n 1 "$WORK/base.out")" = done ]; then ok "exctest runs without a profiler"
else bad "exctest runs without a profiler" "$(tail -n 5 "$WORK/base.out")"; fi
run direct CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$SEQ_CLSID" CORECLR_PROFILER_PATH="$SEQ"
if [ "$(cat "$WORK/direct.rc")" = 0 ] && cmp -s "$WORK/base.out" "$WORK/direct.out" && grep -q '^# thread 0$' "$WORK/direct.seq"; then
    ok "the recorder alone: the app's output unchanged, the exception sequence recorded"
else bad "the recorder alone" "$(tail -n 5 "$WORK/direct.out"; head -5 "$WORK/direct.seq" 2>&1)"; fi
# the recorder records what the runtime's own exception test expects of a throw from a finally
# caught by a filter (dotnet/runtime src/tests/profiler/exception): its oracle, in our app
want='ExceptionThrown
ExceptionSearchFunctionEnter: ExcTest.FinallyThrows
ExceptionSearchFunctionLeave
ExceptionSearchFunctionEnter: ExcTest.FilterCatches
ExceptionSearchFilterEnter: ExcTest.FilterCatches
ExceptionSearchFilterLeave
ExceptionSearchCatcherFound: ExcTest.FilterCatches
ExceptionSearchFunctionLeave
ExceptionUnwindFunctionEnter: ExcTest.FinallyThrows
ExceptionUnwindFunctionLeave
ExceptionUnwindFunctionEnter: ExcTest.FilterCatches
ExceptionCatcherEnter: ExcTest.FilterCatches
ExceptionCatcherLeave'
n=11
if [ "$CLR_RT" = 9 ]; then
    # .NET 9's managed exception handling also reports the two finally funclets as frames
    # (the runtime's test checks that they are not, from .NET 10 on)
    f='ExceptionSearchFunctionEnter: ExcTest.FinallyThrows
ExceptionSearchFunctionLeave'
    u='ExceptionUnwindFunctionEnter: ExcTest.FinallyThrows
ExceptionUnwindFunctionLeave'
    want=$(awk -v f="$f" -v u="$u" 'NR==2{print f; print f; print f; next} NR==3{next} NR==9{print u; print u; print u; next} NR==10{next} {print}' <<<"$want")
    n=19
fi
got=$(grep -B1 -A$n '^ExceptionSearchFunctionEnter: ExcTest.FinallyThrows$' "$WORK/direct.seq" | head -n $((n + 2)))
if [ "$got" = "$want" ]; then ok "the recorder sees a throw from a finally caught by a filter as the runtime's own test expects"
else bad "the recorder's sequence for FinallyThrows/FilterCatches" "$(diff <(echo "$want") <(echo "$got"))"; fi

# ---- the recorder as clrmux's only child ----------------------------------------------------
under_clrmux alone "$(conf alone 1 0)"
if [ "$(cat "$WORK/alone.rc")" = 0 ] && cmp -s "$WORK/base.out" "$WORK/alone.out" && same_seq direct alone >/dev/null; then
    ok "the recorder as clrmux's only child sees the sequence it sees alone"
else bad "the recorder as clrmux's only child" "$(same_seq direct alone; tail -n 3 "$WORK/alone.out")"; fi

# ---- the recorder beside the tracer, which traces every method the exceptions cross ---------
check_beside() { # check_beside TAG WHAT
    local tag=$1 what=$2 d
    if [ "$(cat "$WORK/$tag.rc")" = 0 ] && cmp -s "$WORK/base.out" "$WORK/$tag.out"; then ok "$what: the app's output unchanged"
    else bad "$what: the app's output unchanged" "$(diff "$WORK/base.out" "$WORK/$tag.out" | head; grep -E 'ERROR|WARN' "$WORK/$tag.log" | head -5)"; fi
    if grep -Eq "tracer: 15 method\(s\) rewritten \([0-9]+ us each on average\), 0 skipped" "$WORK/$tag.log"; then
        ok "$what: the tracer rewrote the 15 methods the exceptions cross"
    else bad "$what: the tracer rewrote the 15 methods" "$(grep -E 'tracer|ERROR|WARN' "$WORK/$tag.log" | head)"; fi
    if d=$(same_seq direct "$tag"); then
        ok "$what: the recorder sees the exception sequence it sees alone (no filter or finally of the tracer's)"
    else bad "$what: the recorder's exception sequence beside the tracer" "$d"; fi
}
check_spans() { # check_spans TAG WHAT ASYNC(1: the agent's async spans)
    local out
    out=$(python3 - "$WORK/$1.spans" "$3" <<'PYEOF'
import collections, json, sys
path, agent = sys.argv[1], sys.argv[2] == "1"
res = []
def check(desc, cond, detail=""):
    res.append(("ok   - " if cond else "FAIL - ") + desc + ("" if cond or not detail else "\n       " + str(detail)[:500]))
spans = []
try:
    for line in open(path):
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans += ss["spans"]
except Exception as e:
    check("the spans file is read", False, e)
name = lambda s: s["name"].rsplit(".", 1)[-1]
err = lambda s: s.get("status", {}).get("code") == 2
def exc(s):
    for e in s.get("events", []):
        if e["name"] == "exception":
            return {a["key"]: list(a["value"].values())[0] for a in e.get("attributes", [])}
    return None
want = {"Main": (1, 0), "Thrower": (5, 5), "Middle": (1, 1), "Catcher": (1, 0), "Rethrower": (1, 1),
        "CatchRethrow": (1, 0), "CaughtInside": (1, 0), "FinallyThrows": (1, 1), "FilterCatches": (1, 0),
        "Deep": (6, 3), "FinallyCatches": (1, 1), "SyncThrowTask": (1, 1), "AfterTask": (1, 0),
        "ThrowAfterAwait": (1, 1), "AsyncScenario": (1, 0)}
if not agent:  # without the agent an async method's span ends when it returns its task
    want["ThrowAfterAwait"] = (1, 0)
got = collections.defaultdict(lambda: [0, 0])
for s in spans:
    got[name(s)][0] += 1
    got[name(s)][1] += err(s)
got = {k: tuple(v) for k, v in got.items()}
check("each method's spans and how many ended with ERROR: %s" % ", ".join("%s %d/%d" % (k, *v) for k, v in sorted(want.items())),
      got == want, {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)})
bad_exc = [(name(s), exc(s)) for s in spans if err(s) and not (exc(s) and exc(s).get("exception.type"))]
check("every ERROR span has an exception event with its exception.type", not bad_exc, bad_exc[:3])
by_id = {s["spanId"]: s for s in spans}
fc = [s for s in spans if name(s) == "FinallyCatches"]
m = exc(fc[0]) if fc else None
check("FinallyCatches carries the exception that left it (boom 3), not the one caught in its finally (boom 4)",
      m is not None and m.get("exception.message") == "boom 3" and m.get("exception.type") == "System.InvalidOperationException", m)
# the recursion: Deep(5) -> Deep(4) -> Deep(3) catches; Deep(2), (1), (0) are left by the exception
deep = [s for s in spans if name(s) == "Deep"]
def depth(s):
    d = 0
    while s.get("parentSpanId") in by_id and name(by_id[s["parentSpanId"]]) == "Deep":
        s, d = by_id[s["parentSpanId"]], d + 1
    return d
order = sorted(deep, key=depth)
check("Deep: the three outer frames (the catcher and its callers) ok, the three inner ones ERROR, nested in order",
      [depth(s) for s in order] == list(range(6)) and [err(s) for s in order] == [False] * 3 + [True] * 3,
      [(depth(s), err(s)) for s in order])
# a span ends before its parent (the unwind closes each frame's own span, in order)
late = [(name(s), name(by_id[s["parentSpanId"]])) for s in spans if s.get("parentSpanId") in by_id
        and int(s["endTimeUnixNano"]) > int(by_id[s["parentSpanId"]]["endTimeUnixNano"])
        and name(s) not in ("AfterTask", "ThrowAfterAwait")]
check("every span ends no later than its parent", not late, late[:3])
if agent:
    a = {name(s): s for s in spans if name(s) in ("AsyncScenario", "AfterTask", "SyncThrowTask", "ThrowAfterAwait")}
    ok = len(a) == 4 and a["AfterTask"].get("parentSpanId") == a["AsyncScenario"]["spanId"] \
        and a["SyncThrowTask"].get("parentSpanId") == a["AsyncScenario"]["spanId"] \
        and a["ThrowAfterAwait"].get("parentSpanId") == a["AsyncScenario"]["spanId"]
    check("after a Task method threw before returning its task, the flow's context is its caller's again "
          "(AfterTask, after an await, is AsyncScenario's child, not SyncThrowTask's)", ok,
          {k: (v["spanId"], v.get("parentSpanId")) for k, v in a.items()})
print("\n".join(res))
PYEOF
)
    while IFS= read -r l; do
        case $l in
        "ok   - "*) ok "$2: ${l#ok   - }" ;;
        "FAIL - "*) bad "$2: ${l#FAIL - }" ;;
        *) [ -n "$l" ] && echo "$l" ;;
        esac
    done <<<"$out"
}

under_clrmux beside "$(conf beside 1 1)"
check_beside beside "beside the tracer"
check_spans beside "beside the tracer" 1

# the agent off (no async spans): the same rewrite without its managed calls
under_clrmux noagent "$(conf noagent 1 1 "agent = false")"
check_beside noagent "beside the tracer without its agent"
check_spans noagent "beside the tracer without its agent" 0

clr_done
