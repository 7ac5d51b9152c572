#!/usr/bin/env bash
# bench/usdt.sh [--summary FILE]: the USDT probes' cost while no tool is attached (issue 25).
#
# Builds the span probes (src/tracer/spans*.c, usdt.c, with libclrmux.so's flags: -O2, PIC)
# three times as shared objects in build/bench: without the USDT sites (-DCLRMUX_NO_USDT,
# the span of before), with them (libclrmux.so's build), and a copy of the latter whose
# semaphores bench/usdt.c sets by hand; then times spans of the three in turn in one process
# (bench/usdt.c: thread CPU time, paired rounds). Prints ns per span for each and the
# per-round difference with the USDT sites. Not a test: nothing passes or fails on speed.
# Knobs: BENCH_USDT_ROUNDS (41), BENCH_USDT_BLOCK (200000 spans per block).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SUMMARY=
if [ "${1:-}" = "--summary" ]; then SUMMARY=$2; shift 2; fi
OUT=build/bench
mkdir -p "$OUT"
SRCS="$(echo src/tracer/spans*.c) src/tracer/usdt.c src/common/platform_posix.c" # the probes' files, as they are split
# as libclrmux.so is built (Makefile: CFLAGS_COMMON, -O2), its functions left visible for dlsym
# (and -DCLRMUX_BENCH_SEMAPHORES: the hidden USDT semaphores' addresses, for bench/usdt.c to set)
CF="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -Isrc -g -fPIC -pthread -O2 -DCLRMUX_BENCH_SEMAPHORES"
# shellcheck disable=SC2086
gcc $CF -shared -DCLRMUX_NO_USDT -o "$OUT/libspans_plain.so" $SRCS -ldl -Wl,--no-undefined
# shellcheck disable=SC2086
gcc $CF -shared -o "$OUT/libspans_usdt.so" $SRCS -ldl -Wl,--no-undefined
cp "$OUT/libspans_usdt.so" "$OUT/libspans_usdt.so.set.so"
if ! readelf -n "$OUT/libspans_usdt.so" | grep -q 'Name: span_end'; then
    echo "usdt: <sys/sdt.h> is missing (systemtap-sdt-dev): the build has no USDT probes; nothing to measure"
    exit 0
fi
gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -Isrc -o "$OUT/usdt" bench/usdt.c -ldl
echo "usdt: ns per span (clrmux_span_enter_fast + clrmux_span_exit), thread CPU time, median of" \
     "${BENCH_USDT_ROUNDS:-41} rounds; the three builds in turn in one process ($OUT/usdt)"
"$OUT/usdt" "$ROOT/$OUT/libspans_plain.so" "$ROOT/$OUT/libspans_usdt.so" "${BENCH_USDT_ROUNDS:-41}" \
    "${BENCH_USDT_BLOCK:-200000}" | tee "$OUT/usdt.out" | grep -v '^usdt_summary'
[ -n "$SUMMARY" ] && grep '^usdt_summary' "$OUT/usdt.out" >>"$SUMMARY"
echo "  (libclrmux.so's probes: readelf -n build/libclrmux.so | grep -A3 stapsdt)"
