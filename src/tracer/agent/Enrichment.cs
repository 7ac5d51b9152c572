// The built-in instrumentations' attributes (OpenTelemetry's stable HTTP and RPC semantic
// conventions) on the Activities of ASP.NET Core, HttpClient and gRPC: the runtime's
// Activities carry few of them (.NET 8 none), so the agent reads them from the same
// DiagnosticListener events OpenTelemetry's instrumentation packages use, and completes them
// only where they are missing (a newer runtime sets its own; they are never written twice).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Reflection;
using System.Runtime.CompilerServices;

namespace Clrmux.Agent
{
    internal static class Enrichment
    {
        /// <summary>What the exporter needs beyond the Activity: the span's name by the
        /// conventions, and an error its tags imply.</summary>
        internal struct Completed
        {
            public string? Name;
            public bool Error;
            public string? ErrorMessage;
        }

        public static void Start()
        {
            if (Activities.Instrument.Count == 0)
                return;
            DiagnosticListener.AllListeners.Subscribe(new AllListeners());
        }

        private sealed class AllListeners : IObserver<DiagnosticListener>
        {
            public void OnNext(DiagnosticListener l)
            {
                try
                {
                    if (l.Name == "Microsoft.AspNetCore" && Activities.Instrument.Contains(Activities.AspNetCore))
                        SubscribeAspNetCore(l);
                    else if (l.Name == "HttpHandlerDiagnosticListener" && Activities.Instrument.Contains(Activities.HttpClient))
                        l.Subscribe(new HttpClientEvents(), HttpClientEvents.IsEnabled);
                }
                catch (Exception e)
                {
                    Native.Log(Native.LogWarn, $"DiagnosticListener '{l.Name}': {e.GetType().Name}: {e.Message}; its attributes are not completed");
                }
            }

            public void OnError(Exception error) { }
            public void OnCompleted() { }
        }

        // in its own method: the ASP.NET Core types are loaded only in an ASP.NET Core app
        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void SubscribeAspNetCore(DiagnosticListener l) => l.Subscribe(new AspNetCoreEvents(), AspNetCoreEvents.IsEnabled);

        /// <summary>Sets key on a when it has no such tag.</summary>
        internal static void Fill(Activity a, string key, object? value)
        {
            if (value != null && a.GetTagItem(key) == null)
                a.SetTag(key, value);
        }

        private static readonly HashSet<string> s_methods = new(StringComparer.Ordinal)
        {
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "QUERY",
        };

        /// <summary>http.request.method (and _original) by the conventions.</summary>
        internal static void FillMethod(Activity a, string method)
        {
            string m = method.ToUpperInvariant();
            if (s_methods.Contains(m))
            {
                Fill(a, "http.request.method", m);
                if (m != method)
                    Fill(a, "http.request.method_original", method);
            }
            else
            {
                Fill(a, "http.request.method", "_OTHER");
                Fill(a, "http.request.method_original", method);
            }
        }

        internal static string ProtocolVersion(Version v) => v.Major >= 2 && v.Minor == 0 ? v.Major.ToString() : $"{v.Major}.{v.Minor}";

        internal static void AddException(Activity a, Exception e)
        {
            string type = e.GetType().FullName ?? e.GetType().Name;
            Fill(a, "error.type", type);
            foreach (ActivityEvent ev in a.Events)
                if (ev.Name == "exception")
                    return; // recorded by the runtime or the app already
            a.AddEvent(new ActivityEvent("exception", default, new ActivityTagsCollection
            {
                { "exception.type", type },
                { "exception.message", e.Message },
                { "exception.stacktrace", e.ToString() },
            }));
        }

        private static int? IntTag(Activity a, string key) => a.GetTagItem(key) switch
        {
            int i => i,
            long l => (int)l,
            string s when int.TryParse(s, out int v) => v,
            _ => null,
        };

