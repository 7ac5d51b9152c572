// bench/web.sh's in-process part: ns per call of a synchronous method, of an async method that
// completes at once, and of one that awaits Task.Yield(), each traced or not (the traced ones
// are named in the bench's loader.conf: AsyncBench.Calls::Traced*).
//   asyncbench CALLS ROUNDS   prints "sync untraced NS", "sync traced NS", ... per round
using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace AsyncBench;

public static class Calls
{
    [MethodImpl(MethodImplOptions.NoInlining)] public static int PlainSync(int x) => x + 1;
    [MethodImpl(MethodImplOptions.NoInlining)] public static int TracedSync(int x) => x + 1;
    public static async Task<int> PlainAsync(int x) { await Task.CompletedTask; return x + 1; }
    public static async Task<int> TracedAsync(int x) { await Task.CompletedTask; return x + 1; }
    public static async Task<int> PlainYield(int x) { await Task.Yield(); return x + 1; }
    public static async Task<int> TracedYield(int x) { await Task.Yield(); return x + 1; }
}

public static class Program
{
    private static double Time(string name, int n, Func<int, int> f)
    {
        var sw = Stopwatch.StartNew();
        int acc = 0;
        for (int i = 0; i < n; i++)
            acc += f(i);
        double ns = sw.Elapsed.TotalMilliseconds * 1e6 / n;
        Console.WriteLine($"{name} {ns:F1} {acc & 1}");
        return ns;
    }

    private static async Task<double> TimeAsync(string name, int n, Func<int, Task<int>> f)
    {
        var sw = Stopwatch.StartNew();
        int acc = 0;
        for (int i = 0; i < n; i++)
            acc += await f(i);
        double ns = sw.Elapsed.TotalMilliseconds * 1e6 / n;
        Console.WriteLine($"{name} {ns:F1} {acc & 1}");
        return ns;
    }

    public static async Task Main(string[] args)
    {
        int n = args.Length > 0 ? int.Parse(args[0]) : 200000;
        int rounds = args.Length > 1 ? int.Parse(args[1]) : 5;
        for (int r = 0; r < rounds; r++)
        {
            Time("sync-untraced", n, Calls.PlainSync);
            Time("sync-traced", n, Calls.TracedSync);
            await TimeAsync("async-untraced", n, Calls.PlainAsync);
            await TimeAsync("async-traced", n, Calls.TracedAsync);
            await TimeAsync("yield-untraced", n / 10, Calls.PlainYield);
            await TimeAsync("yield-traced", n / 10, Calls.TracedYield);
        }
    }
}
