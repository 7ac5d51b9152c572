#!/usr/bin/env bash
# Rooms call downward (the house rule): no two files of src/ may call into each other,
# directly or around a loop, and no two rooms (src/entry, src/loader, src/tracer, src/profiler,
# src/control, src/common, src/cli) either. Read from the linker's symbol tables, not from
# the includes: for every object file of src/ that `make` built, `nm` lists the global
# symbols it defines (functions T, data D/B/R/C, TLS and weak ones alike) and the ones it
# takes from elsewhere (U); an undefined symbol is resolved to the file that defines it in
# the same link (one link unit per object folder, below), which gives one arrow
# file -> file per pair, named by the symbols it takes. A reference to data or to a
# function's address counts as a call: it ties the two files as tightly. What nm cannot see
# is not checked: static inline functions and macros of headers, calls made through
# function pointers (which is how a lower file reaches an upper one on purpose: a table of
# functions given at creation, e.g. struct clrmux_tracer_host).
#
# The objects read (what ships, built by `make`; test-only objects are left out: build/asan
# and build/tsan are compiled -DCLRMUX_TESTING with test hooks, and tests/, fake_profilers/
# and bench/ are not rooms of src/):
#   build/obj/src      libclrmux.so (src/common, src/control, src/loader, src/tracer, the .S stubs)
#   build/pobj/src     libclrmux_profiler.so and libclrmux_otlp.so (src/profiler and the
#                      src/common, src/tracer files they link)
#   src/cli            compiled here into a scratch folder (the launcher is built without
#                      objects), resolved with build/obj (it links src/control's ctl_proto.c
#                      and ctl_path.c)
#   build/win-x64/obj/src  libclrmux.dll (the Windows halves: platform_win.c, ctl_win.c, ...),
#                      read when `make windows` built it and every object is newer than its
#                      source (in `make test`, tests/cross.sh builds it first); else said skipped
#
# The checks (one "ok"/"FAIL" line each, then "N passed, N failed"; exit 1 on a failure):
#   - the finder finds: a made-up graph with a loop of three and a pair is reported as two
#     circles (a test that cannot fail is a defect);
#   - no circle of files: every strongly connected component of the file graph with more
#     than one file fails, naming its files, one loop through them, and each arrow inside it
#     with one symbol it takes;
#   - no circle of rooms, the same on the room graph (a file's room: src/ and its first
#     folder; src/tracer/pb is src/tracer's);
#   - src/common is the bottom room: its files take nothing from another room;
#   - the platform layer (src/common/platform_*.c, behind platform.h) is the floor of
#     src/common: it takes nothing from any other file of src/.
# It also prints the room graph (each arrow with its count of file arrows and one symbol)
# and the rooms' floors, bottom first.
#
#   tests/circles.sh            (after `make`; fast: nm and one small compile, no dotnet; in
#                               `make test` after tests/cross.sh)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
CC=${CC:-cc}
WIN_NM=${WIN_NM:-x86_64-w64-mingw32-nm}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-circles.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if ! ls "$BUILD"/obj/src/loader/*.o >/dev/null 2>&1 || ! ls "$BUILD"/pobj/src/profiler/*.o >/dev/null 2>&1; then
    echo "FAIL - no objects in $BUILD/obj/src or $BUILD/pobj/src: run make first"
    echo "0 passed, 1 failed"
    exit 1
fi

# one symbol table per unit: "UNIT<TAB>ROOT<TAB>nm -P -A output line"
tables() {
    local unit=$1 root=$2 nm=$3; shift 3
    [ $# -gt 0 ] || return 0
    "$nm" -P -A "$@" 2>/dev/null | sed "s|^|$unit\t$root\t|"
}
{
    tables lib "$BUILD/obj" nm $(find "$BUILD/obj/src" -name '*.o' | sort)
    tables prof "$BUILD/pobj" nm $(find "$BUILD/pobj/src" -name '*.o' | sort)
    # the launcher
    mkdir -p "$WORK/cli/src/cli"
    for c in src/cli/*.c; do
        if ! $CC -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -DCLRMUX_VERSION='"0"' -c "$c" \
            -o "$WORK/cli/${c%.c}.o" 2>"$WORK/cli.err"; then
            echo "NOTE cannot compile $c for its symbol table: $(head -3 "$WORK/cli.err" | tr '\n' ' ')" >&2
        fi
    done
    tables cli "$WORK/cli" nm $(find "$WORK/cli/src" -name '*.o' | sort)
    # the Windows DLL, when built and fresh
    if [ -d "$BUILD/win-x64/obj/src" ] && command -v "$WIN_NM" >/dev/null 2>&1; then
        stale=""
        while IFS= read -r o; do
            rel=${o#"$BUILD"/win-x64/obj/}; rel=${rel%.o}
            for s in "$rel.c" "$rel.S"; do
                [ -f "$s" ] && [ "$s" -nt "$o" ] && stale="$stale $s"
            done
        done < <(find "$BUILD/win-x64/obj/src" -name '*.o')
        if [ -z "$stale" ]; then
            tables win "$BUILD/win-x64/obj" "$WIN_NM" $(find "$BUILD/win-x64/obj/src" -name '*.o' | sort)
        else
            echo "NOTE Windows objects skipped: older than their source:$stale (make windows)" >&2
        fi
    else
        echo "NOTE Windows objects skipped: $BUILD/win-x64/obj not built or $WIN_NM missing (make windows)" >&2
    fi
} >"$WORK/nm.tsv" 2> >(sed 's/^NOTE /note: /' >&2)
wait

python3 - "$WORK/nm.tsv" <<'PY'
import collections, os, sys

passed = failed = 0
def ok(msg):
    global passed; passed += 1; print("ok   - " + msg)
def bad(msg, lines=()):
    global failed; failed += 1; print("FAIL - " + msg)
    for l in lines: print("       " + l)

def sccs(nodes, graph):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(nodes):
        if root in index: continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = n; n += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n; n += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v: break
                out.append(sorted(comp))
    return out

def loop_through(comp, graph):
    """One shortest loop from the component's first member back to it."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(graph.get(v, ())):
            if w not in members: continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None: path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v; queue.append(w)
    return comp

def circles(arrows):
    """arrows: {(a, b): set(symbols)} -> [(members, lines)] for every component of 2+."""
    graph, nodes = collections.defaultdict(set), set()
    for a, b in arrows:
        graph[a].add(b); nodes.update((a, b))
    found = []
    for comp in sccs(nodes, graph):
        if len(comp) < 2: continue
        lines = ["loop: " + " -> ".join(loop_through(comp, graph))]
        for a in comp:
            for b in comp:
                syms = arrows.get((a, b))
                if syms:
                    s = sorted(syms)
                    lines.append("%s -> %s: %s%s" % (a, b, s[0], " (and %d more)" % (len(s) - 1) if len(s) > 1 else ""))
        found.append((comp, lines))
    return found

# the finder finds
made_up = {("a", "b"): {"f"}, ("b", "c"): {"g"}, ("c", "a"): {"h"}, ("c", "d"): {"i"},
           ("d", "e"): {"j"}, ("e", "d"): {"k"}, ("f", "a"): {"l"}}
got = sorted(tuple(c) for c, _ in circles(made_up))
if got == [("a", "b", "c"), ("d", "e")]:
    ok("the circle finder finds a made-up loop of three and a pair (and nothing else)")
else:
    bad("the circle finder on a made-up graph found %r, not [a b c] and [d e]" % got)

# read the symbol tables
DEF_TYPES = set("TDBRCGSVWiu")  # global definitions (nm's lower case is local, but for u)
defs = collections.defaultdict(set)   # (unit, symbol) -> files
uses = collections.defaultdict(set)   # (unit, file) -> symbols
units_seen = set()
def source_of(root, obj):
    rel = os.path.relpath(obj, root)[:-2]
    for ext in (".c", ".S"):
        if os.path.exists(rel + ext): return rel + ext
    return rel + ".c"
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    unit, root, rest = line.rstrip("\n").split("\t", 2)
    obj, _, fields = rest.partition(": ")
    f = fields.split()
    if len(f) < 2: continue
    sym, typ = f[0], f[1]
    src = source_of(root, obj)
    units_seen.add(unit)
    if typ in ("U", "w", "v"):
        uses[(unit, src)].add(sym)
    elif typ in DEF_TYPES:
        defs[(unit, sym)].add(src)
# the launcher resolves against libclrmux.so's objects too (ctl_proto.c, ctl_path.c)
resolve = {"cli": ("cli", "lib")}
arrows = collections.defaultdict(set)
files = set()
for (unit, src), syms in uses.items():
    files.add(src)
    for s in syms:
        for u in resolve.get(unit, (unit,)):
            found = defs.get((u, s))
            if found:
                for d in found:
                    if d != src: arrows[(src, d)].add(s)
                break
for (unit, s), fs in defs.items():
    files.update(fs)
print("read: %d files of src/, %d file arrows, units: %s" % (len(files), len(arrows), " ".join(sorted(units_seen))))

# no circle of files
found = circles(arrows)
if not found:
    ok("no circle of files: no two files of src/ call into each other, directly or around a loop")
for comp, lines in found:
    bad("circle of %d files: %s" % (len(comp), ", ".join(comp)), lines)

# rooms
def room(src):
    parts = src.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
room_arrows = collections.defaultdict(set)
for (a, b), syms in arrows.items():
    ra, rb = room(a), room(b)
    if ra != rb:
        room_arrows[(ra, rb)].add("%s -> %s: %s" % (a, b, sorted(syms)[0]))
print("room graph (room -> room: file arrows, one of them):")
for (ra, rb), why in sorted(room_arrows.items()):
    print("  %s -> %s: %d, e.g. %s" % (ra, rb, len(why), sorted(why)[0]))
found = circles({k: {sorted(v)[0]} for k, v in room_arrows.items()})
if not found:
    ok("no circle of rooms")
for comp, lines in found:
    bad("circle of %d rooms: %s" % (len(comp), ", ".join(comp)), lines)
if not found:
    # floors, bottom first: a room's floor is one above the highest room it calls
    rooms = sorted({room(f) for f in files})
    floor = {}
    def floor_of(r, seen=()):
        if r not in floor:
            below = [b for (a, b) in room_arrows if a == r]
            floor[r] = 1 + max([floor_of(b) for b in below], default=0)
        return floor[r]
    for r in rooms: floor_of(r)
    print("floors, bottom first: " + "; ".join(
        "%d: %s" % (n, " ".join(r for r in rooms if floor[r] == n)) for n in sorted(set(floor.values()))))

# src/common at the bottom, the platform layer under it
up = sorted("%s -> %s: %s" % (a, b, sorted(s)[0]) for (a, b), s in arrows.items()
            if room(a) == "src/common" and room(b) != "src/common")
if up: bad("src/common takes from other rooms (it must be the bottom room)", up)
else: ok("src/common, the bottom room, takes nothing from another room")
def platform(f): return f.startswith("src/common/platform_")
up = sorted("%s -> %s: %s" % (a, b, sorted(s)[0]) for (a, b), s in arrows.items() if platform(a) and not platform(b))
if up: bad("the platform layer (src/common/platform_*.c) takes from files above it", up)
else: ok("the platform layer (src/common/platform_*.c) takes nothing from another file of src/")

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
