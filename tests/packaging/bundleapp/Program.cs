// The app of the NuGet package test: a little CPU work in a method the test traces.
namespace BundleApp;

public static class Work
{
    public static long Compute(int n)
    {
        long acc = 0;
        for (int i = 0; i < n; i++)
            acc += (i * 31L) ^ (acc >> 3);
        return acc;
    }
}

public static class Program
{
    public static int Main()
    {
        long total = 0;
        var until = DateTime.UtcNow.AddMilliseconds(600);
        int calls = 0;
        while (DateTime.UtcNow < until)
        {
            total += Work.Compute(200_000);
            calls++;
        }
        Console.WriteLine($"bundleapp: {calls} calls, total {total}");
        return 0;
    }
}
