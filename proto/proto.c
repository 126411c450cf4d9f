/*
 * proto.c: the redlockd line protocol, version 1 (see proto/PROTOCOL.md).
 *
 * Two halves: proto_parse(), which turns one request line into a struct
 * proto_cmd or a precise error, and the reply builder, which writes one
 * reply line into a fixed buffer and never overflows it.
 *
 * The parser is driven by two tables.  proto_verbs says, per verb, what
 * the first argument is (a lock name, an optional word, nothing) and
 * which options may follow it.  proto_opts says, per option, its key,
 * how its value is parsed and where in struct proto_cmd it is stored.
 * A new option is a new row in proto_opts (and its bit in the verbs that
 * accept it); a new kind of value is a new setter function.
 *
 * The module keeps no state and allocates nothing.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/proto.h"

/* Longest copy of an untrusted word inside an error text, with NUL. */
#define PROTO_QUOTE_MAX     41

/* Room for reply content: everything but the final LF. */
#define PROTO_REPLY_ROOM    (PROTO_REPLY_MAX - 1)

/* What marks a cut string. */
#define PROTO_ELLIPSIS      "..."
#define PROTO_ELLIPSIS_LEN  (sizeof(PROTO_ELLIPSIS) - 1)

/* Which bytes an escaping function copies as they are. */
enum proto_esc {
    PROTO_ESC_LOG,      /* 0x20-0x7E except backslash (proto_escape) */
    PROTO_ESC_WORD,     /* 0x21-0x7E (a word in a reply) */
    PROTO_ESC_TEXT,     /* 0x20-0x7E (free text in a reply) */
    PROTO_ESC_RAW       /* every byte (trusted text such as " key=") */
};

/* What a verb takes as its first argument. */
enum proto_args {
    PROTO_ARGS_NONE,    /* nothing at all: VERSION, HELP, QUIT, STATS */
    PROTO_ARGS_NAME,    /* a lock name, required */
    PROTO_ARGS_NAMES,   /* one lock name or more (a set), required: LOCK,
                           TRYLOCK, UNLOCK, EXTEND */
    PROTO_ARGS_WORD,    /* one word, optional: PING, LIST */
    PROTO_ARGS_SECRET   /* one word, required, never quoted in errors: AUTH */
};

/* Options, by row of proto_opts; PROTO_OPT_COUNT is not an option. */
enum proto_opt_id {
    PROTO_OPT_TTL,
    PROTO_OPT_WAIT,
    PROTO_OPT_MODE,
    PROTO_OPT_TOKEN,
    PROTO_OPT_FENCE,
    PROTO_OPT_FENCE_VALUE,  /* CHECK's fence=N: the same key as the flag, with a value */
    PROTO_OPT_PERMIT,
    PROTO_OPT_LIMIT,
    PROTO_OPT_SHARED,
    PROTO_OPT_LABEL,
    PROTO_OPT_DELAY,
    PROTO_OPT_COUNT
};

#define PROTO_OPT_BIT(id)   (UINT32_C(1) << (id))

/* Words of the line still to be read: [p, end). */
struct proto_lexer {
    const char *p;      /* next byte to look at */
    const char *end;    /* one past the last byte of the line */
};

/* One word of the line; points into the line. */
struct proto_word {
    const char *s;      /* first byte */
    size_t     len;     /* bytes, at least 1 */
};

struct proto_optdef;

/*
 * Parse the value of an option and store it in cmd.  val/len is the part
 * after '=' (len >= 1), or NULL/0 for a flag.  On error, fill err (whose
 * texts begin with verb) and return -1.
 */
typedef int (*proto_opt_set_fn)(const struct proto_optdef *def, const char *val,
                                size_t len, struct proto_cmd *cmd,
                                const char *verb, struct proto_error *err);

/* One option a request may carry.  Static data. */
struct proto_optdef {
    const char       *key;      /* lower-case key, matched case-insensitively */
    bool             flag;      /* a bare word ("fence"), never key=value */
    proto_opt_set_fn set;       /* parses and stores the value; NULL for a flag */
    int64_t          min;       /* smallest number accepted */
    const char       *inf;      /* word that means "no limit", or NULL */
    int64_t          inf_value; /* what inf is stored as */
    size_t           has_off;   /* offsetof the bool set when the option is given */
    size_t           val_off;   /* offsetof the int64_t value; unused for a flag */
};

/* One verb.  Static data, indexed by enum proto_verb. */
struct proto_verbdef {
    const char      *name;      /* upper-case verb */
    enum proto_args args;       /* what its first argument is */
    uint32_t        opts;       /* PROTO_OPT_BIT()s of the options it accepts */
};

/* Two options that cannot go together on one line.  Static data. */
struct proto_exclusive {
    enum proto_opt_id a, b;     /* the options */
    const char        *why;     /* " (reason)" after "<VERB>: 'a' and 'b' cannot go together" */
};

/* An option a verb cannot do without.  Static data. */
struct proto_required {
    enum proto_verb   verb;     /* the verb that requires it */
    enum proto_opt_id opt;      /* the option, also listed in the verb's opts */
    const char        *why;     /* "" or " (reason)", after "<VERB>: missing <key>=" */
};

static int proto_opt_ms(const struct proto_optdef *def, const char *val, size_t len,
                        struct proto_cmd *cmd, const char *verb,
                        struct proto_error *err);

static int proto_opt_mode(const struct proto_optdef *def, const char *val, size_t len,
                          struct proto_cmd *cmd, const char *verb,
                          struct proto_error *err);
