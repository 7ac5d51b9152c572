#!/usr/bin/env bash
# Real-runtime tests of database and queue spans (issue 23) against real servers:
# PostgreSQL, MariaDB, Redis and RabbitMQ from their Debian packages (tests/clr/servers.sh starts them
# once per run, on loopback in a scratch folder, in parallel). The client is
# tests/clr/otelapps/dbapp (no SDK) under clrmux with the built-in tracer, on .NET 8, 9 and 10.
# Checks, per library:
#   - Npgsql 10, MySqlConnector (their own ActivitySources): CLIENT spans named
#     `OP table`, with db.system.name, db.namespace, db.operation.name, db.query.text (its
#     literals sanitized; sanitize_queries = false keeps them), server.address, server.port;
#     a failing query ERROR with error.type;
#   - Microsoft.Data.Sqlite and MySql.Data (no ActivitySource: the shipped bytecode integrations):
#     the same, one span per statement whether run through ExecuteReader, ExecuteNonQuery,
#     ExecuteScalar or their async forms;
#   - Microsoft.Data.SqlClient (shipped definition), as far as no SQL Server shows: a
#     connection to a closed loopback port fails to open; a span per Execute* on it with the
#     statement, server.address and server.port from its DataSource, ERROR;
#   - StackExchange.Redis (the shipped bytecode integration): a CLIENT span per command with
#     db.system.name, db.operation.name, db.query.text, server.*; an unknown command ERROR;
#   - Confluent.Kafka (the shipped bytecode integration) against librdkafka's mock cluster: a
#     PRODUCER span (partition and offset read from ProduceAsync's Task<DeliveryResult>) and, in
#     another process, a CLIENT "receive" span of Consume linked to it (traceparent in the
#     record's headers), partition as a string, offset, key;
#   - a user's definition file (integrations = FILE): a method of the app's own with attributes
#     from its arguments (a missing property, a getter that throws: no attribute, the app runs
#     on), bad lines reported with file:line; arguments past arg3; `return.` of Task<T> and
#     ValueTask<T> methods read from their results (completed at the return or later; a failed
#     task: ERROR without them); a method no definition names is not rewritten;
#   - RabbitMQ.Client 7 (its own sources): a PRODUCER span in one process, the CONSUMER span of
#     its basic.get in another, one trace, the consumer's parent the producer;
#   - RabbitMQ.Client 6 (the shipped bytecode integration: traceparent injected into the
#     message's headers): basic.get in another process a CLIENT "receive" span linked to the
#     producer's; a delivery to an EventingBasicConsumer and to an AsyncEventingBasicConsumer
#     in another process a CONSUMER "process" span, the producer's child and linked to it, with
#     routing key, delivery tag, message id, body size, server.*; the async one's span until
#     its handler's task completes;
# Prints one line per check and "dbq: N passed, N failed". Without dotnet: a loud skip (CI:
# fail); a server that is not installed: a loud skip of its checks (CI: fail).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. tests/clr/lib.sh
. tests/clr/servers.sh
if [ -z "${CLRMUX_TEST_RUNTIME:-}" ] && command -v dotnet >/dev/null 2>&1; then
    servers_start pg mysql redis rabbit || { echo "dbq: 0 passed, 1 failed"; exit 1; }
fi
clr_suite dbq "$@"

LIB="$ROOT/build/libclrmux.so"
for f in "$LIB" build/Clrmux.Agent.dll; do
    [ -f "$f" ] || { bad "$f is missing (run make all)"; clr_done; }
done
for app in dbapp rabbit6; do
    tests/clr/build-otelapp.sh $app || { bad "building tests/clr/otelapps/$app failed (NuGet packages)"; clr_done; }
done
APP=build/clr/dbapp/dbapp.dll
CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-dbq.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

