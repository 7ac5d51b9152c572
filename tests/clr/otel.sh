#!/usr/bin/env bash
# Real-runtime tests of the tracer's OpenTelemetry integration (issue 11 items 1, 2, 4; issue
# 10 section 4), on each runtime of tests/clr/lib.sh (.NET 8, 9, 10): tests/clr/otelapps/otelapp
# (OpenTelemetry SDK 1.20, ActivitySource) and, on .NET 10, otelweb (ASP.NET Core + HttpClient
# in-process) run under clrmux tracing OtelApp.Work::Handle/Inner/Fail.
# Checks: clrmux's spans join the Activity's trace (one tree per request with the SDK's
# spans), an unrecorded Activity suppresses them (parent-based) while the metrics still count
# the calls, sample_ratio, metrics equal exact call counts under a load that drops spans,
# OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES / OTEL_EXPORTER_OTLP_ENDPOINT / _HEADERS on a
# loopback collector, protobuf bodies decoded with python3-protobuf and compared field by
# field with the JSON lines, and the profiler's push to a Pyroscope-like loopback receiver.
# Prints "otel: N passed, N failed" over the runtimes. Without dotnet: a loud skip (CI: fail).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite otel "$@"

LIB="$ROOT/build/libclrmux.so"
[ -f "$LIB" ] || { bad "$LIB is missing (run make all)"; clr_done; }
# the OpenTelemetry apps (NuGet: OpenTelemetry 1.20.1), built by the first runtime's run
build_otel_app() { tests/clr/build-otelapp.sh "$1"; } # build_otel_app NAME
build_otel_app otelapp || { bad "building tests/clr/otelapps/otelapp failed (OpenTelemetry 1.20.1 from the NuGet source)"; clr_done; }
APP=build/clr/otelapp/otelapp.dll

CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-otel.XXXXXX")
SRV_PID=
trap '[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
# count LINES: the python checkers' "ok"/"FAIL" lines, printed with this run's runtime
count() {
    sed "s/^ok   - /ok   - [.NET $CLR_RTV] /; s/^FAIL - /FAIL - [.NET $CLR_RTV] /" <<<"$1"
    PASS=$((PASS + $(grep -c '^ok' <<<"$1"))); FAIL=$((FAIL + $(grep -c '^FAIL' <<<"$1") + $(grep -c Traceback <<<"$1")))
}

run() { # run TAG CONF ARGS... (env from RUN_ENV); APP_DLL overrides the app
    local tag=$1 conf=$2
    shift 2
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$conf" \
        CLRMUX_LOG_FILE="$WORK/$tag.log" "${RUN_ENV[@]}" "${DOTNET[@]}" "${APP_DLL:-$APP}" "$@" >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
}
conf() { # conf NAME [extra lines]: a tracer config in $WORK/NAME/
    mkdir -p "$WORK/$1"
    { printf '[child tracer]\nbuiltin = tracer\noutput = spans.otlp.jsonl\nmetrics_output = metrics.otlp.jsonl\n'
      printf 'trace = %s!OtelApp.Work::Handle\ntrace = %s!OtelApp.Work::Inner\n' "${CONF_ASM:-otelapp}" "${CONF_ASM:-otelapp}"
      printf '%s\n' "${@:2}"; } >"$WORK/$1/$1.conf"
    echo "$WORK/$1/$1.conf"
}
RUN_ENV=()

# check.py SPANS METRICS APPOUT MODE: the join, tree and metrics checks, one line per check
cat >"$WORK/check.py" <<'PYEOF'
import collections, json, os, sys
spans_path, metrics_path, out_path, mode = sys.argv[1:5]
res = []
def check(desc, cond, detail=""):
    res.append(("ok   - " if cond else "FAIL - ") + desc + ("" if cond or not detail else "\n       " + str(detail)[:700]))
spans = []
if os.path.exists(spans_path):
    for line in open(spans_path):
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans += ss["spans"]
sdk = []
for line in open(out_path):
    if line.startswith("SDKSPAN "):
        _, tid, sid, parent, name, rec = line.split()
        sdk.append(dict(traceId=tid, spanId=sid, parentSpanId=None if parent == "-" else parent, name=name, recorded=rec == "True"))
