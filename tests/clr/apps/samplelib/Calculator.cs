namespace SampleLib;

// Lives in its own assembly (samplelib.dll) so that the first call from
// sample.dll causes an observable assembly/module load.
public class Calculator
{
    private readonly int _scale;

    public Calculator(int scale)
    {
        _scale = scale;
    }

    public int Add(int a, int b) => (a + b) * _scale;

    public long Multiply(long a, long b) => a * b * _scale;

    public static int Gcd(int a, int b)
    {
        while (b != 0)
        {
            int t = a % b;
            a = b;
            b = t;
        }
        return a;
    }

    public int SumTo(int n)
    {
        int sum = 0;
        for (int i = 1; i <= n; i++)
            sum += i;
        return sum * _scale;
    }
}
