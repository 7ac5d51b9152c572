// bench/db.sh's app (issue 23's figures): ns per database call, best of 5 timings of N calls after
// N warm-up calls, printed as `ns_per_call X`.
//   pg PORT N                a `SELECT 42` ExecuteScalar on one open Npgsql connection (clrmux, if
//                            loaded, records Npgsql's ActivitySource)
//   pg-sdk PORT N ENDPOINT   the same with the OpenTelemetry SDK in the process: AddNpgsql()
//                            (Npgsql.OpenTelemetry: Npgsql's source through the SDK), AlwaysOn,
//                            batch processor, OTLP exporter (HTTP/protobuf) to ENDPOINT
//   sqlite N                 a `SELECT 42` ExecuteScalar on an in-memory Microsoft.Data.Sqlite
//                            database (no source of its own: clrmux's bytecode integration)
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
