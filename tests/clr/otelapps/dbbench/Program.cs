// bench/db.sh's app (issue 23's figures): ns per database call, best of 5 timings of N calls after
// N warm-up calls, printed as `ns_per_call X`.
//   pg PORT N                a `SELECT 42` ExecuteScalar on one open Npgsql connection (clrmux, if
//                            loaded, records Npgsql's ActivitySource)
//   pg-sdk PORT N ENDPOINT   the same with the OpenTelemetry SDK in the process: AddNpgsql()
//                            (Npgsql.OpenTelemetry: Npgsql's source through the SDK), AlwaysOn,
//                            batch processor, OTLP exporter (HTTP/protobuf) to ENDPOINT
//   sqlite N                 a `SELECT 42` ExecuteScalar on an in-memory Microsoft.Data.Sqlite
//                            database (no source of its own: clrmux's bytecode integration)
//   act N                    no database: an Activity of a source named Npgsql with the tags
//                            Npgsql 10 gives a command, started and stopped (what recording
//                            Npgsql's source costs per call, without its I/O)
//   act-sdk N ENDPOINT       the same with the SDK as in pg-sdk (AddSource("Npgsql"))
using System.Data.Common;
using System.Diagnostics;
using OpenTelemetry;
using OpenTelemetry.Trace;
using Npgsql;

static void Time(DbCommand cmd, int n)
{
    for (int i = 0; i < n; i++) // tier-up, the rewrite and the pool settle
        cmd.ExecuteScalar();
    long best = long.MaxValue;
    for (int round = 0; round < 5; round++)
    {
        var sw = Stopwatch.StartNew();
        for (int i = 0; i < n; i++)
            cmd.ExecuteScalar();
        best = Math.Min(best, sw.ElapsedTicks);
    }
    Console.WriteLine($"ns_per_call {best * 1e9 / Stopwatch.Frequency / n:F0}");
}

static void Pg(string port, int n)
{
    using var c = new Npgsql.NpgsqlConnection($"Host=127.0.0.1;Port={port};Username=postgres;Database=clrmux");
    c.Open();
    using DbCommand cmd = c.CreateCommand();
    cmd.CommandText = "SELECT 42";
    Time(cmd, n);
}

static void Act(int n)
{
    using var source = new ActivitySource("Npgsql", "10.0.3");
    void One()
    {
        using Activity a = source.StartActivity("postgresql", ActivityKind.Client);
        if (a == null)
            return;
        a.SetTag("db.system.name", "postgresql");
        a.SetTag("db.query.text", "SELECT 42");
        a.SetTag("db.namespace", "clrmux");
        a.SetTag("server.address", "127.0.0.1");
        a.SetTag("server.port", 5432);
        a.SetTag("network.peer.address", "127.0.0.1");
        a.SetTag("db.npgsql.connection_id", 1);
        a.SetStatus(ActivityStatusCode.Ok);
    }
    for (int i = 0; i < n; i++)
        One();
    long best = long.MaxValue;
    for (int round = 0; round < 5; round++)
    {
        var sw = Stopwatch.StartNew();
        for (int i = 0; i < n; i++)
            One();
        best = Math.Min(best, sw.ElapsedTicks);
    }
    Console.WriteLine($"ns_per_call {best * 1e9 / Stopwatch.Frequency / n:F0}");
}

string mode = args.Length > 0 ? args[0] : "";
switch (mode)
{
case "pg":
    Pg(args[1], int.Parse(args[2]));
    break;
case "pg-sdk":
    using (TracerProvider tp = Sdk.CreateTracerProviderBuilder()
               .SetSampler(new AlwaysOnSampler())
               .AddNpgsql()
               .AddOtlpExporter(o =>
               {
                   o.Endpoint = new Uri(args[3] + "/v1/traces");
                   o.Protocol = OpenTelemetry.Exporter.OtlpExportProtocol.HttpProtobuf;
               })
               .Build())
    {
        Pg(args[1], int.Parse(args[2]));
        tp.ForceFlush();
    }
    break;
case "act":
    Act(int.Parse(args[1]));
    break;
case "act-sdk":
    using (TracerProvider tp = Sdk.CreateTracerProviderBuilder()
               .SetSampler(new AlwaysOnSampler())
               .AddSource("Npgsql")
               .AddOtlpExporter(o =>
               {
                   o.Endpoint = new Uri(args[2] + "/v1/traces");
                   o.Protocol = OpenTelemetry.Exporter.OtlpExportProtocol.HttpProtobuf;
               })
               .Build())
    {
        Act(int.Parse(args[1]));
        tp.ForceFlush();
    }
    break;
case "sqlite":
    {
        using var c = new Microsoft.Data.Sqlite.SqliteConnection("Data Source=:memory:");
        c.Open();
        using DbCommand cmd = c.CreateCommand();
        cmd.CommandText = "SELECT 42";
        Time(cmd, int.Parse(args[1]));
    }
    break;
default:
    Console.Error.WriteLine("usage: dbbench pg PORT N | pg-sdk PORT N ENDPOINT | sqlite N");
    return 2;
}
return 0;
