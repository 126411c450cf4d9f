/*
 * sched_masters.c: the schedules that fault masters (tests/faults/faults.h):
 * masters killed (kill -9) or stopped (SIGSTOP), short and long, and
 * masters restarted empty, two or a majority, with the restart
 * quarantine on or off, under long holders of every kind of hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "tests/faults/checker.h"
#include "tests/faults/netns.h"
#include "tests/harness.h"
#include "tests/faults/faults.h"

/* kill -9 one master, then a second; restart both (empty) later. */
void
ft_sched_kill_masters(struct ft_run *r)
{
    ft_warmup(r, FT_WARMUP_MS);
    ft_kill_master(r, 4);
    ft_pause(2000);
    ft_kill_master(r, 3);
    ft_pause(2000);
    ft_restart_master(r, 3);
    ft_restart_master(r, 4);
    r->heal_us = ft_now_us();
}

/* SIGSTOP the last n masters for ms, then SIGCONT. */
static void
ft_stop_masters(struct ft_run *r, size_t n, int64_t ms)
{
    size_t i;

    ft_warmup(r, FT_WARMUP_MS);
    for (i = 0; i < n; i++) {
        ft_signal_master(r, FT_MASTERS - 1 - i, SIGSTOP);
    }
    ft_pause(ms);
    for (i = 0; i < n; i++) {
        ft_signal_master(r, FT_MASTERS - 1 - i, SIGCONT);
    }
    r->heal_us = ft_now_us();
}

void
ft_sched_stop1_short(struct ft_run *r)
{
    ft_stop_masters(r, 1, FT_SHORT_STOP_MS);
}

void
ft_sched_stop2_short(struct ft_run *r)
{
    ft_stop_masters(r, 2, FT_SHORT_STOP_MS);
}

void
ft_sched_stop1_long(struct ft_run *r)
{
    ft_stop_masters(r, 1, FT_LONG_STOP_MS);
}

void
ft_sched_stop2_long(struct ft_run *r)
{
    ft_stop_masters(r, 2, FT_LONG_STOP_MS);
}

/* Wait until PTTL of key on master i rises (the holder's lease was renewed). */
static bool
ft_wait_renewal(size_t i, const char *key, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    long long prev = h_master_pttl(i, key), now;

    for (;;) {
        h_sleep_ms(FT_POLL_MS);
        now = h_master_pttl(i, key);
        if (now >= 0 && prev >= 0 && now > prev + 100) {
            return true;
        }
        prev = now;
        if (h_now_ms() >= deadline) {
            return false;
        }
    }
}

/*
 * Wait until the PTTL of each of keys[0..n) on master i rose once (each
 * holder's lease was renewed).  True in time.
 */
bool
ft_wait_renewals(size_t i, char (*keys)[CHECKER_NAME_MAX + 32], size_t n, int64_t timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    long long prev[FT_LIMIT + 2], now;
    bool renewed[FT_LIMIT + 2];
    size_t k, left = n;

    for (k = 0; k < n; k++) {
        prev[k] = h_master_pttl(i, keys[k]);
        renewed[k] = false;
    }
    for (;;) {
        h_sleep_ms(FT_POLL_MS);
        for (k = 0; k < n; k++) {
            if (renewed[k]) {
                continue;
            }
            now = h_master_pttl(i, keys[k]);
            if (now >= 0 && prev[k] >= 0 && now > prev[k] + 100) {
                renewed[k] = true;
                left--;
            }
            prev[k] = now;
        }
        if (left == 0) {
            return true;
        }
        if (h_now_ms() >= deadline) {
            return false;
        }
    }
}

/*
 * The restart schedules with kinds: FT_HOT_SEM's three permits and
 * FT_HOT_RW held by long holders through daemon 0, like FT_HOT; then two
 * clients poll for a permit of FT_HOT_SEM and two for FT_HOT_RW through
 * daemon 1.  FT_HOT_RW's holder is shared and its contenders exclusive
 * when shared_holder, else the other way round.  Returns 0, or -1 with
 * the setup failure recorded.
 */
