// Bytecode integrations (src/tracer/integ.h): the rewritten IL of a definition's method calls
// IntegEnter with `this` and its first four arguments right after the entry probe; the agent
// reads the definition's attributes from them through property paths, writes the W3C context
// into the message headers a definition names (inject), and attaches kind, name and attributes
// to the call's span, which the exporter then writes as a span of that kind. Nothing here
// throws into the app: a null, a missing member or a getter that throws gives no attribute.
using System;
using System.Collections;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Reflection;
using System.Text;

namespace Clrmux.Agent
{
    internal static unsafe class Integrations
    {
        private sealed class Def
        {
            public byte Kind;
            public string Name = "", Scope = "";
            public string? Inject, Extract;
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
                case "extract": d.Extract = v; d.HasExit = true; break;
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
                        d.HasExit |= v.Contains("return", StringComparison.Ordinal);
                    }
                    break;
                }
            }
            return d;
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
        public static void IntegEnter(object? self, object? a0, object? a1, object? a2, object? a3, long slot, int id)
        {
            try
            {
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
                if (d.Inject != null && (Eval(d.Inject, self, a0, a1, a2, a3) ?? MakeHeaders(d.Inject, self, a0, a1, a2, a3)) is { } headers)
                    Inject(headers, &c);
                if (c.Sampled == 0)
                    return; // not exported: nothing to attach
                var attrs = new List<KeyValuePair<string, object?>>(d.Attrs.Count + 2);
                foreach ((string key, string path) in d.Attrs)
                {
                    if (path.StartsWith("return", StringComparison.Ordinal))
                        continue; // at the exit
                    object? v = path.StartsWith('\'') ? path.Substring(1, path.Length - 2) : Eval(path, self, a0, a1, a2, a3);
                    if (v != null)
                        attrs.Add(new(key, v));
                }
                if (d.Db)
                    DbAttrs(attrs);
                Attach(d, c.SpanId, attrs, null);
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

        private static void Attach(Def d, ulong spanId, List<KeyValuePair<string, object?>> attrs, SpanCtx* parent)
        {
            string name = Render(d.Name, attrs);
            if (name.Length == 0)
                name = Find(attrs, "db.system.name") as string ?? d.Scope;
            SpanWriter w = SpanWriter.Begin();
            w.U8(d.Kind);
            w.Str(name);
            w.Str(d.Scope);
            w.U8(parent != null ? (byte)1 : (byte)0);
            if (parent != null)
            {
                for (int i = 0; i < 16; i++)
                    w.U8(parent->TraceId[i]);
                w.U64(parent->SpanId);
            }
            int mark = w.Mark(), n = 0;
            foreach (KeyValuePair<string, object?> kv in attrs)
                if (w.Attr(kv.Key, kv.Value))
                    n++;
            w.SetCount(mark, n);
            w.Attach(spanId);
        }

        /// <summary>The rewritten IL's call where a definition's method returns (a definition
        /// that reads `return` or extracts a context: tracer_rewrite.c).</summary>
        public static void IntegExit(object? ret, long slot, int id)
        {
            try
            {
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
                if (ret == null && d.Kind == 5)
                {
                    // a consumer's call that got nothing (a poll that timed out): no span
                    byte zero = 0;
                    Native.Api->SpanAttach(c.SpanId, &zero, 1);
                    return;
                }
                foreach ((string key, string path) in d.Attrs)
                    if (path.StartsWith("return", StringComparison.Ordinal) && Eval(path, ret) is { } v)
                        attrs.Add(new(key, v));
                SpanCtx parent;
                bool extracted = d.Extract != null && Eval(d.Extract, ret) is { } headers && Extract(headers, &parent);
                Attach(d, c.SpanId, attrs, extracted ? &parent : null);
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

        private static object? Eval(string path, object? ret) =>
            Eval(path.StartsWith("return", StringComparison.Ordinal) ? "this" + path.Substring(6) : path, ret, null, null, null, null);

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
            // 00-<32 hex trace>-<16 hex span>-<2 hex flags>
            if (tp == null || tp.Length < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
                return false;
            for (int i = 0; i < 16; i++)
                if (!byte.TryParse(tp.AsSpan(3 + 2 * i, 2), System.Globalization.NumberStyles.HexNumber, null, out c->TraceId[i]))
                    return false;
            if (!ulong.TryParse(tp.AsSpan(36, 16), System.Globalization.NumberStyles.HexNumber, null, out c->SpanId) || c->SpanId == 0)
                return false;
            return true;
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
            for (int i = 0; i < attrs.Count; i++)
            {
                if (attrs[i].Key != "db.query.text" || attrs[i].Value is not string text)
                    continue;
                // a statement's sanitized text and summary, kept for the next call of the same text
                if (!s_statements.TryGetValue(text, out (string Clean, string? Op, string? Table) st))
                {
                    (string? o, string? t) = DbEnrichment.Summary(text);
                    st = (DbEnrichment.Sanitize ? DbEnrichment.SanitizeSql(text) : text, o, t);
                    if (s_statements.Count < 4096)
                        s_statements[text] = st;
                }
                attrs[i] = new(attrs[i].Key, st.Clean);
                (string? op, string? table) = (st.Op, st.Table);
                if (op != null && Find(attrs, "db.operation.name") == null)
                    attrs.Add(new("db.operation.name", op));
                if (table != null && Find(attrs, "db.collection.name") == null)
                    attrs.Add(new("db.collection.name", table));
                return;
            }
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
        private static readonly ConcurrentDictionary<string, (string, string?, string?)> s_statements = new(StringComparer.Ordinal);

        internal static object? Eval(string path, object? self, object? a0, object? a1, object? a2, object? a3)
        {
            if (path.IndexOf('|') >= 0) // alternatives: the first that gives a value
            {
                foreach (string alt in path.Split('|', StringSplitOptions.TrimEntries))
                    if (Eval(alt, self, a0, a1, a2, a3) is { } v)
                        return v;
                return null;
            }
            string[] parts = path.Trim().Split('.');
            object? o = parts[0] switch
            {
                "this" => self,
                "arg0" => a0,
                "arg1" => a1,
                "arg2" => a2,
                "arg3" => a3,
                _ => null,
            };
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
        private static object? MakeHeaders(string path, object? self, object? a0, object? a1, object? a2, object? a3)
        {
            int dot = path.LastIndexOf('.');
            if (dot < 0 || path.IndexOf('|') >= 0 || Eval(path.Substring(0, dot), self, a0, a1, a2, a3) is not { } owner)
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
            var b = new StringBuilder("00-", 55);
            for (int i = 0; i < 16; i++)
                b.Append(c->TraceId[i].ToString("x2"));
            b.Append('-').Append(c->SpanId.ToString("x16")).Append(c->Sampled != 0 ? "-01" : "-00");
            string tp = b.ToString();
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
