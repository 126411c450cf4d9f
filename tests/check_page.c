/*
 * check_page.c: the status page at GET / on metrics.listen, end to end,
 * read over HTTP and rendered in a real browser.
 *
 * Real redis-server masters and the real daemon on free loopback ports
 * (tests/harness.h).  A fleet with something to show: names held with
 * labels, one of them HTML ("<script>..."), one with every character
 * HTML quotes, one name with < > & in it; a LOCK waiting; a lease lost (its keys deleted on every
 * master: reason=renew); a BREAK through an admin session (the BREAK,
 * and its holder's LOST reason=broken).  Then:
 *   - the page over HTTP: its type, its Content-Security-Policy, the
 *     refresh, the masters and the quorum, one row per hold with its
 *     label escaped (no "<script" anywhere), the waiter, the events;
 *     HEAD and POST;
 *   - the page in headless Chromium (Debian's chromium; a missing one
 *     fails the test when run as root, as in CI, which installs it):
 *     --dump-dom, the DOM the browser built, holds the rows and the
 *     labels as text, and no script element; --screenshot, a PNG that
 *     tests/png_bands.py reads (stdlib only), holds the held names'
 *     table: its header band of its colour and width, and one band of
 *     alternating colour per held name;
 *   - what the page decides without I/O (status_page.c, linked in): a
 *     master's health from its counters, and the escape of every byte;
 *   - more names than the page shows: it shows STATUS_PAGE_MAX_NAMES
 *     and says how many more there are; with auth.show_labels: admin
 *     it shows no label (the page has no admin right); nothing held and
 *     one hold said as sentences; then masters killed: one shown down
 *     with "-" for its stale round trip and the quorum amber ("0 more
 *     may fail"), and then no quorum.
 * With REDLOCKD_PAGE_TIMES=1 the page's size and the browser's times
 * are printed; REDLOCKD_PAGE_SHOT=<file> keeps a copy of the screenshot.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <event2/buffer.h>

#include "daemon/master.h"
#include "daemon/status_page.h"
#include "tests/expect.h"
#include "tests/harness.h"
#include "tests/runner.h"

#define NMASTERS        3
#define CMD_MS          2000    /* a reply that needs the masters */
#define BREAK_MS        6000    /* a BREAK: three round deadlines more */
#define BROWSER_MS      45000   /* a headless Chromium run, start to exit */
#define TEST_TIMEOUT_S  120
#define ADMIN_PASSWORD  "page-admin-7"
/* The held names' table as daemon/status_page.c draws it. */
#define HELD_WIDTH      "960"
#define HELD_HEAD       "1f5fa8"
#define HELD_ODD        "fff3c4"
#define HELD_EVEN       "ffd966"
/* A label with HTML in it, and one with every character HTML quotes. */
#define LABEL_SCRIPT    "<script>alert(1)</script>"
#define LABEL_SCRIPT_ESC "&lt;script&gt;alert(1)&lt;/script&gt;"
#define LABEL_QUOTES    "ops&\"team'<b>"
#define LABEL_QUOTES_ESC "ops&amp;&quot;team&#39;&lt;b&gt;"

static int pg_port;             /* the metrics port of the test's daemon */
static pid_t pg_browser = -1;   /* a running Chromium's pid and process group, or -1 */

/* ---- the browser ---- */

/* Kill a running Chromium and everything it started (its process group). */
static void
pg_browser_kill(void)
{
    if (pg_browser > 0) {
        (void)kill(-pg_browser, SIGKILL);
        (void)waitpid(pg_browser, NULL, 0);
        pg_browser = -1;
    }
}

/* Chromium's path (the Debian package's is /usr/bin/chromium), or NULL. */
static const char *
pg_chromium(void)
{
    static char found[512];
    const char *names[] = { "chromium", "chromium-browser" };
    const char *path = getenv("PATH");
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *p = path != NULL ? path : "/usr/bin:/bin";

        while (*p != '\0') {
            size_t n = strcspn(p, ":");

            snprintf(found, sizeof(found), "%.*s/%s", (int)n, p, names[i]);
            if (n > 0 && access(found, X_OK) == 0) {
                return found;
            }
            p += n + (p[n] == ':');
        }
    }
    return NULL;
}

