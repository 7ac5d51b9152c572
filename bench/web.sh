#!/usr/bin/env bash
# bench/web.sh: what tracing a real service costs (issue 22), measured side by side in one run.
#   1. requests/s of the shop's /bench endpoint (tests/clr/otelapps/shop: an async method that
#      calls the back service over HTTP; front and back), under wrk on loopback, for:
#        none    no profiler, no SDK
#        clrmux  both under clrmux's tracer (its agent: ASP.NET Core and HttpClient spans, the
#                async method's span), OTLP/HTTP protobuf to a local sink
#        sdk     no profiler; the OpenTelemetry SDK 1.20 configured by hand in the app (ASP.NET
#                Core and HttpClient instrumentation, batch processor, OTLP exporter to the same
#                local sink)
#      rounds interleaved; medians of requests/s and of the CPU time front and back used per
#      request (/proc/PID/stat over the timed run: independent of what else the machine runs);
#      each config's cost = its CPU per request / none's - 1.
#   2. the same request in one process, with no socket (the shop's SHOP_ROLE=inproc: TestServer,
#      the call to back answered in memory), CPU per request of the whole process, the same
#      configurations: the figure without the network, the kernel and a second process, steadier
#      than part 1's (WEB_INPROC=0 skips it, WEB_WRK=0 part 1; WEB_INPROC_SECONDS 6, WEB_INPROC_TASKS 4)
#   3. ns per call in-process (tests/clr/apps/asyncbench): a synchronous method, an async method
#      that completes at once, one that awaits Task.Yield(), each untraced and traced.
#   4. ns per span the export thread spends encoding such spans as OTLP protobuf (bench/xpb.c):
#      libclrmux_otlp.so's direct encoder against the same spans built with protobuf-c by hand.
# Each config is warmed up first (WEB_WARMUP seconds of the same load) until the JIT is quiet:
# with 5 s, tier-1 compilation still took a fifth of the front's CPU in the timed run, for
# every config (perf: libclrjit.so 19-28%; 3% after 25 s), and swamped the difference.
# For steadier figures, export DOTNET_ThreadPool_UnfairSemaphoreSpinLimit=0 first (every process
# then waits instead of spinning between requests: none's CPU per request moved by 1 us across rounds
# instead of 15). Not a timed test. Knobs: WEB_ROUNDS (3), WEB_SECONDS (8), WEB_WARMUP (20), WEB_CONNS (16), WEB_RATE (paced load),
# ASYNC_CALLS (200000), WEB_ASYNC=0 (skip part 3), WEB_XPB=0 (skip part 4), WEB_CONFIGS ("none clrmux sdk"; a breakdown adds
# clrmux-notrace: no method span, clrmux-noact: no request or call span, clrmux-noagent: agent = false,
# clrmux-unsampled: sample_ratio = 0 (the requests' and calls' events, context and traceparent, nothing recorded),
# clrmux-idle: the tracer loaded with nothing to record, clrmux-base: the build in WEB_BASE, a
# folder with another libclrmux.so and its agent, for a before/after in one run).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
ROUNDS=${WEB_ROUNDS:-3} SECS=${WEB_SECONDS:-8} CONNS=${WEB_CONNS:-16} WARMUP=${WEB_WARMUP:-20}
[ "${WEB_WRK:-1}" = 0 ] || command -v wrk >/dev/null || { echo "bench/web.sh: wrk is not installed (scripts/setup.sh bench; WEB_WRK=0 skips part 1, the one that needs it)"; exit 1; }
command -v dotnet >/dev/null || { echo "bench/web.sh: dotnet is not on PATH"; exit 1; }
for a in shop; do tests/clr/build-otelapp.sh $a; done
tests/clr/build-apps.sh >/dev/null
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-webbench.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
read -r P1 P2 P3 P4 < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
cat >"$WORK/sink.py" <<'PYEOF'
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(srv.server_address[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
PYEOF
python3 "$WORK/sink.py" "$WORK/sinkport" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/sinkport" ] && break; sleep 0.1; done
SINK=http://127.0.0.1:$(cat "$WORK/sinkport")
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
CONFIGS=${WEB_CONFIGS:-none clrmux sdk}
for cfg in $CONFIGS; do
    case $cfg in # the breakdown's configurations: clrmux with a part left out
    clrmux|clrmux-base) extra="trace = shop!Shop.Store::BenchAsync" ;;           # clrmux-base: WEB_BASE's build
    clrmux-notrace) extra="" ;;                                                      # no method span
    clrmux-noact) extra=$'trace = shop!Shop.Store::BenchAsync\ninstrument = none\nactivity_sources = none' ;; # no Activity span
    clrmux-noagent) extra=$'trace = shop!Shop.Store::BenchAsync\nagent = false' ;; # no managed agent
    clrmux-unsampled) extra=$'trace = shop!Shop.Store::BenchAsync\nsample_ratio = 0' ;; # everything but recording and export
    clrmux-idle) extra=$'agent = false\ninstrument = none\nactivity_sources = none' ;; # the tracer loaded, nothing traced
    none|sdk) continue ;;
    *) echo "bench/web.sh: unknown configuration $cfg (WEB_CONFIGS)"; exit 1 ;;
    esac
    for svc in front back; do
        printf '[child tracer]\nbuiltin = tracer\nservice_name = %s\nendpoint = %s/v1/traces\nmetrics_endpoint = %s/v1/metrics\n%s\n' \
            "$svc" "$SINK" "$SINK" "$extra" >"$WORK/$cfg-$svc.conf"
    done
