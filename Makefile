# hbg: one plain Makefile (model: liburing). See README.md for the two commands.
#
#   make                 build everything into build/ (bin/, lib/, obj/)
#   make check           install missing Debian deps, build, run every test,
#                        then the same tests under ASan+UBSan, under TSan and
#                        built -O3 -DNDEBUG (RELEASE=1)
#   make test            run the tests of one build (honours SANITIZE=)
#   make bench           hbg beside oneTBB, OpenMP, StarPU, Dask (--python): table, CSVs, plots in build/bench/
#   make bench-micro     the protocol and engine micro-benchmarks
#   make bench-peers     the peer runtimes (TBB, OpenMP, StarPU, floor) in build/bin/
#   make SANITIZE=address,undefined test  |  make SANITIZE=thread test
#   make hostile         the attack and fault tests at full scale
#   make soak            8 producers for SOAK_SECONDS (600): build/soak/
#   make V=1 ...         show the commands
#   make install PREFIX=/usr DESTDIR=/tmp/stage ; make uninstall ; make clean
#   STRESS=long make test  longer stress runs
#   make fuzz FUZZ_SECONDS=N  each fuzz target for N s (libFuzzer, ASan+UBSan);
#                        make fuzz-merge keeps what they found (tests/fuzz/)

# The version is the API's, from the public header (one place).
VERSION := $(shell sed -n 's/^\#define HBG_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' \
             libclient/include/hbg/hbg.h | paste -sd.)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DOCDIR  ?= $(PREFIX)/share/doc/hbg
