/* How the managed agent gets into the process: the tracer rewrites CoreLib's
 * System.StartupHookProvider::ProcessStartupHooks(string diagnosticStartupHooks), which the
 * runtime calls before Main on .NET 8 and later (and skips when the app is trimmed with
 * StartupHookSupport off), so that its argument also names the agent's path: the runtime then
 * loads the agent as it loads any startup hook, after those the diagnostics port named and
 * before DOTNET_STARTUP_HOOKS's. Nothing changes in the environment: child processes do not
 * inherit the agent.
 *
 * Cheap by construction (a hello world's start-up, measured): the method and the String
 * methods the prefix calls are found in CoreLib's metadata tables as mapped
 * (common/mdtables.h), not through GetModuleMetaData (which converts CoreLib's metadata
 * reader, ~10 ms), and the prefix builds its strings from native UTF-16 buffers
 * (`new string(char*)`) instead of user strings (which need CoreLib's metadata for write); the
 * method's ReadyToRun code is refused (JITCachedFunctionSearchStarted) and the rewrite is made
 * at its JIT compilation (SetILFunctionBody), not through a ReJIT request at CoreLib's load
 * (which suspends the runtime). */
#ifndef CLRMUX_TRACER_AGENT_BOOT_H
#define CLRMUX_TRACER_AGENT_BOOT_H

#include <stddef.h>

#include "clrmux/corprof.h"

#define CLRMUX_AGENT_BOOT_NAME "System.StartupHookProvider.ProcessStartupHooks"

struct clrmux_agent_boot {
    mdMethodDef method;           /* ProcessStartupHooks(string) */
    mdMethodDef is_null_or_empty; /* string::IsNullOrEmpty(string) */
    mdMethodDef concat;           /* string::Concat(string, string) */
    mdMethodDef ctor;             /* string::.ctor(char*) */
    WCHAR *path, *sep_path;       /* the agent's path, and with the path separator before it
                                     (NUL-terminated UTF-16, never freed: the IL points at them) */
};

/* Fills *b from CoreLib mapped at `base` (GetModuleInfo's base address) for agent_path (UTF-8,
 * absolute). Returns 0, or -1 with the reason in why (another runtime's shape, no memory). */
int clrmux_agent_boot_find(const void *base, const char *agent_path, struct clrmux_agent_boot *b, char *why,
                           size_t whylen);

/* Rewrites ProcessStartupHooks (module mod) at its JIT compilation, through info
 * (GetILFunctionBody, then SetILFunctionBody with memory from GetILFunctionBodyAllocator): a
 * prefix that appends the agent's path to the argument, with the platform's path separator
 * when the argument is not empty. Returns 0, or -1 with the reason in why. */
int clrmux_agent_boot_rewrite(ICorProfilerInfo5 *info, ModuleID mod, const struct clrmux_agent_boot *b, char *why,
                              size_t whylen);

#endif
