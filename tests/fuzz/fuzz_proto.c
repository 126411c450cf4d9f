/*
 * fuzz_proto.c: libFuzzer target for proto/: the request parser, the
 * reply builder and proto_escape().
 *
 * One input drives three checks:
 *
 *   1. proto_parse() on the bytes as one request line.  Beyond "does not
 *      crash", the result must keep the promises of proto.h: a name or a
 *      PING word points inside the line and holds 0x21-0x7E only, an
 *      AUTH password is one word inside the line, a token is 32
 *      lowercase hex digits, options appear only on verbs that take
 *      them, an error is PROTO or UNKNOWN with a printable text.  The
 *      same line with a leading space and a trailing CR must parse the
 *      same way (both are ignored); an AUTH line must give the same
 *      answer whatever its password's bytes (an error never quotes the
 *      secret); and proto_reply_*() must echo a parsed name and an error
 *      text unchanged.
 *   2. the reply builder, driven by the bytes read as a small program
 *      (start, word, int, str, text, error): the reply is one line ending
 *      in LF, at most PROTO_REPLY_MAX bytes, printable; it equals a model
 *      of the line built here without limits, or, when cut, is a prefix
 *      of that model followed by "...".
 *   3. proto_escape() into an exact-size buffer: the output is the
 *      escaped input, or its longest prefix of whole escapes and "...".
 *
 * A broken promise aborts, so libFuzzer reports it with the input.  The
 * same file is linked with tests/fuzz/replay.c for the ordinary tests.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Most operations one input runs on the reply builder. */
#define FUZZ_PROTO_OPS_MAX      64

/*
 * Room for a model: more than FUZZ_PROTO_OPS_MAX operations can append
 * (two chunks of 255 bytes, 4 bytes each once escaped, per operation).
 */
#define FUZZ_PROTO_MODEL_MAX    (256 * 1024)

/* Most input bytes given to proto_escape(): its model has room for 4 each. */
#define FUZZ_PROTO_ESCAPE_MAX   (16 * 1024)

/* Abort with where and what when cond is false. */
#define FUZZ_PROTO_CHECK(cond)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fuzz_proto_fail(__LINE__, #cond);                               \
        }                                                                   \
    } while (0)

/* A reply line built without limits, to compare with proto_reply. */
struct fuzz_proto_model {
    char   buf[FUZZ_PROTO_MODEL_MAX];   /* the line so far, no LF */
    size_t len;                         /* bytes used in buf */
};

/* Reads the input as a program: [pos, size) is still unread. */
struct fuzz_proto_reader {
    const uint8_t *data;                /* the fuzz input */
    size_t        size;                 /* bytes in data */
    size_t        pos;                  /* next byte to read */
};

static const char *const fuzz_proto_statuses[] = {
    "OK", "ERR", "BUSY", "TIMEOUT", "NOTHELD", "HELD", "FREE", "PONG",
    "!", "STAT", "END", "BYE", "", "\x01", "sp ace", NULL
};

static const char *const fuzz_proto_keys[] = {
    "validity", "holds", "ttl", "token", "fence", "owner", "mode", "reason",
    "", "k\xff", "a=b", NULL
};

static void fuzz_proto_fail(int line, const char *what)
    __attribute__((noreturn));

static void
fuzz_proto_fail(int line, const char *what)
{
    fprintf(stderr, "fuzz_proto.c:%d: broken invariant: %s\n", line, what);
    abort();
}

/* Whether every byte of s/len is in lo..hi. */
static bool
fuzz_proto_all_in(const char *s, size_t len, unsigned char lo, unsigned char hi)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if ((unsigned char)s[i] < lo || (unsigned char)s[i] > hi) {
            return false;
        }
    }
    return true;
}

/* Whether p/len lies inside base/size. */
static bool
fuzz_proto_inside(const char *p, size_t len, const char *base, size_t size)
{
    return p >= base && len <= size && (size_t)(p - base) <= size - len;
}