/*
 * Chromium is needed: when it is missing the test fails as root (CI,
 * where make deps installs it) and is skipped, saying so, otherwise.
 * Returns its path, or NULL when the test is to end here.
 */
static const char *
pg_need_chromium(void)
{
    const char *bin = pg_chromium();

    if (bin != NULL) {
        return bin;
    }
    ck_assert_msg(getuid() != 0, "chromium is not installed: make deps installs it "
                  "(apt-get install chromium fonts-dejavu-core)");
    fprintf(stderr, "check_page: chromium is not installed and this is not root: the browser "
            "half of the test is skipped\n");
    return NULL;
}

/* Whether the running Chromium has exited (arg: its wait status, written then). */
static bool
pg_cond_browser_done(void *arg)
{
    int *status = arg;

    return waitpid(pg_browser, status, WNOHANG) == pg_browser;
}

/*
 * Run headless Chromium on url with one more flag (--dump-dom,
 * --screenshot=...), its stdout to out_path and stderr to
 * <test dir>/chromium.log, in a process group of its own with a fresh
 * profile, and wait for it (BROWSER_MS).  Returns the ms it took; the
 * test fails when it did not exit 0 in time.
 */
static long long
pg_browse(const char *bin, const char *flag, const char *url, const char *out_path)
{
    char profile[512], logp[512], size[64];
    const char *argv[] = { bin, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
                           "--force-device-scale-factor=1", size, profile, flag, url, NULL };
    pid_t parent = getpid();
    int64_t t0;
    int status = 0, fd;

    snprintf(size, sizeof(size), "--window-size=1280,1400");
    snprintf(profile, sizeof(profile), "--user-data-dir=%s/chromium-profile", h_dir());
    snprintf(logp, sizeof(logp), "%s/chromium.log", h_dir());
    t0 = h_now_ms();
    pg_browser = fork();
    ck_assert_int_ge(pg_browser, 0);
    if (pg_browser == 0) {
        h_child_setup(parent);
        (void)setpgid(0, 0);
        fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0) {
            _exit(126);
        }
        fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || dup2(fd, 2) < 0) {
            _exit(126);
        }
        fd = open("/dev/null", O_RDONLY);
        if (fd < 0 || dup2(fd, 0) < 0) {
            _exit(126);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    (void)setpgid(pg_browser, pg_browser);
    ck_assert_msg(h_wait_until(pg_cond_browser_done, &status, BROWSER_MS),
                  "chromium %s did not finish within %d ms (its log: %s)", flag, BROWSER_MS,
                  logp);
    (void)kill(-pg_browser, SIGKILL);   /* whatever it left behind */
    pg_browser = -1;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "chromium %s exited with status %d (its log: %s)", flag,
                  h_decode_status(status), logp);
    return (long long)(h_now_ms() - t0);
}

/* ---- reading the page ---- */

/* Occurrences of needle in hay. */
static size_t
pg_count(const char *hay, const char *needle)
{
    size_t n = 0, len = strlen(needle);

    while ((hay = strstr(hay, needle)) != NULL) {
        n++;
        hay += len;
    }
    return n;
}

/* Whether needle occurs in [from, end). */
static bool
pg_within(const char *from, const char *end, const char *needle)
{
    const char *at = strstr(from, needle);

    return at != NULL && at + strlen(needle) <= end;
}

/* What a failure shows of a page: from its <body> on (its CSS before is long). */
static const char *
pg_excerpt(const char *page)
{
    const char *b = strstr(page, "<body>");

    return b != NULL ? b : page;
}

/* The page must hold text. */
#define PG_HAS(body, text) \
    ck_assert_msg(strstr((body), (text)) != NULL, "the page lacks '%s':\n%.1500s", (text), \
                  pg_excerpt(body))

/*
 * The value of header name (case-insensitive) in a header block into
 * out (size bytes).  Returns false when there is none.
 */
