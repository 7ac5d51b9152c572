// RabbitMQ.Client 6.x client of tests/clr/dbq.sh, the broker's port in CLRMUX_RABBIT_PORT:
//   rabbit6 publish QUEUE     publishes one message (its properties without headers)
//   rabbit6 get QUEUE         basic.get of that message, in another process
//   rabbit6 consume QUEUE     that message delivered to an EventingBasicConsumer, in another process
//   rabbit6 consume-async QUEUE   ... to an AsyncEventingBasicConsumer whose handler awaits 100 ms
//   rabbit6 methods TYPE      the type's methods (for writing definitions)
using System.Text;
using RabbitMQ.Client;

if (args[0] == "methods")
{
    foreach (var m in Type.GetType(args[1], true).GetMethods(System.Reflection.BindingFlags.Instance | System.Reflection.BindingFlags.Public |
                                                             System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.DeclaredOnly))
        if (m.Name.Contains(args.Length > 2 ? args[2] : "Basic"))
            Console.WriteLine(m);
    return 0;
}
var f = new ConnectionFactory { HostName = "127.0.0.1", Port = int.Parse(Environment.GetEnvironmentVariable("CLRMUX_RABBIT_PORT")),
                                DispatchConsumersAsync = args[0] == "consume-async" };
using IConnection conn = f.CreateConnection();
using IModel ch = conn.CreateModel();
string queue = args[1];
ch.QueueDeclare(queue, durable: false, exclusive: false, autoDelete: false);
if (args[0] == "publish")
{
    IBasicProperties props = ch.CreateBasicProperties();
    props.MessageId = "order-42";
    ch.BasicPublish("", queue, false, props, Encoding.UTF8.GetBytes("order 42"));
    Console.WriteLine("published");
    return 0;
}
if (args[0] == "consume" || args[0] == "consume-async")
{
    using var delivered = new ManualResetEventSlim();
    string body = null;
    if (args[0] == "consume")
    {
        var consumer = new RabbitMQ.Client.Events.EventingBasicConsumer(ch);
        consumer.Received += (_, ea) =>
        {
            body = Encoding.UTF8.GetString(ea.Body.Span);
            delivered.Set();
        };
        ch.BasicConsume(queue, autoAck: true, consumer);
    }
    else
    {
        var consumer = new RabbitMQ.Client.Events.AsyncEventingBasicConsumer(ch);
        consumer.Received += async (_, ea) =>
        {
            string b = Encoding.UTF8.GetString(ea.Body.Span);
            await Task.Delay(100);
            body = b;
            delivered.Set();
        };
        ch.BasicConsume(queue, autoAck: true, consumer);
    }
    if (!delivered.Wait(TimeSpan.FromSeconds(20)))
    {
        Console.WriteLine("nothing");
        return 1;
    }
    Thread.Sleep(200); // the delivery's call returns (its span ends) before the process does
    Console.WriteLine("delivered " + body);
    return 0;
}
for (int i = 0; i < 100; i++)
{
    BasicGetResult r = ch.BasicGet(queue, autoAck: true);
    if (r != null)
    {
        Console.WriteLine("got " + Encoding.UTF8.GetString(r.Body.Span));
        return 0;
    }
    Thread.Sleep(50);
}
Console.WriteLine("nothing");
return 1;
