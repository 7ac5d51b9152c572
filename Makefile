# clrmux build. `make` builds build/libclrmux.so, its companion, the `clrmux` launcher and the
# fake child profilers, `make test` runs the unit tests under ASan/UBSan and the real-runtime
# tests, `make demo` runs a .NET app under clrmux with loader.conf.example and writes a report,
# `make install PREFIX=/opt/clrmux` installs, `make dist` builds the tarball, .deb and .nupkg.
# Each first runs scripts/setup.sh, which installs the Debian packages that are missing
# (NO_SETUP=1 skips it).
VERSION := 0.1.0
CC      ?= gcc
BUILD   ?= build
WARN    := -Wall -Wextra -Werror
CSTD    := -std=c11 -D_GNU_SOURCE
CFLAGS_COMMON := $(CSTD) $(WARN) -Iinclude -Isrc -I$(BUILD)/gen -g -fPIC -pthread
CFLAGS  ?= -O2
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

# libclrmux.so: the loader and the built-in tracer. The built-in profiler is a companion
# library (below); every src file is also compiled with ASan/UBSan for the unit tests.
# src/tracer/pb: the OTLP protobuf encoder, a companion library (below), not in libclrmux.so
LIB_SRCS  := $(shell find src/common src/loader src/control src/tracer src/entry -path src/tracer/pb -prune -o -name '*.c' -print | sort)
# assembly (the fast-path enter/leave stubs), in libclrmux.so and in the unit tests
ASM_SRCS  := $(shell find src/loader -name '*.S' | sort)
ALL_SRCS  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
GEN       := $(BUILD)/gen/profile.pb-c.c
# OTLP .proto files (vendored from open-telemetry/opentelemetry-proto, src/tracer/proto) ->
# protobuf-c code. protoc-c 1.4 does not know proto3 `optional` (metrics.proto's
# HistogramDataPoint sum/min/max): the build copy drops the keyword, which keeps the wire
# format (the field is written when set; clrmux always sets sum).
OTLP_PROTOS := common/v1/common resource/v1/resource trace/v1/trace metrics/v1/metrics \
               collector/trace/v1/trace_service collector/metrics/v1/metrics_service
OTLP_GEN_C  := $(OTLP_PROTOS:%=$(BUILD)/gen/opentelemetry/proto/%.pb-c.c)
OTLP_GEN_H  := $(OTLP_PROTOS:%=$(BUILD)/gen/opentelemetry/proto/%.pb-c.h)
HDRS      := $(shell find include src -name '*.h') $(BUILD)/gen/profile.pb-c.h $(OTLP_GEN_H)
OBJS      := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(ASM_SRCS:%.S=$(BUILD)/obj/%.o)
ASAN_OBJS := $(ALL_SRCS:%.c=$(BUILD)/asan/%.o) $(ASM_SRCS:%.S=$(BUILD)/asan/%.o) $(BUILD)/asan/gen/profile.pb-c.o \
             $(OTLP_GEN_C:$(BUILD)/gen/%.c=$(BUILD)/asan/gen/%.o)
