/*
 * fuzz_conf.c: libFuzzer target for conf/: conf_load() on any bytes, and
 * conf_parse_addr() on the same bytes read as one address.
 *
 * conf_load() reads a path, so the input is written to a memfd (a
 * deleted temporary file when memfd_create() is not available) that
 * lives for the whole run, and the loader opens "/proc/self/fd/N".
 * Everything the loader returns is released, so LeakSanitizer reports
 * only the module's own leaks.
 *
 * Beyond "does not crash", the result must keep the promises of conf.h
 * and README.md: 0 exactly when no message is an error; every message is
 * one printable line "path:line:column: ..." or "path: ...", in file
 * order (messages without a position last); a file that loads has 1..15
 * distinct masters, ttl bounds in order, a node timeout below the
 * shortest ttl, at least one listener, every string set, and an
 * auth.password that is one printable word.  An address that parses is
 * copied whole into spec; one that does not leaves the struct zeroed
 * and a reason in err.  A broken promise aborts, so libFuzzer reports it
 * with the input.  The same file is linked with tests/fuzz/replay.c for
 * the ordinary tests.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with where and what when cond is false. */
#define FUZZ_CONF_CHECK(cond)                                               \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fuzz_conf_fail(__LINE__, #cond);                                \
        }                                                                   \
    } while (0)

/* Most bytes handed to conf_parse_addr(): longer is refused at once. */
#define FUZZ_CONF_ADDR_MAX  1024

/* The file the inputs are written to; opened on the first input. */
static int  fuzz_conf_fd = -1;
static char fuzz_conf_path[64];

static void fuzz_conf_fail(int line, const char *what)
    __attribute__((noreturn));

static void
fuzz_conf_fail(int line, const char *what)
{
    fprintf(stderr, "fuzz_conf.c:%d: broken invariant: %s\n", line, what);
    abort();
}

/* Open the scratch file once: a memfd, or a deleted temporary file. */
static void
fuzz_conf_open(void)
{
    char tmpl[] = "/tmp/fuzz-conf-XXXXXX";

    if (fuzz_conf_fd >= 0) {
        return;
    }
    fuzz_conf_fd = memfd_create("fuzz-conf", MFD_CLOEXEC);
    if (fuzz_conf_fd < 0) {
        fuzz_conf_fd = mkstemp(tmpl);
        if (fuzz_conf_fd < 0) {
            perror("fuzz_conf: memfd_create and mkstemp");
            abort();
        }
        unlink(tmpl);
    }
    snprintf(fuzz_conf_path, sizeof(fuzz_conf_path), "/proc/self/fd/%d", fuzz_conf_fd);
}

/* Replace the scratch file's contents with data/size. */
static void
fuzz_conf_write(const uint8_t *data, size_t size)
{
    size_t done = 0;
    ssize_t n;

    if (ftruncate(fuzz_conf_fd, 0) != 0) {
        perror("fuzz_conf: ftruncate");
        abort();
    }
    while (done < size) {
        n = pwrite(fuzz_conf_fd, data + done, size - done, (off_t)done);
        if (n <= 0) {
            perror("fuzz_conf: pwrite");
            abort();
        }
        done += (size_t)n;
    }
}

/* Whether every byte of s is printable ASCII (0x20-0x7E). */
static bool
fuzz_conf_printable(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) {
            return false;
        }
    }
    return true;
}

/*
 * The position of a message, "path:LINE:COLUMN: text"; 0 and 0 for a
 * message about the whole file, "path: text".
 */
static void
fuzz_conf_position(const char *text, size_t *line, size_t *column)
{
    size_t plen = strlen(fuzz_conf_path);
    unsigned long l, c;
    int used = 0;

    FUZZ_CONF_CHECK(strncmp(text, fuzz_conf_path, plen) == 0);
    FUZZ_CONF_CHECK(text[plen] == ':');
    *line = 0;
    *column = 0;
    if (text[plen + 1] == ' ') {
        FUZZ_CONF_CHECK(text[plen + 2] != '\0');
        return;
    }
    FUZZ_CONF_CHECK(sscanf(text + plen + 1, "%lu:%lu: %n", &l, &c, &used) == 2);
    FUZZ_CONF_CHECK(used > 0 && text[plen + 1 + (size_t)used] != '\0');
    FUZZ_CONF_CHECK(l >= 1 && c >= 1);
    *line = l;
    *column = c;
}

