// Calls covlib's methods a known number of times (tests/clr/coverage.sh counts the tracer's
// spans against them): Max 5 times (int, double, string, long, short: four instantiations of
// their own and one shared), AddLaterAsync once, ParseOr twice (once into its catch), Hot
// HotRounds * HotCalls times with pauses in which the tiering thread compiles it at tier 1.
using System.Threading;
using CovLib;
using Xunit;

public class CalcTests
{
    const int HotRounds = 40, HotCalls = 1000;

    [Fact]
    public void Runs()
    {
        Assert.Equal(3, Calc.Max(1, 3));
        Assert.Equal(2.5, Calc.Max(2.5, 1.0));
        Assert.Equal("b", Calc.Max("a", "b"));
        Assert.Equal(5L, Calc.Max(2L, 5L));
        Assert.Equal((short)4, Calc.Max((short)4, (short)1));
        Assert.Equal(5, Calc.AddLaterAsync(2, 3).GetAwaiter().GetResult());
        Assert.Equal(42, Calc.ParseOr("42", 0));
        Assert.Equal(-1, Calc.ParseOr("x", -1));
        long sum = 0;
        for (int round = 0; round < HotRounds; round++)
        {
            for (int i = 0; i < HotCalls; i++)
                sum += Calc.Hot(i);
            Thread.Sleep(5);
        }
        Assert.True(sum > 0);
    }
}
