#!/usr/bin/env bash
# Real-runtime tests of tracing a real service (issue 22): the shop (tests/clr/otelapps/shop, an
# ASP.NET Core service with HTTP and gRPC endpoints) runs as `back` and `front` under clrmux with
# the built-in tracer and its managed agent, and a client (otelapps/shopclient) calls front, on
# .NET 8, 9 and 10 (the apps are net8.0, run on each runtime through a runtimeconfig that names
# it and its ASP.NET Core). No SDK in the apps' code paths unless SHOP_OTEL asks for one. Checks:
#   - async methods: one span from the call until the task completes (durations cover the
#     awaited work), faulted and cancelled tasks ERROR with their exception;
#   - continuations (traced methods, Activities, outgoing calls after an await, on pool
#     threads) are children of the async span;
#   - SERVER spans of incoming requests, CLIENT spans of HttpClient and gRPC calls, with the
#     stable HTTP / RPC semantic-convention attributes; 5xx servers and 4xx/5xx clients ERROR;
#   - client -> front -> back: one trace per request across the three processes (W3C
#     traceparent), and a caller with its own traceparent/tracestate is joined;
#   - the profiler's samples in a continuation carry the async span's labels;
#   - an app with its own OpenTelemetry SDK: the sources its SDK listens to are its own (not
#     exported twice), clrmux's method spans join its traces; so are the requests and calls a
#     tracer that listens through DiagnosticListener asks for (SHOP_DIAGLISTENER); the app's own
#     System.Diagnostics.DiagnosticSource (10.x, newer than .NET 8's) is what the agent uses;
#   - the keys: instrument = none, activity_sources patterns, agent = false.
# Prints one line per check and "web: N passed, N failed". Without dotnet: a loud skip (CI: fail).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
clr_suite web "$@"

LIB="$ROOT/build/libclrmux.so"
for f in "$LIB" build/libclrmux_profiler.so build/Clrmux.Agent.dll; do
    [ -f "$f" ] || { bad "$f is missing (run make all)"; clr_done; }
done
for app in shop shopclient; do
    tests/clr/build-otelapp.sh "$app" || { bad "building tests/clr/otelapps/$app failed (NuGet packages)"; clr_done; }
done
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-web.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# the runtime's dotnet and its ASP.NET Core (the highest of this major beside it)
DN=${DOTNET[0]}
FXDIR=$(dirname "$(readlink -f "$(command -v "$DN")")")/shared
ASPV=$(ls "$FXDIR/Microsoft.AspNetCore.App" 2>/dev/null | grep "^$CLR_RT\." | sort -V | tail -1)
[ -n "$ASPV" ] || { bad "no ASP.NET Core $CLR_RT.x beside $DN (scripts/dotnet-runtimes.sh unpacks it for 8 and 9)"; clr_done; }
cat >"$WORK/rc.json" <<EOF
{"runtimeOptions":{"tfm":"net8.0","rollForward":"Disable","frameworks":[
 {"name":"Microsoft.NETCore.App","version":"$CLR_RTV"},{"name":"Microsoft.AspNetCore.App","version":"$ASPV"}],
 "configProperties":{"System.GC.Server":false,"System.Globalization.Invariant":true}}}
EOF

# four free loopback ports (the kernel's choice; another suite may run at the same time)
read -r P1 P2 P3 P4 < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
FRONT=http://127.0.0.1:$P1 FRONT_GRPC=http://127.0.0.1:$P2 BACK=http://127.0.0.1:$P3 BACK_GRPC=http://127.0.0.1:$P4

TARGETS='trace = shop!Shop.Store::GetStockAsync
trace = shop!Shop.Store::Compute
trace = shop!Shop.Store::LookupAsync
trace = shop!Shop.Store::FaultedAsync
trace = shop!Shop.Store::CancelledAsync
trace = shop!Shop.Store::WorkAsync
trace = shopclient!ShopClient.Client::OrderAsync
trace = shopclient!ShopClient.Client::CheckAsync'

