/*
 * harness.h: real processes and real sockets for the integration tests.
 *
 * The harness starts redis-server masters and the redlockd binary as
 * child processes on free loopback ports, writes every file (configs,
 * the Unix socket, redis logs, the daemon log) into a fresh temporary
 * directory, and offers a blocking line client for the text protocol
 * (the client library, client/client.h, on a bare descriptor).
 *
 * Layout on disk:
 *
 *     $TMPDIR/redlockd-it.XXXXXX/              h_suite_init(), one per run
 *         <test>.XXXXXX/                       h_begin(), one per test
 *             redlockd.yml redlockd.log redlockd.sock redis-<port>.log
 *             redlockd-1.yml redlockd-1.log ...  the second daemon, ...
 *             master-<i>/                      data of a persistent master
 *             clock-<i>                        wall-clock offset of master i
 *                                              (h_clock_masters)
 *
 * Process model: the harness keeps one set of masters and the daemons
 * started against them, per process (file-level state; Check runs each
 * test in its own forked process).  Daemons are numbered from 0 in start
 * order; the functions about "the daemon" act on the current one, which
 * is the one started last unless h_use_daemon() chose another.  Every
 * child gets PR_SET_PDEATHSIG(SIGKILL) before exec, so it dies with the
 * test process even when a failed assertion ends that process without a
 * teardown.  A test that passes cleans up with h_end(); a test directory
 * that is still there when the suite ends belongs to a test that failed
 * (or crashed or timed out), and h_suite_cleanup() prints the tail of
 * each of its daemon logs before removing everything.
 *
 * Conventions: times are milliseconds on the monotonic clock; functions
 * that can fail return 0 / -1 (or NULL) and print the reason to stderr
 * with a "harness:" prefix; returned strings are malloc'd and owned by
 * the caller (free()).  Master indexes count from 0 in start order.
 */
#ifndef REDLOCKD_TESTS_HARNESS_H
#define REDLOCKD_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define H_MASTERS_MAX       15      /* as many as the daemon accepts */
#define H_DAEMONS_MAX       16      /* daemons per test (the bench starts a fresh one per row) */
#define H_START_MS          5000    /* deadline for a master or the daemon to come up */
#define H_PROMPT_MS         5000    /* deadline for what the daemon does at once, with
                                       no timer of its own (a stat moved by a request or
                                       a close, a log line, a push): it covers only the
                                       machine's speed, loaded and sanitized, and costs
                                       nothing when the test passes */
#define H_REDIS_TIMEOUT_MS  5000    /* connect and command timeout of h_master_*: a
                                       running master answers long before on a
                                       loaded machine; a stopped one is not asked */
#define H_PTTL_ABSENT       (-2)    /* h_master_pttl: no such key */
#define H_PTTL_PERSIST      (-1)    /* h_master_pttl: key without expiry */
#define H_PTTL_ERROR        (-3)    /* h_master_pttl: master down or bad reply */
#define H_STILL_RUNNING     (-2)    /* h_wait_daemon: deadline passed */
#define H_NO_DAEMON         (-1)    /* h_wait_daemon/h_stop_daemon: none running */

/* ---- time and polling ---- */

/* Milliseconds on CLOCK_MONOTONIC since an arbitrary point. */
int64_t h_now_ms(void);

/* Sleep ms milliseconds (for pacing a poll loop, never for "settling"). */
void h_sleep_ms(int64_t ms);

/* A condition polled by h_wait_until() and h_holds_for(). */
typedef bool (*h_cond_fn)(void *arg);

/*
 * Call cond(arg) every 5 ms until it returns true or timeout_ms has
 * passed.  The condition is always tried at least once, and once more
 * at the deadline.  Returns true when it became true in time.
 */
bool h_wait_until(h_cond_fn cond, void *arg, int64_t timeout_ms);

/*
 * Check that cond(arg) stays true for duration_ms: it is called at once
 * and then every interval_ms (the last call at or after the end).
 * Returns true when every call returned true, false at the first call
 * that returned false.
 */
bool h_holds_for(h_cond_fn cond, void *arg, int64_t duration_ms, int64_t interval_ms);

/* ---- directories ---- */

