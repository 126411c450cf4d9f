/*
 * check_proto.c: unit tests of proto/proto.c, the protocol v1 parser and
 * reply builder.  Every error text is checked word for word, since
 * clients may match on it and PROTOCOL.md quotes it.
 */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "tests/runner.h"

#define BIG_LINE    (64 * 1024)

/*
 * Helpers.
 */

/* Printable copy of an input line for failure messages. */
static const char *
show(const char *line, size_t len)
{
    static char buf[128];

    return proto_escape(buf, sizeof(buf), line, len);
}

/* Parse line/len, fail the test unless it parses; return the command. */
static struct proto_cmd
parse_ok_len(const char *line, size_t len)
{
    struct proto_cmd cmd;
    struct proto_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = proto_parse(line, len, &cmd, &err);
    ck_assert_msg(rc == 0, "'%s' was refused: %s", show(line, len), err.text);
    return cmd;
}

static struct proto_cmd
parse_ok(const char *line)
{
    return parse_ok_len(line, strlen(line));
}

/* Parse line/len and fail the test unless it is refused with code and text. */
static void
parse_err_len(const char *line, size_t len, enum proto_errcode code, const char *text)
{
    struct proto_cmd cmd;
    struct proto_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = proto_parse(line, len, &cmd, &err);
    ck_assert_msg(rc == -1, "'%s' was accepted", show(line, len));
    ck_assert_msg(err.code == code, "'%s': code %s, expected %s (%s)", show(line, len),
                  proto_errcode_name(err.code), proto_errcode_name(code), err.text);
    ck_assert_str_eq(err.text, text);
}

static void
parse_err(const char *line, enum proto_errcode code, const char *text)
{
    parse_err_len(line, strlen(line), code, text);
}

/* Fail unless s/len is exactly the NUL-terminated expected. */
static void
ck_bytes_eq(const char *s, size_t len, const char *expected)
{
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, strlen(expected));
    ck_assert_msg(memcmp(s, expected, len) == 0, "'%.*s' != '%s'", (int)len, s,
                  expected);
}

/* The reply as a NUL-terminated string (buf is not NUL-terminated). */
static const char *
reply_str(const struct proto_reply *r)
{
    static char buf[PROTO_REPLY_MAX + 1];

    ck_assert_uint_le(r->len, PROTO_REPLY_MAX);
    memcpy(buf, r->buf, r->len);
    buf[r->len] = '\0';
    return buf;
}

/* A malloc'd line: prefix, then n copies of c, then suffix; *len is set. */
static char *
make_line(const char *prefix, char c, size_t n, const char *suffix, size_t *len)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    char *line = malloc(lp + n + ls + 1);

    ck_assert_ptr_nonnull(line);
    memcpy(line, prefix, lp);
    memset(line + lp, c, n);
    memcpy(line + lp + n, suffix, ls);
    line[lp + n + ls] = '\0';
    *len = lp + n + ls;
    return line;
}

/*
 * Verbs.
 */

START_TEST(test_verbs_every_case)
{
    static const struct {
        const char      *line;
        enum proto_verb verb;
    } cases[] = {
        { "LOCK a", PROTO_LOCK },          { "lock a", PROTO_LOCK },
        { "LoCk a", PROTO_LOCK },          { "TRYLOCK a", PROTO_TRYLOCK },
        { "trylock a", PROTO_TRYLOCK },    { "TryLock a", PROTO_TRYLOCK },
        { "UNLOCK a", PROTO_UNLOCK },      { "unlock a", PROTO_UNLOCK },
        { "unLOCK a", PROTO_UNLOCK },      { "STATUS a", PROTO_STATUS },
        { "status a", PROTO_STATUS },      { "Status a", PROTO_STATUS },
        { "PING", PROTO_PING },            { "ping", PROTO_PING },
        { "pInG", PROTO_PING },            { "VERSION", PROTO_VERSION_VERB },
        { "version", PROTO_VERSION_VERB }, { "VerSion", PROTO_VERSION_VERB },
        { "HELP", PROTO_HELP },            { "help", PROTO_HELP },
        { "hElP", PROTO_HELP },            { "QUIT", PROTO_QUIT },
        { "quit", PROTO_QUIT },            { "Quit", PROTO_QUIT },
        { "STATS", PROTO_STATS },          { "stats", PROTO_STATS },
        { "sTaTs", PROTO_STATS },
    };
    struct proto_cmd cmd;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cmd = parse_ok(cases[i].line);
        ck_assert_msg(cmd.verb == cases[i].verb, "'%s' parsed as %s", cases[i].line,
                      proto_verb_name(cmd.verb));
    }
}
END_TEST

START_TEST(test_lock_defaults)
{
    const char *line = "LOCK demo";
    struct proto_cmd cmd = parse_ok(line);

    ck_assert_int_eq(cmd.verb, PROTO_LOCK);
    ck_assert_ptr_eq(cmd.name, line + 5);
    ck_assert_uint_eq(cmd.name_len, 4);
    ck_assert(!cmd.has_ttl);
    ck_assert(!cmd.has_wait);
    ck_assert_ptr_null(cmd.word);
}
END_TEST

START_TEST(test_lock_options)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK demo ttl=3000");
    ck_bytes_eq(cmd.name, cmd.name_len, "demo");
    ck_assert(cmd.has_ttl);
    ck_assert_int_eq(cmd.ttl_ms, 3000);
    ck_assert(!cmd.has_wait);

    cmd = parse_ok("LOCK demo wait=250");
    ck_assert(!cmd.has_ttl);
    ck_assert(cmd.has_wait);
    ck_assert_int_eq(cmd.wait_ms, 250);

    cmd = parse_ok("LOCK demo ttl=10 wait=20");
    ck_assert(cmd.has_ttl && cmd.has_wait);
    ck_assert_int_eq(cmd.ttl_ms, 10);
    ck_assert_int_eq(cmd.wait_ms, 20);

    cmd = parse_ok("LOCK demo wait=20 ttl=10");
    ck_assert(cmd.has_ttl && cmd.has_wait);
    ck_assert_int_eq(cmd.ttl_ms, 10);
    ck_assert_int_eq(cmd.wait_ms, 20);

    /* Keys are case-insensitive. */
    cmd = parse_ok("lock demo TTL=7 Wait=8");
    ck_assert_int_eq(cmd.ttl_ms, 7);
    ck_assert_int_eq(cmd.wait_ms, 8);

    cmd = parse_ok("LOCK demo wait=0");
    ck_assert(cmd.has_wait);
    ck_assert_int_eq(cmd.wait_ms, 0);
}
END_TEST

START_TEST(test_lock_wait_inf)
{
    static const char *const lines[] = {
        "LOCK a wait=inf", "LOCK a wait=INF", "LOCK a wait=Inf", "LOCK a WAIT=iNf",
    };
    struct proto_cmd cmd;
    size_t i;

    for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        cmd = parse_ok(lines[i]);
        ck_assert(cmd.has_wait);
        ck_assert_int_eq(cmd.wait_ms, PROTO_WAIT_INF);
    }
    parse_err("LOCK a wait=infinity", PROTO_ERR_PROTO,
              "LOCK: bad value for 'wait': 'infinity' (expected milliseconds or inf)");
    parse_err("LOCK a wait=in", PROTO_ERR_PROTO,
              "LOCK: bad value for 'wait': 'in' (expected milliseconds or inf)");
    parse_err("LOCK a ttl=inf", PROTO_ERR_PROTO,
              "LOCK: bad value for 'ttl': 'inf' (expected milliseconds)");
}
END_TEST

