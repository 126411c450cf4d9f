/*
 * check_admit.c: client slots (daemon/admit.c), the address group a
 * peer counts in and the buckets of wrong AUTH passwords
 * (daemon/authlimit.c), the keyed hash of their tables
 * (daemon/keyhash.c), and the slots a descriptor limit leaves
 * (daemon/fdbudget.c), without sockets: the counts, limits, choices and
 * texts on made-up connections and times.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/ctx.h"
#include "daemon/fdbudget.h"
#include "daemon/keyhash.h"
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
    ctx.conf = c;   /* what server.c sets (daemon/ctx.h) */
}

/* The group of peer, as a string to compare. */
static const char *
t_group(const char *peer)
{
    static char out[AUTHLIMIT_SOURCE_MAX];

    authlimit_group(peer, out, sizeof(out));
    return out;
}

START_TEST(test_groups)
{
    ck_assert_str_eq(t_group("1.2.3.4:5678"), "1.2.3.0/24");
    ck_assert_str_eq(t_group("1.2.3.200:1"), "1.2.3.0/24");
    ck_assert_str_ne(t_group("1.2.4.4:1"), "1.2.3.0/24");
    /* Every local user has all of 127/8: it is one group. */
    ck_assert_str_eq(t_group("127.0.0.1:5678"), "127.0.0.0/8");
    ck_assert_str_eq(t_group("127.200.3.9:1"), "127.0.0.0/8");
    ck_assert_str_eq(t_group("unix uid=7 pid=9"), "unix uid=7");
    ck_assert_str_eq(t_group("[::1]:5678"), "[::]/64");
    /* One IPv6 host has a /64: all of it is one group. */
    ck_assert_str_eq(t_group("[2001:db8:1:2:aaaa::1]:1"), "[2001:db8:1:2::]/64");
    ck_assert_str_eq(t_group("[2001:db8:1:2:bbbb::7]:2"), "[2001:db8:1:2::]/64");
    ck_assert_str_ne(t_group("[2001:db8:1:3::1]:2"), "[2001:db8:1:2::]/64");
    /* An IPv4 client of an IPv6 socket is in its IPv4 group. */
    ck_assert_str_eq(t_group("[::ffff:10.1.2.3]:99"), "10.1.2.0/24");
    ck_assert_str_eq(t_group("[::ffff:127.0.0.5]:99"), "127.0.0.0/8");
}
END_TEST

/* A connection that admit.c may close to make room: it records that it was. */
struct t_conn {
    struct admit_slot slot;
    bool              evicted;
    char              why[200];
};

static void
t_evict(struct admit_slot *slot, const char *why)
{
    struct t_conn *t = (struct t_conn *)(void *)slot;

    t->evicted = true;
    snprintf(t->why, sizeof(t->why), "%s", why);
    admit_leave(slot);
}

/* Enter t from group (not TLS), settled; NULL or the refusal. */
static const char *
t_enter(struct t_conn *t, const char *group)
{
    const char *why;

    memset(t, 0, sizeof(*t));
    if ((why = admit_enter(&t->slot, group, false, false, false)) == NULL) {
        admit_settle(&t->slot, t_evict);
    }
    return why;
}

/*
 * A full group share closes the group's oldest waiting connection, a
 * full pool the oldest of the group holding the most: a newcomer is let
 * in, and a group that holds few keeps them.
 */
START_TEST(test_unauthenticated_pool)
{
    struct conf c;
    struct t_conn a[3], b, d, e;
    struct admit_slot u = { 0 };

    t_conf(&c, 100, 0, 3, 2, 0, "pw");
    ck_assert_ptr_null(t_enter(&a[0], "10.0.0.0/24"));
    ck_assert_ptr_null(t_enter(&a[1], "10.0.0.0/24"));
    /* The group's share is full: its oldest goes. */
    ck_assert_ptr_null(t_enter(&a[2], "10.0.0.0/24"));
    ck_assert(a[0].evicted);
    ck_assert_str_eq(a[0].why, "closed to make room for a newer connection from the same "
                               "address group: too many waiting for their TLS handshake or "
                               "AUTH (limits.max_unauthenticated_per_source)");
    ck_assert(!a[1].evicted);
    ck_assert_uint_eq(admit_unauthenticated(), 2);
    ck_assert_ptr_null(t_enter(&b, "10.0.1.0/24"));
    ck_assert_uint_eq(admit_unauthenticated(), 3);
    /* The pool is full: the group holding the most (10.0.0) gives its oldest. */
    ck_assert_ptr_null(t_enter(&d, "10.0.2.0/24"));
    ck_assert(a[1].evicted && !b.evicted && !a[2].evicted);
    ck_assert_str_eq(a[1].why, "closed to make room for a newer connection: too many waiting "
                               "for their TLS handshake or AUTH (limits.max_unauthenticated)");
    ck_assert_uint_eq(admit_evicted(), 2);
    /* The Unix socket is not held up, nor counted. */
    ck_assert_ptr_null(admit_enter(&u, "unix uid=0", false, true, false));
    ck_assert_uint_eq(admit_unauthenticated(), 3);
    /* One that authenticates makes room; twice counts once. */
    admit_authed(&b.slot);
    admit_authed(&b.slot);
    ck_assert_uint_eq(admit_unauthenticated(), 2);
    ck_assert_ptr_null(t_enter(&e, "10.0.3.0/24"));
    ck_assert(!a[2].evicted && !d.evicted);
    admit_leave(&b.slot);
    admit_leave(&b.slot);
    admit_leave(&a[2].slot);
    admit_leave(&d.slot);
    admit_leave(&e.slot);
    admit_leave(&u);
    ck_assert_uint_eq(admit_unauthenticated(), 0);
}
END_TEST

