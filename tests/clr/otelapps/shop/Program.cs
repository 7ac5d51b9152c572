// A shop service for the tracer's web tests (tests/clr/web.sh) and bench/web.sh. Roles by
// SHOP_ROLE: `front` serves /order/{id} (an async method that calls `back` over HTTP and gRPC),
// /fail (500), /faulted, /cancelled, /work/{ms} (CPU in a continuation), /hello (readiness),
// /bench (bench/web.sh: an async method that calls back's /hello) and the gRPC
// Inventory service (which asks `back`'s); `back` serves /stock/{id}
// and Inventory. Ports: SHOP_HTTP (HTTP/1.1), SHOP_GRPC (HTTP/2 cleartext). SHOP_DOWN_HTTP,
// SHOP_DOWN_GRPC: back's. SHOP_OTEL=memory|otlp: the OpenTelemetry SDK configured by hand.
using System.Diagnostics;
using System.Net;
using Grpc.Core;
using Grpc.Net.Client;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Logging;
using OpenTelemetry;
using OpenTelemetry.Trace;
using Shop.Rpc;

namespace Shop;

public static class Store
{
    public static readonly HttpClient Http = new();
    public static string DownHttp = "";
    public static Inventory.InventoryClient DownGrpc;
    public static readonly ActivitySource Own = new("Shop.Own");

    // traced by the tests (async: its span lasts until its task completes)
    public static async Task<string> GetStockAsync(int id)
    {
        await Task.Delay(5);
        int n = Compute(id);
        string s = await Http.GetStringAsync($"{DownHttp}/stock/{id}");
        CheckReply r = await DownGrpc.CheckAsync(new CheckRequest { Id = id });
        using (Activity a = Own.StartActivity("shop.own")) // the app's own source
            a?.SetTag("shop.id", id);
        return $"{s} rpc={r.Count} n={n}";
    }

    // bench/web.sh's endpoint: an async method that calls back over HTTP
    public static async Task<string> BenchAsync() => await Http.GetStringAsync($"{DownHttp}/hello");

    public static int Compute(int id)
    {
        Thread.SpinWait(500);
        return id * 2;
    }

    public static async Task<int> LookupAsync(int id)
    {
        await Task.Delay(3);
        return Compute(id);
    }

    public static async Task<int> FaultedAsync()
    {
        await Task.Yield();
        throw new InvalidOperationException("out of stock");
    }

    public static async Task<int> CancelledAsync()
    {
        using var cts = new CancellationTokenSource();
        cts.Cancel();
        await Task.Delay(1000, cts.Token);
        return 0;
    }

    // CPU after an await: the profiler's samples there carry this span's labels
    public static async Task<long> WorkAsync(int ms)
    {
        await Task.Delay(1);
        return Burn(ms);
    }

    public static long Burn(int ms)
    {
        var sw = Stopwatch.StartNew();
        long x = 0;
        while (sw.ElapsedMilliseconds < ms)
            for (int i = 0; i < 10000; i++)
                x += i ^ (x >> 3);
        return x;
    }
}

public sealed class InventoryService : Inventory.InventoryBase
{
    public override async Task<CheckReply> Check(CheckRequest req, ServerCallContext ctx)
    {
        if (req.Id < 0)
            throw new RpcException(new Grpc.Core.Status(Grpc.Core.StatusCode.NotFound, "no such item"));
        if (Store.DownGrpc != null) // front: ask back's inventory
            return await Store.DownGrpc.CheckAsync(req);
        return new CheckReply { Count = await Store.LookupAsync(req.Id) };
    }
}

public static class Program
{
    public static void Main(string[] args)
    {
        string role = Environment.GetEnvironmentVariable("SHOP_ROLE") ?? "back";
        int http = int.Parse(Environment.GetEnvironmentVariable("SHOP_HTTP") ?? "5100");
        int grpc = int.Parse(Environment.GetEnvironmentVariable("SHOP_GRPC") ?? "5200");
        string otel = Environment.GetEnvironmentVariable("SHOP_OTEL") ?? "";
        var b = WebApplication.CreateBuilder(args);
        b.Logging.ClearProviders();
        if (Environment.GetEnvironmentVariable("SHOP_LOGGING") == "1")
        {
            // logging on: ASP.NET Core makes an Activity per request for its log scopes (web.sh:
            // the tracer's SERVER span takes its ids)
            b.Logging.AddConsole();
            b.Logging.SetMinimumLevel(LogLevel.Warning);
        }
        b.WebHost.ConfigureKestrel(o =>
        {
            o.Listen(IPAddress.Loopback, http, l => l.Protocols = HttpProtocols.Http1);
            o.Listen(IPAddress.Loopback, grpc, l => l.Protocols = HttpProtocols.Http2);
        });
        b.Services.AddGrpc();
        var exported = new List<Activity>();
        if (otel.Length != 0)
        {
            b.Services.AddOpenTelemetry().WithTracing(t =>
            {
                t.AddSource("Shop.Own").AddAspNetCoreInstrumentation().AddHttpClientInstrumentation();
                if (otel == "memory")
                    t.AddInMemoryExporter(exported);
                else
                    t.AddOtlpExporter();
            });
        }
        var app = b.Build();
        if (role == "front")
        {
            Store.DownHttp = Environment.GetEnvironmentVariable("SHOP_DOWN_HTTP") ?? "http://127.0.0.1:5101";
            Store.DownGrpc = new Inventory.InventoryClient(
                GrpcChannel.ForAddress(Environment.GetEnvironmentVariable("SHOP_DOWN_GRPC") ?? "http://127.0.0.1:5201"));
        }
        app.MapGrpcService<InventoryService>();
        app.MapGet("/order/{id}", async (int id) => Results.Text($"order {id}: " + await Store.GetStockAsync(id)));
        bool logging = Environment.GetEnvironmentVariable("SHOP_LOGGING") == "1";
        app.MapGet("/stock/{id}", async (int id) =>
        {
            if (logging) // the request's Activity (made for the log scopes), for web.sh
                Console.WriteLine($"request-activity\t{Activity.Current?.TraceId}\t{Activity.Current?.SpanId}");
            return Results.Text("stock " + await Store.LookupAsync(id));
        });
        app.MapGet("/fail", string () => throw new InvalidOperationException("kaput"));
        app.MapGet("/faulted", async () => Results.Text("faulted " + await Store.FaultedAsync()));
        app.MapGet("/cancelled", async () => Results.Text("cancelled " + await Store.CancelledAsync()));
        app.MapGet("/work/{ms}", async (int ms) => Results.Text("work " + await Store.WorkAsync(ms)));
        app.MapGet("/hello", () => "hello");
        app.MapGet("/bench", async () => Results.Text(await Store.BenchAsync()));
        app.Lifetime.ApplicationStopped.Register(() =>
        {
            if (otel != "memory")
                return;
            lock (exported) // the SDK's own spans: one line each, for the test
                foreach (Activity a in exported)
                    Console.WriteLine($"sdk-span\t{a.Source.Name}\t{a.DisplayName}\t{a.TraceId}\t{a.SpanId}\t{a.ParentSpanId}");
        });
        Console.WriteLine($"shop {role} on {http}/{grpc} (.NET {Environment.Version})");
        app.Run();
    }
}
