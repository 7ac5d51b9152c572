// The traced methods of the OpenTelemetry test apps (otelapp, otelweb): clrmux traces
// OtelApp.Work::Handle, ::Inner and ::Fail.
using System.Runtime.CompilerServices;

namespace OtelApp;

public static class Work
{
    public static long Sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Handle(int n) => Inner(n) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Fail(string why) => throw new InvalidOperationException(why);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Inner(int n)
    {
        Sink += n;
        return n * 2;
    }
}