# Configuration follows the prefix, as autotools' sysconfdir=PREFIX/etc
# does (/usr/local/etc, /opt/hbg/etc), except for the distribution's own
# prefix /usr, whose configuration is /etc (Debian's --sysconfdir=/etc).
SYSCONFDIR  ?= $(if $(filter /usr /usr/,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
MANDIR      ?= $(PREFIX)/share/man
DATADIR     ?= $(PREFIX)/share
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions

CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=
# The sanitizer and -O3 trees are for tests only: line tables (-g1) are all
# their reports use, and they build about 14 % faster than with -g (TSan
# tree: 65 -> 56 s on 2 cores). SAN_DEBUG=-g for a debugger's variables.
SAN_DEBUG ?= -g1

comma := ,
ifneq ($(FUZZ),)
  # make fuzz: the fuzz targets with libFuzzer (clang-14), under ASan+UBSan.
  B := build/fuzz
  CC := clang-14
  # gcc's -Wcast-align speaks only on strict-alignment targets; clang's on
  # every target: the clang build keeps gcc's meaning.
  SAN_CFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
                -Wno-cast-align
else ifneq ($(RELEASE),)
  # make RELEASE=1 test: everything at -O3 with assert() compiled out, as a
  # distribution would build it; no client may reach an assert (there is
  # none in daemon/, libclient/, shm/, proto/; tests use Check's).
  B := build/release
  SAN_CFLAGS := -O3 -DNDEBUG $(SAN_DEBUG)
else ifeq ($(SANITIZE),)
  B := build
  SAN_CFLAGS :=
else
  B := build/san-$(subst $(comma),-,$(SANITIZE))
  SAN_CFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all $(SAN_DEBUG)
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wundef -Wvla -Wcast-align -Wwrite-strings \
        -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers
HBG_CFLAGS  := -std=gnu11 -D_GNU_SOURCE $(WARN) -fvisibility=hidden -pthread -ffp-contract=off \
               -MMD -MP -I. -Ilibclient/include -I$(B)/gen -DHBG_VERSION='"$(VERSION)"' $(SAN_CFLAGS) $(EXTRA_CFLAGS)
# -ffp-contract=off: no fused multiply-add, so kernel results are the same
# on every machine and for every block split (tests compare bit for bit).
# -Ilibclient/include: the public headers are <hbg/...> everywhere, as in
# a user's program or a kernel module (hbgd's kernel table includes
# <hbg/kernel.h>), never a path into libclient/.
HBG_LDFLAGS := -pthread $(SAN_CFLAGS)

# Evaluated only when a rule needs them, i.e. after `make deps` has run.
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)
SYS_CFLAGS   = $(shell pkg-config --cflags liburing libprotobuf-c libsystemd 2>/dev/null)
SYS_LIBS     = $(shell pkg-config --libs liburing libprotobuf-c libsystemd 2>/dev/null || echo -luring -lprotobuf-c -lsystemd)

ifeq ($(V),1)
  Q :=
  say = @:
else
  Q := @
  say = @printf '  %-6s %s\n'
endif

# ---------------------------------------------------------------- sources
# shm/ (the mapped layout and its protocol) and common/ (what both sides
# build that is not the mapped layout): in libhbgshm.a for hbgd, hbgctl and
# the tests, compiled into the library (docs/ARCHITECTURE.md, Shared code).
SHM_SRCS := shm/geometry.c shm/layout.c shm/completion.c shm/failsafe_heap.c shm/producer.c \
            common/kernel_sig.c common/text.c common/errtext.c common/sockperm.c common/dep_tracker.c \
            common/procstat.c
SHM_OBJS := $(SHM_SRCS:%.c=$(B)/obj/%.o)
SHM_LIB  := $(B)/lib/libhbgshm.a

# Everything of hbgd except its main(): the daemon and the tests link it.
CORE_SRCS := $(addprefix daemon/engine/,engine.c sched.c ring_table.c fair_share_slots.c fair_share.c dispatch.c \
               completion.c $(notdir $(sort $(wildcard daemon/engine/completion_*.c))) \
               ingest.c validate.c classify.c launch.c recorded.c ready.c complete.c retire.c signal.c failures.c \
               queues.c work.c mailbox.c stall.c ring.c ring_spares.c cancel.c live_graphs.c client_read.c \
               wakeup.c wake_pages.c trace.c engine_log.c histogram.c ktime.c kernels.c kernels_builtin.c)
CORE_OBJS := $(CORE_SRCS:%.c=$(B)/obj/%.o)
CORE_LIB  := $(B)/lib/libhbgcore.a

# The control protocol: C generated from proto/hbg.proto by protoc-c.
PROTO_GEN  := $(B)/gen/hbg.pb-c.c $(B)/gen/hbg.pb-c.h
PROTO_OBJS := $(B)/obj/gen/hbg.pb-c.o $(B)/obj/proto/wire.o $(B)/obj/proto/kernel_table.o
PROTO_LIB  := $(B)/lib/libhbgproto.a

# hbgd's io side (io_uring/epoll loop, sessions, control protocol).
HBGD_SRCS := daemon/io_loop.c daemon/io_probe.c daemon/log.c daemon/log_limit.c daemon/log_sink.c daemon/notify.c daemon/accounting.c daemon/session.c daemon/session_geometry.c daemon/session_regions.c \
             daemon/slow_work.c daemon/region_seal.c daemon/spare_rings.c daemon/spare_regions.c daemon/record.c daemon/validate_request.c daemon/conn.c daemon/conn_reply.c daemon/conn_close.c daemon/tool_requests.c daemon/tracing.c daemon/status.c daemon/kernel_rows.c daemon/metrics.c daemon/listener.c daemon/tick.c \
             daemon/daemon.c daemon/config.c daemon/config_keys.c daemon/access.c daemon/refusal.c daemon/kernel_modules.c
HBGD_LIB  := $(B)/lib/libhbgd.a
HBGD_BIN  := $(B)/bin/hbgd

# libhbgclient: its own code plus shm/ and proto/ compiled in (PIC); the
# daemon's code is never linked into it.
SOVERSION  := $(firstword $(subst ., ,$(VERSION)))
CLIENT_SRCS := libclient/connect.c libclient/replay.c libclient/graph.c libclient/recording.c \
               libclient/wait.c libclient/host.c libclient/graph_status.c libclient/deps.c \
               libclient/tensor.c libclient/session.c libclient/hangup.c libclient/kernels.c libclient/errors.c \
               libclient/workers.c libclient/fanin_join.c
CLIENT_PIC  := $(CLIENT_SRCS:%.c=$(B)/pic/%.o) $(SHM_SRCS:%.c=$(B)/pic/%.o) \
               $(B)/pic/proto/wire.o $(B)/pic/proto/kernel_table.o $(B)/pic/gen/hbg.pb-c.o
CLIENT_SO   := $(B)/lib/libhbgclient.so.$(VERSION)
CLIENT_LINKS := $(B)/lib/libhbgclient.so.$(SOVERSION) $(B)/lib/libhbgclient.so
CLIENT_PC   := $(B)/lib/pkgconfig/hbgclient.pc

BENCH_SRCS := bench/hbg_bench.c bench/bench_completion.c bench/bench_engine.c bench/bench_util.c \
              bench/compare.c bench/compare_hbg.c bench/compare_service.c bench/compare_peers.c \
              bench/compare_instr.c bench/compare_kernels.c bench/compare_host.c bench/compare_python.c \
              bench/compare_trace.c bench/compare_wait.c bench/callgrind_files.c bench/instr_stages.c bench/targets.c \
              bench/report.c bench/regress.c bench/probes.c bench/child.c bench/hbgd_proc.c \
              bench/producer.c bench/dag.c tests/engine/harness.c
BENCH_BIN  := $(B)/bin/hbg-bench

TEST_NAMES := test_geometry test_flag_index test_watermark test_failsafe_heap test_config test_kernel_modules \
              test_e2e_modules test_io_loop test_slow_work test_wire \
              test_completion_stress test_kernels test_kernel_budget test_kernel_validation test_kernel_table \
              test_engine_basic \
              test_engine_differential test_engine_rings test_engine_stress test_engine_alloc \
              test_engine_validation test_engine_behaviour test_engine_wakeups test_engine_config \
              test_engine_counters test_engine_replay test_e2e_daemon test_e2e_affinity \
              test_e2e_hostile test_e2e_hostile_engine test_e2e_hostile_limits test_e2e_hostile_fair \
              test_e2e_systemd test_e2e_handshake test_e2e_spares test_e2e_hbgctl test_e2e_hbgctl_graphs \
              test_e2e_hbgctl_hbgd \
              test_e2e_client \
              test_e2e_api test_e2e_errors test_e2e_replay test_e2e_proto_attack test_text \
              test_e2e_faults test_e2e_shm_attack test_e2e_shm_control test_e2e_access test_e2e_metrics \
              test_e2e_exporter \
              test_e2e_journal \
              test_e2e_host_threads test_dep_tracker test_instr_stages test_fanin_join
TEST_BINS  := $(TEST_NAMES:%=$(B)/tests/%)
# The same stress test built with the store->load ordering removed: it must
# be able to catch the watermark freeze (docs/RUNTIME_LOGIC.md §4).
# Only meaningful without sanitizers (they slow the race window shut and
# TSan has nothing to say about a weaker-but-race-free order).
UNSAFE_BIN := $(B)/tests/test_completion_stress_unordered
# The kernels again at -O3: those that run in place (an output the very
# range of an input) carry no `restrict`, and the optimiser must not find
# a way to break them (tests/unit/test_kernels.c has the in-place cases),
# nor the checked loops of their run contract, nor their checks.
KERNELS_O3_BIN := $(B)/tests/test_kernels_O3 $(B)/tests/test_kernel_budget_O3 $(B)/tests/test_kernel_validation_O3
# The fuzz targets' corpora, replayed (tests/fuzz/fuzz.h).
FUZZ_TARGETS := config graph_file descriptors protocol text
FUZZ_REPLAY_BINS := $(FUZZ_TARGETS:%=$(B)/tests/fuzz_replay_%)
ifeq ($(SANITIZE)$(RELEASE),)
  TEST_RUN := $(TEST_BINS) $(KERNELS_O3_BIN) $(UNSAFE_BIN) $(FUZZ_REPLAY_BINS)
else ifeq ($(SANITIZE),thread)
  # test_watermark is single-threaded (TSan has nothing to say about it) and
  # runs 40 times slower under TSan.
  TEST_RUN := $(filter-out %/test_watermark,$(TEST_BINS)) $(KERNELS_O3_BIN) $(FUZZ_REPLAY_BINS)
else
  TEST_RUN := $(TEST_BINS) $(KERNELS_O3_BIN) $(FUZZ_REPLAY_BINS)
endif

# A newcomer's first client program, linked against the shared library
# like any user program (rpath: it finds build/lib/ from build/bin/).
EXAMPLE_BIN := $(B)/bin/hbg-example-gemm-softmax
# Host functions on the library's worker threads (host_threads, API 1.5).
HOST_EXAMPLE_BIN := $(B)/bin/hbg-example-host-parallel

HBGCTL_BIN := $(B)/bin/hbgctl

# The MPI example (docs/SCALING.md): Open MPI's mpicc, which BUILD_DEPS
# installs. Not part of `all` (a machine without MPI still builds hbg);
# the plain `make test` builds it for tests/scripts/test-mpi.sh.
MPICC ?= mpicc
MPI_EXAMPLE_BIN := $(B)/bin/hbg-example-mpi-producer

PROGRAMS := $(HBGD_BIN) $(HBGCTL_BIN) $(BENCH_BIN) $(EXAMPLE_BIN) $(HOST_EXAMPLE_BIN)

# The example kernel module (docs/KERNELS.md), installed under
# $(LIBDIR)/hbg/kernels/, and the tests' modules: one source built per
# variant, each refused by hbgd's loader for the reason it is named after
# (tests/modules/test_module.c). A module is built like any user's: the
# public header only, no library.
KMOD_EXAMPLE := $(B)/lib/hbg/kernels/hbg-nn.so
TEST_MODULE_VARIANTS := counting init_fail clash_builtin clash_a clash_b bad_name dummy_name no_run too_many_args bad_dir \
                        bad_version bad_size small_size empty many_fit many_over long_summary misbehaving \
                        unsplit
TEST_MODULES := $(TEST_MODULE_VARIANTS:%=$(B)/tests/modules/%.so) $(B)/tests/modules/no_init.so

# Man pages: docs/man/ holds them with @VERSION@ (every footer) and
# @SYSCONFDIR@, @DOCDIR@, @UNITDIR@, @SYSUSERSDIR@ (the FILES sections of
# hbgd(8), hbgd.conf(5), hbgctl(1)) in place of the version of hbg.h and
# the paths of the prefix. `make` writes them substituted to $(B)/man/
# (man -l build/man/hbgd.8); `make install` substitutes again with the
# paths it installs to, which may differ from those of the build.
# hbg-bench is not installed, nor its page: it is read from the build
# (man -l build/man/hbg-bench.1), which filled in its footer too.
MAN1 := docs/man/hbgctl.1
MAN3 := $(wildcard docs/man/*.3)
MAN5 := docs/man/hbgd.conf.5
MAN8 := docs/man/hbgd.8
MAN_BENCH := docs/man/hbg-bench.1
MAN_SED := -e 's|@VERSION@|$(VERSION)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
           -e 's|@UNITDIR@|$(UNITDIR)|g' -e 's|@SYSUSERSDIR@|$(SYSUSERSDIR)|g'
MAN_BUILT := $(patsubst docs/%,$(B)/%,$(MAN1) $(MAN3) $(MAN5) $(MAN8) $(MAN_BENCH))

all: $(SHM_LIB) $(CORE_LIB) $(PROGRAMS) $(CLIENT_SO) $(CLIENT_LINKS) $(CLIENT_PC) $(MAN_BUILT) $(KMOD_EXAMPLE) python

$(B)/man/%: docs/man/% Makefile
	@mkdir -p $(@D)
	$(Q)sed $(MAN_SED) $< > $@

$(B)/pic/%.o: %.c | $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(SYS_CFLAGS) -fPIC -Ilibclient/include -c -o $@ $<

$(B)/pic/gen/%.o: $(B)/gen/%.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(SYS_CFLAGS) -fPIC -Wno-missing-prototypes -c -o $@ $<

$(CLIENT_SRCS:%.c=$(B)/pic/%.o) $(B)/pic/proto/wire.o $(B)/pic/proto/kernel_table.o: $(B)/gen/hbg.pb-c.h

$(CLIENT_SO): $(CLIENT_PIC) libclient/libhbgclient.map
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $(CLIENT_PIC) -Wl,-soname,libhbgclient.so.$(SOVERSION) \
		-Wl,--version-script=libclient/libhbgclient.map -Wl,--no-undefined \
		$(LDFLAGS) $(HBG_LDFLAGS) $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)

$(CLIENT_LINKS): $(CLIENT_SO)
	$(Q)ln -sf $(notdir $(CLIENT_SO)) $@

$(CLIENT_PC): libclient/hbgclient.pc.in
	@mkdir -p $(@D)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

$(PROTO_GEN) &: proto/hbg.proto
	$(say) PROTOC $@
	@mkdir -p $(B)/gen
	$(Q)protoc-c --proto_path=proto --c_out=$(B)/gen proto/hbg.proto

$(B)/obj/gen/%.o: $(B)/gen/%.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(SYS_CFLAGS) -Wno-missing-prototypes -c -o $@ $<

# Everything that includes the generated header waits for it (the pattern
# rules wait for it too, order-only: daemon/config.h, included by tests,
# reaches it through proto/wire.h).
$(B)/obj/proto/wire.o $(B)/obj/proto/kernel_table.o $(HBGD_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/daemon/hbgd.o: $(B)/gen/hbg.pb-c.h

# hbgctl: the control protocol (libhbgproto) for the status verbs,
# libhbgclient for `run` (linked like any user program) and json-c.
JSONC_CFLAGS = $(shell pkg-config --cflags json-c 2>/dev/null)
JSONC_LIBS   = $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)

CTL_SRCS := ctl/hbgctl.c ctl/top.c ctl/run.c ctl/run_dry.c ctl/run_report.c ctl/progress.c ctl/dot.c ctl/status.c ctl/metrics.c ctl/exporter.c ctl/graph_file.c ctl/graph_tensors.c \
            ctl/graph_read.c ctl/output.c ctl/daemon_conn.c ctl/admin.c ctl/trace.c ctl/trace_svg.c ctl/error.c
CTL_OBJS := $(CTL_SRCS:%.c=$(B)/obj/%.o)

$(CTL_OBJS): $(B)/obj/ctl/%.o: ctl/%.c $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(SYS_CFLAGS) $(JSONC_CFLAGS) -Ilibclient/include -c -o $@ $<

# run --dot derives dependencies with common/dep_tracker.c (libhbgshm.a),
# the tracker the library compiles in and does not export.
$(HBGCTL_BIN): $(CTL_OBJS) $(PROTO_LIB) $(SHM_LIB) $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../lib' \
		$(LDFLAGS) $(HBG_LDFLAGS) $(JSONC_LIBS) \
		$(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c) -lm

$(PROTO_LIB): $(PROTO_OBJS)
	$(say) AR $@
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(HBGD_LIB): $(HBGD_SRCS:%.c=$(B)/obj/%.o)
	$(say) AR $@
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(HBGD_BIN): $(B)/obj/daemon/hbgd.o $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(SYS_LIBS) -lm

$(B)/obj/examples/%.o: examples/%.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -Ilibclient/include -c -o $@ $<

$(EXAMPLE_BIN): $(B)/obj/examples/gemm_softmax.o $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) $(HBG_LDFLAGS) -lm

$(HOST_EXAMPLE_BIN): $(B)/obj/examples/host_parallel.o $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) $(HBG_LDFLAGS) -lm

$(KMOD_EXAMPLE): examples/kernels_nn.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -fPIC -Ilibclient/include -shared -o $@ $< $(LDFLAGS) $(HBG_LDFLAGS) -lm

# ---------------------------------------------------------------- python
# The Python package (python/, docs/PYTHON.md) built in the tree for the
# tests: $(PY_BUILD)/hbg is importable with PYTHONPATH=$(PY_BUILD). Debian's
# python3 (not one earlier in PATH): the one python3-numpy serves. Its
# headers are system headers (-isystem): our warnings are for our code;
# -Wno-write-strings: CPython's keyword lists are char *[] of literals.
PYTHON ?= /usr/bin/python3
PY_BUILD := $(B)/python
PY_EXT_SUFFIX = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_CFLAGS = -isystem $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) \
            -isystem $(shell $(PYTHON) -c 'import numpy; print(numpy.get_include())' 2>/dev/null)
PY_SRCS := $(wildcard python/src/*.c)
PY_OBJS := $(PY_SRCS:python/src/%.c=$(B)/obj/python/%.o)
PY_FILES := $(wildcard python/hbg/*.py python/hbg/*.pyi) python/hbg/py.typed
PY_MODULE = $(PY_BUILD)/hbg/_hbg$(PY_EXT_SUFFIX)

$(B)/obj/python/%.o: python/src/%.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -Wno-write-strings -fvisibility=default -fPIC -Ilibclient/include $(PY_CFLAGS) \
		-c -o $@ $<

$(PY_BUILD)/hbg/_hbg%: $(PY_OBJS) $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $(PY_OBJS) -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../../lib' $(LDFLAGS) $(HBG_LDFLAGS)

$(PY_BUILD)/hbg/%: python/hbg/%
	@mkdir -p $(@D)
	$(Q)cp $< $@

python: $(PY_MODULE) $(PY_FILES:python/%=$(PY_BUILD)/%)

# hbg-bench --python's driver, next to the package it imports (hbg-bench
# finds it in ../python from its own directory).
PY_BENCH := $(PY_BUILD)/bench_py.py
$(PY_BENCH): bench/python/bench_py.py $(PY_MODULE) $(PY_FILES:python/%=$(PY_BUILD)/%)
	@mkdir -p $(@D)
	$(Q)cp $< $@

$(B)/tests/modules/%.so: tests/modules/test_module.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -fPIC -Ilibclient/include -DVARIANT='"$*"' -shared -o $@ $< \
		$(LDFLAGS) $(HBG_LDFLAGS)

$(B)/tests/modules/no_init.so: tests/modules/test_module.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -fPIC -Ilibclient/include -DVARIANT='"no_init"' -DNO_INIT -shared -o $@ $< \
		$(LDFLAGS) $(HBG_LDFLAGS)

$(B)/obj/examples/mpi_producer.o: examples/mpi_producer.c
	$(say) MPICC $@
	@mkdir -p $(@D)
	$(Q)$(MPICC) $(CFLAGS) $(HBG_CFLAGS) -Ilibclient/include -c -o $@ $<

$(MPI_EXAMPLE_BIN): $(B)/obj/examples/mpi_producer.o $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(MPICC) -o $@ $< -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) $(HBG_LDFLAGS)

# The version is compiled in (-DHBG_VERSION): the objects that use it are
# rebuilt when it changes (a stamp rewritten only when it differs).
VERSION_STAMP := $(B)/gen/version
$(VERSION_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(VERSION)' | cmp -s - $@ 2>/dev/null || echo '$(VERSION)' > $@
FORCE:
.PHONY: FORCE
$(patsubst %.c,$(B)/obj/%.o,$(shell grep -l 'HBG_VERSION\b' daemon/*.c ctl/*.c bench/*.c tests/*/*.c 2>/dev/null)) \
$(patsubst %.c,$(B)/pic/%.o,$(shell grep -l 'HBG_VERSION\b' libclient/*.c 2>/dev/null)): $(VERSION_STAMP)

# ---------------------------------------------------------------- rules
$(B)/obj/%.o: %.c | $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(SYS_CFLAGS) -c -o $@ $<

$(SHM_LIB): $(SHM_OBJS)
	$(say) AR $@
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CORE_LIB): $(CORE_OBJS)
	$(say) AR $@
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# The producers it starts (bench/producer.c) are user programs: the public
# header and the shared library, like the example; so is the connect
# burst's (bench/probes.c).
$(B)/obj/bench/producer.o: HBG_CFLAGS += -Ilibclient/include
$(B)/obj/bench/probes.o: HBG_CFLAGS += -Ilibclient/include
# --trace reads hbgctl's trace JSON back (bench/compare_trace.c).
$(B)/obj/bench/compare_trace.o: HBG_CFLAGS += $(JSONC_CFLAGS)
$(BENCH_BIN): $(BENCH_SRCS:%.c=$(B)/obj/%.o) $(CORE_LIB) $(SHM_LIB) $(CLIENT_SO) $(CLIENT_LINKS)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) -L$(B)/lib -lhbgclient -Wl,-rpath,'$$ORIGIN/../lib' \
	  $(LDFLAGS) $(HBG_LDFLAGS) $(JSONC_LIBS) -lm

# Tests may read files of this source tree (units, docs): HBG_SRCDIR.
TEST_CFLAGS = $(CHECK_CFLAGS) -DHBG_SRCDIR='"$(abspath .)"'

$(B)/obj/tests/%.o: tests/%.c | $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(TEST_CFLAGS) -c -o $@ $<

# Every Check test's main() (tests/check_main.h); the test file defines
# its suite and hooks.
CHECK_MAIN := $(B)/obj/tests/check_main.o

# Engine tests also link the in-process client harness.
$(B)/tests/test_engine_%: $(B)/obj/tests/engine/test_engine_%.o $(B)/obj/tests/engine/harness.o $(CHECK_MAIN) $(CORE_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm
# The engine behaviour tests share tests/engine/behaviour_util.c.
ENGINE_BEHAVIOUR_TESTS := test_engine_behaviour test_engine_wakeups test_engine_config test_engine_counters
$(ENGINE_BEHAVIOUR_TESTS:%=$(B)/tests/%): $(B)/obj/tests/engine/behaviour_util.o

# The engine's constructors with allocations failing: the allocator is
# injected at link time, the engine's code is as shipped.
ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=aligned_alloc,--wrap=posix_memalign,--wrap=mmap,--wrap=pthread_create
$(B)/tests/test_engine_alloc: $(B)/obj/tests/engine/test_engine_alloc.o $(B)/obj/tests/engine/harness.o $(CHECK_MAIN) \
                             $(CORE_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(ALLOC_WRAP) $(CHECK_LIBS) -lm

# End-to-end tests: the real hbgd (started by tests/e2e/daemon_util.c) and the
# shared client library; raw protocol records through libhbgproto.
$(B)/obj/tests/e2e/test_e2e_%.o: tests/e2e/test_e2e_%.c $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(TEST_CFLAGS) $(SYS_CFLAGS) $(TEST_EXTRA_CFLAGS) -Ilibclient/include -c -o $@ $<


$(B)/obj/tests/e2e/daemon_util.o: tests/e2e/daemon_util.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -DHBG_TEST_HBGD='"$(abspath $(HBGD_BIN))"' -c -o $@ $<

# Helpers of the e2e tests (tests/e2e/e2e_util.h, tests/e2e/e2e_kid.h): raw
# protocol records and libhbgclient, like the e2e tests themselves.
E2E_HELPER_OBJS := $(B)/obj/tests/e2e/e2e_util.o $(B)/obj/tests/e2e/raw_proto.o $(B)/obj/tests/e2e/status_query.o \
                   $(B)/obj/tests/e2e/workload.o $(B)/obj/tests/e2e/e2e_kid.o
E2E_UTIL_OBJS := $(B)/obj/tests/e2e/daemon_util.o $(E2E_HELPER_OBJS)
HOSTILE_UTIL_OBJ := $(B)/obj/tests/e2e/hostile_util.o
SHM_ATTACK_UTIL_OBJ := $(B)/obj/tests/e2e/shm_attack_util.o
METRICS_UTIL_OBJ := $(B)/obj/tests/e2e/metrics_util.o

$(E2E_HELPER_OBJS) $(HOSTILE_UTIL_OBJ) $(SHM_ATTACK_UTIL_OBJ) $(METRICS_UTIL_OBJ): $(B)/obj/tests/%.o: tests/%.c $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(CHECK_CFLAGS) $(SYS_CFLAGS) $(TEST_EXTRA_CFLAGS) -Ilibclient/include -c -o $@ $<

# The hostile-client tests share tests/e2e/hostile_util.c.
HOSTILE_TESTS := test_e2e_hostile test_e2e_hostile_engine test_e2e_hostile_limits test_e2e_hostile_fair
$(HOSTILE_TESTS:%=$(B)/tests/%): $(HOSTILE_UTIL_OBJ)

$(B)/tests/test_e2e_%: $(B)/obj/tests/e2e/test_e2e_%.o $(E2E_UTIL_OBJS) $(CHECK_MAIN) $(PROTO_LIB) $(CLIENT_LINKS) | $(HBGD_BIN)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) -L$(B)/lib -lhbgclient -Wl,-rpath,$(abspath $(B)/lib) \
		$(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) $(TEST_EXTRA_LIBS) \
		$(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c) -lm

# The hbgctl tests run hbgctl (a subprocess) and read its JSON with json-c,
# through tests/e2e/hbgctl_util.c.
HBGCTL_TESTS := test_e2e_hbgctl test_e2e_hbgctl_graphs test_e2e_hbgctl_hbgd
HBGCTL_UTIL_OBJ := $(B)/obj/tests/e2e/hbgctl_util.o
$(HBGCTL_UTIL_OBJ): tests/e2e/hbgctl_util.c $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(CHECK_CFLAGS) $(SYS_CFLAGS) $(JSONC_CFLAGS) -Ilibclient/include -c -o $@ $<
$(HBGCTL_TESTS:%=$(B)/obj/tests/e2e/%.o): TEST_EXTRA_CFLAGS = $(JSONC_CFLAGS)
$(HBGCTL_TESTS:%=$(B)/tests/%): TEST_EXTRA_LIBS = $(JSONC_LIBS)
$(HBGCTL_TESTS:%=$(B)/tests/%): $(HBGCTL_UTIL_OBJ) | $(HBGCTL_BIN) $(EXAMPLE_BIN) $(HOST_EXAMPLE_BIN)
# test_e2e_api compares the client's kernel table with the built-in table
# of libhbgshm.a; test_e2e_handshake asks for the table by that table's
# digest.
$(B)/tests/test_e2e_api $(B)/tests/test_e2e_handshake: TEST_EXTRA_LIBS = $(SHM_LIB)
$(B)/tests/test_e2e_api $(B)/tests/test_e2e_handshake: $(SHM_LIB)
# test_e2e_metrics runs hbgctl metrics and kernels (subprocesses), reads
# the latter's JSON with json-c; test_e2e_exporter runs hbgctl metrics
# --format and --listen. Both through tests/e2e/metrics_util.c, and run
# hbgctl through tests/e2e/hbgctl_util.c.
METRICS_TESTS := test_e2e_metrics test_e2e_exporter
$(METRICS_TESTS:%=$(B)/obj/tests/e2e/%.o) $(METRICS_UTIL_OBJ): TEST_EXTRA_CFLAGS = $(JSONC_CFLAGS)
$(METRICS_TESTS:%=$(B)/tests/%): TEST_EXTRA_LIBS = $(JSONC_LIBS)
$(METRICS_TESTS:%=$(B)/tests/%): $(METRICS_UTIL_OBJ) $(HBGCTL_UTIL_OBJ) | $(HBGCTL_BIN)
# test_e2e_journal runs hbgd on a pseudo-terminal (forkpty).
$(B)/tests/test_e2e_journal: TEST_EXTRA_LIBS = -lutil

# hbgd with allocations failing after READY=1 (tests/e2e/hbgd_failalloc.c):
# hbgd's objects as shipped, the allocator injected at link time.
FAILALLOC_HBGD := $(B)/tests/hbgd-failalloc
$(FAILALLOC_HBGD): $(B)/obj/daemon/hbgd.o $(B)/obj/tests/e2e/hbgd_failalloc.o $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) \
                   $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=hbgd_notify \
		$(SYS_LIBS) -lm
$(B)/obj/tests/e2e/test_e2e_faults.o: TEST_EXTRA_CFLAGS = -DHBG_TEST_HBGD_FAILALLOC='"$(abspath $(FAILALLOC_HBGD))"'
$(B)/tests/test_e2e_faults: | $(FAILALLOC_HBGD)

# hbgd with its test hooks (tests/e2e/hbgd_hooks.c): hbgd's objects as
# shipped, the hooks injected at link time; hbgd itself reads no test
# variable. test_e2e_systemd (a wedged scheduler thread), test_e2e_daemon
# (the epoll fallback, a ring stopped while the tick is slow) and
# test_e2e_spares (a spare fill failing while a session closes) start it
# (start_hooks_hbgd() of tests/e2e/e2e_util.c).
HOOKS_HBGD := $(B)/tests/hbgd-hooks
$(HOOKS_HBGD): $(B)/obj/daemon/hbgd.o $(B)/obj/tests/e2e/hbgd_hooks.o $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -Wl,--wrap=hbgd_new,--wrap=io_probe_multishot,--wrap=session_regions_make \
		-Wl,--wrap=wakeup_thread_park,--wrap=hbgd_config_idle_tick_ms $(SYS_LIBS) -lm
$(B)/obj/tests/e2e/test_e2e_systemd.o $(B)/obj/tests/e2e/e2e_util.o: \
        TEST_EXTRA_CFLAGS = -DHBG_TEST_HBGD_HOOKS='"$(abspath $(HOOKS_HBGD))"'
$(B)/tests/test_e2e_systemd $(B)/tests/test_e2e_daemon $(B)/tests/test_e2e_spares: | $(HOOKS_HBGD)

# The soak (make soak): a real hbgd and producer processes over
# libhbgclient, like the e2e tests; no Check.
SOAK_BIN := $(B)/tests/soak
$(B)/obj/tests/e2e/soak.o: HBG_CFLAGS += -Ilibclient/include
$(SOAK_BIN): $(B)/obj/tests/e2e/soak.o $(B)/obj/tests/e2e/daemon_util.o $(CLIENT_LINKS) | $(HBGD_BIN)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $(filter %.o,$^) -L$(B)/lib -lhbgclient -Wl,-rpath,$(abspath $(B)/lib) \
		$(LDFLAGS) $(HBG_LDFLAGS) -lm

# The config parser is part of hbgd's io side.
$(B)/tests/test_config: $(B)/obj/tests/unit/test_config.o $(CHECK_MAIN) $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) $(SYS_LIBS) -lm

# The kernel module loader (hbgd's io side) and the registry behind it,
# with the example module and the tests' modules.
KMOD_TEST_CFLAGS = -DHBG_TEST_MODULES_DIR='"$(abspath $(B)/tests/modules)"' \
                   -DHBG_TEST_EXAMPLE_MODULE='"$(abspath $(KMOD_EXAMPLE))"'
$(B)/obj/tests/unit/test_kernel_modules.o: TEST_CFLAGS += $(KMOD_TEST_CFLAGS) -Ilibclient/include
$(B)/tests/test_kernel_modules: $(B)/obj/tests/unit/test_kernel_modules.o $(CHECK_MAIN) $(HBGD_LIB) $(CORE_LIB) \
                                $(PROTO_LIB) $(SHM_LIB) | $(TEST_MODULES) $(KMOD_EXAMPLE)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) $(SYS_LIBS) -lm
$(B)/obj/tests/e2e/test_e2e_modules.o: TEST_EXTRA_CFLAGS = $(KMOD_TEST_CFLAGS) $(JSONC_CFLAGS)
$(B)/obj/tests/e2e/test_e2e_shm_attack.o: TEST_EXTRA_CFLAGS = $(KMOD_TEST_CFLAGS)
$(B)/tests/test_e2e_shm_attack: | $(TEST_MODULES) $(KMOD_EXAMPLE)
# The two shared-memory attack tests share tests/e2e/shm_attack_util.c.
$(B)/tests/test_e2e_shm_attack $(B)/tests/test_e2e_shm_control: $(SHM_ATTACK_UTIL_OBJ)
$(B)/tests/test_e2e_modules: TEST_EXTRA_LIBS = $(JSONC_LIBS)
$(B)/tests/test_e2e_modules: | $(TEST_MODULES) $(KMOD_EXAMPLE) $(HBGCTL_BIN)

# hbgd's slow-work thread, its classes and holds, on the io loop it reports to.
$(B)/tests/test_slow_work: $(B)/obj/tests/unit/test_slow_work.o $(CHECK_MAIN) $(HBGD_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) $(SYS_LIBS) -lm

# The control protocol's framing: records, fds and the unpack arena.
$(B)/tests/test_wire: $(B)/obj/tests/unit/test_wire.o $(CHECK_MAIN) $(PROTO_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) \
		$(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c) -lm

# A hostile hbgd's kernel table, as clients import it (proto/kernel_table.c,
# which reads the built-in table of libhbgshm.a).
$(B)/tests/test_kernel_table: $(B)/obj/tests/unit/test_kernel_table.o $(CHECK_MAIN) $(PROTO_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) \
		$(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c) -lm

# hbg-bench's instructions by stage: its profile reader and stage tables.
$(B)/tests/test_instr_stages: $(B)/obj/tests/unit/test_instr_stages.o $(CHECK_MAIN) $(B)/obj/bench/callgrind_files.o \
                              $(B)/obj/bench/instr_stages.o
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm

# libhbgclient's joining of more than 16 fanins, alone: its dummies
# written by the test.
$(B)/tests/test_fanin_join: $(B)/obj/tests/unit/test_fanin_join.o $(CHECK_MAIN) $(B)/obj/libclient/fanin_join.o
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm

# The io loop with io_uring's submissions refused at will (link-time wrap).
$(B)/tests/test_io_loop: $(B)/obj/tests/unit/test_io_loop.o $(CHECK_MAIN) $(HBGD_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -Wl,--wrap=io_uring_submit $(CHECK_LIBS) $(SYS_LIBS) -lm

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(CHECK_MAIN) $(CORE_LIB) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm

# The unordered variant recompiles the protocol with HBG_UNSAFE_UNORDERED_FRONTIER.
$(B)/obj-unordered/%.o: %.c | $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(CHECK_CFLAGS) -DHBG_UNSAFE_UNORDERED_FRONTIER=1 -c -o $@ $<

$(UNSAFE_BIN): $(B)/obj-unordered/tests/unit/test_completion_stress.o \
               $(SHM_SRCS:%.c=$(B)/obj-unordered/%.o)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS)

$(B)/obj-O3/%.o: %.c | $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -O3 $(HBG_CFLAGS) $(TEST_CFLAGS) -c -o $@ $<

$(KERNELS_O3_BIN): $(B)/tests/%_O3: $(B)/obj-O3/tests/unit/%.o $(B)/obj-O3/tests/check_main.o $(B)/obj-O3/daemon/engine/kernels.o \
                   $(B)/obj-O3/daemon/engine/kernels_builtin.o \
                   $(B)/obj-O3/common/kernel_sig.o $(B)/obj-O3/common/text.o
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm

# ---------------------------------------------------------------- fuzz
# Each target (tests/fuzz/fuzz_NAME.c) is linked twice: with
# tests/fuzz/replay_main.c, a test of every build that runs the committed
# corpus tests/fuzz/corpus/NAME/; and, by `make fuzz` (FUZZ=1: clang-14,
# libFuzzer, ASan+UBSan), as build/fuzz/bin/fuzz_NAME.
FUZZ_LINK_config      := $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) $(SHM_LIB)
FUZZ_LINK_protocol    := $(HBGD_LIB) $(CORE_LIB) $(PROTO_LIB) $(SHM_LIB)
FUZZ_LINK_descriptors := $(B)/obj/tests/engine/harness.o $(CORE_LIB) $(SHM_LIB)
# (graph files name slices through the client library: its objects, as
# clang's sanitizers cannot link a shared library without their runtime)
FUZZ_LINK_graph_file  := $(B)/obj/ctl/graph_file.o $(B)/obj/ctl/graph_tensors.o $(B)/obj/ctl/graph_read.o $(CLIENT_PIC)
FUZZ_LINK_text        := $(SHM_LIB)
FUZZ_LIBS = $(SYS_LIBS) $(JSONC_LIBS) -lm

$(B)/obj/tests/fuzz/%.o: tests/fuzz/%.c $(B)/gen/hbg.pb-c.h
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(TEST_CFLAGS) $(SYS_CFLAGS) $(JSONC_CFLAGS) -Ilibclient/include -c -o $@ $<

$(B)/obj/tests/fuzz/%.replay.o: tests/fuzz/replay_main.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -DFUZZ_CORPUS='"$(abspath tests/fuzz/corpus/$*)"' -c -o $@ $<

define fuzz_rules
$(B)/tests/fuzz_replay_$(1): $(B)/obj/tests/fuzz/fuzz_$(1).o $(B)/obj/tests/fuzz/$(1).replay.o \
                             $(B)/obj/tests/fuzz/fuzz_util.o $(FUZZ_LINK_$(1))
	$$(say) LD $$@
	@mkdir -p $$(@D)
	$$(Q)$$(CC) -o $$@ $$(filter %.o %.a,$$^) $$(LDFLAGS) $$(HBG_LDFLAGS) $$(FUZZ_LIBS)

$(B)/bin/fuzz_$(1): $(B)/obj/tests/fuzz/fuzz_$(1).o $(B)/obj/tests/fuzz/fuzz_util.o $(FUZZ_LINK_$(1))
	$$(say) LD $$@
	@mkdir -p $$(@D)
	$$(Q)$$(CC) -o $$@ $$(filter %.o %.a,$$^) $$(LDFLAGS) $$(HBG_LDFLAGS) -fsanitize=fuzzer $$(FUZZ_LIBS)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_rules,$(t))))

# make fuzz FUZZ_SECONDS=N [FUZZ_ONLY="protocol config"]: each target for
# N seconds, new inputs kept in build/fuzz/corpus/NAME, crashes in
# build/fuzz/crashes/NAME (tests/fuzz/run-fuzz.sh). make fuzz-merge adds
# what they found to the committed corpus (minimised, libFuzzer -merge=1).
FUZZ_SECONDS ?= 60
FUZZ_ONLY ?= $(FUZZ_TARGETS)
FUZZ_DEPS := clang-14 libclang-rt-14-dev

fuzz fuzz-merge: deps
	$(call install_missing,$(FUZZ_DEPS))
	$(Q)$(MAKE) --no-print-directory FUZZ=1 $(FUZZ_ONLY:%=build/fuzz/bin/fuzz_%)
	$(Q)tests/fuzz/run-fuzz.sh $(if $(filter fuzz-merge,$@),--merge) $(FUZZ_SECONDS) $(FUZZ_ONLY)

# ---------------------------------------------------------------- deps
# Debian packages needed to build and test. As root they are installed; as
# anyone else the exact apt-get line is printed and make stops.
# valgrind: test-bench.sh's run of the instruction counts by stage.
BUILD_DEPS := gcc make libc6-dev pkgconf check liburing-dev libprotobuf-c-dev protobuf-c-compiler systemd \
              libsystemd-dev libjson-c-dev spin man-db groff-base openmpi-bin libopenmpi-dev prometheus \
              python3-dev python3-numpy python3-setuptools python3-pytest python3-hypothesis python3-pip python3-venv \
              valgrind
# valgrind: instruction counts; gnuplot-nox: the plots; g++, libtbb-dev,
# libstarpu-dev: the peer runtimes (bench-peers); python3-numpy, python3-dask:
# the Python rows' peers (hbg-bench --python).
BENCH_DEPS := valgrind gnuplot-nox g++ pkgconf libtbb-dev libstarpu-dev python3-numpy python3-dask

define install_missing
	@command -v dpkg-query >/dev/null 2>&1 || { echo "deps: not a Debian system, assuming $(1) are present"; exit 0; }; \
	missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	else \
	  echo "deps: missing Debian packages; install them with:"; \
	  echo "  sudo apt-get install -y$$missing"; \
	  exit 1; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_DEPS))

# After deps: the two must not run apt-get at once (make -j), and nothing
# of ours builds without BUILD_DEPS (protobuf-c-compiler, liburing-dev, ...).
bench-deps: deps
	$(call install_missing,$(BENCH_DEPS))

# ---------------------------------------------------------------- test
# tests/scripts/check-abi.sh: the exported symbols of libhbgclient.so are exactly
# the globals of libclient/libhbgclient.map.
# tests/scripts/test-install.sh: make install/uninstall into a temporary DESTDIR
# and build and run the example against the installed files (it installs
# build/, so only without sanitizers).
# tests/scripts/test-bench.sh: hbg-bench's comparison at toy sizes (valgrind for one run;
# of the peers, the floor and OpenMP): its CSVs, overhead.dat and --compare.
# tests/scripts/test-model.sh: the Promela models checked with spin, the completion
# protocol's, the host-task hand-off's, the direct wake-up's and the tensor
# wait's (docs/RUNTIME_LOGIC.md §15, §15.1, §15.2, §15.3), each
# with its mutants; it builds nothing of ours.
# tests/scripts/check-man.sh: every exported call has its man page with ERRORS and
# THREAD SAFETY, links resolve, man-db and groff have no warnings (man-db,
# groff-base); it builds nothing of ours.
# tests/scripts/test-mpi.sh: examples/mpi_producer.c under mpirun, 3 ranks against
# one private hbgd (docs/SCALING.md).
# tests/scripts/test-completion.sh: the bash completion against the built hbgctl
# and hbgd (the script asks them for the names).
# tests/scripts/test-python.sh: the Python package's pytest suite (python/tests)
# against this build's extension, library and hbgd, in every build.
# tests/scripts/check-layers.sh: no product file calls up the stated order of
# tests/scripts/layers.txt (nm of the objects), and a call up fed to it fails it.
# tests/scripts/test-prometheus.sh: Debian's prometheus scrapes `hbgctl metrics
# --listen` of a private hbgd; a counter, a histogram quantile and the
# counter's type read back through its HTTP API (package prometheus).
ifeq ($(SANITIZE)$(RELEASE),)
  TEST_PLAIN_ONLY := tests/scripts/test-install.sh tests/scripts/test-bench.sh tests/scripts/test-model.sh tests/scripts/check-man.sh \
                     tests/scripts/test-mpi.sh tests/scripts/test-completion.sh tests/scripts/check-layers.sh \
                     tests/scripts/test-prometheus.sh
  # The two peers gcc alone builds (bench, below): test-bench.sh runs them.
  TEST_PROGRAMS := $(BENCH_BIN) $(HBGD_BIN) $(HBGCTL_BIN) $(MPI_EXAMPLE_BIN) $(KMOD_EXAMPLE) $(PY_BENCH) \
                   $(B)/bin/hbg-bench-floor $(B)/bin/hbg-bench-openmp
else
  TEST_PLAIN_ONLY :=
  TEST_PROGRAMS :=
endif
# run-tests.sh runs as many tests at once as there are cores (HBG_TEST_JOBS,
# 1 for one at a time) in this order: those that must run alone, then the
# long ones, longest first, so that no long test starts last and runs
# alone. Alone: test_e2e_affinity pins hbgd and itself to CPUs;
# test_e2e_host_threads counts its workers' sleeps, which a busy
# neighbour multiplies (chain_sleeps: 285 on 4 workers against 70 on one).
TEST_ALONE := test_e2e_affinity test_e2e_host_threads
TEST_LONG := $(TEST_ALONE) test-model.sh test_e2e_hostile test_e2e_hostile_engine test_e2e_hostile_limits \
             test_e2e_hostile_fair test_e2e_daemon test-python.sh test-bench.sh \
             test-install.sh test_engine_behaviour test_engine_wakeups test_e2e_hbgctl test_e2e_hbgctl_graphs \
             test_e2e_hbgctl_hbgd test_completion_stress \
             test_engine_stress test_engine_differential test_e2e_errors test_e2e_proto_attack
TEST_ALL := $(TEST_RUN) tests/scripts/check-abi.sh tests/scripts/test-python.sh $(TEST_PLAIN_ONLY)
TEST_ORDER := $(foreach t,$(TEST_LONG),$(filter %/$(t),$(TEST_ALL))) \
              $(filter-out $(addprefix %/,$(TEST_LONG)),$(TEST_ALL))
test: $(SHM_LIB) $(TEST_RUN) $(CLIENT_LINKS) $(TEST_PROGRAMS) python $(HBGD_BIN) $(KMOD_EXAMPLE)
	$(Q)B=$(B) STRESS=$(STRESS) HBG_TEST_ALONE="$(TEST_ALONE)" tests/scripts/run-tests.sh $(TEST_ORDER)

model:
	$(Q)tests/scripts/test-model.sh

# Builds use every core (JOBS); run-tests.sh runs the tests HBG_TEST_JOBS
# at a time (default the number of cores).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) test
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=address,undefined test
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=thread test
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) RELEASE=1 test

# make hostile: the attack and fault tests at full scale (HBG_TEST_SCALE=1;
# make check runs them at a tenth). make soak: 8 producers against one hbgd
# for SOAK_SECONDS; CSV and plot of hbgd's fds and memory in $(B)/soak/.
HOSTILE_BINS := $(HOSTILE_TESTS:%=$(B)/tests/%) $(B)/tests/test_e2e_faults $(B)/tests/test_e2e_shm_control \
                $(patsubst tests/e2e/%.c,$(B)/tests/%,$(wildcard tests/e2e/test_e2e_*attack*.c))
SOAK_SECONDS ?= 600

hostile: deps
	$(Q)$(MAKE) --no-print-directory all $(HOSTILE_BINS)
	$(Q)HBG_TEST_SCALE=1 B=$(B) tests/scripts/run-tests.sh $(HOSTILE_BINS)

soak: deps
	$(call install_missing,gnuplot-nox)
	$(Q)$(MAKE) --no-print-directory all $(SOAK_BIN)
	$(Q)SOAK_SECONDS=$(SOAK_SECONDS) $(SOAK_BIN) --out $(B)/soak

# ---------------------------------------------------------------- demo
# Start a private hbgd, run the example against it, stop hbgd. hbgd is
# stopped (SIGTERM, then waited for) and the directory removed on every
# exit path, the example's failure included (trap); make fails if the
# example failed. hbgd's log is shown at the end.
demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)dir=$$(mktemp -d "$${TMPDIR:-/tmp}/hbg-demo.XXXXXX") || exit 1; \
	pid=; \
	stop() { \
	  if [ -n "$$pid" ]; then kill -TERM "$$pid" 2>/dev/null; wait "$$pid"; pid=; fi; \
	  if [ -s "$$dir/hbgd.log" ]; then echo "--- hbgd log"; cat "$$dir/hbgd.log"; fi; \
	  rm -rf "$$dir"; \
	}; \
	trap stop EXIT; trap 'exit 130' INT TERM; \
	$(B)/bin/hbgd --socket "$$dir/hbgd.sock" 2>"$$dir/hbgd.log" & pid=$$!; \
	i=0; \
	until [ -S "$$dir/hbgd.sock" ] && grep -q 'ready:' "$$dir/hbgd.log"; do \
	  kill -0 "$$pid" 2>/dev/null || { echo "demo: hbgd exited before it was ready" >&2; exit 1; }; \
	  i=$$((i + 1)); \
	  [ $$i -le 500 ] || { echo "demo: hbgd not ready after 5 s" >&2; exit 1; }; \
	  sleep 0.01; \
	done; \
	echo "demo: hbgd (pid $$pid) on $$dir/hbgd.sock"; \
	HBG_SOCKET="$$dir/hbgd.sock" $(EXAMPLE_BIN); rc=$$?; \
	echo "--- hbgctl status"; \
	$(HBGCTL_BIN) --socket "$$dir/hbgd.sock" status || rc=1; \
	[ $$rc -eq 0 ] || echo "demo: the example failed (exit $$rc)" >&2; \
	exit $$rc

# ---------------------------------------------------------------- bench
# make bench: the comparison (hbg-bench, docs/PERFORMANCE.md); it starts
# its own hbgd and producers, and keeps a trace of one wavefront graph
# (trace.json, trace.svg). BENCH_ARGS=--quick for the short one.
# make bench-micro: the protocol and engine micro-benchmarks.
bench: deps bench-deps bench-peers
	$(Q)$(MAKE) --no-print-directory all $(PY_BENCH)
	$(Q)$(BENCH_BIN) --out $(B)/bench --python --trace $(BENCH_ARGS)

bench-micro: deps bench-deps
	$(Q)$(MAKE) --no-print-directory $(BENCH_BIN)
	$(Q)B=$(B) bench/run-bench.sh

# The peers (bench/peers/peer.h): the same graphs (bench/dag.h) built and
# run by other task runtimes, one program each. Not part of `all`: only
# `make bench-peers` (and `make bench`) needs TBB, StarPU and g++, which
# bench-deps installs. The floor and OpenMP need only gcc (and its
# libgomp): the plain `make test` builds those two for test-bench.sh.
# Each links peer_main.o, the graphs and the core library (dag.c runs the
# daemon's gemm kernel).
BENCH_PEERS := $(B)/bin/hbg-bench-tbb $(B)/bin/hbg-bench-openmp $(B)/bin/hbg-bench-starpu \
               $(B)/bin/hbg-bench-floor
# Taskflow is header-only and not a Debian package: its peer is built when
# TASKFLOW_INC names the directory that holds taskflow/taskflow.hpp
# (hbg-bench skips it, saying so, when it is not built).
TASKFLOW_INC ?=
ifneq ($(TASKFLOW_INC),)
  BENCH_PEERS += $(B)/bin/hbg-bench-taskflow
endif
PEER_COMMON := $(B)/obj/bench/peers/peer_main.o $(B)/obj/bench/dag.o $(B)/obj/bench/bench_util.o \
               $(CORE_LIB) $(SHM_LIB)
# CXX is make's default, g++ (bench-deps installs it).
CXXFLAGS ?= -O2 -g
# C++ has no -Wstrict-prototypes/-Wmissing-prototypes; the rest as WARN.
CXX_WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wformat=2 -Wundef -Wvla -Wcast-align \
            -Wwrite-strings -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers
# Evaluated only when a peer rule runs, i.e. after bench-deps.
TBB_CFLAGS    = $(shell pkg-config --cflags tbb 2>/dev/null)
TBB_LIBS      = $(shell pkg-config --libs tbb 2>/dev/null || echo -ltbb)
# StarPU's headers declare some functions without prototypes: included as
# system headers so that our -Wstrict-prototypes stays on for our code.
STARPU_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags starpu-1.3 2>/dev/null))
STARPU_LIBS   = $(shell pkg-config --libs starpu-1.3 2>/dev/null || echo -lstarpu-1.3)

bench-peers: deps bench-deps
	$(Q)$(MAKE) --no-print-directory $(BENCH_PEERS)

$(B)/obj/bench/peers/tbb.o: bench/peers/tbb.cpp
	$(say) CXX $@
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) -std=c++17 -D_GNU_SOURCE $(CXX_WARN) -pthread -MMD -MP -I. $(SAN_CFLAGS) \
		$(TBB_CFLAGS) -c -o $@ $<

$(B)/bin/hbg-bench-tbb: $(B)/obj/bench/peers/tbb.o $(PEER_COMMON)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CXX) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(TBB_LIBS) -lm

$(B)/obj/bench/peers/openmp.o: HBG_CFLAGS += -fopenmp
$(B)/bin/hbg-bench-openmp: $(B)/obj/bench/peers/openmp.o $(PEER_COMMON)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -fopenmp -lm

$(B)/obj/bench/peers/starpu.o: SYS_CFLAGS += $(STARPU_CFLAGS)
$(B)/bin/hbg-bench-starpu: $(B)/obj/bench/peers/starpu.o $(PEER_COMMON)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(STARPU_LIBS) -lm

# Taskflow 4 needs C++20; its headers as system headers (our warnings are
# for our code). -Wnull-dereference fires in std::function once g++ 12
# inlines Taskflow's executor into this file: off for this one object.
$(B)/obj/bench/peers/taskflow.o: bench/peers/taskflow.cpp
	$(say) CXX $@
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) -std=c++20 -D_GNU_SOURCE $(CXX_WARN) -pthread -MMD -MP -I. $(SAN_CFLAGS) \
		-Wno-null-dereference -isystem $(TASKFLOW_INC) -c -o $@ $<

$(B)/bin/hbg-bench-taskflow: $(B)/obj/bench/peers/taskflow.o $(PEER_COMMON)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CXX) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -pthread -lm

$(B)/bin/hbg-bench-floor: $(B)/obj/bench/peers/floor.o $(PEER_COMMON)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -lm

# ---------------------------------------------------------------- install
# Every page of docs/ (a wildcard: the installed set is always the tree's;
# a hand-kept list had left docs/SECURITY.md out) and the examples, with
# the Makefile that builds them against the installed hbgclient.pc.
INSTALL_DOCS := README.md LICENSE $(wildcard docs/*.md) systemd/hbgd.conf.example
INSTALL_EXAMPLES := $(wildcard examples/*.c examples/*.json) examples/Makefile examples/README.md
EXAMPLEDIR := $(DOCDIR)/examples
INSTALL_PY_EXAMPLES := $(wildcard examples/python/*.py)
# The Python package, where Debian's python3 looks for packages of the
# prefix (its own is externally managed: no pip into it): /usr's in
# lib/python3/dist-packages, any other prefix's (/usr/local, which it
# searches, or one on PYTHONPATH) in lib/python3.X/dist-packages. The
# module is linked at install time: an rpath to LIBDIR unless the loader
# searches it.
PY_VERSION_DIR = $(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHONDIR ?= $(if $(filter /usr /usr/,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/$(PY_VERSION_DIR)/dist-packages)
PY_INSTALL_RPATH = $(if $(filter /usr/lib /usr/lib/ /lib,$(LIBDIR)),,-Wl,-rpath,$(LIBDIR))
# hbgd.service and hbg-exporter.service name the installed paths: generated at install time.
SERVICE_SED := -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g'
# hbgclient.pc too: the one in $(B)/lib/pkgconfig keeps the PREFIX of the
# build, which need not be the PREFIX given to `make install`.
PC_SED := -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
          -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|'

# The dynamic loader finds a library in a directory of its search path
# (/etc/ld.so.conf: on Debian /usr/local/lib too) only once ldconfig has
# refreshed its cache. A real install (DESTDIR empty) asks $(LDCONFIG)
# which directories it searches (-v -N -X: list, build nothing): only when
# LIBDIR is one of them does the cache concern this install, and then root
# runs $(LDCONFIG) and anyone else is told to. A LIBDIR of a private prefix
# (/opt/hbg, a home directory, a test's directory) leaves the system's
# cache alone: install says how programs find the library there (rpath,
# LD_LIBRARY_PATH), or how an administrator adds the directory to the
# search path (docs/OPERATIONS.md). A staged install (DESTDIR set) leaves
# it to the package's trigger. LDCONFIG takes options (tests/scripts/test-install.sh:
# a private cache and configuration).
LDCONFIG ?= ldconfig
HBG_SONAME_PATH = $(LIBDIR)/libhbgclient.so.$(SOVERSION)
ifeq ($(DESTDIR),)
define refresh_ldcache
	@if ! command -v $(firstword $(LDCONFIG)) >/dev/null 2>&1; then \
	  echo "ldconfig: $(firstword $(LDCONFIG)) not found; the loader needs $(LIBDIR) in its search path"; \
	  exit 0; \
	fi; \
	system=; \
	for d in $$($(LDCONFIG) -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do \
	  [ "$$d" -ef "$(LIBDIR)" ] && system=1; \
	done; \
	if [ -z "$$system" ]; then \
	  [ "$(1)" = install ] || exit 0; \
	  echo "ldconfig: not run: $(LIBDIR) is not in the dynamic loader's search path: programs will not find"; \
	  echo "  libhbgclient.so.$(SOVERSION) there by themselves. Link them with -Wl,-rpath,$(LIBDIR), or set"; \
	  echo "  LD_LIBRARY_PATH=$(LIBDIR) (hbgctl finds it without either). To add the directory to the search"; \
	  echo "  path instead, as root: echo $(LIBDIR) > /etc/ld.so.conf.d/hbg.conf; ldconfig"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "ldconfig: not root; run 'sudo $(LDCONFIG)' to refresh the dynamic loader's cache"; \
	else \
	  echo "$(LDCONFIG)"; \
	  $(LDCONFIG) || exit 1; \
	  if [ -e "$(HBG_SONAME_PATH)" ]; then \
	    found=; \
	    for f in $$($(LDCONFIG) -p | sed -n 's|^[[:space:]]*libhbgclient\.so\.$(SOVERSION) .* => ||p'); do \
	      [ "$$f" -ef "$(HBG_SONAME_PATH)" ] && found=1; \
	    done; \
	    [ -n "$$found" ] || echo "ldconfig: the cache does not name $(HBG_SONAME_PATH) after $(LDCONFIG)"; \
	  fi; \
	fi
endef
endif

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR)/hbg
	install -m 0755 $(HBGD_BIN) $(HBGCTL_BIN) $(DESTDIR)$(BINDIR)/
	install -m 0755 $(CLIENT_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(CLIENT_SO)) $(DESTDIR)$(LIBDIR)/libhbgclient.so.$(SOVERSION)
	ln -sf $(notdir $(CLIENT_SO)) $(DESTDIR)$(LIBDIR)/libhbgclient.so
	sed $(PC_SED) libclient/hbgclient.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/hbgclient.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/hbgclient.pc
	install -m 0644 libclient/include/hbg/hbg.h libclient/include/hbg/kernel.h $(DESTDIR)$(INCLUDEDIR)/hbg/
	install -d $(DESTDIR)$(LIBDIR)/hbg/kernels
	install -m 0644 $(KMOD_EXAMPLE) $(DESTDIR)$(LIBDIR)/hbg/kernels/
	install -m 0644 $(INSTALL_DOCS) $(DESTDIR)$(DOCDIR)/
	install -d $(DESTDIR)$(EXAMPLEDIR) $(DESTDIR)$(EXAMPLEDIR)/python $(DESTDIR)$(PYTHONDIR)/hbg
	install -m 0644 $(INSTALL_EXAMPLES) $(DESTDIR)$(EXAMPLEDIR)/
	install -m 0644 $(INSTALL_PY_EXAMPLES) $(DESTDIR)$(EXAMPLEDIR)/python/
	install -m 0644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/hbg/
	$(CC) -shared -o $(DESTDIR)$(PYTHONDIR)/hbg/$(notdir $(PY_MODULE)) $(PY_OBJS) -L$(B)/lib -lhbgclient \
		$(PY_INSTALL_RPATH) $(LDFLAGS) $(HBG_LDFLAGS)
	chmod 0644 $(DESTDIR)$(PYTHONDIR)/hbg/$(notdir $(PY_MODULE))
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(SYSCONFDIR)/hbg
	sed $(SERVICE_SED) systemd/hbgd.service.in > $(DESTDIR)$(UNITDIR)/hbgd.service
	sed $(SERVICE_SED) systemd/hbg-exporter.service.in > $(DESTDIR)$(UNITDIR)/hbg-exporter.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/hbgd.service $(DESTDIR)$(UNITDIR)/hbg-exporter.service
	install -m 0644 systemd/hbgd.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/hbg.sysusers $(DESTDIR)$(SYSUSERSDIR)/hbg.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/hbg/hbgd.conf ] || \
		install -m 0644 systemd/hbgd.conf.example $(DESTDIR)$(SYSCONFDIR)/hbg/hbgd.conf
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man8
	for f in $(MAN1) $(MAN3) $(MAN5) $(MAN8); do \
	  d=$(DESTDIR)$(MANDIR)/man$${f##*.}/$${f##*/}; \
	  sed $(MAN_SED) $$f > $$d && chmod 0644 $$d || exit 1; \
	done
	install -d $(DESTDIR)$(BASHCOMPDIR)
	install -m 0644 ctl/hbg-completion.bash $(DESTDIR)$(BASHCOMPDIR)/hbgctl
	install -m 0644 ctl/hbg-completion.bash $(DESTDIR)$(BASHCOMPDIR)/hbgd
	$(call refresh_ldcache,install)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hbgd $(DESTDIR)$(BINDIR)/hbgctl
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(CLIENT_SO)) $(DESTDIR)$(LIBDIR)/libhbgclient.so.$(SOVERSION) \
		$(DESTDIR)$(LIBDIR)/libhbgclient.so $(DESTDIR)$(LIBDIR)/pkgconfig/hbgclient.pc
	rm -f $(DESTDIR)$(INCLUDEDIR)/hbg/hbg.h $(DESTDIR)$(INCLUDEDIR)/hbg/kernel.h
	rm -f $(DESTDIR)$(LIBDIR)/hbg/kernels/$(notdir $(KMOD_EXAMPLE))
	-rmdir $(DESTDIR)$(LIBDIR)/hbg/kernels $(DESTDIR)$(LIBDIR)/hbg 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS)))
	rm -f $(addprefix $(DESTDIR)$(EXAMPLEDIR)/,$(notdir $(INSTALL_EXAMPLES)))
	rm -f $(addprefix $(DESTDIR)$(EXAMPLEDIR)/python/,$(notdir $(INSTALL_PY_EXAMPLES)))
	rm -f $(addprefix $(DESTDIR)$(PYTHONDIR)/hbg/,$(notdir $(PY_FILES) $(PY_MODULE)))
	rm -rf $(DESTDIR)$(PYTHONDIR)/hbg/__pycache__
	-rmdir $(DESTDIR)$(PYTHONDIR)/hbg 2>/dev/null
