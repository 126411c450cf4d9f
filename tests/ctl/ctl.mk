# redlockctl, the flock(1)-style client (daemon/redlockctl.c), and its
# suite (tests/check_redlockctl.c).  Included by the main Makefile.
#
#   make build/redlockctl   the tool (links nothing of the daemon)
#   make check-ctl          build redlockd, redlockctl and the suite, run it
#
# daemon/redlockctl.c has its own main(): the main Makefile keeps it out
# of DAEMON_SRC.

CTL_BIN   := $(B)/redlockctl
CTL_CHECK := $(B)/check_redlockctl

.PHONY: check-ctl

$(CTL_BIN): $(B)/obj/daemon/redlockctl.o
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)

# When the main Makefile lists check_redlockctl in its suites, its
# $(TEST_BINS) rule links it; otherwise it is linked here (the same way).
$(CTL_CHECK): $(B)/obj/tests/check_redlockctl.o $(B)/obj/tests/harness.o
ifeq ($(filter $(CTL_CHECK),$(TEST_BINS)),)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(LDFLAGS)
endif

check-ctl: $(B)/redlockd $(CTL_BIN) $(CTL_CHECK)
	@echo "== check_redlockctl"
	@REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd REDLOCKCTL_BIN=$(CURDIR)/$(CTL_BIN) \
	    CK_DEFAULT_TIMEOUT=$(CK_TIMEOUT) CK_TIMEOUT_MULTIPLIER=$(CK_MULT) ./$(CTL_CHECK)
