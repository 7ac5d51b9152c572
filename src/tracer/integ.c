/* Bytecode integrations (integ.h): the definition parser, the shipped definitions, the table of
 * attributes attached to open spans, and the record a finished span with attributes becomes. */
#include "tracer/integ.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "tracer/xspan.h"

/* ---- shipped definitions --------------------------------------------------------------- */

/* ADO.NET providers without an ActivitySource of their own (Npgsql and MySqlConnector have one:
 * they are recorded through it, never twice). Each provider's sync and async Execute* funnel
 * into ExecuteReader(CommandBehavior) (Microsoft.Data.Sqlite: ExecuteNonQuery, ExecuteScalar
 * and the *Async methods call it), so that method alone gives one span per statement. */
const struct clrmux_integ_shipped clrmux_integ_shipped[] = {
    {"adonet",
     "[integration Microsoft.Data.Sqlite]\n"
     "target = Microsoft.Data.Sqlite!Microsoft.Data.Sqlite.SqliteCommand::ExecuteReader(System.Data.CommandBehavior)\n"
     "versions = 3.0 - *\n"
     "kind = client\n"
     "name = {db.operation.name} {db.collection.name}\n"
     "attribute = db.system.name = 'sqlite'\n"
     "attribute = db.query.text = this.CommandText\n"
     "attribute = db.namespace = this.Connection.Database\n"
     "\n"
     /* MySql.Data 8 and later: ExecuteNonQuery/Scalar/Reader end in the sync ExecuteReader or
      * the async ExecuteReaderInternalAsync */
     "[integration MySql.Data]\n"
     "target = MySql.Data!MySql.Data.MySqlClient.MySqlCommand::ExecuteReader(System.Data.CommandBehavior, "
     "System.Threading.CancellationToken)\n"
     "target = MySql.Data!MySql.Data.MySqlClient.MySqlCommand::ExecuteReaderInternalAsync(System.Data.CommandBehavior, "
     "System.Threading.CancellationToken)\n"
     "kind = client\n"
     "name = {db.operation.name} {db.collection.name}\n"
     "attribute = db.system.name = 'mysql'\n"
     "attribute = db.query.text = this.CommandText\n"
     "attribute = db.namespace = this.Connection.Database\n"
     "attribute = server.address = this.Connection.Settings.Server\n"
     "attribute = server.port = this.Connection.Settings.Port\n"
     "\n"
     /* Microsoft.Data.SqlClient (no ActivitySource; tested without a server: statements on a
      * connection whose Open failed, to a closed loopback port). ExecuteScalarAsync ends in ExecuteReaderAsync(behavior,
      * token), ExecuteReader() and ExecuteReaderAsync's other overloads in these */
     "[integration Microsoft.Data.SqlClient]\n"
     "target = Microsoft.Data.SqlClient!Microsoft.Data.SqlClient.SqlCommand::ExecuteReader(System.Data.CommandBehavior)\n"
     "target = Microsoft.Data.SqlClient!Microsoft.Data.SqlClient.SqlCommand::ExecuteNonQuery()\n"
     "target = Microsoft.Data.SqlClient!Microsoft.Data.SqlClient.SqlCommand::ExecuteScalar()\n"
     "target = Microsoft.Data.SqlClient!Microsoft.Data.SqlClient.SqlCommand::ExecuteReaderAsync(System.Data.CommandBehavior, "
     "System.Threading.CancellationToken)\n"
     "target = Microsoft.Data.SqlClient!Microsoft.Data.SqlClient.SqlCommand::ExecuteNonQueryAsync(System.Threading.CancellationToken)\n"
     "kind = client\n"
     "name = {db.operation.name} {db.collection.name}\n"
     "attribute = db.system.name = 'microsoft.sql_server'\n"
     "attribute = db.query.text = this.CommandText\n"
     "attribute = db.namespace = this.Connection.Database\n"
     /* its DataSource, [tcp:]host[\instance][,port]: the agent splits it (DbAttrs) */
     "attribute = server.address = this.Connection.DataSource\n"},
    /* StackExchange.Redis 2.x: every command goes through the multiplexer's ExecuteSyncImpl
     * or ExecuteAsyncImpl with its Message and, when chosen, its server */
    {"redis",
     "[integration StackExchange.Redis]\n"
     "target = StackExchange.Redis!StackExchange.Redis.ConnectionMultiplexer::ExecuteSyncImpl\n"
     "target = StackExchange.Redis!StackExchange.Redis.ConnectionMultiplexer::ExecuteAsyncImpl\n"
     "versions = 2.0 - *\n"
     "kind = client\n"
     "name = {db.operation.name}\n"
     "attribute = db.system.name = 'redis'\n"
     "attribute = db.operation.name = arg0.Command\n"
     "attribute = db.query.text = arg0.CommandAndKey\n"
     "attribute = db.namespace = arg0.Db\n"
     "attribute = server.address = arg3.EndPoint.Address | arg2.EndPoint.Address | this.EndPoints[0].Address | "
     "this.EndPoints[0].Host\n"
     "attribute = server.port = arg3.EndPoint.Port | arg2.EndPoint.Port | this.EndPoints[0].Port\n"},
    /* RabbitMQ.Client 5 and 6 (7 has its own ActivitySource): basic.publish with the context in
     * the message's headers; basic.get (a "receive", CLIENT) links to it; a push consumer's
     * delivery (EventingBasicConsumer, AsyncEventingBasicConsumer: a "process", CONSUMER)
     * continues it (messaging-spans.md: the creation context as the parent of a single
     * message's "process" span, and a link). The destination is the exchange, or the routing
     * key with the default exchange */
    {"rabbitmq",
     "[integration RabbitMQ.Client]\n"
     "target = RabbitMQ.Client!RabbitMQ.Client.Impl.ModelBase::BasicPublish(string, string, bool, "
     "RabbitMQ.Client.IBasicProperties, System.ReadOnlyMemory<byte>)\n"
     "versions = 5.0 - 6.*\n"
     "kind = producer\n"
     "name = publish {messaging.destination.name}\n"
     "attribute = messaging.system = 'rabbitmq'\n"
     "attribute = messaging.operation.type = 'send'\n"
     "attribute = messaging.operation.name = 'publish'\n"
     "attribute = messaging.destination.name = arg0 | arg1\n"
     "attribute = messaging.rabbitmq.destination.routing_key = arg1\n"
     "attribute = messaging.message.id = arg3.MessageId\n"
     "attribute = messaging.message.conversation_id = arg3.CorrelationId\n"
     "attribute = server.address = this.Session.Connection.Endpoint.HostName\n"
     "attribute = server.port = this.Session.Connection.Endpoint.Port\n"
     "inject = arg3.Headers\n"
     "\n"
     "[integration RabbitMQ.Client]\n"
     "target = RabbitMQ.Client!RabbitMQ.Client.Impl.ModelBase::BasicGet(string, bool)\n"
     "versions = 5.0 - 6.*\n"
     "kind = client\n"
     "name = receive {messaging.destination.name}\n"
     "attribute = messaging.system = 'rabbitmq'\n"
     "attribute = messaging.operation.type = 'receive'\n"
     "attribute = messaging.operation.name = 'receive'\n"
     "attribute = messaging.destination.name = arg0\n"
     "attribute = messaging.rabbitmq.destination.routing_key = return.RoutingKey\n"
     "attribute = messaging.rabbitmq.message.delivery_tag = return.DeliveryTag\n"
     "attribute = messaging.message.id = return.BasicProperties.MessageId\n"
     "attribute = messaging.message.conversation_id = return.BasicProperties.CorrelationId\n"
     "attribute = messaging.message.body.size = return.Body.Length\n"
     "attribute = server.address = this.Session.Connection.Endpoint.HostName\n"
     "attribute = server.port = this.Session.Connection.Endpoint.Port\n"
     "extract = return.BasicProperties.Headers\n"
     "extract_as = link\n"
     "\n"
     "[integration RabbitMQ.Client]\n"
     "target = RabbitMQ.Client!RabbitMQ.Client.Events.EventingBasicConsumer::HandleBasicDeliver(string, ulong, bool, "
     "string, string, RabbitMQ.Client.IBasicProperties, System.ReadOnlyMemory<byte>)\n"
     "target = RabbitMQ.Client!RabbitMQ.Client.Events.AsyncEventingBasicConsumer::HandleBasicDeliver(string, ulong, "
     "bool, string, string, RabbitMQ.Client.IBasicProperties, System.ReadOnlyMemory<byte>)\n"
     "versions = 6.0 - 6.*\n"
     "kind = consumer\n"
     "name = process {messaging.destination.name}\n"
     "attribute = messaging.system = 'rabbitmq'\n"
     "attribute = messaging.operation.type = 'process'\n"
     "attribute = messaging.operation.name = 'process'\n"
     "attribute = messaging.destination.name = arg3 | arg4\n"
     "attribute = messaging.rabbitmq.destination.routing_key = arg4\n"
     "attribute = messaging.rabbitmq.message.delivery_tag = arg1\n"
     "attribute = messaging.message.id = arg5.MessageId\n"
     "attribute = messaging.message.conversation_id = arg5.CorrelationId\n"
     "attribute = messaging.message.body.size = arg6.Length\n"
     "attribute = server.address = this.Model.Session.Connection.Endpoint.HostName | "
     "this.Model.Delegate.Session.Connection.Endpoint.HostName\n"
     "attribute = server.port = this.Model.Session.Connection.Endpoint.Port | "
     "this.Model.Delegate.Session.Connection.Endpoint.Port\n"
     "extract = arg5.Headers\n"
     "extract_as = parent\n"},
    /* Confluent.Kafka: produce (the string-topic overloads call these) with the context in the
     * record's headers (ProduceAsync's partition and offset from its task's DeliveryResult), and
     * Consume(int) (Consume(TimeSpan) and Consume(CancellationToken) call it): a pull, so a
     * "receive" span, CLIENT, linked to the record's creation context (messaging-spans.md); a
     * poll that gets nothing is no span. Kafka records have no id: no messaging.message.id */
    {"kafka",
     "[integration Confluent.Kafka]\n"
     "target = Confluent.Kafka!Confluent.Kafka.Producer`2::ProduceAsync(Confluent.Kafka.TopicPartition, "
     "Confluent.Kafka.Message<!0,!1>, System.Threading.CancellationToken)\n"
     "target = Confluent.Kafka!Confluent.Kafka.Producer`2::Produce(Confluent.Kafka.TopicPartition, "
     "Confluent.Kafka.Message<!0,!1>, System.Action<Confluent.Kafka.DeliveryReport<!0,!1>>)\n"
     "versions = 1.4 - *\n"
     "kind = producer\n"
     "name = send {messaging.destination.name}\n"
     "attribute = messaging.system = 'kafka'\n"
     "attribute = messaging.operation.type = 'send'\n"
     "attribute = messaging.operation.name = 'send'\n"
     "attribute = messaging.destination.name = arg0.Topic\n"
     "attribute = messaging.kafka.message.key = arg1.Key\n"
     "attribute = messaging.destination.partition.id = return.Partition.Value\n"
     "attribute = messaging.kafka.offset = return.Offset.Value\n"
     "attribute = messaging.client.id = this.Name\n"
     "inject = arg1.Headers\n"
     "\n"
     "[integration Confluent.Kafka]\n"
     "target = Confluent.Kafka!Confluent.Kafka.Consumer`2::Consume(int)\n"
     "versions = 1.4 - *\n"
     "kind = client\n"
     "name = poll {messaging.destination.name}\n"
     "attribute = messaging.system = 'kafka'\n"
     "attribute = messaging.operation.type = 'receive'\n"
     "attribute = messaging.operation.name = 'poll'\n"
     "attribute = messaging.destination.name = return.Topic\n"
     "attribute = messaging.destination.partition.id = return.Partition.Value\n"
     "attribute = messaging.kafka.offset = return.Offset.Value\n"
     "attribute = messaging.kafka.message.key = return.Message.Key\n"
     "attribute = messaging.client.id = this.Name\n"
     "extract = return.Message.Headers\n"
     "extract_as = link\n"},
    {NULL, NULL},
};