int
ft_start_hot_kinds(struct ft_run *r, bool shared_holder)
{
    char ports[16], sleep[16];
    size_t idx[FT_LIMIT + 1], k;
    int64_t fresh[FT_LIMIT + 1];
    int c;

    snprintf(ports, sizeof(ports), "%d", r->ports[0]);
    snprintf(sleep, sizeof(sleep), "%d", FT_HOLD_SLEEP_MS);
    for (k = 0; k <= FT_LIMIT; k++) {
        c = ft_start_kind(r, k < FT_LIMIT ? FT_HOT_SEM : FT_HOT_RW,
                          k < FT_LIMIT ? &ft_counted : shared_holder ? &ft_shared : &ft_plain,
                          ports, 1, FT_MAX_TTL_MS, sleep, 0, 0);
        if (c < 0) {
            ft_setup_failed(r, "cannot start the holders of %s and %s", FT_HOT_SEM, FT_HOT_RW);
            return -1;
        }
        idx[k] = (size_t)c;
        fresh[k] = FT_HOLD_SLEEP_MS;
    }
    r->hot_kinds = true;
    r->neg_counted = FT_HOT_SEM;
    r->neg_shared = FT_HOT_RW;
    if (!ft_wait_in_sections(r, idx, fresh, FT_LIMIT + 1, FT_WAIT_MS)) {
        ft_setup_failed(r, "the holders did not get %s and %s", FT_HOT_SEM, FT_HOT_RW);
        return -1;
    }
    ft_event(r, "clients %zu-%zu hold the %d permits of %s, client %zu holds %s %s, through "
             "daemon 0", idx[0], idx[FT_LIMIT - 1], FT_LIMIT, FT_HOT_SEM, idx[FT_LIMIT],
             FT_HOT_RW, shared_holder ? "shared" : "exclusive");
    snprintf(ports, sizeof(ports), "%d", r->ports[1]);
    snprintf(sleep, sizeof(sleep), "%d", 200);
    for (k = 0; k < 4; k++) {
        if (ft_start_kind(r, k < 2 ? FT_HOT_SEM : FT_HOT_RW,
                          k < 2 ? &ft_counted : shared_holder ? &ft_plain : &ft_shared,
                          ports, 1, FT_MAX_TTL_MS, sleep, FT_POLL_CLIENT_MS, 0) < 0) {
            ft_setup_failed(r, "cannot start the contenders of %s and %s", FT_HOT_SEM,
                            FT_HOT_RW);
            return -1;
        }
    }
    ft_event(r, "two clients poll for %s, two for %s %s, through daemon 1", FT_HOT_SEM,
             FT_HOT_RW, shared_holder ? "exclusive" : "shared");
    return 0;
}

/*
 * The restart schedules' two clients of FT_HOT: a long holder (one
 * FT_HOLD_SLEEP_MS section, ttl max_ttl) through daemon 0, waited for
 * until it is inside its section, then a contender polling through
 * daemon 1.  Returns 0, or -1 with the setup failure recorded.
 */
int
ft_start_hot_pair(struct ft_run *r, const char *key)
{
    char ports[16], sleep[16];
    int holder, contender;

    snprintf(ports, sizeof(ports), "%d", r->ports[0]);
    snprintf(sleep, sizeof(sleep), "%d", FT_HOLD_SLEEP_MS);
    holder = ft_start_client(r, FT_HOT, ports, 1, FT_MAX_TTL_MS, sleep, 0, 0);
    if (holder < 0 || ft_wait_in_section(r, (size_t)holder, FT_HOLD_SLEEP_MS) < 0) {
        ft_setup_failed(r, "the holder did not get %s", FT_HOT);
        return -1;
    }
    ft_event(r, "client %d holds %s through daemon 0, on %zu masters", holder, FT_HOT,
             h_masters_holding(key, NULL));
    snprintf(ports, sizeof(ports), "%d", r->ports[1]);
    snprintf(sleep, sizeof(sleep), "%d", 200);
    contender = ft_start_client(r, FT_HOT, ports, 1, FT_MAX_TTL_MS, sleep, FT_POLL_CLIENT_MS, 0);
    if (contender < 0) {
        ft_setup_failed(r, "cannot start the contender");
        return -1;
    }
    ft_event(r, "client %d polls for %s through daemon 1", contender, FT_HOT);
    return 0;
}

