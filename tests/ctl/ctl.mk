# The suite of redlockctl, the flock(1)-style client (client/redlockctl.c,
# built by the main Makefile with the client library client/client.c):
# tests/check_redlockctl.c.  Included by the main Makefile.
#
#   make check-ctl          build redlockd, redlockctl and the suite, run it

CTL_BIN   := $(B)/redlockctl
CTL_CHECK := $(B)/check_redlockctl

.PHONY: check-ctl

# When the main Makefile lists check_redlockctl in its suites, its
# $(TEST_BINS) rule links it; otherwise it is linked here (the same way).
$(CTL_CHECK): $(B)/obj/tests/check_redlockctl.o $(HARNESS_OBJ)
ifeq ($(filter $(CTL_CHECK),$(TEST_BINS)),)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(LDFLAGS)
endif

check-ctl: $(B)/redlockd $(CTL_BIN) $(CTL_CHECK)
	@echo "== check_redlockctl"
	@REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCKCTL_BIN=$(CURDIR)/$(CTL_BIN) \
	    CK_DEFAULT_TIMEOUT=$(CK_TIMEOUT) CK_TIMEOUT_MULTIPLIER=$(CK_MULT) ./$(CTL_CHECK)
