// make demo's service: worker threads handle "orders" for a few seconds. Each request (async:
// HandleRequestAsync) parses its input, prices the order (CPU: tax and discounts), reserves
// stock (a lock several threads contend for, the stock database's answer, then an await for
// its confirmation: the rest of the request runs on a pool thread), and renders a receipt
// (allocations). Some
// requests fail validation and throw. `clrmux run --trace ... --profile` records spans for
// these methods (the async ones last until their task completes) and a CPU profile;
// scripts/demo.sh turns both into build/demo/report.html.
//
//   dotnet shop.dll [seconds=3] [threads=3]
using System.Runtime.CompilerServices;
using System.Text;

namespace Shop;

public sealed record Order(int Id, string Customer, int[] Quantities, decimal[] Prices);

public sealed class InvalidOrderException : Exception
{
    public InvalidOrderException(string message) : base(message) { }
}

public static class Pricing
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static decimal ComputeTax(decimal subtotal, int region)
    {
        // a deliberately slow tax table walk
        double rate = 0;
        for (int i = 0; i < 60_000; i++)
            rate += Math.Sin(i * 0.001 + region) * 1e-6;
        return subtotal * (0.08m + (decimal)Math.Abs(rate) % 0.02m);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static decimal ApplyDiscounts(Order order, decimal subtotal)
    {
        long h = order.Id;
        for (int i = 0; i < 30_000; i++)
            h = h * 6364136223846793005L + 1442695040888963407L;
        return (h & 7) == 0 ? subtotal * 0.9m : subtotal;
    }
}

public static class Inventory
{
    private static readonly object StockLock = new();
    private static readonly int[] Stock = new int[64];

    public static async Task ReserveAsync(Order order)
    {
        lock (StockLock)
        {
            foreach (int q in order.Quantities)
                Stock[(order.Id + q) % Stock.Length] += q;
        }
        Thread.Sleep(1);     // the stock database's answer
        await Task.Delay(1); // its confirmation: the request goes on on a pool thread
    }
}

public static class OrderService
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static Order ParseOrder(int id)
    {
        var text = $"{id};customer-{id % 17};{id % 5 + 1},{id % 3 + 1};{9.99 + id % 7},{4.5 + id % 3}";
        var parts = text.Split(';');
        var qs = parts[2].Split(',').Select(int.Parse).ToArray();
        var ps = parts[3].Split(',').Select(s => decimal.Parse(s, System.Globalization.CultureInfo.InvariantCulture)).ToArray();
        if (id % 23 == 0)
            throw new InvalidOrderException($"order {id}: customer {parts[1]} is blocked");
        return new Order(id, parts[1], qs, ps);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static decimal PriceOrder(Order order)
    {
        decimal subtotal = 0;
        for (int i = 0; i < order.Quantities.Length; i++)
            subtotal += order.Quantities[i] * order.Prices[i];
        subtotal = Pricing.ApplyDiscounts(order, subtotal);
        return subtotal + Pricing.ComputeTax(subtotal, order.Id % 4);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static string RenderReceipt(Order order, decimal total)
    {
        var sb = new StringBuilder();
        for (int i = 0; i < order.Quantities.Length; i++)
            sb.Append("item ").Append(i).Append(" x").Append(order.Quantities[i]).Append(" @ ").Append(order.Prices[i]).AppendLine();
        sb.Append("total ").Append(total.ToString("F2", System.Globalization.CultureInfo.InvariantCulture));
        return sb.ToString();
    }

    public static async Task<string> HandleRequestAsync(int id)
    {
        try
        {
            var order = ParseOrder(id);
            var total = PriceOrder(order);
            await Inventory.ReserveAsync(order);
            return RenderReceipt(order, total); // after the await: on a pool thread
        }
        catch (InvalidOrderException e)
        {
            return "rejected: " + e.Message;
        }
    }
}

public static class Program
{
    public static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 3;
        int threadCount = args.Length > 1 ? int.Parse(args[1]) : 3;
        var until = DateTime.UtcNow.AddSeconds(seconds);
        int next = 0, handled = 0, rejected = 0;
        var threads = new Thread[threadCount];
        for (int t = 0; t < threadCount; t++)
        {
            threads[t] = new Thread(() =>
            {
                while (DateTime.UtcNow < until)
                {
                    string r = OrderService.HandleRequestAsync(Interlocked.Increment(ref next)).GetAwaiter().GetResult();
                    Interlocked.Increment(ref handled);
                    if (r.StartsWith("rejected", StringComparison.Ordinal))
                        Interlocked.Increment(ref rejected);
                }
            }) { Name = "worker-" + (t + 1) };
            threads[t].Start();
        }
        foreach (var t in threads)
            t.Join();
        Console.WriteLine($"shop: {handled} requests handled on {threadCount} threads, {rejected} rejected");
        return 0;
    }
}
