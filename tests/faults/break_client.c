/*
 * break_client.c: the operator of the fault suite's timing schedules
 * (tests/faults/README.md): now and then it ends a lock with BREAK, the
 * way an operator clears a lock whose holder looks stuck.
 *
 *     break-client -p [ADDR:]PORT[,...] -a ADMIN_PASSWORD -n NAME[,NAME...] -l LOG
 *                  [-i MIN_MS-MAX_MS] [-c COUNT]
 *
 * It waits a random time in -i (default 300-1500 ms), takes one of the
 * names of -n at random and one of the daemons of -p at random, connects,
 * sends AUTH with the admin password (BREAK needs the admin right,
 * auth.admin_password), then BREAK <name>, reads the answer and closes.
 * -c stops it after that many BREAKs (0, the default: until SIGTERM,
 * which lets a BREAK in progress finish first).
 *
 * Its log has the format of rmw-client's (tests/faults/rmw_client.c):
 * one line per write(2), O_APPEND, CLOCK_MONOTONIC microseconds:
 *
 *     START us pid=X names=N1,N2
 *     BREAK us name=N port=P                  sent
 *     BROKEN us name=N holders=H fence=F sent_us=S port=P
 *                                             its OK, read at us
 *     BREAKERR us name=N sent_us=S port=P answer=TEXT
 *                                             anything else (ERR NOQUORUM, no
 *                                             answer): the BREAK may have
 *                                             ended holds all the same
 *     EXIT us breaks=N
 *
 * The checker (checker.c) reads the BREAK and BROKEN lines: what a
 * BREAK's OK promises about the fences of the grants around it.
 *
 * Exit status: 0 stopped or done, 2 bad usage, 4 the log could not be
 * written.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "tests/faults/client_common.h"

#define BRK_PORTS_MAX       8       /* daemons it may know */
#define BRK_NAMES_MAX       8       /* names it may break */
#define BRK_NAME_MAX        64      /* longest lock name accepted here */
#define BRK_CONNECT_MS      2000    /* connect to a daemon */
#define BRK_REPLY_MS        10000   /* an answer within this */

/* Command-line settings; filled once by brk_parse_args. */
struct brk_opts {
    char        addrs[BRK_PORTS_MAX][CC_ADDR_MAX]; /* "ADDR:PORT" of each daemon */
    int         ports[BRK_PORTS_MAX];   /* the port of each, for the log */
    size_t      nports;                 /* entries in addrs and ports */
    char        names[BRK_NAMES_MAX][BRK_NAME_MAX + 1]; /* names to break */
    size_t      nnames;                 /* entries in names */
    const char *password;               /* auth.admin_password */
    const char *log_path;               /* the log */
    long        min_ms;                 /* -i: the pause before a BREAK, lower bound */
    long        max_ms;                 /* -i: its upper bound */
    long        count;                  /* -c: BREAKs to send; 0: until SIGTERM */
};

static struct brk_opts brk_o;               /* settings */

/*
 * The next line that is not a push, into c->line, before deadline_ms.
 * True when one came.
 */
static bool
brk_reply(struct client *c, int64_t deadline_ms)
{
    for (;;) {
        switch (client_read_line(c, deadline_ms)) {
        case CLIENT_LINE:
            if (client_is_push(c->line)) {
                continue;
            }
            return true;
        case CLIENT_INTR:
            continue;
        case CLIENT_TIMEOUT:
        case CLIENT_EOF:
        case CLIENT_ERROR:
            return false;
        }
    }
}

/*
 * One BREAK of name through daemon d: connect, AUTH, BREAK, answer.
 * Everything it saw goes to the log.
 */
