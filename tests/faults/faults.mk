# Fault-injection suite: `make faults` (and `make check-faults`, which adds
# a fuzzing run); `make soak` runs its scenarios again and again for
# SOAK_MINUTES (default 10) and prints one table over all the runs.  See
# tests/faults/README.md.
#
#   build/rmw-client     one client session: guarded read-modify-write
#   build/delay-proxy    a TCP proxy that delays each chunk (delay-jitter, timing)
#   build/break-client   the operator of the timing schedules: BREAK now and then
#   build/check_faults   starts masters, daemons and clients, injects the
#                        faults, checks the client logs, prints the table
#   build/skip-announce/redlockd
#                        the daemon built with REDLOCKD_FAULT_SKIP_ANNOUNCE: it
#                        announces no release (the liveness control's daemon),
#                        in a build directory of its own
#   build/set-by-name/redlockd
#                        the daemon built with REDLOCKD_FAULT_SET_BY_NAME: it
#                        takes a set's names one by one, holding what it won
#                        while it waits for the next (the sets control's daemon)
#   build/release-<commit>/redlockd
#                        past builds from the repository's history (the
#                        Makefile's PREV_RELEASE and PREV_RELEASE_CONTROL,
#                        tests/build-release.sh): the upgrade schedule runs
#                        the last release beside this build, its negative
#                        control the build that double-grants beside it
#   build/redis-libc/redis-server
#                        Debian's redis source built with the C library's
#                        malloc, which runs under libfaketime (the masters
#                        whose clock the clock scenarios and check_quarantine
#                        step); tests/faults/build-redis-libc.sh, once

FAULTS_BINS := $(B)/rmw-client $(B)/delay-proxy $(B)/break-client $(B)/check_faults

.PHONY: faults soak

SOAK_MINUTES ?= 10

# Objects of tests/faults/ (no Check needed).
$(B)/obj/tests/faults/%.o: tests/faults/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

# What the client programs share (tests/faults/client_common.h).
FAULT_CLIENT_OBJ := $(B)/obj/tests/faults/client_common.o $(CLIENT_OBJ)

$(B)/rmw-client: $(B)/obj/tests/faults/rmw_client.o $(FAULT_CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/delay-proxy: $(B)/obj/tests/faults/delay_proxy.o
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/break-client: $(B)/obj/tests/faults/break_client.o $(FAULT_CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# The suite's files (tests/faults/faults.h): main and the table, one run,
# the processes of a run, the schedules by family, the checker's self-test.
FAULTS_SUITE_OBJ := $(addprefix $(B)/obj/tests/faults/,check_faults.o run.o procs.o \
                      sched_masters.o sched_clients.o sched_clock.o sched_net.o \
                      sched_pause.o sched_timing.o sched_sets.o self_test.o)
$(B)/check_faults: $(FAULTS_SUITE_OBJ) $(B)/obj/tests/faults/checker.o \
                   $(B)/obj/tests/faults/netns.o $(HARNESS_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# The liveness control's daemon (tests/faults/README.md, "Liveness"): the
# same sources with REDLOCKD_FAULT_SKIP_ANNOUNCE, built by make itself in a
# directory of its own, so that no object is shared with the real daemon.
SKIP_ANNOUNCE_B := $(B)/skip-announce
$(SKIP_ANNOUNCE_B)/redlockd: FORCE
	@$(MAKE) --no-print-directory B=$(SKIP_ANNOUNCE_B) \
	    CPPFLAGS='$(CPPFLAGS) -DREDLOCKD_FAULT_SKIP_ANNOUNCE' $@

# The sets control's daemon (tests/faults/README.md, "Sets"): the same
# sources with REDLOCKD_FAULT_SET_BY_NAME, in a directory of its own.
SET_BY_NAME_B := $(B)/set-by-name
$(SET_BY_NAME_B)/redlockd: FORCE
	@$(MAKE) --no-print-directory B=$(SET_BY_NAME_B) \
	    CPPFLAGS='$(CPPFLAGS) -DREDLOCKD_FAULT_SET_BY_NAME' $@

# One build for every build directory (it is not this project's code).
REDIS_LIBC := build/redis-libc/redis-server
$(REDIS_LIBC): tests/faults/build-redis-libc.sh
	@sh tests/faults/build-redis-libc.sh $(dir $@)

FAULTS_RELEASES := build/release-$(PREV_RELEASE)/built build/release-$(PREV_RELEASE_CONTROL)/built
FAULTS_RELEASE_ENV = REDLOCKD_PREV_BIN=$(CURDIR)/build/release-$(PREV_RELEASE)/redlockd \
    REDLOCKD_PREV_CONTROL_BIN=$(CURDIR)/build/release-$(PREV_RELEASE_CONTROL)/redlockd

faults: $(B)/redlockd $(FAULTS_BINS) $(REDIS_LIBC) $(SKIP_ANNOUNCE_B)/redlockd \
    $(SET_BY_NAME_B)/redlockd $(FAULTS_RELEASES)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd RMW_CLIENT_BIN=$(CURDIR)/$(B)/rmw-client \
	    REDLOCKD_SKIP_ANNOUNCE_BIN=$(CURDIR)/$(SKIP_ANNOUNCE_B)/redlockd $(FAULTS_RELEASE_ENV) \
	    REDLOCKD_SET_BY_NAME_BIN=$(CURDIR)/$(SET_BY_NAME_B)/redlockd \
	    REDIS_LIBC_BIN=$(CURDIR)/$(REDIS_LIBC) DELAY_PROXY_BIN=$(CURDIR)/$(B)/delay-proxy \
	    BREAK_CLIENT_BIN=$(CURDIR)/$(B)/break-client ./$(B)/check_faults

soak: $(B)/redlockd $(FAULTS_BINS) $(REDIS_LIBC) $(SKIP_ANNOUNCE_B)/redlockd \
    $(SET_BY_NAME_B)/redlockd $(FAULTS_RELEASES)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd RMW_CLIENT_BIN=$(CURDIR)/$(B)/rmw-client \
	    REDLOCKD_SKIP_ANNOUNCE_BIN=$(CURDIR)/$(SKIP_ANNOUNCE_B)/redlockd $(FAULTS_RELEASE_ENV) \
	    REDLOCKD_SET_BY_NAME_BIN=$(CURDIR)/$(SET_BY_NAME_B)/redlockd \
	    REDIS_LIBC_BIN=$(CURDIR)/$(REDIS_LIBC) DELAY_PROXY_BIN=$(CURDIR)/$(B)/delay-proxy \
	    BREAK_CLIENT_BIN=$(CURDIR)/$(B)/break-client FAULTS_SOAK_MINUTES=$(SOAK_MINUTES) \
	    ./$(B)/check_faults
