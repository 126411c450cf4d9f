/*
 * check_redlock.c: the Redlock arithmetic: quorum, drift, validity, the
 * holder's remaining ttl as seen by a quorum, and the verdicts on a
 * renewal and on a release.
 *
 * Reference: the Redis distributed-locks page, "The Redlock algorithm":
 * quorum N/2+1, validity = ttl - elapsed - drift, drift = ttl * 0.01 + 2 ms.
 */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/redlock.h"
#include "daemon/util.h"
#include "tests/runner.h"

START_TEST(test_quorum)
{
    ck_assert_uint_eq(redlock_quorum(1), 1);
    ck_assert_uint_eq(redlock_quorum(2), 2);
    ck_assert_uint_eq(redlock_quorum(3), 2);
    ck_assert_uint_eq(redlock_quorum(4), 3);
    ck_assert_uint_eq(redlock_quorum(5), 3);
    ck_assert_uint_eq(redlock_quorum(6), 4);
    ck_assert_uint_eq(redlock_quorum(15), 8);
}
END_TEST

START_TEST(test_drift)
{
    /* 30 s * 0.01 + 2 ms = 302 ms */
    ck_assert_int_eq(redlock_drift_us(30000, 0.01), 302000);
    ck_assert_int_eq(redlock_drift_us(100, 0.01), 3000);
    ck_assert_int_eq(redlock_drift_us(1000, 0.0), 2000);
    ck_assert_int_eq(redlock_drift_us(10000, 0.5), 5002000);
}
END_TEST

START_TEST(test_validity)
{
    /* ttl 10 s, the round took 5 ms: 10000 - 5 - 102 = 9893 ms */
    ck_assert_int_eq(redlock_validity_us(10000, 5000, 0.01), 9893000);
    /* The round took longer than the ttl: no validity. */
    ck_assert_int_le(redlock_validity_us(100, 100000, 0.01), 0);
    /* Exactly at the edge: ttl - drift consumed. */
    ck_assert_int_eq(redlock_validity_us(100, 97000, 0.01), 0);
    ck_assert_int_eq(redlock_validity_us(100, 96999, 0.01), 1);
}
END_TEST

START_TEST(test_holder_ttl_all_held)
{
    /* 5 masters, all hold it: a quorum (3) is free when 3 keys expired. */
    int64_t p[] = { 500, 100, 300, 200, 400 };

    ck_assert_int_eq(redlock_holder_ttl(p, 5, 0, 3), 300);
}
END_TEST

START_TEST(test_holder_ttl_some_free)
{
    /* 2 free, 3 held: one more must expire. */
    int64_t p[] = { 900, 700, 800 };

    ck_assert_int_eq(redlock_holder_ttl(p, 3, 2, 3), 700);
}
END_TEST

START_TEST(test_holder_ttl_quorum_free)
{
    int64_t p[] = { 900, 700 };

    ck_assert_int_eq(redlock_holder_ttl(p, 2, 3, 3), 0);
    ck_assert_int_eq(redlock_holder_ttl(p, 0, 0, 3), 0);
}
END_TEST

START_TEST(test_holder_ttl_no_expiry)
{
    /* A foreign key without ttl on the master we would need: never. */
    int64_t p[] = { REDLOCK_NO_EXPIRY, 100, REDLOCK_NO_EXPIRY };

    ck_assert_int_eq(redlock_holder_ttl(p, 3, 1, 3), REDLOCK_NO_EXPIRY);
    /* But when the expiring one suffices, its ttl. */
    {
        int64_t q[] = { REDLOCK_NO_EXPIRY, 100, REDLOCK_NO_EXPIRY };

        ck_assert_int_eq(redlock_holder_ttl(q, 3, 2, 3), 100);
    }
}
END_TEST

START_TEST(test_holder_ttl_too_few_answers)
{
    /* 1 free, 1 held, 3 failed: we cannot know more than the longest seen. */
    int64_t p[] = { 250 };

    ck_assert_int_eq(redlock_holder_ttl(p, 1, 1, 3), 250);
}
END_TEST

