#!/usr/bin/env bash
# make demo: runs the sample .NET app under clrmux with loader.conf.example and prints, per
# child, the callbacks it received, the spans and the top of the CPU profile; then runs a small
# order service (demo/shop) under the launcher (`clrmux run --trace ... --profile`) and ends by
# writing build/demo/report.html: a flame graph of its CPU profile and the timeline of one
# request (tools/report/report.py), with a screenshot (build/demo/report.png) when Chromium is
# installed.
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
demo/shop/build.sh
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
echo
echo "Open file://$ROOT/$OUT/report.html in a browser."
