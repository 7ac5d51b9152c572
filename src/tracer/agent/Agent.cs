// The agent's start (from StartupHook.Initialize): the table from libclrmux.so, the entry points
// for the rewritten IL, the Activity recording.
using System;
using System.Runtime.CompilerServices;

namespace Clrmux.Agent
{
    internal static unsafe class Agent
    {
        public static void Start()
        {
            if (!Native.Open())
                return; // not under clrmux's tracer (or another libclrmux.so): nothing to do
            ManagedTable m = new()
            {
                Size = (uint)sizeof(ManagedTable),
                AsyncEnter = Entry(nameof(AsyncSpans.AsyncEnter)),
                AsyncRestore = Entry(nameof(AsyncSpans.AsyncRestore)),
                OnTask = Entry(nameof(AsyncSpans.OnTask)),
                OnValueTask = Entry(nameof(AsyncSpans.OnValueTask)),
            };
            if ((Native.Api->Flags & Native.FlagActivities) != 0)
                Activities.Start();
            if (Native.Api->RegisterManaged(&m) != 0)
                Native.Log(Native.LogError, "the tracer refused the agent's entry points");
        }

        /// <summary>The entry point of a static method of AsyncSpans: a stable address that the
        /// rewritten IL calls with calli (its code may be compiled again, tiered; the address
        /// stays).</summary>
        private static IntPtr Entry(string name)
        {
            var mi = typeof(AsyncSpans).GetMethod(name, System.Reflection.BindingFlags.Public | System.Reflection.BindingFlags.Static)
                ?? throw new MissingMethodException(nameof(AsyncSpans), name);
            RuntimeHelpers.PrepareMethod(mi.MethodHandle);
            return mi.MethodHandle.GetFunctionPointer();
        }
    }
}
