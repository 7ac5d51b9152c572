#!/usr/bin/env bash
# Real-runtime hardening tests of the loader: loader loops, special and oversized
# configuration files, config amplification, a symlinked log file, and who may put code in
# the process (permissions). Each case runs the `hello` app under clrmux with a time limit
# and checks that the app runs, what clrmux logged, and that the other children work.
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10); prints one line per check and
# a closing "hardening: N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite hardening "$@"

LIB="${CLRMUX_TEST_LIB:-$ROOT/build/libclrmux.so}" # CLRMUX_TEST_LIB: test another build
FAKE="$ROOT/build/fake"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
REC="{C0000001-0000-0000-0000-000000000001}"
CHAIN="{C0000002-0000-0000-0000-000000000002}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-hard.XXXXXX")
trap 'chmod -R u+rwx "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
[ -f "$LIB" ] || { bad "$LIB is missing (run make all)"; clr_done; }
expect() { # expect "description" detail-command... ; passes when `test` succeeds
    local d=$1 detail=$2; shift 2
    if "$@"; then ok "$d"; else bad "$d" "$(eval "$detail" 2>&1)"; fi
}

# run TAG [VAR=VALUE...]: hello under the given environment, 60 s limit; rc in $WORK/TAG.rc
run() {
    local tag=$1; shift
    local start=$SECONDS
    timeout -k 5 60 env DOTNET_gcServer=0 "$@" "${DOTNET[@]}" build/clr/hello/hello.dll >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
    echo $((SECONDS - start)) >"$WORK/$tag.secs"
}
# under TAG CONF [VAR=VALUE...]: with clrmux as the profiler, CLRMUX_CONFIG=CONF, log in TAG.log
under() {
    local tag=$1 conf=$2; shift 2
    run "$tag" CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$conf" CLRMUX_LOG_FILE="$WORK/$tag.log" RECORDER_MASK_C0000001=0x4 \
        RECORDER_OUT_C0000001="$WORK/$tag.rec" "$@"
}
ran() { [ "$(cat "$WORK/$1.rc")" = 0 ] && grep -qx hello "$WORK/$1.out"; }
logged() { grep -qF -- "$2" "$WORK/$1.log" 2>/dev/null; }
nlines() { grep -cF -- "$2" "$WORK/$1.log" 2>/dev/null; }
rec_ok() { grep -q '^ModuleLoadFinished [1-9]' "$WORK/$1.rec" 2>/dev/null; }
show() { echo "rc=$(cat "$WORK/$1.rc") secs=$(cat "$WORK/$1.secs")"; tail -n 5 "$WORK/$1.err"; tail -n 15 "$WORK/$1.log" 2>/dev/null; }
recorder_child() { printf '[child rec]\npath = %s/librecorder.so\nclsid = %s\n' "$FAKE" "$REC"; }

# ---- loader loops -------------------------------------------------------------------------
loop_case() { # loop_case TAG "description" "expected log text" [norec]
    local tag=$1 d=$2 want=$3 norec=${4:-}
    expect "$d: the app runs" "show $tag" ran "$tag"
    expect "$d: one clear log line" "show $tag" test "$(nlines "$tag" "$want")" = 1
    # (the fake chaining loader does not forward callbacks: behind it only loading is checked)
    [ -z "$norec" ] && expect "$d: the other child works" "show $tag" rec_ok "$tag"
    expect "$d: clrmux starts once and keeps its children" "show $tag" \
        test "$(nlines "$tag" "clrmux starting")" = 1 -a "$(nlines "$tag" "child profiler(s) active")" = 1
}

{ printf '[child self]\npath = %s\nclsid = %s\n' "$LIB" "$CLSID"; recorder_child; } >"$WORK/self.conf"
under self "$WORK/self.conf"
loop_case self "loader.conf listing libclrmux.so itself" "is a build of clrmux"

