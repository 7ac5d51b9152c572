// ASP.NET Core's requests (SERVER spans) and HttpClient's calls (CLIENT spans), recorded without
// an Activity: from the events the runtime writes to its DiagnosticListeners whether or not an
// Activity exists (ASP.NET Core hosting's BeginRequest, EndRequest and UnhandledException;
// HttpClient's Request, Response and Exception), written as the records the tracer queues
// (SpanWriter, tracer/xspan.h). An Activity per request and per call, with the events that
// complete its tags, was more than half of what the whole OpenTelemetry SDK costs a service
// (bench/web.sh). While a request or a call lasts its span is the flow's context
// (AsyncSpans.Current), so that method spans, Activities and the calls it makes nest inside it, as
// they nest inside Activity.Current; W3C traceparent and tracestate are read from the request
// and written into the call's headers. A request or call whose source another listener samples
// (the app's own SDK) is left to it: the runtime made an Activity of that source before the
// event (docs/tracing.md: an app with its own OpenTelemetry SDK).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net.Http;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;

namespace Clrmux.Agent
{
    /// <summary>A request's or a call's open span, the flow's context while it lasts.</summary>
    internal sealed class WebSpan : SpanContextBox
    {
        public readonly object Owner; // the HttpContext, or the HttpRequestMessage
        public readonly bool Server, RemoteParent;
        public readonly ulong ParentId;
        public readonly string? TraceState;
        public readonly long StartNs;
        public Exception? Error; // an exception event's, kept for the end
        public bool Ended;       // a call's span, written: not the flow's context any more (AsyncSpans.Live)

        public WebSpan(in SpanCtx c, object? activity, SpanContextBox? prev, object owner, bool server, ulong parentId,
                       bool remoteParent, string? traceState)
            : base(c, activity, prev)
        {
            Owner = owner;
            Server = server;
            ParentId = parentId;
            RemoteParent = remoteParent;
            TraceState = traceState;
            StartNs = WebSpans.Now();
        }
    }

    internal static unsafe class WebSpans
    {
        private const string ServerScope = Activities.AspNetCoreSource, ClientScope = Activities.HttpClientSource;
        // the spans' scope names (the sources' names above), as the records carry them
        private static ReadOnlySpan<byte> ServerScopeUtf8 => "Microsoft.AspNetCore"u8;
        private static ReadOnlySpan<byte> ClientScopeUtf8 => "System.Net.Http"u8;
        private const string HostingActivity = "Microsoft.AspNetCore.Hosting.HttpRequestIn", ClientActivity = "System.Net.Http.HttpRequestOut";
        private static bool s_failed;

        internal static long Now() => SpanWriter.UnixNs(DateTime.UtcNow);

        private static ulong NewId()
        {
            ulong id;
            do
                Random.Shared.NextBytes(new Span<byte>(&id, 8)); // 64 random bits in one call
            while (id == 0);
            return id;
        }

        private static byte Sample() => Activities.SampleNew() ? (byte)1 : (byte)0;

        internal static void Failed(string what, Exception e)
        {
            if (s_failed)
                return;
            s_failed = true;
            Native.Log(Native.LogWarn, $"{what}: {e.GetType().Name}: {e.Message} (logged once; that span is not recorded)");
        }

        // ---- W3C trace context ----

        private static int Hex(char ch) => ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;