/*
 * Create the run directory (under $TMPDIR, default /tmp) that holds one
 * directory per test.  Call once in main() before the tests are forked.
 * Returns 0 or -1.
 */
int h_suite_init(void);

/*
 * End of the run: for every test directory still present (a test that
 * did not reach h_end(), i.e. failed, crashed or timed out) print the
 * last lines of its daemon log to stderr; then remove the run directory
 * and everything in it.  Call once in main() after the runner is done.
 */
void h_suite_cleanup(void);

/*
 * Start a test: create "<run dir>/<name>.XXXXXX" (name: the test's name,
 * letters, digits, '_' and '-' only; NULL gives "test").  Returns 0 or -1.
 */
int h_begin(const char *name);

/*
 * End a test: stop every daemon (as h_stop_daemon, all at once), kill
 * every master, and remove the test directory.  Safe to call when
 * nothing was started.
 */
void h_end(void);

/* The current test directory (valid after h_begin until h_end). */
const char *h_dir(void);

/*
 * The certificates of tests/tls/make-certs.sh (run from the top of the
 * repository), made in <test dir>/certs, its output in
 * <test dir>/make-certs.log.  Returns 0, or -1 when the script failed.
 */
int h_make_certs(void);

/* <test dir>/certs/<name>: one of 8 static buffers, reused in turn. */
const char *h_cert(const char *name);

/* ---- processes and files (for tools built on the harness) ---- */

/* A 127.0.0.1 TCP port that was free a moment ago, or -1. */
int h_free_port(void);

/*
 * Fork and exec argv (PATH is searched) with stdin from /dev/null and
 * stdout and stderr appended to out_path.  The child gets SIGKILL when
 * the calling process dies (PR_SET_PDEATHSIG).  Returns its pid or -1.
 */
pid_t h_spawn(const char *const argv[], const char *out_path);

/*
 * h_spawn() in the network namespace netns (a name under /run/netns, as
 * `ip netns add` makes them), which the child joins with setns(2) before
 * exec; netns NULL or "" is h_spawn().  A child that cannot join exits
 * with status 126 and a line in out_path.
 */
pid_t h_spawn_in(const char *const argv[], const char *out_path, const char *netns);

/*
 * In a child just forked by a test (before exec): die with the test
 * process (PR_SET_PDEATHSIG, SIGKILL; _exit(127) when parent, the pid
 * that forked, is already gone), no blocked signals, default SIGPIPE.
 */
void h_child_setup(pid_t parent);

/* A wait(2) status in the shell's manner: the exit code, or 128 + signal. */
int h_decode_status(int status);

/* Remove a directory tree (nothing happens for ""); errors are printed. */
void h_remove_tree(const char *path);

/*
 * A synchronous hiredis connection to 127.0.0.1:port with connect and
 * command timeouts of H_REDIS_TIMEOUT_MS; NULL when it failed.  Free it
 * with redisFree().
 */
struct redisContext *h_redis_connect(int port);

/* True when a redis-server on 127.0.0.1:port answers PING with PONG. */
bool h_redis_ping(int port);

/* ---- Redis masters ---- */

/*
 * Start n (1..H_MASTERS_MAX) redis-server processes, each on a free
 * 127.0.0.1 port, without persistence, logging to <dir>/redis-<port>.log,
 * and wait (deadline H_START_MS each) until each answers PING.  A port
 * that turns out to be taken is replaced by another one (a few tries).
 * Returns 0, or -1 when a master did not come up (those that did are
 * left running for h_end to stop).
 */
int h_start_masters(size_t n);

/*
 * Where a master or a daemon runs.  Without a placement every process
 * is on 127.0.0.1 in the test's own network namespace, as before.  A
 * placed process binds addr (and redis-server runs with protected-mode
 * off, since its clients are not on loopback), the harness and the
 * daemons' configs reach it there, and it runs in network namespace
 * netns (joined before exec, see h_spawn_in) when that is not "".
 * Making the namespaces and the addresses is the caller's business
 * (the fault suite's tests/faults/netns.c).
 */
#define H_ADDR_MAX          46      /* an address, NUL included (INET6_ADDRSTRLEN) */
#define H_NETNS_MAX         64      /* a namespace name, NUL included */