mkdir -p "$WORK/other" && cp "$LIB" "$WORK/other/libclrmux.so"
{ printf '[child other]\npath = %s/other/libclrmux.so\nclsid = %s\n' "$WORK" "$CLSID"; recorder_child; } >"$WORK/other.conf"
under other "$WORK/other.conf"
loop_case other "loader.conf listing another clrmux build" "is a build of clrmux"

# two copies, each with a loader.conf beside it that lists the other (no CLRMUX_CONFIG)
mkdir -p "$WORK/a" "$WORK/b" && cp "$LIB" "$WORK/a/libclrmux.so" && cp "$LIB" "$WORK/b/libclrmux.so"
{ printf '[child b]\npath = %s/b/libclrmux.so\nclsid = %s\n' "$WORK" "$CLSID"; recorder_child; } >"$WORK/a/loader.conf"
{ printf '[child a]\npath = %s/a/libclrmux.so\nclsid = %s\n' "$WORK" "$CLSID"; recorder_child; } >"$WORK/b/loader.conf"
run mutual CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$WORK/a/libclrmux.so" \
    CLRMUX_LOG_FILE="$WORK/mutual.log" RECORDER_MASK_C0000001=0x4 RECORDER_OUT_C0000001="$WORK/mutual.rec"
loop_case mutual "two clrmux copies listing each other" "is a build of clrmux"

# a chaining loader child that loads clrmux again
{ printf '[child chain]\npath = %s/libchain.so\nclsid = %s\n' "$FAKE" "$CHAIN"; recorder_child; } >"$WORK/chain.conf"
under chain "$WORK/chain.conf" CHAIN_PATH_C0000002="$LIB" RECORDER_OUT_C0000002="$WORK/chain.chained"
loop_case chain "a chaining loader child that loads clrmux" "loader loop: clrmux was loaded as a child profiler"
expect "a chaining loader child that loads clrmux: the nested clrmux answers CORPROF_E_PROFILER_CANCEL_ACTIVATION" \
    "cat $WORK/chain.chained" grep -q '^# chained hr=0x80131375' "$WORK/chain.chained"

# a chaining loader child that loads another clrmux build (found among the loaded objects)
under chain3 "$WORK/chain.conf" CHAIN_PATH_C0000002="$WORK/other/libclrmux.so" RECORDER_OUT_C0000002="$WORK/chain3.chained"
loop_case chain3 "a chaining loader child that loads another clrmux build" "loader loop: clrmux was loaded as a child profiler"
expect "a chaining loader child that loads another clrmux build: the nested clrmux names the busy one" "show chain3" \
    logged chain3 "while clrmux ($LIB) is loading its children"

# a chaining loader in the runtime's slot loads clrmux, whose loader.conf lists the loader again
run chain2 CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CHAIN" CORECLR_PROFILER_PATH="$FAKE/libchain.so" \
    CHAIN_PATH="$LIB" CLRMUX_CONFIG="$WORK/chain.conf" CLRMUX_LOG_FILE="$WORK/chain2.log" \
    RECORDER_MASK_C0000001=0x4 RECORDER_OUT_C0000001="$WORK/chain2.rec"
loop_case chain2 "a chaining loader that loads clrmux, which lists the loader" "loader loop: clrmux was loaded as a child profiler" norec
expect "a chaining loader that loads clrmux, which lists the loader: the other child loads" "show chain2" \
    logged chain2 "child 'rec': loaded ("

# ---- special and oversized configuration files ---------------------------------------------
special_case() { # special_case TAG FILE "description" "expected log text"
    local tag=$1 file=$2 d=$3 want=$4
    under "$tag" "$file"
    expect "CLRMUX_CONFIG naming $d: the app runs, unprofiled, within seconds" "show $tag" ran "$tag"
    expect "CLRMUX_CONFIG naming $d: the refusal is logged" "show $tag" logged "$tag" "$want"
}
mkfifo "$WORK/fifo.conf"
special_case fifo "$WORK/fifo.conf" "a FIFO" "is a FIFO, not a regular file; not read"
special_case zero /dev/zero "/dev/zero" "is a character device, not a regular file; not read"
special_case urandom /dev/urandom "/dev/urandom" "is a character device, not a regular file; not read"
mkdir -p "$WORK/confdir"
special_case dir "$WORK/confdir" "a directory" "is a directory, not a regular file; not read"
{ recorder_child; head -c $((5 << 20)) /dev/zero | tr '\0' '\n'; } >"$WORK/big.conf"
special_case big "$WORK/big.conf" "a 5 MiB file" "more than the 4194304 bytes a configuration may have"

