// A shop service for the tracer's web tests (tests/clr/web.sh) and bench/web.sh. Roles by
// SHOP_ROLE: `front` serves /order/{id} (an async method that calls `back` over HTTP and gRPC),
// /fail (500), /faulted, /cancelled, /work/{ms} (CPU in a continuation), /hello (readiness),
// /bench (bench/web.sh: an async method that calls back's /hello) and the gRPC
// Inventory service (which asks `back`'s); `back` serves /stock/{id}
// and Inventory. Ports: SHOP_HTTP (HTTP/1.1), SHOP_GRPC (HTTP/2 cleartext). SHOP_DOWN_HTTP,
// SHOP_DOWN_GRPC: back's. SHOP_OTEL=memory|otlp: the OpenTelemetry SDK configured by hand.
// SHOP_DIAGLISTENER=1: a tracer that listens through DiagnosticListener (DiagListening).
// SHOP_ROLE=inproc (bench/web.sh part 2): the front's /bench in one process, with no socket:
// requests through ASP.NET Core's TestServer, the call to `back` answered by an in-memory
// connection (InMemoryConnection), CPU per request printed (InProcBench).
using System.Diagnostics;
using System.Net;
using Grpc.Core;
using Grpc.Net.Client;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.AspNetCore.TestHost;
using Microsoft.Extensions.Logging;
using OpenTelemetry;
using OpenTelemetry.Trace;
using Shop.Rpc;

namespace Shop;

public static class Store
{
    public static HttpClient Http = new();
    public static string DownHttp = "";
    public static Inventory.InventoryClient DownGrpc;
    public static readonly ActivitySource Own = new("Shop.Own");

    // traced by the tests (async: its span lasts until its task completes)
    public static async Task<string> GetStockAsync(int id)
    {
        await Task.Delay(5);
        int n = Compute(id);
        // an odd id's call carries an escaped query (web.sh: url.full as escaped, the others as they are)
        string s = await Http.GetStringAsync($"{DownHttp}/stock/{id}" + (id % 2 == 1 ? $"?from=order%20{id}" : ""));
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
        if (Environment.GetEnvironmentVariable("SHOP_DIAGLISTENER") == "1")
            DiagListening.Start();
        var b = WebApplication.CreateBuilder(args);
        b.Logging.ClearProviders();
        if (Environment.GetEnvironmentVariable("SHOP_LOGGING") == "1")
        {
            // logging on: ASP.NET Core makes an Activity per request for its log scopes (web.sh:
            // the tracer's SERVER span takes its ids)
            b.Logging.AddConsole();
            b.Logging.SetMinimumLevel(LogLevel.Warning);
        }
        if (role == "inproc")
            b.WebHost.UseTestServer();
        else
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
        if (role == "inproc")
        {
            Store.DownHttp = "http://back.invalid";
            Store.Http = new HttpClient(new SocketsHttpHandler
            {
                ConnectCallback = (_, _) => ValueTask.FromResult<Stream>(new InMemoryConnection()),
            });
        }
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
        if (role == "inproc")
        {
            InProcBench.Run(app);
            return;
        }
        Console.WriteLine($"shop {role} on {http}/{grpc} (.NET {Environment.Version})");
        app.Run();
    }
}