static int proto_opt_token(const struct proto_optdef *def, const char *val, size_t len,
                           struct proto_cmd *cmd, const char *verb,
                           struct proto_error *err);
static int proto_opt_count(const struct proto_optdef *def, const char *val, size_t len,
                           struct proto_cmd *cmd, const char *verb,
                           struct proto_error *err);
static int proto_opt_label(const struct proto_optdef *def, const char *val, size_t len,
                           struct proto_cmd *cmd, const char *verb,
                           struct proto_error *err);
static int proto_opt_number(const struct proto_optdef *def, const char *val, size_t len,
                            struct proto_cmd *cmd, const char *verb,
                            struct proto_error *err);

static const struct proto_optdef proto_opts[PROTO_OPT_COUNT] = {
    [PROTO_OPT_TTL] = {
        .key = "ttl", .flag = false, .set = proto_opt_ms, .min = 1,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_ttl),
        .val_off = offsetof(struct proto_cmd, ttl_ms),
    },
    [PROTO_OPT_WAIT] = {
        .key = "wait", .flag = false, .set = proto_opt_ms, .min = 0,
        .inf = "inf", .inf_value = PROTO_WAIT_INF,
        .has_off = offsetof(struct proto_cmd, has_wait),
        .val_off = offsetof(struct proto_cmd, wait_ms),
    },
    [PROTO_OPT_MODE] = {
        .key = "mode", .flag = false, .set = proto_opt_mode, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_mode),
        .val_off = offsetof(struct proto_cmd, mode),
    },
    [PROTO_OPT_TOKEN] = {
        .key = "token", .flag = false, .set = proto_opt_token, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_token),
        .val_off = 0,       /* the setter stores cmd->token itself */
    },
    [PROTO_OPT_FENCE] = {
        .key = "fence", .flag = true, .set = NULL, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, fence),
        .val_off = 0,
    },
    [PROTO_OPT_FENCE_VALUE] = {
        .key = "fence", .flag = false, .set = proto_opt_number, .min = 1,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_fence_value),
        .val_off = offsetof(struct proto_cmd, fence_value),
    },
    [PROTO_OPT_PERMIT] = {
        .key = "permit", .flag = false, .set = proto_opt_number, .min = 0,
        .inf = NULL, .inf_value = PROTO_PERMIT_MAX,     /* inf_value: the largest */
        .has_off = offsetof(struct proto_cmd, has_permit),
        .val_off = offsetof(struct proto_cmd, permit),
    },
    [PROTO_OPT_LIMIT] = {
        .key = "limit", .flag = false, .set = proto_opt_count, .min = 1,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_limit),
        .val_off = offsetof(struct proto_cmd, limit),
    },
    [PROTO_OPT_SHARED] = {
        .key = "shared", .flag = true, .set = NULL, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, shared),
        .val_off = 0,
    },
    [PROTO_OPT_LABEL] = {
        .key = "label", .flag = false, .set = proto_opt_label, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_label),
        .val_off = 0,       /* the setter stores cmd->label itself */
    },
    [PROTO_OPT_DELAY] = {
        .key = "delay", .flag = false, .set = proto_opt_ms, .min = 0,
        .inf = NULL, .inf_value = 0,
        .has_off = offsetof(struct proto_cmd, has_delay),
        .val_off = offsetof(struct proto_cmd, delay_ms),
    },
};

#define PROTO_LOCK_OPTS     (PROTO_OPT_BIT(PROTO_OPT_TTL) | PROTO_OPT_BIT(PROTO_OPT_MODE) \
                             | PROTO_OPT_BIT(PROTO_OPT_FENCE) | PROTO_OPT_BIT(PROTO_OPT_LIMIT) \
                             | PROTO_OPT_BIT(PROTO_OPT_SHARED) | PROTO_OPT_BIT(PROTO_OPT_LABEL) \
                             | PROTO_OPT_BIT(PROTO_OPT_DELAY))

static const struct proto_verbdef proto_verbs[PROTO_VERB_COUNT] = {
    [PROTO_LOCK] = {
        "LOCK", PROTO_ARGS_NAMES, PROTO_LOCK_OPTS | PROTO_OPT_BIT(PROTO_OPT_WAIT)
    },
    [PROTO_TRYLOCK]      = { "TRYLOCK", PROTO_ARGS_NAMES, PROTO_LOCK_OPTS },
    [PROTO_UNLOCK]       = { "UNLOCK", PROTO_ARGS_NAMES, PROTO_OPT_BIT(PROTO_OPT_TOKEN) },
    [PROTO_STATUS]       = { "STATUS", PROTO_ARGS_NAME, PROTO_OPT_BIT(PROTO_OPT_TOKEN) },
    [PROTO_EXTEND] = {
        "EXTEND", PROTO_ARGS_NAMES, PROTO_OPT_BIT(PROTO_OPT_TOKEN) | PROTO_OPT_BIT(PROTO_OPT_TTL)
    },
    [PROTO_PING]         = { "PING", PROTO_ARGS_WORD, 0 },
    [PROTO_VERSION_VERB] = { "VERSION", PROTO_ARGS_NONE, 0 },
    [PROTO_HELP]         = { "HELP", PROTO_ARGS_NONE, 0 },
    [PROTO_QUIT]         = { "QUIT", PROTO_ARGS_NONE, 0 },
    [PROTO_STATS]        = { "STATS", PROTO_ARGS_NONE, 0 },
    [PROTO_AUTH]         = { "AUTH", PROTO_ARGS_SECRET, 0 },
    [PROTO_LIST]         = { "LIST", PROTO_ARGS_WORD, 0 },
    [PROTO_WATCH]        = { "WATCH", PROTO_ARGS_NAME, 0 },
    [PROTO_UNWATCH]      = { "UNWATCH", PROTO_ARGS_NAME, 0 },
    [PROTO_BREAK]        = { "BREAK", PROTO_ARGS_NAME, 0 },
    [PROTO_CHECK] = {
        "CHECK", PROTO_ARGS_NAME, PROTO_OPT_BIT(PROTO_OPT_FENCE_VALUE)
                                  | PROTO_OPT_BIT(PROTO_OPT_PERMIT) | PROTO_OPT_BIT(PROTO_OPT_TOKEN)
    },
};

