#!/usr/bin/env bash
# The .NET runtimes the real-runtime tests run on, one per major version.
#
#   scripts/dotnet-runtimes.sh 8 9 10     prints one line per major: MAJOR VERSION DOTNET
#
# A major that the `dotnet` on PATH has (`dotnet --list-runtimes`) is used from there (its
# highest version). Any other is fetched as the runtime pack
# Microsoft.NETCore.App.Runtime.linux-x64 (pinned version below; for 8 and later also
# Microsoft.AspNetCore.App.Runtime.linux-x64 of the same version) through an ordinary NuGet
# restore (the machine's NuGet sources; the global packages folder caches it) and unpacked
# as a shared framework into a private dotnet root, build/dotnet-runtimes/root: the `dotnet`
# muxer and hostfxr copied from the SDK's install, shared/Microsoft.NETCore.App/<version>
# hard-linked from the pack (and shared/Microsoft.AspNetCore.App/<version>). Run an app on one
# of them with
#   DOTNET exec --fx-version VERSION app.dll
# (tests/clr/lib.sh wraps this). Exits nonzero, naming the major, if one cannot be had.
# `3` means .NET Core 3.1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CLRMUX_RUNTIMES_DIR:-$ROOT/build/dotnet-runtimes}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export MSBUILDDISABLENODEREUSE=1 DOTNET_CLI_USE_MSBUILD_SERVER=0

# The runtime pack fetched for each major when the SDK's install lacks it (versions the
# local NuGet source serves).
pinned() {
    case $1 in
    3) echo 3.1.3 ;;
    8) echo 8.0.33 ;;
    9) echo 9.0.22 ;;
    10) echo 10.0.14 ;;
    *) return 1 ;;
    esac
}

SYS_DOTNET=$(command -v dotnet) || { echo "dotnet-runtimes.sh: dotnet is not on PATH" >&2; exit 1; }
SYS_DIR=$(dirname "$(readlink -f "$SYS_DOTNET")")
PRIV=$CACHE/root

# system_version MAJOR: the highest Microsoft.NETCore.App MAJOR.x of the SDK's install
system_version() {
    local want=$1
    [ "$want" = 3 ] && want=3.1
    dotnet --list-runtimes 2>/dev/null | awk -v m="$want" '$1 == "Microsoft.NETCore.App" && index($2, m ".") == 1 {print $2}' |
        sort -V | tail -1
}

need=()
declare -A VER DOTNET
for major in "$@"; do
    v=$(system_version "$major")
    if [ -n "$v" ]; then
        VER[$major]=$v
        DOTNET[$major]=$SYS_DOTNET
        continue
    fi
    v=$(pinned "$major") || { echo "dotnet-runtimes.sh: no runtime pack pinned for .NET $major" >&2; exit 1; }
    VER[$major]=$v
    DOTNET[$major]=$PRIV/dotnet
    if [ ! -f "$PRIV/shared/Microsoft.NETCore.App/$v/.complete" ] ||
        { [ "$major" -ge 8 ] && [ ! -f "$PRIV/shared/Microsoft.AspNetCore.App/$v/Microsoft.AspNetCore.App.runtimeconfig.json" ]; }; then
        need+=("$v")
    fi
done

if [ "${#need[@]}" -gt 0 ]; then
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    fetch=$CACHE/fetch
    mkdir -p "$fetch"
    versions=""
    for v in "${need[@]}"; do versions+="[$v];"; done
    cat >"$fetch/fetch.csproj" <<EOF
<Project Sdk="Microsoft.NET.Sdk">
  <!-- written by scripts/dotnet-runtimes.sh: downloads runtime packs, builds nothing -->
  <PropertyGroup>
    <TargetFramework>netstandard2.0</TargetFramework>
    <NuGetAudit>false</NuGetAudit>
    <DisableImplicitFrameworkReferences>true</DisableImplicitFrameworkReferences>
  </PropertyGroup>
  <ItemGroup>
    <PackageDownload Include="Microsoft.NETCore.App.Runtime.linux-x64" Version="${versions%;}" />
EOF
    # ASP.NET Core's shared framework of the same version (8 and later: the tracer's web tests)
    aspnet=""
    for v in "${need[@]}"; do [ "${v%%.*}" -ge 8 ] && aspnet+="[$v];"; done
    [ -n "$aspnet" ] && echo "    <PackageDownload Include=\"Microsoft.AspNetCore.App.Runtime.linux-x64\" Version=\"${aspnet%;}\" />" >>"$fetch/fetch.csproj"
    cat >>"$fetch/fetch.csproj" <<EOF
  </ItemGroup>
