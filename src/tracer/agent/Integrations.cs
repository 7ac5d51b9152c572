// Bytecode integrations (src/tracer/integ.h): the rewritten IL of a definition's method calls
// IntegEnter with `this` and its arguments right after the entry probe (the first four, and an
// array of the rest when the definition reads them); the agent reads the definition's
// attributes from them through property paths, writes the W3C context into the message headers
// a definition names (inject), reads the message's context from them (extract), and attaches
// kind, name and attributes to the call's span, which the exporter then writes as a span of
// that kind. IntegExit reads what the method returns (a task's result when it completes,
// before its span ends). Nothing here throws into the app: a null, a missing member or a
// getter that throws gives no attribute.
using System;
using System.Collections;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Reflection;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Clrmux.Agent
{
    internal static unsafe class Integrations
    {
        private sealed class Def
        {
            public byte Kind;
            public string Name = "", Scope = "";
            public string? Inject, Extract;
            public bool ExtractAtExit, ExtractParent; // extract reads the return; extract_as = parent
            public bool HasExit;
            public int[] Versions = { -1, -1, -1, -1 };
            public readonly List<(string Key, string Value)> Attrs = new();
            public bool Db;
            public int VersionOk; // 0 unknown, 1 in range, -1 out of range (no attributes)
        }

        private static readonly Def?[] s_defs = new Def?[64];
        private static readonly object s_lock = new();
        private static bool s_failed;

        private static Def? DefOf(int id)
        {
            if ((uint)id >= (uint)s_defs.Length)
                return null;
            Def? d = s_defs[id];
            if (d != null)
                return d;
            lock (s_lock)
            {
                if (s_defs[id] != null)
                    return s_defs[id];
                int len;
                byte* p = (byte*)Native.Api->IntegSpec(id, &len);
                if (p == null)
                    return null;
                d = Parse(Encoding.UTF8.GetString(p, len));
                s_defs[id] = d;
                return d;
            }
        }

        private static Def Parse(string spec)
        {
            var d = new Def();
            foreach (string line in spec.Split('\n', StringSplitOptions.RemoveEmptyEntries))
            {
                int eq = line.IndexOf('=');
                if (eq < 0)
                    continue;
                string k = line.Substring(0, eq), v = line.Substring(eq + 1);
                switch (k)
                {
                case "kind": d.Kind = byte.Parse(v); break;
                case "name": d.Name = v; break;
                case "scope": d.Scope = v; break;
                case "inject": d.Inject = v; break;
                case "extract":
                    d.Extract = v;
                    d.ExtractAtExit = v.StartsWith("return", StringComparison.Ordinal);
                    d.HasExit |= d.ExtractAtExit;
                    break;
                case "extract_as": d.ExtractParent = v == "parent"; break;
                case "versions":
                    string[] r = v.Split(',');
                    for (int i = 0; i < 4 && i < r.Length; i++)
                        d.Versions[i] = int.Parse(r[i]);
                    break;
                case "attr":
                    int tab = v.IndexOf('\t');
                    if (tab > 0)
                    {
                        d.Attrs.Add((v.Substring(0, tab), v.Substring(tab + 1)));
                        d.Db |= v.StartsWith("db.", StringComparison.Ordinal);
                        d.HasExit |= ReadsReturn(v.Substring(tab + 1));
                    }
                    break;
                }
            }
            return d;
        }

        private static bool ReadsReturn(string value)
        {
            foreach (string alt in value.Split('|', StringSplitOptions.TrimEntries))
                if (alt == "return" || alt.StartsWith("return.", StringComparison.Ordinal))
                    return true;
            return false;
        }

        // "3,0,-1,-1": min major, min minor, max major, max minor; -1 open
        private static bool InRange(Def d, Version v)
        {
            int[] r = d.Versions;
            if (r[0] >= 0 && (v.Major < r[0] || (v.Major == r[0] && r[1] >= 0 && v.Minor < r[1])))
                return false;
            if (r[2] >= 0 && (v.Major > r[2] || (v.Major == r[2] && r[3] >= 0 && v.Minor > r[3])))
                return false;
            return true;
        }

        /// <summary>The rewritten IL's call (tracer_rewrite.c: emit_integ_enter).</summary>
        public static void IntegEnter(object? self, object? a0, object? a1, object? a2, object? a3, object?[]? more, long slot,
                                      int id)
        {
            try
            {
                var call = new Call(self, a0, a1, a2, a3, more);
                SpanCtx c;
                if (Native.Api->SpanPeek(slot, &c) == 0)
                    return; // not recorded
                Def? d = DefOf(id);
                if (d == null)
                    return;
                if (d.VersionOk == 0)
                {
                    Version? v = self?.GetType().Assembly.GetName().Version;
                    d.VersionOk = v == null || InRange(d, v) ? 1 : -1;
                    if (d.VersionOk < 0)
                        Native.Log(Native.LogInfo, $"integration {d.Scope}: version {v} is outside its range: plain method spans");
                }
                if (d.VersionOk < 0)
                    return;
                if (d.Inject != null && (Eval(d.Inject, in call) ?? MakeHeaders(d.Inject, in call)) is { } headers)
                    Inject(headers, &c);
                if (c.Sampled == 0)
                    return; // not exported: nothing to attach
                var attrs = new List<KeyValuePair<string, object?>>(d.Attrs.Count + 2);
                foreach ((string key, string path) in d.Attrs)
                {
                    if (path.StartsWith("return", StringComparison.Ordinal))
                        continue; // at the exit
                    object? v = path.StartsWith('\'') ? path.Substring(1, path.Length - 2) : Eval(path, in call);
                    if (v != null)
                        attrs.Add(new(key, v));
                }
                if (d.Db)
                    DbAttrs(attrs);
                SpanCtx remote;
                bool extracted = d.Extract != null && !d.ExtractAtExit && Eval(d.Extract, in call) is { } carrier &&
                                 Extract(carrier, &remote);
                Attach(d, c.SpanId, attrs, extracted ? &remote : null);
                if (d.HasExit)
                {
                    t_pending ??= new();
                    if (t_pending.Count >= 64)
                        t_pending.Clear(); // calls that exceptions left (no exit): forgotten
                    t_pending.Push((c.SpanId, attrs));
                }
            }
            catch (Exception e)
            {
                // no attributes: the call runs on, its span is a method span
                if (!s_failed)
                {
                    s_failed = true;
                    Native.Log(Native.LogWarn, $"integration {id}: attributes not read: {e.GetType().Name}: {e.Message} (logged once)");
                }
            }
        }

        // the attributes read at the entry of calls whose exit reads more (this thread's, innermost last)
        [ThreadStatic] private static Stack<(ulong, List<KeyValuePair<string, object?>>)>? t_pending;

        // attributes the conventions type as strings, whatever the library's type
        private static bool StringTyped(string key) =>
            key is "messaging.destination.partition.id" or "messaging.kafka.message.key" or "messaging.message.id";

        private static void Attach(Def d, ulong spanId, List<KeyValuePair<string, object?>> attrs, SpanCtx* remote)
        {
            string name = Render(d.Name, attrs);
            if (name.Length == 0)
                name = Find(attrs, "db.system.name") as string ?? d.Scope;
            SpanWriter w = SpanWriter.Begin();
            w.U8(d.Kind);
            w.Str(name);
            w.Str(d.Scope);
            // the message's creation context: the parent (and a link), or a link (integ.h)
            w.U8(remote == null ? (byte)0 : d.ExtractParent ? (byte)1 : (byte)2);
            if (remote != null)
            {
                for (int i = 0; i < 16; i++)
                    w.U8(remote->TraceId[i]);
                w.U64(remote->SpanId);
            }
            int mark = w.Mark(), n = 0;
            foreach (KeyValuePair<string, object?> kv in attrs)
                if (w.Attr(kv.Key, kv.Value is not string and not null && StringTyped(kv.Key)
                                       ? Convert.ToString(kv.Value, System.Globalization.CultureInfo.InvariantCulture)
                                       : kv.Value))
                    n++;
            w.SetCount(mark, n);
            w.Attach(spanId);
        }

        private const int AsyncFlag = 0x40000000; // integ.h: CLRMUX_INTEG_ASYNC

        /// <summary>The rewritten IL's call where a definition's method returns (a definition
        /// that reads `return`: tracer_rewrite.c); with AsyncFlag in id, ret is the Task or the
        /// boxed ValueTask the method returns, its result read when it completes.</summary>
        public static void IntegExit(object? ret, long slot, int id)
        {
            try
            {
                bool async = (id & AsyncFlag) != 0;
                id &= ~AsyncFlag;
                SpanCtx c;
                Stack<(ulong Id, List<KeyValuePair<string, object?>> Attrs)>? pending = t_pending;
                if (pending == null || pending.Count == 0 || Native.Api->SpanPeek(slot, &c) == 0)
                    return;
                List<KeyValuePair<string, object?>>? attrs = null;
                while (pending.Count > 0) // calls an exception left never came here: theirs are dropped
                {
                    var top = pending.Pop();
                    if (top.Id == c.SpanId)
                    {
                        attrs = top.Attrs;
                        break;
                    }
                }
                Def? d = DefOf(id);
                if (attrs == null || d == null)
                    return;
                if (async)
                    Returned(d, c.SpanId, ret, attrs);
                else
                    Complete(d, c.SpanId, ret, attrs);
            }
            catch (Exception e)
            {
                if (!s_failed)
                {
                    s_failed = true;
                    Native.Log(Native.LogWarn, $"integration {id}: attributes at the return not read: {e.GetType().Name}: {e.Message} (logged once)");
                }
            }
        }

        /// <summary>The call's attributes completed with what it returned (its task's result),
        /// attached to its span.</summary>
        private static void Complete(Def d, ulong spanId, object? ret, List<KeyValuePair<string, object?>> attrs)
        {
            if (ret == null && d.ExtractAtExit)
            {
                // a receive that got nothing (a poll that timed out): no span
                byte zero = 0;
                Native.Api->SpanAttach(spanId, &zero, 1);
                return;
            }
            foreach ((string key, string path) in d.Attrs)
                if (ReadsReturn(path) && Find(attrs, key) == null && Eval(path, ret) is { } v)
                    attrs.Add(new(key, v));
            SpanCtx remote;
            bool extracted = d.ExtractAtExit && Eval(d.Extract!, ret) is { } headers && Extract(headers, &remote);
            Attach(d, spanId, attrs, extracted ? &remote : null);
        }

        // the calls whose task had not completed when they returned it, by span: completed by
        // AsyncSpans.TaskDone, before the span ends
        private static readonly ConcurrentDictionary<ulong, (Def, List<KeyValuePair<string, object?>>)> s_parked = new();
        // its entries, kept apart: ConcurrentDictionary's IsEmpty and Count take every lock when it
        // is empty, and every async span's end asks (AsyncSpans.Finish)
        private static int s_nparked;

        /// <summary>A method returned a task (or a boxed ValueTask): its result is read now if it
        /// has one, else when the task completes (AsyncSpans.Finish calls TaskDone before the span
        /// ends); a ValueTask over an IValueTaskSource that has not completed is never read (it
        /// may be consumed once only): its span has the attributes read at the entry.</summary>
        private static void Returned(Def d, ulong spanId, object? ret, List<KeyValuePair<string, object?>> attrs)
        {
            Task? task = ret as Task;
            if (ret != null && task == null)
            {
                // ValueTask<T>: its result when it completed successfully, else its task
                Type t = ret.GetType();
                if (!t.IsGenericType || s_valueTaskReaders.GetOrAdd(t, MakeValueTaskReader) is not { } read)
                {
                    Attach(d, spanId, attrs, null);
                    return;
                }
                int state = read(ret, out object? result, out task);
                if (state == 0)
                {
                    Complete(d, spanId, result, attrs);
                    return;
                }
                if (state != 2)
                {
                    Attach(d, spanId, attrs, null);
                    return;
                }
            }
            if (task == null || task.IsCompleted)
            {
                Done(d, spanId, task, attrs);
                return;
            }
            if (Volatile.Read(ref s_nparked) >= 4096)
            {
                s_parked.Clear(); // tasks that never complete: forgotten
                Volatile.Write(ref s_nparked, 0);
            }
            if (s_parked.TryAdd(spanId, (d, attrs)))
                Interlocked.Increment(ref s_nparked);
            AsyncSpans.TaskDone ??= TaskDone;
        }

        private static void Done(Def d, ulong spanId, Task? task, List<KeyValuePair<string, object?>> attrs)
        {
            if (task == null)
                Complete(d, spanId, null, attrs);
            else if (task.Status == TaskStatus.RanToCompletion)
                Complete(d, spanId, Eval("this.Result", task), attrs); // Task<T>.Result; a Task: null
            else
                Attach(d, spanId, attrs, null); // failed or canceled: no result
        }

        /// <summary>The task of span spanId completed (AsyncSpans.Finish, before the span ends).</summary>
        private static void TaskDone(Task? task, ulong spanId)
        {
            if (Volatile.Read(ref s_nparked) <= 0 || !s_parked.TryRemove(spanId, out (Def D, List<KeyValuePair<string, object?>> Attrs) p))
                return;
            Interlocked.Decrement(ref s_nparked);
            try
            {
                Done(p.D, spanId, task, p.Attrs);
            }
            catch (Exception e)
            {
                if (!s_failed)
                {
                    s_failed = true;
                    Native.Log(Native.LogWarn, $"integration {p.D.Scope}: a task's result not read: {e.GetType().Name}: {e.Message} (logged once)");
                }
            }
        }

        // 0: completed successfully, *result read; 1: completed otherwise, or not readable;
        // 2: not completed, backed by *task
        private delegate int ValueTaskReader(object boxed, out object? result, out Task? task);
        private static readonly ConcurrentDictionary<Type, ValueTaskReader?> s_valueTaskReaders = new();

        private static ValueTaskReader? MakeValueTaskReader(Type t)
        {
            if (t.GetGenericTypeDefinition() != typeof(System.Threading.Tasks.ValueTask<>))
                return null;
            MethodInfo m = typeof(Integrations).GetMethod(nameof(ReadValueTask), BindingFlags.NonPublic | BindingFlags.Static)!
                .MakeGenericMethod(t.GetGenericArguments()[0]);
            return (ValueTaskReader)Delegate.CreateDelegate(typeof(ValueTaskReader), m);
        }

        private static int ReadValueTask<T>(object boxed, out object? result, out Task? task)
        {
            var vt = (System.Threading.Tasks.ValueTask<T>)boxed;
            result = null;
            task = null;
            // what backs it (ValueTask<T>._obj: null, a Task<T> or an IValueTaskSource<T>), read
            // without consuming it: Result and AsTask would consume an IValueTaskSource
            object? obj = ValueTaskObj<T>.Field?.GetValue(boxed);
            if (obj != null && obj is not Task<T>)
                return 1;
            if (vt.IsCompletedSuccessfully)
            {
                result = vt.Result; // its own value, or a completed task's
                return 0;
            }
            if (vt.IsCompleted)
                return 1;
            task = (Task<T>?)obj;
            return task != null ? 2 : 1;
        }

        private static class ValueTaskObj<T>
        {
            public static readonly FieldInfo? Field =
                typeof(System.Threading.Tasks.ValueTask<T>).GetField("_obj", BindingFlags.NonPublic | BindingFlags.Instance);
        }

        private static object? Eval(string path, object? ret)
        {
            if (path.IndexOf('|') >= 0) // alternatives: the first that gives a value
            {
                foreach (string alt in path.Split('|', StringSplitOptions.TrimEntries))
                    if (alt.StartsWith("return", StringComparison.Ordinal) && Eval(alt, ret) is { } v && !IsEmpty(v))
                        return v;
                return null;
            }
            var call = new Call(ret, null, null, null, null, null);
            return Eval(path.StartsWith("return", StringComparison.Ordinal) ? "this" + path.Substring(6) : path, in call);
        }

        /// <summary>A W3C traceparent from a header collection (a value as bytes or a string).</summary>
        private static bool Extract(object headers, SpanCtx* c)
        {
            object? v = null;
            switch (headers)
            {
            case IDictionary<string, object> d: d.TryGetValue("traceparent", out v); break;
            case IDictionary d: v = d["traceparent"]; break;
            default:
                // Confluent.Kafka's Headers: TryGetLastBytes(string, out byte[])
                MethodInfo? m = headers.GetType().GetMethod("TryGetLastBytes");
                if (m != null)
                {
                    object?[] a = { "traceparent", null };
                    if (m.Invoke(headers, a) is true)
                        v = a[1];
                }
                break;
            }
            string? tp = v switch { byte[] b => Encoding.UTF8.GetString(b), string s => s, _ => null };
            return WebSpans.ParseTraceparent(tp, c); // W3C Trace Context, as for an HTTP request
        }

        private static object? Find(List<KeyValuePair<string, object?>> attrs, string key)
        {
            foreach (KeyValuePair<string, object?> kv in attrs)
                if (kv.Key == key)
                    return kv.Value;
            return null;
        }

        /// <summary>db.query.text sanitized (unless sanitize_queries = false), and the operation
        /// and table read from it when the definition does not give them.</summary>
        private static void DbAttrs(List<KeyValuePair<string, object?>> attrs)
        {
            if (Find(attrs, "db.system.name") is "microsoft.sql_server")
                SqlServerAddress(attrs);
            for (int i = 0; i < attrs.Count; i++)
            {
                if (attrs[i].Key != "db.query.text" || attrs[i].Value is not string text)
                    continue;
                // a statement's sanitized text and summary, kept for the next call of the same text
                DbEnrichment.Statement st = DbEnrichment.StatementOf(text);
                attrs[i] = new(attrs[i].Key, st.Clean);
                (string? op, string? table) = (st.Op, st.Table);
                if (op != null && Find(attrs, "db.operation.name") == null)
                    attrs.Add(new("db.operation.name", op));
                if (table != null && Find(attrs, "db.collection.name") == null)
                    attrs.Add(new("db.collection.name", table));
                return;
            }
        }

        /// <summary>SQL Server's DataSource as server.address: [protocol:]host[\instance][,port]
        /// becomes the host, and server.port when it names one (named pipes, shared memory: as
        /// they are).</summary>
        private static void SqlServerAddress(List<KeyValuePair<string, object?>> attrs)
        {
            int i = attrs.FindIndex(kv => kv.Key == "server.address");
            if (i < 0 || attrs[i].Value is not string ds)
                return;
            if (ds.StartsWith("tcp:", StringComparison.OrdinalIgnoreCase))
                ds = ds.Substring(4);
            else if (ds.IndexOf(':') > 0 && !ds.StartsWith('['))
                return; // np:, lpc:, admin: ...
            int comma = ds.LastIndexOf(',');
            string host = comma >= 0 ? ds.Substring(0, comma).Trim() : ds.Trim();
            int slash = host.IndexOf('\\');
            if (slash > 0)
                host = host.Substring(0, slash);
            attrs[i] = new("server.address", host);
            if (comma >= 0 && int.TryParse(ds.AsSpan(comma + 1).Trim(), out int port) && port > 0 && port < 65536 &&
                Find(attrs, "server.port") == null)
                attrs.Add(new("server.port", port));
        }

        /// <summary>The name template with each {key} replaced by that attribute (or nothing).</summary>
        private static string Render(string template, List<KeyValuePair<string, object?>> attrs)
        {
            var b = new StringBuilder();
            for (int i = 0; i < template.Length; i++)
            {
                int close;
                if (template[i] == '{' && (close = template.IndexOf('}', i)) > i)
                {
                    b.Append(Find(attrs, template.Substring(i + 1, close - i - 1))?.ToString());
                    i = close;
                }
                else
                {
                    b.Append(template[i]);
                }
            }
            return string.Join(' ', b.ToString().Split(' ', StringSplitOptions.RemoveEmptyEntries));
        }

        // ---- property paths: this.A.B, argN.A.B ----

        private static readonly ConcurrentDictionary<(Type, string), Func<object, object?>?> s_getters = new();

        /// <summary>A call's `this` and arguments (More: arguments 4.., when the definition reads them).</summary>
        internal readonly struct Call
        {
            public readonly object? Self, A0, A1, A2, A3;
            public readonly object?[]? More;
            public Call(object? self, object? a0, object? a1, object? a2, object? a3, object?[]? more)
            {
                Self = self;
                A0 = a0;
                A1 = a1;
                A2 = a2;
                A3 = a3;
                More = more;
            }

            public object? Arg(int i) => i switch
            {
                0 => A0,
                1 => A1,
                2 => A2,
                3 => A3,
                _ => More != null && i - 4 < More.Length ? More[i - 4] : null,
            };
        }

        private static bool IsEmpty(object v) => v is string { Length: 0 };

        internal static object? Eval(string path, in Call call)
        {
            if (path.IndexOf('|') >= 0) // alternatives: the first that gives a value (an empty string is none)
            {
                foreach (string alt in path.Split('|', StringSplitOptions.TrimEntries))
                    if (!alt.StartsWith("return", StringComparison.Ordinal) && Eval(alt, in call) is { } v && !IsEmpty(v))
                        return v;
                return null;
            }
            string[] parts = path.Trim().Split('.');
            object? o = parts[0] == "this" ? call.Self
                      : parts[0].StartsWith("arg", StringComparison.Ordinal) && int.TryParse(parts[0].AsSpan(3), out int n) ? call.Arg(n)
                      : null;
            for (int i = 1; i < parts.Length && o != null; i++)
            {
                string member = parts[i];
                int index = -1, bracket = member.IndexOf('[');
                if (bracket > 0)
                {
                    index = int.Parse(member.AsSpan(bracket + 1, member.Length - bracket - 2));
                    member = member.Substring(0, bracket);
                }
                Func<object, object?>? g = s_getters.GetOrAdd((o.GetType(), member), k => Getter(k.Item1, k.Item2));
                if (g == null)
                    return null;
                try
                {
                    o = g(o);
                    if (index >= 0)
                        o = o is IEnumerable e ? ElementAt(e, index) : null;
                }
                catch
                {
                    return null; // a getter (or an enumerator) that throws: no attribute
                }
            }
            return o;
        }

        /// <summary>A getter as a small dynamic method (object in, the value boxed out): a
        /// reflection call costs ~100 ns more per read; null when it cannot be made.</summary>
        private static Func<object, object?>? Compiled(Type owner, MethodInfo? getter, FieldInfo? field)
        {
            try
            {
                var dm = new System.Reflection.Emit.DynamicMethod("clrmux_get", typeof(object), new[] { typeof(object) },
                                                                 typeof(Integrations).Module, skipVisibility: true);
                System.Reflection.Emit.ILGenerator il = dm.GetILGenerator();
                Type declaring = (getter?.DeclaringType ?? field!.DeclaringType)!;
                Type result = getter?.ReturnType ?? field!.FieldType;
                il.Emit(System.Reflection.Emit.OpCodes.Ldarg_0);
                if (declaring.IsValueType)
                    il.Emit(System.Reflection.Emit.OpCodes.Unbox, declaring);
                else
                    il.Emit(System.Reflection.Emit.OpCodes.Castclass, declaring);
                if (getter != null)
                    il.Emit(declaring.IsValueType || getter.IsFinal || !getter.IsVirtual ? System.Reflection.Emit.OpCodes.Call
                                                                                       : System.Reflection.Emit.OpCodes.Callvirt, getter);
                else
                    il.Emit(System.Reflection.Emit.OpCodes.Ldfld, field!);
                if (result.IsValueType)
                    il.Emit(System.Reflection.Emit.OpCodes.Box, result);
                il.Emit(System.Reflection.Emit.OpCodes.Ret);
                if (result.IsByRef || result.IsPointer || declaring.ContainsGenericParameters)
                    return null;
                return (Func<object, object?>)dm.CreateDelegate(typeof(Func<object, object?>));
            }
            catch
            {
                return null; // reflection's GetValue then
            }
        }

        private static object? ElementAt(IEnumerable e, int index)
        {
            foreach (object? x in e)
                if (index-- == 0)
                    return x;
            return null;
        }

        private static Func<object, object?>? Getter(Type t, string name)
        {
            const BindingFlags flags = BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic;
            for (Type? x = t; x != null; x = x.BaseType)
            {
                PropertyInfo? p = x.GetProperty(name, flags | BindingFlags.DeclaredOnly);
                if (p != null && p.GetMethod != null && p.GetIndexParameters().Length == 0)
                    return Compiled(t, p.GetMethod, null) ?? (o => p.GetValue(o));
                FieldInfo? f = x.GetField(name, flags | BindingFlags.DeclaredOnly);
                if (f != null)
                    return Compiled(t, null, f) ?? (o => f.GetValue(o));
            }
            return null;
        }

        // ---- context injection into message headers ----

        /// <summary>A null header collection at the end of `path` made and set: the property's
        /// type when it can be made, a Dictionary&lt;string, object&gt; for that interface.</summary>
        private static object? MakeHeaders(string path, in Call call)
        {
            int dot = path.LastIndexOf('.');
            if (dot < 0 || path.IndexOf('|') >= 0 || Eval(path.Substring(0, dot), in call) is not { } owner)
                return null;
            try
            {
                PropertyInfo? p = owner.GetType().GetProperty(path.Substring(dot + 1), BindingFlags.Instance | BindingFlags.Public);
                if (p == null || !p.CanWrite)
                    return null;
                Type t = p.PropertyType;
                object? h = t.IsAssignableFrom(typeof(Dictionary<string, object>)) ? new Dictionary<string, object>()
                          : !t.IsAbstract && !t.IsInterface && t.GetConstructor(Type.EmptyTypes) != null ? Activator.CreateInstance(t)
                          : null;
                if (h != null)
                    p.SetValue(owner, h);
                return h;
            }
            catch
            {
                return null;
            }
        }

        private static void Inject(object headers, SpanCtx* c)
        {
            string tp = WebSpans.Traceparent(*c);
            try
            {
                switch (headers)
                {
                case IDictionary<string, object> d: d["traceparent"] = Encoding.UTF8.GetBytes(tp); break;
                case IDictionary d: d["traceparent"] = Encoding.UTF8.GetBytes(tp); break;
                default:
                    // a collection with Add(string, byte[]) (Confluent.Kafka's Headers)
                    MethodInfo? add = headers.GetType().GetMethod("Add", new[] { typeof(string), typeof(byte[]) });
                    add?.Invoke(headers, new object[] { "traceparent", Encoding.UTF8.GetBytes(tp) });
                    break;
                }
            }
            catch
            {
                // headers that cannot take it: no propagation
            }
        }
    }
}
