// cpubound: throughput benchmark workload.
// Usage: cpubound [seconds] [workers] [blocked] [latency]   (default 5, ProcessorCount, 0, 0)
// Runs `workers` threads (cpubound-N), each calling (in CpuBound.Worker.Loop) the fixed CPU-bound kernel
// CpuBound.Kernel.Run(ulong) in a loop until the time is up, and prints the total number
// of completed kernel calls as "ops=<N>". The count is NOT deterministic (it measures speed).
// `blocked` more threads (blocked-N) wait on one event until the end (CpuBound.Blocked.Wait).
// With latency = 1 a thread (latency) reads the clock in a loop and prints the longest gap
// between two reads, "maxgap_us=<N>", and the 99.9th percentile over 1-ms windows of each
// window's longest gap, "p999gap_us=<N>": stop-the-world pauses show there.
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

public static class Worker
{
    // a worker's whole life, one named method: bench/profiler.sh traces it (one span open on
    // each worker thread for the whole run, so that every sample carries span labels)
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Loop(ulong acc, out ulong sink)
    {
        long ops = 0;
        while (!Program.Stop)
        {
            acc = Kernel.Run(acc);
            ops++;
        }
        sink = acc;
        return ops;
    }
}

public static class Blocked
{
    public static readonly ManualResetEventSlim Release = new ManualResetEventSlim(false, 0);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Wait() => Release.Wait();
}

public static class Latency
{
    public static long MaxGapTicks;
    public static long P999GapTicks;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Measure(Func<bool> stop)
    {
        long window = Stopwatch.Frequency / 1000;
        var maxima = new List<long>(1 << 16);
        long prev = Stopwatch.GetTimestamp(), windowStart = prev, windowMax = 0, max = 0;
        while (!stop())
        {
            long now = Stopwatch.GetTimestamp();
            long gap = now - prev;
            prev = now;
            if (gap > windowMax)
                windowMax = gap;
            if (now - windowStart >= window)
            {
                maxima.Add(windowMax);
                if (windowMax > max)
                    max = windowMax;
                windowMax = 0;
                windowStart = now;
            }
        }
        maxima.Sort();
        MaxGapTicks = max;
        P999GapTicks = maxima.Count > 0 ? maxima[Math.Min(maxima.Count - 1, (int)(maxima.Count * 0.999))] : 0;
    }
}

public static class Program
{
    private static volatile bool s_stop;
    public static bool Stop => s_stop;

    public static int Main(string[] args)
    {
        double seconds = 5;
        if (args.Length > 0 &&
            (!double.TryParse(args[0], NumberStyles.Float, CultureInfo.InvariantCulture, out seconds) || seconds < 0))
        {
            Console.Error.WriteLine("usage: cpubound [seconds]");
            return 2;
        }

        int n = Environment.ProcessorCount, blocked = 0, latency = 0;
        if ((args.Length > 1 && (!int.TryParse(args[1], out n) || n < 1)) ||
            (args.Length > 2 && (!int.TryParse(args[2], out blocked) || blocked < 0)) ||
            (args.Length > 3 && (!int.TryParse(args[3], out latency) || latency < 0)))
        {
            Console.Error.WriteLine("usage: cpubound [seconds] [workers] [blocked] [latency]");
            return 2;
        }
        var waiters = new Thread[blocked];
        for (int b = 0; b < blocked; b++)
        {
            waiters[b] = new Thread(Blocked.Wait, 256 * 1024) { Name = "blocked-" + b };
            waiters[b].Start();
        }
        Thread lat = null;
        if (latency != 0)
        {
            lat = new Thread(() => Latency.Measure(() => s_stop)) { Name = "latency" };
            lat.Start();
        }
        var counts = new long[n];
        var sinks = new ulong[n];
        var threads = new Thread[n];
        for (int t = 0; t < n; t++)
        {
            int id = t;
            threads[t] = new Thread(() => counts[id] = Worker.Loop((ulong)id + 1, out sinks[id])) { Name = "cpubound-" + t };
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
        Blocked.Release.Set();
        foreach (var w in waiters)
            w.Join();
        Console.WriteLine("ops=" + total);
        if (lat != null)
        {
            lat.Join();
            double us = 1e6 / Stopwatch.Frequency;
            Console.WriteLine("maxgap_us=" + (long)(Latency.MaxGapTicks * us) + " p999gap_us=" + (long)(Latency.P999GapTicks * us));
        }
        return 0;
    }
}
