// A program with its own OpenTelemetry telemetry, for clrmux's Activity join tests
// (tests/clr/otel.sh, on .NET 8, 9 and 10). clrmux traces OtelApp.Work (Work.cs).
//   otelapp activity   ActivitySource spans (OpenTelemetry SDK) around traced calls:
//                      "request-1" and "request-2" (sampled) each call Handle(n) -> Inner(n);
//                      Handle(3) is called with no Activity; "request-unsampled" is created
//                      but not recorded (RecordOnly sampler decision: trace flags 00).
//   otelapp activity flow   the same, then Handle(5) in a flow with an AsyncLocal value and no
//                      Activity, and Handle(6) in "request-3" in that flow.
// (otelweb: the ASP.NET Core request, .NET 10 only: no ASP.NET Core runtime for 8 and 9 here.)
//   otelapp spans|load|pipeline ...   bench/spans.sh (SpanBench.cs)
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
    static readonly AsyncLocal<string> Flow = new();

    public static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "activity";
        var inv = System.Globalization.CultureInfo.InvariantCulture;
        if (mode == "spans")
            return SpanBench.Spans(int.Parse(args[1], inv), int.Parse(args[2], inv));
        if (mode == "load")
            return SpanBench.Load(int.Parse(args[1], inv), long.Parse(args[2], inv));
        if (mode == "pipeline")
            return SpanBench.Pipeline(int.Parse(args[1], inv), long.Parse(args[2], inv), int.Parse(args[3], inv),
                                      args.Length > 4 ? args[4] : null);
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
                if (args.Length > 1 && args[1] == "flow")
                {
                    // a flow with a value of its own and no Activity (Handle(5): a root span; the
                    // agent remembers that this flow has nothing to join), then an Activity in
                    // it: Handle(6) joins request-3
                    Flow.Value = "tagged";
                    Console.WriteLine("handle " + Work.Handle(5));
                    using (Source.StartActivity("request-3"))
                        Console.WriteLine("handle " + Work.Handle(6));
                    Flow.Value = null;
                }
                try { Work.Fail("no luck \"today\""); }
                catch (InvalidOperationException e) { Console.WriteLine("caught " + e.Message); }
            }
        }
        foreach (var l in printer.Lines)
            Console.WriteLine(l);
        Console.WriteLine("done");
        return 0;
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
    public static int Sink;
    internal static long ThreadCpuNs()
    {
        ClockGettime(3 /* CLOCK_THREAD_CPUTIME_ID */, out var ts);
        return ts.Sec * 1000000000L + ts.Nsec;
    }
}
