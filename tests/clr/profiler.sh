#!/usr/bin/env bash
# Real-runtime tests of the built-in profiler (`builtin = profiler`, build/libclrmux_profiler.so):
# runs tests/clr/apps/shapes under clrmux, reads every profile it wrote with a real pprof
# reader (`go tool pprof`) and checks that each profile type names the method that produced
# it, and that the CPU profile's total is within 20% of the process's CPU time. The default
# sampler is the signal sampler; shapes also runs under `sampler = suspend` (the same methods
# named) and with timer_create made to fail (the automatic fallback, logged); cpubound runs
# with 3 busy threads and with 200 threads (the delivered rate, from the log). Every check runs
# on each runtime tests/clr/lib.sh selects (.NET 8, 9, 10).
# Prints one line per check and "profiler: N passed, N failed"; exits nonzero on a failure.
# Without dotnet: a loud skip (a failure under CI=true). Without go: a loud skip (a failure under CI=true).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export GOTOOLCHAIN=local HOME=${HOME:-/tmp}
SHAPES_MS=${PROFILER_TEST_MS:-3000}
. tests/clr/lib.sh

if ! command -v go >/dev/null 2>&1; then
    echo "##########################################################################"
    echo "## go (Debian golang-go) is not on PATH: no pprof reader, the profiler tests did NOT run"
    echo "##########################################################################"
    # every check reads the profiles with pprof's own -top/-tags/-tagfocus (no python reader
    # does that): under CI, where scripts/setup.sh installs golang-go, a missing go is an error
    if [ "${CI:-}" = true ]; then
        echo "CI=true: a missing go is an error (scripts/setup.sh test installs golang-go)"
        echo "profiler: 0 passed, 1 failed"
        exit 1
    fi
    exit 0
fi
clr_suite profiler "$@"
for f in build/libclrmux.so build/libclrmux_profiler.so; do
    [ -f "$f" ] || { bad "$f missing: run 'make all'"; clr_done; }
done

CLSID="{EE712634-5BBB-4C28-8E6A-45180A97AD0B}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-prof.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# run_shapes TAG LIB CONF: shapes under clrmux (LIB = libclrmux.so to register)
run_shapes() {
    local tag=$1 lib=$2 conf=$3
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$lib" \
        CLRMUX_CONFIG="$conf" CLRMUX_LOG_FILE="$WORK/$tag.log" \
        "${DOTNET[@]}" build/clr/shapes/shapes.dll "$SHAPES_MS" >"$WORK/$tag.out" 2>"$WORK/$tag.err"
    echo $? >"$WORK/$tag.rc"
}
pprof() { go tool pprof "$@" 2>/dev/null; }
# top INDEX: `go tool pprof -top` of every profile of the run, merged
top() { pprof -top -nodecount=200 -sample_index="$1" "${FILES[@]}"; }
# sum_index COLUMN: the sum of one sample type (1-based column of -raw) over every sample
sum_index() {
    pprof -raw "${FILES[@]}" | awk -v c="$1" '/^Samples:/ {s = 1; getline; next}
        s && /^ *-?[0-9]+( +-?[0-9]+)+:/ {sub(/:.*/, ""); split($0, v, " "); t += v[c]}
        /^Locations/ {s = 0} END {printf "%.0f\n", t}'
}
# names TOP NAME... : every NAME appears as a function in the -top output
names() {
    local out=$1
    shift
    for n in "$@"; do grep -qF -- "$n" <<<"$out" || return 1; done
}

# ---- the shapes app under the profiler ------------------------------------------------------
cat >"$WORK/loader.conf" <<EOF
[loader]
log_level = info
[child profiler]
builtin = profiler
output_dir = profiles
period_s = 2
sampling_interval_ms = 10
EOF
run_shapes shapes "$ROOT/build/libclrmux.so" "$WORK/loader.conf"
if [ "$(cat "$WORK/shapes.rc")" = 0 ] && grep -q '^shapes done$' "$WORK/shapes.out"; then
    ok "shapes runs to completion under the profiler"
else
    bad "shapes runs to completion under the profiler" "$(cat "$WORK/shapes.err" "$WORK/shapes.log" 2>/dev/null | tail -20)"
fi
grep -q "child 'profiler': loaded (profiler, ICorProfilerCallback11)" "$WORK/shapes.log" \
    && ok "the builtin profiler child is loaded from libclrmux_profiler.so" \
    || bad "the builtin profiler child is loaded from libclrmux_profiler.so" "$(cat "$WORK/shapes.log")"