# ---- amplification: ~4 MiB of unknown keys under a builtin child -----------------------------
python3 - "$WORK/amp.conf" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("[child tracer]\nbuiltin = tracer\ntrace = hello!Program::Main\n")
    i = 0
    while f.tell() < (4 << 20) - 4096:
        f.write("key%07d = %s\n" % (i, "v" * 60)); i += 1
    f.write("[child rec]\npath = %s/librecorder.so\nclsid = %s\n" % (sys.argv[1].rsplit("/", 1)[0], "{C0000001-0000-0000-0000-000000000001}"))
EOF
sed -i "s|^path = .*/librecorder.so|path = $FAKE/librecorder.so|" "$WORK/amp.conf"
under amp "$WORK/amp.conf"
expect "4 MiB of unknown keys: the app runs" "show amp" ran amp
expect "4 MiB of unknown keys: start-up stays short (< 20 s)" "show amp" test "$(cat "$WORK/amp.secs")" -lt 20
expect "4 MiB of unknown keys: the log stays short (< 100 lines)" "show amp" test "$(wc -l <"$WORK/amp.log")" -lt 100
expect "4 MiB of unknown keys: the key limit is logged once" "show amp" test "$(nlines amp "more than 1024 keys")" = 1
expect "4 MiB of unknown keys: the other child works" "show amp" rec_ok amp

# ---- the log file is never followed through a symlink ----------------------------------------
recorder_child >"$WORK/log.conf"
echo precious >"$WORK/victim"
ln -s "$WORK/victim" "$WORK/link.log"
under logsym "$WORK/log.conf" CLRMUX_LOG_FILE="$WORK/link.log"
expect "symlinked log file: the app runs" "show logsym" ran logsym
expect "symlinked log file: its target is untouched" "cat $WORK/victim" test "$(cat "$WORK/victim")" = precious
expect "symlinked log file: refused on stderr" "cat $WORK/logsym.err" grep -q "cannot open log file .*a symlink" "$WORK/logsym.err"
printf '[loader]\nlog_file = planted.log\n' >"$WORK/logdir.conf" && recorder_child >>"$WORK/logdir.conf"
ln -s "$WORK/victim" "$WORK/planted.log"
run logcfg CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/logdir.conf"
expect "log_file through a planted symlink: target untouched, app runs" "show logcfg; cat $WORK/victim" \
    test "$(cat "$WORK/victim")" = precious -a "$(cat "$WORK/logcfg.rc")" = 0
under logmode "$WORK/log.conf"
expect "a new log file is created with mode 0640" "ls -l $WORK/logmode.log" test "$(stat -c %a "$WORK/logmode.log")" = 640

# ---- who may put code in the process -------------------------------------------------------
perm_case() { # perm_case TAG CHILD_LIB_PATH "description" "expected log text" [extra [loader] lines]
    local tag=$1 lib=$2 d=$3 want=$4 extra=${5:-}
    printf '[loader]\n%s\n[child bad]\npath = %s\nclsid = {C0000003-0000-0000-0000-000000000003}\n' "$extra" "$lib" >"$WORK/$tag.conf"
    recorder_child >>"$WORK/$tag.conf"
    under "$tag" "$WORK/$tag.conf"
    expect "$d: the app runs" "show $tag" ran "$tag"
    expect "$d: logged" "show $tag" logged "$tag" "$want"
    expect "$d: the other child works" "show $tag" rec_ok "$tag"
}
mkdir -p "$WORK/p"
cp "$FAKE/librecorder.so" "$WORK/p/ww.so" && chmod 666 "$WORK/p/ww.so"
perm_case ww "$WORK/p/ww.so" "a world-writable child library is refused" "ww.so is world-writable (mode 0666)"
expect "a world-writable child library is refused: not loaded" "show ww" test "$(nlines ww "child 'bad': loaded")" = 0
perm_case wwok "$WORK/p/ww.so" "allow_insecure_paths = true loads it with a warning" "loaded anyway (allow_insecure_paths = true)" \
    "allow_insecure_paths = true"
expect "allow_insecure_paths = true: the child is loaded" "show wwok" logged wwok "child 'bad': loaded"
mkdir -p "$WORK/wwdir" && cp "$FAKE/librecorder.so" "$WORK/wwdir/lib.so" && chmod 777 "$WORK/wwdir"
perm_case wwdir "$WORK/wwdir/lib.so" "a child library in a world-writable folder is refused" "wwdir is world-writable (mode 0777)"
mkdir -p "$WORK/gw" && cp "$FAKE/librecorder.so" "$WORK/gw/lib.so" && chmod 664 "$WORK/gw/lib.so"
perm_case gw "$WORK/gw/lib.so" "a group-writable child library is refused" "lib.so is group-writable (mode 0664)"
ln -s "$FAKE/librecorder.so" "$WORK/p/link.so"
perm_case real "$WORK/p/link.so" "the resolved real path of a loaded library is logged" "child 'bad': loaded ($FAKE/librecorder.so,"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    cp "$FAKE/librecorder.so" "$WORK/p/other.so" && chown nobody "$WORK/p/other.so"
    perm_case owner "$WORK/p/other.so" "a child library owned by another user is refused" "other.so is owned by uid $(id -u nobody)"
    # a folder in /tmp made by another user, and a child path that is a symlink into it
    evil=$(mktemp -d /tmp/clrmux-evil.XXXXXX) && cp "$FAKE/librecorder.so" "$evil/lib.so" && chown -R nobody "$evil"
    ln -s "$evil/lib.so" "$WORK/p/tmp.so"
    perm_case tmplink "$WORK/p/tmp.so" "a child path that is a symlink into another user's /tmp folder is refused" "is owned by uid $(id -u nobody)"
    rm -rf "$evil"
    recorder_child >"$WORK/confowner.conf" && chown nobody "$WORK/confowner.conf"
    under confowner "$WORK/confowner.conf"
    expect "a loader.conf owned by another user is refused: the app runs unprofiled" "show confowner" ran confowner
    expect "a loader.conf owned by another user is refused: logged" "show confowner" logged confowner "refused: $WORK/confowner.conf is owned by uid"
    expect "a loader.conf owned by another user is refused: no child loaded" "show confowner" test "$(nlines confowner "loaded (")" = 0
else
    echo "skip - ownership checks need root and a 'nobody' user"
fi
recorder_child >"$WORK/confww.conf" && chmod 666 "$WORK/confww.conf"
under confww "$WORK/confww.conf"
expect "a world-writable loader.conf is refused: logged, app runs" "show confww" logged confww "confww.conf is world-writable (mode 0666)"
expect "a world-writable loader.conf is refused: no child loaded" "show confww" test "$(nlines confww "loaded (")" = 0
{ printf '[loader]\nallow_insecure_paths = true\n'; recorder_child; } >"$WORK/confok.conf" && chmod 666 "$WORK/confok.conf"
under confok "$WORK/confok.conf"
expect "a world-writable loader.conf with allow_insecure_paths = true is used, with a warning" "show confok" \
    grep -q "WARN .*world-writable.*used anyway (allow_insecure_paths = true)" "$WORK/confok.log"
expect "a world-writable loader.conf with allow_insecure_paths = true: the child works" "show confok" rec_ok confok

clr_done
