// spanapp: the workload of tests/clr/spans.sh (profiles that know their span).
// Usage: spanapp [requests] [burn_ms]   (default 3, 250)
// Runs `requests` calls of SpanApp.Requests.Request (traced by the test: the root span), each
// calling Handle (traced: a child span), which burns `burn_ms` of its thread's CPU time in
// BurnInSpan, sleeps 200 ms in WaitInSpan, throws and catches a SpanAppException in
// ThrowInSpan and allocates ~4 MB in AllocInSpan. Then the same work outside any span:
// Outside.BurnOutside (2 x burn_ms of CPU), WaitOutside, ThrowOutside, AllocOutside.
// CPU time is the thread's own (clock_gettime(CLOCK_THREAD_CPUTIME_ID)), so the sample
// counts do not depend on the machine's load. Prints "done" and a checksum.
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace SpanApp;

public sealed class SpanAppException : Exception
{
    public SpanAppException(string m) : base(m) { }
}

internal static class Cpu
{
    [StructLayout(LayoutKind.Sequential)]
    private struct Timespec { public long Sec, Nsec; }

    [DllImport("libc", EntryPoint = "clock_gettime")]
    private static extern int ClockGettime(int clock, out Timespec ts);

    public static long ThreadNs()
    {
        ClockGettime(3 /* CLOCK_THREAD_CPUTIME_ID */, out Timespec ts);
        return ts.Sec * 1000000000L + ts.Nsec;
    }

    // the hot loop: ~a few microseconds of hashing per call
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong Spin(ulong h, int n)
    {
        ulong x = h | 1;
        for (int i = 0; i < n; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h = (h ^ (x & 0xFF)) * 1099511628211UL;
        }
        return h;
    }
}

public static class Requests
{
    public static object Sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong Request(int i, int burnMs) => Handle(i, burnMs) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong Handle(int i, int burnMs)
    {
        ulong h = BurnInSpan((ulong)i, burnMs);
        WaitInSpan();
        h += ThrowInSpan(i);
        h += AllocInSpan();
        return h;
    }

    // the known method: its own loop (inlined Spin would be attributed to it too)
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong BurnInSpan(ulong seed, int ms)
    {
        ulong h = 14695981039346656037UL ^ seed, x = seed | 1;
        long end = Cpu.ThreadNs() + ms * 1000000L;
        while (Cpu.ThreadNs() < end)
            for (int i = 0; i < 200000; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                h = (h ^ (x & 0xFF)) * 1099511628211UL;
            }
        return h;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitInSpan() => Thread.Sleep(200);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong ThrowInSpan(int i)
    {
        try { throw new SpanAppException("in span " + i); }
        catch (SpanAppException e) { return (ulong)e.Message.Length; }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong AllocInSpan()
    {
        ulong n = 0;
        for (int i = 0; i < 4096; i++) { var a = new byte[1000]; Sink = a; n += (ulong)a.Length; }
        return n;
    }
}

public static class Outside
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong BurnOutside(ulong seed, int ms)
    {
        ulong h = 14695981039346656037UL ^ seed, x = seed | 1;
        long end = Cpu.ThreadNs() + ms * 1000000L;
        while (Cpu.ThreadNs() < end)
            for (int i = 0; i < 200000; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                h = (h ^ (x & 0xFF)) * 1099511628211UL;
            }
        return h;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitOutside() => Thread.Sleep(200);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong ThrowOutside()
    {
        try { throw new SpanAppException("outside"); }
        catch (SpanAppException e) { return (ulong)e.Message.Length; }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong AllocOutside()
    {
        ulong n = 0;
        for (int i = 0; i < 4096; i++) { var a = new byte[1000]; Requests.Sink = a; n += (ulong)a.Length; }
        return n;
    }
}

public static class Program
{
    public static int Main(string[] args)
    {
        int requests = args.Length > 0 ? int.Parse(args[0]) : 3;
        int burnMs = args.Length > 1 ? int.Parse(args[1]) : 250;
        ulong h = Cpu.Spin(1, 10);
        for (int i = 0; i < requests; i++)
            h += Requests.Request(i, burnMs);
        h += Outside.BurnOutside(7, 2 * burnMs);
        Outside.WaitOutside();
        h += Outside.ThrowOutside();
        h += Outside.AllocOutside();
        Console.WriteLine("done");
        Console.WriteLine("checksum " + (h != 0));
        return 0;
    }
}