START_TEST(test_token)
{
    char a[UTIL_TOKEN_HEX + 1], b[UTIL_TOKEN_HEX + 1];
    size_t i;

    ck_assert_int_eq(util_token(a), 0);
    ck_assert_int_eq(util_token(b), 0);
    ck_assert_uint_eq(strlen(a), 32);
    for (i = 0; i < 32; i++) {
        ck_assert(strchr("0123456789abcdef", a[i]) != NULL);
    }
    ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_random_range)
{
    int i;
    int64_t v;
    bool saw_zero = false, saw_max = false;

    for (i = 0; i < 10000; i++) {
        v = util_random(3);
        ck_assert_int_ge(v, 0);
        ck_assert_int_le(v, 3);
        saw_zero |= v == 0;
        saw_max |= v == 3;
    }
    ck_assert(saw_zero && saw_max);
    ck_assert_int_eq(util_random(0), 0);
}
END_TEST

START_TEST(test_monotonic)
{
    int64_t a = util_now_us(), b = util_now_us();

    ck_assert_int_ge(b, a);
    ck_assert_int_gt(a, 0);
}
END_TEST

/* Verdict on one lease of a batched renewal, with *new_end preset to -1. */
static enum redlock_renewal
t_renewal(size_t confirmed, size_t denied, size_t n, int64_t end_us, int64_t *new_end)
{
    *new_end = -1;
    /* Round from 1 s, ttl 10 s, current validity until 2 s. */
    return redlock_renewal_verdict(confirmed, denied, n, 1000000, end_us, 10000, 2000000,
                                   new_end);
}

