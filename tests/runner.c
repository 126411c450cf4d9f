/*
 * runner.c: main() of every Check suite program (see runner.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <check.h>

#include "tests/runner.h"

/* Seconds on the monotonic clock, for the summary line. */
static double
runner_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(void)
{
    const struct runner *r = &runner_main;
    double t0 = runner_now_s();
    SRunner *sr;
    int failed;

    if (r->init != NULL && r->init() != 0) {
        fprintf(stderr, "%s: setup failed: no test was run\n", r->name);
        return EXIT_FAILURE;
    }
    sr = srunner_create(r->suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (r->fini != NULL) {
        r->fini();
    }
    printf("%s: %d failed, %.1f s\n", r->name, failed, runner_now_s() - t0);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
