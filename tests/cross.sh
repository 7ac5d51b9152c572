#!/usr/bin/env bash
# The cross builds in `make test`: Linux arm64 (make arm64; the unit tests, then a real .NET 10
# runtime with clrmux, tests/clr/arm64.sh, under qemu-aarch64) and Windows x64 (make windows;
# the platform layer's test, the loader's unit tests, `clrmux ctl` (clrmux.exe,
# tests/win/ctl_client.sh), then a real .NET 10 runtime with libclrmux.dll,
# tests/clr/windows.sh, under Wine). A missing toolchain, emulator or
# library is reported loudly and that platform is skipped, except under CI (CI=true), where
# scripts/setup.sh installs them and a skip is a failure.
#   tests/cross.sh [arm64|windows]...   (default: both)
# Prints one line per test binary and a closing "N passed, N failed, N skipped" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
PASS=0
FAIL=0
SKIP=0
banner() {
    echo "************************************************************************" >&2
    echo "cross: $*" >&2
    echo "************************************************************************" >&2
}
skip_platform() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL - $1 (CI must build and test every platform)"
        FAIL=$((FAIL + 1))
    else
        banner "SKIPPED $1"
        SKIP=$((SKIP + 1))
    fi
}
# run_units LABEL RUNNER... : runs every unit test binary of the platform through RUNNER
run_units() {
    local label=$1 dir=$2 fakedir=$3; shift 3
    local t log
    for t in "$dir"/test_*; do
        [ -x "$t" ] || continue
        log="$dir/$(basename "$t").log"
        if CLRMUX_FAKE_DIR="$fakedir" timeout 300 "$@" "$t" >"$log" 2>&1; then
            PASS=$((PASS + 1))
            echo "ok   - $label $(basename "$t"): $(grep -aE '^\[  PASSED  \]' "$log" | tr -s ' ' | tr -d '[]\r' | xargs)$(grep -aE '^\[  SKIPPED \] [0-9]' "$log" | tr -s ' ' | tr -d '[]\r' | sed -e 's/, listed below://' -e 's/^/, /' | xargs)"
        else
            FAIL=$((FAIL + 1))
            echo "FAIL - $label $(basename "$t") (log: $log)"
            grep -aE 'ERROR|FAILED|LINE|runtime error|Segmentation|Abort' "$log" | head -20 | sed 's/^/       /'
        fi
    done
}

arm64() {
    local cc=${ARM64_CC:-aarch64-linux-gnu-gcc} missing=""
    command -v "$cc" >/dev/null 2>&1 || missing="$missing $cc (gcc-aarch64-linux-gnu)"
    command -v qemu-aarch64 >/dev/null 2>&1 || missing="$missing qemu-aarch64 (qemu-user)"
    [ -e /usr/lib/aarch64-linux-gnu/libcmocka.so ] || missing="$missing libcmocka-dev:arm64"
    [ -e /usr/include/ini.h ] && [ -e /usr/lib/aarch64-linux-gnu/libinih.a ] || missing="$missing libinih-dev:arm64"
    [ -e /usr/lib/aarch64-linux-gnu/libprotobuf-c.so ] || missing="$missing libprotobuf-c-dev:arm64"
    [ -e /usr/lib/aarch64-linux-gnu/libz.so ] || missing="$missing zlib1g-dev:arm64"
    if [ -n "$missing" ]; then
        skip_platform "Linux arm64: missing$missing (scripts/setup.sh installs them: dpkg --add-architecture arm64)"
        return
    fi
    if ! make -s --no-print-directory NO_SETUP=1 -j2 arm64 >"$BUILD/arm64.log" 2>&1; then
        FAIL=$((FAIL + 1))
        echo "FAIL - Linux arm64: make arm64 failed (log: $BUILD/arm64.log)"
        grep -aE 'error|Error' "$BUILD/arm64.log" | head -20 | sed 's/^/       /'
        return
    fi
    echo "ok   - Linux arm64: make arm64 built $(cd "$BUILD/arm64" && ls libclrmux.so libclrmux_profiler.so libclrmux_otlp.so clrmux | xargs)"
    PASS=$((PASS + 1))
    # the arm64 multiarch libc (libc6:arm64) is used through /lib/ld-linux-aarch64.so.1: no -L
    # (qemu's -L /usr/aarch64-linux-gnu would mix the cross libc with the multiarch libraries)
    run_units "arm64 (qemu-aarch64)" "$BUILD/arm64/unit" "$BUILD/arm64/fake" qemu-aarch64
    # a real .NET 10 runtime for linux-arm64 (self-contained apps) under qemu-aarch64
    if ! command -v dotnet >/dev/null 2>&1; then
        skip_platform "arm64 .NET under qemu: dotnet is not on PATH"
    elif BUILD=$BUILD tests/clr/arm64.sh; then
        PASS=$((PASS + 1))
    else
        FAIL=$((FAIL + 1))
    fi
}

