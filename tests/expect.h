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

/* Send line, read its reply (which must come within CMD_MS); caller frees. */
#define EXPECT_CMD(fd, line) expect_cmd_at((fd), (line), CMD_MS, __LINE__)

static inline char *
expect_cmd_at(int fd, const char *line, int64_t ms, int at)
{
    char *got = h_cmd(fd, line, ms);

    ck_assert_msg(got != NULL, "line %d: '%s' got no reply within %lld ms", at, line,
                  (long long)ms);
    return got;
}

/* Read one line that must come within ms; caller frees. */
#define EXPECT_READ(fd, ms, what) expect_read_at((fd), (ms), (what), __LINE__)

static inline char *
expect_read_at(int fd, int64_t ms, const char *what, int at)
{
    char *got = h_read_line(fd, ms);

    ck_assert_msg(got != NULL, "line %d: %s: nothing within %lld ms", at, what, (long long)ms);
    return got;
}

/* Require the line to start with "<status> <name>" (then a space or its end). */
#define EXPECT_IS(line, status, name) \
    ck_assert_msg(h_is_reply((line), (status), (name)), "line %d: got '%s', expected '%s %s ...'", \
                  __LINE__, (line), (status), (name))

/* Require a word key=value in line, and return the value as an integer. */
#define EXPECT_INT(line, key) expect_int_at((line), (key), __LINE__)

static inline long long
expect_int_at(const char *line, const char *key, int at)
{
    long long v = 0;

    ck_assert_msg(h_reply_int(line, key, &v), "line %d: '%s' has no integer %s=", at, line, key);
    return v;
}

/* Require a word key=value in line with exactly this value. */
#define EXPECT_FIELD(line, key, want) do {                                      \
        char v_[128];                                                           \
        ck_assert_msg(h_reply_field((line), (key), v_, sizeof(v_)) && strcmp(v_, (want)) == 0, \
                      "line %d: '%s' lacks %s=%s", __LINE__, (line), (key), (want)); \
    } while (0)

/* Require that line has no word key=... */
#define EXPECT_NO_FIELD(line, key) do {                                         \
        char v_[128];                                                           \
        ck_assert_msg(!h_reply_field((line), (key), v_, sizeof(v_)),            \
                      "line %d: '%s' has %s=, expected none", __LINE__, (line), (key)); \
    } while (0)

/*
 * Connect to the current daemon over TCP (h_connect_tcp); the test fails
 * (naming the daemon, its port and the reason) when that does not work.
 * Returns the descriptor; the caller closes it.
 */
static inline int
expect_tcp(void)
{
    int fd = h_connect_tcp();

    ck_assert_msg(fd >= 0, "cannot connect to daemon %zu on 127.0.0.1:%d: %s",
                  h_current_daemon(), h_daemon_port(), strerror(errno));
    return fd;
}

/* Make daemon d the current one and connect to it as expect_tcp() does. */
static inline int
expect_connect(size_t d)
{
    h_use_daemon(d);
    return expect_tcp();
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
 * Add test to s as a test case of its own named as the test
 * (expect_add_case), with h_end() as its teardown: every test starts its
 * own masters and daemons, and h_end() stops them when it passes.
 */
#define EXPECT_ADD(s, test, timeout_s) \
    expect_add_case((s), #test, (test), h_end, (timeout_s))

#endif /* REDLOCKD_TESTS_EXPECT_H */