run() { # run TAG [conf lines] -- ARGS...: dbapp under clrmux, spans in $WORK/TAG.otlp.jsonl
    local tag=$1
    shift
    { printf '[child tracer]\nbuiltin = tracer\noutput = %s.otlp.jsonl\n' "$tag"
      while [ "$1" != "--" ]; do printf '%s\n' "$1"; shift; done; } >"$WORK/$tag.conf"
    shift
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$LIB" CLRMUX_CONFIG="$WORK/$tag.conf" \
        CLRMUX_LOG_FILE="$WORK/$tag.log" "${DOTNET[@]}" "$APP" "$@" >"$WORK/$tag.out" 2>&1
    echo $? >"$WORK/$tag.rc"
}
# count LINES: the checker's "ok"/"FAIL" lines, printed with this run's runtime
count() {
    sed "s/^ok   - /ok   - [.NET $CLR_RTV] /; s/^FAIL - /FAIL - [.NET $CLR_RTV] /" <<<"$1"
    PASS=$((PASS + $(grep -c '^ok' <<<"$1"))); FAIL=$((FAIL + $(grep -c '^FAIL' <<<"$1") + $(grep -c Traceback <<<"$1")))
}

cat >"$WORK/check.py" <<'PYEOF'
import json, os, sys

def spans(path):
    out = []
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return out
    for l in lines:
        for rs in json.loads(l)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    s["attrs"] = {a["key"]: list(a["value"].values())[0] for a in s.get("attributes", [])}
                    s["types"] = {a["key"]: list(a["value"].keys())[0] for a in s.get("attributes", [])}
                    s["scope"] = ss["scope"].get("name", "")
                    out.append(s)
    return out

def check(desc, cond, detail=""):
    print(("ok   - " if cond else "FAIL - ") + desc + ("" if cond else "  " + str(detail)[:400]))

mode = sys.argv[1]
if mode == "db":
    path, system, port, sanitized = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
    ss = [s for s in spans(path) if s.get("kind") == 3 and s["attrs"].get("db.system.name") == system]
    check(f"{system}: CLIENT spans with db.system.name", len(ss) >= 6, [s["name"] for s in spans(path)])
    sel = [s for s in ss if s["name"] == "SELECT orders"]
    check(f"{system}: a `SELECT orders` span", len(sel) >= 1, [s["name"] for s in ss])
    lib = sys.argv[6]
    ss = [s for s in ss if s["scope"] == lib]
    check(f"{lib}: spans of its scope", len(ss) >= 6, set(s["scope"] for s in spans(path)))
    if sel:
        a = sel[0]["attrs"]
        check(f"{lib}: db.namespace, db.operation.name, db.collection.name",
              a.get("db.namespace") == ("main" if system == "sqlite" else "clrmux") and
              a.get("db.operation.name") == "SELECT" and a.get("db.collection.name") == "orders", a)
        if port != "-":
            check(f"{lib}: server.address and server.port",
                  a.get("server.address") == "127.0.0.1" and str(a.get("server.port")) == port, a)
    ins = [s for s in ss if s["attrs"].get("db.operation.name") == "INSERT"]
    check(f"{lib}: one span per statement (sync and async Execute*: none twice)",
          len(ins) == 1 and len([s for s in ss if s["name"] == "SELECT orders"]) == 2 and
          len([s for s in ss if s["name"] == "DELETE orders"]) == 1, [s["name"] for s in ss])
    text = ins[0]["attrs"].get("db.query.text", "") if ins else ""
    if sanitized:
        check(f"{lib}: db.query.text with its literals sanitized", text == "INSERT INTO orders (id, item) VALUES (?, ?)", text)
        check(f"{lib}: no literal in any attribute", "secret-item" not in json.dumps([s["attrs"] for s in ss]))
    else:
        check(f"{lib}: sanitize_queries = false keeps the literals", "'secret-item'" in text, text)
    bad = [s for s in ss if s["attrs"].get("db.collection.name") == "no_such_table"]
    check(f"{lib}: the failing query is ERROR with error.type",
          len(bad) == 1 and bad[0].get("status", {}).get("code") == 2 and bad[0]["attrs"].get("error.type"),
          bad)
    ok = [s for s in ss if s is not (bad[0] if bad else None)]
    check(f"{lib}: the others are not ERROR", all(s.get("status", {}).get("code") != 2 for s in ok),
          [s["name"] for s in ok if s.get("status", {}).get("code") == 2])
