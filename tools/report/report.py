#!/usr/bin/env python3
"""Writes clrmux's HTML report: a flame graph of a CPU profile and a timeline of the traced spans
of one request, in one self-contained file a person opens in a browser (no server, no network).

    tools/report/report.py --profile P.pb.gz --traces T.otlp.jsonl [T2.otlp.jsonl...] --out report.html
                           [--sample-index cpu] [--root NAME] [--trace-id ID] [--assets DIR]

- The profile is read by pprof itself (`go tool pprof -traces`, one stack per sample), so the
  report shows exactly the stacks and values pprof shows.
- The flame graph is drawn by d3-flame-graph, the timeline with d3 (both from npm; DIR is the
  node_modules folder where tools/report/package.json was installed, default
  build/report/node_modules). Both are inlined into the page.
- The request: among the traces (spans sharing a traceId) whose root span is NAME (default:
  the most common root span name), the one at the 90th percentile of duration; its spans are
  drawn on a time axis, one row per nesting depth, failed spans in red with their exception.
  --trace-id ID draws that trace instead (a 32-hex-digit W3C trace id; exit 1 if no span has it).
  Several span files (one per process) are read as one: a request's trace crosses processes
  (its spans' parents are in another file), each span named with its service.name.
- The page switches the flame graph between the sample types it holds (--sample-index, then
  those of --also present in the profile). report.html#wall opens on wall time;
  report.html#pictures (or #pictures,wall) shows only the two pictures (tests/report.sh reads
  them with OCR). After drawing, the page lists the frame and span labels it drew wide enough
  to read in <body data-rendered='{"sampleType": ..., "flame": [...], "timeline": [...]}'>.

Exit status 1 with a message when an input is missing or unreadable.
"""
import argparse
import collections
import html
import json
import os
import re
import subprocess
import sys

UNITS = {"ns": 1, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9, "": 1}
SEPARATOR = re.compile(r"^-+\+-+$")
VALUE_LINE = re.compile(r"^\s*([0-9.]+)(ns|us|\u00b5s|ms|s|m|h)?\s{2,}(\S.*)$")


def die(msg):
    print("report.py: " + msg, file=sys.stderr)
    sys.exit(1)


def pprof_stacks(profile, sample_index, required=True):
    """(header lines, [(value_ns, [root frame, ..., leaf frame])]) from `go tool pprof -traces`;
    None when the profile has no such sample type and it is not required."""
    env = dict(os.environ, GOTOOLCHAIN="local", HOME=os.environ.get("HOME") or "/tmp")
    try:
        out = subprocess.run(["go", "tool", "pprof", "-traces", "-sample_index=" + sample_index, profile],
                             capture_output=True, text=True, env=env, timeout=120)
    except FileNotFoundError:
        die("`go` is not on PATH (Debian package golang-go): pprof reads the profile")
    if out.returncode != 0:
        if not required:
            return None
        die("go tool pprof -traces %s failed: %s" % (profile, out.stderr.strip()))
    header, stacks, cur = [], [], None
    seen_separator = False
    for line in out.stdout.splitlines():
        if SEPARATOR.match(line):
            if cur and cur[1]:
                stacks.append((cur[0], list(reversed(cur[1]))))
            cur, seen_separator = None, True
            continue
        if not seen_separator:
            header.append(line)
            continue
        m = VALUE_LINE.match(line)
        if m and cur is None:
            cur = (float(m.group(1)) * UNITS[m.group(2) or ""], [m.group(3).strip()])
        elif cur is not None and line.strip():
            cur[1].append(line.strip())
        # label lines ("thread id: 123") come before the value line: skipped
    if cur and cur[1]:
        stacks.append((cur[0], list(reversed(cur[1]))))
    return header, stacks


def flame_tree(stacks):
    root = {"name": "all", "value": 0, "children": {}}
    for value, frames in stacks:
        root["value"] += value
        node = root
        for f in frames:
            child = node["children"].get(f)
            if child is None:
                child = node["children"][f] = {"name": f, "value": 0, "children": {}}
            child["value"] += value
            node = child

    def finish(n):
        return {"name": n["name"], "value": n["value"],
                "children": [finish(c) for c in sorted(n["children"].values(), key=lambda c: c["name"])]}
    return finish(root)


