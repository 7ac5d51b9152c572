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
# systemtap-sdt-dev: <sys/sdt.h>, the USDT probes of libclrmux.so (src/tracer/usdt.h)
BUILD_PKGS="build-essential libinih-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev systemtap-sdt-dev"
# unit tests (cmocka), pprof checks (go tool pprof), libFuzzer (clang + its runtime), the
# OTLP/HTTP export (libcurl), the report's test (npm for its JS libraries, headless Chromium, OCR
# of the screenshot with tesseract), the packaging tests (dpkg-deb), the OTLP protobuf and
# Pyroscope tests (protoc and python3-protobuf decode what clrmux sends), the USDT probes' test
# (bpftrace: tests/clr/usdt.sh), the real servers of the database and queue spans' test
# (tests/clr/servers.sh starts them on loopback in a scratch folder: tests/clr/dbq.sh)
TEST_PKGS="$BUILD_PKGS libcmocka-dev python3 golang-go:go clang clang-14 libclang-rt-14-dev libcurl4 file bpftrace
           python3-protobuf protobuf-compiler postgresql mariadb-server mariadb-client redis-server rabbitmq-server
           chromium:chromium fonts-dejavu-core tesseract-ocr tesseract-ocr-eng dpkg-dev zip nodejs:node npm:npm"
# the demo's report: go tool pprof reads the profile, npm fetches d3-flame-graph; its orders
# service's database and queue (started as tests/clr/servers.sh starts them)
DEMO_PKGS="$BUILD_PKGS python3 golang-go:go nodejs:node npm:npm postgresql rabbitmq-server"
DIST_PKGS="$BUILD_PKGS dpkg-dev zip"
# make bench: instruction counts (valgrind's callgrind), pprof
BENCH_PKGS="$BUILD_PKGS python3 golang-go:go valgrind wrk"

# Cross builds (tests/cross.sh in make test, make dist): optional outside CI, where a package
# that cannot be installed is reported and the platform skipped; under CI (CI=true) required.
# The arm64 libraries come from Debian's multiarch archive (dpkg --add-architecture arm64).
ARM64_PKGS="gcc-aarch64-linux-gnu qemu-user libc6-dev:arm64 libinih-dev:arm64 libcmocka-dev:arm64
            libprotobuf-c-dev:arm64 zlib1g-dev:arm64 systemtap-sdt-dev:arm64"
# Windows x64: mingw-w64 and Wine (tests/cross.sh windows)
WIN_PKGS="gcc-mingw-w64-x86-64 wine64"
CROSS_PKGS="$ARM64_PKGS $WIN_PKGS"

list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
profile=${1:-all}
cross=""
case "$profile" in
    build) want=$BUILD_PKGS ;;
    test) want=$TEST_PKGS; cross=$CROSS_PKGS ;;
    demo) want=$DEMO_PKGS ;;
    dist) want=$DIST_PKGS; cross=$CROSS_PKGS ;;
    bench) want=$BENCH_PKGS ;;
    all) want="$TEST_PKGS $DEMO_PKGS $DIST_PKGS $BENCH_PKGS"; cross=$CROSS_PKGS ;;
    *) echo "usage: scripts/setup.sh [--list] [build|test|demo|dist|bench|all]" >&2; exit 2 ;;
esac

# installed = "install ok installed" (a removed package leaves "deinstall ok config-files"); an
# unqualified name means the native architecture's package (with arm64 added to dpkg, a
# library can be there twice: libinih-dev:amd64 and libinih-dev:arm64)
NATIVE_ARCH=$(dpkg --print-architecture)
installed() {
    dpkg-query -W -f='${binary:Package} ${Status}\n' "$1" 2>/dev/null |
        grep -qE "^(${1%%:*}|${1%%:*}:${NATIVE_ARCH}|$1) install ok installed$"
}
pkgs=""
missing=""
for item in $want; do
    pkg=${item%%:*}
    cmd=${item#*:}
    case " $pkgs " in *" $pkg "*) continue ;; esac
    pkgs="$pkgs $pkg"
    [ "$cmd" != "$item" ] && command -v "$cmd" >/dev/null 2>&1 && continue
    installed "$pkg" || missing="$missing $pkg"
done
cross_missing=""
for pkg in $cross; do
    installed "$pkg" || cross_missing="$cross_missing $pkg"
done

if [ $list = 1 ]; then
    echo $pkgs $cross
    exit 0
fi

if ! command -v dotnet >/dev/null 2>&1; then
    echo "setup: the .NET SDK (dotnet) is not on PATH; clrmux builds without it, but the demo and the" \
         "real-runtime tests need it: https://learn.microsoft.com/dotnet/core/install/linux-debian" >&2
fi

[ -z "$missing$cross_missing" ] && exit 0

export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo DEBIAN_FRONTEND=noninteractive"
else
    [ -z "$missing" ] && { echo "setup: the cross builds need (as root): dpkg --add-architecture arm64 && apt-get update && apt-get install -y$cross_missing" >&2; exit 0; }
    echo "setup: clrmux's '$profile' needs Debian packages that are missing; as root, run: apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
# an arm64 library needs the arm64 architecture in dpkg (multiarch) before the package lists
case "$cross_missing" in
    *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64 ;;
esac
# an old or empty package list cannot find the packages: update it first (once)
$SUDO apt-get update -q >/dev/null || echo "setup: apt-get update failed; trying the install anyway" >&2
if [ -n "$missing" ]; then
    echo "setup: installing the Debian packages clrmux's '$profile' needs:$missing"
    # shellcheck disable=SC2086
    if ! $SUDO apt-get install -y -q --no-install-recommends $missing; then
        echo "setup: apt-get install failed; install these by hand: apt-get install -y$missing" >&2
        exit 1
    fi
fi
if [ -n "$cross_missing" ]; then
    echo "setup: installing the cross toolchains and emulators (tests/cross.sh):$cross_missing"
    # shellcheck disable=SC2086
    if ! $SUDO apt-get install -y -q --no-install-recommends $cross_missing; then
        if [ "${CI:-}" = true ]; then
            echo "setup: CI: the cross packages could not be installed:$cross_missing" >&2
            exit 1
        fi
        echo "setup: WARNING: the cross packages could not be installed:$cross_missing;" \
             "make test skips those platforms (tests/cross.sh says which)" >&2
    fi
fi
