# Benchmark of the performance targets: `make bench` (BENCH_SECONDS per
# mode, default 10) and `make bench-smoke` (1 s per mode and scaled-down
# hold runs; fails unless every mode produced pairs and no errors, and
# every hold run held all its locks).  See tests/bench/README.md and
# tests/bench/run_bench.c.
#
#   build/redlock-bench  the load generator (uncontended, hot, counted,
#                        shared, pairs, direct, rtt, hold, lease-hold)
#   build/redlock-noisy  the noisy-neighbour row's load: held session locks,
#                        a probe, and sessions flooding WATCH, STATUS and LIST
#                        from several source addresses
#   build/redlock-hostile  the hostile row's load: AUTH guessing from thousands
#                        of loopback addresses, a flood of silent connections,
#                        idle connections past the descriptor limit and a
#                        /metrics slowloris, while legitimate clients connect,
#                        AUTH and lock over TCP, TLS and the Unix socket
#   build/run_bench      starts five masters and redlockd, runs the standard
#                        table (with the counted and shared rows), the peer
#                        rows (node tests/bench/peer/peer.js: redlockd
#                        against node-redlock and redis-semaphore; their
#                        pinned packages installed with npm ci into
#                        $(B)/peer, or the rows skipped) and the
#                        held-locks rows (memory-session, renewal CPU,
#                        memory-counted, memory-lease, each on a fresh
#                        daemon), prints the values against their targets
#
# Against a base: `make bench BASE=<commit>` adds the comparison to the
# full run, `make bench-compare BASE=<commit>` runs it alone (a few
# minutes at BENCH_SECONDS=3).  The base's daemon is built from the
# repository's history into build/release-<commit>/ (tests/build-release.sh,
# as for the upgrade tests), and run_bench runs the daemon rows on both
# daemons at once on the same masters, interleaved, and prints their
# ratios "against <base>" (REDLOCKD_BASE_BIN, BENCH_COMPARE_ROUNDS:
# tests/bench/README.md, "Against a base").  A slower row is reported,
# never a failure.

BENCH_SMOKE_BINS := $(B)/redlock-bench $(B)/run_bench $(B)/redlock-noisy $(B)/redlock-hostile
BENCH_SECONDS ?= 10

# The base of a comparison: BASE (any commit name git knows: main, HEAD~3,
# 452245e) as a short commit id, its build and what run_bench is told.
BENCH_BASE_COMMIT = $(if $(BASE),$(or $(shell git rev-parse --short '$(BASE)^{commit}' 2>/dev/null),$(BASE)))
BENCH_BASE_DIR = build/release-$(BENCH_BASE_COMMIT)
BENCH_BASE_DEPS = $(if $(BASE),$(BENCH_BASE_DIR)/built)
BENCH_BASE_ENV = $(if $(BASE),REDLOCKD_BASE_BIN=$(CURDIR)/$(BENCH_BASE_DIR)/redlockd \
    BENCH_BASE_NAME='$(if $(filter $(BASE),$(BENCH_BASE_COMMIT)),$(BASE),$(BASE) = $(BENCH_BASE_COMMIT))')

.PHONY: bench bench-smoke bench-compare

# Objects of tests/bench/ (no Check needed).
$(B)/obj/tests/bench/%.o: tests/bench/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B)/redlock-bench: $(B)/obj/tests/bench/redlock_bench.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# The noisy-neighbour row's load (tests/bench/noisy_bench.c).
$(B)/redlock-noisy: $(B)/obj/tests/bench/noisy_bench.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -pthread -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# The hostile row's load (tests/bench/hostile_bench.c).
$(B)/redlock-hostile: $(B)/obj/tests/bench/hostile_bench.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -pthread -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/run_bench: $(B)/obj/tests/bench/run_bench.o $(HARNESS_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

bench: $(B)/redlockd $(BENCH_SMOKE_BINS) $(BENCH_BASE_DEPS)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCK_BENCH_BIN=$(CURDIR)/$(B)/redlock-bench \
	    $(BENCH_BASE_ENV) BENCH_SECONDS=$(BENCH_SECONDS) ./$(B)/run_bench

bench-compare: $(B)/redlockd $(BENCH_SMOKE_BINS) $(BENCH_BASE_DEPS)
	@$(if $(BASE),:,echo "make bench-compare: name the base: BASE=<commit> (main, HEAD~1, ...)"; exit 2)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCK_BENCH_BIN=$(CURDIR)/$(B)/redlock-bench \
	    $(BENCH_BASE_ENV) BENCH_SECONDS=$(BENCH_SECONDS) BENCH_ONLY=compare ./$(B)/run_bench

bench-smoke: $(B)/redlockd $(BENCH_SMOKE_BINS)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCK_BENCH_BIN=$(CURDIR)/$(B)/redlock-bench \
	    ./$(B)/run_bench --smoke
