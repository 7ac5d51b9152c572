// The agent's view of libclrmux.so (src/tracer/agent.h, src/tracer/spans.h): the table it gets
// from clrmux_agent_api and the structs it passes. Layouts mirror the C structs exactly; change
// both together and bump Abi.
using System;
using System.IO;
using System.Runtime.InteropServices;

namespace Clrmux.Agent
{
    /// <summary>struct clrmux_span_ctx (40 bytes).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct SpanCtx
    {
        public fixed byte TraceId[16];
        public ulong SpanId;
        public ulong LocalRoot;
        public uint Sampled;
        public uint Reserved;
    }

    /// <summary>struct clrmux_async_span (64 bytes): an open span detached from its thread.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct AsyncSpan
    {
        public fixed byte TraceId[16];
        public ulong SpanId, ParentId, Start;
        public uint Method, Tid;
        public ushort Flags;
        public byte Sampled;
        public fixed byte Reserved[13];
    }

    /// <summary>struct clrmux_agent_managed: the entry points the rewritten IL calls.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct ManagedTable
    {
        public uint Size, Reserved;
        public IntPtr AsyncEnter, AsyncRestore, OnTask, OnValueTask, JoinRoot, IntegEnter, IntegExit, EmptyContext;
    }

    /// <summary>struct clrmux_agent_api.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct AgentApi
    {
        public uint Abi, Size;
        public byte* Instrument, ActivitySources;
        public double SampleRatio;
        public uint Flags, Reserved;
        // the ones that never block, lock or allocate are called without a GC transition
        public delegate* unmanaged[Cdecl]<ManagedTable*, int> RegisterManaged;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<long, SpanCtx*, int> SpanPeek;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<long, AsyncSpan*, int> SpanDetach;
        public delegate* unmanaged[Cdecl]<AsyncSpan*, uint, int, void> SpanFinish;
        public delegate* unmanaged[Cdecl]<SpanCtx*, void> CtxSet;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<SpanCtx*, int> CtxCurrent;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<SpanCtx*, void> Join;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<SpanCtx*, int> CtxTop;
        public delegate* unmanaged[Cdecl]<char*, int, char*, int, uint> ExcIntern;
        public delegate* unmanaged[Cdecl]<byte*, int, int> Record;
        public delegate* unmanaged[Cdecl]<int, char*, int, void> Log;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<long, SpanCtx*, int> SpanAsyncEnter;
        public delegate* unmanaged[Cdecl, SuppressGCTransition]<ulong, int> SpanFailed;
        public uint* FailedAny;
        public delegate* unmanaged[Cdecl]<ulong, byte*, int, int> SpanAttach;
        public delegate* unmanaged[Cdecl]<int, int*, sbyte*> IntegSpec;
    }

    internal static unsafe class Native
    {
        public const int Abi = 3;
        public const uint FlagActivities = 1, FlagPush = 2, FlagRawQueries = 4;
        public const int LogError = 0, LogWarn = 1, LogInfo = 2, LogDebug = 3;

        /// <summary>The table, or null when the agent runs without clrmux's tracer.</summary>
        public static AgentApi* Api;

        /// <summary>Nonzero once a method left by an exception had made its span the flow's
        /// context (AsyncSpans.Live).</summary>
        public static uint* FailedAny => Api->FailedAny;

        /// <summary>Finds libclrmux.so beside this assembly (the tracer loaded it already: the
        /// same file, the same handle) and asks it for the table.</summary>
        public static bool Open()
        {
            string? dir = Path.GetDirectoryName(typeof(Native).Assembly.Location);
            if (string.IsNullOrEmpty(dir))
                return false;
            // not Path.Combine: a CoreLib method an app may trace (the agent's own calls would be spans)
            string lib = dir + (OperatingSystem.IsWindows() ? "\\libclrmux.dll" : "/libclrmux.so");
            if (!NativeLibrary.TryLoad(lib, out IntPtr h) || !NativeLibrary.TryGetExport(h, "clrmux_agent_api", out IntPtr fn))
                return false;
            AgentApi* api = ((delegate* unmanaged[Cdecl]<int, AgentApi*>)fn)(Abi);
            if (api == null || api->Abi != Abi || api->Size < (uint)sizeof(AgentApi))
                return false;
            Api = api;
            return true;
        }

        public static string Utf8(byte* p) => p == null ? "" : Marshal.PtrToStringUTF8((IntPtr)p) ?? "";

        public static void Log(int level, string msg)
        {
            if (Api == null)
                return;
            fixed (char* p = msg)
                Api->Log(level, p, msg.Length);
        }

        public static uint ExcIntern(string type, string? message)
        {
            fixed (char* t = type)
            fixed (char* m = message)
                return Api->ExcIntern(t, type.Length, m, message?.Length ?? 0);
        }
    }
}