# conf TAG SERVICE [EXTRA...]: $WORK/TAG/SERVICE.conf, spans to $WORK/TAG/SERVICE.jsonl
conf() {
    local tag=$1 svc=$2
    shift 2
    mkdir -p "$WORK/$tag"
    {
        printf '[loader]\nlog_level = info\n[child tracer]\nbuiltin = tracer\nservice_name = %s\n' "$svc"
        printf 'output = %s\nflush_interval_ms = 100\n%s\n' "$WORK/$tag/$svc.jsonl" "$TARGETS"
        for l in "$@"; do printf '%s\n' "$l"; done
    } >"$WORK/$tag/$svc.conf"
}
under() { # under TAG SERVICE ENV...: the environment that runs a process of TAG under clrmux
    local tag=$1 svc=$2
    shift 2
    echo CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" \
        CLRMUX_CONFIG="$WORK/$tag/$svc.conf" CLRMUX_LOG_FILE="$WORK/$tag/$svc.log" "$@"
}
# start TAG SERVICE ROLE HTTP GRPC [ENV...]: a shop process in the background
start() {
    local tag=$1 svc=$2 role=$3 http=$4 grpc=$5
    shift 5
    # shellcheck disable=SC2046
    env $(under "$tag" "$svc") SHOP_ROLE="$role" SHOP_HTTP="$http" SHOP_GRPC="$grpc" SHOP_DOWN_HTTP="$BACK" \
        SHOP_DOWN_GRPC="$BACK_GRPC" "$@" "$DN" exec --runtimeconfig "$WORK/rc.json" build/clr/shop/shop.dll \
        >"$WORK/$tag/$svc.out" 2>&1 &
    PIDS+=($!)
    eval "PID_$svc=$!"
}
ready() { # ready URL: the service answers within 60 s
    for _ in $(seq 300); do curl -sf -o /dev/null "$1/hello" && return 0; sleep 0.2; done
    return 1
}
stop() { # stop TAG SERVICE...: SIGTERM (graceful), then wait for each
    local tag=$1 p
    shift
    for s in "$@"; do eval "p=\$PID_$s"; kill -TERM "$p" 2>/dev/null; done
    for s in "$@"; do eval "p=\$PID_$s"; wait "$p" 2>/dev/null; done
}
# count LINES: a python checker's "ok"/"FAIL" lines, as this suite's own
count() {
    sed "s/^ok   - /ok   - [.NET $CLR_RTV] /; s/^FAIL - /FAIL - [.NET $CLR_RTV] /" <<<"$1"
    PASS=$((PASS + $(grep -c '^ok' <<<"$1"))); FAIL=$((FAIL + $(grep -c '^FAIL' <<<"$1") + $(grep -c Traceback <<<"$1")))
}

# ---- the main scenario: client -> front -> back, each under clrmux ---------------------------
conf main back
conf main front
conf main client
# front also runs the built-in profiler: samples in a continuation carry the async span's labels
cat >>"$WORK/main/front.conf" <<EOF
[child profiler]
builtin = profiler
output_dir = $WORK/main/profiles
period_s = 60
sampling_interval_ms = 5
EOF
# back logs (warnings, to the console): ASP.NET Core makes an Activity per request for the log
# scopes, whose ids back's SERVER spans take (the chain checks below go through them)
start main back back "$P3" "$P4" SHOP_LOGGING=1
start main front front "$P1" "$P2"
if ready "$BACK" && ready "$FRONT"; then ok "back and front start under clrmux (tracer, agent; front also the profiler)"
else bad "back and front start under clrmux" "$(tail -5 "$WORK"/main/*.out "$WORK"/main/*.log)"; clr_done; fi
# shellcheck disable=SC2046
env $(under main client) "${DOTNET[@]}" build/clr/shopclient/shopclient.dll "$FRONT" "$FRONT_GRPC" 7 8 \
    >"$WORK/main/client.out" 2>&1
if grep -q '^order 7: stock 14 rpc=14 n=14$' "$WORK/main/client.out" && grep -q '^order 8: stock 16 rpc=16 n=16$' "$WORK/main/client.out" \
    && grep -q '^rpc 10$' "$WORK/main/client.out" && grep -q '^rpc error NotFound$' "$WORK/main/client.out"; then
    ok "the client's orders and gRPC calls answer as without clrmux"