calls = {}
for line in open(metrics_path):
    for rm in json.loads(line)["resourceMetrics"]:
        for sm in rm["scopeMetrics"]:
            for m in sm["metrics"]:
                if m["name"] == "clrmux.method.calls":
                    calls = {dp["attributes"][0]["value"]["stringValue"]: int(dp["asInt"]) for dp in m["sum"]["dataPoints"]}
byid = {s["spanId"]: s for s in spans}
sdkid = {s["spanId"]: s for s in sdk}
def chain(s):  # names from s up to the root, across both sources
    names = []
    while s is not None and len(names) < 16:
        names.append(s["name"])
        p = s.get("parentSpanId")
        s = byid.get(p) or sdkid.get(p) if p else None
    return names
handles = [s for s in spans if s["name"] == "OtelApp.Work.Handle"]
inners = [s for s in spans if s["name"] == "OtelApp.Work.Inner"]
check("Inner is a child of Handle in Handle's trace (%d pairs)" % len(inners),
      inners and all(byid.get(i.get("parentSpanId"), {}).get("name") == "OtelApp.Work.Handle"
                     and byid[i["parentSpanId"]]["traceId"] == i["traceId"] for i in inners), inners[:2])
if mode == "activity":
    reqs = {s["name"]: s for s in sdk}
    joined = [h for h in handles if h.get("parentSpanId") in sdkid]
    want = [(reqs[r]["traceId"], reqs[r]["spanId"]) for r in ("request-1", "request-2", "request-3") if r in reqs]
    check("Handle under request-1, request-2 and request-3 (in a flow whose last root span had nothing to join) "
          "takes each Activity's trace id and has its span id as parent",
          sorted((h["traceId"], h["parentSpanId"]) for h in joined) == sorted(want) and len(want) == 3,
          [(h["traceId"], h.get("parentSpanId")) for h in handles])
    free = [h for h in handles if "parentSpanId" not in h]
    check("Handle(3) and Handle(5), called with no Activity, are root spans of new traces",
          len(free) == 2 and not {f["traceId"] for f in free} & {s["traceId"] for s in sdk}, free)
    check("the unrecorded Activity (request-unsampled, flags 00): no clrmux span in its trace (parent-based)",
          "request-unsampled" in reqs and not [s for s in spans if s["traceId"] == reqs["request-unsampled"]["traceId"]])
    check("exactly 5 Handle and 5 Inner spans", len(handles) == 5 and len(inners) == 5, len(spans))
    check("metrics count every call, the unsampled ones too: Handle 6, Inner 6 (%s)" % calls,
          calls.get("OtelApp.Work.Handle") == 6 and calls.get("OtelApp.Work.Inner") == 6)
else:
    trees = [chain(i) for i in inners]
    want = ["OtelApp.Work.Inner", "OtelApp.Work.Handle", "Microsoft.AspNetCore.Hosting.HttpRequestIn", "GET"]
    check("each of the 3 requests is one tree: HttpClient GET -> ASP.NET Core HttpRequestIn -> Handle -> Inner",
          len(trees) == 3 and all(t == want for t in trees), trees)
    check("one trace per request (3 distinct trace ids, shared by the SDK's and clrmux's spans)",
          len({i["traceId"] for i in inners}) == 3 and {i["traceId"] for i in inners} == {s["traceId"] for s in sdk})
print("\n".join(res))
PYEOF

# ---- 1. Activity join with the OpenTelemetry SDK ------------------------------------------
C=$(conf act)
run act "$C" activity flow
if [ "$(cat "$WORK/act.rc")" = 0 ] && [ "$(tail -n 1 "$WORK/act.out")" = done ]; then ok "otelapp (OpenTelemetry SDK, ActivitySource) runs under clrmux"
else bad "otelapp runs under clrmux" "$(tail -n 5 "$WORK/act.out" "$WORK/act.err")"; fi
count "$(python3 "$WORK/check.py" "$WORK/act/spans.otlp.jsonl" "$WORK/act/metrics.otlp.jsonl" "$WORK/act.out" activity 2>&1)"

