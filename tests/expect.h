/*
 * expect.h: assertions on one request and its reply, shared by the
 * integration suites.  They keep the caller's line number (macros) and
 * wait CMD_MS for the reply: the including file defines CMD_MS (it is
 * read where the macros are used).
 */
#ifndef REDLOCKD_TESTS_EXPECT_H
#define REDLOCKD_TESTS_EXPECT_H

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

#endif /* REDLOCKD_TESTS_EXPECT_H */