        /// <summary>A traceparent header's trace id, span id and sampled flag into *c (the span id
        /// as the parent's); false when it is not a valid one (W3C Trace Context, level 1).</summary>
        internal static bool ParseTraceparent(string? tp, SpanCtx* c)
        {
            if (tp == null || tp.Length < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || (tp.Length > 55 && tp[55] != '-'))
                return false;
            int v0 = Hex(tp[0]), v1 = Hex(tp[1]);
            if (v0 < 0 || v1 < 0 || (v0 == 15 && v1 == 15) || (v0 == 0 && v1 == 0 && tp.Length != 55))
                return false;
            int any = 0;
            for (int i = 0; i < 16; i++)
            {
                int h = Hex(tp[3 + 2 * i]), l = Hex(tp[4 + 2 * i]);
                if (h < 0 || l < 0)
                    return false;
                c->TraceId[i] = (byte)(h << 4 | l);
                any |= h | l;
            }
            ulong span = 0;
            for (int i = 0; i < 16; i++)
            {
                int d = Hex(tp[36 + i]);
                if (d < 0)
                    return false;
                span = span << 4 | (uint)d;
            }
            int f0 = Hex(tp[53]), f1 = Hex(tp[54]);
            if (any == 0 || span == 0 || f0 < 0 || f1 < 0)
                return false;
            c->SpanId = span;
            c->Sampled = (uint)(f1 & 1);
            return true;
        }

        private const string HexDigits = "0123456789abcdef";

        /// <summary>RFC 3986's unreserved and reserved characters: a URI's text made of these alone
        /// has no escape to make or undo.</summary>
        private static readonly System.Buffers.SearchValues<char> s_uriAsIs =
            System.Buffers.SearchValues.Create("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=");

        internal static string Traceparent(in SpanCtx c) => string.Create(55, c, static (s, c) =>
        {
            s[0] = '0';
            s[1] = '0';
            s[2] = '-';
            for (int i = 0; i < 16; i++)
            {
                s[3 + 2 * i] = HexDigits[c.TraceId[i] >> 4];
                s[4 + 2 * i] = HexDigits[c.TraceId[i] & 15];
            }
            s[35] = '-';
            for (int i = 0; i < 16; i++)
                s[36 + i] = HexDigits[(int)(c.SpanId >> (60 - 4 * i)) & 15];
            s[52] = '-';
            s[53] = '0';
            s[54] = c.Sampled != 0 ? '1' : '0';
        });

        // ---- the record ----

        private static readonly HashSet<string> s_methods = new(StringComparer.Ordinal)
        {
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "QUERY",
        };

        /// <summary>http.request.method by the conventions: a known method, or _OTHER.</summary>
        private static string NormalMethod(string method)
        {
            if (s_methods.Contains(method))
                return method;
            string m = method.ToUpperInvariant();
            return s_methods.Contains(m) ? m : "_OTHER";
        }

        /// <summary>http.request.method, and _original when it differs from the request's.</summary>
        private static int MethodAttrs(ref SpanWriter w, string normal, string method)
        {
            w.StrAttr("http.request.method"u8, normal);
            if (ReferenceEquals(normal, method) || normal == method)
                return 1;
            w.StrAttr("http.request.method_original"u8, method);
            return 2;
        }

        private static void Head(ref SpanWriter w, WebSpan s, long end, byte kind, byte status, scoped ReadOnlySpan<char> name, string? message,
                                 ReadOnlySpan<byte> scope)
        {
            w.U16(SpanWriter.Version);
            w.U16(SpanWriter.Header);
            SpanCtx c = s.Ctx;
            w.Bytes(c.TraceId, 16);
            w.U64(c.SpanId);
            w.U64(s.ParentId);
            w.I64(s.StartNs);
            w.I64(end);
            w.U8(kind);
            w.U8(status);
            w.U8(s.RemoteParent ? (byte)1 : (byte)0);
            w.U8(0);
            w.U32(0);
            w.Str(name);
            w.Str(status == 2 ? message : null);
            w.Utf8(scope);
            w.Str(null);
            w.Str(s.TraceState);
        }

        /// <summary>The record's end: error.type (when an error), the attribute count n (at
        /// mark), the events and links; then it is handed to the tracer.</summary>
        private static void Close(ref SpanWriter w, int mark, int n, string? errorType, Exception? e, long end)
        {
            if (errorType != null)
            {
                w.StrAttr("error.type"u8, errorType);
                n++;
            }
            w.SetCount(mark, n);
            Tail(ref w, e, end);
            w.Commit();
        }