/* Options that exclude each other. */
static const struct proto_exclusive proto_exclusives[] = {
    { PROTO_OPT_FENCE_VALUE, PROTO_OPT_TOKEN,
      " (CHECK asks about one grant: by its fence, or by a lease's token)" },
    { PROTO_OPT_PERMIT, PROTO_OPT_TOKEN, " (a token names its permit itself)" },
    { PROTO_OPT_SHARED, PROTO_OPT_LIMIT,
      " (a name is one kind: shared, or counted with limit=N)" },
    { PROTO_OPT_SHARED, PROTO_OPT_DELAY, " (a lock-delay is for an exclusive lock)" },
    { PROTO_OPT_LIMIT, PROTO_OPT_DELAY, " (a lock-delay is for an exclusive lock)" },
};

/* The required options, in the order a line missing several reports them. */
static const struct proto_required proto_required[] = {
    { PROTO_EXTEND, PROTO_OPT_TTL, "" },
    { PROTO_EXTEND, PROTO_OPT_TOKEN,
      " (EXTEND renews a lease-mode lock by its token; session-mode locks are renewed "
      "by the daemon)" },
};

const char *const proto_help[PROTO_VERB_COUNT + 1] = {
    [PROTO_LOCK]         = "LOCK <name>... [ttl=MS] [wait=MS|inf] [mode=session|lease] [fence] "
                           "[shared|limit=N] [label=TEXT] [delay=MS]",
    [PROTO_TRYLOCK]      = "TRYLOCK <name>... [ttl=MS] [mode=session|lease] [fence] [shared|limit=N] "
                           "[label=TEXT] [delay=MS]",
    [PROTO_UNLOCK]       = "UNLOCK <name>... [token=HEX]",
    [PROTO_STATUS]       = "STATUS <name> [token=HEX]",
    [PROTO_EXTEND]       = "EXTEND <name>... token=HEX ttl=MS",
    [PROTO_PING]         = "PING [word]",
    [PROTO_VERSION_VERB] = "VERSION",
    [PROTO_HELP]         = "HELP",
    [PROTO_QUIT]         = "QUIT",
    [PROTO_STATS]        = "STATS",
    [PROTO_AUTH]         = "AUTH <password>",
    [PROTO_LIST]         = "LIST [prefix]",
    [PROTO_WATCH]        = "WATCH <name>",
    [PROTO_UNWATCH]      = "UNWATCH <name>",
    [PROTO_BREAK]        = "BREAK <name>",
    [PROTO_CHECK]        = "CHECK <name> fence=N [permit=I] | token=HEX",
    [PROTO_VERB_COUNT]   = NULL,
};

static const char *const proto_errcodes[] = {
    [PROTO_ERR_NONE]     = NULL,     /* not a CODE word */
    [PROTO_ERR_PROTO]    = "PROTO",
    [PROTO_ERR_UNKNOWN]  = "UNKNOWN",
    [PROTO_ERR_TOOLONG]  = "TOOLONG",
    [PROTO_ERR_LIMIT]    = "LIMIT",
    [PROTO_ERR_NOQUORUM] = "NOQUORUM",
    [PROTO_ERR_SHUTDOWN] = "SHUTDOWN",
    [PROTO_ERR_AUTH]     = "AUTH",
    [PROTO_ERR_TIMEOUT]  = "TIMEOUT",
    [PROTO_ERR_KIND]     = "KIND",
    [PROTO_ERR_DENIED]   = "DENIED",
};

/*
 * Escaping, shared by proto_escape() and the reply builder.
 */

/* Whether c is copied as it is under mode. */
static bool
proto_esc_plain(unsigned char c, enum proto_esc mode)
{
    switch (mode) {
    case PROTO_ESC_LOG:
        return c >= 0x20 && c <= 0x7e && c != '\\';
    case PROTO_ESC_WORD:
        return c >= 0x21 && c <= 0x7e;
    case PROTO_ESC_TEXT:
        return c >= 0x20 && c <= 0x7e;
    case PROTO_ESC_RAW:
        return true;
    }
    return false;
}

/* Bytes that c takes once escaped under mode: 1, or 4 for \xHH. */
static size_t
proto_esc_len(unsigned char c, enum proto_esc mode)
{
    return proto_esc_plain(c, mode) ? 1 : 4;
}

/* Bytes that in/len takes once escaped under mode. */
static size_t
proto_esc_total(const char *in, size_t len, enum proto_esc mode)
{
    size_t i, n = 0;

    for (i = 0; i < len; i++) {
        n += proto_esc_len((unsigned char)in[i], mode);
    }
    return n;
}

/* Write c escaped under mode at out, which has room; returns bytes written. */
static size_t
proto_esc_put(char *out, unsigned char c, enum proto_esc mode)
{
    static const char hex[] = "0123456789abcdef";

    if (proto_esc_plain(c, mode)) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = '\\';
    out[1] = 'x';
    out[2] = hex[c >> 4];
    out[3] = hex[c & 0x0f];
    return 4;
}

