/*
 * check_readq.c: the daemon's budget of reads in flight (daemon/readq.c),
 * without sockets: who is let in at once, who waits, in what order the
 * slots go round, and what a session that leaves takes with it.
 */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "daemon/readq.h"
#include "daemon/stats.h"
#include "tests/runner.h"

struct stats stats;     /* daemon/server.c's, for the counters readq.c keeps */

#define T_CLIENTS   4
#define T_JOBS      8
#define T_LOG       64

/* The order in which waiting jobs were let in: "client.job". */
static int t_log[T_LOG];
static size_t t_nlog;

static void
t_start(struct readq_job *j, void *arg)
{
    (void)j;
    ck_assert_uint_lt(t_nlog, T_LOG);
    t_log[t_nlog++] = (int)(intptr_t)arg;
}

static struct readq_client t_client[T_CLIENTS];
static struct readq_job t_job[T_CLIENTS][T_JOBS];

static void
t_setup(void)
{
    size_t i;

    memset(t_job, 0, sizeof(t_job));
    memset(&stats, 0, sizeof(stats));
    t_nlog = 0;
    for (i = 0; i < T_CLIENTS; i++) {
        readq_client_init(&t_client[i]);
    }
}

/* Ask for job j of client c; whether it was let in at once. */
static bool
t_ask(int c, int j, int max)
{
    readq_set_max(max);
    return readq_ask(&t_client[c], &t_job[c][j], t_start, (void *)(intptr_t)(c * 10 + j));
}

START_TEST(test_let_in_within_budget)
{
    t_setup();
    ck_assert(t_ask(0, 0, 2));
    ck_assert(t_ask(1, 0, 2));
    ck_assert_uint_eq(readq_in_flight(), 2);
    /* The budget is full: a third session waits. */
    ck_assert(!t_ask(2, 0, 2));
    ck_assert_uint_eq(readq_waiting(), 1);
    readq_done(&t_job[0][0]);
    ck_assert_uint_eq(t_nlog, 1);
    ck_assert_int_eq(t_log[0], 20);
    ck_assert_uint_eq(readq_in_flight(), 2);
    ck_assert_uint_eq(readq_waiting(), 0);
    ck_assert_uint_eq(stats.reads_waited, 1);
    readq_done(&t_job[1][0]);
    readq_done(&t_job[2][0]);
    ck_assert_uint_eq(readq_in_flight(), 0);
}
END_TEST

START_TEST(test_one_read_per_session)
{
    t_setup();
    ck_assert(t_ask(0, 0, 10));
    /* Room in the budget, but the session has its read in flight. */
    ck_assert(!t_ask(0, 1, 10));
    ck_assert(!t_ask(0, 2, 10));
    ck_assert_uint_eq(readq_in_flight(), 1);
    readq_done(&t_job[0][0]);
    ck_assert_uint_eq(t_nlog, 1);
    ck_assert_int_eq(t_log[0], 1);
    ck_assert_uint_eq(readq_in_flight(), 1);
    readq_done(&t_job[0][1]);
    ck_assert_int_eq(t_log[1], 2);
    readq_done(&t_job[0][2]);
    ck_assert_uint_eq(readq_in_flight(), 0);
    ck_assert_uint_eq(readq_waiting(), 0);
}
END_TEST

/*
 * A session with many reads waiting does not starve one with a single
 * read: the slots go round the sessions, one read a turn, whatever
 * order the reads were asked in.
 */
