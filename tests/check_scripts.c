/*
 * check_scripts.c: each of the masters' scripts (daemon/scripts/),
 * run directly on a real redis-server with EVAL, as the daemon builds
 * them (daemon/scripts/embed.sh) and without the daemon: what each
 * answers and what it leaves in the keyspace, including the refusals
 * the Redlock rules rest on (release is compare-and-delete, an extend
 * never creates a record, a raise only counts for a record that still
 * holds its token, a fence write-back never lowers a counter and confirms
 * a grant only where its record still holds its token).
 *
 * One master per test (tests/harness.h); the clock wrapper of
 * daemon/master_eval.c is left out (rl_clock_us false: each script reads TIME
 * itself).  Each test is a test case of its own: CK_RUN_CASE=<test>
 * ./build/check_scripts runs one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <hiredis/hiredis.h>

#include "daemon/redlock.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define REDLOCK_STR(x)  #x
#define REDLOCK_XSTR(x) REDLOCK_STR(x)      /* what daemon/scripts.h expects */
#include "daemon/scripts.h"

#define TEST_TIMEOUT_S  30      /* per test, unless CK_DEFAULT_TIMEOUT is set */
#define SC_ARGS_MAX     96      /* words of one EVAL */
#define TOK_A           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_B           "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define TOK_C           "cccccccccccccccccccccccccccccccc"

static redisContext *sc_redis;  /* the test's master */

/* The test's master, connected at the first call (sc_teardown closes it). */
static redisContext *
sc_master(void)
{
    if (sc_redis == NULL) {
        sc_redis = h_master_redis(0);
        ck_assert_msg(sc_redis != NULL, "cannot connect to the master");
    }
    return sc_redis;
}

static void
sc_teardown(void)
{
    if (sc_redis != NULL) {
        redisFree(sc_redis);
        sc_redis = NULL;
    }
    h_end();
}

/*
 * EVAL body (a script of daemon/scripts.h, as master_script sends it
 * without its clock) with nkeys keys, then the arguments, all strings,
 * the list ending in NULL.  The caller frees the reply.
 */
static redisReply *
sc_run(const char *body, int nkeys, ...)
{
    static const char head[] = "local rl_clock_us = false\n";
    const char *argv[SC_ARGS_MAX];
    char *text, keys[16];
    redisReply *r;
    va_list ap;
    int argc = 0;
    const char *w;

    text = malloc(sizeof(head) + strlen(body));
    ck_assert_ptr_nonnull(text);
    memcpy(text, head, sizeof(head) - 1);
    strcpy(text + sizeof(head) - 1, body);
    snprintf(keys, sizeof(keys), "%d", nkeys);
    argv[argc++] = "EVAL";
    argv[argc++] = text;
    argv[argc++] = keys;
    va_start(ap, nkeys);
    while ((w = va_arg(ap, const char *)) != NULL) {
        ck_assert_int_lt(argc, SC_ARGS_MAX);
        argv[argc++] = w;
    }
    va_end(ap);
    r = redisCommandArgv(sc_master(), argc, argv, NULL);
    free(text);
    ck_assert_msg(r != NULL, "EVAL: no answer (%s)", sc_redis->errstr);
    return r;
}

/* A command on the master; the caller frees the reply. */
static redisReply *
sc_cmd(const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = redisvCommand(sc_master(), fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "%s: no answer (%s)", fmt, sc_redis->errstr);
    return r;
}

/* GET key as a malloc'd string, NULL when absent. */
static char *
sc_get(const char *key)
{
    redisReply *r = sc_cmd("GET %s", key);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;

    freeReplyObject(r);
    return v;
}

static long long
sc_int(const char *fmt, const char *key)
{
    redisReply *r = sc_cmd(fmt, key);
    long long v;

    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s %s: not an integer", fmt, key);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Element i of an array reply as an integer (it must be one). */
static long long
sc_elem(const redisReply *r, size_t i)
{
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements > i, "no element %zu", i);
    ck_assert_msg(r->element[i]->type == REDIS_REPLY_INTEGER, "element %zu: type %d", i,
                  r->element[i]->type);
    return r->element[i]->integer;
}

/* Element i of an array reply as a string (it must be one). */
static const char *
sc_elem_str(const redisReply *r, size_t i)
{
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements > i, "no element %zu", i);
    ck_assert_msg(r->element[i]->type == REDIS_REPLY_STRING, "element %zu: type %d", i,
                  r->element[i]->type);
    return r->element[i]->str;
}

static void
sc_expect_value(const char *key, const char *want)
{
    char *v = sc_get(key);

    if (want == NULL) {
        ck_assert_msg(v == NULL, "%s holds '%s', expected nothing", key, v);
    } else {
        ck_assert_msg(v != NULL && strcmp(v, want) == 0, "%s holds '%s', expected '%s'", key,
                      v != NULL ? v : "(nothing)", want);
    }
    free(v);
}

