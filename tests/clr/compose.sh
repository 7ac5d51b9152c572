#!/usr/bin/env bash
# Real-runtime tests of composition: two or three IL-rewriting children
# (build/fake/libilrewriter.so, fake_profilers/ilrewriter.c) instrument the same methods of
# tests/clr/apps/compose together with the built-in tracer, at JIT time or through ReJIT,
# requesting, re-requesting and reverting at known phases of the app. Every case runs with
# tiered compilation on and tier-up forced (DOTNET_TC_CallCountingDelayMs=0). For every case:
# each child's counter equals the calls of its targets while its rewrite was in force (its
# instrumentation ran exactly once per call), the tracer's spans equal the calls, the app's
# stdout equals its output without a profiler, no InvalidProgramException. One case traces
# Compute through a bytecode integration (issue 23) instead: its spans carry their attribute.
#
# Usage: tests/clr/compose.sh  (prints one line per check and "compose: N passed, N failed")
# Runs once per .NET runtime (tests/clr/lib.sh: 8, 9 and 10 by default, CLRMUX_TEST_RUNTIMES).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite compose "$@"

LIB="$ROOT/build/libclrmux.so"
ILRW="$ROOT/build/fake/libilrewriter.so"
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-compose.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
[ -f "$LIB" ] && [ -f "$ILRW" ] || { bad "build/ is incomplete (run make all)"; clr_done; }

PHASES=3
declare -A CALLS=([Compute]=200 [Leaf]=400 [Small]=200) # per phase, from Program.cs
declare -A CLSIDS=([A]="{A0000001-0000-0000-0000-000000000001}" [B]="{B0000002-0000-0000-0000-000000000002}"
    [C]="{C0000003-0000-0000-0000-000000000003}")
declare -A TAGS=([A]=A0000001 [B]=B0000002 [C]=C0000003)

# ---- baseline ----------------------------------------------------------------------------
"${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >"$WORK/base.out" 2>"$WORK/base.err"
if [ $? = 0 ] && [ "$(tail -n 1 "$WORK/base.out")" = done ]; then ok "compose app runs without a profiler"
else bad "compose app runs without a profiler" "$(tail -n 5 "$WORK/base.err")"; fi

# expected CHILD-SPEC: the calls of the child's targets in the phases its rewrite was in force
# CHILD-SPEC = LETTER:MODE:TARGETS:REJIT_AT:REVERT_AT[:PARAMS] (REVERT_AT -1 = never; PARAMS:
# the GetReJITParameters a ReJIT child gets for its first target, 1 (its one request) unless
# stated: an owner is asked again only when an owner before it in file order left, so that its
# input changed)
expected() {
    local IFS=: letter mode targets at revert params
    read -r letter mode targets at revert params <<<"$1"
    local from=$at to=$PHASES n=0 t p
    [ "${mode%-every}" = jit ] && from=0
    [ "$revert" -ge 0 ] && to=$revert
    for ((p = from; p < to; p++)); do
        IFS=, read -ra ts <<<"$targets"
        for t in "${ts[@]}"; do n=$((n + CALLS[$t])); done
    done
    echo "$n"
}
field() { awk -v k="$2" -v n="$3" '$1==k && $2==n {print $3}' "$1"; }