START_TEST(test_round_robin_across_sessions)
{
    int j;

    t_setup();
    ck_assert(t_ask(3, 0, 1));          /* holds the only slot */
    for (j = 0; j < 4; j++) {
        ck_assert(!t_ask(0, j, 1));     /* the flood: four reads of session 0 */
    }
    ck_assert(!t_ask(1, 0, 1));         /* then one read each of sessions 1 and 2 */
    ck_assert(!t_ask(2, 0, 1));
    readq_done(&t_job[3][0]);
    readq_done(&t_job[0][0]);
    readq_done(&t_job[1][0]);
    readq_done(&t_job[2][0]);
    readq_done(&t_job[0][1]);
    readq_done(&t_job[0][2]);
    readq_done(&t_job[0][3]);
    ck_assert_uint_eq(t_nlog, 6);
    ck_assert_int_eq(t_log[0], 0);      /* session 0's first */
    ck_assert_int_eq(t_log[1], 10);     /* then session 1, not session 0's second */
    ck_assert_int_eq(t_log[2], 20);
    ck_assert_int_eq(t_log[3], 1);
    ck_assert_int_eq(t_log[4], 2);
    ck_assert_int_eq(t_log[5], 3);
    ck_assert_uint_eq(readq_in_flight(), 0);
}
END_TEST

/*
 * A slot that frees goes to the sessions waiting, in ring order; a
 * reload that widens the budget lets the next one in at once.
 */
START_TEST(test_reload_widens_budget)
{
    t_setup();
    ck_assert(t_ask(0, 0, 1));
    ck_assert(!t_ask(1, 0, 1));
    ck_assert(!t_ask(2, 0, 1));
    readq_done(&t_job[0][0]);
    ck_assert_uint_eq(t_nlog, 1);
    ck_assert_int_eq(t_log[0], 10);
    ck_assert(!t_ask(0, 1, 2));         /* a reload widens the budget: 2 goes in */
    ck_assert_uint_eq(t_nlog, 2);
    ck_assert_int_eq(t_log[1], 20);
    readq_done(&t_job[2][0]);           /* then 0's second */
    ck_assert_int_eq(t_log[2], 1);
    readq_done(&t_job[0][1]);
    readq_done(&t_job[1][0]);
    ck_assert_uint_eq(readq_in_flight(), 0);
}
END_TEST

/* A cancelled read is never started; its session leaves the ring when it has no other. */
START_TEST(test_cancel)
{
    t_setup();
    ck_assert(t_ask(0, 0, 1));
    ck_assert(!t_ask(1, 0, 1));
    ck_assert(!t_ask(2, 0, 1));
    readq_cancel(&t_job[1][0]);
    ck_assert(!t_job[1][0].waiting);
    ck_assert_uint_eq(readq_waiting(), 1);
    readq_done(&t_job[0][0]);
    ck_assert_uint_eq(t_nlog, 1);
    ck_assert_int_eq(t_log[0], 20);
    readq_cancel(&t_job[1][0]);         /* no-op */
    readq_done(&t_job[2][0]);
    ck_assert_uint_eq(readq_in_flight(), 0);
}
END_TEST

/*
 * A session that closes with its read in flight: the slot stays taken
 * until that read ends (the round is still on the masters), then goes on.
 */
START_TEST(test_close_keeps_the_slot_until_done)
{
    t_setup();
    ck_assert(t_ask(0, 0, 1));
    ck_assert(!t_ask(1, 0, 1));
    readq_client_close(&t_client[0]);
    ck_assert_uint_eq(readq_in_flight(), 1);
    ck_assert_uint_eq(t_nlog, 0);
    readq_done(&t_job[0][0]);
    ck_assert_uint_eq(t_nlog, 1);
    ck_assert_int_eq(t_log[0], 10);
    readq_done(&t_job[0][0]);           /* twice: no-op */
    ck_assert_uint_eq(readq_in_flight(), 1);
    readq_done(&t_job[1][0]);
    ck_assert_uint_eq(readq_in_flight(), 0);
}
END_TEST

static Suite *
readq_suite(void)
{
    Suite *s = suite_create("readq");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_let_in_within_budget);
    tcase_add_test(tc, test_one_read_per_session);
    tcase_add_test(tc, test_round_robin_across_sessions);
    tcase_add_test(tc, test_reload_widens_budget);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_close_keeps_the_slot_until_done);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_readq", readq_suite, NULL, NULL };
