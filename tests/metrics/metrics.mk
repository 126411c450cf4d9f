# The Prometheus endpoint's suite (tests/check_metrics.c): `make check-metrics`.
# It starts five redis-server masters and build/redlockd with metrics.listen
# on a free loopback port, like the other integration suites.

.PHONY: check-metrics

$(B)/check_metrics: $(B)/obj/tests/check_metrics.o $(HARNESS_OBJ)
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
