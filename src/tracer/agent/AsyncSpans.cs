// Async spans (src/tracer/spans.h) and the flow's span context. A traced method that returns a
// task keeps its span open until the task completes, and its context flows with the
// ExecutionContext as Activity.Current does: the rewritten IL calls AsyncEnter after the entry
// probe, AsyncRestore when the method returns (when it throws, readers skip its context:
// Live), OnTask / OnValueTask with what it returns, and JoinRoot when a span opens
// with no traced method under it on its thread (a continuation, a request's handler): that
// span continues the flow's innermost context, the async span's or Activity.Current's,
// whichever is newer.
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace Clrmux.Agent
{
    /// <summary>An async span's context as it flows (immutable once made), with the
    /// Activity.Current of its start: an Activity other than that one, current in the flow
    /// later, started inside the span (it is newer). A request's or call's is a WebSpan.</summary>
    internal class SpanContextBox
    {
        public readonly SpanCtx Ctx;
        public readonly object? Activity;
        public readonly SpanContextBox? Prev; // the context it replaced (AsyncSpans.Live)
        public SpanContextBox(in SpanCtx c, object? activity, SpanContextBox? prev)
        {
            Ctx = c;
            Activity = activity;
            Prev = prev;
        }
    }

    /// <summary>A traced method's async span as the flow's context, with the ExecutionContext
    /// before AsyncEnter made it the flow's value and the one that made (AsyncRestore puts the
    /// first back when the second is still current).</summary>
    internal sealed class AsyncSpanBox : SpanContextBox
    {
        public ExecutionContext? Before, Entered;
        public AsyncSpanBox(in SpanCtx c, object? activity, SpanContextBox? prev) : base(c, activity, prev) { }
    }

    public static unsafe class AsyncSpans
    {
        /// <summary>The flow's async span. With the profiler's labels wanted (Native.FlagPush),
        /// its change handler (and Activity.CurrentChanged's) tells each thread the context it
        /// runs in at every ExecutionContext switch; else the context is read when a root span
        /// opens (JoinRoot), which costs nothing per switch.</summary>
        internal static AsyncLocal<SpanContextBox?> Current = new();
        internal static bool Push;

        /// <summary>Activity.Current (null before DiagnosticSource is loaded: no Activity exists
        /// then), and an Activity's context; set by Activities.Start, so that this class does not
        /// load DiagnosticSource itself.</summary>
        internal static Func<object?>? ActivityCurrent;
        internal static ActivityContextOf? ContextOf;
        internal delegate bool ActivityContextOf(object activity, SpanCtx* c);

        internal static void Init()
        {
            Push = (Native.Api->Flags & Native.FlagPush) != 0;
            if (Push)
                Current = new AsyncLocal<SpanContextBox?>(_ => PushCurrent());
        }

        /// <summary>The flow's innermost context: the async span, unless an Activity newer than
        /// it is current; then that Activity's.</summary>
        internal static bool FlowContext(SpanCtx* c) => FlowContext(Live(Current.Value), ActivityCurrent?.Invoke(), c);

        /// <summary>FlowContext from the flow's live async span (or null) and Activity.Current.</summary>
        private static bool FlowContext(SpanContextBox? box, object? act, SpanCtx* c)
        {
            if (box != null && (act == null || ReferenceEquals(box.Activity, act)))
            {
                *c = box.Ctx;
                return true;
            }
            return act != null && ContextOf != null && ContextOf(act, c);
        }

        /// <summary>The thread's context follows the flow's (push mode).</summary>
        internal static void PushCurrent()
        {
            SpanCtx c;
            if (FlowContext(&c))
                Native.Api->CtxSet(&c);
            else
                Native.Api->CtxSet(null);
        }

        /// <summary>The flow (ExecutionContext) in which this thread's last join found no context
        /// at all: neither an async span nor an Activity. An ExecutionContext never changes (each
        /// AsyncLocal change makes a new one), so while the thread runs in that same flow there
        /// is still nothing to join, and JoinRoot returns after one comparison (root spans with
        /// no Activity around them). Keeps that one ExecutionContext alive until the thread's
        /// next join in another flow that has nothing.</summary>
        [ThreadStatic] private static ExecutionContext? t_nothing;

        /// <summary>The runtime's ExecutionContext of a flow that has no AsyncLocal value at all
        /// (ExecutionContext.Capture()'s answer then; internal, read once by reflection: null if
        /// it cannot be, and only the per-thread check above is made): nothing to join.</summary>
        private static readonly ExecutionContext? s_empty = EmptyContext();

        private static ExecutionContext? EmptyContext()
        {
            try
            {
                return typeof(ExecutionContext).GetField("Default", BindingFlags.Static | BindingFlags.NonPublic)?.GetValue(null) as ExecutionContext;
            }
            catch (Exception)
            {
                return null;
            }
        }

        /// <summary>A strong GCHandle of s_empty (never freed: the rewritten IL reads it for the
        /// process's life), as the address of its slot; 0 without one. The rewritten IL compares
        /// ExecutionContext.Capture() with the object in that slot and calls JoinRoot only when
        /// they differ, so that a root span in a flow without AsyncLocal values makes no call.</summary>
        internal static IntPtr EmptyContextHandle() => s_empty == null ? IntPtr.Zero : GCHandle.ToIntPtr(GCHandle.Alloc(s_empty));

        /// <summary>A root span just opened on this thread: it continues the flow's context.</summary>
        public static void JoinRoot()
        {
            if (Push)
                return; // the thread's context is current already
            ExecutionContext? ec = ExecutionContext.Capture(); // null: flow suppressed, never kept
            if (ec == null || (!ReferenceEquals(ec, s_empty) && !ReferenceEquals(ec, t_nothing)))
                JoinFlow(ec);
        }

        /// <summary>JoinRoot in a flow other than the one its thread last found nothing in (out of
        /// line: JoinRoot itself keeps no locals to clear).</summary>
        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void JoinFlow(ExecutionContext? ec)
        {
            SpanContextBox? box = Current.Value;
            object? act = ActivityCurrent?.Invoke();
            if (box == null && act == null)
            {
                t_nothing = ec;
                return;
            }
            SpanCtx c;
            if (FlowContext(Live(box), act, &c))
                Native.Api->Join(&c);
        }

        /// <summary>The flow's context, skipping a call's span that ended (still the value of
        /// the flow inside HttpClient that ended it) and each async span context whose method an
        /// exception left before it returned its task: the rewritten IL has no exception
        /// clause (other profilers would see it), so such a frame never gave its caller's
        /// context back (AsyncRestore); its span ended in the tracer's unwind callbacks, which
        /// remember its id (span_failed).</summary>
        internal static SpanContextBox? Live(SpanContextBox? box)
        {
            while (box is WebSpan { Ended: true })
                box = box.Prev; // a call's span whose end left it in place (WebSpans.EndClient)
            if (box == null || *Native.FailedAny == 0)
                return box;
            for (int i = 0; box != null && i < 256 && Native.Api->SpanFailed(box.Ctx.SpanId) != 0; i++)
                box = box.Prev;
            return box;
        }

        private static readonly object s_notEntered = new();

        /// <summary>Span `slot` (the entry probe's) becomes the flow's context; returned for
        /// AsyncRestore: that context, or a token that there is none (no span).</summary>
        public static object? AsyncEnter(long slot)
        {
            SpanCtx c;
            if (Native.Api->SpanAsyncEnter(slot, &c) == 0)
                return s_notEntered;
            ExecutionContext? before = ExecutionContext.Capture(); // null: the flow is suppressed
            var box = new AsyncSpanBox(c, ActivityCurrent?.Invoke(), Current.Value);
            Current.Value = box;
            if (before != null)
            {
                box.Before = before;
                box.Entered = ExecutionContext.Capture();
            }
            return box;
        }

        /// <summary>The method returned: its caller's context comes back. When the flow's
        /// ExecutionContext is still the one AsyncEnter made (an async method's builder puts it
        /// back when the method first awaits), the one before it is put back as it was, with no new
        /// ExecutionContext; else the value alone is set back.</summary>
        public static void AsyncRestore(object? entered)
        {
            if (entered is not AsyncSpanBox box)
                return; // no span: nothing was changed
            ExecutionContext? before = box.Before;
            if (before != null && ReferenceEquals(ExecutionContext.Capture(), box.Entered))
                ExecutionContext.Restore(before);
            else
                Current.Value = box.Prev;
            box.Before = box.Entered = null;
        }

        /// <summary>Called with a traced method's task and its span's id when the task has
        /// completed, before the span ends (a bytecode integration reads its result: set by
        /// Integrations when one waits).</summary>
        internal static Action<Task?, ulong>? TaskDone;

        private sealed class Pending
        {
            public AsyncSpan Span;
        }

        private static readonly Action<Task, object?> s_done = (t, o) => Finish(t, ref ((Pending)o!).Span);

        /// <summary>The method returned `task`: span `slot` is detached from the thread and
        /// finished when the task completes.</summary>
        public static void OnTask(object? task, long slot)
        {
            AsyncSpan s;
            if (Native.Api->SpanDetach(slot, &s) == 0)
                return;
            if (task is not Task t)
            {
                TaskDone?.Invoke(null, s.SpanId);
                Native.Api->SpanFinish(&s, 0, 0); // a null task: the call is over
                return;
            }
            if (t.IsCompleted)
            {
                Finish(t, ref s);
                return;
            }
            var p = new Pending { Span = s };
            // a continuation task, not a bare completion action (UnsafeOnCompleted): the runtime
            // runs only the first await-style continuation of a completed task inline and queues
            // the others to the thread pool, so an action registered here, before the caller's
            // await, would send every caller's continuation through the pool (bench/web.sh part 2:
            // +1 to +3 us a request). No ExecutionContext to carry into it: it only ends the span
            AsyncFlowControl flow = ExecutionContext.SuppressFlow();
            try
            {
                t.ContinueWith(s_done, p, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously,
                               TaskScheduler.Default);
            }
            finally
            {
                flow.Undo();
            }
        }

        /// <summary>The method returned a ValueTask or ValueTask&lt;T&gt; (boxed) that has not
        /// completed successfully: its task carries the span to its end, and the method returns a
        /// ValueTask over that task instead (a ValueTask may be consumed once only).</summary>
        public static object? OnValueTask(object? boxed, long slot)
        {
            switch (boxed)
            {
            case ValueTask vt:
                Task t = vt.AsTask();
                OnTask(t, slot);
                return new ValueTask(t);
            case null:
                OnTask(null, slot);
                return null;
            default:
                Func<object, long, object> f = s_valueTasks.GetOrAdd(boxed.GetType(), MakeValueTaskHandler);
                return f(boxed, slot);
            }
        }

        private static readonly System.Collections.Concurrent.ConcurrentDictionary<Type, Func<object, long, object>> s_valueTasks = new();

        private static Func<object, long, object> MakeValueTaskHandler(Type vt)
        {
            MethodInfo m = typeof(AsyncSpans).GetMethod(nameof(ValueTaskOf), BindingFlags.NonPublic | BindingFlags.Static)!
                .MakeGenericMethod(vt.GetGenericArguments()[0]);
            return (Func<object, long, object>)Delegate.CreateDelegate(typeof(Func<object, long, object>), m);
        }

        private static object ValueTaskOf<T>(object boxed, long slot)
        {
            Task<T> t = ((ValueTask<T>)boxed).AsTask();
            OnTask(t, slot);
            return new ValueTask<T>(t);
        }

        private static void Finish(Task t, ref AsyncSpan s)
        {
            uint exc = 0;
            int error = 0;
            if (t.IsFaulted)
            {
                error = 1;
                Exception? e = FirstException(t);
                exc = Native.ExcIntern(e?.GetType().FullName ?? "System.Exception", e?.Message);
            }
            else if (t.IsCanceled)
            {
                error = 1; // awaiting it throws TaskCanceledException
                exc = Native.ExcIntern("System.Threading.Tasks.TaskCanceledException", "A task was canceled.");
            }
            TaskDone?.Invoke(t, s.SpanId);
            fixed (AsyncSpan* p = &s)
                Native.Api->SpanFinish(p, exc, error);
        }

        // A faulted task's first exception, read without marking it observed (Task.Exception
        // would: the app's TaskScheduler.UnobservedTaskException would no longer see it):
        // Task.m_contingentProperties.m_exceptionsHolder.m_faultExceptions, the runtime's own
        // fields since .NET Core 1; null when their shape differs.
        private static readonly FieldInfo? s_contingent =
            typeof(Task).GetField("m_contingentProperties", BindingFlags.NonPublic | BindingFlags.Instance);
        private static FieldInfo? s_holder, s_faults;

        private static Exception? FirstException(Task t)
        {
            try
            {
                object? cp = s_contingent?.GetValue(t);
                if (cp == null)
                    return null;
                s_holder ??= cp.GetType().GetField("m_exceptionsHolder", BindingFlags.NonPublic | BindingFlags.Instance);
                object? holder = s_holder?.GetValue(cp);
                if (holder == null)
                    return null;
                s_faults ??= holder.GetType().GetField("m_faultExceptions", BindingFlags.NonPublic | BindingFlags.Instance);
                if (s_faults?.GetValue(holder) is List<ExceptionDispatchInfo> list && list.Count > 0)
                    return list[0].SourceException;
            }
            catch
            {
                // another runtime's shape: no exception name
            }
            return null;
        }
    }
}
