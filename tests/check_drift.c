/*
 * check_drift.c: the clock-step check (daemon/drift.c), on made-up
 * readings: a master's TIME against the daemon's monotonic send and
 * read times, all in us.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "daemon/drift.h"
#include "tests/runner.h"

#define T_DRIFT         0.01
#define T_EPOCH_US      1795650000000000LL  /* a master's wall clock, us */
#define T_MS            1000LL
#define T_SPAN          (100 * T_MS) /* lock.min_ttl_ms: where the allowance stops growing */

/* The first reading: sent at 10 ms, read at 11 ms, the master read 10.5 ms. */
static void
t_first(struct drift_ref *ref)
{
    struct drift_step st;

    ck_assert(!drift_check(ref, T_EPOCH_US, 10 * T_MS, 11 * T_MS, T_DRIFT, T_SPAN, &st));
    ck_assert_int_eq(st.step_us, 0);
    ck_assert(ref->set);
}

START_TEST(test_first_reading_is_never_a_step)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    /* Whatever the master says, with no reference there is nothing to compare. */
    ck_assert(!drift_check(&ref, 12345, 0, 100, T_DRIFT, T_SPAN, &st));
    ck_assert_int_eq(st.step_us, 0);
    ck_assert(ref.set);
    ck_assert_int_eq(ref.master_us, 12345);
}
END_TEST

START_TEST(test_steady_clock_passes)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    /* 1 s later, 1 ms round trip, the master's clock advanced 1 s. */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 1000 * T_MS, 1010 * T_MS, 1011 * T_MS,
                           T_DRIFT, T_SPAN, &st));
    /* At the edges of the interval: read just after the first's send... */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 2000 * T_MS, 2010 * T_MS, 2011 * T_MS,
                           T_DRIFT, T_SPAN, &st));
    /* ...and 2.9 ms ahead after a minute (the allowance: 1% of 100 ms, plus 2 ms). */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 2000 * T_MS + 60000 * T_MS + 2900, 62010 * T_MS,
                           62011 * T_MS, T_DRIFT, T_SPAN, &st));
    ck_assert_int_eq(st.allowed_us, 3 * T_MS);
}
END_TEST

/*
 * The allowance grows with the span between two readings only up to
 * the shortest lease's: a reference read 200 s ago does not let a step
 * of 1.8 s pass (1% of 200 s would).  A clock 1% fast over a minute is
 * a step now: 600 ms is far more than any lease's drift allowance.
 */
START_TEST(test_old_reference_hides_no_step)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    ck_assert(drift_check(&ref, T_EPOCH_US + 201800 * T_MS, 200010 * T_MS, 200011 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    ck_assert(st.step_us > 1790 * T_MS && st.step_us <= 1800 * T_MS);
    ck_assert_int_eq(st.allowed_us, 3 * T_MS);
    drift_forget(&ref);
    t_first(&ref);
    ck_assert(drift_check(&ref, T_EPOCH_US + 60600 * T_MS, 60010 * T_MS, 60011 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    /* 3.5 ms past the interval after a minute: a step; within the allowance it is not. */
    drift_forget(&ref);
    t_first(&ref);
    ck_assert(drift_check(&ref, T_EPOCH_US + 60001 * T_MS + 3500, 60010 * T_MS, 60011 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    drift_forget(&ref);
    t_first(&ref);
    ck_assert(!drift_check(&ref, T_EPOCH_US + 60001 * T_MS + 2500, 60010 * T_MS, 60011 * T_MS,
                           T_DRIFT, T_SPAN, &st));
}
END_TEST

START_TEST(test_forward_step_found)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    /* 100 ms later the master says 10.1 s later: 10 s ahead. */
    ck_assert(drift_check(&ref, T_EPOCH_US + 10100 * T_MS, 110 * T_MS, 111 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    ck_assert(st.step_us > 9990 * T_MS && st.step_us <= 10000 * T_MS);
    ck_assert_int_eq(st.elapsed_us, 10100 * T_MS);
    /* The stepped reading is the reference now: the next one is steady again. */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 10200 * T_MS, 210 * T_MS, 211 * T_MS,
                           T_DRIFT, T_SPAN, &st));
}
END_TEST

START_TEST(test_backward_step_found)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    ck_assert(drift_check(&ref, T_EPOCH_US - 5000 * T_MS, 110 * T_MS, 111 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    ck_assert(st.step_us < -5000 * T_MS);
}
END_TEST

START_TEST(test_small_step_beyond_allowance_found)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    /* 100 ms apart, 1 ms round trips: 102 ms + 1% + 2 ms at most; 110 ms is too much. */
    ck_assert(drift_check(&ref, T_EPOCH_US + 110 * T_MS, 110 * T_MS, 111 * T_MS,
                          T_DRIFT, T_SPAN, &st));
    ck_assert(st.step_us > 0);
    /* 104 ms is within it. */
    drift_forget(&ref);
    t_first(&ref);
    ck_assert(!drift_check(&ref, T_EPOCH_US + 104 * T_MS, 110 * T_MS, 111 * T_MS,
                           T_DRIFT, T_SPAN, &st));
}
END_TEST

START_TEST(test_slow_answers_are_not_steps)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    /*
     * A request sent at 20 ms was answered 5 s later (a paused daemon,
     * a partition that healed): the master may have read its clock at
     * any moment in between, at the start or at the end.
     */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 10 * T_MS, 20 * T_MS, 5020 * T_MS,
                           T_DRIFT, T_SPAN, &st));
    drift_forget(&ref);
    t_first(&ref);
    ck_assert(!drift_check(&ref, T_EPOCH_US + 5009 * T_MS, 20 * T_MS, 5020 * T_MS,
                           T_DRIFT, T_SPAN, &st));
}
END_TEST

START_TEST(test_pipelined_requests_are_not_steps)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    /* The second request was sent before the first's answer was read. */
    ck_assert(!drift_check(&ref, T_EPOCH_US + 3 * T_MS, 0, 10 * T_MS, T_DRIFT, T_SPAN, &st));
    ck_assert(!drift_check(&ref, T_EPOCH_US + 2 * T_MS, 1 * T_MS, 11 * T_MS, T_DRIFT, T_SPAN, &st));
}
END_TEST

START_TEST(test_forget_starts_over)
{
    struct drift_ref ref = { 0 };
    struct drift_step st;

    t_first(&ref);
    drift_forget(&ref);
    ck_assert(!ref.set);
    ck_assert(!drift_check(&ref, T_EPOCH_US + 3600 * 1000 * T_MS, 20 * T_MS, 21 * T_MS,
                           T_DRIFT, T_SPAN, &st));
}
END_TEST

static Suite *
drift_suite(void)
{
    Suite *s = suite_create("drift");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_first_reading_is_never_a_step);
    tcase_add_test(tc, test_steady_clock_passes);
    tcase_add_test(tc, test_old_reference_hides_no_step);
    tcase_add_test(tc, test_forward_step_found);
    tcase_add_test(tc, test_backward_step_found);
    tcase_add_test(tc, test_small_step_beyond_allowance_found);
    tcase_add_test(tc, test_slow_answers_are_not_steps);
    tcase_add_test(tc, test_pipelined_requests_are_not_steps);
    tcase_add_test(tc, test_forget_starts_over);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_drift", drift_suite, NULL, NULL };
