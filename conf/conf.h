/*
 * conf.h: the redlockd configuration: a YAML file read with libyaml,
 * checked against a table of directives, with every value defaulted.
 *
 * The loader parses in passes (the shape twemproxy's nc_conf uses): a
 * cheap guard refuses inputs that make libyaml slow (deep nesting, many
 * anchors), the YAML is loaded into a document, each key is looked up in
 * the directive table and its value parsed and range-checked, then the
 * settings are checked against each other.  It reports every problem it
 * finds, not just the first, each naming the file, line and column.
 * conf/redlockd.yml documents every key; README.md has the reference.
 */
#ifndef REDLOCKD_CONF_H
#define REDLOCKD_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONF_MASTERS_MAX    15
#define CONF_HOST_MAX       256
#define CONF_PATH_MAX       108     /* sun_path, with NUL */
#define CONF_KEY_PREFIX_MAX 256     /* lock.key_prefix, bytes */

/* Log levels, most severe first; LOG_* in daemon/log.h uses the same order. */
enum conf_log_level {
    CONF_LOG_ERROR,
    CONF_LOG_WARN,
    CONF_LOG_INFO,
    CONF_LOG_DEBUG
};

/* lock.fence: when a grant carries a fencing token. */
enum conf_fence {
    CONF_FENCE_REQUEST,     /* only LOCK/TRYLOCK ... fence */
    CONF_FENCE_ALWAYS       /* every grant */
};

/* auth.show_labels: who sees the labels of other sessions' holds. */
enum conf_show_labels {
    CONF_LABELS_ALL,        /* every session */
    CONF_LABELS_ADMIN       /* sessions with the admin right */
};

/*
 * A network endpoint: "host:port", "[v6]:port" or "unix:/path"; a master
 * may also be "rediss://host:port" (TLS).
 */
struct conf_addr {
    bool     is_unix;                /* true for a Unix socket path */
    bool     tls;                    /* written rediss://: reached over TLS */
    char     host[CONF_HOST_MAX];    /* numeric IPv4/IPv6 or a host name, no brackets */
    int      port;                   /* 1..65535 when !is_unix */
    char     path[CONF_PATH_MAX];    /* socket path when is_unix */
    char     spec[CONF_HOST_MAX + 24]; /* the address as written, for logs */
};

/* A list of strings (a YAML sequence of scalars); conf_free() releases it. */
struct conf_list {
    char   **items;                 /* malloc'd array of malloc'd strings, NULL when empty */
    size_t   n;                     /* entries in items */
};

/*
 * The settings.  Owned by whoever called conf_load(); strings are
 * malloc'd and released by conf_free().  Times are milliseconds.
 */
struct conf {
    char    *file;                  /* path the settings were read from */

    /* listen: */
    bool             tcp_enabled;   /* listen.tcp is not "" */
    struct conf_addr tcp;           /* listen.tcp */
    bool             unix_enabled;  /* listen.unix is not "" */
    char            *unix_path;     /* listen.unix */
    size_t           unix_line;     /* where listen.unix's value is in file; 0: the default */
    size_t           unix_column;   /* its column, 1-based */
    unsigned         unix_mode;     /* listen.unix_mode, octal, e.g. 0660 */
    bool             tls_enabled;   /* listen.tls is not "" */
    struct conf_addr tls;           /* listen.tls: clients over TLS */

    /* tls: (the client listener's certificate; re-read on every reload) */
    char    *tls_cert_file;         /* PEM certificate chain, "" when unset */
    char    *tls_key_file;          /* PEM private key, "" when unset */
    char    *tls_client_ca_file;    /* PEM CAs that sign client certificates; "" for none */
    char    *tls_client_crl_file;   /* PEM CRLs client certificates are checked against; "" */
    struct conf_list tls_client_names; /* names a client certificate must carry; empty: any */
    char    *tls_ciphers;           /* TLS 1.2 suites, OpenSSL cipher-list syntax */
    char    *tls_ciphersuites;      /* TLS 1.3 suites, OpenSSL ciphersuites syntax */

    /* masters: */
    size_t           nmasters;      /* 1..CONF_MASTERS_MAX */
    struct conf_addr masters[CONF_MASTERS_MAX]; /* in file order */

    /* redis: */
    char    *redis_username;        /* "" for none */
    char    *redis_password;        /* "" disables AUTH */
    int64_t  connect_timeout_ms;    /* redis.connect_timeout_ms */
    int64_t  max_pending;           /* requests unanswered before a drop */
    int64_t  down_after_ms;         /* silence with requests pending before a drop */
    char    *redis_tls_ca_file;     /* PEM CAs for rediss:// masters; "": system store */
    char    *redis_tls_cert_file;   /* PEM client certificate for them; "" for none */
    char    *redis_tls_key_file;    /* its private key; "" for none */
    char    *redis_tls_server_name; /* name checked in their certificates; "": the host */

    /* lock: */
    int64_t  default_ttl_ms;        /* lease when LOCK has no ttl= */
    int64_t  min_ttl_ms;            /* smallest ttl= accepted */
    int64_t  max_ttl_ms;            /* largest ttl= accepted */
    int64_t  node_timeout_ms;       /* deadline of one round */
    double   drift_factor;          /* drift = ttl * drift_factor + 2 ms */
    int64_t  retry_delay_ms;        /* a blocked LOCK retries after 0..this */
    char    *key_prefix;            /* Redis key = key_prefix + name */
    enum conf_fence fence;          /* when grants carry a fencing token */
    bool     restart_quarantine;    /* a restarted master votes after max_ttl_ms */
    bool     clock_check;           /* a master whose clock steps votes after max_ttl_ms */
    int64_t  delay_ms;              /* lock-delay of an exclusive session LOCK without
                                       delay=, ms; 0: none */

    /* limits: */
    int64_t  max_clients;           /* connections at once */
    int64_t  unix_reserved;         /* of max_clients, for the Unix socket only */
    int64_t  max_clients_per_source;/* TCP/TLS connections of one address; 0: no limit */
    int64_t  max_unauthenticated;   /* TCP/TLS connections in handshake or before AUTH */
    int64_t  max_unauthenticated_per_source; /* of those, from one address */
    int64_t  max_watches;           /* WATCHes open over all sessions */
    int64_t  reads_per_second;      /* STATUS and WATCH per session, a second */
    int64_t  max_reads_in_flight;   /* reads of the masters at once, daemon-wide */
    int64_t  read_wait_ms;          /* a STATUS's longest wait for its turn, ms */
    int64_t  max_line_bytes;        /* longest request line, without LF */
    int64_t  max_locks_per_client;  /* locks held by one session */
    int64_t  max_limit;             /* largest limit= of a counted LOCK, 1..1000 */
    int64_t  idle_timeout_ms;       /* a line's completion, output's progress */
    int64_t  auth_timeout_ms;       /* from accept to the TLS handshake done and AUTH sent */
    int64_t  max_output_bytes;      /* unsent replies before a close */

    /* auth: */
    char    *auth_password;         /* "" for none; else AUTH first on TCP */
    char    *auth_admin_password;   /* "" for none; AUTH with it: the admin right */
    bool     auth_unix_exempt;      /* Unix socket sessions need no AUTH */
    enum conf_show_labels show_labels; /* auth.show_labels */

    /* metrics: */
    struct conf_addr metrics;       /* metrics.listen; spec "" when disabled */
    bool     metrics_allow_remote;  /* metrics.allow_remote: a non-loopback
                                       metrics.listen is meant */
    int64_t  metrics_max_connections;   /* metrics.max_connections: at once */
    int64_t  metrics_request_timeout_ms; /* metrics.request_timeout_ms: a request's
                                            whole time, first byte to reply */

    /* log: */
    enum conf_log_level log_level;  /* log.level */
};

/* One problem found in a file: "file:line:column: text". */
struct conf_msg {
    bool  is_error;                 /* false for a warning */
    char *text;                     /* malloc'd, the whole message, no LF */
};

/* Problems found by conf_load(), in file order; owned by the caller. */
struct conf_msgs {
    struct conf_msg *list;          /* malloc'd array */
    size_t           n;             /* entries in list */
    size_t           nerrors;       /* entries with is_error */
};

/* Fill conf with every default (the values in conf/redlockd.yml). */
void conf_defaults(struct conf *conf);

/*
 * Read and check the file at path.
 *
 * conf is overwritten: first with the defaults, then with the file's
 * values.  Every problem is appended to msgs (which the caller has
 * zeroed) as "path:line:column: what is wrong", for example
 * "redlockd.yml:12:5: unknown key 'ttl' in 'lock'" or
 * "redlockd.yml:7:5: masters[2]: bad address '1.2.3.4': missing ':port'".
 * A problem with the whole file has no position ("path: cannot open:
 * ...", "path: masters: required (1 to 15 addresses)").  Warnings (an
 * even number of masters) do not fail the load.
 *
 * Returns 0 when the file has no errors, -1 otherwise (conf then holds
 * whatever could be parsed and must still be released with conf_free()).
 */
int conf_load(const char *path, struct conf *conf, struct conf_msgs *msgs);

/*
 * Check listen.unix against the file system: the directory the socket
 * file is to be created in must exist.  Appends an error to msgs, with
 * the file:line:column of listen.unix ("path: listen.unix ..." when it
 * has its default), and returns -1 when it does not; 0 when it does or
 * listen.unix is disabled.  With ahead (`redlockd -t`, which may run
 * before anything created the directory: systemd's RuntimeDirectory= makes
 * /run/redlockd as the service starts) a directory that does not exist is
 * a warning saying it must exist at start, and the return is 0; a path
 * that is no directory stays an error.  Not part of conf_load(), which
 * reads only the file: `redlockd -t` calls both, the daemon calls this
 * one before it binds the socket (not when systemd passes the sockets,
 * nor on a reload, which cannot change listen.unix).
 */
int conf_check_unix_dir(const struct conf *conf, bool ahead, struct conf_msgs *msgs);

/* Release the strings held by conf; conf may be loaded again afterwards. */
void conf_free(struct conf *conf);

/* Release the messages; msgs may be used again afterwards. */
void conf_msgs_free(struct conf_msgs *msgs);

/*
 * Parse an address as used in listen.tcp and masters: "host:port",
 * "[v6addr]:port", or (only when allow_unix) "unix:/absolute/path".
 * Returns 0, or -1 with a reason in err (size errlen) such as
 * "missing ':port'" or "port 70000 out of range 1..65535"; *addr is
 * zeroed on failure.
 */
int conf_parse_addr(const char *spec, bool allow_unix, struct conf_addr *addr,
                    char *err, size_t errlen);

/*
 * The settings a reload cannot change (marked "Restart" in
 * conf/redlockd.yml: listeners, masters, metrics.listen, lock.key_prefix)
 * whose values differ between running and next.  Writes their names,
 * comma-separated, into buf (cut to size, NUL-terminated) and returns
 * how many there are (0: next may be applied by a reload).
 */
size_t conf_restart_changes(const struct conf *running, const struct conf *next, char *buf,
                            size_t size);

/* The name of a log level ("info"). */
const char *conf_log_level_name(enum conf_log_level level);

#endif /* REDLOCKD_CONF_H */