windows() {
    local cc=${WIN_CC:-x86_64-w64-mingw32-gcc} missing="" wine=""
    command -v "$cc" >/dev/null 2>&1 || missing="$missing $cc (gcc-mingw-w64-x86-64)"
    # Debian's wine64 package puts its loader in /usr/lib/wine (the wine package adds /usr/bin/wine)
    for w in wine64 /usr/lib/wine/wine64 wine; do
        command -v "$w" >/dev/null 2>&1 && { wine=$(command -v "$w"); break; }
    done
    [ -n "$wine" ] || missing="$missing wine64"
    if [ -n "$missing" ]; then
        skip_platform "Windows x64: missing$missing (scripts/setup.sh installs them)"
        return
    fi
    if ! make -s --no-print-directory NO_SETUP=1 -j2 windows >"$BUILD/windows.log" 2>&1; then
        FAIL=$((FAIL + 1))
        echo "FAIL - Windows x64: make windows failed (log: $BUILD/windows.log)"
        grep -aE 'error|Error' "$BUILD/windows.log" | head -20 | sed 's/^/       /'
        return
    fi
    echo "ok   - Windows x64: make windows built $(cd "$BUILD/win-x64" && ls ./*.exe ./*.dll | xargs)"
    PASS=$((PASS + 1))
    # temporary files (the unit tests', tests/clr/windows.sh's, wineserver's socket) in a folder
    # of the build: the trust check (common/trust_win.c) refuses /tmp, which Wine shows as
    # writable by Everyone (Windows has no sticky bit)
    # When the build folder itself lies under such a folder (a clone in /tmp), a private folder
    # in $HOME holds them instead; tests/clr/windows.sh stages its DLLs there too.
    local trusted="$ROOT/$BUILD/win-x64" d="$ROOT/$BUILD/win-x64"
    while [ "$d" != / ] && [ -n "$d" ]; do
        if [ -n "$(find "$d" -maxdepth 0 -perm -o+w 2>/dev/null)" ]; then trusted="$HOME/.cache/clrmux-wine"; break; fi
        d=$(dirname "$d")
    done
    mkdir -p "$trusted" && chmod 700 "$trusted"
    export CLRMUX_WIN_TRUSTED="$trusted"
    local TMPDIR="$trusted/tmp"
    export TMPDIR
    mkdir -p "$TMPDIR" && chmod 700 "$TMPDIR"
    # a private Wine prefix in the build folder (its first start takes ~30 s)
    local prefix="$ROOT/$BUILD/win-x64/wineprefix" log="$BUILD/win-x64/test_platform.log"
    if WINEPREFIX="$prefix" WINEDEBUG=-all timeout 600 "$wine" "$BUILD/win-x64/test_platform.exe" \
            "Z:$(sed 's|/|\\|g' <<<"$ROOT/$BUILD/win-x64")" >"$log" 2>&1; then
        PASS=$((PASS + 1))
        echo "ok   - Windows x64 (wine) test_platform: $(tail -n 1 "$log")"
    else
        FAIL=$((FAIL + 1))
        echo "FAIL - Windows x64 (wine) test_platform (log: $log)"
        grep -aE '^FAIL|err' "$log" | head -20 | sed 's/^/       /'
    fi
    # the loader's unit tests (cmocka) under Wine
    # (the fake child DLLs, and libclrmux.dll above them for the loader-loop test, are staged in
    # the private folder too when the build folder is not trusted)
    local fakedir="$BUILD/win-x64/fake"
    if [ "$trusted" != "$ROOT/$BUILD/win-x64" ]; then
        rm -rf "$trusted/units" && mkdir -p "$trusted/units/fake" && chmod 700 "$trusted/units" "$trusted/units/fake"
        cp "$BUILD"/win-x64/fake/*.dll "$trusted/units/fake/" && cp "$BUILD/win-x64/libclrmux.dll" "$trusted/units/"
        fakedir="$trusted/units/fake"
    fi
    run_units "Windows x64 (wine)" "$BUILD/win-x64/unit" "$fakedir" env WINEPREFIX="$prefix" WINEDEBUG=-all "$wine"
    # `clrmux ctl` for Windows (clrmux.exe) against processes that serve the named pipe
    if BUILD=$BUILD WINE=$wine WINEPREFIX="$prefix" tests/win/ctl_client.sh; then
        PASS=$((PASS + 1))
    else
        FAIL=$((FAIL + 1))
    fi
    # a real .NET 10 runtime for win-x64 (a self-contained app) under Wine
    if ! command -v dotnet >/dev/null 2>&1; then
        skip_platform "win-x64 .NET under Wine: dotnet is not on PATH"
    elif BUILD=$BUILD WINE=$wine tests/clr/windows.sh; then
        PASS=$((PASS + 1))
    else
        FAIL=$((FAIL + 1))
    fi
}

want=${*:-arm64 windows}
for p in $want; do
    case $p in
        arm64) arm64 ;;
        windows) windows ;;
        *) echo "usage: tests/cross.sh [arm64|windows]..." >&2; exit 2 ;;
    esac
done
echo "cross: $PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