        /// <summary>The span's name and error for the built-in instrumentation `builtin`.</summary>
        internal static Completed Complete(Activity a, string builtin)
        {
            Completed c = default;
            string? grpc = a.GetTagItem("grpc.method") as string ?? a.GetTagItem("rpc.method_full") as string;
            if (grpc != null && (builtin == Activities.AspNetCore || builtin == Activities.Grpc || builtin == Activities.HttpClient)
                && (builtin != Activities.AspNetCore || Activities.Instrument.Contains(Activities.Grpc)))
                return CompleteGrpc(a, grpc, a.Kind == ActivityKind.Server);
            if (builtin == Activities.AspNetCore)
            {
                string? method = a.GetTagItem("http.request.method") as string;
                string? route = a.GetTagItem("http.route") as string;
                if (method != null)
                    c.Name = method == "_OTHER" ? "HTTP" : route != null ? method + " " + route : method;
                int? status = IntTag(a, "http.response.status_code");
                if (status >= 500)
                {
                    Fill(a, "error.type", status.Value.ToString());
                    c.Error = true;
                }
            }
            else if (builtin == Activities.HttpClient)
            {
                if (a.GetTagItem("http.request.method") is string method)
                    c.Name = method == "_OTHER" ? "HTTP" : method;
                int? status = IntTag(a, "http.response.status_code");
                if (status >= 400)
                {
                    Fill(a, "error.type", status.Value.ToString());
                    c.Error = true;
                }
                else if (a.GetTagItem("error.type") != null)
                {
                    c.Error = true;
                }
            }
            else if (builtin.Length == 0 && a.Kind == ActivityKind.Client && DbEnrichment.IsDb(a))
            {
                DbEnrichment.Complete(a, ref c);
            }
            if (c.Error)
                c.ErrorMessage ??= a.GetTagItem("error.type") as string;
            return c;
        }

        /// <summary>gRPC (Grpc.Net.Client, Grpc.AspNetCore): "grpc.method" is
        /// "/package.Service/Method", "grpc.status_code" the status; as the RPC conventions.</summary>
        private static Completed CompleteGrpc(Activity a, string full, bool server)
        {
            Completed c = default;
            string path = full.TrimStart('/');
            int slash = path.IndexOf('/');
            string service = slash > 0 ? path.Substring(0, slash) : path;
            string method = slash > 0 ? path.Substring(slash + 1) : "";
            Fill(a, "rpc.system", "grpc");
            Fill(a, "rpc.service", service);
            if (method.Length != 0)
                Fill(a, "rpc.method", method);
            c.Name = path;
            int? code = IntTag(a, "grpc.status_code") ?? IntTag(a, "rpc.grpc.status_code");
            if (code != null)
            {
                Fill(a, "rpc.grpc.status_code", code.Value);
                // server errors: UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
                // DATA_LOSS; a client: any status but OK
                bool error = server ? code is 2 or 4 or 12 or 13 or 14 or 15 : code != 0;
                if (error)
                {
                    Fill(a, "error.type", code.Value.ToString());
                    c.Error = true;
                    c.ErrorMessage = a.GetTagItem("grpc.status_description") as string ?? code.Value.ToString();
                }
            }
            return c;
        }
    }

    /// <summary>ASP.NET Core's hosting events (DiagnosticListener "Microsoft.AspNetCore"): the
    /// request's attributes at its start, the response's and the route at its end.</summary>
    internal sealed class AspNetCoreEvents : IObserver<KeyValuePair<string, object?>>
    {
        private const string Start = "Microsoft.AspNetCore.Hosting.HttpRequestIn.Start";
        private const string Stop = "Microsoft.AspNetCore.Hosting.HttpRequestIn.Stop";
        private const string Unhandled = "Microsoft.AspNetCore.Hosting.UnhandledException";
        private const string UnhandledDiag = "Microsoft.AspNetCore.Diagnostics.UnhandledException";

        public static bool IsEnabled(string name) =>
            name == "Microsoft.AspNetCore.Hosting.HttpRequestIn" || name == Start || name == Stop || name == Unhandled ||
            name == UnhandledDiag;

        public void OnNext(KeyValuePair<string, object?> e)
        {
            try
            {
                Activity? a = Activity.Current;
                if (a == null || a.OperationName != "Microsoft.AspNetCore.Hosting.HttpRequestIn" || !a.IsAllDataRequested)
                    return;
                switch (e.Key)
                {
                case Start: RequestStart(a, e.Value); break;
                case Stop: RequestStop(a, e.Value); break;
                case Unhandled:
                case UnhandledDiag: Exception(a, e.Value); break;
                }
            }
            catch
            {
                // an attribute less: the request runs on
            }
        }

        private static void RequestStart(Activity a, object? payload)
        {
            if (payload is not Microsoft.AspNetCore.Http.HttpContext ctx)
                return;
            Microsoft.AspNetCore.Http.HttpRequest r = ctx.Request;
            Enrichment.FillMethod(a, r.Method);
            Enrichment.Fill(a, "url.scheme", r.Scheme);
            Enrichment.Fill(a, "url.path", (r.PathBase + r.Path).ToString());
            if (r.QueryString.HasValue)
                Enrichment.Fill(a, "url.query", r.QueryString.Value?.TrimStart('?'));
            if (r.Host.HasValue)
            {
                Enrichment.Fill(a, "server.address", r.Host.Host);
                Enrichment.Fill(a, "server.port", r.Host.Port ?? (r.IsHttps ? 443 : 80));
            }
            string proto = r.Protocol;
            if (proto.StartsWith("HTTP/", StringComparison.OrdinalIgnoreCase))
                Enrichment.Fill(a, "network.protocol.version", proto.Substring(5) == "2" || proto.Substring(5) == "2.0" ? "2" : proto.Substring(5) == "3" ? "3" : proto.Substring(5));
            string ua = r.Headers.UserAgent.ToString();
            if (ua.Length != 0)
                Enrichment.Fill(a, "user_agent.original", ua);
            if (ctx.Connection.RemoteIpAddress is { } ip)
                Enrichment.Fill(a, "client.address", ip.ToString());
        }