        /// <summary>The events (an exception's, if any) and no links.</summary>
        private static void Tail(ref SpanWriter w, Exception? e, long end)
        {
            if (e == null)
            {
                w.U16(0);
            }
            else
            {
                w.U16(1);
                w.I64(end);
                w.Utf8("exception"u8);
                w.U16(3);
                w.StrAttr("exception.type"u8, e.GetType().FullName ?? e.GetType().Name);
                w.StrAttr("exception.message"u8, e.Message);
                w.StrAttr("exception.stacktrace"u8, e.ToString());
            }
            w.U16(0);
        }

        // ---- ASP.NET Core ----

        /// <summary>A request starts (hosting's BeginRequest, in the flow that runs it): its span
        /// becomes the flow's context.</summary>
        internal static void BeginServer(HttpContext ctx, DiagnosticListener? hosting = null)
        {
            Activity? a = Activity.Current;
            if (a != null && a.Source.Name == ServerScope)
                return; // made for another listener of ASP.NET Core's source: the app's SDK records the request
            if (a != null && a.OperationName == HostingActivity && hosting != null && hosting.IsEnabled(HostingActivity, ctx))
                return; // asked of hosting by another of its DiagnosticListener's subscribers (an SDK that listens
                        // there: Application Insights, OpenTelemetry's first instrumentations): it records the request
            SpanContextBox? prev = AsyncSpans.Current.Value;
            while (prev is WebSpan { Server: true } or WebSpan { Ended: true })
                prev = prev.Prev; // a request whose end never came (its connection's flow kept it), a call's that ended
            SpanCtx c, remote = default;
            string? state = null;
            bool has = false;
            if (ctx.Request.Headers.TryGetValue("traceparent", out StringValues tp) && tp.Count == 1 && ParseTraceparent(tp[0], &remote))
            {
                has = true;
                if (ctx.Request.Headers.TryGetValue("tracestate", out StringValues ts) && ts.Count != 0)
                    state = ts.ToString();
            }
            if (a != null && a.IdFormat == ActivityIdFormat.W3C && a.OperationName == HostingActivity)
            {
                // the Activity hosting makes for the app's logging (its scopes carry its ids): the
                // span takes its ids, and that Activity (Activity.Current in the request) says
                // whether it is sampled to the Activities made inside
                a.TraceId.CopyTo(new Span<byte>(c.TraceId, 16));
                c.SpanId = SpanWriter.SpanIdValue(a.SpanId);
                ulong parent = a.ParentSpanId == default ? 0 : SpanWriter.SpanIdValue(a.ParentSpanId);
                bool same = has && parent == remote.SpanId;
                c.Sampled = same ? remote.Sampled : Sample();
                a.ActivityTraceFlags = c.Sampled != 0 ? ActivityTraceFlags.Recorded : ActivityTraceFlags.None;
                c.LocalRoot = c.SpanId;
                c.Reserved = 0;
                AsyncSpans.Current.Value = new WebSpan(c, a, prev, ctx, true, parent, parent != 0, same ? state : a.TraceStateString);
                return;
            }
            if (has)
            {
                c = remote;
            }
            else
            {
                Random.Shared.NextBytes(new Span<byte>(c.TraceId, 16));
                c.Sampled = Sample();
                state = null;
            }
            ulong parentId = has ? remote.SpanId : 0;
            c.SpanId = NewId();
            c.LocalRoot = c.SpanId;
            c.Reserved = 0;
            AsyncSpans.Current.Value = new WebSpan(c, a, prev, ctx, true, parentId, has, state);
        }

        /// <summary>The request's exception, from the hosting's UnhandledException event or the
        /// exception handler middleware's events; kept for its end.</summary>
        internal static void ServerException(HttpContext ctx, Exception e)
        {
            if (AsyncSpans.Current.Value is WebSpan { Server: true } w && ReferenceEquals(w.Owner, ctx))
                w.Error ??= e;
        }

