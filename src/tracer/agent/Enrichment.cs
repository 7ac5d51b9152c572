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
                a.AddTag(key, value); // absent: appended, not searched for again
        }

        /// <summary>Whether a lacks key: its value is worth computing (a newer runtime sets
        /// many of them itself).</summary>
        internal static bool Missing(Activity a, string key) => a.GetTagItem(key) == null;

        private static readonly HashSet<string> s_methods = new(StringComparer.Ordinal)
        {
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "QUERY",
        };

        /// <summary>http.request.method (and _original) by the conventions.</summary>
        internal static void FillMethod(Activity a, string method)
        {
            if (!Missing(a, "http.request.method"))
                return; // set by the runtime (with its _original when it had to)
            string m = s_methods.Contains(method) ? method : method.ToUpperInvariant();
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

        private static int? IntTag(Activity a, string key) => IntOf(a.GetTagItem(key));

        private static int? IntOf(object? v) => v switch
        {
            int i => i,
            long l => (int)l,
            string s when int.TryParse(s, out int n) => n,
            _ => null,
        };

        /// <summary>The tags Complete reads, found in one pass over the Activity's tags.</summary>
        private ref struct Read
        {
            public string? Grpc, Method, Route, ErrorType;
            public object? Status;
            public bool HasErrorType;

            public Read(Activity a)
            {
                string? grpcMethod = null, rpcFull = null;
                foreach (ref readonly KeyValuePair<string, object?> kv in a.EnumerateTagObjects())
                {
                    switch (kv.Key)
                    {
                    case "http.request.method": Method ??= kv.Value as string; break;
                    case "http.route": Route ??= kv.Value as string; break;
                    case "http.response.status_code": Status ??= kv.Value; break;
                    case "error.type": HasErrorType |= kv.Value != null; ErrorType ??= kv.Value as string; break;
                    case "grpc.method": grpcMethod ??= kv.Value as string; break;
                    case "rpc.method_full": rpcFull ??= kv.Value as string; break;
                    }
                }
                Grpc = grpcMethod ?? rpcFull;
            }
        }

        /// <summary>The span's name and error for the built-in instrumentation `builtin`.</summary>
        internal static Completed Complete(Activity a, string builtin)
        {
            Completed c = default;
            if (builtin.Length == 0)
            {
                /* a library's own source: a database client's span completed to the conventions */
                if (a.Kind == ActivityKind.Client && DbEnrichment.IsDb(a))
                {
                    DbEnrichment.Complete(a, ref c);
                    if (c.Error)
                        c.ErrorMessage ??= a.GetTagItem("error.type") as string;
                }
                return c;
            }
            Read t = new(a);
            if (t.Grpc != null && (builtin == Activities.AspNetCore || builtin == Activities.Grpc || builtin == Activities.HttpClient)
                && (builtin != Activities.AspNetCore || Activities.InstrumentOn(Activities.Grpc)))
                return CompleteGrpc(a, t.Grpc, a.Kind == ActivityKind.Server);
            string? errorType = t.ErrorType;
            if (builtin == Activities.AspNetCore)
            {
                if (t.Method != null)
                    c.Name = t.Method == "_OTHER" ? "HTTP" : t.Route != null ? t.Method + " " + t.Route : t.Method;
                int? status = IntOf(t.Status);
                if (status >= 500)
                {
                    if (!t.HasErrorType)
                        a.AddTag("error.type", errorType = status.Value.ToString());
                    c.Error = true;
                }
            }
            else if (builtin == Activities.HttpClient)
            {
                if (t.Method != null)
                    c.Name = t.Method == "_OTHER" ? "HTTP" : t.Method;
                int? status = IntOf(t.Status);
                if (status >= 400)
                {
                    if (!t.HasErrorType)
                        a.AddTag("error.type", errorType = status.Value.ToString());
                    c.Error = true;
                }
                else if (t.HasErrorType)
                {
                    c.Error = true;
                }
            }
            if (c.Error)
                c.ErrorMessage = errorType;
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
            // each value computed only when the tag is missing (.NET 10 sets most of them)
            Microsoft.AspNetCore.Http.HttpRequest r = ctx.Request;
            Enrichment.FillMethod(a, r.Method);
            if (Enrichment.Missing(a, "url.scheme"))
                Enrichment.Fill(a, "url.scheme", r.Scheme);
            if (Enrichment.Missing(a, "url.path"))
                Enrichment.Fill(a, "url.path", (r.PathBase + r.Path).ToString());
            if (r.QueryString.HasValue && Enrichment.Missing(a, "url.query"))
                Enrichment.Fill(a, "url.query", r.QueryString.Value?.TrimStart('?'));
            if (r.Host.HasValue)
            {
                if (Enrichment.Missing(a, "server.address"))
                    Enrichment.Fill(a, "server.address", r.Host.Host);
                if (Enrichment.Missing(a, "server.port"))
                    Enrichment.Fill(a, "server.port", r.Host.Port ?? (r.IsHttps ? 443 : 80));
            }
            if (Enrichment.Missing(a, "network.protocol.version"))
            {
                string proto = r.Protocol;
                string? version = proto switch // Kestrel's own strings, compared without a copy
                {
                    "HTTP/1.1" => "1.1",
                    "HTTP/2" or "HTTP/2.0" => "2",
                    "HTTP/3" => "3",
                    "HTTP/1.0" => "1.0",
                    _ => proto.StartsWith("HTTP/", StringComparison.OrdinalIgnoreCase) ? proto.Substring(5) : null,
                };
                Enrichment.Fill(a, "network.protocol.version", version);
            }
            if (Enrichment.Missing(a, "user_agent.original"))
            {
                string ua = r.Headers.UserAgent.ToString();
                if (ua.Length != 0)
                    Enrichment.Fill(a, "user_agent.original", ua);
            }
            if (Enrichment.Missing(a, "client.address") && ctx.Connection.RemoteIpAddress is { } ip)
                Enrichment.Fill(a, "client.address", ip.ToString());
        }

        private static void RequestStop(Activity a, object? payload)
        {
            if (payload is not Microsoft.AspNetCore.Http.HttpContext ctx)
                return;
            if (Enrichment.Missing(a, "http.response.status_code"))
                Enrichment.Fill(a, "http.response.status_code", ctx.Response.StatusCode);
            if (!Enrichment.Missing(a, "http.route"))
                return;
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

        /// <summary>.NET 9 and later give HttpClient's Activity every attribute the Start and
        /// Stop events would fill in (method, server, url.full, status, protocol, error.type):
        /// those events are not asked for there, so the runtime neither makes their payloads nor
        /// calls OnNext twice per request; the exception event still is.</summary>
        private static readonly bool s_nativeTags = Environment.Version.Major >= 9;

        public static bool IsEnabled(string name) =>
            name == "System.Net.Http.HttpRequestOut" || name == Error || (!s_nativeTags && (name == Start || name == Stop));

        private static readonly PropertyFetcher s_request = new("Request"), s_response = new("Response"),
            s_taskStatus = new("RequestTaskStatus"), s_exception = new("Exception");

        public void OnNext(KeyValuePair<string, object?> e)
        {
            try
            {
                Activity? a = Activity.Current;
                if (a == null || e.Value == null || a.OperationName != "System.Net.Http.HttpRequestOut" || !a.IsAllDataRequested)
                    return;
                if (e.Key == Start)
                {
                    // .NET 9 and later set all four themselves
                    bool method = Enrichment.Missing(a, "http.request.method"), address = Enrichment.Missing(a, "server.address"),
                         port = Enrichment.Missing(a, "server.port"), full = Enrichment.Missing(a, "url.full");
                    if (!(method || address || port || full) || s_request.Fetch(e.Value) is not System.Net.Http.HttpRequestMessage req)
                        return;
                    if (method)
                        Enrichment.FillMethod(a, req.Method.Method);
                    if (req.RequestUri is { } u)
                    {
                        if (address)
                            Enrichment.Fill(a, "server.address", u.Host);
                        if (port)
                            Enrichment.Fill(a, "server.port", u.Port);
                        if (full)
                            Enrichment.Fill(a, "url.full", u.UserInfo.Length == 0 ? u.AbsoluteUri
                                : new UriBuilder(u) { UserName = "REDACTED", Password = "REDACTED" }.Uri.AbsoluteUri);
                    }
                }
                else if (e.Key == Stop)
                {
                    bool status = Enrichment.Missing(a, "http.response.status_code"), version = Enrichment.Missing(a, "network.protocol.version");
                    if (!status && !version)
                        return; // a response, described by the runtime already (.NET 9 and later)
                    if (s_response.Fetch(e.Value) is System.Net.Http.HttpResponseMessage res)
                    {
                        if (status)
                            Enrichment.Fill(a, "http.response.status_code", (int)res.StatusCode);
                        if (version)
                            Enrichment.Fill(a, "network.protocol.version", Enrichment.ProtocolVersion(res.Version));
                    }
                    else if (s_taskStatus.Fetch(e.Value) is System.Threading.Tasks.TaskStatus st &&
                             st == System.Threading.Tasks.TaskStatus.Canceled)
                    {
                        Enrichment.Fill(a, "error.type", "System.Threading.Tasks.TaskCanceledException");
                    }
                }
                else if (e.Key == Error && s_exception.Fetch(e.Value) is Exception ex)
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

    /// <summary>A property of an event payload (the runtime's internal types), read through a
    /// delegate bound to its getter: made once per payload type, read without a lock or
    /// reflection afterwards.</summary>
    internal sealed class PropertyFetcher
    {
        private sealed class Bound
        {
            public readonly Type Type;
            public readonly Func<object, object?>? Get; // null: the type has no such property
            public Bound(Type type, Func<object, object?>? get) { Type = type; Get = get; }
        }

        private readonly string _name;
        private volatile Bound? _bound;

        public PropertyFetcher(string name) => _name = name;

        public object? Fetch(object payload)
        {
            Bound? b = _bound;
            if (b == null || b.Type != payload.GetType())
                _bound = b = Bind(payload.GetType());
            return b.Get?.Invoke(payload);
        }

        private Bound Bind(Type t)
        {
            MethodInfo? getter = t.GetProperty(_name, BindingFlags.Public | BindingFlags.Instance)?.GetMethod;
            if (getter == null || getter.GetParameters().Length != 0)
                return new Bound(t, null);
            try
            {
                MethodInfo make = typeof(PropertyFetcher).GetMethod(nameof(Make), BindingFlags.NonPublic | BindingFlags.Static)!
                    .MakeGenericMethod(t, getter.ReturnType);
                return new Bound(t, (Func<object, object?>)make.Invoke(null, new object[] { getter })!);
            }
            catch
            {
                return new Bound(t, o => getter.Invoke(o, null)); // a getter that cannot be bound (a struct's): reflection
            }
        }

        private static Func<object, object?> Make<TPayload, TValue>(MethodInfo getter)
        {
            var get = (Func<TPayload, TValue>)getter.CreateDelegate(typeof(Func<TPayload, TValue>));
            return o => get((TPayload)o);
        }
    }
}
