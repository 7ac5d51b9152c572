#!/usr/bin/env bash
# Real-runtime tests of profiles that know their span (issue 11 item 3): tests/clr/apps/spanapp
# runs under clrmux with the built-in tracer (Request and Handle traced: one trace of two spans
# per request) and the built-in profiler, with the signal sampler and with the suspend sampler.
# The profile is read with `go tool pprof -tags / -tagfocus / -tagignore` and compared with the
# exported spans file: the samples of BurnInSpan (CPU burnt inside Handle's span) carry that
# call's `span id` (Handle's spanId), `local root span id` (Request's) and `trace id`; the
# samples of BurnOutside (outside every span) carry none; wall samples of WaitInSpan (asleep in
# the span) carry it; exceptions and allocations raised inside a span carry it, those outside
# do not. With the profiler alone (no tracer) no sample has a span label. CPU samples inside the
# tracer's probes (tracebench) keep their managed callers.
# Prints one line per check and "spans: N passed, N failed"; runs on .NET 8, 9, 10.
# Without dotnet: a loud skip (a failure under CI=true). Without go: a loud skip (a failure under CI=true).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export GOTOOLCHAIN=local HOME=${HOME:-/tmp}
. tests/clr/lib.sh

if ! command -v go >/dev/null 2>&1; then
    echo "##########################################################################"
    echo "## go (Debian golang-go) is not on PATH: no pprof reader, the span label tests did NOT run"
    echo "##########################################################################"
    # every check reads the profiles with pprof's own -top/-tags/-tagfocus (no python reader
    # does that): under CI, where scripts/setup.sh installs golang-go, a missing go is an error
    if [ "${CI:-}" = true ]; then
        echo "CI=true: a missing go is an error (scripts/setup.sh test installs golang-go)"
        echo "spans: 0 passed, 1 failed"
        exit 1
    fi
    exit 0
fi
clr_suite spans "$@"
for f in build/libclrmux.so build/libclrmux_profiler.so; do
    [ -f "$f" ] || { bad "$f missing: run 'make all'"; clr_done; }
done

CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-spans.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
pprof() { go tool pprof "$@" 2>/dev/null; }

