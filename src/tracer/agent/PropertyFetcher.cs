// A property of a DiagnosticListener event's payload (the runtime's internal payload types),
// read through a delegate bound to its getter.
using System;
using System.Reflection;

namespace Clrmux.Agent
{
    /// <summary>A property of an event payload (the runtime's internal types), read through a
    /// delegate bound to its getter: made once per payload type, read without a lock or
    /// reflection afterwards. It keeps the bindings of the last two payload types it read, so
    /// that one fetcher serves two events of different payloads (a request's and a response's)
    /// without binding again at each.</summary>
    internal sealed class PropertyFetcher
    {
        private sealed class Bound
        {
            public readonly Type Type;
            public readonly Func<object, object?>? Get; // null: the type has no such property
            public Bound(Type type, Func<object, object?>? get) { Type = type; Get = get; }
        }

        private readonly string _name, _alt;
        private volatile Bound? _bound, _older;

        /// <summary>Reads property name, or alt when the payload's type has no such property.</summary>
        public PropertyFetcher(string name, string? alt = null)
        {
            _name = name;
            _alt = alt ?? name;
        }

        public object? Fetch(object payload)
        {
            Type t = payload.GetType();
            Bound? b = _bound;
            if (b == null || b.Type != t)
            {
                Bound? o = _older;
                if (o != null && o.Type == t)
                {
                    b = o; // read as it is: no write on a hit
                }
                else
                {
                    _older = b; // the newest two kept
                    _bound = b = Bind(t);
                }
            }
            return b.Get?.Invoke(payload);
        }

        private Bound Bind(Type t)
        {
            MethodInfo? getter = (t.GetProperty(_name, BindingFlags.Public | BindingFlags.Instance) ??
                                  t.GetProperty(_alt, BindingFlags.Public | BindingFlags.Instance))?.GetMethod;
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