/* Several names: the bare words before the first option, in the order given. */
START_TEST(test_lock_sets)
{
    struct proto_cmd cmd;
    char line[64 * 8 + 64];
    size_t len, i;

    cmd = parse_ok("LOCK b a c ttl=3000 fence");
    ck_assert_uint_eq(cmd.nnames, 3);
    ck_bytes_eq(cmd.name, cmd.name_len, "b");
    ck_bytes_eq(cmd.names[0].s, cmd.names[0].len, "b");
    ck_bytes_eq(cmd.names[1].s, cmd.names[1].len, "a");
    ck_bytes_eq(cmd.names[2].s, cmd.names[2].len, "c");
    ck_assert(cmd.has_ttl && cmd.fence);
    cmd = parse_ok("LOCK one");
    ck_assert_uint_eq(cmd.nnames, 1);
    cmd = parse_ok("STATUS one");
    ck_assert_uint_eq(cmd.nnames, 1);
    /* A flag word ends the names; a name with '=' can only come first. */
    cmd = parse_ok("TRYLOCK x y fence");
    ck_assert_uint_eq(cmd.nnames, 2);
    ck_assert(cmd.fence);
    cmd = parse_ok("LOCK fence y");
    ck_assert_uint_eq(cmd.nnames, 2);
    ck_bytes_eq(cmd.name, cmd.name_len, "fence");
    ck_assert(!cmd.fence);
    cmd = parse_ok("UNLOCK a b token=0123456789abcdef0123456789abcdef");
    ck_assert_uint_eq(cmd.nnames, 2);
    ck_assert(cmd.has_token);
    cmd = parse_ok("EXTEND a b token=0123456789abcdef0123456789abcdef ttl=500");
    ck_assert_uint_eq(cmd.nnames, 2);
    parse_err("LOCK a b fence c", PROTO_ERR_PROTO,
              "LOCK: unexpected argument 'c' after 'fence' (options are key=value)");
    parse_err("LOCK a b\x01", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x01 at offset 1");
    parse_err("LOCK a b shared", PROTO_ERR_PROTO,
              "LOCK: 'shared' takes one name (a set of names is held exclusively)");
    parse_err("TRYLOCK a b limit=3", PROTO_ERR_PROTO,
              "TRYLOCK: 'limit' takes one name (a set of names is held exclusively)");
    /* At most PROTO_SET_MAX names. */
    len = (size_t)snprintf(line, sizeof(line), "LOCK");
    for (i = 0; i < PROTO_SET_MAX; i++) {
        len += (size_t)snprintf(line + len, sizeof(line) - len, " n%zu", i);
    }
    cmd = parse_ok(line);
    ck_assert_uint_eq(cmd.nnames, PROTO_SET_MAX);
    ck_bytes_eq(cmd.names[PROTO_SET_MAX - 1].s, cmd.names[PROTO_SET_MAX - 1].len, "n63");
    snprintf(line + len, sizeof(line) - len, " n64 ttl=5");
    parse_err(line, PROTO_ERR_PROTO, "LOCK: more than 64 lock names (a set has at most 64)");
}
END_TEST

START_TEST(test_trylock)
{
    struct proto_cmd cmd;

    cmd = parse_ok("TRYLOCK job:42");
    ck_assert_int_eq(cmd.verb, PROTO_TRYLOCK);
    ck_bytes_eq(cmd.name, cmd.name_len, "job:42");
    ck_assert(!cmd.has_ttl);
    ck_assert(!cmd.has_wait);

    cmd = parse_ok("TRYLOCK job:42 ttl=500");
    ck_assert(cmd.has_ttl);
    ck_assert_int_eq(cmd.ttl_ms, 500);
    ck_assert(!cmd.has_wait);

    parse_err("TRYLOCK a wait=5", PROTO_ERR_PROTO, "TRYLOCK: unknown option 'wait'");
    parse_err("TRYLOCK a WAIT=5", PROTO_ERR_PROTO, "TRYLOCK: unknown option 'wait'");
    parse_err("TRYLOCK a ttl=1 wait=inf", PROTO_ERR_PROTO,
              "TRYLOCK: unknown option 'wait'");
    parse_err("TRYLOCK a ttl=0", PROTO_ERR_PROTO, "TRYLOCK: ttl must be at least 1 ms");
    parse_err("TRYLOCK a ttl=1 ttl=1", PROTO_ERR_PROTO,
              "TRYLOCK: option 'ttl' given twice");
    parse_err("TRYLOCK", PROTO_ERR_PROTO, "TRYLOCK: missing lock name");
}
END_TEST

START_TEST(test_unlock_status)
{
    struct proto_cmd cmd;

    cmd = parse_ok("UNLOCK a.b");
    ck_assert_int_eq(cmd.verb, PROTO_UNLOCK);
    ck_bytes_eq(cmd.name, cmd.name_len, "a.b");
    ck_assert(!cmd.has_ttl && !cmd.has_wait);

    cmd = parse_ok("STATUS a.b");
    ck_assert_int_eq(cmd.verb, PROTO_STATUS);
    ck_bytes_eq(cmd.name, cmd.name_len, "a.b");

    parse_err("UNLOCK", PROTO_ERR_PROTO, "UNLOCK: missing lock name");
    parse_err("STATUS", PROTO_ERR_PROTO, "STATUS: missing lock name");
    parse_err("UNLOCK a a", PROTO_ERR_PROTO, "UNLOCK: lock name 'a' given twice");
    parse_err("STATUS a b", PROTO_ERR_PROTO, "STATUS: unexpected argument 'b' (a lock name has no spaces; options are key=value)");
    /* UNLOCK and STATUS take no options at all. */
    parse_err("UNLOCK a ttl=5", PROTO_ERR_PROTO, "UNLOCK: unknown option 'ttl'");
    parse_err("STATUS a wait=5", PROTO_ERR_PROTO, "STATUS: unknown option 'wait'");
}
END_TEST

START_TEST(test_ping)
{
    struct proto_cmd cmd;
    char *line;
    size_t len;

    cmd = parse_ok("PING");
    ck_assert_int_eq(cmd.verb, PROTO_PING);
    ck_assert_ptr_null(cmd.word);
    ck_assert_uint_eq(cmd.word_len, 0);
    ck_assert_ptr_null(cmd.name);

    cmd = parse_ok("PING hello=world!");
    ck_bytes_eq(cmd.word, cmd.word_len, "hello=world!");
    ck_assert_ptr_null(cmd.name);

    parse_err("PING a b", PROTO_ERR_PROTO, "PING: too many arguments");
    parse_err_len("PING a\x01", 7, PROTO_ERR_PROTO, "PING: word has byte 0x01 at offset 1");
    parse_err_len("PING \x80", 6, PROTO_ERR_PROTO, "PING: word has byte 0x80 at offset 0");

    line = make_line("PING ", 'w', PROTO_WORD_MAX, "", &len);
    cmd = parse_ok_len(line, len);
    ck_assert_ptr_eq(cmd.word, line + 5);
    ck_assert_uint_eq(cmd.word_len, PROTO_WORD_MAX);
    free(line);

    line = make_line("PING ", 'w', PROTO_WORD_MAX + 1, "", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO, "PING: word is 251 bytes, longest is 250");
    free(line);
}
END_TEST

/* AUTH takes one required word, which no error text ever repeats. */
START_TEST(test_auth)
{
    struct proto_cmd cmd;
    struct proto_error err;

    cmd = parse_ok("AUTH s3cret!");
    ck_assert_int_eq(cmd.verb, PROTO_AUTH);
    ck_bytes_eq(cmd.word, cmd.word_len, "s3cret!");
    ck_assert_ptr_null(cmd.name);
    cmd = parse_ok("auth   pass=word  ");
    ck_bytes_eq(cmd.word, cmd.word_len, "pass=word");
    parse_err("AUTH", PROTO_ERR_PROTO, "AUTH: missing password");
    parse_err("AUTH hunter2 more", PROTO_ERR_PROTO, "AUTH: too many arguments");
    ck_assert_int_eq(proto_parse("AUTH hunter2 hunter2", 20, &cmd, &err), -1);
    ck_assert_ptr_null(strstr(err.text, "hunter2"));
}
END_TEST

START_TEST(test_no_argument_verbs)
{
    static const struct {
        const char      *line;
        enum proto_verb verb;
        const char      *error;
    } cases[] = {
        { "VERSION", PROTO_VERSION_VERB, "VERSION: too many arguments" },
        { "HELP", PROTO_HELP, "HELP: too many arguments" },
        { "QUIT", PROTO_QUIT, "QUIT: too many arguments" },
        { "STATS", PROTO_STATS, "STATS: too many arguments" },
    };
    char line[64];
    struct proto_cmd cmd;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cmd = parse_ok(cases[i].line);
        ck_assert_int_eq(cmd.verb, cases[i].verb);
        ck_assert_ptr_null(cmd.name);
        ck_assert_ptr_null(cmd.word);
        ck_assert(!cmd.has_ttl && !cmd.has_wait);

        snprintf(line, sizeof(line), "%s x", cases[i].line);
        parse_err(line, PROTO_ERR_PROTO, cases[i].error);
        snprintf(line, sizeof(line), "%s ttl=1", cases[i].line);
        parse_err(line, PROTO_ERR_PROTO, cases[i].error);
    }
}
END_TEST

/* mode=, token= and the bare flag fence, and the verbs that take them. */
START_TEST(test_kind_options)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK a limit=3");
    ck_assert(cmd.has_limit && cmd.limit == 3 && !cmd.shared);
    cmd = parse_ok("TRYLOCK a LIMIT=0001 mode=lease ttl=5");
    ck_assert(cmd.has_limit && cmd.limit == 1 && cmd.has_mode);
    cmd = parse_ok("LOCK a Shared wait=5");
    ck_assert(cmd.shared && !cmd.has_limit && cmd.wait_ms == 5);
    cmd = parse_ok("LOCK a");
    ck_assert(!cmd.shared && !cmd.has_limit);
    parse_err("LOCK a limit=0", PROTO_ERR_PROTO, "LOCK: limit must be at least 1");
    parse_err("LOCK a limit=x", PROTO_ERR_PROTO,
              "LOCK: bad value for 'limit': 'x' (expected a number of holders)");
    parse_err("LOCK a limit=-2", PROTO_ERR_PROTO,
              "LOCK: bad value for 'limit': '-2' (expected a number of holders)");
    parse_err("LOCK a shared=1", PROTO_ERR_PROTO, "LOCK: option 'shared' takes no value");
    parse_err("LOCK a shared limit=2", PROTO_ERR_PROTO,
              "LOCK: 'shared' and 'limit' cannot go together (a name is one kind: shared, "
              "or counted with limit=N)");
    parse_err("TRYLOCK a limit=2 shared", PROTO_ERR_PROTO,
              "TRYLOCK: 'shared' and 'limit' cannot go together (a name is one kind: shared, "
              "or counted with limit=N)");
    parse_err("UNLOCK a shared", PROTO_ERR_PROTO, "UNLOCK: unknown option 'shared'");
    parse_err("STATUS a limit=3", PROTO_ERR_PROTO, "STATUS: unknown option 'limit'");
}
END_TEST

