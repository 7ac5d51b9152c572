// demo/orders: make demo's service that talks to a real database and a queue (issue 23). Two
// processes, the servers' ports in CLRMUX_PG_PORT and CLRMUX_RABBIT_PORT (tests/clr/servers.sh):
//   orders front N   handles N requests: each is a server Activity `POST /orders` (as a web
//                    framework makes one), Front.PlaceOrderAsync inserts the order into PostgreSQL
//                    (Npgsql) and publishes it to the queue `orders` (RabbitMQ.Client 7)
//   orders warehouse N   takes N orders off the queue (basic.get), continues each one's trace
//                    from the message's traceparent header and marks the order shipped in the
//                    database (Warehouse.ShipAsync)
// The app has no tracing code beyond its own Activity: clrmux's tracer records the libraries'
// spans (Npgsql's and RabbitMQ.Client's ActivitySources) and the traced methods.
using System.Diagnostics;
using System.Text;
using Npgsql;
using RabbitMQ.Client;

namespace Orders;

public static class Program
{
    static readonly ActivitySource Source = new("Orders");

    public static async Task<int> Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "";
        int n = args.Length > 1 ? int.Parse(args[1]) : 3;
        string pg = Environment.GetEnvironmentVariable("CLRMUX_PG_PORT"), mq = Environment.GetEnvironmentVariable("CLRMUX_RABBIT_PORT");
        if (string.IsNullOrEmpty(pg) || string.IsNullOrEmpty(mq) || (mode != "front" && mode != "warehouse"))
        {
            Console.Error.WriteLine("usage: CLRMUX_PG_PORT=P CLRMUX_RABBIT_PORT=Q orders front|warehouse N");
            return 2;
        }
        await using var db = new NpgsqlConnection($"Host=127.0.0.1;Port={pg};Username=postgres;Database=clrmux");
        await db.OpenAsync();
        var f = new ConnectionFactory { HostName = "127.0.0.1", Port = int.Parse(mq) };
        await using IConnection conn = await f.CreateConnectionAsync();
        await using IChannel ch = await conn.CreateChannelAsync();
        await ch.QueueDeclareAsync("orders", durable: false, exclusive: false, autoDelete: false);
        if (mode == "front")
        {
            await using (var cmd = new NpgsqlCommand("CREATE TABLE IF NOT EXISTS orders (id INT, item TEXT, shipped BOOL)", db))
                await cmd.ExecuteNonQueryAsync();
            for (int i = 1; i <= n; i++)
            {
                using Activity request = Source.StartActivity("POST /orders", ActivityKind.Server);
                await Front.PlaceOrderAsync(db, ch, i);
                Console.WriteLine($"front: order {i} placed");
            }
            return 0;
        }
        int got = 0;
        for (int tries = 0; got < n && tries < 200; tries++)
        {
            BasicGetResult r = await ch.BasicGetAsync("orders", autoAck: true);
            if (r == null)
            {
                await Task.Delay(50);
                continue;
            }
            got++;
            string parent = null;
            if (r.BasicProperties.Headers != null && r.BasicProperties.Headers.TryGetValue("traceparent", out object tp))
                parent = tp is byte[] b ? Encoding.UTF8.GetString(b) : tp?.ToString();
            using Activity work = parent != null ? Source.StartActivity("ship order", ActivityKind.Consumer, parent)
                                                 : Source.StartActivity("ship order", ActivityKind.Consumer);
            await Warehouse.ShipAsync(db, int.Parse(Encoding.UTF8.GetString(r.Body.Span)));
            Console.WriteLine("warehouse: order " + Encoding.UTF8.GetString(r.Body.Span) + " shipped");
        }
        return got == n ? 0 : 1;
    }
}

public static class Front
{
    public static async Task PlaceOrderAsync(NpgsqlConnection db, IChannel ch, int id)
    {
        await using (var cmd = new NpgsqlCommand("INSERT INTO orders (id, item, shipped) VALUES (@id, 'book', false)", db))
        {
            cmd.Parameters.AddWithValue("id", id);
            await cmd.ExecuteNonQueryAsync();
        }
        await ch.BasicPublishAsync("", "orders", mandatory: false, new BasicProperties(), Encoding.UTF8.GetBytes(id.ToString()));
    }
}

public static class Warehouse
{
    public static async Task ShipAsync(NpgsqlConnection db, int id)
    {
        await using var cmd = new NpgsqlCommand("UPDATE orders SET shipped = true WHERE id = @id", db);
        cmd.Parameters.AddWithValue("id", id);
        await cmd.ExecuteNonQueryAsync();
    }
}
