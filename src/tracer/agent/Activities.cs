// Activity recording: an ActivityListener that records the process's Activities as spans
// through the tracer's pipeline (src/tracer/xspan.h), keeps the flow's span context (so that
// method spans and Activities nest in each other), and leaves the sources that the app's own
// OpenTelemetry SDK (any other listener) listens to alone.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Reflection;
using System.Reflection.Emit;
using System.Threading;

namespace Clrmux.Agent
{
    internal static unsafe class Activities
    {
        // the built-in instrumentations and the sources (and legacy operation names) they cover
        internal const string AspNetCore = "aspnetcore", HttpClient = "httpclient", Grpc = "grpc";
        // the sources whose requests and calls WebSpans records from their events
        internal const string AspNetCoreSource = "Microsoft.AspNetCore", HttpClientSource = "System.Net.Http";
        private static readonly Dictionary<string, string> s_builtinSources = new(StringComparer.Ordinal)
        {
            [AspNetCoreSource] = AspNetCore,
            [HttpClientSource] = HttpClient,
            ["Grpc.Net.Client"] = Grpc,
        };
        private static readonly Dictionary<string, string> s_builtinOperations = new(StringComparer.Ordinal)
        {
            ["Microsoft.AspNetCore.Hosting.HttpRequestIn"] = AspNetCore,
            ["System.Net.Http.HttpRequestOut"] = HttpClient,
            ["Grpc.Net.Client.GrpcOut"] = Grpc,
        };

        internal static HashSet<string> Instrument = new(StringComparer.OrdinalIgnoreCase);
        // Instrument's answers for the three, read per Activity without hashing
        private static bool s_aspNetCore, s_httpClient, s_grpc;

        /// <summary>Whether the built-in instrumentation `builtin` (one of the constants) is on.</summary>
        internal static bool InstrumentOn(string builtin) =>
            ReferenceEquals(builtin, AspNetCore) ? s_aspNetCore : ReferenceEquals(builtin, HttpClient) ? s_httpClient
            : ReferenceEquals(builtin, Grpc) ? s_grpc : Instrument.Contains(builtin);
        private static string[] s_patterns = Array.Empty<string>();
        private static double s_ratio = 1;
        /// <summary>Whether a new trace (no parent) is recorded: sample_ratio's share of them.</summary>
        internal static bool SampleNew() => s_ratio >= 1 || Random.Shared.NextDouble() < s_ratio;
        private static ActivityListener? s_listener;
        // per source: does clrmux record it (by configuration), and is it someone else's
        private static readonly ConcurrentDictionary<string, bool> s_wanted = new(StringComparer.Ordinal);
        private static Func<ActivitySource, int>? s_listenerCount;
        private const string ParentProperty = "clrmux.parent";

        public static void Start()
        {
            foreach (string i in Native.Utf8(Native.Api->Instrument).Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
                Instrument.Add(i);
            s_aspNetCore = Instrument.Contains(AspNetCore);
            s_httpClient = Instrument.Contains(HttpClient);
            s_grpc = Instrument.Contains(Grpc);
            s_patterns = Native.Utf8(Native.Api->ActivitySources).Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries);
            s_ratio = Native.Api->SampleRatio;
            AsyncSpans.ContextOf = ContextOf;
            AsyncSpans.ActivityCurrent = () => Activity.Current;
            if (AsyncSpans.Push) // the thread's context follows Activity.Current too
                Activity.CurrentChanged += (_, _) => AsyncSpans.PushCurrent();
            Func<ActivityTraceId>? previous = Activity.TraceIdGenerator;
            Activity.TraceIdGenerator = () => TraceIdInside(previous);
            s_listener = new ActivityListener
            {
                // every source but ASP.NET Core's and HttpClient's, whose requests and calls are
                // recorded without an Activity (WebSpans): the context is kept for all the others
                ShouldListenTo = s => !ByEvents(s.Name),
                Sample = Sample,
                SampleUsingParentId = SampleUsingParentId,
                ActivityStarted = OnStarted,
                ActivityStopped = OnStopped,
            };
            ActivitySource.AddActivityListener(s_listener);
            s_listenerCount = ListenerCounter();
            if (s_listenerCount == null)
                Native.Log(Native.LogWarn, "ActivitySource's listeners cannot be counted on this runtime: sources that the app's own SDK listens to are recorded too");
            Enrichment.Start();
            DbEnrichment.Sanitize = (Native.Api->Flags & Native.FlagRawQueries) == 0;
            DbEnrichment.Watch();
            Native.Log(Native.LogDebug, $"Activities: instrument={string.Join(',', Instrument)} activity_sources={string.Join(',', s_patterns)}");
        }

