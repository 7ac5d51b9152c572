// cpubound: throughput benchmark workload. Usage: cpubound [seconds] (default 5)
// Runs Environment.ProcessorCount threads, each calling the fixed CPU-bound
// kernel CpuBound.Kernel.Run(ulong) in a loop until the time is up, and prints
// the total number of completed kernel calls as "ops=<N>". The count is NOT
// deterministic (it measures speed).
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace CpuBound;

public static class Kernel
{
    // ~a few microseconds of integer hashing (FNV-1a over a synthetic stream).
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong Run(ulong seed)
    {
        ulong h = 14695981039346656037UL ^ seed;
        ulong x = seed | 1;
        for (int i = 0; i < 1024; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h ^= x & 0xFF;
            h *= 1099511628211UL;
        }
        return h;
    }
}

public static class Program
{
    private static volatile bool s_stop;

    public static int Main(string[] args)
    {
        double seconds = 5;
        if (args.Length > 0 &&
            (!double.TryParse(args[0], NumberStyles.Float, CultureInfo.InvariantCulture, out seconds) || seconds < 0))
        {
            Console.Error.WriteLine("usage: cpubound [seconds]");
            return 2;
        }

        int n = Environment.ProcessorCount;
        var counts = new long[n];
        var sinks = new ulong[n];
        var threads = new Thread[n];
        for (int t = 0; t < n; t++)
        {
            int id = t;
            threads[t] = new Thread(() =>
            {
                long ops = 0;
                ulong acc = (ulong)id + 1;
                while (!s_stop)
                {
                    acc = Kernel.Run(acc);
                    ops++;
                }
                counts[id] = ops;
                sinks[id] = acc;
            }) { Name = "cpubound-" + t };
        }
        foreach (var t in threads)
            t.Start();
        Thread.Sleep(TimeSpan.FromSeconds(seconds));
        s_stop = true;
        long total = 0;
        for (int t = 0; t < n; t++)
        {
            threads[t].Join();
            total += counts[t];
        }
        GC.KeepAlive(sinks);
        Console.WriteLine("ops=" + total);
        return 0;
    }
}