/* delay=MS on LOCK and TRYLOCK: 0 allowed, exclusive only, no other verb. */
START_TEST(test_delay_option)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK a delay=1500");
    ck_assert(cmd.has_delay && cmd.delay_ms == 1500);
    cmd = parse_ok("TRYLOCK a DELAY=0");
    ck_assert(cmd.has_delay && cmd.delay_ms == 0);
    cmd = parse_ok("LOCK a");
    ck_assert(!cmd.has_delay && cmd.delay_ms == 0);
    parse_err("LOCK a delay=x", PROTO_ERR_PROTO,
              "LOCK: bad value for 'delay': 'x' (expected milliseconds)");
    parse_err("LOCK a delay=", PROTO_ERR_PROTO, "LOCK: option 'delay' has no value");
    parse_err("LOCK a delay=1 delay=2", PROTO_ERR_PROTO, "LOCK: option 'delay' given twice");
    parse_err("LOCK a shared delay=5", PROTO_ERR_PROTO,
              "LOCK: 'shared' and 'delay' cannot go together (a lock-delay is for an "
              "exclusive lock)");
    parse_err("TRYLOCK a delay=5 limit=2", PROTO_ERR_PROTO,
              "TRYLOCK: 'limit' and 'delay' cannot go together (a lock-delay is for an "
              "exclusive lock)");
    parse_err("UNLOCK a delay=5", PROTO_ERR_PROTO, "UNLOCK: unknown option 'delay'");
}
END_TEST

START_TEST(test_lease_and_fence_options)
{
    static const char tok[] = "0123456789abcdef0123456789abcdef";
    char line[128];
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK a mode=lease ttl=5000 fence");
    ck_assert(cmd.has_mode && cmd.mode == PROTO_MODE_LEASE);
    ck_assert(cmd.fence && cmd.has_ttl && !cmd.has_token);
    cmd = parse_ok("trylock a MODE=Session");
    ck_assert(cmd.has_mode && cmd.mode == PROTO_MODE_SESSION && !cmd.fence);
    cmd = parse_ok("LOCK a FENCE");
    ck_assert(cmd.fence && !cmd.has_mode);

    snprintf(line, sizeof(line), "EXTEND a token=%s ttl=100", tok);
    cmd = parse_ok(line);
    ck_assert_int_eq(cmd.verb, PROTO_EXTEND);
    ck_assert(cmd.has_token && cmd.has_ttl && cmd.ttl_ms == 100);
    ck_bytes_eq(cmd.token, PROTO_TOKEN_LEN, tok);
    ck_assert_ptr_eq(cmd.token, line + 15);
    snprintf(line, sizeof(line), "UNLOCK a token=%s", tok);
    cmd = parse_ok(line);
    ck_assert(cmd.has_token);
    snprintf(line, sizeof(line), "STATUS a token=%s", tok);
    cmd = parse_ok(line);
    ck_assert(cmd.has_token);
    /* EXTEND needs both: a session-mode lock has no token to give. */
    parse_err("EXTEND a ttl=5", PROTO_ERR_PROTO,
              "EXTEND: missing token= (EXTEND renews a lease-mode lock by its token; "
              "session-mode locks are renewed by the daemon)");
    snprintf(line, sizeof(line), "EXTEND a token=%s", tok);
    parse_err(line, PROTO_ERR_PROTO, "EXTEND: missing ttl=");
    parse_err("EXTEND a", PROTO_ERR_PROTO, "EXTEND: missing ttl=");

    parse_err("LOCK a mode=forever", PROTO_ERR_PROTO,
              "LOCK: bad value for 'mode': 'forever' (expected session or lease)");
    parse_err("LOCK a fence=1", PROTO_ERR_PROTO, "LOCK: option 'fence' takes no value");
    parse_err("LOCK a fence fence", PROTO_ERR_PROTO, "LOCK: option 'fence' given twice");
    parse_err("UNLOCK a fence", PROTO_ERR_PROTO, "UNLOCK: unknown option 'fence'");
    parse_err("UNLOCK a ttl=5", PROTO_ERR_PROTO, "UNLOCK: unknown option 'ttl'");
    parse_err("EXTEND a wait=5", PROTO_ERR_PROTO, "EXTEND: unknown option 'wait'");
    parse_err("LOCK a token=0123456789abcdef0123456789abcdef", PROTO_ERR_PROTO,
              "LOCK: unknown option 'token'");
    parse_err("UNLOCK a token=abc", PROTO_ERR_PROTO,
              "UNLOCK: bad value for 'token': 'abc' (expected 32 lowercase hex digits)");
    parse_err("UNLOCK a token=0123456789ABCDEF0123456789abcdef", PROTO_ERR_PROTO,
              "UNLOCK: bad value for 'token': '0123456789ABCDEF0123456789abcdef' "
              "(expected 32 lowercase hex digits)");
    parse_err("UNLOCK a token=0123456789abcdef0123456789abcdef0", PROTO_ERR_PROTO,
              "UNLOCK: bad value for 'token': '0123456789abcdef0123456789abcdef0' "
              "(expected 32 lowercase hex digits)");
}
END_TEST

START_TEST(test_unknown_verb)
{
    char *line;
    size_t len;

    parse_err("FOO", PROTO_ERR_UNKNOWN, "unknown verb 'FOO' (HELP lists the verbs)");
    parse_err("foo bar baz", PROTO_ERR_UNKNOWN, "unknown verb 'foo' (HELP lists the verbs)");
    parse_err("LOCKS a", PROTO_ERR_UNKNOWN, "unknown verb 'LOCKS' (LOCK? HELP lists the verbs)");
    parse_err("LOC a", PROTO_ERR_UNKNOWN, "unknown verb 'LOC' (LOCK? HELP lists the verbs)");
    parse_err("LOKC a", PROTO_ERR_UNKNOWN, "unknown verb 'LOKC' (LOCK? HELP lists the verbs)");
    parse_err("unlcok a", PROTO_ERR_UNKNOWN, "unknown verb 'unlcok' (UNLOCK? HELP lists the verbs)");
    parse_err("VERSION_VERB", PROTO_ERR_UNKNOWN, "unknown verb 'VERSION_VERB' (HELP lists the verbs)");
    /* Tabs do not separate words. */
    parse_err("LOCK\ta", PROTO_ERR_UNKNOWN, "unknown verb 'LOCK\\x09a' (LOCK? HELP lists the verbs)");
    /* Untrusted bytes are escaped, backslash included. */
    parse_err("a\\b", PROTO_ERR_UNKNOWN, "unknown verb 'a\\x5cb' (HELP lists the verbs)");
    parse_err_len("\xff\x80\x7f", 3, PROTO_ERR_UNKNOWN, "unknown verb '\\xff\\x80\\x7f' (HELP lists the verbs)");
    parse_err_len("LO\0CK a", 7, PROTO_ERR_UNKNOWN, "unknown verb 'LO\\x00CK' (LOCK? HELP lists the verbs)");
    /* Long words are cut. */
    line = make_line("", 'X', 1000, " a", &len);
    parse_err_len(line, len, PROTO_ERR_UNKNOWN,
                  "unknown verb 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX...' (HELP lists the verbs)");
    free(line);
}
END_TEST

/*
 * Framing: empty lines, CR, spaces.
 */

START_TEST(test_empty_lines)
{
    parse_err("", PROTO_ERR_PROTO, "empty line");
    parse_err(" ", PROTO_ERR_PROTO, "empty line");
    parse_err("     ", PROTO_ERR_PROTO, "empty line");
    parse_err("\r", PROTO_ERR_PROTO, "empty line");
    parse_err("   \r", PROTO_ERR_PROTO, "empty line");
    parse_err_len(NULL, 0, PROTO_ERR_PROTO, "empty line");
    /* Only one CR is stripped. */
    parse_err("\r\r", PROTO_ERR_UNKNOWN, "unknown verb '\\x0d' (HELP lists the verbs)");
}
END_TEST

