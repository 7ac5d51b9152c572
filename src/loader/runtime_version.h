/* Which .NET runtime clrmux runs in: the version to log and the major version that decides
 * runtime-dependent behaviour (the immutable event-mask flags). */
#ifndef CLRMUX_RUNTIME_VERSION_H
#define CLRMUX_RUNTIME_VERSION_H

/* What clrmux knows of the runtime. text is for the log: "8.0.33" (GetRuntimeInformation on
 * .NET 5+, or the shared framework's folder name, e.g. "3.1.3"), "Core 3.x (file version
 * 4.700.20.11803)" (the libcoreclr.so "@(#)Version" string, e.g. a self-contained 3.1 app),
 * or the GetRuntimeInformation numbers when nothing else is known. major is 0 when unknown. */
struct clrmux_runtime_version {
    int major;
    char text[96];
};

/* Decides the runtime version from what can be seen, best first:
 *   info_*        ICorProfilerInfo3::GetRuntimeInformation (info_major 0 when not asked):
 *                 exact on .NET 5 and later (8.0.33.0), 4.0.30319 on .NET Core 3.1 and
 *                 earlier, which then fall through to:
 *   coreclr_path  path of the loaded libcoreclr.so (NULL or "" when unknown): its folder is
 *                 named after the exact version in a shared-framework install
 *                 (.../shared/Microsoft.NETCore.App/8.0.33/libcoreclr.so);
 *   sccsid        the runtime's "@(#)Version A.B.C.D @Commit: ..." string (NULL or ""):
 *                 A.B is the major.minor of .NET 5 and later; .NET Core 3.x says 4.700.*,
 *                 2.x 4.6.*;
 *   else the GetRuntimeInformation numbers as they are.
 * Never fails: out->major is 0 and out->text "unknown" when nothing is known. */
void clrmux_runtime_version_decide(const char *coreclr_path, const char *sccsid, int info_major, int info_minor,
                                   int info_build, int info_qfe, struct clrmux_runtime_version *out);

/* Finds the loaded libcoreclr.so and its version string (clrmux_loaded_module) and decides
 * with clrmux_runtime_version_decide; the info_* values as there. */
void clrmux_runtime_version_detect(int info_major, int info_minor, int info_build, int info_qfe,
                                   struct clrmux_runtime_version *out);

#endif
