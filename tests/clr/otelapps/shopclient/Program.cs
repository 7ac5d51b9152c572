// The client of tests/clr/web.sh: GET FRONT/order/ID..., one gRPC Check, each inside a traced
// method (Client.Run) so that the whole request is one trace from here on.
//   shopclient HTTP_BASE GRPC_BASE ID...
using Grpc.Net.Client;
using Shop.Rpc;

namespace ShopClient;

public static class Client
{
    private static readonly HttpClient Http = new();

    public static async Task<string> OrderAsync(string front, int id) => await Http.GetStringAsync($"{front}/order/{id}");

    public static async Task<int> CheckAsync(Inventory.InventoryClient c, int id) => (await c.CheckAsync(new CheckRequest { Id = id })).Count;

    public static async Task<int> Main(string[] args)
    {
        var inv = new Inventory.InventoryClient(GrpcChannel.ForAddress(args[1]));
        for (int i = 2; i < args.Length; i++)
            Console.WriteLine(await OrderAsync(args[0], int.Parse(args[i])));
        Console.WriteLine("rpc " + await CheckAsync(inv, 5));
        try
        {
            await CheckAsync(inv, -1);
        }
        catch (Grpc.Core.RpcException e)
        {
            Console.WriteLine("rpc error " + e.StatusCode);
        }
        return 0;
    }
}
