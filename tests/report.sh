#!/usr/bin/env bash
# The HTML report (tools/report/report.py), as a person sees it: the demo's service runs under
# `clrmux run --trace ... --profile`, the report is written and rendered in headless Chromium;
# the page's own list of what it drew (after its scripts ran) must hold the expected method
# names, and OCR (tesseract) of the screenshot of the two pictures must read them too; and a
# trace across two span files (two processes, as make demo's orders service) is one request.
# Prints one line per check and a closing "N passed, N failed" line.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-report.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2" | head -30; }
missing=""
for c in dotnet go npm chromium tesseract python3; do command -v $c >/dev/null 2>&1 || missing="$missing $c"; done
if [ -n "$missing" ]; then
    echo "## not on PATH:$missing: the report test did NOT run (scripts/setup.sh test installs them) ##"
    [ "${CI:-}" = "true" ] && { echo "CI=true: that is an error"; exit 1; }
    exit 0
fi

# report.py refuses missing inputs with a message
out=$(python3 tools/report/report.py --profile "$WORK/none.pb.gz" --traces "$WORK/none.jsonl" --out "$WORK/x.html" --assets "$WORK" 2>&1)
[ $? = 1 ] && grep -q "install tools/report/package.json with npm first" <<<"$out" && ok "report.py without its JS libraries: says how to get them, exit 1" \
    || bad "report.py without assets" "$out"
ASSETS=$(tools/report/install.sh) && ok "npm ci of tools/report (d3, d3-flame-graph) into build/report" || { bad "npm ci"; ASSETS=/nonexistent; }
out=$(python3 tools/report/report.py --profile "$WORK/none.pb.gz" --traces "$WORK/none.jsonl" --out "$WORK/x.html" --assets "$ASSETS" 2>&1)
[ $? = 1 ] && grep -q "no profile at $WORK/none.pb.gz" <<<"$out" && ok "report.py with a missing profile: exit 1" || bad "report.py missing profile" "$out"

demo/build.sh shop || { echo "building demo/shop failed"; exit 1; }
RUN="$WORK/run"
out=$(build/clrmux run --output-dir "$RUN" --profile --trace 'shop!Shop.OrderService::HandleRequestAsync' \
    --trace 'shop!Shop.OrderService::PriceOrder' --trace 'shop!Shop.Pricing::ComputeTax' --trace 'shop!Shop.OrderService::RenderReceipt' \
    --trace 'shop!Shop.Inventory::ReserveAsync' -- dotnet build/demo/shop/shop.dll 3 2 2>&1) # 3 s: enough wall samples to draw Thread.Sleep on a loaded machine (2 s drew it in all but one CI run)