PID=$(sed -n 's/^clrmux\[\([0-9]*\)\].*/\1/p' "$WORK/shapes.log" | head -1)
mapfile -t FILES < <(ls "$WORK"/profiles/shapes-"$PID"-*.pb.gz 2>/dev/null)
# 3 s with period_s = 2: one file per period and a last one at shutdown
if [ "${#FILES[@]}" -ge 2 ] && grep -q "last period (shutdown)" <(for f in "${FILES[@]}"; do pprof -raw "$f" | grep '^Comment'; done); then
    ok "one profile per period plus a last one at shutdown (${#FILES[@]} files named shapes-$PID-<start>.pb.gz)"
else
    bad "one profile per period plus a last one at shutdown" "$(ls -la "$WORK/profiles" 2>&1; grep profiler "$WORK/shapes.log")"
fi
unreadable=""
for f in "${FILES[@]}"; do pprof -raw "$f" | grep -q '^Samples:' || unreadable="$unreadable $f"; done
[ -z "$unreadable" ] && [ "${#FILES[@]}" -gt 0 ] && ok "every profile is read by go tool pprof" || bad "every profile is read by go tool pprof" "$unreadable"
if [ "${#FILES[@]}" -eq 0 ]; then
    bad "no profile was written"
    clr_done
fi
types=$(pprof -raw "${FILES[0]}" | sed -n '/^Samples:/{n;p;q}')
want="cpu/nanoseconds[dflt] wall/nanoseconds exception/count alloc-samples/count alloc-size/bytes lock-count/count lock-time/nanoseconds"
[ "$(echo $types)" = "$want" ] && ok "the 7 sample types, cpu by default" || bad "the 7 sample types, cpu by default" "$types"

t=$(top cpu)
# SpinHot spins on its own thread; the contenders spin too, so SpinHot need not be first
# (its share of the process's CPU is the scheduler's: three spinning threads share 2 vCPUs,
# and the machine may be busy; its own thread's CPU is checked below)
names "$t" Shapes.Cpu.SpinHot && awk '/Shapes.Cpu.SpinHot$/ {sub(/%/, "", $2); exit !($2 + 0 >= 10)}' <<<"$t" \
    && ok "cpu names Shapes.Cpu.SpinHot (>= 10% flat)" || bad "cpu names Shapes.Cpu.SpinHot (>= 10% flat)" "$t"
t=$(top wall)
names "$t" Shapes.Idle.SleepLong System.Threading.Thread.Sleep && ok "wall names Shapes.Idle.SleepLong (in Thread.Sleep)" \
    || bad "wall names Shapes.Idle.SleepLong (in Thread.Sleep)" "$t"
SHAPES="Shapes.Cpu.SpinHot Shapes.Idle.SleepLong Shapes.Thrower.ThrowLoop Shapes.Alloc.AllocLoop Shapes.Contend.LockLoop"
names "$t" $SHAPES && ok "signal sampler: wall names every shape's method (spin, sleep, throw, allocate, contend)" \
    || bad "signal sampler: wall names every shape's method (spin, sleep, throw, allocate, contend)" "$t"
names "$t" 'Shapes.Outer<System.Int32>+Inner.Wait' && ok "wall names a method of a type nested in a generic one (Shapes.Outer<System.Int32>+Inner.Wait)" \
    || bad "wall names a method of a type nested in a generic one (Shapes.Outer<System.Int32>+Inner.Wait)" "$t"
# frame names are read from the modules' metadata tables as the runtime mapped them (CoreLib,
# shapes.dll, System.Console...), not through GetModuleMetaData (common/mdtables.h)
read -r md_tables md_importer < <(sed -n 's/.*shut down;.*names of \([0-9]*\) modules read from their metadata tables, \([0-9]*\) through the metadata importer.*/\1 \2/p' "$WORK/shapes.log")
if [ "${md_tables:-0}" -ge 2 ] && [ "${md_importer:-1}" -eq 0 ]; then
    ok "names read from the metadata tables of $md_tables modules, none through the metadata importer"
else
    bad "names read from the metadata tables (>= 2 modules), none through the metadata importer" "$(grep 'shut down' "$WORK/shapes.log")"
fi
grep -q "signal (SIGPROF, no pause) sampler every 10 ms" "$WORK/shapes.log" && ok "the signal sampler is the default" \
    || bad "the signal sampler is the default" "$(grep profiler "$WORK/shapes.log")"
# SpinHot's hot loop has no call and no GC poll: the signal lands in it, so nearly all of
# the cpu-hot thread's CPU is SpinHot's own (flat), not a poll site's or a caller's
t=$(pprof -top -unit=ms -nodecount=1000 -sample_index=cpu -tagfocus=cpu-hot "${FILES[@]}")
awk '/^ *[0-9.]+ms / {v = $1; sub(/ms/, "", v); all += v; if ($NF == "Shapes.Cpu.SpinHot") spin = v}
     END {exit !(all > 0 && spin / all >= 0.9)}' <<<"$t" \
    && ok "the cpu-hot thread's CPU is Shapes.Cpu.SpinHot's own (>= 90% flat: no poll-site bias)" \
    || bad "the cpu-hot thread's CPU is Shapes.Cpu.SpinHot's own (>= 90% flat: no poll-site bias)" "$t"