/*
 * A connection whose AUTH waits in line is never closed to make room:
 * its group's silent ones go first, and when only connections in line
 * fill the share, the newcomer is refused.
 */
START_TEST(test_in_line_keeps_place)
{
    struct conf c;
    struct t_conn a[5];

    t_conf(&c, 100, 0, 100, 3, 0, "pw");
    ck_assert_ptr_null(t_enter(&a[0], "127.0.0.0/8"));
    ck_assert_ptr_null(t_enter(&a[1], "127.0.0.0/8"));
    ck_assert_ptr_null(t_enter(&a[2], "127.0.0.0/8"));
    admit_in_line(&a[0].slot);
    admit_in_line(&a[2].slot);
    ck_assert_ptr_null(t_enter(&a[3], "127.0.0.0/8"));
    ck_assert(a[1].evicted && !a[0].evicted && !a[2].evicted);
    admit_in_line(&a[3].slot);
    ck_assert_str_eq(t_enter(&a[4], "127.0.0.0/8"),
                     "too many connections from this address group waiting for their TLS "
                     "handshake or AUTH, every one with its AUTH in line "
                     "(limits.max_unauthenticated_per_source)");
    ck_assert(!a[0].evicted && !a[2].evicted && !a[3].evicted);
    /* One checked (let in) makes room. */
    admit_authed(&a[0].slot);
    ck_assert_ptr_null(t_enter(&a[4], "127.0.0.0/8"));
    admit_leave(&a[0].slot);
    admit_leave(&a[2].slot);
    admit_leave(&a[3].slot);
    admit_leave(&a[4].slot);
    ck_assert_uint_eq(admit_unauthenticated(), 0);
}
END_TEST

/* Enter t from a known address's own group. */
static const char *
t_enter_known(struct t_conn *t, const char *group)
{
    const char *why;

    memset(t, 0, sizeof(*t));
    if ((why = admit_enter(&t->slot, group, true, false, false)) == NULL) {
        admit_settle(&t->slot, t_evict);
    }
    return why;
}

/*
 * A full pool closes a stranger group's connection before a known
 * address's, however few the strangers hold; between strangers, the
 * group holding the most, then the oldest connection.
 */
START_TEST(test_known_closed_last)
{
    struct conf c;
    struct t_conn k[2], x, y[2], z;

    t_conf(&c, 100, 0, 4, 4, 0, "pw");
    ck_assert_ptr_null(t_enter_known(&k[0], "known 127.0.0.1"));
    ck_assert_ptr_null(t_enter_known(&k[1], "known 127.0.0.1"));
    ck_assert_ptr_null(t_enter(&x, "10.0.0.0/24"));
    ck_assert_ptr_null(t_enter(&y[0], "10.0.1.0/24"));
    /* Full: a stranger group goes first, the one whose connection is oldest (x). */
    ck_assert_ptr_null(t_enter(&y[1], "10.0.1.0/24"));
    ck_assert(x.evicted && !k[0].evicted && !k[1].evicted && !y[0].evicted);
    /* Full again: 10.0.1 holds the most. */
    ck_assert_ptr_null(t_enter(&z, "10.0.2.0/24"));
    ck_assert(y[0].evicted && !y[1].evicted && !k[0].evicted);
    admit_leave(&k[0].slot);
    admit_leave(&k[1].slot);
    admit_leave(&y[1].slot);
    admit_leave(&z.slot);
    ck_assert_uint_eq(admit_unauthenticated(), 0);
}
END_TEST