/* Messages: one printable line each, in file order, errors counted. */
static void
fuzz_conf_check_msgs(int rc, const struct conf_msgs *msgs)
{
    size_t i, nerrors = 0, line, column, last_line = 1, last_column = 1;
    bool unplaced = false;

    FUZZ_CONF_CHECK(rc == 0 || rc == -1);
    FUZZ_CONF_CHECK(msgs->n == 0 || msgs->list != NULL);
    for (i = 0; i < msgs->n; i++) {
        const struct conf_msg *msg = &msgs->list[i];

        FUZZ_CONF_CHECK(msg->text != NULL);
        FUZZ_CONF_CHECK(fuzz_conf_printable(msg->text));
        if (msg->is_error) {
            nerrors++;
        }
        fuzz_conf_position(msg->text, &line, &column);
        if (line == 0) {
            unplaced = true;
            continue;
        }
        /* In file order; those without a position come last. */
        FUZZ_CONF_CHECK(!unplaced);
        FUZZ_CONF_CHECK(line > last_line || (line == last_line && column >= last_column));
        last_line = line;
        last_column = column;
    }
    FUZZ_CONF_CHECK(nerrors == msgs->nerrors);
    FUZZ_CONF_CHECK((rc == 0) == (nerrors == 0));
}

/* A master or listen.tcp address as conf_parse_addr() leaves it. */
static void
fuzz_conf_check_addr(const struct conf_addr *a, bool allow_unix)
{
    FUZZ_CONF_CHECK(memchr(a->spec, '\0', sizeof(a->spec)) != NULL);
    FUZZ_CONF_CHECK(a->spec[0] != '\0');
    if (a->is_unix) {
        FUZZ_CONF_CHECK(allow_unix);
        FUZZ_CONF_CHECK(memchr(a->path, '\0', sizeof(a->path)) != NULL);
        FUZZ_CONF_CHECK(a->path[0] == '/');
        FUZZ_CONF_CHECK(strncmp(a->spec, "unix:", 5) == 0);
        FUZZ_CONF_CHECK(strcmp(a->spec + 5, a->path) == 0);
        return;
    }
    FUZZ_CONF_CHECK(memchr(a->host, '\0', sizeof(a->host)) != NULL);
    FUZZ_CONF_CHECK(a->host[0] != '\0');
    FUZZ_CONF_CHECK(a->port >= 1 && a->port <= 65535);
    FUZZ_CONF_CHECK(strstr(a->spec, a->host) != NULL);
}