/* TYPE of key is want ("none" when absent). */
static void
sc_expect_type(const char *key, const char *want)
{
    redisReply *r = sc_cmd("TYPE %s", key);

    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, want) == 0,
                  "%s is of type %s, not %s", key, r->type == REDIS_REPLY_STATUS ? r->str : "?",
                  want);
    freeReplyObject(r);
}

/* n held by tok for 5 s, with a label (as acquire.lua writes it) unless NULL. */
static void
sc_hold(const char *tok, const char *label)
{
    char key[64];

    freeReplyObject(sc_cmd("SET n %s PX 5000", tok));
    if (label != NULL) {
        snprintf(key, sizeof(key), "n label %s", tok);
        freeReplyObject(sc_cmd("SET %s %s PX 5000", key, label));
    }
}

/* An exclusive LOCK's acquire of n with token tok (old: a hand-over's). */
static redisReply *
sc_acquire_x(const char *tok, const char *ttl, const char *old, const char *label)
{
    return sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", tok, ttl, "", old, "x", "", "0",
                  label, NULL);
}

/* Grant, refusal with the holder's token, our own again, hand-over. */
START_TEST(acquire_grant_refuse_handover)
{
    redisReply *r;
    long long p;

    EXPECT_SETUP(.masters = 1);
    r = sc_acquire_x(TOK_A, "5000", "", "");
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 2), 1);         /* set on a free record */
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
    p = sc_int("PTTL %s", "n");
    ck_assert_msg(p > 4000 && p <= 5000, "pttl %lld", p);

    /* Another token is refused, and told whose token keeps it out. */
    r = sc_acquire_x(TOK_B, "5000", "", "");
    ck_assert_msg(sc_elem(r, 0) > 4000, "refusal pttl %lld", sc_elem(r, 0));
    ck_assert_str_eq(sc_elem_str(r, 1), TOK_A);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);

    /* Our own token again (a retry of a set that landed): renewed. */
    r = sc_acquire_x(TOK_A, "9000", "", "");
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 2), 3);
    freeReplyObject(r);
    ck_assert_int_gt(sc_int("PTTL %s", "n"), 8000);

    /* A hand-over swaps only from the old token, in one step. */
    r = sc_acquire_x(TOK_C, "5000", TOK_B, "");
    ck_assert_int_gt(sc_elem(r, 0), 1);         /* refused: TOK_B is not there */
    freeReplyObject(r);
    r = sc_acquire_x(TOK_C, "5000", TOK_A, "");
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 2), 2);
    freeReplyObject(r);
    sc_expect_value("n", TOK_C);
}
END_TEST

/*
 * A label next to the record, with the record's expiry; a fenced grant
 * leaves the counter alone, and its label says that a fence is to come
 * ('-', until the write-back).
 */
START_TEST(acquire_label_no_counter)
{
    redisReply *r;
    char *v;
    long long g;

    EXPECT_SETUP(.masters = 1);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 3, "n", "n", "n fence", TOK_A, "5000", "", "",
               "x", "", "0", "job-7 host=h", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    v = sc_get("n label " TOK_A);
    ck_assert_msg(v != NULL && sscanf(v, "%lld - ", &g) == 1 && strstr(v, " - job-7 host=h"),
                  "label '%s'", v != NULL ? v : "(nothing)");
    free(v);
    ck_assert_int_gt(sc_int("PTTL %s", "n label " TOK_A), 4000);
    sc_expect_value("n fence", NULL);           /* raised only once won (raise.lua) */
}
END_TEST

/* A name is one kind at a time; a permit refusal lists the permits held. */
START_TEST(acquire_kinds_and_permits)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 0", TOK_A, "5000", "c", "", "p", "2", "0",
               "", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 1", TOK_B, "5000", "c", "", "p", "2", "0",
               "", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    /* Full: {pttl, who, held, shortest, index...}. */
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 0", TOK_C, "5000", "c", "", "p", "2", "0",
               "", NULL);
    ck_assert_str_eq(sc_elem_str(r, 1), TOK_A);
    ck_assert_int_eq(sc_elem(r, 2), 2);
    ck_assert_int_eq(sc_elem(r, 4), 0);
    ck_assert_int_eq(sc_elem(r, 5), 1);
    freeReplyObject(r);
    /* Another limit, or an exclusive LOCK, meets the counted name. */
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 0", TOK_C, "5000", "c", "", "p", "3", "0",
               "", NULL);
    ck_assert_str_eq(sc_elem_str(r, 0), "kind");
    ck_assert_str_eq(sc_elem_str(r, 1), "limit=2");
    freeReplyObject(r);
    r = sc_acquire_x(TOK_C, "5000", "", "");
    ck_assert_str_eq(sc_elem_str(r, 0), "kind");
    ck_assert_str_eq(sc_elem_str(r, 1), "limit=2");
    freeReplyObject(r);
    sc_expect_type("n", "hash");                /* the name's key is the limit key */
}
END_TEST