START_TEST(test_crlf)
{
    struct proto_cmd cmd;

    cmd = parse_ok("PING x\r");
    ck_bytes_eq(cmd.word, cmd.word_len, "x");
    cmd = parse_ok("LOCK a ttl=5\r");
    ck_bytes_eq(cmd.name, cmd.name_len, "a");
    ck_assert_int_eq(cmd.ttl_ms, 5);
    cmd = parse_ok("QUIT\r");
    ck_assert_int_eq(cmd.verb, PROTO_QUIT);
    cmd = parse_ok("UNLOCK a \r");
    ck_bytes_eq(cmd.name, cmd.name_len, "a");

    parse_err("PING x\r\r", PROTO_ERR_PROTO, "PING: word has byte 0x0d at offset 1");
    parse_err("LOCK a\rb", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x0d at offset 1");
    parse_err("\rPING", PROTO_ERR_UNKNOWN, "unknown verb '\\x0dPING' (PING? HELP lists the verbs)");
    parse_err("LOCK a ttl=5\r\r", PROTO_ERR_PROTO,
              "LOCK: bad value for 'ttl': '5\\x0d' (expected milliseconds)");
}
END_TEST

START_TEST(test_spaces)
{
    const char *line = "   LOCK    demo     ttl=5      wait=inf    ";
    struct proto_cmd cmd = parse_ok(line);

    ck_assert_int_eq(cmd.verb, PROTO_LOCK);
    ck_assert_ptr_eq(cmd.name, line + 11);
    ck_bytes_eq(cmd.name, cmd.name_len, "demo");
    ck_assert_int_eq(cmd.ttl_ms, 5);
    ck_assert_int_eq(cmd.wait_ms, PROTO_WAIT_INF);

    cmd = parse_ok("  PING   pong  ");
    ck_bytes_eq(cmd.word, cmd.word_len, "pong");
    cmd = parse_ok(" HELP ");
    ck_assert_int_eq(cmd.verb, PROTO_HELP);
}
END_TEST

START_TEST(test_not_nul_terminated)
{
    /* No NUL after the bytes: the parser must stop at len. */
    static const char line[] = { 'P', 'I', 'N', 'G', ' ', 'a', 'b' };
    static const char lock[] = { 'L', 'O', 'C', 'K', ' ', 'n', ' ', 't', 't', 'l', '=', '9' };
    struct proto_cmd cmd;

    cmd = parse_ok_len(line, sizeof(line));
    ck_bytes_eq(cmd.word, cmd.word_len, "ab");
    cmd = parse_ok_len(line, 6);
    ck_bytes_eq(cmd.word, cmd.word_len, "a");
    cmd = parse_ok_len(lock, sizeof(lock));
    ck_assert_int_eq(cmd.ttl_ms, 9);
    parse_err_len(lock, sizeof(lock) - 1, PROTO_ERR_PROTO, "LOCK: option 'ttl' has no value");
}
END_TEST

/*
 * Lock names.
 */

START_TEST(test_name_length)
{
    static const char *const verbs[] = { "LOCK ", "TRYLOCK ", "UNLOCK ", "STATUS " };
    struct proto_cmd cmd;
    char *line, expected[PROTO_ERRTEXT_MAX];
    size_t i, len, vlen;

    for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        vlen = strlen(verbs[i]);

        line = make_line(verbs[i], 'n', 1, "", &len);
        cmd = parse_ok_len(line, len);
        ck_assert_uint_eq(cmd.name_len, 1);
        free(line);

        line = make_line(verbs[i], 'n', PROTO_NAME_MAX, "", &len);
        cmd = parse_ok_len(line, len);
        ck_assert_ptr_eq(cmd.name, line + vlen);
        ck_assert_uint_eq(cmd.name_len, PROTO_NAME_MAX);
        free(line);

        line = make_line(verbs[i], 'n', PROTO_NAME_MAX + 1, "", &len);
        snprintf(expected, sizeof(expected), "%.*s: lock name is 251 bytes, longest is 250",
                 (int)vlen - 1, verbs[i]);
        parse_err_len(line, len, PROTO_ERR_PROTO, expected);
        free(line);
    }
}
END_TEST

START_TEST(test_name_bytes)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK !~");
    ck_bytes_eq(cmd.name, cmd.name_len, "!~");
    cmd = parse_ok("LOCK ~");
    ck_bytes_eq(cmd.name, cmd.name_len, "~");
    cmd = parse_ok("LOCK !");
    ck_bytes_eq(cmd.name, cmd.name_len, "!");
    cmd = parse_ok("LOCK a\\b\"c'd");
    ck_bytes_eq(cmd.name, cmd.name_len, "a\\b\"c'd");

    parse_err("LOCK abc\x07", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x07 at offset 3");
    parse_err("LOCK \x7f", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x7f at offset 0");
    parse_err("LOCK ab\x80", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x80 at offset 2");
    parse_err("LOCK a\xff", PROTO_ERR_PROTO, "LOCK: lock name has byte 0xff at offset 1");
    parse_err("LOCK a\tb", PROTO_ERR_PROTO, "LOCK: lock name has byte 0x09 at offset 1");
    parse_err_len("LOCK a\0b", 8, PROTO_ERR_PROTO,
                  "LOCK: lock name has byte 0x00 at offset 1");
    parse_err_len("TRYLOCK \0", 9, PROTO_ERR_PROTO,
                  "TRYLOCK: lock name has byte 0x00 at offset 0");
    parse_err("UNLOCK x\x1f", PROTO_ERR_PROTO, "UNLOCK: lock name has byte 0x1f at offset 1");
    parse_err("STATUS \x01", PROTO_ERR_PROTO, "STATUS: lock name has byte 0x01 at offset 0");
    /* A space ends the name: what follows is another word (for LOCK, another name). */
    parse_err("LOCK a b a", PROTO_ERR_PROTO, "LOCK: lock name 'a' given twice");
    parse_err("STATUS a b", PROTO_ERR_PROTO, "STATUS: unexpected argument 'b' (a lock name has no spaces; options are key=value)");
}
END_TEST

START_TEST(test_name_with_equals)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LOCK a=b ttl=5");
    ck_bytes_eq(cmd.name, cmd.name_len, "a=b");
    ck_assert_int_eq(cmd.ttl_ms, 5);
    /* The first argument is always the name, even when it looks like an option. */
    cmd = parse_ok("LOCK ttl=5");
    ck_bytes_eq(cmd.name, cmd.name_len, "ttl=5");
    ck_assert(!cmd.has_ttl);
    cmd = parse_ok("UNLOCK =");
    ck_bytes_eq(cmd.name, cmd.name_len, "=");
}
END_TEST

/*
 * Options and numbers.
 */

START_TEST(test_option_errors)
{
    parse_err("LOCK a ttl=1 ttl=2", PROTO_ERR_PROTO, "LOCK: option 'ttl' given twice");
    parse_err("LOCK a TTL=1 ttl=1", PROTO_ERR_PROTO, "LOCK: option 'ttl' given twice");
    parse_err("LOCK a wait=1 WAIT=inf", PROTO_ERR_PROTO, "LOCK: option 'wait' given twice");
    parse_err("LOCK a wait=1 ttl=3 wait=1", PROTO_ERR_PROTO,
              "LOCK: option 'wait' given twice");
    parse_err("LOCK a foo=1", PROTO_ERR_PROTO, "LOCK: unknown option 'foo'");
    parse_err("LOCK a FOO=1", PROTO_ERR_PROTO, "LOCK: unknown option 'FOO'");
    parse_err("LOCK a ttls=1", PROTO_ERR_PROTO, "LOCK: unknown option 'ttls'");
    parse_err("LOCK a tt=1", PROTO_ERR_PROTO, "LOCK: unknown option 'tt'");
    parse_err("LOCK a foo=", PROTO_ERR_PROTO, "LOCK: unknown option 'foo'");
    parse_err("LOCK a f\x01o=1", PROTO_ERR_PROTO, "LOCK: unknown option 'f\\x01o'");
    parse_err("STATUS a xyz", PROTO_ERR_PROTO,
              "STATUS: unexpected argument 'xyz' (a lock name has no spaces; options are key=value)");
    parse_err("WATCH a ttl", PROTO_ERR_PROTO,
              "WATCH: too many arguments");
    /* A bare word after an option: the option's value had a space, not the name. */
    parse_err("TRYLOCK x label=has space", PROTO_ERR_PROTO,
              "TRYLOCK: unexpected argument 'space' after 'label=has' (a label has no spaces; "
              "options are key=value)");
    parse_err("LOCK x LABEL=a b", PROTO_ERR_PROTO,
              "LOCK: unexpected argument 'b' after 'LABEL=a' (a label has no spaces; "
              "options are key=value)");
    parse_err("LOCK x ttl=5 000", PROTO_ERR_PROTO,
              "LOCK: unexpected argument '000' after 'ttl=5' (an option's value has no spaces; "
              "options are key=value)");
    parse_err("LOCK x fence xyz", PROTO_ERR_PROTO,
              "LOCK: unexpected argument 'xyz' after 'fence' (options are key=value)");
    parse_err("LOCK a =5", PROTO_ERR_PROTO, "LOCK: option '=5' has no key");
    parse_err("LOCK a ttl=", PROTO_ERR_PROTO, "LOCK: option 'ttl' has no value");
    parse_err("LOCK a WAIT=", PROTO_ERR_PROTO, "LOCK: option 'wait' has no value");
    parse_err("TRYLOCK a ttl=", PROTO_ERR_PROTO, "TRYLOCK: option 'ttl' has no value");
    /* The first bad word is reported. */
    parse_err("LOCK a ttl=x foo=1", PROTO_ERR_PROTO,
              "LOCK: bad value for 'ttl': 'x' (expected milliseconds)");
    parse_err("LOCK a foo=1 ttl=x", PROTO_ERR_PROTO, "LOCK: unknown option 'foo'");
}
END_TEST

START_TEST(test_option_values)
{
    static const char *const bad[] = {
        "abc", "-5", "+5", "5s", "1.5", "0x10", "1e3", " 5", "5=6", "\xff",
    };
    static const char *const bad_text[] = {
        "abc", "-5", "+5", "5s", "1.5", "0x10", "1e3", NULL, "5=6", "\\xff",
    };
    char line[64], text[PROTO_ERRTEXT_MAX];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (bad_text[i] == NULL) {
            continue;       /* "ttl= 5" is an empty value, tested elsewhere */
        }
        snprintf(line, sizeof(line), "LOCK a ttl=%s", bad[i]);
        snprintf(text, sizeof(text), "LOCK: bad value for 'ttl': '%s' (expected milliseconds)",
                 bad_text[i]);
        parse_err(line, PROTO_ERR_PROTO, text);

        snprintf(line, sizeof(line), "LOCK a wait=%s", bad[i]);
        snprintf(text, sizeof(text),
                 "LOCK: bad value for 'wait': '%s' (expected milliseconds or inf)",
                 bad_text[i]);
        parse_err(line, PROTO_ERR_PROTO, text);
    }
    parse_err("LOCK a ttl= 5", PROTO_ERR_PROTO, "LOCK: option 'ttl' has no value");
}
END_TEST

