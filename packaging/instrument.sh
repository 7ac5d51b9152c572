# Sets the variables that make every .NET process started from this shell load clrmux:
#
#   . /opt/clrmux/share/clrmux/instrument.sh
#   dotnet MyService.dll
#
# (as the OpenTelemetry .NET auto-instrumentation's instrument.sh does for its profiler).
# clrmux's folder is CLRMUX_HOME if set, else found from this file's path (bash), else the
# prefix it was installed with. CLRMUX_CONFIG is kept if already set, else etc/loader.conf.
# Undo with: unset CORECLR_ENABLE_PROFILING CORECLR_PROFILER CORECLR_PROFILER_PATH \
#            CORECLR_PROFILER_PATH_64 CLRMUX_CONFIG
if [ -z "${CLRMUX_HOME:-}" ]; then
    # ${BASH_SOURCE} is this file when bash sources it; other shells use the install prefix
    if [ -n "${BASH_SOURCE:-}" ]; then
        CLRMUX_HOME=$(cd "$(dirname "${BASH_SOURCE}")/../.." && pwd)
    else
        CLRMUX_HOME="@PREFIX@"
    fi
fi
if [ ! -f "$CLRMUX_HOME/lib/libclrmux.so" ]; then
    echo "instrument.sh: $CLRMUX_HOME/lib/libclrmux.so not found (set CLRMUX_HOME to clrmux's folder)" >&2
    return 1 2>/dev/null || exit 1
fi
export CLRMUX_HOME
export CORECLR_ENABLE_PROFILING=1
export CORECLR_PROFILER='{EE712634-5BBB-4C28-8E6A-45180A97AD0B}'
export CORECLR_PROFILER_PATH="$CLRMUX_HOME/lib/libclrmux.so"
# the runtime prefers the _64 variable on 64-bit processes: point it at clrmux too
export CORECLR_PROFILER_PATH_64="$CLRMUX_HOME/lib/libclrmux.so"
export CLRMUX_CONFIG="${CLRMUX_CONFIG:-$CLRMUX_HOME/etc/loader.conf}"