/* ---- the parser -------------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static int spec_add(struct clrmux_integ *d, const char *k, const char *v)
{
    int n = snprintf(d->spec + d->spec_len, sizeof d->spec - d->spec_len, "%s=%s\n", k, v);
    if (n < 0 || (size_t)n >= sizeof d->spec - d->spec_len)
        return -1;
    d->spec_len += (size_t)n;
    return 0;
}

/* "6.0", "6", "*" -> major, minor (-1: any) */
static int parse_version(const char *s, int v[2])
{
    v[0] = v[1] = -1;
    if (!strcmp(s, "*"))
        return 0;
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || a < 0 || a > 65535)
        return -1;
    v[0] = (int)a;
    if (!*end)
        return 0;
    if (*end != '.')
        return -1;
    s = end + 1;
    if (!strcmp(s, "*"))
        return 0;
    long b = strtol(s, &end, 10);
    if (end == s || *end || b < 0 || b > 65535)
        return -1;
    v[1] = (int)b;
    return 0;
}

/* one path: this[.Member[\[N\]]...], argN[...] (N 0..CLRMUX_INTEG_MAX_ARG) or return[...];
 * returns the end, or NULL; *max_arg is raised to the N an argN names */
static const char *valid_path(const char *p, int *max_arg)
{
    while (*p == ' ')
        p++;
    if (!strncmp(p, "this", 4)) {
        p += 4;
    } else if (!strncmp(p, "return", 6)) {
        p += 6;
    } else if (!strncmp(p, "arg", 3) && isdigit((unsigned char)p[3])) {
        char *end;
        long n = strtol(p + 3, &end, 10);
        if (n > CLRMUX_INTEG_MAX_ARG || (p[3] == '0' && end != p + 4))
            return NULL;
        if (n > *max_arg)
            *max_arg = (int)n;
        p = end;
    } else {
        return NULL;
    }
    while (*p == '.') {
        p++;
        if (!isalpha((unsigned char)*p) && *p != '_')
            return NULL;
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        if (*p == '[') { /* an element of a collection, by position */
            if (!isdigit((unsigned char)*++p))
                return NULL;
            while (isdigit((unsigned char)*p))
                p++;
            if (*p++ != ']')
                return NULL;
        }
    }
    while (*p == ' ')
        p++;
    return p;
}