t=$(top exception)
names "$t" Shapes.ShapeException Shapes.Thrower.ThrowLoop && ok "exception names Shapes.ShapeException thrown by Shapes.Thrower.ThrowLoop" \
    || bad "exception names Shapes.ShapeException thrown by Shapes.Thrower.ThrowLoop" "$t"
t=$(top alloc-size)
names "$t" Shapes.Blob Shapes.Alloc.AllocLoop && ok "alloc-size names Shapes.Blob allocated by Shapes.Alloc.AllocLoop" \
    || bad "alloc-size names Shapes.Blob allocated by Shapes.Alloc.AllocLoop" "$t"
t=$(top alloc-samples)
names "$t" Shapes.Alloc.AllocLoop && ok "alloc-samples names Shapes.Alloc.AllocLoop" || bad "alloc-samples names Shapes.Alloc.AllocLoop" "$t"
t=$(top lock-time)
if [ "$CLR_RT" -ge 10 ]; then
    names "$t" Shapes.Contend.LockLoop System.Threading.Monitor.Enter && ok "lock-time names Shapes.Contend.LockLoop (in Monitor.Enter)" \
        || bad "lock-time names Shapes.Contend.LockLoop (in Monitor.Enter)" "$t"
else
    # before .NET 10 Monitor.Enter is a runtime helper with no managed frame: the contending
    # method itself is the leaf
    awk '/ Shapes.Contend.LockLoop$/ {sub(/%/, "", $2); f = $2 + 0} END {exit !(f >= 90)}' <<<"$t" \
        && ok "lock-time names Shapes.Contend.LockLoop as the leaf (Monitor.Enter has no managed frame before .NET 10)" \
        || bad "lock-time names Shapes.Contend.LockLoop as the leaf (Monitor.Enter has no managed frame before .NET 10)" "$t"
fi
t=$(top lock-count)
names "$t" Shapes.Contend.LockLoop && ok "lock-count names Shapes.Contend.LockLoop" || bad "lock-count names Shapes.Contend.LockLoop" "$t"
tags=$(pprof -tags -sample_index=cpu "${FILES[@]}")
grep -q 'cpu-hot' <<<"$tags" && grep -q 'thread id' <<<"$tags" && ok "samples carry thread id and thread name labels (cpu-hot)" \
    || bad "samples carry thread id and thread name labels (cpu-hot)" "$tags"

# CPU: the profile's total against the process's own CPU time (Process.TotalProcessorTime at
# the end of Main). The profile covers the managed threads from Initialize to Shutdown; the
# process also spends CPU in native runtime threads (GC, JIT background work, EventPipe)
# and in the profiler's own sampler thread.
proc_ms=$(sed -n 's/^process-cpu-ms //p' "$WORK/shapes.err")
prof_ns=$(sum_index 1)
if [ -n "$proc_ms" ] && [ -n "$prof_ns" ]; then
    ratio=$(awk -v a="$prof_ns" -v b="$proc_ms" 'BEGIN {printf "%.3f", a / 1e6 / b}')
    msg="cpu profile total $(awk -v a="$prof_ns" 'BEGIN {printf "%.0f", a / 1e6}') ms vs process CPU $proc_ms ms (ratio $ratio)"
    awk -v r="$ratio" 'BEGIN {exit !(r >= 0.8 && r <= 1.2)}' && ok "$msg, within 20%" || bad "$msg, not within 20%"
else
    bad "cpu profile total vs process CPU: numbers missing" "$(cat "$WORK/shapes.err")"
fi
grep -q "profiler 'profiler': shut down; .* files written (0 failed)" "$WORK/shapes.log" \
    && ok "shutdown summary logged: $(grep -o 'signal sampler delivered [^;]*' "$WORK/shapes.log" | tail -1)" \
    || bad "shutdown summary logged" "$(grep profiler "$WORK/shapes.log")"
# Shutdown does not join the sampler thread (it ends at its next wake-up): the summary's
# sampler CPU is read from the live thread's CPU clock, and is not 0 after a run with ticks
scpu=$(grep -o "shut down;.*sampler thread CPU [0-9.]* ms" "$WORK/shapes.log" | sed 's/.*sampler thread CPU \([0-9.]*\) ms/\1/')
if [ -n "$scpu" ] && awk -v c="$scpu" 'BEGIN {exit !(c > 0)}'; then
    ok "shutdown summary gives the sampler thread's CPU ($scpu ms) without joining it"