START_TEST(test_ttl_minimum)
{
    struct proto_cmd cmd;

    parse_err("LOCK a ttl=0", PROTO_ERR_PROTO, "LOCK: ttl must be at least 1 ms");
    parse_err("LOCK a ttl=000", PROTO_ERR_PROTO, "LOCK: ttl must be at least 1 ms");
    cmd = parse_ok("LOCK a ttl=1");
    ck_assert_int_eq(cmd.ttl_ms, 1);
    cmd = parse_ok("LOCK a ttl=0001");
    ck_assert_int_eq(cmd.ttl_ms, 1);
    cmd = parse_ok("LOCK a wait=000");
    ck_assert_int_eq(cmd.wait_ms, 0);
    cmd = parse_ok("LOCK a wait=0010");
    ck_assert_int_eq(cmd.wait_ms, 10);
}
END_TEST

START_TEST(test_number_limits)
{
    char line[256], text[PROTO_ERRTEXT_MAX];
    struct proto_cmd cmd;

    snprintf(line, sizeof(line), "LOCK a ttl=%" PRId64 " wait=%" PRId64,
             PROTO_NUMBER_MAX, PROTO_NUMBER_MAX);
    cmd = parse_ok(line);
    ck_assert_int_eq(cmd.ttl_ms, PROTO_NUMBER_MAX);
    ck_assert_int_eq(cmd.wait_ms, PROTO_NUMBER_MAX);

    snprintf(line, sizeof(line), "LOCK a ttl=%" PRId64, PROTO_NUMBER_MAX + 1);
    snprintf(text, sizeof(text),
             "LOCK: bad value for 'ttl': '%" PRId64 "' (expected milliseconds)",
             PROTO_NUMBER_MAX + 1);
    parse_err(line, PROTO_ERR_PROTO, text);

    snprintf(line, sizeof(line), "TRYLOCK a ttl=%" PRId64, PROTO_NUMBER_MAX + 1);
    snprintf(text, sizeof(text),
             "TRYLOCK: bad value for 'ttl': '%" PRId64 "' (expected milliseconds)",
             PROTO_NUMBER_MAX + 1);
    parse_err(line, PROTO_ERR_PROTO, text);

    snprintf(line, sizeof(line), "LOCK a wait=%" PRId64, PROTO_NUMBER_MAX + 1);
    snprintf(text, sizeof(text),
             "LOCK: bad value for 'wait': '%" PRId64 "' (expected milliseconds or inf)",
             PROTO_NUMBER_MAX + 1);
    parse_err(line, PROTO_ERR_PROTO, text);

    /* Values that would overflow int64_t are refused, not wrapped. */
    parse_err("LOCK a ttl=9223372036854775808", PROTO_ERR_PROTO,
              "LOCK: bad value for 'ttl': '9223372036854775808' (expected milliseconds)");
    parse_err("LOCK a ttl=18446744073709551617", PROTO_ERR_PROTO,
              "LOCK: bad value for 'ttl': '18446744073709551617' (expected milliseconds)");
    parse_err("LOCK a wait=99999999999999999999999999999999", PROTO_ERR_PROTO,
              "LOCK: bad value for 'wait': '99999999999999999999999999999999' "
              "(expected milliseconds or inf)");

    /* Leading zeros do not count against the limit. */
    snprintf(line, sizeof(line), "LOCK a ttl=000000000000000000000000000000%" PRId64,
             PROTO_NUMBER_MAX);
    cmd = parse_ok(line);
    ck_assert_int_eq(cmd.ttl_ms, PROTO_NUMBER_MAX);
}
END_TEST

START_TEST(test_long_words_in_errors)
{
    char *line;
    size_t len;

    line = make_line("LOCK a ttl=", '7', 1000, "x", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO,
                  "LOCK: bad value for 'ttl': '7777777777777777777777777777777777777...' "
                  "(expected milliseconds)");
    free(line);

    line = make_line("LOCK a ", 'k', 5000, "=1", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO,
                  "LOCK: unknown option 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...'");
    free(line);

    line = make_line("STATUS a ", 'z', 5000, "", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO,
                  "STATUS: unexpected argument 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...' "
                  "(a lock name has no spaces; options are key=value)");
    free(line);

    /* Escapes are never cut in half: 9 whole \xHH, then "...". */
    line = make_line("LOCK a wait=", '\x01', 100, "", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO,
                  "LOCK: bad value for 'wait': "
                  "'\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01...' "
                  "(expected milliseconds or inf)");
    free(line);
}
END_TEST

/*
 * Hostile input.
 */

START_TEST(test_big_lines)
{
    char *line, text[PROTO_ERRTEXT_MAX];
    size_t len;

    line = make_line("", ' ', BIG_LINE, "", &len);
    parse_err_len(line, len, PROTO_ERR_PROTO, "empty line");
    free(line);

    line = make_line("", 'A', BIG_LINE, "", &len);
    parse_err_len(line, len, PROTO_ERR_UNKNOWN,
                  "unknown verb 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...' (HELP lists the verbs)");
    free(line);

    line = make_line("", '\0', BIG_LINE, "", &len);
    parse_err_len(line, len, PROTO_ERR_UNKNOWN,
                  "unknown verb '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00...' (HELP lists the verbs)");
    free(line);

    line = make_line("LOCK ", 'n', BIG_LINE, "", &len);
    snprintf(text, sizeof(text), "LOCK: lock name is %d bytes, longest is 250", BIG_LINE);
    parse_err_len(line, len, PROTO_ERR_PROTO, text);
    free(line);

    line = make_line("PING ", '\xff', BIG_LINE, "", &len);
    snprintf(text, sizeof(text), "PING: word is %d bytes, longest is 250", BIG_LINE);
    parse_err_len(line, len, PROTO_ERR_PROTO, text);
    free(line);

    line = make_line("LOCK a ttl=1", ' ', BIG_LINE, "\r", &len);
    ck_assert_int_eq(parse_ok_len(line, len).ttl_ms, 1);
    free(line);
}
END_TEST

START_TEST(test_many_options)
{
    /* 64 KiB of options: the second ttl= is refused. */
    size_t i, len = 0, cap = BIG_LINE + 64;
    char *line = malloc(cap);

    ck_assert_ptr_nonnull(line);
    len += (size_t)snprintf(line, cap, "LOCK a");
    for (i = 0; len + 8 < BIG_LINE; i++) {
        len += (size_t)snprintf(line + len, cap - len, " ttl=%zu", i % 10 + 1);
    }
    parse_err_len(line, len, PROTO_ERR_PROTO, "LOCK: option 'ttl' given twice");
    free(line);
}
END_TEST