/* a value: 'constant', or paths separated by | (the first that gives a value) */
static int valid_value(const char *v, int *max_arg)
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'')
        return 1;
    const char *p = v;
    int max = *max_arg;
    for (;;) {
        if (!(p = valid_path(p, &max)))
            return 0;
        if (*p == 0)
            *max_arg = max;
        if (*p != '|')
            return *p == 0;
        p++;
    }
}

/* 1 when a value reads what the method returns (one of its paths is return[...]) */
static int reads_return(const char *v)
{
    if (v[0] == '\'')
        return 0;
    for (const char *p = v; p; p = strchr(p, '|')) {
        while (*p == '|' || *p == ' ')
            p++;
        if (!strncmp(p, "return", 6) && (p[6] == 0 || p[6] == '.' || p[6] == ' ' || p[6] == '|'))
            return 1;
    }
    return 0;
}

/* a definition's target lines, registered when the definition is whole */
#define MAX_DEF_TARGETS 16
struct pending_targets {
    char text[MAX_DEF_TARGETS][512];
    int line[MAX_DEF_TARGETS];
    int n;
};

static int finish(struct clrmux_integ *defs, int *n, int cur, struct pending_targets *pt, const char *file,
                  clrmux_integ_add_target add, void *ctx)
{
    if (cur < 0)
        return 0;
    struct clrmux_integ *d = &defs[cur];
    if (!d->kind || !pt->n) {
        LOG_ERROR("%s:%d: [integration %s]: %s; definition skipped", file, d->line, d->name,
                  !d->kind ? "no kind (client, producer, consumer, server or internal)" : "no target");
        return 1;
    }
    int targets = 0, errors = 0;
    for (int i = 0; i < pt->n; i++) {
        char why[300] = "";
        if (add(ctx, pt->text[i], cur, file, pt->line[i], why, sizeof why) == 0) {
            targets++;
        } else {
            LOG_ERROR("%s:%d: [integration %s]: %s; target skipped", file, pt->line[i], d->name, why);
            errors++;
        }
    }
    if (!targets) {
        LOG_ERROR("%s:%d: [integration %s]: no valid target; definition skipped", file, d->line, d->name);
        return errors + 1;
    }
    char k[8];
    snprintf(k, sizeof k, "%u", d->kind);
    spec_add(d, "kind", k);
    (*n)++;
    return errors;
}