static bool
pg_header(const char *head, const char *name, char *out, size_t size)
{
    size_t nlen = strlen(name);
    const char *line = strstr(head, "\r\n");

    while (line != NULL && line[2] != '\0') {
        const char *end, *v;

        line += 2;
        end = strstr(line, "\r\n");
        if (end == NULL) {
            return false;
        }
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            for (v = line + nlen + 1; *v == ' '; v++) {
            }
            snprintf(out, size, "%.*s", (int)(end - v), v);
            return true;
        }
        line = end;
    }
    return false;
}

/* method / over HTTP/1.1, Connection: close. */
static void
pg_request(const char *method, const char *path, struct h_http_resp *r)
{
    char req[256];

    snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close"
             "\r\n\r\n", method, path, pg_port);
    ck_assert_msg(h_http(pg_port, req, r) == 0, "%s %s on the metrics port failed", method,
                  path);
}

/* Whether GET / answers 200 with text (arg) in it. */
static bool
pg_cond_page_has(void *arg)
{
    struct h_http_resp r;
    char req[256];
    bool has;

    snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close"
             "\r\n\r\n", pg_port);
    if (h_http(pg_port, req, &r) != 0) {
        return false;
    }
    has = r.status == 200 && strstr(r.body, arg) != NULL;
    h_http_free(&r);
    return has;
}

/* ---- the tests ---- */

/* A session that takes name with label and must be granted. */
static int
pg_hold(const char *name, const char *label)
{
    char line[256], want[128];
    int fd = expect_tcp();

    snprintf(line, sizeof(line), "LOCK %s label=%s", name, label);
    snprintf(want, sizeof(want), "OK %s ", name);
    EXPECT_PREFIX(fd, line, want);
    return fd;
}

