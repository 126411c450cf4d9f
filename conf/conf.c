/*
 * conf.c: load and check the redlockd configuration (see conf.h).
 *
 * The loader works in three passes, the shape of twemproxy's nc_conf.c,
 * after a look at the raw events that refuses input libyaml would take
 * minutes over (deep nesting, thousands of anchors or %TAG lines):
 *
 *   1. libyaml loads the whole file into a document, so that every node
 *      keeps its start mark and every message can name a line and a
 *      column; the top level must be a mapping.
 *   2. each section and key is looked up in conf_directives[]; the value
 *      is parsed by its type, range-checked and stored at the offset the
 *      table gives.  Unknown and duplicate keys are reported here.
 *   3. the settings are checked against each other (ttl order, node
 *      timeout below the ttl, at least one listener, ...).
 *
 * Problems are collected in a conf_state, sorted into file order and only
 * then handed to the caller's conf_msgs.  The walk never follows the YAML
 * graph deeper than a section's values, so aliases that form cycles,
 * deep nesting and huge unknown subtrees cost nothing.
 */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <yaml.h>

#include "conf/conf.h"

#define CONF_FILE_MAX       (1024 * 1024)   /* largest file read, bytes */
#define CONF_NOTES_MAX      100     /* messages kept from one load */
#define CONF_DEPTH_MAX      64      /* deepest nesting of collections */
#define CONF_ANCHORS_MAX    256     /* most anchors (&name) in a file */
#define CONF_YAML_DIRS_MAX  64      /* most %YAML/%TAG directive lines */
#define CONF_QUOTE_MAX      64      /* bytes of a value shown in a message */
#define CONF_QUOTE_SIZE     (CONF_QUOTE_MAX * 4 + 4) /* escaped, "...", NUL */
#define CONF_WHY_SIZE       320     /* room for conf_parse_addr()'s reason */
#define CONF_ERR_SIZE       1024    /* room for one value's error text */
#define CONF_NAME_SIZE      64      /* room for "section.key" */
#define CONF_LIST_MAX       64      /* most entries of a list (tls.client_names) */

/* How a directive's value is parsed and what its field holds. */
enum conf_type {
    CONF_T_MS,          /* decimal integer of milliseconds: int64_t */
    CONF_T_INT,         /* decimal integer count: int64_t */
    CONF_T_DOUBLE,      /* decimal number: double */
    CONF_T_BOOL,        /* true or false: bool */
    CONF_T_STRING,      /* any scalar, at most max bytes when max > 0: char * */
    CONF_T_ADDR,        /* "host:port", "[v6]:port" or "" (off): struct conf_addr */
    CONF_T_MODE,        /* octal permission bits "0660": unsigned */
    CONF_T_ENUM,        /* one of the directive's names: an enum, stored as int */
    CONF_T_MASTERS,     /* sequence of addresses, unix: allowed: struct conf_addr[] */
    CONF_T_LIST         /* sequence of printable words, each at most max bytes:
                           struct conf_list */
};

static const char *const conf_level_names[] = {
    [CONF_LOG_ERROR] = "error",
    [CONF_LOG_WARN]  = "warn",
    [CONF_LOG_INFO]  = "info",
    [CONF_LOG_DEBUG] = "debug",
    NULL
};

static const char *const conf_fence_names[] = {
    [CONF_FENCE_REQUEST] = "request",
    [CONF_FENCE_ALWAYS]  = "always",
    NULL
};

static const char *const conf_show_labels_names[] = {
    [CONF_LABELS_ALL]   = "all",
    [CONF_LABELS_ADMIN] = "admin",
    NULL
};

/* Directive flags. */
#define CONF_NO_RELOAD      0x1     /* a reload cannot change it; restart instead */

/*
 * One configuration setting.  The table below is the schema: the loader,
 * the defaults and conf_free() are all driven by it.
 */
struct conf_directive {
    const char     *section;    /* top-level key: "lock" */
    const char     *key;        /* key in the section, NULL for a top-level value */
    enum conf_type type;        /* how the value is parsed */
    size_t         offset;      /* offsetof(struct conf, field) */
    double         min;         /* smallest value of a number */
    double         max;         /* largest number; longest string (0: any) */
    unsigned       flags;       /* CONF_NO_RELOAD */
    const char     *def;        /* the default as YAML text, NULL when required */
    const char     *doc;        /* one line for humans */
    const char *const *names;   /* CONF_T_ENUM: the words, by value, NULL-terminated */
};

