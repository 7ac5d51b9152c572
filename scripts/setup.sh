#!/usr/bin/env bash
# Installs the Debian packages that clrmux's build, tests and demo need, and only the missing
# ones. `make` calls it before building (`scripts/setup.sh build`), `make test` and `.ci/run`
# with `test`, `make demo` with `demo`, `make dist` with `dist`, `make bench` with `bench`:
#
#   scripts/setup.sh [build|test|demo|dist|bench|all]   install what that target needs
#   scripts/setup.sh --list [PROFILE]              print the packages, install nothing
#
# As root it runs apt-get; otherwise through sudo when sudo exists; otherwise it prints the one
# command to run and exits 1. The .NET SDK (`dotnet`) is not a Debian package: without it the
# script says where to get it and goes on (the real-runtime tests then say they did not run).
set -euo pipefail

# package[:command] — a package whose command is already on PATH (installed another way, e.g.
# Node.js from its own repository) counts as present.
BUILD_PKGS="build-essential libinih-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev"
# unit tests (cmocka), pprof checks (go tool pprof), libFuzzer (clang + its runtime), the
# OTLP/HTTP export (libcurl), the report's test (npm for its JS libraries, headless Chromium, OCR
# of the screenshot with tesseract), the packaging tests (dpkg-deb), the OTLP protobuf and
# Pyroscope tests (protoc and python3-protobuf decode what clrmux sends)
TEST_PKGS="$BUILD_PKGS libcmocka-dev python3 golang-go:go clang clang-14 libclang-rt-14-dev libcurl4 file
           python3-protobuf protobuf-compiler
           chromium:chromium fonts-dejavu-core tesseract-ocr tesseract-ocr-eng dpkg-dev nodejs:node npm:npm"
# the demo's report: go tool pprof reads the profile, npm fetches d3-flame-graph
DEMO_PKGS="$BUILD_PKGS python3 golang-go:go nodejs:node npm:npm"
DIST_PKGS="$BUILD_PKGS dpkg-dev"
# make bench: instruction counts (valgrind's callgrind), pprof
BENCH_PKGS="$BUILD_PKGS python3 golang-go:go valgrind"

list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
profile=${1:-all}
case "$profile" in
    build) want=$BUILD_PKGS ;;
    test) want=$TEST_PKGS ;;
    demo) want=$DEMO_PKGS ;;
    dist) want=$DIST_PKGS ;;
    bench) want=$BENCH_PKGS ;;
    all) want="$TEST_PKGS $DEMO_PKGS $DIST_PKGS $BENCH_PKGS" ;;
    *) echo "usage: scripts/setup.sh [--list] [build|test|demo|dist|bench|all]" >&2; exit 2 ;;
esac

pkgs=""
missing=""
for item in $want; do
    pkg=${item%%:*}
    cmd=${item#*:}
    case " $pkgs " in *" $pkg "*) continue ;; esac
    pkgs="$pkgs $pkg"
    [ "$cmd" != "$item" ] && command -v "$cmd" >/dev/null 2>&1 && continue
    # installed = "install ok installed" (a removed package leaves "deinstall ok config-files")
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
        missing="$missing $pkg"
    fi
done

if [ $list = 1 ]; then
    echo $pkgs
    exit 0
fi

if ! command -v dotnet >/dev/null 2>&1; then
    echo "setup: the .NET SDK (dotnet) is not on PATH; clrmux builds without it, but the demo and the" \
         "real-runtime tests need it: https://learn.microsoft.com/dotnet/core/install/linux-debian" >&2
fi

[ -z "$missing" ] && exit 0

export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo DEBIAN_FRONTEND=noninteractive"
else
    echo "setup: clrmux's '$profile' needs Debian packages that are missing; as root, run: apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "setup: installing the Debian packages clrmux's '$profile' needs:$missing"
# an old or empty package list cannot find the packages: update it first (once)
# shellcheck disable=SC2086
$SUDO apt-get update -q >/dev/null || echo "setup: apt-get update failed; trying the install anyway" >&2
# shellcheck disable=SC2086
if ! $SUDO apt-get install -y -q --no-install-recommends $missing; then
    echo "setup: apt-get install failed; install these by hand: apt-get install -y$missing" >&2
    exit 1
fi