START_TEST(page_shows_the_fleet)
{
    struct h_daemon_opts o = expect_opts;
    struct h_http_resp r;
    char v[640], url[128], path[512], cmd[1024], got[512], *line, *dom;
    long long t_dom, t_shot;
    int a, b, g, w, d, v1, x;
    size_t i;
    const char *bin;
    FILE *p;

    o.admin_password = ADMIN_PASSWORD;
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o, .metrics_port = &pg_port);
    atexit(pg_browser_kill);

    /* Three names held, with labels; one LOCK waiting on the first. */
    a = pg_hold("alpha", LABEL_SCRIPT);
    b = pg_hold("beta", LABEL_QUOTES);
    g = pg_hold("<gamma>&", "plain-label");    /* a name may hold < > & too */
    w = expect_tcp();
    ck_assert_int_eq(h_send(w, "LOCK alpha wait=60000 label=waiter-w"), 0);
    expect_wait_stat("waiters", 1, false, CMD_MS);

    /* A lease lost: its keys deleted on every master, the renewal denied. */
    d = expect_tcp();
    EXPECT_PREFIX(d, "LOCK doomed ttl=900 label=doomed-holder", "OK doomed ");
    expect_del_everywhere("doomed");
    line = h_read_line(d, 900 + H_PROMPT_MS);  /* the renewal at ttl/3 is denied */
    ck_assert_msg(line != NULL && strcmp(line, "! LOST doomed reason=renew") == 0,
                  "got '%s'", line != NULL ? line : "(nothing)");
    free(line);

    /* A BREAK through an admin session: the BREAK, and its holder's LOST. */
    v1 = pg_hold("victim", "victim-label");
    x = expect_tcp();
    EXPECT_REPLY(x, "AUTH " ADMIN_PASSWORD, "OK");
    ck_assert_int_eq(h_send(x, "BREAK victim"), 0);
    line = h_read_line(x, BREAK_MS);
    ck_assert_msg(line != NULL && strncmp(line, "OK victim holders=1 fence=", 26) == 0,
                  "BREAK victim answered '%s'", line != NULL ? line : "(nothing)");
    free(line);
    expect_lost(v1, "victim", CMD_MS, "the BREAK's holder");

    /* (a) The page over HTTP. */
    pg_request("GET", "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(pg_header(r.head, "Content-Type", v, sizeof(v))
                  && strcmp(v, STATUS_PAGE_CONTENT_TYPE) == 0, "Content-Type '%s'", v);
    ck_assert_msg(pg_header(r.head, "Content-Security-Policy", v, sizeof(v))
                  && strncmp(v, "default-src 'none';", 19) == 0, "CSP '%s'", v);
    PG_HAS(r.body, "<meta http-equiv=\"refresh\" content=\"5\">");
    PG_HAS(r.body, "<h1>redlockd ");
    snprintf(v, sizeof(v), "%d of %d masters up and counted, quorum %d", NMASTERS, NMASTERS,
             NMASTERS / 2 + 1);
    PG_HAS(r.body, v);
    /* The margin as the log says it; green while one more may fail. */
    PG_HAS(r.body, "<span class=\"ok\">quorum reachable: 3 count, 1 more may fail</span>");
    for (i = 0; i < NMASTERS; i++) {
        snprintf(v, sizeof(v), "<td>127.0.0.1:%d</td><td class=\"ok\">up</td>",
                 h_master_port(i));
        PG_HAS(r.body, v);
    }
    /* No byte a client sent becomes markup; every one is shown as text. */
    ck_assert_msg(strstr(r.body, "<script") == NULL && strcasestr(r.body, "<b>") == NULL
                  && strstr(r.body, "<gamma>") == NULL,
                  "a label reached the page unescaped:\n%.1500s", pg_excerpt(r.body));
    PG_HAS(r.body, "<td class=\"label\">" LABEL_SCRIPT_ESC "</td>");
    PG_HAS(r.body, "<td class=\"label\">" LABEL_QUOTES_ESC "</td>");
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"hold\">"), 3);
    PG_HAS(r.body, "<tr class=\"hold\"><td>alpha</td><td>exclusive</td>");
    PG_HAS(r.body, "<tr class=\"hold\"><td>&lt;gamma&gt;&amp;</td><td>exclusive</td>"
                   "<td class=\"label\">plain-label</td>");
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"waiter\">"), 1);
    PG_HAS(r.body, "<tr class=\"waiter\"><td>alpha</td><td class=\"n\">1 of 1</td>"
                   "<td class=\"label\">waiter-w</td>");
    /* Newest first: the BREAK (answered last), its holder's LOST, the lost lease. */
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"event\">"), 3);
    PG_HAS(r.body, "<td class=\"bad\">LOST</td><td>victim</td><td class=\"label\">"
                   "victim-label</td><td>broken</td>");
    PG_HAS(r.body, "<td class=\"warn\">BREAK</td><td>victim</td><td class=\"label\">"
                   "victim-label</td><td>holders=1 fence=");
    PG_HAS(r.body, "<td class=\"bad\">LOST</td><td>doomed</td><td class=\"label\">"
                   "doomed-holder</td><td>renew</td>");
    ck_assert_msg(strstr(r.body, "<td>broken</td>") < strstr(r.body, "<td>renew</td>"),
                  "the events are not newest first:\n%.1500s", pg_excerpt(r.body));
    if (getenv("REDLOCKD_PAGE_TIMES") != NULL) {
        fprintf(stderr, "check_page: the page is %zu bytes\n", r.body_len);
    }
    h_http_free(&r);
    pg_request("HEAD", "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.body_len, 0);
    h_http_free(&r);
    pg_request("POST", "/", &r);
    ck_assert_int_eq(r.status, 405);
    h_http_free(&r);

    /* (b) The page in a browser. */
    bin = pg_need_chromium();
    if (bin != NULL) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/", pg_port);
        snprintf(path, sizeof(path), "%s/dom.html", h_dir());
        t_dom = pg_browse(bin, "--dump-dom", url, path);
        dom = expect_read_file(path);
        ck_assert_msg(pg_count(dom, "<tr class=\"hold\">") == 3 && pg_count(dom,
                      "<tr class=\"waiter\">") == 1 && pg_count(dom, "<tr class=\"event\">")
                      == 3, "the browser's DOM lacks the rows:\n%.1500s", pg_excerpt(dom));
        ck_assert_msg(strstr(dom, "<script") == NULL, "the DOM has a script element:\n%.1500s",
                      pg_excerpt(dom));
        ck_assert_msg(strstr(dom, LABEL_SCRIPT_ESC) != NULL, "the DOM lacks the label as "
                      "text:\n%.1500s", pg_excerpt(dom));
        free(dom);

        snprintf(path, sizeof(path), "%s/page.png", h_dir());
        snprintf(v, sizeof(v), "--screenshot=%s", path);
        t_shot = pg_browse(bin, v, url, "/dev/null");
        snprintf(cmd, sizeof(cmd), "python3 tests/png_bands.py '%s' %s %s %s %s 2>&1", path,
                 HELD_WIDTH, HELD_HEAD, HELD_ODD, HELD_EVEN);
        p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        if (fgets(got, sizeof(got), p) == NULL) {
            got[0] = '\0';
        }
        ck_assert_msg(pclose(p) == 0 && strstr(got, " rows=3\n") != NULL,
                      "the screenshot %s does not show the held names' table with 3 rows: "
                      "png_bands.py says '%s'", path, got);
        if (getenv("REDLOCKD_PAGE_TIMES") != NULL) {
            fprintf(stderr, "check_page: --dump-dom %lld ms, --screenshot %lld ms; %s",
                    t_dom, t_shot, got);
        }
        if (getenv("REDLOCKD_PAGE_SHOT") != NULL) {     /* keep it, for people to look at */
            snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, getenv("REDLOCKD_PAGE_SHOT"));
            ck_assert_int_eq(system(cmd), 0);
        }
    }
    close(a);
    close(b);
    close(g);
    close(w);
    close(d);
    close(v1);
    close(x);
}
END_TEST

