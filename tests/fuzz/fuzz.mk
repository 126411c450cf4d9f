# tests/fuzz/fuzz.mk: libFuzzer targets for proto/ and conf/, included by
# the main Makefile.
#
#   make fuzz                   build with clang into build-fuzz/, run every
#                               target FUZZ_SECONDS (300) each; fails on a
#                               crash, a leak, a broken invariant or an input
#                               slower than FUZZ_TIMEOUT seconds
#   make fuzz FUZZ_TARGETS=conf FUZZ_SECONDS=3600
#                               one target, longer
#   make fuzz FUZZ_OPTS='-jobs=2 -workers=2'
#                               extra libFuzzer flags
#   make fuzz-replay            the seed corpus and the saved regressions
#                               through the targets, built with the normal
#                               compiler ($(B)/fuzz-replay-<target>)
#
# Each run starts from a copy of tests/fuzz/corpus/<target>/ in
# build-fuzz/corpus/<target>/ (the committed seeds are never written) and
# also reads tests/fuzz/regress/<target>/.  A crashing input is left in
# build-fuzz/crashes/<target>/; the failure message says how to
# reproduce it.  Keep it as a regression test by copying it, under a
# name that says what it broke, into tests/fuzz/regress/<target>/.
#
# Needs clang and libclang-rt-14-dev (make deps-faults).

FUZZ_B        := build-fuzz
FUZZ_CC       ?= clang
FUZZ_TARGETS  ?= proto conf
FUZZ_SECONDS  ?= 300
FUZZ_TIMEOUT  ?= 5
FUZZ_RSS_MB   ?= 2048
FUZZ_OPTS     ?=

# Longest input per target: a bit more than a request line (limits.max_line_bytes
# is 1024 by default) and a generous configuration file.
FUZZ_MAXLEN_proto := 4096
FUZZ_MAXLEN_conf  := 16384

# The module objects each target links.
FUZZ_OBJS_proto := proto/proto.o
FUZZ_OBJS_conf  := conf/conf.o

FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all \
                -fno-omit-frame-pointer
# The Makefile's warnings, errors included.
FUZZ_WARN    := $(WARN)
FUZZ_CFLAGS   = -std=gnu11 $(FUZZ_WARN) -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
                -D_GNU_SOURCE -DREDLOCKD_VERSION='"$(VERSION)"' -I. $(PKG_CFLAGS) -MMD -MP
FUZZ_LDFLAGS := -fsanitize=fuzzer $(FUZZ_SAN)

FUZZ_BINS := $(addprefix $(FUZZ_B)/fuzz-,$(FUZZ_TARGETS))

# Built with $(CC) and $(ALL_CFLAGS) like the unit tests; `make test` may
# run them without arguments (they then find their directories themselves).
FUZZ_REPLAY_BINS := $(B)/fuzz-replay-proto $(B)/fuzz-replay-conf

.PHONY: fuzz fuzz-build fuzz-replay

$(FUZZ_B)/obj/%.o: %.c
	@command -v $(FUZZ_CC) >/dev/null || \
	    { echo "fuzz: $(FUZZ_CC) not found; run 'make deps-faults'" >&2; exit 1; }
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

# A target: its fuzz_<target>.c and the module it tests.
$(FUZZ_B)/fuzz-proto: $(FUZZ_B)/obj/tests/fuzz/fuzz_proto.o \
                      $(addprefix $(FUZZ_B)/obj/,$(FUZZ_OBJS_proto))
$(FUZZ_B)/fuzz-conf: $(FUZZ_B)/obj/tests/fuzz/fuzz_conf.o \
                     $(addprefix $(FUZZ_B)/obj/,$(FUZZ_OBJS_conf))
$(FUZZ_B)/fuzz-proto $(FUZZ_B)/fuzz-conf:
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

fuzz-build: $(FUZZ_BINS)