/* Write all of in/len escaped under mode at out, which has room. */
static size_t
proto_esc_copy(char *out, const char *in, size_t len, enum proto_esc mode)
{
    size_t i, n = 0;

    for (i = 0; i < len; i++) {
        n += proto_esc_put(out + n, (unsigned char)in[i], mode);
    }
    return n;
}

/*
 * Write the start of in/len escaped under mode at out, which has room
 * for cap bytes, and end it in "..." (or as many of its dots as fit).
 * Only whole escape units are written.  Returns the bytes written.
 */
static size_t
proto_esc_cut(char *out, size_t cap, const char *in, size_t len, enum proto_esc mode)
{
    size_t i, n = 0, limit;

    limit = cap >= PROTO_ELLIPSIS_LEN ? cap - PROTO_ELLIPSIS_LEN : 0;
    for (i = 0; i < len; i++) {
        if (n + proto_esc_len((unsigned char)in[i], mode) > limit) {
            break;
        }
        n += proto_esc_put(out + n, (unsigned char)in[i], mode);
    }
    for (i = 0; i < PROTO_ELLIPSIS_LEN && n < cap; i++) {
        out[n++] = '.';
    }
    return n;
}

char *
proto_escape(char *out, size_t size, const char *in, size_t len)
{
    size_t n;

    if (out == NULL || size == 0) {
        return out;
    }
    if (in == NULL) {
        len = 0;
    }
    if (proto_esc_total(in, len, PROTO_ESC_LOG) <= size - 1) {
        n = proto_esc_copy(out, in, len, PROTO_ESC_LOG);
    } else {
        n = proto_esc_cut(out, size - 1, in, len, PROTO_ESC_LOG);
    }
    out[n] = '\0';
    return out;
}

/*
 * Parsing.
 */

/* ASCII lower case of c; other bytes unchanged (no locale). */
static unsigned char
proto_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Whether s/len equals the NUL-terminated word, ignoring ASCII case. */
static bool
proto_word_is(const char *s, size_t len, const char *word)
{
    size_t i;

    if (strlen(word) != len) {
        return false;
    }
    for (i = 0; i < len; i++) {
        if (proto_lower((unsigned char)s[i]) != proto_lower((unsigned char)word[i])) {
            return false;
        }
    }
    return true;
}

/* Read the next space-separated word; false when none is left. */
static bool
proto_next_word(struct proto_lexer *lx, struct proto_word *w)
{
    const char *start;

    while (lx->p < lx->end && *lx->p == ' ') {
        lx->p++;
    }
    if (lx->p == lx->end) {
        return false;
    }
    start = lx->p;
    while (lx->p < lx->end && *lx->p != ' ') {
        lx->p++;
    }
    w->s = start;
    w->len = (size_t)(lx->p - start);
    return true;
}

/* Fill err with code and a formatted text. */
static void proto_fail(struct proto_error *err, enum proto_errcode code,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
proto_fail(struct proto_error *err, enum proto_errcode code, const char *fmt, ...)
{
    va_list ap;

    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof(err->text), fmt, ap);
    va_end(ap);
}

/* Escape an untrusted word, cut short, for quoting in an error text. */
static const char *
proto_quote(char *buf, const char *s, size_t len)
{
    return proto_escape(buf, PROTO_QUOTE_MAX, s, len);
}

/*
 * Check a word that must be 1..max bytes of 0x21-0x7E.  what names it
 * in the error ("lock name", "word").
 */
static int
proto_check_word(const struct proto_word *w, size_t max, const char *verb,
                 const char *what, struct proto_error *err)
{
    size_t i;
    unsigned char c;

    if (w->len > max) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: %s is %zu bytes, longest is %zu",
                   verb, what, w->len, max);
        return -1;
    }
    for (i = 0; i < w->len; i++) {
        c = (unsigned char)w->s[i];
        if (c < 0x21 || c > 0x7e) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: %s has byte 0x%02x at offset %zu",
                       verb, what, (unsigned)c, i);
            return -1;
        }
    }
    return 0;
}

/*
 * Parse decimal digits (leading zeros allowed) into *out.  Returns -1
 * for anything but 1 or more digits, or for a value over PROTO_NUMBER_MAX.
 */
static int
proto_parse_number(const char *s, size_t len, int64_t *out)
{
    size_t i;
    int64_t v = 0, d;

    if (len == 0) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        d = s[i] - '0';
        if (v > (PROTO_NUMBER_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Setter for a number of milliseconds, or def->inf when the row has one. */
static int
proto_opt_ms(const struct proto_optdef *def, const char *val, size_t len,
             struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    char quoted[PROTO_QUOTE_MAX];
    int64_t v;

    if (def->inf != NULL && proto_word_is(val, len, def->inf)) {
        v = def->inf_value;
    } else if (proto_parse_number(val, len, &v) != 0) {
        proto_fail(err, PROTO_ERR_PROTO,
                   "%s: bad value for '%s': '%s' (expected milliseconds%s%s)",
                   verb, def->key, proto_quote(quoted, val, len),
                   def->inf != NULL ? " or " : "", def->inf != NULL ? def->inf : "");
        return -1;
    } else if (v < def->min) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: %s must be at least %" PRId64 " ms",
                   verb, def->key, def->min);
        return -1;
    }
    *(int64_t *)(void *)((char *)cmd + def->val_off) = v;
    return 0;
}

/* Setter for limit=: a number of holders, at least def->min. */
static int
proto_opt_count(const struct proto_optdef *def, const char *val, size_t len,
                struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    char quoted[PROTO_QUOTE_MAX];
    int64_t v;

    if (proto_parse_number(val, len, &v) != 0) {
        proto_fail(err, PROTO_ERR_PROTO,
                   "%s: bad value for '%s': '%s' (expected a number of holders)",
                   verb, def->key, proto_quote(quoted, val, len));
        return -1;
    }
    if (v < def->min) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: %s must be at least %" PRId64, verb, def->key,
                   def->min);
        return -1;
    }
    *(int64_t *)(void *)((char *)cmd + def->val_off) = v;
    return 0;
}