</Project>
EOF
    echo "dotnet-runtimes.sh: fetching Microsoft.NETCore.App.Runtime.linux-x64 ${need[*]} (NuGet restore)" >&2
    if ! dotnet restore "$fetch/fetch.csproj" -v:minimal --disable-build-servers >"$fetch/restore.log" 2>&1; then
        cat "$fetch/restore.log" >&2
        echo "dotnet-runtimes.sh: NuGet restore of the runtime packs failed (log: $fetch/restore.log)" >&2
        exit 1
    fi
    pkgs=$(dotnet nuget locals global-packages --list 2>/dev/null | sed -n 's/^global-packages: *//p')
    pkgs=${pkgs:-${NUGET_PACKAGES:-$HOME/.nuget/packages}}
    # the muxer and hostfxr of the SDK's install (a newer hostfxr runs older frameworks)
    if [ ! -x "$PRIV/dotnet" ]; then
        mkdir -p "$PRIV/host"
        cp "$SYS_DIR/dotnet" "$PRIV/dotnet.tmp"
        rm -rf "$PRIV/host/fxr"
        cp -r "$SYS_DIR/host/fxr" "$PRIV/host/fxr"
        mv -f "$PRIV/dotnet.tmp" "$PRIV/dotnet"
    fi
    for v in "${need[@]}"; do
        pack="$pkgs/microsoft.netcore.app.runtime.linux-x64/$v/runtimes/linux-x64"
        dest="$PRIV/shared/Microsoft.NETCore.App/$v"
        libdir=$(ls -d "$pack"/lib/*/ 2>/dev/null | head -1)
        if [ -z "$libdir" ] || [ ! -f "$pack/native/libcoreclr.so" ]; then
            echo "dotnet-runtimes.sh: $pack is not a runtime pack" >&2
            exit 1
        fi
        rm -rf "$dest"
        mkdir -p "$dest"
        cp -al "$libdir". "$pack/native/." "$dest/" 2>/dev/null || cp -a "$libdir". "$pack/native/." "$dest/"
        if [ ! -f "$dest/Microsoft.NETCore.App.deps.json" ]; then
            # older packs (3.1) ship no deps.json, without which hostfxr does not see the
            # framework: list the pack's own files
            tfm=$(basename "$libdir")
            {
                printf '{"runtimeTarget":{"name":".NETCoreApp,Version=v%s/linux-x64","signature":""},' "${tfm#netcoreapp}"
                printf '"compilationOptions":{},"targets":{".NETCoreApp,Version=v%s/linux-x64":{' "${tfm#netcoreapp}"
                printf '"runtimepack.Microsoft.NETCore.App.Runtime.linux-x64/%s":{"runtime":{' "$v"
                (cd "$dest" && ls -- *.dll) | sed 's/.*/"&":{}/' | paste -sd, | tr -d '\n'
                printf '},"native":{'
                (cd "$dest" && ls -- *.so createdump 2>/dev/null) | sed 's/.*/"&":{}/' | paste -sd, | tr -d '\n'
                printf '}}}},"libraries":{"runtimepack.Microsoft.NETCore.App.Runtime.linux-x64/%s":' "$v"
                printf '{"type":"runtimepack","serviceable":false,"sha512":""}}}\n'
            } >"$dest/Microsoft.NETCore.App.deps.json"
        fi
        if [ "${v%%.*}" -ge 8 ]; then
            apack="$pkgs/microsoft.aspnetcore.app.runtime.linux-x64/$v/runtimes/linux-x64/lib"
            alib=$(ls -d "$apack"/*/ 2>/dev/null | head -1)
            adest="$PRIV/shared/Microsoft.AspNetCore.App/$v"
            if [ -z "$alib" ] || [ ! -f "$alib/Microsoft.AspNetCore.App.runtimeconfig.json" ]; then
                echo "dotnet-runtimes.sh: $apack is not an ASP.NET Core runtime pack" >&2
                exit 1
            fi
            rm -rf "$adest"
            mkdir -p "$adest"
            cp -al "$alib". "$adest/" 2>/dev/null || cp -a "$alib". "$adest/"
        fi
        touch "$dest/.complete"
    done
    flock -u 9
fi

for major in "$@"; do
    echo "$major ${VER[$major]} ${DOTNET[$major]}"
done
