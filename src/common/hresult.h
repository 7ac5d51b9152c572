/* HRESULT names for log lines: "CORPROF_E_RUNTIME_UNINITIALIZED (0x80131371)" instead of a bare
 * hex number. The table (hresult.c) holds the COM/Win32 codes a profiler meets (winerror.h)
 * and the runtime's own codes that the profiling and metadata APIs return (corerror.h,
 * FACILITY_URT 0x13: CORPROF_E_*, CLDB_E_*, META_E_*, COR_E_*), with the values of
 * dotnet/runtime src/coreclr/pal/prebuilt/inc/corerror.h and the Windows SDK's winerror.h. */
#ifndef CLRMUX_COMMON_HRESULT_H
#define CLRMUX_COMMON_HRESULT_H

#include <stddef.h>
#include <stdint.h>

/* The symbolic name of `hr` ("E_FAIL", "CORPROF_E_RUNTIME_UNINITIALIZED"), or NULL when the
 * table does not know it. Static storage; thread-safe. */
const char *clrmux_hresult_name(int32_t hr);

/* Room for the longest text clrmux_hresult_str writes, with its NUL. */
#define CLRMUX_HRESULT_STR_MAX 72

/* Writes "NAME (0xXXXXXXXX)", or "0xXXXXXXXX" for a code the table does not know, into
 * buf (at least CLRMUX_HRESULT_STR_MAX bytes). Returns buf. Async-signal-safe. */
char *clrmux_hresult_str(int32_t hr, char *buf);

/* For a log argument: `LOG_ERROR("... failed with HRESULT %s", HR_STR(hr))`; the text lives
 * until the end of the enclosing block. */
#define HR_STR(hr) clrmux_hresult_str((int32_t)(hr), (char[CLRMUX_HRESULT_STR_MAX]){0})

#endif