/*
 * Setter for CHECK's fence= (a fencing token) and permit= (a permit's
 * index): a number from def->min; permit= at most def->inf_value.
 */
static int
proto_opt_number(const struct proto_optdef *def, const char *val, size_t len,
                 struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    const char *what = def->min > 0 ? "a fencing token" : "a permit's index";
    char quoted[PROTO_QUOTE_MAX];
    int64_t v;

    if (proto_parse_number(val, len, &v) != 0) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: bad value for '%s': '%s' (expected %s)",
                   verb, def->key, proto_quote(quoted, val, len), what);
        return -1;
    }
    if (v < def->min) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: %s must be at least %" PRId64, verb, def->key,
                   def->min);
        return -1;
    }
    if (def->inf_value > 0 && v > def->inf_value) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: %s=%" PRId64 " out of range 0..%" PRId64
                   " (a counted name has at most %" PRId64 " permits)", verb, def->key, v,
                   def->inf_value, def->inf_value + 1);
        return -1;
    }
    *(int64_t *)(void *)((char *)cmd + def->val_off) = v;
    return 0;
}

/* Setter for mode=: "session" or "lease", case-insensitive. */
static int
proto_opt_mode(const struct proto_optdef *def, const char *val, size_t len,
               struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    char quoted[PROTO_QUOTE_MAX];

    (void)def;
    if (proto_word_is(val, len, "session")) {
        cmd->mode = PROTO_MODE_SESSION;
    } else if (proto_word_is(val, len, "lease")) {
        cmd->mode = PROTO_MODE_LEASE;
    } else {
        proto_fail(err, PROTO_ERR_PROTO,
                   "%s: bad value for 'mode': '%s' (expected session or lease)",
                   verb, proto_quote(quoted, val, len));
        return -1;
    }
    return 0;
}

/*
 * Setter for token=: exactly PROTO_TOKEN_LEN lowercase hex digits, the
 * form the daemon hands out.  Case matters: the token is compared byte
 * for byte with the value on the masters.
 */
static int
proto_opt_token(const struct proto_optdef *def, const char *val, size_t len,
                struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    char quoted[PROTO_QUOTE_MAX];
    size_t i;

    (void)def;
    for (i = 0; i < len; i++) {
        if (!((val[i] >= '0' && val[i] <= '9') || (val[i] >= 'a' && val[i] <= 'f'))) {
            break;
        }
    }
    if (len != PROTO_TOKEN_LEN || i != len) {
        proto_fail(err, PROTO_ERR_PROTO,
                   "%s: bad value for 'token': '%s' (expected %d lowercase hex digits)",
                   verb, proto_quote(quoted, val, len), PROTO_TOKEN_LEN);
        return -1;
    }
    cmd->token = val;
    return 0;
}

/*
 * Setter for label=: 1..PROTO_LABEL_MAX bytes of 0x21-0x7E (a word has
 * no space already), a name for people of who holds a lock.
 */
static int
proto_opt_label(const struct proto_optdef *def, const char *val, size_t len,
                struct proto_cmd *cmd, const char *verb, struct proto_error *err)
{
    size_t i;

    (void)def;
    if (len > PROTO_LABEL_MAX) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: label is %zu bytes, longest is %d",
                   verb, len, PROTO_LABEL_MAX);
        return -1;
    }
    for (i = 0; i < len; i++) {
        if ((unsigned char)val[i] < 0x21 || (unsigned char)val[i] > 0x7e) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: label has byte 0x%02x at offset %zu",
                       verb, (unsigned)(unsigned char)val[i], i);
            return -1;
        }
    }
    cmd->label = val;
    cmd->label_len = len;
    return 0;
}

/*
 * The verb nearest to the unknown word s/len, by edit distance (ignoring
 * case), when it is at most 2 edits away and shorter than the word's
 * length; else NULL.  For "unknown verb 'LOKC' (LOCK? ...)".
 */
static const char *
proto_nearest_verb(const char *s, size_t len)
{
    enum { ROW = 16 };
    size_t prev[ROW + 1], cur[ROW + 1], i, j, vlen, best = 3;
    const char *found = NULL, *v;
    int k;

    if (len < 2 || len > ROW) {
        return NULL;
    }
    for (k = 0; k < PROTO_VERB_COUNT; k++) {
        v = proto_verbs[k].name;
        vlen = strlen(v);
        if (vlen > ROW) {
            continue;
        }
        for (j = 0; j <= vlen; j++) {
            prev[j] = j;
        }
        for (i = 1; i <= len; i++) {
            cur[0] = i;
            for (j = 1; j <= vlen; j++) {
                size_t sub = prev[j - 1]
                             + (proto_lower((unsigned char)s[i - 1])
                                != proto_lower((unsigned char)v[j - 1]));
                size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

                cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            }
            memcpy(prev, cur, sizeof(prev));
        }
        if (prev[vlen] < best && prev[vlen] < len) {
            best = prev[vlen];
            found = v;
        }
    }
    return found;
}

