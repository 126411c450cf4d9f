/*
 * expect.h: assertions on one request and its reply, shared by the
 * integration suites.  They keep the caller's line number (macros) and
 * wait CMD_MS for the reply: the including file defines CMD_MS (it is
 * read where the macros are used).
 */
#ifndef REDLOCKD_TESTS_EXPECT_H
#define REDLOCKD_TESTS_EXPECT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "tests/harness.h"

/* Send line on fd and require the reply to be exactly want. */
#define EXPECT_REPLY(fd, line, want) do {                                       \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        ck_assert_msg(got_ != NULL && strcmp(got_, (want)) == 0,               \
                      "'%s' answered '%s', expected '%s'", (line),              \
                      got_ != NULL ? got_ : "(nothing)", (want));               \
        free(got_);                                                             \
    } while (0)

/* Send line on fd and require the reply to start with prefix. */
#define EXPECT_PREFIX(fd, line, prefix) do {                                    \
        char *got_ = h_cmd((fd), (line), CMD_MS);                               \
        ck_assert_msg(got_ != NULL && strncmp(got_, (prefix), strlen(prefix)) == 0, \
                      "'%s' answered '%s', expected '%s...'", (line),           \
                      got_ != NULL ? got_ : "(nothing)", (prefix));             \
        free(got_);                                                             \
    } while (0)

/*
 * Make daemon d the current one and connect to it over TCP; the test
 * fails (naming the daemon and the reason) when that does not work.
 */
static inline int
expect_connect(size_t d)
{
    int fd;

    h_use_daemon(d);
    fd = h_connect_tcp();
    ck_assert_msg(fd >= 0, "cannot connect to daemon %zu on 127.0.0.1:%d: %s", d,
                  h_daemon_port(), strerror(errno));
    return fd;
}

/*
 * Add test to s as a test case of its own named name, so that
 * CK_RUN_CASE=<name> runs just that one, with teardown (run when the
 * test passes; setup is the test's own) and, unless CK_DEFAULT_TIMEOUT
 * says otherwise, a timeout of timeout_s seconds.
 */
static inline void
expect_add_case(Suite *s, const char *name, const TTest *test, void (*teardown)(void),
                double timeout_s)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, NULL, teardown);
    if (getenv("CK_DEFAULT_TIMEOUT") == NULL) {
        tcase_set_timeout(tc, timeout_s);
    }
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

/*
 * The main() of an integration suite: create the harness's run
 * directory, run every test of s (each forked), clean up (printing the
 * daemon logs of failed tests), and print "<name>: N failed, T s".
 * Returns the process exit status.
 */
static inline int
expect_run_suite(Suite *s, const char *name)
{
    int64_t t0 = h_now_ms();
    SRunner *sr;
    int failed;

    if (h_suite_init() != 0) {
        return EXIT_FAILURE;
    }
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    h_suite_cleanup();
    printf("%s: %d failed, %.1f s\n", name, failed, (double)(h_now_ms() - t0) / 1000.0);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* REDLOCKD_TESTS_EXPECT_H */