/*
 * Commands master 0 ran inside one script call: the call itself and
 * what reading the count costs (measured by two reads in a row) left out.
 */
static long long
sc_commands_of(redisReply *(*run)(void), redisReply **out)
{
    long long b0 = h_master_commands(0, NULL), b1 = h_master_commands(0, NULL), after;

    *out = run();
    after = h_master_commands(0, NULL);
    ck_assert_msg(b0 >= 0 && b1 >= 0 && after >= 0, "cannot read INFO commandstats");
    return after - b1 - (b1 - b0) - 1;
}

static redisReply *
sc_grant_a(void)
{
    return sc_acquire_x(TOK_A, "5000", "", "");
}

static redisReply *
sc_release_a(void)
{
    return sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "0", NULL);
}

/*
 * The name's key holds whichever kind holds the name, so that an
 * exclusive grant on a free name is one SET NX and its release a GET and
 * a DEL (each call also asks once whether anyone watches: PUBSUB
 * NUMSUB, once per batch in the daemon), while shared holders (a sorted set there) and a counted name's
 * limit (a hash there) still keep an exclusive request out; a set whose
 * holders all expired is a leftover the next exclusive grant deletes.
 */
START_TEST(kinds_share_the_name_key)
{
    redisReply *r;
    long long n;

    EXPECT_SETUP(.masters = 1);
    n = sc_commands_of(sc_grant_a, &r);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    ck_assert_msg(n == 2, "an exclusive grant on a free name ran %lld commands", n);
    n = sc_commands_of(sc_release_a, &r);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_msg(n == 3, "a release nobody waits for ran %lld commands", n);

    /* A shared holder: a member of the name's key; exclusive waits, gated. */
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "s", "", "0", "", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_type("n", "zset");
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_A, "5000", "", "", "x", "", "1", "", NULL);
    ck_assert_int_gt(sc_elem(r, 0), 4000);
    ck_assert_str_eq(sc_elem_str(r, 1), TOK_B);
    ck_assert_str_eq(sc_elem_str(r, 2), "gate");
    freeReplyObject(r);
    sc_expect_value("n gate", TOK_A);
    /* A permit meets the shared name as another kind. */
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 0", TOK_C, "5000", "", "", "p", "2", "0",
               "", NULL);
    ck_assert_str_eq(sc_elem_str(r, 0), "kind");
    ck_assert_str_eq(sc_elem_str(r, 1), "shared");
    freeReplyObject(r);
    /* The last shared holder gone, the set goes; the gated grant deletes its gate. */
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_B, "1", "s", "", "0", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_type("n", "none");
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_A, "5000", "", "", "x", "", "2", "", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_value("n gate", NULL);
    sc_expect_value("n", TOK_A);
    /* A shared request meets the exclusive holder: busy, named. */
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "s", "", "0", "", NULL);
    ck_assert_str_eq(sc_elem_str(r, 1), TOK_A);
    freeReplyObject(r);
    freeReplyObject(sc_cmd("DEL n"));

    /* Shared holders that all expired: a leftover, taken over by an exclusive grant. */
    freeReplyObject(sc_cmd("ZADD n 1 %s", TOK_B));
    r = sc_grant_a();
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
}
END_TEST

/* PUBLISH calls on the test's master so far. */
static long long
sc_publishes(void)
{
    return h_master_calls(0, "publish");
}

/*
 * Raise: only where the record still holds the token; a bad counter
 * undoes the grant, and announces it when a waiting request's refusal
 * had marked the name (as a release does: that waiter must hear it).
 */
START_TEST(raise_only_for_the_holder)
{
    redisReply *r;
    long long p0;

    EXPECT_SETUP(.masters = 1);
    sc_hold(TOK_A, NULL);
    r = sc_run(REDLOCK_LUA_RAISE, 2, "n fence", "n", TOK_A, "x", "", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_RAISE, 2, "n fence", "n", TOK_B, "x", "", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->integer, 0);            /* not the holder: nothing raised */
    freeReplyObject(r);
    sc_expect_value("n fence", "1");
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "twelve"));
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "3000", "", "", "x", "", "1", "", NULL);
    freeReplyObject(r);                         /* refused, waits: marks the name */
    sc_expect_value("n" REDLOCK_WAITING_SUFFIX, "1");
    p0 = sc_publishes();
    r = sc_run(REDLOCK_LUA_RAISE, 2, "n fence", "n", TOK_A, "x", "", "1", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strstr(r->str, "fence counter n fence is not an integer") != NULL, "%s",
                  r->str);
    freeReplyObject(r);
    sc_expect_value("n", NULL);                 /* the grant was undone here */
    sc_expect_value("n" REDLOCK_WAITING_SUFFIX, NULL);
    ck_assert_int_eq(sc_publishes() - p0, 1);   /* and announced to the waiter */
}
END_TEST

