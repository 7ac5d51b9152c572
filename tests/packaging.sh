#!/usr/bin/env bash
# The packages of `make dist`, installed as a user would and used to run a .NET app:
#   - the installed tree (make install DESTDIR=… PREFIX=…) has every file in its place
#   - the tarball: unpacked anywhere, `clrmux check` and `clrmux run` work from it, and
#     share/clrmux/instrument.sh registers clrmux for a `dotnet` started from the shell
#   - the .deb: installed with dpkg into a scratch root (its Depends met by the host's own
#     packages' status), the app runs under /opt/clrmux there; removed again, the conffile stays
#   - the NuGet package: a C# app references Clrmux.Bundle from a local folder source, is
#     published, and runs under the libclrmux.so and loader.conf of its publish folder
# Prints one line per check and a closing "N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0
VERSION=$(sed -n 's/^VERSION := //p' Makefile)
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-pkg.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -30; }
check() { local d=$1; shift; if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi; }
# spans FILE NAME: number of spans called NAME in an OTLP JSON lines file
spans() { python3 - "$1" "$2" <<'PY'
import json, sys
n = 0
try:
    for line in open(sys.argv[1]):
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                n += sum(1 for s in ss.get("spans", []) if s["name"] == sys.argv[2])
except OSError:
    pass
print(n)
PY
}
have_dotnet=1
command -v dotnet >/dev/null 2>&1 || have_dotnet=0
if [ $have_dotnet = 0 ]; then
    echo "## dotnet is not on PATH: the packages are checked, but no .NET app runs under them ##"
    [ "${CI:-}" = "true" ] && { echo "CI=true: a missing dotnet is an error"; exit 1; }
else
    tests/clr/build-apps.sh >/dev/null || { echo "building the C# test apps failed"; exit 1; }
fi
SAMPLE="$ROOT/build/clr/sample/sample.dll"

# ---- make install ---------------------------------------------------------------------
if make -s install NO_SETUP=1 PREFIX=/usr/lib/clrmux-test DESTDIR="$WORK/inst" >"$WORK/install.log" 2>&1; then
    ok "make install DESTDIR=… PREFIX=/usr/lib/clrmux-test"
else
    bad "make install" "$(cat "$WORK/install.log")"
