// tracee: target app for the IL-rewriting tracer's tests.
//
// Every method below marked [MethodImpl(MethodImplOptions.NoInlining)] is a
// trace target. Main calls them a fixed number of times; a tracer that emits
// one span per call must see exactly these counts (single run of the app):
//
//   Method (full name)                                   Calls  Notes
//   ---------------------------------------------------  -----  -------------------------------
//   Tracee.Program.Main                                      1  entry point (string[] args)
//   Tracee.Targets.Args0                                     1  static, 0 args, returns int
//   Tracee.Targets.Args1                                     1  1 arg, returns int
//   Tracee.Targets.Add                                      10  tiny: return a + b;
//   Tracee.Targets.Args3                                     1  int,long,double -> double
//   Tracee.Targets.Args4                                     1  4 ints -> long
//   Tracee.Targets.Args5                                     1  string,int,double,bool,char -> string
//   Tracee.Targets.Args6                                     1  6 longs -> long
//   Tracee.Targets.Args7                                     1  7 doubles -> double
//   Tracee.Targets.Args8                                     1  int,long,float,double,string,Point,byte,short -> string
//   Tracee.Targets.Args9                                     1  9 ints -> int
//   Tracee.Targets..ctor                                     1  instance constructor
//   Tracee.Targets.InstanceAdd                               3  instance, returns int
//   Tracee.Targets.InstanceVoid                              2  instance, returns void
//   Tracee.Targets.InstanceArgs9                             1  instance, 9 args (+this) -> string
//   Tracee.Targets.VoidStatic                                2  static, returns void
//   Tracee.Targets.ReturnLong                                1  returns long
//   Tracee.Targets.ReturnDouble                              1  returns double
//   Tracee.Targets.MakePoint                                 2  returns struct Tracee.Point
//   Tracee.Targets.MovePoint                                 1  struct arg, returns struct
//   Tracee.Targets.Greet                                     1  returns string (reference type)
//   Tracee.Targets.Swap                                      1  two ref parameters
//   Tracee.Targets.TryDivide                                 2  out parameter, returns bool
//   Tracee.Targets.TryCatchFinally                           2  try/catch/finally (throws+catches once inside)
//   Tracee.Targets.Classify                                  9  dense switch 0..7 (IL `switch`), 0..8 once each
//   Tracee.Targets.LongBody                                  1  loop body > 128 bytes IL (long branches)
//   Tracee.Targets.Factorial                                10  recursive: Factorial(10) -> 10 calls
//   Tracee.Targets.Identity                                  3  generic method: Identity<int> x2, Identity<string> x1
//   Tracee.Box`1..ctor                                       2  Box<int> x1, Box<string> x1
//   Tracee.Box`1.Get                                         2  Box<int>.Get x1, Box<string>.Get x1
//   Tracee.Targets.ComputeAsync                              1  async Task<int> (stub; awaits Task.Yield + Task.Delay(1))
//   Tracee.Targets.ComputeValueAsync                         1  async ValueTask<int> (stub; awaits Task.Yield)
//   Tracee.Targets.Thrower                                   1  throws InvalidOperationException (caught in Main)
//   Tracee.Targets.Parallel8                                 1  starts 8 Threads, joins them
//   Tracee.Targets.WorkerBody                                8  thread body (one per thread)
//   Tracee.Targets.Work                                    800  8 threads x 100 calls, concurrently
//   Tracee.Targets.CombinePath                               2  wraps System.IO.Path.Combine(string,string)
//   Tracee.Targets.ReadFile                                  1  wraps System.IO.File.ReadAllText(string)
//
//   System.Private.CoreLib methods called from the targets above (the runtime
//   itself may call them too, so a tracer sees AT LEAST these):
//   System.IO.Path.Combine(string,string)                    2  (from CombinePath)
//   System.IO.File.ReadAllText(string)                       1  (from ReadFile)
//
// Async methods: the state machines' MoveNext methods
// (Tracee.Targets+<ComputeAsync>d__N.MoveNext etc.) are compiler-generated and
// not counted above; their call count depends on how the awaits complete.
//
// Exceptions thrown by the app: exactly 2 (ArgumentException inside
// TryCatchFinally(-1), InvalidOperationException from Thrower()).
//
// Output is identical on every run; last line is "done".
using System.Runtime.CompilerServices;