/* The row of proto_opts whose key is s/len, or -1. */
static int
proto_opt_find(const char *s, size_t len)
{
    int i;

    for (i = 0; i < PROTO_OPT_COUNT; i++) {
        if (proto_word_is(s, len, proto_opts[i].key)) {
            return i;
        }
    }
    return -1;
}

/* Whether w, after a name, is another name: a bare word that is no flag option. */
static bool
proto_is_name(const struct proto_word *w)
{
    int id;

    if (memchr(w->s, '=', w->len) != NULL) {
        return false;
    }
    id = proto_opt_find(w->s, w->len);
    return id < 0 || !proto_opts[id].flag;
}

/*
 * Check the lock name w and add it to cmd's names (the first one is
 * also cmd->name): at most PROTO_SET_MAX of them, no two the same.
 */
static int
proto_add_name(const struct proto_verbdef *vd, const struct proto_word *w,
               struct proto_cmd *cmd, struct proto_error *err)
{
    char quoted[PROTO_QUOTE_MAX];
    size_t i;

    if (proto_check_word(w, PROTO_NAME_MAX, vd->name, "lock name", err) != 0) {
        return -1;
    }
    if (cmd->nnames == PROTO_SET_MAX) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: more than %d lock names (a set has at most %d)",
                   vd->name, PROTO_SET_MAX, PROTO_SET_MAX);
        return -1;
    }
    for (i = 0; i < cmd->nnames; i++) {
        if (cmd->names[i].len == w->len && memcmp(cmd->names[i].s, w->s, w->len) == 0) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: lock name '%s' given twice", vd->name,
                       proto_quote(quoted, w->s, w->len));
            return -1;
        }
    }
    if (cmd->nnames == 0) {
        cmd->name = w->s;
        cmd->name_len = w->len;
    }
    cmd->names[cmd->nnames].s = w->s;
    cmd->names[cmd->nnames++].len = w->len;
    return 0;
}

/*
 * Another row of proto_opts with the key of row id that vd accepts (fence
 * is LOCK's flag and CHECK's fence=N), or -1.
 */
static int
proto_opt_other_row(const struct proto_verbdef *vd, int id)
{
    int i;

    for (i = 0; i < PROTO_OPT_COUNT; i++) {
        if (i != id && (vd->opts & PROTO_OPT_BIT(i))
            && strcmp(proto_opts[i].key, proto_opts[id].key) == 0) {
            return i;
        }
    }
    return -1;
}

/*
 * Parse one option word w for verb vd.  seen holds the bits of the
 * options already given on this line and is updated.  prev is the option
 * word before w, or NULL when w follows the name (or the verb): a bare
 * word after "label=has" is the rest of a label with a space, and the
 * error says so rather than blame the name.
 */
static int
proto_parse_option(const struct proto_verbdef *vd, const struct proto_word *w,
                   const struct proto_word *prev, uint32_t *seen, struct proto_cmd *cmd,
                   struct proto_error *err)
{
    const struct proto_optdef *def;
    const char *eq, *val;
    char quoted[PROTO_QUOTE_MAX], quoted_prev[PROTO_QUOTE_MAX];
    size_t keylen, vallen;
    int id;

    eq = memchr(w->s, '=', w->len);
    keylen = eq != NULL ? (size_t)(eq - w->s) : w->len;
    id = keylen > 0 ? proto_opt_find(w->s, keylen) : -1;
    if (id >= 0 && !(vd->opts & PROTO_OPT_BIT(id))) {
        id = proto_opt_other_row(vd, id);
        if (id >= 0 && eq == NULL) {
            /* CHECK's fence=N, given as LOCK's bare word. */
            proto_fail(err, PROTO_ERR_PROTO, "%s: option '%s' has no value", vd->name,
                       proto_opts[id].key);
            return -1;
        }
        if (id < 0) {
            id = proto_opt_find(w->s, keylen);
        }
    }

    if (eq == NULL && (id < 0 || !proto_opts[id].flag) && prev != NULL) {
        const char *peq = memchr(prev->s, '=', prev->len);

        proto_fail(err, PROTO_ERR_PROTO, "%s: unexpected argument '%s' after '%s' (%s"
                   "options are key=value)", vd->name, proto_quote(quoted, w->s, w->len),
                   proto_quote(quoted_prev, prev->s, prev->len),
                   peq == NULL ? ""
                   : proto_opt_find(prev->s, (size_t)(peq - prev->s)) == PROTO_OPT_LABEL
                   ? "a label has no spaces; " : "an option's value has no spaces; ");
        return -1;
    }
    if (eq == NULL && (id < 0 || !proto_opts[id].flag)) {
        proto_fail(err, PROTO_ERR_PROTO,
                   vd->args == PROTO_ARGS_NAME
                   ? "%s: unexpected argument '%s' (a lock name has no spaces; options are "
                     "key=value)"
                   : "%s: unexpected argument '%s' (options are key=value)",
                   vd->name, proto_quote(quoted, w->s, w->len));
        return -1;
    }
    if (id < 0) {
        if (keylen == 0) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: option '%s' has no key",
                       vd->name, proto_quote(quoted, w->s, w->len));
        } else {
            proto_fail(err, PROTO_ERR_PROTO, "%s: unknown option '%s'",
                       vd->name, proto_quote(quoted, w->s, keylen));
        }
        return -1;
    }
    def = &proto_opts[id];
    if (!(vd->opts & PROTO_OPT_BIT(id))) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: unknown option '%s'", vd->name, def->key);
        return -1;
    }
    if (*seen & PROTO_OPT_BIT(id)) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: option '%s' given twice",
                   vd->name, def->key);
        return -1;
    }
    *seen |= PROTO_OPT_BIT(id);

    if (def->flag) {
        if (eq != NULL) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: option '%s' takes no value",
                       vd->name, def->key);
            return -1;
        }
        *(bool *)(void *)((char *)cmd + def->has_off) = true;
        return 0;
    }

    val = eq + 1;
    vallen = w->len - keylen - 1;
    if (vallen == 0) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: option '%s' has no value",
                   vd->name, def->key);
        return -1;
    }
    if (def->set(def, val, vallen, cmd, vd->name, err) != 0) {
        return -1;
    }
    *(bool *)(void *)((char *)cmd + def->has_off) = true;
    return 0;
}

