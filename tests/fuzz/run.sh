#!/usr/bin/env bash
# Runs each libFuzzer target (build/fuzz/fuzz_<name>) for SECONDS seconds from its seed
# corpus (tests/fuzz/corpus/<name>, read-only) plus a working corpus in
# build/fuzz/corpus/<name> that grows between runs. Crashes go to build/fuzz/artifacts/.
#
#   tests/fuzz/run.sh SECONDS [name...]     (default: every target)
#
# Prints one line per target: executions, coverage (libFuzzer's cov: edges, ft: features)
# and corpus size; exits non-zero when a target crashed, leaked or timed out.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
SECS=${1:?usage: tests/fuzz/run.sh SECONDS [name...]}
shift
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=(config target il utf16 framename events mdtables xspan ctl)
mkdir -p build/fuzz/artifacts
status=0
for n in "${NAMES[@]}"; do
    bin=build/fuzz/fuzz_$n
    work=build/fuzz/corpus/$n
    mkdir -p "$work"
    log=build/fuzz/$n.log
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
        "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix=build/fuzz/artifacts/"$n"- "$work" "tests/fuzz/corpus/$n" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
    if [ $rc -eq 0 ]; then
        printf 'ok   - fuzz_%-10s %4ss: %9s execs, cov %5s, ft %6s, corpus %s\n' "$n" "$SECS" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
    else
        status=1
        printf 'FAIL - fuzz_%s (exit %d): see %s\n' "$n" "$rc" "$log"
        grep -E 'ERROR|SUMMARY|==[0-9]+==|Test unit written|runtime error' "$log" | head -15 | sed 's/^/       /'
    fi
done
exit $status
