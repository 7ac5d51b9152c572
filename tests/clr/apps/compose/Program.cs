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
//
// COMPOSE_MODE=ctl (tests/clr/control.sh): the phases of a process changed while it runs
// (`clrmux ctl`): phase 0, the children's ReJIT; then a thread calls Work.Compute in a loop
// and Work.Mid, which inlines Work.Leaf ("hot") until the script has acknowledged phase 1 (it
// adds trace targets meanwhile, Leaf among them: traced where Mid inlined it); then
// exactly Calls calls between the marks t1 and t2; phase 2 (the script removes the target);
// Calls calls between t3 and t4; phase 3 (the script's last checks). stderr: "ctl hot N",
// "ctl marks t1 t2 t3 t4" (Unix ns), the counters.
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
        int secs = int.Parse(Environment.GetEnvironmentVariable("COMPOSE_SYNC_S") ?? "20");
        var deadline = DateTime.UtcNow.AddSeconds(secs);
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

    static long UnixNs() => (DateTime.UtcNow - DateTime.UnixEpoch).Ticks * 100;

    static volatile bool hotStop;
    static long hotCalls, hotSum;

    static int CtlMain()
    {
        Sync(0);
        var hot = new Thread(() =>
        {
            long s = 0, n = 0;
            /* hot (tier 1), yet not so fast that the tracer's buffer overflows once traced */
            for (int i = 0; !hotStop; i++)
            {
                s += Work.Compute(i & 1023) + Work.Mid(i & 1023); /* Mid inlines Leaf */
                n++;
                if ((i & 63) == 63)
                    Thread.Sleep(1);
            }
            hotSum = s;
            hotCalls = n;
        });
        hot.Start();
        Thread.Sleep(200); /* running hot, tiered up (DOTNET_TC_CallCountingDelayMs=0) */
        Console.Error.WriteLine("ctl hot running");
        Sync(1);
        hotStop = true;
        hot.Join();
        long sum = 0;
        long t1 = UnixNs();
        for (int i = 0; i < Calls; i++)
            sum += Work.Compute(i) + Work.Mid(i);
        long t2 = UnixNs();
        Sync(2);
        long t3 = UnixNs();
        for (int i = 0; i < Calls; i++)
            sum += Work.Compute(i) + Work.Mid(i);
        long t4 = UnixNs();
        Sync(3);
        Console.WriteLine("sum " + sum);
        Console.WriteLine("done");
        Console.Error.WriteLine($"ctl hot {hotCalls}");
        Console.Error.WriteLine($"ctl marks {t1} {t2} {t3} {t4}");
        Console.Error.WriteLine($"counter A {Probes.A}");
        return 0;
    }

    public static int Main()
    {
        if (Environment.GetEnvironmentVariable("COMPOSE_MODE") == "ctl")
            return CtlMain();
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