static const struct conf_directive conf_directives[] = {
    { "listen", "tcp", CONF_T_ADDR, offsetof(struct conf, tcp),
      0, 0, CONF_NO_RELOAD, "127.0.0.1:7379",
      "TCP address for clients, \"host:port\" or \"[v6]:port\"; \"\" disables", NULL },
    { "listen", "unix", CONF_T_STRING, offsetof(struct conf, unix_path),
      0, CONF_PATH_MAX - 1, CONF_NO_RELOAD, "/run/redlockd/redlockd.sock",
      "Unix socket path for clients; \"\" disables", NULL },
    { "listen", "unix_mode", CONF_T_MODE, offsetof(struct conf, unix_mode),
      0, 0777, CONF_NO_RELOAD, "0660",
      "permission bits of the Unix socket file, octal", NULL },
    { "listen", "tls", CONF_T_ADDR, offsetof(struct conf, tls),
      0, 0, CONF_NO_RELOAD, "",
      "TCP address for clients over TLS, \"host:port\"; \"\" disables", NULL },

    { "tls", "cert_file", CONF_T_STRING, offsetof(struct conf, tls_cert_file),
      0, 4096, 0, "",
      "PEM certificate (chain) of listen.tls; required with it", NULL },
    { "tls", "key_file", CONF_T_STRING, offsetof(struct conf, tls_key_file),
      0, 4096, 0, "",
      "PEM private key of tls.cert_file; required with listen.tls", NULL },
    { "tls", "client_ca_file", CONF_T_STRING, offsetof(struct conf, tls_client_ca_file),
      0, 4096, 0, "",
      "PEM CA certificates; when set, TLS clients must present a certificate they "
      "signed (and need no AUTH)", NULL },
    { "tls", "client_crl_file", CONF_T_STRING, offsetof(struct conf, tls_client_crl_file),
      0, 4096, 0, "",
      "PEM CRLs of the client CAs; a revoked client certificate fails the handshake; "
      "needs client_ca_file", NULL },
    { "tls", "client_names", CONF_T_LIST, offsetof(struct conf, tls_client_names),
      0, 255, 0, "",
      "names a client certificate must carry, one of them (a DNS subjectAltName, or the "
      "CN when it has none); empty: any; needs client_ca_file", NULL },
    { "tls", "ciphers", CONF_T_STRING, offsetof(struct conf, tls_ciphers),
      0, 1024, 0, "ECDHE+AESGCM:ECDHE+CHACHA20",
      "cipher suites of TLS 1.2, OpenSSL cipher-list syntax", NULL },
    { "tls", "ciphersuites", CONF_T_STRING, offsetof(struct conf, tls_ciphersuites),
      0, 1024, 0, "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
      "cipher suites of TLS 1.3, colon-separated OpenSSL names", NULL },

    { "masters", NULL, CONF_T_MASTERS, offsetof(struct conf, masters),
      1, CONF_MASTERS_MAX, CONF_NO_RELOAD, NULL,
      "the independent Redis masters, \"host:port\", \"rediss://host:port\" (TLS) or "
      "\"unix:/path\"", NULL },

    { "redis", "username", CONF_T_STRING, offsetof(struct conf, redis_username),
      0, 0, 0, "",
      "ACL user for AUTH; needs a password", NULL },
    { "redis", "password", CONF_T_STRING, offsetof(struct conf, redis_password),
      0, 0, 0, "",
      "AUTH password sent to every master; \"\" disables AUTH", NULL },
    { "redis", "connect_timeout_ms", CONF_T_MS,
      offsetof(struct conf, connect_timeout_ms),
      1, 60000, 0, "500",
      "how long a connection to a master may take, ms", NULL },
    { "redis", "max_pending", CONF_T_INT, offsetof(struct conf, max_pending),
      1, 1000000, 0, "1024",
      "calls written to a master and unanswered at once; more wait in the daemon's queue "
      "(renewals and releases first, reads last)", NULL },
    { "redis", "down_after_ms", CONF_T_MS, offsetof(struct conf, down_after_ms),
      1, 600000, 0, "2000",
      "silence with requests pending before a master is dropped, ms", NULL },
    { "redis", "tls_ca_file", CONF_T_STRING, offsetof(struct conf, redis_tls_ca_file),
      0, 4096, 0, "",
      "PEM CAs that sign the rediss:// masters' certificates; \"\": the system store", NULL },
    { "redis", "tls_cert_file", CONF_T_STRING, offsetof(struct conf, redis_tls_cert_file),
      0, 4096, 0, "",
      "PEM client certificate presented to rediss:// masters; needs tls_key_file", NULL },
    { "redis", "tls_key_file", CONF_T_STRING, offsetof(struct conf, redis_tls_key_file),
      0, 4096, 0, "",
      "PEM private key of redis.tls_cert_file", NULL },
    { "redis", "tls_server_name", CONF_T_STRING, offsetof(struct conf, redis_tls_server_name),
      0, CONF_HOST_MAX - 1, 0, "",
      "name the rediss:// masters' certificates must carry; \"\": each master's host", NULL },

    { "lock", "default_ttl_ms", CONF_T_MS, offsetof(struct conf, default_ttl_ms),
      1, 86400000, 0, "30000",
      "lease written to the masters when LOCK has no ttl=, ms", NULL },
    { "lock", "min_ttl_ms", CONF_T_MS, offsetof(struct conf, min_ttl_ms),
      1, 86400000, 0, "100",
      "smallest ttl= a client may ask for, ms", NULL },
    { "lock", "max_ttl_ms", CONF_T_MS, offsetof(struct conf, max_ttl_ms),
      1, 86400000, 0, "3600000",
      "largest ttl= a client may ask for, ms", NULL },
    { "lock", "node_timeout_ms", CONF_T_MS, offsetof(struct conf, node_timeout_ms),
      1, 60000, 0, "50",
      "deadline for one master's reply in a round, ms", NULL },
    { "lock", "drift_factor", CONF_T_DOUBLE, offsetof(struct conf, drift_factor),
      0, 0.5, 0, "0.01",
      "clock drift allowance: drift = ttl * drift_factor + 2 ms", NULL },
    { "lock", "retry_delay_ms", CONF_T_MS, offsetof(struct conf, retry_delay_ms),
      1, 60000, 0, "200",
      "a blocked LOCK retries after a random 0..retry_delay_ms, ms", NULL },
    { "lock", "key_prefix", CONF_T_STRING, offsetof(struct conf, key_prefix),
      0, CONF_KEY_PREFIX_MAX, CONF_NO_RELOAD, "redlock:",
      "prepended to a lock name to form the Redis key (\"\" to share keys with Redlock "
      "libraries that lock bare names)", NULL },
    { "lock", "fence", CONF_T_ENUM, offsetof(struct conf, fence),
      0, 0, 0, "request",
      "fencing tokens: request (LOCK ... fence) or always", conf_fence_names },
    { "lock", "restart_quarantine", CONF_T_BOOL,
      offsetof(struct conf, restart_quarantine),
      0, 0, 0, "true",
      "a master up for less than max_ttl_ms does not count toward a quorum", NULL },
    { "lock", "clock_check", CONF_T_BOOL, offsetof(struct conf, clock_check),
      0, 0, 0, "true",
      "a master whose clock steps against the daemon's does not count toward a quorum "
      "for max_ttl_ms", NULL },
    { "lock", "max_limit", CONF_T_INT, offsetof(struct conf, max_limit),
      1, 1000, 0, "1000",
      "largest limit= of a counted LOCK (each master reads up to this many permits)", NULL },
    { "lock", "delay_ms", CONF_T_MS, offsetof(struct conf, delay_ms),
      0, 86400000, 0, "0",
      "lock-delay of an exclusive session-mode LOCK without delay=: after its hold ends "
      "without UNLOCK, nobody is granted the name for this long, ms; 0 for none", NULL },

    { "limits", "max_clients", CONF_T_INT, offsetof(struct conf, max_clients),
      1, 1000000, 0, "10000",
      "client connections at once", NULL },
    { "limits", "unix_reserved", CONF_T_INT, offsetof(struct conf, unix_reserved),
      0, 1000000, 0, "16",
      "of max_clients, connections only the Unix socket may take (unset: 16, or a "
      "quarter of max_clients when that is less)", NULL },
    { "limits", "max_clients_per_source", CONF_T_INT,
      offsetof(struct conf, max_clients_per_source),
      0, 1000000, 0, "0",
      "TCP and TLS connections from one address group at once; 0 for no limit", NULL },
    { "limits", "max_unauthenticated", CONF_T_INT, offsetof(struct conf, max_unauthenticated),
      1, 1000000, 0, "256",
      "TCP and TLS connections at once still in the TLS handshake or before AUTH", NULL },
    { "limits", "max_unauthenticated_per_source", CONF_T_INT,
      offsetof(struct conf, max_unauthenticated_per_source),
      1, 1000000, 0, "64",
      "of max_unauthenticated, those from one address group", NULL },
    { "limits", "max_watches", CONF_T_INT, offsetof(struct conf, max_watches),
      1, 10000000, 0, "10000",
      "WATCHes open at once over all sessions (each name watched is one subscription "
      "per master)", NULL },
    { "limits", "reads_per_second", CONF_T_INT, offsetof(struct conf, reads_per_second),
      1, 1000000, 0, "100",
      "STATUS and WATCH requests one session may send a second (as many at once)", NULL },
    { "limits", "max_reads_in_flight", CONF_T_INT, offsetof(struct conf, max_reads_in_flight),
      1, 100000, 0, "64",
      "reads of the masters (STATUS, a WATCHed name's read) in flight at once over all "
      "sessions, one per session; the rest wait their turn, round-robin", NULL },
    { "limits", "read_wait_ms", CONF_T_MS, offsetof(struct conf, read_wait_ms),
      100, 3600000, 0, "10000",
      "longest a STATUS waits for its turn to read before ERR LIMIT, ms", NULL },
    { "limits", "max_line_bytes", CONF_T_INT, offsetof(struct conf, max_line_bytes),
      300, 1048576, 0, "1024",
      "longest request line without its LF, bytes", NULL },
    { "limits", "max_locks_per_client", CONF_T_INT,
      offsetof(struct conf, max_locks_per_client),
      1, 1000000, 0, "1024",
      "locks one client session may hold", NULL },
    { "limits", "idle_timeout_ms", CONF_T_MS, offsetof(struct conf, idle_timeout_ms),
      100, 86400000, 0, "30000",
      "time to finish a request line, or to read pending replies, ms", NULL },
    { "limits", "auth_timeout_ms", CONF_T_MS, offsetof(struct conf, auth_timeout_ms),
      100, 3600000, 0, "5000",
      "time from accept for a TCP or TLS connection to finish its TLS handshake and send "
      "AUTH (when needed), ms", NULL },
    { "limits", "max_output_bytes", CONF_T_INT, offsetof(struct conf, max_output_bytes),
      65536, 1073741824, 0, "1048576",
      "unsent reply bytes a client may leave before it is closed", NULL },

    { "auth", "password", CONF_T_STRING, offsetof(struct conf, auth_password),
      0, 250, 0, "",
      "password clients send with AUTH; \"\" disables", NULL },
    { "auth", "admin_password", CONF_T_STRING, offsetof(struct conf, auth_admin_password),
      0, 250, 0, "",
      "password that gives a session the admin right (BREAK); \"\" for none", NULL },
    { "auth", "unix_exempt", CONF_T_BOOL, offsetof(struct conf, auth_unix_exempt),
      0, 0, 0, "true",
      "sessions on the Unix socket need no AUTH", NULL },
    { "auth", "show_labels", CONF_T_ENUM, offsetof(struct conf, show_labels),
      0, 0, 0, "all",
      "who sees the labels of others' holds in STATUS, LIST and WATCH: all or admin",
      conf_show_labels_names },

    { "metrics", "listen", CONF_T_ADDR, offsetof(struct conf, metrics),
      0, 0, CONF_NO_RELOAD, "127.0.0.1:9379",
      "Prometheus /metrics over HTTP, \"host:port\"; \"\" disables", NULL },
    { "metrics", "allow_remote", CONF_T_BOOL, offsetof(struct conf, metrics_allow_remote),
      0, 0, CONF_NO_RELOAD, "false",
      "a metrics.listen that other hosts reach is meant (it has no password)", NULL },
    { "metrics", "max_connections", CONF_T_INT, offsetof(struct conf, metrics_max_connections),
      1, 100000, 0, "16",
      "/metrics connections at once; more are answered 503 and closed", NULL },
    { "metrics", "request_timeout_ms", CONF_T_MS,
      offsetof(struct conf, metrics_request_timeout_ms),
      100, 600000, 0, "5000",
      "time for a /metrics request from its first byte (or the accept) to its reply, ms",
      NULL },

    { "log", "level", CONF_T_ENUM, offsetof(struct conf, log_level),
      0, 0, 0, "info",
      "least severe level logged: error, warn, info or debug", conf_level_names },
};

#define CONF_NDIRECTIVES    (sizeof(conf_directives) / sizeof(conf_directives[0]))


/* One message while a file is loaded; sorted by position at the end. */
struct conf_note {
    size_t line;                /* 1-based, 0 when the message has no position */
    size_t column;              /* 1-based */
    size_t seq;                 /* order of discovery, to keep the sort stable */
    bool   is_error;            /* false for a warning */
    char   *text;               /* malloc'd, the whole message */
};

/* Where a directive was met in the file. */
struct conf_seen {
    bool   set;                 /* the key appears in the file */
    bool   bad;                 /* its value was refused (the default stays) */
    size_t key_line;            /* line of the key, for "first at line" */
    size_t line;                /* position of the value */
    size_t column;
};

/* The state of one conf_load(); lives on its stack. */
struct conf_state {
    const char       *path;     /* file name as given, prefixed to messages */
    struct conf      *conf;     /* the settings being filled */
    yaml_document_t  *doc;      /* the loaded document during pass 2 */
    struct conf_note *notes;    /* malloc'd messages */
    size_t           nnotes;    /* entries used in notes */
    size_t           cap;       /* entries allocated in notes */
    bool             full;      /* CONF_NOTES_MAX reached */
    bool             oom;       /* a message could not be stored */
    bool             bad_top;   /* the top level is not a mapping */
    struct conf_seen seen[CONF_NDIRECTIVES];        /* by directive */
    size_t           section_line[CONF_NDIRECTIVES]; /* by a section's first directive */
};

/*
 * Copy len bytes of untrusted text for a message: printable ASCII except
 * backslash is kept, everything else becomes \xHH; more than
 * (size - 4) / 4 bytes (CONF_QUOTE_MAX in a buffer of CONF_QUOTE_SIZE) are
 * cut and end in "...".  size >= 8.
 */
static const char *
conf_quote(const char *s, size_t len, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, n = 0;

    for (i = 0; i < len && i < (size - 4) / 4 && n + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c >= 0x20 && c < 0x7f && c != '\\') {
            buf[n++] = (char)c;
        } else {
            buf[n++] = '\\';
            buf[n++] = 'x';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 0xf];
        }
    }
    if (i < len && n + 4 <= size) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* The name of a directive as messages show it: "lock.min_ttl_ms", "masters". */