/// <summary>SHOP_ROLE=inproc: GET /bench through TestServer by INPROC_TASKS concurrent loops,
/// INPROC_WARMUP seconds, then INPROC_SECONDS timed; prints the requests and the process's CPU
/// time per request (every thread: the app's, the runtime's, the exporter's).</summary>
public static class InProcBench
{
    public static void Run(WebApplication app)
    {
        int tasks = int.Parse(Environment.GetEnvironmentVariable("INPROC_TASKS") ?? "4");
        double warm = double.Parse(Environment.GetEnvironmentVariable("INPROC_WARMUP") ?? "10");
        double secs = double.Parse(Environment.GetEnvironmentVariable("INPROC_SECONDS") ?? "8");
        app.StartAsync().GetAwaiter().GetResult();
        HttpClient client = app.GetTestClient();
        if (client.GetStringAsync("/bench").GetAwaiter().GetResult() != "hello")
            throw new InvalidOperationException("/bench did not answer hello");
        Load(client, tasks, warm);
        var p = Process.GetCurrentProcess();
        TimeSpan c0 = p.TotalProcessorTime;
        long e0 = ExporterTicks(), a0 = GC.GetTotalAllocatedBytes(precise: true);
        using AllocationTypes? types = Environment.GetEnvironmentVariable("INPROC_ALLOCS") == "1" ? new AllocationTypes() : null;
        long n = Load(client, tasks, secs);
        long bytes = GC.GetTotalAllocatedBytes(precise: true) - a0; // every thread's, the load's own included
        types?.Print(n);
        p.Refresh();
        double us = (p.TotalProcessorTime - c0).TotalMicroseconds;
        Console.WriteLine($"inproc requests={n} exporter_us_per_request={(ExporterTicks() - e0) * 1e6 / TicksPerSecond / Math.Max(n, 1):F2} " +
                          $"bytes_per_request={bytes / Math.Max(n, 1)} cpu_us_per_request={us / Math.Max(n, 1):F2}");
        app.StopAsync().GetAwaiter().GetResult();
    }

    /// <summary>INPROC_ALLOCS=1: the types that allocate the most while it listens, from the
    /// runtime's AllocationTick events (one per ~100 KB allocated, with the type that crossed
    /// the mark: a sample), as bytes per request.</summary>
    private sealed class AllocationTypes : System.Diagnostics.Tracing.EventListener
    {
        private readonly Dictionary<string, long> _bytes = new();

        protected override void OnEventSourceCreated(System.Diagnostics.Tracing.EventSource source)
        {
            if (source.Name == "Microsoft-Windows-DotNETRuntime")
                EnableEvents(source, System.Diagnostics.Tracing.EventLevel.Verbose, (System.Diagnostics.Tracing.EventKeywords)1); // GC
        }

        protected override void OnEventWritten(System.Diagnostics.Tracing.EventWrittenEventArgs e)
        {
            if (e.EventName == null || !e.EventName.StartsWith("GCAllocationTick") || e.Payload == null || e.PayloadNames == null)
                return;
            int t = e.PayloadNames.IndexOf("TypeName"), a = e.PayloadNames.IndexOf("AllocationAmount64");
            if (t < 0 || a < 0)
                return;
            lock (_bytes)
                _bytes[(string)e.Payload[t]!] = _bytes.GetValueOrDefault((string)e.Payload[t]!) + Convert.ToInt64(e.Payload[a]);
        }

        public void Print(long requests)
        {
            lock (_bytes)
                foreach (var kv in _bytes.OrderByDescending(kv => kv.Value).Take(40))
                    Console.WriteLine($"alloc {kv.Value / (double)Math.Max(requests, 1),8:F1} B/request  {kv.Key}");
        }
    }

    private const double TicksPerSecond = 100; // USER_HZ: /proc's CPU times

    /// <summary>The CPU time of the span exporter's threads (clrmux's clrmux-export, the SDK's
    /// batch processor thread), in clock ticks; 0 where /proc is not there.</summary>
    private static long ExporterTicks()
    {
        long t = 0;
        if (!Directory.Exists("/proc/self/task"))
            return 0;
        foreach (string task in Directory.GetDirectories("/proc/self/task"))
        {
            try
            {
                string comm = File.ReadAllText(Path.Combine(task, "comm")).Trim();
                if (comm != "clrmux-export" && !comm.StartsWith("OpenTelemetry-B", StringComparison.Ordinal))
                    continue;
                string stat = File.ReadAllText(Path.Combine(task, "stat"));
                string[] f = stat.Substring(stat.LastIndexOf(')') + 2).Split(' ');
                t += long.Parse(f[11]) + long.Parse(f[12]); // utime, stime
            }
            catch (IOException)
            {
                // the thread ended
            }
        }
        return t;
    }

    private static long Load(HttpClient client, int tasks, double seconds)
    {
        long n = 0;
        var until = Stopwatch.GetTimestamp() + (long)(seconds * Stopwatch.Frequency);
        Task.WaitAll(Enumerable.Range(0, tasks).Select(_ => Task.Run(async () =>
        {
            while (Stopwatch.GetTimestamp() < until)
            {
                using HttpResponseMessage r = await client.GetAsync("/bench");
                await r.Content.ReadAsStringAsync();
                Interlocked.Increment(ref n);
            }
        })).ToArray());
        return n;
    }
}