/* The options each verb accepts (PROTOCOL.md, "Options"). */
static void
fuzz_proto_check_options(const struct proto_cmd *cmd)
{
    bool ttl = false, wait = false, mode = false, token = false, fence = false;

    switch (cmd->verb) {
    case PROTO_LOCK:
        ttl = wait = mode = fence = true;
        break;
    case PROTO_TRYLOCK:
        ttl = mode = fence = true;
        break;
    case PROTO_UNLOCK:
    case PROTO_STATUS:
        token = true;
        break;
    case PROTO_EXTEND:
        token = ttl = true;
        break;
    default:
        break;
    }
    FUZZ_PROTO_CHECK(ttl || !cmd->has_ttl);
    FUZZ_PROTO_CHECK(wait || !cmd->has_wait);
    FUZZ_PROTO_CHECK(mode || !cmd->has_mode);
    FUZZ_PROTO_CHECK(token || !cmd->has_token);
    FUZZ_PROTO_CHECK(fence || !cmd->fence);
    /* EXTEND's two options are required. */
    FUZZ_PROTO_CHECK(cmd->verb != PROTO_EXTEND || (cmd->has_token && cmd->has_ttl));

    if (cmd->has_ttl) {
        FUZZ_PROTO_CHECK(cmd->ttl_ms >= 1 && cmd->ttl_ms <= PROTO_NUMBER_MAX);
    }
    if (cmd->has_wait) {
        FUZZ_PROTO_CHECK(cmd->wait_ms == PROTO_WAIT_INF ||
                         (cmd->wait_ms >= 0 && cmd->wait_ms <= PROTO_NUMBER_MAX));
    }
    if (cmd->has_mode) {
        FUZZ_PROTO_CHECK(cmd->mode == PROTO_MODE_SESSION || cmd->mode == PROTO_MODE_LEASE);
    }
}

/* What a successful parse of line/len must look like. */
static void
fuzz_proto_check_cmd(const struct proto_cmd *cmd, const char *line, size_t len)
{
    size_t i;

    FUZZ_PROTO_CHECK((unsigned)cmd->verb < PROTO_VERB_COUNT);
    FUZZ_PROTO_CHECK(strcmp(proto_verb_name(cmd->verb), "?") != 0);

    switch (cmd->verb) {
    case PROTO_LOCK:
    case PROTO_TRYLOCK:
    case PROTO_UNLOCK:
    case PROTO_STATUS:
    case PROTO_EXTEND:
        FUZZ_PROTO_CHECK(cmd->name != NULL);
        FUZZ_PROTO_CHECK(cmd->name_len >= 1 && cmd->name_len <= PROTO_NAME_MAX);
        FUZZ_PROTO_CHECK(fuzz_proto_inside(cmd->name, cmd->name_len, line, len));
        FUZZ_PROTO_CHECK(fuzz_proto_all_in(cmd->name, cmd->name_len, 0x21, 0x7e));
        break;
    default:
        FUZZ_PROTO_CHECK(cmd->name == NULL && cmd->name_len == 0);
        break;
    }

    if (cmd->verb == PROTO_AUTH) {
        /* The password: one word, its bytes checked by the caller. */
        FUZZ_PROTO_CHECK(cmd->word != NULL && cmd->word_len >= 1);
        FUZZ_PROTO_CHECK(fuzz_proto_inside(cmd->word, cmd->word_len, line, len));
        FUZZ_PROTO_CHECK(memchr(cmd->word, ' ', cmd->word_len) == NULL);
    } else if (cmd->word != NULL) {
        FUZZ_PROTO_CHECK(cmd->verb == PROTO_PING);
        FUZZ_PROTO_CHECK(cmd->word_len >= 1 && cmd->word_len <= PROTO_WORD_MAX);
        FUZZ_PROTO_CHECK(fuzz_proto_inside(cmd->word, cmd->word_len, line, len));
        FUZZ_PROTO_CHECK(fuzz_proto_all_in(cmd->word, cmd->word_len, 0x21, 0x7e));
    } else {
        FUZZ_PROTO_CHECK(cmd->word_len == 0);
    }

    FUZZ_PROTO_CHECK(cmd->has_token == (cmd->token != NULL));
    if (cmd->token != NULL) {
        FUZZ_PROTO_CHECK(fuzz_proto_inside(cmd->token, PROTO_TOKEN_LEN, line, len));
        for (i = 0; i < PROTO_TOKEN_LEN; i++) {
            char c = cmd->token[i];

            FUZZ_PROTO_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        }
    }
    fuzz_proto_check_options(cmd);
}

