# redlockd: build, test and run.  See README.md.
#
#   make            build build/redlockd and build/redlockctl
#   make check      install missing Debian packages, build, run every test
#   make run        five local masters and redlockd with conf/dev.yml
#   make test       every suite of tests/ (tests/README.md lists them)
#   make check-kinds [CASE=name]
#                   one suite (build/check_kinds), or one test case of it;
#                   also make test-one SUITE=check_kinds [CASE=name]
#   make check-upgrade [UPGRADE_FROM=<commit>]
#                   the last release (PREV_RELEASE, built from the repository's
#                   history) beside this build; UPGRADE_FROM runs another past build
#   make check SANITIZE=address,undefined
#                   every suite built with sanitizers (in build-san/)
#   make check-docs    the docs link no file outside the repository and
#                   mention no issue numbers (make check runs it)
#   make check-lua  luacheck on the masters' scripts (daemon/scripts/)
#   make check-alerts  the Prometheus rules (promtool check and test rules) and
#                   the Grafana dashboard against a real daemon's /metrics
#   make check-hardening  the binaries are hardened as a Debian package's are
#   make check-model  SPIN on the set protocol's model (proto/model/)
#   make check-faults  fault-injection suite and a short fuzzing run
#   make fuzz       libFuzzer targets (clang), FUZZ_SECONDS each
#   make bench      the benchmark table (tests/bench/), BENCH_SECONDS per mode
#   make bench BASE=<commit>, make bench-compare BASE=<commit>
#                   the table and (or only) this daemon against that commit's,
#                   interleaved on the same masters, as ratios (report only)
#   make install    binaries, units, example config, man pages (PREFIX, DESTDIR)
#   make clean

CC      ?= cc
PKGS    := libevent libevent_openssl openssl hiredis yaml-0.1
# What building and `make run` need (deps-run), and what the tests add (deps).
RUN_DEB_PKGS := build-essential pkg-config libevent-dev libhiredis-dev libyaml-dev \
                redis-server netcat-openbsd libssl-dev openssl libbsd-dev
DEB_PKGS := $(RUN_DEB_PKGS) check faketime libsystemd-dev lua-check python3-yaml
# The client libraries' toolchains (clients/): installed one by one, and a
# language whose toolchain cannot be installed is skipped by make check with
# one line saying so.
CLIENT_DEB_PKGS := python3 python3-pip python3-setuptools python3-venv nodejs golang-go
VERSION := 0.2.0

# Lazy (=) so that pkg-config runs after `make deps` installed the packages.
# libsystemd (sd_notify, socket activation) is used when found, and the
# daemon builds and runs without it (NO_SYSTEMD=1 leaves it out).
HAVE_SYSTEMD = $(if $(NO_SYSTEMD),,$(shell pkg-config --exists libsystemd 2>/dev/null && echo yes))
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) $(CLIENT_PKGS) 2>/dev/null) \
             $(if $(HAVE_SYSTEMD),-DHAVE_LIBSYSTEMD $(shell pkg-config --cflags libsystemd))