/* A small deterministic generator, so a failure can be replayed. */
static uint32_t
rand_next(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

START_TEST(test_random_lines)
{
    static const char alphabet[] = "LOCKTRYUNSAPIGVEHQlocktry =ttlwaitinf0123456789"
                                   "\r\0\x01\x7f\x80\xff\\'";
    uint32_t state = 2463534242u;
    struct proto_cmd cmd;
    struct proto_error err;
    char line[300];
    const char *verb;
    size_t i, j, len, n, ok = 0;

    for (i = 0; i < 50000; i++) {
        len = rand_next(&state) % sizeof(line);
        for (j = 0; j < len; j++) {
            if (i % 4 == 0) {
                line[j] = (char)(rand_next(&state) & 0xff);
            } else {
                line[j] = alphabet[rand_next(&state) % (sizeof(alphabet) - 1)];
            }
        }
        /* Half of the lines begin with a real verb, so the arguments get exercised. */
        if (i % 2 == 1 && len > 8) {
            n = rand_next(&state) % PROTO_VERB_COUNT;
            verb = proto_verb_name((enum proto_verb)n);
            if (strlen(verb) + 1 < len) {
                memcpy(line, verb, strlen(verb));
                line[strlen(verb)] = ' ';
            }
        }
        memset(&err, 0x55, sizeof(err));
        if (proto_parse(line, len, &cmd, &err) == 0) {
            ok++;
            ck_assert_int_lt(cmd.verb, PROTO_VERB_COUNT);
            if (cmd.name != NULL) {
                ck_assert(cmd.name >= line && cmd.name + cmd.name_len <= line + len);
                ck_assert(cmd.name_len >= 1 && cmd.name_len <= PROTO_NAME_MAX);
                for (j = 0; j < cmd.name_len; j++) {
                    ck_assert(cmd.name[j] >= 0x21 && cmd.name[j] <= 0x7e);
                }
            }
            if (cmd.has_ttl) {
                ck_assert(cmd.ttl_ms >= 1 && cmd.ttl_ms <= PROTO_NUMBER_MAX);
            }
            if (cmd.has_wait) {
                ck_assert(cmd.wait_ms == PROTO_WAIT_INF
                          || (cmd.wait_ms >= 0 && cmd.wait_ms <= PROTO_NUMBER_MAX));
            }
        } else {
            ck_assert(err.code == PROTO_ERR_PROTO || err.code == PROTO_ERR_UNKNOWN);
            n = strnlen(err.text, sizeof(err.text));
            ck_assert_uint_lt(n, sizeof(err.text));
            ck_assert_uint_gt(n, 0);
            for (j = 0; j < n; j++) {
                ck_assert_msg(err.text[j] >= 0x20 && err.text[j] <= 0x7e,
                              "unprintable byte in '%s'", err.text);
            }
        }
    }
    /* The generator must reach the success path too. */
    ck_assert_uint_gt(ok, 100);
}
END_TEST

/*
 * Names and HELP.
 */

START_TEST(test_verb_names)
{
    static const char *const names[PROTO_VERB_COUNT] = {
        "LOCK", "TRYLOCK", "UNLOCK", "STATUS", "EXTEND", "PING", "VERSION", "HELP", "QUIT",
        "STATS", "AUTH", "LIST", "WATCH", "UNWATCH", "BREAK", "CHECK",
    };
    char line[80];
    struct proto_cmd cmd;
    int i;

    for (i = 0; i < PROTO_VERB_COUNT; i++) {
        ck_assert_str_eq(proto_verb_name((enum proto_verb)i), names[i]);
        /* Every name parses back to its verb (the first five and the last
           three need a lock name, EXTEND its two options too). */
        snprintf(line, sizeof(line), "%s%s%s%s", names[i],
                 i <= PROTO_EXTEND || i == PROTO_AUTH || i >= PROTO_WATCH ? " n" : "",
                 i == PROTO_EXTEND ? " token=0123456789abcdef0123456789abcdef ttl=1" : "",
                 i == PROTO_CHECK ? " fence=1" : "");
        cmd = parse_ok(line);
        ck_assert_int_eq(cmd.verb, i);
    }
    ck_assert_str_eq(proto_verb_name(PROTO_VERB_COUNT), "?");
    ck_assert_str_eq(proto_verb_name((enum proto_verb)-1), "?");
    ck_assert_str_eq(proto_verb_name((enum proto_verb)1000), "?");
}
END_TEST

/* label= on LOCK and TRYLOCK: 1..64 printable bytes; nowhere else. */
START_TEST(test_label_option)
{
    struct proto_cmd cmd;
    char line[160];

    cmd = parse_ok("LOCK job label=backup@db7");
    ck_assert(cmd.has_label);
    ck_bytes_eq(cmd.label, cmd.label_len, "backup@db7");
    cmd = parse_ok("TRYLOCK job LABEL=x shared");
    ck_bytes_eq(cmd.label, cmd.label_len, "x");
    ck_assert(cmd.shared);
    cmd = parse_ok("LOCK job");
    ck_assert(!cmd.has_label && cmd.label == NULL);
    /* 64 bytes are a label, 65 are not. */
    snprintf(line, sizeof(line), "LOCK job label=%064d", 7);
    cmd = parse_ok(line);
    ck_assert_uint_eq(cmd.label_len, 64);
    snprintf(line, sizeof(line), "LOCK job label=%065d", 7);
    parse_err(line, PROTO_ERR_PROTO, "LOCK: label is 65 bytes, longest is 64");
    parse_err("LOCK job label=", PROTO_ERR_PROTO, "LOCK: option 'label' has no value");
    parse_err("LOCK job label=a\tb", PROTO_ERR_PROTO, "LOCK: label has byte 0x09 at offset 1");
    parse_err("LOCK job label=a label=b", PROTO_ERR_PROTO, "LOCK: option 'label' given twice");
    parse_err("UNLOCK job label=a", PROTO_ERR_PROTO, "UNLOCK: unknown option 'label'");
}
END_TEST

/* LIST [prefix], WATCH/UNWATCH/BREAK <name>: their arguments and nothing more. */
START_TEST(test_visibility_verbs)
{
    struct proto_cmd cmd;

    cmd = parse_ok("LIST");
    ck_assert_int_eq(cmd.verb, PROTO_LIST);
    ck_assert(cmd.word == NULL);
    cmd = parse_ok("list job:");
    ck_bytes_eq(cmd.word, cmd.word_len, "job:");
    parse_err("LIST a b", PROTO_ERR_PROTO, "LIST: too many arguments");
    cmd = parse_ok("WATCH leader");
    ck_assert_int_eq(cmd.verb, PROTO_WATCH);
    ck_bytes_eq(cmd.name, cmd.name_len, "leader");
    parse_err("WATCH", PROTO_ERR_PROTO, "WATCH: missing lock name");
    cmd = parse_ok("UNWATCH leader");
    ck_assert_int_eq(cmd.verb, PROTO_UNWATCH);
    cmd = parse_ok("BREAK stuck");
    ck_assert_int_eq(cmd.verb, PROTO_BREAK);
    parse_err("BREAK stuck ttl=5", PROTO_ERR_PROTO, "BREAK: too many arguments");
}
END_TEST

/* CHECK <name> fence=N [permit=I] | token=HEX: exactly one grant to check. */
START_TEST(test_check_verb)
{
    struct proto_cmd cmd;

    cmd = parse_ok("CHECK job fence=0042");
    ck_assert_int_eq(cmd.verb, PROTO_CHECK);
    ck_bytes_eq(cmd.name, cmd.name_len, "job");
    ck_assert(cmd.has_fence_value && cmd.fence_value == 42 && !cmd.has_permit);
    ck_assert(!cmd.fence);      /* not LOCK's flag */
    cmd = parse_ok("check sem FENCE=7 permit=0");
    ck_assert(cmd.has_permit && cmd.permit == 0 && cmd.fence_value == 7);
    cmd = parse_ok("CHECK job token=0123456789abcdef0123456789abcdef");
    ck_assert(cmd.token != NULL && !cmd.has_fence_value);
    parse_err("CHECK job", PROTO_ERR_PROTO, "CHECK: missing fence= or token= (the grant to "
              "check: the fence it was told, or a lease's token)");
    parse_err("CHECK", PROTO_ERR_PROTO, "CHECK: missing lock name");
    parse_err("CHECK job fence=1 token=0123456789abcdef0123456789abcdef", PROTO_ERR_PROTO,
              "CHECK: 'fence' and 'token' cannot go together (CHECK asks about one grant: by "
              "its fence, or by a lease's token)");
    parse_err("CHECK job fence", PROTO_ERR_PROTO, "CHECK: option 'fence' has no value");
    parse_err("CHECK job fence=", PROTO_ERR_PROTO, "CHECK: option 'fence' has no value");
    parse_err("CHECK job fence=0", PROTO_ERR_PROTO, "CHECK: fence must be at least 1");
    parse_err("CHECK job fence=-1", PROTO_ERR_PROTO,
              "CHECK: bad value for 'fence': '-1' (expected a fencing token)");
    parse_err("CHECK job fence=abc", PROTO_ERR_PROTO,
              "CHECK: bad value for 'fence': 'abc' (expected a fencing token)");
    parse_err("CHECK job fence=4000000000001", PROTO_ERR_PROTO,
              "CHECK: bad value for 'fence': '4000000000001' (expected a fencing token)");
    parse_err("CHECK job fence=1 fence=2", PROTO_ERR_PROTO, "CHECK: option 'fence' given twice");
    parse_err("CHECK job token=xyz", PROTO_ERR_PROTO, "CHECK: bad value for 'token': 'xyz' "
              "(expected 32 lowercase hex digits)");
    parse_err("CHECK job permit=1", PROTO_ERR_PROTO, "CHECK: 'permit' goes with fence=");
    parse_err("CHECK job permit=1 token=0123456789abcdef0123456789abcdef", PROTO_ERR_PROTO,
              "CHECK: 'permit' and 'token' cannot go together (a token names its permit "
              "itself)");
    parse_err("CHECK job fence=1 permit=1000", PROTO_ERR_PROTO,
              "CHECK: permit=1000 out of range 0..999 (a counted name has at most 1000 "
              "permits)");
    parse_err("CHECK job fence=1 permit=x", PROTO_ERR_PROTO,
              "CHECK: bad value for 'permit': 'x' (expected a permit's index)");
    parse_err("CHECK job fence=1 ttl=5", PROTO_ERR_PROTO, "CHECK: unknown option 'ttl'");
    parse_err("CHECK job other fence=1", PROTO_ERR_PROTO, "CHECK: unexpected argument 'other' "
              "(a lock name has no spaces; options are key=value)");
    /* LOCK's fence stays a flag, and the others still do not take fence=. */
    parse_err("LOCK job fence=3", PROTO_ERR_PROTO, "LOCK: option 'fence' takes no value");
    parse_err("STATUS job fence=3", PROTO_ERR_PROTO, "STATUS: unknown option 'fence'");
    parse_err("LOCK job permit=3", PROTO_ERR_PROTO, "LOCK: unknown option 'permit'");
}
END_TEST

START_TEST(test_errcode_names)
{
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_PROTO), "PROTO");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_UNKNOWN), "UNKNOWN");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_TOOLONG), "TOOLONG");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_LIMIT), "LIMIT");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_NOQUORUM), "NOQUORUM");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_SHUTDOWN), "SHUTDOWN");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_AUTH), "AUTH");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_TIMEOUT), "TIMEOUT");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_KIND), "KIND");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_DENIED), "DENIED");
    ck_assert_str_eq(proto_errcode_name(PROTO_ERR_NONE), "?");
    ck_assert_str_eq(proto_errcode_name((enum proto_errcode)(PROTO_ERR_DENIED + 1)), "?");
    ck_assert_str_eq(proto_errcode_name((enum proto_errcode)-1), "?");
}
END_TEST

