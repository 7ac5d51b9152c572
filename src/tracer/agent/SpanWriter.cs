// An Activity as the record the tracer queues (src/tracer/xspan.h's layout): written into a
// per-thread buffer and handed to libclrmux.so in one call (its bytes are copied there).
using System;
using System.Buffers.Binary;
using System.Collections.Generic;
using System.Diagnostics;
using System.Text;

namespace Clrmux.Agent
{
    internal unsafe ref struct SpanWriter
    {
        public const int Version = 1, Header = 60;
        public const byte AttrString = 1, AttrBool = 2, AttrInt = 3, AttrDouble = 4;
        private const int MaxRecord = 256 * 1024;

        [ThreadStatic] private static byte[]? t_buf;
        private byte[] _b;
        private int _n;
        private bool _full;

        public static SpanWriter Begin()
        {
            byte[] b = t_buf ??= new byte[4096];
            return new SpanWriter { _b = b, _n = 0 };
        }

        private Span<byte> Room(int n)
        {
            if (_n + n > _b.Length)
            {
                if (_n + n > MaxRecord)
                {
                    _full = true;
                    return Span<byte>.Empty;
                }
                int cap = _b.Length * 2;
                while (cap < _n + n)
                    cap *= 2;
                Array.Resize(ref _b, Math.Min(cap, MaxRecord));
                t_buf = _b;
            }
            Span<byte> s = _b.AsSpan(_n, n);
            _n += n;
            return s;
        }

        public void U8(byte v) { Span<byte> s = Room(1); if (!s.IsEmpty) s[0] = v; }
        public void U16(int v) { Span<byte> s = Room(2); if (!s.IsEmpty) BinaryPrimitives.WriteUInt16LittleEndian(s, (ushort)v); }
        public void U32(uint v) { Span<byte> s = Room(4); if (!s.IsEmpty) BinaryPrimitives.WriteUInt32LittleEndian(s, v); }
        public void U64(ulong v) { Span<byte> s = Room(8); if (!s.IsEmpty) BinaryPrimitives.WriteUInt64LittleEndian(s, v); }
        public void I64(long v) => U64((ulong)v);

        /// <summary>A string: u16 byte length, UTF-8 (cut at 16 KiB, on a character boundary).</summary>
        public void Str(string? v) => Str((v ?? "").AsSpan());

        /// <summary>Characters as a string (a part of one, written without a copy of its own).</summary>
        public void Str(scoped ReadOnlySpan<char> v)
        {
            int max = Encoding.UTF8.GetMaxByteCount(v.Length);
            if (max > 16384)
            {
                int chars = Math.Min(v.Length, 5461); // 3 bytes a UTF-16 code unit at most
                if (chars < v.Length && char.IsHighSurrogate(v[chars - 1]))
                    chars--;
                v = v.Slice(0, chars);
                max = Encoding.UTF8.GetMaxByteCount(v.Length);
            }
            int at = _n;
            Span<byte> s = Room(2 + max);
            if (s.IsEmpty)
                return;
            int len = Encoding.UTF8.GetBytes(v, s.Slice(2));
            BinaryPrimitives.WriteUInt16LittleEndian(s, (ushort)len);
            _n = at + 2 + len;
        }

        public void Bytes(byte* p, int n)
        {
            Span<byte> s = Room(n);
            if (!s.IsEmpty)
                new ReadOnlySpan<byte>(p, n).CopyTo(s);
        }

        /// <summary>A string already in UTF-8 (a u8 literal: an attribute's key, a scope's name),
        /// copied as it is (at most 16 KiB).</summary>
        public void Utf8(ReadOnlySpan<byte> v)
        {
            Span<byte> s = Room(2 + v.Length);
            if (s.IsEmpty)
                return;
            BinaryPrimitives.WriteUInt16LittleEndian(s, (ushort)v.Length);
            v.CopyTo(s.Slice(2));
        }

        /// <summary>A string attribute (WebSpans: typed, nothing boxed; its key a u8 literal, not
        /// encoded again per span).</summary>
        public void StrAttr(ReadOnlySpan<byte> key, string? value) { U8(AttrString); Utf8(key); Str(value); }
        public void StrAttr(ReadOnlySpan<byte> key, scoped ReadOnlySpan<char> value) { U8(AttrString); Utf8(key); Str(value); }
        public void IntAttr(ReadOnlySpan<byte> key, long value) { U8(AttrInt); Utf8(key); I64(value); }

        public void TraceId(ActivityTraceId id)
        {
            Span<byte> s = Room(16);
            if (!s.IsEmpty)
                id.CopyTo(s);
        }

        public static ulong SpanIdValue(ActivitySpanId id)
        {
            Span<byte> b = stackalloc byte[8];
            id.CopyTo(b);
            return BinaryPrimitives.ReadUInt64BigEndian(b);
        }

        public static long UnixNs(DateTime utc) => (utc.Ticks - DateTime.UnixEpoch.Ticks) * 100;

        /// <summary>A count placeholder (u16) to be set when the count is known.</summary>
        public int Mark() { int at = _n; U16(0); return at; }
        public void SetCount(int mark, int n) { if (!_full && mark + 2 <= _b.Length) BinaryPrimitives.WriteUInt16LittleEndian(_b.AsSpan(mark), (ushort)n); }

        /// <summary>One attribute; false when its value has no OTLP type here (left out).</summary>
        public bool Attr(string key, object? value)
        {
            switch (value)
            {
            case null: return false;
            case string s: U8(AttrString); Str(key); Str(s); return true;
            case bool b: U8(AttrBool); Str(key); U8(b ? (byte)1 : (byte)0); return true;
            case int i: U8(AttrInt); Str(key); I64(i); return true;
            case long l: U8(AttrInt); Str(key); I64(l); return true;
            case short sh: U8(AttrInt); Str(key); I64(sh); return true;
            case byte by: U8(AttrInt); Str(key); I64(by); return true;
            case uint ui: U8(AttrInt); Str(key); I64(ui); return true;
            case ulong ul when ul <= long.MaxValue: U8(AttrInt); Str(key); I64((long)ul); return true;
            case ushort us: U8(AttrInt); Str(key); I64(us); return true;
            case double d: U8(AttrDouble); Str(key); U64(BitConverter.DoubleToUInt64Bits(d)); return true;
            case float f: U8(AttrDouble); Str(key); U64(BitConverter.DoubleToUInt64Bits(f)); return true;
            default:
                string? t = value is System.Collections.IEnumerable e and not string ? Join(e) : value.ToString();
                if (t == null)
                    return false;
                U8(AttrString); Str(key); Str(t);
                return true;
            }
        }

        private static string Join(System.Collections.IEnumerable e)
        {
            var sb = new StringBuilder("[");
            foreach (object? o in e)
            {
                if (sb.Length > 1)
                    sb.Append(',');
                sb.Append(o);
            }
            return sb.Append(']').ToString();
        }

        public void Attrs(Activity.Enumerator<KeyValuePair<string, object?>> tags)
        {
            int mark = Mark(), n = 0;
            foreach (ref readonly KeyValuePair<string, object?> kv in tags)
                if (n < ushort.MaxValue && Attr(kv.Key, kv.Value))
                    n++;
            SetCount(mark, n);
        }

        /// <summary>Hands the record to the tracer; false when it was dropped (too large, the
        /// queue full).</summary>
        public bool Commit()
        {
            if (_full || Native.Api == null)
                return false;
            fixed (byte* p = _b)
                return Native.Api->Record(p, _n) == 0;
        }

        /// <summary>Attaches the blob written so far to open span `spanId` (an integration's
        /// attributes, src/tracer/integ.h); false when it was not taken.</summary>
        public bool Attach(ulong spanId)
        {
            if (_full || Native.Api == null)
                return false;
            fixed (byte* p = _b)
                return Native.Api->SpanAttach(spanId, p, _n) == 0;
        }

        public int Length => _n;
    }
}