int clrmux_integ_parse(const char *text, const char *file, struct clrmux_integ *defs, int *n, int max,
                       clrmux_integ_add_target add, void *ctx)
{
    int errors = 0, cur = -1, lineno = 0;
    struct pending_targets *pt = calloc(1, sizeof *pt);
    if (!pt) {
        LOG_ERROR("%s: out of memory; its integrations are not loaded", file);
        return 1;
    }
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char buf[1024];
        lineno++;
        if (len >= sizeof buf) {
            LOG_ERROR("%s:%d: line longer than %zu bytes; skipped", file, lineno, sizeof buf - 1);
            errors++;
            p = nl ? nl + 1 : NULL;
            continue;
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        p = nl ? nl + 1 : NULL;
        char *comment = strchr(buf, ';'); /* `;` starts a comment, as in loader.conf */
        if (comment && (comment == buf || isspace((unsigned char)comment[-1])))
            *comment = 0;
        char *s = trim(buf);
        if (!*s || *s == '#')
            continue;
        if (*s == '[') {
            errors += finish(defs, n, cur, pt, file, add, ctx);
            cur = -1;
            pt->n = 0;
            char *close = strchr(s, ']');
            char *name = close ? trim(s + 1) : NULL;
            if (close)
                *close = 0;
            if (!close || strncmp(name, "integration", 11) != 0 || !isspace((unsigned char)name[11])) {
                LOG_ERROR("%s:%d: '%s' is not an [integration NAME] section; its lines are skipped", file, lineno, s);
                errors++;
                cur = -2;
                continue;
            }
            name = trim(name + 11);
            if (*n >= max) {
                LOG_ERROR("%s:%d: more than %d integrations; [integration %s] skipped", file, lineno, max, name);
                errors++;
                cur = -2;
                continue;
            }
            cur = *n;
            memset(&defs[cur], 0, sizeof defs[cur]);
            snprintf(defs[cur].name, sizeof defs[cur].name, "%s", name);
            defs[cur].line = lineno;
            defs[cur].vmin[0] = defs[cur].vmin[1] = defs[cur].vmax[0] = defs[cur].vmax[1] = -1;
            defs[cur].max_arg = -1;
            spec_add(&defs[cur], "scope", name);
            continue;
        }
        if (cur == -2)
            continue;
        char *eq = strchr(s, '=');
        if (cur < 0 || !eq) {
            LOG_ERROR("%s:%d: %s; skipped", file, lineno, cur < 0 ? "a line before any [integration NAME]" : "not KEY = VALUE");
            errors++;
            continue;
        }
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        struct clrmux_integ *d = &defs[cur];
        int bad = 0;
        char why[300] = "";
        if (!strcmp(key, "target")) {
            if (pt->n >= MAX_DEF_TARGETS || strlen(val) >= sizeof pt->text[0]) {
                bad = 1;
                snprintf(why, sizeof why, "%s", pt->n >= MAX_DEF_TARGETS ? "more than 16 targets" : "target too long");
            } else {
                snprintf(pt->text[pt->n], sizeof pt->text[0], "%s", val);
                pt->line[pt->n++] = lineno;
            }
        } else if (!strcmp(key, "kind")) {
            static const char *kinds[] = {"internal", "server", "client", "producer", "consumer"};
            uint8_t kind = 0;
            for (int i = 0; i < 5; i++)
                if (!strcasecmp(val, kinds[i]))
                    kind = (uint8_t)(i + 1);
            if (kind)
                d->kind = kind;
            else {
                bad = 1;
                snprintf(why, sizeof why, "kind '%s' is not client, producer, consumer, server or internal", val);
            }
        } else if (!strcmp(key, "name")) {
            bad = spec_add(d, "name", val);
            snprintf(why, sizeof why, "too long");
        } else if (!strcmp(key, "versions")) {
            char *dash = strchr(val, '-');
            char lo[32] = "", hi[32] = "";
            if (dash) {
                snprintf(lo, sizeof lo, "%.*s", (int)(dash - val), val);
                snprintf(hi, sizeof hi, "%s", dash + 1);
            }
            if (!dash || parse_version(trim(lo), d->vmin) || parse_version(trim(hi), d->vmax)) {
                bad = 1;
                snprintf(why, sizeof why, "versions '%s' is not MIN - MAX (major[.minor] or *)", val);
            } else {
                char r[64];
                snprintf(r, sizeof r, "%d,%d,%d,%d", d->vmin[0], d->vmin[1], d->vmax[0], d->vmax[1]);
                bad = spec_add(d, "versions", r);
                snprintf(why, sizeof why, "too long");
            }
        } else if (!strcmp(key, "extract_as")) {
            if (!strcasecmp(val, "link") || !strcasecmp(val, "parent")) {
                bad = spec_add(d, "extract_as", !strcasecmp(val, "link") ? "link" : "parent");
                snprintf(why, sizeof why, "too long");
            } else {
                bad = 1;
                snprintf(why, sizeof why, "extract_as '%s' is not link or parent", val);
            }
        } else if (!strcmp(key, "attribute") || !strcmp(key, "inject") || !strcmp(key, "extract")) {
            char *aeq = !strcmp(key, "attribute") ? strchr(val, '=') : NULL;
            char *akey = NULL, *aval = val;
            int max_arg = d->max_arg;
            if (aeq) {
                *aeq = 0;
                akey = trim(val);
                aval = trim(aeq + 1);
            }
            if (!strcmp(key, "attribute") && (!aeq || !*akey || strpbrk(akey, " \t\n"))) {
                bad = 1;
                snprintf(why, sizeof why, "attribute is not KEY = VALUE");
            } else if (!valid_value(aval, &max_arg) || (akey == NULL && aval[0] == '\'') ||
                       (!strcmp(key, "inject") && reads_return(aval)) ||
                       (!strcmp(key, "extract") && reads_return(aval) && strchr(aval, '|'))) {
                bad = 1;
                snprintf(why, sizeof why, "'%s' is not %s", aval,
                         !strcmp(key, "extract")
                             ? "this[.Prop...], argN[.Prop...] or return[.Prop...] (N 0..63; one path, or paths without return)"
                         : akey ? "this[.Prop...], argN[.Prop...] (N 0..63), return[.Prop...] (Prop[N]; a | b) or a 'constant'"
                                : "this[.Prop...] or argN[.Prop...] (N 0..63)");
            } else if (akey) {
                char kv[600];
                snprintf(kv, sizeof kv, "%s\t%s", akey, aval);
                bad = spec_add(d, "attr", kv);
                snprintf(why, sizeof why, "too many attributes");
                d->has_exit |= reads_return(aval);
            } else {
                bad = spec_add(d, key, aval);
                snprintf(why, sizeof why, "too long");
                d->has_exit |= reads_return(aval);
            }
            if (!bad)
                d->max_arg = max_arg;
        } else {
            bad = 1;
            snprintf(why, sizeof why, "unknown key '%s'", key);
        }
        if (bad) {
            LOG_ERROR("%s:%d: [integration %s]: %s; line skipped", file, lineno, d->name, why);
            errors++;
        }
    }
    errors += finish(defs, n, cur, pt, file, add, ctx);
    free(pt);
    return errors;
}

