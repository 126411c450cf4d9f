# Fault-injection suite: `make faults` (and `make check-faults`, which adds
# a fuzzing run); `make soak` runs its scenarios again and again for
# SOAK_MINUTES (default 10) and prints one table over all the runs.  See
# tests/faults/README.md.
#
#   build/rmw-client     one client session: guarded read-modify-write
#   build/check_faults   starts masters, daemons and clients, injects the
#                        faults, checks the client logs, prints the table

FAULTS_BINS := $(B)/rmw-client $(B)/check_faults

.PHONY: faults soak

SOAK_MINUTES ?= 10

# Objects of tests/faults/ (no Check needed).
$(B)/obj/tests/faults/%.o: tests/faults/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B)/rmw-client: $(B)/obj/tests/faults/rmw_client.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/check_faults: $(B)/obj/tests/faults/check_faults.o $(B)/obj/tests/faults/checker.o \
                   $(HARNESS_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

faults: $(B)/redlockd $(FAULTS_BINS)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd RMW_CLIENT_BIN=$(CURDIR)/$(B)/rmw-client \
	    ./$(B)/check_faults

soak: $(B)/redlockd $(FAULTS_BINS)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd RMW_CLIENT_BIN=$(CURDIR)/$(B)/rmw-client \
	    FAULTS_SOAK_MINUTES=$(SOAK_MINUTES) ./$(B)/check_faults