/* What a refused line's error must look like. */
static void
fuzz_proto_check_error(const struct proto_error *err)
{
    size_t n = strnlen(err->text, sizeof(err->text));

    FUZZ_PROTO_CHECK(err->code == PROTO_ERR_PROTO || err->code == PROTO_ERR_UNKNOWN);
    FUZZ_PROTO_CHECK(n < sizeof(err->text));
    FUZZ_PROTO_CHECK(n > 0);
    FUZZ_PROTO_CHECK(fuzz_proto_all_in(err->text, n, 0x20, 0x7e));
}

/* Whether a pointer field of a and b is at the same offset in its line. */
static bool
fuzz_proto_same_ptr(const char *a, const char *abase, const char *b, const char *bbase)
{
    if (a == NULL || b == NULL) {
        return a == NULL && b == NULL;
    }
    return a - abase == b - bbase;
}

/*
 * The line with one more leading space, and a trailing CR unless it
 * already ends in one (only one CR is removed), must parse as the line.
 */
static void
fuzz_proto_check_variant(const char *line, size_t len, int rc,
                         const struct proto_cmd *cmd, const struct proto_error *err)
{
    struct proto_cmd vcmd;
    struct proto_error verr;
    size_t vlen = len + 1;
    char *v;
    int vrc;

    v = malloc(len + 2);
    if (v == NULL) {
        return;
    }
    v[0] = ' ';
    memcpy(v + 1, line, len);
    if (len == 0 || line[len - 1] != '\r') {
        v[vlen++] = '\r';
    }
    vrc = proto_parse(v, vlen, &vcmd, &verr);
    FUZZ_PROTO_CHECK(vrc == rc);
    if (rc == 0) {
        /* v + 1 lines up with line. */
        FUZZ_PROTO_CHECK(vcmd.verb == cmd->verb);
        FUZZ_PROTO_CHECK(fuzz_proto_same_ptr(vcmd.name, v + 1, cmd->name, line));
        FUZZ_PROTO_CHECK(vcmd.name_len == cmd->name_len);
        FUZZ_PROTO_CHECK(fuzz_proto_same_ptr(vcmd.word, v + 1, cmd->word, line));
        FUZZ_PROTO_CHECK(vcmd.word_len == cmd->word_len);
        FUZZ_PROTO_CHECK(fuzz_proto_same_ptr(vcmd.token, v + 1, cmd->token, line));
        FUZZ_PROTO_CHECK(vcmd.has_ttl == cmd->has_ttl && vcmd.ttl_ms == cmd->ttl_ms);
        FUZZ_PROTO_CHECK(vcmd.has_wait == cmd->has_wait && vcmd.wait_ms == cmd->wait_ms);
        FUZZ_PROTO_CHECK(vcmd.has_mode == cmd->has_mode && vcmd.mode == cmd->mode);
        FUZZ_PROTO_CHECK(vcmd.has_token == cmd->has_token);
        FUZZ_PROTO_CHECK(vcmd.fence == cmd->fence);
    } else {
        FUZZ_PROTO_CHECK(verr.code == err->code);
        FUZZ_PROTO_CHECK(strcmp(verr.text, err->text) == 0);
    }
    free(v);
}

/* Whether r holds exactly the line text (without LF) plus LF. */
static bool
fuzz_proto_reply_is(const struct proto_reply *r, const char *text, size_t len)
{
    return r->len == len + 1 && memcmp(r->buf, text, len) == 0 && r->buf[len] == '\n';
}