/* A file that loads: what README.md promises about every setting. */
static void
fuzz_conf_check_conf(const struct conf *conf)
{
    size_t i, j;

    FUZZ_CONF_CHECK(conf->file != NULL && strcmp(conf->file, fuzz_conf_path) == 0);

    FUZZ_CONF_CHECK(conf->nmasters >= 1 && conf->nmasters <= CONF_MASTERS_MAX);
    for (i = 0; i < conf->nmasters; i++) {
        fuzz_conf_check_addr(&conf->masters[i], true);
        for (j = 0; j < i; j++) {
            FUZZ_CONF_CHECK(strcmp(conf->masters[i].spec, conf->masters[j].spec) != 0);
        }
    }

    FUZZ_CONF_CHECK(conf->tcp_enabled || conf->unix_enabled);
    if (conf->tcp_enabled) {
        fuzz_conf_check_addr(&conf->tcp, false);
    }
    FUZZ_CONF_CHECK(conf->unix_path != NULL);
    FUZZ_CONF_CHECK(conf->unix_enabled == (conf->unix_path[0] != '\0'));
    FUZZ_CONF_CHECK(strlen(conf->unix_path) < CONF_PATH_MAX);
    FUZZ_CONF_CHECK(conf->unix_mode <= 0777);

    FUZZ_CONF_CHECK(conf->redis_username != NULL && conf->redis_password != NULL);
    FUZZ_CONF_CHECK(conf->redis_username[0] == '\0' || conf->redis_password[0] != '\0');
    FUZZ_CONF_CHECK(conf->connect_timeout_ms >= 1);
    FUZZ_CONF_CHECK(conf->max_pending >= 1);

    FUZZ_CONF_CHECK(conf->min_ttl_ms >= 1);
    FUZZ_CONF_CHECK(conf->min_ttl_ms <= conf->default_ttl_ms);
    FUZZ_CONF_CHECK(conf->default_ttl_ms <= conf->max_ttl_ms);
    FUZZ_CONF_CHECK(conf->node_timeout_ms >= 1);
    FUZZ_CONF_CHECK(conf->node_timeout_ms < conf->min_ttl_ms);
    FUZZ_CONF_CHECK(conf->node_timeout_ms < conf->down_after_ms);
    FUZZ_CONF_CHECK(conf->drift_factor >= 0.0 && conf->drift_factor <= 0.5);
    FUZZ_CONF_CHECK(conf->retry_delay_ms >= 1);
    FUZZ_CONF_CHECK(conf->key_prefix != NULL);
    FUZZ_CONF_CHECK(conf->fence == CONF_FENCE_REQUEST || conf->fence == CONF_FENCE_ALWAYS);

    FUZZ_CONF_CHECK(conf->max_clients >= 1);
    FUZZ_CONF_CHECK(conf->max_line_bytes >= 1);
    FUZZ_CONF_CHECK(conf->max_locks_per_client >= 1);
    FUZZ_CONF_CHECK(conf->idle_timeout_ms >= 1);
    FUZZ_CONF_CHECK(conf->max_output_bytes >= 1);

    FUZZ_CONF_CHECK(conf->auth_password != NULL);
    for (i = 0; conf->auth_password[i] != '\0'; i++) {
        /* One word of "AUTH <password>". */
        FUZZ_CONF_CHECK((unsigned char)conf->auth_password[i] >= 0x21 &&
                        (unsigned char)conf->auth_password[i] <= 0x7e);
    }
    FUZZ_CONF_CHECK(conf->log_level >= CONF_LOG_ERROR && conf->log_level <= CONF_LOG_DEBUG);
    FUZZ_CONF_CHECK(strcmp(conf_log_level_name(conf->log_level), "?") != 0);
}

/* The bytes up to the first NUL as one address, with and without unix:. */
static void
fuzz_conf_addr(const uint8_t *data, size_t size)
{
    static const struct conf_addr zero;
    struct conf_addr addr;
    char spec[FUZZ_CONF_ADDR_MAX + 1], err[128];
    int allow_unix, rc;

    if (size > FUZZ_CONF_ADDR_MAX) {
        size = FUZZ_CONF_ADDR_MAX;
    }
    memcpy(spec, data, size);
    spec[size] = '\0';

    for (allow_unix = 0; allow_unix <= 1; allow_unix++) {
        memset(&addr, 0xa5, sizeof(addr));
        memset(err, 0xa5, sizeof(err));
        rc = conf_parse_addr(spec, allow_unix != 0, &addr, err, sizeof(err));
        if (rc == 0) {
            fuzz_conf_check_addr(&addr, allow_unix != 0);
            FUZZ_CONF_CHECK(strcmp(addr.spec, spec) == 0);
        } else {
            FUZZ_CONF_CHECK(rc == -1);
            FUZZ_CONF_CHECK(memcmp(&addr, &zero, sizeof(addr)) == 0);
            FUZZ_CONF_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
            FUZZ_CONF_CHECK(err[0] != '\0' && fuzz_conf_printable(err));
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct conf conf;
    struct conf_msgs msgs;
    int rc;

    fuzz_conf_open();
    fuzz_conf_write(data, size);

    memset(&msgs, 0, sizeof(msgs));
    memset(&conf, 0xa5, sizeof(conf));
    rc = conf_load(fuzz_conf_path, &conf, &msgs);
    fuzz_conf_check_msgs(rc, &msgs);
    if (rc == 0) {
        fuzz_conf_check_conf(&conf);
    }
    conf_free(&conf);
    conf_msgs_free(&msgs);
    FUZZ_CONF_CHECK(msgs.list == NULL && msgs.n == 0 && msgs.nerrors == 0);

    fuzz_conf_addr(data, size);
    return 0;
}
