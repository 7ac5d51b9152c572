// The database and queue client of tests/clr/dbq.sh: `dbapp MODE`, the servers' ports in
// CLRMUX_*_PORT (tests/clr/servers.sh). Each mode runs a few statements or messages, one of
// them failing, and prints what it got; the spans are clrmux's to record (no SDK here).
//   pg | mysql | mysqldata | sqlite FILE   statements: sync and async, a literal, a failing query
//   redis                       SET, GET (async), an unknown command
//   kafka-produce TOPIC DONEFILE   a librdkafka mock cluster, its bootstrap printed, one message produced
//   kafka-consume BOOTSTRAP TOPIC  that message consumed, in another process
//   user                        DbApp.Orders.Place, for a user's integration definition
//   rabbit-publish QUEUE        publishes one message (RabbitMQ.Client 7)
//   rabbit-get QUEUE            basic.get of that message, in another process
using System.Data.Common;
using System.Diagnostics;

static string Env(string n) => Environment.GetEnvironmentVariable(n) ?? throw new Exception(n + " is not set");

static async Task Statements(DbConnection c, string failing)
{
    await c.OpenAsync();
    using (DbCommand cmd = c.CreateCommand())
    {
        cmd.CommandText = "CREATE TABLE IF NOT EXISTS orders (id INT, item VARCHAR(40))";
        cmd.ExecuteNonQuery();
        cmd.CommandText = "INSERT INTO orders (id, item) VALUES (42, 'secret-item')";
        cmd.ExecuteNonQuery();
        cmd.CommandText = "SELECT count(*) FROM orders WHERE item = 'secret-item'";
        Console.WriteLine("scalar " + cmd.ExecuteScalar());
        cmd.CommandText = "SELECT id, item FROM orders WHERE id = 42";
        using (DbDataReader r = await cmd.ExecuteReaderAsync())
            while (await r.ReadAsync())
                Console.WriteLine("row " + r.GetInt32(0));
        cmd.CommandText = "DELETE FROM orders WHERE id = 42";
        Console.WriteLine("deleted " + await cmd.ExecuteNonQueryAsync());
        cmd.CommandText = failing;
        try { cmd.ExecuteNonQuery(); }
        catch (DbException e) { Console.WriteLine("failed " + e.GetType().Name); }
    }
    await c.CloseAsync();
}

