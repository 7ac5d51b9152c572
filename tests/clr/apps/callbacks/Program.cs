// callbacks: a callback-heavy workload for bench/notify.sh (profiler callbacks per second).
// Usage: callbacks alloc|throw [count]
//   alloc: allocates `count` small objects (default 5,000,000): one ObjectAllocated callback
//          each for a profiler that monitors allocations
//   throw: throws and catches `count` exceptions (default 20,000) two frames deep: a dozen
//          exception callbacks each (thrown, search, unwind, catcher) for a profiler that
//          monitors exceptions
// Prints "count=<N> ns=<elapsed ns of the loop>"; the loop is timed inside the process, so
// start-up does not count.
using System.Diagnostics;
using System.Runtime.CompilerServices;

string mode = args.Length > 0 ? args[0] : "alloc";
long count = args.Length > 1 ? long.Parse(args[1]) : (mode == "throw" ? 20_000 : 5_000_000);
// warm-up: JIT the loops and the exception path first
Work.Run(mode, Math.Min(count, 1000));
var sw = Stopwatch.StartNew();
long done = Work.Run(mode, count);
sw.Stop();
GC.KeepAlive(Work.Sink);
Console.WriteLine($"count={done} ns={(long)(sw.Elapsed.TotalMilliseconds * 1e6)}");

static class Work
{
    public static object? Sink;

    public static long Run(string mode, long n) => mode == "throw" ? Throws(n) : Allocs(n);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Allocs(long n)
    {
        long i = 0;
        for (; i < n; i++)
            Sink = new object();
        return i;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Throws(long n)
    {
        long caught = 0;
        for (long i = 0; i < n; i++)
        {
            try { Thrower(i); }
            catch (InvalidOperationException) { caught++; }
        }
        return caught;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Thrower(long i) => Inner(i);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Inner(long i) => throw new InvalidOperationException("x");
}
