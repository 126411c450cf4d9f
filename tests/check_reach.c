/*
 * check_reach.c: what the daemon says of the masters it cannot count on
 * (daemon/reach.c's reach_decide), without Redis, libevent or a clock:
 * nothing before every master is decided or the start grace is over, one
 * report at start, then a line only when the counting set changes, and
 * "regained" only when a quorum counts again after it did not.
 */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/reach.h"
#include "tests/runner.h"

#define T_N      5
#define T_QUORUM 3

static bool t_counted[T_N];

static struct reach_memo
t_memo(void)
{
    struct reach_memo m = { .n = T_N, .counted = t_counted };

    memset(t_counted, 0, sizeof(t_counted));
    return m;
}

/* counts and decided from strings of '1' and '0', one per master. */
static struct reach_verdict
t_decide(struct reach_memo *m, const char *counts, const char *decided, bool late)
{
    bool c[T_N], d[T_N];
    size_t i;

    for (i = 0; i < T_N; i++) {
        c[i] = counts[i] == '1';
        d[i] = decided[i] == '1';
    }
    return reach_decide(m, c, d, T_N, T_QUORUM, late);
}

START_TEST(quiet_until_decided_or_late)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    v = t_decide(&m, "11000", "11000", false);
    ck_assert_int_eq(v.say, REACH_QUIET);
    ck_assert(!m.told);
    /* Every master decided: the first report, naming what is missing. */
    v = t_decide(&m, "11000", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.first && !v.regained && !v.quorum);
    ck_assert_uint_eq(v.counting, 2);
    ck_assert(m.told && !m.quorum);
}
END_TEST

START_TEST(late_reports_undecided)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    /* Masters that never answered a connect (a black hole) are still named. */
    v = t_decide(&m, "00000", "00000", true);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.first && !v.quorum);
    ck_assert_uint_eq(v.counting, 0);
}
END_TEST

START_TEST(all_count_at_start_then_quiet)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    v = t_decide(&m, "11111", "11111", false);
    ck_assert_int_eq(v.say, REACH_ALL);
    ck_assert(v.first && v.quorum);
    v = t_decide(&m, "11111", "11111", false);
    ck_assert_int_eq(v.say, REACH_QUIET);
    ck_assert(!v.first);
}
END_TEST

START_TEST(change_is_said_once)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    (void)t_decide(&m, "11111", "11111", false);
    v = t_decide(&m, "01111", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.quorum && !v.regained && !v.first);
    /* The same set, its reason changed (down -> connecting): nothing. */
    v = t_decide(&m, "01111", "01111", false);
    ck_assert_int_eq(v.say, REACH_QUIET);
    /* Another master goes: said again, with both missing. */
    v = t_decide(&m, "00111", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.quorum);
    ck_assert_uint_eq(v.counting, 3);
    /* One swaps for another, the count the same: still a change. */
    v = t_decide(&m, "10011", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert_uint_eq(v.counting, 3);
    v = t_decide(&m, "11111", "11111", false);
    ck_assert_int_eq(v.say, REACH_ALL);
    ck_assert(!v.first && !v.regained);
}
END_TEST

START_TEST(quorum_lost_and_regained)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    (void)t_decide(&m, "11111", "11111", false);
    v = t_decide(&m, "00011", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(!v.quorum && !v.regained);
    ck_assert(!m.quorum);
    /* Still no quorum with one more back: said, not regained. */
    v = t_decide(&m, "10001", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(!v.quorum && !v.regained);
    /* A quorum again, two still missing: regained and missing. */
    v = t_decide(&m, "11001", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.quorum && v.regained);
    /* Regained is said once. */
    v = t_decide(&m, "11101", "11111", false);
    ck_assert_int_eq(v.say, REACH_MISSING);
    ck_assert(v.quorum && !v.regained);
}
END_TEST

START_TEST(regained_to_all)
{
    struct reach_memo m = t_memo();
    struct reach_verdict v;

    /* Nothing at start; every master at once later: regained, all. */
    (void)t_decide(&m, "00000", "11111", false);
    v = t_decide(&m, "11111", "11111", false);
    ck_assert_int_eq(v.say, REACH_ALL);
    ck_assert(v.regained && v.quorum && !v.first);
}
END_TEST

static Suite *
reach_suite(void)
{
    Suite *s = suite_create("reach");
    TCase *tc = tcase_create("reach");

    tcase_add_test(tc, quiet_until_decided_or_late);
    tcase_add_test(tc, late_reports_undecided);
    tcase_add_test(tc, all_count_at_start_then_quiet);
    tcase_add_test(tc, change_is_said_once);
    tcase_add_test(tc, quorum_lost_and_regained);
    tcase_add_test(tc, regained_to_all);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_reach", reach_suite, NULL, NULL };
