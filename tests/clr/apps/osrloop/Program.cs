// osrloop: a hot loop that the runtime moves to an OSR version (.NET 7+ tiered compilation:
// a Tier0 method with a loop, called once, is replaced while it runs by an optimized "OSR"
// version entered through the runtime's patchpoint helper), for tests/clr/profiler.sh.
//
//   dotnet osrloop.dll [ms]      (default 2000)
//
// Main calls OsrLoop.Outer.CallerOfTheHotLoop on a thread named "osr", which calls
// OsrLoop.Hot.SpinUntil(ms): a loop that runs for ms of wall time. Half of each round is
// spent in the loop's own arithmetic, half in OsrLoop.Hot.Leaf (not inlined), so that
// samples land both in the OSR frame itself and in a method it called. Every sample of
// SpinUntil and Leaf should carry CallerOfTheHotLoop (a profiler that stops at the OSR frame
// loses it). Prints "osrloop done"; the result goes to a static so that nothing is optimized
// away.
using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace OsrLoop;

public static class Hot
{
    public static long Sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Leaf(long x)
    {
        for (int i = 0; i < 2000; i++)
            x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }

    // One call, a long loop: Tier0 with patchpoints, then OSR'd in the middle of this call.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long SpinUntil(int ms)
    {
        var sw = Stopwatch.StartNew();
        long acc = 1;
        while (sw.ElapsedMilliseconds < ms)
        {
            for (int i = 0; i < 2000; i++)
            {
                acc = acc * 6364136223846793005L + 1442695040888963407L;
                acc ^= acc >> 29;
            }
            acc = Leaf(acc);
        }
        return acc;
    }
}

public static class Outer
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void CallerOfTheHotLoop(int ms)
    {
        Hot.Sink = Hot.SpinUntil(ms);
    }
}

public static class Program
{
    public static int Main(string[] args)
    {
        int ms = args.Length > 0 ? int.Parse(args[0]) : 2000;
        var t = new Thread(() => Outer.CallerOfTheHotLoop(ms)) { Name = "osr" };
        t.Start();
        t.Join();
        Console.WriteLine("osrloop done");
        return 0;
    }
}