elif mode == "redis":
    path, port = sys.argv[2], sys.argv[3]
    ss = [s for s in spans(path) if s["scope"] == "StackExchange.Redis"]
    names = [s["name"] for s in ss]
    check("redis: CLIENT spans SET, GET (async), one each", names.count("SET") == 1 and names.count("GET") == 1
          and all(s.get("kind") == 3 for s in ss), [(s["scope"], s["name"]) for s in spans(path)])
    st = [s for s in ss if s["name"] == "SET"]
    a = st[0]["attrs"] if st else {}
    check("redis: db.system.name, db.operation.name, db.query.text, db.namespace, server.address, server.port",
          a.get("db.system.name") == "redis" and a.get("db.operation.name") == "SET" and
          a.get("db.query.text", "").startswith("SET order:") and str(a.get("db.namespace")) == "0" and
          a.get("server.address") == "127.0.0.1" and str(a.get("server.port")) == port, a)
    bad = [s for s in ss if s["name"] == "NOSUCHCOMMAND"]
    check("redis: an unknown command is ERROR with error.type",
          len(bad) == 1 and bad[0].get("status", {}).get("code") == 2 and
          bad[0]["attrs"].get("error.type") == "StackExchange.Redis.RedisServerException", bad)
elif mode == "sqlclient":
    ss = [s for s in spans(sys.argv[2]) if s["scope"] == "Microsoft.Data.SqlClient"]
    check("sqlclient: one CLIENT span per Execute* (3 sync, 3 async), none nested",
          len(ss) == 6 and all(s.get("kind") == 3 and not s.get("parentSpanId") for s in ss),
          [(s["name"], s.get("parentSpanId")) for s in spans(sys.argv[2])])
    a = ss[0]["attrs"] if ss else {}
    check("sqlclient: `SELECT orders` with db.system.name, db.namespace, db.query.text sanitized",
          ss and ss[0]["name"] == "SELECT orders" and a.get("db.system.name") == "microsoft.sql_server" and
          a.get("db.namespace") == "orders" and a.get("db.query.text") == "SELECT id FROM orders WHERE item = ?", a)
    check("sqlclient: ERROR with error.type (the connection's Open failed: a closed loopback port)",
          ss and all(s.get("status", {}).get("code") == 2 and
                     s["attrs"].get("error.type") == "System.InvalidOperationException" for s in ss), ss[:1])
    check("sqlclient: server.address and server.port from its DataSource (tcp:127.0.0.1,PORT)",
          ss and all(s["attrs"].get("server.address") == "127.0.0.1" and str(s["attrs"].get("server.port")) == sys.argv[3]
                     for s in ss), a)
elif mode == "user":
    path, log = sys.argv[2], open(sys.argv[3]).read()
    ss = [s for s in spans(path) if s["scope"] == "shop"]
    check("user integration: a PRODUCER span named from its template", len(ss) == 1 and ss[0]["name"] == "place apple"
          and ss[0].get("kind") == 4, [(s["scope"], s["name"], s.get("kind")) for s in spans(path)])
    a = ss[0]["attrs"] if ss else {}
    check("user integration: attributes from arguments, their properties and constants",
          a.get("shop.item") == "apple" and str(a.get("shop.quantity")) == "3" and str(a.get("shop.length")) == "5"
          and a.get("messaging.system") == "shop", a)
    check("user integration: a missing property and a getter that throws give no attribute",
          "shop.missing" not in a and "shop.boom" not in a, a)
    check("user integration: a method no definition names is not rewritten (no span: it pays nothing)",
          not any("Untouched" in s["name"] for s in spans(path)), [s["name"] for s in spans(path)])
    rs = {s["attrs"].get("shop.item"): s for s in spans(path) if s["scope"] == "shop.async"}
    a = rs.get("apple", {}).get("attrs", {})
    check("user integration: a Task<T>'s result read when it completes (return.Id, return.Total), arg5 read",
          a.get("shop.receipt") == "r-apple" and str(a.get("shop.total")) == "6" and a.get("shop.customer") == "carol"
          and "shop.boom" not in a, a)
    d = (int(rs["apple"]["endTimeUnixNano"]) - int(rs["apple"]["startTimeUnixNano"])) / 1e6 if "apple" in rs else 0
    check("user integration: ... its span lasts until the task completes (30 ms)", d >= 25, d)
    check("user integration: a ValueTask<T>'s result, completed at the return and later",
          rs.get("pear", {}).get("attrs", {}).get("shop.receipt") == "now-pear" and
          rs.get("fig", {}).get("attrs", {}).get("shop.receipt") == "later-fig", {k: v.get("attrs") for k, v in rs.items()})
    f = rs.get("plum", {})
    check("user integration: a failed Task<T>: ERROR, the entry's attributes, no result",
          f.get("status", {}).get("code") == 2 and f.get("name") == "receipt plum" and "shop.receipt" not in f.get("attrs", {}), f)
    for line, why in ((12, "not KEY = VALUE"), (13, "kind 'sideways'"), (14, "no target")):
        check(f"user integration: line {line} reported with file:line ({why})",
              f"user.integrations:{line}: " in log and why in log.split(f"user.integrations:{line}: ")[1].split("\n")[0],
              [l for l in log.splitlines() if "integrations" in l])