string mode = args.Length > 0 ? args[0] : "";
switch (mode)
{
case "pg":
    await Statements(new Npgsql.NpgsqlConnection(
        $"Host=127.0.0.1;Port={Env("CLRMUX_PG_PORT")};Username=postgres;Database=clrmux;Pooling=false"),
        "SELECT * FROM no_such_table");
    break;
case "mysql":
    await Statements(new MySqlConnector.MySqlConnection(
        $"Server=127.0.0.1;Port={Env("CLRMUX_MYSQL_PORT")};User ID=clrmux;Password=clrmux;Database=clrmux;Pooling=false"),
        "SELECT * FROM no_such_table");
    break;
case "mysqldata":
    await Statements(new MySql.Data.MySqlClient.MySqlConnection(
        $"Server=127.0.0.1;Port={Env("CLRMUX_MYSQL_PORT")};User ID=clrmux;Password=clrmux;Database=clrmux;Pooling=false;SslMode=Disabled"),
        "SELECT * FROM no_such_table");
    break;
case "redis":
    using (var mux = await StackExchange.Redis.ConnectionMultiplexer.ConnectAsync($"127.0.0.1:{Env("CLRMUX_REDIS_PORT")}"))
    {
        StackExchange.Redis.IDatabase db = mux.GetDatabase();
        db.StringSet("order:42", "secret-item");
        Console.WriteLine("get " + await db.StringGetAsync("order:42"));
        try { db.Execute("NOSUCHCOMMAND"); }
        catch (StackExchange.Redis.RedisServerException e) { Console.WriteLine("failed " + e.GetType().Name); }
    }
    break;
case "kafka-produce": // a mock cluster in this process (librdkafka's), kept until DONEFILE exists
    await Kafka.Produce(args[1], args[2]);
    break;
case "kafka-consume":
    Kafka.Consume(args[1], args[2]);
    break;
case "sqlite-bench": // ns per ExecuteScalar of `SELECT ?` on an in-memory database (bench/integ.sh)
    Bench.Sqlite(int.Parse(args[1]));
    break;
case "sqlclient": // no SQL Server: a connection to a closed loopback port (args[1]) fails to open;
                  // then each Execute* on it fails in the call
    {
        using var c = new Microsoft.Data.SqlClient.SqlConnection($"Server=tcp:127.0.0.1,{args[1]};Database=orders;Connect Timeout=2;ConnectRetryCount=0");
        try { c.Open(); }
        catch (Microsoft.Data.SqlClient.SqlException e) { Console.WriteLine("open failed " + e.GetType().Name); }
        using var cmd = new Microsoft.Data.SqlClient.SqlCommand("SELECT id FROM orders WHERE item = 'secret-item'", c);
        foreach (Func<Task> f in new Func<Task>[]
        {
            () => Task.FromResult(cmd.ExecuteReader()), () => Task.FromResult(cmd.ExecuteNonQuery()),
            () => Task.FromResult(cmd.ExecuteScalar()), () => cmd.ExecuteReaderAsync(), () => cmd.ExecuteNonQueryAsync(),
            () => cmd.ExecuteScalarAsync(),
        })
        {
            try { await f(); }
            catch (InvalidOperationException e) { Console.WriteLine("failed " + e.GetType().Name); }
        }
    }
    break;
case "user": // methods of the app's own, traced through the user's integration file (dbq.sh)
    Console.WriteLine("placed " + DbApp.Orders.Place("apple", 3, new DbApp.Thrower()) + " " + DbApp.Orders.Untouched("x", 1, 2, 3, 4, 5));
    Console.WriteLine("receipts " + (await DbApp.Orders.PlaceAsync("apple", 3, new DbApp.Thrower(), "a3", "a4", "carol")).Id + " " +
                      (await DbApp.Orders.PlaceNow("pear")).Id + " " + (await DbApp.Orders.PlaceLater("fig")).Id);
    try { await DbApp.Orders.PlaceFails("plum"); }
    catch (InvalidOperationException e) { Console.WriteLine("failed " + e.Message); }
    break;
case "methods": // a type's Execute* methods, for writing definitions
    foreach (var m in Type.GetType(args[1], true).GetMethods(System.Reflection.BindingFlags.Instance | System.Reflection.BindingFlags.Public |
                                                             System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.DeclaredOnly))
        if (m.Name.StartsWith(args.Length > 2 ? args[2] : "Execute"))
            Console.WriteLine(m);
    break;
case "sqlite":
    await Statements(new Microsoft.Data.Sqlite.SqliteConnection("Data Source=" + args[1]), "SELECT * FROM no_such_table");
    break;
case "rabbit-publish":
case "rabbit-get":
    await Rabbit.Run(mode, args[1], int.Parse(Env("CLRMUX_RABBIT_PORT")));
    break;
default:
    Console.Error.WriteLine("usage: dbapp pg|mysql|sqlite FILE|rabbit-publish QUEUE|rabbit-get QUEUE");
    return 2;
}
Console.WriteLine("done " + (Activity.Current == null ? "" : Activity.Current.OperationName));
return 0;

static class Rabbit
{
    public static async Task Run(string mode, string queue, int port)
    {
        var f = new RabbitMQ.Client.ConnectionFactory { HostName = "127.0.0.1", Port = port };
        await using RabbitMQ.Client.IConnection conn = await f.CreateConnectionAsync();
        await using RabbitMQ.Client.IChannel ch = await conn.CreateChannelAsync();
        await ch.QueueDeclareAsync(queue, durable: false, exclusive: false, autoDelete: false);
        if (mode == "rabbit-publish")
        {
            await ch.BasicPublishAsync("", queue, mandatory: false, new RabbitMQ.Client.BasicProperties(), System.Text.Encoding.UTF8.GetBytes("order 42"));
            Console.WriteLine("published");
            return;
        }
        for (int i = 0; i < 100; i++)
        {
            RabbitMQ.Client.BasicGetResult r = await ch.BasicGetAsync(queue, autoAck: true);
            if (r != null)
            {
                Console.WriteLine("got " + System.Text.Encoding.UTF8.GetString(r.Body.Span));
                return;
            }
            await Task.Delay(50);
        }
        Console.WriteLine("nothing");
    }
}

