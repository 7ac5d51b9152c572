// sample: a small workload with a deterministic number of runtime events.
//
//   threads created with new Thread(...) : 4  (named worker-1 .. worker-4), all joined
//   exceptions thrown                    : 5  (Sample.SampleException, thrown in
//                                              Sample.Work.Fail(int), caught in
//                                              Sample.Work.TryFail(int))
//   GC.Collect() calls                   : 3
//   assembly loads of our own libraries  : samplelib (SampleLib.Calculator)
//   recursive method                     : Sample.Work.Fib(int)
//
// Output is identical on every run; last line is "done".
// SAMPLE_HOLD=1 (tests/clr/windows.sh, where `clrmux ctl` asks the process): before "done",
// "hold pid N" on stderr, then it waits until its standard input closes, then calls Fib(5)
// (15 calls, which `clrmux ctl PID trace add` has the tracer trace meanwhile).
using System.Runtime.CompilerServices;
using SampleLib;

namespace Sample;

public sealed class SampleException : Exception
{
    public int Code { get; }

    public SampleException(int code) : base("sample failure " + code)
    {
        Code = code;
    }
}

public static class Work
{
    public const int ThreadCount = 4;
    public const int ExceptionCount = 5;
    public const int GcCount = 3;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Fib(int n) => n < 2 ? n : Fib(n - 1) + Fib(n - 2);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Fail(int code)
    {
        throw new SampleException(code);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string TryFail(int code)
    {
        try
        {
            Fail(code);
            return "not thrown";
        }
        catch (SampleException e)
        {
            return "caught " + e.GetType().Name + " code=" + e.Code + " msg=" + e.Message;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Crunch(int seed)
    {
        // Deterministic integer mixing; no allocations.
        ulong x = (ulong)seed * 0x9E3779B97F4A7C15UL + 1;
        for (int i = 0; i < 200_000; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return (long)(x % 1_000_000_007UL);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int UseLibrary()
    {
        var calc = new Calculator(2);
        int r = calc.Add(3, 4);
        long m = calc.Multiply(6, 7);
        int g = Calculator.Gcd(84, 36);
        int s = calc.SumTo(10);
        Console.WriteLine("lib add=" + r + " mul=" + m + " gcd=" + g + " sum=" + s);
        return r + (int)m + g + s;
    }
}

public static class Hold
{
    // Its own method, so that Main's JIT compilation loads no assembly more than before.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void UntilInputCloses()
    {
        Console.Error.WriteLine("hold pid " + System.Diagnostics.Process.GetCurrentProcess().Id);
        Console.In.ReadToEnd();
        Work.Fib(5);
    }
}

public static class Program
{
    public static int Main()
    {
        Console.WriteLine("sample start");

        // 1. four named worker threads.
        var results = new long[Work.ThreadCount];
        var threads = new Thread[Work.ThreadCount];
        for (int i = 0; i < Work.ThreadCount; i++)
        {
            int idx = i;
            threads[i] = new Thread(() =>
            {
                results[idx] = Work.Crunch(idx + 1) + Work.Fib(18 + idx);
            });
            threads[i].Name = "worker-" + (i + 1);
        }
        foreach (var t in threads)
            t.Start();
        foreach (var t in threads)
            t.Join();
        for (int i = 0; i < Work.ThreadCount; i++)
            Console.WriteLine("thread worker-" + (i + 1) + " result=" + results[i]);

        // 2. five exceptions.
        for (int i = 1; i <= Work.ExceptionCount; i++)
            Console.WriteLine(Work.TryFail(i));

        // 3. three explicit GCs.
        for (int i = 1; i <= Work.GcCount; i++)
        {
            GC.Collect();
            Console.WriteLine("gc " + i);
        }

        // 4. call into samplelib.
        Console.WriteLine("lib total=" + Work.UseLibrary());

        // 5. recursion.
        Console.WriteLine("fib(20)=" + Work.Fib(20));

        if (Environment.GetEnvironmentVariable("SAMPLE_HOLD") == "1")
            Hold.UntilInputCloses();
        Console.WriteLine("done");
        return 0;
    }
}
