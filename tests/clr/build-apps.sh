#!/usr/bin/env bash
# Build the C# test apps (tests/clr/apps/*) into build/clr/<app>/<app>.dll.
#
#   tests/clr/build-apps.sh           build if any source is newer than the last build
#   tests/clr/build-apps.sh --force   always build
#   tests/clr/build-apps.sh --core31  also build the .NET Core 3.1 copies of the apps that
#                                     run there (sample) into build/clr31/<app>/
#
# Works offline (tests/clr/apps/NuGet.config lists only /opt/nuget/packages;
# the apps reference nothing but the shared framework). Intermediate files go
# to build/clr/obj/<project>/ (see tests/clr/apps/Directory.Build.props), so
# the source tree stays clean. Run an app with: dotnet build/clr/<app>/<app>.dll
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

APPS_DIR=tests/clr/apps
OUT=build/clr
STAMP="$OUT/.apps-stamp"
PROJECTS=(samplelib sample hello tracee shapes cpubound osrloop tracebench compose ending eltapp callbacks spanapp usdtapp exctest)

export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE=1 DOTNET_GENERATE_ASPNET_CERTIFICATE=false
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0

force=0
core31=0
for a in "$@"; do
    case $a in
    --force) force=1 ;;
    --core31) core31=1 ;;
    esac
done

# The .NET Core 3.1 copies (netcoreapp3.1: the SDK fetches its targeting pack through NuGet).
build_core31() {
    local out=build/clr31 stamp=build/clr31/.apps-stamp log=build/clr31/build-apps.log
    if [[ $force -eq 0 && -f "$out/sample/sample.dll" && -f "$stamp" ]] &&
        [[ -z "$(find "$APPS_DIR" "${BASH_SOURCE[0]}" -type f -newer "$stamp" -print -quit)" ]]; then
        echo "clr app sample (netcoreapp3.1): up to date ($out/sample/sample.dll)"
        return 0
    fi
    mkdir -p "$out"
    touch "$stamp.new"
    if ! dotnet build "$APPS_DIR/sample/sample.csproj" -c Release --disable-build-servers -nodeReuse:false \
            -p:UseSharedCompilation=false -p:ClrAppsTargetFramework=netcoreapp3.1 -p:ClrAppsOut=build/clr31 \
            -p:NoWarn=NETSDK1138 -v:minimal -clp:NoSummary >"$log" 2>&1 || [[ ! -f "$out/sample/sample.dll" ]]; then
        cat "$log" >&2
        echo "build-apps.sh: dotnet build of the netcoreapp3.1 apps failed (log: $log)" >&2
        rm -f "$stamp.new"
        return 1
    fi
    echo "clr app sample (netcoreapp3.1): built $out/sample/sample.dll"
    mv -f "$stamp.new" "$stamp"
}

up_to_date() {
    [[ -f "$STAMP" ]] || return 1
    local p
    for p in "${PROJECTS[@]}"; do
        [[ -f "$OUT/$p/$p.dll" ]] || return 1
    done
    # Any source (or this script) newer than the stamp => rebuild.
    [[ -z "$(find "$APPS_DIR" "${BASH_SOURCE[0]}" -type f -newer "$STAMP" -print -quit)" ]]
}

if [[ $force -eq 0 ]] && up_to_date; then
    for p in "${PROJECTS[@]}"; do
        echo "clr app $p: up to date ($OUT/$p/$p.dll)"
    done
    [[ $core31 -eq 0 ]] || build_core31
    exit
fi

command -v dotnet >/dev/null || { echo "build-apps.sh: dotnet not found" >&2; exit 1; }
mkdir -p "$OUT"
# Stamp the start time, so sources edited during the build trigger a rebuild next time.
touch "$STAMP.new"
log="$OUT/build-apps.log"
if ! dotnet build "$APPS_DIR/apps.slnx" -c Release --disable-build-servers -nodeReuse:false \
        -p:UseSharedCompilation=false -v:minimal -clp:NoSummary >"$log" 2>&1; then
    cat "$log" >&2
    echo "build-apps.sh: dotnet build failed (log: $log)" >&2
    rm -f "$STAMP.new"
    exit 1
fi
for p in "${PROJECTS[@]}"; do
    [[ -f "$OUT/$p/$p.dll" ]] || { cat "$log" >&2; echo "build-apps.sh: missing $OUT/$p/$p.dll" >&2; exit 1; }
    echo "clr app $p: built $OUT/$p/$p.dll"
done
mv -f "$STAMP.new" "$STAMP"
[[ $core31 -eq 0 ]] || build_core31
