# hbg: one plain Makefile (model: liburing). See README.md for the two commands.
#
#   make                 build everything into build/ (bin/, lib/, obj/)
#   make check           install missing Debian deps, build, run every test,
#                        then the same tests under ASan+UBSan and under TSan
#   make test            run the tests of one build (honours SANITIZE=)
#   make bench           micro-benchmarks: table + CSV in build/bench/
#   make SANITIZE=address,undefined test  |  make SANITIZE=thread test
#   make V=1 ...         show the commands
#   make install PREFIX=/usr DESTDIR=/tmp/stage ; make uninstall ; make clean
#   STRESS=long make test  longer stress runs

VERSION := 0.1.0
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DOCDIR  ?= $(PREFIX)/share/doc/hbg

CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=

comma := ,
ifeq ($(SANITIZE),)
  B := build
  SAN_CFLAGS :=
else
  B := build/san-$(subst $(comma),-,$(SANITIZE))
  SAN_CFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wundef -Wvla -Wcast-align -Wwrite-strings \
        -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers
HBG_CFLAGS  := -std=gnu11 -D_GNU_SOURCE $(WARN) -fvisibility=hidden -pthread \
               -MMD -MP -I. $(SAN_CFLAGS) $(EXTRA_CFLAGS)
HBG_LDFLAGS := -pthread $(SAN_CFLAGS)

# Evaluated only when a rule needs them, i.e. after `make deps` has run.
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

ifeq ($(V),1)
  Q :=
  say = @:
else
  Q := @
  say = @printf '  %-6s %s\n'
endif

# ---------------------------------------------------------------- sources
SHM_SRCS := shm/geometry.c shm/layout.c shm/completion.c shm/failsafe_heap.c
SHM_OBJS := $(SHM_SRCS:%.c=$(B)/obj/%.o)
SHM_LIB  := $(B)/lib/libhbgshm.a

BENCH_SRCS := bench/hbg_bench.c bench/bench_completion.c
BENCH_BIN  := $(B)/bin/hbg-bench

TEST_NAMES := test_geometry test_flag_index test_watermark test_failsafe_heap \
              test_completion_stress
TEST_BINS  := $(TEST_NAMES:%=$(B)/tests/%)
# The same stress test built with the store->load ordering removed: it must
# be able to catch the watermark freeze (docs/RUNTIME_LOGIC.md §4).
# Only meaningful without sanitizers (they slow the race window shut and
# TSan has nothing to say about a weaker-but-race-free order).
UNSAFE_BIN := $(B)/tests/test_completion_stress_unordered
ifeq ($(SANITIZE),)
  TEST_RUN := $(TEST_BINS) $(UNSAFE_BIN)
else
  TEST_RUN := $(TEST_BINS)
endif

PROGRAMS := $(BENCH_BIN)

all: $(SHM_LIB) $(PROGRAMS)

# ---------------------------------------------------------------- rules
$(B)/obj/%.o: %.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) -c -o $@ $<

$(SHM_LIB): $(SHM_OBJS)
	$(say) AR $@
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(BENCH_BIN): $(BENCH_SRCS:%.c=$(B)/obj/%.o) $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) -lm

$(B)/obj/tests/%.o: tests/%.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<

$(B)/tests/%: $(B)/obj/tests/%.o $(SHM_LIB)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS) -lm

# The unordered variant recompiles the protocol with HBG_UNSAFE_UNORDERED_FRONTIER.
$(B)/obj-unordered/%.o: %.c
	$(say) CC $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(HBG_CFLAGS) $(CHECK_CFLAGS) -DHBG_UNSAFE_UNORDERED_FRONTIER=1 -c -o $@ $<

$(UNSAFE_BIN): $(B)/obj-unordered/tests/test_completion_stress.o \
               $(SHM_SRCS:%.c=$(B)/obj-unordered/%.o)
	$(say) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS) $(HBG_LDFLAGS) $(CHECK_LIBS)

# ---------------------------------------------------------------- deps
# Debian packages needed to build and test. As root they are installed; as
# anyone else the exact apt-get line is printed and make stops.
BUILD_DEPS := gcc make pkgconf check
BENCH_DEPS := valgrind

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

bench-deps:
	$(call install_missing,$(BENCH_DEPS))

# ---------------------------------------------------------------- test
test: $(SHM_LIB) $(TEST_RUN)
	$(Q)B=$(B) STRESS=$(STRESS) tests/run-tests.sh $(TEST_RUN)

check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory test
	$(Q)$(MAKE) --no-print-directory SANITIZE=address,undefined test
	$(Q)$(MAKE) --no-print-directory SANITIZE=thread test

# ---------------------------------------------------------------- bench
bench: bench-deps
	$(Q)$(MAKE) --no-print-directory $(BENCH_BIN)
	$(Q)B=$(B) bench/run-bench.sh

# ---------------------------------------------------------------- install
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(PROGRAMS) $(DESTDIR)$(BINDIR)/
	install -m 0644 README.md LICENSE docs/RUNTIME_LOGIC.md $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(PROGRAMS)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,README.md LICENSE RUNTIME_LOGIC.md)
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null

clean:
	rm -rf build

.PHONY: all deps bench-deps test check bench install uninstall clean
.SECONDARY:

-include $(shell find $(B) -name '*.d' 2>/dev/null)