struct h_host {
    char addr[H_ADDR_MAX];          /* IPv4 address to bind and reach; "" is 127.0.0.1 */
    char netns[H_NETNS_MAX];        /* network namespace to run in; "" is the caller's */
};

/*
 * Place the masters that are started next in this test (h_start_masters,
 * h_start_masters_aof, h_add_master): master i runs on hosts[i], masters
 * from index n on stay on 127.0.0.1.  Call after h_begin(); h_begin()
 * and h_end() forget the placement.  A restarted master keeps its host.
 */
void h_place_masters(const struct h_host *hosts, size_t n);

/* The address master i is reached at ("127.0.0.1" unless placed). */
const char *h_master_addr(size_t i);

/*
 * A synchronous hiredis connection to master i at its address, with the
 * timeouts of h_redis_connect(); NULL when it is not running, stopped
 * (h_signal_master) or the connection failed.  Free it with redisFree().
 */
struct redisContext *h_master_redis(size_t i);

/* Number of masters started (alive or killed). */
size_t h_master_count(void);

/* TCP port of master i. */
int h_master_port(size_t i);

/* True when master i is running (started and not killed). */
bool h_master_alive(size_t i);

/* Number of masters running now. */
size_t h_masters_alive(void);

/* SIGKILL master i and reap it.  Returns 0, or -1 when it was not running. */
int h_kill_master(size_t i);

/*
 * Start master i again on its old port and wait (deadline H_START_MS)
 * until it answers PING (for a persistent master: until it has loaded
 * its data).  A master from h_start_masters() comes back with an empty
 * dataset, one from h_start_masters_aof() with every write it
 * acknowledged.  Returns 0 or -1.
 */
int h_restart_master(size_t i);

/*
 * h_start_masters() with persistence: each master writes an
 * append-only file, fsync'd before every reply (--appendonly yes
 * --appendfsync always), in a data directory of its own,
 * <dir>/master-<i>, so that h_kill_master() (SIGKILL) and
 * h_restart_master() bring it back with its data, as a production
 * master configured as the README asks.  Returns 0 or -1.
 */
int h_start_masters_aof(size_t n);

/* What h_add_master() starts. */
enum h_master_kind {
    H_MASTER_PLAIN,         /* a plain port, "127.0.0.1:port" */
    H_MASTER_TLS,           /* TLS only (--port 0 --tls-port), "rediss://127.0.0.1:port" */
    H_MASTER_PLAIN_AS_TLS   /* a plain port written "rediss://127.0.0.1:port" */
};

/*
 * Masters over TLS: h_tls_masters() names the directory of
 * tests/tls/make-certs.sh's files (its ca.crt signs the clients the
 * masters accept; with auth_clients they require a client certificate,
 * tls-auth-clients yes).  h_add_master() then starts one more master of
 * kind on a free port, a TLS one with <dir>/<cert>.crt and .key (cert
 * "server" when NULL), and waits until it answers PING (TLS: until its
 * port accepts connections).  It is listed in the daemon's config after
 * those started before it.  The h_master_* functions that ask a master
 * something speak plain Redis only.  Returns 0 or -1.
 */
void h_tls_masters(const char *cert_dir, bool auth_clients);
int h_add_master(enum h_master_kind kind, const char *cert);

/*
 * Masters with a wall clock that a test steps (Redis expires keys by the
 * wall clock).  h_clock_masters(mask), after h_begin() and before the
 * masters start, makes each master i with bit (1u << i) of mask run the
 * redis-server of tests/faults/build-redis-libc.sh ($REDIS_LIBC_BIN, else
 * ./build/redis-libc/redis-server) under libfaketime, which reads the
 * master's offset from real time in <test dir>/clock-<i> at every clock
 * call.  The packaged redis-server cannot be used: linked with jemalloc,
 * it dies at start-up under libfaketime.  Only the wall clock is moved
 * (TIME, expiry); CLOCK_MONOTONIC is not.  A master starts at offset 0
 * and keeps its offset across h_restart_master().  Returns 0, or -1 when
 * that binary or libfaketime is missing (the reason printed).
 */
int h_clock_masters(uint32_t mask);

/*
 * Set master i's wall clock to real time + offset_ms (a step from its
 * offset before: +10000 then -10000 is a step of 20 s back) and wait,
 * at most 2 s, until its TIME shows the new offset (within 50 ms).  Only
 * for a master of h_clock_masters().  Returns 0 or -1.
 */
