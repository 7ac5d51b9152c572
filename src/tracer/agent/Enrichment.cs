// The built-in instrumentations' attributes (OpenTelemetry's RPC and database semantic
// conventions) on the Activities clrmux records (gRPC's client, database clients' sources), and
// the subscription to ASP.NET Core's and HttpClient's DiagnosticListeners, whose events make
// their spans (WebSpans). Attributes are completed only where they are missing (a newer
// library sets its own; they are never written twice).
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
                    if (l.Name == "Microsoft.AspNetCore" && Activities.InstrumentOn(Activities.AspNetCore))
                        SubscribeAspNetCore(l);
                    else if (l.Name == "HttpHandlerDiagnosticListener" && Activities.InstrumentOn(Activities.HttpClient))
                        l.Subscribe(new ClientEvents(l), ClientEvents.IsEnabled);
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
        private static void SubscribeAspNetCore(DiagnosticListener l) => l.Subscribe(new ServerEvents(l), ServerEvents.IsEnabled);

        /// <summary>Sets key on a when it has no such tag.</summary>
        internal static void Fill(Activity a, string key, object? value)
        {
            if (value != null && a.GetTagItem(key) == null)
                a.AddTag(key, value); // absent: appended, not searched for again
        }

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

        /// <summary>The gRPC method an Activity's tags name ("grpc.method" or "rpc.method_full").</summary>
        private static string? GrpcMethod(Activity a)
        {
            string? grpcMethod = null, rpcFull = null;
            foreach (ref readonly KeyValuePair<string, object?> kv in a.EnumerateTagObjects())
            {
                if (kv.Key == "grpc.method")
                    grpcMethod ??= kv.Value as string;
                else if (kv.Key == "rpc.method_full")
                    rpcFull ??= kv.Value as string;
            }
            return grpcMethod ?? rpcFull;
        }

        /// <summary>The span's name and error for the built-in instrumentation `builtin` (gRPC's
        /// client: ASP.NET Core's and HttpClient's spans are WebSpans'), or a library's own
        /// source (a database client's).</summary>
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
            if (builtin == Activities.Grpc && GrpcMethod(a) is { } full)
                return CompleteGrpc(a, full, a.Kind == ActivityKind.Server);
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
}