# ---- 2. ASP.NET Core request handled in-process, HttpClient (.NET 10: its ASP.NET Core) ----
if [ "$CLR_RT" = 10 ]; then
    if build_otel_app otelweb; then
        C=$(CONF_ASM=otelweb conf web)
        APP_DLL=build/clr/otelweb/otelweb.dll run web "$C"
        if [ "$(cat "$WORK/web.rc")" = 0 ] && [ "$(tail -n 1 "$WORK/web.out")" = done ] && grep -q "^handled 7$" "$WORK/web.out"; then
            ok "otelweb (ASP.NET Core on 127.0.0.1, HttpClient) runs under clrmux"
        else bad "otelweb runs" "$(tail -n 5 "$WORK/web.out" "$WORK/web.err")"; fi
        count "$(python3 "$WORK/check.py" "$WORK/web/spans.otlp.jsonl" "$WORK/web/metrics.otlp.jsonl" "$WORK/web.out" aspnet 2>&1)"
    else
        bad "building tests/clr/otelapps/otelweb failed"
    fi
fi

# ---- 3. nothing uncounted: a tiny buffer drops spans, the metrics count every call ----------
C=$(conf drop "buffer_spans = 16" "flush_interval_ms = 1000")
run drop "$C" bench 200000
got=$(python3 - "$WORK/drop/metrics.otlp.jsonl" "$WORK/drop/spans.otlp.jsonl" <<'PYEOF'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]
m = {x["name"]: x for x in last["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}
calls = {dp["attributes"][0]["value"]["stringValue"]: int(dp["asInt"]) for dp in m["clrmux.method.calls"]["sum"]["dataPoints"]}
hist = {dp["attributes"][0]["value"]["stringValue"]: int(dp["count"]) if int(dp["count"]) == sum(map(int, dp["bucketCounts"])) else -1 for dp in m["clrmux.method.duration"]["histogram"]["dataPoints"]}
dropped = int(m["clrmux.tracer.spans.dropped"]["sum"]["dataPoints"][0]["asInt"])
n = sum(len(ss["spans"]) for l in open(sys.argv[2]) for rs in json.loads(l)["resourceSpans"] for ss in rs["scopeSpans"])
print(calls.get("OtelApp.Work.Handle"), calls.get("OtelApp.Work.Inner"), hist.get("OtelApp.Work.Handle"), dropped, n)
PYEOF
)
read -r ch ci hh dr ns <<<"$got"
# bench N: 4 warm-up rounds of 1000 calls, then N: 204000 calls of Handle and of Inner
if [ "$ch" = 204000 ] && [ "$ci" = 204000 ] && [ "$hh" = 204000 ] && [ "${dr:-0}" -gt 0 ] && [ $((ns + dr)) = 408000 ] \
    && grep -q "span(s) dropped: the buffer (16 spans) was full; their calls are still counted" "$WORK/drop.log"; then
    ok "a 16-span buffer under 408000 calls: $dr spans dropped (logged, clrmux.tracer.spans.dropped), $ns written, clrmux.method.calls exact (Handle $ch, Inner $ci; histogram count = sum of its buckets = $hh)"
else bad "metrics equal exact call counts under drops" "$got; $(grep -i tracer "$WORK/drop.log" | tail -3)"; fi

# ---- 4. head sampling ---------------------------------------------------------------------
C=$(conf samp "sample_ratio = 0.1")
run samp "$C" bench 20000
got=$(python3 - "$WORK/samp/spans.otlp.jsonl" <<'PYEOF'
import collections, json, sys
c = collections.Counter()
for l in open(sys.argv[1]):
    for rs in json.loads(l)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                c[s["name"]] += 1
print(c["OtelApp.Work.Handle"], c["OtelApp.Work.Inner"])
PYEOF
)
read -r sh si <<<"$got"
if [ -n "$sh" ] && [ "$sh" = "$si" ] && [ "$sh" -ge 1800 ] && [ "$sh" -le 3000 ] \
    && grep -q "head sampling: 0.1 of the root traces are recorded" "$WORK/samp.log"; then
    ok "sample_ratio = 0.1: $sh of 24000 traces recorded, each whole (Handle $sh = Inner $si)"
else bad "sample_ratio = 0.1" "$got; $(grep -i sampl "$WORK/samp.log")"; fi

# ---- 5. OTEL_* environment: service name, resource, endpoint, headers ----------------------
cat >"$WORK/collector.py" <<'PYEOF'
import base64, http.server, json, os, sys, threading
out, portfile = sys.argv[1], sys.argv[2]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock, open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "type": self.headers.get("Content-Type"),
                                "auth": self.headers.get("Authorization"), "tenant": self.headers.get("X-Tenant"),
                                "body": base64.b64encode(body).decode()}) + "\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