else bad "the client's orders and gRPC calls answer" "$(cat "$WORK/main/client.out")"; fi
codes=""
for p in fail faulted cancelled work/300; do codes+="$p=$(curl -s -o /dev/null -w '%{http_code}' "$FRONT/$p") "; done
curl -s -o "$WORK/main/w3c.out" -A "web-test/1.0" -H "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" \
    -H "tracestate: vendor=abc" "$FRONT/order/9"
for h in shop.example "[::1]:8080" "shop.example:8081"; do curl -s -o /dev/null -H "Host: $h" "$FRONT/hello"; done # server.address's forms
[ "$codes" = "fail=500 faulted=500 cancelled=500 work/300=200 " ] && ok "fail, faulted, cancelled answer 500, work 200" \
    || bad "fail, faulted, cancelled answer 500, work 200" "$codes"
stop main front back
for s in back front client; do
    if grep -q "tracer: managed agent .* started" "$WORK/main/$s.log" && ! grep -qE "ERROR|agent: .*(failed|not)" "$WORK/main/$s.log"; then
        ok "$s: the managed agent started, no error logged"
    else bad "$s: the managed agent started, no error logged" "$(grep -E 'agent|ERROR|WARN' "$WORK/main/$s.log" | head)"; fi
done

out=$(python3 - "$WORK/main" "$P1" "$P3" <<'PYEOF'
import json, sys
sys.path.insert(0, "tests/clr")
from webcheck import check, spans
W, front_port, back_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sp = {s: spans(f"{W}/{s}.jsonl", s) for s in ("client", "front", "back")}
allsp = sp["client"] + sp["front"] + sp["back"]
byid = {s["spanId"]: s for s in allsp}
def named(svc, name):
    return [s for s in sp[svc] if s["name"] == name]
def inside(c, p):
    return int(p["startTimeUnixNano"]) <= int(c["startTimeUnixNano"]) and int(c["endTimeUnixNano"]) <= int(p["endTimeUnixNano"]) + 1000

# async spans: GetStockAsync lasts until its task completes, its awaited calls inside it
gs = named("front", "Shop.Store.GetStockAsync")
check(len(gs) == 3, "front: one GetStockAsync span per order (3)", [s["dur"] for s in gs])
kids = lambda s: [c for c in allsp if c.get("parentSpanId") == s["spanId"]]
ok_async = all(
    any(k["name"] == "Shop.Store.Compute" for k in kids(g)) and
    any(k["scope"] == "System.Net.Http" and k["kind"] == 3 for k in kids(g)) and
    any(k["scope"] == "Grpc.Net.Client" for k in kids(g)) and
    any(k["scope"] == "Shop.Own" for k in kids(g)) and
    all(inside(k, g) for k in kids(g)) for g in gs)
check(ok_async, "GetStockAsync's continuations are its children (Compute after an await, the HttpClient and gRPC calls, the app's own Activity), each within its time",
      [[(k["name"], k["scope"]) for k in kids(g)] for g in gs])
check(all(g["dur"] >= 5 for g in gs), "GetStockAsync's span covers its awaited work (>= the 5 ms delay)", [g["dur"] for g in gs])
w = named("front", "Shop.Store.WorkAsync")
check(len(w) == 1 and w[0]["dur"] >= 300, "WorkAsync(300): one span of >= 300 ms (CPU after an await)", [x["dur"] for x in w])
f = named("front", "Shop.Store.FaultedAsync")
check(len(f) == 1 and f[0]["status"].get("code") == 2 and f[0]["status"].get("message") == "System.InvalidOperationException"
      and any(e["name"] == "exception" for e in f[0].get("events", [])),
      "a faulted task: ERROR with the exception type and an exception event", f)
c = named("front", "Shop.Store.CancelledAsync")
check(len(c) == 1 and c[0]["status"].get("code") == 2 and c[0]["status"].get("message") == "System.Threading.Tasks.TaskCanceledException",
      "a cancelled task: ERROR with TaskCanceledException (what awaiting it throws)", c)

# server spans and their attributes
srv = [s for s in sp["front"] if s["kind"] == 2 and s["scope"] == "Microsoft.AspNetCore"]
order = [s for s in srv if s["attrs"].get("http.route") == "/order/{id}"]
check(len(order) == 3 and all(s["name"] == "GET /order/{id}" for s in order), "front: a SERVER span per order, named 'GET /order/{id}'", [s["name"] for s in srv])
need = ["http.request.method", "url.path", "url.scheme", "http.route", "http.response.status_code", "server.address",
        "server.port", "network.protocol.version"]
miss = [(s["name"], k) for s in order for k in need if k not in s["attrs"]]
check(not miss, "SERVER spans carry http.request.method, url.path, url.scheme, http.route, http.response.status_code, server.address, server.port, network.protocol.version", miss)
addr = [(s["attrs"].get("server.address"), s["attrs"].get("server.port"), s["attrs"].get("client.address")) for s in order]
check(all(a == "127.0.0.1" and int(p) == front_port and c == "127.0.0.1" for a, p, c in addr),
      "SERVER spans: server.address and server.port from the Host header (127.0.0.1:%d), client.address the caller's" % front_port, addr)
hosts = sorted((s["attrs"].get("server.address"), int(s["attrs"].get("server.port", 0))) for s in srv
               if s["attrs"].get("http.route") == "/hello" and s["attrs"].get("server.address") != "127.0.0.1")
check(hosts == [("[::1]", 8080), ("shop.example", 80), ("shop.example", 8081)],
      "server.address and server.port of other Host headers: a name alone (port 80), an IPv6 address, a name and a port", hosts)
ua = [s for s in order if s["attrs"].get("user_agent.original") == "web-test/1.0"]
check(len(ua) == 1, "user_agent.original of the curl request", [s["attrs"].get("user_agent.original") for s in order])
fail = [s for s in srv if s["attrs"].get("http.route") == "/fail"]
check(len(fail) == 1 and fail[0]["status"].get("code") == 2 and fail[0]["attrs"].get("http.response.status_code") in ("500", 500)
      and fail[0]["attrs"].get("error.type") == "System.InvalidOperationException"
      and any(e["name"] == "exception" for e in fail[0].get("events", [])),
      "a 500 (an unhandled exception): SERVER span ERROR with error.type and an exception event", fail)
ok200 = [s for s in order if s["status"].get("code") != 2]
check(len(ok200) == 3, "200 SERVER spans are not errors", [s["status"] for s in order])

# client spans: HttpClient and gRPC
hc = [s for s in sp["front"] if s["scope"] == "System.Net.Http" and s["kind"] == 3]
hneed = ["http.request.method", "url.full", "server.address", "server.port", "http.response.status_code", "network.protocol.version"]
miss = [(s["name"], k) for s in hc for k in hneed if k not in s["attrs"]]
check(hc and not miss and all(s["name"] in ("GET", "POST") for s in hc),
      "CLIENT spans of HttpClient: named by method, with http.request.method, url.full, server.address, server.port, http.response.status_code, network.protocol.version", miss or hc[:1])
def stock_url(u):
    i = int(u.split("/stock/")[1].split("?")[0])
    return "http://127.0.0.1:%d/stock/%d%s" % (back_port, i, "?from=order%%20%d" % i if i % 2 else "")
urls = [s["attrs"].get("url.full", "") for s in hc if "/stock/" in s["attrs"].get("url.full", "")]
check(len(urls) >= 3 and all(u == stock_url(u) for u in urls) and any("%20" in u for u in urls) and any("?" not in u for u in urls),
      "url.full of HttpClient's calls: the URI as sent, an escaped query kept escaped", urls)
gc = [s for s in sp["client"] if s["scope"] == "Grpc.Net.Client"]
okc = [s for s in gc if s["attrs"].get("rpc.grpc.status_code") in ("0", 0)]
nf = [s for s in gc if s["attrs"].get("rpc.grpc.status_code") in ("5", 5)]
check(len(okc) == 1 and len(nf) == 1 and all(s["name"] == "shop.Inventory/Check" and s["kind"] == 3 and s["attrs"].get("rpc.system") == "grpc"
      and s["attrs"].get("rpc.service") == "shop.Inventory" and s["attrs"].get("rpc.method") == "Check" for s in gc),
      "gRPC client spans: CLIENT 'shop.Inventory/Check', rpc.system grpc, rpc.service, rpc.method, rpc.grpc.status_code", gc)
check(nf and nf[0]["status"].get("code") == 2 and okc and okc[0]["status"].get("code") != 2,
      "gRPC client: NOT_FOUND is ERROR, OK is not", [s["status"] for s in gc])
gs_srv = [s for s in sp["front"] + sp["back"] if s["kind"] == 2 and s["attrs"].get("rpc.system") == "grpc"]
check(len(gs_srv) >= 4 and all(s["name"] == "shop.Inventory/Check" and s["attrs"].get("rpc.method") == "Check" for s in gs_srv),
      "gRPC server spans: SERVER 'shop.Inventory/Check' with rpc.* attributes (front and back)", [(s["svc"], s["name"]) for s in gs_srv])
nfs = [s for s in gs_srv if s["attrs"].get("rpc.grpc.status_code") in ("5", 5)]
check(len(nfs) == 1 and nfs[0]["status"].get("code") != 2, "gRPC server: NOT_FOUND is not a server error (the RPC conventions)", nfs)

# one trace per request across the three processes
orders = named("client", "ShopClient.Client.OrderAsync")
chains = []
for o in orders:
    t = o["traceId"]
    cl = [s for s in sp["client"] if s.get("parentSpanId") == o["spanId"] and s["kind"] == 3]
    fs = [s for s in sp["front"] if s["kind"] == 2 and cl and s.get("parentSpanId") == cl[0]["spanId"]]
    fc = [s for s in sp["front"] if s["traceId"] == t and s["kind"] == 3 and s["scope"] == "System.Net.Http"]
    bs = [s for s in sp["back"] if s["kind"] == 2 and any(s.get("parentSpanId") == x["spanId"] for x in fc)]
    chains.append((len(cl), len(fs), len(bs), len({s["traceId"] for s in allsp if s["traceId"] == t})))
check(len(orders) == 2 and all(c[0] == 1 and c[1] == 1 and c[2] == 2 for c in chains),
      "client OrderAsync -> CLIENT -> front SERVER -> CLIENT x2 -> back SERVER x2: parent by parent across the processes", chains)
traces = {}
for s in allsp:
    traces.setdefault(s["traceId"], set()).add(s["svc"])
check(all(traces[o["traceId"]] == {"client", "front", "back"} for o in orders) and len({o["traceId"] for o in orders}) == 2,
      "one trace id per request, shared by the client, front and back", {o["traceId"]: traces[o["traceId"]] for o in orders})
lk = [s for s in named("back", "Shop.Store.LookupAsync")]
check(len(lk) >= 4 and all(byid.get(s.get("parentSpanId"), {}).get("kind") == 2 for s in lk),
      "back: LookupAsync spans are children of back's SERVER spans", [(s["name"], byid.get(s.get("parentSpanId"), {}).get("name")) for s in lk])
acts = [l.rstrip("\n").split("\t")[1:] for l in open(f"{W}/back.out") if l.startswith("request-activity\t")]
bsrv = {(s["traceId"], s["spanId"]) for s in sp["back"] if s["kind"] == 2}
check(len(acts) >= 2 and all(tuple(a) in bsrv for a in acts),
      "back logs: the Activity ASP.NET Core makes for the log scopes has its SERVER span's ids", (acts, list(bsrv)[:4]))
w3c = [s for s in order if s["traceId"] == "0af7651916cd43dd8448eb211c80319c"]
check(len(w3c) == 1 and w3c[0].get("parentSpanId") == "b7ad6b7169203331" and w3c[0].get("traceState") == "vendor=abc"
      and {s["svc"] for s in allsp if s["traceId"] == "0af7651916cd43dd8448eb211c80319c"} == {"front", "back"},
      "a caller's traceparent and tracestate: front's SERVER span continues it, back joins the same trace", w3c)
PYEOF
)
count "$out"