FAKES     := $(patsubst fake_profilers/%.c,$(BUILD)/fake/lib%.so,$(wildcard fake_profilers/*.c))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/unit/%)
# Libraries linked statically into libclrmux.so so that ldd shows only libc's parts.
STATIC_LIBS := -Wl,-Bstatic -linih $(EXTRA_STATIC_LIBS) -Wl,-Bdynamic
LIBS      := -ldl -lpthread -lm

.PHONY: arm64 arm64-parts windows cross-test attach-tool all test unit abi-check clr-test demo bench clean fuzz fuzz-build fuzz-quick tsan setup install dist
all: $(BUILD)/libclrmux.so $(BUILD)/clrmux $(FAKES)

# What scripts/setup.sh installs depends on the goal: the build's packages, or the test's,
# demo's or dist's (a superset).
SETUP_PROFILE := build
ifneq ($(filter dist install-test,$(MAKECMDGOALS)),)
SETUP_PROFILE := dist
endif
ifneq ($(filter bench,$(MAKECMDGOALS)),)
SETUP_PROFILE := bench
endif
ifneq ($(filter demo,$(MAKECMDGOALS)),)
SETUP_PROFILE := demo
endif
ifneq ($(filter test unit tsan fuzz fuzz-build fuzz-quick,$(MAKECMDGOALS)),)
SETUP_PROFILE := test
endif
setup:
ifneq ($(NO_SETUP),1)
	@scripts/setup.sh $(SETUP_PROFILE)
endif

# -fno-omit-frame-pointer: every function of libclrmux.so keeps a frame record, so that a
# frame-pointer walk (the built-in profiler's signal sampler, perf, a vendor's sampler) that
# interrupts the tracer's probes (called by JIT-compiled code through calli, with no
# transition frame under SuppressGCTransition), the enter/leave dispatch or any callback
# goes on into the managed frames that called them (issue 24 item 3).
$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS) -fno-omit-frame-pointer -fvisibility=hidden -c $< -o $@

# (two rules: a pattern rule with two targets would make both from one run of its recipe)
$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@
$(BUILD)/asan/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

$(BUILD)/asan/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -DCLRMUX_TESTING -c $< -o $@

$(BUILD)/libclrmux.so: $(OBJS)
	$(CC) -shared -o $@ $(OBJS) $(STATIC_LIBS) $(LIBS) -Wl,--no-undefined -Wl,-z,defs -Wl,--exclude-libs,ALL

# pprof's profile.proto -> protobuf-c code, generated at build time (not committed)
$(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h &: src/profiler/profile.proto | setup
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen --proto_path=src/profiler src/profiler/profile.proto

$(BUILD)/asan/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -I$(BUILD)/gen -g -fPIC -O1 $(SAN) -c $< -o $@

$(OTLP_GEN_C) $(OTLP_GEN_H) &: $(OTLP_PROTOS:%=src/tracer/proto/opentelemetry/proto/%.proto)
	@rm -rf $(BUILD)/gen/otlp-src && mkdir -p $(BUILD)/gen/otlp-src
	cp -r src/tracer/proto/opentelemetry $(BUILD)/gen/otlp-src/
	sed -i 's/^\([[:space:]]*\)optional /\1/' $(BUILD)/gen/otlp-src/opentelemetry/proto/metrics/v1/metrics.proto
	cd $(BUILD)/gen/otlp-src && protoc-c --c_out=.. $(OTLP_PROTOS:%=opentelemetry/proto/%.proto)

$(BUILD)/asan/gen/opentelemetry/%.o: $(BUILD)/gen/opentelemetry/%.c $(OTLP_GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -I$(BUILD)/gen -g -fPIC -O1 $(SAN) -c $< -o $@

# libclrmux_otlp.so: OTLP/HTTP protobuf bodies (protocol = http/protobuf), a companion library
# that the tracer dlopens from its own folder only then (it links libprotobuf-c).
OTLP_OBJS := $(BUILD)/pobj/src/tracer/pb/otlp_pb.o $(BUILD)/pobj/src/tracer/pb/otlp_mspan.o $(BUILD)/pobj/src/tracer/pb/otlp_xpb.o $(BUILD)/pobj/src/tracer/xspan.o $(OTLP_GEN_C:$(BUILD)/gen/%.c=$(BUILD)/pobj/gen/%.o)
all: $(BUILD)/libclrmux_otlp.so

$(BUILD)/pobj/gen/opentelemetry/%.o: $(BUILD)/gen/opentelemetry/%.c $(OTLP_GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -I$(BUILD)/gen -g -fPIC $(CFLAGS) -fvisibility=hidden -c $< -o $@

$(BUILD)/libclrmux_otlp.so: $(OTLP_OBJS)
	$(CC) -shared -o $@ $(OTLP_OBJS) -lprotobuf-c $(LIBS) -Wl,--no-undefined -Wl,-z,defs

# libclrmux_profiler.so: the built-in profiler (`builtin = profiler`), a companion library that
# libclrmux.so dlopens from its own folder, which keeps libclrmux.so free of protobuf-c and
# zlib. Both are linked into it statically, their symbols hidden (--exclude-libs: Debian's .a
# are position-independent executable code, which links into a shared object only with its
# symbols local): it needs only libc, and its load is one dlopen, not three (measured, a hello
# world: ~15 fewer page faults, 3.5-5 ms less CPU under load).
PROF_SRCS := $(shell find src/profiler -name '*.c' | sort) src/common/utf16.c src/common/platform_posix.c \
             src/common/hresult.c src/common/mdtables.c src/common/log_forward.c src/tracer/otlp_http.c
PROF_OBJS := $(PROF_SRCS:%.c=$(BUILD)/pobj/%.o) $(BUILD)/pobj/gen/profile.pb-c.o
all: $(BUILD)/libclrmux_profiler.so

$(BUILD)/pobj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS) -fvisibility=hidden -DCLRMUX_PROFILER_COMPANION -c $< -o $@

$(BUILD)/pobj/gen/profile.pb-c.o: $(BUILD)/gen/profile.pb-c.c $(BUILD)/gen/profile.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -I$(BUILD)/gen -g -fPIC $(CFLAGS) -fvisibility=hidden -c $< -o $@

$(BUILD)/libclrmux_profiler.so: $(PROF_OBJS)
	$(CC) -shared -o $@ $(PROF_OBJS) -Wl,-Bstatic -lprotobuf-c -lz -Wl,-Bdynamic $(LIBS) -Wl,--no-undefined \
	    -Wl,-z,defs -Wl,--exclude-libs,ALL

# The tracer's managed agent (src/tracer/agent: async spans, Activity recording), beside
# libclrmux.so: built with the .NET SDK when `dotnet` is on PATH; without it the tracer runs
# without its agent (docs/tracing.md), and this says so.
AGENT_SRCS := $(wildcard src/tracer/agent/*.cs) src/tracer/agent/Clrmux.Agent.csproj
ifneq ($(shell command -v dotnet 2>/dev/null),)
all: $(BUILD)/Clrmux.Agent.dll $(BUILD)/tools/attach/clrmux-attach.dll
else
all: agent-missing
endif
.PHONY: agent-missing
agent-missing:
	@echo "make: dotnet is not on PATH: $(BUILD)/Clrmux.Agent.dll (the tracer's managed agent: async spans, Activities) is not built"
	@echo "make: dotnet is not on PATH: $(BUILD)/tools/attach/clrmux-attach.dll (the tool behind clrmux attach) is not built"
$(BUILD)/Clrmux.Agent.dll: $(AGENT_SRCS)
	@mkdir -p $(BUILD)/agent
	DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 dotnet build src/tracer/agent/Clrmux.Agent.csproj -c Release \
	    -o $(BUILD)/agent/out -p:BaseIntermediateOutputPath=$(CURDIR)/$(BUILD)/agent/obj/ --disable-build-servers \
	    -nodeReuse:false -p:UseSharedCompilation=false -v:quiet -clp:NoSummary >$(BUILD)/agent/build.log 2>&1 \
	    || { cat $(BUILD)/agent/build.log; exit 1; }
	cp $(BUILD)/agent/out/Clrmux.Agent.dll $@

# the C# tool behind `clrmux attach` (tools/attach; NuGet: Microsoft.Diagnostics.NETCore.Client)
attach-tool: $(BUILD)/tools/attach/clrmux-attach.dll
$(BUILD)/tools/attach/clrmux-attach.dll: tools/attach/Program.cs tools/attach/clrmux-attach.csproj
	@mkdir -p $(BUILD)/tools
	DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 dotnet build tools/attach/clrmux-attach.csproj -c Release \
	    -o $(BUILD)/tools/attach -p:BaseIntermediateOutputPath=$(CURDIR)/$(BUILD)/tools/obj/ --disable-build-servers \
	    -nodeReuse:false -p:UseSharedCompilation=false -v:quiet -clp:NoSummary >$(BUILD)/tools/attach-build.log 2>&1 \
	    || { cat $(BUILD)/tools/attach-build.log; exit 1; }

# the launcher: validates and runs through libclrmux.so's exported clrmux_check_config
# (and `clrmux ctl`: the control channel's protocol and names, src/control/ctl_proto.c, ctl_path.c)
CLI_SRCS := $(filter-out %_win.c,$(wildcard src/cli/*.c)) src/control/ctl_proto.c src/control/ctl_path.c
$(BUILD)/clrmux: $(CLI_SRCS) $(wildcard src/cli/*.h) src/control/ctl_proto.h src/control/ctl_path.h include/clrmux/clrmux.h | setup
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS) -DCLRMUX_VERSION='"$(VERSION)"' -o $@ $(CLI_SRCS) -ldl

$(BUILD)/fake/lib%.so: fake_profilers/%.c $(wildcard fake_profilers/*.h) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS) -shared -o $@ $< $(LIBS)

$(BUILD)/unit/%: tests/unit/%.c $(ASAN_OBJS) $(HDRS) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN) -DCLRMUX_TESTING -o $@ $< $(ASAN_OBJS) -lcmocka -linih -lprotobuf-c -lz $(LIBS)

unit: $(UNIT_BINS) $(FAKES) | setup
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; CLRMUX_FAKE_DIR=$(BUILD)/fake $$t; done

# libFuzzer targets (tests/fuzz): built with clang, run by tests/fuzz/run.sh. `make fuzz`
# runs each for FUZZ_SECONDS; `make test` runs each for FUZZ_QUICK_SECONDS.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 300
FUZZ_QUICK_SECONDS ?= 15
FUZZ_CFLAGS  := $(CSTD) -Wall -Wextra -Werror -Iinclude -Isrc -I$(BUILD)/gen -g -O1 \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -DCLRMUX_TESTING
FUZZ_NAMES   := config target il utf16 framename events mdtables xspan ctl
fuzz_config_SRCS    := src/loader/config.c src/common/guid.c src/common/log.c src/common/trust.c src/common/platform_posix.c
fuzz_config_LIBS    := -linih
IL_SRCS             := src/tracer/il.c src/tracer/il_builder.c src/tracer/il_sig.c src/tracer/il_wrap.c
fuzz_target_SRCS    := src/tracer/target.c $(IL_SRCS)
fuzz_il_SRCS        := $(IL_SRCS)
fuzz_utf16_SRCS     := src/common/utf16.c src/profiler/framename.c
fuzz_framename_SRCS := src/profiler/framename.c
fuzz_events_SRCS    := src/profiler/events.c src/profiler/framename.c
fuzz_mdtables_SRCS  := src/common/mdtables.c
fuzz_xspan_SRCS     := src/tracer/xspan.c src/tracer/otlp_xspan.c src/tracer/otlp.c src/tracer/otlp_http.c \
                       $(wildcard src/tracer/spans*.c) src/tracer/usdt.c src/common/platform_posix.c \
                       src/common/log.c src/common/utf16.c
fuzz_xspan_LIBS     := -lm
fuzz_ctl_SRCS       := src/control/ctl_proto.c
define FUZZ_RULE
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $$(fuzz_$(1)_SRCS) $(HDRS)
	@mkdir -p $$(dir $$@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $$@ tests/fuzz/fuzz_$(1).c $$(fuzz_$(1)_SRCS) $$(fuzz_$(1)_LIBS) -lpthread
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_RULE,$(n))))
fuzz-build: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_SECONDS)
fuzz-quick: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_QUICK_SECONDS)

# The mux under ThreadSanitizer: tests/tsan/stress_mux.c (callbacks, masks, EventPipe, ReJIT)
# and tests/tsan/stress_elt_ep.c (enter/leave dispatch, EventPipe views) with the fake runtime.
TSAN_OBJS := $(LIB_SRCS:%.c=$(BUILD)/tsan/%.o) $(ASM_SRCS:%.S=$(BUILD)/tsan/%.o)
TSAN_BINS := $(BUILD)/tsan/stress_mux $(BUILD)/tsan/stress_elt_ep
$(BUILD)/tsan/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -O1 -fsanitize=thread -DCLRMUX_TESTING -c $< -o $@
$(BUILD)/tsan/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@
$(BUILD)/tsan/stress_%: tests/tsan/stress_%.c tests/unit/fake_runtime.h $(TSAN_OBJS) $(HDRS)
	$(CC) $(CFLAGS_COMMON) -O1 -fsanitize=thread -DCLRMUX_TESTING -Itests/unit -o $@ $< $(TSAN_OBJS) -linih $(LIBS)
tsan: $(TSAN_BINS)
	@set -e; for t in $(TSAN_BINS); do echo "== $$t"; TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" $$t; done

# Cross builds (docs/platforms.md). `make arm64`: build/arm64/ holds libclrmux.so,
# libclrmux_profiler.so, the launcher, the fake children and the unit tests for Linux arm64
# (aarch64-linux-gnu-gcc, Debian's arm64 multiarch libraries; unit tests without the
# sanitizers, which qemu-user does not run). tests/cross.sh runs them under qemu-aarch64 in
# `make test`, or says loudly why it could not.
ARM64_CC ?= aarch64-linux-gnu-gcc
arm64: | setup
	@$(MAKE) --no-print-directory NO_SETUP=1 BUILD=$(BUILD)/arm64 CC=$(ARM64_CC) SAN= arm64-parts
arm64-parts: $(BUILD)/libclrmux.so $(BUILD)/libclrmux_profiler.so $(BUILD)/libclrmux_otlp.so $(BUILD)/clrmux $(FAKES) $(UNIT_BINS)
# `make windows`: build/win-x64/ holds libclrmux.dll (the loader; its exports in
# src/loader/libclrmux.def; inih, cmocka, zlib, protobuf-c built from Debian's sources by scripts/win-deps.sh), the
# Windows x64 platform layer's test and the recorder child as a DLL (mingw-w64:
# x86_64-w64-mingw32-gcc), run under Wine by tests/cross.sh. The built-in tracer is in the
# DLL (its OTLP/protobuf encoder, libclrmux_otlp, is not: JSON only), and so are the
# fast-path ELT stubs (elt_amd64.S's Windows x64 half). Not in the DLL: the built-in profiler
# (Linux-only samplers): docs/platforms.md.
WIN_CC ?= x86_64-w64-mingw32-gcc
WIN_DEPS := $(BUILD)/win-x64/deps
WIN_CFLAGS := -std=c11 $(WARN) -Iinclude -Isrc -O2 -g -D__USE_MINGW_ANSI_STDIO=1 -D_WIN32_WINNT=0x0601
# the POSIX halves of the platform-specific files, and what is not in the DLL
WIN_LIB_SRCS := $(filter-out src/common/platform_posix.c src/common/trust.c src/common/lastgasp.c,$(LIB_SRCS))
WIN_SYSLIBS := -ladvapi32 -lshell32 -lsynchronization -lbcrypt
WIN_LIB_OBJS := $(WIN_LIB_SRCS:%.c=$(BUILD)/win-x64/obj/%.o) $(WIN_DEPS)/obj/ini.o $(BUILD)/win-x64/obj/src/loader/elt_amd64.o
windows: $(BUILD)/win-x64/libclrmux.dll $(BUILD)/win-x64/test_platform.exe $(BUILD)/win-x64/testdll.dll
$(WIN_DEPS)/inih/ini.c $(WIN_DEPS)/inih/ini.h $(WIN_DEPS)/cmocka/cmocka.c $(WIN_DEPS)/lib/libz.a $(WIN_DEPS)/lib/libprotobuf-c.a &: scripts/win-deps.sh | setup
	scripts/win-deps.sh $(WIN_DEPS)
$(WIN_DEPS)/obj/ini.o: $(WIN_DEPS)/inih/ini.c $(WIN_DEPS)/inih/ini.h
	@mkdir -p $(dir $@)
	$(WIN_CC) -std=c11 -O2 -g -Wall -Wextra -Werror -c $< -o $@
$(BUILD)/win-x64/obj/%.o: %.c $(HDRS) $(WIN_DEPS)/inih/ini.h
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -D_POSIX_THREAD_SAFE_FUNCTIONS=200112L -I$(WIN_DEPS)/inih -c $< -o $@
# winpthreads and libgcc linked statically: the DLL needs only Windows's own DLLs
$(BUILD)/win-x64/libclrmux.dll: $(WIN_LIB_OBJS) src/loader/libclrmux.def
	$(WIN_CC) -shared -o $@ $(WIN_LIB_OBJS) src/loader/libclrmux.def -static-libgcc \
	    -Wl,-Bstatic -lwinpthread -Wl,-Bdynamic $(WIN_SYSLIBS) -Wl,--no-undefined
$(BUILD)/win-x64/test_platform.exe: tests/win/test_platform.c src/common/platform_win.c src/common/platform.h | setup
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -o $@ tests/win/test_platform.c src/common/platform_win.c $(WIN_SYSLIBS)
$(BUILD)/win-x64/testdll.dll: tests/win/testdll.c | setup
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -shared -o $@ $<
# the launcher for Windows: clrmux.exe, `clrmux ctl` alone (src/cli/clrmux_win.c; ctl.c with its
# Windows half ctl_reach_win.c and the protocol and names of src/control), its objects in
# build/win-x64/obj beside the DLL's (tests/circles.sh reads them), C runtime linked in
WIN_CLI_OBJS := $(patsubst %.c,$(BUILD)/win-x64/obj/%.o,src/cli/clrmux_win.c src/cli/ctl.c src/cli/ctl_reach_win.c \
                src/control/ctl_proto.c src/control/ctl_path.c src/control/ctl_pipe_win.c)
windows: $(BUILD)/win-x64/clrmux.exe
$(BUILD)/win-x64/obj/src/cli/clrmux_win.o: WIN_CFLAGS += -DCLRMUX_VERSION='"$(VERSION)"'
$(BUILD)/win-x64/clrmux.exe: $(WIN_CLI_OBJS)
	$(WIN_CC) -o $@ $(WIN_CLI_OBJS) -static -static-libgcc -lshell32
# Unit tests for Windows (cmocka built from Debian's source by scripts/win-deps.sh): the loader's
# tests whose subject is in libclrmux.dll, linked with its objects built -DCLRMUX_TESTING.
# cmocka.h declares its printf-like functions with the MS printf format, while everything here
# uses mingw's C99 printf (__USE_MINGW_ANSI_STDIO): -D__printf__=__gnu_printf__ makes the
# compile-time checks match what runs.
WIN_UNIT_NAMES := config common compose unhandled mdtables detach dispatch abi il tracer_target tracer_spanfile tracer_spans \
                  control
WIN_UNIT_BINS := $(WIN_UNIT_NAMES:%=$(BUILD)/win-x64/unit/test_%.exe)
WIN_TEST_OBJS := $(WIN_LIB_SRCS:%.c=$(BUILD)/win-x64/tobj/%.o) $(WIN_DEPS)/obj/ini.o $(WIN_DEPS)/obj/cmocka.o \
                 $(BUILD)/win-x64/tobj/src/loader/elt_amd64.o
WIN_TEST_CFLAGS := $(WIN_CFLAGS) -D_POSIX_THREAD_SAFE_FUNCTIONS=200112L -D__printf__=__gnu_printf__ -DCLRMUX_TESTING \
                   -I$(WIN_DEPS)/inih -I$(WIN_DEPS)/cmocka -Itests/unit
windows: $(WIN_UNIT_BINS)
$(WIN_DEPS)/obj/cmocka.o: $(WIN_DEPS)/cmocka/cmocka.c
	@mkdir -p $(dir $@)
	$(WIN_CC) -std=gnu11 -O1 -g -D__USE_MINGW_ANSI_STDIO=1 -DHAVE_MALLOC_H -DHAVE_INTTYPES_H -DHAVE_SIGNAL_H \
	    -DHAVE_STRINGS_H -DHAVE_GCC_THREAD_LOCAL_STORAGE -DHAVE_STRUCT_TIMESPEC -DHAVE_CLOCK_REALTIME \
	    -I$(WIN_DEPS)/cmocka -c $< -o $@
# the fast-path ELT stubs (elt_amd64.S's Windows x64 half)
$(BUILD)/win-x64/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(WIN_CC) -c $< -o $@
$(BUILD)/win-x64/tobj/%.o: %.S
	@mkdir -p $(dir $@)
	$(WIN_CC) -c $< -o $@
$(BUILD)/win-x64/tobj/%.o: %.c $(HDRS) $(WIN_DEPS)/inih/ini.h
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_TEST_CFLAGS) -c $< -o $@
# mingw-w64's gcc 12 warns falsely on these test files (-Wstringop-overflow on the atomics of
# fake_runtime.h's mux, -Wmaybe-uninitialized after cmocka's asserts); the code under test is
# built with every warning above
$(WIN_UNIT_NAMES:%=$(BUILD)/win-x64/unit/test_%.exe): WIN_UNIT_NOWARN :=
$(BUILD)/win-x64/unit/test_detach.exe $(BUILD)/win-x64/unit/test_dispatch.exe $(BUILD)/win-x64/unit/test_abi.exe: \
    WIN_UNIT_NOWARN := -Wno-stringop-overflow -Wno-maybe-uninitialized
$(BUILD)/win-x64/unit/test_%.exe: tests/unit/test_%.c tests/win/posix_compat.h $(wildcard tests/unit/*.h) $(WIN_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_TEST_CFLAGS) $(WIN_UNIT_NOWARN) -include tests/win/posix_compat.h -o $@ $< $(WIN_TEST_OBJS) -static \
	    -lwinpthread $(WIN_SYSLIBS)

# The fake child profilers as DLLs (build/win-x64/fake/lib*.dll, CLRMUX_FAKE_DIR of the Windows
# mux tests), and the loader's tests that load them
WIN_FAKES := $(patsubst fake_profilers/%.c,$(BUILD)/win-x64/fake/lib%.dll,$(wildcard fake_profilers/*.c))
WIN_UNIT_MUX := mux_com mux_masks mux_route mux_elt mux_eventpipe mux_initialize mux_hostile check runtime_version
windows: $(WIN_FAKES) $(WIN_UNIT_MUX:%=$(BUILD)/win-x64/unit/test_%.exe) $(BUILD)/win-x64/unit/test_lastgasp_win.exe \
         $(BUILD)/win-x64/unit/test_ctl_win.exe
# the control channel's server in a process of its own, for `clrmux.exe ctl` to reach under Wine
# (tests/win/ctl_client.sh; not a unit test: it serves until its standard input closes)
windows: $(BUILD)/win-x64/ctl_serve.exe
$(BUILD)/win-x64/ctl_serve.exe: tests/win/ctl_serve.c $(WIN_TEST_OBJS)
	$(WIN_CC) $(WIN_TEST_CFLAGS) -o $@ $< $(WIN_TEST_OBJS) -static -lwinpthread $(WIN_SYSLIBS)
# Windows-only unit tests (tests/win/test_*.c with the loader's objects)
$(BUILD)/win-x64/unit/test_%.exe: tests/win/test_%.c $(WIN_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_TEST_CFLAGS) -o $@ $< $(WIN_TEST_OBJS) -static -lwinpthread $(WIN_SYSLIBS)
$(WIN_UNIT_MUX:%=$(BUILD)/win-x64/unit/test_%.exe): WIN_UNIT_NOWARN := -Wno-stringop-overflow -Wno-maybe-uninitialized
$(BUILD)/win-x64/fake/lib%.dll: fake_profilers/%.c $(wildcard fake_profilers/*.h) $(wildcard include/clrmux/*.h) | setup
	@mkdir -p $(dir $@)
	$(WIN_CC) $(WIN_CFLAGS) -shared -o $@ $< -static-libgcc -Wl,-Bstatic -lwinpthread -Wl,-Bdynamic

cross-test:
	@tests/cross.sh

test: all unit tsan fuzz-quick attach-tool
	@tests/cross.sh
	@tests/circles.sh
	@tests/cli.sh
	@tests/docs.sh
	@tests/packaging.sh
	@tests/report.sh
	@tests/clr/run.sh
	@tests/clr/tracer.sh
	@tests/clr/web.sh
	@tests/clr/dbq.sh
	@tests/clr/exceptions.sh
	@tests/clr/compose.sh
	@tests/clr/coverage.sh
	@tests/clr/diag.sh
	@tests/clr/detach.sh
	@tests/clr/otel.sh
	@tests/clr/profiler.sh
	@tests/clr/spans.sh
	@tests/clr/hardening.sh
	@tests/clr/ending.sh
	@tests/clr/elt.sh
	@tests/clr/eventpipe.sh
	@tests/clr/attach.sh
	@tests/clr/control.sh
	@tests/clr/usdt.sh

demo: all
	@scripts/demo.sh

# make install [PREFIX=/opt/clrmux] [DESTDIR=]: bin/clrmux, lib/libclrmux.so,
# lib/libclrmux_profiler.so, lib/libclrmux_otlp.so, etc/loader.conf (lib/loader.conf links to it, the library's
# default), share/clrmux/instrument.sh, share/doc/clrmux/ (README.md, docs/, loader.conf.example,
# THIRD_PARTY_NOTICES.md).
PREFIX ?= /opt/clrmux
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/etc \
	    $(DESTDIR)$(PREFIX)/share/clrmux $(DESTDIR)$(PREFIX)/share/doc/clrmux/docs
	install -m 0755 $(BUILD)/clrmux $(DESTDIR)$(PREFIX)/bin/clrmux
	install -m 0644 $(BUILD)/libclrmux.so $(BUILD)/libclrmux_profiler.so $(BUILD)/libclrmux_otlp.so $(DESTDIR)$(PREFIX)/lib/
	if [ -f $(BUILD)/Clrmux.Agent.dll ]; then install -m 0644 $(BUILD)/Clrmux.Agent.dll $(DESTDIR)$(PREFIX)/lib/; fi
	install -m 0644 packaging/loader.conf $(DESTDIR)$(PREFIX)/etc/loader.conf
	ln -sfn ../etc/loader.conf $(DESTDIR)$(PREFIX)/lib/loader.conf
	sed 's|@PREFIX@|$(PREFIX)|g' packaging/instrument.sh >$(DESTDIR)$(PREFIX)/share/clrmux/instrument.sh
	chmod 0644 $(DESTDIR)$(PREFIX)/share/clrmux/instrument.sh
	install -m 0644 README.md loader.conf.example THIRD_PARTY_NOTICES.md $(DESTDIR)$(PREFIX)/share/doc/clrmux/
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/clrmux/docs/
	install -D -m 0644 bench/README.md $(DESTDIR)$(PREFIX)/share/doc/clrmux/bench/README.md
	install -D -m 0644 src/profiler/README.md $(DESTDIR)$(PREFIX)/share/doc/clrmux/src/profiler/README.md
	if [ -f $(BUILD)/tools/attach/clrmux-attach.dll ]; then install -d $(DESTDIR)$(PREFIX)/share/clrmux/attach && \
	    install -m 0644 $(BUILD)/tools/attach/*.dll $(BUILD)/tools/attach/*.json $(DESTDIR)$(PREFIX)/share/clrmux/attach/; fi

# make dist: build/dist/clrmux-VERSION-linux-x64.tar.gz, clrmux_VERSION_amd64.deb and
# Clrmux.Bundle.VERSION.nupkg (tested by tests/packaging.sh in make test)
dist: all
	@scripts/dist.sh $(VERSION)

bench: all
	@bench/run.sh

clean:
	rm -rf $(BUILD)
.SECONDARY:
