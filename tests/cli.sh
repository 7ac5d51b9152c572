#!/usr/bin/env bash
# The `clrmux` launcher (build/clrmux): `check` reports every problem of a loader.conf with
# file:line and fails on errors; `run` writes a loader.conf from its options (or takes
# --config), runs the command under libclrmux.so, returns its exit status and says where the
# spans, profiles and log went. Prints one line per check and "N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
unset CLRMUX_CONFIG CLRMUX_LOG_FILE CLRMUX_LOG_LEVEL
CLRMUX="$ROOT/build/clrmux"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -40; }
# expect_rc DESC RC OUTPUT-VAR-CONTENT... : rc and output both checked by the caller
has() { grep -qF -- "$2" <<<"$1"; }

# ---- usage ----------------------------------------------------------------------------
out=$("$CLRMUX" 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "clrmux run [--config FILE]" && ok "no arguments: usage, exit 2" || bad "no arguments (rc=$rc)" "$out"
out=$("$CLRMUX" --help 2>&1); rc=$?
[ $rc = 0 ] && has "$out" "clrmux check [--config FILE]" && ok "--help: usage, exit 0" || bad "--help (rc=$rc)" "$out"
out=$("$CLRMUX" frobnicate 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "unknown command 'frobnicate'" && ok "unknown command: exit 2" || bad "unknown command (rc=$rc)" "$out"

# ---- check ----------------------------------------------------------------------------
out=$("$CLRMUX" check --config loader.conf.example 2>&1); rc=$?
[ $rc = 0 ] && has "$out" "loader.conf.example: 0 errors, 0 warnings, 4 children would load" \
    && ok "check loader.conf.example: 0 errors, 4 children" || bad "check loader.conf.example (rc=$rc)" "$out"

printf 'not an ELF file\n' >"$WORK/notalib.so"
cat >"$WORK/bad.conf" <<EOF
[loader]
log_level = loud
[child a]
path = /nonexistent/libx.so
clsid = {12345678-1234-1234-1234-123456789ABC}
[child b]
path = $ROOT/build/fake/librecorder.so
clsid = nope
[child t]
builtin = tracer
trace = bad target
buffer_spans = x
colour = red
[child p]
builtin = profiler
period_s = -1
this is junk
[child c]
path = notalib.so
clsid = {12345678-1234-1234-1234-123456789ABC}
[child d]
path = $ROOT/build/fake/libnoexport.so
clsid = {12345678-1234-1234-1234-123456789ABC}
[child e]
builtin = tracer
trace = x!Y::Z
[mystery]
[child ok]
path = $ROOT/build/fake/librecorder.so
clsid = {A0000001-0000-0000-0000-000000000001}
EOF
out=$("$CLRMUX" check --config "$WORK/bad.conf" 2>&1); rc=$?
[ $rc = 1 ] && ok "check of a config with errors: exit 1" || bad "check of a bad config: exit $rc, expected 1" "$out"
B="$WORK/bad.conf"
for want in "$B:2: error: log_level 'loud'" \
            "$B:8: error: [child b]: clsid 'nope' is not a GUID" \
            "$B:17: error: malformed line" \
            "$B:27: warning: unknown section [mystery]" \
            "$B:3: error: [child a]: /nonexistent/libx.so: No such file or directory" \
            "$B:11: error: [child t]: bad trace target 'bad target'" \
            "$B:12: error: [child t]: buffer_spans = 'x' is not a number" \
            "$B:13: warning: [child t]: unknown key 'colour'" \
            "$B:16: error: child 'p': period_s '-1' is not a number of seconds" \
            "$B:18: error: [child c]: cannot load $WORK/notalib.so as a shared library" \
            "$B:21: error: [child d]: $ROOT/build/fake/libnoexport.so exports no DllGetClassObject" \
            "$B:24: error: child 'e': a tracer is already loaded (child 't'); only one tracer per process" \
            "$B:28: note: [child ok]: $ROOT/build/fake/librecorder.so answers DllGetClassObject" \
            "$B: 10 errors, 2 warnings, 3 children would load"; do
    has "$out" "$want" && ok "check says: ${want#"$WORK/"}" || bad "check does not say: $want" "$out"
done
# a tracer with no target records the process's Activities (its agent); with those off too, nothing
printf '[child t]\nbuiltin = tracer\ninstrument = none\nactivity_sources = none\n' >"$WORK/idle.conf"
out=$("$CLRMUX" check --config "$WORK/idle.conf" 2>&1)
has "$out" "warning: child 't': no valid 'trace =' target and no Activity recorded; the tracer records nothing" \
    && ok "check warns of a tracer that records nothing (no target, instrument = none, activity_sources = none)" \
    || bad "check warns of a tracer that records nothing" "$out"
# the library's own rules for child libraries: ownership and permissions, loader loops
mkdir -p "$WORK/open" && chmod 0777 "$WORK/open" && cp build/fake/librecorder.so "$WORK/open/"
cat >"$WORK/rules.conf" <<EOF
[child open]
path = $WORK/open/librecorder.so
clsid = {A0000001-0000-0000-0000-000000000001}
[child self]
path = $ROOT/build/libclrmux.so
clsid = {A0000001-0000-0000-0000-000000000001}
EOF
out=$("$CLRMUX" check --config "$WORK/rules.conf" 2>&1); rc=$?
[ $rc = 1 ] && has "$out" "rules.conf:1: error: [child open]: refused to load $WORK/open/librecorder.so: $WORK/open is" \
    && has "$out" "rules.conf:4: error: [child self]: $ROOT/build/libclrmux.so is a build of clrmux" \
    && ok "check applies the library's rules: a child in a world-writable folder, clrmux as its own child" \
    || bad "check of trust and loop rules (rc=$rc)" "$out"
out=$("$CLRMUX" check --config "$WORK/none.conf" 2>&1); rc=$?
[ $rc = 1 ] && has "$out" "$WORK/none.conf: warning: cannot read $WORK/none.conf: No such file or directory" \
    && ok "check of a missing file: says so, exit 1" || bad "check of a missing file (rc=$rc)" "$out"
out=$(CLRMUX_CONFIG="$ROOT/loader.conf.example" "$CLRMUX" check -q 2>&1); rc=$?
[ $rc = 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && has "$out" "$ROOT/loader.conf.example: 0 errors" \
    && ok "check without --config reads \$CLRMUX_CONFIG; -q prints only the summary" || bad "check with CLRMUX_CONFIG -q (rc=$rc)" "$out"

# ---- run: arguments and exit status -------------------------------------------------------
out=$("$CLRMUX" run --profile 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "no command given" && ok "run without a command: exit 2" || bad "run without a command (rc=$rc)" "$out"
out=$("$CLRMUX" run --config loader.conf.example --profile -- true 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "use one or the other" && ok "run --config with --profile: refused, exit 2" || bad "run --config --profile (rc=$rc)" "$out"
out=$("$CLRMUX" run --child nothing -- true 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "expected PATH=CLSID" && ok "run --child without =CLSID: exit 2" || bad "run --child bad (rc=$rc)" "$out"
out=$(cd "$WORK" && "$CLRMUX" run --output-dir o1 -- sh -c 'exit 7' 2>&1); rc=$?
[ $rc = 7 ] && has "$out" "sh exited with status 7" && ok "run returns the command's exit status (7)" || bad "run exit status (rc=$rc)" "$out"
out=$(cd "$WORK" && "$CLRMUX" run --output-dir o1 -- sh -c 'kill -TERM $$' 2>&1); rc=$?
[ $rc = 143 ] && has "$out" "killed by signal 15" && ok "run: a command killed by SIGTERM gives 143" || bad "run signal status (rc=$rc)" "$out"
out=$(cd "$WORK" && "$CLRMUX" run --output-dir o1 -- /nonexistent/cmd 2>&1); rc=$?
[ $rc = 127 ] && has "$out" "cannot run /nonexistent/cmd" && ok "run: a command that does not exist gives 127" || bad "run missing command (rc=$rc)" "$out"
out=$(cd "$WORK" && "$CLRMUX" run --output-dir o2 -- sh -c 'echo "$CORECLR_ENABLE_PROFILING $CORECLR_PROFILER $CORECLR_PROFILER_PATH $CORECLR_PROFILER_PATH_64 $CLRMUX_CONFIG"' 2>/dev/null)
[ "$out" = "1 {EE712634-5BBB-4C28-8E6A-45180A97AD0B} $ROOT/build/libclrmux.so $ROOT/build/libclrmux.so $WORK/o2/loader.conf" ] \
    && ok "run sets CORECLR_ENABLE_PROFILING, CORECLR_PROFILER, CORECLR_PROFILER_PATH(_64), CLRMUX_CONFIG" \
    || bad "run's environment" "$out"
mkdir -p "$WORK/shared" && chmod 0777 "$WORK/shared"
out=$("$CLRMUX" run --output-dir "$WORK/shared" -- true 2>&1); rc=$?
[ $rc = 2 ] && has "$out" "is not a folder of yours that only you can write" && [ ! -e "$WORK/shared/loader.conf" ] \
    && ok "run refuses to write its loader.conf into a folder others can write" || bad "run into a shared folder (rc=$rc)" "$out"
grep -q '^builtin = profiler' "$WORK/o2/loader.conf" && ! grep -q tracer "$WORK/o2/loader.conf" \
    && ok "run without --trace/--child/--profile writes a loader.conf with the profiler" || bad "default loader.conf" "$(cat "$WORK/o2/loader.conf")"

# ---- run: a .NET app ----------------------------------------------------------------------
if ! command -v dotnet >/dev/null 2>&1; then
    echo "## dotnet is not on PATH: clrmux run is not tried on a .NET app ##"
    [ "${CI:-}" = "true" ] && { echo "CI=true: a missing dotnet is an error"; exit 1; }
else
    tests/clr/build-apps.sh >/dev/null || { echo "building the C# test apps failed"; exit 1; }
    SAMPLE="$ROOT/build/clr/sample/sample.dll"
    mkdir -p "$WORK/children" && cp build/fake/librecorder.so "$WORK/children/"
    out=$(cd "$WORK" && RECORDER_MASK_A0000001=0x4 RECORDER_OUT_A0000001="$WORK/rec.txt" \
        "$CLRMUX" run --trace 'sample!Sample.Work::Crunch' --trace 'samplelib!SampleLib.Calculator::Gcd' --profile \
        --child "children/librecorder.so={A0000001-0000-0000-0000-000000000001}" -- dotnet "$SAMPLE" 2>&1)
    rc=$?
    O="$WORK/clrmux-output"
    [ $rc = 0 ] && ok "run --trace x2 --profile --child -- dotnet sample.dll: exit 0" || bad "run on sample (rc=$rc)" "$out"
    out2=$("$CLRMUX" check --config "$O/loader.conf" 2>&1); rc=$?
    [ $rc = 0 ] && has "$out2" "0 errors, 0 warnings, 3 children would load" && ok "the loader.conf run wrote passes check (3 children)" \
        || bad "check of run's loader.conf (rc=$rc)" "$out2"
    spans=$(ls "$O"/traces-*.otlp.jsonl 2>/dev/null | head -1)
    [ -n "$spans" ] && grep -q '"name":"Sample.Work.Crunch"' "$spans" && grep -q '"name":"SampleLib.Calculator.Gcd"' "$spans" \
        && ok "spans of both --trace targets in $(basename "$spans")" || bad "spans of run" "$out"
    awk '$1 == "ModuleLoadFinished" && $2 > 0 {f=1} END {exit !f}' "$WORK/rec.txt" 2>/dev/null \
        && ok "the --child recorder received ModuleLoadFinished" || bad "--child recorder" "$(cat "$WORK/rec.txt" 2>&1)"
    prof=$(ls "$O"/profiles/*.pb.gz 2>/dev/null | head -1)
    [ -n "$prof" ] && ok "--profile wrote $(basename "$prof")" || bad "--profile wrote no profile" "$out"
    has "$out" "clrmux:   spans     $spans" && has "$out" "clrmux:   profile   $prof" && has "$out" "clrmux:   log       $O/clrmux-" \
        && ok "run ends by saying where the spans, the profile and the log went" || bad "run's summary" "$out"
    # --config: the user's file, problems reported, the app runs anyway
    cat >"$WORK/user.conf" <<EOF
[loader]
log_file = user-%p.log
[child tracer]
builtin = tracer
output = user-spans-%p.jsonl
trace = sample!Sample.Work::Crunch
trace = oops
EOF
    out=$(cd "$WORK" && "$CLRMUX" run --config user.conf -- dotnet "$SAMPLE" 2>&1); rc=$?
    [ $rc = 0 ] && has "$out" "$WORK/user.conf:7: error: [child tracer]: bad trace target 'oops'" \
        && has "$out" "has 1 error (above); the command runs anyway" && has "$out" "clrmux:   spans     $WORK/user-spans-" \
        && has "$out" "clrmux:   log       $WORK/user-" \
        && ok "run --config: problems with file:line, the app runs, outputs from the config listed" \
        || bad "run --config (rc=$rc)" "$out"
fi

echo "cli: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