# the profiler: WorkAsync's CPU after its await (Shop.Store.Burn) carries its span's labels
prof=$(ls "$WORK"/main/profiles/*.pb.gz 2>/dev/null | head -1)
wid=$(python3 -c '
import json,sys
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                if s["name"] == "Shop.Store.WorkAsync": print(s["spanId"])' "$WORK/main/front.jsonl" 2>/dev/null | head -1)
if command -v go >/dev/null 2>&1; then
    t=$(GOTOOLCHAIN=local go tool pprof -top -nodecount=200 -sample_index=cpu -tagfocus "span id=^$wid\$" "$prof" 2>/dev/null)
    if [ -n "$wid" ] && [ -n "$prof" ] && grep -q 'Shop.Store.Burn' <<<"$t"; then
        ok "the profiler's cpu samples of Burn, after WorkAsync's await on a pool thread, carry WorkAsync's span id"
    else bad "the profiler's cpu samples of Burn carry WorkAsync's span id" "span $wid profile $prof"$'\n'"$t"; fi
elif [ "${CI:-}" = true ]; then bad "go (golang-go) is needed to read the profile"
else echo "skip - [.NET $CLR_RTV] no go on PATH: the profile's span labels not checked"; fi

# ---- an app with its own OpenTelemetry SDK (SHOP_OTEL=memory) --------------------------------
conf sdk back
conf sdk front
start sdk back back "$P3" "$P4"
start sdk front front "$P1" "$P2" SHOP_OTEL=memory
if ready "$BACK" && ready "$FRONT"; then
    curl -s -o /dev/null "$FRONT/order/3"; curl -s -o /dev/null "$FRONT/order/4"
    stop sdk front back
    out=$(python3 - "$WORK/sdk" <<'PYEOF'
import sys
sys.path.insert(0, "tests/clr")
from webcheck import check, spans
W = sys.argv[1]
sdk = [l.rstrip("\n").split("\t") for l in open(f"{W}/front.out") if l.startswith("sdk-span\t")]
mine = spans(f"{W}/front.jsonl")
srcs = {x[1] for x in sdk}
check({"Microsoft.AspNetCore", "System.Net.Http", "Shop.Own"} <= srcs, "the app's SDK exports its sources' spans (ASP.NET Core, HttpClient, Shop.Own)", srcs)
dup = [s["scope"] for s in mine if s["scope"] in ("Microsoft.AspNetCore", "System.Net.Http", "Shop.Own")]
check(not dup, "clrmux does not export the sources the app's SDK listens to (no span twice)", dup)
server = {x[3]: x[4] for x in sdk if x[1] == "Microsoft.AspNetCore" and "/order" in x[2]}
gs = [s for s in mine if s["name"] == "Shop.Store.GetStockAsync"]
check(len(gs) == 2 and all(g["traceId"] in server and g.get("parentSpanId") == server[g["traceId"]] for g in gs),
      "clrmux's method spans join the SDK's traces (GetStockAsync under the SDK's SERVER span)", [(g["traceId"], g.get("parentSpanId")) for g in gs] + [server])
grpc = [s for s in mine if s["scope"] == "Grpc.Net.Client"]
check(grpc and all(g["traceId"] in server for g in grpc), "a source the SDK does not listen to (Grpc.Net.Client) is clrmux's, in the SDK's traces", grpc[:1])
PYEOF
)
    count "$out"
    if [ "$CLR_RT" = 8 ]; then
        # the app ships System.Diagnostics.DiagnosticSource 10.x (OpenTelemetry's dependency)
        v=$(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print([k for k in d["libraries"] if k.startswith("System.Diagnostics.DiagnosticSource/")])' build/clr/shop/shop.deps.json 2>/dev/null)
        grep -q "DiagnosticSource/10" <<<"$v" && grep -q "managed agent .* started" "$WORK/sdk/front.log" \
            && ok "on .NET 8 the agent runs beside the app's own System.Diagnostics.DiagnosticSource 10.x ($v)" \
            || bad "the agent beside the app's own DiagnosticSource" "$v $(grep agent "$WORK/sdk/front.log")"
    fi
else
    bad "front and back start with the app's own SDK" "$(tail -5 "$WORK"/sdk/*.out)"
    stop sdk front back
fi

# ---- an app whose tracer listens through DiagnosticListener (SHOP_DIAGLISTENER=1) ----------
# as Application Insights and OpenTelemetry's first instrumentations do: it asks hosting and
# HttpClient for their HttpRequestIn / HttpRequestOut Activities; clrmux leaves those requests
# and calls to it (rule 3), its method spans join them, and back (no such tracer) continues them
conf diag back
conf diag front
start diag back back "$P3" "$P4"
start diag front front "$P1" "$P2" SHOP_DIAGLISTENER=1
if ready "$BACK" && ready "$FRONT"; then
    curl -s -o /dev/null "$FRONT/order/5"; curl -s -o /dev/null "$FRONT/order/6"
    stop diag front back
    out=$(python3 - "$WORK/diag" <<'PYEOF'
import sys
sys.path.insert(0, "tests/clr")
from webcheck import check, spans
W = sys.argv[1]
diag = [l.rstrip("\n").split("\t") for l in open(f"{W}/front.out") if l.startswith("diag-span\t")]
front, back = spans(f"{W}/front.jsonl"), spans(f"{W}/back.jsonl")
outs = {x[3] for x in diag if x[1] == "System.Net.Http.HttpRequestOut"}
# front's /order requests (not the readiness checks): those whose trace has calls
ins = {x[2]: x[3] for x in diag if x[1] == "Microsoft.AspNetCore.Hosting.HttpRequestIn" and x[4] == "0000000000000000"
       and any(y[2] == x[2] and y[1] == "System.Net.Http.HttpRequestOut" for y in diag)}
check(len(ins) == 2 and len(outs) >= 2, "the app's DiagnosticListener tracer records front's two requests and their HttpClient calls", diag[:6])
dup = [(s["scope"], s["name"]) for s in front if s["scope"] in ("Microsoft.AspNetCore", "System.Net.Http")]
check(not dup, "clrmux leaves the requests and calls that tracer asked for to it (no span twice)", dup)
gs = [s for s in front if s["name"] == "Shop.Store.GetStockAsync"]
check(len(gs) == 2 and all(g.get("parentSpanId") == ins.get(g["traceId"]) for g in gs),
      "clrmux's method spans join its traces (GetStockAsync under its request's Activity)", [(g["traceId"], g.get("parentSpanId")) for g in gs] + [ins])
bs = [s for s in back if s["scope"] == "Microsoft.AspNetCore" and s["name"].startswith("GET /stock")]
check(len(bs) == 2 and all(b.get("parentSpanId") in outs and b["traceId"] in ins for b in bs),
      "back's SERVER spans (clrmux) continue its traces, each under its call's HttpRequestOut Activity", [(b["traceId"], b.get("parentSpanId")) for b in bs])
PYEOF
)
    count "$out"
else
    bad "front and back start, front with a DiagnosticListener tracer" "$(tail -5 "$WORK"/diag/*.out)"
    stop diag front back
fi

# ---- OTLP/HTTP protobuf: the Activity spans decoded with the protobuf library ---------------
PYPB=
for py in python3 /usr/bin/python3; do # Debian's python3-protobuf is for the system python
    if "$py" -c 'import google.protobuf' 2>/dev/null; then PYPB=$py; break; fi
done
if [ -z "$PYPB" ] || ! command -v protoc >/dev/null; then
    bad "python3-protobuf and protoc (protobuf-compiler) are needed to decode the protobuf bodies"
else
    mkdir -p "$WORK/pb/py"
    protoc --python_out="$WORK/pb/py" -I src/tracer/proto $(cd src/tracer/proto && find opentelemetry -name '*.proto')
    cat >"$WORK/pb/collector.py" <<'PYEOF'
import base64, http.server, json, os, sys, threading
out, portfile = sys.argv[1], sys.argv[2]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock, open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "type": self.headers.get("Content-Type"),
                                "body": base64.b64encode(body).decode()}) + "\n")
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
t = threading.Timer(120, os._exit, args=(3,)); t.daemon = True; t.start()
open(portfile + ".tmp", "w").write(str(srv.server_address[1])); os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PYEOF
    python3 "$WORK/pb/collector.py" "$WORK/pb/posts.jsonl" "$WORK/pb/port" &
    CPID=$!
    PIDS+=($CPID)
    for _ in $(seq 100); do [ -s "$WORK/pb/port" ] && break; sleep 0.1; done
    conf pb back
    conf pb front "endpoint = http://127.0.0.1:$(cat "$WORK/pb/port")/v1/traces"
    start pb back back "$P3" "$P4"
    start pb front front "$P1" "$P2" no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
    if ready "$BACK" && ready "$FRONT"; then
        curl -s -o /dev/null "$FRONT/order/6"; curl -s -o /dev/null "$FRONT/fail"
        stop pb front back
        kill "$CPID" 2>/dev/null
        out=$(PYTHONPATH="$WORK/pb/py" "$PYPB" - "$WORK/pb/posts.jsonl" "$WORK/pb/front.jsonl" <<'PYEOF' 2>&1
import base64, json, sys
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
sys.path.insert(0, "tests/clr")
from webcheck import check
def norm(d):
    d = dict(d)
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in d:
            d[k] = base64.b64decode(d[k]).hex()
    d.pop("flags", None)
    return d
posts = [json.loads(l) for l in open(sys.argv[1])]
pb = {}
for p in posts:
    if p["path"] == "/v1/traces":
        for rs in trace_service_pb2.ExportTraceServiceRequest.FromString(base64.b64decode(p["body"])).resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    pb[(ss.scope.name, s.span_id.hex())] = norm(MessageToDict(s, use_integers_for_enums=True))
js = {}
for line in open(sys.argv[2]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                if ss["scope"]["name"] != "clrmux":
                    js[(ss["scope"]["name"], s["spanId"])] = s
def canon(s):  # the two mappings alike: an unset status as {}
    s = json.loads(json.dumps(s))
    if s and s.get("status") in ({}, {"code": 0}):
        s["status"] = {}
    return s
diff = [(k, canon(pb.get(k)), canon(js[k])) for k in js if canon(pb.get(k)) != canon(js[k])]
check(len(js) >= 4 and not diff and set(pb) >= set(js),
      "OTLP/HTTP protobuf: every Activity span (%d: SERVER, CLIENT, gRPC, the app's own) decodes to the JSON line's fields" % len(js),
      diff[:1] or (len(pb), len(js)))
PYEOF
)
        count "$out"
    else bad "front and back start with an OTLP/HTTP endpoint" "$(tail -5 "$WORK"/pb/*.out)"; stop pb front back; fi
fi

# ---- the keys ---------------------------------------------------------------------------------
conf keys back 'instrument = none' 'activity_sources = Shop.*'
conf keys front 'instrument = httpclient' 'activity_sources = none'
start keys back back "$P3" "$P4"
start keys front front "$P1" "$P2"
if ready "$BACK" && ready "$FRONT"; then
    curl -s -o /dev/null "$FRONT/order/5"
    stop keys front back
    scopes() { python3 -c '
import json,sys
s=set()
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]: s.add(ss["scope"]["name"])
print(" ".join(sorted(s)))' "$1"; }
    b=$(scopes "$WORK/keys/back.jsonl") f=$(scopes "$WORK/keys/front.jsonl")
    [ "$f" = "System.Net.Http clrmux" ] && ok "instrument = httpclient, activity_sources = none: front records its HttpClient calls and its methods only" \
        || bad "instrument = httpclient, activity_sources = none" "$f"
    [ "$b" = "clrmux" ] && ok "instrument = none: back records no request (activity_sources = Shop.* matches none of its sources)" \
        || bad "instrument = none on back" "$b"
else bad "front and back start with instrument/activity_sources keys" "$(tail -5 "$WORK"/keys/*.out)"; stop keys front back; fi

conf noagent front 'agent = false'
start noagent front front "$P1" "$P2"
if ready "$FRONT"; then
    stop noagent front
    ! grep -q "managed agent" "$WORK/noagent/front.log" && grep -q "tracer: .*target(s)" "$WORK/noagent/front.log" \
        && ok "agent = false: no managed agent (method spans only)" || bad "agent = false" "$(grep agent "$WORK/noagent/front.log")"
else bad "front starts with agent = false" "$(tail -5 "$WORK/noagent/front.out")"; stop noagent front; fi

clr_done
