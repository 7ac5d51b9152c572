/* Trace targets: `trace = Assembly!Namespace.Type[+Nested]::Method[(paramtypes)]` lines of
 * the tracer's loader.conf section, and matching a method's signature against the optional
 * parameter list.
 *
 *   System.Private.CoreLib!System.IO.Path::Combine(string,string)
 *   MyApp!MyApp.Util.Cache`1::Get                 generic type: `N as in metadata
 *   MyApp!MyApp.Outer+Inner::.ctor(int, ref MyApp.Point, string[])
 *
 * Parameter types are written as in C# or as metadata names: keywords (int, string, ...)
 * and their System.* names are the same type; a type may be named by its full name or by
 * its simple name (Point for MyApp.Point); `ref T`, `out T`, `in T` and `T&` are by-ref;
 * arrays T[] and T[,]; pointers T*; generic instances List<int> (the `N is optional);
 * a type's generic parameter by position !0, a method's by !!0. Without a list every
 * overload is traced; `()` selects the overload without parameters.
 * Everything here is pure (no runtime calls) so that it is unit-tested on its own. */
#ifndef CLRMUX_TRACER_TARGET_H
#define CLRMUX_TRACER_TARGET_H

#include <stddef.h>
#include <stdint.h>

#define CLRMUX_TARGET_MAX_PARAMS 16
#define CLRMUX_TARGET_NAME_MAX 256

struct clrmux_target {
    char assembly[128];
    char type[CLRMUX_TARGET_NAME_MAX];   /* "Ns.Outer+Inner" as written (spaces removed) */
    char method[128];
    int has_params;                      /* a parameter list was given */
    int nparams;
    char params[CLRMUX_TARGET_MAX_PARAMS][CLRMUX_TARGET_NAME_MAX]; /* canonical (see below) */
    int line;                            /* loader.conf line, 0 if none */
    int integ;                           /* a bytecode integration's target: its index + 1 (integ.h) */
};

/* Parses one target. Returns 0, or -1 with a reason in err[errlen]. */
int clrmux_target_parse(const char *text, struct clrmux_target *t, char *err, size_t errlen);

/* Canonical form of a type name written by a user: spaces removed, `ref/out/in X` -> `X&`,
 * C# keywords and System.* aliases -> the keyword (System.Int32 -> int), `N suffixes kept.
 * Returns 0, or -1 when it does not fit. */
int clrmux_target_canon_type(const char *in, char *out, size_t outsz);

/* Resolves a TypeDef/TypeRef/TypeSpec token of the signature's module into a full type name
 * ("Ns.Outer+Inner"), for clrmux_sig_param_names. Returns 0, or -1. */
typedef int (*clrmux_type_name_fn)(void *ctx, uint32_t token, char *out, size_t outsz);

/* Writes the canonical names of a MethodDefSig's parameters (II.23.2.1) into
 * names[max][CLRMUX_TARGET_NAME_MAX] (same canonical form as clrmux_target_canon_type).
 * Returns the number of parameters, or -1 for a malformed signature. */
int clrmux_sig_param_names(const uint8_t *sig, size_t len, clrmux_type_name_fn resolve, void *ctx,
                           char (*names)[CLRMUX_TARGET_NAME_MAX], int max);

/* Whether a user's canonical type name designates a signature's canonical type name:
 * the same shape, each name equal, or equal to the signature name's last dotted/nested
 * component(s) (Point matches Tracee.Point), `N suffixes optional. */
int clrmux_target_type_matches(const char *user, const char *sig);

/* Whether target t's parameter list (if any) accepts these signature parameter names. */
int clrmux_target_params_match(const struct clrmux_target *t, char (*names)[CLRMUX_TARGET_NAME_MAX], int n);

#endif
