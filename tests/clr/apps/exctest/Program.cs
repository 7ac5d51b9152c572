// exctest: exceptions through traced methods, for tests/clr/exceptions.sh. Every way an
// exception can meet a method: thrown through it, caught in it, rethrown, thrown from a finally
// and caught by a filter, thrown and caught inside a finally while another one unwinds, in a
// recursion caught halfway, synchronously from a method that returns a Task, and after an
// await. The suite traces the methods of ExcTest and checks that a profiler recording the
// exception callbacks (fake_profilers/exseq.c) sees the same sequence beside the tracer as
// alone, and that the tracer's spans end where the exception leaves each method, with ERROR.
//
// Spans expected (method: count, how many with status ERROR):
//   ExcTest.Main 1/0, ExcTest.Thrower 5/5, ExcTest.Middle 1/1, ExcTest.Catcher 1/0,
//   ExcTest.Rethrower 1/1, ExcTest.CatchRethrow 1/0, ExcTest.CaughtInside 1/0,
//   ExcTest.FinallyThrows 1/1, ExcTest.FilterCatches 1/0, ExcTest.Deep 6/3 (Deep(5, catchAt 3):
//   frames 2, 1, 0 left by the exception), ExcTest.FinallyCatches 1/1 (its exception is
//   "boom 3", not the one thrown and caught in its finally), ExcTest.SyncThrowTask 1/1,
//   ExcTest.AsyncScenario 1/0, ExcTest.AfterTask 1/0 (its parent is AsyncScenario's span, not
//   SyncThrowTask's), ExcTest.ThrowAfterAwait 1/1.
// Output is identical on every run; the last line is "done".
using System;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

namespace Exc;

public static class ExcTest
{
    private static int s_finallies;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Thrower(int x) => throw new InvalidOperationException("boom " + x);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Middle(int x)
    {
        try
        {
            return Thrower(x);
        }
        finally
        {
            s_finallies++;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Catcher()
    {
        try
        {
            return Middle(1);
        }
        catch (InvalidOperationException e)
        {
            Console.WriteLine("Catcher caught: " + e.Message);
            return -1;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Rethrower()
    {
        try
        {
            Thrower(2);
        }
        catch (InvalidOperationException)
        {
            s_finallies++;
            throw;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int CatchRethrow()
    {
        try
        {
            Rethrower();
            return 0;
        }
        catch (Exception e)
        {
            Console.WriteLine("CatchRethrow caught: " + e.Message);
            return -2;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int CaughtInside()
    {
        try
        {
            throw new ArgumentException("inside");
        }
        catch (ArgumentException e)
        {
            Console.WriteLine("CaughtInside caught: " + e.Message);
            return 3;
        }
    }

    // thrown by a finally that runs on the normal path, caught by a filter in the caller
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void FinallyThrows()
    {
        try
        {
            s_finallies++;
        }
        finally
        {
            try
            {
                s_finallies++;
            }
            finally
            {
                throw new FormatException("from a finally");
            }
        }
    }

    private static bool Matches(Exception e) => e.Message == "from a finally";

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int FilterCatches()
    {
        try
        {
            FinallyThrows();
            return 0;
        }
        catch (Exception e) when (Matches(e))
        {
            Console.WriteLine("FilterCatches caught: " + e.Message);
            return 4;
        }
    }

    // a recursion caught halfway: Deep(5, 3) throws at 0, Deep(3) catches
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Deep(int n, int catchAt)
    {
        if (n == 0)
            throw new ArgumentOutOfRangeException(nameof(n), "bottom");
        if (n != catchAt)
            return Deep(n - 1, catchAt) + 1;
        try
        {
            return Deep(n - 1, catchAt) + 1;
        }
        catch (ArgumentOutOfRangeException)
        {
            return -100;
        }
    }

    // another exception is thrown and caught in its finally while "boom 3" unwinds it
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void FinallyCatches()
    {
        try
        {
            Thrower(3);
        }
        finally
        {
            try
            {
                Thrower(4);
            }
            catch (InvalidOperationException)
            {
                s_finallies++;
            }
        }
    }

    // returns a Task, throws before returning it
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static Task<int> SyncThrowTask(int x)
    {
        if (x > 0)
            throw new InvalidOperationException("sync " + x);
        return Task.FromResult(x);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static async Task<int> AfterTask()
    {
        await Task.Delay(1);
        return 7;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static async Task<int> ThrowAfterAwait()
    {
        await Task.Yield();
        Thrower(5);
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static async Task<int> AsyncScenario()
    {
        int r = 0;
        try
        {
            r = await SyncThrowTask(1);
        }
        catch (InvalidOperationException e)
        {
            Console.WriteLine("AsyncScenario caught: " + e.Message);
        }
        await Task.Yield(); // the flow's context is captured here, after the exception
        r += await AfterTask();
        try
        {
            await ThrowAfterAwait();
        }
        catch (InvalidOperationException e)
        {
            Console.WriteLine("AsyncScenario caught: " + e.Message);
        }
        return r;
    }

    public static int Main()
    {
        Console.WriteLine("Catcher: " + Catcher());
        Console.WriteLine("CatchRethrow: " + CatchRethrow());
        Console.WriteLine("CaughtInside: " + CaughtInside());
        Console.WriteLine("FilterCatches: " + FilterCatches());
        Console.WriteLine("Deep: " + Deep(5, 3));
        try
        {
            FinallyCatches();
        }
        catch (InvalidOperationException e)
        {
            Console.WriteLine("Main caught: " + e.Message);
        }
        Console.WriteLine("AsyncScenario: " + AsyncScenario().GetAwaiter().GetResult());
        // GetResult returns as soon as the task completes, while the pool thread that completed
        // it is still running its other continuations (the tracer's span end) and has not left
        // ThrowAfterAwait's catch (ExceptionCatcherLeave): a process that ends right then loses
        // them, alone or not (docs/tracing.md). The test compares runs, so it lets them finish.
        Thread.Sleep(300);
        Console.WriteLine("finallies: " + s_finallies);
        Console.WriteLine("done");
        return 0;
    }
}