        /// <summary>The request ended (hosting's EndRequest or UnhandledException, after its
        /// response): its span is written, the flow's context goes back to what it was.</summary>
        internal static void EndServer(HttpContext ctx, Exception? e)
        {
            if (AsyncSpans.Current.Value is not WebSpan { Server: true } s || !ReferenceEquals(s.Owner, ctx))
                return;
            AsyncSpans.Current.Value = s.Prev;
            if (s.Ctx.Sampled == 0)
                return;
            long end = Now();
            e ??= s.Error;
            HttpRequest r = ctx.Request;
            int code = ctx.Response.StatusCode;
            string? route = null;
            if (EndpointHttpContextExtensions.GetEndpoint(ctx) is Microsoft.AspNetCore.Routing.RouteEndpoint re && re.RoutePattern.RawText is { } raw)
                route = raw.StartsWith('/') ? raw : "/" + raw;
            // gRPC (Grpc.AspNetCore): the path is /package.Service/Method, the name package.Service/Method
            string? grpcPath = Activities.InstrumentOn(Activities.Grpc) && r.ContentType is { } ct &&
                               ct.StartsWith("application/grpc", StringComparison.Ordinal) ? r.Path.Value?.TrimStart('/') : null;
            int grpcCode = grpcPath != null ? GrpcStatus(ctx) : -1;
            bool error = grpcPath != null ? grpcCode is 2 or 4 or 12 or 13 or 14 or 15 : code >= 500;
            string? errorType = !error ? null : grpcPath != null ? grpcCode.ToString()
                              : e != null ? e.GetType().FullName ?? e.GetType().Name : code.ToString();

            string method = NormalMethod(r.Method);
            // the name: "{method} {route}" put together on the stack (no string of its own), else as is
            Span<char> buf = stackalloc char[256];
            ReadOnlySpan<char> name = grpcPath ?? (method == "_OTHER" ? "HTTP" : route == null ? method
                                      : method.Length + 1 + route.Length <= buf.Length ? Joined(buf, method, route) : method + " " + route);
            SpanWriter w = SpanWriter.Begin();
            Head(ref w, s, end, 2, error ? (byte)2 : (byte)0, name, errorType, ServerScopeUtf8);
            int mark = w.Mark(), n = MethodAttrs(ref w, method, r.Method);
            w.StrAttr("url.scheme"u8, r.Scheme);
            string path = r.PathBase.HasValue ? (r.PathBase + r.Path).ToString() : r.Path.Value ?? "/";
            w.StrAttr("url.path"u8, path);
            n += 2;
            if (r.QueryString.HasValue && r.QueryString.Value!.Length > 1)
            {
                w.StrAttr("url.query"u8, r.QueryString.Value.Substring(1));
                n++;
            }
            HostString host = r.Host; // the header's value
            if (host.HasValue)
            {
                // HostString's split, without its copy of the host: name:port, or a name alone (the
                // other forms, IPv6 addresses, through HostString itself)
                string hv = host.Value!;
                int colon = hv.IndexOf(':');
                int? port = null;
                if (hv.Contains(']') || (colon >= 0 && hv.IndexOf(':', colon + 1) >= 0))
                {
                    w.StrAttr("server.address"u8, host.Host);
                    port = host.Port;
                }
                else
                {
                    w.StrAttr("server.address"u8, colon >= 0 ? hv.AsSpan(0, colon) : hv.AsSpan());
                    if (colon >= 0 && int.TryParse(hv.AsSpan(colon + 1), System.Globalization.NumberStyles.None,
                                                   System.Globalization.CultureInfo.InvariantCulture, out int p))
                        port = p;
                }
                w.IntAttr("server.port"u8, port ?? (r.IsHttps ? 443 : 80));
                n += 2;
            }
            if (ProtocolOf(r.Protocol) is { } proto)
            {
                w.StrAttr("network.protocol.version"u8, proto);
                n++;
            }
            string ua = r.Headers.UserAgent.ToString();
            if (ua.Length != 0)
            {
                w.StrAttr("user_agent.original"u8, ua);
                n++;
            }
            if (ctx.Connection.RemoteIpAddress is { } ip)
            {
                Span<char> text = stackalloc char[128]; // an IPv6 address with its scope: 65 at most
                if (ip.TryFormat(text, out int len))
                    w.StrAttr("client.address"u8, text.Slice(0, len));
                else
                    w.StrAttr("client.address"u8, ip.ToString());
                n++;
            }
            if (route != null)
            {
                w.StrAttr("http.route"u8, route);
                n++;
            }
            w.IntAttr("http.response.status_code"u8, code);
            n++;
            if (grpcPath != null)
            {
                // as the RPC conventions
                string full = grpcPath;
                int slash = full.IndexOf('/');
                w.StrAttr("rpc.system"u8, "grpc");
                w.StrAttr("rpc.service"u8, slash > 0 ? full.Substring(0, slash) : full);
                n += 2;
                if (slash > 0)
                {
                    w.StrAttr("rpc.method"u8, full.Substring(slash + 1));
                    n++;
                }
                if (grpcCode >= 0)
                {
                    w.IntAttr("rpc.grpc.status_code"u8, grpcCode);
                    n++;
                }
            }
            Close(ref w, mark, n, errorType, e, end);
        }

