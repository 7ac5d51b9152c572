// shapes: workload with distinct, recognisable "shapes" for the sampling
// profiler's tests. Usage: shapes [duration_ms]   (default 3000)
//
//   thread name    method                       behaviour
//   -------------  ---------------------------  ------------------------------------------
//   cpu-hot        Shapes.Cpu.SpinHot           busy arithmetic loop (on-CPU)
//   idle           Shapes.Idle.SleepLong        Thread.Sleep(50) in a loop (off-CPU)
//   thrower        Shapes.Thrower.ThrowLoop     throws+catches Shapes.ShapeException, ~1000/s
//   alloc          Shapes.Alloc.AllocLoop       allocates Shapes.Blob (byte[1024] field), ~10 MB/s
//   contend-1/2    Shapes.Contend.LockLoop      two threads, one lock, each holds it ~1 ms spinning
//   nested         Shapes.Outer<T>.Inner.Wait   Thread.Sleep(50) in a loop, in a type nested in a generic one
//   main           Shapes.Program.Main          sleeps for the duration, then stops and joins all
//
// Output is deterministic (no counts): the thread list and "shapes done"; stderr gets
// "process-cpu-ms N", the process's CPU time at the end, and "thrown=N", the exceptions thrown.
using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace Shapes;

public sealed class ShapeException : Exception
{
    public ShapeException(int n) : base("shape " + n) { }
}

public sealed class Blob
{
    public byte[] Data = new byte[1024];
    public Blob Next;
    // half a KB inline: the allocation that crosses an AllocationTick's 100 KB is a Blob about
    // a third of the time, not 2% (a 24-byte Blob beside its 1 KB array went unnamed in 1% of
    // profiler.sh's runs)
    public Pad512 Pad;
}

[InlineArray(64)]
public struct Pad512
{
    private long _element;
}

internal static class Control
{
    private static volatile bool s_stop;
    public static bool Stop => s_stop;
    public static void RequestStop() => s_stop = true;
}

public static class Cpu
{
    public static long Sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SpinHot()
    {
        long acc = 1;
        while (!Control.Stop)
        {
            for (int i = 0; i < 100_000; i++)
            {
                acc = acc * 6364136223846793005L + 1442695040888963407L;
                acc ^= acc >> 29;
            }
        }
        Sink = acc;
    }
}

public static class Idle
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SleepLong()
    {
        while (!Control.Stop)
            Thread.Sleep(50);
    }
}

public static class Thrower
{
    public static long Caught;

    // Paced to ~1 throw per elapsed millisecond.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowLoop()
    {
        var sw = Stopwatch.StartNew();
        long n = 0;
        while (!Control.Stop)
        {
            if (n <= sw.ElapsedMilliseconds)
            {
                try
                {
                    throw new ShapeException((int)n);
                }
                catch (ShapeException)
                {
                    Caught++;
                }
                n++;
            }
            else
            {
                Thread.Sleep(1);
            }
        }
    }
}

public static class Alloc
{
    public static long Allocated;

    // 10 Blobs (~15 KB) per millisecond; a ring of 256 keeps some alive so a
    // few survive gen0 collections.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocLoop()
    {
        var ring = new Blob[256];
        int pos = 0;
        while (!Control.Stop)
        {
            for (int i = 0; i < 10; i++)
            {
                var b = new Blob();
                b.Data[i] = (byte)i;
                ring[pos] = b;
                pos = (pos + 1) & 255;
                Allocated++;
            }
            Thread.Sleep(1);
        }
        GC.KeepAlive(ring);
    }
}

public static class Contend
{
    private static readonly object s_lock = new object();
    public static long Acquired;

    // Each acquisition holds the lock for ~1 ms of spinning, so the other
    // contender blocks on Monitor.Enter (contention events / wait samples).
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void LockLoop()
    {
        long holdTicks = Stopwatch.Frequency / 1000;
        while (!Control.Stop)
        {
            lock (s_lock)
            {
                Acquired++;
                long start = Stopwatch.GetTimestamp();
                while (Stopwatch.GetTimestamp() - start < holdTicks)
                    Thread.SpinWait(20);
            }
            Thread.SpinWait(50); // let the other thread win sometimes
        }
    }
}

// A type nested in a generic type (T = int): the frame names of nested and generic types.
public static class Outer<T>
{
    public static class Inner
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Wait()
        {
            while (!Control.Stop)
                Thread.Sleep(50);
        }
    }
}

public static class Program
{
    public static int Main(string[] args)
    {
        int durationMs = 3000;
        if (args.Length > 0 && (!int.TryParse(args[0], out durationMs) || durationMs < 0))
        {
            Console.Error.WriteLine("usage: shapes [duration_ms]");
            return 2;
        }

        Thread.CurrentThread.Name = "main";
        var threads = new List<Thread>
        {
            new Thread(Cpu.SpinHot) { Name = "cpu-hot" },
            new Thread(Idle.SleepLong) { Name = "idle" },
            new Thread(Thrower.ThrowLoop) { Name = "thrower" },
            new Thread(Alloc.AllocLoop) { Name = "alloc" },
            new Thread(Contend.LockLoop) { Name = "contend-1" },
            new Thread(Contend.LockLoop) { Name = "contend-2" },
            new Thread(Outer<int>.Inner.Wait) { Name = "nested" },
        };
        Console.WriteLine("shapes start");
        foreach (var t in threads)
        {
            t.Start();
            Console.WriteLine("thread " + t.Name);
        }

        Thread.Sleep(durationMs);
        Control.RequestStop();
        foreach (var t in threads)
            t.Join();

        Console.WriteLine("shapes done");
        // for the profiler's test (stderr keeps stdout deterministic): CPU time of the whole process
        Console.Error.WriteLine("process-cpu-ms " + (long)Process.GetCurrentProcess().TotalProcessorTime.TotalMilliseconds);
        // for the diagnostics tools' test: the ShapeExceptions thrown (one traced constructor each)
        Console.Error.WriteLine("thrown=" + Thrower.Caught);
        return 0;
    }
}
