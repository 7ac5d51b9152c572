#!/usr/bin/env bash
# make dist: the installed tree (make install) packed three ways, in build/dist:
#   clrmux-VERSION-linux-x64.tar.gz   clrmux-VERSION/{bin,lib,etc,share}: unpack anywhere
#   clrmux_VERSION_amd64.deb          the same tree in /opt/clrmux, /usr/bin/clrmux (dpkg-deb)
#   Clrmux.Bundle.VERSION.nupkg       the native files under runtimes/linux-x64/native/
#                                     (dotnet pack of packaging/nuget), when dotnet is there
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

# the NuGet package
if command -v dotnet >/dev/null 2>&1; then
    NATIVE="$ROOT/$STAGE/native"
    mkdir -p "$NATIVE"
    cp build/libclrmux.so build/libclrmux_profiler.so build/libclrmux_otlp.so "$NATIVE/"
    cp packaging/loader.conf "$NATIVE/loader.conf"
    tfm=net$(dotnet --version | cut -d. -f1).0
    if ! dotnet pack packaging/nuget/Clrmux.Bundle.csproj -c Release -o "$DIST" -p:Version="$VERSION" -p:TargetFramework="$tfm" \
            -p:ClrmuxNativeDir="$NATIVE" --disable-build-servers -nodeReuse:false -v:quiet \
            -clp:NoSummary >"$STAGE/pack.log" 2>&1; then
        cat "$STAGE/pack.log" >&2
        echo "dist: dotnet pack failed" >&2
        exit 1
    fi
    echo "dist: $DIST/Clrmux.Bundle.$VERSION.nupkg"
else
    echo "dist: dotnet is not on PATH: no NuGet package" >&2
fi
