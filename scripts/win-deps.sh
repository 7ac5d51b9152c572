#!/usr/bin/env bash
# The third-party C sources the Windows build compiles with mingw-w64 (Debian ships these
# libraries for Linux only): inih (ini.c, ini.h) and cmocka (src/cmocka.c, include/*.h) as
# sources, zlib and protobuf-c's runtime built here as static libraries (WIN_CC, default
# x86_64-w64-mingw32-gcc): DIR/lib/libz.a, DIR/lib/libprotobuf-c.a, their headers in
# DIR/include (zlib.h, zconf.h, protobuf-c/protobuf-c.h). All from Debian's source packages through `apt-get source --download-only` with a private
# deb-src list and package lists under DIR (the system's apt configuration is not touched).
# Bookworm's mirror no longer serves libinih's source, so trixie is listed too (apt takes the
# newest: inih r59); cmocka comes from bookworm (1.1.5; trixie's .dsc is gone from the mirror).
# zlib and protobuf-c come from bookworm (the versions Debian builds the Linux side with); each
# library is rebuilt only when its source archive is newer than it.
#   scripts/win-deps.sh DIR    -> DIR/inih/{ini.c,ini.h}, DIR/cmocka/{cmocka.c,cmocka.h,...},
#                                 DIR/lib/{libz.a,libprotobuf-c.a}, DIR/include/...
set -euo pipefail
DIR=${1:?usage: scripts/win-deps.sh DIR}
mkdir -p "$DIR/apt/lists/partial" "$DIR/src"
DIR=$(cd "$DIR" && pwd)
cat >"$DIR/apt/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian trixie main
deb-src http://deb.debian.org/debian bookworm main
EOF
APT=(apt-get -q -o "Dir::Etc::sourcelist=$DIR/apt/sources.list" -o Dir::Etc::sourceparts=-
     -o "Dir::State::Lists=$DIR/apt/lists" -o APT::Get::List-Cleanup=0 -o Debug::NoDropPrivs=1
     -o APT::Sandbox::User=root)
fetch() { # fetch SOURCE-PACKAGE[/SUITE] ORIG-GLOB
    if ! compgen -G "$DIR/src/$2" | grep -qv "\.asc$"; then
        [ -e "$DIR/apt/updated" ] || { "${APT[@]}" update >"$DIR/apt/update.log" 2>&1 && touch "$DIR/apt/updated"; } ||
            { echo "win-deps: apt-get update failed (log: $DIR/apt/update.log)" >&2; exit 1; }
        (cd "$DIR/src" && "${APT[@]}" source --download-only "$1" >"$DIR/apt/source-${1%%/*}.log" 2>&1) ||
            compgen -G "$DIR/src/$2" >/dev/null ||
            { echo "win-deps: apt-get source $1 failed (log: $DIR/apt/source-${1%%/*}.log)" >&2; exit 1; }
    fi
    compgen -G "$DIR/src/$2" | grep -v "\.asc$" | sort -V | tail -1
}
inih=$(fetch libinih 'libinih_*.orig.tar.*')
rm -rf "$DIR/inih" && mkdir -p "$DIR/inih"
tar -xf "$inih" -C "$DIR/inih" --strip-components=1 --wildcards '*/ini.c' '*/ini.h' '*/LICENSE.txt'
cmocka=$(fetch cmocka/bookworm 'cmocka_1.1.5.orig.tar.*')
rm -rf "$DIR/cmocka" "$DIR/cmocka.tmp" && mkdir -p "$DIR/cmocka" "$DIR/cmocka.tmp"
tar -xf "$cmocka" -C "$DIR/cmocka.tmp" --strip-components=1
cp "$DIR"/cmocka.tmp/src/cmocka.c "$DIR"/cmocka.tmp/include/cmocka.h "$DIR"/cmocka.tmp/include/cmocka_private.h \
   "$DIR"/cmocka.tmp/COPYING "$DIR/cmocka/"
rm -rf "$DIR/cmocka.tmp"
CC=${WIN_CC:-x86_64-w64-mingw32-gcc}
AR=${WIN_AR:-${CC%gcc}ar}
mkdir -p "$DIR/lib" "$DIR/include/protobuf-c"
# static_lib NAME - SRC-DIR CFLAGS FILE.c...: DIR/lib/libNAME.a from the listed C files
static_lib() {
    local name=$1 src=$3 cflags=$4 f objs=()
    shift 4
    rm -rf "$DIR/obj/$name" && mkdir -p "$DIR/obj/$name"
    for f in "$@"; do
        # shellcheck disable=SC2086
        "$CC" -O2 -g $cflags -c "$src/$f" -o "$DIR/obj/$name/$(basename "${f%.c}").o" ||
            { echo "win-deps: $CC failed on $name's $f" >&2; exit 1; }
        objs+=("$DIR/obj/$name/$(basename "${f%.c}").o")
    done
    rm -f "$DIR/lib/lib$name.a"
    "$AR" rcs "$DIR/lib/lib$name.a" "${objs[@]}"
}
zlib=$(fetch zlib/bookworm 'zlib_*.orig.tar.*')
if ! [ -f "$DIR/lib/libz.a" ] || [ "$zlib" -nt "$DIR/lib/libz.a" ]; then
    rm -rf "$DIR/zlib.tmp" && mkdir -p "$DIR/zlib.tmp"
    tar -xf "$zlib" -C "$DIR/zlib.tmp" --strip-components=1
    static_lib z - "$DIR/zlib.tmp" "-Wall" adler32.c compress.c crc32.c deflate.c gzclose.c gzlib.c gzread.c \
        gzwrite.c infback.c inffast.c inflate.c inftrees.c trees.c uncompr.c zutil.c
    cp "$DIR/zlib.tmp/zlib.h" "$DIR/zlib.tmp/zconf.h" "$DIR/include/"
    cp "$DIR/zlib.tmp/LICENSE" "$DIR/include/zlib.LICENSE" 2>/dev/null || true
    rm -rf "$DIR/zlib.tmp"
fi
protobufc=$(fetch protobuf-c/bookworm 'protobuf-c_*.orig.tar.*')
if ! [ -f "$DIR/lib/libprotobuf-c.a" ] || [ "$protobufc" -nt "$DIR/lib/libprotobuf-c.a" ]; then
    rm -rf "$DIR/protobuf-c.tmp" && mkdir -p "$DIR/protobuf-c.tmp"
    tar -xf "$protobufc" -C "$DIR/protobuf-c.tmp" --strip-components=1
    static_lib protobuf-c - "$DIR/protobuf-c.tmp" "-Wall -I$DIR/protobuf-c.tmp" protobuf-c/protobuf-c.c
    cp "$DIR/protobuf-c.tmp/protobuf-c/protobuf-c.h" "$DIR/include/protobuf-c/"
    cp "$DIR/protobuf-c.tmp/LICENSE" "$DIR/include/protobuf-c/LICENSE"
    rm -rf "$DIR/protobuf-c.tmp"
fi
echo "win-deps: $(basename "$inih"), $(basename "$cmocka"), $(basename "$zlib"), $(basename "$protobufc") in $DIR"