static const char *
conf_name(const struct conf_directive *d, char *buf, size_t size)
{
    if (d->key == NULL) {
        snprintf(buf, size, "%s", d->section);
    } else {
        snprintf(buf, size, "%s.%s", d->section, d->key);
    }
    return buf;
}

/* The directive section.key (key NULL: a top-level value), or -1. */
static int
conf_find(const char *section, const char *key)
{
    size_t i;

    for (i = 0; i < CONF_NDIRECTIVES; i++) {
        const struct conf_directive *d = &conf_directives[i];

        if (strcmp(d->section, section) != 0) {
            continue;
        }
        if ((key == NULL && d->key == NULL) ||
            (key != NULL && d->key != NULL && strcmp(d->key, key) == 0)) {
            return (int)i;
        }
    }
    return -1;
}

/* The first directive of the section name (which has keys), or -1. */
static int
conf_find_section(const char *name)
{
    size_t i;

    for (i = 0; i < CONF_NDIRECTIVES; i++) {
        if (conf_directives[i].key != NULL &&
            strcmp(conf_directives[i].section, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Look up a directive that must exist (used by the cross checks). */
static size_t
conf_must_find(const char *section, const char *key)
{
    int i = conf_find(section, key);

    if (i < 0) {
        abort();    /* the table and the checks disagree: a bug */
    }
    return (size_t)i;
}

/* ---- messages ---- */

static void conf_vnote(struct conf_state *st, size_t line, size_t column,
                       bool is_error, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
static void conf_note_at(struct conf_state *st, size_t line, size_t column,
                         bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void conf_error(struct conf_state *st, const yaml_node_t *node,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conf_warning(struct conf_state *st, const yaml_node_t *node,
                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Append one message; line 0 means the message is about the whole file. */
static void
conf_vnote(struct conf_state *st, size_t line, size_t column, bool is_error,
           const char *fmt, va_list ap)
{
    struct conf_note *note;
    char *body, *text;
    int rc;

    if (st->nnotes >= CONF_NOTES_MAX) {
        if (st->full) {
            return;
        }
        st->full = true;
        /* One more slot for the notice itself, about the whole file. */
        line = 0;
        column = 0;
        is_error = true;
        rc = asprintf(&text, "%s: too many problems, only the first %d are shown",
                      st->path, CONF_NOTES_MAX);
        if (rc < 0) {
            st->oom = true;
            return;
        }
    } else {
        if (vasprintf(&body, fmt, ap) < 0) {
            st->oom = true;
            return;
        }
        if (line > 0) {
            rc = asprintf(&text, "%s:%zu:%zu: %s", st->path, line, column, body);
        } else {
            rc = asprintf(&text, "%s: %s", st->path, body);
        }
        free(body);
        if (rc < 0) {
            st->oom = true;
            return;
        }
    }

    if (st->nnotes == st->cap) {
        size_t cap = st->cap == 0 ? 8 : st->cap * 2;
        struct conf_note *notes = realloc(st->notes, cap * sizeof(*notes));

        if (notes == NULL) {
            free(text);
            st->oom = true;
            return;
        }
        st->notes = notes;
        st->cap = cap;
    }
    note = &st->notes[st->nnotes];
    note->line = line;
    note->column = column;
    note->seq = st->nnotes;
    note->is_error = is_error;
    note->text = text;
    st->nnotes++;
}

static void
conf_note_at(struct conf_state *st, size_t line, size_t column, bool is_error,
             const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conf_vnote(st, line, column, is_error, fmt, ap);
    va_end(ap);
}

static void conf_vnote_node(struct conf_state *st, const yaml_node_t *node, bool is_error,
                            const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* A message at node's start (node NULL: about the whole file). */
static void
conf_vnote_node(struct conf_state *st, const yaml_node_t *node, bool is_error,
                const char *fmt, va_list ap)
{
    size_t line = 0, column = 0;

    if (node != NULL) {
        line = node->start_mark.line + 1;
        column = node->start_mark.column + 1;
    }
    conf_vnote(st, line, column, is_error, fmt, ap);
}

/* An error at node's start (node NULL: about the whole file). */
static void
conf_error(struct conf_state *st, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conf_vnote_node(st, node, true, fmt, ap);
    va_end(ap);
}

/* A warning at node's start. */
static void
conf_warning(struct conf_state *st, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conf_vnote_node(st, node, false, fmt, ap);
    va_end(ap);
}

/* File order: by position, messages without one last, then discovery. */
static int
conf_note_cmp(const void *a, const void *b)
{
    const struct conf_note *x = a, *y = b;
    size_t xl = x->line == 0 ? SIZE_MAX : x->line;
    size_t yl = y->line == 0 ? SIZE_MAX : y->line;

    if (xl != yl) {
        return xl < yl ? -1 : 1;
    }
    if (x->column != y->column) {
        return x->column < y->column ? -1 : 1;
    }
    if (x->seq != y->seq) {
        return x->seq < y->seq ? -1 : 1;
    }
    return 0;
}

/* ---- values ---- */

/*
 * Parse a decimal integer: an optional '-' and digits, nothing else.
 * A value beyond int64_t is clamped (and so is out of every range).
 */
static int
conf_parse_int(const char *s, int64_t *out)
{
    bool neg = false;
    int64_t v = 0;

    if (*s == '-') {
        neg = true;
        s++;
    }
    if (*s == '\0') {
        return -1;
    }
    for (; *s != '\0'; s++) {
        int digit;

        if (*s < '0' || *s > '9') {
            return -1;
        }
        digit = *s - '0';
        if (v > (INT64_MAX - digit) / 10) {
            v = INT64_MAX;
        } else if (v != INT64_MAX) {
            v = v * 10 + digit;
        }
    }
    *out = neg ? -v : v;
    return 0;
}

/* Parse a plain decimal number ("0.01", "1e-3"); no hex, inf or nan. */
static int
conf_parse_double(const char *s, double *out)
{
    const char *p;
    char *end;
    bool digit = false;

    for (p = s; *p != '\0'; p++) {
        if (*p >= '0' && *p <= '9') {
            digit = true;
        } else if (strchr(".eE+-", *p) == NULL) {
            return -1;
        }
    }
    if (!digit) {
        return -1;
    }
    *out = strtod(s, &end);
    if (end == s || *end != '\0') {
        return -1;
    }
    if (!isfinite(*out)) {
        *out = HUGE_VAL;    /* out of every range */
    }
    return 0;
}

/* Parse a boolean in the YAML 1.1 spellings most people use. */
static int
conf_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = { "true", "yes", "on" };
    static const char *const no[] = { "false", "no", "off" };
    size_t i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* Parse permission bits: 3 or 4 octal digits, at most 0777. */
static int
conf_parse_mode(const char *s, unsigned *out)
{
    size_t i, len = strlen(s);
    unsigned v = 0;

    if (len < 3 || len > 4) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '7') {
            return -1;
        }
        v = v * 8 + (unsigned)(s[i] - '0');
    }
    if (v > 0777) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Empty a list, releasing its strings. */
static void
conf_list_clear(struct conf_list *list)
{
    size_t i;

    for (i = 0; i < list->n; i++) {
        free(list->items[i]);
    }
    free(list->items);
    list->items = NULL;
    list->n = 0;
}

/*
 * Parse text (len bytes, NUL-terminated) as directive d's value and store
 * it in conf.  Returns 0, or -1 with the reason in err (without the
 * directive's name).  conf is changed only on success.
 */
static int
conf_parse_value(const struct conf_directive *d, const char *text, size_t len,
                 struct conf *conf, char *err, size_t errlen)
{
    char q[CONF_QUOTE_SIZE];
    void *field = (char *)conf + d->offset;

    if (memchr(text, '\0', len) != NULL) {
        snprintf(err, errlen, "contains a NUL byte");
        return -1;
    }
    conf_quote(text, len, q, sizeof(q));

    switch (d->type) {
    case CONF_T_MS:
    case CONF_T_INT: {
        int64_t v;

        if (conf_parse_int(text, &v) != 0) {
            snprintf(err, errlen, "expected an integer, got '%s'", q);
            return -1;
        }
        if (v < (int64_t)d->min || v > (int64_t)d->max) {
            snprintf(err, errlen, "%s is out of range %" PRId64 "..%" PRId64,
                     q, (int64_t)d->min, (int64_t)d->max);
            return -1;
        }
        *(int64_t *)field = v;
        return 0;
    }

    case CONF_T_DOUBLE: {
        double v;

        if (conf_parse_double(text, &v) != 0) {
            snprintf(err, errlen, "expected a number, got '%s'", q);
            return -1;
        }
        if (v < d->min || v > d->max) {
            snprintf(err, errlen, "%s is out of range %g..%g", q, d->min, d->max);
            return -1;
        }
        *(double *)field = v;
        return 0;
    }

    case CONF_T_BOOL: {
        bool v;

        if (conf_parse_bool(text, &v) != 0) {
            snprintf(err, errlen, "expected true or false, got '%s'", q);
            return -1;
        }
        *(bool *)field = v;
        return 0;
    }

    case CONF_T_STRING: {
        char *copy;

        if (d->max > 0 && len > (size_t)d->max) {
            snprintf(err, errlen, "too long (%zu bytes, at most %zu)",
                     len, (size_t)d->max);
            return -1;
        }
        copy = strdup(text);
        if (copy == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }

    case CONF_T_ADDR: {
        struct conf_addr addr;
        char why[CONF_WHY_SIZE];

        if (len == 0) {
            memset(field, 0, sizeof(addr));    /* disabled */
            return 0;
        }
        if (conf_parse_addr(text, false, &addr, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "bad address '%s': %s", q, why);
            return -1;
        }
        memcpy(field, &addr, sizeof(addr));
        return 0;
    }

    case CONF_T_MODE: {
        unsigned v;

        if (conf_parse_mode(text, &v) != 0) {
            snprintf(err, errlen,
                     "expected octal permission bits like '0660' (at most 0777), got '%s'",
                     q);
            return -1;
        }
        *(unsigned *)field = v;
        return 0;
    }

    case CONF_T_ENUM: {
        char expected[96];
        size_t i, used = 0;

        for (i = 0; d->names[i] != NULL; i++) {
            if (strcmp(text, d->names[i]) == 0) {
                *(int *)field = (int)i;
                return 0;
            }
        }
        /* "a, b or c" */
        expected[0] = '\0';
        for (i = 0; d->names[i] != NULL && used < sizeof(expected); i++) {
            used += (size_t)snprintf(expected + used, sizeof(expected) - used, "%s%s",
                                     i == 0 ? "" : d->names[i + 1] == NULL ? " or " : ", ",
                                     d->names[i]);
        }
        snprintf(err, errlen, "expected %s, got '%s'", expected, q);
        return -1;
    }

    case CONF_T_LIST:
        if (len == 0) {
            conf_list_clear(field);     /* the default: empty */
            return 0;
        }
        break;

    case CONF_T_MASTERS:
        break;
    }

    snprintf(err, errlen, "cannot be set from a single value");
    return -1;
}

/* Fields computed from others, after the defaults and after a load. */
static void
conf_derive(struct conf *conf)
{
    conf->tcp_enabled = conf->tcp.spec[0] != '\0';
    conf->tls_enabled = conf->tls.spec[0] != '\0';
    conf->unix_enabled = conf->unix_path != NULL && conf->unix_path[0] != '\0';
}

/* conf_defaults(), telling whether every string could be allocated. */
static int
conf_set_defaults(struct conf *conf)
{
    char err[CONF_ERR_SIZE];
    size_t i;
    int rc = 0;

    memset(conf, 0, sizeof(*conf));
    for (i = 0; i < CONF_NDIRECTIVES; i++) {
        const struct conf_directive *d = &conf_directives[i];

        if (d->def == NULL) {
            continue;
        }
        if (conf_parse_value(d, d->def, strlen(d->def), conf, err, sizeof(err)) != 0) {
            rc = -1;
        }
    }
    conf_derive(conf);
    return rc;
}

void
conf_defaults(struct conf *conf)
{
    /* Only a failed strdup() can fail here; the string is then NULL. */
    (void)conf_set_defaults(conf);
}

/* ---- addresses ---- */

static int conf_addr_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
conf_addr_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A host name: letters, digits, '-' and '.'; all digits and dots: IPv4. */
static int
conf_check_host(const char *host, char *err, size_t errlen)
{
    char q[CONF_QUOTE_SIZE];
    unsigned char buf[sizeof(struct in6_addr)];
    const char *p;
    bool numeric = true;

    for (p = host; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;

        if (isascii(c) && isalpha(c)) {
            numeric = false;
        } else if (c == '-') {
            numeric = false;
        } else if (!(isascii(c) && isdigit(c)) && c != '.') {
            return conf_addr_fail(err, errlen, "bad character '%s' in host",
                                  conf_quote(p, 1, q, sizeof(q)));
        }
    }
    if (numeric && inet_pton(AF_INET, host, buf) != 1) {
        return conf_addr_fail(err, errlen, "'%s' is not an IPv4 address",
                              conf_quote(host, strlen(host), q, sizeof(q)));
    }
    return 0;
}

int
conf_parse_addr(const char *spec, bool allow_unix, struct conf_addr *addr,
                char *err, size_t errlen)
{
    char q[CONF_QUOTE_SIZE];
    unsigned char buf[sizeof(struct in6_addr)];
    struct conf_addr a;
    const char *host, *port, *p;
    size_t hostlen, speclen = strlen(spec);
    long v;

    memset(addr, 0, sizeof(*addr));
    memset(&a, 0, sizeof(a));

    if (speclen == 0) {
        return conf_addr_fail(err, errlen, "empty address");
    }

    if (strncmp(spec, "unix:", 5) == 0) {
        const char *path = spec + 5;
        size_t pathlen = speclen - 5;

        if (!allow_unix) {
            return conf_addr_fail(err, errlen, "a unix: socket is not allowed here");
        }
        if (path[0] != '/') {
            return conf_addr_fail(err, errlen, "unix socket path must be absolute");
        }
        if (pathlen >= CONF_PATH_MAX) {
            return conf_addr_fail(err, errlen,
                                  "unix socket path is %zu bytes, at most %d",
                                  pathlen, CONF_PATH_MAX - 1);
        }
        a.is_unix = true;
        memcpy(a.path, path, pathlen + 1);
        memcpy(a.spec, spec, speclen + 1);
        *addr = a;
        return 0;
    }

    if (speclen >= sizeof(a.spec)) {
        return conf_addr_fail(err, errlen, "address is too long (%zu bytes)", speclen);
    }

    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');

        if (close == NULL) {
            return conf_addr_fail(err, errlen, "missing ']'");
        }
        host = spec + 1;
        hostlen = (size_t)(close - host);
        if (close[1] == '\0') {
            return conf_addr_fail(err, errlen, "missing ':port'");
        }
        if (close[1] != ':') {
            return conf_addr_fail(err, errlen, "expected ':port' after ']'");
        }
        port = close + 2;
        if (hostlen == 0) {
            return conf_addr_fail(err, errlen, "empty host");
        }
        if (hostlen >= CONF_HOST_MAX) {
            return conf_addr_fail(err, errlen, "host is %zu bytes, at most %d",
                                  hostlen, CONF_HOST_MAX - 1);
        }
        memcpy(a.host, host, hostlen);
        a.host[hostlen] = '\0';
        if (inet_pton(AF_INET6, a.host, buf) != 1) {
            return conf_addr_fail(err, errlen, "'%s' is not an IPv6 address",
                                  conf_quote(host, hostlen, q, sizeof(q)));
        }
    } else {
        const char *colon = strrchr(spec, ':');

        if (colon == NULL) {
            return conf_addr_fail(err, errlen, "missing ':port'");
        }
        host = spec;
        hostlen = (size_t)(colon - spec);
        if (memchr(host, ':', hostlen) != NULL) {
            return conf_addr_fail(err, errlen,
                                  "an IPv6 address must be in brackets, like '[::1]:6379'");
        }
        port = colon + 1;
        if (hostlen == 0) {
            return conf_addr_fail(err, errlen, "empty host");
        }
        if (hostlen >= CONF_HOST_MAX) {
            return conf_addr_fail(err, errlen, "host is %zu bytes, at most %d",
                                  hostlen, CONF_HOST_MAX - 1);
        }
        memcpy(a.host, host, hostlen);
        a.host[hostlen] = '\0';
        if (conf_check_host(a.host, err, errlen) != 0) {
            return -1;
        }
    }

    if (*port == '\0') {
        return conf_addr_fail(err, errlen, "missing port number after ':'");
    }
    v = 0;
    for (p = port; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return conf_addr_fail(err, errlen, "bad port '%s'",
                                  conf_quote(port, strlen(port), q, sizeof(q)));
        }
        if (v <= 65535) {
            v = v * 10 + (*p - '0');
        }
    }
    if (v < 1 || v > 65535) {
        return conf_addr_fail(err, errlen, "port %s out of range 1..65535",
                              conf_quote(port, strlen(port), q, sizeof(q)));
    }
    a.port = (int)v;
    memcpy(a.spec, spec, speclen + 1);
    *addr = a;
    return 0;
}

/* Whether two parsed addresses name the same endpoint. */
static bool
conf_addr_same(const struct conf_addr *a, const struct conf_addr *b)
{
    unsigned char x[sizeof(struct in6_addr)], y[sizeof(struct in6_addr)];

    if (a->is_unix || b->is_unix) {
        return a->is_unix && b->is_unix && strcmp(a->path, b->path) == 0;
    }
    if (a->port != b->port) {
        return false;
    }
    if (inet_pton(AF_INET6, a->host, x) == 1 && inet_pton(AF_INET6, b->host, y) == 1) {
        return memcmp(x, y, sizeof(struct in6_addr)) == 0;
    }
    if (inet_pton(AF_INET, a->host, x) == 1 && inet_pton(AF_INET, b->host, y) == 1) {
        return memcmp(x, y, sizeof(struct in_addr)) == 0;
    }
    return strcasecmp(a->host, b->host) == 0;
}

/* ---- pass 1 and 2: the document ---- */

static const char *
conf_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_NO_NODE:
        break;
    }
    return "nothing";
}

/* A YAML null written as nothing, "~" or "null": an empty section. */
static bool
conf_node_is_null(const yaml_node_t *node)
{
    const char *s;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    s = (const char *)node->data.scalar.value;
    return node->data.scalar.length == 0 || strcmp(s, "~") == 0 ||
           strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* A scalar's text, and whether it is usable as a name (no NUL byte). */
static const char *
conf_node_text(const yaml_node_t *node, size_t *len, bool *clean)
{
    const char *s = (const char *)node->data.scalar.value;

    *len = node->data.scalar.length;
    *clean = memchr(s, '\0', *len) == NULL;
    return s;
}

/*
 * A master's address: what conf_parse_addr() takes, or "rediss://" and a
 * "host:port" (TLS; not a unix: socket).  spec keeps the scheme.
 */
static int
conf_parse_master(const char *text, size_t len, struct conf_addr *addr, char *why,
                  size_t size)
{
    static const char scheme[] = "rediss://";
    const size_t slen = sizeof(scheme) - 1;

    if (len < slen || strncmp(text, scheme, slen) != 0) {
        return conf_parse_addr(text, true, addr, why, size);
    }
    if (strncmp(text + slen, "unix:", 5) == 0) {
        memset(addr, 0, sizeof(*addr));
        snprintf(why, size, "rediss:// takes \"host:port\"; TLS over a unix: socket "
                 "is not supported");
        return -1;
    }
    if (conf_parse_addr(text + slen, false, addr, why, size) != 0) {
        return -1;
    }
    addr->tls = true;
    snprintf(addr->spec, sizeof(addr->spec), "%s", text);
    return 0;
}

/* masters: a sequence of 1..CONF_MASTERS_MAX addresses. */
static void
conf_set_masters(struct conf_state *st, size_t di, const yaml_node_t *node)
{
    struct conf *conf = st->conf;
    struct conf_seen *seen = &st->seen[di];
    size_t pos[CONF_MASTERS_MAX];       /* list position of conf->masters[i] */
    yaml_node_item_t *item;
    size_t n, i, j, good = 0;

    conf->nmasters = 0;

    if (conf_node_is_null(node)) {
        n = 0;
    } else if (node->type != YAML_SEQUENCE_NODE) {
        conf_error(st, node, "'masters' must be a sequence, got %s", conf_node_kind(node));
        seen->bad = true;
        return;
    } else {
        n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    }

    if (n == 0) {
        conf_error(st, node, "masters: the list is empty (1 to %d addresses)",
                   CONF_MASTERS_MAX);
        seen->bad = true;
        return;
    }
    if (n > CONF_MASTERS_MAX) {
        conf_error(st, node, "masters: %zu addresses, at most %d are allowed",
                   n, CONF_MASTERS_MAX);
        seen->bad = true;
        n = CONF_MASTERS_MAX;   /* check the first ones all the same */
    } else if (n % 2 == 0) {
        conf_warning(st, node,
                     "masters: %zu masters tolerate no more failures than %zu; "
                     "use an odd number", n, n - 1);
    }

    item = node->data.sequence.items.start;
    for (i = 0; i < n; i++, item++) {
        yaml_node_t *v = yaml_document_get_node(st->doc, *item);
        char q[CONF_QUOTE_SIZE], why[CONF_WHY_SIZE];
        struct conf_addr addr;
        const char *text;
        size_t len;
        bool clean;

        if (v == NULL) {
            continue;
        }
        if (v->type != YAML_SCALAR_NODE) {
            conf_error(st, v, "masters[%zu] must be a scalar", i);
            seen->bad = true;
            continue;
        }
        text = conf_node_text(v, &len, &clean);
        if (!clean) {
            conf_error(st, v, "masters[%zu]: contains a NUL byte", i);
            seen->bad = true;
            continue;
        }
        conf_quote(text, len, q, sizeof(q));
        if (conf_parse_master(text, len, &addr, why, sizeof(why)) != 0) {
            conf_error(st, v, "masters[%zu]: bad address '%s': %s", i, q, why);
            seen->bad = true;
            continue;
        }
        for (j = 0; j < good; j++) {
            if (conf_addr_same(&conf->masters[j], &addr)) {
                break;
            }
        }
        if (j < good) {
            conf_error(st, v, "masters[%zu]: '%s' is listed twice (first as masters[%zu])",
                       i, q, pos[j]);
            seen->bad = true;
            continue;
        }
        pos[good] = i;
        conf->masters[good++] = addr;
    }
    conf->nmasters = good;
}

/*
 * A list of words (tls.client_names): a sequence of at most CONF_LIST_MAX
 * scalars of printable ASCII without spaces, each 1..max bytes; null or
 * [] is the empty list.  A bad entry is reported and the list stays empty.
 */
static void
conf_set_list(struct conf_state *st, size_t di, const yaml_node_t *node)
{
    const struct conf_directive *d = &conf_directives[di];
    struct conf_list *list = (struct conf_list *)((char *)st->conf + d->offset);
    struct conf_seen *seen = &st->seen[di];
    char name[CONF_NAME_SIZE], q[CONF_QUOTE_SIZE];
    yaml_node_item_t *item;
    size_t n, i, j;
    char **items;

    conf_list_clear(list);
    conf_name(d, name, sizeof(name));
    if (conf_node_is_null(node)) {
        return;
    }
    if (node->type != YAML_SEQUENCE_NODE) {
        conf_error(st, node, "%s must be a sequence, got %s", name, conf_node_kind(node));
        seen->bad = true;
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n == 0) {
        return;
    }
    if (n > CONF_LIST_MAX) {
        conf_error(st, node, "%s: %zu entries, at most %d are allowed", name, n,
                   CONF_LIST_MAX);
        seen->bad = true;
        return;
    }
    items = calloc(n, sizeof(*items));
    if (items == NULL) {
        conf_error(st, node, "%s: out of memory", name);
        seen->bad = true;
        return;
    }
    item = node->data.sequence.items.start;
    for (i = 0; i < n; i++, item++) {
        yaml_node_t *v = yaml_document_get_node(st->doc, *item);
        const char *text;
        size_t len;
        bool clean;

        if (v == NULL || v->type != YAML_SCALAR_NODE) {
            conf_error(st, v != NULL ? v : node, "%s[%zu] must be a scalar", name, i);
            seen->bad = true;
            continue;
        }
        text = conf_node_text(v, &len, &clean);
        conf_quote(text, len, q, sizeof(q));
        if (len == 0 || len > (size_t)d->max) {
            conf_error(st, v, "%s[%zu]: '%s' is %zu bytes, expected 1 to %zu", name, i, q,
                       len, (size_t)d->max);
            seen->bad = true;
            continue;
        }
        for (j = 0; j < len; j++) {
            if ((unsigned char)text[j] < 0x21 || (unsigned char)text[j] > 0x7e) {
                break;
            }
        }
        if (j < len) {
            conf_error(st, v, "%s[%zu]: '%s': byte 0x%02x at offset %zu; a name is "
                       "printable ASCII without spaces", name, i, q, (unsigned char)text[j],
                       j);
            seen->bad = true;
            continue;
        }
        items[i] = strdup(text);
        if (items[i] == NULL) {
            conf_error(st, v, "%s: out of memory", name);
            seen->bad = true;
        }
    }
    list->items = items;
    list->n = n;
    if (seen->bad) {
        conf_list_clear(list);
    }
}

/* One key's value: parse it by the directive's type. */
static void
conf_set_directive(struct conf_state *st, size_t di, const yaml_node_t *val)
{
    const struct conf_directive *d = &conf_directives[di];
    struct conf_seen *seen = &st->seen[di];
    char name[CONF_NAME_SIZE], err[CONF_ERR_SIZE];
    const char *text;
    size_t len;
    bool clean;

    seen->line = val->start_mark.line + 1;
    seen->column = val->start_mark.column + 1;
    conf_name(d, name, sizeof(name));

    if (d->type == CONF_T_MASTERS) {
        conf_set_masters(st, di, val);
        return;
    }
    if (d->type == CONF_T_LIST) {
        conf_set_list(st, di, val);
        return;
    }
    if (val->type != YAML_SCALAR_NODE) {
        conf_error(st, val, "%s must be a scalar", name);
        seen->bad = true;
        return;
    }
    text = conf_node_text(val, &len, &clean);
    if (conf_parse_value(d, text, len, st->conf, err, sizeof(err)) != 0) {
        conf_error(st, val, "%s: %s", name, err);
        seen->bad = true;
    }
}

/*
 * Walk the pairs of a mapping: the top level when section is NULL, else
 * the keys of that section.
 */
static void
conf_walk_mapping(struct conf_state *st, const yaml_node_t *map,
                  const char *section)
{
    yaml_node_pair_t *pair;

    for (pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = yaml_document_get_node(st->doc, pair->key);
        yaml_node_t *val = yaml_document_get_node(st->doc, pair->value);
        char q[CONF_QUOTE_SIZE];
        const char *name;
        size_t len, line, *first;
        bool clean;
        int di, si = -1;

        if (key == NULL || val == NULL) {
            continue;
        }
        if (key->type != YAML_SCALAR_NODE) {
            if (section == NULL) {
                conf_error(st, key, "a key must be a scalar, got %s", conf_node_kind(key));
            } else {
                conf_error(st, key, "a key in '%s' must be a scalar, got %s",
                           section, conf_node_kind(key));
            }
            continue;
        }
        name = conf_node_text(key, &len, &clean);
        conf_quote(name, len, q, sizeof(q));
        line = key->start_mark.line + 1;

        if (section == NULL) {
            di = clean ? conf_find(name, NULL) : -1;
            if (di < 0) {
                si = clean ? conf_find_section(name) : -1;
            }
            if (di < 0 && si < 0) {
                conf_error(st, key, "unknown section '%s'", q);
                continue;
            }
            first = di >= 0 ? &st->seen[di].key_line : &st->section_line[si];
            if (*first != 0) {
                conf_error(st, key, "duplicate key '%s' (first at line %zu)", q, *first);
                continue;
            }
            *first = line;
            if (di >= 0) {
                st->seen[di].set = true;
                conf_set_directive(st, (size_t)di, val);
                continue;
            }
            /* A section: a mapping of keys (an empty one may be null). */
            if (conf_node_is_null(val)) {
                continue;
            }
            if (val->type != YAML_MAPPING_NODE) {
                conf_error(st, val, "'%s' must be a mapping, got %s", q,
                           conf_node_kind(val));
                continue;
            }
            conf_walk_mapping(st, val, conf_directives[si].section);
            continue;
        }

        di = clean ? conf_find(section, name) : -1;
        if (di < 0) {
            conf_error(st, key, "unknown key '%s' in '%s'", q, section);
            continue;
        }
        if (st->seen[di].set) {
            conf_error(st, key, "duplicate key '%s' in '%s' (first at line %zu)",
                       q, section, st->seen[di].key_line);
            continue;
        }
        st->seen[di].set = true;
        st->seen[di].key_line = line;
        conf_set_directive(st, (size_t)di, val);
    }
}

/* Pass 1 and 2: the top level must be a mapping of sections. */
static void
conf_walk(struct conf_state *st, const yaml_node_t *root)
{
    if (root == NULL || conf_node_is_null(root)) {
        return;     /* an empty file: every default */
    }
    if (root->type != YAML_MAPPING_NODE) {
        conf_error(st, root, "the top level must be a mapping, got %s",
                   conf_node_kind(root));
        st->bad_top = true;
        return;
    }
    conf_walk_mapping(st, root, NULL);
}

/* ---- pass 3: settings against each other ---- */

/* "lock.min_ttl_ms (100)" or "lock.min_ttl_ms (100, the default)". */
static const char *
conf_describe(struct conf_state *st, size_t di, char *buf, size_t size)
{
    const struct conf_directive *d = &conf_directives[di];
    char name[CONF_NAME_SIZE];
    int64_t v = *(const int64_t *)((const char *)st->conf + d->offset);

    snprintf(buf, size, "%s (%" PRId64 "%s)", conf_name(d, name, sizeof(name)), v,
             st->seen[di].set ? "" : ", the default");
    return buf;
}

/* Report at the later of a's and b's values in the file. */
static void
conf_pair_position(struct conf_state *st, size_t a, size_t b, size_t *line,
                   size_t *column)
{
    const struct conf_seen *x = &st->seen[a], *y = &st->seen[b];

    if (x->set && (!y->set || x->line > y->line ||
                   (x->line == y->line && x->column > y->column))) {
        *line = x->line;
        *column = x->column;
    } else if (y->set) {
        *line = y->line;
        *column = y->column;
    } else {
        *line = 0;
        *column = 0;
    }
}

/*
 * Check a <= b (strict: a < b) for two int64_t directives; a refused
 * value is not compared (it has been reported already).
 */
static void
conf_check_order(struct conf_state *st, size_t a, size_t b, bool strict,
                 const char *why)
{
    const struct conf_directive *da = &conf_directives[a], *db = &conf_directives[b];
    int64_t va = *(const int64_t *)((const char *)st->conf + da->offset);
    int64_t vb = *(const int64_t *)((const char *)st->conf + db->offset);
    char x[CONF_NAME_SIZE + 32], y[CONF_NAME_SIZE + 32];
    size_t line, column;

    if (st->seen[a].bad || st->seen[b].bad) {
        return;
    }
    if (strict ? va < vb : va <= vb) {
        return;
    }
    conf_pair_position(st, a, b, &line, &column);
    conf_note_at(st, line, column, true, "%s must be %s %s%s",
                 conf_describe(st, a, x, sizeof(x)),
                 strict ? "less than" : "at most",
                 conf_describe(st, b, y, sizeof(y)), why);
}

/*
 * True when a listen.tcp host only accepts connections from this host:
 * 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104, or "localhost".  A host name
 * other than localhost is not resolved here and counts as reachable.
 */
static bool
conf_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (strcasecmp(host, "localhost") == 0) {
        return true;
    }
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) {
            return true;
        }
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return false;
}

/*
 * A password of the auth section (row i of the table, value pass) is one
 * word of AUTH <password>: printable ASCII without spaces.
 */
static void
conf_check_password(struct conf_state *st, size_t i, const char *pass)
{
    const char *c;

    if (st->seen[i].bad || pass == NULL) {
        return;
    }
    for (c = pass; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e) {
            conf_note_at(st, st->seen[i].line, st->seen[i].column, true,
                         "auth.%s: byte 0x%02x at offset %zu; use printable "
                         "ASCII without spaces (it is one word of AUTH <password>)",
                         conf_directives[i].key, (unsigned char)*c, (size_t)(c - pass));
            return;
        }
    }
}

/*
 * tls.ciphers and tls.ciphersuites must each select at least one suite
 * (of TLS 1.2 and of TLS 1.3): OpenSSL is asked, on a context of its
 * own.  A list that matches nothing, or that OpenSSL cannot read, is an
 * error at its value.
 */
static void
conf_check_ciphers(struct conf_state *st, size_t ciphers, size_t suites)
{
    const struct conf *conf = st->conf;
    char q[CONF_QUOTE_SIZE], reason[256];
    STACK_OF(SSL_CIPHER) *sk;
    unsigned long err;
    SSL_CTX *ctx;
    int i, n13 = 0;

    if (!st->seen[ciphers].set && !st->seen[suites].set) {
        return;     /* the defaults */
    }
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        conf_note_at(st, 0, 0, true, "tls: cannot check the cipher lists (out of memory)");
        ERR_clear_error();
        return;
    }
    if (st->seen[ciphers].set && !st->seen[ciphers].bad && conf->tls_ciphers != NULL
        && SSL_CTX_set_cipher_list(ctx, conf->tls_ciphers) != 1) {
        err = ERR_peek_last_error();
        snprintf(reason, sizeof(reason), "%s", ERR_reason_error_string(err) != NULL
                                               ? ERR_reason_error_string(err) : "no reason given");
        conf_quote(conf->tls_ciphers, strlen(conf->tls_ciphers), q, sizeof(q));
        if (ERR_GET_REASON(err) == SSL_R_NO_CIPHER_MATCH || err == 0) {
            conf_note_at(st, st->seen[ciphers].line, st->seen[ciphers].column, true,
                         "tls.ciphers '%s': no cipher matches (an OpenSSL cipher list of "
                         "TLS 1.2 suites, like \"ECDHE+AESGCM:ECDHE+CHACHA20\")", q);
        } else {
            conf_note_at(st, st->seen[ciphers].line, st->seen[ciphers].column, true,
                         "tls.ciphers '%s': not an OpenSSL cipher list (%s)", q, reason);
        }
    }
    ERR_clear_error();
    if (st->seen[suites].set && !st->seen[suites].bad && conf->tls_ciphersuites != NULL) {
        if (SSL_CTX_set_ciphersuites(ctx, conf->tls_ciphersuites) == 1) {
            sk = SSL_CTX_get_ciphers(ctx);
            for (i = 0; i < sk_SSL_CIPHER_num(sk); i++) {
                if (strcmp(SSL_CIPHER_get_version(sk_SSL_CIPHER_value(sk, i)), "TLSv1.3")
                    == 0) {
                    n13++;
                }
            }
        }
        if (n13 == 0) {
            conf_quote(conf->tls_ciphersuites, strlen(conf->tls_ciphersuites), q, sizeof(q));
            conf_note_at(st, st->seen[suites].line, st->seen[suites].column, true,
                         "tls.ciphersuites '%s': no cipher matches (TLS 1.3 suites, like "
                         "\"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\")", q);
        }
    }
    ERR_clear_error();
    SSL_CTX_free(ctx);
}

/* Pass 3: the settings against each other. */
static void
conf_check(struct conf_state *st)
{
    struct conf *conf = st->conf;
    size_t masters = conf_must_find("masters", NULL);
    size_t user = conf_must_find("redis", "username");
    size_t pass = conf_must_find("redis", "password");
    size_t def = conf_must_find("lock", "default_ttl_ms");
    size_t delay = conf_must_find("lock", "delay_ms");
    size_t min = conf_must_find("lock", "min_ttl_ms");
    size_t max = conf_must_find("lock", "max_ttl_ms");
    size_t node = conf_must_find("lock", "node_timeout_ms");
    size_t tcp = conf_must_find("listen", "tcp");
    size_t unx = conf_must_find("listen", "unix");
    size_t down = conf_must_find("redis", "down_after_ms");
    size_t apass = conf_must_find("auth", "password");
    size_t admin = conf_must_find("auth", "admin_password");
    size_t tls = conf_must_find("listen", "tls");
    size_t mlisten = conf_must_find("metrics", "listen");
    size_t mremote = conf_must_find("metrics", "allow_remote");
    size_t cert = conf_must_find("tls", "cert_file");
    size_t key = conf_must_find("tls", "key_file");
    size_t ca = conf_must_find("tls", "client_ca_file");
    size_t crl = conf_must_find("tls", "client_crl_file");
    size_t names = conf_must_find("tls", "client_names");
    size_t ciphers = conf_must_find("tls", "ciphers");
    size_t suites = conf_must_find("tls", "ciphersuites");

    size_t reserved = conf_must_find("limits", "unix_reserved");
    size_t clients = conf_must_find("limits", "max_clients");
    size_t rcert = conf_must_find("redis", "tls_cert_file");
    size_t rkey = conf_must_find("redis", "tls_key_file");

    conf_derive(conf);
    if (st->seen[unx].set && !st->seen[unx].bad) {
        conf->unix_line = st->seen[unx].line;
        conf->unix_column = st->seen[unx].column;
    }

    if (!st->seen[masters].set && !st->bad_top) {
        conf_note_at(st, 0, 0, true, "masters: required (1 to %d addresses)",
                     CONF_MASTERS_MAX);
    }

    if (!st->seen[user].bad && !st->seen[pass].bad && conf->redis_username != NULL &&
        conf->redis_password != NULL && conf->redis_username[0] != '\0' &&
        conf->redis_password[0] == '\0') {
        conf_note_at(st, st->seen[user].line, st->seen[user].column, true,
                     "redis.username is set but redis.password is empty");
    }

    /* A client certificate for the masters comes with its key. */
    if (!st->seen[rcert].bad && !st->seen[rkey].bad && conf->redis_tls_cert_file != NULL
        && conf->redis_tls_key_file != NULL) {
        if (conf->redis_tls_cert_file[0] != '\0' && conf->redis_tls_key_file[0] == '\0') {
            conf_note_at(st, st->seen[rcert].line, st->seen[rcert].column, true,
                         "redis.tls_cert_file is set but redis.tls_key_file is empty");
        } else if (conf->redis_tls_key_file[0] != '\0'
                   && conf->redis_tls_cert_file[0] == '\0') {
            conf_note_at(st, st->seen[rkey].line, st->seen[rkey].column, true,
                         "redis.tls_key_file is set but redis.tls_cert_file is empty");
        }
    }

    /* Unset, the Unix socket's reserve shrinks with a small max_clients. */
    if (!st->seen[reserved].set && conf->unix_reserved > conf->max_clients / 4) {
        conf->unix_reserved = conf->max_clients / 4;
    }
    if (conf->unix_enabled) {
        conf_check_order(st, reserved, clients, true,
                         ": TCP and TLS clients need a slot of their own");
    }
    conf_check_order(st, min, max, false, "");
    if (conf->min_ttl_ms <= conf->max_ttl_ms) {
        conf_check_order(st, min, def, false, "");
        conf_check_order(st, def, max, false, "");
    }
    conf_check_order(st, delay, max, false,
                     ": a lock-delay is bounded as a lease is (delay= too)");
    conf_check_order(st, node, min, true,
                     ": a round must end well before the shortest lease expires");
    conf_check_order(st, node, down, true,
                     ": a master is declared silent only after a round's deadline");

    /* AUTH <password> is one word of the line protocol. */
    conf_check_password(st, apass, conf->auth_password);
    conf_check_password(st, admin, conf->auth_admin_password);
    if (!st->seen[apass].bad && !st->seen[admin].bad && conf->auth_password != NULL
        && conf->auth_admin_password != NULL && conf->auth_admin_password[0] != '\0'
        && strcmp(conf->auth_password, conf->auth_admin_password) == 0) {
        conf_note_at(st, st->seen[admin].line, st->seen[admin].column, true,
                     "auth.admin_password is the same as auth.password: every client "
                     "that may connect would have the admin right; choose another");
    }

    /* Protected mode: a session reachable from other hosts must AUTH. */
    if (conf->tcp_enabled && !st->seen[tcp].bad && !st->seen[apass].bad &&
        conf->auth_password != NULL && conf->auth_password[0] == '\0' &&
        !conf_host_is_loopback(conf->tcp.host)) {
        size_t line, column;

        conf_pair_position(st, tcp, apass, &line, &column);
        conf_note_at(st, line, column, true,
                     "listen.tcp \"%s\" accepts connections from other hosts "
                     "but auth.password is empty (protected mode): set "
                     "auth.password, or listen on 127.0.0.1 or [::1]",
                     conf->tcp.spec);
    }

    if (!conf->tcp_enabled && !conf->unix_enabled && !conf->tls_enabled &&
        !st->seen[tcp].bad && !st->seen[unx].bad && !st->seen[tls].bad) {
        size_t line, column;

        conf_pair_position(st, tcp, unx, &line, &column);
        conf_note_at(st, line, column, true,
                     "listen: listen.tcp, listen.unix and listen.tls are all disabled; "
                     "enable at least one");
    }

    /* listen.tls needs its certificate and key; reported where listen.tls is set. */
    if (conf->tls_enabled && !st->seen[tls].bad) {
        if (!st->seen[cert].bad && conf->tls_cert_file != NULL
            && conf->tls_cert_file[0] == '\0') {
            conf_note_at(st, st->seen[tls].line, st->seen[tls].column, true,
                         "listen.tls \"%s\" needs tls.cert_file (the server's PEM "
                         "certificate)", conf->tls.spec);
        }
        if (!st->seen[key].bad && conf->tls_key_file != NULL
            && conf->tls_key_file[0] == '\0') {
            conf_note_at(st, st->seen[tls].line, st->seen[tls].column, true,
                         "listen.tls \"%s\" needs tls.key_file (the private key of "
                         "tls.cert_file)", conf->tls.spec);
        }
    }

    /* The client certificate policy applies to certificates tls.client_ca_file asks for. */
    if (!st->seen[ca].bad && conf->tls_client_ca_file != NULL
        && conf->tls_client_ca_file[0] == '\0') {
        if (!st->seen[crl].bad && conf->tls_client_crl_file != NULL
            && conf->tls_client_crl_file[0] != '\0') {
            conf_note_at(st, st->seen[crl].line, st->seen[crl].column, true,
                         "tls.client_crl_file is set but tls.client_ca_file is empty (no "
                         "client certificate is asked for)");
        }
        if (!st->seen[names].bad && conf->tls_client_names.n > 0) {
            conf_note_at(st, st->seen[names].line, st->seen[names].column, true,
                         "tls.client_names is set but tls.client_ca_file is empty (no "
                         "client certificate is asked for)");
        }
    }
    conf_check_ciphers(st, ciphers, suites);

    /*
     * Protected mode for /metrics, which has no password: another host
     * reaches it only when metrics.allow_remote says that is meant.
     */
    if (conf->metrics.spec[0] != '\0' && !st->seen[mlisten].bad && !st->seen[mremote].bad
        && !conf->metrics_allow_remote && !conf_host_is_loopback(conf->metrics.host)) {
        conf_note_at(st, st->seen[mlisten].line, st->seen[mlisten].column, true,
                     "metrics.listen \"%s\" accepts connections from other hosts, and "
                     "/metrics needs no password (protected mode): set "
                     "metrics.allow_remote: true if that is meant (it shows the masters' "
                     "addresses and the daemon's counters), or listen on 127.0.0.1 or [::1]",
                     conf->metrics.spec);
    }

    /*
     * Protected mode for TLS: a client from another host proves itself
     * with AUTH, or with a certificate tls.client_ca_file signed.
     */
    if (conf->tls_enabled && !st->seen[tls].bad && !st->seen[apass].bad &&
        !st->seen[ca].bad && conf->auth_password != NULL && conf->auth_password[0] == '\0'
        && conf->tls_client_ca_file != NULL && conf->tls_client_ca_file[0] == '\0'
        && !conf_host_is_loopback(conf->tls.host)) {
        size_t line, column;

        conf_pair_position(st, tls, apass, &line, &column);
        conf_note_at(st, line, column, true,
                     "listen.tls \"%s\" accepts connections from other hosts but neither "
                     "auth.password nor tls.client_ca_file is set (protected mode): set "
                     "one, or listen on 127.0.0.1 or [::1]", conf->tls.spec);
    }
}

/* ---- loading ---- */

/* Read the whole file into a NUL-terminated buffer. */
static int
conf_read_file(struct conf_state *st, char **bufp, size_t *lenp)
{
    FILE *f;
    char *buf = NULL;
    size_t len = 0, cap = 0;

    f = fopen(st->path, "rb");
    if (f == NULL) {
        conf_note_at(st, 0, 0, true, "cannot open: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        size_t n;

        if (len + 1 >= cap) {
            size_t ncap = cap == 0 ? 4096 : cap * 2;
            char *nbuf;

            nbuf = realloc(buf, ncap);
            if (nbuf == NULL) {
                conf_note_at(st, 0, 0, true, "cannot read: out of memory");
                goto fail;
            }
            buf = nbuf;
            cap = ncap;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > CONF_FILE_MAX) {
            conf_note_at(st, 0, 0, true, "cannot read: larger than %d bytes",
                         CONF_FILE_MAX);
            goto fail;
        }
        if (n == 0) {
            if (ferror(f)) {
                conf_note_at(st, 0, 0, true, "cannot read: %s", strerror(errno));
                goto fail;
            }
            break;
        }
    }
    fclose(f);
    buf[len] = '\0';
    *bufp = buf;
    *lenp = len;
    return 0;

fail:
    fclose(f);
    free(buf);
    return -1;
}

/* Report libyaml's error with its position. */
static void
conf_yaml_error(struct conf_state *st, const yaml_parser_t *parser,
                const char *buf, size_t len)
{
    const char *problem = parser->problem != NULL ? parser->problem : "unknown error";
    size_t line, column;

    switch (parser->error) {
    case YAML_MEMORY_ERROR:
        conf_note_at(st, 0, 0, true, "out of memory");
        return;

    case YAML_READER_ERROR: {
        /* Only a byte offset is known: count the lines up to it. */
        size_t i, off = parser->problem_offset < len ? parser->problem_offset : len;

        line = 1;
        column = 1;
        for (i = 0; i < off; i++) {
            if (buf[i] == '\n') {
                line++;
                column = 1;
            } else {
                column++;
            }
        }
        if (parser->problem_value != -1) {
            conf_note_at(st, line, column, true, "YAML syntax error: %s (#%X)",
                         problem, (unsigned)parser->problem_value);
        } else {
            conf_note_at(st, line, column, true, "YAML syntax error: %s", problem);
        }
        return;
    }

    default:
        break;
    }

    line = parser->problem_mark.line + 1;
    column = parser->problem_mark.column + 1;
    if (parser->context != NULL) {
        conf_note_at(st, line, column, true,
                     "YAML syntax error: %s (%s at line %zu, column %zu)",
                     problem, parser->context, parser->context_mark.line + 1,
                     parser->context_mark.column + 1);
    } else {
        conf_note_at(st, line, column, true, "YAML syntax error: %s", problem);
    }
}

/*
 * Pass 0, over libyaml's events: refuse what would make loading slow.
 * libyaml takes time quadratic in the nesting depth (its scanner visits
 * every open level on each token: 100000 '[' take minutes) and in the
 * number of anchors (the loader keeps them in a list it searches for each
 * new anchor and each alias).  Stopping early bounds both.  Returns -1
 * when reported; 0 otherwise, also on a syntax error, which the load
 * then reports.
 */
static int
conf_check_shape(struct conf_state *st, const char *buf, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t event;
    size_t depth = 0, anchors = 0, dirs = 0, line = 1, i;
    bool done = false;
    int rc = 0;

    /*
     * libyaml also searches its list of %TAG directives for each new one:
     * count the lines that start with '%' (only directives can, outside
     * of odd multi-line scalars) before it sees them.
     */
    for (i = 0; i < len; i++) {
        if (buf[i] == '%' && (i == 0 || buf[i - 1] == '\n' || buf[i - 1] == '\r') &&
            ++dirs > CONF_YAML_DIRS_MAX) {
            conf_note_at(st, line, 1, true, "more than %d YAML directives",
                         CONF_YAML_DIRS_MAX);
            return -1;
        }
        if (buf[i] == '\n') {
            line++;
        }
    }

    if (!yaml_parser_initialize(&parser)) {
        return 0;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    while (!done && yaml_parser_parse(&parser, &event)) {
        const yaml_char_t *anchor = NULL;

        switch (event.type) {
        case YAML_SCALAR_EVENT:
            anchor = event.data.scalar.anchor;
            break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = event.data.sequence_start.anchor;
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = event.data.mapping_start.anchor;
            break;
        default:
            break;
        }
        if (anchor != NULL && ++anchors > CONF_ANCHORS_MAX) {
            conf_note_at(st, event.start_mark.line + 1, event.start_mark.column + 1,
                         true, "more than %d anchors", CONF_ANCHORS_MAX);
            rc = -1;
            done = true;
        }

        switch (event.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (!done && ++depth > CONF_DEPTH_MAX) {
                conf_note_at(st, event.start_mark.line + 1, event.start_mark.column + 1,
                             true, "nested deeper than %d levels", CONF_DEPTH_MAX);
                rc = -1;
                done = true;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Load the document(s) in buf and run the three passes. */
static void
conf_parse_yaml(struct conf_state *st, const char *buf, size_t len)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root;
    bool more;

    if (conf_check_shape(st, buf, len) != 0) {
        return;
    }
    if (!yaml_parser_initialize(&parser)) {
        conf_note_at(st, 0, 0, true, "out of memory");
        return;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

    if (!yaml_parser_load(&parser, &doc)) {
        conf_yaml_error(st, &parser, buf, len);
        yaml_parser_delete(&parser);
        return;
    }
    st->doc = &doc;
    root = yaml_document_get_root_node(&doc);
    more = root != NULL;
    conf_walk(st, root);
    st->doc = NULL;
    yaml_document_delete(&doc);

    /* A second document would be silently ignored: refuse it. */
    if (more) {
        if (!yaml_parser_load(&parser, &doc)) {
            conf_yaml_error(st, &parser, buf, len);
        } else {
            if (yaml_document_get_root_node(&doc) != NULL) {
                conf_note_at(st, doc.start_mark.line + 1, doc.start_mark.column + 1, true,
                             "only one YAML document is allowed");
            }
            yaml_document_delete(&doc);
        }
    }
    yaml_parser_delete(&parser);

    conf_check(st);
}

/* Sort the messages into file order and move them to msgs. */
static int
conf_finish(struct conf_state *st, struct conf_msgs *msgs)
{
    size_t i, nerrors = 0;
    struct conf_msg *list;

    if (st->nnotes > 0) {
        qsort(st->notes, st->nnotes, sizeof(st->notes[0]), conf_note_cmp);
    }
    for (i = 0; i < st->nnotes; i++) {
        if (st->notes[i].is_error) {
            nerrors++;
        }
    }

    if (st->nnotes > 0) {
        list = realloc(msgs->list, (msgs->n + st->nnotes) * sizeof(*list));
        if (list == NULL) {
            for (i = 0; i < st->nnotes; i++) {
                free(st->notes[i].text);
            }
            st->oom = true;
        } else {
            msgs->list = list;
            for (i = 0; i < st->nnotes; i++) {
                list[msgs->n].is_error = st->notes[i].is_error;
                list[msgs->n].text = st->notes[i].text;
                msgs->n++;
            }
            msgs->nerrors += nerrors;
        }
    }
    free(st->notes);
    st->notes = NULL;
    st->nnotes = 0;

    return (nerrors > 0 || st->oom) ? -1 : 0;
}

int
conf_load(const char *path, struct conf *conf, struct conf_msgs *msgs)
{
    struct conf_state st;
    char *buf;
    size_t len;

    memset(&st, 0, sizeof(st));
    st.path = path;
    st.conf = conf;

    if (conf_set_defaults(conf) != 0) {
        conf_note_at(&st, 0, 0, true, "out of memory");
    } else if ((conf->file = strdup(path)) == NULL) {
        conf_note_at(&st, 0, 0, true, "out of memory");
    } else if (conf_read_file(&st, &buf, &len) == 0) {
        conf_parse_yaml(&st, buf, len);
        free(buf);
    }
    return conf_finish(&st, msgs);
}

int
conf_check_unix_dir(const struct conf *conf, bool ahead, struct conf_msgs *msgs)
{
    char dir[CONF_PATH_MAX], qdir[CONF_PATH_MAX * 4 + 4];
    const char *slash, *problem = NULL, *file, *fix;
    struct conf_msg *list;
    bool missing = false;
    struct stat st;
    char *text;
    size_t len;
    int rc;

    if (!conf->unix_enabled || conf->unix_path == NULL) {
        return 0;
    }
    slash = strrchr(conf->unix_path, '/');
    if (slash == NULL) {
        return 0;                   /* in the working directory */
    }
    len = slash == conf->unix_path ? 1 : (size_t)(slash - conf->unix_path);
    if (len >= sizeof(dir)) {
        return 0;                   /* conf_load() refused the path already */
    }
    memcpy(dir, conf->unix_path, len);
    dir[len] = '\0';
    if (stat(dir, &st) != 0) {
        missing = errno == ENOENT;
        problem = missing ? "does not exist" : strerror(errno);
    } else if (!S_ISDIR(st.st_mode)) {
        problem = "is not a directory";
    }
    if (problem == NULL) {
        return 0;
    }
    ahead = ahead && missing;
    file = conf->file != NULL ? conf->file : "(configuration)";
    conf_quote(dir, len, qdir, sizeof(qdir));
    if (ahead) {
        fix = "it must exist when redlockd starts (the systemd unit's RuntimeDirectory= "
              "creates it)";
        problem = "does not exist yet";
    } else {
        fix = "create it or change listen.unix";
    }
    if (conf->unix_line > 0) {
        rc = asprintf(&text, "%s:%zu:%zu: listen.unix: directory %s %s (the socket is "
                      "created in it); %s", file, conf->unix_line, conf->unix_column, qdir,
                      problem, fix);
    } else {
        rc = asprintf(&text, "%s: listen.unix (default %s): directory %s %s (the socket is "
                      "created in it); %s", file, conf->unix_path, qdir, problem,
                      ahead ? fix : "create it or set listen.unix");
    }
    if (rc < 0) {
        return -1;
    }
    list = realloc(msgs->list, (msgs->n + 1) * sizeof(*list));
    if (list == NULL) {
        free(text);
        return -1;
    }
    msgs->list = list;
    list[msgs->n].is_error = !ahead;
    list[msgs->n].text = text;
    msgs->n++;
    if (ahead) {
        return 0;
    }
    msgs->nerrors++;
    return -1;
}

void
conf_free(struct conf *conf)
{
    size_t i;

    for (i = 0; i < CONF_NDIRECTIVES; i++) {
        const struct conf_directive *d = &conf_directives[i];

        if (d->type == CONF_T_STRING) {
            char **field = (char **)((char *)conf + d->offset);

            free(*field);
            *field = NULL;
        } else if (d->type == CONF_T_LIST) {
            conf_list_clear((struct conf_list *)((char *)conf + d->offset));
        }
    }
    free(conf->file);
    conf->file = NULL;
}

void
conf_msgs_free(struct conf_msgs *msgs)
{
    size_t i;

    for (i = 0; i < msgs->n; i++) {
        free(msgs->list[i].text);
    }
    free(msgs->list);
    msgs->list = NULL;
    msgs->n = 0;
    msgs->nerrors = 0;
}

const char *
conf_log_level_name(enum conf_log_level level)
{
    if ((unsigned)level < sizeof(conf_level_names) / sizeof(conf_level_names[0]) - 1) {
        return conf_level_names[level];
    }
    return "?";
}

/* True when directive d has the same value in a and b. */
static bool
conf_same_value(const struct conf_directive *d, const struct conf *a, const struct conf *b)
{
    const char *pa = (const char *)a + d->offset, *pb = (const char *)b + d->offset;
    size_t i;

    switch (d->type) {
    case CONF_T_MS:
    case CONF_T_INT:
        return *(const int64_t *)pa == *(const int64_t *)pb;
    case CONF_T_DOUBLE:
        return *(const double *)pa == *(const double *)pb;
    case CONF_T_BOOL:
        return *(const bool *)pa == *(const bool *)pb;
    case CONF_T_STRING:
        return strcmp(*(char *const *)pa != NULL ? *(char *const *)pa : "",
                      *(char *const *)pb != NULL ? *(char *const *)pb : "") == 0;
    case CONF_T_ADDR:
        return strcmp(((const struct conf_addr *)pa)->spec,
                      ((const struct conf_addr *)pb)->spec) == 0;
    case CONF_T_MODE:
        return *(const unsigned *)pa == *(const unsigned *)pb;
    case CONF_T_ENUM:
        return *(const int *)pa == *(const int *)pb;
    case CONF_T_LIST: {
        const struct conf_list *la = (const struct conf_list *)pa;
        const struct conf_list *lb = (const struct conf_list *)pb;

        if (la->n != lb->n) {
            return false;
        }
        for (i = 0; i < la->n; i++) {
            if (strcmp(la->items[i], lb->items[i]) != 0) {
                return false;
            }
        }
        return true;
    }
    case CONF_T_MASTERS:
        if (a->nmasters != b->nmasters) {
            return false;
        }
        for (i = 0; i < a->nmasters; i++) {
            if (strcmp(a->masters[i].spec, b->masters[i].spec) != 0) {
                return false;
            }
        }
        return true;
    }
    return false;
}

size_t
conf_restart_changes(const struct conf *running, const struct conf *next, char *buf,
                     size_t size)
{
    char name[CONF_NAME_SIZE];
    size_t i, n = 0, used = 0;
    int w;

    if (size > 0) {
        buf[0] = '\0';
    }
    for (i = 0; i < CONF_NDIRECTIVES; i++) {
        const struct conf_directive *d = &conf_directives[i];

        if (!(d->flags & CONF_NO_RELOAD) || conf_same_value(d, running, next)) {
            continue;
        }
        n++;
        if (used < size) {
            w = snprintf(buf + used, size - used, "%s%s", used > 0 ? ", " : "",
                         conf_name(d, name, sizeof(name)));
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return n;
}