/* ---- the attach table ------------------------------------------------------------------ */

#define ATTACH_CAP 4096 /* open spans with attributes at once (a power of two) */
struct attach_entry {
    uint64_t span_id; /* 0: empty */
    uint8_t *blob;
    size_t len;
};
static struct attach_entry attached[ATTACH_CAP];
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t nattached;
static _Atomic uint64_t attach_dropped;

int clrmux_integ_any(void) { return atomic_load_explicit(&nattached, memory_order_relaxed) != 0; }

int clrmux_integ_attach(uint64_t span_id, const uint8_t *blob, size_t len)
{
    if (!span_id || !blob || !len || len > CLRMUX_XSPAN_MAX / 2)
        return -1;
    uint8_t *copy = malloc(len);
    if (!copy)
        return -1;
    memcpy(copy, blob, len);
    pthread_mutex_lock(&attach_lock);
    size_t i = (size_t)(span_id * 0x9E3779B97F4A7C15ull) & (ATTACH_CAP - 1);
    for (size_t k = 0; k < ATTACH_CAP; k++, i = (i + 1) & (ATTACH_CAP - 1)) {
        if (attached[i].span_id == span_id || attached[i].span_id == 0) {
            if (attached[i].span_id == 0)
                atomic_fetch_add(&nattached, 1);
            free(attached[i].blob);
            attached[i] = (struct attach_entry){span_id, copy, len};
            pthread_mutex_unlock(&attach_lock);
            return 0;
        }
    }
    /* full: blobs of spans that never reached the exporter (dropped with a full span buffer)
     * would stay forever; all are forgotten (the open ones lose their attributes) */
    for (size_t k = 0; k < ATTACH_CAP; k++) {
        free(attached[k].blob);
        attached[k] = (struct attach_entry){0, NULL, 0};
    }
    atomic_store(&nattached, 0);
    pthread_mutex_unlock(&attach_lock);
    free(copy);
    if (!atomic_fetch_add(&attach_dropped, 1))
        LOG_WARN("tracer: %d integration spans waited for the exporter at once (spans dropped with a full buffer keep "
                 "theirs): all forgotten, the open ones recorded without their attributes (logged once)", ATTACH_CAP);
    return -1;
}