t = threading.Timer(120, os._exit, args=(3,)); t.daemon = True; t.start()
open(portfile + ".tmp", "w").write(str(srv.server_address[1])); os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PYEOF
python3 "$WORK/collector.py" "$WORK/posts.jsonl" "$WORK/port" &
SRV_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port" 2>/dev/null)
mkdir -p "$WORK/env"
printf '[child tracer]\nbuiltin = tracer\ntrace = otelapp!OtelApp.Work::Handle\n' >"$WORK/env/env.conf"
RUN_ENV=(no_proxy=127.0.0.1 NO_PROXY=127.0.0.1 OTEL_SERVICE_NAME=orders
    "OTEL_RESOURCE_ATTRIBUTES=service.name=ignored,service.version=1.2.3,deployment.environment.name=test%20env"
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT/" OTEL_EXPORTER_OTLP_PROTOCOL=http/json
    "OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20s3cret,X-Tenant=acme" OTEL_EXPORTER_OTLP_TIMEOUT=4000)
run env "$WORK/env/env.conf" activity
RUN_ENV=()
got=$(python3 - "$WORK/posts.jsonl" <<'PYEOF'
import base64, json, sys
paths, heads, attrs, n = set(), set(), {}, 0
for r in map(json.loads, open(sys.argv[1])):
    paths.add(r["path"]); heads.add((r["type"], r["auth"], r["tenant"]))
    b = json.loads(base64.b64decode(r["body"]))
    for rs in b.get("resourceSpans", []) + b.get("resourceMetrics", []):
        attrs.update({a["key"]: list(a["value"].values())[0] for a in rs["resource"]["attributes"]})
        n += sum(len(ss["spans"]) for ss in rs.get("scopeSpans", []))
print(sorted(paths), sorted(heads), n)
for k in ("service.name", "service.version", "deployment.environment.name", "process.pid", "process.executable.name", "host.name", "telemetry.sdk.name", "telemetry.sdk.language", "telemetry.sdk.version"):
    print(k, attrs.get(k))
PYEOF
)
if grep -q "^\['/v1/metrics', '/v1/traces'\] \[('application/json', 'Bearer s3cret', 'acme')\] 3$" <<<"$got" \
    && grep -q "^service.name orders$" <<<"$got" && grep -q "^service.version 1.2.3$" <<<"$got" \
    && grep -q "^deployment.environment.name test env$" <<<"$got" && grep -q "^process.pid [0-9]" <<<"$got" \
    && grep -q "^process.executable.name dotnet$" <<<"$got" && grep -q "^host.name $(hostname)$" <<<"$got" \
    && grep -q "^telemetry.sdk.name clrmux$" <<<"$got" && ! ls "$WORK"/env/traces-* >/dev/null 2>&1; then
    ok "OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES (percent-decoded), OTEL_EXPORTER_OTLP_ENDPOINT (+/v1/traces, /v1/metrics), _HEADERS sent; resource per semantic conventions"
else bad "OTEL_* environment" "$got"; fi

# ---- 6. OTLP/HTTP protobuf (the default protocol), decoded with the protobuf library -------
# The same spans go to the file (OTLP JSON) and, as application/x-protobuf, to the collector;
# the test decodes the bodies with python3-protobuf (classes made by protoc from the vendored
# .proto files) and compares every field of every span with the JSON line's, and checks the
# metrics request field by field.
PYPB=
for py in python3 /usr/bin/python3; do # Debian's python3-protobuf is for the system python
    if "$py" -c 'import google.protobuf' 2>/dev/null; then PYPB=$py; break; fi
