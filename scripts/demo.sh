#!/usr/bin/env bash
# make demo: runs the sample .NET app under clrmux with loader.conf.example and prints, per
# child, the callbacks it received, the spans and the top of the CPU profile; then runs a small
# order service (demo/shop) under the launcher (`clrmux run --trace ... --profile`) and ends by
# writing build/demo/report.html: a flame graph of its CPU profile and the timeline of one
# request (tools/report/report.py), with a screenshot (build/demo/report.png) when Chromium is
# installed. Last, a service with a real database and a queue (demo/orders: PostgreSQL and
# RabbitMQ started on loopback, two processes): one order's trace across both, with its database
# and queue spans, printed and written to build/demo/orders-report.html. A server that cannot
# start is said loudly and that part skipped.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
command -v dotnet >/dev/null || { echo "make demo needs the .NET SDK (dotnet) on PATH"; exit 1; }
tests/clr/build-apps.sh
OUT=build/demo
mkdir -p "$OUT"
rm -rf "$OUT"/*.txt "$OUT"/clrmux.log "$OUT"/traces-*.otlp.jsonl "$OUT"/metrics-*.otlp.jsonl "$OUT"/profiles
echo "== running build/clr/sample/sample.dll under clrmux with loader.conf.example"
env CORECLR_ENABLE_PROFILING=1 \
    CORECLR_PROFILER='{EE712634-5BBB-4C28-8E6A-45180A97AD0B}' \
    CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
    CLRMUX_CONFIG="$ROOT/loader.conf.example" \
    CLRMUX_LOG_FILE="$ROOT/$OUT/clrmux.log" \
    RECORDER_MASK_A0000001=0x24C RECORDER_OUT_A0000001="$ROOT/$OUT/recorder-a.txt" \
    RECORDER_MASK_B0000002=0x4 RECORDER_OUT_B0000002="$ROOT/$OUT/recorder-b.txt" \
    dotnet build/clr/sample/sample.dll | sed 's/^/   app | /'
echo
echo "== clrmux log ($OUT/clrmux.log)"
sed 's/^/   /' "$OUT/clrmux.log"
for c in recorder-a recorder-b; do
    echo
    echo "== child $c received:"
    grep -v '^#' "$OUT/$c.txt" | awk '{printf "   %-32s %6d\n", $1, $2}'
done

echo
echo "== child tracer: spans written to $(ls "$OUT"/traces-*.otlp.jsonl 2>/dev/null | head -1)"
python3 - "$OUT" <<'PY'
import collections, glob, json, sys
counts, errors = collections.Counter(), collections.Counter()
for path in glob.glob(sys.argv[1] + "/traces-*.otlp.jsonl"):
    for line in open(path):
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for sp in ss.get("spans", []):
                    counts[sp["name"]] += 1
                    if sp.get("status", {}).get("code") == 2:
                        errors[sp["name"]] += 1
for name, n in sorted(counts.items()):
    print("   %-40s %6d spans%s" % (name, n, "  (%d with error status)" % errors[name] if errors[name] else ""))
print("   %-40s %6d spans" % ("total", sum(counts.values())))
calls = {}
for path in glob.glob(sys.argv[1] + "/metrics-*.otlp.jsonl"):
    for line in open(path):  # cumulative: the last line has the totals
        for rm in json.loads(line)["resourceMetrics"]:
            for sm in rm["scopeMetrics"]:
                for m in sm["metrics"]:
                    if m["name"] == "clrmux.method.calls":
                        calls = {dp["attributes"][0]["value"]["stringValue"]: int(dp["asInt"]) for dp in m["sum"]["dataPoints"]}
if calls:
    print("   calls counted by the metrics (clrmux.method.calls):")
    for name, n in sorted(calls.items()):
        print("   %-40s %6d calls%s" % (name, n, "" if n == counts[name] else "  (%d without a span)" % (n - counts[name])))
PY

echo
echo "== child profiler: $(ls "$OUT"/profiles/*.pb.gz 2>/dev/null | wc -l) profile(s) in $OUT/profiles"
if command -v go >/dev/null 2>&1; then
    for p in "$OUT"/profiles/*.pb.gz; do
        echo "   top functions by CPU ($p):"
        HOME=${HOME:-/tmp} GOTOOLCHAIN=local go tool pprof -top -sample_index=cpu "$p" 2>/dev/null | sed -n '1,14p' | sed 's/^/     /'
        break
    done
else
    echo "   (install golang-go to see the top functions: go tool pprof -top)"
fi

# ---- a service under the launcher, and the report a person opens ------------------------
echo
echo "== a small order service (demo/shop) under clrmux run: spans of each request and a CPU profile"
SHOP="$OUT/shop"
demo/build.sh shop
RUN="$OUT/shop-run"
rm -rf "$RUN"
CMD=(build/clrmux run --output-dir "$RUN" --profile
     --trace 'shop!Shop.OrderService::HandleRequestAsync' --trace 'shop!Shop.OrderService::ParseOrder'
     --trace 'shop!Shop.OrderService::PriceOrder' --trace 'shop!Shop.OrderService::RenderReceipt'
     --trace 'shop!Shop.Pricing::ComputeTax' --trace 'shop!Shop.Pricing::ApplyDiscounts'
     --trace 'shop!Shop.Inventory::ReserveAsync' -- dotnet "$SHOP/shop.dll" 3 3)
echo "   \$ ${CMD[*]}"
"${CMD[@]}" 2>&1 | sed 's/^/   /'
echo
echo "== the report: a flame graph of the CPU profile and the timeline of one request"
ASSETS=$(tools/report/install.sh)
python3 tools/report/report.py --assets "$ASSETS" --profile "$(ls "$RUN"/profiles/*.pb.gz | head -1)" \
    --traces "$(ls "$RUN"/traces-*.otlp.jsonl | head -1)" --root Shop.OrderService.HandleRequestAsync \
    --title "clrmux demo: the shop service" --out "$OUT/report.html" | sed 's/^/   /'
if command -v chromium >/dev/null 2>&1; then
    tools/report/render.sh "$OUT/report.html" "$OUT/report.png" && echo "   screenshot: $ROOT/$OUT/report.png"
else
    echo "   (no chromium: no screenshot; scripts/setup.sh test installs it)"
fi

# ---- a service with a real database and a queue: one request across two processes ---------
# PostgreSQL and RabbitMQ from their Debian packages (scripts/setup.sh demo), started on loopback
# in a scratch folder as the tests start them (tests/clr/servers.sh) and stopped at the end. A
# server that cannot start is said loudly and this part is skipped; the rest of the demo stands.
echo
echo "== orders: a service with a real database (PostgreSQL) and a queue (RabbitMQ), in two processes"
loud() {
    echo "   ########################################################################"
    echo "   ## $*"
    echo "   ########################################################################"
}
ORDERS=0 ORDERS_HTML=""
rm -f "$OUT/orders-report.html" "$OUT/orders-warehouse.out"
if ! demo/build.sh orders; then
    loud "demo/orders did not build (build/demo/orders-build.log): no database and queue spans below"
elif [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    loud "postgresql or rabbitmq-server is not installed (scripts/setup.sh demo installs them): no database and queue spans below"
else
    # shellcheck source=tests/clr/servers.sh
    . tests/clr/servers.sh
    servers_start pg rabbit || true # its EXIT trap stops them
    if [ -n "${CLRMUX_PG_PORT:-}" ] && [ -n "${CLRMUX_RABBIT_PORT:-}" ]; then
        ORDERS=1
    else
        loud "a server did not start (above): no database and queue spans below"
    fi
fi
if [ $ORDERS = 1 ]; then
    ORUN="$OUT/orders-run"
    rm -rf "$ORUN"
    set +e
    # the warehouse waits on the queue while the front takes its requests: two processes at once
    WCMD=(build/clrmux run --output-dir "$ORUN/warehouse" --trace 'orders!Orders.Warehouse::ShipAsync'
          -- dotnet build/demo/orders/orders.dll warehouse 3)
    FCMD=(build/clrmux run --output-dir "$ORUN/front" --profile --trace 'orders!Orders.Front::PlaceOrderAsync'
          -- dotnet build/demo/orders/orders.dll front 3)
    echo "   \$ OTEL_SERVICE_NAME=orders-warehouse ${WCMD[*]} &"
    echo "   \$ OTEL_SERVICE_NAME=orders-front ${FCMD[*]}"
    OTEL_SERVICE_NAME=orders-warehouse "${WCMD[@]}" >"$OUT/orders-warehouse.out" 2>&1 &
    WPID=$!
    OTEL_SERVICE_NAME=orders-front "${FCMD[@]}" 2>&1 | sed 's/^/   front     | /'
    wait $WPID
    sed 's/^/   warehouse | /' "$OUT/orders-warehouse.out"
    FRONT=$(ls "$ORUN"/front/traces-*.otlp.jsonl 2>/dev/null | head -1)
    BACK=$(ls "$ORUN"/warehouse/traces-*.otlp.jsonl 2>/dev/null | head -1)
    OPROF=$(ls "$ORUN"/front/profiles/*.pb.gz 2>/dev/null | head -1)
    if [ -n "$FRONT" ] && [ -n "$BACK" ] && [ -n "$OPROF" ]; then
        echo "   one order's trace, across the two processes:"
        rm -f "$OUT/orders-trace-id"
        python3 - "$FRONT" "$BACK" "$OUT/orders-trace-id" <<'PY'
import collections, json, sys
spans = []
for path in sys.argv[1:3]:
    for line in open(path):
        for rs in json.loads(line).get("resourceSpans", []):
            svc = next((a["value"].get("stringValue", "") for a in rs.get("resource", {}).get("attributes", [])
                        if a["key"] == "service.name"), "")
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in s.get("attributes", [])}
                    spans.append(dict(s, svc=svc, attrs=attrs))
by = collections.defaultdict(list)
for s in spans:
    by[s["traceId"]].append(s)
trace = max(by.values(), key=lambda ss: (len({s["svc"] for s in ss}), len(ss)))
kids = collections.defaultdict(list)
ids = {s["spanId"] for s in trace}
for s in trace:
    kids[s.get("parentSpanId", "") if s.get("parentSpanId", "") in ids else ""].append(s)
kinds = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
keys = ("db.system.name", "db.query.text", "server.port", "messaging.system", "messaging.destination.name")
def show(pid, depth):
    for s in sorted(kids[pid], key=lambda s: int(s["startTimeUnixNano"])):
        us = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1000
        extra = " ".join("%s=%s" % (k, s["attrs"][k]) for k in keys if k in s["attrs"])
        print("     %-17s %s%-32s %-8s %8.0f us  %s" % (s["svc"], "  " * depth, s["name"], kinds.get(s.get("kind"), ""), us, extra))
        show(s["spanId"], depth + 1)
print("     trace %s: %d spans in %d processes" % (trace[0]["traceId"], len(trace), len({s["svc"] for s in trace})))
show("", 0)
open(sys.argv[3], "w").write(trace[0]["traceId"])
PY
        # the report draws the trace printed above
        python3 tools/report/report.py --assets "$ASSETS" --profile "$OPROF" --traces "$FRONT" "$BACK" \
            --root "orders-front: POST /orders" --trace-id "$(cat "$OUT/orders-trace-id" 2>/dev/null)" \
            --title "clrmux demo: orders, a database and a queue" \
            --out "$OUT/orders-report.html" | sed 's/^/   /' && ORDERS_HTML="$OUT/orders-report.html"
    else
        loud "the orders service left no spans or profile (see $ORUN): no database and queue spans"
    fi
    set -e
fi
echo
echo "Open file://$ROOT/$OUT/report.html in a browser."
if [ -n "$ORDERS_HTML" ]; then
    echo "The orders service's request across processes, with its database and queue spans: file://$ROOT/$ORDERS_HTML"
else
    echo "(no orders report: a server or the orders service failed, said above)"
fi
