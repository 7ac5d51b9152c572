# Shared by the real-runtime suites (tests/clr/*.sh): runs a suite once per .NET runtime and
# gives it the `dotnet` command of that runtime. Source it, then call clr_suite:
#
#   . "$(dirname "$0")/lib.sh"
#   clr_suite tracer "$@"          # returns only inside a per-runtime run
#   ...
#   env VAR=VALUE "${DOTNET[@]}" build/clr/APP/APP.dll      # run an app on this run's runtime
#   ok "description"; bad "description" "details"; check "description" command...
#   if [ "$CLR_RT" -lt 10 ]; then ...; fi                   # expectations that differ by runtime
#   "$CLR_APPS/sample/sample.dll"      # the apps built for this runtime (build/clr, or
#                                      # build/clr31 for .NET Core 3.1: sample only)
#   clr_done                                               # the closing line; exit status
#
# clr_suite NAME [--core31]: in the first call (no CLRMUX_TEST_RUNTIME in the environment) it checks for
# dotnet (a loud skip, or a failure under CI=true), gets the runtimes of
# CLRMUX_TEST_RUNTIMES (default "8 9 10"; `3` = .NET Core 3.1) through
# scripts/dotnet-runtimes.sh (a NuGet restore of runtime packs when the SDK lacks them: a
# failure is loud, and fails the suite under CI), builds the C# apps, runs the script again
# once per runtime with CLRMUX_TEST_RUNTIME=<major>, prints
# "NAME: N passed, N failed" summed over the runtimes and exits. --core31: the suite also runs
# on .NET Core 3.1 (with the apps of build/clr31), by default too; a suite without it that is
# asked for 3 says so in a line and runs on the others. In a per-runtime run it sets
#   DOTNET   array: the command that runs an app on that runtime (dotnet exec --fx-version V)
#   CLR_RT   the major version (8, 9, 10; 3 for 3.1)
#   CLR_RTV  the exact version (8.0.33)
# and ok/bad/check prefix every line with "[.NET V]".

export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
PASS=0
FAIL=0
CLR_SUITE=

_clr_banner() {
    echo "##########################################################################"
    echo "## $1"
    echo "##########################################################################"
}

clr_suite() {
    CLR_SUITE=$1
    shift
    local core31=0
    if [ "${1:-}" = "--core31" ]; then
        core31=1
        shift
    fi
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    if [ -n "${CLRMUX_TEST_RUNTIME:-}" ]; then
        CLR_RT=$CLRMUX_TEST_RUNTIME
        CLR_RTV=$CLRMUX_TEST_FX_VERSION
        DOTNET=("$CLRMUX_TEST_DOTNET" exec --fx-version "$CLR_RTV")
        CLR_APPS=build/clr
        [ "$CLR_RT" = 3 ] && CLR_APPS=build/clr31
        CLR_APPS="$root/$CLR_APPS"
        return 0
    fi
    if ! command -v dotnet >/dev/null 2>&1; then
        _clr_banner "dotnet is not on PATH: the real-runtime tests ($CLR_SUITE) did NOT run"
        if [ "${CI:-}" = "true" ]; then
            echo "CI=true: a missing dotnet is an error"
            exit 1
        fi
        exit 0
    fi
    local default="8 9 10"
    [ $core31 = 1 ] && default="3 8 9 10"
    local want=${CLRMUX_TEST_RUNTIMES:-$default} lines line major ver dn m kept=""
    for m in $want; do
        if [ "$m" = 3 ] && [ $core31 = 0 ]; then
            echo "skip - [.NET Core 3.1] $CLR_SUITE does not run on .NET Core 3.1"
        else
            kept+=" $m"
        fi
    done
    want=${kept# }
    # shellcheck disable=SC2086
    if ! lines=$("$root/scripts/dotnet-runtimes.sh" $want); then
        _clr_banner "the .NET runtimes '$want' could not be had (NuGet): $CLR_SUITE did NOT run on them"
        [ "${CI:-}" = "true" ] && { echo "$CLR_SUITE: 0 passed, 1 failed"; exit 1; }
        # outside CI, run on what the SDK's install has
        # shellcheck disable=SC2086
        lines=$("$root/scripts/dotnet-runtimes.sh" $(dotnet --list-runtimes | awk '$1 == "Microsoft.NETCore.App" {split($2, v, "."); print v[1]}' | sort -un)) || exit 1
    fi
    local build_opt=""
    grep -q '^3 ' <<<"$lines" && build_opt=--core31
    "$root/tests/clr/build-apps.sh" $build_opt >/dev/null || { echo "building the C# test apps failed"; echo "$CLR_SUITE: 0 passed, 1 failed"; exit 1; }
    local total_pass=0 total_fail=0 res summary=""
    res=$(mktemp "${TMPDIR:-/tmp}/clrmux-suite.XXXXXX")
    while read -r major ver dn; do
        [ -n "$major" ] || continue
        : >"$res"
        CLRMUX_TEST_RUNTIME=$major CLRMUX_TEST_FX_VERSION=$ver CLRMUX_TEST_DOTNET=$dn CLRMUX_TEST_RESULT=$res \
            bash "$0" "$@" </dev/null
        local p f
        read -r p f <"$res" || { p=0; f=1; echo "FAIL - [.NET $ver] $CLR_SUITE ended before its closing line"; }
        total_pass=$((total_pass + p))
        total_fail=$((total_fail + f))
        summary+=" .NET $ver: $p/$((p + f));"
    done <<<"$lines"
    rm -f "$res"
    echo
    echo "($CLR_SUITE passed per runtime:${summary%;})"
    echo "$CLR_SUITE: $total_pass passed, $total_fail failed"
    [ "$total_fail" -eq 0 ]
    exit
}

ok() { PASS=$((PASS + 1)); echo "ok   - [.NET $CLR_RTV] $1"; }
bad() {
    FAIL=$((FAIL + 1))
    echo "FAIL - [.NET $CLR_RTV] $1"
    [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -60
    return 0
}
check() { # check "description" command...
    local d=$1
    shift
    if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi
}

# clr_done: the per-runtime closing line; exits 0 when nothing failed
clr_done() {
    echo "$CLR_SUITE on .NET $CLR_RTV: $PASS passed, $FAIL failed"
    [ -n "${CLRMUX_TEST_RESULT:-}" ] && echo "$PASS $FAIL" >"$CLRMUX_TEST_RESULT"
    [ "$FAIL" -eq 0 ]
    exit
}
