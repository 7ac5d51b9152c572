// ending: a process that ends in a chosen way, for tests/clr/ending.sh (what clrmux saves
// when a process ends without the runtime's Shutdown).
//
//   dotnet ending.dll <mode> [n]
//
// Every mode first calls Ending.Work.Step n times (default 1000; each call a finished span
// when Step is traced), burns ~300 ms of CPU in Ending.Work.Spin (something for the
// profiler to sample), prints "ready <n>" and then:
//   return     returns from Main (the runtime's Shutdown runs)
//   exit       Environment.Exit(3)
//   throw      throws an unhandled InvalidOperationException (abort: SIGABRT, exit 134)
//   raise      raises AppDomain.UnhandledException without ending (ExceptionHandling.
//              RaiseAppDomainUnhandledExceptionEvent, .NET 10), calls Step n more times,
//              prints "raised", returns
//   wait       sleeps until killed (the test sends SIGTERM, SIGINT, ...)
//   segv       a fault in native code (libc strlen of address 1): SIGSEGV, exit 139
//   nre        catches n NullReferenceExceptions (faults in managed code the runtime turns
//              into exceptions), burns ~300 ms of CPU in Ending.Work.SpinAfterFaults (the
//              thread must still be sampled after its faults), prints "nre <n>", returns
//   deep       Ending.Work.Recurse(n): n nested calls, prints "deep <n>", returns
//   flood      4 threads call Step in a loop until killed, after printing "ready"
//   burst      4 threads call Step n times each, then returns
//   throw-deep    the unhandled exception is thrown 5 calls deep, through finally blocks and
//                 a filter that declines it
//   throw-thread  an unhandled exception on a thread started with new Thread (Main waits)
//   throw-pool    an unhandled exception in a thread-pool work item (Main waits)
//   throw-wrap    Main catches an exception and throws a new one from its catch block
//   throw-rethrow Main catches an exception and rethrows it (throw;)
//   throw-wrap-deep  a method 3 calls deep catches an exception and throws a new one from its
//                 catch block
//   throw-async   an exception in an async method, awaited in Main with GetAwaiter().GetResult()
//   caught     n exceptions thrown 5 calls deep and caught: in Main, through reflection
//              (TargetInvocationException), in a static constructor (TypeInitialization-
//              Exception), in a thread's outermost method, in an async method; prints
//              "caught <count>", returns (no unhandled exception: nothing must look like one)
//   throws     n exceptions thrown 5 calls deep (through finally blocks and a declining
//              filter) and caught in Main, twice (the first round warms up); prints
//              "throws <n> <ms of the second round> <CPU ms of the thread in it>", returns
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Ending;

public static class Work
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Step(int i) => i * 3 + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Recurse(int n) => n <= 1 ? 1 : 1 + Recurse(n - 1);

    // its own loop, not a call of Spin: the sampled leaf is this method even where a walk
    // through an on-stack-replaced frame loses the callers
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long SpinAfterFaults(int ms)
    {
        var sw = System.Diagnostics.Stopwatch.StartNew();
        long x = 1;
        while (sw.ElapsedMilliseconds < ms)
            for (int i = 0; i < 10000; i++)
                x += i ^ (x >> 5);
        return x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Spin(int ms)
    {
        var sw = System.Diagnostics.Stopwatch.StartNew();
        long x = 0;
        while (sw.ElapsedMilliseconds < ms)
            for (int i = 0; i < 10000; i++)
                x += i ^ (x >> 3);
        return x;
    }
}

