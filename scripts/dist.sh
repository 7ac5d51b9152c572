#!/usr/bin/env bash
# make dist: the installed tree (make install) packed three ways, in build/dist:
#   clrmux-VERSION-linux-x64.tar.gz   clrmux-VERSION/{bin,lib,etc,share}: unpack anywhere
#   clrmux_VERSION_amd64.deb          the same tree in /opt/clrmux, /usr/bin/clrmux (dpkg-deb)
#   clrmux-VERSION-linux-arm64.tar.gz the same for Linux arm64 (make arm64), and
#   clrmux_VERSION_arm64.deb          when the arm64 cross toolchain is there (under CI: must be)
#   clrmux-VERSION-win-x64.zip        clrmux-VERSION/{libclrmux.dll,clrmux.exe,loader.conf,docs/,...} for Windows
#                                     x64 (make windows) when mingw-w64 is there (CI: must be)
#   Clrmux.Bundle.VERSION.nupkg       the native files under runtimes/linux-x64/native/ (and
#                                     runtimes/linux-arm64/native/, runtimes/win-x64/native/), dotnet pack of
#                                     packaging/nuget, when dotnet is there
# Usage: scripts/dist.sh VERSION   (make dist passes the Makefile's VERSION)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VERSION=${1:?usage: scripts/dist.sh VERSION}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
DIST=build/dist
STAGE=build/dist-stage
rm -rf "$DIST" "$STAGE"
mkdir -p "$DIST" "$STAGE"

# platform_missing LOG CI_MESSAGE WARNING: a cross build failed or its toolchain is missing.
# Prints the end of LOG (when the build got that far); under CI (CI=true) that is an error
# (exit 1 with CI_MESSAGE), otherwise a warning (WARNING) and dist goes on without that platform.
platform_missing() {
    [ -f "$1" ] && tail -n 20 "$1" >&2
    if [ "${CI:-}" = true ]; then
        echo "dist: CI: $2" >&2
        exit 1
    fi
    echo "dist: WARNING: $3" >&2
}

# the tarball: a relocatable tree (the launcher finds ../lib, instrument.sh its own folder)
make -s install NO_SETUP=1 PREFIX=/opt/clrmux DESTDIR="$ROOT/$STAGE/tar" >/dev/null
mv "$STAGE/tar/opt/clrmux" "$STAGE/clrmux-$VERSION"
tar -C "$STAGE" --owner=0 --group=0 --sort=name -czf "$DIST/clrmux-$VERSION-linux-x64.tar.gz" "clrmux-$VERSION"
echo "dist: $DIST/clrmux-$VERSION-linux-x64.tar.gz"