        /// <summary>ASP.NET Core's and HttpClient's sources: their spans come from their events
        /// (WebSpans), never from their Activities.</summary>
        private static bool ByEvents(string source) => source == AspNetCoreSource || source == HttpClientSource;

        private static bool BuiltinByEvents(string builtin) => ReferenceEquals(builtin, AspNetCore) || ReferenceEquals(builtin, HttpClient);

        /// <summary>The instrumentation (or "") a source or legacy Activity belongs to.</summary>
        internal static string BuiltinOf(ActivitySource source, string operation)
        {
            if (s_builtinSources.TryGetValue(source.Name, out string? b))
                return b;
            return source.Name.Length == 0 && s_builtinOperations.TryGetValue(operation, out b) ? b : "";
        }

        /// <summary>Whether clrmux records the source's Activities by configuration.</summary>
        private static bool Wanted(ActivitySource source, string operation)
        {
            string builtin = BuiltinOf(source, operation);
            if (builtin.Length != 0)
                return InstrumentOn(builtin);
            return s_wanted.GetOrAdd(source.Name, MatchPatterns);
        }

        private static bool MatchPatterns(string name)
        {
            foreach (string p in s_patterns)
            {
                // `*` alone leaves out the runtime's experimental sources (Experimental.System.Net.*)
                if (p == "*" && name.StartsWith("Experimental.", StringComparison.Ordinal))
                    continue;
                if (Glob(p, name))
                    return true;
            }
            return false;
        }

        internal static bool Glob(string pattern, string s)
        {
            int p = 0, i = 0, star = -1, mark = 0;
            while (i < s.Length)
            {
                if (p < pattern.Length && pattern[p] == '*') { star = p++; mark = i; }
                else if (p < pattern.Length && pattern[p] == s[i]) { p++; i++; }
                else if (star >= 0) { p = star + 1; i = ++mark; }
                else return false;
            }
            while (p < pattern.Length && pattern[p] == '*')
                p++;
            return p == pattern.Length;
        }

        /// <summary>Another listener (the app's own SDK) listens to the source: the source is
        /// its owner's, clrmux neither samples nor records it (docs/tracing.md: an app with its
        /// own OpenTelemetry SDK).</summary>
        private static bool Owned(ActivitySource source) => s_listenerCount != null && s_listenerCount(source) > 1;

        private static bool Recording(ActivitySource source, string operation) =>
            Recording(source, BuiltinOf(source, operation), operation);

        private static bool Recording(ActivitySource source, string builtin, string operation) =>
            (builtin.Length != 0 ? InstrumentOn(builtin) && !BuiltinByEvents(builtin) : Wanted(source, operation)) && !Owned(source);

        private static ActivitySamplingResult Decide(ActivitySource source, string operation, ActivityContext parent, bool hasParent)
        {
            if (!Recording(source, operation))
                return ActivitySamplingResult.None;
            if (hasParent)
                return (parent.TraceFlags & ActivityTraceFlags.Recorded) != 0 ? ActivitySamplingResult.AllDataAndRecorded
                                                                              : ActivitySamplingResult.PropagationData;
            SpanCtx c;
            if (InnerSpan(null, null, &c)) // inside a method span: its trace, its decision
                return c.Sampled != 0 ? ActivitySamplingResult.AllDataAndRecorded : ActivitySamplingResult.PropagationData;
            return SampleNew() ? ActivitySamplingResult.AllDataAndRecorded : ActivitySamplingResult.PropagationData;
        }

        private static ActivitySamplingResult Sample(ref ActivityCreationOptions<ActivityContext> o) =>
            Decide(o.Source, o.Name, o.Parent, o.Parent != default);

