#!/usr/bin/env bash
# Installs the report's JavaScript libraries (tools/report/package.json, versions pinned by
# package-lock.json) with npm into build/report/node_modules, unless they are already there
# for this lock file. Prints the node_modules folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST="$ROOT/build/report"
if [ -f "$DEST/node_modules/.package-lock.json" ] && cmp -s "$ROOT/tools/report/package-lock.json" "$DEST/package-lock.json"; then
    echo "$DEST/node_modules"
    exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "report: npm is not on PATH (Debian packages nodejs and npm)" >&2; exit 1; }
mkdir -p "$DEST"
cp "$ROOT/tools/report/package.json" "$ROOT/tools/report/package-lock.json" "$DEST/"
if ! (cd "$DEST" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >"$DEST/npm.log" 2>&1); then
    cat "$DEST/npm.log" >&2
    echo "report: npm ci failed in $DEST" >&2
    exit 1
fi
echo "$DEST/node_modules"