START_TEST(test_help)
{
    static const char *const expected[] = {
        "LOCK <name>... [ttl=MS] [wait=MS|inf] [mode=session|lease] [fence] [shared|limit=N] "
        "[label=TEXT] [delay=MS]",
        "TRYLOCK <name>... [ttl=MS] [mode=session|lease] [fence] [shared|limit=N] [label=TEXT] "
        "[delay=MS]",
        "UNLOCK <name>... [token=HEX]",
        "STATUS <name> [token=HEX]", "EXTEND <name>... token=HEX ttl=MS", "PING [word]", "VERSION",
        "HELP", "QUIT", "STATS", "AUTH <password>", "LIST [prefix]", "WATCH <name>",
        "UNWATCH <name>", "BREAK <name>", "CHECK <name> fence=N [permit=I] | token=HEX",
    };
    const char *verb;
    size_t i, n, vlen;

    for (n = 0; proto_help[n] != NULL; n++) {
        ck_assert_uint_lt(n, PROTO_VERB_COUNT);
    }
    ck_assert_uint_eq(n, PROTO_VERB_COUNT);
    ck_assert_uint_eq(n, sizeof(expected) / sizeof(expected[0]));
    for (i = 0; i < n; i++) {
        ck_assert_str_eq(proto_help[i], expected[i]);
        /* In verb order: each line starts with its verb's name. */
        verb = proto_verb_name((enum proto_verb)i);
        vlen = strlen(verb);
        ck_assert(strncmp(proto_help[i], verb, vlen) == 0);
        ck_assert(proto_help[i][vlen] == ' ' || proto_help[i][vlen] == '\0');
    }
}
END_TEST

/*
 * Reply builder.
 */

START_TEST(test_reply_basic)
{
    struct proto_reply r;

    proto_reply_start(&r, "OK");
    proto_reply_word(&r, "demo", 4);
    proto_reply_int(&r, "validity", 2900);
    proto_reply_int(&r, "holds", 1);
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "OK demo validity=2900 holds=1\n");
    ck_assert(!r.truncated);

    proto_reply_start(&r, "PONG");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "PONG\n");
    ck_assert_uint_eq(r.len, 5);

    /* A word is taken by length, not up to a NUL. */
    proto_reply_start(&r, "HELD");
    proto_reply_word(&r, "abcdef", 3);
    proto_reply_int(&r, "ttl", -1);
    proto_reply_str(&r, "owner", "self");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "HELD abc ttl=-1 owner=self\n");

    proto_reply_start(&r, "!");
    proto_reply_word(&r, "LOST", 4);
    proto_reply_word(&r, "job", 3);
    proto_reply_str(&r, "reason", "renew");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "! LOST job reason=renew\n");
}
END_TEST

START_TEST(test_reply_int)
{
    struct proto_reply r;

    proto_reply_start(&r, "STAT");
    proto_reply_int(&r, "a", 0);
    proto_reply_int(&r, "b", INT64_MAX);
    proto_reply_int(&r, "c", INT64_MIN);
    proto_reply_int(&r, "d", PROTO_NUMBER_MAX);
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "STAT a=0 b=9223372036854775807 "
                     "c=-9223372036854775808 d=4000000000000\n");
}
END_TEST

START_TEST(test_reply_escaping)
{
    struct proto_reply r;

    /* Words: everything outside 0x21-0x7E, space included, is escaped. */
    proto_reply_start(&r, "PONG");
    proto_reply_word(&r, "a b\x01\x7f\xff\\\0z", 9);
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "PONG a\\x20b\\x01\\x7f\\xff\\\\x00z\n");

    proto_reply_start(&r, "X");
    proto_reply_str(&r, "k", "v w\n");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "X k=v\\x20w\\x0a\n");

    /* Free text keeps its spaces; controls and high bytes are escaped. */
    proto_reply_start(&r, "ERR");
    proto_reply_word(&r, "PROTO", 5);
    proto_reply_text(&r, "two words\tand\r\na \\ \x80");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "ERR PROTO two words\\x09and\\x0d\\x0aa \\ \\x80\n");

    /* The reply is always one line: no LF but the last. */
    ck_assert_ptr_eq(memchr(r.buf, '\n', r.len), r.buf + r.len - 1);
}
END_TEST

START_TEST(test_reply_empty_parts)
{
    struct proto_reply r;

    proto_reply_start(&r, "OK");
    proto_reply_word(&r, "", 0);
    proto_reply_word(&r, NULL, 0);
    proto_reply_text(&r, "");
    proto_reply_text(&r, NULL);
    proto_reply_str(&r, "k", "");
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "OK k=\n");
}
END_TEST

START_TEST(test_reply_restart_and_end_twice)
{
    struct proto_reply r;

    proto_reply_start(&r, "OK");
    proto_reply_word(&r, "one", 3);
    proto_reply_end(&r);
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "OK one\n");

    proto_reply_start(&r, "FREE");
    proto_reply_word(&r, "two", 3);
    proto_reply_end(&r);
    ck_assert_str_eq(reply_str(&r), "FREE two\n");
    ck_assert(!r.truncated);
}
END_TEST

START_TEST(test_reply_error)
{
    static const struct {
        enum proto_errcode code;
        const char         *text;
        const char         *expected;
    } cases[] = {
        { PROTO_ERR_PROTO, "empty line", "ERR PROTO empty line\n" },
        { PROTO_ERR_UNKNOWN, "unknown verb 'FOO' (HELP lists the verbs)", "ERR UNKNOWN unknown verb 'FOO' (HELP lists the verbs)\n" },
        { PROTO_ERR_TOOLONG, "line over 1024 bytes", "ERR TOOLONG line over 1024 bytes\n" },
        { PROTO_ERR_LIMIT, "too many clients", "ERR LIMIT too many clients\n" },
        { PROTO_ERR_NOQUORUM, "2 of 5 masters answered, quorum is 3: 127.0.0.1:7003 down",
          "ERR NOQUORUM 2 of 5 masters answered, quorum is 3: 127.0.0.1:7003 down\n" },
        { PROTO_ERR_SHUTDOWN, "daemon is stopping", "ERR SHUTDOWN daemon is stopping\n" },
        { PROTO_ERR_PROTO, "bad\nline\x01", "ERR PROTO bad\\x0aline\\x01\n" },
    };
    struct proto_reply r;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        proto_reply_error(&r, cases[i].code, cases[i].text);
        ck_assert_str_eq(reply_str(&r), cases[i].expected);
        ck_assert(!r.truncated);
    }
    proto_reply_error(&r, PROTO_ERR_PROTO, NULL);
    ck_assert_str_eq(reply_str(&r), "ERR PROTO\n");
}
END_TEST

START_TEST(test_reply_error_from_parser)
{
    /* What the daemon does with a refused line: the text goes out as it is. */
    struct proto_cmd cmd;
    struct proto_error err;
    struct proto_reply r;

    ck_assert_int_eq(proto_parse("STATUS a\\b c", 12, &cmd, &err), -1);
    proto_reply_error(&r, err.code, err.text);
    ck_assert_str_eq(reply_str(&r),
                     "ERR PROTO STATUS: unexpected argument 'c' (a lock name has no spaces; options are key=value)\n");
    ck_assert_int_eq(proto_parse("\\x", 2, &cmd, &err), -1);
    proto_reply_error(&r, err.code, err.text);
    ck_assert_str_eq(reply_str(&r), "ERR UNKNOWN unknown verb '\\x5cx' (HELP lists the verbs)\n");
}
END_TEST

/* Fail unless r holds a whole, cut reply of at most PROTO_REPLY_MAX bytes. */
static void
ck_reply_cut(const struct proto_reply *r)
{
    ck_assert(r->truncated);
    ck_assert_uint_le(r->len, PROTO_REPLY_MAX);
    ck_assert_uint_ge(r->len, 4);
    ck_assert(memcmp(r->buf + r->len - 4, "...\n", 4) == 0);
    ck_assert_ptr_eq(memchr(r->buf, '\n', r->len), r->buf + r->len - 1);
}

START_TEST(test_reply_truncation)
{
    static char text[5000];
    struct proto_reply r;
    size_t i;

    memset(text, 'a', sizeof(text) - 1);
    proto_reply_error(&r, PROTO_ERR_NOQUORUM, text);
    ck_reply_cut(&r);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX);
    ck_assert(memcmp(r.buf, "ERR NOQUORUM aaaa", 17) == 0);
    for (i = 13; i < r.len - 4; i++) {
        ck_assert(r.buf[i] == 'a');
    }

    /* Later appends are ignored; end() still ends the line. */
    proto_reply_start(&r, "OK");
    proto_reply_text(&r, text);
    proto_reply_word(&r, "more", 4);
    proto_reply_int(&r, "n", 5);
    proto_reply_end(&r);
    ck_reply_cut(&r);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX);
}
END_TEST

START_TEST(test_reply_truncation_escapes)
{
    static char text[3000];
    struct proto_reply r;
    size_t i;

    memset(text, '\x01', sizeof(text) - 1);
    proto_reply_error(&r, PROTO_ERR_PROTO, text);
    ck_reply_cut(&r);
    /* "ERR PROTO " then whole \x01 units, then "...\n". */
    ck_assert_uint_eq((r.len - 10 - 4) % 4, 0);
    for (i = 10; i < r.len - 4; i += 4) {
        ck_assert(memcmp(r.buf + i, "\\x01", 4) == 0);
    }
    ck_assert_uint_gt(r.len, PROTO_REPLY_MAX - 8);
}
END_TEST