# run_case NAME TRACER(0|1) CHILD-SPEC...: one real process, then the checks
run_case() {
    local name=$1 tracer=$2
    shift 2
    local conf="$WORK/$name.conf" envs=() spec letter mode targets at revert tag
    mkdir -p "$WORK/$name.sync"
    printf '[loader]\nlog_level = debug\n' >"$conf"
    for spec in "$@"; do
        IFS=: read -r letter mode targets at revert params <<<"$spec"
        tag=${TAGS[$letter]}
        printf '[child %s]\npath = %s\nclsid = %s\n' "$letter" "$ILRW" "${CLSIDS[$letter]}" >>"$conf"
        [ -n "${NOJIT:-}" ] && envs+=("ILRW_JIT_EVENTS_$tag=0")
        envs+=("ILRW_MODE_$tag=$mode" "ILRW_TARGETS_$tag=$targets" "ILRW_COUNTER_$tag=$letter" "ILRW_REJIT_AT_$tag=$at"
            "ILRW_REVERT_AT_$tag=$revert" "ILRW_OUT_$tag=$WORK/$name.$letter")
    done
    if [ "$tracer" = 1 ] && [ -n "${INTEG:-}" ]; then
        # Compute through a bytecode integration (docs/integrations.md) instead of `trace =`
        printf '[integration compose]\ntarget = compose!Compose.Work::Compute\nkind = client\nname = Compose.Work.Compute\nattribute = compose.x = arg0\n' \
            >"$WORK/$name.integrations"
        printf '[child tracer]\nbuiltin = tracer\noutput = %s\ninstrument = none\nintegrations = %s\n' \
            "$WORK/$name.spans" "$WORK/$name.integrations" >>"$conf"
    elif [ "$tracer" = 1 ]; then
        printf '[child tracer]\nbuiltin = tracer\noutput = %s\ntrace = compose!Compose.Work::Compute\n' \
            "$WORK/$name.spans" >>"$conf"
    fi
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$conf" \
        CLRMUX_LOG_FILE="$WORK/$name.log" DOTNET_TieredCompilation=1 DOTNET_TC_CallCountingDelayMs=0 \
        ILRW_SYNC_DIR="$WORK/$name.sync" COMPOSE_ACKS=$# "${envs[@]}" \
        "${DOTNET[@]}" "$CLR_APPS/compose/compose.dll" >"$WORK/$name.out" 2>"$WORK/$name.err"
    local rc=$? problems=""
    [ $rc = 0 ] || problems+="exit code $rc; "
    cmp -s "$WORK/base.out" "$WORK/$name.out" || problems+="stdout differs; "
    grep -q InvalidProgramException "$WORK/$name.out" "$WORK/$name.err" && problems+="InvalidProgramException; "
    grep -q "not acknowledged" "$WORK/$name.err" && problems+="a phase was not acknowledged; "
    local saw=""
    for spec in "$@"; do
        IFS=: read -r letter mode targets at revert params <<<"$spec"
        local want got
        want=$(expected "$spec")
        got=$(awk -v c="$letter" '$1=="counter" && $2==c {print $3}' "$WORK/$name.err")
        [ "$got" = "$want" ] || problems+="child $letter counted ${got:-nothing}, expected $want; "
        local f="$WORK/$name.$letter"
        if [ -s "$f" ]; then
            grep -q '^rewrite_failures 0$' "$f" || problems+="child $letter: rewrite failures; "
            grep -q '^rejit_errors 0$' "$f" || problems+="child $letter: ReJIT errors; "
            grep -q '^rejit_hr 0x0*[1-9A-F]' "$f" && problems+="child $letter: $(grep rejit_hr "$f"); "
            local t1=${targets%%,*}
            # what it would see alone: a ReJIT child sees one version of its first target (its
            # own request): one GetReJITParameters (PARAMS), one ReJIT ID in its ReJIT callbacks
            # and in GetReJITIDs, and, when it asked before the first call, no JIT compilation
            # of it; a JIT-time child sees no ReJIT of it
            local gp ids seen js jf rs
            gp=$(field "$f" rejit_params "$t1"); ids=$(awk '$1=="rejit_ids"{print $2}' "$f")
            seen=$(awk '$1=="rejit_ids_seen"{print $2}' "$f"); js=$(field "$f" jit_started "$t1")
            jf=$(field "$f" jit_finished "$t1"); rs=$(field "$f" rejit_started "$t1")
            if [ "${mode%-every}" = jit ]; then
                [ "$gp" = 0 ] && [ "$seen" = 0 ] && [ "$ids" = 0 ] || problems+="child $letter (jit): GetReJITParameters($t1)=$gp, ReJIT IDs seen $seen, GetReJITIDs $ids, expected 0; "
            else
                [ "$gp" = "${params:-1}" ] || problems+="child $letter: GetReJITParameters($t1)=$gp, expected ${params:-1}; "
                [ "$ids" = 1 ] || problems+="child $letter: GetReJITIDs($t1) listed $ids, expected 1; "
                [ "${seen:-9}" -le 1 ] || problems+="child $letter: ReJITCompilationStarted($t1) with $seen ReJIT IDs, expected 1; "
                # (after its revert, the method's first JIT compilation may follow, as alone)
                if [ "$at" = 0 ] && [ "$revert" = -1 ] && [ -z "${NOJIT:-}" ]; then
                    [ "$js" = 0 ] && [ "$jf" = 0 ] || problems+="child $letter: JITCompilationStarted/Finished($t1)=$js/$jf for a method it asked to ReJIT before its first call, expected 0/0; "
                    [ "${rs:-0}" -ge 1 ] && [ "$seen" = 1 ] || problems+="child $letter: ReJITCompilationStarted($t1)=$rs with $seen ReJIT IDs, expected >= 1 with 1; "
                fi
            fi
            saw+="$letter($mode): JITCompilationStarted($t1)=$(field "$f" jit_started "$t1") GetReJITParameters($t1)=$(field "$f" rejit_params "$t1") ReJITCompilationStarted($t1)=$rs (IDs $seen) GetReJITIDs($t1)=$ids inliner-GetReJITParameters=$(awk '$1=="rejit_params_other"{print $2}' "$f") counter=$got; "
        else
            problems+="child $letter wrote no report; "
        fi
    done
    if [ "$tracer" = 1 ]; then
        local spans
        spans=$(grep -o '"name":"Compose.Work.Compute"' "$WORK/$name.spans" 2>/dev/null | wc -l)
        [ "$spans" = $((PHASES * CALLS[Compute])) ] || problems+="tracer: $spans spans of Compute, expected $((PHASES * CALLS[Compute])); "
        saw+="tracer: spans(Compute)=$spans"
        if [ -n "${INTEG:-}" ]; then
            local withx
            withx=$(grep -o '"key":"compose.x"' "$WORK/$name.spans" 2>/dev/null | wc -l)
            [ "$withx" = "$spans" ] || problems+="integration: $withx of $spans spans with their compose.x attribute; "
            saw+=" (an integration's, each with its compose.x)"
        fi
    fi
    if [ -z "$problems" ]; then
        ok "$name: $saw"
    else
        bad "$name" "$problems
$(grep -E 'WARN|ERROR' "$WORK/$name.log" | head -5)
$(tail -n 3 "$WORK/$name.err")"
    fi
    echo "$saw" >"$WORK/$name.saw"
}

