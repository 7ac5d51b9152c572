#!/usr/bin/env bash
# Builds one of the OpenTelemetry test apps (tests/clr/otelapps/NAME; NuGet: OpenTelemetry
# 1.20.1 from the NuGet source) into build/clr/NAME/NAME.dll when the app has never been built
# or one of its sources (or otelapp/Work.cs, which the apps share) is newer than that build.
# Used by tests/clr/otel.sh, bench/otel.sh and bench/spans.sh. Prints nothing when it
# succeeds; on a failure prints the build log (build/clr/NAME-build.log) and exits 1.
#   tests/clr/build-otelapp.sh NAME
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
name=${1:?usage: tests/clr/build-otelapp.sh NAME}
src=tests/clr/otelapps/$name out=build/clr/$name
[ -f "$src/$name.csproj" ] || { echo "build-otelapp: no $src/$name.csproj" >&2; exit 1; }
if [ -f "$out/$name.dll" ] && [ -z "$(find "$src" tests/clr/otelapps/otelapp/Work.cs -newer "$out/$name.dll" -type f -print -quit)" ]; then
    exit 0
fi
rm -rf "$out" "build/clr/obj/$name" # no stale assemblies of another target framework
mkdir -p build/clr
dotnet build "$src/$name.csproj" -c Release -o "$out" -p:BaseIntermediateOutputPath="$ROOT/build/clr/obj/$name/" \
    --disable-build-servers -nodeReuse:false -p:UseSharedCompilation=false -v:minimal -clp:NoSummary \
    >"build/clr/$name-build.log" 2>&1 || { cat "build/clr/$name-build.log"; exit 1; }
