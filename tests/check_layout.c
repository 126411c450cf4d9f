/*
 * check_layout.c: the layout registry's rule and verdicts (daemon/layout.c),
 * without Redis: reading a registry field, the compatibility rule of
 * proto/PROTOCOL.md section 9 in each direction, and how long a verdict
 * counts.  The registry on real masters, beside other daemons, is
 * tests/check_registry.c's.
 */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/layout.h"
#include "tests/runner.h"

#define T_NOW_MS    1800000000000LL     /* a master's clock */

/* An entry of layout l, oldest o, since s, window w, seen at seen. */
static struct layout_entry
t_entry(int l, int o, int64_t s, int64_t w, int64_t seen)
{
    struct layout_entry e;
    char value[128], why[LAYOUT_WHY_MAX];
    int n;

    n = snprintf(value, sizeof(value), "%d %d %lld %lld %lld 9.9.9 host-b:77", l, o,
                 (long long)s, (long long)w, (long long)seen);
    ck_assert_msg(layout_parse("0123456789abcdef", 16, value, (size_t)n, &e, why,
                               sizeof(why)) == 0, "'%s' did not parse: %s", value, why);
    return e;
}

START_TEST(parse_reads_every_word)
{
    const char *v = "2 1 1799999990000 63000 1800000000000 0.3.0 host-a:123";
    struct layout_entry e;
    char why[LAYOUT_WHY_MAX];

    ck_assert_int_eq(layout_parse("abc", 3, v, strlen(v), &e, why, sizeof(why)), 0);
    ck_assert_str_eq(e.id, "abc");
    ck_assert_int_eq(e.layout, 2);
    ck_assert_int_eq(e.oldest, 1);
    ck_assert_int_eq(e.since_ms, 1799999990000LL);
    ck_assert_int_eq(e.window_ms, 63000);
    ck_assert_int_eq(e.seen_ms, 1800000000000LL);
    ck_assert_str_eq(e.release, "0.3.0");
    ck_assert_str_eq(e.host, "host-a:123");
    /* Words a later release appends are read past. */
    v = "1 1 0 63000 1800000000000 0.2.0 h:1 more words later";
    ck_assert_int_eq(layout_parse("abc", 3, v, strlen(v), &e, why, sizeof(why)), 0);
    ck_assert_str_eq(e.host, "h:1");
    /* Words that only name the daemon are cut to fit, never refused. */
    v = "1 1 0 63000 1800000000000 0.3.0+git20270101.abcdef1234567890abcdef "
        "a-host-name-much-longer-than-seventy-one-bytes.example.org.internal.cluster:4242";
    ck_assert_int_eq(layout_parse("0123456789abcdef0123456789abcdef0123456789abcdef", 48, v,
                                  strlen(v), &e, why, sizeof(why)), 0);
    ck_assert_str_eq(e.release, "0.3.0+git20270101.abcdef1234567890abcde");
    ck_assert_uint_eq(strlen(e.host), sizeof(e.host) - 1);
    ck_assert_uint_eq(strlen(e.id), sizeof(e.id) - 1);
}
END_TEST

START_TEST(parse_refuses_what_it_cannot_read)
{
    static const char *const bad[] = {
        "",                                         /* nothing */
        "1 1 0 63000 1800000000000 0.2.0",          /* no host */
        "1 1 0 63000 1800000000000",                /* no release */
        "x 1 0 63000 1800000000000 0.2.0 h:1",      /* layout not a number */
        "1 1 0 -5 1800000000000 0.2.0 h:1",         /* negative window */
        "0 0 0 63000 1800000000000 0.2.0 h:1",      /* layout 0 */
        "1 2 0 63000 1800000000000 0.2.0 h:1",      /* oldest above layout */
        "1 1 0 63000 18000000000000000000 0.2.0 h:1", /* 20 digits */
        "1  1 0 63000 1800000000000 0.2.0 h:1",     /* two spaces */
    };
    struct layout_entry e;
    char why[LAYOUT_WHY_MAX];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        ck_assert_msg(layout_parse("f00d", 4, bad[i], strlen(bad[i]), &e, why,
                                   sizeof(why)) != 0, "'%s' was read", bad[i]);
        ck_assert_msg(strstr(why, "id 'f00d'") != NULL,
                      "the reason for '%s' does not name the field: %s", bad[i], why);
    }
    ck_assert_int_ne(layout_parse("", 0, "1 1 0 1 1 r h", 13, &e, why, sizeof(why)), 0);
}
END_TEST

/* Daemons of one layout serve beside each other whatever else they say. */
START_TEST(judge_same_layout)
{
    struct layout_entry e = t_entry(1, 1, 0, 63000, T_NOW_MS - 100);
    char why[LAYOUT_WHY_MAX] = "";

    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_BESIDE);
    e = t_entry(3, 2, T_NOW_MS - 10, 63000, T_NOW_MS - 100);
    ck_assert_int_eq(layout_judge(3, 3, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_BESIDE);
}
END_TEST

/* A newer daemon that still writes our records (expand) is served beside;
 * one that stopped (contract) is refused, with who and why. */