/*
 * The write-back never lowers a counter; it sets the label's fence,
 * expiry kept, where the grant's record holds its token.  A BREAK's
 * (the counter alone) always answers 1.
 */
START_TEST(fence_write_back_never_lowers)
{
    redisReply *r;
    char *v;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "10"));
    sc_hold(TOK_A, "123 0 job");
    r = sc_run(REDLOCK_LUA_FENCE, 3, "n fence", "n", "n label " TOK_A, "7", TOK_A, "x", "n",
               NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n fence", "10");
    sc_expect_value("n label " TOK_A, "123 7 job");
    ck_assert_int_gt(sc_int("PTTL %s", "n label " TOK_A), 4000);
    /* A fenced grant's label, fence to come: the write-back puts it in. */
    freeReplyObject(sc_cmd("SET %s %s PX 5000", "n label " TOK_A, "124 - job"));
    freeReplyObject(sc_run(REDLOCK_LUA_FENCE, 3, "n fence", "n", "n label " TOK_A, "11", TOK_A,
                           "x", "n", NULL));
    sc_expect_value("n label " TOK_A, "124 11 job");
    r = sc_run(REDLOCK_LUA_FENCE, 1, "n fence", "12", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n fence", "12");
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "x"));
    r = sc_run(REDLOCK_LUA_FENCE, 1, "n fence", "13", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    v = sc_get("n fence");
    ck_assert_str_eq(v, "x");
    free(v);
}
END_TEST

/* One write-back of fence f for tok's record k of kind c; its answer. */
static long long
sc_write_back(const char *k, const char *tok, const char *c, const char *f)
{
    redisReply *r = sc_run(REDLOCK_LUA_FENCE, 2, "n fence", k, f, tok, c, NULL);
    long long v;

    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "type %d", r->type);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/*
 * A grant's write-back confirms (1) only where its record still holds
 * its token, whatever the kind; elsewhere (0) it still raises the
 * counter and leaves the label alone.  A counter above the fence, where
 * the record holds, is no refusal (shared holders and the raise's late
 * answers raise it legitimately).
 */
START_TEST(fence_write_back_confirms_record)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    /* Exclusive: ours, gone, someone else's. */
    sc_hold(TOK_A, "1 - job");
    ck_assert_int_eq(sc_write_back("n", TOK_A, "x", "3"), 1);
    sc_expect_value("n fence", "3");
    freeReplyObject(sc_cmd("DEL n"));
    r = sc_run(REDLOCK_LUA_FENCE, 3, "n fence", "n", "n label " TOK_A, "4", TOK_A, "x", "n", NULL);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    sc_expect_value("n fence", "4");            /* raised all the same */
    sc_expect_value("n label " TOK_A, "1 - job"); /* not told a fence it was not given */
    sc_hold(TOK_B, NULL);
    ck_assert_int_eq(sc_write_back("n", TOK_A, "x", "5"), 0);
    sc_expect_value("n fence", "5");
    /* Ours, the counter above the fence. */
    sc_hold(TOK_A, NULL);
    ck_assert_int_eq(sc_write_back("n", TOK_A, "x", "2"), 1);
    sc_expect_value("n fence", "5");

    /* Shared: a live member, an expired one, a member of others only. */
    freeReplyObject(sc_cmd("DEL n"));
    freeReplyObject(sc_cmd("ZADD n %s %s", "99999999999999", TOK_A));
    freeReplyObject(sc_cmd("ZADD n %s %s", "1", TOK_B));
    ck_assert_int_eq(sc_write_back("n", TOK_A, "s", "6"), 1);
    ck_assert_int_eq(sc_write_back("n", TOK_B, "s", "6"), 0);
    ck_assert_int_eq(sc_write_back("n", TOK_C, "s", "6"), 0);
    sc_expect_value("n fence", "6");

    /* A permit: its own record. */
    freeReplyObject(sc_cmd("SET %s %s PX 5000", "n permit 1", TOK_C));
    ck_assert_int_eq(sc_write_back("n permit 1", TOK_C, "p", "7"), 1);
    ck_assert_int_eq(sc_write_back("n permit 1", TOK_A, "p", "8"), 0);
    ck_assert_int_eq(sc_write_back("n permit 0", TOK_C, "p", "9"), 0);
    sc_expect_value("n fence", "9");
}
END_TEST