# CHILD-SPEC = LETTER:MODE:TARGETS:REJIT_AT:REVERT_AT
[ -n "${ONLY:-}" ] || run_case jit+jit 1 A:jit:Compute,Small:0:-1 B:jit:Compute,Small:0:-1
run_case rejit+rejit 1 A:rejit:Compute,Small:0:-1 B:rejit:Compute,Small:0:-1
# a bytecode integration's method (issue 23) composed with another child's ReJIT rewrite
[ -n "${ONLY:-}" ] || INTEG=1 run_case rejit+integration 1 A:rejit:Compute,Small:0:-1
# nobody watches JIT compilation: nothing is held back, the first compilation is the composed ReJIT
NOJIT=1 run_case rejit+rejit-first-compilation-is-rejit 0 A:rejit:Compute,Small:0:-1 B:rejit:Compute,Small:0:-1
run_case jit+rejit-before-first-call 1 A:jit:Compute,Small:0:-1 B:rejit:Compute,Small:0:-1
run_case rejit+rejit-jit 1 A:rejit:Compute:0:-1 B:jit:Compute:0:-1 C:rejit:Compute:0:-1
# a JIT-time child that sets the IL again at every compilation of its target, from its own
# copy of the original (as Microsoft's CLR Instrumentation Engine does): the held-back ReJIT
# owners' rewrites (B's, the tracer's) survive Compute's tier-1 compilation (issue 24)
run_case jit-every+rejit-before-first-call 1 A:jit-every:Compute,Small:0:-1 B:rejit:Compute,Small:0:-1
run_case rejit-then-second-rejit-later 1 A:rejit:Compute,Small:0:-1 B:rejit:Compute,Small:1:-1
run_case revert-by-one-of-two 1 A:rejit:Compute,Small:0:2 B:rejit:Compute,Small:0:-1:2
run_case revert-then-last-owner-reverts 1 A:rejit:Compute:0:1 B:rejit:Compute:0:2:2
run_case inliners-beside-another-owner 1 A:inliners:Leaf:1:-1 B:rejit:Leaf:1:-1
# both ask for inlining callbacks, on different methods: only Leaf is inlined (into Mid)
run_case inliners-two-requesters 1 A:inliners:Leaf:1:-1 B:inliners:Small:1:-1

# the inliner case: only the child that asked for inlining callbacks saw the inliner (Mid)
a=$(awk '$1=="rejit_params_other"{print $2}' "$WORK/inliners-beside-another-owner.A" 2>/dev/null)
b=$(awk '$1=="rejit_params_other"{print $2}' "$WORK/inliners-beside-another-owner.B" 2>/dev/null)
if [ "${a:-0}" -ge 1 ] && [ "${b:-1}" = 0 ]; then
    ok "inliners: GetReJITParameters for the inliner Mid reached the child that asked ($a), not the other ($b)"
else bad "inliners: inliner callbacks" "A saw ${a:-?}, B saw ${b:-?}"; fi
a=$(awk '$1=="rejit_params_other"{print $2}' "$WORK/inliners-two-requesters.A" 2>/dev/null)
b=$(awk '$1=="rejit_params_other"{print $2}' "$WORK/inliners-two-requesters.B" 2>/dev/null)
if [ "${a:-0}" -ge 1 ] && [ "${b:-1}" = 0 ]; then
    ok "inliners: Mid (which inlined A's Leaf) reached A ($a), not B ($b), which asked for inlining callbacks on Small"
else bad "inliners: inliner callbacks of two requesters" "A saw ${a:-?}, B saw ${b:-?}"; fi
# the JIT-time child saw the first compilation of a method another child ReJITs before its first call
j=$(field "$WORK/jit+rejit-before-first-call.A" jit_started Compute)
if [ "${j:-0}" -ge 1 ] && grep -q "held back until its first compilation" "$WORK/jit+rejit-before-first-call.log"; then
    ok "jit+rejit: the JIT-time child saw JITCompilationStarted($j) of a method ReJIT-requested before its first call"
else bad "jit+rejit: JIT-time child" "jit_started=${j:-?}"; fi
# logs: each composition at debug, with the children in order
if grep -q "ReJIT composition of Compose.Work::Compute (0x06000001) (module 0x[0-9a-f]*)[^:]*: 'A' -> 'B' -> 'tracer'; 3 rewrite(s)" "$WORK/rejit+rejit.log" \
    && grep -q "JIT-time composition of Compose.Work::Compute (0x06000001) (module 0x[0-9a-f]*): 'A' -> 'B'" "$WORK/jit+jit.log"; then
    ok "compositions are logged at debug with the children in file order"
else bad "composition log lines" "$(grep -i composition "$WORK/rejit+rejit.log" | head -3)"; fi

clr_done