done

cfg_env() { # cfg_env CONFIG ROLE: the environment of CONFIG's ROLE process, into ENV
    local cfg=$1 role=$2 lib
    ENV=()
    case $cfg in
    clrmux*) lib=$ROOT/build/libclrmux.so
             [ "$cfg" = clrmux-base ] && lib=${WEB_BASE:?clrmux-base: WEB_BASE names a folder with another build of libclrmux.so and its agent}/libclrmux.so
             ENV=(CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$lib"
                  CLRMUX_CONFIG="$WORK/$cfg-$role.conf" CLRMUX_LOG_FILE="$WORK/$cfg-$role.log") ;;
    sdk) ENV=(SHOP_OTEL=otlp OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_SERVICE_NAME="$role") ;;
    esac
}
start() { # start CONFIG ROLE HTTP GRPC
    cfg_env "$1" "$2"
    env "${ENV[@]}" no_proxy=127.0.0.1 NO_PROXY=127.0.0.1 SHOP_ROLE="$2" SHOP_HTTP="$3" SHOP_GRPC="$4" \
        SHOP_DOWN_HTTP="http://127.0.0.1:$P3" SHOP_DOWN_GRPC="http://127.0.0.1:$P4" \
        dotnet build/clr/shop/shop.dll >"$WORK/$1-$2.out" 2>&1 &
    PIDS+=($!)
    LAST=$!
}
ready() { for _ in $(seq 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; return 1; }
exp_ms() { # exp_ms PID...: user + system CPU time of the processes' span exporter threads (clrmux's
    # clrmux-export, the SDK's batch processor thread), in ms; they live as long as the process
    local t=0 p f
    for p in "$@"; do
        for f in /proc/"$p"/task/*; do
            case $(cat "$f/comm" 2>/dev/null) in
            clrmux-export|OpenTelemetry-B*) t=$((t + $(sed 's/.*) //' "$f/stat" | awk '{print $12 + $13}'))) ;;
            esac
        done
    done
    echo $((t * 1000 / $(getconf CLK_TCK)))
}
cpu_ms() { # cpu_ms PID...: user + system CPU time of the processes, in ms
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo $((t * 1000 / $(getconf CLK_TCK)))
}

# WEB_RATE=N: the timed run offers about N requests/s (each connection waits between its
# requests) instead of as many as the services take: every configuration then runs at the same
# load, below saturation, so that the thread pool's spinning (it spins more per request the
# slower requests come) does not pass for the tracer's cost; CPU per request is the figure.
PACE=()
if [ -n "${WEB_RATE:-}" ]; then
    printf 'function delay() return %d end\n' $((CONNS * 1000 / WEB_RATE)) >"$WORK/pace.lua"
    PACE=(-s "$WORK/pace.lua")
fi
if [ "${WEB_WRK:-1}" != 0 ]; then # part 1 (WEB_WRK=0 skips it)
echo "== 1. requests/s of GET /bench (front -> back over HTTP), wrk -c$CONNS ${SECS}s${WEB_RATE:+ paced at ~$WEB_RATE req/s}, $ROUNDS interleaved rounds"
declare -A RPS CPU EXP
for r in $(seq "$ROUNDS"); do
    for cfg in $CONFIGS; do
        start "$cfg" back "$P3" "$P4"; bp=$LAST
        start "$cfg" front "$P1" "$P2"; fp=$LAST
        ready "http://127.0.0.1:$P3/hello" && ready "http://127.0.0.1:$P1/bench" || { echo "$cfg did not start"; tail "$WORK/$cfg-front.out"; exit 1; }
        wrk -t1 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$P1/bench" >/dev/null # warm-up: JIT, tiering, pools
        c0=$(cpu_ms "$fp" "$bp") e0=$(exp_ms "$fp" "$bp")
        out=$(wrk -t1 -c"$CONNS" -d"${SECS}s" "${PACE[@]}" "http://127.0.0.1:$P1/bench")
        c1=$(cpu_ms "$fp" "$bp") e1=$(exp_ms "$fp" "$bp")
        rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
        n=$(awk '/requests in/ {print $1}' <<<"$out")
        kill -TERM "$fp" "$bp"; wait "$fp" "$bp" 2>/dev/null || true
        us=$(( (c1 - c0) * 1000 / (n > 0 ? n : 1) ))
        RPS[$cfg]+="$rps "
        CPU[$cfg]+="$us "
        ex=$(( (e1 - e0) * 10000 / (n > 0 ? n : 1) )) # tenths of a us
        EXP[$cfg]+="$ex "
        printf '   round %d %-14s %8.0f req/s  %5d us CPU per request (front + back), %d.%d of them the exporter thread\n' \
            "$r" "$cfg" "$rps" "$us" $((ex / 10)) $((ex % 10))
    done
done
args=()
for cfg in $CONFIGS; do args+=("$cfg|${RPS[$cfg]}|${CPU[$cfg]}|${EXP[$cfg]}"); done
python3 - "${args[@]}" <<'PYEOF'
import statistics, sys
r, c, e = {}, {}, {}
for a in sys.argv[1:]:
    k, rv, cv, ev = a.split("|")
    r[k], c[k] = statistics.median(map(float, rv.split())), statistics.median(map(float, cv.split()))
    e[k] = statistics.median(map(float, ev.split())) / 10
base = "none" if "none" in r else None
for k in r:
    print("   %-14s median %8.0f req/s (x%.3f of none)  %6.0f us CPU/request (x%.3f of none), exporter thread %.1f us" % (
        k, r[k], r[k] / r[base] if base else float("nan"), c[k], c[k] / c[base] if base else float("nan"), e[k]))
if base:
    if "sdk" in c:
        ts, rs = c["sdk"] / c[base] - 1, 1 - r["sdk"] / r[base]
    for k in c:
        if k in (base, "sdk"):
            continue
        tc, rc = c[k] / c[base] - 1, 1 - r[k] / r[base]
        if "sdk" in c:
            print("   CPU per request: %s +%.1f%%, the SDK +%.1f%%: %s's cost / the SDK's %.2f (goal: <= 0.5)" % (
                k, 100 * tc, 100 * ts, k, tc / ts if ts > 0 else float("nan")))
            print("   requests/s lost: %s %.1f%%, the SDK %.1f%%: ratio %.2f" % (k, 100 * rc, 100 * rs, rc / rs if rs > 0 else float("nan")))
        else:
            print("   CPU per request: %s +%.1f%%; requests/s lost %.1f%%" % (k, 100 * tc, 100 * rc))
PYEOF
for f in "$WORK"/clrmux-*.log; do grep -hE "ERROR|[1-9][0-9]* dropped \(" "$f" | head -3 || true; done
fi

if [ "${WEB_INPROC:-1}" != 0 ]; then
    INSECS=${WEB_INPROC_SECONDS:-6} TASKS=${WEB_INPROC_TASKS:-4}
    echo "== 2. the same request in one process (the shop's SHOP_ROLE=inproc: GET /bench through ASP.NET Core's TestServer, its call to back answered by an in-memory connection: no socket, no second process), $TASKS loops, ${INSECS}s after ${WARMUP}s, $ROUNDS interleaved rounds"
    declare -A INP INX INB
    for r in $(seq "$ROUNDS"); do
        for cfg in $CONFIGS; do
            cfg_env "$cfg" front
            out=$(env "${ENV[@]}" SHOP_ROLE=inproc INPROC_TASKS="$TASKS" INPROC_WARMUP="$WARMUP" INPROC_SECONDS="$INSECS" \
                  dotnet build/clr/shop/shop.dll 2>&1 | tail -1)
            us=$(sed -n 's/.*cpu_us_per_request=\([0-9.]*\).*/\1/p' <<<"$out")
            [ -n "$us" ] || { echo "$cfg (inproc) failed: $out"; exit 1; }
            ex=$(sed -n 's/.*exporter_us_per_request=\([0-9.]*\).*/\1/p' <<<"$out")
            by=$(sed -n 's/.*bytes_per_request=\([0-9]*\).*/\1/p' <<<"$out")
            INP[$cfg]+="$us "
            INX[$cfg]+="${ex:-0} "
            INB[$cfg]+="${by:-0} "
            printf '   round %d %-14s %7.2f us CPU per request, %s of them the exporter thread, %s bytes allocated (%s)\n' "$r" "$cfg" "$us" "${ex:-?}" "${by:-?}" "${out%% exporter*}"
        done
    done
    args=()
    for cfg in $CONFIGS; do args+=("$cfg|${INP[$cfg]}|${INX[$cfg]}|${INB[$cfg]}"); done
    python3 - "${args[@]}" <<'PYEOF'
import statistics, sys
c, e, b = {}, {}, {}
for a in sys.argv[1:]:
    k, cv, ev, bv = a.split("|")
    c[k], e[k], b[k] = (statistics.median(map(float, v.split())) for v in (cv, ev, bv))
for k in c:
    print("   %-14s median %7.2f us CPU/request%s, exporter thread %.2f us, %.0f bytes allocated/request%s" % (
        k, c[k], " (+%.2f over none)" % (c[k] - c["none"]) if "none" in c and k != "none" else "", e[k], b[k],
        " (+%.0f)" % (b[k] - b["none"]) if "none" in c and k != "none" else ""))
if "none" in c and "sdk" in c and c["sdk"] > c["none"]:
    for k in c:
        if k not in ("none", "sdk"):
            print("   %s's cost / the SDK's %.2f (goal: <= 0.5)" % (k, (c[k] - c["none"]) / (c["sdk"] - c["none"])))
PYEOF
fi

if [ "${WEB_ASYNC:-1}" != 0 ]; then # part 3 (WEB_ASYNC=0 skips it)
echo "== 3. ns per call in-process (asyncbench, ${ASYNC_CALLS:-200000} calls x 5 rounds; medians)"
cat >"$WORK/async.conf" <<EOF
[child tracer]
builtin = tracer
output = /dev/null
trace = asyncbench!AsyncBench.Calls::TracedSync
trace = asyncbench!AsyncBench.Calls::TracedAsync
trace = asyncbench!AsyncBench.Calls::TracedYield
EOF
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
    CLRMUX_CONFIG="$WORK/async.conf" dotnet build/clr/asyncbench/asyncbench.dll "${ASYNC_CALLS:-200000}" 5 >"$WORK/async.out"
python3 - "$WORK/async.out" <<'PYEOF'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    k, ns, _ = line.split()
    v.setdefault(k, []).append(float(ns))
m = {k: statistics.median(x[1:] or x) for k, x in v.items()}  # the first round warms up
for kind in ("sync", "async", "yield"):
    u, t = m[kind + "-untraced"], m[kind + "-traced"]
    print("   %-28s untraced %8.1f ns  traced %8.1f ns  (+%.1f ns, x%.2f)" % (
        {"sync": "synchronous method", "async": "async, completes at once", "yield": "async, awaits Task.Yield()"}[kind],
        u, t, t - u, t / u))
print("   an async traced call costs %.1f ns more than a synchronous traced call's span (%.1f vs %.1f ns of tracing)" % (
    (m["async-traced"] - m["async-untraced"]) - (m["sync-traced"] - m["sync-untraced"]),
    m["async-traced"] - m["async-untraced"], m["sync-traced"] - m["sync-untraced"]))
PYEOF
fi

if [ "${WEB_XPB:-1}" != 0 ]; then # part 4 (WEB_XPB=0 skips it)
    echo "== 4. the export thread's encoding of these spans as OTLP protobuf, ns per span (bench/xpb.c: 500 a batch, best of 5)"
    G=build/gen/opentelemetry/proto
    if gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -Isrc -Ibuild/gen -o "$WORK/xpb" bench/xpb.c src/tracer/xspan.c \
        $G/collector/trace/v1/trace_service.pb-c.c $G/trace/v1/trace.pb-c.c $G/common/v1/common.pb-c.c \
        $G/resource/v1/resource.pb-c.c -lprotobuf-c -ldl; then
        "$WORK/xpb" "$ROOT/build/libclrmux_otlp.so"
    else
        echo "   bench/xpb.c did not build (gcc, libprotobuf-c-dev, make all)"
    fi
fi