/*
 * Whether the line gave every option its verb requires; if not, fill err
 * for the first one missing.  seen holds the options given.
 */
static bool
proto_has_required(const struct proto_verbdef *vd, enum proto_verb verb, uint32_t seen,
                   struct proto_error *err)
{
    size_t i;

    for (i = 0; i < sizeof(proto_required) / sizeof(proto_required[0]); i++) {
        const struct proto_required *rq = &proto_required[i];

        if (rq->verb == verb && !(seen & PROTO_OPT_BIT(rq->opt))) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: missing %s=%s", vd->name,
                       proto_opts[rq->opt].key, rq->why);
            return false;
        }
    }
    return true;
}

int
proto_parse(const char *line, size_t len, struct proto_cmd *cmd,
            struct proto_error *err)
{
    const struct proto_verbdef *vd = NULL;
    struct proto_lexer lx;
    struct proto_word w, prev = { 0 };
    char quoted[PROTO_QUOTE_MAX];
    uint32_t seen = 0;
    bool pending = false;   /* w holds a word read after the names, not parsed yet */
    int i;

    if (line == NULL) {
        len = 0;
    }
    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    lx.p = line;
    lx.end = line + len;
    memset(cmd, 0, sizeof(*cmd));

    if (!proto_next_word(&lx, &w)) {
        proto_fail(err, PROTO_ERR_PROTO, "empty line");
        return -1;
    }
    for (i = 0; i < PROTO_VERB_COUNT; i++) {
        if (proto_word_is(w.s, w.len, proto_verbs[i].name)) {
            vd = &proto_verbs[i];
            cmd->verb = (enum proto_verb)i;
            break;
        }
    }
    if (vd == NULL) {
        const char *near = proto_nearest_verb(w.s, w.len);

        proto_fail(err, PROTO_ERR_UNKNOWN, "unknown verb '%s' (%s%sHELP lists the verbs)",
                   proto_quote(quoted, w.s, w.len), near != NULL ? near : "",
                   near != NULL ? "? " : "");
        return -1;
    }

    switch (vd->args) {
    case PROTO_ARGS_NAME:
    case PROTO_ARGS_NAMES:
        if (!proto_next_word(&lx, &w)) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: missing lock name", vd->name);
            return -1;
        }
        if (proto_add_name(vd, &w, cmd, err) != 0) {
            return -1;
        }
        /* More names: the bare words up to the first option (w, then pending). */
        while (vd->args == PROTO_ARGS_NAMES && (pending = proto_next_word(&lx, &w))
               && proto_is_name(&w)) {
            pending = false;
            if (proto_add_name(vd, &w, cmd, err) != 0) {
                return -1;
            }
        }
        break;
    case PROTO_ARGS_WORD:
        if (proto_next_word(&lx, &w)) {
            if (proto_check_word(&w, PROTO_WORD_MAX, vd->name, "word", err) != 0) {
                return -1;
            }
            cmd->word = w.s;
            cmd->word_len = w.len;
        }
        break;
    case PROTO_ARGS_SECRET:
        /* Checked by the caller; never echoed, so no proto_check_word(). */
        if (!proto_next_word(&lx, &w)) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: missing password", vd->name);
            return -1;
        }
        cmd->word = w.s;
        cmd->word_len = w.len;
        break;
    case PROTO_ARGS_NONE:
        break;
    }

    while (pending || proto_next_word(&lx, &w)) {
        pending = false;
        if (vd->opts == 0) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: too many arguments", vd->name);
            return -1;
        }
        if (proto_parse_option(vd, &w, seen != 0 ? &prev : NULL, &seen, cmd, err) != 0) {
            return -1;
        }
        prev = w;
    }
    if (!proto_has_required(vd, cmd->verb, seen, err)) {
        return -1;
    }
    if (cmd->has_permit && !cmd->has_fence_value && !cmd->has_token) {
        proto_fail(err, PROTO_ERR_PROTO, "CHECK: 'permit' goes with fence=");
        return -1;
    }
    if (cmd->verb == PROTO_CHECK && !cmd->has_fence_value && !cmd->has_token) {
        proto_fail(err, PROTO_ERR_PROTO, "CHECK: missing fence= or token= (the grant to "
                   "check: the fence it was told, or a lease's token)");
        return -1;
    }
    for (i = 0; i < (int)(sizeof(proto_exclusives) / sizeof(proto_exclusives[0])); i++) {
        const struct proto_exclusive *ex = &proto_exclusives[i];

        if ((seen & PROTO_OPT_BIT(ex->a)) && (seen & PROTO_OPT_BIT(ex->b))) {
            proto_fail(err, PROTO_ERR_PROTO, "%s: '%s' and '%s' cannot go together%s",
                       vd->name, proto_opts[ex->a].key, proto_opts[ex->b].key, ex->why);
            return -1;
        }
    }
    if (cmd->nnames > 1 && (cmd->shared || cmd->has_limit)) {
        proto_fail(err, PROTO_ERR_PROTO, "%s: '%s' takes one name (a set of names is "
                   "held exclusively)", vd->name, cmd->shared ? "shared" : "limit");
        return -1;
    }
    return 0;
}

