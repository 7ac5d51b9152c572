// A service with its own OpenTelemetry telemetry, for clrmux's Activity join tests
// (tests/clr/otel.sh). clrmux traces OtelApp.Work::Handle and OtelApp.Work::Inner.
//   otelapp activity   ActivitySource spans (OpenTelemetry SDK) around traced calls:
//                      "request-1" and "request-2" (sampled) each call Handle(n) -> Inner(n);
//                      Handle(3) is called with no Activity; "request-unsampled" is created
//                      but not recorded (RecordOnly sampler decision: trace flags 00).
//   otelapp aspnet     an ASP.NET Core app on 127.0.0.1 (in-process) and an HttpClient: three
//                      requests GET /work/{n}, whose handler calls Handle(n).
//   otelapp bench N [activity|unrecorded]   N calls of Handle (each calling Inner) with no
//                      Activity, inside one recorded Activity, or inside one that is not
//                      recorded (bench/otel.sh).
// Every SDK span that ends is printed as "SDKSPAN <trace id> <span id> <parent span id>
// <name> <recorded>"; the last line is "done".
using System.Diagnostics;
using System.Runtime.CompilerServices;
using OpenTelemetry;
using OpenTelemetry.Trace;

namespace OtelApp;

public static class Work
{
    public static long Sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Handle(int n) => Inner(n) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Fail(string why) => throw new InvalidOperationException(why);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Inner(int n)
    {
        Sink += n;
        return n * 2;
    }
}

sealed class PrintProcessor : BaseProcessor<Activity>
{
    public readonly List<string> Lines = new();
    public override void OnEnd(Activity a)
    {
        lock (Lines)
            Lines.Add($"SDKSPAN {a.TraceId} {a.SpanId} {(a.ParentSpanId == default ? "-" : a.ParentSpanId.ToString())} {a.DisplayName.Replace(' ', '_')} {a.Recorded}");
    }
}

sealed class TestSampler : Sampler
{
    public override SamplingResult ShouldSample(in SamplingParameters p) =>
        new SamplingResult(p.Name == "request-unsampled" ? SamplingDecision.RecordOnly : SamplingDecision.RecordAndSample);
}

public static class Program
{
    static readonly ActivitySource Source = new("OtelApp");

    public static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "activity";
        if (mode == "bench")
            return Bench(args.Length > 1 ? int.Parse(args[1]) : 1000000, args.Length > 2 ? args[2] : "none");
        var printer = new PrintProcessor();
        if (mode == "activity")
        {
            using (var provider = Sdk.CreateTracerProviderBuilder().AddSource("OtelApp").SetSampler(new TestSampler())
                       .AddProcessor(printer).Build())
            {
                for (int i = 1; i <= 2; i++)
                    using (Source.StartActivity("request-" + i))
                        Console.WriteLine("handle " + Work.Handle(i));
                Console.WriteLine("handle " + Work.Handle(3));
                using (Source.StartActivity("request-unsampled"))
                    Console.WriteLine("handle " + Work.Handle(4));
                try { Work.Fail("no luck \"today\""); }
                catch (InvalidOperationException e) { Console.WriteLine("caught " + e.Message); }
            }
        }
        else
        {
            AspNet(printer).GetAwaiter().GetResult();
        }
        foreach (var l in printer.Lines)
            Console.WriteLine(l);
        Console.WriteLine("done");
        return 0;
    }

    static async Task AspNet(PrintProcessor printer)
    {
        using var provider = Sdk.CreateTracerProviderBuilder().AddSource("Microsoft.AspNetCore", "System.Net.Http")
            .SetSampler(new AlwaysOnSampler()).AddProcessor(printer).Build();
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        var app = builder.Build();
        app.MapGet("/work/{n:int}", (int n) => "handled " + Work.Handle(n));
        await app.StartAsync();
        string url = app.Urls.First();
        using (var client = new HttpClient())
            for (int n = 1; n <= 3; n++)
                Console.WriteLine(await client.GetStringAsync(url + "/work/" + n));
        await app.StopAsync();
    }

    static int Bench(int n, string activity)
    {
        using var provider = Sdk.CreateTracerProviderBuilder().AddSource("OtelApp").SetSampler(new TestSampler()).Build();
        Activity a = activity == "activity" ? Source.StartActivity("request-bench")
                   : activity == "unrecorded" ? Source.StartActivity("request-unsampled") : null;
        long s = 0;
        for (int round = 0; round < 4; round++) // warm-up: let tiering install the optimized code
        {
            for (int i = 0; i < 1000; i++)
                s += Work.Handle(i);
            Thread.Sleep(150);
        }
        // the thread's own CPU time: a loaded machine's scheduling does not count
        long c0 = ThreadCpuNs();
        var sw = Stopwatch.StartNew();
        s += Loop(n);
        sw.Stop();
        long c1 = ThreadCpuNs();
        a?.Dispose();
        Console.WriteLine($"calls {n} ns_per_call {(c1 - c0) / (double)n:F1} wall_ns_per_call {sw.Elapsed.TotalMilliseconds * 1e6 / n:F1} sum {s}");
        return 0;
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization | MethodImplOptions.NoInlining)]
    static long Loop(int n)
    {
        long s = 0;
        for (int i = 0; i < n; i++)
            s += Work.Handle(i);
        return s;
    }

    struct Timespec { public long Sec, Nsec; }
    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "clock_gettime")]
    static extern int ClockGettime(int clock, out Timespec ts);
    static long ThreadCpuNs()
    {
        ClockGettime(3 /* CLOCK_THREAD_CPUTIME_ID */, out var ts);
        return ts.Sec * 1000000000L + ts.Nsec;
    }
}