elif mode == "mq":
    # producer and consumer in two processes: HOW is parent (the consumer's parent is the
    # producer span), parent+link (and a link to it: a "process" span) or link (a "receive"
    # span linked to it, its parent its own)
    system, pub, get, queue, scope, ckind, optype, how = sys.argv[2:10]
    ckind = int(ckind)
    p = [s for s in spans(pub) if s.get("kind") == 4 and s["attrs"].get("messaging.system") == system and s["scope"].startswith(scope)]
    c = [s for s in spans(get) if s.get("kind") == ckind and s["attrs"].get("messaging.system") == system and s["scope"].startswith(scope)]
    label = {"RabbitMQ.Client.": "RabbitMQ.Client 7 (its sources)", "RabbitMQ.Client": "RabbitMQ.Client 6 (bytecode)"}.get(scope, scope)
    label += " " + sys.argv[10] if len(sys.argv) > 10 else ""
    check(f"{label}: a PRODUCER span in the publisher", len(p) == 1, [(s["name"], s.get("kind")) for s in spans(pub)])
    check(f"{label}: a {'CONSUMER' if ckind == 5 else 'CLIENT'} span in the consumer", len(c) == 1,
          [(s["name"], s.get("kind")) for s in spans(get)])
    if p and c:
        pa, ca = p[0]["attrs"], c[0]["attrs"]
        check(f"{label}: messaging.operation.type (send, {optype}), .name and destination",
              pa.get("messaging.operation.type") == "send" and ca.get("messaging.operation.type") == optype and
              pa.get("messaging.operation.name") and ca.get("messaging.operation.name") and
              queue in json.dumps(pa) and queue in json.dumps(ca), (pa, ca))
        links = [(l.get("traceId"), l.get("spanId")) for l in c[0].get("links", [])]
        linked = (p[0]["traceId"], p[0]["spanId"]) in links
        if how.startswith("parent"):
            check(f"{label}: producer and consumer (two processes) share one trace, the consumer's parent the producer",
                  p[0]["traceId"] == c[0]["traceId"] and c[0].get("parentSpanId") == p[0]["spanId"],
                  (p[0]["traceId"], p[0]["spanId"], c[0]["traceId"], c[0].get("parentSpanId"), links))
        if how.endswith("link"):
            check(f"{label}: the consumer's span links to the producer's (two processes)", linked,
                  (p[0]["traceId"], p[0]["spanId"], links))
        if how == "link":
            check(f"{label}: ... and is not its child (a receive's parent is the context it ran in)",
                  c[0].get("parentSpanId") != p[0]["spanId"], c[0].get("parentSpanId"))
        if scope == "RabbitMQ.Client" and ckind == 5:
            check(f"{label}: delivery tag, routing key, message id, body size, server.address/port",
                  isinstance(ca.get("messaging.rabbitmq.message.delivery_tag"), (int, str)) and
                  str(ca.get("messaging.rabbitmq.message.delivery_tag")) == "1" and
                  ca.get("messaging.rabbitmq.destination.routing_key") == queue and
                  ca.get("messaging.message.id") == "order-42" and str(ca.get("messaging.message.body.size")) == "8" and
                  ca.get("server.address") == "127.0.0.1" and str(ca.get("server.port")) == os.environ["CLRMUX_RABBIT_PORT"], ca)
            if "Async" in label:
                d = (int(c[0]["endTimeUnixNano"]) - int(c[0]["startTimeUnixNano"])) / 1e6
                check(f"{label}: the span lasts until the handler's task completes (it awaits 100 ms)", d >= 95, d)
        if system == "kafka":
            part = pa.get("messaging.destination.partition.id")
            check("kafka: the producer's partition (a string) and offset, read from ProduceAsync's task's result; key",
                  p[0]["types"].get("messaging.destination.partition.id") == "stringValue" and str(part).isdigit() and
                  p[0]["types"].get("messaging.kafka.offset") == "intValue" and str(pa.get("messaging.kafka.offset")) == "0" and
                  pa.get("messaging.kafka.message.key") == "order-42", (pa, p[0]["types"]))
            check("kafka: the consumer's partition (the producer's, a string), offset, key, client id",
                  c[0]["types"].get("messaging.destination.partition.id") == "stringValue" and
                  ca.get("messaging.destination.partition.id") == part and str(ca.get("messaging.kafka.offset")) == "0" and
                  ca.get("messaging.kafka.message.key") == "order-42" and "consumer" in ca.get("messaging.client.id", ""), ca)