PROF=$(ls "$RUN"/profiles/*.pb.gz 2>/dev/null | head -1)
SPANS=$(ls "$RUN"/traces-*.otlp.jsonl 2>/dev/null | head -1)
[ -n "$PROF" ] && [ -n "$SPANS" ] && ok "the shop service ran under clrmux run: a profile and spans" || bad "shop under clrmux run" "$out"

HTML="$WORK/report.html"
out=$(python3 tools/report/report.py --assets "$ASSETS" --profile "$PROF" --traces "$SPANS" --out "$HTML" 2>&1)
[ $? = 0 ] && [ -s "$HTML" ] && ok "report.py wrote $(basename "$HTML") ($(wc -c <"$HTML") bytes)" || bad "report.py" "$out"
# the page is self-contained: no script or style from elsewhere
grep -qE '<script[^>]+src=|<link[^>]+href=' "$HTML" && bad "the report loads files from elsewhere" || ok "the report is one self-contained file"
# the flame graph's total is pprof's own total
python3 - "$HTML" "$PROF" <<'PY' && ok "flame graph total = pprof's 'Total samples'; wall time there too" || bad "flame graph total differs from pprof's"
import json, os, re, subprocess, sys
page = open(sys.argv[1]).read()
data = json.loads(re.search(r"const DATA = (\{.*?\});\n", page).group(1).replace("<\\/", "</"))
top = subprocess.run(["go", "tool", "pprof", "-top", "-sample_index=cpu", sys.argv[2]], capture_output=True, text=True,
                     env=dict(os.environ, GOTOOLCHAIN="local", HOME=os.environ.get("HOME") or "/tmp")).stdout
m = re.search(r"Total samples = ([0-9.]+)(ns|us|ms|s)\b", top)
unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]
total = float(m.group(1)) * unit
flame = data["flames"]["cpu"]["tree"]["value"]
print("   flame %.0f ns, pprof %.0f ns; sample types: %s" % (flame, total, ", ".join(data["flames"])))
sys.exit(0 if abs(flame - total) <= 0.01 * total + 1e4 and "wall" in data["flames"] else 1)
PY
# the timeline is one request: one trace, every span inside its root, children below it
python3 - "$HTML" <<'PY' && ok "the timeline holds one async request: nested spans inside the root's interval, RenderReceipt (after its await) among them" || bad "timeline data"
import json, re, sys
page = open(sys.argv[1]).read()
r = json.loads(re.search(r"const DATA = (\{.*?\});\n", page).group(1).replace("<\\/", "</"))["request"]
spans = r["spans"]
root = [s for s in spans if s["depth"] == 0]
ok = (len(root) == 1 and root[0]["name"] == "Shop.OrderService.HandleRequestAsync" and len(spans) >= 3
      and all(r["start"] <= s["start"] <= s["end"] <= r["start"] + r["duration"] for s in spans)
      and {s["name"] for s in spans if s["depth"] == 1} & {"Shop.OrderService.ParseOrder", "Shop.OrderService.PriceOrder",
                                                             "Shop.Inventory.ReserveAsync", "Shop.OrderService.RenderReceipt"}
      # the async request: RenderReceipt runs after the await (a pool thread), inside its span
      and "Shop.OrderService.RenderReceipt" in {s["name"] for s in spans if s["depth"] == 1})
print("   %d spans: %s" % (len(spans), ", ".join(sorted({s["name"] for s in spans}))))
sys.exit(0 if ok else 1)
PY

# --trace-id draws the trace it names (the demo draws the trace it printed); an unknown one is refused
TID=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                if s["name"] == "Shop.OrderService.HandleRequestAsync":
                    print(s["traceId"]); sys.exit(0)' "$SPANS")
out=$(python3 tools/report/report.py --assets "$ASSETS" --profile "$PROF" --traces "$SPANS" --trace-id "$TID" --out "$WORK/tid.html" 2>&1)
got=$(python3 -c '
import json, re, sys
page = open(sys.argv[1]).read()
print(json.loads(re.search(r"const DATA = (\{.*?\});\n", page).group(1).replace("<\\/", "</"))["request"]["traceId"])' "$WORK/tid.html" 2>/dev/null)
out2=$(python3 tools/report/report.py --assets "$ASSETS" --profile "$PROF" --traces "$SPANS" --trace-id 0123456789abcdef0123456789abcdef --out "$WORK/tid2.html" 2>&1)
rc2=$?
[ -n "$TID" ] && [ "$got" = "$TID" ] && [ $rc2 = 1 ] && grep -q "no trace 0123456789abcdef0123456789abcdef" <<<"$out2" \
    && ok "report.py --trace-id draws the trace it names (the first request, $TID); an unknown id: exit 1" \
    || bad "report.py --trace-id" "wanted $TID, drew $got; $out; unknown id: rc $rc2 $out2"

# render the two pictures alone (report.html#pictures), at 2 device pixels per CSS pixel for OCR
if tools/report/render.sh "$HTML" "$WORK/pictures.png" "$WORK/dom.html" pictures 2; then
    ok "headless Chromium rendered the report ($(wc -c <"$WORK/pictures.png") byte screenshot)"
else
    bad "headless Chromium did not render the report"
fi
mkdir -p build/test && cp "$WORK/pictures.png" build/test/report-pictures.png 2>/dev/null
python3 - "$WORK/dom.html" <<'PY' && ok "after its scripts ran, the page drew the method names in the flame graph and the timeline" || bad "the rendered page lacks method names"
import html, json, re, sys
dom = open(sys.argv[1]).read()
m = re.search(r'data-rendered="([^"]*)"', dom)
if not m:
    print("   no data-rendered: the page's scripts did not run to the end"); sys.exit(1)
r = json.loads(html.unescape(m.group(1)))
# the request handler, and under it at least one of the methods it calls
callees = {"Shop.OrderService.PriceOrder", "Shop.Pricing.ComputeTax", "Shop.Pricing.ApplyDiscounts", "Shop.Inventory.ReserveAsync"}
children = {"Shop.OrderService.ParseOrder", "Shop.OrderService.PriceOrder", "Shop.Inventory.ReserveAsync",
            "Shop.Pricing.ComputeTax", "Shop.Pricing.ApplyDiscounts", "Shop.OrderService.RenderReceipt"}
print("   flame graph labels: %d, e.g. %s" % (len(r["flame"]), ", ".join(sorted(n for n in r["flame"] if n.startswith("Shop."))[:5])))
print("   timeline labels: %s" % ", ".join(r["timeline"]))
sys.exit(0 if "Shop.OrderService.HandleRequestAsync" in r["flame"] and callees & set(r["flame"])
         and "Shop.OrderService.HandleRequestAsync" in r["timeline"] and children & set(r["timeline"]) else 1)
PY
# report.html#pictures,wall opens on the wall-time flame graph
if tools/report/render.sh "$HTML" "$WORK/wall.png" "$WORK/wall-dom.html" pictures,wall; then
    python3 - "$WORK/wall-dom.html" <<'PY' && ok "report.html#wall opens the wall-time flame graph (Thread.Sleep under Inventory.ReserveAsync)" || bad "the wall-time view"
import html, json, re, sys
m = re.search(r'data-rendered="([^"]*)"', open(sys.argv[1]).read())
r = json.loads(html.unescape(m.group(1))) if m else {}
print("   sample type %s, %d flame labels" % (r.get("sampleType"), len(r.get("flame", []))))
sys.exit(0 if r.get("sampleType") == "wall" and {"Shop.Inventory.ReserveAsync", "System.Threading.Thread.Sleep"} <= set(r["flame"]) else 1)
PY
else
    bad "headless Chromium did not render report.html#pictures,wall"
fi
# what a person sees: OCR of the pictures (frames and spans on coloured bars, read loosely): the names read
# with tesseract's global threshold or with Sauvola's local one (thresholding_method=2), which separates dark
# text from each bar's own colour where the global one lost the names on darker bars (1 run in 3 read only
# 2 names). The timeline's heading, which quotes the root's name, is not counted.
ocr=$(for m in 0 2; do tesseract "$WORK/pictures.png" - --psm 11 -c thresholding_method=$m 2>/dev/null; done \
    | grep -v 'percentile of' | tr -d ' .,|' | tr 'A-Z' 'a-z')
found=$(grep -oE "handlerequest|priceorder|computetax|applydiscounts|parseorder|renderreceipt|reserve|threadsleep|startcallback" <<<"$ocr" | sort -u | tr '\n' ' ')
n=$(wc -w <<<"$found")
[ "$n" -ge 3 ] && ok "OCR of the screenshot of the flame graph and timeline reads $n method names: $found" \
    || bad "OCR of the pictures reads only $n method names ($found)" "$ocr"

# several span files (one per process: make demo's orders service): a trace that crosses them is
# one request, drawn whole on one axis, each span named with its service
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
def line(svc, spans):
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": svc}}]},
        "scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": i, "parentSpanId": p, "name": n,
                                   "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t1)} for i, p, n, t0, t1 in spans]}]}]})
open(w + "/front.jsonl", "w").write(line("front", [("01" * 8, "", "POST /orders", 1000, 2000), ("02" * 8, "01" * 8, "publish orders", 1500, 1600)]) + "\n")
open(w + "/back.jsonl", "w").write(line("back", [("03" * 8, "02" * 8, "fetch orders", 5000, 9000)]) + "\n")
PY
out=$(python3 tools/report/report.py --assets "$ASSETS" --profile "$PROF" --traces "$WORK/front.jsonl" "$WORK/back.jsonl" \
    --root "front: POST /orders" --out "$WORK/two.html" 2>&1)
python3 - "$WORK/two.html" <<'PY' && ok "report.py with two span files: one request across both, each span with its service, the axis to the last span's end" \
    || bad "report.py with two span files" "$out"
import json, re, sys
r = json.loads(re.search(r"const DATA = (\{.*?\});\n", open(sys.argv[1]).read()).group(1).replace("<\\/", "</"))["request"]
names = [(s["name"], s["depth"]) for s in r["spans"]]
print("   " + ", ".join("%s (depth %d)" % n for n in names))
sys.exit(0 if names == [("front: POST /orders", 0), ("front: publish orders", 1), ("back: fetch orders", 2)]
         and r["extent"] == 8000 and r["duration"] == 1000 else 1)
PY

echo "report: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
