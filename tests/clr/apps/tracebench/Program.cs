// tracebench: the cost of a traced call (bench/tracer.sh runs it under clrmux).
// Usage: tracebench [calls per round] [rounds] [pause ms]  (defaults 50000 40 60)
//
// TraceBench.Calls.Traced and TraceBench.Calls.Plain are identical small methods that the
// JIT may not inline; bench/tracer.sh traces only Traced. Each round times `calls` calls of
// Plain, then `calls` calls of Traced (same loop, one Stopwatch each), then pauses so that
// the tracer's exporter thread drains the spans of the round (a span buffer that never
// fills means each traced call pays the full probe cost, never the cheaper drop path).
// 5 warm-up rounds come first (tiering: both methods reach optimized code; the rewritten
// body of Traced too). Prints the median over the measured rounds:
//   plain_ns_per_call=<F> traced_ns_per_call=<F> calls=<N> rounds=<R>
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace TraceBench;

public static class Calls
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Traced(int x) => x + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Plain(int x) => x + 1;
}

public static class Program
{
    // Fully optimized at once (no tier-0 loop, no OSR): the loops are the same machine code
    // in every round.
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    static int LoopPlain(int n, int s)
    {
        for (int i = 0; i < n; i++)
            s = Calls.Plain(s);
        return s;
    }

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    static int LoopTraced(int n, int s)
    {
        for (int i = 0; i < n; i++)
            s = Calls.Traced(s);
        return s;
    }

    static double Median(List<double> v)
    {
        v.Sort();
        int m = v.Count / 2;
        return v.Count % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
    }

    public static int Main(string[] args)
    {
        var inv = CultureInfo.InvariantCulture;
        int n = args.Length > 0 ? int.Parse(args[0], inv) : 50000;
        int rounds = args.Length > 1 ? int.Parse(args[1], inv) : 40;
        int pause = args.Length > 2 ? int.Parse(args[2], inv) : 60;
        const int warmup = 5;
        var plain = new List<double>();
        var traced = new List<double>();
        int s = 0;
        var sw = new Stopwatch();
        for (int r = 0; r < warmup + rounds; r++)
        {
            sw.Restart();
            s = LoopPlain(n, s);
            double p = sw.Elapsed.TotalNanoseconds / n;
            sw.Restart();
            s = LoopTraced(n, s);
            double t = sw.Elapsed.TotalNanoseconds / n;
            if (r >= warmup)
            {
                plain.Add(p);
                traced.Add(t);
            }
            Thread.Sleep(pause);
        }
        Console.WriteLine(string.Format(inv, "plain_ns_per_call={0:F2} traced_ns_per_call={1:F2} calls={2} rounds={3}",
            Median(plain), Median(traced), n, rounds));
        // s == 2 * n * (warmup + rounds): checks the calls really ran (and keeps them alive)
        return s == unchecked((int)(2L * n * (warmup + rounds))) ? 0 : 1;
    }
}