        private static ActivitySamplingResult SampleUsingParentId(ref ActivityCreationOptions<string> o)
        {
            bool has = !string.IsNullOrEmpty(o.Parent);
            ActivityContext ctx = default;
            if (has && !ActivityContext.TryParse(o.Parent, null, out ctx))
                ctx = new ActivityContext(default, default, ActivityTraceFlags.Recorded); // hierarchical: follow it
            return Decide(o.Source, o.Name, ctx, has);
        }

        /// <summary>A root Activity started inside a method span belongs to its trace.</summary>
        private static ActivityTraceId TraceIdInside(Func<ActivityTraceId>? previous)
        {
            SpanCtx c;
            if (InnerSpan(null, null, &c))
                return ActivityTraceId.CreateFromBytes(new ReadOnlySpan<byte>(c.TraceId, 16));
            return previous != null ? previous() : ActivityTraceId.CreateRandom();
        }

        /// <summary>The clrmux span a new Activity `a` (null: not made yet) starts in, when it is
        /// newer than the Activity's parent `parent` (null: a root): the innermost traced method on
        /// this thread, unless the parent started inside it; else the flow's async span, when it
        /// started inside the parent (Activity.Current at its start is the parent).</summary>
        internal static bool InnerSpan(Activity? a, Activity? parent, SpanCtx* c)
        {
            if (Native.Api->CtxTop(c) != 0)
            {
                if (parent == null)
                    return true;
                // the parent was made inside this span (it was given this span as parent), or is
                // this thread's context itself: the parent is newer
                return !(parent.GetCustomProperty(ParentProperty) is ulong p && p == c->SpanId);
            }
            SpanContextBox? box = AsyncSpans.Live(AsyncSpans.Current.Value);
            if (box == null || !ReferenceEquals(box.Activity, parent))
                return false;
            *c = box.Ctx;
            return true;
        }

        /// <summary>An Activity's context for the native side: its trace, span, sampling, and the
        /// process-local root (its outermost in-process ancestor).</summary>
        internal static bool ContextOf(object o, SpanCtx* c)
        {
            if (o is not Activity a || a.IdFormat != ActivityIdFormat.W3C)
                return false;
            a.TraceId.CopyTo(new Span<byte>(c->TraceId, 16));
            c->SpanId = SpanWriter.SpanIdValue(a.SpanId);
            c->Sampled = a.Recorded ? 1u : 0u;
            Activity root = a;
            for (int i = 0; i < 64 && root.Parent != null; i++)
                root = root.Parent;
            c->LocalRoot = root.GetCustomProperty(LocalRootProperty) is ulong r ? r : SpanWriter.SpanIdValue(root.SpanId);
            c->Reserved = 0;
            return true;
        }

        private const string LocalRootProperty = "clrmux.local_root";

        private static void OnStarted(Activity a)
        {
            if (a.IdFormat != ActivityIdFormat.W3C || a.HasRemoteParent)
                return;
            SpanCtx c;
            ulong parent = a.ParentSpanId == default ? 0 : SpanWriter.SpanIdValue(a.ParentSpanId);
            if (InnerSpan(a, a.Parent, &c) && c.SpanId != parent &&
                a.TraceId == ActivityTraceId.CreateFromBytes(new ReadOnlySpan<byte>(c.TraceId, 16)))
            {
                // a method span opened after this Activity's parent, in the same trace: it is the
                // parent (exported so; the Activity keeps its own ids, which are what propagates)
                a.SetCustomProperty(ParentProperty, c.SpanId);
                if (a.Parent == null)
                    a.SetCustomProperty(LocalRootProperty, c.LocalRoot != 0 ? c.LocalRoot : c.SpanId);
            }
        }

        private static void OnStopped(Activity a)
        {
            if (a.IdFormat != ActivityIdFormat.W3C || !a.Recorded || !a.IsAllDataRequested)
                return;
            string builtin = BuiltinOf(a.Source, a.OperationName);
            if (!Recording(a.Source, builtin, a.OperationName))
                return;
            try
            {
                Write(a, builtin, SpanWriter.SpanIdValue(a.SpanId));
            }
            catch (Exception e)
            {
                Native.Log(Native.LogError, $"Activity '{a.OperationName}' of '{a.Source.Name}' not recorded: {e.GetType().Name}: {e.Message}");
            }
        }

