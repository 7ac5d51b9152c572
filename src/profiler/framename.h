/*
 * Frame-name formatting for .NET stacks, as used for pprof function names.
 *
 * Managed frames are rendered `Namespace.Type.Method`:
 *   type_name "System.Collections.Generic.List`1", method "Add",
 *   type args {"System.Int32"}
 *     -> "System.Collections.Generic.List<System.Int32>.Add"
 *   type_name "MyApp.Outer+Inner", method "Run" -> "MyApp.Outer+Inner.Run"
 *   type_name "MyApp.Outer`1+Inner`1", type args {"A", "B"}, method "M",
 *   method args {"C"} -> "MyApp.Outer<A>+Inner<B>.M<C>"
 * Native frames are rendered "[native] libfoo.so" (module basename) and
 * frames that cannot be resolved "[unknown]".
 *
 * Generic arity (decision): the metadata arity suffix "`N" (a backtick and
 * 1-4 decimal digits at the end of a '+'-separated type segment) is always
 * removed. When type arguments are known they are rendered C#-style as
 * "<A, B>": arguments are distributed over the segments by their arity, as
 * metadata lists the enclosing types' parameters first (Outer`1+Inner`1
 * has 2 parameters); if the arities do not add up to the number of
 * arguments given, all arguments are appended after the last segment.
 * When no type arguments are given the name is rendered without arity:
 * "List`1" -> "List" (so e.g. Tuple`2 and Tuple`3 share the name "Tuple").
 * Method generic arguments, if given, follow the method name: "M<C>".
 * Argument strings are used verbatim (already resolved by the caller).
 *
 * Output contract shared by every function here (snprintf-like):
 *  - buf/cap: caller-owned buffer of cap bytes. If cap > 0 the output is
 *    always NUL-terminated; buf may be NULL only when cap == 0 (to measure).
 *  - The result is always valid UTF-8: invalid UTF-8 input bytes (or
 *    invalid UTF-16 units) are replaced by U+FFFD (one per maximal invalid
 *    subpart), and truncation never splits a character: it stops before the
 *    first character that does not fit completely, so strlen(buf) can be up
 *    to 3 bytes shorter than cap - 1.
 *  - Returns the length in bytes (without NUL) of the complete result; the
 *    output was truncated iff the return value >= cap.
 *  - No allocation, no locking, no global state: thread-safe, and usable
 *    from a signal handler (only memcpy/memchr/strlen/strrchr are called).
 */
#ifndef CLRMUX_PROFILER_FRAMENAME_H
#define CLRMUX_PROFILER_FRAMENAME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Name of a frame that cannot be resolved. */
#define CLRMUX_FRAME_UNKNOWN "[unknown]"
/* Prefix of native frames. */
#define CLRMUX_FRAME_NATIVE_PREFIX "[native]"

/* Formats a managed frame name.
 *  type_name: namespace-qualified type name as metadata gives it, nested
 *    types joined with '+' ("Ns.Outer+Inner", "Ns.List`1"); NULL or ""
 *    for a global method (the result is then just the method part).
 *  method_name: method name as metadata gives it ("Add", ".ctor"); NULL
 *    or "" renders CLRMUX_FRAME_UNKNOWN in its place (and the whole result
 *    is CLRMUX_FRAME_UNKNOWN if type_name is empty too).
 *  type_args/n_type_args: the type's generic arguments, outermost
 *    enclosing type's first; may be NULL when n_type_args == 0. NULL
 *    entries render as "?".
 *  method_args/n_method_args: the method's generic arguments; same rules.
 * All strings are UTF-8 and only read. See the file comment for the
 * output contract and the arity rules. */
size_t clrmux_frame_name_managed(char *buf, size_t cap, const char *type_name,
                                 const char *method_name,
                                 const char *const *type_args,
                                 size_t n_type_args,
                                 const char *const *method_args,
                                 size_t n_method_args);

/* Formats a native frame as "[native] <basename of module_path>", e.g.
 * "/usr/lib/libfoo.so" -> "[native] libfoo.so". A NULL or empty path, or a
 * path ending in '/', renders "[native]". */
size_t clrmux_frame_name_native(char *buf, size_t cap,
                                const char *module_path);

/* Formats an unresolvable frame: CLRMUX_FRAME_UNKNOWN. */
size_t clrmux_frame_name_unknown(char *buf, size_t cap);

/* Converts UTF-16 (16-bit units in host byte order, the WCHAR of .NET on
 * Linux) to UTF-8. Reads at most n_units units from src and stops early at
 * a U+0000 unit, so both counted and NUL-terminated input work (pass
 * SIZE_MAX as n_units only for NUL-terminated input). Surrogate pairs are
 * combined; unpaired surrogates become U+FFFD. src may be NULL only when
 * n_units == 0. Output contract as in the file comment (snprintf-like
 * return value); this differs from clrmux_utf16_to_utf8 in
 * common/utf16.h, which returns the bytes written. */
size_t clrmux_frame_utf16_to_utf8(char *buf, size_t cap,
                                  const uint16_t *src, size_t n_units);

#ifdef __cplusplus
}
#endif

#endif /* CLRMUX_PROFILER_FRAMENAME_H */
