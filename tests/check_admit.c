/*
 * check_admit.c: client slots (daemon/admit.c), the slots a descriptor
 * limit leaves (daemon/fdbudget.c) and the source a peer counts as
 * (authlimit_source(), daemon/authlimit.c), without sockets: the counts,
 * limits and refusal texts on made-up connections.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/fdbudget.h"
#include "tests/runner.h"

/* A configuration with these limits and password ("" for none). */
static void
t_conf(struct conf *c, int64_t max_clients, int64_t reserved, int64_t pending,
       int64_t pending_per_source, int64_t per_source, const char *password)
{
    memset(c, 0, sizeof(*c));
    c->max_clients = max_clients;
    c->unix_reserved = reserved;
    c->max_unauthenticated = pending;
    c->max_unauthenticated_per_source = pending_per_source;
    c->max_clients_per_source = per_source;
    c->auth_password = (char *)password;
    c->auth_unix_exempt = true;
    admit_set_conf(c);
}

/* The source of peer, as a string to compare. */
static const char *
t_source(const char *peer)
{
    static char out[AUTHLIMIT_SOURCE_MAX];

    authlimit_source(peer, out, sizeof(out));
    return out;
}

START_TEST(test_sources)
{
    ck_assert_str_eq(t_source("1.2.3.4:5678"), "1.2.3.4");
    ck_assert_str_eq(t_source("unix uid=7 pid=9"), "unix uid=7");
    ck_assert_str_eq(t_source("[::1]:5678"), "[::]/64");
    /* One IPv6 host has a /64: all of it is one source. */
    ck_assert_str_eq(t_source("[2001:db8:1:2:aaaa::1]:1"), "[2001:db8:1:2::]/64");
    ck_assert_str_eq(t_source("[2001:db8:1:2:bbbb::7]:2"), "[2001:db8:1:2::]/64");
    ck_assert_str_ne(t_source("[2001:db8:1:3::1]:2"), "[2001:db8:1:2::]/64");
    /* An IPv4 client of an IPv6 socket is the IPv4 source. */
    ck_assert_str_eq(t_source("[::ffff:10.1.2.3]:99"), "10.1.2.3");
}
END_TEST

START_TEST(test_unauthenticated_pool)
{
    struct conf c;
    struct admit_slot s[4] = { { 0 } };
    struct admit_slot u = { 0 };

    t_conf(&c, 100, 0, 3, 2, 0, "pw");
    ck_assert_ptr_null(admit_enter(&s[0], "10.0.0.1", false, false));
    ck_assert_ptr_null(admit_enter(&s[1], "10.0.0.1", false, false));
    ck_assert_str_eq(admit_enter(&s[2], "10.0.0.1", false, false),
                     "too many connections from this address waiting for their TLS handshake "
                     "or AUTH (limits.max_unauthenticated_per_source)");
    ck_assert_ptr_null(admit_enter(&s[2], "10.0.0.2", false, false));
    ck_assert_uint_eq(admit_unauthenticated(), 3);
    ck_assert_str_eq(admit_enter(&s[3], "10.0.0.3", false, false),
                     "too many connections waiting for their TLS handshake or AUTH "
                     "(limits.max_unauthenticated)");
    /* The Unix socket is not held up, nor counted. */
    ck_assert_ptr_null(admit_enter(&u, "unix uid=0", true, false));
    ck_assert_uint_eq(admit_unauthenticated(), 3);
    /* One that authenticates makes room; twice counts once. */
    admit_authed(&s[0]);
    admit_authed(&s[0]);
    ck_assert_uint_eq(admit_unauthenticated(), 2);
    ck_assert_ptr_null(admit_enter(&s[3], "10.0.0.3", false, false));
    admit_leave(&s[0]);
    admit_leave(&s[0]);
    admit_leave(&s[1]);
    admit_leave(&s[2]);
    admit_leave(&s[3]);
    admit_leave(&u);
    ck_assert_uint_eq(admit_unauthenticated(), 0);
}
END_TEST

START_TEST(test_tls_handshake_is_pending)
{
    struct conf c;
    struct admit_slot a = { 0 }, b = { 0 };

    /* No password: a plain connection is let in at once, a TLS one after its handshake. */
    t_conf(&c, 100, 0, 1, 1, 0, "");
    ck_assert_ptr_null(admit_enter(&a, "10.0.0.1", false, false));
    ck_assert_uint_eq(admit_unauthenticated(), 0);
    ck_assert_ptr_null(admit_enter(&b, "10.0.0.2", false, true));
    ck_assert_uint_eq(admit_unauthenticated(), 1);
    admit_authed(&b);
    ck_assert_uint_eq(admit_unauthenticated(), 0);
    admit_leave(&a);
    admit_leave(&b);
}
END_TEST

START_TEST(test_unix_reserve_and_per_source)
{
    struct conf c;
    struct admit_slot t[3] = { { 0 } }, u[3] = { { 0 } };

    t_conf(&c, 4, 2, 100, 100, 0, "");
    admit_set_unix(true);
    ck_assert_ptr_null(admit_enter(&u[0], "unix uid=5", true, false));
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.1", false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.0.2", false, false));
    ck_assert_str_eq(admit_enter(&t[2], "10.0.0.3", false, false),
                     "too many clients (limits.max_clients; limits.unix_reserved of them are "
                     "kept for the Unix socket)");
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=5", true, false));
    ck_assert_str_eq(admit_enter(&u[2], "unix uid=5", true, false),
                     "too many clients (limits.max_clients)");
    admit_leave(&t[0]);
    admit_leave(&t[1]);
    admit_leave(&u[0]);
    admit_leave(&u[1]);
    admit_set_unix(false);

    t_conf(&c, 100, 0, 100, 100, 2, "");
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.1", false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.0.1", false, false));
    ck_assert_str_eq(admit_enter(&t[2], "10.0.0.1", false, false),
                     "too many connections from this address (limits.max_clients_per_source)");
    ck_assert_ptr_null(admit_enter(&t[2], "10.0.0.2", false, false));
    admit_leave(&t[0]);
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.1", false, false));
    admit_leave(&t[0]);
    admit_leave(&t[1]);
    admit_leave(&t[2]);
}
END_TEST