fi
P="$WORK/inst/usr/lib/clrmux-test"
missing=""
for f in bin/clrmux lib/libclrmux.so lib/libclrmux_profiler.so lib/libclrmux_otlp.so etc/loader.conf lib/loader.conf \
         share/clrmux/instrument.sh share/doc/clrmux/README.md; do
    [ -e "$P/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "installed tree has bin/, lib/, etc/loader.conf, share/clrmux/instrument.sh" \
    || bad "installed tree lacks:$missing"
check "bin/clrmux is executable" test -x "$P/bin/clrmux"
# the licences of the code linked in (inih, zlib, protobuf-c, ...) travel with the binaries
notices() { # notices FILE: the notices file, with each statically linked project's licence
    [ -s "$1" ] && grep -q 'Copyright (c) 2009, Ben Hoyt' "$1" && grep -q 'Jean-loup Gailly and Mark Adler' "$1" \
        && grep -q 'Dave Benson and the protobuf-c authors' "$1" && grep -q 'Apache License' "$1"
}
check "installed tree has share/doc/clrmux/THIRD_PARTY_NOTICES.md (inih, zlib, protobuf-c, opentelemetry-proto)" \
    notices "$P/share/doc/clrmux/THIRD_PARTY_NOTICES.md"
# the documentation: README.md, loader.conf.example and every page of docs/, as in the source tree
docs_in() { # docs_in DIR: DIR holds README.md, loader.conf.example and docs/*.md, unchanged
    [ -s "$1/README.md" ] && cmp -s README.md "$1/README.md" && [ -s "$1/loader.conf.example" ] || return 1
    local f
    for f in docs/*.md; do cmp -s "$f" "$1/$f" || return 1; done
    [ "$(ls "$1"/docs/*.md | wc -l)" = "$(ls docs/*.md | wc -l)" ]
}
links_in() { # links_in DIR: every relative link of DIR's .md pages names a file inside DIR
    python3 - "$1" <<'PY'
import os, re, sys
root, broken = os.path.realpath(sys.argv[1]), []
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".md"):
            page = os.path.join(d, f)
            for t in re.findall(r"\]\(([^)\s]+)\)", open(page, encoding="utf-8").read()):
                t = t.split("#")[0]
                if not t or re.match(r"[a-z]+:", t):
                    continue
                p = os.path.realpath(os.path.join(d, t))
                if not p.startswith(root + os.sep) or not os.path.exists(p):
                    broken.append("%s -> %s" % (os.path.relpath(page, root), t))
print("\n".join(broken[:10]))
sys.exit(1 if broken else 0)
PY
}
check "installed tree has share/doc/clrmux/{README.md, loader.conf.example, docs/*.md}" docs_in "$P/share/doc/clrmux"
check "installed tree: every relative link of the installed pages resolves inside share/doc/clrmux" links_in "$P/share/doc/clrmux"
# the profiler's companion: zlib and protobuf-c linked in and hidden, so it needs only libc (the
# .deb's Depends and the READMEs say so) and exports only its entry point and its control
# operations (profiler/companion.h)
needed=$(readelf -d "$P/lib/libclrmux_profiler.so" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
exported=$(nm -D --defined-only "$P/lib/libclrmux_profiler.so" 2>&1 | awk '{print $NF}' | sort | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] && [ "$exported" = "clrmux_profiler_create clrmux_profiler_ctl " ] \
    && ok "lib/libclrmux_profiler.so needs only libc.so.6 and exports only clrmux_profiler_create and clrmux_profiler_ctl" \
    || bad "lib/libclrmux_profiler.so needs only libc.so.6 and exports only clrmux_profiler_create and clrmux_profiler_ctl" "NEEDED: $needed; exported: $exported"
check "instrument.sh names the install prefix" grep -q '"/usr/lib/clrmux-test"' "$P/share/clrmux/instrument.sh"
check "lib/loader.conf (the library's default) is etc/loader.conf" test "$(readlink "$P/lib/loader.conf")" = ../etc/loader.conf
# etc/loader.conf documents every key that loader.conf.example documents
keys() { python3 - "$1" <<'PY'
import re, sys
keys = set()
for line in open(sys.argv[1]):
    m = re.match(r"^[;#]?\s*([a-z_]+(?:\s*,\s*[a-z_]+)*)\s*=", line)
    if m:
        keys.update(k.strip() for k in m.group(1).split(","))
print("\n".join(sorted(keys)))
PY
}
undocumented=$(comm -23 <(keys loader.conf.example) <(keys packaging/loader.conf) | tr '\n' ' ')
[ -z "$undocumented" ] && ok "etc/loader.conf lists every key of loader.conf.example ($(keys loader.conf.example | wc -l) keys)" \
    || bad "packaging/loader.conf (installed as etc/loader.conf) does not document: $undocumented"
out=$("$P/bin/clrmux" check 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "clrmux-test/etc/loader.conf: 0 errors" <<<"$out" && ok "installed clrmux check: etc/loader.conf has no error" \
    || bad "installed clrmux check (rc=$rc)" "$out"

# ---- make dist ------------------------------------------------------------------------
if make -s dist NO_SETUP=1 >"$WORK/dist.log" 2>&1; then ok "make dist"; else bad "make dist" "$(tail -n 30 "$WORK/dist.log")"; fi
TAR=build/dist/clrmux-$VERSION-linux-x64.tar.gz
DEB=build/dist/clrmux_${VERSION}_amd64.deb
NUPKG=build/dist/Clrmux.Bundle.$VERSION.nupkg
check "versioned tarball $TAR" test -s "$TAR"
check "Debian package $DEB" test -s "$DEB"

# the Linux arm64 tarball and .deb (when the cross toolchain is there: tests/cross.sh says so)
ATAR=build/dist/clrmux-$VERSION-linux-arm64.tar.gz
if [ -s "$ATAR" ]; then
    mkdir -p "$WORK/atar"
    tar -C "$WORK/atar" -xzf "$ATAR"
    AT="$WORK/atar/clrmux-$VERSION"
    check "arm64 tarball: bin/clrmux, lib/libclrmux.so and lib/libclrmux_profiler.so are AArch64 ELF files" \
        bash -c "file -L '$AT/bin/clrmux' '$AT/lib/libclrmux.so' '$AT/lib/libclrmux_profiler.so' | grep -c 'ARM aarch64' | grep -qx 3"
    check "arm64 Debian package: Architecture: arm64" \
        bash -c "dpkg-deb -f build/dist/clrmux_${VERSION}_arm64.deb Architecture | grep -qx arm64"
    if command -v qemu-aarch64 >/dev/null 2>&1; then
        check "arm64 tarball's clrmux --version (qemu-aarch64) says $VERSION" grep -qx "clrmux $VERSION" <(qemu-aarch64 "$AT/bin/clrmux" --version)
    fi
fi

# the Windows x64 zip (when mingw-w64 is there: tests/cross.sh says so)
WZIP=build/dist/clrmux-$VERSION-win-x64.zip
if [ -s "$WZIP" ]; then
    mkdir -p "$WORK/wzip"
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$WZIP" "$WORK/wzip"
    WZ="$WORK/wzip/clrmux-$VERSION"
    check "win-x64 zip: libclrmux.dll is a PE32+ x86-64 DLL" bash -c "file '$WZ/libclrmux.dll' | grep -q 'PE32+ executable (DLL).*x86-64'"
    check "win-x64 zip: loader.conf (no built-in child), README.md, loader.conf.example" \
        bash -c "[ -s '$WZ/README.md' ] && [ -s '$WZ/loader.conf.example' ] && ! grep -q '^builtin' '$WZ/loader.conf'"
    check "win-x64 zip: THIRD_PARTY_NOTICES.md" notices "$WZ/THIRD_PARTY_NOTICES.md"
    check "win-x64 zip: docs/*.md" docs_in "$WZ"
    check "win-x64 zip: every relative link of its pages resolves inside it" links_in "$WZ"
    check "win-x64 zip: clrmux.exe (clrmux ctl) is a PE32+ x86-64 console program" \
        bash -c "file '$WZ/clrmux.exe' | grep -q 'PE32+ executable (console).*x86-64'"
    check "win-x64 zip: libclrmux.dll exports DllGetClassObject and DllCanUnloadNow" \
        bash -c "! command -v x86_64-w64-mingw32-objdump >/dev/null || x86_64-w64-mingw32-objdump -p '$WZ/libclrmux.dll' | grep -c '\] Dll\(GetClassObject\|CanUnloadNow\)$' | grep -qx 2"
fi

# ---- the tarball ----------------------------------------------------------------------
mkdir -p "$WORK/tar"
tar -C "$WORK/tar" -xzf "$TAR"
T="$WORK/tar/clrmux-$VERSION"
check "tarball unpacks to clrmux-$VERSION/{bin,lib,etc,share}" test -x "$T/bin/clrmux" -a -f "$T/lib/libclrmux.so" -a -f "$T/etc/loader.conf" -a -f "$T/share/clrmux/instrument.sh"
[ $have_dotnet = 1 ] && check "tarball has lib/Clrmux.Agent.dll (the tracer's managed agent) beside libclrmux.so" test -f "$T/lib/Clrmux.Agent.dll"
[ $have_dotnet = 1 ] && check "tarball has share/clrmux/attach/clrmux-attach.dll (clrmux attach's tool) and its dependencies" \
    test -f "$T/share/clrmux/attach/clrmux-attach.dll" -a -f "$T/share/clrmux/attach/Microsoft.Diagnostics.NETCore.Client.dll" \
    -a -f "$T/share/clrmux/attach/clrmux-attach.runtimeconfig.json"
check "tarball's clrmux --version says $VERSION" grep -qx "clrmux $VERSION" <("$T/bin/clrmux" --version)
check "tarball has share/doc/clrmux/THIRD_PARTY_NOTICES.md" notices "$T/share/doc/clrmux/THIRD_PARTY_NOTICES.md"
check "tarball has share/doc/clrmux/{README.md, loader.conf.example, docs/*.md}" docs_in "$T/share/doc/clrmux"
if [ $have_dotnet = 1 ]; then
    out=$(cd "$WORK" && "$T/bin/clrmux" run --trace 'sample!Sample.Work::Fib' --profile --output-dir "$WORK/tar-run" -- dotnet "$SAMPLE" 2>&1)
    rc=$?
    n=$(spans "$(ls "$WORK"/tar-run/traces-*.otlp.jsonl 2>/dev/null | head -1)" Sample.Work.Fib)
    np=$(ls "$WORK"/tar-run/profiles/*.pb.gz 2>/dev/null | wc -l)
    [ $rc = 0 ] && [ "$n" -gt 0 ] && [ "$np" -ge 1 ] && ok "tarball: clrmux run gives $n Fib spans and $np profile" \
        || bad "tarball: clrmux run (rc=$rc, $n spans, $np profiles)" "$out"
    # instrument.sh, sourced by bash from the unpacked tree (no CLRMUX_HOME): a test config
    cat >"$WORK/instr.conf" <<EOF
[loader]
log_file = $WORK/instr.log
[child tracer]
builtin = tracer
output = $WORK/instr-spans.jsonl
trace = sample!Sample.Work::Fib
EOF
    out=$(CLRMUX_CONFIG="$WORK/instr.conf" bash -c ". '$T/share/clrmux/instrument.sh' && echo \"\$CORECLR_PROFILER_PATH\" && dotnet '$SAMPLE'" 2>&1)
    n=$(spans "$WORK/instr-spans.jsonl" Sample.Work.Fib)
    grep -qx "$T/lib/libclrmux.so" <<<"$out" && [ "$n" -gt 0 ] \
        && ok "tarball: bash sources instrument.sh, finds its tree, dotnet runs traced ($n spans)" \
        || bad "tarball: instrument.sh under bash ($n spans)" "$out"
    # POSIX sh (dash) has no BASH_SOURCE: CLRMUX_HOME names the tree
    out=$(CLRMUX_HOME="$T" sh -c ". '$T/share/clrmux/instrument.sh' && echo \"\$CORECLR_PROFILER=\$CLRMUX_CONFIG\"" 2>&1)
    [ "$out" = "$CLSID=$T/etc/loader.conf" ] && ok "tarball: sh sources instrument.sh with CLRMUX_HOME; CLRMUX_CONFIG defaults to etc/loader.conf" \
        || bad "tarball: instrument.sh under sh" "$out"
fi

# ---- the .deb in a scratch root ------------------------------------------------------
check "dpkg-deb --info: package clrmux $VERSION, amd64" bash -c "dpkg-deb -f '$DEB' Package Version Architecture | tr '\n' ' ' | grep -qx 'Package: clrmux Version: $VERSION Architecture: amd64 '"
R="$WORK/root"
mkdir -p "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/info"
# the scratch root's package database holds the host's own entries for the dependencies, so
# that dpkg checks the Depends line for real
deps=$(dpkg-deb -f "$DEB" Depends | sed 's/([^)]*)//g; s/,/ /g')
# (qualified with the native architecture: once a foreign one is added, e.g. arm64 for the cross
# build, a bare name is ambiguous to dpkg-query)
arch=$(dpkg --print-architecture)
# shellcheck disable=SC2086
dpkg-query -s $(for d in $deps; do echo "$d:$arch"; done) >"$R/var/lib/dpkg/status" 2>/dev/null
DPKG=(dpkg --root="$R" --force-not-root --log=/dev/null)
if out=$("${DPKG[@]}" -i "$DEB" 2>&1); then ok "dpkg -i into a scratch root (Depends: $(echo $deps))"; else bad "dpkg -i into a scratch root" "$out"; fi
check "dpkg -l: clrmux $VERSION installed" bash -c "dpkg-query --admindir='$R/var/lib/dpkg' -W -f='\${Status} \${Version}' clrmux | grep -qx 'install ok installed $VERSION'"
check "the .deb links /usr/bin/clrmux to /opt/clrmux/bin/clrmux" test "$(readlink "$R/usr/bin/clrmux")" = /opt/clrmux/bin/clrmux
check "the .deb has /opt/clrmux/share/doc/clrmux/THIRD_PARTY_NOTICES.md" notices "$R/opt/clrmux/share/doc/clrmux/THIRD_PARTY_NOTICES.md"
check "the .deb has /opt/clrmux/share/doc/clrmux/{README.md, loader.conf.example, docs/*.md}" docs_in "$R/opt/clrmux/share/doc/clrmux"
if [ $have_dotnet = 1 ]; then
    out=$(cd "$WORK" && "$R/opt/clrmux/bin/clrmux" run --trace 'sample!Sample.Work::Fib' --output-dir "$WORK/deb-run" -- dotnet "$SAMPLE" 2>&1)
    rc=$?
    n=$(spans "$(ls "$WORK"/deb-run/traces-*.otlp.jsonl 2>/dev/null | head -1)" Sample.Work.Fib)
    [ $rc = 0 ] && [ "$n" -gt 0 ] && grep -q "under $R/opt/clrmux/lib/libclrmux.so" <<<"$out" \
        && ok "deb: the app runs under /opt/clrmux/lib/libclrmux.so of the scratch root ($n spans)" \
        || bad "deb: clrmux run (rc=$rc, $n spans)" "$out"
fi
echo "; edited by the admin" >>"$R/opt/clrmux/etc/loader.conf"
if out=$("${DPKG[@]}" -r clrmux 2>&1); then ok "dpkg -r clrmux"; else bad "dpkg -r clrmux" "$out"; fi
check "after dpkg -r: the libraries are gone, the edited conffile stays" test ! -e "$R/opt/clrmux/lib/libclrmux.so" -a -f "$R/opt/clrmux/etc/loader.conf"

# ---- the NuGet package ----------------------------------------------------------------
if [ $have_dotnet = 1 ]; then
    check "NuGet package $NUPKG" test -s "$NUPKG"
    listing=$(python3 -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$NUPKG" 2>&1)
    for f in libclrmux.so libclrmux_profiler.so libclrmux_otlp.so loader.conf Clrmux.Agent.dll; do
        grep -qx "runtimes/linux-x64/native/$f" <<<"$listing" && ok "nupkg holds runtimes/linux-x64/native/$f" \
            || bad "nupkg lacks runtimes/linux-x64/native/$f" "$listing"
    done
    grep -qx "THIRD_PARTY_NOTICES.md" <<<"$listing" && ok "nupkg holds THIRD_PARTY_NOTICES.md" \
        || bad "nupkg lacks THIRD_PARTY_NOTICES.md" "$listing"
    grep -q '^lib/' <<<"$listing" && bad "nupkg has a lib/ folder (no assembly expected)" || ok "nupkg has no assembly (no lib/)"
    if [ -s "build/dist/clrmux-$VERSION-linux-arm64.tar.gz" ]; then
        for f in libclrmux.so libclrmux_profiler.so libclrmux_otlp.so loader.conf Clrmux.Agent.dll; do
            grep -qx "runtimes/linux-arm64/native/$f" <<<"$listing" && ok "nupkg holds runtimes/linux-arm64/native/$f" \
                || bad "nupkg lacks runtimes/linux-arm64/native/$f" "$listing"
        done
    fi
    if [ -s "$WZIP" ]; then
        for f in libclrmux.dll loader.conf; do
            grep -qx "runtimes/win-x64/native/$f" <<<"$listing" && ok "nupkg holds runtimes/win-x64/native/$f" \
                || bad "nupkg lacks runtimes/win-x64/native/$f" "$listing"
        done
    fi
    # a user's app: a local folder source, a private package cache (no stale Clrmux.Bundle)
    A="$WORK/bundleapp"
    cp -r tests/packaging/bundleapp "$A"
    cat >"$A/NuGet.config" <<EOF
<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSources>
    <clear />
    <add key="clrmux-dist" value="$ROOT/build/dist" />
  </packageSources>
</configuration>
EOF
    if out=$(cd "$A" && NUGET_PACKAGES="$WORK/nuget-cache" dotnet publish -c Release -o "$A/pub" -p:ClrmuxVersion="$VERSION" \
                 -p:TargetFramework="net$(dotnet --version | cut -d. -f1).0" \
                 --disable-build-servers -nodeReuse:false -p:UseSharedCompilation=false -v:quiet -clp:NoSummary 2>&1); then
        ok "dotnet publish of an app that references Clrmux.Bundle $VERSION from a local folder"
    else
        bad "dotnet publish of the Clrmux.Bundle app" "$out"
    fi
    N="$A/pub/runtimes/linux-x64/native"
    check "publish folder has runtimes/linux-x64/native/{libclrmux.so,libclrmux_profiler.so,loader.conf}" \
        test -f "$N/libclrmux.so" -a -f "$N/libclrmux_profiler.so" -a -f "$N/loader.conf"
    # 1. the package's own loader.conf (beside libclrmux.so): the built-in profiler
    rm -f /var/tmp/clrmux/profiles/bundleapp-*.pb.gz 2>/dev/null
    out=$(cd "$A/pub" && env -u CLRMUX_CONFIG CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" \
              CORECLR_PROFILER_PATH="$N/libclrmux.so" CLRMUX_LOG_FILE="$WORK/bundle1.log" dotnet bundleapp.dll 2>&1)
    rc=$?
    prof=$(ls /var/tmp/clrmux/profiles/bundleapp-*.pb.gz 2>/dev/null | head -1)
    [ $rc = 0 ] && grep -q "$N/loader.conf" "$WORK/bundle1.log" && [ -n "$prof" ] \
        && ok "published app runs under its own libclrmux.so and loader.conf (profile ${prof##*/})" \
        || bad "published app with the package's loader.conf (rc=$rc, profile '$prof')" "$out
$(cat "$WORK/bundle1.log" 2>/dev/null)"
    rm -f /var/tmp/clrmux/profiles/bundleapp-*.pb.gz 2>/dev/null
    # 2. the user's own configuration: the tracer on the app's method
    cat >"$WORK/bundle.conf" <<EOF
[child tracer]
builtin = tracer
output = $WORK/bundle-spans.jsonl
trace = bundleapp!BundleApp.Work::Compute
EOF
    out=$(cd "$A/pub" && env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$N/libclrmux.so" \
              CLRMUX_CONFIG="$WORK/bundle.conf" CLRMUX_LOG_FILE="$WORK/bundle2.log" dotnet bundleapp.dll 2>&1)
    n=$(spans "$WORK/bundle-spans.jsonl" BundleApp.Work.Compute)
    calls=$(sed -n 's/^bundleapp: \([0-9]*\) calls.*/\1/p' <<<"$out")
    [ -n "$calls" ] && [ "$n" = "$calls" ] && ok "published app traced through the package's libclrmux.so: $n spans for $calls calls" \
        || bad "published app traced ($n spans, '$calls' calls)" "$out
$(cat "$WORK/bundle2.log" 2>/dev/null)"
fi

echo "packaging: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