else
    bad "shutdown summary gives the sampler thread's CPU" "$(grep 'shut down' "$WORK/shapes.log")"
fi
# truncated walks are counted, and few: JIT'd code and libcoreclr keep frame pointers, the
# scan gets past libc's system call wrappers; what remains is mostly the host's outermost frames
read -r walks trunc < <(sed -n 's/.*shut down;.*delivered \([0-9]*\) cpu samples.*; \([0-9]*\) by signal, .*); \([0-9]*\) truncated walks.*/\1 \2 \3/p' "$WORK/shapes.log" \
    | awk '{print $1 + $2, $3}')
if [ -n "${walks:-}" ] && [ "$walks" -gt 0 ] && [ $((trunc * 10)) -lt "$walks" ]; then
    ok "truncated walks counted and under 10% ($trunc of $walks)"
else
    bad "truncated walks counted and under 10% (${trunc:-?} of ${walks:-?})" "$(grep 'shut down' "$WORK/shapes.log")"
fi

# ---- the suspend sampler names the same methods ---------------------------------------------
sed 's/^period_s = 2$/period_s = 60\nsampler = suspend/; s/^output_dir = profiles$/output_dir = suspend/' "$WORK/loader.conf" >"$WORK/suspend.conf"
run_shapes suspend "$ROOT/build/libclrmux.so" "$WORK/suspend.conf"
SIGFILES=("${FILES[@]}")
mapfile -t FILES < <(ls "$WORK"/suspend/*.pb.gz 2>/dev/null)
t=$(top wall)
if [ "$(cat "$WORK/suspend.rc")" = 0 ] && grep -q "suspend (SuspendRuntime) sampler every 10 ms" "$WORK/suspend.log" \
    && names "$t" $SHAPES && names "$(top cpu)" Shapes.Cpu.SpinHot; then
    ok "sampler = suspend: the same methods in wall, SpinHot in cpu"
else
    bad "sampler = suspend: the same methods in wall, SpinHot in cpu" "$(grep profiler "$WORK/suspend.log"; echo "$t")"
fi
FILES=("${SIGFILES[@]}")

# ---- automatic fallback: timer_create fails (an LD_PRELOAD shim) ----------------------------
if command -v gcc >/dev/null 2>&1; then
    printf '#include <errno.h>\n#include <signal.h>\n#include <time.h>\nint timer_create(clockid_t c, struct sigevent *e, timer_t *t) { (void)c; (void)e; (void)t; errno = EPERM; return -1; }\n' >"$WORK/notimer.c"
    gcc -shared -fPIC -o "$WORK/libnotimer.so" "$WORK/notimer.c"
    sed 's/^output_dir = profiles$/output_dir = fallback/; s/^period_s = 2$/period_s = 60/' "$WORK/loader.conf" >"$WORK/fallback.conf"
    LD_PRELOAD="$WORK/libnotimer.so" run_shapes fallback "$ROOT/build/libclrmux.so" "$WORK/fallback.conf"
    SIGFILES=("${FILES[@]}")
    mapfile -t FILES < <(ls "$WORK"/fallback/*.pb.gz 2>/dev/null)
    if [ "$(cat "$WORK/fallback.rc")" = 0 ] \
        && grep -q "the signal sampler cannot run here (timer_create(thread CPU clock, SIGEV_THREAD_ID): Operation not permitted); using the suspend sampler" "$WORK/fallback.log" \
        && names "$(top cpu)" Shapes.Cpu.SpinHot; then
        ok "timer_create fails: one WARN line says why, the suspend sampler takes over (cpu names SpinHot)"
    else
        bad "timer_create fails: one WARN line says why, the suspend sampler takes over" "$(grep profiler "$WORK/fallback.log")"
    fi
    FILES=("${SIGFILES[@]}")

    # the application replaces the SIGPROF handler 1.5 s in (a shim's thread): the sampler
    # notices at its next tick, stops its timers, says so, and the suspend sampler takes over
    cat >"$WORK/takeover.c" <<'CEOF'
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile int hits;
static void on_prof(int sig) { (void)sig; hits++; }
static void *later(void *arg) { (void)arg; usleep(1500 * 1000); signal(SIGPROF, on_prof); return NULL; }
__attribute__((constructor)) static void start(void) { pthread_t t; pthread_create(&t, NULL, later, NULL); pthread_detach(t); }
__attribute__((destructor)) static void report(void) { fprintf(stderr, "foreign-sigprof %d\n", hits); }
CEOF
    gcc -shared -fPIC -pthread -o "$WORK/libtakeover.so" "$WORK/takeover.c"
    sed 's/^output_dir = profiles$/output_dir = takeover/; s/^period_s = 2$/period_s = 60/' "$WORK/loader.conf" >"$WORK/takeover.conf"
    LD_PRELOAD="$WORK/libtakeover.so" run_shapes takeover "$ROOT/build/libclrmux.so" "$WORK/takeover.conf"
    mapfile -t FILES < <(ls "$WORK"/takeover/*.pb.gz 2>/dev/null)
    hits=$(sed -n 's/^foreign-sigprof //p' "$WORK/takeover.err")
    if [ "$(cat "$WORK/takeover.rc")" = 0 ] && grep -q '^shapes done$' "$WORK/takeover.out" \
        && grep -q "the SIGPROF handler was replaced by another one (.*); switching to the suspend sampler" "$WORK/takeover.log" \
        && grep -q "shut down;.* [1-9][0-9]* ticks (interval avg" "$WORK/takeover.log" \
        && names "$(top cpu)" Shapes.Cpu.SpinHot && [ -n "$hits" ] && [ "$hits" -lt 50 ]; then
        ok "the app replaces the SIGPROF handler: the signal sampler stops ($hits of our signals reached it), the suspend sampler takes over"
    else
        bad "the app replaces the SIGPROF handler: the signal sampler stops, the suspend sampler takes over" \
            "$(grep profiler "$WORK/takeover.log"; cat "$WORK/takeover.err")"
    fi
    FILES=("${SIGFILES[@]}")
fi

# ---- on the app's main thread, the profiler installs no handler and creates no timer ----------
# (its last gasp's thread and handlers and the signal sampler's start and self-test are the
# sampler thread's first steps): a shim counts clrmux's sigaction, timer_create and
# pthread_create calls made on the main thread; the last gasp is still ready, soon after
if command -v gcc >/dev/null 2>&1; then
    cat >"$WORK/mainthread.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static int n_sig, n_timer, n_thread;
static int from_clrmux(const void *ret)
{
    Dl_info di;
    return dladdr(ret, &di) && di.dli_fname && strstr(di.dli_fname, "libclrmux");
}
static int on_main(void) { return syscall(SYS_gettid) == getpid(); }
int sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
    static int (*real)(int, const struct sigaction *, struct sigaction *);
    if (!real)
        real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
    if (sa && on_main() && from_clrmux(__builtin_return_address(0)))
        __atomic_add_fetch(&n_sig, 1, __ATOMIC_RELAXED);
    return real(sig, sa, old);
}
int timer_create(clockid_t c, struct sigevent *e, timer_t *t)
{
    static int (*real)(clockid_t, struct sigevent *, timer_t *);
    if (!real)
        real = (int (*)(clockid_t, struct sigevent *, timer_t *))dlsym(RTLD_NEXT, "timer_create");
    if (on_main() && from_clrmux(__builtin_return_address(0)))
        __atomic_add_fetch(&n_timer, 1, __ATOMIC_RELAXED);
    return real(c, e, t);
}
/* DELAY_PROFILER_THREAD_MS: the profiler's sampler thread starts that late (after a short
 * process's Shutdown) */
static void *(*g_fn)(void *);
static void *delayed(void *arg)
{
    usleep((useconds_t)atoi(getenv("DELAY_PROFILER_THREAD_MS")) * 1000);
    return g_fn(arg);
}
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
    if (on_main() && from_clrmux(__builtin_return_address(0))) {
        __atomic_add_fetch(&n_thread, 1, __ATOMIC_RELAXED);
        Dl_info di;
        if (getenv("DELAY_PROFILER_THREAD_MS") && !g_fn && dladdr((void *)fn, &di) && di.dli_fname &&
            strstr(di.dli_fname, "libclrmux_profiler")) {
            g_fn = fn;
            return real(t, a, delayed, arg);
        }
    }
    return real(t, a, fn, arg);
}
__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "clrmux on the main thread: %d sigaction %d timer_create %d pthread_create\n", n_sig, n_timer, n_thread);
}
CEOF
    gcc -shared -fPIC -pthread -o "$WORK/libmainthread.so" "$WORK/mainthread.c" -ldl
    printf '[loader]\nlog_level = info\n[child profiler]\nbuiltin = profiler\noutput_dir = mainthread\n' >"$WORK/mainthread.conf"
    (cd "$WORK" && env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
        CLRMUX_CONFIG="$WORK/mainthread.conf" CLRMUX_LOG_FILE="$WORK/mainthread.log" LD_PRELOAD="$WORK/libmainthread.so" \
        "${DOTNET[@]}" "$ROOT/build/clr/hello/hello.dll" >"$WORK/mainthread.out" 2>"$WORK/mainthread.err")
    counts=$(sed -n 's/^clrmux on the main thread: //p' "$WORK/mainthread.err")
    ready=$(sed -n 's/.*; its ending handlers ready \([0-9]*\) us after Initialize.*/\1/p' "$WORK/mainthread.log")
    if grep -q "^0 sigaction 0 timer_create " <<<"$counts" && [ -n "$ready" ] \
        && grep -q "signal (SIGPROF, no pause) sampler" "$WORK/mainthread.log" && ls "$WORK"/mainthread/*.pb.gz >/dev/null 2>&1; then
        ok "on the app's main thread: $counts from clrmux; the signal sampler runs and its last-gasp handlers were ready $ready us after Initialize"
    else
        bad "on the app's main thread: no sigaction, no timer_create from clrmux" "$counts; $(grep profiler "$WORK/mainthread.log")"
    fi
    # the sampler thread starts after Shutdown (held 3 s by the shim): Shutdown makes the
    # profile's tables itself and writes the profile (the exceptions and the wall time of
    # the app's threads are not sampled then, the file is still readable)
    sed 's/^output_dir = mainthread$/output_dir = late/' "$WORK/mainthread.conf" >"$WORK/late.conf"
    (cd "$WORK" && env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
        CLRMUX_CONFIG="$WORK/late.conf" CLRMUX_LOG_FILE="$WORK/late.log" LD_PRELOAD="$WORK/libmainthread.so" \
        DELAY_PROFILER_THREAD_MS=3000 "${DOTNET[@]}" "$ROOT/build/clr/hello/hello.dll" >"$WORK/late.out" 2>"$WORK/late.err"; echo $? >"$WORK/late.rc")
    late=$(ls "$WORK"/late/*.pb.gz 2>/dev/null | head -1)
    if [ "$(cat "$WORK/late.rc")" = 0 ] && [ -n "$late" ] && pprof -raw "$late" | grep -q "last period (shutdown)" \
        && grep -q "profiler 'profiler': shut down; 1 files written" "$WORK/late.log" && ! grep -q "started for" "$WORK/late.log"; then
        ok "a sampler thread that starts after Shutdown: Shutdown writes a readable profile, the thread then does nothing"
    else
        bad "a sampler thread that starts after Shutdown: Shutdown writes the profile" "rc $(cat "$WORK/late.rc"); $(grep -E 'profiler|WARN|ERROR' "$WORK/late.log")"
    fi
fi

# ---- the rate asked is the rate delivered: 3 busy threads, then 200 threads -----------------
# cpubound SECONDS WORKERS BLOCKED; the shutdown line reports the delivered rates
printf '[child profiler]\nbuiltin = profiler\noutput_dir = rate\nsampling_interval_ms = 10\nexceptions = false\nallocations = false\ncontention = false\n' >"$WORK/rate.conf"
for shape in "3 0" "2 198"; do
    set -- $shape
    tag="rate-$1-$2"
    env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
        CLRMUX_CONFIG="$WORK/rate.conf" CLRMUX_LOG_FILE="$WORK/$tag.log" \
        "${DOTNET[@]}" build/clr/cpubound/cpubound.dll 2 "$1" "$2" >"$WORK/$tag.out" 2>&1
    line=$(grep 'shut down' "$WORK/$tag.log")
    read -r tick_rate cpu_rate wall wall_rate sig reused threads < <(sed -n 's/.*signal sampler ([0-9]* ticks, \([0-9.]*\) per second).*(\([0-9.]*\) per CPU-second of a thread.* \([0-9]*\) wall samples (\([0-9.]*\) per second per thread; \([0-9]*\) by signal, \([0-9]*\) on unchanged.* \([0-9]*\) threads;.*/\1 \2 \3 \4 \5 \6 \7/p' <<<"$line")
    msg="$(($1 + $2)) threads ($1 busy): ${cpu_rate:-?} cpu samples per CPU-second, ${wall_rate:-?} wall samples/s per thread at ${tick_rate:-?} sampler ticks/s (${sig:-?} signals, ${reused:-?} on unchanged stacks), ${threads:-?} threads sampled"
    # CPU samples come from per-thread CPU timers: ~100 per CPU-second whatever the load. Wall
    # samples come from the sampler thread's ticks: each tick must reach every thread (the
    # tick rate itself is 100/s on an idle machine, lower when other processes starve it)
    if [ -n "${cpu_rate:-}" ] && awk -v c="$cpu_rate" -v w="$wall_rate" -v k="$tick_rate" -v t="$threads" -v n="$(($1 + $2))" \
        'BEGIN {exit !(c >= 85 && c <= 115 && w >= 0.9 * k && k >= 30 && t >= n)}'; then
        ok "$msg"
    else
        bad "$msg (want 85-115 per CPU-second, wall >= 0.9 x ticks/s)" "$line"
    fi
    if [ "$2" -gt 0 ]; then
        [ -n "${sig:-}" ] && [ $((sig * 10)) -lt "$wall" ] \
            && ok "blocked threads cost no signals: $sig signals for $wall wall samples" \
            || bad "blocked threads cost no signals (signals < 10% of wall samples)" "$line"
    fi