/* The replies a daemon builds from a parse must carry it unchanged. */
static void
fuzz_proto_check_echo(int rc, const struct proto_cmd *cmd, const struct proto_error *err)
{
    static struct proto_reply r;
    char want[PROTO_REPLY_MAX];
    int n;

    if (rc != 0) {
        /* "ERR <CODE> <text>": the text is printable and short. */
        proto_reply_error(&r, err->code, err->text);
        n = snprintf(want, sizeof(want), "ERR %s %s",
                     proto_errcode_name(err->code), err->text);
        FUZZ_PROTO_CHECK(n > 0 && (size_t)n < sizeof(want));
        FUZZ_PROTO_CHECK(!r.truncated);
        FUZZ_PROTO_CHECK(fuzz_proto_reply_is(&r, want, (size_t)n));
        return;
    }
    if (cmd->name != NULL) {
        /* "OK <name> validity=N": a name needs no escaping. */
        proto_reply_start(&r, "OK");
        proto_reply_word(&r, cmd->name, cmd->name_len);
        proto_reply_int(&r, "validity", cmd->ttl_ms);
        proto_reply_end(&r);
        n = snprintf(want, sizeof(want), "OK %.*s validity=%lld", (int)cmd->name_len,
                     cmd->name, (long long)cmd->ttl_ms);
        FUZZ_PROTO_CHECK(n > 0 && (size_t)n < sizeof(want));
        FUZZ_PROTO_CHECK(fuzz_proto_reply_is(&r, want, (size_t)n));
    }
    if (cmd->verb == PROTO_PING && cmd->word != NULL) {
        proto_reply_start(&r, "PONG");
        proto_reply_word(&r, cmd->word, cmd->word_len);
        proto_reply_end(&r);
        n = snprintf(want, sizeof(want), "PONG %.*s", (int)cmd->word_len, cmd->word);
        FUZZ_PROTO_CHECK(n > 0 && (size_t)n < sizeof(want));
        FUZZ_PROTO_CHECK(fuzz_proto_reply_is(&r, want, (size_t)n));
    }
}

/*
 * An AUTH line is answered the same whatever bytes its password has: the
 * second word is overwritten (with 'x', or 'y' when it is all 'x') and
 * the line parsed again.  An error text that quoted the password, or a
 * parse that looked at its bytes, would differ.
 */
static void
fuzz_proto_check_secret(const char *line, size_t len, int rc,
                        const struct proto_cmd *cmd, const struct proto_error *err)
{
    struct proto_cmd scmd;
    struct proto_error serr;
    size_t i = 0, start, end, n;
    char *copy, fill = 'x';
    int src;

    /* A trailing CR is not part of the password. */
    n = len > 0 && line[len - 1] == '\r' ? len - 1 : len;
    while (i < n && line[i] == ' ') {
        i++;
    }
    start = i;
    while (i < n && line[i] != ' ') {
        i++;
    }
    if (i - start != 4 || strncasecmp(line + start, "auth", 4) != 0) {
        return;
    }
    while (i < n && line[i] == ' ') {
        i++;
    }
    start = i;
    while (i < n && line[i] != ' ') {
        i++;
    }
    end = i;
    if (start == end) {
        return;
    }
    copy = malloc(len);
    if (copy == NULL) {
        return;
    }
    memcpy(copy, line, len);
    for (i = start; i < end && line[i] == 'x'; i++) {
    }
    if (i == end) {
        fill = 'y';
    }
    memset(copy + start, fill, end - start);

    src = proto_parse(copy, len, &scmd, &serr);
    FUZZ_PROTO_CHECK(src == rc);
    if (rc == 0) {
        FUZZ_PROTO_CHECK(scmd.verb == PROTO_AUTH && cmd->verb == PROTO_AUTH);
        FUZZ_PROTO_CHECK(fuzz_proto_same_ptr(scmd.word, copy, cmd->word, line));
        FUZZ_PROTO_CHECK(scmd.word_len == cmd->word_len);
    } else {
        FUZZ_PROTO_CHECK(serr.code == err->code);
        FUZZ_PROTO_CHECK(strcmp(serr.text, err->text) == 0);
    }
    free(copy);
}