/*
 * Masters on which key holds what it holds on master 2, which kept its
 * keys through the first restart: the long holder's own token.  A
 * contender's passing key on a restarted master (its try landed there
 * before the holder's renewal put the holder's back, and its clean-up
 * deletes it) does not count: counting any value, the schedule once saw
 * "on 5 masters" in that moment and restarted masters 0 and 1 while the
 * holder's permit was on master 2 alone.
 */
static size_t
ft_masters_like_2(const char *key)
{
    char *token = h_master_get(2, key);
    size_t n = token != NULL ? h_masters_holding(key, token) : 0;

    free(token);
    return n;
}

/* Masters on which permit i of FT_HOT_SEM is held by its long holder. */
static size_t
ft_permit_masters(size_t i)
{
    char key[CHECKER_NAME_MAX + 32];

    snprintf(key, sizeof(key), "%s%s permit %zu", FT_PREFIX, FT_HOT_SEM, i);
    return ft_masters_like_2(key);
}

/* Masters on which the shared set of name has a live member. */
static size_t
ft_member_masters(const char *name)
{
    char key[CHECKER_NAME_MAX + 32];
    size_t i, n = 0;

    snprintf(key, sizeof(key), "%s%s", FT_PREFIX, name);    /* the holders' set */
    for (i = 0; i < FT_MASTERS; i++) {
        n += ft_live_members(i, key, NULL, 0) > 0;
    }
    return n;
}

/*
 * Without the quarantine: wait until renewals put the long holders of
 * FT_HOT_SEM (its three permits) and FT_HOT_RW (a shared member) back on
 * the restarted masters too.  False, with the setup failure recorded, at
 * the deadline.
 */
static bool
ft_wait_kinds_restored(struct ft_run *r)
{
    int64_t deadline = h_now_ms() + FT_WAIT_MS;
    size_t i, least;

    for (;;) {
        least = ft_member_masters(FT_HOT_RW);
        for (i = 0; i < FT_LIMIT; i++) {
            size_t n = ft_permit_masters(i);

            least = n < least ? n : least;
        }
        if (least == FT_MASTERS) {
            ft_event(r, "renewals put %s's permits and %s's shared member back: on %d masters",
                     FT_HOT_SEM, FT_HOT_RW, FT_MASTERS);
            return true;
        }
        if (h_now_ms() >= deadline) {
            ft_setup_failed(r, "%s's permits or %s's shared member were not put back on "
                            "masters 3 and 4 (%s: %zu/%zu/%zu masters, %s: %zu)", FT_HOT_SEM,
                            FT_HOT_RW, FT_HOT_SEM, ft_permit_masters(0), ft_permit_masters(1),
                            ft_permit_masters(2), FT_HOT_RW, ft_member_masters(FT_HOT_RW));
            return false;
        }
        h_sleep_ms(FT_POLL_MS);
    }
}

/*
 * Restart two masters empty while a lock is held on exactly a quorum:
 * masters 3 and 4 die; a long holder (daemon 0) takes "hot" on {0,1,2};
 * 3 and 4 come back empty; right after one of the holder's renewals,
 * masters 0 and 1 are restarted empty too.  Without the quarantine, that
 * renewal (confirmed by {0,1,2}) has put the holder's keys back on 3 and
 * 4, and the schedule waits until they are there: the lock is then on
 * {2,3,4} after the second restart and no contender can take a quorum.
 * With the quarantine, 3 and 4 do not count (nothing is put back there),
 * the holder's keys are on master 2 alone, and the contender polling
 * through daemon 1 gets nothing until the restarted masters count again.
 */
