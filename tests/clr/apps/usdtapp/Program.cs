// usdtapp: the workload of tests/clr/usdt.sh (the USDT probes seen by bpftrace).
// Usage: usdtapp GO_FILE [calls]   (default 100)
// Waits (60 s at most) until GO_FILE exists (the test has attached bpftrace), then calls
// UsdtApp.Work.Spin `calls` times: each spins ~200 us on the clock, and every 10th throws an
// InvalidOperationException that its caller catches (the span's error). Prints "done" and
// the number of calls that threw.
using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace UsdtApp;

public static class Work
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Spin(int i)
    {
        var sw = Stopwatch.StartNew();
        long n = 0;
        while (sw.ElapsedTicks < Stopwatch.Frequency / 5000)
            n++;
        if (i % 10 == 9)
            throw new InvalidOperationException("call " + i);
        return n;
    }
}

public static class Program
{
    public static int Main(string[] args)
    {
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (!File.Exists(args[0]) && DateTime.UtcNow < deadline)
            Thread.Sleep(10);
        int calls = args.Length > 1 ? int.Parse(args[1]) : 100, threw = 0;
        for (int i = 0; i < calls; i++)
        {
            try { Work.Spin(i); }
            catch (InvalidOperationException) { threw++; }
        }
        Console.WriteLine("done " + threw);
        return 0;
    }
}