static class Bench
{
    public static void Sqlite(int n)
    {
        using var c = new Microsoft.Data.Sqlite.SqliteConnection("Data Source=:memory:");
        c.Open();
        using DbCommand cmd = c.CreateCommand();
        cmd.CommandText = "SELECT 42";
        for (int i = 0; i < 20000; i++) // tier-up and the rewrite settle
            cmd.ExecuteScalar();
        long best = long.MaxValue;
        for (int round = 0; round < 5; round++)
        {
            var sw = Stopwatch.StartNew();
            for (int i = 0; i < n; i++)
                cmd.ExecuteScalar();
            best = Math.Min(best, sw.ElapsedTicks);
        }
        Console.WriteLine($"ns_per_call {best * 1e9 / Stopwatch.Frequency / n:F0}");
    }
}

static class Kafka
{
    public static async Task Produce(string topic, string done)
    {
        var config = new Confluent.Kafka.ProducerConfig();
        config.Set("test.mock.num.brokers", "1");
        using var p = new Confluent.Kafka.ProducerBuilder<string, string>(config).Build();
        using (var admin = new Confluent.Kafka.DependentAdminClientBuilder(p.Handle).Build())
        {
            Confluent.Kafka.Metadata md = admin.GetMetadata(TimeSpan.FromSeconds(10));
            Console.WriteLine("bootstrap=" + string.Join(",", md.Brokers.Select(b => b.Host + ":" + b.Port)));
        }
        var r = await p.ProduceAsync(topic, new Confluent.Kafka.Message<string, string> { Key = "order-42", Value = "order 42" });
        Console.WriteLine("produced at offset " + r.Offset.Value);
        for (int i = 0; i < 600 && !File.Exists(done); i++) // the cluster lives as long as this process
            await Task.Delay(50);
    }

    public static void Consume(string bootstrap, string topic)
    {
        var config = new Confluent.Kafka.ConsumerConfig
        {
            BootstrapServers = bootstrap, GroupId = "dbq", AutoOffsetReset = Confluent.Kafka.AutoOffsetReset.Earliest,
        };
        using var c = new Confluent.Kafka.ConsumerBuilder<string, string>(config).Build();
        c.Subscribe(topic);
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        Confluent.Kafka.ConsumeResult<string, string> r = c.Consume(cts.Token);
        Console.WriteLine("consumed " + r.Message.Value);
        c.Close();
    }
}

namespace DbApp
{
    public static class Orders
    {
        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static int Place(string item, int quantity, Thrower t) => item.Length * quantity;

        // named by no definition: not rewritten, no span (dbq.sh)
        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static int Untouched(string item, int a1, int a2, int a3, int a4, int a5) => item.Length + a5;

        // a Task<T> that completes later, with six arguments (a definition reads arg5)
        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static async Task<Receipt> PlaceAsync(string item, int quantity, Thrower t, string a3, string a4, string customer)
        {
            await Task.Delay(30);
            return new Receipt { Id = "r-" + item, Total = quantity * 2 };
        }

        // a ValueTask<T> completed at its return, and one that completes later
        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static ValueTask<Receipt> PlaceNow(string item) => new(new Receipt { Id = "now-" + item, Total = 1 });

        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static async ValueTask<Receipt> PlaceLater(string item)
        {
            await Task.Delay(30);
            return new Receipt { Id = "later-" + item, Total = 2 };
        }

        // a Task<T> that fails after its return: no result to read
        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        public static async Task<Receipt> PlaceFails(string item)
        {
            await Task.Delay(10);
            throw new InvalidOperationException("out of " + item);
        }
    }

    public sealed class Receipt
    {
        public string Id { get; set; }
        public int Total { get; set; }
        public string Boom => throw new InvalidOperationException("a getter that throws");
    }

    public sealed class Thrower
    {
        public string Boom => throw new InvalidOperationException("a getter that throws");
    }
}