/* A BREAK's second raise: max(counter, seen) + 1, and each permit's counter that exists. */
START_TEST(reraise_above_what_was_seen)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "5"));
    freeReplyObject(sc_cmd("SET %s %s", "n permit 1 fence", "3"));
    r = sc_run(REDLOCK_LUA_RERAISE, 2, "n fence", "n", "9", "2", NULL);
    ck_assert_int_eq(r->integer, 10);
    freeReplyObject(r);
    sc_expect_value("n fence", "10");
    sc_expect_value("n permit 1 fence", "4");
    sc_expect_value("n permit 0 fence", NULL);  /* never created */
    r = sc_run(REDLOCK_LUA_RERAISE, 2, "n fence", "n", "4", "0", NULL);
    ck_assert_int_eq(r->integer, 11);
    freeReplyObject(r);
}
END_TEST

/* Release is compare-and-delete; the label goes with the record. */
START_TEST(release_compare_and_delete)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    sc_hold(TOK_A, "1 0 job");
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_B, "1", "x", "", "1", NULL);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "?", "", "1", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n", NULL);
    sc_expect_value("n label " TOK_A, NULL);
}
END_TEST

/*
 * A release publishes only what someone listens for: nothing when no
 * refused request marked the name as waited for and nobody watches; on
 * the release channel once a waiting request's refusal marked it (the
 * mark goes with the record, in the release's own DEL); on the changes
 * channel, for a grant and a release, while some connection is
 * subscribed to the watchers' channel.  A grant counts the release
 * channel's subscribers only when asked.
 */
START_TEST(announce_only_to_listeners)
{
    redisContext *sub, *waiter;
    redisReply *r;
    long long p0;

    EXPECT_SETUP(.masters = 1);
    p0 = sc_publishes();
    r = sc_acquire_x(TOK_A, "5000", "", "");
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 1), 0);         /* not asked: no count */
    freeReplyObject(r);
    /* A refusal that does not wait leaves no mark. */
    r = sc_acquire_x(TOK_B, "5000", "", "");
    freeReplyObject(r);
    sc_expect_value("n" REDLOCK_WAITING_SUFFIX, NULL);
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "0", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(sc_publishes() - p0, 0);

    /* A refusal that waits marks the name; the release announces and unmarks. */
    freeReplyObject(sc_acquire_x(TOK_A, "5000", "", ""));
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "3000", "", "", "x", "", "1", "", NULL);
    ck_assert_int_gt(sc_elem(r, 0), 4000);
    freeReplyObject(r);
    ck_assert_int_gt(sc_int("PTTL %s", "n" REDLOCK_WAITING_SUFFIX), 7000);
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "0", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(sc_publishes() - p0, 1);
    sc_expect_value("n" REDLOCK_WAITING_SUFFIX, NULL);

    /* Someone watches somewhere: grants and releases tell the changes channel. */
    sub = h_master_redis(0);
    ck_assert_ptr_nonnull(sub);
    r = redisCommand(sub, "SUBSCRIBE %s", REDLOCK_WATCHING_CHANNEL);
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
    freeReplyObject(sc_acquire_x(TOK_A, "5000", "", ""));
    ck_assert_int_eq(sc_publishes() - p0, 2);
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "", "x", "", "0", NULL);
    freeReplyObject(r);
    ck_assert_int_eq(sc_publishes() - p0, 3);
    redisFree(sub);

    /* Asked, a grant counts the daemons waiting on the release channel. */
    waiter = h_master_redis(0);
    ck_assert_ptr_nonnull(waiter);
    r = redisCommand(waiter, "SUBSCRIBE %s", "n" REDLOCK_CHANNEL_SUFFIX);
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_C, "5000", "1", "", "x", "", "0", "", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 1), 1);
    freeReplyObject(r);
    redisFree(waiter);
}
END_TEST

/* Extends never create a record, one by one or in a batch. */
START_TEST(extend_never_creates)
{
    redisReply *r;
    long long p;

    EXPECT_SETUP(.masters = 1);
    r = sc_run(REDLOCK_LUA_EXTEND_ONE, 1, "n", TOK_A, "9000", "x", "", NULL);
    ck_assert_int_eq(r->integer, -3);
    freeReplyObject(r);
    sc_expect_value("n", NULL);
    freeReplyObject(sc_cmd("SET n %s PX 3000", TOK_A));
    r = sc_run(REDLOCK_LUA_EXTEND_ONE, 1, "n", TOK_A, "9000", "?", NULL);
    ck_assert_msg(r->integer > 2000 && r->integer <= 3000, "pttl before %lld", r->integer);
    freeReplyObject(r);
    p = sc_int("PTTL %s", "n");
    ck_assert_msg(p > 8000, "pttl after %lld", p);
    /* Batch: ours, someone else's, absent -> 1, 0, 2; absent stays absent. */
    freeReplyObject(sc_cmd("SET m %s PX 3000", TOK_B));
    r = sc_run(REDLOCK_LUA_EXTEND, 3, "n", "m", "o", TOK_A, "9000", "x", "", "1", TOK_A, "9000",
               "x", "", "0", TOK_A, "9000", "x", "", "0", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 1), 0);
    ck_assert_int_eq(sc_elem(r, 2), 2);
    freeReplyObject(r);
    sc_expect_value("o", NULL);
    ck_assert_int_le(sc_int("PTTL %s", "m"), 3000);
}
END_TEST