/*
 * More names than the page shows: STATUS_PAGE_MAX_NAMES rows, the first
 * by name, and a line saying how many more there are.  With
 * auth.show_labels: admin, no label is shown.  Then masters killed: the
 * first shown down with its reason, the second takes the quorum.
 */
START_TEST(page_bounded)
{
    enum { EXTRA = 7 };
    const int n = STATUS_PAGE_MAX_NAMES + EXTRA;
    struct h_daemon_opts o = expect_opts;
    struct h_http_resp r;
    char line[64], want[128], *got;
    const char *row, *end;
    int64_t t0, t_get;
    int fd, i;

    o.show_labels = "admin";
    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .opts = &o, .metrics_port = &pg_port);
    /* Nothing yet, then one hold: said as people say it. */
    pg_request("GET", "/", &r);
    ck_assert_int_eq(r.status, 200);
    PG_HAS(r.body, "<p id=\"holds\">Nothing is held or waited for through this daemon");
    ck_assert_msg(strstr(r.body, "0 holds") == NULL && strstr(r.body, "Nothing held here")
                  == NULL, "an empty daemon said awkwardly:\n%.1500s", pg_excerpt(r.body));
    h_http_free(&r);
    fd = expect_tcp();
    EXPECT_PREFIX(fd, "TRYLOCK n0000 label=l0", "OK n0000 ");
    pg_request("GET", "/", &r);
    PG_HAS(r.body, "<p id=\"holds\">1 hold of 1 name held or waited for through this daemon");
    h_http_free(&r);
    for (i = 1; i < n; i++) {
        snprintf(line, sizeof(line), "TRYLOCK n%04d label=l%d", i, i);
        ck_assert_int_eq(h_send(fd, line), 0);
    }
    for (i = 1; i < n; i++) {
        got = EXPECT_READ(fd, CMD_MS, "a TRYLOCK");
        snprintf(want, sizeof(want), "OK n%04d ", i);
        ck_assert_msg(strncmp(got, want, strlen(want)) == 0, "got '%s'", got);
        free(got);
    }
    t0 = h_now_ms();
    pg_request("GET", "/", &r);
    t_get = h_now_ms() - t0;
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"hold\">"), STATUS_PAGE_MAX_NAMES);
    snprintf(want, sizeof(want), "<tr class=\"hold\"><td>n%04d</td>", STATUS_PAGE_MAX_NAMES - 1);
    PG_HAS(r.body, want);
    snprintf(want, sizeof(want), "<td>n%04d</td>", STATUS_PAGE_MAX_NAMES);
    ck_assert_msg(strstr(r.body, want) == NULL, "name %d is shown", STATUS_PAGE_MAX_NAMES);
    snprintf(want, sizeof(want), "%d more names not shown", EXTRA);
    PG_HAS(r.body, want);
    snprintf(want, sizeof(want), "%d holds of %d names", n, n);
    PG_HAS(r.body, want);
    /* auth.show_labels: admin, and the page has no admin right: no label shown. */
    ck_assert_msg(strstr(r.body, ">l0<") == NULL && strstr(r.body, ">l1<") == NULL,
                  "a label is shown with auth.show_labels: admin:\n%.1500s", pg_excerpt(r.body));
    PG_HAS(r.body, "<td class=\"label\"><span class=\"quiet\">hidden</span></td>");
    PG_HAS(r.body, "Labels hidden: auth.show_labels is admin.");
    if (getenv("REDLOCKD_PAGE_TIMES") != NULL) {
        fprintf(stderr, "check_page: with %d names the page is %zu bytes, fetched in %lld ms\n",
                n, r.body_len, (long long)t_get);
    }
    h_http_free(&r);

    /* Masters going down: each shown down, then no quorum. */
    ck_assert_int_eq(h_kill_master(0), 0);
    ck_assert_msg(h_wait_until(pg_cond_page_has, "2 of 3 masters up and counted", 5000),
                  "the page did not show master 0 down within 5 s");
    pg_request("GET", "/", &r);
    snprintf(want, sizeof(want), "<td>127.0.0.1:%d</td><td class=\"bad\">down</td><td>down (",
             h_master_port(0));
    PG_HAS(r.body, want);
    /* Its last round trip is stale while its link is down: "-", not the last figure. */
    row = strstr(r.body, want);
    end = strstr(row, "</tr>");
    ck_assert_msg(end != NULL, "master 0's row does not end");
    ck_assert_msg(pg_within(row, end, "</td><td>down</td><td class=\"n\">-</td>"),
                  "master 0 is down and its round trip is not '-': %.*s", (int)(end - row),
                  row);
    /* 2 counted, quorum 2: reachable, but no master more may fail (amber). */
    PG_HAS(r.body, "<span class=\"warn\">quorum reachable: 2 count, 0 more may fail</span>");
    h_http_free(&r);
    ck_assert_int_eq(h_kill_master(1), 0);
    ck_assert_msg(h_wait_until(pg_cond_page_has, "NO QUORUM</span>: 1 of 3 masters up and "
                               "counted, quorum 2", 5000),
                  "the page did not show the quorum lost within 5 s");
    close(fd);
}
END_TEST