START_TEST(judge_newer_daemon)
{
    struct layout_entry e = t_entry(2, 1, 0, 63000, T_NOW_MS - 100);
    char why[LAYOUT_WHY_MAX] = "";

    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_BESIDE);
    e = t_entry(2, 2, 0, 63000, T_NOW_MS - 100);
    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_NEWER_STOPPED);
    ck_assert_msg(strstr(why, "0123456789abcdef") != NULL && strstr(why, "host-b:77") != NULL
                  && strstr(why, "9.9.9") != NULL && strstr(why, "layout 2") != NULL
                  && strstr(why, "upgrade this daemon") != NULL, "the reason: %s", why);
}
END_TEST

/*
 * A newer daemon that went back to writing our records (an older daemon
 * came back) is served beside only once whatever it granted before that
 * has ended: its since plus its window.
 */
START_TEST(judge_newer_daemon_since)
{
    int64_t since = T_NOW_MS - 10000;
    struct layout_entry e = t_entry(2, 1, since, 63000, T_NOW_MS - 100);
    char why[LAYOUT_WHY_MAX] = "";

    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_NEWER_SINCE);
    ck_assert_msg(strstr(why, "53000 ms more") != NULL, "the reason: %s", why);
    e.seen_ms = since + 63000 - 1;
    ck_assert_int_eq(layout_judge(1, 1, &e, since + 63000 - 1, why, sizeof(why)),
                     LAYOUT_NEWER_SINCE);
    e.seen_ms = since + 63000;
    ck_assert_int_eq(layout_judge(1, 1, &e, since + 63000, why, sizeof(why)), LAYOUT_BESIDE);
}
END_TEST

/* An older daemon is served beside while we run beside its layout. */
START_TEST(judge_older_daemon)
{
    struct layout_entry e = t_entry(1, 1, 0, 63000, T_NOW_MS - 100);
    char why[LAYOUT_WHY_MAX] = "";

    ck_assert_int_eq(layout_judge(2, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_BESIDE);
    ck_assert_int_eq(layout_judge(2, 2, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_OLDER);
    ck_assert_msg(strstr(why, "writes layout 1") != NULL
                  && strstr(why, "stop or upgrade it") != NULL, "the reason: %s", why);
}
END_TEST

/* An entry whose window has passed holds nothing: no one to refuse. */
START_TEST(judge_window_passed)
{
    struct layout_entry e = t_entry(2, 2, 0, 63000, T_NOW_MS - 63000);
    char why[LAYOUT_WHY_MAX] = "";

    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS, why, sizeof(why)), LAYOUT_NEWER_STOPPED);
    ck_assert_int_eq(layout_judge(1, 1, &e, T_NOW_MS + 1, why, sizeof(why)), LAYOUT_BESIDE);
}
END_TEST

/*
 * A verdict counts for LAYOUT_FRESH_MS after its read was sent, then not
 * until the next read (a daemon paused past it reads again before it
 * grants); a refusing verdict never counts; a new connection forgets it.
 */
START_TEST(verdict_counts_while_fresh)
{
    struct layout_entry newer = t_entry(REDLOCKD_LAYOUT + 1, REDLOCKD_LAYOUT + 1, 0, 63000,
                                        T_NOW_MS - 100);
    struct layout_entry same = t_entry(REDLOCKD_LAYOUT, REDLOCKD_LAYOUT, 0, 63000,
                                       T_NOW_MS - 100);
    struct layout_view v;
    int64_t t = 5000000;

    ck_assert_int_eq(layout_start(2), 0);
    ck_assert(!layout_counts(0, t));
    ck_assert_str_eq(layout_why(0, t, NULL), "its layout registry is not read yet");
    layout_sent(0, t);
    layout_answer(0, "m0", t, T_NOW_MS, &same, 1, NULL);
    ck_assert(layout_counts(0, t + 1000));
    ck_assert(layout_counts(0, t + LAYOUT_FRESH_MS * 1000LL - 1));
    ck_assert(!layout_counts(0, t + LAYOUT_FRESH_MS * 1000LL));
    ck_assert_msg(strstr(layout_why(0, t + LAYOUT_FRESH_MS * 1000LL, NULL),
                         "last read 3000 ms ago") != NULL,
                  "%s", layout_why(0, t + LAYOUT_FRESH_MS * 1000LL, NULL));
    /* A read sent after the round's start counts for it too. */
    layout_sent(0, t + 4000000);
    layout_answer(0, "m0", t + 4000000, T_NOW_MS, &same, 1, NULL);
    ck_assert(layout_counts(0, t + 3500000));
    /* Master 1 is another master. */
    ck_assert(!layout_counts(1, t + 3500000));

    layout_sent(0, t + 5000000);
    layout_answer(0, "m0", t + 5000000, T_NOW_MS, &newer, 1, NULL);
    ck_assert(!layout_counts(0, t + 5000001));
    ck_assert_msg(strstr(layout_why(0, t + 5000001, NULL), "no longer writes layout") != NULL,
                  "%s", layout_why(0, t + 5000001, NULL));
    layout_get_view(0, &v);
    ck_assert(v.read && v.refused);
    ck_assert_uint_eq(v.daemons, 1);
    ck_assert_int_eq(v.lowest, REDLOCKD_LAYOUT + 1);
    ck_assert_uint_eq(v.refusals, 1);

    layout_sent(0, t + 6000000);
    layout_answer(0, "m0", t + 6000000, T_NOW_MS, NULL, 0, "an error from the script");
    ck_assert(!layout_counts(0, t + 6000001));
    ck_assert_str_eq(layout_why(0, t + 6000001, NULL), "an error from the script");

    layout_sent(0, t + 7000000);
    layout_answer(0, "m0", t + 7000000, T_NOW_MS, &same, 1, NULL);
    ck_assert(layout_counts(0, t + 7000001));
    layout_connecting(0);
    ck_assert(!layout_counts(0, t + 7000002));
    layout_stop();
}
END_TEST