/* Restore puts a record back only where it is absent. */
START_TEST(restore_only_where_absent)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("SET m %s PX 5000", TOK_B));
    r = sc_run(REDLOCK_LUA_RESTORE, 2, "n", "m", TOK_A, "4000", "x", "", "", TOK_A, "4000", "x",
               "", "", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
    sc_expect_value("m", TOK_B);
}
END_TEST

/* Ungate only with the gate's token. */
START_TEST(ungate_with_its_token)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("SET %s %s PX 5000", "n gate", TOK_A));
    r = sc_run(REDLOCK_LUA_UNGATE, 1, "n gate", TOK_B, "n released", NULL);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_UNGATE, 1, "n gate", TOK_A, "n released", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n gate", NULL);
}
END_TEST

/*
 * A waiter's later tries: an exclusive one that readers keep out gates
 * the name under its gate id (ARGV[9]), not under the try's token, and
 * its grant opens that gate; a try that names an earlier try's token
 * (old) takes that try's record over: an exclusive key is swapped, a
 * shared holder's member is replaced.
 */
START_TEST(later_tries_gate_and_take_over)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("ZADD n %s %s", "99999999999999", TOK_A));
    freeReplyObject(sc_cmd("PEXPIRE n 5000"));
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "x", "", "1", "",
               TOK_C, NULL);
    ck_assert_str_eq(sc_elem_str(r, 2), "gate");
    freeReplyObject(r);
    sc_expect_value("n gate", TOK_C);
    freeReplyObject(sc_cmd("DEL n"));
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "x", "", "2", "",
               TOK_C, NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_value("n gate", NULL);
    sc_expect_value("n", TOK_B);
    /* TOK_B's try is taken over by TOK_A's, as a hand-over would be. */
    r = sc_acquire_x(TOK_A, "5000", TOK_B, "");
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 2), 2);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
    freeReplyObject(sc_cmd("DEL n"));
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "s", "", "1", "", "",
               NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_C, "5000", "", TOK_B, "s", "", "1", "", "",
               NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    r = sc_cmd("ZCARD n");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    r = sc_cmd("ZSCORE n %s", TOK_B);
    ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
}
END_TEST

/* Status names the holder, whether it is ours, and its label. */
START_TEST(status_names_the_holder)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    sc_hold(TOK_A, "1 4 job");
    r = sc_run(REDLOCK_LUA_STATUS, 1, "n", TOK_A, NULL);
    ck_assert_int_eq(sc_elem(r, 0), 0);         /* not a counted name */
    ck_assert_str_eq(sc_elem_str(r, 1), "x");
    ck_assert_int_gt(sc_elem(r, 3), 4000);
    ck_assert_int_eq(sc_elem(r, 4), 1);         /* it holds the token asked about */
    ck_assert_str_eq(sc_elem_str(r, 5), TOK_A);
    ck_assert_msg(strstr(sc_elem_str(r, 6), " 4 job") != NULL, "label %s", sc_elem_str(r, 6));
    freeReplyObject(r);
}
END_TEST

/* Break ends every hold and raises the counter; a bad counter changes nothing. */
START_TEST(break_ends_every_hold)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    sc_hold(TOK_A, NULL);
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "6"));
    r = sc_run(REDLOCK_LUA_BREAK, 1, "n", "n released", "broken", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    ck_assert_int_eq(sc_elem(r, 1), 7);
    freeReplyObject(r);
    sc_expect_value("n", NULL);
    sc_hold(TOK_B, NULL);
    freeReplyObject(sc_cmd("SET %s %s", "n fence", "z"));
    r = sc_run(REDLOCK_LUA_BREAK, 1, "n", "n released", "broken", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strstr(r->str, "n fence is not an integer") != NULL, "%s", r->str);
    freeReplyObject(r);
    sc_expect_value("n", TOK_B);
}
END_TEST

/*
 * Lock-delay: a grant with a delay keeps it next to its record; a
 * release with a delay leaves the mark "delay <token>" in the name's key
 * for that long (where the name is free afterwards: the record was ours,
 * or was gone; never over another holder's), which refuses every kind
 * as a holder would and which STATUS shows as a delay ('d'), not a
 * holder; a BREAK starts the stored delay.
 */
