// The benchmarks of bench/spans.sh (not run by the tests):
//   otelapp spans CALLS ROUNDS   ns per call of three identical one-line methods, interleaved
//                                round after round in one process: Plain (never traced), Traced
//                                (bench/spans.sh has clrmux trace it) and Otel, which makes its
//                                span by hand with the OpenTelemetry SDK (ActivitySource,
//                                AlwaysOn sampler, batch processor, an exporter that counts).
//                                Thread CPU time, median of the rounds after 5 warm-up rounds.
//   otelapp load CALLS RATE      CALLS calls of Traced at RATE calls/s (0: full speed), paced on
//                                the Stopwatch; the tracer's log gives the spans written/dropped.
//   otelapp pipeline CALLS RATE QUEUE [ENDPOINT]  the same with Otel (hand-made spans) into the
//                                SDK's batch processor (max queue QUEUE, batches of 512), with a
//                                counting exporter or (ENDPOINT) the OTLP exporter, HTTP/protobuf to
//                                ENDPOINT/v1/traces: prints the spans exported and dropped and the
//                                spans/s drained.
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using OpenTelemetry;
using OpenTelemetry.Trace;

namespace OtelApp;

public static class SpanBench
{
    static readonly ActivitySource Source = new("OtelApp.SpanBench");

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Plain(int x) => x + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Traced(int x) => x + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Otel(int x)
    {
        using var a = Source.StartActivity("Otel");
        return x + 1;
    }

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    static int LoopPlain(int n, int s) { for (int i = 0; i < n; i++) s = Plain(s); return s; }
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    static int LoopTraced(int n, int s) { for (int i = 0; i < n; i++) s = Traced(s); return s; }
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    static int LoopOtel(int n, int s) { for (int i = 0; i < n; i++) s = Otel(s); return s; }

    sealed class CountingExporter : BaseExporter<Activity>
    {
        public long Count;
        public override ExportResult Export(in Batch<Activity> batch)
        {
            long n = 0;
            foreach (var a in batch)
                n++;
            Interlocked.Add(ref Count, n);
            return ExportResult.Success;
        }
    }

    static double Median(List<double> v)
    {
        v.Sort();
        return v.Count % 2 == 1 ? v[v.Count / 2] : (v[v.Count / 2 - 1] + v[v.Count / 2]) / 2;
    }

    public static int Spans(int n, int rounds)
    {
        var exporter = new CountingExporter();
        using var provider = Sdk.CreateTracerProviderBuilder().AddSource("OtelApp.SpanBench").SetSampler(new AlwaysOnSampler())
            .AddProcessor(new BatchActivityExportProcessor(exporter)).Build();
        var plain = new List<double>();
        var traced = new List<double>();
        var otel = new List<double>();
        int s = 0;
        for (int r = 0; r < 5 + rounds; r++)
        {
            long c0 = Program.ThreadCpuNs();
            s = LoopPlain(n, s);
            long c1 = Program.ThreadCpuNs();
            s = LoopTraced(n, s);
            long c2 = Program.ThreadCpuNs();
            s = LoopOtel(n, s);
            long c3 = Program.ThreadCpuNs();
            if (r >= 5)
            {
                plain.Add((c1 - c0) / (double)n);
                traced.Add((c2 - c1) / (double)n);
                otel.Add((c3 - c2) / (double)n);
            }
            Thread.Sleep(30); // both exporters drain the round
        }
        provider.ForceFlush();
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "plain_ns={0:F2} traced_ns={1:F2} otel_ns={2:F2} otel_exported={3} calls={4} rounds={5} check={6}",
            Median(plain), Median(traced), Median(otel), exporter.Count, n, rounds, s));
        return 0;
    }

    // n calls of f at `rate` calls/s (0: as fast as possible), in steps of 1000 calls; ahead of
    // the rate, the thread yields its CPU (sched_yield) rather than spin on it: an app making
    // 1 M calls/s of a short method leaves most of its core to the others (BENCH_PACE=spin: the
    // thread spins as it used to, holding its core)
    static readonly bool SpinPace = Environment.GetEnvironmentVariable("BENCH_PACE") == "spin";
    static double Paced(int n, long rate, Func<int, int> f)
    {
        var sw = Stopwatch.StartNew();
        int s = 0;
        for (int i = 0; i < n; i += 1000)
        {
            if (rate > 0)
                while (sw.Elapsed.TotalSeconds * rate < i)
                    if (SpinPace)
                        Thread.SpinWait(20);
                    else
                        Thread.Yield();
            for (int j = 0; j < 1000; j++)
                s = f(s);
        }
        Program.Sink = s;
        return sw.Elapsed.TotalSeconds;
    }

    public static int Load(int n, long rate)
    {
        for (int i = 0; i < 20000; i++) // tiering
            Traced(i);
        Thread.Sleep(200);
        double secs = Paced(n, rate, Traced);
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "calls={0} seconds={1:F3} calls_per_s={2:F0}", n, secs, n / secs));
        return 0;
    }

    // Counts the spans it hands to the OTLP exporter, which encodes and sends them.
    sealed class CountingOtlp : BaseExporter<Activity>
    {
        readonly BaseExporter<Activity> inner;
        public long Count;
        public CountingOtlp(BaseExporter<Activity> inner) => this.inner = inner;
        public override ExportResult Export(in Batch<Activity> batch)
        {
            ExportResult r = inner.Export(batch);
            if (r == ExportResult.Success)
                Interlocked.Add(ref Count, batch.Count);
            return r;
        }
        protected override bool OnShutdown(int timeoutMilliseconds) => inner.Shutdown(timeoutMilliseconds);
    }

    public static int Pipeline(int n, long rate, int queue, string endpoint = null)
    {
        var exporter = new CountingExporter();
        CountingOtlp otlp = endpoint == null ? null : new CountingOtlp(new OpenTelemetry.Exporter.OtlpTraceExporter(
            new OpenTelemetry.Exporter.OtlpExporterOptions
            {
                Endpoint = new Uri(endpoint.TrimEnd('/') + "/v1/traces"),
                Protocol = OpenTelemetry.Exporter.OtlpExportProtocol.HttpProtobuf,
            }));
        var provider = Sdk.CreateTracerProviderBuilder().AddSource("OtelApp.SpanBench").SetSampler(new AlwaysOnSampler())
            .AddProcessor(new BatchActivityExportProcessor(otlp != null ? otlp : exporter, maxQueueSize: queue)).Build();
        for (int i = 0; i < 20000; i++)
            Otel(i);
        provider.ForceFlush();
        exporter.Count = 0;
        if (otlp != null)
            otlp.Count = 0;
        Thread.Sleep(200);
        var sw = Stopwatch.StartNew();
        double secs = Paced(n, rate, Otel);
        provider.ForceFlush();
        double total = sw.Elapsed.TotalSeconds;
        long exported = Interlocked.Read(ref otlp != null ? ref otlp.Count : ref exporter.Count);
        provider.Dispose();
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "calls={0} seconds={1:F3} calls_per_s={2:F0} exported={3} dropped={4} exported_per_s={5:F0}",
            n, secs, n / secs, exported, n - exported, exported / total));
        return 0;
    }
}