        /// <summary>"{a} {b}" into buf (which holds it).</summary>
        private static ReadOnlySpan<char> Joined(Span<char> buf, string a, string b)
        {
            a.CopyTo(buf);
            buf[a.Length] = ' ';
            b.CopyTo(buf.Slice(a.Length + 1));
            return buf.Slice(0, a.Length + 1 + b.Length);
        }

        private static int GrpcStatus(HttpContext ctx)
        {
            StringValues v = default;
            var trailers = ctx.Features.Get<Microsoft.AspNetCore.Http.Features.IHttpResponseTrailersFeature>()?.Trailers;
            if (trailers == null || !trailers.TryGetValue("grpc-status", out v))
                ctx.Response.Headers.TryGetValue("grpc-status", out v); // a trailers-only response
            return v.Count == 1 && int.TryParse(v[0], out int code) ? code : -1;
        }

        private static string? ProtocolOf(string proto) => proto switch // Kestrel's own strings, compared without a copy
        {
            "HTTP/1.1" => "1.1",
            "HTTP/2" or "HTTP/2.0" => "2",
            "HTTP/3" => "3",
            "HTTP/1.0" => "1.0",
            _ => proto.StartsWith("HTTP/", StringComparison.OrdinalIgnoreCase) ? proto.Substring(5) : null,
        };

        private static string ProtocolOf(Version v) => v.Major >= 2 && v.Minor == 0 ? v.Major.ToString() : v.Major == 1 && v.Minor == 1 ? "1.1" : $"{v.Major}.{v.Minor}";

        // ---- HttpClient ----

        /// <summary>A call starts (HttpClient's Request event, before the runtime writes any
        /// header of its own): its span's traceparent goes into the request, and the span becomes
        /// the flow's context for the call.</summary>
        internal static void BeginClient(HttpRequestMessage req, DiagnosticListener? handler = null)
        {
            Activity? a = Activity.Current;
            if (a != null && a.Source.Name == ClientScope)
                return; // made for another listener of HttpClient's source: the app's SDK records the call
            if (a != null && a.OperationName == ClientActivity && handler != null && handler.IsEnabled(ClientActivity, req))
                return; // asked of HttpClient by another of its DiagnosticListener's subscribers (an SDK that
                        // listens there): it records the call
            // the Activity HttpClient makes when one is current (no listener asked for it) is never a span
            Activity? around = a != null && a.Source.Name.Length == 0 && a.OperationName == ClientActivity ? a.Parent : a;
            SpanCtx c;
            bool has = Activities.InnerSpan(null, around, &c) || (around != null && Activities.ContextOf(around, &c));
            string? state = null;
            ulong parent = 0;
            if (has)
            {
                parent = c.SpanId;
                if (c.LocalRoot == 0)
                    c.LocalRoot = c.SpanId;
                if (AsyncSpans.Current.Value is WebSpan ws && ws.Ctx.SpanId == parent)
                    state = ws.TraceState;
                else if (around != null && parent == SpanWriter.SpanIdValue(around.SpanId))
                    state = around.TraceStateString;
            }
            else
            {
                Random.Shared.NextBytes(new Span<byte>(c.TraceId, 16));
                c.Sampled = Sample();
            }
            c.SpanId = NewId();
            if (!has)
                c.LocalRoot = c.SpanId;
            c.Reserved = 0;
            System.Net.Http.Headers.HttpRequestHeaders h = req.Headers;
            h.Remove("traceparent"); // a request sent again carries the last call's
            h.TryAddWithoutValidation("traceparent", Traceparent(c));
            if (state != null)
            {
                h.Remove("tracestate");
                h.TryAddWithoutValidation("tracestate", state);
            }
            SpanContextBox? prev = AsyncSpans.Current.Value;
            while (prev is WebSpan { Ended: true })
                prev = prev.Prev; // a call's that ended in this flow: not kept in the chain
            AsyncSpans.Current.Value = new WebSpan(c, a, prev, req, false, parent, false, state);
        }