/* Part 1: the bytes as one request line. */
static void
fuzz_proto_parse(const uint8_t *data, size_t size)
{
    const char *line = (const char *)data;
    struct proto_cmd cmd;
    struct proto_error err;
    int rc;

    memset(&err, 0xa5, sizeof(err));
    rc = proto_parse(line, size, &cmd, &err);
    FUZZ_PROTO_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        fuzz_proto_check_cmd(&cmd, line, size);
    } else {
        fuzz_proto_check_error(&err);
    }
    fuzz_proto_check_variant(line, size, rc, &cmd, &err);
    fuzz_proto_check_secret(line, size, rc, &cmd, &err);
    fuzz_proto_check_echo(rc, &cmd, &err);
}

/* ---- the reply builder ---- */

/* Append s/len to the model; words escape 0x21-0x7E, text 0x20-0x7E. */
static void
fuzz_proto_model_put(struct fuzz_proto_model *m, const char *s, size_t len,
                     unsigned char lo, bool raw)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (m->len + 4 > sizeof(m->buf)) {
            fuzz_proto_fail(__LINE__, "model overflow");
        }
        if (raw || (c >= lo && c <= 0x7e)) {
            m->buf[m->len++] = (char)c;
        } else {
            m->buf[m->len++] = '\\';
            m->buf[m->len++] = 'x';
            m->buf[m->len++] = hex[c >> 4];
            m->buf[m->len++] = hex[c & 0x0f];
        }
    }
}

/* The next byte of the program, 0 when there is none. */
static unsigned
fuzz_proto_byte(struct fuzz_proto_reader *rd)
{
    return rd->pos < rd->size ? rd->data[rd->pos++] : 0;
}

/*
 * The next chunk: a length byte, then up to that many bytes.  Returns a
 * pointer into the input (not NUL-terminated) and its length.
 */
static const char *
fuzz_proto_chunk(struct fuzz_proto_reader *rd, size_t *len)
{
    size_t want = fuzz_proto_byte(rd);
    const char *p = (const char *)rd->data + rd->pos;

    if (want > rd->size - rd->pos) {
        want = rd->size - rd->pos;
    }
    rd->pos += want;
    *len = want;
    return p;
}

