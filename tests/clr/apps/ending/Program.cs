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
//              into exceptions), prints "nre <n>", returns
//   deep       Ending.Work.Recurse(n): n nested calls, prints "deep <n>", returns
//   flood      4 threads call Step in a loop until killed, after printing "ready"
//   burst      4 threads call Step n times each, then returns
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Ending;

public static class Work
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Step(int i) => i * 3 + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Recurse(int n) => n <= 1 ? 1 : 1 + Recurse(n - 1);

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

public static class Program
{
    [DllImport("libc", EntryPoint = "strlen")]
    private static extern nint StrLen(nint p);

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