# the Debian package
DEB="$STAGE/deb"
make -s install NO_SETUP=1 PREFIX=/opt/clrmux DESTDIR="$ROOT/$DEB" >/dev/null
mkdir -p "$DEB/DEBIAN" "$DEB/usr/bin"
ln -s /opt/clrmux/bin/clrmux "$DEB/usr/bin/clrmux"
size=$(du -sk --exclude=DEBIAN "$DEB" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@SIZE@/$size/" packaging/control.in >"$DEB/DEBIAN/control"
echo /opt/clrmux/etc/loader.conf >"$DEB/DEBIAN/conffiles"
dpkg-deb --root-owner-group -Zgzip --build "$DEB" "$DIST/clrmux_${VERSION}_amd64.deb" >/dev/null
echo "dist: $DIST/clrmux_${VERSION}_amd64.deb"

# Linux arm64: the same tree and package, cross-compiled (make arm64)
ARM64_NATIVE=""
if command -v "${ARM64_CC:-aarch64-linux-gnu-gcc}" >/dev/null 2>&1 && make -s NO_SETUP=1 -j2 arm64 >"$STAGE/arm64.log" 2>&1; then
    ARM64_MAKE=(make -s NO_SETUP=1 BUILD=build/arm64 CC="${ARM64_CC:-aarch64-linux-gnu-gcc}" SAN=)
    "${ARM64_MAKE[@]}" install PREFIX=/opt/clrmux DESTDIR="$ROOT/$STAGE/tar-arm64" >/dev/null
    mkdir -p "$STAGE/arm64"
    mv "$STAGE/tar-arm64/opt/clrmux" "$STAGE/arm64/clrmux-$VERSION"
    tar -C "$STAGE/arm64" --owner=0 --group=0 --sort=name -czf "$DIST/clrmux-$VERSION-linux-arm64.tar.gz" "clrmux-$VERSION"
    echo "dist: $DIST/clrmux-$VERSION-linux-arm64.tar.gz"
    DEB="$STAGE/deb-arm64"
    "${ARM64_MAKE[@]}" install PREFIX=/opt/clrmux DESTDIR="$ROOT/$DEB" >/dev/null
    mkdir -p "$DEB/DEBIAN" "$DEB/usr/bin"
    ln -s /opt/clrmux/bin/clrmux "$DEB/usr/bin/clrmux"
    size=$(du -sk --exclude=DEBIAN "$DEB" | cut -f1)
    sed -e "s/@VERSION@/$VERSION/" -e "s/@SIZE@/$size/" -e "s/^Architecture: amd64$/Architecture: arm64/" \
        packaging/control.in >"$DEB/DEBIAN/control"
    echo /opt/clrmux/etc/loader.conf >"$DEB/DEBIAN/conffiles"
    dpkg-deb --root-owner-group -Zgzip --build "$DEB" "$DIST/clrmux_${VERSION}_arm64.deb" >/dev/null
    echo "dist: $DIST/clrmux_${VERSION}_arm64.deb"
    ARM64_NATIVE="$ROOT/$STAGE/native-arm64"
    mkdir -p "$ARM64_NATIVE"
    cp build/arm64/libclrmux.so build/arm64/libclrmux_profiler.so build/arm64/libclrmux_otlp.so "$ARM64_NATIVE/"
    [ -f build/Clrmux.Agent.dll ] && cp build/Clrmux.Agent.dll "$ARM64_NATIVE/" # IL: the same for every platform
    cp packaging/loader.conf "$ARM64_NATIVE/loader.conf"
else
    platform_missing "$STAGE/arm64.log" \
        "the Linux arm64 build failed or its toolchain is missing (scripts/setup.sh dist installs it)" \
        "no Linux arm64 artifacts (aarch64-linux-gnu-gcc or make arm64 failed; scripts/setup.sh dist installs the toolchain)"
fi

# Windows x64: libclrmux.dll (make windows) with its loader.conf, zipped
WIN_NATIVE=""
if command -v "${WIN_CC:-x86_64-w64-mingw32-gcc}" >/dev/null 2>&1 && command -v zip >/dev/null 2>&1 \
        && make -s NO_SETUP=1 -j2 build/win-x64/libclrmux.dll build/win-x64/clrmux.exe >"$STAGE/win-x64.log" 2>&1; then
    W="$STAGE/win-x64/clrmux-$VERSION"
    mkdir -p "$W"
    cp build/win-x64/libclrmux.dll build/win-x64/clrmux.exe README.md loader.conf.example THIRD_PARTY_NOTICES.md "$W/"
    mkdir -p "$W/docs" "$W/bench" "$W/src/profiler" && cp docs/*.md "$W/docs/"
    cp bench/README.md "$W/bench/" && cp src/profiler/README.md "$W/src/profiler/" # the docs link to them
    [ -f build/Clrmux.Agent.dll ] && cp build/Clrmux.Agent.dll "$W/"
    cp packaging/loader-win.conf "$W/loader.conf"
    (cd "$STAGE/win-x64" && find "clrmux-$VERSION" -exec touch -d 2020-01-01T00:00:00Z {} + && zip -q -X -r "$ROOT/$DIST/clrmux-$VERSION-win-x64.zip" "clrmux-$VERSION")
    echo "dist: $DIST/clrmux-$VERSION-win-x64.zip"
    WIN_NATIVE="$ROOT/$STAGE/native-win-x64"
    mkdir -p "$WIN_NATIVE"
    cp build/win-x64/libclrmux.dll "$WIN_NATIVE/"
    [ -f build/Clrmux.Agent.dll ] && cp build/Clrmux.Agent.dll "$WIN_NATIVE/"
    cp packaging/loader-win.conf "$WIN_NATIVE/loader.conf"
else
    platform_missing "$STAGE/win-x64.log" \
        "the Windows x64 build failed or mingw-w64/zip is missing (scripts/setup.sh dist installs them)" \
        "no Windows x64 artifacts (x86_64-w64-mingw32-gcc, zip or make windows failed; scripts/setup.sh dist installs them)"
fi

# the NuGet package
if command -v dotnet >/dev/null 2>&1; then
    NATIVE="$ROOT/$STAGE/native"
    mkdir -p "$NATIVE"
    cp build/libclrmux.so build/libclrmux_profiler.so build/libclrmux_otlp.so build/Clrmux.Agent.dll "$NATIVE/"
    cp packaging/loader.conf "$NATIVE/loader.conf"
    tfm=net$(dotnet --version | cut -d. -f1).0
    if ! dotnet pack packaging/nuget/Clrmux.Bundle.csproj -c Release -o "$DIST" -p:Version="$VERSION" -p:TargetFramework="$tfm" \
            -p:ClrmuxNativeDir="$NATIVE" -p:ClrmuxNativeArm64Dir="$ARM64_NATIVE" -p:ClrmuxNativeWinX64Dir="$WIN_NATIVE" --disable-build-servers -nodeReuse:false -v:quiet \
            -clp:NoSummary >"$STAGE/pack.log" 2>&1; then
        cat "$STAGE/pack.log" >&2
        echo "dist: dotnet pack failed" >&2
        exit 1
    fi
    echo "dist: $DIST/Clrmux.Bundle.$VERSION.nupkg"
else
    echo "dist: dotnet is not on PATH: no NuGet package" >&2
fi