done
if [ -z "$PYPB" ] || ! command -v protoc >/dev/null; then
    bad "python3-protobuf and protoc (protobuf-compiler) are needed to decode the protobuf bodies"
else
    : >"$WORK/posts.jsonl"
    mkdir -p "$WORK/py" "$WORK/pb"
    protoc --python_out="$WORK/py" -I src/tracer/proto $(cd src/tracer/proto && find opentelemetry -name '*.proto')
    printf '[child tracer]\nbuiltin = tracer\noutput = spans.otlp.jsonl\nendpoint = http://127.0.0.1:%s/v1/traces\ntrace = otelapp!OtelApp.Work::Handle\ntrace = otelapp!OtelApp.Work::Inner\ntrace = otelapp!OtelApp.Work::Fail\n' "$PORT" >"$WORK/pb/pb.conf"
    RUN_ENV=(no_proxy=127.0.0.1 NO_PROXY=127.0.0.1)
    run pb "$WORK/pb/pb.conf" activity
    RUN_ENV=()
    out=$(PYTHONPATH="$WORK/py" "$PYPB" - "$WORK/posts.jsonl" "$WORK/pb/spans.otlp.jsonl" <<'PYEOF' 2>&1
import base64, json, sys
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
res = []
def check(desc, cond, detail=""):
    res.append(("ok   - " if cond else "FAIL - ") + desc + ("" if cond or not detail else "\n       " + str(detail)[:900]))
posts = [json.loads(l) for l in open(sys.argv[1])]
types = {(p["path"], p["type"]) for p in posts}
check("the bodies are POSTed as application/x-protobuf to /v1/traces and /v1/metrics (%s)" % sorted(types),
      types == {("/v1/traces", "application/x-protobuf"), ("/v1/metrics", "application/x-protobuf")})
def hexid(b64):
    return base64.b64decode(b64).hex()
def norm(d):  # the protobuf JSON mapping -> OTLP/JSON (hex ids), for comparison
    d = dict(d)
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in d:
            d[k] = hexid(d[k])
    return d
pb_spans, pb_res, scopes = [], [], []
for p in posts:
    if p["path"] != "/v1/traces":
        continue
    req = trace_service_pb2.ExportTraceServiceRequest.FromString(base64.b64decode(p["body"]))
    for rs in req.resource_spans:
        pb_res.append(MessageToDict(rs.resource, use_integers_for_enums=True))
        for ss in rs.scope_spans:
            scopes.append((ss.scope.name, ss.scope.version))
            pb_spans += [norm(MessageToDict(s, use_integers_for_enums=True)) for s in ss.spans]
js_spans, js_res = [], []
for line in open(sys.argv[2]):
    for rs in json.loads(line)["resourceSpans"]:
        js_res.append(rs["resource"])
        for ss in rs["scopeSpans"]:
            js_spans += ss["spans"]
def key(s): return s["spanId"]
diff = [(a, b) for a, b in zip(sorted(pb_spans, key=key), sorted(js_spans, key=key)) if a != b]
check("every field of the %d protobuf spans equals the JSON line's (ids, parent, name, kind, times, "
      "code.function.name, thread.id, thread.name, status, exception event)" % len(pb_spans),
      len(pb_spans) == len(js_spans) == 7 and not diff, diff[:1] or (len(pb_spans), len(js_spans)))
check("the resource is the same in both (%d attributes) and the scope is clrmux %s" % (len(js_res[0]["attributes"]) if js_res else 0, scopes[:1]),
      pb_res and all(r == js_res[0] for r in pb_res + js_res) and set(scopes) == {("clrmux", "0.1.0")})
fail = [s for s in pb_spans if s["name"] == "OtelApp.Work.Fail"]
ev = fail[0]["events"][0] if fail and fail[0].get("events") else {}
check("Fail: status ERROR, exception event with type and message (protobuf)",
      fail and fail[0]["status"] == {"code": 2, "message": "System.InvalidOperationException"}
      and ev.get("name") == "exception" and ev.get("attributes") == [
          {"key": "exception.type", "value": {"stringValue": "System.InvalidOperationException"}},
          {"key": "exception.message", "value": {"stringValue": 'no luck "today"'}}], fail)
mreq = [metrics_service_pb2.ExportMetricsServiceRequest.FromString(base64.b64decode(p["body"])) for p in posts if p["path"] == "/v1/metrics"]
ok_m = False
detail = ""
if mreq:
    sm = mreq[-1].resource_metrics[0].scope_metrics[0]
    m = {x.name: x for x in sm.metrics}
    calls = {dp.attributes[0].value.string_value: dp.as_int for dp in m["clrmux.method.calls"].sum.data_points}
    errs = {dp.attributes[0].value.string_value: dp.as_int for dp in m["clrmux.method.errors"].sum.data_points}
    h = m["clrmux.method.duration"].histogram
    hp = {dp.attributes[0].value.string_value: dp for dp in h.data_points}
    detail = (calls, errs)
    ok_m = (calls == {"OtelApp.Work.Handle": 4, "OtelApp.Work.Inner": 4, "OtelApp.Work.Fail": 1}
            and errs == {"OtelApp.Work.Handle": 0, "OtelApp.Work.Inner": 0, "OtelApp.Work.Fail": 1}
            and m["clrmux.method.calls"].sum.is_monotonic and m["clrmux.method.calls"].sum.aggregation_temporality == 2
            and m["clrmux.method.calls"].unit == "{call}" and m["clrmux.method.duration"].unit == "s"
            and h.aggregation_temporality == 2
            and all(dp.count == calls[k] == sum(dp.bucket_counts) and len(dp.bucket_counts) == len(dp.explicit_bounds) + 1 == 16
                    and dp.sum > 0 and dp.start_time_unix_nano < dp.time_unix_nano for k, dp in hp.items())
            and list(hp["OtelApp.Work.Handle"].explicit_bounds)[:3] == [1e-06, 5e-06, 1e-05]
            and m["clrmux.tracer.spans.unsampled"].sum.data_points[0].as_int == 2
            and m["clrmux.tracer.spans.dropped"].sum.data_points[0].as_int == 0)
check("metrics (protobuf): calls Handle 4, Inner 4, Fail 1; errors Fail 1; cumulative monotonic sums; "
      "histograms with 16 buckets summing to the calls; unsampled 2, dropped 0", ok_m, detail)
print("\n".join(res))
PYEOF
)
    count "$out"