uint8_t *clrmux_integ_take(uint64_t span_id, size_t *len)
{
    if (!span_id || !clrmux_integ_any())
        return NULL;
    uint8_t *b = NULL;
    pthread_mutex_lock(&attach_lock);
    size_t i = (size_t)(span_id * 0x9E3779B97F4A7C15ull) & (ATTACH_CAP - 1);
    for (size_t k = 0; k < ATTACH_CAP && attached[i].span_id; k++, i = (i + 1) & (ATTACH_CAP - 1)) {
        if (attached[i].span_id != span_id)
            continue;
        b = attached[i].blob;
        *len = attached[i].len;
        /* backward-shift deletion keeps the probe runs whole */
        size_t j = i;
        for (;;) {
            attached[i] = (struct attach_entry){0, NULL, 0};
            for (;;) {
                j = (j + 1) & (ATTACH_CAP - 1);
                if (!attached[j].span_id)
                    goto done;
                size_t home = (size_t)(attached[j].span_id * 0x9E3779B97F4A7C15ull) & (ATTACH_CAP - 1);
                if (((j - home) & (ATTACH_CAP - 1)) >= ((j - i) & (ATTACH_CAP - 1)))
                    break;
            }
            attached[i] = attached[j];
            i = j;
        }
    done:
        atomic_fetch_sub(&nattached, 1);
        break;
    }
    pthread_mutex_unlock(&attach_lock);
    return b;
}