        internal static void ClientException(HttpRequestMessage? req, Exception e)
        {
            if (AsyncSpans.Current.Value is WebSpan { Server: false, Ended: false } w && (req == null || ReferenceEquals(w.Owner, req)))
                w.Error ??= e;
        }

        /// <summary>The call ended (HttpClient's Response event: a response, or none with the
        /// task's status): its span is written and marked ended (Live skips it).</summary>
        internal static void EndClient(HttpResponseMessage? res, TaskStatus status)
        {
            if (AsyncSpans.Current.Value is not WebSpan { Server: false, Ended: false } s ||
                (res?.RequestMessage != null && !ReferenceEquals(res.RequestMessage, s.Owner)))
                return;
            // ended, and left as the flow's value: the events come from inside HttpClient's
            // DiagnosticsHandler.SendAsyncCore, an async method, whose ExecutionContext changes
            // never reach its caller (its builder puts the caller's back when it returns or
            // awaits); setting the value back here cost a new ExecutionContext a call for the few
            // instructions left to it
            s.Ended = true;
            if (s.Ctx.Sampled == 0)
                return;
            long end = Now();
            var req = (HttpRequestMessage)s.Owner;
            Exception? e = s.Error;
            int code = res != null ? (int)res.StatusCode : 0;
            string? errorType = code >= 400 ? code.ToString()
                              : e != null ? e.GetType().FullName ?? e.GetType().Name
                              : status == TaskStatus.Canceled ? "System.Threading.Tasks.TaskCanceledException"
                              : res == null ? "System.Net.Http.HttpRequestException" : null;
            string method = NormalMethod(req.Method.Method);
            SpanWriter w = SpanWriter.Begin();
            Head(ref w, s, end, 3, errorType != null ? (byte)2 : (byte)0, method == "_OTHER" ? "HTTP" : method, errorType, ClientScopeUtf8);
            int mark = w.Mark(), n = MethodAttrs(ref w, method, req.Method.Method);
            if (req.RequestUri is { IsAbsoluteUri: true } u)
            {
                // the URI as written: AbsoluteUri (escaped) makes and keeps a string a request; its
                // unescaped form (Uri.TryFormat) is the same text when it holds only the characters
                // a URI may carry as they are, and needs none
                Span<char> text = stackalloc char[512];
                if (u.UserInfo.Length != 0)
                    w.StrAttr("url.full"u8, new UriBuilder(u) { UserName = "REDACTED", Password = "REDACTED" }.Uri.AbsoluteUri);
                else if (u.TryFormat(text, out int len) && text.Slice(0, len).IndexOfAnyExcept(s_uriAsIs) < 0)
                    w.StrAttr("url.full"u8, text.Slice(0, len));
                else
                    w.StrAttr("url.full"u8, u.AbsoluteUri);
                w.StrAttr("server.address"u8, u.Host);
                w.IntAttr("server.port"u8, u.Port);
                n += 3;
            }
            if (res != null)
            {
                w.IntAttr("http.response.status_code"u8, code);
                w.StrAttr("network.protocol.version"u8, ProtocolOf(res.Version));
                n += 2;
            }
            Close(ref w, mark, n, errorType, e, end);
        }
    }

