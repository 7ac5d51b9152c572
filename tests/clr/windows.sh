#!/usr/bin/env bash
# A real .NET runtime on Windows x64 under Wine: the sample app published self-contained for
# win-x64 (the Microsoft.NETCore.App.Runtime.win-x64 pack, .NET 10) runs under Wine alone and
# with the recorder child built by mingw-w64 (build/win-x64/recorder.dll) as the runtime's
# profiler (CORECLR_PROFILER_PATH_64): the COM ABI of include/clrmux/corprof.h against the
# Windows runtime. Called by tests/cross.sh after `make windows` with WINE set.
# Prints one line per check and a closing "N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0
WINE=${WINE:?WINE: the wine loader}
W="$ROOT/${BUILD:-build}/win-x64"
PUB="$W/clr/pub"
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
        bad "dotnet publish -r win-x64 --self-contained $app" "$(tail -20 "$WORK/publish.log")"
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
run base
if [ "$(cat "$WORK/base.rc")" = 0 ] && grep -q '^done' "$WORK/base.out"; then ok "sample runs under Wine without a profiler"
else bad "sample runs under Wine without a profiler" "$(tail -5 "$WORK/base.out" "$WORK/base.err")"; finish; fi

run rec CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="{A0000001-0000-0000-0000-000000000001}" \
    CORECLR_PROFILER_PATH_64="$(winpath "$W/recorder.dll")" RECORDER_MASK=0x24C RECORDER_OUT="$(winpath "$WORK/rec.txt")"
if [ "$(cat "$WORK/rec.rc")" = 0 ] && cmp -s <(tr -d '\r' <"$WORK/base.out") <(tr -d '\r' <"$WORK/rec.out"); then
    ok "with the mingw-built recorder as its profiler: the app's output is unchanged"
else bad "with the mingw-built recorder as its profiler: the app's output is unchanged" "$(tail -5 "$WORK/rec.out" "$WORK/rec.err")"; fi
r=$(tr -d '\r' <"$WORK/rec.txt" 2>/dev/null)
if grep -q '^Initialize 1$' <<<"$r" && grep -q '^ExceptionThrown 5$' <<<"$r" && grep -q '^ModuleLoadFinished [1-9]' <<<"$r" \
        && grep -q '^Shutdown 1$' <<<"$r" && grep -q '^# GetEventMask2 low=0x0000024C' <<<"$r"; then
    ok "the runtime loads the recorder DLL, sets its mask, and calls Initialize, module, exception and Shutdown callbacks"
else bad "the runtime loads the recorder DLL and calls its callbacks" "$r"; fi
finish