int h_master_clock_step(size_t i, int64_t offset_ms);

/*
 * GET key on master i (hiredis, synchronous, H_REDIS_TIMEOUT_MS).
 * Returns the value as a malloc'd NUL-terminated string (caller frees),
 * or NULL when the key does not exist or the master could not be asked.
 */
char *h_master_get(size_t i, const char *key);

/*
 * PTTL key on master i: the remaining lifetime in ms (>= 0),
 * H_PTTL_PERSIST, H_PTTL_ABSENT, or H_PTTL_ERROR when the master could
 * not be asked.
 */
long long h_master_pttl(size_t i, const char *key);

/*
 * Number of running masters that answered and hold key; with value
 * non-NULL, only those where the key's value equals value.
 */
size_t h_masters_holding(const char *key, const char *value);

/*
 * Number of running masters that answered and do not have key.
 * "Gone from all five" is h_masters_without(key) == 5; a master that is
 * down or fails to answer counts on neither side.
 */
size_t h_masters_without(const char *key);

/*
 * PUBSUB NUMSUB channel on master i: the number of clients subscribed
 * to channel, or -1 when the master could not be asked.
 */
long long h_master_numsub(size_t i, const char *channel);

/*
 * How many times master i ran command (lower case, as INFO commandstats
 * names it: "evalsha", "eval", "set") since it started, or since CONFIG
 * RESETSTAT; 0 when never; -1 when the master could not be asked.
 */
long long h_master_calls(size_t i, const char *command);

/*
 * Bytes the kernel holds on the established IPv4 connections of
 * 127.0.0.1:port (/proc/net/tcp): in *send_q the send queues of the
 * sockets connected to port (its clients'), in *recv_q the receive
 * queues of the sockets on port (the server's), and in *recv_waiting
 * (when not NULL) how many of those have unread bytes.  Returns the
 * number of connections to port, or -1 when /proc/net/tcp cannot be read.
 */
int h_tcp_queues(int port, long long *send_q, long long *recv_q, int *recv_waiting);

/*
 * Every command master i ran since it started (the sum of calls over
 * INFO commandstats; commands a script calls count too, as Redis counts
 * them), and in *scripts (when not NULL) the script calls among them
 * that rounds make (EVALSHA, FCALL; not EVAL, the layout registry's
 * heartbeat and NOSCRIPT retries).  -1 (both) when the master could not
 * be asked.
 */
long long h_master_commands(size_t i, long long *scripts);

/* Master i's CPU time since it started (used_cpu_sys + used_cpu_user of INFO cpu), us; -1 when not asked. */
long long h_master_cpu_us(size_t i);

/* ---- the daemon ---- */

/*
 * Settings for h_start_daemon().  A zero member leaves the daemon's
 * default (conf/redlockd.yml), except node_timeout_ms, which is
 * H_NODE_TIMEOUT_MS when zero, min_ttl_ms, which is H_MIN_TTL_MS when zero,
 * zero, and log_level, which is "debug" when NULL.
 */
/*
 * The round deadline the tests use.  The daemon's default is 50 ms; the
 * test machines (small VMs) sometimes take longer than that to wake a
 * sleeping redis-server, several at once, and the hypervisor steals
 * CPU in bursts of a few hundred ms, which would turn a LOCK into a
 * genuine but unwanted NOQUORUM.  The tests are about behaviour, not
 * about this machine's wake-up latency.
 */
#define H_NODE_TIMEOUT_MS   500
#define H_MIN_TTL_MS        600     /* must exceed node_timeout_ms */