/* The chunk as a NUL-terminated string in buf (size > 255); cut at a NUL. */
static const char *
fuzz_proto_chunk_str(struct fuzz_proto_reader *rd, char *buf)
{
    size_t len;
    const char *p = fuzz_proto_chunk(rd, &len);

    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

/* A name from a NULL-terminated table, by the next byte; sometimes NULL. */
static const char *
fuzz_proto_pick(struct fuzz_proto_reader *rd, const char *const *table)
{
    unsigned b = fuzz_proto_byte(rd);
    size_t n = 0;

    while (table[n] != NULL) {
        n++;
    }
    return b % (n + 1) == n ? NULL : table[b % (n + 1)];
}

/* A reply as it must be once ended: checked against the model m. */
static void
fuzz_proto_check_reply(const struct proto_reply *r, const struct fuzz_proto_model *m)
{
    const char *nl;

    FUZZ_PROTO_CHECK(r->len >= 1 && r->len <= PROTO_REPLY_MAX);
    FUZZ_PROTO_CHECK(r->buf[r->len - 1] == '\n');
    nl = memchr(r->buf, '\n', r->len);
    FUZZ_PROTO_CHECK(nl == r->buf + r->len - 1);
    FUZZ_PROTO_CHECK(fuzz_proto_all_in(r->buf, r->len - 1, 0x20, 0x7e));

    if (!r->truncated) {
        FUZZ_PROTO_CHECK(m->len <= PROTO_REPLY_MAX - 1);
        FUZZ_PROTO_CHECK(r->len == m->len + 1);
        FUZZ_PROTO_CHECK(memcmp(r->buf, m->buf, m->len) == 0);
        return;
    }
    /* Cut: a prefix of the whole line, then "...". */
    FUZZ_PROTO_CHECK(m->len > PROTO_REPLY_MAX - 1);
    FUZZ_PROTO_CHECK(r->len >= 4);
    FUZZ_PROTO_CHECK(memcmp(r->buf + r->len - 4, "...\n", 4) == 0);
    FUZZ_PROTO_CHECK(memcmp(r->buf, m->buf, r->len - 4) == 0);
}

/*
 * Part 2: the bytes as a program for the reply builder, checked against
 * a model built with the rules of proto.h.  Each operation is one byte
 * (mod 8) and its operands: chunks (a length byte and the bytes) and
 * picks from fixed tables.
 */
static void
fuzz_proto_reply(const uint8_t *data, size_t size)
{
    static struct proto_reply r;
    static struct fuzz_proto_model m;
    struct fuzz_proto_reader rd = { data, size, 0 };
    char str[256], key[256];
    const char *s, *k;
    size_t len, op;
    unsigned code;
    int64_t v;
    int i;
    bool truncated = false;

    s = fuzz_proto_pick(&rd, fuzz_proto_statuses);
    proto_reply_start(&r, s);
    m.len = 0;
    if (s != NULL) {
        fuzz_proto_model_put(&m, s, strlen(s), 0x21, false);
    }

    for (op = 0; op < FUZZ_PROTO_OPS_MAX && rd.pos < rd.size; op++) {
        size_t before = m.len;

        switch (fuzz_proto_byte(&rd) % 8) {
        case 0:     /* start again, with a fuzzed status word */
            s = fuzz_proto_chunk_str(&rd, str);
            proto_reply_start(&r, s);
            m.len = 0;
            truncated = false;
            fuzz_proto_model_put(&m, s, strlen(s), 0x21, false);
            break;
        case 1:     /* a word, any bytes */
        case 2:
            s = fuzz_proto_chunk(&rd, &len);
            proto_reply_word(&r, s, len);
            if (len > 0) {
                fuzz_proto_model_put(&m, " ", 1, 0, true);
                fuzz_proto_model_put(&m, s, len, 0x21, false);
            }
            break;
        case 3:     /* key=int */
            k = fuzz_proto_pick(&rd, fuzz_proto_keys);
            v = 0;
            for (i = 0; i < 8; i++) {
                v = (int64_t)((uint64_t)v << 8 | fuzz_proto_byte(&rd));
            }
            proto_reply_int(&r, k, v);
            len = (size_t)snprintf(str, sizeof(str), "%lld", (long long)v);
            fuzz_proto_model_put(&m, " ", 1, 0, true);
            if (k != NULL) {
                fuzz_proto_model_put(&m, k, strlen(k), 0x21, false);
            }
            fuzz_proto_model_put(&m, "=", 1, 0, true);
            fuzz_proto_model_put(&m, str, len, 0, true);
            break;
        case 4:     /* key=string, the key fuzzed or from the table */
            if (fuzz_proto_byte(&rd) & 1) {
                k = fuzz_proto_chunk_str(&rd, key);
            } else {
                k = fuzz_proto_pick(&rd, fuzz_proto_keys);
            }
            s = (fuzz_proto_byte(&rd) & 7) == 0 ? NULL : fuzz_proto_chunk_str(&rd, str);
            proto_reply_str(&r, k, s);
            fuzz_proto_model_put(&m, " ", 1, 0, true);
            if (k != NULL) {
                fuzz_proto_model_put(&m, k, strlen(k), 0x21, false);
            }
            fuzz_proto_model_put(&m, "=", 1, 0, true);
            if (s != NULL) {
                fuzz_proto_model_put(&m, s, strlen(s), 0x21, false);
            }
            break;
        case 5:     /* free text */
        case 6:
            s = fuzz_proto_chunk_str(&rd, str);
            proto_reply_text(&r, s);
            if (s[0] != '\0') {
                fuzz_proto_model_put(&m, " ", 1, 0, true);
                fuzz_proto_model_put(&m, s, strlen(s), 0x20, false);
            }
            break;
        case 7:     /* a whole error reply, any code */
            code = fuzz_proto_byte(&rd) % 12;     /* the codes and a few more */
            s = fuzz_proto_chunk_str(&rd, str);
            proto_reply_error(&r, (enum proto_errcode)code, s);
            m.len = 0;
            truncated = false;
            fuzz_proto_model_put(&m, "ERR ", 4, 0, true);
            k = proto_errcode_name((enum proto_errcode)code);
            FUZZ_PROTO_CHECK(k != NULL && k[0] != '\0');
            fuzz_proto_model_put(&m, k, strlen(k), 0x21, false);
            if (s[0] != '\0') {
                fuzz_proto_model_put(&m, " ", 1, 0, true);
                fuzz_proto_model_put(&m, s, strlen(s), 0x20, false);
            }
            fuzz_proto_check_reply(&r, &m);
            /* Ended: start a fresh line for the rest of the program. */
            proto_reply_start(&r, "OK");
            m.len = 0;
            fuzz_proto_model_put(&m, "OK", 2, 0, true);
            break;
        }
        /* After a cut, appends are ignored: the model stops growing too. */
        if (truncated) {
            m.len = before;
        }
        if (r.truncated) {
            truncated = true;
        }
    }
    proto_reply_end(&r);
    len = r.len;
    proto_reply_end(&r);
    FUZZ_PROTO_CHECK(r.len == len);     /* a second end() adds nothing */
    fuzz_proto_check_reply(&r, &m);
}

/* ---- proto_escape ---- */

/*
 * Part 3: escape the bytes (the first FUZZ_PROTO_ESCAPE_MAX of them) into
 * a buffer of exactly 1..256 bytes, its size taken from the last byte.
 */
static void
fuzz_proto_escape(const uint8_t *data, size_t size)
{
    static struct fuzz_proto_model m;
    const char *in = (const char *)data;
    size_t cap, n, i, unit, len;
    char *out;

    cap = 1 + (size > 0 ? data[size - 1] : 0);
    if (size > FUZZ_PROTO_ESCAPE_MAX) {
        size = FUZZ_PROTO_ESCAPE_MAX;
    }
    out = malloc(cap);
    if (out == NULL) {
        return;
    }
    FUZZ_PROTO_CHECK(proto_escape(out, cap, in, size) == out);
    len = strnlen(out, cap);
    FUZZ_PROTO_CHECK(len < cap);
    FUZZ_PROTO_CHECK(fuzz_proto_all_in(out, len, 0x20, 0x7e));

    /* The model: printable ASCII except backslash as it is, the rest \xHH. */
    m.len = 0;
    for (i = 0; i < size; i++) {
        fuzz_proto_model_put(&m, in + i, 1, 0x20, false);
        if (data[i] == '\\') {
            /* Unlike a reply, a log line escapes the backslash too. */
            memcpy(m.buf + m.len - 1, "\\x5c", 4);
            m.len += 3;
        }
    }
    if (m.len <= cap - 1) {
        FUZZ_PROTO_CHECK(len == m.len && memcmp(out, m.buf, m.len) == 0);
        free(out);
        return;
    }
    if (cap - 1 < 3) {
        FUZZ_PROTO_CHECK(len == cap - 1 && fuzz_proto_all_in(out, len, '.', '.'));
        free(out);
        return;
    }
    /* Cut: the longest prefix of whole escapes within cap - 4, then "...". */
    FUZZ_PROTO_CHECK(len >= 3 && memcmp(out + len - 3, "...", 3) == 0);
    n = len - 3;
    FUZZ_PROTO_CHECK(n <= cap - 4);
    FUZZ_PROTO_CHECK(memcmp(out, m.buf, n) == 0);
    /* n ends a unit, and the next unit would not have fit. */
    for (i = 0, unit = 0; i < size && unit < n; i++) {
        unit += (data[i] >= 0x20 && data[i] <= 0x7e && data[i] != '\\') ? 1 : 4;
    }
    FUZZ_PROTO_CHECK(unit == n);
    FUZZ_PROTO_CHECK(i < size);
    unit = (data[i] >= 0x20 && data[i] <= 0x7e && data[i] != '\\') ? 1 : 4;
    FUZZ_PROTO_CHECK(n + unit > cap - 4);
    free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int v = size > 0 ? (int)data[0] - 4 : 0;

    fuzz_proto_parse(data, size);
    fuzz_proto_reply(data, size);
    fuzz_proto_escape(data, size);

    /* Names of values in and out of range never fail. */
    FUZZ_PROTO_CHECK(proto_verb_name((enum proto_verb)v) != NULL);
    FUZZ_PROTO_CHECK(proto_errcode_name((enum proto_errcode)v) != NULL);
    return 0;
}