/// <summary>One HTTP/1.1 connection to `back`, in memory: every request written to it (up to
/// its blank line; these requests have no body) gets "hello" to read. A read waits for that.</summary>
public sealed class InMemoryConnection : Stream
{
    private static readonly byte[] Response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"u8.ToArray();
    private readonly SemaphoreSlim _answers = new(0);
    private int _matched, _at; // bytes of "\r\n\r\n" seen at the end of what was written; read position in Response

    public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancel = default)
    {
        foreach (byte c in buffer.Span)
        {
            _matched = c == (_matched % 2 == 0 ? '\r' : '\n') ? _matched + 1 : c == '\r' ? 1 : 0;
            if (_matched == 4)
            {
                _matched = 0;
                _answers.Release();
            }
        }
        return default;
    }

    public override async ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancel = default)
    {
        if (_at == 0)
        {
            await _answers.WaitAsync(cancel);
            if (buffer.Length == 0)
            {
                // the pool's zero-byte read ahead: says that an answer is there, takes nothing
                _answers.Release();
                return 0;
            }
        }
        int n = Math.Min(buffer.Length, Response.Length - _at);
        Response.AsSpan(_at, n).CopyTo(buffer.Span);
        _at = (_at + n) % Response.Length;
        return n;
    }

    public override Task WriteAsync(byte[] b, int o, int n, CancellationToken c) => WriteAsync(b.AsMemory(o, n), c).AsTask();
    public override Task<int> ReadAsync(byte[] b, int o, int n, CancellationToken c) => ReadAsync(b.AsMemory(o, n), c).AsTask();
    public override void Write(byte[] b, int o, int n) => WriteAsync(b.AsMemory(o, n)).AsTask().GetAwaiter().GetResult();
    public override int Read(byte[] b, int o, int n) => ReadAsync(b.AsMemory(o, n)).AsTask().GetAwaiter().GetResult();
    public override Task FlushAsync(CancellationToken c) => Task.CompletedTask;
    public override void Flush() { }
    public override bool CanRead => true;
    public override bool CanWrite => true;
    public override bool CanSeek => false;
    public override long Length => throw new NotSupportedException();
    public override long Position { get => throw new NotSupportedException(); set => throw new NotSupportedException(); }
    public override long Seek(long o, SeekOrigin s) => throw new NotSupportedException();
    public override void SetLength(long v) => throw new NotSupportedException();
}

/// <summary>SHOP_DIAGLISTENER=1: a tracer that listens through DiagnosticListener rather than an
/// ActivitySource, as Application Insights and OpenTelemetry's first instrumentations do: it
/// asks ASP.NET Core hosting and HttpClient for their HttpRequestIn / HttpRequestOut
/// Activities and prints one line per Activity they stop (web.sh: clrmux leaves those requests
/// and calls to it).</summary>
public sealed class DiagListening : IObserver<DiagnosticListener>, IObserver<KeyValuePair<string, object>>
{
    public static void Start() => DiagnosticListener.AllListeners.Subscribe(new DiagListening());

    public void OnNext(DiagnosticListener l)
    {
        if (l.Name is "Microsoft.AspNetCore" or "HttpHandlerDiagnosticListener")
            l.Subscribe(this, (string name, object a1, object a2) => name.Contains(".HttpRequestIn") || name.Contains(".HttpRequestOut"));
    }

    public void OnNext(KeyValuePair<string, object> e)
    {
        if (e.Key.EndsWith(".Start", StringComparison.Ordinal) && Activity.Current is { } s)
            s.ActivityTraceFlags |= ActivityTraceFlags.Recorded; // sampled, as those tracers mark what they record
        else if (e.Key.EndsWith(".Stop", StringComparison.Ordinal) && Activity.Current is { } a)
            Console.WriteLine($"diag-span\t{a.OperationName}\t{a.TraceId}\t{a.SpanId}\t{a.ParentSpanId}");
    }

    public void OnError(Exception error) { }
    public void OnCompleted() { }
}