struct h_daemon_opts {
    int64_t     default_ttl_ms;         /* lock.default_ttl_ms */
    int64_t     min_ttl_ms;             /* lock.min_ttl_ms */
    int64_t     max_ttl_ms;             /* lock.max_ttl_ms */
    int64_t     node_timeout_ms;        /* lock.node_timeout_ms (H_NODE_TIMEOUT_MS when 0) */
    int64_t     retry_delay_ms;         /* lock.retry_delay_ms */
    int64_t     delay_ms;               /* lock.delay_ms (not written when 0) */
    int64_t     max_line_bytes;         /* limits.max_line_bytes */
    int64_t     max_clients;            /* limits.max_clients */
    int64_t     max_locks_per_client;   /* limits.max_locks_per_client */
    const char *log_level;              /* log.level ("debug" when NULL) */
    const char *redis_password;         /* redis.password (none when NULL) */
    const char *redis_username;         /* redis.username (none when NULL) */
    int         expect_masters_up;      /* masters_up to wait for at start;
                                           0 means h_masters_alive(), -1
                                           means do not wait for masters */
    const char *fence;                  /* lock.fence (not written when NULL) */
    const char *key_prefix;             /* lock.key_prefix ("" when NULL, unlike the
                                           daemon's default) */
    const char *clock_check;            /* lock.clock_check, "true" or "false" (not
                                           written when NULL) */
    double      drift_factor;           /* lock.drift_factor (not written when 0) */
    bool        restart_quarantine;     /* lock.restart_quarantine (false here,
                                           unlike the daemon's default) */
    int64_t     idle_timeout_ms;        /* limits.idle_timeout_ms */
    int64_t     auth_timeout_ms;        /* limits.auth_timeout_ms */
    int64_t     max_output_bytes;       /* limits.max_output_bytes */
    int64_t     max_pending;            /* redis.max_pending */
    int64_t     down_after_ms;          /* redis.down_after_ms */
    const char *auth_password;          /* auth.password (none when NULL) */
    bool        auth_unix_required;     /* auth.unix_exempt: false */
    const char *admin_password;         /* auth.admin_password (none when NULL) */
    const char *show_labels;            /* auth.show_labels (not written when NULL) */
    int         metrics_port;           /* metrics.listen on 127.0.0.1 (off when 0) */
    int64_t     metrics_max_connections;    /* metrics.max_connections (with metrics_port) */
    int64_t     metrics_request_timeout_ms; /* metrics.request_timeout_ms (with metrics_port) */
    const char *const *extra_masters;   /* more masters entries, written as they
                                           are ("localhost:6380") after every
                                           started master; NULL-terminated;
                                           NULL for none */
    bool        start_fails;            /* the test wants the start to fail: one
                                           try, and nothing printed about it */
    const char *tls_cert_file;          /* tls.cert_file; when set, listen.tls on a
                                           free 127.0.0.1 port (h_daemon_tls_port) */
    const char *tls_key_file;           /* tls.key_file (with tls_cert_file) */
    const char *tls_client_ca_file;     /* tls.client_ca_file (none when NULL) */
    const char *tls_client_crl_file;    /* tls.client_crl_file (not written when NULL) */
    const char *const *tls_client_names; /* tls.client_names, NULL-terminated (not
                                           written when NULL) */
    const char *tls_ciphers;            /* tls.ciphers (not written when NULL) */
    const char *tls_ciphersuites;       /* tls.ciphersuites (not written when NULL) */
    const char *redis_tls_ca_file;      /* redis.tls_ca_file (not written when NULL) */
    const char *redis_tls_cert_file;    /* redis.tls_cert_file, with redis_tls_key_file */
    const char *redis_tls_key_file;     /* redis.tls_key_file */
    const char *redis_tls_server_name;  /* redis.tls_server_name (not written when NULL) */
    const struct h_host *host;          /* where the daemon runs (listen.tcp on its
                                           address, in its namespace); NULL: on
                                           127.0.0.1 here */
    const char *const *master_addrs;    /* per started master, "host:port" written in
                                           masters instead of its own address (a
                                           proxy in front of it); NULL, or a NULL
                                           entry: its own */
    const char *limits_yaml;            /* more lines of the limits section, as written
                                           ("  unix_reserved: 2\n"); NULL for none */
    int         nofile;                 /* RLIMIT_NOFILE, soft and hard, for the daemon
                                           (prlimit(1)); 0: the harness's own */
    bool        known_keys_only;        /* an older build ($REDLOCKD_BIN at its start,
                                           a past release), which rejects config keys
                                           it does not know: before each start the
                                           harness runs it with -t on the config and
                                           leaves out every section and key it calls
                                           unknown, until it accepts the config (what
                                           was left out is written to the daemon's
                                           log before it starts); a config it rejects
                                           for another reason fails the start */
};