# Where 1.6.0 put it for every prefix (lib/python3/dist-packages).
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/hbg/,$(notdir $(PY_FILES) $(PY_MODULE)))
	rm -rf $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/hbg/__pycache__
	-rmdir $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/hbg $(DESTDIR)$(PREFIX)/lib/python3/dist-packages \
		$(DESTDIR)$(PREFIX)/lib/python3 2>/dev/null
	-rmdir $(DESTDIR)$(EXAMPLEDIR)/python $(DESTDIR)$(EXAMPLEDIR) 2>/dev/null
	rm -f $(DESTDIR)$(UNITDIR)/hbgd.service $(DESTDIR)$(UNITDIR)/hbgd.socket $(DESTDIR)$(UNITDIR)/hbg-exporter.service \
		$(DESTDIR)$(SYSUSERSDIR)/hbg.conf
	! cmp -s systemd/hbgd.conf.example $(DESTDIR)$(SYSCONFDIR)/hbg/hbgd.conf || \
		rm -f $(DESTDIR)$(SYSCONFDIR)/hbg/hbgd.conf
	-rmdir $(DESTDIR)$(SYSCONFDIR)/hbg 2>/dev/null
	-rmdir $(DESTDIR)$(DOCDIR) $(DESTDIR)$(INCLUDEDIR)/hbg 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8)))
	rm -f $(DESTDIR)$(BASHCOMPDIR)/hbgctl $(DESTDIR)$(BASHCOMPDIR)/hbgd
	$(call refresh_ldcache,uninstall)

clean:
	rm -rf build

.PHONY: all deps bench-deps bench-peers bench-micro test model check hostile soak bench demo install uninstall python \
        clean fuzz fuzz-merge
.SECONDARY:

-include $(shell find $(B) -name '*.d' 2>/dev/null)