START_TEST(delay_mark_refuses_every_kind)
{
    redisReply *r;
    long long p;

    EXPECT_SETUP(.masters = 1);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_A, "5000", "", "", "x", "", "0", "", "",
               "2000", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_value("n delay", "2000 " TOK_A);
    ck_assert_int_gt(sc_int("PTTL %s", "n delay"), 4000);

    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "2", "2000", NULL);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    sc_expect_value("n", "delay " TOK_A);
    sc_expect_value("n delay", NULL);
    p = sc_int("PTTL %s", "n");
    ck_assert_msg(p > 1000 && p <= 2000, "the mark's pttl is %lld", p);

    /* Every kind is refused, told the mark's time left. */
    r = sc_acquire_x(TOK_B, "5000", "", "");
    ck_assert_msg(sc_elem(r, 0) > 1000 && sc_elem(r, 0) <= 2000, "pttl %lld", sc_elem(r, 0));
    ck_assert_str_eq(sc_elem_str(r, 1), "delay " TOK_A);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n", TOK_B, "5000", "", "", "s", "", "0", "", "",
               NULL);
    ck_assert_str_eq(sc_elem_str(r, 1), "delay " TOK_A);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_ACQUIRE, 2, "n", "n permit 0", TOK_B, "5000", "", "", "p", "2", "0",
               "", "", NULL);
    ck_assert_str_eq(sc_elem_str(r, 1), "delay " TOK_A);
    ck_assert_int_eq(sc_elem(r, 2), 2);         /* every permit held: full until it ends */
    freeReplyObject(r);
    sc_expect_value("n", "delay " TOK_A);

    r = sc_run(REDLOCK_LUA_STATUS, 1, "n", TOK_B, NULL);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 7, "status: %zu elements",
                  r->elements);
    ck_assert_str_eq(sc_elem_str(r, 1), "d");
    ck_assert_int_gt(sc_elem(r, 3), 1000);
    freeReplyObject(r);

    /* A BREAK during a delay ends no holder and keeps it. */
    r = sc_run(REDLOCK_LUA_BREAK, 1, "n", "n released", "broken", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 0);
    freeReplyObject(r);
    sc_expect_value("n", "delay " TOK_A);

    /* Another holder's record is never written over; a free name is marked. */
    freeReplyObject(sc_cmd("SET n %s PX 5000", TOK_C));
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "2", "2000", NULL);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    sc_expect_value("n", TOK_C);
    freeReplyObject(sc_cmd("DEL n"));
    r = sc_run(REDLOCK_LUA_RELEASE, 1, "n", TOK_A, "1", "x", "", "2", "2000", NULL);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    sc_expect_value("n", "delay " TOK_A);

    /* A BREAK of a holder with a stored delay starts it. */
    freeReplyObject(sc_cmd("DEL n"));
    freeReplyObject(sc_cmd("SET n %s PX 5000", TOK_B));
    freeReplyObject(sc_cmd("SET %s %s PX 5000", "n delay", "3000 " TOK_B));
    r = sc_run(REDLOCK_LUA_BREAK, 1, "n", "n released", "broken", NULL);
    ck_assert_int_eq(sc_elem(r, 0), 1);
    freeReplyObject(r);
    sc_expect_value("n", "delay " TOK_B);
    ck_assert_int_gt(sc_int("PTTL %s", "n"), 2000);
    sc_expect_value("n delay", NULL);
}
END_TEST

/*
 * A batch answers item by item: a grant, a refusal naming the holder,
 * another grant, an item that failed (a counter that is not an integer)
 * with its own error, a release that was not ours, an item whose script
 * raised an error, caught and named, while its neighbours ran; and its
 * items share one reading of the master's clock.
 */