/*
 * Run one command on master i with hiredis's redisCommand format (for
 * example "SCRIPT FLUSH" or "CONFIG SET requirepass %s"), authenticating
 * first with password when it is not NULL.  Returns 0 when the master
 * answered without an error reply, -1 otherwise.
 */
int h_master_cmd(size_t i, const char *password, const char *fmt, ...);

/*
 * The redlockctl binary under test: $REDLOCKCTL_BIN, else redlockctl next
 * to $REDLOCKD_BIN, else ./build/redlockctl.  The string is static.
 */
const char *h_redlockctl_bin(void);

/*
 * Read fd until the peer closes it, within timeout_ms, at most max
 * bytes.  Returns the bytes, NUL-terminated and malloc'd (*len, when
 * not NULL, says how many), or NULL on a timeout, an error, more than
 * max bytes, or no memory.  fd is not closed.
 */
char *h_read_all(int fd, size_t max, int64_t timeout_ms, size_t *len);

/*
 * Send a signal to master i's process (SIGSTOP, SIGCONT).  0 or -1.
 * While it is stopped, h_master_redis and every h_master_* query treat
 * it as not answering at once, as they do a killed master, instead of
 * waiting H_REDIS_TIMEOUT_MS for it.
 */
int h_signal_master(size_t i, int sig);

/*
 * Start one more daemon (at most H_DAEMONS_MAX per test), against the
 * same masters as the others, and make it the current one.  Write
 * <dir>/redlockd.yml (listen tcp on a free port of 127.0.0.1, or of
 * opts->host's address, different from every other daemon's port of
 * the test, and unix <dir>/redlockd.sock; masters: every started master,
 * in order, at its address or opts->master_addrs[i], then
 * opts->extra_masters; the settings in opts, NULL for all defaults) and
 * start, in opts->host's namespace when it has one, the binary named by
 * $REDLOCKD_BIN (default ./build/redlockd) with its stdout and stderr
 * appended to <dir>/redlockd.log.  $REDLOCKD_BIN is read at each start:
 * a test that runs daemons of several builds (the liveness control's,
 * a past release) sets it before starting each one.  The first daemon of a test (index 0)
 * uses those names; daemon i > 0 uses redlockd-<i>.yml, .log and .sock.
 * $REDLOCKD_WRAP, when set, is split at spaces and put before the binary
 * (for example "valgrind --leak-check=full --log-file=/tmp/vg.%p").
 * A daemon started after h_stop_daemon() is a new one with the next
 * index.  Waits (deadline H_START_MS) until the daemon accepts TCP
 * connections and STATS shows masters_up equal to h_masters_alive().
 * When the daemon exits during start-up (its port was taken), it is
 * started again on another port, a few times, quietly.  Returns 0, or -1
 * (the exit statuses of the tries and the log tail are printed to stderr,
 * unless opts->start_fails; the current daemon is then the one it was
 * before the call).
 */
int h_start_daemon(const struct h_daemon_opts *opts);

/*
 * Start the current daemon again after h_stop_daemon() or its death (a
 * rolling restart): the same slot, index, port, Unix socket and log
 * (appended to), so that clients that knew it find it again; its config
 * written anew from opts (NULL for all defaults; opts->host and the TLS
 * port are not changed), the binary named by $REDLOCKD_BIN now, which may
 * be another build than before (an upgrade, a rollback).  Waits for it as
 * h_start_daemon() does, with no retry on another port.  Returns 0, or -1
 * when it is still running, did not start or was not ready in time (the
 * reason and its log tail printed).
 */
int h_restart_daemon(const struct h_daemon_opts *opts);

/* Number of daemons started in this test (running or stopped). */
size_t h_daemon_count(void);

/*
 * Make daemon i (0 .. h_daemon_count() - 1) the current one: the one
 * that h_connect_tcp, h_connect_unix, h_daemon_port, h_daemon_pid,
 * h_daemon_unix_path, h_daemon_log_path, h_signal_daemon, h_wait_daemon,
 * h_stop_daemon, h_stat_once and h_print_daemon_log_tail act on.  A bad
 * index is a bug in the test: it aborts the test process.
 */
void h_use_daemon(size_t i);

