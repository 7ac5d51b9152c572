#!/usr/bin/env bash
# Builds demo/shop into build/demo/shop/shop.dll unless it is newer than every source file.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
OUT=build/demo/shop
if [ -f "$OUT/shop.dll" ] && [ -z "$(find demo/shop -newer "$OUT/shop.dll" -type f -print -quit)" ]; then
    exit 0
fi
mkdir -p build/demo
if ! dotnet build demo/shop/shop.csproj -c Release --disable-build-servers -nodeReuse:false \
        -p:UseSharedCompilation=false -v:quiet -clp:NoSummary >build/demo/shop-build.log 2>&1; then
    cat build/demo/shop-build.log >&2
    echo "building demo/shop failed" >&2
    exit 1
fi
touch "$OUT/shop.dll"