START_TEST(batch_items_apart)
{
    redisReply *r;
    long long t0, t1;

    EXPECT_SETUP(.masters = 1);
    freeReplyObject(sc_cmd("SET %s %s", "m fence", "x"));
    sc_hold(TOK_C, NULL);
    freeReplyObject(sc_cmd("RENAME n m"));
    t0 = h_master_calls(0, "time");
    r = sc_run(REDLOCK_LUA_BATCH, 11, "n", "n", "n", "n", "o", "o", "m fence", "m", "n", "p", "p",
               "acquire", "2", "8", TOK_A, "5000", "", "", "x", "", "0", "job-a",
               "acquire", "2", "8", TOK_B, "5000", "", "", "x", "", "0", "",
               "acquire", "2", "8", TOK_B, "5000", "", "", "x", "", "0", "job-b",
               "raise", "2", "3", TOK_C, "x", "",
               "release", "1", "5", TOK_B, "", "x", "", "1",
               "acquire", "2", "8", TOK_A, "soon", "", "", "x", "", "0", "", NULL);
    t1 = h_master_calls(0, "time");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 6, "type %d, %zu elements",
                  r->type, r->elements);
    ck_assert_int_eq(r->element[0]->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->element[0]->element[0]->integer, 1);
    ck_assert_str_eq(r->element[1]->element[1]->str, TOK_A);
    ck_assert_int_eq(r->element[2]->element[0]->integer, 1);
    ck_assert_int_eq(r->element[3]->type, REDIS_REPLY_ERROR);
    ck_assert_str_eq(r->element[3]->str, "fence counter m fence is not an integer");
    ck_assert_int_eq(r->element[4]->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->element[4]->integer, 0);
    /* A script that raised an error (a ttl that is not a number) is caught. */
    ck_assert_int_eq(r->element[5]->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strstr(r->element[5]->str, "batch item 6 (acquire): ") != NULL, "%s",
                  r->element[5]->str);
    freeReplyObject(r);
    sc_expect_value("n", TOK_A);
    sc_expect_value("o", TOK_B);
    sc_expect_value("m", NULL);                 /* the failed raise undid its grant */
    /* Two labels written (each with its grant time), one TIME. */
    ck_assert_msg(t1 - t0 == 1, "%lld TIME calls for one batch", t1 - t0);
}
END_TEST

/* A batch whose list of items does not add up runs none of them. */
START_TEST(batch_malformed_runs_nothing)
{
    redisReply *r;

    EXPECT_SETUP(.masters = 1);
    r = sc_run(REDLOCK_LUA_BATCH, 2, "n", "n",
               "acquire", "2", "8", TOK_A, "5000", "", "", "x", "", "0", "",
               "release", "1", "5", TOK_A, "", "x", "", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strstr(r->str, "batch: item 2 is malformed") != NULL, "%s", r->str);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_BATCH, 3, "n", "n", "o",
               "acquire", "2", "8", TOK_A, "5000", "", "", "x", "", "0", "", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = sc_run(REDLOCK_LUA_BATCH, 0, "lock", "0", "0", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    sc_expect_value("n", NULL);
}
END_TEST

/* The names embed.sh replaced carry the C headers' values. */
START_TEST(embedded_constants)
{
    ck_assert_msg(strstr(REDLOCK_LUA_PRELUDE, "n <= " REDLOCK_XSTR(REDLOCK_LIMIT_MAX) " ")
                  != NULL, "the prelude's limit is not REDLOCK_LIMIT_MAX");
    ck_assert_msg(strstr(REDLOCK_LUA_PRELUDE, "base .. '" REDLOCK_CHANGED_SUFFIX "'") != NULL,
                  "the changes channel is not REDLOCK_CHANGED_SUFFIX");
    ck_assert_msg(strstr(REDLOCK_LUA_PRELUDE, "'" REDLOCK_WAITING_SUFFIX "'") != NULL,
                  "the waiters' mark is not REDLOCK_WAITING_SUFFIX");
    ck_assert_msg(strstr(REDLOCK_LUA_PRELUDE, "'" REDLOCK_WATCHING_CHANNEL "'") != NULL,
                  "the watchers' channel is not REDLOCK_WATCHING_CHANNEL");
    ck_assert_msg(strstr(REDLOCK_LUA_ACQUIRE, "--") == NULL, "a comment line was sent");
}
END_TEST

#define SC_ADD(s, test) expect_add_case((s), #test, (test), sc_teardown, TEST_TIMEOUT_S)

static Suite *
scripts_suite(void)
{
    Suite *s = suite_create("redlockd scripts on a real master");

    SC_ADD(s, acquire_grant_refuse_handover);
    SC_ADD(s, acquire_label_no_counter);
    SC_ADD(s, acquire_kinds_and_permits);
    SC_ADD(s, later_tries_gate_and_take_over);
    SC_ADD(s, kinds_share_the_name_key);
    SC_ADD(s, raise_only_for_the_holder);
    SC_ADD(s, fence_write_back_never_lowers);
    SC_ADD(s, fence_write_back_confirms_record);
    SC_ADD(s, reraise_above_what_was_seen);
    SC_ADD(s, release_compare_and_delete);
    SC_ADD(s, announce_only_to_listeners);
    SC_ADD(s, extend_never_creates);
    SC_ADD(s, restore_only_where_absent);
    SC_ADD(s, ungate_with_its_token);
    SC_ADD(s, status_names_the_holder);
    SC_ADD(s, break_ends_every_hold);
    SC_ADD(s, delay_mark_refuses_every_kind);
    SC_ADD(s, batch_items_apart);
    SC_ADD(s, batch_malformed_runs_nothing);
    SC_ADD(s, embedded_constants);
    return s;
}

const struct runner runner_main = { "check_scripts", scripts_suite, h_suite_init, h_suite_cleanup };