/* Index of the current daemon (0 before any was started). */
size_t h_current_daemon(void);

/* The daemon's process id, or 0 when none is running. */
pid_t h_daemon_pid(void);

/* The daemon's TCP port. */
int h_daemon_port(void);

/* The address its TCP port listens on ("127.0.0.1" unless opts->host placed it). */
const char *h_daemon_addr(void);

/* The daemon's listen.tls port, 0 when it has none (opts->tls_cert_file). */
int h_daemon_tls_port(void);

/* Path of the daemon's Unix socket. */
const char *h_daemon_unix_path(void);

/* Path of the daemon's config file (written by h_start_daemon). */
const char *h_daemon_conf_path(void);

/* Path of the daemon's log (its stdout and stderr). */
const char *h_daemon_log_path(void);

/* Send signal sig to the daemon.  Returns 0, or -1 when none is running. */
int h_signal_daemon(int sig);

/*
 * Wait up to timeout_ms for the daemon to exit and reap it.  Returns its
 * exit code (0..255), 128 + the signal number when a signal ended it,
 * H_STILL_RUNNING when it is still running at the deadline, or
 * H_NO_DAEMON when none was running.
 */
int h_wait_daemon(int64_t timeout_ms);

/*
 * Stop the daemon: SIGTERM, wait up to 5000 ms, then SIGKILL.  Returns
 * what h_wait_daemon() returned (137 when SIGKILL was needed), or
 * H_NO_DAEMON.
 */
int h_stop_daemon(void);

/* Print the last nlines lines of the daemon log to stderr, framed. */
void h_print_daemon_log_tail(size_t nlines);

/* ---- protocol client (client/client.h, on a bare descriptor) ---- */

/*
 * Connect to the daemon over TCP (h_daemon_addr():h_daemon_port()) or its
 * Unix socket, within 10 s.  Returns a blocking, close-on-exec socket
 * (caller closes it with close()), or -1 with errno.
 */
int h_connect_tcp(void);
int h_connect_unix(void);

/* The same as h_connect_tcp() to any port of 127.0.0.1 (the metrics port). */
int h_connect_port(int port);

/*
 * The plain TCP connect, for tests that need the socket itself rather
 * than a client of the protocol: a blocking, close-on-exec IPv4 socket,
 * bound to source address from when from is not NULL (an IPv4 address
 * such as "127.0.0.2", port chosen by the kernel), its receive buffer set
 * to rcvbuf bytes when rcvbuf > 0 (before connecting, so that the window
 * is small from the start), connected once to addr:port (no retry).
 * Returns the descriptor (caller closes it), or -1 with errno from the
 * call that failed (ECONNREFUSED when nothing listens there).
 */
int h_tcp_connect(const char *from, const char *addr, int port, int rcvbuf);

/*
 * A TCP socket listening on IPv4 address addr (network byte order, e.g.
 * htonl(INADDR_LOOPBACK)) on a port the kernel chose, with the given
 * backlog; *port gets that port.  Returns the descriptor (caller closes
 * it), or -1 with errno.
 */
int h_tcp_listen(uint32_t addr, int backlog, int *port);

/* Send line followed by LF.  Returns 0, or -1 when the send failed. */
int h_send(int fd, const char *line);

/* Send exactly len bytes (no LF added).  Returns 0 or -1. */
int h_send_raw(int fd, const void *buf, size_t len);

/*
 * Read one line within timeout_ms, taking no byte after its LF from the
 * socket.  Returns it malloc'd (caller frees) without its LF; any other
 * byte, a CR included, is kept.  Returns NULL on timeout (errno
 * ETIMEDOUT), at end of stream (errno 0), for a line longer than
 * CLIENT_LINE_MAX (EMSGSIZE) or on an error (errno from recv); bytes of
 * a partial line are then dropped.
 */
char *h_read_line(int fd, int64_t timeout_ms);

/* h_send(fd, line) then h_read_line(fd, timeout_ms); NULL if either failed. */
char *h_cmd(int fd, const char *line, int64_t timeout_ms);

/*
 * True when the peer closes the connection (end of stream or a reset)
 * within timeout_ms without sending any byte first.
 */
bool h_expect_eof(int fd, int64_t timeout_ms);