/* This daemon's own field never refuses it; a probe writes none. */
START_TEST(own_field_and_probe)
{
    struct layout_entry own;
    const char *argv[LAYOUT_ARGS];
    size_t lens[LAYOUT_ARGS], n;
    char why[LAYOUT_WHY_MAX];
    const char *v = "99 99 0 63000 1800000000000 0.2.0 h:1";

    ck_assert_int_eq(layout_start(1), 0);
    ck_assert_uint_eq(strlen(layout_self_id()), LAYOUT_ID_LEN);
    ck_assert_int_eq(layout_parse(layout_self_id(), LAYOUT_ID_LEN, v, strlen(v), &own, why,
                                  sizeof(why)), 0);
    layout_sent(0, 1000);
    layout_answer(0, "m0", 1000, T_NOW_MS, &own, 1, NULL);
    ck_assert(layout_counts(0, 2000));

    n = layout_args(argv, lens);
    ck_assert_uint_eq(n, LAYOUT_ARGS);
    ck_assert_str_eq(argv[0], layout_self_id());
    ck_assert_msg(strncmp(argv[1], "1 1 0 ", 6) == 0 || REDLOCKD_LAYOUT != 1, "%s", argv[1]);
    ck_assert_str_eq(argv[3], LAYOUT_LEGACY_CHANNEL);
    layout_set_probe(true);
    n = layout_args(argv, lens);
    ck_assert_str_eq(argv[0], "");
    ck_assert_uint_eq(lens[0], 0);
    layout_set_probe(false);
    layout_set_window_ms(12345);
    (void)layout_args(argv, lens);
    ck_assert_msg(strstr(argv[1], " 12345") != NULL, "the window is not written: %s",
                  argv[1]);
    layout_stop();
}
END_TEST

/*
 * A reload that raises lock.max_ttl_ms raises the window: no master
 * counts until a read that wrote the new window there has answered (a
 * longer lease granted before would outlive the member the others see),
 * and every heartbeat is due at once.  A lower window changes nothing.
 */
START_TEST(window_raised_by_reload)
{
    struct layout_entry same = t_entry(REDLOCKD_LAYOUT, REDLOCKD_LAYOUT, 0, 63000,
                                       T_NOW_MS - 100);
    int64_t t = 9000000;

    ck_assert_int_eq(layout_start(1), 0);
    layout_set_window_ms(13000);
    layout_sent(0, t);
    layout_answer(0, "m0", t, T_NOW_MS, &same, 1, NULL);
    ck_assert(layout_counts(0, t + 100));
    ck_assert(!layout_due(0, t + 100));
    layout_set_window_ms(603000);
    ck_assert(!layout_counts(0, t + 100));
    ck_assert_msg(strstr(layout_why(0, t + 100, NULL), "window of 13000 ms") != NULL, "%s",
                  layout_why(0, t + 100, NULL));
    ck_assert(layout_due(0, t + 100));
    layout_sent(0, t + 200);
    ck_assert(!layout_counts(0, t + 300));      /* on its way: not answered yet */
    layout_answer(0, "m0", t + 200, T_NOW_MS, &same, 1, NULL);
    ck_assert(layout_counts(0, t + 300));
    layout_set_window_ms(5000);
    ck_assert(layout_counts(0, t + 400));
    ck_assert(!layout_due(0, t + 400));
    layout_stop();
}
END_TEST

static Suite *
layout_suite(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, parse_reads_every_word);
    tcase_add_test(tc, parse_refuses_what_it_cannot_read);
    tcase_add_test(tc, judge_same_layout);
    tcase_add_test(tc, judge_newer_daemon);
    tcase_add_test(tc, judge_newer_daemon_since);
    tcase_add_test(tc, judge_older_daemon);
    tcase_add_test(tc, judge_window_passed);
    tcase_add_test(tc, verdict_counts_while_fresh);
    tcase_add_test(tc, own_field_and_probe);
    tcase_add_test(tc, window_raised_by_reload);
    suite_add_tcase(s, tc);
    return s;
}

const struct runner runner_main = { "check_layout", layout_suite, NULL, NULL };