fi
kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; SRV_PID=

# ---- 7. the profiler pushes each profile to Pyroscope's ingest API --------------------------
# A loopback Pyroscope stand-in answers 503 to the first POST (retried with backoff) and 200
# after; the test checks the query (name, from, until, format=pprof), that each body is the
# gzip'd pprof written to the file for the same period, and decodes it with the protobuf
# library (profile.proto): sample types, samples, the CPU-bound kernel's function name.
cat >"$WORK/pyro.py" <<'PYEOF'
import base64, http.server, json, os, sys, threading
out, portfile = sys.argv[1], sys.argv[2]
lock, seen = threading.Lock(), [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            seen[0] += 1
            code = 503 if seen[0] == 1 else 200
            with open(out, "a") as f:
                f.write(json.dumps({"path": self.path, "code": code, "type": self.headers.get("Content-Type"),
                                    "org": self.headers.get("X-Scope-OrgID"), "body": base64.b64encode(body).decode()}) + "\n")
        self.send_response(code); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
t = threading.Timer(120, os._exit, args=(3,)); t.daemon = True; t.start()
open(portfile + ".tmp", "w").write(str(srv.server_address[1])); os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PYEOF
python3 "$WORK/pyro.py" "$WORK/pyro.jsonl" "$WORK/pyro.port" &
SRV_PID=$!
for _ in $(seq 100); do [ -s "$WORK/pyro.port" ] && break; sleep 0.1; done
PPORT=$(cat "$WORK/pyro.port" 2>/dev/null)
mkdir -p "$WORK/prof"
printf '[child profiler]\nbuiltin = profiler\noutput_dir = profiles\nperiod_s = 2\nendpoint = http://127.0.0.1:%s\napp_name = cpu bound{env=test}\nheaders = X-Scope-OrgID=tenant-1\n' "$PPORT" >"$WORK/prof/prof.conf"
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/prof/prof.conf" \
    CLRMUX_LOG_FILE="$WORK/prof.log" no_proxy=127.0.0.1 NO_PROXY=127.0.0.1 "${DOTNET[@]}" "$CLR_APPS/cpubound/cpubound.dll" 3 >"$WORK/prof.out" 2>&1
kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; SRV_PID=
if [ -n "$PYPB" ] && command -v protoc >/dev/null; then
    mkdir -p "$WORK/pypp"
    protoc --python_out="$WORK/pypp" -I src/profiler src/profiler/profile.proto
    out=$(PYTHONPATH="$WORK/pypp" "$PYPB" - "$WORK/pyro.jsonl" "$WORK/prof/profiles" "$WORK/prof.log" <<'PYEOF' 2>&1
import base64, glob, gzip, json, os, sys, urllib.parse
import profile_pb2
res = []
def check(desc, cond, detail=""):
    res.append(("ok   - " if cond else "FAIL - ") + desc + ("" if cond or not detail else "\n       " + str(detail)[:700]))
posts = [json.loads(l) for l in open(sys.argv[1])]
files = sorted(glob.glob(sys.argv[2] + "/*.pb.gz"))
ok_posts = [p for p in posts if p["code"] == 200]
qs = [urllib.parse.urlsplit(p["path"]) for p in ok_posts]
q = [dict(urllib.parse.parse_qsl(u.query)) for u in qs]
check("one accepted POST per profile file (%d files; the first POST got 503 and was retried: %d POSTs)" % (len(files), len(posts)),
      files and len(ok_posts) == len(files) and len(posts) == len(files) + 1 and posts[0]["code"] == 503)
check("POST /ingest?name=<app_name>&from&until&format=pprof, Content-Type application/octet-stream, headers sent (%s)" % (q[:1],),
      q and all(u.path == "/ingest" for u in qs) and all(x.get("name") == "cpu bound{env=test}" and x.get("format") == "pprof"
      and int(x["from"]) < int(x["until"]) for x in q) and {p["type"] for p in ok_posts} == {"application/octet-stream"}
      and {p["org"] for p in ok_posts} == {"tenant-1"})
bodies = [gzip.decompress(base64.b64decode(p["body"])) for p in ok_posts]
filed = [gzip.decompress(open(f, "rb").read()) for f in files]
check("each body is the profile written to the file for that period (byte for byte, after gunzip)", sorted(bodies) == sorted(filed))
prof = [profile_pb2.Profile.FromString(b) for b in bodies]
def st(p, i): return p.string_table[i]
types = {(st(p, t.type), st(p, t.unit)) for p in prof for t in p.sample_type}
names = {st(p, f.name) for p in prof for f in p.function}
nsamples = sum(len(p.sample) for p in prof)
check("decoded with the protobuf library: cpu/nanoseconds and wall/nanoseconds, %d samples, CpuBound.Kernel.Run among the functions" % nsamples,
      ("cpu", "nanoseconds") in types and ("wall", "nanoseconds") in types and nsamples > 0
      and any("CpuBound.Kernel.Run" in n for n in names), (types, sorted(names)[:10]))
log = open(sys.argv[3]).read()
check("the push is logged: the 503 retried, the totals at shutdown",
      "profiler: Pyroscope: POST of 1 profile(s) to http://127.0.0.1" in log and "HTTP 503; attempt 1 of 5, retrying" in log
      and "profile(s) sent in" in log, [l for l in log.splitlines() if "Pyroscope" in l][:4])
print("\n".join(res))
PYEOF
)
    count "$out"
else
    bad "python3-protobuf and protoc are needed to decode the pushed profiles"
fi

clr_done