/* True when nothing (no byte, no end of stream) arrives on fd for ms. */
bool h_quiet(int fd, int64_t ms);

/*
 * Send STATS on fd and read the reply up to END (1000 ms per line).
 * When a line "STAT <name> <value>" has an integer value, store it in
 * *value and return 0; return -1 when the reply failed or lacks name.
 */
int h_stat(int fd, const char *name, long long *value);

/*
 * h_stat() over a connection of its own (opened and closed here), so
 * that it never mixes with a test's connections; it sends AUTH first
 * when the daemon was started with an auth_password.  Returns 0 or -1.
 */
int h_stat_once(const char *name, long long *value);

/*
 * Poll STATS (h_stat_once, every 5 ms) until the counter name equals
 * want (or, with at_least, is want or more), for at most timeout_ms.
 * The last value read goes to *seen when seen is not NULL (-1 when
 * none could be read).  Returns true when it got there in time.
 */
bool h_wait_stat(const char *name, long long want, bool at_least, int64_t timeout_ms,
                 long long *seen);

/* ---- the daemon log ---- */

/* Size of the current daemon's log now, bytes: where a later search starts. */
off_t h_log_size(void);

/*
 * Search the current daemon's log from byte offset from for a line that
 * contains text; copy that line (without its LF, cut to size) into line
 * when line is not NULL.  Returns true when there is one.
 */
bool h_log_find(off_t from, const char *text, char *line, size_t size);

/* h_log_find(from, text, NULL, 0) polled every 5 ms for at most timeout_ms. */
bool h_wait_log(off_t from, const char *text, int64_t timeout_ms);

/* ---- reply parsing (the client library's, under the suites' names) ---- */

/* client_is_reply(): line starts with "<status> <name>", then a space or its end. */
bool h_is_reply(const char *line, const char *status, const char *name);

/*
 * client_field(): the value of the word "<key>=<value>" after the status
 * word and the name (a name may itself contain '=', so the first two
 * words are skipped; so is the "! " of a pushed line), copied with a NUL
 * into out (size bytes).  Returns false when line is NULL, there is no
 * such word, or it does not fit.
 */
bool h_reply_field(const char *line, const char *key, char *out, size_t size);

/* client_field_int(): a decimal integer (maybe negative) into *value. */
bool h_reply_int(const char *line, const char *key, long long *value);

/* True when s is an owner token: 32 lowercase hex digits. */
bool h_is_token(const char *s);

/* ---- HTTP and the metrics endpoint (metrics.listen) ---- */

#define H_HTTP_MS           3000            /* deadline for a whole HTTP exchange */
#define H_HTTP_MAX          (1024 * 1024)   /* largest response read */

/* An HTTP response: status code, raw header block and body (all malloc'd). */
struct h_http_resp {
    int     status;     /* 200, 404, ...; 0 when none was read */
    char   *head;       /* status line and headers, CRLFs kept, NUL-terminated */
    char   *body;       /* the body, NUL-terminated (empty for HEAD) */
    size_t  body_len;   /* bytes in body */
};

/*
 * Send request (the whole text, "Connection: close" in it) to
 * 127.0.0.1:port and read until the server closes, within H_HTTP_MS, at
 * most H_HTTP_MAX bytes.  Returns 0 with *r filled (free it with
 * h_http_free), or -1 (the reason printed when the response was not
 * complete in time).
 */
int h_http(int port, const char *request, struct h_http_resp *r);

/* Free what h_http() put in r and zero it. */
void h_http_free(struct h_http_resp *r);

/*
 * GET /metrics from 127.0.0.1:port.  Returns the body (malloc'd,
 * NUL-terminated) when the answer is 200, else NULL (the status printed).
 */
char *h_metrics_scrape(int port);

/*
 * The value of the sample whose name and labels are exactly series
 * ("redlockd_masters_up", "redlockd_master_up{master=\"0\",addr=\"...\"}")
 * in an exposition body.  Returns false when there is no such line or
 * its value is not a number.
 */
bool h_metric_value(const char *body, const char *series, double *value);

/* h_metric_value() as an integer; -1 when there is no such sample. */
long long h_metric_int(const char *body, const char *series);

#endif /* REDLOCKD_TESTS_HARNESS_H */