/*
 * Rows are bounded as well as names: one shared name with more holders
 * than STATUS_PAGE_MAX_ROWS, and one exclusive name with more LOCKs
 * waiting than that, each session a connection of its own (a session
 * holds a name once).  Each table shows STATUS_PAGE_MAX_ROWS rows and
 * says how many more there are, so one busy name cannot grow the page
 * to a row per client.
 */
START_TEST(page_rows_bounded)
{
    enum { EXTRA = 7, N = STATUS_PAGE_MAX_ROWS + EXTRA + 1 };
    static int fds[N];
    struct h_http_resp r;
    char line[64], want[128], *got;
    int i;

    EXPECT_SETUP(.masters = NMASTERS, .daemons = 1, .metrics_port = &pg_port);
    for (i = 0; i < N; i++) {
        fds[i] = expect_tcp();
        snprintf(line, sizeof(line), "TRYLOCK s shared label=r%d", i);
        ck_assert_int_eq(h_send(fds[i], line), 0);
    }
    for (i = 0; i < N; i++) {
        got = EXPECT_READ(fds[i], CMD_MS, "a shared TRYLOCK");
        ck_assert_msg(strncmp(got, "OK s ", 5) == 0, "got '%s'", got);
        free(got);
    }
    /* w held by the first session, waited for by all the others. */
    ck_assert_int_eq(h_send(fds[0], "TRYLOCK w"), 0);
    got = EXPECT_READ(fds[0], CMD_MS, "TRYLOCK w");
    ck_assert_msg(strncmp(got, "OK w ", 5) == 0, "got '%s'", got);
    free(got);
    for (i = 1; i < N; i++) {
        snprintf(line, sizeof(line), "LOCK w wait=inf label=q%d", i);
        ck_assert_int_eq(h_send(fds[i], line), 0);
    }
    snprintf(want, sizeof(want), "<p>%d LOCKs waiting.</p>", N - 1);
    ck_assert_msg(h_wait_until(pg_cond_page_has, want, 10000),
                  "the page did not show %d LOCKs waiting within 10 s", N - 1);

    pg_request("GET", "/", &r);
    ck_assert_int_eq(r.status, 200);
    snprintf(want, sizeof(want), "%d holds of 2 names", N + 1);
    PG_HAS(r.body, want);
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"hold\">"), STATUS_PAGE_MAX_ROWS);
    ck_assert_int_eq(pg_count(r.body, "<tr class=\"waiter\">"), STATUS_PAGE_MAX_ROWS);
    /* s's holders come first by name; the rest of s's and w's hold are counted. */
    snprintf(want, sizeof(want), "%d more holds not shown", N + 1 - STATUS_PAGE_MAX_ROWS);
    PG_HAS(r.body, want);
    snprintf(want, sizeof(want), "%d more waiting LOCKs not shown", EXTRA);
    PG_HAS(r.body, want);
    ck_assert_msg(strstr(r.body, "id=\"more\"") == NULL, "names said not shown:\n%.1500s",
                  pg_excerpt(r.body));
    if (getenv("REDLOCKD_PAGE_TIMES") != NULL) {
        fprintf(stderr, "check_page: with %d holds and %d waiting the page is %zu bytes\n",
                N + 1, N - 1, r.body_len);
    }
    h_http_free(&r);
    for (i = 0; i < N; i++) {
        close(fds[i]);
    }
}
END_TEST