public static class Thrower
{
    public static int Finallies;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Deep(int depth, string what)
    {
        try
        {
            if (depth <= 1)
                throw new InvalidOperationException(what);
            Deep(depth - 1, what);
        }
        catch (ArgumentException) when (depth < 0)
        {
        }
        finally
        {
            Finallies++;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Wrap(int depth)
    {
        if (depth > 1)
        {
            Wrap(depth - 1);
            return;
        }
        try { Deep(2, "ending: the inner exception"); }
        catch (InvalidOperationException e) { throw new ApplicationException("ending: wrapped 3 calls deep, unhandled", e); }
    }

    public static async Task DeepAsync(string what)
    {
        await Task.Yield();
        Deep(5, what);
    }
}

public static class BadInit
{
    public static readonly int V = Fail();

    private static int Fail()
    {
        Thrower.Deep(2, "ending: a static constructor throws");
        return 1;
    }
}

public static class Program
{
    [DllImport("libc", EntryPoint = "strlen")]
    private static extern nint StrLen(nint p);

    [DllImport("libc", EntryPoint = "clock_gettime")]
    private static extern int ClockGetTime(int clock, long[] ts);

    // this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ms: what a busy machine's other
    // processes do not change
    private static double ThreadCpuMs()
    {
        var ts = new long[2];
        ClockGetTime(3, ts);
        return ts[0] * 1e3 + ts[1] / 1e6;
    }

    private class Box { public int V; }

    public static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "return";
        int n = args.Length > 1 ? int.Parse(args[1]) : 1000;
        if (mode == "flood" || mode == "burst")
        {
            var threads = new Thread[4];
            for (int t = 0; t < threads.Length; t++)
            {
                threads[t] = new Thread(() =>
                {
                    long s = 0;
                    for (int i = 0; mode == "flood" || i < n; i++)
                        s += Work.Step(i);
                    GC.KeepAlive(s);
                });
                threads[t].Start();
            }
            Console.WriteLine("ready");
            Console.Out.Flush();
            foreach (var th in threads)
                th.Join();
            return 0;
        }
        long sum = 0;
        for (int i = 0; i < n && mode != "deep"; i++)
            sum += Work.Step(i);
        Work.Spin(300);
        Console.WriteLine($"ready {n}");
        Console.Out.Flush();
        switch (mode)
        {
            case "exit":
                Environment.Exit(3);
                break;
            case "throw":
                throw new InvalidOperationException("ending: unhandled on purpose");
            case "throw-deep":
                Thrower.Deep(5, "ending: unhandled on purpose, 5 calls deep");
                break;
            case "throw-thread":
            {
                var th = new Thread(() => Thrower.Deep(5, "ending: unhandled on a thread"));
                th.Start();
                th.Join();
                Thread.Sleep(Timeout.Infinite);
                break;
            }
            case "throw-pool":
                ThreadPool.QueueUserWorkItem(_ => Thrower.Deep(5, "ending: unhandled in a work item"));
                Thread.Sleep(Timeout.Infinite);
                break;
            case "throw-wrap":
                try { Thrower.Deep(3, "ending: the inner exception"); }
                catch (InvalidOperationException e) { throw new ApplicationException("ending: wrapped, unhandled", e); }
                break;
            case "throw-wrap-deep":
                Thrower.Wrap(3);
                break;
            case "throw-rethrow":
                try { Thrower.Deep(3, "ending: rethrown, unhandled"); }
                catch (InvalidOperationException) { Console.WriteLine("rethrowing"); throw; }
                break;
            case "throw-async":
                Thrower.DeepAsync("ending: unhandled from an async method").GetAwaiter().GetResult();
                break;
            case "throws":
            {
                double ms = 0, cpu = 0;
                for (int round = 0; round < 2; round++)
                {
                    var sw = System.Diagnostics.Stopwatch.StartNew();
                    double cpu0 = ThreadCpuMs();
                    for (int i = 0; i < n; i++)
                    {
                        try { Thrower.Deep(5, "thrown"); }
                        catch (InvalidOperationException) { }
                    }
                    ms = sw.Elapsed.TotalMilliseconds;
                    cpu = ThreadCpuMs() - cpu0;
                }
                Console.WriteLine($"throws {n} {ms:F1} {cpu:F1}");
                break;
            }
            case "caught":
            {
                int caught = 0;
                var deep = typeof(Thrower).GetMethod("Deep");
                for (int i = 0; i < n; i++)
                {
                    try { Thrower.Deep(5, "caught"); }
                    catch (InvalidOperationException) { caught++; }
                    try { deep.Invoke(null, new object[] { 3, "caught through reflection" }); }
                    catch (System.Reflection.TargetInvocationException) { caught++; }
                    try { Thrower.DeepAsync("caught async").GetAwaiter().GetResult(); }
                    catch (InvalidOperationException) { caught++; }
                }
                try { sum += BadInit.V; }
                catch (TypeInitializationException) { caught++; }
                var th = new Thread(() =>
                {
                    try { Thrower.Deep(3, "caught on a thread"); }
                    catch (InvalidOperationException) { Interlocked.Increment(ref caught); }
                });
                th.Start();
                th.Join();
                Console.WriteLine($"caught {caught}");
                break;
            }
            case "raise":
            {
                // .NET 10+; the apps target net8.0, so through reflection
                var raise = typeof(System.Runtime.ExceptionServices.ExceptionDispatchInfo).Assembly
                    .GetType("System.Runtime.ExceptionServices.ExceptionHandling")
                    ?.GetMethod("RaiseAppDomainUnhandledExceptionEvent", new[] { typeof(object) });
                if (raise == null)
                {
                    Console.WriteLine("raise: not in this runtime");
                    break;
                }
                raise.Invoke(null, new object[] { new InvalidOperationException("ending: raised, not thrown") });
                for (int i = 0; i < n; i++)
                    sum += Work.Step(i);
                Console.WriteLine("raised");
                break;
            }
            case "wait":
                Thread.Sleep(Timeout.Infinite);
                break;
            case "segv":
                StrLen(1);
                break;
            case "nre":
            {
                int caught = 0;
                Box b = null;
                for (int i = 0; i < n; i++)
                {
                    try { sum += b.V; }
                    catch (NullReferenceException) { caught++; }
                }
                sum += Work.SpinAfterFaults(300);
                Console.WriteLine($"nre {caught}");
                break;
            }
            case "deep":
                Console.WriteLine($"deep {Work.Recurse(n)}");
                break;
        }
        GC.KeepAlive(sum);
        return 0;
    }
}
