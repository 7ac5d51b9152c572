#!/usr/bin/env bash
# The testhost's starter for tests/clr/coverage.sh (the runsettings' DotNetHostPath): the test
# platform runs it instead of `dotnet` as `host.sh exec --runtimeconfig ... testhost.dll ...`,
# with the coverage collector's variables set (CORECLR_PROFILER = the CLR Instrumentation
# Engine's CLSID, CORECLR_PROFILER_PATH_64 = its library, MicrosoftInstrumentationEngine_*).
# Every variable is kept; the collector's profiler becomes a child in a loader.conf written
# here, and clrmux takes the profiler slot. Set by the suite:
#   COV_LAYOUT   alone (no clrmux) | child | clrie-first | tracer-first | detach-first
#   COV_OUT      prefix of this run's files (.env, .conf, .log, .spans, .rec)
#   COV_DOTNET   the dotnet to start; COV_FX: the runtime version (dotnet exec's --fx-version)
#   COV_CLRMUX, COV_CLRMUX_CLSID, COV_TRACE (the tracer's trace lines), COV_RECORDER
set -u
env | sort >"$COV_OUT.env"
clsid=${CORECLR_PROFILER:-}
path=${CORECLR_PROFILER_PATH_64:-${CORECLR_PROFILER_PATH:-}}
args=("$@")
if [ "${args[0]:-}" = exec ] && [ -n "${COV_FX:-}" ]; then args=(exec --fx-version "$COV_FX" "${args[@]:1}"); fi
if [ "$COV_LAYOUT" = alone ] || [ -z "$clsid" ] || [ -z "$path" ]; then exec "$COV_DOTNET" "${args[@]}"; fi
conf=$COV_OUT.conf
printf '[loader]\nlog_level = debug\n' >"$conf"
clrie() { printf '[child clrie]\npath = %s\nclsid = %s\n' "$path" "$clsid" >>"$conf"; }
tracer() { printf '[child tracer]\nbuiltin = tracer\noutput = %s\n%s\n' "$COV_OUT.spans" "$COV_TRACE" >>"$conf"; }
# a recorder that calls RequestProfilerDetach in its third ModuleLoadFinished
detacher() {
    printf '[child detacher]\npath = %s\nclsid = {A0000001-0000-0000-0000-000000000001}\n' "$COV_RECORDER" >>"$conf"
    export RECORDER_MASK_A0000001=0x24C RECORDER_DETACH_AT_A0000001=3 RECORDER_OUT_A0000001=$COV_OUT.rec
}
case $COV_LAYOUT in
child) clrie ;;
clrie-first) clrie; tracer ;;
tracer-first) tracer; clrie ;;
detach-first) detacher; clrie ;;
esac
export CORECLR_PROFILER=$COV_CLRMUX_CLSID CORECLR_PROFILER_PATH=$COV_CLRMUX CORECLR_PROFILER_PATH_64=$COV_CLRMUX
export CLRMUX_CONFIG=$conf CLRMUX_LOG_FILE=$COV_OUT.log
exec "$COV_DOTNET" "${args[@]}"