done

# ---- OSR: a hot loop replaced while it runs keeps its callers --------------------------------
# osrloop's OsrLoop.Hot.SpinUntil is called once and loops: the runtime moves it from Tier0 to
# its OSR version in the middle of the call. The OSR frame's record links past the Tier0
# frame's record (src/profiler/prof.h): a walk that only follows the chain loses
# OsrLoop.Outer.CallerOfTheHotLoop on every sample of SpinUntil (and Leaf, which it calls).
# Nearly all of SpinUntil's cpu (cum) must carry the caller; with the walk before the fix the
# caller had 0% (3 runs on .NET 8, 9, 10). OSR_TEST_PROFILER overrides the companion (to run
# this check on another build).
mkdir -p "$WORK/osr"
cp build/libclrmux.so "$WORK/osr/"
cp "${OSR_TEST_PROFILER:-build/libclrmux_profiler.so}" "$WORK/osr/libclrmux_profiler.so"
printf '[child profiler]\nbuiltin = profiler\noutput_dir = osrprof\nwall = false\nexceptions = false\nallocations = false\ncontention = false\n' >"$WORK/osr.conf"
env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$WORK/osr/libclrmux.so" \
    CLRMUX_CONFIG="$WORK/osr.conf" CLRMUX_LOG_FILE="$WORK/osr.log" \
    "${DOTNET[@]}" build/clr/osrloop/osrloop.dll 1500 >"$WORK/osr.out" 2>&1