START_TEST(test_tls_handshake_is_pending)
{
    struct conf c;
    struct admit_slot a = { 0 }, b = { 0 };

    /* No password: a plain connection is let in at once, a TLS one after its handshake. */
    t_conf(&c, 100, 0, 1, 1, 0, "");
    ck_assert_ptr_null(admit_enter(&a, "10.0.0.0/24", false, false, false));
    ck_assert_uint_eq(admit_unauthenticated(), 0);
    ck_assert_ptr_null(admit_enter(&b, "10.0.1.0/24", false, false, true));
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
    ck_assert_ptr_null(admit_enter(&u[0], "unix uid=5", false, true, false));
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.0/24", false, false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.1.0/24", false, false, false));
    ck_assert_str_eq(admit_enter(&t[2], "10.0.2.0/24", false, false, false),
                     "too many clients (limits.max_clients; limits.unix_reserved of them are "
                     "kept for the Unix socket)");
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=5", false, true, false));
    ck_assert_str_eq(admit_enter(&u[2], "unix uid=5", false, true, false),
                     "too many clients (limits.max_clients)");
    admit_leave(&t[0]);
    admit_leave(&t[1]);
    admit_leave(&u[0]);
    admit_leave(&u[1]);
    admit_set_unix(false);

    t_conf(&c, 100, 0, 100, 100, 2, "");
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.0/24", false, false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.0.0/24", false, false, false));
    ck_assert_str_eq(admit_enter(&t[2], "10.0.0.0/24", false, false, false),
                     "too many connections from this address group "
                     "(limits.max_clients_per_source)");
    ck_assert_ptr_null(admit_enter(&t[2], "10.0.1.0/24", false, false, false));
    admit_leave(&t[0]);
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.0/24", false, false, false));
    admit_leave(&t[0]);
    admit_leave(&t[1]);
    admit_leave(&t[2]);
}
END_TEST

/* SipHash-2-4's test vectors (the paper's appendix): key 00..0f, input 00..len-1. */
START_TEST(test_keyhash_vectors)
{
    unsigned char key[KEYHASH_KEY_BYTES], in[15];
    size_t i;

    for (i = 0; i < sizeof(key); i++) {
        key[i] = (unsigned char)i;
    }
    for (i = 0; i < sizeof(in); i++) {
        in[i] = (unsigned char)i;
    }
    keyhash_set_key(key);
    ck_assert_uint_eq(keyhash(in, 0), 0x726fdb47dd0e0e31ULL);
    ck_assert_uint_eq(keyhash(in, 8), 0x93f5f5799a932462ULL);
    ck_assert_uint_eq(keyhash(in, 15), 0xa129ca6149be45e5ULL);
    /* A second use of the one context gives the same (the key is kept). */
    ck_assert_uint_eq(keyhash(in, 15), 0xa129ca6149be45e5ULL);
}
END_TEST

#define T_S 1000000LL   /* one second, us */

/* Wrong passwords from peer at now_us, n times. */
static void
t_fail(const char *peer, int n, int64_t now_us)
{
    while (n-- > 0) {
        authlimit_failed(peer, 1, now_us);
    }
}

/*
 * A group's bucket: 10 wrong passwords, then one a second; every address
 * of 127/8 is one group; another group is not affected.
 */
START_TEST(test_group_bucket)
{
    int64_t t0 = 1000 * T_S;

    ck_assert_int_eq(authlimit_wait("127.0.0.1:1", t0), 0);
    t_fail("127.0.0.1:1", 9, t0);
    ck_assert_int_eq(authlimit_wait("127.0.0.2:1", t0), 0);
    t_fail("127.0.0.2:1", 1, t0);
    ck_assert_int_gt(authlimit_wait("127.9.9.9:1", t0), 0);
    ck_assert_int_le(authlimit_wait("127.9.9.9:1", t0), T_S);
    ck_assert_int_eq(authlimit_wait("10.0.0.1:1", t0), 0);
    ck_assert_int_eq(authlimit_wait("127.0.0.1:1", t0 + T_S), 0);
}
END_TEST

/*
 * Bad input of a hash table: groups chosen to land in one place cannot
 * push a group out while its bucket is in use (it would get a fresh one):
 * with every slot it could land in held, newcomers share the overflow
 * bucket, and the first group stays empty.  Thousands of groups (as many
 * /24s as a botnet has) are bounded by the daemon's bucket: 100 at once,
 * then 100 a second.
 */