namespace Tracee;

public struct Point
{
    public int X;
    public int Y;

    public Point(int x, int y)
    {
        X = x;
        Y = y;
    }

    public override string ToString() => "(" + X + "," + Y + ")";
}

public class Box<T>
{
    private readonly T _value;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public Box(T value)
    {
        _value = value;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public T Get() => _value;
}

public class Targets
{
    public const int ParallelThreads = 8;
    public const int WorkPerThread = 100;

    private static int s_voidCounter;
    private int _total;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public Targets(int start)
    {
        _total = start;
    }

    public int Total => _total;
    public static int VoidCounter => s_voidCounter;

    // ---- arity 0..9 ----------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Args0() => 42;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Args1(int a) => a * 2;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Add(int a, int b)
    {
        return a + b;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double Args3(int a, long b, double c) => a + b + c;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Args4(int a, int b, int c, int d) => (long)a * b + (long)c * d;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Args5(string a, int b, double c, bool d, char e) =>
        a + "|" + b + "|" + c + "|" + (d ? "true" : "false") + "|" + e;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Args6(long a, long b, long c, long d, long e, long f) =>
        a + 10 * b + 100 * c + 1000 * d + 10000 * e + 100000 * f;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double Args7(double a, double b, double c, double d, double e, double f, double g) =>
        a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Args8(int a, long b, float c, double d, string e, Point f, byte g, short h) =>
        a + "/" + b + "/" + c + "/" + d + "/" + e + "/" + f + "/" + g + "/" + h;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Args9(int a, int b, int c, int d, int e, int f, int g, int h, int i) =>
        a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8 + i * 9;

    // ---- instance methods ----------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public int InstanceAdd(int x)
    {
        _total += x;
        return _total;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public void InstanceVoid()
    {
        _total *= 2;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public string InstanceArgs9(int a, long b, double c, string d, Point e, bool f, char g, float h, object i) =>
        _total + ":" + a + "," + b + "," + c + "," + d + "," + e + "," + f + "," + g + "," + h + "," + i;

    // ---- return kinds ----------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void VoidStatic(int x)
    {
        s_voidCounter += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long ReturnLong(long x) => x * 1_000_000_007L;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double ReturnDouble(double x) => x * 0.5 + 0.25;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static Point MakePoint(int x, int y) => new Point(x, y);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static Point MovePoint(Point p, int d) => new Point(p.X + d, p.Y - d);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Greet(string name) => "hello, " + name;

    // ---- ref / out -------------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Swap(ref int a, ref int b)
    {
        int t = a;
        a = b;
        b = t;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static bool TryDivide(int a, int b, out int q)
    {
        if (b == 0)
        {
            q = 0;
            return false;
        }
        q = a / b;
        return true;
    }

    // ---- exception handling ---------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int TryCatchFinally(int x)
    {
        int r = 0;
        try
        {
            if (x < 0)
                throw new ArgumentException("negative");
            r = x * 10;
        }
        catch (ArgumentException)
        {
            r = -1;
        }
        finally
        {
            r += 1000;
        }
        return r;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Thrower()
    {
        throw new InvalidOperationException("thrower says no");
    }

    // ---- control flow ----------------------------------------------------

    // Dense cases 0..7: compiled to an IL `switch` jump table.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string Classify(int x)
    {
        switch (x)
        {
            case 0: return "zero";
            case 1: return "one";
            case 2: return "two";
            case 3: return "three";
            case 4: return "four";
            case 5: return "five";
            case 6: return "six";
            case 7: return "seven";
            default: return "other";
        }
    }

    // The loop body is well over 128 bytes of IL, so the compiler must use
    // long-form branches (br / blt, not br.s / blt.s) around it.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long LongBody(int n)
    {
        long acc = 17;
        long b = 3;
        long c = 5;
        for (int i = 0; i < n; i++)
        {
            acc += i * 3;
            acc ^= acc << 1;
            acc += i % 7;
            b = b * 31 + i;
            c = c * 17 + (b & 0xFF);
            acc -= c % 13;
            acc ^= b >> 3;
            b ^= acc & 0xFFFF;
            c += acc % 11;
            acc += b % 101;
            acc ^= c << 2;
            b -= c % 7;
            c ^= acc >> 5;
            acc += (b ^ c) & 0x3FF;
            b = (b * 7 + 3) % 1_000_003;
            c = (c * 11 + 5) % 1_000_033;
            acc = (acc * 13 + b + c) % 1_000_000_007;
            if (acc < 0)
                acc = -acc;
            acc += i * i % 97;
            b += acc % 19;
            c -= b % 23;
        }
        return acc + b + c;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Factorial(int n) => n <= 1 ? 1 : n * Factorial(n - 1);

    // ---- generics --------------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static T Identity<T>(T value) => value;

    // ---- async -----------------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static async Task<int> ComputeAsync(int x)
    {
        await Task.Yield();
        await Task.Delay(1);
        return x * 3;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static async ValueTask<int> ComputeValueAsync(int x)
    {
        await Task.Yield();
        return x + 1;
    }

    // ---- threads ---------------------------------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Work(int x)
    {
        int h = x;
        for (int i = 0; i < 1000; i++)
            h = h * 31 + i;
        return h & 0x7FFF;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WorkerBody(object state)
    {
        var slot = (long[])state;
        int id = (int)slot[0];
        long sum = 0;
        for (int i = 0; i < WorkPerThread; i++)
            sum += Work(id * WorkPerThread + i);
        slot[1] = sum;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Parallel8()
    {
        var threads = new Thread[ParallelThreads];
        var slots = new long[ParallelThreads][];
        using var go = new ManualResetEventSlim(false);
        for (int t = 0; t < ParallelThreads; t++)
        {
            slots[t] = new long[] { t, 0 };
            threads[t] = new Thread(state =>
            {
                go.Wait(); // release all 8 at once so Work runs concurrently
                WorkerBody(state);
            });
            threads[t].Name = "tracee-par-" + t;
        }
        for (int t = 0; t < ParallelThreads; t++)
            threads[t].Start(slots[t]);
        go.Set();
        long total = 0;
        for (int t = 0; t < ParallelThreads; t++)
        {
            threads[t].Join();
            total += slots[t][1];
        }
        return total;
    }

    // ---- calls into System.Private.CoreLib -------------------------------

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string CombinePath(string a, string b) => Path.Combine(a, b);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string ReadFile(string path) => File.ReadAllText(path);
}

public static class Program
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Main(string[] args)
    {
        Console.WriteLine("tracee start");

        // arity 0..9
        Console.WriteLine("Args0=" + Targets.Args0());
        Console.WriteLine("Args1=" + Targets.Args1(21));
        int sum = 0;
        for (int i = 0; i < 10; i++)
            sum = Targets.Add(sum, i);
        Console.WriteLine("Add x10=" + sum);
        Console.WriteLine("Args3=" + Targets.Args3(1, 2L, 0.5));
        Console.WriteLine("Args4=" + Targets.Args4(2, 3, 4, 5));
        Console.WriteLine("Args5=" + Targets.Args5("s", 7, 1.25, true, 'c'));
        Console.WriteLine("Args6=" + Targets.Args6(1, 2, 3, 4, 5, 6));
        Console.WriteLine("Args7=" + Targets.Args7(1, 2, 3, 4, 5, 6, 7.5));
        Console.WriteLine("Args8=" + Targets.Args8(1, 2L, 3.5f, 4.25, "e", new Point(6, 7), 8, 9));
        Console.WriteLine("Args9=" + Targets.Args9(1, 2, 3, 4, 5, 6, 7, 8, 9));

        // instance methods
        var t = new Targets(5);
        Console.WriteLine("InstanceAdd=" + t.InstanceAdd(1));
        t.InstanceVoid();
        Console.WriteLine("InstanceAdd=" + t.InstanceAdd(2));
        t.InstanceVoid();
        Console.WriteLine("InstanceAdd=" + t.InstanceAdd(3));
        Console.WriteLine("InstanceArgs9=" + t.InstanceArgs9(1, 2L, 3.5, "d", new Point(5, 6), true, 'g', 8.5f, "obj"));
        Console.WriteLine("Total=" + t.Total);

        // return kinds
        Targets.VoidStatic(3);
        Targets.VoidStatic(4);
        Console.WriteLine("VoidCounter=" + Targets.VoidCounter);
        Console.WriteLine("ReturnLong=" + Targets.ReturnLong(3));
        Console.WriteLine("ReturnDouble=" + Targets.ReturnDouble(3.0));
        Point p1 = Targets.MakePoint(1, 2);
        Point p2 = Targets.MakePoint(10, 20);
        Console.WriteLine("MakePoint=" + p1 + " " + p2);
        Console.WriteLine("MovePoint=" + Targets.MovePoint(p2, 3));
        Console.WriteLine("Greet=" + Targets.Greet("tracer"));

        // ref / out
        int x = 1, y = 2;
        Targets.Swap(ref x, ref y);
        Console.WriteLine("Swap=" + x + "," + y);
        bool ok1 = Targets.TryDivide(17, 5, out int q1);
        bool ok2 = Targets.TryDivide(1, 0, out int q2);
        Console.WriteLine("TryDivide=" + ok1 + ":" + q1 + " " + ok2 + ":" + q2);

        // exception handling
        Console.WriteLine("TryCatchFinally(4)=" + Targets.TryCatchFinally(4));
        Console.WriteLine("TryCatchFinally(-1)=" + Targets.TryCatchFinally(-1));
        try
        {
            Targets.Thrower();
            Console.WriteLine("Thrower did not throw");
        }
        catch (InvalidOperationException e)
        {
            Console.WriteLine("Thrower caught: " + e.Message);
        }

        // control flow
        for (int i = 0; i <= 8; i++)
            Console.WriteLine("Classify(" + i + ")=" + Targets.Classify(i));
        Console.WriteLine("LongBody=" + Targets.LongBody(1000));
        Console.WriteLine("Factorial(10)=" + Targets.Factorial(10));

        // generics
        Console.WriteLine("Identity<int>=" + Targets.Identity(7) + "," + Targets.Identity(8));
        Console.WriteLine("Identity<string>=" + Targets.Identity("id"));
        var bi = new Box<int>(99);
        var bs = new Box<string>("boxed");
        Console.WriteLine("Box<int>.Get=" + bi.Get());
        Console.WriteLine("Box<string>.Get=" + bs.Get());

        // async
        Console.WriteLine("ComputeAsync=" + Targets.ComputeAsync(14).GetAwaiter().GetResult());
        Console.WriteLine("ComputeValueAsync=" + Targets.ComputeValueAsync(41).AsTask().GetAwaiter().GetResult());

        // threads
        Console.WriteLine("Parallel8=" + Targets.Parallel8());

        // CoreLib calls on a temp file (unique per process; path not printed)
        string tmp = Targets.CombinePath(Path.GetTempPath(), "clrmux-tracee-" + Environment.ProcessId + ".txt");
        File.WriteAllText(tmp, "tracee file contents\n");
        try
        {
            Console.WriteLine("ReadFile=" + Targets.ReadFile(tmp).TrimEnd('\n'));
            Console.WriteLine("CombinePath=" + Targets.CombinePath("dir", "file.txt"));
        }
        finally
        {
            File.Delete(tmp);
        }

        Console.WriteLine("done");
        return 0;
    }
}