mapfile -t FILES < <(ls "$WORK"/osrprof/*.pb.gz 2>/dev/null)
t=$(top cpu)
read -r spin caller < <(awk '$NF == "OsrLoop.Hot.SpinUntil" || $NF == "OsrLoop.Outer.CallerOfTheHotLoop" {
        v = $4; if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}
        if ($NF == "OsrLoop.Hot.SpinUntil") s = v; else c = v}
        END {printf "%d %d\n", s, c}' <<<"$t")
msg="an OSR'd hot loop keeps its caller: OsrLoop.Outer.CallerOfTheHotLoop ${caller:-?} ms cum of OsrLoop.Hot.SpinUntil's ${spin:-?} ms"
if grep -q '^osrloop done$' "$WORK/osr.out" && [ "${#FILES[@]}" -ge 1 ] && [ "${spin:-0}" -ge 100 ] && [ $((caller * 100)) -ge $((spin * 90)) ]; then
    ok "$msg (>= 90%)"
else
    bad "$msg (want >= 90%, SpinUntil >= 100 ms)" "$(cat "$WORK/osr.out"; grep 'shut down' "$WORK/osr.log"; echo "$t")"
fi

# The sampler starts in Initialize, before the runtime can be suspended: no start-up noise
# ("SuspendRuntime failed with HRESULT CORPROF_E_RUNTIME_UNINITIALIZED" on every run).
if ! grep -q "SuspendRuntime failed" "$WORK/shapes.log" && ! grep -Eq ", [1-9][0-9]* suspend failures" "$WORK/shapes.log"; then
    ok "no SuspendRuntime failure while the runtime starts (sampling begins once it can work)"
else
    bad "no SuspendRuntime failure while the runtime starts" "$(grep -E 'SuspendRuntime|suspend failures' "$WORK/shapes.log")"
fi

# ---- a missing companion library: one log line, the child is skipped, the app runs on -------
mkdir -p "$WORK/lonely"
cp build/libclrmux.so "$WORK/lonely/"
run_shapes lonely "$WORK/lonely/libclrmux.so" "$WORK/loader.conf"
if [ "$(cat "$WORK/lonely.rc")" = 0 ] && grep -q '^shapes done$' "$WORK/lonely.out" \
    && grep -q "child 'profiler': builtin 'profiler' needs .*libclrmux_profiler.so, which cannot be loaded" "$WORK/lonely.log"; then
    ok "without libclrmux_profiler.so: one clear log line, the app runs unprofiled"
else
    bad "without libclrmux_profiler.so: one clear log line, the app runs unprofiled" "$(cat "$WORK/lonely.log" "$WORK/lonely.err")"
fi

# ---- profile types switched off: no EventPipe session, no exception callbacks ---------------
cat >"$WORK/cpuonly.conf" <<EOF
[child profiler]
builtin = profiler
output_dir = cpuonly
wall = false
exceptions = false
allocations = false
contention = false
EOF
run_shapes cpuonly "$ROOT/build/libclrmux.so" "$WORK/cpuonly.conf"
mapfile -t FILES < <(ls "$WORK"/cpuonly/*.pb.gz 2>/dev/null)
if [ "$(cat "$WORK/cpuonly.rc")" = 0 ] && [ "${#FILES[@]}" -ge 1 ] && grep -q "low=0x10000200 high=0x00000000" "$WORK/cpuonly.log" \
    && ! grep -q "EventPipe session started" "$WORK/cpuonly.log" && [ "$(sum_index 2)" = 0 ] && [ "$(sum_index 3)" = 0 ] \
    && [ "$(sum_index 1)" -gt 0 ]; then
    ok "cpu only: threads + stack snapshots in the mask, no EventPipe session, only cpu values"
else
    bad "cpu only: threads + stack snapshots in the mask, no EventPipe session, only cpu values" "$(cat "$WORK/cpuonly.log")"
fi

# ---- the EventPipe session starts eventpipe_delay_ms after Initialize (default 1000) -----------
# shapes (default): the session started from the sampler thread, at least 1 s in, and the sampler
# thread that ran the runtime's managed EventSource side is not among the sampled threads (its
# frames would be truncated walks: checked above); a hello world with a 60 s delay ends without
# a session, at once; with 0 the session starts in Initialize.
n=$(sed -n "s/.*profiler 'profiler': EventPipe session started \([0-9]*\) ms after Initialize (eventpipe_delay_ms = 1000;.*/\1/p" "$WORK/shapes.log" | head -1)
if [ -n "$n" ] && [ "$n" -ge 1000 ]; then
    ok "the EventPipe session starts after eventpipe_delay_ms (default 1000): $n ms after Initialize"
else
    bad "the EventPipe session starts after eventpipe_delay_ms (default 1000)" "$(grep -i eventpipe "$WORK/shapes.log")"
fi
for d in 60000 0; do
    printf '[loader]\nlog_level = info\n[child profiler]\nbuiltin = profiler\noutput_dir = ep%s\neventpipe_delay_ms = %s\n' "$d" "$d" >"$WORK/ep$d.conf"
    out=$(env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
          CLRMUX_CONFIG="$WORK/ep$d.conf" CLRMUX_LOG_FILE="$WORK/ep$d.log" timeout 60 "${DOTNET[@]}" build/clr/hello/hello.dll 2>&1)
    started=$(grep -c "EventPipe session started" "$WORK/ep$d.log" || true)
    if [ "$d" = 60000 ] && [ "$out" = hello ] && [ "$started" = 0 ] && grep -q "shut down" "$WORK/ep$d.log"; then
        ok "eventpipe_delay_ms = 60000: a hello world ends before the session, which never starts"
    elif [ "$d" = 0 ] && [ "$out" = hello ] && grep -q "EventPipe session started [0-9]* ms after Initialize (eventpipe_delay_ms = 0;" "$WORK/ep$d.log"; then
        ok "eventpipe_delay_ms = 0: the session starts in Initialize"
    else
        bad "eventpipe_delay_ms = $d: hello world, session started $started times" "$out"$'\n'"$(cat "$WORK/ep$d.log")"
    fi
done

# ---- output_dir: made with its missing parents, used as it is when it exists, refused when a file
# is there (one ERROR line; the app runs on)
: >"$WORK/afile"
for d in "$WORK/od/a/b" "$WORK/od/a/b" "$WORK/afile"; do
    printf '[loader]\nlog_level = info\n[child profiler]\nbuiltin = profiler\noutput_dir = %s\n' "$d" >"$WORK/od.conf"
    before=$(ls "$d"/*.pb.gz 2>/dev/null | wc -l)
    out=$(env CORECLR_ENABLE_PROFILING=1 CORECLR_PROFILER="$CLSID" CORECLR_PROFILER_PATH="$ROOT/build/libclrmux.so" \
          CLRMUX_CONFIG="$WORK/od.conf" CLRMUX_LOG_FILE="$WORK/od.log" timeout 60 "${DOTNET[@]}" build/clr/hello/hello.dll 2>&1)
    after=$(ls "$d"/*.pb.gz 2>/dev/null | wc -l)
    if [ "$d" != "$WORK/afile" ] && [ "$out" = hello ] && [ "$after" = $((before + 1)) ]; then
        ok "output_dir ${d#"$WORK"/} ($([ "$before" = 0 ] && echo "made with its parents" || echo "already there")): one more profile"
    elif [ "$d" = "$WORK/afile" ] && [ "$out" = hello ] && grep -q "cannot create output_dir $d: Not a directory; profiles are collected but not written" "$WORK/od.log"; then
        ok "output_dir names a file: one ERROR line, the app runs on"
    else
        bad "output_dir ${d#"$WORK"/}: hello world, $before -> $after profiles" "$out"$'\n'"$(cat "$WORK/od.log")"
    fi
done

clr_done
