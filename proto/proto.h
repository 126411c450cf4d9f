/*
 * proto.h: the redlockd line protocol, version 1.
 *
 * A pure module: bytes of one request line in, a command struct or a
 * precise error out; and a small builder for reply lines.  It includes
 * neither libevent nor hiredis and keeps no global state, so it can be
 * unit-tested and fuzzed on its own.  proto/PROTOCOL.md is the normative
 * specification; this header is its C face.
 */
#ifndef REDLOCKD_PROTO_H
#define REDLOCKD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION       1
#define PROTO_NAME_MAX      250      /* longest lock name, bytes */
#define PROTO_WORD_MAX      250      /* longest PING word, bytes */
#define PROTO_NUMBER_MAX    INT64_C(4000000000000) /* largest ttl=/wait= value, ms */
#define PROTO_WAIT_INF      (-1)     /* wait=inf */
#define PROTO_PERMIT_MAX    999      /* largest permit= of CHECK (a counted name has
                                        at most 1000 permits) */
#define PROTO_ERRTEXT_MAX   160      /* room for an error text, with NUL */
#define PROTO_REPLY_MAX     2048     /* longest reply line, with LF */
#define PROTO_TOKEN_LEN     32       /* owner token: lowercase hex digits */
#define PROTO_LABEL_MAX     64       /* longest holder label (label=), bytes */
#define PROTO_SET_MAX       64       /* most names one LOCK, TRYLOCK, UNLOCK or
                                        EXTEND takes (a set, held all at once) */

/* Request verbs; PROTO_VERB_COUNT is not a verb. */
enum proto_verb {
    PROTO_LOCK,
    PROTO_TRYLOCK,
    PROTO_UNLOCK,
    PROTO_STATUS,
    PROTO_EXTEND,
    PROTO_PING,
    PROTO_VERSION_VERB,
    PROTO_HELP,
    PROTO_QUIT,
    PROTO_STATS,
    PROTO_AUTH,
    PROTO_LIST,
    PROTO_WATCH,
    PROTO_UNWATCH,
    PROTO_BREAK,
    PROTO_CHECK,
    PROTO_VERB_COUNT
};

/* Error classes of `ERR <CODE> <text>` replies (PROTOCOL.md, "Errors"). */
enum proto_errcode {
    PROTO_ERR_NONE,
    PROTO_ERR_PROTO,      /* malformed line or option */
    PROTO_ERR_UNKNOWN,    /* unknown verb */
    PROTO_ERR_TOOLONG,    /* line over limits.max_line_bytes */
    PROTO_ERR_LIMIT,      /* max_clients or max_locks_per_client */
    PROTO_ERR_NOQUORUM,   /* fewer than a quorum of masters answered */
    PROTO_ERR_SHUTDOWN,   /* the daemon is stopping */
    PROTO_ERR_AUTH,       /* AUTH required first, or a wrong password */
    PROTO_ERR_TIMEOUT,    /* limits.idle_timeout_ms passed (then closed) */
    PROTO_ERR_KIND,       /* the name is held or waited for as another kind */
    PROTO_ERR_DENIED      /* the request needs the admin right (BREAK) */
};

/* What a LOCK's lease is bound to (mode=). */
enum proto_mode {
    PROTO_MODE_SESSION,   /* the connection: renewed, released on close */
    PROTO_MODE_LEASE      /* nothing: a token and a ttl, until UNLOCK/expiry */
};

/*
 * One parsed request.  name and word point into the line given to
 * proto_parse() and are not NUL-terminated: they are valid only as long
 * as that line's bytes are.
 */
struct proto_cmd {
    enum proto_verb verb;       /* which request */
    const char      *name;      /* lock name, or NULL when the verb has none; the
                                   first of names[] when the verb takes several */
    size_t          name_len;   /* bytes in name, 1..PROTO_NAME_MAX */
    size_t          nnames;     /* names given: 1..PROTO_SET_MAX for LOCK, TRYLOCK,
                                   UNLOCK and EXTEND (no two the same), 1 for the
                                   other verbs with a name, else 0 */
    struct proto_name {
        const char  *s;         /* the name's first byte, in the line */
        size_t      len;        /* bytes, 1..PROTO_NAME_MAX */
    }               names[PROTO_SET_MAX]; /* in the order given; names[0] is name */
    bool            has_ttl;    /* ttl= was given */
    int64_t         ttl_ms;     /* ttl= value, ms (range is checked by the caller) */
    bool            has_wait;   /* wait= was given */
    int64_t         wait_ms;    /* wait= value, ms, or PROTO_WAIT_INF */
    const char      *word;      /* PING argument, AUTH password or LIST prefix,
                                   or NULL */
    size_t          word_len;   /* bytes in word */
    bool            has_mode;   /* mode= was given */
    int64_t         mode;       /* mode= value, an enum proto_mode */
    bool            has_token;  /* token= was given */
    const char      *token;     /* token= value, PROTO_TOKEN_LEN lowercase hex
                                   digits, not NUL-terminated; NULL if absent */
    bool            fence;      /* the bare word "fence" was given */
    bool            has_fence_value; /* CHECK's fence= was given */
    int64_t         fence_value;/* CHECK's fence= value: a fencing token, >= 1 */
    bool            has_permit; /* CHECK's permit= was given */
    int64_t         permit;     /* CHECK's permit= value: 0..PROTO_PERMIT_MAX */
    bool            has_limit;  /* limit= was given */
    int64_t         limit;      /* limit= value: holders at once, >= 1 (the upper
                                   bound is checked by the caller) */
    bool            shared;     /* the bare word "shared" was given */
    bool            has_label;  /* label= was given */
    const char      *label;     /* label= value: 1..PROTO_LABEL_MAX bytes of
                                   0x21-0x7E, not NUL-terminated; NULL if absent */
    size_t          label_len;  /* bytes in label */
    bool            has_delay;  /* delay= was given */
    int64_t         delay_ms;   /* delay= value: the lock-delay, ms, >= 0 (the upper
                                   bound is checked by the caller) */
};