/* The arithmetic of the descriptor budget. */
START_TEST(test_fd_budget)
{
    struct fdbudget_need need = { 5, 2, 0 };
    size_t other = FDBUDGET_BASE + 10 + 2 + FDBUDGET_TRANSIENT + FDBUDGET_SPARE;

    ck_assert_uint_eq(fdbudget_other(&need), other);
    /* /metrics' connections count too. */
    need.metrics_conns = 16;
    ck_assert_uint_eq(fdbudget_other(&need), other + 16);
    need.metrics_conns = 0;
    /* The smaller of max_clients and what the limit leaves. */
    ck_assert_uint_eq(fdbudget_slots(100, 10000, &need), 100 - other);
    ck_assert_uint_eq(fdbudget_slots(100, 10, &need), 10);
    ck_assert_uint_eq(fdbudget_slots(1048576, 10000, &need), 10000);
    ck_assert_uint_eq(fdbudget_slots(FDBUDGET_UNLIMITED, 10000, &need), 10000);
    /* A limit that leaves nothing still leaves one slot; max_clients 0 is 1. */
    ck_assert_uint_eq(fdbudget_slots(other, 10000, &need), 1);
    ck_assert_uint_eq(fdbudget_slots(3, 10000, &need), 1);
    ck_assert_uint_eq(fdbudget_slots(1000, 0, &need), 1);
    ck_assert_uint_eq(fdbudget_slots(other + 1, 10000, &need), 1);
    ck_assert_uint_eq(fdbudget_slots(other + 2, 10000, &need), 2);
    /* TCP and TLS: the slots less the Unix socket's reserve, one left at least. */
    ck_assert_uint_eq(fdbudget_net_slots(72, 16, true), 56);
    ck_assert_uint_eq(fdbudget_net_slots(72, 16, false), 72);
    ck_assert_uint_eq(fdbudget_net_slots(10, 16, true), 1);
    ck_assert_uint_eq(fdbudget_net_slots(16, 16, true), 1);
    ck_assert_uint_eq(fdbudget_net_slots(17, 16, true), 1);
    ck_assert_uint_eq(fdbudget_net_slots(18, 16, true), 2);
    ck_assert_uint_eq(fdbudget_net_slots(1, 16, true), 1);
    ck_assert_uint_eq(fdbudget_net_slots(5, 0, true), 5);
}
END_TEST

/*
 * Slots the descriptor limit leaves count in place of max_clients when
 * fewer, the reserve is taken from them, and a refusal names the limit.
 */
START_TEST(test_fd_slots)
{
    struct conf c;
    struct admit_slot t[4] = { { 0 } }, u[3] = { { 0 } };
    const char *why;

    t_conf(&c, 100, 2, 100, 100, 0, "");
    admit_set_unix(true);
    admit_set_fd_slots(4, 64);
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.1", false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.0.2", false, false));
    why = admit_enter(&t[2], "10.0.0.3", false, false);
    ck_assert_str_eq(why, "too many clients (descriptor limit 64; limits.unix_reserved of the "
                          "slots it leaves are kept for the Unix socket: raise LimitNOFILE= "
                          "or lower limits.max_clients)");
    ck_assert(admit_is_fd_refusal(why));
    /* The Unix socket has its two. */
    ck_assert_ptr_null(admit_enter(&u[0], "unix uid=0", true, false));
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=0", true, false));
    why = admit_enter(&u[2], "unix uid=0", true, false);
    ck_assert_str_eq(why, "too many clients (descriptor limit 64: raise LimitNOFILE= or lower "
                          "limits.max_clients)");
    ck_assert(admit_is_fd_refusal(why));
    /* A reload that raises the limit makes room; the other limits' texts stay theirs. */
    admit_set_fd_slots(6, 128);
    ck_assert_ptr_null(admit_enter(&t[2], "10.0.0.3", false, false));
    ck_assert_ptr_null(admit_enter(&t[3], "10.0.0.4", false, false));
    admit_leave(&t[3]);
    /* Slots beyond max_clients: max_clients counts, and is named. */
    admit_set_fd_slots(1000, 4096);
    c.max_clients = 5;
    admit_leave(&u[1]);
    why = admit_enter(&t[3], "10.0.0.4", false, false);
    ck_assert_str_eq(why, "too many clients (limits.max_clients; limits.unix_reserved of them "
                          "are kept for the Unix socket)");
    ck_assert(!admit_is_fd_refusal(why));
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=0", true, false));
    ck_assert_str_eq(admit_enter(&u[2], "unix uid=0", true, false),
                     "too many clients (limits.max_clients)");
    admit_leave(&t[0]);
    admit_leave(&t[1]);
    admit_leave(&t[2]);
    admit_leave(&u[0]);
    admit_leave(&u[1]);
    admit_set_unix(false);
    admit_set_fd_slots(SIZE_MAX, FDBUDGET_UNLIMITED);
}
END_TEST

static Suite *
admit_suite(void)
{
    Suite *s = suite_create("admit");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_unauthenticated_pool);
    tcase_add_test(tc, test_tls_handshake_is_pending);
    tcase_add_test(tc, test_unix_reserve_and_per_source);
    tcase_add_test(tc, test_fd_budget);
    tcase_add_test(tc, test_fd_slots);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_admit", admit_suite, NULL, NULL };
