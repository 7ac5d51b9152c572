// clrmux-attach PID LIBRARY CONFIG [TIMEOUT_MS]: attaches libclrmux.so (LIBRARY) to the .NET
// process PID through its diagnostics port (Microsoft.Diagnostics.NETCore.Client's
// DiagnosticsClient.AttachProfiler). The client data clrmux receives in InitializeForAttach
// is CONFIG, the absolute path of the loader.conf to use, in UTF-8. Exit codes: 0 attached,
// 1 the process refused or could not be reached (the message says why), 2 bad arguments.
using System.Text;
using Microsoft.Diagnostics.NETCore.Client;

static class Program
{
    static readonly Guid ClrmuxClsid = new("EE712634-5BBB-4C28-8E6A-45180A97AD0B");

    static int Main(string[] args)
    {
        if (args.Length < 3 || !int.TryParse(args[0], out int pid) || pid <= 0)
        {
            Console.Error.WriteLine("usage: clrmux-attach PID LIBRARY CONFIG [TIMEOUT_MS]");
            return 2;
        }
        string lib = Path.GetFullPath(args[1]), config = Path.GetFullPath(args[2]);
        int timeoutMs = args.Length > 3 && int.TryParse(args[3], out int t) && t > 0 ? t : 10000;
        if (!File.Exists(lib)) { Console.Error.WriteLine($"clrmux attach: {lib}: no such file"); return 2; }
        if (!File.Exists(config)) { Console.Error.WriteLine($"clrmux attach: {config}: no such file"); return 2; }
        try
        {
            var client = new DiagnosticsClient(pid);
            client.AttachProfiler(TimeSpan.FromMilliseconds(timeoutMs), ClrmuxClsid, lib, Encoding.UTF8.GetBytes(config));
            Console.WriteLine($"clrmux attached to process {pid} ({lib}, config {config})");
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine($"clrmux attach: process {pid}: {e.GetType().Name}: {e.Message}");
            return 1;
        }
    }
}
