// otelweb: an ASP.NET Core app on 127.0.0.1 (in-process) and an HttpClient: three requests
// GET /work/{n}, whose handler calls OtelApp.Work.Handle(n) (traced by clrmux). The SDK
// listens to ASP.NET Core's and HttpClient's activities; every SDK span that ends is printed
// as "SDKSPAN <trace id> <span id> <parent span id> <name> <recorded>"; last line "done".
using System.Diagnostics;
using OpenTelemetry;
using OpenTelemetry.Trace;

namespace OtelWeb;

sealed class PrintProcessor : BaseProcessor<Activity>
{
    public readonly List<string> Lines = new();
    public override void OnEnd(Activity a)
    {
        lock (Lines)
            Lines.Add($"SDKSPAN {a.TraceId} {a.SpanId} {(a.ParentSpanId == default ? "-" : a.ParentSpanId.ToString())} {a.DisplayName.Replace(' ', '_')} {a.Recorded}");
    }
}

public static class Program
{
    public static async Task<int> Main()
    {
        var printer = new PrintProcessor();
        using (var provider = Sdk.CreateTracerProviderBuilder().AddSource("Microsoft.AspNetCore", "System.Net.Http")
                   .SetSampler(new AlwaysOnSampler()).AddProcessor(printer).Build())
        {
            var builder = WebApplication.CreateSlimBuilder();
            builder.Logging.ClearProviders();
            builder.WebHost.UseUrls("http://127.0.0.1:0");
            var app = builder.Build();
            app.MapGet("/work/{n:int}", (int n) => "handled " + OtelApp.Work.Handle(n));
            await app.StartAsync();
            string url = app.Urls.First();
            using (var client = new HttpClient())
                for (int n = 1; n <= 3; n++)
                    Console.WriteLine(await client.GetStringAsync(url + "/work/" + n));
            await app.StopAsync();
        }
        foreach (var l in printer.Lines)
            Console.WriteLine(l);
        Console.WriteLine("done");
        return 0;
    }
}