# Every target runs even when an earlier one failed; the exit status says
# whether any did.  libFuzzer's output goes to build-fuzz/fuzz-<target>.log;
# the summary lines (coverage, executions per second) are printed.
fuzz: $(FUZZ_BINS)
	@fail=""; for spec in $(foreach t,$(FUZZ_TARGETS),$(t):$(FUZZ_MAXLEN_$(t))); do \
	    t=$${spec%%:*}; maxlen=$${spec#*:}; \
	    work=$(FUZZ_B)/corpus/$$t; crashes=$(FUZZ_B)/crashes/$$t; \
	    log=$(FUZZ_B)/fuzz-$$t.log; \
	    rm -rf $$work; mkdir -p $$work $$crashes; \
	    cp tests/fuzz/corpus/$$t/* $$work/; \
	    set -- $$work; \
	    if [ -d tests/fuzz/regress/$$t ]; then set -- "$$@" tests/fuzz/regress/$$t; fi; \
	    if [ -f tests/fuzz/$$t.dict ]; then set -- -dict=tests/fuzz/$$t.dict "$$@"; fi; \
	    echo "  FUZZ    $$t for $(FUZZ_SECONDS) s (log: $$log)"; \
	    ./$(FUZZ_B)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
	        -max_len=$$maxlen -rss_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 \
	        -artifact_prefix=$$crashes/ $(FUZZ_OPTS) "$$@" >$$log 2>&1; rc=$$?; \
	    grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED).*cov:' $$log | tail -n 1 \
	        | sed "s/^/          $$t: /"; \
	    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|slowest_unit_time_sec|peak_rss_mb)' \
	        $$log | sed "s/^/          $$t: /"; \
	    if [ $$rc -ne 0 ]; then \
	        echo "--- last lines of $$log:"; tail -n 60 $$log; echo "---"; \
	        input=$$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' $$log | tail -n 1); \
	        echo "fuzz: $$t FAILED (libFuzzer exit status $$rc)"; \
	        known=; for r in tests/fuzz/regress/$$t/*; do \
	            if [ -n "$$input" ] && [ -f "$$r" ] && cmp -s "$$r" "$$input"; then known=$$r; fi; \
	        done; \
	        if [ -n "$$input" ]; then \
	            echo "  input:      $$input"; \
	            echo "  reproduce:  ./$(FUZZ_B)/fuzz-$$t $$input"; \
	            echo "  or:         make $(B)/fuzz-replay-$$t && ./$(B)/fuzz-replay-$$t $$input"; \
	            if [ -n "$$known" ]; then \
	                echo "  known:      the saved regression $$known still fails"; \
	            else \
	                echo "  keep it:    cp $$input tests/fuzz/regress/$$t/<what-it-breaks>"; \
	            fi; \
	        fi; \
	        fail="$$fail $$t"; \
	    fi; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: failed:$$fail" >&2; exit 1; fi; \
	echo "fuzz: no crash in $(FUZZ_TARGETS) ($(FUZZ_SECONDS) s each)"

# The replay programs: the target, replay.c's main() and the module.
$(B)/fuzz-replay-proto: $(B)/obj/tests/fuzz/replay.o $(B)/obj/tests/fuzz/fuzz_proto.o \
                        $(B)/obj/proto/proto.o
$(B)/fuzz-replay-conf: $(B)/obj/tests/fuzz/replay.o $(B)/obj/tests/fuzz/fuzz_conf.o \
                       $(B)/obj/conf/conf.o
$(FUZZ_REPLAY_BINS):
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(HARDEN_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

# Each program replays tests/fuzz/corpus/<target> and tests/fuzz/regress/<target>
# and prints how many inputs it ran; every one runs, then the status says
# whether all passed.
fuzz-replay: $(FUZZ_REPLAY_BINS)
	@fail=""; for bin in $(FUZZ_REPLAY_BINS); do ./$$bin || fail="$$fail $$bin"; done; \
	if [ -n "$$fail" ]; then echo "fuzz-replay: failed:$$fail" >&2; exit 1; fi

-include $(shell find $(FUZZ_B) -name '*.d' 2>/dev/null)