/* ---- the record -------------------------------------------------------------------------- */

struct wr {
    uint8_t *p, *end;
    int full;
};
static void w_bytes(struct wr *w, const void *b, size_t n)
{
    if (w->full || (size_t)(w->end - w->p) < n) {
        w->full = 1;
        return;
    }
    memcpy(w->p, b, n);
    w->p += n;
}
static void w_u(struct wr *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    w_bytes(w, b, (size_t)n);
}
static void w_str(struct wr *w, const char *s, size_t n)
{
    if (n > 65535)
        n = 65535;
    w_u(w, n, 2);
    w_bytes(w, s, n);
}

struct rd {
    const uint8_t *p, *end;
    int bad;
};
static uint64_t r_u(struct rd *r, int n)
{
    uint64_t v = 0;
    if (r->bad || (size_t)(r->end - r->p) < (size_t)n) {
        r->bad = 1;
        return 0;
    }
    for (int i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}
static const uint8_t *r_str(struct rd *r, uint16_t *n)
{
    *n = (uint16_t)r_u(r, 2);
    if (r->bad || (size_t)(r->end - r->p) < *n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *s = r->p;
    r->p += *n;
    return s;
}

size_t clrmux_integ_record(const struct clrmux_span *s, const uint8_t *blob, size_t blen, const char *exc_type,
                           uint8_t *out, size_t cap)
{
    struct rd r = {blob, blob + blen, 0};
    uint8_t kind = (uint8_t)r_u(&r, 1);
    uint16_t nname, nscope;
    const uint8_t *name = r_str(&r, &nname), *scope = r_str(&r, &nscope);
    uint8_t ctx = (uint8_t)r_u(&r, 1);
    uint8_t trace_id[16], remote_trace[16] = {0};
    uint64_t parent = s->parent_id, remote_span = 0;
    memcpy(trace_id, s->trace_id, 16);
    if (ctx && !r.bad && r.end - r.p >= 24) {
        memcpy(remote_trace, r.p, 16);
        r.p += 16;
        remote_span = r_u(&r, 8);
    } else if (ctx) {
        r.bad = 1;
    }
    uint16_t nattrs = (uint16_t)r_u(&r, 2);
    if (r.bad || kind < 1 || kind > 5 || ctx > 2)
        return 0;
    /* the links: the message's creation context (ctx 1, 2); with it as the parent (ctx 1), the
     * span's own parent, the context the call ran in (messaging-spans.md, "Message creation
     * context as parent of Process span") */
    int own_link = ctx == 1 && s->parent_id != 0;
    if (ctx == 1) {
        memcpy(trace_id, remote_trace, 16);
        parent = remote_span;
    }
    const uint8_t *attrs = r.p;
    size_t attrs_len = (size_t)(r.end - r.p);
    int error = (s->flags & CLRMUX_SPAN_ERROR) != 0;
    if (error && !exc_type)
        exc_type = "_OTHER";
    struct wr w = {out, out + cap, 0};
    w_u(&w, CLRMUX_XSPAN_VERSION, 2);
    w_u(&w, CLRMUX_XSPAN_HEADER, 2);
    w_bytes(&w, trace_id, 16);
    w_u(&w, s->span_id, 8);
    w_u(&w, parent, 8);
    w_u(&w, (uint64_t)s->start_ns, 8);
    w_u(&w, (uint64_t)s->end_ns, 8);
    w_u(&w, kind, 1);
    w_u(&w, error ? 2 : 0, 1);
    w_u(&w, ctx == 1 ? CLRMUX_XSPAN_F_REMOTE_PARENT : 0, 1);
    w_u(&w, 0, 1);
    w_u(&w, s->tid, 4);
    w_str(&w, (const char *)name, nname);
    w_str(&w, error ? exc_type : "", error ? strlen(exc_type) : 0);
    w_str(&w, (const char *)scope, nscope);
    w_str(&w, "", 0);
    w_str(&w, "", 0);
    w_u(&w, (uint64_t)nattrs + (error ? 1 : 0), 2);
    w_bytes(&w, attrs, attrs_len);
    if (error) {
        w_u(&w, CLRMUX_XATTR_STRING, 1);
        w_str(&w, "error.type", 10);
        w_str(&w, exc_type, strlen(exc_type));
    }
    w_u(&w, 0, 2); /* events */
    w_u(&w, (uint64_t)(ctx != 0) + (uint64_t)own_link, 2); /* links */
    if (ctx) {
        w_bytes(&w, remote_trace, 16);
        w_u(&w, remote_span, 8);
        w_str(&w, "", 0);
        w_u(&w, 0, 2);
    }
    if (own_link) {
        w_bytes(&w, s->trace_id, 16);
        w_u(&w, s->parent_id, 8);
        w_str(&w, "", 0);
        w_u(&w, 0, 2);
    }
    if (w.full)
        return 0;
    size_t len = (size_t)(w.p - out);
    struct clrmux_xspan check;
    return clrmux_xspan_parse(out, len, &check) == 0 ? len : 0;
}