static void
brk_one(const char *name, size_t d)
{
    char line[BRK_NAME_MAX + 16], shown[CC_LINE_MAX];
    struct client c;
    int64_t deadline = client_now_ms() + BRK_REPLY_MS, sent_us;
    long long holders = -1, fence = -1;
    int64_t v;
    bool got;

    client_init(&c, -1, 0);
    if (client_connect_tcp(&c, brk_o.addrs[d], client_now_ms() + BRK_CONNECT_MS) != 0) {
        cc_log("ERROR %lld cannot connect to port %d: %s", (long long)cc_now_us(),
                brk_o.ports[d], c.err);
        return;
    }
    snprintf(line, sizeof(line), "AUTH %s", brk_o.password);
    if (client_send(&c, line, deadline) != 0 || !brk_reply(&c, deadline)
        || strcmp(c.line, "OK") != 0) {
        cc_printable(c.line, shown, sizeof(shown));
        cc_log("ERROR %lld AUTH through port %d answered: %s", (long long)cc_now_us(),
                brk_o.ports[d], shown);
        client_close(&c);
        return;
    }
    snprintf(line, sizeof(line), "BREAK %s", name);
    sent_us = cc_now_us();
    cc_log("BREAK %lld name=%s port=%d", (long long)sent_us, name, brk_o.ports[d]);
    got = client_send(&c, line, deadline) == 0 && brk_reply(&c, deadline);
    if (got && client_is_reply(c.line, "OK", name)) {
        if (client_field_int(c.line, "holders", &v)) {
            holders = v;
        }
        if (client_field_int(c.line, "fence", &v)) {
            fence = v;
        }
        cc_log("BROKEN %lld name=%s holders=%lld fence=%lld sent_us=%lld port=%d",
                (long long)cc_now_us(), name, holders, fence, (long long)sent_us,
                brk_o.ports[d]);
    } else {
        cc_printable(got ? c.line : "(none)", shown, sizeof(shown));
        cc_log("BREAKERR %lld name=%s sent_us=%lld port=%d answer=%s", (long long)cc_now_us(),
                name, (long long)sent_us, brk_o.ports[d], shown);
    }
    client_close(&c);
}

static void
brk_usage(void)
{
    fprintf(stderr, "usage: break-client -p [ADDR:]PORT[,...] -a ADMIN_PASSWORD "
            "-n NAME[,NAME...] -l LOG\n"
            "                    [-i MIN_MS-MAX_MS] [-c COUNT]\n");
    exit(CC_EXIT_USAGE);
}

static void
brk_parse_args(int argc, char **argv)
{
    char *tok, *save, *dash;
    int opt;

    brk_o.min_ms = 300;
    brk_o.max_ms = 1500;
    while ((opt = getopt(argc, argv, "p:a:n:l:i:c:")) != -1) {
        switch (opt) {
        case 'p':
            brk_o.nports = cc_daemon_list(optarg, brk_o.addrs, brk_o.ports, brk_o.nports,
                                          BRK_PORTS_MAX, brk_usage);
            break;
        case 'a':
            brk_o.password = optarg;
            break;
        case 'n':
            for (tok = strtok_r(optarg, ",", &save); tok != NULL;
                 tok = strtok_r(NULL, ",", &save)) {
                if (brk_o.nnames == BRK_NAMES_MAX || !client_word_ok(tok, BRK_NAME_MAX)) {
                    brk_usage();
                }
                snprintf(brk_o.names[brk_o.nnames++], sizeof(brk_o.names[0]), "%s", tok);
            }
            break;
        case 'l':
            brk_o.log_path = optarg;
            break;
        case 'i':
            dash = strchr(optarg, '-');
            if (dash == NULL) {
                brk_usage();
            }
            *dash = '\0';
            brk_o.min_ms = cc_number(optarg, brk_usage);
            brk_o.max_ms = cc_number(dash + 1, brk_usage);
            break;
        case 'c':
            brk_o.count = cc_number(optarg, brk_usage);
            break;
        default:
            brk_usage();
        }
    }
    if (optind != argc || brk_o.nports == 0 || brk_o.nnames == 0 || brk_o.password == NULL
        || brk_o.log_path == NULL || brk_o.max_ms < brk_o.min_ms) {
        brk_usage();
    }
}

int
main(int argc, char **argv)
{
    char names[BRK_NAMES_MAX * (BRK_NAME_MAX + 1)] = "";
    long done = 0;
    int rc;
    size_t i, len = 0;

    brk_parse_args(argc, argv);
    rc = cc_start("break-client", brk_o.log_path);
    if (rc != 0) {
        return rc;
    }
    for (i = 0; i < brk_o.nnames; i++) {
        len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i > 0 ? "," : "",
                                brk_o.names[i]);
    }
    cc_log("START %lld pid=%d names=%s", (long long)cc_now_us(), (int)getpid(), names);
    while (!cc_stop && (brk_o.count == 0 || done < brk_o.count)) {
        if (!cc_sleep_ms(cc_random(brk_o.min_ms, brk_o.max_ms), true)) {
            break;
        }
        brk_one(brk_o.names[cc_random(0, (long)brk_o.nnames - 1)],
                (size_t)cc_random(0, (long)brk_o.nports - 1));
        done++;
    }
    cc_log("EXIT %lld breaks=%ld", (long long)cc_now_us(), done);
    return 0;
}
