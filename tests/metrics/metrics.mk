# The Prometheus endpoint's suite (tests/check_metrics.c): `make check-metrics`.
# It starts five redis-server masters and build/redlockd with metrics.listen
# on a free loopback port, like the other integration suites.

.PHONY: check-metrics

# The daemon's objects too: metrics_table_rules and metrics_table_in_both_outputs
# walk its report table (daemon/report.h).
$(B)/check_metrics: $(B)/obj/tests/check_metrics.o $(HARNESS_OBJ) $(LIB_OBJ)
# The recipe, unless the main Makefile's $(TEST_BINS) rule links it already
# (once check_metrics is in its test lists; two recipes would override).
ifeq ($(filter $(B)/check_metrics,$(TEST_BINS)),)
$(B)/check_metrics:
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(LDFLAGS)
endif

check-metrics: $(B)/redlockd $(B)/check_metrics
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd CK_DEFAULT_TIMEOUT=$(CK_TIMEOUT) \
	    CK_TIMEOUT_MULTIPLIER=$(CK_MULT) ./$(B)/check_metrics