const char *
proto_verb_name(enum proto_verb verb)
{
    if ((unsigned)verb >= PROTO_VERB_COUNT) {
        return "?";
    }
    return proto_verbs[verb].name;
}

const char *
proto_errcode_name(enum proto_errcode code)
{
    size_t n = sizeof(proto_errcodes) / sizeof(proto_errcodes[0]);

    if ((size_t)code >= n || proto_errcodes[code] == NULL) {
        return "?";
    }
    return proto_errcodes[code];
}

/*
 * Reply builder.
 */

/*
 * Step r->len back to a place where "..." can follow within the room,
 * without leaving half of a \xHH escape behind.
 */
static void
proto_reply_backoff(struct proto_reply *r)
{
    size_t at = PROTO_REPLY_ROOM - PROTO_ELLIPSIS_LEN;
    size_t k;

    if (r->len <= at) {
        return;
    }
    /* An escape that starts in the 3 bytes before 'at' would be cut. */
    for (k = 1; k <= 3 && k <= at; k++) {
        if (r->buf[at - k] == '\\' && (k == 1 || r->buf[at - k + 1] == 'x')) {
            at -= k;
            break;
        }
    }
    r->len = at;
}

/*
 * Append s/len escaped under mode.  When it does not fit, write what
 * does, end the reply in "..." and ignore every later append.
 */
static void
proto_reply_put(struct proto_reply *r, const char *s, size_t len, enum proto_esc mode)
{
    size_t before;

    if (r->truncated) {
        return;
    }
    if (r->len + proto_esc_total(s, len, mode) <= PROTO_REPLY_ROOM) {
        r->len += proto_esc_copy(r->buf + r->len, s, len, mode);
        return;
    }
    before = r->len;
    proto_reply_backoff(r);
    if (r->len < before) {
        /* Bytes already written were dropped: nothing of s may follow
           them, or the cut line would not be a prefix of the whole one
           (found by tests/fuzz/fuzz_proto.c). */
        len = 0;
    }
    r->len += proto_esc_cut(r->buf + r->len, PROTO_REPLY_ROOM - r->len, s, len, mode);
    r->truncated = true;
}

void
proto_reply_start(struct proto_reply *r, const char *status)
{
    r->len = 0;
    r->truncated = false;
    if (status != NULL) {
        proto_reply_put(r, status, strlen(status), PROTO_ESC_WORD);
    }
}

void
proto_reply_word(struct proto_reply *r, const char *word, size_t len)
{
    if (word == NULL || len == 0) {
        return;
    }
    proto_reply_put(r, " ", 1, PROTO_ESC_RAW);
    proto_reply_put(r, word, len, PROTO_ESC_WORD);
}

void
proto_reply_words(struct proto_reply *r, const char *text, size_t len)
{
    const char *sp;

    while (text != NULL && len > 0 && (sp = memchr(text, ' ', len)) != NULL) {
        proto_reply_word(r, text, (size_t)(sp - text));
        len -= (size_t)(sp - text) + 1;
        text = sp + 1;
    }
    proto_reply_word(r, text, len);
}

/* Append " key=": the start of a key=value option. */
static void
proto_reply_key(struct proto_reply *r, const char *key)
{
    proto_reply_put(r, " ", 1, PROTO_ESC_RAW);
    if (key != NULL) {
        proto_reply_put(r, key, strlen(key), PROTO_ESC_WORD);
    }
    proto_reply_put(r, "=", 1, PROTO_ESC_RAW);
}

void
proto_reply_int(struct proto_reply *r, const char *key, int64_t value)
{
    char num[24];
    int n;

    proto_reply_key(r, key);
    n = snprintf(num, sizeof(num), "%" PRId64, value);
    if (n > 0) {
        proto_reply_put(r, num, (size_t)n, PROTO_ESC_RAW);
    }
}

void
proto_reply_str(struct proto_reply *r, const char *key, const char *value)
{
    proto_reply_key(r, key);
    if (value != NULL) {
        proto_reply_put(r, value, strlen(value), PROTO_ESC_WORD);
    }
}

void
proto_reply_text(struct proto_reply *r, const char *text)
{
    if (text == NULL || text[0] == '\0') {
        return;
    }
    proto_reply_put(r, " ", 1, PROTO_ESC_RAW);
    proto_reply_put(r, text, strlen(text), PROTO_ESC_TEXT);
}

void
proto_reply_end(struct proto_reply *r)
{
    /* Content never holds a LF (it is escaped), so a LF means "ended". */
    if (r->len > 0 && r->buf[r->len - 1] == '\n') {
        return;
    }
    r->buf[r->len++] = '\n';      /* puts leave this byte free */
}

void
proto_reply_error(struct proto_reply *r, enum proto_errcode code, const char *text)
{
    proto_reply_start(r, "ERR");
    proto_reply_word(r, proto_errcode_name(code), strlen(proto_errcode_name(code)));
    proto_reply_text(r, text);
    proto_reply_end(r);
}
