/*
 * check_sets.c: several names at once (LOCK n1 .. nk), end to end.
 *
 * Real redis-server masters, one or two real redlockd processes on the
 * same masters, real sockets (tests/harness.h).  Every daemon uses
 * lock.key_prefix PREFIX, so the keys read on the masters are
 * "<prefix><name>".
 *
 * Covered: a set is granted whole (every name's key holds one token on
 * a quorum) and released whole; a refused try leaves no name of the set
 * on any master (all or none, TRYLOCK and a waiting LOCK); first in,
 * first out with single-name waiters on the same names, both ways; a
 * set and its reverse on two daemons, with singles on the same names,
 * all finish (no deadlock); a set woken by the release of whichever name
 * kept it out, through another daemon; losing one name loses the set
 * (one LOST naming it) and frees the others; a closed session frees its
 * set, and a closed waiter lets the queue behind it go; re-entry of the
 * same set, CONFLICT for a set sharing a name with a hold and for a
 * part of a set; lease mode (token UNLOCK and EXTEND of the set); the
 * limits and errors; STATS set_grants.
 *
 * Waiting is always for a condition with a deadline; the only timed
 * checks are "nothing arrives for N ms" (h_quiet), which show that a
 * waiter is still waiting.  CK_RUN_CASE=<test> ./build/check_sets runs
 * one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        5       /* masters per test */
#define PREFIX          "st:"   /* lock.key_prefix of every daemon */
#define CMD_MS          2000    /* deadline for a reply that needs the masters */
#define GRANT_MS        5000    /* deadline for a waiter's grant once the way is free */
#define QUIET_MS        400     /* a waiter that must still be waiting: nothing for this long */
#define TEST_TIMEOUT_S  60      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define ROUNDS          15      /* sets taken by each client of the no-deadlock test */

/* Every daemon: a blocked LOCK retries after 0..100 ms; keys under PREFIX; BREAK's password. */
static const struct h_daemon_opts st_opts = {
    .retry_delay_ms = 100,
    .key_prefix = PREFIX,
    .admin_password = "admin-secret",
};

/* The value of name's key on master i, "" when absent (static buffer). */
static const char *
st_value(size_t i, const char *name)
{
    static char out[128];
    char key[64];
    char *v;

    snprintf(key, sizeof(key), PREFIX "%s", name);
    v = h_master_get(i, key);
    snprintf(out, sizeof(out), "%s", v != NULL ? v : "");
    free(v);
    return out;
}

/* How many masters hold name's key at all. */
static size_t
st_held_on(const char *name)
{
    size_t i, n = 0;

    for (i = 0; i < NMASTERS; i++) {
        n += st_value(i, name)[0] != '\0';
    }
    return n;
}

/* How many masters grant name to someone: hold it with anything but a waiting set's claim. */
static size_t
st_granted_on(const char *name)
{
    size_t i, n = 0;

    for (i = 0; i < NMASTERS; i++) {
        n += st_value(i, name)[0] != '\0' && strncmp(st_value(i, name), "claim ", 6) != 0;
    }
    return n;
}

/* The key of name is gone from every master. */
static bool
st_cond_gone(void *arg)
{
    return st_held_on(arg) == 0;
}

/* The key of name is on a quorum of the masters. */
static bool
st_cond_held(void *arg)
{
    return st_held_on(arg) >= NMASTERS / 2 + 1;
}

#define ST_GONE(name) \
    ck_assert_msg(h_wait_until(st_cond_gone, (void *)(name), GRANT_MS), \
                  "%s is still on %zu masters (line %d; value '%s')", (name), st_held_on(name), \
                  __LINE__, st_value(0, name))

/* Every name of names (NULL-terminated) holds one and the same token on every master. */
static void
st_held_together(const char *const *names)
{
    char first[128];
    size_t i, j;

    snprintf(first, sizeof(first), "%s", st_value(0, names[0]));
    ck_assert_msg(first[0] != '\0', "%s is not on master 0", names[0]);
    for (i = 0; names[i] != NULL; i++) {
        for (j = 0; j < NMASTERS; j++) {
            ck_assert_msg(strcmp(st_value(j, names[i]), first) == 0,
                          "master %zu: %s holds '%s', %s holds '%s'", j, names[i],
                          st_value(j, names[i]), names[0], first);
        }
    }
}

/*
 * names (one space between two) are held now by one holder: the value
 * of the first name's key on most masters is on a quorum of every
 * name's keys.
 */
static void
st_held_by_quorum(const char *names)
{
    char list[64], token[128], seen[NMASTERS][128], *p, *save = NULL;
    size_t i, j, n, best = 0;

    snprintf(list, sizeof(list), "%s", names);
    p = strtok_r(list, " ", &save);
    /*
     * The value on most masters: a master outside the holder's quorum
     * may show, for a moment, another client's try that it then releases.
     */
    for (i = 0; i < NMASTERS; i++) {
        snprintf(seen[i], sizeof(seen[i]), "%s", st_value(i, p));
    }
    token[0] = '\0';
    for (i = 0; i < NMASTERS; i++) {
        for (j = 0, n = 0; j < NMASTERS; j++) {
            n += seen[i][0] != '\0' && strcmp(seen[i], seen[j]) == 0;
        }
        if (n > best) {
            best = n;
            snprintf(token, sizeof(token), "%.127s", seen[i]);
        }
    }
    for (; p != NULL; p = strtok_r(NULL, " ", &save)) {
        for (i = 0, n = 0; i < NMASTERS; i++) {
            n += strcmp(st_value(i, p), token) == 0;
        }
        ck_assert_msg(n >= NMASTERS / 2 + 1, "%s (held with %s) holds '%s' on only %zu masters",
                      p, names, token, n);
    }
}

/* A set is granted whole and released whole; the reply names it as given. */
START_TEST(set_granted_whole)
{
    static const char *const abc[] = { "a", "b", "c", NULL };
    char *got;
    long long v;
    int s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    got = EXPECT_CMD(s, "LOCK c a b ttl=10000");
    EXPECT_IS(got, "OK", "c a b");
    EXPECT_FIELD(got, "holds", "1");
    v = EXPECT_INT(got, "validity");
    ck_assert_msg(v > 0 && v <= 10000, "validity out of range: '%s'", got);
    free(got);
    st_held_together(abc);
    got = EXPECT_CMD(s, "STATUS b");
    EXPECT_IS(got, "HELD", "b");
    EXPECT_FIELD(got, "owner", "self");
    free(got);
    ck_assert_int_eq(expect_stat("set_grants"), 1);
    EXPECT_REPLY(s, "UNLOCK b c a", "OK b c a holds=0");
    ck_assert_uint_eq(st_held_on("a") + st_held_on("b") + st_held_on("c"), 0);
    close(s);
}
END_TEST

