#!/usr/bin/env bash
# Builds the demo service demo/NAME (shop, orders) into build/demo/NAME/NAME.dll unless that is
# newer than every source file of it.   demo/build.sh NAME
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NAME=${1:?usage: demo/build.sh NAME}
[ -f "demo/$NAME/$NAME.csproj" ] || { echo "demo/build.sh: no demo/$NAME/$NAME.csproj" >&2; exit 1; }
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
OUT=build/demo/$NAME
if [ -f "$OUT/$NAME.dll" ] && [ -z "$(find "demo/$NAME" -newer "$OUT/$NAME.dll" -type f -print -quit)" ]; then
    exit 0
fi
mkdir -p build/demo
if ! dotnet build "demo/$NAME/$NAME.csproj" -c Release --disable-build-servers -nodeReuse:false \
        -p:UseSharedCompilation=false -v:quiet -clp:NoSummary >"build/demo/$NAME-build.log" 2>&1; then
    cat "build/demo/$NAME-build.log" >&2
    echo "building demo/$NAME failed" >&2
    exit 1
fi
touch "$OUT/$NAME.dll"
