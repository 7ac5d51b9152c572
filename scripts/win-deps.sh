#!/usr/bin/env bash
# The third-party C sources the Windows build compiles with mingw-w64 (Debian ships these
# libraries for Linux only): inih (ini.c, ini.h) and cmocka (src/cmocka.c, include/*.h),
# from Debian's source packages through `apt-get source --download-only` with a private
# deb-src list and package lists under DIR (the system's apt configuration is not touched).
# Bookworm's mirror no longer serves libinih's source, so trixie is listed too (apt takes the
# newest: inih r59); cmocka comes from bookworm (1.1.5; trixie's .dsc is gone from the mirror).
#   scripts/win-deps.sh DIR    -> DIR/inih/{ini.c,ini.h}, DIR/cmocka/{cmocka.c,cmocka.h,...}
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
echo "win-deps: $(basename "$inih"), $(basename "$cmocka") in $DIR"