    /// <summary>ASP.NET Core hosting's events (DiagnosticListener "Microsoft.AspNetCore"), not
    /// its Activity's: asking for them makes hosting write them, and nothing more.</summary>
    internal sealed class ServerEvents : IObserver<KeyValuePair<string, object?>>
    {
        private const string Begin = "Microsoft.AspNetCore.Hosting.BeginRequest", End = "Microsoft.AspNetCore.Hosting.EndRequest",
            Unhandled = "Microsoft.AspNetCore.Hosting.UnhandledException",
            UnhandledDiag = "Microsoft.AspNetCore.Diagnostics.UnhandledException",
            HandledDiag = "Microsoft.AspNetCore.Diagnostics.HandledException";

        public static bool IsEnabled(string name) =>
            name == Begin || name == End || name == Unhandled || name == UnhandledDiag || name == HandledDiag;

        private static readonly PropertyFetcher s_ctx = new("httpContext", "HttpContext"), s_exc = new("exception", "Exception");
        private readonly DiagnosticListener _listener;

        public ServerEvents(DiagnosticListener listener) => _listener = listener;

        public void OnNext(KeyValuePair<string, object?> e)
        {
            try
            {
                if (e.Value == null || s_ctx.Fetch(e.Value) is not HttpContext ctx)
                    return;
                switch (e.Key)
                {
                case Begin: WebSpans.BeginServer(ctx, _listener); break;
                case End: WebSpans.EndServer(ctx, null); break;
                case Unhandled: WebSpans.EndServer(ctx, s_exc.Fetch(e.Value) as Exception); break;
                default:
                    if (s_exc.Fetch(e.Value) is Exception ex)
                        WebSpans.ServerException(ctx, ex);
                    break;
                }
            }
            catch (Exception ex)
            {
                WebSpans.Failed("an ASP.NET Core request", ex);
            }
        }

        public void OnError(Exception error) { }
        public void OnCompleted() { }
    }

    /// <summary>HttpClient's events (DiagnosticListener "HttpHandlerDiagnosticListener"), not its
    /// Activity's. Their payloads are the runtime's internal types: properties read by name.</summary>
    internal sealed class ClientEvents : IObserver<KeyValuePair<string, object?>>
    {
        private const string Request = "System.Net.Http.Request", Response = "System.Net.Http.Response", Error = "System.Net.Http.Exception";

        public static bool IsEnabled(string name) => name == Request || name == Response || name == Error;

        private static readonly PropertyFetcher s_request = new("Request"), s_response = new("Response"),
            s_taskStatus = new("RequestTaskStatus"), s_exception = new("Exception");
        private readonly DiagnosticListener _listener;

        public ClientEvents(DiagnosticListener listener) => _listener = listener;

        public void OnNext(KeyValuePair<string, object?> e)
        {
            try
            {
                if (e.Value == null)
                    return;
                switch (e.Key)
                {
                case Request:
                    if (s_request.Fetch(e.Value) is HttpRequestMessage req)
                        WebSpans.BeginClient(req, _listener);
                    break;
                case Response:
                    WebSpans.EndClient(s_response.Fetch(e.Value) as HttpResponseMessage,
                                       s_taskStatus.Fetch(e.Value) is TaskStatus st ? st : TaskStatus.RanToCompletion);
                    break;
                case Error:
                    if (s_exception.Fetch(e.Value) is Exception ex)
                        WebSpans.ClientException(s_request.Fetch(e.Value) as HttpRequestMessage, ex);
                    break;
                }
            }
            catch (Exception ex)
            {
                WebSpans.Failed("an HttpClient call", ex);
            }
        }

        public void OnError(Exception error) { }
        public void OnCompleted() { }
    }
}
