#!/usr/bin/env bash
# Real-runtime test with Microsoft's CLR Instrumentation Engine (CLRIE) and Microsoft's code
# coverage: `dotnet test --collect "Code Coverage"` with dynamic instrumentation (NuGet
# Microsoft.CodeCoverage 18.11.0, through Microsoft.NET.Test.Sdk) on a small library
# (tests/clr/coverage/covlib) and its xunit tests. The testhost is started by the runsettings'
# DotNetHostPath wrapper (tests/clr/coverage/host.sh), which keeps every variable the
# collector sets and puts CLRIE under clrmux as a child. Checks, on each runtime:
#   - the coverage report (cobertura: every line and its hits) is identical with CLRIE alone,
#     as clrmux's only child, beside the built-in tracer in either file order, and beside a
#     child that detaches; it is not empty (lines hit, and a line never hit);
#   - beside CLRIE the tracer has one span per call of each traced method: a generic method
#     with several instantiations (CLRIE sets the IL again at each: issue 24), an async
#     method, a method with try/catch, a method compiled again at tier 1;
#   - the detaching child detached (ProfilerDetachSucceeded) and CLRIE stayed whole.
# Prints one line per check and "coverage: N passed, N failed".
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10 by default, CLRMUX_TEST_RUNTIMES).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite coverage "$@"
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0

LIB="$ROOT/build/libclrmux.so"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-coverage.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
[ -f "$LIB" ] && [ -f "$ROOT/build/fake/librecorder.so" ] || { bad "build/ is incomplete (run make all)"; clr_done; }

# ---- build (once for all runtimes: net8.0) ---------------------------------------------------
SRC=tests/clr/coverage
OUT=build/clr/coverage
STAMP=$OUT/.stamp
if [ ! -f "$STAMP" ] || [ -n "$(find "$SRC" -type f -newer "$STAMP" -print -quit)" ]; then
    mkdir -p "$OUT"
    touch "$STAMP.new"
    if dotnet build "$SRC/covtests/covtests.csproj" -c Release --disable-build-servers -nodeReuse:false \
        -p:UseSharedCompilation=false -v:minimal -clp:NoSummary >"$OUT/build.log" 2>&1 && [ -f "$OUT/covtests.dll" ]; then
        mv "$STAMP.new" "$STAMP"
    else
        rm -f "$STAMP.new"
        bad "the coverage test projects build (NuGet Microsoft.NET.Test.Sdk 18.11.0, xunit)" "$(tail -n 20 "$OUT/build.log")"
        clr_done
    fi
fi
ok "the coverage test projects build"
PKGS=$(dotnet nuget locals global-packages -l | sed -n 's/^global-packages: *//p')
COLLECTOR=${PKGS%/}/microsoft.codecoverage/18.11.0/build/netstandard2.0
[ -f "$COLLECTOR/Microsoft.VisualStudio.TraceDataCollector.dll" ] || { bad "Microsoft.CodeCoverage 18.11.0 restored" "$COLLECTOR"; clr_done; }
sed "s#@HOST@#$ROOT/$SRC/host.sh#" "$SRC/coverage.runsettings.in" >"$WORK/coverage.runsettings"

TRACE='trace = covlib!CovLib.Calc::Max
trace = covlib!CovLib.Calc::AddLaterAsync
trace = covlib!CovLib.Calc::ParseOr
trace = covlib!CovLib.Calc::Hot'
# the calls covtests makes (CalcTests.cs)
EXPECTED="CovLib.Calc.AddLaterAsync 1
CovLib.Calc.Hot 40000
CovLib.Calc.Max 5
CovLib.Calc.ParseOr 2"

# run LAYOUT: one `dotnet test` with coverage; its report's lines to $WORK/LAYOUT.lines. The test
# platform kills the testhost 100 ms after the session ends (VSTEST_TESTHOST_SHUTDOWN_TIMEOUT): on a
# loaded machine that cut the tracer's Shutdown export short (72 of 40000 Hot spans lost, once), so
# the testhost gets 60 s to end by itself, as docs/hosting.md tells users to give it.
run() {
    local layout=$1
    timeout 300 env VSTEST_TESTHOST_SHUTDOWN_TIMEOUT=60000 COV_LAYOUT="$layout" COV_OUT="$WORK/$layout" COV_DOTNET="$CLRMUX_TEST_DOTNET" COV_FX="$CLR_RTV" \
        COV_CLRMUX="$LIB" COV_CLRMUX_CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}" COV_TRACE="$TRACE" \
        COV_RECORDER="$ROOT/build/fake/librecorder.so" DOTNET_TieredCompilation=1 DOTNET_TC_CallCountingDelayMs=0 \
        dotnet test "$OUT/covtests.dll" --test-adapter-path "$COLLECTOR" --collect "Code Coverage" \
        --settings "$WORK/coverage.runsettings" --results-directory "$WORK/$layout.res" >"$WORK/$layout.out" 2>&1
    local rc=$?
    local report
    report=$(find "$WORK/$layout.res" -name '*.cobertura.xml' 2>/dev/null | head -n 1)
    if [ $rc = 0 ] && [ -n "$report" ]; then
        ok "$layout: dotnet test passed with a coverage report"
        # every <line> of the classes (methods repeat them), its number and hits, by file
        python3 - "$report" >"$WORK/$layout.lines" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