START_TEST(test_reply_exact_fit)
{
    static char text[PROTO_REPLY_MAX];
    struct proto_reply r;
    size_t n;

    /* "OK " + n bytes + LF == PROTO_REPLY_MAX: fits, not cut. */
    n = PROTO_REPLY_MAX - 4;
    memset(text, 'b', n);
    text[n] = '\0';
    proto_reply_start(&r, "OK");
    proto_reply_text(&r, text);
    proto_reply_end(&r);
    ck_assert(!r.truncated);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX);
    ck_assert(r.buf[r.len - 2] == 'b' && r.buf[r.len - 1] == '\n');

    /* One byte more is cut. */
    text[n] = 'b';
    text[n + 1] = '\0';
    proto_reply_start(&r, "OK");
    proto_reply_text(&r, text);
    proto_reply_end(&r);
    ck_reply_cut(&r);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX);
}
END_TEST

START_TEST(test_reply_full_then_more)
{
    static char text[PROTO_REPLY_MAX];
    struct proto_reply r;
    size_t n;

    /* The line is full to the last byte; an int no longer fits: cut. */
    n = PROTO_REPLY_MAX - 4;
    memset(text, 'c', n);
    text[n] = '\0';
    proto_reply_start(&r, "OK");
    proto_reply_text(&r, text);
    ck_assert(!r.truncated);
    proto_reply_int(&r, "x", 1);
    proto_reply_end(&r);
    ck_reply_cut(&r);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX);
    ck_assert(r.buf[r.len - 5] == 'c');

    /* Same, with an escape across the cut point: it goes whole, not half. */
    n = PROTO_REPLY_MAX - 4 - 4;
    memset(text, 'c', n);
    memcpy(text + n, "\x01", 2);
    proto_reply_start(&r, "OK");
    proto_reply_text(&r, text);
    ck_assert(!r.truncated);
    ck_assert_uint_eq(r.len, PROTO_REPLY_MAX - 1);
    proto_reply_word(&r, "w", 1);
    proto_reply_end(&r);
    ck_reply_cut(&r);
    ck_assert_uint_le(r.len, PROTO_REPLY_MAX);
    ck_assert_ptr_null(memchr(r.buf, '\\', r.len));
    ck_assert(r.buf[PROTO_REPLY_MAX - 6] == 'c');
}
END_TEST

START_TEST(test_reply_long_word)
{
    static char word[4000];
    struct proto_reply r;

    memset(word, '\xfe', sizeof(word));
    proto_reply_start(&r, "OK");
    proto_reply_word(&r, word, sizeof(word));
    proto_reply_end(&r);
    ck_reply_cut(&r);
    ck_assert(memcmp(r.buf, "OK \\xfe\\xfe", 11) == 0);
    ck_assert_uint_eq((r.len - 3 - 4) % 4, 0);
}
END_TEST

/*
 * proto_escape().
 */

START_TEST(test_escape_plain)
{
    char out[64];

    ck_assert_ptr_eq(proto_escape(out, sizeof(out), "hello world", 11), out);
    ck_assert_str_eq(out, "hello world");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "!~", 2), "!~");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "", 0), "");
    ck_assert_str_eq(proto_escape(out, sizeof(out), NULL, 0), "");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "abc", 2), "ab");
}
END_TEST

START_TEST(test_escape_bytes)
{
    char out[64];

    ck_assert_str_eq(proto_escape(out, sizeof(out), "a\\b", 3), "a\\x5cb");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "\n\r\t", 3), "\\x0a\\x0d\\x09");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "\x1f\x7f\x80\xff", 4),
                     "\\x1f\\x7f\\x80\\xff");
    ck_assert_str_eq(proto_escape(out, sizeof(out), "a\0b", 3), "a\\x00b");
    ck_assert_str_eq(proto_escape(out, sizeof(out), " ", 1), " ");
}
END_TEST

START_TEST(test_escape_truncation)
{
    char out[64];

    /* Fits exactly: 9 bytes and NUL in 10. */
    ck_assert_str_eq(proto_escape(out, 10, "abcdefghi", 9), "abcdefghi");
    /* One more: cut to size-1 bytes ending in "...". */
    ck_assert_str_eq(proto_escape(out, 10, "abcdefghij", 10), "abcdef...");
    ck_assert_uint_eq(strlen(out), 9);
    /* Escapes are not split. */
    ck_assert_str_eq(proto_escape(out, 10, "\x01\x01\x01", 3), "\\x01...");
    ck_assert_str_eq(proto_escape(out, 10, "ab\x01\x01", 4), "ab\\x01...");
    ck_assert_str_eq(proto_escape(out, 9, "\x01\x01", 2), "\\x01\\x01");
    /* Tiny buffers. */
    memset(out, 'Z', sizeof(out));
    ck_assert_str_eq(proto_escape(out, 1, "abc", 3), "");
    ck_assert(out[1] == 'Z');
    ck_assert_str_eq(proto_escape(out, 3, "abc", 3), "..");
    ck_assert(out[3] == 'Z');
    ck_assert_str_eq(proto_escape(out, 4, "abc", 3), "abc");
    ck_assert_str_eq(proto_escape(out, 4, "abcd", 4), "...");
    ck_assert_str_eq(proto_escape(out, 5, "abcde", 5), "a...");
    /* size 0: nothing is written. */
    out[0] = 'Q';
    ck_assert_ptr_eq(proto_escape(out, 0, "abc", 3), out);
    ck_assert(out[0] == 'Q');
}
END_TEST

START_TEST(test_escape_big)
{
    char *in, out[PROTO_ERRTEXT_MAX];
    size_t len, i;

    in = make_line("", '\x80', BIG_LINE, "", &len);
    proto_escape(out, sizeof(out), in, len);
    ck_assert_uint_le(strlen(out), sizeof(out) - 1);
    ck_assert_str_eq(out + strlen(out) - 3, "...");
    for (i = 0; i + 3 < strlen(out); i += 4) {
        ck_assert(memcmp(out + i, "\\x80", 4) == 0);
    }
    free(in);
}
END_TEST

static Suite *
proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc;

    tc = tcase_create("verbs");
    tcase_add_test(tc, test_verbs_every_case);
    tcase_add_test(tc, test_lock_defaults);
    tcase_add_test(tc, test_lock_options);
    tcase_add_test(tc, test_lock_wait_inf);
    tcase_add_test(tc, test_trylock);
    tcase_add_test(tc, test_lock_sets);
    tcase_add_test(tc, test_unlock_status);
    tcase_add_test(tc, test_ping);
    tcase_add_test(tc, test_auth);
    tcase_add_test(tc, test_no_argument_verbs);
    tcase_add_test(tc, test_unknown_verb);
    tcase_add_test(tc, test_kind_options);
    tcase_add_test(tc, test_delay_option);
    suite_add_tcase(s, tc);

    tc = tcase_create("framing");
    tcase_add_test(tc, test_empty_lines);
    tcase_add_test(tc, test_crlf);
    tcase_add_test(tc, test_spaces);
    tcase_add_test(tc, test_not_nul_terminated);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, test_name_length);
    tcase_add_test(tc, test_name_bytes);
    tcase_add_test(tc, test_name_with_equals);
    suite_add_tcase(s, tc);

    tc = tcase_create("options");
    tcase_add_test(tc, test_option_errors);
    tcase_add_test(tc, test_option_values);
    tcase_add_test(tc, test_ttl_minimum);
    tcase_add_test(tc, test_number_limits);
    tcase_add_test(tc, test_long_words_in_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("hostile");
    tcase_add_test(tc, test_big_lines);
    tcase_add_test(tc, test_many_options);
    tcase_add_test(tc, test_random_lines);
    suite_add_tcase(s, tc);

    tc = tcase_create("names_help");
    tcase_add_test(tc, test_verb_names);
    tcase_add_test(tc, test_errcode_names);
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_lease_and_fence_options);
    tcase_add_test(tc, test_label_option);
    tcase_add_test(tc, test_visibility_verbs);
    tcase_add_test(tc, test_check_verb);
    suite_add_tcase(s, tc);

    tc = tcase_create("reply");
    tcase_add_test(tc, test_reply_basic);
    tcase_add_test(tc, test_reply_int);
    tcase_add_test(tc, test_reply_escaping);
    tcase_add_test(tc, test_reply_empty_parts);
    tcase_add_test(tc, test_reply_restart_and_end_twice);
    tcase_add_test(tc, test_reply_error);
    tcase_add_test(tc, test_reply_error_from_parser);
    tcase_add_test(tc, test_reply_truncation);
    tcase_add_test(tc, test_reply_truncation_escapes);
    tcase_add_test(tc, test_reply_exact_fit);
    tcase_add_test(tc, test_reply_full_then_more);
    tcase_add_test(tc, test_reply_long_word);
    suite_add_tcase(s, tc);

    tc = tcase_create("escape");
    tcase_add_test(tc, test_escape_plain);
    tcase_add_test(tc, test_escape_bytes);
    tcase_add_test(tc, test_escape_truncation);
    tcase_add_test(tc, test_escape_big);
    suite_add_tcase(s, tc);

    return s;
}

const struct runner runner_main = { "check_proto", proto_suite, NULL, NULL };
