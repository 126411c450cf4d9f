/*
 * main.c: the command line and the start-up order, nothing else.
 *
 *   redlockd -c FILE        run in the foreground (systemd style)
 *   redlockd -t -c FILE     check the config: exit 0, or print every
 *                           problem and exit 78 (EX_CONFIG)
 *   redlockd --reach -c FILE  check the config, then reach every master
 *                           and read its layout registry: exit 0 when a
 *                           quorum counts, 69 (EX_UNAVAILABLE) when not
 *   redlockd -V | -h        version | usage (also --version, --help)
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sysexits.h>
#include <unistd.h>

#include "conf/conf.h"
#include "daemon/layout.h"
#include "daemon/server.h"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: redlockd [-t] [--reach] -c FILE\n"
            "       redlockd -V | -h\n"
            "  -c, --config FILE  configuration (YAML)\n"
            "  -t, --test         check the configuration and exit (0 ok, 78 errors)\n"
            "      --reach        -t, then connect to every master, read the layouts in use\n"
            "                     there, say whether this daemon could grant, and exit\n"
            "                     (0 a quorum counts, 69 not)\n"
            "  -V, --version      print the version\n"
            "  -h, --help         this help\n"
            "The configuration's keys: man redlockd.yml; the daemon and its protocol: "
            "man redlockd.\n");
}

int
main(int argc, char **argv)
{
    const char *file = NULL;
    bool test_only = false, reach = false;
    struct conf conf;
    struct conf_msgs msgs = { NULL, 0, 0 };
    size_t i;
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { "reach", no_argument, NULL, 'R' },
        { NULL, 0, NULL, 0 },
    };
    int opt, rc;

    while ((opt = getopt_long(argc, argv, "c:tVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            file = optarg;
            break;
        case 't':
            test_only = true;
            break;
        case 'R':
            test_only = reach = true;
            break;
        case 'V':
            printf("redlockd %s (layout %d, runs beside layouts %d and later)\n",
                   REDLOCKD_VERSION, REDLOCKD_LAYOUT, REDLOCKD_LAYOUT_OLDEST);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EX_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "redlockd: unexpected argument '%s' (the configuration file comes "
                "after -c)\n", argv[optind]);
        usage(stderr);
        return EX_USAGE;
    }
    if (file == NULL) {
        fprintf(stderr, "redlockd: no configuration file: give it with -c FILE "
                "(for example -c /etc/redlockd/redlockd.yml)\n");
        usage(stderr);
        return EX_USAGE;
    }

    rc = conf_load(file, &conf, &msgs);
    /* The daemon itself checks this when it binds listen.unix (not when
       systemd passes the sockets); a file that did not load says nothing
       more. */
    if (test_only && rc == 0 && conf_check_unix_dir(&conf, true, &msgs) != 0) {
        rc = -1;
    }
    for (i = 0; i < msgs.n; i++) {
        fprintf(stderr, "%s %s\n", msgs.list[i].is_error ? "error" : "warn",
                msgs.list[i].text);
    }
    conf_msgs_free(&msgs);
    if (rc != 0) {
        fprintf(stderr, "error %s: configuration has errors\n", file);
        conf_free(&conf);
        return EX_CONFIG;
    }
    if (test_only) {
        printf("%s: configuration ok\n", file);
        rc = reach ? server_reach(&conf) : 0;
        conf_free(&conf);
        return rc;
    }
    rc = server_run(&conf);
    conf_free(&conf);
    return rc;
}