# run TAG SAMPLER [tracer]: spanapp under clrmux; profiles in $WORK/TAG/profiles, spans in
# $WORK/TAG/spans.otlp.jsonl
run() {
    local tag=$1 sampler=$2 tracer=${3:-}
    mkdir -p "$WORK/$tag"
    {
        printf '[loader]\nlog_level = info\n'
        if [ -n "$tracer" ]; then
            printf '[child tracer]\nbuiltin = tracer\noutput = spans.otlp.jsonl\n'
            printf 'trace = spanapp!SpanApp.Requests::Request\ntrace = spanapp!SpanApp.Requests::Handle\n'
        fi
        printf '[child profiler]\nbuiltin = profiler\noutput_dir = profiles\nperiod_s = 60\neventpipe_delay_ms = 0\n'
        printf 'sampling_interval_ms = 10\nsampler = %s\npause_budget_percent = 0\n' "$sampler"
    } >"$WORK/$tag/loader.conf"
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
        CLRMUX_CONFIG="$WORK/$tag/loader.conf" CLRMUX_LOG_FILE="$WORK/$tag/log" \
        "${DOTNET[@]}" build/clr/spanapp/spanapp.dll 3 250 >"$WORK/$tag/out" 2>"$WORK/$tag/err"
    echo $? >"$WORK/$tag/rc"
    mapfile -t FILES < <(ls "$WORK/$tag"/profiles/*.pb.gz 2>/dev/null)
}
# tagvals KEY PPROF-ARGS...: the values of label KEY in `pprof -tags`, one per line
tagvals() {
    local key=$1
    shift
    pprof -tags "$@" "${FILES[@]}" | awk -v k=" $key:" '
        index($0, k) == 1 || index(" " $0, k) == 1 {on = 1; next}
        /^ *[^ ].*: Total / {on = 0}
        on && /\): / {print $NF}'
}
top() { pprof -top -nodecount=1000 "$@" "${FILES[@]}"; }
has() { grep -qF -- "$2" <<<"$1"; }

# ---- each sampler, with the tracer ----------------------------------------------------------
for sampler in signal suspend; do
    run "$sampler" "$sampler" tracer
    if [ "$(cat "$WORK/$sampler/rc")" = 0 ] && grep -q '^done$' "$WORK/$sampler/out" && [ "${#FILES[@]}" -ge 1 ]; then
        ok "$sampler: spanapp runs under the tracer and the profiler, one profile written"
    else
        bad "$sampler: spanapp runs under the tracer and the profiler, one profile written" \
            "$(tail -n 20 "$WORK/$sampler/err" "$WORK/$sampler/log" 2>/dev/null)"
        continue
    fi
    # HANDLE REQUEST TRACE per request, from the spans file
    python3 - "$WORK/$sampler/spans.otlp.jsonl" >"$WORK/$sampler/calls" <<'PYEOF'
import json, sys
spans = []
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            spans += ss["spans"]
req = {s["spanId"]: s for s in spans if s["name"] == "SpanApp.Requests.Request"}
for s in spans:
    if s["name"] == "SpanApp.Requests.Handle" and s.get("parentSpanId") in req:
        print(s["spanId"], s["parentSpanId"], s["traceId"])
PYEOF
    if [ "$(wc -l <"$WORK/$sampler/calls")" = 3 ]; then
        ok "$sampler: the spans file has 3 requests (Handle inside Request, one trace each)"
    else
        bad "$sampler: the spans file has 3 requests (Handle inside Request, one trace each)" \
            "$(cat "$WORK/$sampler/calls"; head -c 2000 "$WORK/$sampler/spans.otlp.jsonl")"
        continue
    fi
    # every request's span: its CPU samples are in BurnInSpan, with its local root and trace
    fails=""
    while read -r handle request trace; do
        t=$(top -sample_index=cpu -tagfocus "span id=^$handle\$")
        has "$t" SpanApp.Requests.BurnInSpan || fails+="span $handle: no BurnInSpan cpu sample"$'\n'"$t"$'\n'
        roots=$(tagvals "local root span id" -sample_index=cpu -tagfocus "span id=^$handle\$")
        traces=$(tagvals "trace id" -sample_index=cpu -tagfocus "span id=^$handle\$")
        [ "$roots" = "$request" ] || fails+="span $handle: local root span id '$roots', want $request"$'\n'
        [ "$traces" = "$trace" ] || fails+="span $handle: trace id '$traces', want $trace"$'\n'
    done <"$WORK/$sampler/calls"
    [ -z "$fails" ] && ok "$sampler: each request's BurnInSpan cpu samples carry its span id, local root span id (Request) and trace id" \
        || bad "$sampler: each request's BurnInSpan cpu samples carry its span id, local root span id (Request) and trace id" "$fails"
    # labels name only the spans of the file (no stale or torn id)
    spans_ok=$(tagvals "span id" -sample_index=wall | sort -u)
    known=$(awk '{print $1; print $2}' "$WORK/$sampler/calls" | sort -u)
    roots_ok=$(tagvals "local root span id" -sample_index=wall | sort -u)
    if [ -n "$spans_ok" ] && [ -z "$(comm -23 <(echo "$spans_ok") <(echo "$known"))" ] \
        && [ -z "$(comm -23 <(echo "$roots_ok") <(awk '{print $2}' "$WORK/$sampler/calls" | sort -u))" ]; then
        ok "$sampler: every span id and local root span id label is a span of the spans file"
    else
        bad "$sampler: every span id and local root span id label is a span of the spans file" \
            "labels:"$'\n'"$spans_ok"$'\n'"roots:"$'\n'"$roots_ok"$'\n'"spans file:"$'\n'"$known"
    fi
    t=$(top -sample_index=cpu -tagignore 'span id=.')
    if has "$t" SpanApp.Outside.BurnOutside && ! has "$t" SpanApp.Requests.BurnInSpan; then
        ok "$sampler: cpu samples without a span label: BurnOutside, never BurnInSpan"
    else
        bad "$sampler: cpu samples without a span label: BurnOutside, never BurnInSpan" "$t"
    fi
    t=$(top -sample_index=cpu -tagfocus 'span id=.')
    if has "$t" SpanApp.Requests.BurnInSpan && ! has "$t" SpanApp.Outside.BurnOutside; then
        ok "$sampler: cpu samples with a span label: BurnInSpan, never BurnOutside"
    else
        bad "$sampler: cpu samples with a span label: BurnInSpan, never BurnOutside" "$t"
    fi
    read -r handle request trace <"$WORK/$sampler/calls"
    t=$(top -sample_index=wall -tagfocus "span id=^$handle\$")
    t2=$(top -sample_index=wall -tagfocus 'span id=.')
    if has "$t" SpanApp.Requests.WaitInSpan && ! has "$t2" SpanApp.Outside.WaitOutside; then
        ok "$sampler: wall samples asleep in WaitInSpan carry the span id; WaitOutside's none"
    else
        bad "$sampler: wall samples asleep in WaitInSpan carry the span id; WaitOutside's none" "$t"$'\n'"$t2"
    fi
    if [ "$sampler" = signal ]; then
        # exceptions and allocations (callbacks on the raising thread)
        t=$(top -sample_index=exception -tagfocus "span id=^$handle\$")
        t2=$(top -sample_index=exception -tagignore 'span id=.')
        if has "$t" SpanApp.Requests.ThrowInSpan && has "$t2" SpanApp.Outside.ThrowOutside \
            && ! has "$t2" SpanApp.Requests.ThrowInSpan; then
            ok "exceptions thrown inside a span carry its span id; outside, none"
        else
            bad "exceptions thrown inside a span carry its span id; outside, none" "$t"$'\n'"$t2"
        fi
        t=$(top -sample_index=alloc-samples -tagfocus 'span id=.')
        t2=$(top -sample_index=alloc-samples -tagignore 'span id=.')
        if has "$t" SpanApp.Requests.AllocInSpan && ! has "$t" SpanApp.Outside.AllocOutside \
            && has "$t2" SpanApp.Outside.AllocOutside && ! has "$t2" SpanApp.Requests.AllocInSpan; then
            ok "allocation samples inside a span carry a span id; outside, none"
        else
            bad "allocation samples inside a span carry a span id; outside, none" "$t"$'\n'"$t2"
        fi
    fi
done

# ---- the profiler alone: no span labels -------------------------------------------------------
run alone signal
tags=$(pprof -tags -sample_index=wall "${FILES[@]}")
if [ "$(cat "$WORK/alone/rc")" = 0 ] && grep -q 'thread id' <<<"$tags" && ! grep -q 'span id' <<<"$tags"; then
    ok "the profiler without the tracer: samples carry no span label"
else
    bad "the profiler without the tracer: samples carry no span label" "$tags"
fi
# ---- samples inside the tracer's probes keep their managed callers (issue 24 item 3) ----------
# tracebench calls the traced Calls.Traced 30 M times from LoopTraced: the probes (called by the
# JIT-compiled code through calli, with SuppressGCTransition: no transition frame) take a good
# share of the CPU samples. Each sample whose leaf is libclrmux.so inside a span (a probe) must
# go on into LoopTraced; nearly all into Calls.Traced itself (a sample before a probe's frame
# record is set up sees the caller's caller only).
mkdir -p "$WORK/probes"
{
    printf '[loader]\nlog_level = info\n[child tracer]\nbuiltin = tracer\noutput = spans.otlp.jsonl\n'
    printf 'trace = tracebench!TraceBench.Calls::Traced\n'
    printf '[child profiler]\nbuiltin = profiler\noutput_dir = profiles\nperiod_s = 60\neventpipe_delay_ms = 0\n'
    printf 'sampling_interval_ms = 2\nsampler = signal\npause_budget_percent = 0\n'
} >"$WORK/probes/loader.conf"
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
    CLRMUX_CONFIG="$WORK/probes/loader.conf" CLRMUX_LOG_FILE="$WORK/probes/log" \
    "${DOTNET[@]}" build/clr/tracebench/tracebench.dll 1000000 30 0 >"$WORK/probes/out" 2>"$WORK/probes/err"
rc=$?
pprof -traces -sample_index=cpu "$WORK"/probes/profiles/*.pb.gz >"$WORK/probes/traces" 2>/dev/null
counts=$(python3 - "$WORK/probes/traces" <<'PYEOF'
import re, sys
label = re.compile(r'^\s*[A-Za-z][\w ]*:\s')
probe = lost = direct = 0
example = ""
for block in open(sys.argv[1]).read().split("-----------+-------------------------------------------------------"):
    lines = [l for l in block.strip().split("\n") if l.strip()]
    labels = [l.strip() for l in lines if label.match(l)]
    frames = [re.sub(r'^\s*[0-9.]+[mun]?s\s+', '', l).strip() for l in lines if not label.match(l)]
    if not frames or "libclrmux.so" not in frames[0] or not any(l.startswith("span id:") for l in labels):
        continue
    probe += 1
    if "TraceBench.Program.LoopTraced" not in frames:
        lost += 1
        example = example or " <- ".join(frames)
    if len(frames) > 1 and frames[1] == "TraceBench.Calls.Traced":
        direct += 1
print(probe, lost, direct, example)
PYEOF
)
read -r probe lost direct example <<<"$counts"
if [ "$rc" = 0 ] && [ "${probe:-0}" -ge 20 ] && [ "$lost" = 0 ] && [ $((direct * 100)) -ge $((probe * 95)) ]; then
    ok "samples inside the tracer's probes keep their managed callers ($probe samples, $direct directly under Calls.Traced)"
else
    bad "samples inside the tracer's probes keep their managed callers" \
        "exit $rc; $probe probe samples, $lost without LoopTraced, $direct directly under Calls.Traced; e.g. ${example:-none}"
fi
clr_done