START_TEST(test_no_fresh_bucket)
{
    int64_t t0 = 2000 * T_S;
    char peer[64];
    int i, checked = 0;

    t_fail("10.9.9.1:1", AUTHLIMIT_BURST, t0);
    ck_assert_int_gt(authlimit_wait("10.9.9.1:1", t0), 0);
    for (i = 0; i < 20000; i++) {
        snprintf(peer, sizeof(peer), "10.%d.%d.1:1", 20 + i / 256, i % 256);
        if (authlimit_wait(peer, t0) == 0) {
            checked++;
            authlimit_failed(peer, 1, t0);
        }
    }
    ck_assert_int_eq(checked, AUTHLIMIT_DAEMON_BURST - AUTHLIMIT_BURST);
    ck_assert_int_gt(authlimit_wait("10.9.9.1:1", t0), 0);
    /* A second later, about 100 more, and the first group has its token back. */
    ck_assert_int_eq(authlimit_wait("10.9.9.1:1", t0 + T_S + 1), 0);
}
END_TEST

/*
 * An address that gave the right password has its own bucket: a guesser
 * elsewhere in its group does not hold it up, and it cannot be used to
 * guess more than one group's worth itself.
 */
START_TEST(test_known_address)
{
    int64_t t0 = 4000 * T_S;

    t_fail("127.5.0.1:1", AUTHLIMIT_BURST, t0);
    ck_assert_int_gt(authlimit_wait("127.0.0.1:9", t0), 0);
    authlimit_passed("127.0.0.1:9", t0);
    ck_assert_int_eq(authlimit_wait("127.0.0.1:10", t0), 0);
    ck_assert_int_gt(authlimit_wait("127.5.0.2:1", t0), 0);
    t_fail("127.0.0.1:11", AUTHLIMIT_BURST, t0);
    ck_assert_int_gt(authlimit_wait("127.0.0.1:12", t0), 0);
    /* Known for AUTHLIMIT_KNOWN_MS, then back on the group's path. */
    ck_assert_int_eq(authlimit_wait("127.0.0.1:13", t0 + 20 * T_S), 0);
    t_fail("127.5.0.1:1", AUTHLIMIT_BURST, t0 + AUTHLIMIT_KNOWN_MS * 1000LL + T_S);
    ck_assert_int_gt(authlimit_wait("127.0.0.1:14", t0 + AUTHLIMIT_KNOWN_MS * 1000LL + T_S), 0);
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
    ck_assert_ptr_null(admit_enter(&t[0], "10.0.0.1", false, false, false));
    ck_assert_ptr_null(admit_enter(&t[1], "10.0.0.2", false, false, false));
    why = admit_enter(&t[2], "10.0.0.3", false, false, false);
    ck_assert_str_eq(why, "too many clients (descriptor limit 64; limits.unix_reserved of the "
                          "slots it leaves are kept for the Unix socket: raise LimitNOFILE= "
                          "or lower limits.max_clients)");
    ck_assert(admit_is_fd_refusal(why));
    /* The Unix socket has its two. */
    ck_assert_ptr_null(admit_enter(&u[0], "unix uid=0", false, true, false));
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=0", false, true, false));
    why = admit_enter(&u[2], "unix uid=0", false, true, false);
    ck_assert_str_eq(why, "too many clients (descriptor limit 64: raise LimitNOFILE= or lower "
                          "limits.max_clients)");
    ck_assert(admit_is_fd_refusal(why));
    /* A reload that raises the limit makes room; the other limits' texts stay theirs. */
    admit_set_fd_slots(6, 128);
    ck_assert_ptr_null(admit_enter(&t[2], "10.0.0.3", false, false, false));
    ck_assert_ptr_null(admit_enter(&t[3], "10.0.0.4", false, false, false));
    admit_leave(&t[3]);
    /* Slots beyond max_clients: max_clients counts, and is named. */
    admit_set_fd_slots(1000, 4096);
    c.max_clients = 5;
    admit_leave(&u[1]);
    why = admit_enter(&t[3], "10.0.0.4", false, false, false);
    ck_assert_str_eq(why, "too many clients (limits.max_clients; limits.unix_reserved of them "
                          "are kept for the Unix socket)");
    ck_assert(!admit_is_fd_refusal(why));
    ck_assert_ptr_null(admit_enter(&u[1], "unix uid=0", false, true, false));
    ck_assert_str_eq(admit_enter(&u[2], "unix uid=0", false, true, false),
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

    tcase_add_test(tc, test_groups);
    tcase_add_test(tc, test_unauthenticated_pool);
    tcase_add_test(tc, test_in_line_keeps_place);
    tcase_add_test(tc, test_known_closed_last);
    tcase_add_test(tc, test_keyhash_vectors);
    tcase_add_test(tc, test_group_bucket);
    tcase_add_test(tc, test_no_fresh_bucket);
    tcase_add_test(tc, test_known_address);
    tcase_add_test(tc, test_tls_handshake_is_pending);
    tcase_add_test(tc, test_unix_reserve_and_per_source);
    tcase_add_test(tc, test_fd_budget);
    tcase_add_test(tc, test_fd_slots);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_admit", admit_suite, NULL, NULL };