void
ft_sched_restart_empty(struct ft_run *r)
{
    char key[CHECKER_NAME_MAX + 16];
    size_t held;

    snprintf(key, sizeof(key), "%s%s", FT_PREFIX, FT_HOT);
    r->hot = true;
    ft_warmup(r, FT_WARMUP_MS);
    ft_kill_master(r, 3);
    ft_kill_master(r, 4);
    if (ft_start_hot_pair(r, key) != 0) {
        return;
    }
    if (r->kinds && ft_start_hot_kinds(r, true) != 0) {
        return;
    }
    ft_restart_master(r, 3);
    ft_restart_master(r, 4);
    if (!ft_wait_master_up(3, true, h_daemon_count(), FT_WAIT_MS)
        || !ft_wait_master_up(4, true, h_daemon_count(), FT_WAIT_MS)) {
        ft_setup_failed(r, "the daemons did not reconnect to masters 3 and 4");
        return;
    }
    ft_event(r, "both daemons reconnected to masters 3 and 4");
    if (!ft_wait_renewal(2, key, FT_MAX_TTL_MS)) {
        ft_setup_failed(r, "the holder's lease was not renewed on master 2");
        return;
    }
    ft_event(r, "the holder's lease was renewed");
    if (!r->sc->quarantine) {
        int64_t deadline = h_now_ms() + FT_WAIT_MS;

        while ((held = ft_masters_like_2(key)) < FT_MASTERS && h_now_ms() < deadline) {
            h_sleep_ms(FT_POLL_MS);
        }
        if (held < FT_MASTERS) {
            ft_setup_failed(r, "the holder's keys were not put back on masters 3 and 4 "
                            "(%zu masters hold %s)", held, FT_HOT);
            return;
        }
        ft_event(r, "the renewal put %s back on masters 3 and 4: on %zu masters", FT_HOT, held);
        if (r->kinds && !ft_wait_kinds_restored(r)) {
            return;
        }
    }
    ft_kill_master(r, 0);
    ft_kill_master(r, 1);
    ft_restart_master(r, 0);
    ft_restart_master(r, 1);
    r->heal_us = ft_now_us();
    ft_event(r, "%s is now on %zu masters", FT_HOT, h_masters_holding(key, NULL));
    if (r->kinds) {
        ft_event(r, "%s's permits are on %zu, %zu and %zu masters, %s's shared holder on %zu",
                 FT_HOT_SEM, ft_permit_masters(0), ft_permit_masters(1), ft_permit_masters(2),
                 FT_HOT_RW, ft_member_masters(FT_HOT_RW));
    }
    /* Quarantine: the first grant needs three masters out of it, and the
       keys still on master 2 to expire. */
    r->bound_ms = FT_MAX_TTL_MS + FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
}

/*
 * Restart a majority empty at once while a lock is on all five: a long
 * holder (daemon 0) takes "hot"; a contender polls through daemon 1;
 * right after one of the holder's renewals masters 0, 1 and 2 are
 * killed and restarted empty, so the holder's keys are on {3,4} only
 * and no renewal can put them back (it needs a quorum's confirmation).
 * Without the restart quarantine the contender takes "hot" on {0,1,2}
 * while the holder is inside its section (the negative control); with
 * it, the restarted masters do not count until max_ttl has passed.
 */
void
ft_sched_restart_majority(struct ft_run *r)
{
    char keys[FT_LIMIT + 2][CHECKER_NAME_MAX + 32];
    size_t i, nkeys = 0;

    snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT);
    r->hot = true;
    r->neg_exclusive = FT_HOT;
    ft_warmup(r, FT_WARMUP_MS);
    if (ft_start_hot_pair(r, keys[0]) != 0) {
        return;
    }
    if (r->kinds) {
        if (ft_start_hot_kinds(r, false) != 0) {
            return;
        }
        for (i = 0; i < FT_LIMIT; i++) {
            snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s permit %zu", FT_PREFIX, FT_HOT_SEM,
                     i);
        }
        snprintf(keys[nkeys++], sizeof(keys[0]), "%s%s", FT_PREFIX, FT_HOT_RW);
    }
    if (!ft_wait_renewals(4, keys, nkeys, FT_MAX_TTL_MS)) {
        ft_setup_failed(r, "the holders' leases were not renewed on master 4");
        return;
    }
    ft_event(r, "the holder's lease was renewed%s", nkeys > 1 ? ", and the others'" : "");
    for (i = 0; i < 3; i++) {
        ft_kill_master(r, i);
    }
    for (i = 0; i < 3; i++) {
        ft_restart_master(r, i);
    }
    r->heal_us = ft_now_us();
    for (i = 0; i < nkeys; i++) {
        ft_event(r, "'%s' is now on %zu masters", keys[i], h_masters_holding(keys[i], NULL));
    }
    r->bound_ms = FT_MAX_TTL_MS + FT_TTL_MS + 4 * FT_RETRY_MS + FT_SLACK_MS;
}