PYEOF

pyck() { count "$(python3 "$WORK/check.py" "$@" 2>&1)"; }
skip() { echo "skip - [.NET $CLR_RTV] $1: server not running (tests/clr/servers.sh said why)"; }

# PostgreSQL (Npgsql 10) and MariaDB (MySqlConnector), sanitized by default
if [ -n "${CLRMUX_PG_PORT:-}" ]; then
    run pg -- pg
    check "npgsql: dbapp ran" grep -q "failed PostgresException" "$WORK/pg.out"
    pyck db "$WORK/pg.otlp.jsonl" postgresql "$CLRMUX_PG_PORT" 1 Npgsql
else skip postgresql; fi
if [ -n "${CLRMUX_MYSQL_PORT:-}" ]; then
    run my -- mysql
    check "mysqlconnector: dbapp ran" grep -q "failed MySqlException" "$WORK/my.out"
    pyck db "$WORK/my.otlp.jsonl" mysql "$CLRMUX_MYSQL_PORT" 1 MySqlConnector
    run myraw "sanitize_queries = false" -- mysql
    pyck db "$WORK/myraw.otlp.jsonl" mysql "$CLRMUX_MYSQL_PORT" 0 MySqlConnector
    # MySql.Data: no ActivitySource; its shipped bytecode integration
    run mydata -- mysqldata
    check "mysql.data: dbapp ran" grep -q "failed MySqlException" "$WORK/mydata.out"
    pyck db "$WORK/mydata.otlp.jsonl" mysql "$CLRMUX_MYSQL_PORT" 1 MySql.Data
else skip mariadb; fi

# Microsoft.Data.Sqlite (a file in the scratch folder): its shipped bytecode integration
run sqlite -- sqlite "$WORK/orders.db"
check "sqlite: dbapp ran" grep -q "failed SqliteException" "$WORK/sqlite.out"
pyck db "$WORK/sqlite.otlp.jsonl" sqlite - 1 Microsoft.Data.Sqlite
run sqliteraw "sanitize_queries = false" -- sqlite "$WORK/orders2.db"
pyck db "$WORK/sqliteraw.otlp.jsonl" sqlite - 0 Microsoft.Data.Sqlite

# Confluent.Kafka (the shipped bytecode integration): librdkafka's mock cluster lives in the
# producer's process (test.mock.num.brokers), which prints its bootstrap address and waits; the
# consumer, another process, reads the record from it
rm -f "$WORK/kdone"
run kprod -- kafka-produce "orders-$CLR_RT" "$WORK/kdone" &
KPID=$!
for _ in $(seq 1 150); do grep -q "^bootstrap=" "$WORK/kprod.out" 2>/dev/null && break; sleep 0.2; done
KB=$(sed -n 's/^bootstrap=//p' "$WORK/kprod.out" 2>/dev/null)
if [ -n "$KB" ]; then
    run kcons -- kafka-consume "$KB" "orders-$CLR_RT"
fi
touch "$WORK/kdone"
wait $KPID
check "kafka: the consumer got the record from the producer's mock cluster" grep -q "consumed order 42" "$WORK/kcons.out"
pyck mq kafka "$WORK/kprod.otlp.jsonl" "$WORK/kcons.otlp.jsonl" "orders-$CLR_RT" Confluent.Kafka 3 receive link

# Microsoft.Data.SqlClient without a SQL Server: a connection to a closed loopback port fails to
# open; six Execute* (sync and async) on it each fail inside the call
# (with ICU: SqlClient's Open refuses the app's invariant globalization mode)
SQLPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed 's/"System.Globalization.Invariant": true/"System.Globalization.Invariant": false/' build/clr/dbapp/dbapp.runtimeconfig.json \
    >"$WORK/icu.runtimeconfig.json"
