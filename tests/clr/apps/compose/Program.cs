// The test app of clrmux's composition tests (tests/clr/compose.sh).
//
// Compose.Work holds the methods that IL-rewriting children (fake_profilers/ilrewriter.c)
// and the built-in tracer instrument; each rewriting child increments its own counter in
// Compose.Probes at the entry of its targets. The app runs PHASES phases of CALLS calls;
// between phases (and before the first) it synchronises with the children through the
// folder ILRW_SYNC_DIR (creates phase<N>, waits for COMPOSE_ACKS files ack<N>.*), so that a
// child's RequestReJIT / RequestRevert takes effect at a known point.
//
// stdout (compared with a run without any profiler) holds only results that do not depend
// on instrumentation; stderr holds the per-phase call counts and the counters.
using System.Runtime.CompilerServices;

namespace Compose;

public static class Probes
{
    public static int A, B, C, D;
}

public static class Work
{
    // A method with a loop and an exception handler (EH clauses move with the rewrites).
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Compute(int x)
    {
        int r = 0;
        try
        {
            for (int i = 0; i < 3; i++)
                r += x * i;
        }
        finally
        {
            r++;
        }
        return r;
    }

    // Inlined into Mid (which is optimised at once): the inliner case.
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static int Leaf(int x) => x * 3 + 1;

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static int Mid(int x) => Leaf(x) + Leaf(x + 1);

    // A tiny method (tiny IL header).
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Small(int x) => x + 1;
}

public static class Program
{
    const int Phases = 3;
    const int Calls = 200;

    static void Sync(int phase)
    {
        string dir = Environment.GetEnvironmentVariable("ILRW_SYNC_DIR");
        if (string.IsNullOrEmpty(dir))
            return;
        int acks = int.Parse(Environment.GetEnvironmentVariable("COMPOSE_ACKS") ?? "0");
        File.WriteAllText(Path.Combine(dir, "phase" + phase), "");
        var deadline = DateTime.UtcNow.AddSeconds(20);
        while (Directory.GetFiles(dir, "ack" + phase + ".*").Length < acks)
        {
            if (DateTime.UtcNow > deadline)
            {
                Console.Error.WriteLine("sync: phase " + phase + " not acknowledged");
                return;
            }
            Thread.Sleep(1);
        }
    }

    public static int Main()
    {
        long sum = 0;
        for (int p = 0; p < Phases; p++)
        {
            Sync(p);
            for (int i = 0; i < Calls; i++)
            {
                sum += Work.Compute(i);
                sum += Work.Mid(i);
                sum += Work.Small(i);
            }
            Console.Error.WriteLine($"phase {p} Compute {Calls} Leaf {2 * Calls} Small {Calls}");
        }
        Sync(Phases);
        Console.WriteLine("sum " + sum);
        Console.WriteLine("done");
        Console.Error.WriteLine($"counter A {Probes.A}");
        Console.Error.WriteLine($"counter B {Probes.B}");
        Console.Error.WriteLine($"counter C {Probes.C}");
        Console.Error.WriteLine($"counter D {Probes.D}");
        return 0;
    }
}
