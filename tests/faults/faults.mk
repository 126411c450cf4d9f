# Fault-injection suite: `make faults` (and `make check-faults`, which adds
# a fuzzing run).  See tests/faults/README.md.
#
#   build/rmw-client     one client session: guarded read-modify-write
#   build/delay-proxy    a TCP proxy that delays each chunk (delay-jitter)
#   build/check_faults   starts masters, daemons and clients, injects the
#                        faults, checks the client logs, prints the table

FAULTS_BINS := $(B)/rmw-client $(B)/delay-proxy $(B)/check_faults

.PHONY: faults

# Objects of tests/faults/ (no Check needed).
$(B)/obj/tests/faults/%.o: tests/faults/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B)/rmw-client: $(B)/obj/tests/faults/rmw_client.o $(CLIENT_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/delay-proxy: $(B)/obj/tests/faults/delay_proxy.o
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(B)/check_faults: $(B)/obj/tests/faults/check_faults.o $(B)/obj/tests/faults/checker.o \
                   $(B)/obj/tests/faults/netns.o $(HARNESS_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

faults: $(B)/redlockd $(FAULTS_BINS)
	REDLOCKD_BIN=$(CURDIR)/$(B)/redlockd RMW_CLIENT_BIN=$(CURDIR)/$(B)/rmw-client \
	    DELAY_PROXY_BIN=$(CURDIR)/$(B)/delay-proxy ./$(B)/check_faults