def read_spans(path):
    spans, service = [], ""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            for rs in json.loads(line).get("resourceSpans", []):
                for a in rs.get("resource", {}).get("attributes", []):
                    if a.get("key") == "service.name":
                        service = a["value"].get("stringValue", service)
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        attrs = {a["key"]: next(iter(a["value"].values())) for a in s.get("attributes", [])}
                        spans.append({
                            "service": service, "trace": s["traceId"], "id": s["spanId"], "parent": s.get("parentSpanId", ""),
                            "name": s["name"], "start": int(s["startTimeUnixNano"]), "end": int(s["endTimeUnixNano"]),
                            "thread": str(attrs.get("thread.id", "")),
                            "error": s.get("status", {}).get("code") == 2,
                            "message": s.get("status", {}).get("message", ""),
                            "exception": str(attrs.get("exception.type", "")),
                        })
    return service, spans


def pick_request(spans, root_name, trace_id=""):
    """One request: the trace trace_id if given, else among the traces whose root span is root_name
    (default: the most common root name), the one at the 90th percentile of duration: slow, but not
    the first call that paid for JIT compilation. Returns (root, [its spans with depth], number of
    such requests), or (None, None, 0) when there is none."""
    by_trace = collections.defaultdict(list)
    for s in spans:
        by_trace[s["trace"]].append(s)
    roots = []
    for tid, ss in by_trace.items():
        ids = {s["id"] for s in ss}
        rs = [s for s in ss if not s["parent"] or s["parent"] not in ids]
        if len(rs) == 1:
            roots.append((rs[0], ss))
    if trace_id:
        roots = [(r, ss) for r, ss in roots if r["trace"] == trace_id]
    if not roots:
        return None, None, 0
    if not root_name:
        root_name = collections.Counter(r["name"] for r, _ in roots).most_common(1)[0][0]
    candidates = [(r, ss) for r, ss in roots if r["name"] == root_name] or roots
    candidates.sort(key=lambda rs: rs[0]["end"] - rs[0]["start"])
    root, ss = candidates[min(len(candidates) - 1, int(len(candidates) * 0.9))]
    depth = {root["id"]: 0}
    by_id = {s["id"]: s for s in ss}

    def d(s):
        if s["id"] not in depth:
            p = by_id.get(s["parent"])
            depth[s["id"]] = d(p) + 1 if p else 0
        return depth[s["id"]]
    out = sorted(({**s, "depth": d(s)} for s in ss), key=lambda s: (s["start"], s["depth"]))[:2000]
    return root, out, len(candidates)


def fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("\u00b5s", 1e3)):
        if ns >= div:
            return "%.3g %s" % (ns / div, unit)
    return "%d ns" % ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--traces", required=True, nargs="+",
                    help="span files (OTLP JSON lines); several: one process each, traces joined by traceId")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sample-index", default="cpu",
                    help="the sample type of the flame graph (cpu, wall, alloc-size, ...)")
    ap.add_argument("--also", default="wall",
                    help="comma-separated further sample types the page can switch to, when present")
    ap.add_argument("--root", default="")
    ap.add_argument("--trace-id", default="", help="draw this trace (32 hex digits) as the request")
    ap.add_argument("--title", default="")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--assets", default=os.path.join(here, "..", "..", "build", "report", "node_modules"))
    a = ap.parse_args()

    assets = {}
    for key, rel in (("d3", "d3/dist/d3.min.js"), ("flamegraph", "d3-flame-graph/dist/d3-flamegraph.umd.min.js"),
                     ("css", "d3-flame-graph/dist/d3-flamegraph.css")):
        p = os.path.join(a.assets, rel)
        try:
            with open(p) as f:
                assets[key] = f.read()
        except OSError as e:
            die("%s: %s (install tools/report/package.json with npm first: make demo does)" % (p, e.strerror))
    if not os.path.isfile(a.profile):
        die("no profile at %s" % a.profile)
    for t in a.traces:
        if not os.path.isfile(t):
            die("no span file at %s" % t)

    header, stacks = pprof_stacks(a.profile, a.sample_index)
    tree = flame_tree(stacks)
    flames = {a.sample_index: {"tree": tree, "samples": len(stacks)}}
    for extra in [x.strip() for x in a.also.split(",") if x.strip() and x.strip() != a.sample_index]:
        got = pprof_stacks(a.profile, extra, required=False)
        if got and got[1]:
            flames[extra] = {"tree": flame_tree(got[1]), "samples": len(got[1])}
    service, spans = "", []
    for t in a.traces:
        svc, ss = read_spans(t)
        service, spans = service or svc, spans + ss
    if len({s["service"] for s in spans}) > 1:  # spans of several processes: each says whose it is
        for s in spans:
            s["name"] = "%s: %s" % (s["service"], s["name"])
    root, request, ncand = pick_request(spans, a.root, a.trace_id.lower())
    if a.trace_id and root is None:
        sys.exit("report.py: no trace %s with one root span in %s" % (a.trace_id, " ".join(a.traces)))
    names = collections.Counter(s["name"] for s in spans)

    data = {
        "sampleIndex": a.sample_index,
        "flames": flames,
        "request": None if root is None else {
            "traceId": root["trace"], "name": root["name"], "thread": root["thread"],
            "start": root["start"], "duration": root["end"] - root["start"], "of": ncand,
            "extent": max(s["end"] for s in request) - root["start"],
            "spans": [{k: s[k] for k in ("name", "start", "end", "depth", "error", "exception", "message")}
                      for s in request],
        },
    }
    title = a.title or "clrmux report: %s" % (service or os.path.basename(a.profile))
    pprof_header = "\n".join(l for l in header if l.strip())
    rows = "".join("<tr><td>%s</td><td class=num>%d</td></tr>" % (html.escape(n), c)
                   for n, c in sorted(names.items(), key=lambda kv: -kv[1]))
    req_rows = ""
    if root is not None:
        req_rows = "".join(
            "<tr%s><td style='padding-left:%dpx'>%s</td><td class=num>+%s</td><td class=num>%s</td><td>%s</td></tr>" % (
                " class=err" if s["error"] else "", 6 + 14 * s["depth"], html.escape(s["name"]),
                fmt_ns(s["start"] - root["start"]), fmt_ns(s["end"] - s["start"]),
                html.escape(s["exception"] or s["message"] or ("error" if s["error"] else "")))
            for s in request[:200])
    req_title = "no traced request" if root is None else (
        "One request, %s: trace %s on thread %s, %s, %d spans" % (
            html.escape(root["name"]) if a.trace_id else
            "the 90th percentile of %d %s requests" % (ncand, html.escape(root["name"])),
            root["trace"], html.escape(root["thread"]), fmt_ns(root["end"] - root["start"]), len(request)))

    page = TEMPLATE
    for k, v in {
        "@TITLE@": html.escape(title),
        "@CSS@": assets["css"],
        "@D3@": assets["d3"],
        "@FLAMEGRAPH@": assets["flamegraph"],
        "@DATA@": json.dumps(data, separators=(",", ":")).replace("</", "<\\/"),
        "@PPROF@": html.escape(pprof_header),
        "@TOTAL@": fmt_ns(tree["value"]),
        "@NSTACKS@": str(len(stacks)),
        "@SAMPLEINDEX@": html.escape(a.sample_index),
        "@PROFILE@": html.escape(os.path.abspath(a.profile)),
        "@TRACES@": html.escape(", ".join(os.path.abspath(t) for t in a.traces)),
        "@REQTITLE@": req_title,
        "@REQROWS@": req_rows,
        "@NAMEROWS@": rows,
        "@NSPANS@": str(len(spans)),
    }.items():
        page = page.replace(k, v)
    with open(a.out, "w") as f:
        f.write(page)
    print("report: %s (flame graph of %s %s in %d stacks; %d spans, request %s)" % (
        a.out, fmt_ns(tree["value"]), a.sample_index, len(stacks), len(spans),
        root["trace"] if root else "none"))


TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>@TITLE@</title>
<style>
@CSS@
body { font: 14px/1.4 "DejaVu Sans", sans-serif; margin: 18px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 6px; } h2 { font-size: 16px; margin: 22px 0 6px; }
.meta { color: #555; font-size: 12px; } pre.meta { margin: 4px 0; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: 12px; } td, th { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } tr.err td { color: #b00020; }
#flame { width: 1200px; } #timeline text { font-size: 11px; fill: #111; pointer-events: none; }
#timeline rect.span { stroke: #fff; } #timeline rect.err { fill: #e57373; }
.cols { display: flex; gap: 32px; align-items: flex-start; }
body.pictures .meta, body.pictures .cols { display: none; }
</style></head>
<body>
<h1>@TITLE@</h1>
<div class="meta">profile <code>@PROFILE@</code> &middot; spans <code>@TRACES@</code></div>
<pre class="meta">@PPROF@</pre>

<h2>Flame graph of the <select id="sample-type"></select> profile
(<span id="flame-total">@TOTAL@ in @NSTACKS@ samples</span>; click a frame to zoom)</h2>
<div id="flame"></div>

<h2 id="request-title">@REQTITLE@</h2>
<svg id="timeline" width="1200"></svg>
<div class="cols">
<div><h2>Spans of this request</h2>
<table id="request-spans"><tr><th>method</th><th>start</th><th>duration</th><th>exception</th></tr>@REQROWS@</table></div>
<div><h2>All spans (@NSPANS@)</h2>
<table id="span-counts"><tr><th>method</th><th>spans</th></tr>@NAMEROWS@</table></div>
</div>

<script>@D3@</script>
<script>@FLAMEGRAPH@</script>
<script>
const DATA = @DATA@;
// report.html#pictures shows only the pictures; #wall (or #pictures,wall) opens that sample type
const VIEW = location.hash.slice(1).split(",");
if (VIEW.includes("pictures")) document.body.classList.add("pictures");
const START_TYPE = VIEW.find(v => v in DATA.flames) || DATA.sampleIndex;
function fmt(ns) {
  if (ns >= 1e9) return (ns / 1e9).toPrecision(3) + " s";
  if (ns >= 1e6) return (ns / 1e6).toPrecision(3) + " ms";
  if (ns >= 1e3) return (ns / 1e3).toPrecision(3) + " \u00b5s";
  return ns + " ns";
}
// the flame graph: d3-flame-graph, one frame per pprof location, width = sampled value
(function () {
  const first = DATA.flames[START_TYPE].tree;
  d3.select("#flame-total").text(fmt(first.value) + " in " + DATA.flames[START_TYPE].samples + " samples");
  let total = first.value || 1;
  const chart = flamegraph.default()
    .width(1200).cellHeight(18).minFrameSize(1).transitionDuration(0).sort(true)
    .title("")
    .setLabelHandler(d => d.data.name + " \u2014 " + fmt(d.value) + " (" + (100 * d.value / total).toFixed(1) + "%)")
    .setColorHue("warm");
  d3.select("#flame").datum(first).call(chart);
  // the sample types the page holds (cpu first; wall time shows where threads wait)
  const select = d3.select("#sample-type");
  select.selectAll("option").data(Object.keys(DATA.flames)).enter().append("option")
    .attr("value", k => k).property("selected", k => k === START_TYPE).text(k => k);
  select.on("change", function () {
    const f = DATA.flames[this.value];
    total = f.tree.value || 1;
    d3.select("#flame-total").text(fmt(f.tree.value) + " in " + f.samples + " samples");
    chart.update(f.tree);
  });
})();
// the timeline of one request: d3, one row per nesting depth, x = time since the request began
(function () {
  const R = DATA.request, svg = d3.select("#timeline");
  if (!R) { svg.attr("height", 20).append("text").attr("x", 4).attr("y", 14).text("no spans"); return; }
  const rowH = 22, top = 24, left = 4, width = 1160;
  const depth = d3.max(R.spans, s => s.depth) + 1;
  svg.attr("height", top + depth * rowH + 8);
  const x = d3.scaleLinear().domain([0, Math.max(R.duration, R.extent || 0)]).range([left, width]);
  svg.append("g").attr("transform", "translate(0," + (top - 4) + ")")
     .call(d3.axisTop(x).ticks(10).tickFormat(v => fmt(v)));
  const color = d3.scaleOrdinal(d3.schemeSet3.filter(c => c !== "#fb8072"));  // light; red is for errors
  const g = svg.selectAll("g.span").data(R.spans).enter().append("g").attr("class", "span")
     .attr("transform", s => "translate(" + x(s.start - R.start) + "," + (top + s.depth * rowH) + ")");
  g.append("rect").attr("class", s => s.error ? "span err" : "span")
     .attr("width", s => Math.max(1, x(s.end - R.start) - x(s.start - R.start))).attr("height", rowH - 2)
     .attr("fill", s => s.error ? null : color(s.name))
     .append("title").text(s => s.name + " \u2014 " + fmt(s.end - s.start) + (s.exception ? " \u2014 " + s.exception : ""));
  g.append("clipPath").attr("id", (s, i) => "clip" + i).append("rect")
     .attr("width", s => Math.max(1, x(s.end - R.start) - x(s.start - R.start))).attr("height", rowH - 2);
  g.append("text").attr("x", 3).attr("y", rowH - 8).attr("clip-path", (s, i) => "url(#clip" + i + ")")
     .text(s => s.name.replace(/^.*\.(\w+\.\w+)$/, "$1") + " " + fmt(s.end - s.start));
})();
// what was drawn wide enough to read (a frame or span at least 40 px wide), for tests and tools:
// <body data-rendered='{"flame": [names], "timeline": [names]}'>
(function () {
  // (the flame graph animates its rects: its label boxes have their final width at once)
  const wide = (sel, box, name) => [...new Set([...document.querySelectorAll(sel)]
    .filter(g => g.querySelector(box) && +g.querySelector(box).getAttribute("width") >= 40).map(name))];
  document.body.dataset.rendered = JSON.stringify({
    sampleType: document.getElementById("sample-type").value,
    flame: wide("#flame g.frame", "foreignObject", g => g.getAttribute("name")),
    timeline: wide("#timeline g.span", "rect", g => d3.select(g).datum().name),
  });
})();
</script>
</body></html>
"""

if __name__ == "__main__":
    main()