        private static void RequestStop(Activity a, object? payload)
        {
            if (payload is not Microsoft.AspNetCore.Http.HttpContext ctx)
                return;
            Enrichment.Fill(a, "http.response.status_code", ctx.Response.StatusCode);
            Microsoft.AspNetCore.Http.Endpoint? ep = Microsoft.AspNetCore.Http.EndpointHttpContextExtensions.GetEndpoint(ctx);
            if (ep is Microsoft.AspNetCore.Routing.RouteEndpoint re && re.RoutePattern.RawText is { } route)
                Enrichment.Fill(a, "http.route", route.StartsWith('/') ? route : "/" + route);
        }

        private static void Exception(Activity a, object? payload)
        {
            if (payload == null)
                return;
            PropertyInfo? p = payload.GetType().GetProperty("exception") ?? payload.GetType().GetProperty("Exception");
            if (p?.GetValue(payload) is Exception ex)
                Enrichment.AddException(a, ex);
        }

        public void OnError(Exception error) { }
        public void OnCompleted() { }
    }

    /// <summary>HttpClient's events (DiagnosticListener "HttpHandlerDiagnosticListener"): the
    /// request's attributes, the response's, the exception. Their payloads are the runtime's
    /// internal types: properties read by name, cached per type.</summary>
    internal sealed class HttpClientEvents : IObserver<KeyValuePair<string, object?>>
    {
        private const string Start = "System.Net.Http.HttpRequestOut.Start";
        private const string Stop = "System.Net.Http.HttpRequestOut.Stop";
        private const string Error = "System.Net.Http.Exception";

        public static bool IsEnabled(string name) =>
            name == "System.Net.Http.HttpRequestOut" || name == Start || name == Stop || name == Error;

        private static readonly Dictionary<(Type, string), PropertyInfo?> s_props = new();

        private static object? Prop(object payload, string name)
        {
            var key = (payload.GetType(), name);
            PropertyInfo? p;
            lock (s_props)
                if (!s_props.TryGetValue(key, out p))
                    s_props[key] = p = payload.GetType().GetProperty(name);
            return p?.GetValue(payload);
        }

        public void OnNext(KeyValuePair<string, object?> e)
        {
            try
            {
                Activity? a = Activity.Current;
                if (a == null || e.Value == null || a.OperationName != "System.Net.Http.HttpRequestOut" || !a.IsAllDataRequested)
                    return;
                if (e.Key == Start && Prop(e.Value, "Request") is System.Net.Http.HttpRequestMessage req)
                {
                    Enrichment.FillMethod(a, req.Method.Method);
                    if (req.RequestUri is { } u)
                    {
                        Enrichment.Fill(a, "server.address", u.Host);
                        Enrichment.Fill(a, "server.port", u.Port);
                        Enrichment.Fill(a, "url.full", u.UserInfo.Length == 0 ? u.AbsoluteUri
                            : new UriBuilder(u) { UserName = "REDACTED", Password = "REDACTED" }.Uri.AbsoluteUri);
                    }
                }
                else if (e.Key == Stop)
                {
                    if (Prop(e.Value, "Response") is System.Net.Http.HttpResponseMessage res)
                    {
                        Enrichment.Fill(a, "http.response.status_code", (int)res.StatusCode);
                        Enrichment.Fill(a, "network.protocol.version", Enrichment.ProtocolVersion(res.Version));
                    }
                    else if (Prop(e.Value, "RequestTaskStatus") is System.Threading.Tasks.TaskStatus st &&
                             st == System.Threading.Tasks.TaskStatus.Canceled)
                    {
                        Enrichment.Fill(a, "error.type", "System.Threading.Tasks.TaskCanceledException");
                    }
                }
                else if (e.Key == Error && Prop(e.Value, "Exception") is Exception ex)
                {
                    Enrichment.AddException(a, ex);
                }
            }
            catch
            {
                // an attribute less: the request runs on
            }
        }

        public void OnError(Exception error) { }
        public void OnCompleted() { }
    }
}