SAVED=("${DOTNET[@]}")
DOTNET=("${DOTNET[@]}" --runtimeconfig "$WORK/icu.runtimeconfig.json")
run sqlclient -- sqlclient "$SQLPORT"
DOTNET=("${SAVED[@]}")
check "sqlclient: opening a connection to a closed port failed (SqlException)" grep -q "open failed SqlException" "$WORK/sqlclient.out"
pyck sqlclient "$WORK/sqlclient.otlp.jsonl" "$SQLPORT"

# a user's definition file (integrations = FILE): a method of the app's own, bad lines reported
cat >"$WORK/user.integrations" <<'DEF'
; a user's definitions (tests/clr/dbq.sh)
[integration shop]
target = dbapp!DbApp.Orders::Place(string, int, DbApp.Thrower)
kind = producer
name = place {shop.item}
attribute = shop.item = arg0
attribute = shop.quantity = arg1
attribute = shop.length = arg0.Length
attribute = shop.missing = arg0.NoSuchProperty
attribute = shop.boom = arg2.Boom
attribute = messaging.system = 'shop'
this line is wrong
kind = sideways
[integration empty]
kind = client
[integration shop.async]
target = dbapp!DbApp.Orders::PlaceAsync
target = dbapp!DbApp.Orders::PlaceNow
target = dbapp!DbApp.Orders::PlaceLater
target = dbapp!DbApp.Orders::PlaceFails
kind = client
name = receipt {shop.item}
attribute = shop.item = arg0
attribute = shop.customer = arg5
attribute = shop.receipt = return.Id
attribute = shop.total = return.Total
attribute = shop.boom = return.Boom
DEF
run user "integrations = user.integrations" -- user
check "user integration: the app ran on (placed 15)" grep -q "placed 15 6" "$WORK/user.out"
check "user integration: ... its async methods too" grep -q "receipts r-apple now-pear later-fig" "$WORK/user.out"
pyck user "$WORK/user.otlp.jsonl" "$WORK/user.log"

# StackExchange.Redis: its shipped bytecode integration
if [ -n "${CLRMUX_REDIS_PORT:-}" ]; then
    run redis -- redis
    check "redis: dbapp ran" grep -q "failed RedisServerException" "$WORK/redis.out"
    pyck redis "$WORK/redis.otlp.jsonl" "$CLRMUX_REDIS_PORT"
else skip redis; fi

# RabbitMQ.Client 7: publish in one process, basic.get in another
if [ -n "${CLRMUX_RABBIT_PORT:-}" ]; then
    q=orders-$CLR_RT-$$
    run rpub -- rabbit-publish "$q"
    run rget -- rabbit-get "$q"
    check "rabbitmq 7: the consumer got the message" grep -q "got order 42" "$WORK/rget.out"
    pyck mq rabbitmq "$WORK/rpub.otlp.jsonl" "$WORK/rget.otlp.jsonl" "$q" RabbitMQ.Client. 5 receive parent
    # RabbitMQ.Client 6 (no ActivitySource: its shipped bytecode integration): basic.get (a
    # receive, linked), and push consumers (a process span per delivery, the producer's child)
    APP=build/clr/rabbit6/rabbit6.dll run r6pub -- publish "$q-6"
    APP=build/clr/rabbit6/rabbit6.dll run r6get -- get "$q-6"
    check "rabbitmq 6: the consumer got the message" grep -q "got order 42" "$WORK/r6get.out"
    pyck mq rabbitmq "$WORK/r6pub.otlp.jsonl" "$WORK/r6get.otlp.jsonl" "$q-6" RabbitMQ.Client 3 receive link basic.get
    for how in consume consume-async; do
        APP=build/clr/rabbit6/rabbit6.dll run r6pub-$how -- publish "$q-6-$how"
        APP=build/clr/rabbit6/rabbit6.dll run r6$how -- $how "$q-6-$how"
        check "rabbitmq 6 $how: the consumer got the message" grep -q "delivered order 42" "$WORK/r6$how.out"
        pyck mq rabbitmq "$WORK/r6pub-$how.otlp.jsonl" "$WORK/r6$how.otlp.jsonl" "$q-6-$how" RabbitMQ.Client 5 process \
            parent+link "$(sed 's/consume-async/AsyncEventingBasicConsumer/; s/^consume$/EventingBasicConsumer/' <<<"$how")"
    done
else skip rabbitmq; fi

clr_done