/* Why a line was refused: the class and a one-line text for the client. */
struct proto_error {
    enum proto_errcode code;            /* PROTO_ERR_PROTO or PROTO_ERR_UNKNOWN */
    char               text[PROTO_ERRTEXT_MAX]; /* printable ASCII, NUL-terminated */
};

/*
 * Parse one request line.
 *
 * line/len: the bytes of the line without its LF; a single trailing CR
 * is ignored.  The bytes need not be NUL-terminated and are not changed.
 * Words are separated by one or more spaces; leading and trailing spaces
 * are ignored.  The verb, option keys and the word "inf" are
 * case-insensitive.
 *
 * Returns 0 and fills cmd, or -1 and fills err (cmd is then undefined).
 * Error texts name what is wrong and where (the word, the option, the
 * offending byte in hex) and never copy untrusted bytes unescaped.
 */
int proto_parse(const char *line, size_t len, struct proto_cmd *cmd,
                struct proto_error *err);

/* The upper-case name of a verb ("LOCK"), or "?" when out of range. */
const char *proto_verb_name(enum proto_verb verb);

/* The CODE word of an error class ("PROTO", "NOQUORUM"); "?" for
 * PROTO_ERR_NONE or an unknown value. */
const char *proto_errcode_name(enum proto_errcode code);

/*
 * The HELP text: a NULL-terminated array of lines without "HELP " and
 * without LF, one per verb, in the order of enum proto_verb.
 */
extern const char *const proto_help[];

/*
 * Reply builder.  A reply is one line: a status word, then words and
 * key=value options separated by single spaces, then LF.  The builder
 * never overflows: when the reply would exceed PROTO_REPLY_MAX it is cut
 * and ends in "..." (only free text can be that long); after a cut,
 * later appends are ignored.  Empty words and empty text are skipped.
 * buf is not NUL-terminated: len is what counts.
 *
 * Usage:
 *     struct proto_reply r;
 *     proto_reply_start(&r, "OK");
 *     proto_reply_word(&r, name, name_len);
 *     proto_reply_int(&r, "validity", 2900);
 *     proto_reply_end(&r);          -> r.buf, r.len: "OK demo validity=2900\n"
 */
struct proto_reply {
    char   buf[PROTO_REPLY_MAX];    /* the line, LF-terminated after end() */
    size_t len;                     /* bytes used in buf */
    bool   truncated;               /* free text was cut to fit */
};

/* Begin a reply with its status word (OK, BUSY, ERR, !, ...). */
void proto_reply_start(struct proto_reply *r, const char *status);

/*
 * Append one word (a lock name, a PING word).  Bytes outside 0x21-0x7E
 * are written as \xHH so that a reply stays one printable line; a
 * backslash is copied as it is (texts escaped by proto_escape() are not
 * escaped twice).
 */
void proto_reply_word(struct proto_reply *r, const char *word, size_t len);

/*
 * Append the words of text (len bytes, words separated by single spaces:
 * a lock name, or the names of a set as the daemon joins them), each as
 * proto_reply_word() appends one.
 */
void proto_reply_words(struct proto_reply *r, const char *text, size_t len);

/* Append " key=value" with a signed decimal value. */
void proto_reply_int(struct proto_reply *r, const char *key, int64_t value);

/* Append " key=value" with a string value (escaped as in _word). */
void proto_reply_str(struct proto_reply *r, const char *key, const char *value);

/*
 * Append free text (the text of an ERR reply): a space, then the text
 * with every byte outside 0x20-0x7E escaped as \xHH.
 */
void proto_reply_text(struct proto_reply *r, const char *text);

/* Terminate the line with LF.  After this, buf/len hold the reply. */
void proto_reply_end(struct proto_reply *r);

/*
 * Build a whole error reply: "ERR <CODE> <text>\n".  text may be any
 * bytes (it is escaped); it is cut with "..." to fit.
 */
void proto_reply_error(struct proto_reply *r, enum proto_errcode code,
                       const char *text);

/*
 * Escape untrusted bytes for a log line or an error text: printable
 * ASCII (0x20-0x7E except backslash) is copied, everything else becomes
 * \xHH.  Writes at most size-1 bytes plus NUL into out (size > 0); a cut
 * string ends in "...".  Returns out.
 */
char *proto_escape(char *out, size_t size, const char *in, size_t len);

#endif /* REDLOCKD_PROTO_H */
