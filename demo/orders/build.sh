#!/usr/bin/env bash
# Builds demo/orders into build/demo/orders/orders.dll unless it is newer than every source file.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
OUT=build/demo/orders
if [ -f "$OUT/orders.dll" ] && [ -z "$(find demo/orders -newer "$OUT/orders.dll" -type f -print -quit)" ]; then
    exit 0
fi
mkdir -p build/demo
if ! dotnet build demo/orders/orders.csproj -c Release --disable-build-servers -nodeReuse:false \
        -p:UseSharedCompilation=false -v:quiet -clp:NoSummary >build/demo/orders-build.log 2>&1; then
    cat build/demo/orders-build.log >&2
    echo "building demo/orders failed" >&2
    exit 1
fi
touch "$OUT/orders.dll"
