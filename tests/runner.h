/*
 * runner.h: the one main() of every Check suite program in tests/.
 *
 * tests/runner.c holds main(); a suite program does not write one.  It
 * defines instead one struct runner named runner_main, saying how to
 * build its suite and what to do around the run:
 *
 *     const struct runner runner_main = {
 *         "check_proto", proto_suite, NULL, NULL
 *     };
 *
 * The integration suites pass h_suite_init and h_suite_cleanup (or a
 * function of their own that calls them) as init and fini, so that the
 * harness's run directory exists while the tests run and the logs of
 * failed tests are printed after.  Unit suites pass NULL for both and do
 * not link the harness.
 *
 * main() runs every test case of the suite (each in its own process, as
 * Check does by default; CK_RUN_SUITE, CK_RUN_CASE, CK_DEFAULT_TIMEOUT and
 * CK_TIMEOUT_MULTIPLIER apply as Check documents), prints
 * "<name>: N failed, T s" and exits with EXIT_SUCCESS when no test
 * failed, EXIT_FAILURE otherwise (or when init failed).
 */
#ifndef REDLOCKD_TESTS_RUNNER_H
#define REDLOCKD_TESTS_RUNNER_H

#include <check.h>

/* A suite program's description; runner.c reads it, nobody writes it. */
struct runner {
    const char *name;           /* the program's name, for the summary line */
    Suite      *(*suite)(void); /* builds the suite; called once, after init */
    int        (*init)(void);   /* NULL, or run first: nonzero ends the program */
    void       (*fini)(void);   /* NULL, or run after the last test (not if init failed) */
};

/* Defined by every suite program, once. */
extern const struct runner runner_main;

#endif /* REDLOCKD_TESTS_RUNNER_H */