START_TEST(test_renewal_verdict_five)
{
    int64_t e;

    redlock_set_drift(0.01);
    /* A quorum confirmed within the validity: start + ttl - drift (102 ms). */
    ck_assert_int_eq(t_renewal(3, 0, 5, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 1000000 + 10000000 - 102000);
    ck_assert_int_eq(t_renewal(3, 2, 5, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(t_renewal(5, 0, 5, 1999999, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 10898000);
    /* The decision at the validity's end, or after: too late, no new end. */
    ck_assert_int_eq(t_renewal(5, 0, 5, 2000000, &e), REDLOCK_TOO_LATE);
    ck_assert_int_eq(e, -1);
    ck_assert_int_eq(t_renewal(3, 0, 5, 2000001, &e), REDLOCK_TOO_LATE);
    ck_assert_int_eq(e, -1);
    /* More than n - quorum (2) said no: no quorum can confirm any more. */
    ck_assert_int_eq(t_renewal(2, 3, 5, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(e, -1);
    ck_assert_int_eq(t_renewal(0, 3, 5, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(t_renewal(0, 5, 5, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(t_renewal(0, 4, 5, 2500000, &e), REDLOCK_DENIED);
    /* Too few answers to tell. */
    ck_assert_int_eq(t_renewal(2, 2, 5, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(2, 0, 5, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(1, 2, 5, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(0, 0, 5, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(0, 2, 5, 2500000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(e, -1);
}
END_TEST

START_TEST(test_renewal_verdict_three)
{
    int64_t e;

    redlock_set_drift(0.01);
    ck_assert_int_eq(t_renewal(2, 0, 3, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 10898000);
    ck_assert_int_eq(t_renewal(2, 1, 3, 1999999, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(t_renewal(3, 0, 3, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(t_renewal(3, 0, 3, 2000000, &e), REDLOCK_TOO_LATE);
    ck_assert_int_eq(e, -1);
    ck_assert_int_eq(t_renewal(2, 0, 3, 3000000, &e), REDLOCK_TOO_LATE);
    /* More than 3 - 2 = 1 said no. */
    ck_assert_int_eq(t_renewal(1, 2, 3, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(t_renewal(0, 2, 3, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(t_renewal(0, 3, 3, 1050000, &e), REDLOCK_DENIED);
    ck_assert_int_eq(t_renewal(1, 1, 3, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(1, 0, 3, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(0, 1, 3, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(t_renewal(0, 0, 3, 1050000, &e), REDLOCK_UNDECIDED);
    ck_assert_int_eq(e, -1);
}
END_TEST

START_TEST(test_renewal_verdict_drift)
{
    int64_t e;

    /* The new end follows the drift factor in force: 10 s * 0.1 + 2 ms. */
    redlock_set_drift(0.1);
    ck_assert_int_eq(t_renewal(3, 0, 5, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 1000000 + 10000000 - 1002000);
    redlock_set_drift(0.0);
    ck_assert_int_eq(t_renewal(3, 0, 5, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 1000000 + 10000000 - 2000);
    redlock_set_drift(0.01);
    ck_assert_int_eq(t_renewal(3, 0, 5, 1050000, &e), REDLOCK_RENEWED);
    ck_assert_int_eq(e, 10898000);
}
END_TEST

START_TEST(test_release_verdict_five)
{
    /* (answered, confirmed, masters) */
    ck_assert_int_eq(redlock_release_verdict(5, 5, 5), REDLOCK_RELEASED);
    ck_assert_int_eq(redlock_release_verdict(5, 3, 5), REDLOCK_RELEASED);
    ck_assert_int_eq(redlock_release_verdict(3, 3, 5), REDLOCK_RELEASED);
    /* No quorum held the token, even if every silent master did. */
    ck_assert_int_eq(redlock_release_verdict(5, 2, 5), REDLOCK_GONE);
    ck_assert_int_eq(redlock_release_verdict(4, 1, 5), REDLOCK_GONE);
    ck_assert_int_eq(redlock_release_verdict(3, 0, 5), REDLOCK_GONE);
    ck_assert_int_eq(redlock_release_verdict(5, 0, 5), REDLOCK_GONE);
    /* A quorum answered, but a silent master may hold the token: not known. */
    ck_assert_int_eq(redlock_release_verdict(4, 2, 5), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(3, 2, 5), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(3, 1, 5), REDLOCK_NOQUORUM);
    /* Fewer than a quorum answered. */
    ck_assert_int_eq(redlock_release_verdict(2, 2, 5), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(2, 0, 5), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(0, 0, 5), REDLOCK_NOQUORUM);
}
END_TEST

START_TEST(test_release_verdict_three)
{
    ck_assert_int_eq(redlock_release_verdict(3, 3, 3), REDLOCK_RELEASED);
    ck_assert_int_eq(redlock_release_verdict(3, 2, 3), REDLOCK_RELEASED);
    ck_assert_int_eq(redlock_release_verdict(2, 2, 3), REDLOCK_RELEASED);
    ck_assert_int_eq(redlock_release_verdict(3, 1, 3), REDLOCK_GONE);
    ck_assert_int_eq(redlock_release_verdict(2, 1, 3), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(2, 0, 3), REDLOCK_GONE);
    ck_assert_int_eq(redlock_release_verdict(1, 1, 3), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(1, 0, 3), REDLOCK_NOQUORUM);
    ck_assert_int_eq(redlock_release_verdict(0, 0, 3), REDLOCK_NOQUORUM);
}
END_TEST

static Suite *
redlock_suite(void)
{
    Suite *s = suite_create("redlock");
    TCase *tc = tcase_create("arithmetic");

    tcase_add_test(tc, test_quorum);
    tcase_add_test(tc, test_drift);
    tcase_add_test(tc, test_validity);
    tcase_add_test(tc, test_holder_ttl_all_held);
    tcase_add_test(tc, test_holder_ttl_some_free);
    tcase_add_test(tc, test_holder_ttl_quorum_free);
    tcase_add_test(tc, test_holder_ttl_no_expiry);
    tcase_add_test(tc, test_holder_ttl_too_few_answers);
    tcase_add_test(tc, test_token);
    tcase_add_test(tc, test_random_range);
    tcase_add_test(tc, test_monotonic);
    tcase_add_test(tc, test_renewal_verdict_five);
    tcase_add_test(tc, test_renewal_verdict_three);
    tcase_add_test(tc, test_renewal_verdict_drift);
    tcase_add_test(tc, test_release_verdict_five);
    tcase_add_test(tc, test_release_verdict_three);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_redlock", redlock_suite, NULL, NULL };
