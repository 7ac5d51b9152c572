// A C# app with known call counts for clrmux's enter/leave hook tests (tests/clr/elt.sh):
// Fib(15) enters Fib 1973 times, Mix(7, 40000000000, 2.5) once (returns 40000000009.5),
// Leaf 100 times. `eltapp bench N` instead calls Leaf N times and prints ns per call;
// `eltapp ep` throws and catches 5 exceptions and induces 3 GCs (tests/clr/eventpipe.sh);
// `eltapp serve STOPFILE SECONDS` works (Work, exceptions) until STOPFILE exists (tests/clr/attach.sh).
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class Program
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static int Fib(int n) => n < 2 ? n : Fib(n - 1) + Fib(n - 2);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static double Mix(int a, long b, double c) => a + b + c;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Leaf(long x) => x * 3 + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Work(long x)
    {
        long s = 0;
        for (int i = 0; i < 20000; i++) s += (x ^ i) % 7;
        return (s & 1) + 1;
    }

    static int Main(string[] args)
    {
        if (args.Length == 2 && args[0] == "bench")
        {
            long n = long.Parse(args[1]), acc = 0;
            for (long i = 0; i < n / 10; i++) acc += Leaf(i); // warm-up (tiering)
            var sw = Stopwatch.StartNew();
            for (long i = 0; i < n; i++) acc += Leaf(i);
            sw.Stop();
            Console.WriteLine($"ns/call {sw.Elapsed.TotalNanoseconds / n:F2} (acc {acc})");
            return 0;
        }
        if (args.Length == 3 && args[0] == "serve")
        {
            // attach tests: works until the file args[1] exists (at most args[2] seconds)
            Console.WriteLine($"ready {Environment.ProcessId}");
            var until = DateTime.UtcNow.AddSeconds(int.Parse(args[2]));
            long n = 0;
            while (!File.Exists(args[1]) && DateTime.UtcNow < until)
            {
                n += Work(n);
                if (n % 7 == 0)
                {
                    try { throw new InvalidOperationException("serve"); }
                    catch (InvalidOperationException) { }
                }
                Thread.Sleep(5);
            }
            Console.WriteLine("done");
            return 0;
        }
        if (args.Length == 1 && args[0] == "ep")
        {
            // EventPipe tests: 5 exceptions thrown and caught, 3 induced GCs
            int caught = 0;
            for (int i = 0; i < 5; i++)
            {
                try { throw new InvalidOperationException("ep " + i); }
                catch (InvalidOperationException) { caught++; }
            }
            for (int i = 0; i < 3; i++) GC.Collect();
            Console.WriteLine($"caught {caught}");
            Console.WriteLine("done");
            return 0;
        }
        Console.WriteLine($"fib {Fib(15)}");
        Console.WriteLine($"mix {Mix(7, 40000000000L, 2.5):F1}");
        long sum = 0;
        for (int i = 0; i < 100; i++) sum += Leaf(i);
        Console.WriteLine($"leaf {sum}");
        Console.WriteLine("done");
        return 0;
    }
}
