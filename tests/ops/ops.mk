# Operations suite: `make check-ops`.  See tests/check_ops.c.
#
#   build/check_ops   SIGHUP reload (applied, rejected, refused), the
#                     sd_notify messages and socket activation; the last
#                     two skip, saying why, when redlockd was built
#                     without libsystemd

.PHONY: check-ops

# When check_ops joins INTEG_TESTS, the main Makefile's $(TEST_BINS) rule
# links it: then only the prerequisites are given here (no second recipe).
ifeq ($(filter check_ops,$(INTEG_TESTS)),)
$(B)/check_ops: $(B)/obj/tests/check_ops.o $(HARNESS_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(LDFLAGS)
else
$(B)/check_ops: $(B)/obj/tests/check_ops.o $(HARNESS_OBJ)
endif

# With SANITIZE=..., as `make test`: any sanitizer report fails the run.
check-ops: $(B)/redlockd $(B)/check_ops
ifneq ($(SANITIZE),)
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
endif
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd CK_DEFAULT_TIMEOUT=$(CK_TIMEOUT) \
	    CK_TIMEOUT_MULTIPLIER=$(CK_MULT) ./$(B)/check_ops
ifneq ($(SANITIZE),)
	@if [ -n "$$(ls -A $(SAN_LOGS))" ]; then echo "sanitizer reports:"; \
	    head -n 40 $(SAN_LOGS)/*; exit 1; fi; echo "sanitizers: no report"
endif
