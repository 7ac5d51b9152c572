/* How the managed agent gets into the process: the tracer rewrites CoreLib's
 * System.StartupHookProvider::ProcessStartupHooks(string diagnosticStartupHooks), which the
 * runtime calls before Main on .NET 8 and later (and skips when the app is trimmed with
 * StartupHookSupport off), so that its argument also names the agent's path: the runtime then
 * loads the agent as it loads any startup hook, after those the diagnostics port named and
 * before DOTNET_STARTUP_HOOKS's. Nothing changes in the environment: child processes do not
 * inherit the agent. */
#ifndef CLRMUX_TRACER_AGENT_BOOT_H
#define CLRMUX_TRACER_AGENT_BOOT_H

#include <stddef.h>

#include "clrmux/corprof.h"

#define CLRMUX_AGENT_BOOT_TYPE "System.StartupHookProvider"
#define CLRMUX_AGENT_BOOT_METHOD "ProcessStartupHooks"

/* The MethodDef of ProcessStartupHooks(string) in CoreLib's metadata `imp`, or 0 (another
 * runtime's shape: no agent). */
mdMethodDef clrmux_agent_boot_find(IMetaDataImport2 *imp);

/* Rewrites ProcessStartupHooks (module mod, token tok; its IL read through info) through fc:
 * a prefix that appends `agent_path` (absolute; UTF-8) to the argument, with the platform's
 * path separator when the argument is not empty. Returns 0, or -1 with the reason in why. */
int clrmux_agent_boot_rewrite(ICorProfilerInfo5 *info, ModuleID mod, mdMethodDef tok, ICorProfilerFunctionControl *fc,
                              const char *agent_path, char *why, size_t whylen);

#endif