        private static void Write(Activity a, string builtin, ulong id)
        {
            Enrichment.Completed e = Enrichment.Complete(a, builtin);
            SpanWriter w = SpanWriter.Begin();
            w.U16(SpanWriter.Version);
            w.U16(SpanWriter.Header);
            w.TraceId(a.TraceId);
            w.U64(id);
            ulong parent = a.GetCustomProperty(ParentProperty) is ulong p ? p
                         : a.ParentSpanId == default ? 0 : SpanWriter.SpanIdValue(a.ParentSpanId);
            w.U64(parent);
            long start = SpanWriter.UnixNs(a.StartTimeUtc);
            w.I64(start);
            w.I64(start + a.Duration.Ticks * 100);
            w.U8(a.Kind switch
            {
                ActivityKind.Server => 2,
                ActivityKind.Client => 3,
                ActivityKind.Producer => 4,
                ActivityKind.Consumer => 5,
                _ => 1,
            });
            byte status = a.Status switch { ActivityStatusCode.Ok => 1, ActivityStatusCode.Error => 2, _ => 0 };
            string? statusMessage = a.StatusDescription;
            if (status == 0 && e.Error)
            {
                status = 2;
                statusMessage = e.ErrorMessage;
            }
            w.U8(status);
            w.U8(a.HasRemoteParent ? (byte)1 : (byte)0);
            w.U8(0);
            w.U32(0);
            w.Str(e.Name ?? a.DisplayName);
            w.Str(status == 2 ? statusMessage : null);
            w.Str(a.Source.Name.Length != 0 ? a.Source.Name : a.OperationName);
            w.Str(a.Source.Version);
            w.Str(a.TraceStateString);
            // the Enumerate* forms: struct enumerators, nothing allocated per span
            w.Attrs(a.EnumerateTagObjects());
            int mark = w.Mark(), n = 0;
            foreach (ref readonly ActivityEvent ev in a.EnumerateEvents())
            {
                w.I64(SpanWriter.UnixNs(ev.Timestamp.UtcDateTime));
                w.Str(ev.Name);
                w.Attrs(ev.EnumerateTagObjects());
                n++;
            }
            w.SetCount(mark, n);
            mark = w.Mark();
            n = 0;
            foreach (ref readonly ActivityLink l in a.EnumerateLinks())
            {
                w.TraceId(l.Context.TraceId);
                w.U64(SpanWriter.SpanIdValue(l.Context.SpanId));
                w.Str(l.Context.TraceState);
                w.Attrs(l.EnumerateTagObjects());
                n++;
            }
            w.SetCount(mark, n);
            w.Commit();
        }

        /// <summary>source._listeners.Count (DiagnosticSource's own field since .NET 5), read
        /// through a small dynamic method; null when the field is not there.</summary>
        private static Func<ActivitySource, int>? ListenerCounter()
        {
            try
            {
                FieldInfo? f = typeof(ActivitySource).GetField("_listeners", BindingFlags.NonPublic | BindingFlags.Instance);
                MethodInfo? count = f?.FieldType.GetProperty("Count")?.GetMethod;
                if (f == null || count == null)
                    return null;
                var dm = new DynamicMethod("clrmux_listener_count", typeof(int), new[] { typeof(ActivitySource) },
                                           typeof(Activities).Module, skipVisibility: true);
                ILGenerator il = dm.GetILGenerator();
                Label none = il.DefineLabel();
                il.Emit(OpCodes.Ldarg_0);
                il.Emit(OpCodes.Ldfld, f);
                il.Emit(OpCodes.Dup);
                il.Emit(OpCodes.Brfalse_S, none);
                il.Emit(OpCodes.Callvirt, count);
                il.Emit(OpCodes.Ret);
                il.MarkLabel(none);
                il.Emit(OpCodes.Pop);
                il.Emit(OpCodes.Ldc_I4_0);
                il.Emit(OpCodes.Ret);
                var fn = (Func<ActivitySource, int>)dm.CreateDelegate(typeof(Func<ActivitySource, int>));
                using var probe = new ActivitySource("clrmux.probe");
                return fn(probe) >= 1 ? fn : null; // this listener listens to every source
            }
            catch
            {
                return null;
            }
        }
    }
}