for cls in root.iter("class"):
    for line in cls.find("lines").iter("line"):
        print(cls.get("filename").split("/")[-1], cls.get("name"), line.get("number"), line.get("hits"))
PYEOF
        sort -u -o "$WORK/$layout.lines" "$WORK/$layout.lines"
    else
        bad "$layout: dotnet test passed with a coverage report" "exit $rc; $(tail -n 15 "$WORK/$layout.out")
$(grep -E 'ERROR|WARN' "$WORK/$layout.log" 2>/dev/null | head -n 5)"
        : >"$WORK/$layout.lines"
    fi
}
spans() { # spans FILE: "name count" per span name
    python3 - "$1" <<'PYEOF'
import collections, json, sys
c = collections.Counter()
try:
    for line in open(sys.argv[1]):
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    c[s["name"]] += 1
except FileNotFoundError:
    pass
for n in sorted(c):
    print(n, c[n])
PYEOF
}

for layout in alone child clrie-first tracer-first detach-first; do run "$layout"; done

# ---- coverage: identical in every layout, and not empty -------------------------------------
hit=$(awk '$4 > 0' "$WORK/alone.lines" | wc -l)
miss=$(awk '$4 == 0' "$WORK/alone.lines" | wc -l)
if [ "$hit" -ge 10 ] && [ "$miss" -ge 1 ] && grep -q 'Calc.cs CovLib.Calc ' "$WORK/alone.lines"; then
    ok "CLRIE alone: coverage of covlib ($hit lines hit, $miss not)"
else
    bad "CLRIE alone: coverage of covlib ($hit lines hit, $miss not)" "$(head -n 20 "$WORK/alone.lines")"
fi
for layout in child clrie-first tracer-first detach-first; do
    if [ -s "$WORK/$layout.lines" ] && cmp -s "$WORK/alone.lines" "$WORK/$layout.lines"; then
        ok "$layout: coverage identical to CLRIE alone, line by line"
    else
        bad "$layout: coverage identical to CLRIE alone, line by line" "$(diff "$WORK/alone.lines" "$WORK/$layout.lines" | head -n 20)"
    fi
    if grep -q "child 'clrie': loaded" "$WORK/$layout.log" 2>/dev/null; then ok "$layout: CLRIE is clrmux's child"
    else bad "$layout: CLRIE is clrmux's child" "$(head -n 20 "$WORK/$layout.log" 2>/dev/null)"; fi
done

# ---- the tracer beside CLRIE: one span per call ---------------------------------------------
for layout in clrie-first tracer-first; do
    got=$(spans "$WORK/$layout.spans")
    if [ "$got" = "$EXPECTED" ]; then
        ok "$layout: one span per call (Max<T> x5 in 5 instantiations, async, try/catch, tier 1)"
    else
        bad "$layout: one span per call (Max<T> x5 in 5 instantiations, async, try/catch, tier 1)" \
            "expected:
$EXPECTED
got:
$got
$(grep -E 'composed on top|ERROR|WARN' "$WORK/$layout.log" | head -n 5)"
    fi
    # CLRIE set Max's IL again at a later instantiation: composed with the tracer's rewrite
    if grep -q "JIT-time rewrite of CovLib.Calc::Max .* by 'clrie' after its composition at JIT time: the ReJIT owners' rewrites composed on top again: 'tracer'" "$WORK/$layout.log"; then
        ok "$layout: CLRIE's later rewrite of Max composed with the tracer's (log)"
    else
        bad "$layout: CLRIE's later rewrite of Max composed with the tracer's (log)" "$(grep -i 'Max' "$WORK/$layout.log" | head -n 8)"
    fi
done

# ---- a child that detaches beside CLRIE -----------------------------------------------------
if grep -q '^ProfilerDetachSucceeded 1' "$WORK/detach-first.rec" 2>/dev/null &&
    grep -q 'RequestProfilerDetach hr=0x00000000' "$WORK/detach-first.rec"; then
    ok "detach-first: the other child detached (ProfilerDetachSucceeded), CLRIE's coverage whole"
else
    bad "detach-first: the other child detached (ProfilerDetachSucceeded), CLRIE's coverage whole" \
        "$(cat "$WORK/detach-first.rec" 2>/dev/null | head -n 20)"
fi
clr_done