/* A refused set leaves none of its names anywhere: TRYLOCK and a waiting LOCK. */
START_TEST(set_all_or_none)
{
    char *got;
    int a, b;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    a = expect_connect(0);
    b = expect_connect(0);
    got = EXPECT_CMD(b, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    got = EXPECT_CMD(a, "TRYLOCK a b c ttl=20000");
    EXPECT_IS(got, "BUSY", "a b c");
    ck_assert_msg(EXPECT_INT(got, "ttl") > 0, "BUSY without the holder's ttl: '%s'", got);
    free(got);
    ck_assert_uint_eq(st_held_on("a"), 0);
    ck_assert_uint_eq(st_held_on("c"), 0);
    /* Waiting: still nothing of it while b is held. */
    ck_assert_int_eq(h_send(a, "LOCK a b c ttl=20000 wait=20000"), 0);
    ck_assert(h_quiet(a, QUIET_MS));
    ck_assert_uint_eq(st_granted_on("a"), 0);     /* claimed at most: a claim is no grant */
    ck_assert_uint_eq(st_held_on("c"), 0);
    EXPECT_REPLY(b, "UNLOCK b", "OK b holds=0");
    got = EXPECT_READ(a, GRANT_MS, "the set once b was free");
    EXPECT_IS(got, "OK", "a b c");
    free(got);
    close(a);
    close(b);
}
END_TEST

/*
 * First in, first out with single names: a set waits for a single LOCK
 * queued before it; a single LOCK queued behind a set that heads its
 * name's queue waits for the set even though the name is free on the
 * masters; and a single LOCK of a later name of a set that waits for an
 * earlier one goes by it (the set keeps its place: it waits for that
 * LOCK's hold when its earlier name frees, and LOCKs that come later
 * wait behind it again).
 */
START_TEST(set_fifo_with_singles)
{
    int holder, set, single, early, later;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    holder = expect_connect(0);
    set = expect_connect(0);
    single = expect_connect(0);
    early = expect_connect(0);
    later = expect_connect(0);

    /* A set queued behind a single LOCK waits for it. */
    got = EXPECT_CMD(holder, "LOCK x ttl=20000");
    EXPECT_IS(got, "OK", "x");
    free(got);
    ck_assert_int_eq(h_send(early, "LOCK x ttl=20000"), 0);
    expect_wait_stat("waiters", 1, false, CMD_MS);
    ck_assert_int_eq(h_send(set, "LOCK x y ttl=20000"), 0);
    /* y comes after x: while the set waits for x, a LOCK of y goes by. */
    ck_assert_int_eq(h_send(single, "LOCK y ttl=20000"), 0);
    got = EXPECT_READ(single, GRANT_MS, "the LOCK of y, past the set that waits for x");
    EXPECT_IS(got, "OK", "y");
    free(got);
    EXPECT_REPLY(holder, "UNLOCK x", "OK x holds=0");
    got = EXPECT_READ(early, GRANT_MS, "the single LOCK queued before the set");
    EXPECT_IS(got, "OK", "x");
    free(got);
    EXPECT_REPLY(early, "UNLOCK x", "OK x holds=0");
    /* x is the set's now (it heads x's queue); it waits for y's holder. */
    ck_assert(h_quiet(set, QUIET_MS));
    ck_assert_int_eq(h_send(later, "LOCK y ttl=20000"), 0);
    EXPECT_REPLY(single, "UNLOCK y", "OK y holds=0");
    got = EXPECT_READ(set, GRANT_MS, "the set");
    EXPECT_IS(got, "OK", "x y");
    free(got);
    ck_assert(h_quiet(later, QUIET_MS));
    EXPECT_REPLY(set, "UNLOCK x y", "OK x y holds=0");
    got = EXPECT_READ(later, GRANT_MS, "the LOCK of y queued behind the set");
    EXPECT_IS(got, "OK", "y");
    free(got);
    EXPECT_REPLY(later, "UNLOCK y", "OK y holds=0");

    /* A single LOCK behind a set that heads its name waits, the name free on the masters. */
    got = EXPECT_CMD(holder, "LOCK y ttl=20000");
    EXPECT_IS(got, "OK", "y");
    free(got);
    ck_assert_int_eq(h_send(set, "LOCK y x ttl=20000"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);
    ck_assert_int_eq(h_send(single, "LOCK x ttl=20000"), 0);
    ck_assert(h_quiet(single, QUIET_MS));
    ck_assert_uint_eq(st_granted_on("x"), 0);
    EXPECT_REPLY(holder, "UNLOCK y", "OK y holds=0");
    got = EXPECT_READ(set, GRANT_MS, "the set once y was free");
    EXPECT_IS(got, "OK", "y x");
    free(got);
    ck_assert(h_quiet(single, QUIET_MS));
    EXPECT_REPLY(set, "UNLOCK x y", "OK x y holds=0");
    got = EXPECT_READ(single, GRANT_MS, "the single LOCK queued behind the set");
    EXPECT_IS(got, "OK", "x");
    free(got);
    close(holder);
    close(set);
    close(single);
    close(early);
    close(later);
}
END_TEST

/*
 * Overlapping sets in opposite orders on two daemons, and single names
 * beside them: every client takes its lock ROUNDS times; nobody is stuck
 * (no deadlock), and no two of them hold a name at once (each one checks,
 * while it holds, that its names' keys hold its token on a quorum).
 */
START_TEST(set_no_deadlock_two_daemons)
{
    static const char *const lines[] = {
        "LOCK p q ttl=10000", "LOCK q p ttl=10000", "LOCK q r p ttl=10000", "LOCK p ttl=10000",
        "LOCK q ttl=10000",
    };
    static const char *const names[] = { "p q", "q p", "q r p", "p", "q" };
    static const char *const unlocks[] = {
        "UNLOCK p q", "UNLOCK q p", "UNLOCK q r p", "UNLOCK p", "UNLOCK q",
    };
    enum { NC = 5 };
    int fd[NC], done[NC] = { 0 }, holding[NC] = { 0 };
    size_t i, finished = 0;
    int64_t end;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    for (i = 0; i < NC; i++) {
        fd[i] = expect_connect(i % 2);
        ck_assert_int_eq(h_send(fd[i], lines[i]), 0);
    }
    end = h_now_ms() + 40000;
    while (finished < NC && h_now_ms() < end) {
        for (i = 0; i < NC; i++) {
            if (done[i] == ROUNDS) {
                continue;
            }
            got = h_read_line(fd[i], 20);
            if (got == NULL) {
                continue;
            }
            if (!holding[i]) {
                EXPECT_IS(got, "OK", names[i]);
                st_held_by_quorum(names[i]);
            }
            free(got);
            if (!holding[i]) {
                holding[i] = 1;
                ck_assert_int_eq(h_send(fd[i], unlocks[i]), 0);
            } else {
                holding[i] = 0;
                if (++done[i] == ROUNDS) {
                    finished++;
                } else {
                    ck_assert_int_eq(h_send(fd[i], lines[i]), 0);
                }
            }
        }
    }
    for (i = 0; i < NC; i++) {
        ck_assert_msg(done[i] == ROUNDS, "'%s' finished %d of %d rounds in 40 s", lines[i],
                      done[i], ROUNDS);
        close(fd[i]);
    }
}
END_TEST

/*
 * A waiting set is woken by the release of whichever name keeps it out,
 * made through another daemon, long before the holders' ttl: first b's
 * holder lets go (a is still held: refused again, on a), then a's.
 */
START_TEST(set_woken_by_each_name)
{
    int h1, h2, set;
    int64_t t0;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h1 = expect_connect(1);
    h2 = expect_connect(1);
    set = expect_connect(0);
    got = EXPECT_CMD(h1, "LOCK a ttl=30000");
    EXPECT_IS(got, "OK", "a");
    free(got);
    got = EXPECT_CMD(h2, "LOCK b ttl=30000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(set, "LOCK a b ttl=30000"), 0);
    ck_assert(h_quiet(set, QUIET_MS));
    EXPECT_REPLY(h2, "UNLOCK b", "OK b holds=0");
    ck_assert(h_quiet(set, QUIET_MS));
    ck_assert_uint_eq(st_held_on("b"), 0);
    t0 = h_now_ms();
    EXPECT_REPLY(h1, "UNLOCK a", "OK a holds=0");
    got = EXPECT_READ(set, GRANT_MS, "the set once a and b were free");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    ck_assert_msg(h_now_ms() - t0 < 20000, "woken by the ttl, not by the release");
    close(h1);
    close(h2);
    close(set);
}
END_TEST

/* Losing one name loses the set: one LOST naming it, and the other names go. */
START_TEST(set_lost_whole)
{
    char key[64];
    char *got;
    int s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    got = EXPECT_CMD(s, "LOCK m n o ttl=1500");
    EXPECT_IS(got, "OK", "m n o");
    free(got);
    snprintf(key, sizeof(key), PREFIX "n");
    expect_del_everywhere(key);
    expect_lost(s, "m n o", 4000, "the set whose n vanished");
    ST_GONE("m");
    ST_GONE("o");
    ck_assert(h_quiet(s, QUIET_MS));        /* one LOST, not three */
    EXPECT_REPLY(s, "UNLOCK m n o", "NOTHELD m n o");
    got = EXPECT_CMD(s, "LOCK m n o ttl=1500");
    EXPECT_IS(got, "OK", "m n o");
    free(got);
    close(s);
}
END_TEST

/* A closed session frees its set; a closed waiter lets the queue behind it go. */
START_TEST(set_close_frees)
{
    int a, w, behind, holder;
    char *got;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    a = expect_connect(0);
    got = EXPECT_CMD(a, "LOCK a b ttl=20000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    close(a);
    ST_GONE("a");
    ST_GONE("b");

    holder = expect_connect(0);
    w = expect_connect(0);
    behind = expect_connect(0);
    got = EXPECT_CMD(holder, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(w, "LOCK a b ttl=20000"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);      /* one per name */
    ck_assert_int_eq(h_send(behind, "LOCK a ttl=20000"), 0);
    ck_assert(h_quiet(behind, QUIET_MS));
    expect_reset(w);
    got = EXPECT_READ(behind, GRANT_MS, "the LOCK behind the closed set");
    EXPECT_IS(got, "OK", "a");
    free(got);
    expect_wait_stat("waiters", 0, false, CMD_MS);
    close(holder);
    close(behind);
}
END_TEST

/* Re-entry of the same set; CONFLICT for a part of it or a set sharing a name. */
START_TEST(set_reentry_and_conflicts)
{
    char *got;
    int s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    got = EXPECT_CMD(s, "LOCK a b ttl=10000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    got = EXPECT_CMD(s, "LOCK b a ttl=10000");
    EXPECT_IS(got, "OK", "b a");
    EXPECT_FIELD(got, "holds", "2");
    free(got);
    EXPECT_PREFIX(s, "LOCK a", "ERR PROTO this session holds a as part of the set a b");
    EXPECT_PREFIX(s, "LOCK a c", "ERR PROTO this session holds a as part of the set a b");
    EXPECT_PREFIX(s, "UNLOCK a", "ERR PROTO this session holds a as part of the set a b");
    EXPECT_PREFIX(s, "UNLOCK a c", "ERR PROTO this session holds a as part of the set a b");
    EXPECT_REPLY(s, "UNLOCK a b", "OK a b holds=1");
    EXPECT_REPLY(s, "UNLOCK b a", "OK b a holds=0");
    got = EXPECT_CMD(s, "LOCK c ttl=10000");
    EXPECT_IS(got, "OK", "c");
    free(got);
    EXPECT_PREFIX(s, "LOCK c d", "ERR PROTO this session holds c on its own");
    EXPECT_REPLY(s, "UNLOCK d e", "NOTHELD d e");
    close(s);
}
END_TEST

/* Lease mode: one token for the set; EXTEND and UNLOCK by it, of the whole set. */
START_TEST(set_lease_mode)
{
    static const char *const xy[] = { "x", "y", NULL };
    char line[128], token[40], *got;
    int s, o;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    o = expect_connect(0);
    got = EXPECT_CMD(s, "LOCK y x mode=lease ttl=5000");
    EXPECT_IS(got, "OK", "y x");
    ck_assert(h_reply_field(got, "token", token, sizeof(token)) && h_is_token(token));
    EXPECT_NO_FIELD(got, "holds");
    free(got);
    st_held_together(xy);
    ck_assert_str_eq(st_value(0, "x"), token);
    snprintf(line, sizeof(line), "EXTEND x y token=%s ttl=9000", token);
    got = EXPECT_CMD(o, line);
    EXPECT_IS(got, "OK", "x y");
    ck_assert_msg(EXPECT_INT(got, "validity") > 5000, "EXTEND kept the old ttl: '%s'", got);
    free(got);
    snprintf(line, sizeof(line), "UNLOCK x y token=%s", token);
    EXPECT_REPLY(o, line, "OK x y");
    ck_assert_uint_eq(st_held_on("x") + st_held_on("y"), 0);
    snprintf(line, sizeof(line), "EXTEND x y token=%s ttl=9000", token);
    EXPECT_REPLY(o, line, "NOTHELD x y");
    /* A set only partly held by the token: NOTHELD, and nothing of it stays. */
    got = EXPECT_CMD(s, "LOCK x y mode=lease ttl=5000");
    EXPECT_IS(got, "OK", "x y");
    ck_assert(h_reply_field(got, "token", token, sizeof(token)));
    free(got);
    snprintf(line, sizeof(line), "EXTEND x y z token=%s ttl=9000", token);
    EXPECT_REPLY(o, line, "NOTHELD x y z");
    ST_GONE("x");
    ST_GONE("y");
    close(s);
    close(o);
}
END_TEST

/*
 * A fenced set: each name its own fence, in the order the names were
 * given, each above the last grant of that name and written back to the
 * name's counter; re-entry repeats them in the new order.
 */
START_TEST(set_fences)
{
    char *got, fence[64], want[64], key[64];
    long long fa, fb, f;
    int s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    for (f = 0; f < 3; f++) {
        got = EXPECT_CMD(s, "LOCK a fence ttl=10000");
        EXPECT_IS(got, "OK", "a");
        free(got);
        EXPECT_REPLY(s, "UNLOCK a", "OK a holds=0");
    }
    got = EXPECT_CMD(s, "LOCK b a fence ttl=10000 label=job7");
    EXPECT_IS(got, "OK", "b a");
    ck_assert_msg(h_reply_field(got, "fence", fence, sizeof(fence))
                  && sscanf(fence, "%lld,%lld", &fb, &fa) == 2, "no two fences: '%s'", got);
    free(got);
    ck_assert_msg(fa > 3 && fb >= 1, "fences %lld (a) and %lld (b): a was granted 3 times", fa,
                  fb);
    snprintf(want, sizeof(want), "%lld", fa);
    ck_assert_uint_ge(h_masters_holding(PREFIX "a fence", want), NMASTERS / 2 + 1);
    got = EXPECT_CMD(s, "STATUS a");
    EXPECT_IS(got, "HELD", "a");
    ck_assert_int_eq(EXPECT_INT(got, "fence"), fa);
    EXPECT_FIELD(got, "label", "job7");
    free(got);
    got = EXPECT_CMD(s, "LOCK a b fence");
    EXPECT_IS(got, "OK", "a b");
    snprintf(want, sizeof(want), "%lld,%lld", fa, fb);
    EXPECT_FIELD(got, "fence", want);
    EXPECT_FIELD(got, "holds", "2");
    free(got);
    EXPECT_REPLY(s, "UNLOCK a b", "OK a b holds=1");
    EXPECT_REPLY(s, "UNLOCK a b", "OK a b holds=0");
    snprintf(key, sizeof(key), "LOCK a fence ttl=10000");
    got = EXPECT_CMD(s, key);
    ck_assert_msg(EXPECT_INT(got, "fence") > fa, "a's next fence is not above the set's: '%s'",
                  got);
    free(got);
    /* A set without a fence: no fence= at all. */
    got = EXPECT_CMD(s, "LOCK c d ttl=10000");
    EXPECT_IS(got, "OK", "c d");
    EXPECT_NO_FIELD(got, "fence");
    free(got);
    close(s);
}
END_TEST

/*
 * A grant nobody reads is released at once, every name of it: a session
 * that resets its connection while its set's round is on the masters,
 * and a lease-mode set whose OK is provably never read (a Unix socket
 * closed with it unread: on TCP a reply written counts as read, since a
 * reset there proves nothing).  Another client then gets the set long
 * before the ttl.
 */
START_TEST(set_undelivered_released)
{
    const char *const lines[] = { "LOCK a b ttl=30000", "LOCK a b mode=lease ttl=30000" };
    char *got;
    size_t i;
    int s, o;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    o = expect_connect(0);
    for (i = 0; i < 2; i++) {
        s = i == 0 ? expect_connect(0) : h_connect_unix();
        ck_assert_int_ge(s, 0);
        ck_assert_int_eq(h_send(s, lines[i]), 0);
        if (i == 0) {
            expect_reset(s);
        } else {
            ck_assert(h_wait_until(st_cond_held, (void *)"b", CMD_MS));
            close(s);       /* the OK unread */
        }
        ST_GONE("a");
        ST_GONE("b");
        got = EXPECT_CMD(o, "LOCK b a ttl=30000 wait=5000");
        EXPECT_IS(got, "OK", "b a");
        free(got);
        EXPECT_REPLY(o, "UNLOCK a b", "OK a b holds=0");
    }
    close(o);
}
END_TEST

/*
 * A paused daemon's set: while it is stopped past the ttl, the other
 * daemon grants the set to its own client; once it runs again its
 * holder hears one LOST for the set, and nothing it does then deletes
 * the new holder's keys.
 */
START_TEST(set_paused_daemon)
{
    static const char *const ab[] = { "a", "b", NULL };
    char token[128], *got;
    int h, w;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h = expect_connect(0);
    w = expect_connect(1);
    got = EXPECT_CMD(h, "LOCK a b ttl=1000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    h_use_daemon(0);
    ck_assert_int_eq(h_signal_daemon(SIGSTOP), 0);
    got = EXPECT_CMD(w, "LOCK b a ttl=20000 wait=10000");
    ck_assert_msg(h_is_reply(got, "OK", "b a"), "the other daemon's set: '%s'", got);
    free(got);
    st_held_together(ab);
    snprintf(token, sizeof(token), "%s", st_value(0, "a"));
    ck_assert_int_eq(h_signal_daemon(SIGCONT), 0);
    expect_lost(h, "a b", 4000, "the paused daemon's set");
    ck_assert(h_quiet(h, QUIET_MS));        /* one LOST */
    st_held_together(ab);
    ck_assert_str_eq(st_value(0, "a"), token);
    close(h);
    close(w);
}
END_TEST

/*
 * An operator's BREAK of one name of a set, through the other daemon:
 * the holder hears one LOST naming the set (reason=broken), and the set's
 * other names are released.
 */
START_TEST(set_break_one_name)
{
    char *got;
    int h, op;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h = expect_connect(0);
    op = expect_connect(1);
    got = EXPECT_CMD(h, "LOCK a b c ttl=20000");
    EXPECT_IS(got, "OK", "a b c");
    free(got);
    EXPECT_PREFIX(op, "AUTH admin-secret", "OK");
    got = EXPECT_CMD(op, "BREAK b");
    EXPECT_IS(got, "OK", "b");
    free(got);
    got = EXPECT_READ(h, GRANT_MS, "the set's LOST");
    ck_assert_msg(strcmp(got, "! LOST a b c reason=broken") == 0, "got '%s'", got);
    free(got);
    ST_GONE("a");
    ST_GONE("c");
    ck_assert(h_quiet(h, QUIET_MS));
    EXPECT_REPLY(h, "UNLOCK a b c", "NOTHELD a b c");
    close(h);
    close(op);
}
END_TEST

/*
 * A set with a lock-delay, ended by a close: each of its names is kept
 * from everyone for the delay (a single TRYLOCK and a set TRYLOCK are
 * BUSY with delayed=), then a waiting set gets them; UNLOCK leaves none.
 */
START_TEST(set_delay)
{
    char *got;
    int a, o;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    o = expect_connect(0);
    a = expect_connect(0);
    got = EXPECT_CMD(a, "LOCK a b ttl=10000 delay=1500");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    close(a);
    got = EXPECT_CMD(o, "TRYLOCK b ttl=10000");
    EXPECT_IS(got, "BUSY", "b");
    ck_assert_msg(EXPECT_INT(got, "delayed") <= 1500, "'%s'", got);
    free(got);
    got = EXPECT_CMD(o, "TRYLOCK a b ttl=10000");
    EXPECT_IS(got, "BUSY", "a b");
    ck_assert_msg(EXPECT_INT(got, "delayed") <= 1500, "'%s'", got);
    free(got);
    got = EXPECT_CMD(o, "LOCK b a ttl=10000 wait=10000 delay=1500");
    ck_assert_msg(h_is_reply(got, "OK", "b a"), "the set after the delay: '%s'", got);
    free(got);
    EXPECT_REPLY(o, "UNLOCK a b", "OK a b holds=0");
    got = EXPECT_CMD(o, "TRYLOCK a b ttl=10000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    close(o);
}
END_TEST

/*
 * Claims: a set waiting for its later name keeps its earlier names, free
 * on the masters, from other daemons (a TRYLOCK there is BUSY); once the
 * set is granted no claim is left anywhere; a set that gives up drops its
 * claims, and a LOCK the claim kept out is woken by that (long before the
 * claim's ttl).
 */
START_TEST(set_claims)
{
    char *got;
    size_t i;
    int h, set, other, late;
    int64_t t0;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h = expect_connect(1);
    other = expect_connect(1);
    set = expect_connect(0);
    late = expect_connect(1);
    got = EXPECT_CMD(h, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(set, "LOCK b a ttl=20000"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    ck_assert_msg(strncmp(st_value(0, "a"), "claim ", 6) == 0, "a holds '%s'", st_value(0, "a"));
    got = EXPECT_CMD(other, "TRYLOCK a ttl=20000");
    EXPECT_IS(got, "BUSY", "a");
    free(got);
    EXPECT_REPLY(h, "UNLOCK b", "OK b holds=0");
    got = EXPECT_READ(set, GRANT_MS, "the set once b was free");
    EXPECT_IS(got, "OK", "b a");
    free(got);
    st_held_by_quorum("a b");
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_msg(strncmp(st_value(i, "a"), "claim ", 6) != 0, "master %zu kept the claim", i);
    }
    EXPECT_REPLY(set, "UNLOCK a b", "OK a b holds=0");

    /* A set that gives up: its claim goes, and the LOCK it kept out gets the name. */
    got = EXPECT_CMD(h, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(set, "LOCK a b ttl=20000 wait=1500"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    ck_assert_int_eq(h_send(late, "LOCK a ttl=20000 wait=15000"), 0);
    ck_assert(h_quiet(late, QUIET_MS));
    t0 = h_now_ms();
    got = EXPECT_READ(set, 5000, "the set's TIMEOUT");
    EXPECT_IS(got, "TIMEOUT", "a b");
    free(got);
    got = EXPECT_READ(late, GRANT_MS, "the LOCK the claim kept out");
    EXPECT_IS(got, "OK", "a");
    free(got);
    ck_assert_msg(h_now_ms() - t0 < 10000, "woken by the claim's ttl, not by its drop");
    close(h);
    close(other);
    close(set);
    close(late);
}
END_TEST

/* The limits and errors of sets. */
START_TEST(set_errors)
{
    char *got;
    size_t i;
    int s, o;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    s = expect_connect(0);
    o = expect_connect(0);
    EXPECT_REPLY(s, "LOCK a b shared",
                 "ERR PROTO LOCK: 'shared' takes one name (a set of names is held exclusively)");
    EXPECT_REPLY(s, "LOCK a a", "ERR PROTO LOCK: lock name 'a' given twice");
    got = EXPECT_CMD(o, "LOCK k limit=2 ttl=10000");
    EXPECT_IS(got, "OK", "k");
    free(got);
    EXPECT_PREFIX(s, "LOCK j k", "ERR KIND k is held with limit=2");
    EXPECT_REPLY(o, "UNLOCK k", "OK k holds=0");
    /* Through the masters only: a counted name with a live permit, held elsewhere. */
    for (i = 0; i < NMASTERS; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "HSET %s limit 2 1 1", PREFIX "w"), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s elsewhere PX 20000",
                                      PREFIX "w permit 1"), 0);
    }
    EXPECT_PREFIX(s, "LOCK v w wait=0", "ERR KIND a name of the set is held with limit=2");
    ck_assert_uint_eq(st_held_on("v"), 0);
    close(s);
    close(o);
}
END_TEST

/* ---- the attacker's cases: BREAK, shared turns, long sets, holders asking for more ---- */

#define RV_LINK_MS      500     /* delay each way of the slow daemon's links to masters 2..4 */
#define RV_NODE_MS      2000    /* its round deadline: above a slow round (2 x RV_LINK_MS) */

/* Every master holds name's key with one and the same value. */
static bool
rv_cond_same_everywhere(void *arg)
{
    char first[128];
    size_t i;

    snprintf(first, sizeof(first), "%s", st_value(0, arg));
    if (first[0] == '\0') {
        return false;
    }
    for (i = 1; i < NMASTERS; i++) {
        if (strcmp(st_value(i, arg), first) != 0) {
            return false;
        }
    }
    return true;
}

/*
 * A BREAK of a set's name that lands while the set's round is on the
 * masters makes that round no lock (as for one name: waiter_broken),
 * whichever name it breaks and whichever try it is: the set's lead takes
 * a new token after each refused try, and the BREAK is matched against
 * that token.  D0 reaches masters 2..4 through RV_LINK_MS proxies, 0 and
 * 1 directly, so its round lasts 2 x RV_LINK_MS while the BREAK's
 * announcement from masters 0 and 1 reaches it at once.  The set's first
 * try is refused (b held through D1); the second one (a new token) is on
 * the masters when the BREAK of b runs: the OK must hold every name.
 */
START_TEST(set_break_during_second_try)
{
    const char *via[NMASTERS] = { NULL };
    struct h_daemon_opts o = st_opts;
    char *got;
    size_t i;
    int h, s, op;

    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 2; i < NMASTERS; i++) {
        via[i] = expect_proxy_start(i, RV_LINK_MS, false);
    }
    o.node_timeout_ms = RV_NODE_MS;
    o.min_ttl_ms = RV_NODE_MS + 1000;
    o.down_after_ms = 4 * RV_NODE_MS;
    o.master_addrs = via;
    ck_assert_msg(h_start_daemon(&o) == 0, "D0 did not start (log above)");
    o.master_addrs = NULL;
    ck_assert_msg(h_start_daemon(&o) == 0, "D1 did not start (log above)");
    h = expect_connect(1);
    op = expect_connect(1);
    s = expect_connect(0);
    EXPECT_PREFIX(op, "AUTH admin-secret", "OK");
    got = EXPECT_CMD(h, "LOCK b ttl=30000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    /* The first try, at full speed: refused on b (its token is then retired). */
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=30000 wait=20000"), 0);
    ck_assert(h_quiet(s, QUIET_MS));
    ck_assert_uint_eq(st_granted_on("a"), 0);     /* claimed at most */
    expect_proxies_on();
    /* b's release wakes the set: its second try, with a new token, is slow. */
    EXPECT_REPLY(h, "UNLOCK b", "OK b holds=0");
    ck_assert_msg(h_wait_until(rv_cond_same_everywhere, (void *)"b", CMD_MS),
                  "the set's second try did not reach every master");
    /* It ran everywhere; its answers from masters 2..4 are still on their way. */
    /* Its first round deletes b at once; its answer takes three round deadlines more. */
    ck_assert_int_eq(h_send(op, "BREAK b"), 0);
    ck_assert_msg(h_wait_until(st_cond_gone, (void *)"b", CMD_MS), "the BREAK did not delete b");
    ck_assert_msg(h_quiet(s, 1), "the set was answered before the BREAK ran");
    got = EXPECT_READ(s, 4 * RV_NODE_MS, "the set after the BREAK");
    ck_assert_msg(h_is_reply(got, "OK", "a b"), "the set: '%s'", got);
    free(got);
    /* OK means a quorum holds every name of the set for this client now. */
    ck_assert_msg(st_held_on("b") >= NMASTERS / 2 + 1,
                  "OK a b told while b is on %zu masters (the BREAK deleted it during the "
                  "round, unnoticed); a is on %zu", st_held_on("b"), st_held_on("a"));
    st_held_by_quorum("a b");
    /* The BREAK's answer: its rounds are over before the daemons stop. */
    got = EXPECT_READ(op, 8 * RV_NODE_MS, "the BREAK's answer");
    ck_assert_msg(strncmp(got, "OK b", 4) == 0, "the BREAK: '%s'", got);
    free(got);
    close(h);
    close(s);
    close(op);
}
END_TEST

/*
 * Two readers on daemon 1 keep a shared hold of a all the time, taking
 * turns (the next one's LOCK is granted before the last one's UNLOCK),
 * from before line is sent on w (through daemon 0) until it is
 * answered: its reply, or NULL by deadline_ms.  A reader's LOCK that is not granted within a second is
 * held back by an exclusive waiter's gate (acquire.lua): the churn stops
 * there, the last reader lets go, and w's answer is awaited alone.
 */
static char *
rv_shared_churn(int w, const char *line, int64_t deadline_ms)
{
    int r[2], holder, pending = -1;
    int64_t sent = 0;
    char *got;

    r[0] = expect_connect(1);
    r[1] = expect_connect(1);
    got = EXPECT_CMD(r[0], "LOCK a shared ttl=10000");
    EXPECT_IS(got, "OK", "a");
    free(got);
    holder = 0;
    ck_assert_int_eq(h_send(w, line), 0);
    while (h_now_ms() < deadline_ms) {
        if ((got = h_read_line(w, 1)) != NULL) {
            break;
        }
        if (holder < 0) {
            continue;
        }
        if (pending < 0) {
            pending = 1 - holder;
            ck_assert_int_eq(h_send(r[pending], "LOCK a shared ttl=10000 wait=20000"), 0);
            sent = h_now_ms();
        }
        if ((got = h_read_line(r[pending], 5)) != NULL) {
            EXPECT_IS(got, "OK", "a");
            free(got);
            EXPECT_REPLY(r[holder], "UNLOCK a", "OK a holds=0");
            holder = pending;
            pending = -1;
        } else if (h_now_ms() - sent > 1000) {
            /* Held back by a gate: the readers stop coming in. */
            EXPECT_REPLY(r[holder], "UNLOCK a", "OK a holds=0");
            holder = -1;
        }
    }
    close(r[0]);
    close(r[1]);
    return got;
}

/*
 * A set is not starved by shared holders of one of its names that take
 * turns through another daemon: refused by them, it closes the name's
 * gate on the masters, as a single exclusive LOCK does (acquire.lua), so
 * that new shared holders wait behind it and the name drains.
 */
START_TEST(set_starved_by_shared_turns)
{
    char *got;
    int w;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    w = expect_connect(0);
    got = rv_shared_churn(w, "LOCK a ttl=10000 wait=6000", h_now_ms() + 8000);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "a"),
                  "the control: a single LOCK through the readers' turns got '%s'",
                  got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(w, "UNLOCK a", "OK a holds=0");
    got = rv_shared_churn(w, "LOCK a b ttl=10000 wait=6000", h_now_ms() + 8000);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "a b"),
                  "a set through the readers' turns got '%s' (a single LOCK of a was granted)",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(w);
}
END_TEST

/*
 * A set whose OK could not fit one reply line (PROTOCOL.md: at most 2048
 * bytes; only an ERR's free text is ever cut) is refused with ERR PROTO
 * naming how many bytes of names fit: with limits.max_line_bytes raised,
 * a lease-mode LOCK of 64 names of 250 bytes, whose OK would have lost
 * its token= and validity=.
 */
START_TEST(set_reply_fits)
{
    struct h_daemon_opts o = st_opts;
    static char line[64 * 251 + 128];
    char token[64], *got, *p;
    size_t i;
    int s;

    o.max_line_bytes = 20000;
    EXPECT_SETUP(.masters = NMASTERS);
    ck_assert_msg(h_start_daemon(&o) == 0, "the daemon did not start (log above)");
    s = expect_connect(0);
    p = line + sprintf(line, "LOCK");
    for (i = 0; i < 64; i++) {
        p += sprintf(p, " %02zu", i);
        memset(p, 'n', 248);
        p += 248;
    }
    sprintf(p, " mode=lease ttl=10000");
    got = h_cmd(s, line, CMD_MS);
    ck_assert_msg(got != NULL, "no reply to a LOCK of 64 names of 250 bytes");
    if (strncmp(got, "ERR ", 4) == 0) {
        ck_assert_msg(strncmp(got, "ERR PROTO LOCK: the names take 16063 bytes, but a set's "
                      "answer names them all on one line", 85) == 0, "'%s'", got);
    } else {
        ck_assert_msg(strncmp(got, "OK ", 3) == 0, "the set: '%.80s...'", got);
        ck_assert_msg(h_reply_field(got, "token", token, sizeof(token)) && h_is_token(token),
                      "a lease-mode set's OK without its token (%zu bytes, ends '%s')",
                      strlen(got), got + (strlen(got) > 60 ? strlen(got) - 60 : 0));
        ck_assert_msg(EXPECT_INT(got, "validity") > 0, "no validity");
    }
    free(got);
    close(s);
}
END_TEST

/*
 * First in, first out makes no deadlock out of names taken in order: a
 * session holds b and asks for c while the set {a b} waits for b and the
 * set {a c}, queued after it, waits behind it for a: c, free on every
 * master, is granted (the sets keep their places only up to the first
 * name they wait for).  The same with two parties: the holder of b asks
 * for d while the set {b d} waits for b.
 */
START_TEST(set_fifo_deadlock_with_holder)
{
    char *got;
    int h, s1, s2;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &st_opts);
    h = expect_connect(0);
    s1 = expect_connect(0);
    s2 = expect_connect(0);
    got = EXPECT_CMD(h, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    /* Two parties: the set {b d} waits for b and heads d's queue. */
    ck_assert_int_eq(h_send(s1, "LOCK b d ttl=20000"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);
    got = h_cmd(h, "LOCK d ttl=20000 wait=3000", 3000 + CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "d"),
                  "LOCK d, free on every master, by the holder of b: '%s' (it waits behind "
                  "the set b d, which waits for b)", got != NULL ? got : "(nothing)");
    free(got);
    EXPECT_REPLY(h, "UNLOCK d", "OK d holds=0");
    expect_reset(s1);
    expect_wait_stat("waiters", 0, false, CMD_MS);
    s1 = expect_connect(0);
    /* Three: the LOCK of c behind {a c}, behind {a b}, which waits for b. */
    ck_assert_int_eq(h_send(s1, "LOCK a b ttl=20000"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);
    ck_assert_int_eq(h_send(s2, "LOCK a c ttl=20000"), 0);
    expect_wait_stat("waiters", 4, false, CMD_MS);
    ck_assert_uint_eq(st_held_on("c"), 0);
    got = h_cmd(h, "LOCK c ttl=20000 wait=3000", 3000 + CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "c"),
                  "LOCK c, free on every master, by the holder of b: '%s' (it waits behind "
                  "the set a c, which waits behind the set a b, which waits for b)",
                  got != NULL ? got : "(nothing)");
    free(got);
    close(h);
    close(s1);
    close(s2);
}
END_TEST

/* ---- claims, lines and gates under slow links, dead daemons and older daemons ---- */

#define R2_LINK_MS      300     /* delay each way of D0's links to masters 0 and 1 */
#define R2_NODE_MS      2000    /* D0's round deadline: above a slow round (2 x R2_LINK_MS) */

/* name's key on master i holds a claim. */
static bool
r2_claimed_on(size_t i, const char *name)
{
    return strncmp(st_value(i, name), "claim ", 6) == 0;
}

/* Neither master 0 nor master 1 holds a claim of name. */
static bool
r2_cond_no_claim_01(void *arg)
{
    return !r2_claimed_on(0, arg) && !r2_claimed_on(1, arg);
}

/*
 * A set granted by a quorum leaves no claim on a slow minority that
 * refused it: b is held by someone else on masters 0 and 1 only, which
 * D0 reaches through slow links; LOCK a b is granted by masters 2..4
 * before the slow answers (refusals at b that claimed a) are read.  The
 * daemon drops the claims of any try that not every master granted, so
 * after UNLOCK a b no claim of a is left on masters 0 and 1.
 */
START_TEST(set_claim_left_on_minority)
{
    const char *via[NMASTERS] = { NULL };
    struct h_daemon_opts o = st_opts;
    char *got;
    size_t i;
    int s;

    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 0; i < 2; i++) {
        via[i] = expect_proxy_start(i, R2_LINK_MS, false);
    }
    o.node_timeout_ms = R2_NODE_MS;
    o.min_ttl_ms = R2_NODE_MS + 1000;
    o.down_after_ms = 4 * R2_NODE_MS;
    o.master_addrs = via;
    ck_assert_msg(h_start_daemon(&o) == 0, "D0 did not start (log above)");
    s = expect_connect(0);
    expect_proxies_on();
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(h_master_cmd(i, NULL, "SET %s elsewhere PX 60000", PREFIX "b"), 0);
    }
    got = EXPECT_CMD(s, "LOCK a b ttl=20000 wait=10000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    /*
     * The slow masters' answers refused at b and claimed a; the daemon
     * drops what a try that not every master granted may have claimed,
     * behind that try on each link, so the claims may already be gone.
     */
    EXPECT_REPLY(s, "UNLOCK a b", "OK a b holds=0");
    ck_assert_msg(h_wait_until(r2_cond_no_claim_01, (void *)"a", GRANT_MS),
                  "the set was granted and released, but its claims of a stay on masters 0 "
                  "and 1 ('%s', '%s'): nobody drops them",
                  st_value(0, "a"), st_value(1, "a"));
    close(s);
}
END_TEST

/*
 * A LOCK behind a set's member that stops standing in line is woken.
 * The set T = {a c} waits for a, held here by h: T stands in a's line,
 * not in c's.  The set S = {c d}, queued after T, heads c and d; refused
 * on the masters at c (held through D1), it waits, standing in d's line,
 * and the LOCK d of l, queued after it, waits for it.  h's UNLOCK a makes
 * T the ready head of a, so T stands in c's line before S, S's member d
 * stops standing in line, and l, with nobody before it and d free on
 * every master, is granted (lock_reline_cb looks at every waiting set
 * after each change).
 */
START_TEST(set_line_change_wakes_nobody)
{
    char *got;
    int h, t, s, l, c1;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h = expect_connect(0);
    t = expect_connect(0);
    s = expect_connect(0);
    l = expect_connect(0);
    c1 = expect_connect(1);
    h_use_daemon(0);        /* STATS below: D0's */
    got = EXPECT_CMD(c1, "LOCK c ttl=60000");
    EXPECT_IS(got, "OK", "c");
    free(got);
    got = EXPECT_CMD(h, "LOCK a ttl=20000");
    EXPECT_IS(got, "OK", "a");
    free(got);
    ck_assert_int_eq(h_send(t, "LOCK a c ttl=20000"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);
    ck_assert_int_eq(h_send(s, "LOCK c d ttl=20000"), 0);
    expect_wait_stat("waiters", 4, false, CMD_MS);
    ck_assert(h_quiet(s, QUIET_MS));        /* refused at c on the masters: it waits */
    ck_assert_int_eq(h_send(l, "LOCK d ttl=20000 wait=60000"), 0);
    expect_wait_stat("waiters", 5, false, CMD_MS);
    ck_assert(h_quiet(l, QUIET_MS));        /* behind S in d's line */
    ck_assert_uint_eq(st_held_on("d"), 0);
    EXPECT_REPLY(h, "UNLOCK a", "OK a holds=0");
    got = h_read_line(l, GRANT_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "d"),
                  "LOCK d, free on every master, answered '%s' in %d ms: T = {a c} now stands "
                  "in c's line before S = {c d}, so S lets the LOCKs behind it in d go, but "
                  "nobody woke the LOCK of d", got != NULL ? got : "(nothing)", GRANT_MS);
    free(got);
    close(h);
    close(t);
    close(s);
    close(l);
    close(c1);
}
END_TEST

/*
 * A dead daemon's claims last no longer than the set's own ttl.  The set
 * {a b} (ttl=2000, wait=3000) waits on D0 for b, held through D1 with a
 * ttl of a minute, and claims a.  D0 dies (SIGKILL): a LOCK a through D1
 * is granted within GRANT_MS, not when b's holder's ttl is over.
 */
START_TEST(set_dead_daemon_claims_outlive_it)
{
    char *got;
    int h, s, l;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    h = expect_connect(1);
    l = expect_connect(1);
    s = expect_connect(0);
    got = EXPECT_CMD(h, "LOCK b ttl=60000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=2000 wait=3000"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    ck_assert_msg(strncmp(st_value(0, "a"), "claim ", 6) == 0, "a holds '%s'", st_value(0, "a"));
    h_use_daemon(0);
    ck_assert_int_eq(h_signal_daemon(SIGKILL), 0);
    ck_assert_int_eq(h_wait_daemon(CMD_MS), 128 + SIGKILL);
    close(s);
    got = h_cmd(l, "LOCK a ttl=20000 wait=5000", GRANT_MS + CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "a"),
                  "LOCK a, claimed by a set (ttl=2000 wait=3000) whose daemon died, answered "
                  "'%s'; a still holds '%s' for %lld ms more (b's time left plus the set's ttl)",
                  got != NULL ? got : "(nothing)", st_value(0, "a"),
                  h_master_pttl(0, PREFIX "a"));
    free(got);
    close(h);
    close(l);
}
END_TEST

/*
 * A claim is no hold, and a LOCK of one name does not wait on it for
 * ever.  The session x holds b through D1; the set {a b} waits on D0 for
 * b and claims a on every master.  x then asks for a (nobody holds it):
 * the claim refuses it, so x would wait for the set, which waits for x's
 * b (x takes names against the byte order, but it cannot see the set).
 * After x's own ttl of refusals by claims, its LOCK takes the claim over:
 * granted, then the set gets both names once x lets go.
 */
START_TEST(set_claim_deadlocks_holder_asking)
{
    char *got;
    int x, s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    x = expect_connect(1);
    s = expect_connect(0);
    got = EXPECT_CMD(x, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=20000"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    ck_assert_uint_eq(st_granted_on("a"), 0);     /* claimed, held by nobody */
    got = h_cmd(x, "LOCK a ttl=1000 wait=8000", 8000 + CMD_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "a"),
                  "LOCK a by the holder of b, a held by nobody: '%s' (a is claimed by the set "
                  "a b, which waits for b: each waits for the other)",
                  got != NULL ? got : "(nothing)");
    free(got);
    ck_assert(h_quiet(s, QUIET_MS));
    EXPECT_REPLY(x, "UNLOCK a", "OK a holds=0");
    EXPECT_REPLY(x, "UNLOCK b", "OK b holds=0");
    got = EXPECT_READ(s, GRANT_MS, "the set once x let go");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    close(x);
    close(s);
}
END_TEST

/*
 * An older daemon (the last release, $REDLOCKD_PREV_BIN) waiting for a
 * name a set claimed, when the set gives up.  The set {a b} on D1 (this
 * build) waits for b, held through D0, and claims a; the LOCK a of D0
 * (the last release) is refused by the claim, a holder to it, and marks
 * a as waited for.  When the set's wait= runs out, unclaim.lua deletes
 * the claim and the mark and announces the release on a's channel with
 * the claim as the token: the older daemon's LOCK a is granted at once,
 * as this build's is (set_claims), not when the claim expires.
 */
START_TEST(set_claim_dropped_wakes_older_daemon)
{
    const char *bin = getenv("REDLOCKD_PREV_BIN");
    char *got;
    int h, s, l;

    ck_assert_msg(bin != NULL && bin[0] != '\0' && access(bin, X_OK) == 0,
                  "no daemon of the last release: set REDLOCKD_PREV_BIN, got '%s'",
                  bin != NULL ? bin : "(unset)");
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts,
                 .builds = (const char *const[]){ bin, NULL });
    h = expect_connect(0);
    s = expect_connect(1);
    l = expect_connect(0);
    got = EXPECT_CMD(h, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=20000 wait=1500"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    ck_assert_msg(strncmp(st_value(0, "a"), "claim ", 6) == 0, "a holds '%s'", st_value(0, "a"));
    ck_assert_int_eq(h_send(l, "LOCK a ttl=20000 wait=60000"), 0);
    ck_assert(h_quiet(l, QUIET_MS));
    got = EXPECT_READ(s, 5000, "the set's TIMEOUT");
    EXPECT_IS(got, "TIMEOUT", "a b");
    free(got);
    got = h_read_line(l, GRANT_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "a"),
                  "the older daemon's LOCK a, once the claim was dropped: '%s' within %d ms "
                  "(a holds '%s')", got != NULL ? got : "(nothing)", GRANT_MS, st_value(0, "a"));
    free(got);
    close(h);
    close(s);
    close(l);
}
END_TEST

/* Neither master 0 nor master 1 has a gate on the key of name. */
static bool
r2_cond_no_gate_01(void *arg)
{
    char key[64];
    long long p0, p1;

    snprintf(key, sizeof(key), PREFIX "%s gate", (const char *)arg);
    p0 = h_master_pttl(0, key);
    p1 = h_master_pttl(1, key);
    return p0 == H_PTTL_ABSENT && p1 == H_PTTL_ABSENT;
}

/*
 * The gate's form of set_claim_left_on_minority: b has live shared
 * holders on masters 0 and 1 only, which D0 reaches through slow links;
 * LOCK a b is granted by masters 2..4 before the slow answers (refusals
 * by readers that closed b's gate for the set) are read.  The daemon
 * opens the gates of any set whose try not every master granted, so
 * after UNLOCK a b no gate of b is left on masters 0 and 1.
 */
START_TEST(set_gate_left_on_minority)
{
    const char *via[NMASTERS] = { NULL };
    struct h_daemon_opts o = st_opts;
    char *got;
    size_t i;
    int s;

    EXPECT_SETUP(.masters = NMASTERS);
    for (i = 0; i < 2; i++) {
        via[i] = expect_proxy_start(i, R2_LINK_MS, false);
    }
    o.node_timeout_ms = R2_NODE_MS;
    o.min_ttl_ms = R2_NODE_MS + 1000;
    o.down_after_ms = 4 * R2_NODE_MS;
    o.master_addrs = via;
    ck_assert_msg(h_start_daemon(&o) == 0, "D0 did not start (log above)");
    s = expect_connect(0);
    expect_proxies_on();
    for (i = 0; i < 2; i++) {
        /* A live shared holder (its expiry far ahead on the master's clock). */
        ck_assert_int_eq(h_master_cmd(i, NULL, "ZADD %s 99999999999999 reader", PREFIX "b"), 0);
        ck_assert_int_eq(h_master_cmd(i, NULL, "PEXPIRE %s 60000", PREFIX "b"), 0);
    }
    got = EXPECT_CMD(s, "LOCK a b ttl=20000 wait=10000");
    EXPECT_IS(got, "OK", "a b");
    free(got);
    EXPECT_REPLY(s, "UNLOCK a b", "OK a b holds=0");
    /* The slow masters' answers closed b's gate (and claimed a): the daemon opens it. */
    ck_assert_msg(h_wait_until(r2_cond_no_gate_01, (void *)"b", GRANT_MS),
                  "the set was granted and released, but the gate it closed on b stays on "
                  "masters 0 and 1 (%lld and %lld ms left)",
                  h_master_pttl(0, PREFIX "b gate"), h_master_pttl(1, PREFIX "b gate"));
    close(s);
}
END_TEST

/*
 * A set that goes wakes the LOCK behind each of its members that headed
 * its queue.  x holds a through D1; the set {a b} waits on D0 and stands
 * in b's line, so the LOCK b behind it on D0 waits for it though b is
 * free.  The set's wait= runs out: the LOCK b is granted at once (which
 * members headed their queues is found before any of them goes).
 */
START_TEST(set_leaving_wakes_later_name)
{
    char *got;
    int x, s, l;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    x = expect_connect(1);
    s = expect_connect(0);
    l = expect_connect(0);
    got = EXPECT_CMD(x, "LOCK a ttl=20000");
    EXPECT_IS(got, "OK", "a");
    free(got);
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=20000 wait=1500"), 0);
    expect_wait_stat("waiters", 2, false, CMD_MS);      /* one per name */
    ck_assert_int_eq(h_send(l, "LOCK b ttl=20000 wait=10000"), 0);
    ck_assert(h_quiet(l, QUIET_MS));
    got = EXPECT_READ(s, 5000, "the set's TIMEOUT");
    EXPECT_IS(got, "TIMEOUT", "a b");
    free(got);
    got = h_read_line(l, GRANT_MS);
    ck_assert_msg(got != NULL && h_is_reply(got, "OK", "b"),
                  "LOCK b, behind the set a b that gave up, b free on every master: '%s' within "
                  "%d ms (b holds '%s')", got != NULL ? got : "(nothing)", GRANT_MS,
                  st_value(0, "b"));
    free(got);
    close(x);
    close(s);
    close(l);
}
END_TEST

/*
 * A claim refuses a counted LOCK as a holder would (BUSY, with the
 * claim's time left), not as a name of another kind (ERR KIND).
 */
START_TEST(set_claim_refuses_counted_busy)
{
    char *got;
    int x, s;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 2, .opts = &st_opts);
    x = expect_connect(1);
    s = expect_connect(0);
    got = EXPECT_CMD(x, "LOCK b ttl=20000");
    EXPECT_IS(got, "OK", "b");
    free(got);
    ck_assert_int_eq(h_send(s, "LOCK a b ttl=20000"), 0);
    ck_assert(h_wait_until(st_cond_held, (void *)"a", CMD_MS));
    got = EXPECT_CMD(x, "TRYLOCK a limit=2 ttl=20000");
    ck_assert_msg(h_is_reply(got, "BUSY", "a"), "a counted TRYLOCK of a claimed name: '%s'", got);
    free(got);
    close(x);
    close(s);
}
END_TEST

/* ---- the suite ---- */

#define ST_ADD(s, test) expect_add_case((s), #test, (test), h_end, TEST_TIMEOUT_S)

static Suite *
sets_suite(void)
{
    Suite *s = suite_create("redlockd sets");

    ST_ADD(s, set_granted_whole);
    ST_ADD(s, set_all_or_none);
    ST_ADD(s, set_fifo_with_singles);
    ST_ADD(s, set_no_deadlock_two_daemons);
    ST_ADD(s, set_woken_by_each_name);
    ST_ADD(s, set_lost_whole);
    ST_ADD(s, set_close_frees);
    ST_ADD(s, set_reentry_and_conflicts);
    ST_ADD(s, set_lease_mode);
    ST_ADD(s, set_fences);
    ST_ADD(s, set_undelivered_released);
    ST_ADD(s, set_paused_daemon);
    ST_ADD(s, set_break_one_name);
    ST_ADD(s, set_delay);
    ST_ADD(s, set_claims);
    ST_ADD(s, set_errors);
    ST_ADD(s, set_break_during_second_try);
    ST_ADD(s, set_starved_by_shared_turns);
    ST_ADD(s, set_reply_fits);
    ST_ADD(s, set_fifo_deadlock_with_holder);
    ST_ADD(s, set_claim_left_on_minority);
    ST_ADD(s, set_line_change_wakes_nobody);
    ST_ADD(s, set_dead_daemon_claims_outlive_it);
    ST_ADD(s, set_claim_deadlocks_holder_asking);
    ST_ADD(s, set_claim_dropped_wakes_older_daemon);
    ST_ADD(s, set_gate_left_on_minority);
    ST_ADD(s, set_leaving_wakes_later_name);
    ST_ADD(s, set_claim_refuses_counted_busy);
    return s;
}

const struct runner runner_main = { "check_sets", sets_suite, h_suite_init, h_suite_cleanup };