# The client library (client/client.c) does TLS with OpenSSL: every program
# that links it needs CLIENT_LIBS, and the test programs get them through
# PKG_LIBS.
CLIENT_PKGS := openssl
# Modules of which only headers are used, never linked: libbsd's
# <bsd/sys/tree.h> (the lock table's red-black tree, daemon/lock.c).
HEADER_PKGS := libbsd
CLIENT_LIBS = $(shell pkg-config --libs $(CLIENT_PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(CLIENT_LIBS) \
             $(if $(HAVE_SYSTEMD),$(shell pkg-config --libs libsystemd))
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2
CFLAGS  ?= -O2 -g
# Hardened as Debian builds its packages (dpkg-buildflags, hardening=+all):
# stack protector and clash protection, control-flow protection, fortified
# libc calls, a position-independent executable, full RELRO with BIND_NOW.
# A package build's own CPPFLAGS, CFLAGS and LDFLAGS come on top (the same
# flags again are harmless).  make check-hardening reads the binaries.  Not
# with SANITIZE (the sanitizers bring their own checks).
HARDEN_CFLAGS  = -fstack-protector-strong -fstack-clash-protection -fcf-protection -fPIE \
                 $(if $(filter -O0,$(CFLAGS)),,-D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS = -pie -Wl,-z,relro -Wl,-z,now
ALL_CFLAGS = -std=gnu11 $(WARN) $(HARDEN_CFLAGS) $(CPPFLAGS) $(CFLAGS) -D_GNU_SOURCE \
             -DREDLOCKD_VERSION='"$(VERSION)"' -I. -I$(B)/gen $(PKG_CFLAGS) -MMD -MP

B := build
# NO_SYSTEMD=1 builds without libsystemd, in build-nosd/ (objects differ).
ifneq ($(NO_SYSTEMD),)
B := build-nosd
endif
# SANITIZE=address,undefined builds everything with those sanitizers in
# build-san/.  Every process aborts on its first report and writes it to
# build-san/san-logs/ (a daemon's report at exit, a leak say, comes after
# its test has passed): make test fails when any report was written.
ifneq ($(SANITIZE),)
B := build-san
CFLAGS := -O1 -g -fsanitize=$(SANITIZE) -fno-omit-frame-pointer \
          -fno-sanitize-recover=all
HARDEN_CFLAGS :=
HARDEN_LDFLAGS :=
CK_MULT := 10
SAN_LOGS := $(CURDIR)/$(B)/san-logs
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=1:log_path=$(SAN_LOGS)/asan
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1:log_path=$(SAN_LOGS)/ubsan
endif
PROTO_SRC  := proto/proto.c
CONF_SRC   := conf/conf.c
DAEMON_SRC := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
LIB_SRC    := $(PROTO_SRC) $(CONF_SRC) $(DAEMON_SRC)
LIB_OBJ    := $(LIB_SRC:%.c=$(B)/obj/%.o)
# The client side of the protocol (client/client.c): redlockctl, the test
# harness, the fault suite's rmw-client and the bench link it; the daemon
# does not.
CLIENT_OBJ := $(B)/obj/client/client.o
HARNESS_OBJ := $(B)/obj/tests/harness.o $(CLIENT_OBJ)
# What the end-to-end suites link: the harness and the Check helpers they
# share (tests/expect.c; the fault suite links the harness alone).
SUITE_OBJ  := $(HARNESS_OBJ) $(B)/obj/tests/expect.o

UNIT_TESTS := check_proto check_conf check_redlock check_lease check_client check_drift \
              check_admit check_readq check_layout check_waiter check_reach
# Unit suites are named for the module they test, end-to-end suites for
# the feature they cover (tests/README.md is the index).
INTEG_TESTS := check_session check_handover check_kinds check_lease_mode check_fence check_check \
               check_who \
               check_masters check_quarantine check_limits check_auth check_cluster check_tls \
               check_tls_masters check_metrics check_ops check_redlockctl check_scripts \
               check_registry check_upgrade check_strangers check_page check_sets check_delay
TEST_BINS  := $(addprefix $(B)/,$(UNIT_TESTS) $(INTEG_TESTS))

CK_TIMEOUT ?= 120
CK_MULT ?= 1

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Past releases, built from the repository's history for the upgrade
# tests (tests/check_upgrade.c; the fault suite's upgrade schedules):
# tests/build-release.sh builds a commit's own tree with its own Makefile
# into build/release-<commit>/ (one build for every build directory, like
# the redis-server of the clock tests), once: its stamp, built, is only
# made again when missing.  A clone without that history (shallow) is told
# to run git fetch --unshallow.
#   PREV_RELEASE          the last released build (0.1.0), which upgrades
#                         start from
#   PREV_RELEASE_CONTROL  the build from just before the keys of shared and
#                         counted holds moved: beside this one it grants a
#                         name twice (the upgrade schedules' negative control)
#   UPGRADE_FROM          the build make test and make check-upgrade run
#                         beside this one (make check-upgrade
#                         UPGRADE_FROM=$(PREV_RELEASE_CONTROL) shows the suite fail)
PREV_RELEASE := f9052d6
PREV_RELEASE_CONTROL := 371492b
UPGRADE_FROM ?= $(PREV_RELEASE)
PREV_RELEASE_DIR := build/release-$(UPGRADE_FROM)

# Fragments: tests/faults/faults.mk (make faults), tests/fuzz/fuzz.mk
# (make fuzz, and FUZZ_REPLAY_BINS, which make test runs), tests/bench/bench.mk
# (make bench, and BENCH_SMOKE_BINS, which make test runs).
.DEFAULT_GOAL := all
include $(wildcard tests/*/*.mk)

.PHONY: all deps deps-run deps-faults deps-deb deb check-deb check check-steps check-busy check-asan check-faults check-valgrind check-build check-docs check-runner check-lua check-units check-hardening check-install check-nosd check-devrun check-alerts check-python check-node check-go install test unit integration run clean
all: $(B)/redlockd $(B)/redlockctl

# The flags an object was built with: a change (hardening, a package
# build's CFLAGS) rebuilds every object.
BUILD_FLAGS = $(CC) $(ALL_CFLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)
$(B)/flags: FORCE
	@mkdir -p $(B) && printf '%s\n' '$(subst ','\'',$(BUILD_FLAGS))' >$@.new && \
	    { cmp -s $@.new $@ && rm $@.new || mv $@.new $@; }
FORCE:

$(B)/obj/%.o: %.c $(B)/flags
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The masters' scripts (daemon/scripts/*.lua) as C string literals, for
# daemon/redlock.c (daemon/scripts/embed.sh says how).
LUA_SRC := $(wildcard daemon/scripts/*.lua)
$(B)/gen/daemon/scripts.h: $(LUA_SRC) daemon/scripts/embed.sh
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	@sh daemon/scripts/embed.sh $@ $(LUA_SRC)
$(B)/obj/daemon/redlock.o $(B)/obj/daemon/layout.o: $(B)/gen/daemon/scripts.h

$(B)/redlockd: $(B)/obj/daemon/main.o $(LIB_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# redlockctl, the command-line client: the library (and OpenSSL) and nothing
# of the daemon.
$(B)/redlockctl: $(B)/obj/client/redlockctl.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(CLIENT_LIBS) $(LDFLAGS)

$(B)/obj/tests/%.o: tests/%.c $(B)/flags
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<

# Each unit suite links only the module it tests.
$(B)/check_proto: $(B)/obj/tests/check_proto.o $(B)/obj/proto/proto.o
$(B)/check_conf: $(B)/obj/tests/check_conf.o $(B)/obj/conf/conf.o
$(B)/check_client: $(B)/obj/tests/check_client.o $(CLIENT_OBJ)
$(B)/check_drift: $(B)/obj/tests/check_drift.o $(B)/obj/daemon/drift.o
$(B)/check_waiter: $(B)/obj/tests/check_waiter.o $(B)/obj/daemon/waiter.o
$(B)/check_reach: $(B)/obj/tests/check_reach.o $(B)/obj/daemon/reach.o
$(B)/check_readq: $(B)/obj/tests/check_readq.o $(B)/obj/daemon/readq.o $(B)/obj/daemon/util.o
$(B)/check_layout: $(B)/obj/tests/check_layout.o $(B)/obj/daemon/layout.o $(B)/obj/daemon/log.o \
                   $(B)/obj/daemon/util.o $(B)/obj/daemon/xmalloc.o
$(B)/check_admit: $(B)/obj/tests/check_admit.o $(B)/obj/daemon/admit.o \
                  $(B)/obj/daemon/authlimit.o $(B)/obj/daemon/keyhash.o $(B)/obj/daemon/fdbudget.o \
                  $(B)/obj/daemon/ctx.o $(B)/obj/daemon/xmalloc.o \
                  $(B)/obj/daemon/log.o \
                  $(B)/obj/daemon/util.o
$(B)/check_redlock: $(B)/obj/tests/check_redlock.o $(LIB_OBJ)
# The lease state machine without Redis: the engine's I/O is replaced by
# the suite's own functions (GNU ld --wrap; see tests/check_lease.c).
$(B)/check_lease: $(B)/obj/tests/check_lease.o $(LIB_OBJ)
$(B)/check_lease: WRAP_LDFLAGS := -Wl,--wrap=redlock_extend,--wrap=redlock_restore \
                                  -Wl,--wrap=redlock_expire_at,--wrap=master_count
# The end-to-end suites: the harness (tests/harness.c, real processes).
$(B)/check_session: $(B)/obj/tests/check_session.o $(SUITE_OBJ)
$(B)/check_handover: $(B)/obj/tests/check_handover.o $(SUITE_OBJ)
$(B)/check_kinds: $(B)/obj/tests/check_kinds.o $(SUITE_OBJ)
$(B)/check_check: $(B)/obj/tests/check_check.o $(SUITE_OBJ)
$(B)/check_lease_mode: $(B)/obj/tests/check_lease_mode.o $(SUITE_OBJ)
# Some links between daemons and masters go through build/delay-proxy
# (tests/faults/faults.mk), which make test and make integration build.
$(B)/check_fence: $(B)/obj/tests/check_fence.o $(SUITE_OBJ)
$(B)/check_delay: $(B)/obj/tests/check_delay.o $(SUITE_OBJ)
$(B)/check_who: $(B)/obj/tests/check_who.o $(SUITE_OBJ)
$(B)/check_masters: $(B)/obj/tests/check_masters.o $(SUITE_OBJ)
# Masters 2 and 3 of the clock tests run the libc build of redis-server
# under libfaketime.
$(B)/check_quarantine: $(B)/obj/tests/check_quarantine.o $(SUITE_OBJ)
$(B)/check_registry: $(B)/obj/tests/check_registry.o $(SUITE_OBJ)
$(B)/check_limits: $(B)/obj/tests/check_limits.o $(SUITE_OBJ)
$(B)/check_auth: $(B)/obj/tests/check_auth.o $(SUITE_OBJ)
$(B)/check_strangers: $(B)/obj/tests/check_strangers.o $(SUITE_OBJ)
$(B)/check_sets: $(B)/obj/tests/check_sets.o $(SUITE_OBJ)
$(B)/check_cluster: $(B)/obj/tests/check_cluster.o $(SUITE_OBJ)
$(B)/check_tls: $(B)/obj/tests/check_tls.o $(SUITE_OBJ)
$(B)/check_tls_masters: $(B)/obj/tests/check_tls_masters.o $(SUITE_OBJ)
$(B)/check_ops: $(B)/obj/tests/check_ops.o $(SUITE_OBJ)
$(B)/check_redlockctl: $(B)/obj/tests/check_redlockctl.o $(SUITE_OBJ)
# The daemon's objects too: metrics_table_rules and metrics_table_in_both_outputs
# walk its report table (daemon/report.h).
$(B)/check_metrics: $(B)/obj/tests/check_metrics.o $(SUITE_OBJ) $(LIB_OBJ)
# The status page over HTTP and in headless Chromium (tests/png_bands.py reads its screenshot).
# The daemon's objects too: page_health_and_escape calls daemon/status_page.c.
$(B)/check_page: $(B)/obj/tests/check_page.o $(SUITE_OBJ) $(LIB_OBJ)
# Each script of daemon/scripts/ on a real master, without the daemon.
$(B)/check_scripts: $(B)/obj/tests/check_scripts.o $(SUITE_OBJ)
$(B)/obj/tests/check_scripts.o: $(B)/gen/daemon/scripts.h
# The last release beside this build on the same masters: its daemon is
# $(PREV_RELEASE_DIR)/redlockd (REDLOCKD_PREV_BIN).
$(B)/check_upgrade: $(B)/obj/tests/check_upgrade.o $(SUITE_OBJ)
# Every suite's main() (tests/runner.c): a suite defines runner_main.
$(TEST_BINS): $(B)/obj/tests/runner.o
$(TEST_BINS):
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(WRAP_LDFLAGS) $(LDFLAGS)

# The monitoring checks' tools, installed without their recommended
# packages (no node exporter, no desktop): promtool from prometheus for
# make check-alerts, and headless Chromium with a font to draw with for
# the status page's browser test (tests/check_page.c).  As root, a
# missing tool fails its test.
TOOL_DEB_PKGS := prometheus chromium fonts-dejavu-core

# Install whatever Debian packages are missing; nothing when all are found.
deps-run:
	@if pkg-config --exists $(PKGS) $(CLIENT_PKGS) $(HEADER_PKGS) 2>/dev/null \
	    && command -v redis-server >/dev/null && command -v nc >/dev/null \
	    && command -v cc >/dev/null; then :; else \
	    echo "installing missing packages: $(RUN_DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(RUN_DEB_PKGS); fi

deps: deps-run
	@if pkg-config --exists $(PKGS) $(CLIENT_PKGS) $(HEADER_PKGS) check libsystemd 2>/dev/null \
	    && command -v redis-server >/dev/null && command -v openssl >/dev/null \
	    && command -v nc >/dev/null && command -v cc >/dev/null \
	    && command -v faketime >/dev/null && command -v luacheck >/dev/null \
	    && python3 -c 'import yaml' 2>/dev/null; then :; else \
	    echo "installing missing packages: $(DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(DEB_PKGS); fi
	@if /usr/bin/python3 -c 'import setuptools, ensurepip' 2>/dev/null \
	    && /usr/bin/python3 -m pip --version >/dev/null 2>&1 \
	    && command -v node >/dev/null && command -v go >/dev/null; then :; else \
	    echo "installing the client libraries' toolchains: $(CLIENT_DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq || true; \
	    for p in $(CLIENT_DEB_PKGS); do \
	        DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$p >/dev/null 2>&1 \
	            || echo "deps: $$p could not be installed: its client's tests will be skipped"; \
	    done; fi
	@if command -v promtool >/dev/null && command -v chromium >/dev/null \
	    && [ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; \
	    then :; else echo "installing missing packages: $(TOOL_DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	        $(TOOL_DEB_PKGS); fi

# Every step runs even when one before it failed; the run ends with the
# time it took (after deps) and either "make check: all passed in N s" or
# "make check: FAILED after N s" and each failed test case (or step), one
# a line, by suite (tests/step.sh).  make check BUSY=N runs it with N busy
# loops beside it (tests/busy.sh), as on a machine other work shares.
CHECK_STEPS = check-build check-docs check-runner check-lua test check-units \
              $(if $(SANITIZE),,check-hardening) check-install check-nosd check-devrun \
              check-python check-node check-go check-alerts
CHECK_STEPS += $(if $(SANITIZE),,check-model)
check: deps
	@$(if $(BUSY),sh tests/busy.sh $(BUSY)) $(MAKE) --no-print-directory check-steps

check-steps:
	@mkdir -p $(B); failed=$(CURDIR)/$(B)/check-failed; : >"$$failed"; start=$$(date +%s); \
	for s in $(CHECK_STEPS); do sh tests/step.sh "$$failed" "make $$s" $(MAKE) $$s; done; \
	sh tests/step.sh --summary "$$failed" "make check" $$start

# make check-busy [BUSY=2] [PASSES=1]: the end-to-end suites, PASSES times
# over, with BUSY busy loops beside them (built first, on a quiet
# machine); lists every failed test case of every pass.  Run it before a
# change to anything timed (a test's deadline, a timer of the daemon).
BUSY_PASSES = $(or $(PASSES),1)
check-busy: deps $(INTEG_PREREQS)
	@mkdir -p $(B); failed=$(CURDIR)/$(B)/busy-failed; : >"$$failed"; start=$$(date +%s); \
	for p in $$(seq $(BUSY_PASSES)); do echo "== check-busy: pass $$p of $(BUSY_PASSES)"; \
	    : >"$$failed.pass"; sh tests/step.sh "$$failed.pass" "pass $$p" \
	        sh tests/busy.sh $(or $(BUSY),2) $(MAKE) --no-print-directory integration; \
	    sed "s/^/pass $$p: /" "$$failed.pass" >>"$$failed"; done; rm -f "$$failed.pass"; \
	sh tests/step.sh --summary "$$failed" \
	    "make check-busy ($(or $(BUSY),2) busy loops, $(BUSY_PASSES) passes)" $$start

# A past release (see PREV_RELEASE above), once.
build/release-%/built:
	@sh tests/build-release.sh $* $(@D)

# What a suite program is run with: the programs it starts, and Check's
# timeouts (CK_TIMEOUT seconds per test case, times CK_MULT).
SUITE_ENV = REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCKCTL_BIN=$(CURDIR)/$(B)/redlockctl \
            REDLOCKD_PREV_BIN=$(CURDIR)/$(PREV_RELEASE_DIR)/redlockd \
            REDIS_LIBC_BIN=$(CURDIR)/$(REDIS_LIBC) DELAY_PROXY_BIN=$(CURDIR)/$(B)/delay-proxy \
            CK_DEFAULT_TIMEOUT=$(CK_TIMEOUT) CK_TIMEOUT_MULTIPLIER=$(CK_MULT)

# make test, make unit, make integration and make check-faults run every
# step even when one fails and end by listing each failed test case
# (tests/step.sh, which reads them from Check's report), or, under make
# check (which sets $REDLOCKD_FAILED), leave the list to it.  STEPS_BEGIN
# and STEPS_END open and close such a recipe; STEP runs one step of it.
STEPS_BEGIN = mkdir -p $(B); failed=$${REDLOCKD_FAILED:-$(CURDIR)/$(B)/$@-failed}; \
              [ -n "$${REDLOCKD_FAILED:-}" ] || : >"$$failed"; \
              n0=$$(wc -l <"$$failed"); start=$$(date +%s);
STEP        = sh tests/step.sh "$$failed"
STEPS_END   = if [ -z "$${REDLOCKD_FAILED:-}" ]; then \
                  sh tests/step.sh --summary "$$failed" "make $@" $$start; \
              else [ "$$(wc -l <"$$failed")" -eq "$$n0" ]; fi
# Each suite is built in its own step, so that one that does not compile
# is listed and the others still run.
RUN_SUITES  = for t in $(1); do echo "== $$t"; $(SAN_RESET) $(SUITE_ENV) $(STEP) $$t \
                  sh -c "$(MAKE) -s --no-print-directory $(B)/$$t && exec ./$(B)/$$t"; \
                  $(call SAN_CHECK,$$t) done;
ifneq ($(SANITIZE),)
# Any sanitizer report fails the run: the logs are cleared before each
# step and read after it, printed, and listed with the step's name.
SAN_RESET   = rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS);
SAN_CHECK   = if [ -n "$$(ls -A $(SAN_LOGS))" ]; then echo "sanitizer reports ($(1)):"; \
                  head -n 40 $(SAN_LOGS)/*; for r in $(SAN_LOGS)/*; do \
                  echo "$(1) sanitizers: $${r\#\#*/}: $$(grep -m 1 SUMMARY "$$r" || head -n 1 "$$r")" \
                  >>"$$failed"; done; fi;
SAN_END     = tail -n +$$((n0 + 1)) "$$failed" | grep -q ' sanitizers: ' || echo "sanitizers: no report";
endif

# What the end-to-end suites run (INTEG_TOOLS: the programs they start).
INTEG_TOOLS   := $(B)/redlockd $(B)/redlockctl $(REDIS_LIBC) $(B)/delay-proxy \
                 $(PREV_RELEASE_DIR)/built
INTEG_PREREQS := $(INTEG_TOOLS) $(addprefix $(B)/,$(INTEG_TESTS))

test: $(INTEG_TOOLS) $(FUZZ_REPLAY_BINS) $(BENCH_SMOKE_BINS)
	@$(STEPS_BEGIN) \
	for t in $(FUZZ_REPLAY_BINS); do echo "== $$t"; $(SAN_RESET) $(STEP) $$t ./$$t; \
	    $(call SAN_CHECK,$$t) done; \
	$(call RUN_SUITES,$(UNIT_TESTS) $(INTEG_TESTS)) \
	echo "== bench smoke (1 s per mode, so the benchmark never rots)"; $(SAN_RESET) \
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCK_BENCH_BIN=$(CURDIR)/$(B)/redlock-bench \
	    $(STEP) "bench smoke" ./$(B)/run_bench --smoke; \
	$(call SAN_CHECK,bench smoke) $(SAN_END) $(STEPS_END)

# One suite as make test runs it: make check-<suite> (check-kinds runs
# build/check_kinds; CASE=<test case> runs only that case), or
# make test-one SUITE=check_kinds [CASE=...].  With SANITIZE=..., any
# sanitizer report fails it, as in make test.
SUITE_TARGETS := $(patsubst check_%,check-%,$(UNIT_TESTS) $(INTEG_TESTS))
.PHONY: test-one check-ctl $(SUITE_TARGETS)
$(patsubst check_%,check-%,$(UNIT_TESTS)): check-%: $(B)/check_%
$(patsubst check_%,check-%,$(INTEG_TESTS)): check-%: $(B)/check_% $(B)/redlockd \
                                                     $(B)/redlockctl $(REDIS_LIBC) $(B)/delay-proxy \
                                                     $(PREV_RELEASE_DIR)/built
$(SUITE_TARGETS):
ifneq ($(SANITIZE),)
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
endif
	@echo "== check_$*$(if $(CASE), (case $(CASE)))"
	@$(SUITE_ENV) $(if $(CASE),CK_RUN_CASE='$(CASE)') ./$(B)/check_$*
ifneq ($(SANITIZE),)
	@if [ -n "$$(ls -A $(SAN_LOGS))" ]; then echo "sanitizer reports:"; \
	    head -n 40 $(SAN_LOGS)/*; exit 1; fi; echo "sanitizers: no report"
endif

test-one:
	@[ -n "$(SUITE)" ] || { echo "test-one: say which, e.g. make test-one SUITE=check_kinds [CASE=...]"; exit 2; }
	@$(MAKE) --no-print-directory $(patsubst check_%,check-%,$(SUITE)) $(if $(CASE),CASE='$(CASE)')

# The name it had.
check-ctl: check-redlockctl

unit:
	@$(STEPS_BEGIN) $(call RUN_SUITES,$(UNIT_TESTS)) $(SAN_END) $(STEPS_END)

integration: $(INTEG_TOOLS)
	@$(STEPS_BEGIN) $(call RUN_SUITES,$(INTEG_TESTS)) $(SAN_END) $(STEPS_END)

# The integration suites with the daemon under valgrind's memcheck: each
# daemon writes build/valgrind/<pid>.log; any error or definite/indirect
# leak in one of them fails the target.  Slow (the daemon runs ~20x
# slower); not part of CI.
VALGRIND_SUITES ?= check_session check_handover check_masters check_limits check_auth
check-valgrind: deps $(B)/redlockd $(addprefix $(B)/,$(VALGRIND_SUITES))
	@rm -rf $(B)/valgrind && mkdir -p $(B)/valgrind
	-@for t in $(VALGRIND_SUITES); do echo "== $$t under valgrind"; \
	    REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd CK_DEFAULT_TIMEOUT=300 \
	    REDLOCKD_WRAP="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --log-file=$(CURDIR)/$(B)/valgrind/%p.log" \
	    ./$(B)/$$t; done
	@n=$$(ls $(B)/valgrind/*.log | wc -l); bad=$$(grep -l "ERROR SUMMARY: [1-9]\|definitely lost: [1-9]\|indirectly lost: [1-9]\|Invalid \|uninitialised" $(B)/valgrind/*.log); \
	    if [ -n "$$bad" ]; then echo "valgrind reports in:"; echo "$$bad"; exit 1; fi; \
	    echo "valgrind: $$n daemon runs, no errors, no definite or indirect leaks"

check-asan: deps
	$(MAKE) SANITIZE=address,undefined test

# Fault injection (tests/faults/faults.mk) and fuzzing (tests/fuzz/fuzz.mk)
# need clang and its runtime (libFuzzer) besides the packages above, and
# the network scenarios `ip` and `iptables` (found in /usr/sbin too, which
# is not on every user's PATH).
FAULT_DEB_PKGS := clang libclang-rt-14-dev iproute2 iptables
deps-faults: deps
	@if command -v clang >/dev/null \
	    && [ -e "$$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)" ] \
	    && { command -v ip || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]; } >/dev/null \
	    && { command -v iptables || [ -x /usr/sbin/iptables ]; } >/dev/null; then :; else \
	    echo "installing missing packages: $(FAULT_DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(FAULT_DEB_PKGS); fi

# make check-model: SPIN (Debian's spin) checks the model of the set
# protocol, proto/model/sets.pml: the protocol passes, its mutations fail
# (proto/model/README.md).  pan is compiled with gcc under $(B)/model/.
# Installed when missing; a machine where it cannot be installed fails.
# Not under SANITIZE: the model is the same for both runs.
MODEL_DEB_PKGS := spin
.PHONY: deps-model check-model
deps-model:
	@if command -v spin >/dev/null; then :; else \
	    echo "installing missing packages: $(MODEL_DEB_PKGS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(MODEL_DEB_PKGS); fi
	@command -v spin >/dev/null || { echo "check-model: spin could not be installed"; exit 1; }

check-model: deps-model
	@PAN_CC=gcc sh proto/model/check.sh $(B)/model

check-faults: deps-faults
	@$(STEPS_BEGIN) $(STEP) "make faults" $(MAKE) faults; \
	$(STEP) "make fuzz" $(MAKE) fuzz FUZZ_SECONDS=60; $(STEPS_END)

# The default goal builds both programs (a dry run into an empty directory).
check-build:
	@$(MAKE) -n --no-print-directory all B=$(B)/goal-probe 2>/dev/null | \
	    grep -q 'LD .*/goal-probe/redlockctl' || \
	    { echo "check-build: make (all) does not build redlockctl"; exit 1; }
	@echo "check-build: make builds redlockd and redlockctl"

# The documents and sources name no file outside the repository and no
# issue numbers, and every relative Markdown link names a file that exists
# in it (tests/check_docs.sh prints each finding as file:line).
check-docs:
	@sh tests/check_docs.sh
	@python3 tests/check_confdocs.py
	@python3 tests/check_layers.py

# The step runner and the busy loops themselves (tests/check_runner.sh):
# every failed case listed once, a command's status kept, no loop left.
check-runner:
	@sh tests/check_runner.sh

# The masters' scripts, as the daemon sends them, pass luacheck
# (tests/check_lua.sh; daemon/scripts/.luacheckrc).
check-lua:
	@B=$(B) sh tests/check_lua.sh

# The Prometheus rules and the Grafana dashboard (conf/prometheus/,
# conf/grafana/): promtool check and test rules, then every metric and
# label they name against this daemon's /metrics (tests/check_alerts.sh).
check-alerts: $(B)/redlockd
	@bash tests/check_alerts.sh $(B)/redlockd

# systemd-analyze verify on the units as make install writes them
# (pointing at this build); skipped, with the reason, when unavailable.
check-units: $(B)/redlockd
	@mkdir -p $(B)/systemd
	@sed -e '/^# Template: /d' -e 's|@bindir@|$(CURDIR)/$(B)|g' -e 's|@sysconfdir@|$(CURDIR)/conf|g' \
	    systemd/redlockd.service > $(B)/systemd/redlockd.service
	@cp systemd/redlockd.socket systemd/redlockd-tls.socket $(B)/systemd/
	@if ! command -v systemd-analyze >/dev/null; then \
	    echo "check-units: skipped: systemd-analyze is not installed"; \
	elif ! systemd-analyze --version >/dev/null 2>&1; then \
	    echo "check-units: skipped: systemd-analyze does not run here"; \
	else systemd-analyze verify --man=no $(B)/systemd/redlockd.service \
	    $(B)/systemd/redlockd.socket $(B)/systemd/redlockd-tls.socket && echo "check-units: systemd-analyze verify passed"; fi

# The daemon built without libsystemd: it builds, and check_ops passes
# (its systemd tests print why they are skipped).  Never sanitized: the
# build directory is build-nosd/ either way.
check-nosd:
	$(MAKE) NO_SYSTEMD=1 SANITIZE= build-nosd/redlockd build-nosd/check_ops
	REDLOCKD_BIN=$(CURDIR)/build-nosd/redlockd ./build-nosd/check_ops

# make run's script (tests/dev-run.sh): Ctrl-C lets the daemon release its
# locks before the masters stop, and a master restarted with
# tests/dev-master.sh is stopped too; docs/using.md's shell scripts work as
# written against it, and so does the front page's redlockctl line (which
# names build/redlockctl: built plain under SANITIZE too).  Uses make
# run's fixed ports; skipped when one is taken.
check-devrun: $(B)/redlockd
	@$(if $(SANITIZE),$(MAKE) --no-print-directory SANITIZE= build/redlockctl >/dev/null &&) \
	    bash tests/check_devrun.sh $(B)/redlockd

check-node: $(B)/redlockd
	@if ! command -v node >/dev/null; then \
	    echo "check-node: no Node.js (nodejs could not be installed): skipped"; exit 0; fi; \
	cd clients/node && REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd timeout -k 10 300 node --test test/client.test.js \
	    >"$(CURDIR)/$(B)/check-node.log" 2>&1 || { cat "$(CURDIR)/$(B)/check-node.log"; exit 1; }; \
	awk '/^# pass/ {p=$$3} /^# fail/ {f=$$3} END {print "check-node: " p " passed, " f " failed"}' \
	    "$(CURDIR)/$(B)/check-node.log"; \
	if command -v npm >/dev/null; then \
	    tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	    timeout 120 npm pack --silent --offline --no-update-notifier --pack-destination "$$tmp" >/dev/null && \
	    echo "check-node: npm pack made $$(ls "$$tmp")" && \
	    (cd "$$tmp" && timeout 120 npm install --offline --no-audit --no-fund --no-update-notifier --silent \
	        ./redlockd-*.tgz && node -e "require('redlockd')") && \
	    echo "check-node: npm install --offline installed it"; \
	else echo "check-node: npm missing: the package is not packed"; fi

# The binaries are hardened as a Debian package's are (HARDEN_CFLAGS).
check-hardening: $(B)/redlockd $(B)/redlockctl
	@sh tests/check_hardening.sh $(B)/redlockd $(B)/redlockctl \
	    $(B)/obj/daemon/main.o $(B)/obj/client/redlockctl.o

check-go: $(B)/redlockd
	@if command -v go >/dev/null; then \
	    cd clients/go && test -z "$$(gofmt -l .)" || { echo "check-go: gofmt -l:"; gofmt -l .; exit 1; }; \
	    go vet ./... || exit 1; \
	    REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd go test -race -count=1 -timeout 300s ./... \
	        >"$(CURDIR)/$(B)/check-go.log" 2>&1; rc=$$?; \
	    sed 's/^/check-go: /' "$(CURDIR)/$(B)/check-go.log"; exit $$rc; \
	else echo "check-go: no Go toolchain (golang-go could not be installed): skipped"; fi

# The client libraries in clients/, each against real masters and the real
# daemon; the Python one also installs with pip (into a scratch directory,
# with the setuptools at hand: no download).
check-python: $(B)/redlockd
	@cd clients/python/tests && REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd \
	    timeout -k 10 300 python3 -W error::ResourceWarning -m unittest -q test_client
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp" clients/python/build clients/python/*.egg-info' EXIT && \
	/usr/bin/python3 -m pip install -q --no-build-isolation --no-deps --target "$$tmp" \
	    ./clients/python >"$$tmp/pip.log" 2>&1 || { cat "$$tmp/pip.log"; exit 1; }; \
	PYTHONPATH="$$tmp" /usr/bin/python3 -c 'import redlockd; \
	    print("check-python: pip installed redlockd", redlockd.__version__)'

# make install into a scratch DESTDIR: every file lands where the units and
# man pages say, the unit names the installed binary, the example config
# passes redlockd -t (its socket directory, which systemd creates as
# RuntimeDirectory, moved into DESTDIR), and the man pages render without
# warnings; a crontab line in them works with cron's PATH=/usr/bin:/bin.
check-install: $(B)/redlockd $(B)/redlockctl
	@rm -rf $(B)/destdir
	@$(MAKE) -s install DESTDIR=$(CURDIR)/$(B)/destdir PREFIX=/usr >/dev/null
	@set -e; d=$(B)/destdir; for f in usr/bin/redlockd usr/bin/redlockctl \
	    usr/lib/systemd/system/redlockd.service usr/lib/systemd/system/redlockd.socket \
	    usr/lib/systemd/system/redlockd-tls.socket \
	    usr/lib/sysusers.d/redlockd.conf etc/redlockd/redlockd.yml \
	    usr/share/man/man8/redlockd.8 usr/share/man/man1/redlockctl.1 \
	    usr/share/man/man5/redlockd.yml.5 usr/share/redlockd/redlockd.rules.yml \
    usr/share/redlockd/redlockd.json; do \
	    [ -s $$d/$$f ] || { echo "check-install: $$f missing"; exit 1; }; done; \
	grep -q '^ExecStart=/usr/bin/redlockd -c /etc/redlockd/redlockd.yml$$' \
	    $$d/usr/lib/systemd/system/redlockd.service; \
	! grep -n 'make install\|@[a-z]*@' $$d/usr/lib/systemd/system/* $$d/usr/lib/sysusers.d/* \
	    || { echo "check-install: an installed unit speaks of its template"; exit 1; }; \
	mkdir -p $$d/run/redlockd; \
	sed 's|"/run/redlockd/|"$(CURDIR)/'"$$d"'/run/redlockd/|' $$d/etc/redlockd/redlockd.yml \
	    > $$d/redlockd-t.yml; \
	$$d/usr/bin/redlockd -t -c $$d/redlockd-t.yml >/dev/null; \
	awk 'function sched(f) { return f ~ /^[0-9*\/,-]+$$/ } \
	    /^PATH=/ { path = 1 } /^\.fi/ { path = 0 } \
	    NF >= 6 && sched($$1) && sched($$2) && sched($$3) && sched($$4) && sched($$5) \
	        && $$6 !~ /^\// && !path { print "check-install: " FILENAME ":" FNR \
	        ": a crontab line must name its command by full path or set PATH first"; bad = 1 } \
	    END { exit bad }' $$d/usr/share/man/man*/*; \
	if command -v groff >/dev/null; then for m in $$d/usr/share/man/man*/*; do \
	    [ -z "$$(groff -man -Tutf8 -ww -z $$m 2>&1)" ] || { echo "check-install: $$m:"; \
	    groff -man -Tutf8 -ww -z $$m; exit 1; }; done; fi; \
	echo "check-install: make install DESTDIR=... PREFIX=/usr put all 12 files in place"

# make install [PREFIX=/usr/local] [DESTDIR=]: the config goes to /etc
# (SYSCONFDIR) and is never overwritten; units to $(PREFIX)/lib/systemd.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DATADIR    ?= $(PREFIX)/share/redlockd
install: $(B)/redlockd $(B)/redlockctl
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
	    $(DESTDIR)$(SYSCONFDIR)/redlockd $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(B)/redlockd $(B)/redlockctl $(DESTDIR)$(BINDIR)/
	@# Without libsystemd the daemon cannot say READY=1 or ping the watchdog.
	sed -e '/^# Template: /d' -e 's|@bindir@|$(BINDIR)|g' -e 's|@sysconfdir@|$(SYSCONFDIR)|g' \
	    $(if $(HAVE_SYSTEMD),,-e 's|^Type=notify$$|Type=exec|' -e '/^WatchdogSec=/d' \
	    -e '/^NotifyAccess=/d') \
	    systemd/redlockd.service > $(DESTDIR)$(UNITDIR)/redlockd.service
	install -m 0644 systemd/redlockd.socket systemd/redlockd-tls.socket $(DESTDIR)$(UNITDIR)/
	install -m 0644 systemd/redlockd.sysusers $(DESTDIR)$(SYSUSERSDIR)/redlockd.conf
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/redlockd/redlockd.yml ]; then \
	    echo "keeping $(DESTDIR)$(SYSCONFDIR)/redlockd/redlockd.yml"; \
	else install -m 0640 conf/redlockd.yml $(DESTDIR)$(SYSCONFDIR)/redlockd/redlockd.yml; \
	    chgrp redlockd $(DESTDIR)$(SYSCONFDIR)/redlockd/redlockd.yml 2>/dev/null || \
	    echo "note: run systemd-sysusers, then chgrp redlockd $(SYSCONFDIR)/redlockd/redlockd.yml" \
	         "(the service reads it as user redlockd)"; fi
	install -m 0644 client/redlockctl.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 conf/redlockd.yml.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 daemon/redlockd.8 $(DESTDIR)$(MANDIR)/man8/
	@# The Prometheus rules and the Grafana dashboard (docs/operating.md).
	install -d $(DESTDIR)$(DATADIR)
	install -m 0644 conf/prometheus/redlockd.rules.yml conf/grafana/redlockd.json \
	    $(DESTDIR)$(DATADIR)/

# The Debian package (debian/, debhelper): built from a copy of the tree
# under $(B)/deb/src, so that the .deb, .changes and .buildinfo land in
# $(B)/deb/ and nothing is written beside the checkout; lintian must report
# no error and no warning (debian/redlockd.lintian-overrides gives a reason
# for each tag it silences).
DEB_TOOLS := debhelper dpkg-dev lintian fakeroot
deps-deb: deps
	@if command -v dh >/dev/null && command -v lintian >/dev/null \
	    && command -v dpkg-buildpackage >/dev/null; then :; else \
	    echo "installing missing packages: $(DEB_TOOLS)"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(DEB_TOOLS); fi

deb: deps-deb
	@rm -rf $(B)/deb && mkdir -p $(B)/deb/src
	@git ls-files -co --exclude-standard -z | \
	    xargs -0 cp -P --parents -t $(B)/deb/src
	@cd $(B)/deb/src && dpkg-buildpackage -us -uc -b >../build.log 2>&1 || \
	    { tail -40 ../build.log; echo "deb: dpkg-buildpackage failed ($(B)/deb/build.log)"; exit 1; }
	@lintian --fail-on error,warning --info $(B)/deb/*.changes >$(B)/deb/lintian.log 2>&1; \
	    rc=$$?; cat $(B)/deb/lintian.log; \
	    [ $$rc -eq 0 ] || { echo "deb: lintian reported errors or warnings"; exit 1; }
	@echo "deb: $$(cd $(B)/deb && ls *.deb)"

# As root, on a machine it may change: installs the package, checks it
# (tests/check_deb.sh), and purges it.  .ci/run runs it.
check-deb: deb
	@bash tests/check_deb.sh $(B)/deb

run: deps-run
	$(MAKE) all
	bash tests/dev-run.sh $(B)/redlockd conf/dev.yml

# Everything the build, the tests and the scripts write in the tree: the
# build directories (every variant), make run's run/, and what the client
# libraries' checks may leave (Python's build/, egg-info and bytecode, an
# npm pack or install in clients/node).
clean:
	rm -rf build build-san build-nosd build-asan build-fuzz run
	rm -rf clients/python/build clients/python/*.egg-info clients/node/node_modules \
	    clients/node/*.tgz
	find clients tests -name __pycache__ -type d -prune -exec rm -rf {} +

-include $(shell find $(B) -name '*.d' -type f 2>/dev/null)
