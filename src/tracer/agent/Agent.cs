// The agent's start (from StartupHook.Initialize): the table from libclrmux.so, the entry points
// for the rewritten IL, and the Activity recording, started when System.Diagnostics.DiagnosticSource
// is loaded (no Activity exists before; a process that never loads it, a hello world, pays
// nothing more).
using System;
using System.Reflection;
using System.Threading;

namespace Clrmux.Agent
{
    internal static unsafe class Agent
    {
        private static int s_activities;

        public static void Start()
        {
            if (!Native.Open())
                return; // not under clrmux's tracer (or another libclrmux.so): nothing to do
            // stable addresses (precode stubs: the methods are compiled at their first call)
            // that the rewritten IL calls with calli
            delegate*<long, object?> enter = &AsyncSpans.AsyncEnter;
            delegate*<object?, void> restore = &AsyncSpans.AsyncRestore;
            delegate*<object?, long, void> onTask = &AsyncSpans.OnTask;
            delegate*<object?, long, object?> onValueTask = &AsyncSpans.OnValueTask;
            delegate*<void> joinRoot = &AsyncSpans.JoinRoot;
            delegate*<object?, object?, object?, object?, object?, object?[]?, long, int, void> integEnter = &Integrations.IntegEnter;
            delegate*<object?, long, int, void> integExit = &Integrations.IntegExit;
            ManagedTable m = new()
            {
                Size = (uint)sizeof(ManagedTable),
                AsyncEnter = (IntPtr)enter,
                AsyncRestore = (IntPtr)restore,
                OnTask = (IntPtr)onTask,
                OnValueTask = (IntPtr)onValueTask,
                JoinRoot = (IntPtr)joinRoot,
                IntegEnter = (IntPtr)integEnter,
                IntegExit = (IntPtr)integExit,
                EmptyContext = AsyncSpans.EmptyContextHandle(),
            };
            AsyncSpans.Init();
            if ((Native.Api->Flags & Native.FlagActivities) != 0)
            {
                AppDomain.CurrentDomain.AssemblyLoad += OnAssemblyLoad;
                foreach (Assembly a in AppDomain.CurrentDomain.GetAssemblies())
                    if (IsDiagnosticSource(a))
                        StartActivities();
            }
            if (Native.Api->RegisterManaged(&m) != 0)
                Native.Log(Native.LogError, "the tracer refused the agent's entry points");
        }

        private static bool IsDiagnosticSource(Assembly a) => a.GetName().Name == "System.Diagnostics.DiagnosticSource";

        private static void OnAssemblyLoad(object? sender, AssemblyLoadEventArgs e)
        {
            if (IsDiagnosticSource(e.LoadedAssembly))
                StartActivities();
        }

        private static void StartActivities()
        {
            if (Interlocked.Exchange(ref s_activities, 1) != 0)
                return;
            AppDomain.CurrentDomain.AssemblyLoad -= OnAssemblyLoad;
            try
            {
                Activities.Start();
            }
            catch (Exception e)
            {
                Native.Log(Native.LogError, "Activity recording did not start: " + e);
            }
        }
    }
}