/*
 * What the page decides without I/O: a master's health from its
 * counters, and the escape of every byte a client or a master may send.
 */
START_TEST(page_health_and_escape)
{
    struct master_stats st;
    struct evbuffer *out = evbuffer_new();
    const char in[] = "a<b>&\"c'd\x07\x80\\e";
    const char want[] = "a&lt;b&gt;&amp;&quot;c&#39;d\\x07\\x80\\e";
    char got[128];
    size_t n;

    memset(&st, 0, sizeof(st));
    st.duplicate_of = -1;
    st.layout_counts = true;
    st.state = MASTER_UP;
    ck_assert_int_eq(status_page_health(&st, true), STATUS_PAGE_COUNTED);
    st.layout_counts = false;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_NOT_COUNTED);
    st.quarantine_ms = 1500;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_QUARANTINED);
    st.duplicate_of = 0;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_DUPLICATE);
    st.state = MASTER_HANDSHAKE;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_CONNECTING);
    st.state = MASTER_CONNECTING;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_CONNECTING);
    st.state = MASTER_DOWN;
    ck_assert_int_eq(status_page_health(&st, false), STATUS_PAGE_DOWN);
    /* Counted is the quorum's own rule (master_counted), whatever else the counters say. */
    ck_assert_int_eq(status_page_health(&st, true), STATUS_PAGE_COUNTED);
    ck_assert_str_eq(status_page_health_name(STATUS_PAGE_DOWN), "down");
    ck_assert_str_eq(status_page_health_name(STATUS_PAGE_COUNTED), "up");

    ck_assert_ptr_nonnull(out);
    status_page_escape(out, in, sizeof(in) - 1);
    n = evbuffer_remove(out, got, sizeof(got) - 1);
    got[n] = '\0';
    ck_assert_str_eq(got, want);
    evbuffer_free(out);
}
END_TEST

static Suite *
page_suite(void)
{
    Suite *s = suite_create("redlockd status page");

    EXPECT_ADD(s, page_health_and_escape, TEST_TIMEOUT_S);
    EXPECT_ADD(s, page_shows_the_fleet, TEST_TIMEOUT_S);
    EXPECT_ADD(s, page_bounded, TEST_TIMEOUT_S);
    EXPECT_ADD(s, page_rows_bounded, TEST_TIMEOUT_S);
    return s;
}

const struct runner runner_main = { "check_page", page_suite, h_suite_init, h_suite_cleanup };
