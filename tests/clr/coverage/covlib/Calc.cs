// The code whose coverage is measured (tests/clr/coverage.sh), and which the built-in tracer
// traces: a generic method called with several instantiations, an async method, a method
// with try/catch, a method called often enough to be compiled again at tier 1, and a method
// never called (a line with no hit, so that an empty report cannot pass as identical).
using System;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

namespace CovLib
{
    public static class Calc
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static T Max<T>(T a, T b) where T : IComparable<T>
        {
            if (a.CompareTo(b) >= 0)
                return a;
            return b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<int> AddLaterAsync(int a, int b)
        {
            await Task.Yield();
            return a + b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int ParseOr(string s, int fallback)
        {
            try
            {
                return int.Parse(s);
            }
            catch (FormatException)
            {
                return fallback;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Hot(int x)
        {
            if ((x & 1) == 0)
                return x / 2;
            return 3 * x + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int NeverCalled(int x)
        {
            return x * 7;
        }
    }
}
