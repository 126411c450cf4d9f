/*
 * command.c: the line protocol's verbs, run for each session, and the
 * replies and pushed lines they write.  See daemon/command.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/authlimit.h"
#include "daemon/command.h"
#include "daemon/command_conn.h"
#include "daemon/ctx.h"
#include "daemon/layout.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/readq.h"
#include "daemon/report.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/util.h"
#include "daemon/watch.h"
#include "daemon/xmalloc.h"
#include "proto/proto.h"

#define COMMAND_LIST_NAMES  1024          /* names per step of a LIST */
#define COMMAND_LIST_TURN   1             /* LIST steps written per turn of the event
                                             loop, however many sessions LIST */

struct command;

/*
 * Where a LIST stands between its steps.  Owned by its command state;
 * freed (and taken out of the due queue) when the LIST ends or the
 * session is freed.
 */
struct command_list {
    struct command *c;              /* the command state it belongs to */
    bool    begun;                  /* after holds the last name listed */
    size_t  prefix_len;             /* bytes in prefix */
    char    prefix[PROTO_WORD_MAX]; /* LIST's prefix */
    size_t  after_len;              /* bytes in after */
    char    after[PROTO_NAME_MAX];  /* LIST goes on after this name */
    bool    due;                    /* in command_lists_due */
    TAILQ_ENTRY(command_list) due_link; /* in command_lists_due */
};

/* LISTs whose client read their last step, in turn: the next steps to write. */
static TAILQ_HEAD(, command_list) command_lists_due = TAILQ_HEAD_INITIALIZER(command_lists_due);
static struct event       command_list_turn; /* zero timer: the next COMMAND_LIST_TURN steps */
static char               command_host[PROTO_LABEL_MAX + 1]; /* for default labels */

/*
 * May s see the label of a hold that is not its own?  (auth.show_labels:
 * labels name hosts, users and processes.)
 */
bool
command_sees_labels(const struct command *c)
{
    return ctx.conf->show_labels == CONF_LABELS_ALL || session_admin_by(c->s) != NULL;
}


/* STATS' lines of the acquire latency histogram row: cumulative, as in /metrics. */
static void
command_stats_latency(struct evbuffer *out, const char *stat)
{
    struct report_latency h;
    size_t i;

    report_latency(&h);
    for (i = 0; i < STATS_LATENCY_NBOUNDS; i++) {
        evbuffer_add_printf(out, "STAT %s_ms_le_%lld %llu\n", stat,
                            (long long)stats_latency_bound_ms(i), (unsigned long long)h.le[i]);
    }
    evbuffer_add_printf(out, "STAT %s_ms_le_inf %llu\n", stat,
                        (unsigned long long)h.le[STATS_LATENCY_NBOUNDS]);
    evbuffer_add_printf(out, "STAT %s_count %llu\n", stat,
                        (unsigned long long)h.le[STATS_LATENCY_NBOUNDS]);
    evbuffer_add_printf(out, "STAT %s_sum_us %lld\n", stat, (long long)h.sum_us);
}

/*
 * STATS: "STAT <name> <value>" for the version, every row of the report
 * table (daemon/report.h) that has a STATS name, and every master's rows
 * (master.<i>.<name>), then END.
 */
static void
command_stats(struct session *s)
{
    struct evbuffer *out = session_output(s);
    const struct report_row *row;
    struct report_snap snap;
    struct master_stats ms;
    char v[32];
    size_t i, k;

    report_snapshot(&snap);
    evbuffer_add_printf(out, "STAT version %s\n", REDLOCKD_VERSION);
    evbuffer_add_printf(out, "STAT layout %d\nSTAT layout_oldest %d\nSTAT daemon_id %s\n",
                        REDLOCKD_LAYOUT, REDLOCKD_LAYOUT_OLDEST, layout_self_id());
    for (k = 0; k < report_nrows; k++) {
        row = &report_rows[k];
        if (row->type == REPORT_HISTOGRAM) {
            command_stats_latency(out, row->stat);
        } else if (row->stat != NULL) {
            report_stat_text(row, &snap, v, sizeof(v));
            evbuffer_add_printf(out, "STAT %s %s\n", row->stat, v);
        }
    }
    snap.master = &ms;
    for (i = 0; i < snap.masters; i++) {
        master_get_stats(master_at(i), &ms);
        evbuffer_add_printf(out, "STAT master.%zu.addr %s\n", i, master_name(master_at(i)));
        for (k = 0; k < report_master_nrows; k++) {
            row = &report_master_rows[k];
            if (row->stat != NULL) {
                report_stat_text(row, &snap, v, sizeof(v));
                evbuffer_add_printf(out, "STAT master.%zu.%s %s\n", i, row->stat, v);
            }
        }
    }
    evbuffer_add(out, "END\n", 4);
    session_wrote(s);
}

/* Check ttl= against the config; 0 or -1 with an ERR PROTO sent. */
static int
command_ttl(struct session *s, const struct proto_cmd *cmd, int64_t *ttl)
{
    char text[160];

    *ttl = cmd->has_ttl ? cmd->ttl_ms : ctx.conf->default_ttl_ms;
    if (*ttl < ctx.conf->min_ttl_ms || *ttl > ctx.conf->max_ttl_ms) {
        snprintf(text, sizeof(text), "%s: ttl=%lld out of range %lld..%lld",
                 proto_verb_name(cmd->verb), (long long)*ttl,
                 (long long)ctx.conf->min_ttl_ms, (long long)ctx.conf->max_ttl_ms);
        session_error(s, PROTO_ERR_PROTO, text);
        return -1;
    }
    return 0;
}

/* auth.password or auth.admin_password is set: an AUTH has something to be compared with. */
static bool
command_has_password(void)
{
    return ctx.conf->auth_password[0] != '\0'
           || ctx.conf->auth_admin_password[0] != '\0';
}

/* Wipe and free the password of an AUTH that waited. */
static void
command_auth_forget(struct command *c)
{
    if (c->auth_word != NULL) {
        explicit_bzero(c->auth_word, c->auth_len);
        free(c->auth_word);
        c->auth_word = NULL;
        c->auth_len = 0;
    }
}

/*
 * Compare an AUTH's password, in constant time, with auth.admin_password
 * and auth.password.  A wrong one closes the connection, so that
 * guessing costs a connection per try, and takes a token of each bucket
 * on its path (authlimit.h); the right one makes its address known.
 */
static void
command_auth_check(struct command *c, const char *word, size_t len)
{
    struct session *s = c->s;
    const char *pass = ctx.conf->auth_password;
    const char *admin = ctx.conf->auth_admin_password;
    struct proto_reply r;
    enum session_auth by = SESSION_AUTH_PASSWORD;

    if (admin[0] != '\0' && util_equal_secret(word, len, admin, strlen(admin))) {
        by = SESSION_AUTH_ADMIN_PASSWORD;
        pass = admin;       /* the admin password lets the session in as well */
    }
    if (!util_equal_secret(word, len, pass, strlen(pass))) {
        stats.auth_failures++;
        authlimit_failed(session_peer(s), session_id(s), util_now_us());
        session_error(s, PROTO_ERR_AUTH, "wrong password");
        session_quit(s);
        return;
    }
    authlimit_passed(session_peer(s), util_now_us());
    session_let_in(s, by);
    proto_reply_start(&r, "OK");
    proto_reply_end(&r);
    session_reply(s, &r);
}

/* The turn of an AUTH that waited in line has come: check it, then read on. */
static void
command_auth_ready(struct authlimit_waiter *w)
{
    struct command *c = COMMAND_OF(w, auth_wait);
    struct session *s = c->s;

    /* (A session that closed left the line then: command_closed.) */
    if (!session_request_done(s)) {
        return;
    }
    if (!command_has_password()) {
        /* A reload removed the passwords while it waited: nothing to check, no guess. */
        session_error(s, PROTO_ERR_AUTH, "no password is configured (auth.password)");
    } else {
        command_auth_check(c, c->auth_word, c->auth_len);
    }
    command_auth_forget(c);
    session_next(s);
}

/*
 * AUTH <password>: checked at once while the buckets on its path have a
 * token (authlimit.h), else answered when its turn comes, the session
 * reading nothing more meanwhile: never refused unchecked, so the right
 * password gets in behind a guesser, which gains nothing by sending more.
 */
static void
command_auth(struct command *c, const char *word, size_t len)
{
    struct session *s = c->s;

    if (!command_has_password()) {
        session_error(s, PROTO_ERR_AUTH, "no password is configured (auth.password)");
        return;
    }
    if (authlimit_begin(&c->auth_wait, session_peer(s), command_auth_ready)) {
        command_auth_check(c, word, len);
        return;
    }
    c->auth_word = xstrndup(word, len);
    c->auth_len = len;
    stats.auth_held++;
    session_request_begin(s);
}

/*
 * The label a LOCK without label= gets: "<host>:<peer>", the peer being
 * uid=N,pid=N on the Unix socket and the address on TCP, cut to
 * PROTO_LABEL_MAX bytes (counted); bytes a label may not hold become '_'.
 */
static void
command_default_label(struct command *c, const char *peer, bool is_unix, long uid, long pid)
{
    char full[PROTO_LABEL_MAX + SESSION_PEER_MAX + 32];
    size_t i, len;

    if (is_unix && uid >= 0) {
        snprintf(full, sizeof(full), "%s:uid=%ld,pid=%ld", command_host, uid, pid);
    } else {
        snprintf(full, sizeof(full), "%s:%s", command_host, peer);
    }
    len = strlen(full);
    if (len > PROTO_LABEL_MAX) {
        stats.labels_truncated++;
        len = PROTO_LABEL_MAX;
    }
    for (i = 0; i < len; i++) {
        c->label[i] = util_printable_word(&full[i], 1) ? full[i] : '_';
    }
    c->label[len] = '\0';
}

/* A watched name's state: "! HELD <name> ..." or "! FREE <name>". */
static void
command_watch_cb(struct watch_client *wc, const struct watch_state *st)
{
    struct command *c = COMMAND_OF(wc, wc);
    struct proto_reply r;

    proto_reply_start(&r, "!");
    proto_reply_word(&r, st->held ? "HELD" : "FREE", 4);
    proto_reply_word(&r, st->name, st->name_len);
    if (st->held) {
        if (st->label != NULL && command_sees_labels(c)) {
            proto_reply_str(&r, "label", st->label);
            proto_reply_int(&r, "held_ms", st->held_ms);
        }
        if (st->fence > 0) {
            proto_reply_int(&r, "fence", st->fence);
        }
        proto_reply_str(&r, "kind", st->kind);
        proto_reply_int(&r, "holders", (int64_t)st->holders);
        if (st->limit > 0) {
            proto_reply_int(&r, "limit", st->limit);
        }
    }
    proto_reply_end(&r);
    session_reply(c->s, &r);
}

/* One line of LIST, written straight to the output (steps pace it). */
static void
command_list_cb(const struct lock_listing *e, void *arg)
{
    struct command *c = arg;
    struct proto_reply r;

    proto_reply_start(&r, e->held ? "HELD" : "WAIT");
    proto_reply_word(&r, e->name, e->name_len);
    if (e->client == &c->lc || command_sees_labels(c)) {
        proto_reply_str(&r, "label", e->label);
    }
    if (e->held) {
        proto_reply_str(&r, "mode", "session");
        proto_reply_int(&r, "ttl", e->ttl_ms);
        proto_reply_int(&r, "held_ms", e->held_ms);
        proto_reply_int(&r, "holds", e->holds);
        if (e->fence > 0) {
            proto_reply_int(&r, "fence", e->fence);
        }
    } else {
        proto_reply_int(&r, "position", (int64_t)e->position);
        proto_reply_int(&r, "waited_ms", e->held_ms);
    }
    proto_reply_str(&r, "kind", command_kind_words[e->kind]);
    if (e->kind == LOCK_KIND_COUNTED) {
        proto_reply_int(&r, "limit", e->limit);
        if (e->held) {
            proto_reply_int(&r, "permit", e->permit);
        }
    }
    if (e->held) {
        proto_reply_int(&r, "waiters", (int64_t)e->waiters);
    }
    proto_reply_end(&r);
    evbuffer_add(session_output(c->s), r.buf, r.len);
}

/* Free a LIST's state, out of the due queue. */
static void
command_list_free(struct command_list *l)
{
    if (l != NULL && l->due) {
        TAILQ_REMOVE(&command_lists_due, l, due_link);
    }
    free(l);
}

/* The LIST is written whole: its state goes. */
static void
command_list_end(struct command *c)
{
    command_list_free(c->list);
    c->list = NULL;
    session_pace(c->s, false);
}

/*
 * Queue the next step of c's LIST, behind the other LISTs' steps.  The
 * queue is served COMMAND_LIST_TURN steps per turn of the event loop,
 * from a zero timer, which runs after the loop has looked for I/O again:
 * between two steps the requests of every session that came meanwhile
 * are served, however many sessions LIST, and the sessions that LIST
 * take their turns in order.
 */
static void
command_list_later(struct command *c)
{
    static const struct timeval now = { 0, 0 };
    struct command_list *l = c->list;

    if (l->due) {
        return;
    }
    l->due = true;
    TAILQ_INSERT_TAIL(&command_lists_due, l, due_link);
    if (!evtimer_pending(&command_list_turn, NULL)) {
        evtimer_add(&command_list_turn, &now);
    }
}

/*
 * Write the next step of a LIST: up to COMMAND_LIST_NAMES names
 * (lock_list: O(log n + COMMAND_LIST_NAMES) for n names in the table),
 * or END after the last.  One step per call, and only once the client
 * has read the last one (session_output_low; otherwise the session's
 * write callback brings it back, command_writable): a listing of any
 * size holds at most one step of unread output here.  Called from the
 * due queue only (command_list_later), the first step too.
 */
static void
command_list_step(struct command *c)
{
    struct session *s = c->s;
    struct command_list *l = c->list;
    size_t n;

    if (l == NULL || !session_output_low(s)) {
        return;
    }
    n = lock_list(l->prefix_len > 0 ? l->prefix : NULL, l->prefix_len,
                  l->begun ? l->after : NULL, l->after_len,
                  COMMAND_LIST_NAMES, command_list_cb, c, l->after, &l->after_len);
    l->begun = l->begun || n > 0;
    if (n == COMMAND_LIST_NAMES) {
        command_list_later(c);
        return;
    }
    command_list_end(c);
    evbuffer_add(session_output(s), "END\n", 4);
    session_next(s);
}

/* The turn of the LISTs: the next COMMAND_LIST_TURN due steps, then the loop again. */
static void
command_list_turn_cb(evutil_socket_t fd, short what, void *arg)
{
    static const struct timeval now = { 0, 0 };
    struct command_list *l;
    size_t i;

    (void)fd;
    (void)what;
    (void)arg;
    for (i = 0; i < COMMAND_LIST_TURN && (l = TAILQ_FIRST(&command_lists_due)) != NULL; i++) {
        TAILQ_REMOVE(&command_lists_due, l, due_link);
        l->due = false;
        command_list_step(l->c);    /* may queue it again, at the end */
    }
    if (!TAILQ_EMPTY(&command_lists_due)) {
        evtimer_add(&command_list_turn, &now);
    }
}

/* us between two reads of a session's budget, limits.reads_per_second. */
static int64_t
command_read_every_us(void)
{
    return 1000000 / ctx.conf->reads_per_second;
}

/*
 * STATUS and WATCH read the masters (a quorum read, a subscription);
 * a session may send limits.reads_per_second of them a second, as many
 * at once.  Returns 0 when this one may go, or -1 after answering ERR
 * LIMIT with the wait.  The read is counted by command_read_taken().
 */
static int
command_read_budget(struct command *c)
{
    struct session *s = c->s;
    int64_t wait = util_gcra_wait(c->reads_tat_us, util_now_us(), command_read_every_us(),
                                  ctx.conf->reads_per_second);
    char text[160];

    if (wait > 0) {
        stats.reads_refused++;
        snprintf(text, sizeof(text), "more than %lld STATUS, WATCH and CHECK a second "
                 "(limits.reads_per_second): try again in %lld ms",
                 (long long)ctx.conf->reads_per_second, (long long)(wait + 999) / 1000);
        session_error(s, PROTO_ERR_LIMIT, text);
        return -1;
    }
    return 0;
}

/* A read command_read_budget() let go was made: count it. */
static void
command_read_taken(struct command *c)
{
    util_gcra_take(&c->reads_tat_us, util_now_us(), command_read_every_us());
}

/* A waiting STATUS's turn came (daemon/readq.h): read. */
static void
command_status_start(struct readq_job *j, void *arg)
{
    struct command *c = arg;

    (void)j;
    event_del(&c->status_timer);
    if (c->verb == PROTO_CHECK) {
        lock_check(&c->lc, c->status_name, c->status_name_len,
                   c->status_token[0] != '\0' ? c->status_token : NULL, c->check_fence,
                   c->check_permit);
        return;
    }
    lock_status(&c->lc, c->status_name, c->status_name_len,
                c->status_token[0] != '\0' ? c->status_token : NULL);
}

/*
 * A waiting STATUS's limits.read_wait_ms ran out, or its session closed:
 * it leaves its turn and is answered ERR LIMIT (nobody reads that after
 * a close; the request ends either way).
 */
static void
command_status_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct command *c = arg;
    struct lock_status_result res;
    char text[160];

    (void)fd;
    (void)what;
    if (!c->status.waiting) {
        return;
    }
    readq_cancel(&c->status);
    stats.reads_timed_out++;
    snprintf(text, sizeof(text), "no turn to read the masters within %lld ms: %zu reads in "
             "flight (limits.max_reads_in_flight), %zu waiting (limits.read_wait_ms)",
             (long long)ctx.conf->read_wait_ms, readq_in_flight(), readq_waiting());
    if (c->verb == PROTO_CHECK) {
        command_check_done(&c->lc, &(struct lock_check_result){
            .v = { LOCK_FAILED, c->status_name, c->status_name_len, text } });
        return;
    }
    memset(&res, 0, sizeof(res));
    res.v.outcome = LOCK_FAILED;
    res.v.name = c->status_name;
    res.v.name_len = c->status_name_len;
    res.v.error = text;
    res.permit = -1;
    command_status_done(&c->lc, &res);
}

/*
 * STATUS: a read of the masters in the session's turn (daemon/readq.h),
 * now when the daemon's budget has room; otherwise it waits, at most
 * limits.read_wait_ms, with what it reads copied.
 */
static void
command_status(struct command *c, const char *name, size_t name_len, const char *token)
{
    struct timeval tv;

    if (readq_ask(&c->reads, &c->status, command_status_start, c)) {
        lock_status(&c->lc, name, name_len, token);
        return;
    }
    memcpy(c->status_name, name, name_len);
    c->status_name_len = name_len;
    c->status_token[0] = '\0';
    if (token != NULL) {
        memcpy(c->status_token, token, PROTO_TOKEN_LEN);
        c->status_token[PROTO_TOKEN_LEN] = '\0';
    }
    tv.tv_sec = (time_t)(ctx.conf->read_wait_ms / 1000);
    tv.tv_usec = (suseconds_t)(ctx.conf->read_wait_ms % 1000 * 1000);
    event_add(&c->status_timer, &tv);
}

/*
 * The lock-delay of a LOCK or TRYLOCK (req's kind and mode set): delay=
 * within 0..lock.max_ttl_ms, for a session-mode hold only, else
 * lock.delay_ms for an exclusive session-mode hold (0 for the others).
 * 0, or -1 with an ERR PROTO sent.
 */
static int
command_delay(struct session *s, const struct proto_cmd *cmd, struct lock_request *req)
{
    char text[160];

    req->delay_ms = 0;
    if (cmd->has_delay && req->lease_mode) {
        snprintf(text, sizeof(text), "%s: delay= needs mode=session (a lease ends by UNLOCK "
                 "or by its ttl, and no daemon sees it end)", proto_verb_name(cmd->verb));
        session_error(s, PROTO_ERR_PROTO, text);
        return -1;
    }
    if (cmd->has_delay && cmd->delay_ms > ctx.conf->max_ttl_ms) {
        snprintf(text, sizeof(text), "%s: delay=%lld out of range 0..%lld (lock.max_ttl_ms)",
                 proto_verb_name(cmd->verb), (long long)cmd->delay_ms,
                 (long long)ctx.conf->max_ttl_ms);
        session_error(s, PROTO_ERR_PROTO, text);
        return -1;
    }
    if (req->kind == LOCK_KIND_EXCLUSIVE && !req->lease_mode) {
        req->delay_ms = cmd->has_delay ? cmd->delay_ms : ctx.conf->delay_ms;
    }
    return 0;
}

/*
 * LOCK and TRYLOCK: check ttl= (mode=lease needs one) and limit=
 * against the config, else ERR PROTO; then the request begins, answered
 * by command_done_cb.
 */
/*
 * Whether the answers to a request of several names fit one reply line
 * (PROTO_REPLY_MAX): they repeat every name, then their fields (a
 * LOCK's: token=, validity=, holds= and a fence per name).  Else ERR
 * PROTO, naming how many bytes the names may take.
 */
static int
command_names_fit(struct session *s, const struct proto_cmd *cmd)
{
    size_t i, len = cmd->nnames - 1, fields, room;
    bool lock = cmd->verb == PROTO_LOCK || cmd->verb == PROTO_TRYLOCK;
    bool fenced = cmd->fence || ctx.conf->fence == CONF_FENCE_ALWAYS;
    char text[200];

    for (i = 0; i < cmd->nnames; i++) {
        len += cmd->names[i].len;
    }
    /* "OK " + the names + the fields + LF: " token=" 32, " validity=" and " holds=" 20 digits each. */
    fields = 3 + 7 + PROTO_TOKEN_LEN + 10 + 20 + 7 + 20 + 1
             + (lock && fenced ? 7 + cmd->nnames * 21 : 0);
    room = PROTO_REPLY_MAX - fields;
    if (len <= room) {
        return 0;
    }
    snprintf(text, sizeof(text), "%s: the names take %zu bytes, but a set's answer names them "
             "all on one line: at most %zu bytes of names%s", proto_verb_name(cmd->verb), len,
             room, lock && fenced ? " with fences" : "");
    session_error(s, PROTO_ERR_PROTO, text);
    return -1;
}

/* The names of a request that takes several, as the lock table takes them. */
static void
command_names(const struct proto_cmd *cmd, struct lock_name *names)
{
    size_t i;

    for (i = 0; i < cmd->nnames; i++) {
        names[i].s = cmd->names[i].s;
        names[i].len = cmd->names[i].len;
    }
}

static void
command_lock(struct command *c, const struct proto_cmd *cmd)
{
    struct session *s = c->s;
    struct lock_request req;
    struct lock_name names[PROTO_SET_MAX];
    char text[160];


    if (cmd->mode == PROTO_MODE_LEASE && !cmd->has_ttl) {
        snprintf(text, sizeof(text), "%s: mode=lease needs ttl= (nothing renews a lease)",
                 proto_verb_name(cmd->verb));
        session_error(s, PROTO_ERR_PROTO, text);
        return;
    }
    if (command_ttl(s, cmd, &req.ttl_ms) != 0) {
        return;
    }
    req.wait_ms = cmd->verb == PROTO_TRYLOCK ? 0
                  : cmd->has_wait ? cmd->wait_ms : PROTO_WAIT_INF;
    req.trylock = cmd->verb == PROTO_TRYLOCK;
    req.lease_mode = cmd->mode == PROTO_MODE_LEASE;
    req.fence = cmd->fence;
    req.kind = cmd->shared ? LOCK_KIND_SHARED
               : cmd->has_limit ? LOCK_KIND_COUNTED : LOCK_KIND_EXCLUSIVE;
    req.label = cmd->has_label ? cmd->label : c->label;
    req.label_len = cmd->has_label ? cmd->label_len : strlen(c->label);
    req.label_asked = cmd->has_label;
    req.limit = 0;
    if (cmd->has_limit) {
        if (cmd->limit > ctx.conf->max_limit) {
            snprintf(text, sizeof(text), "%s: limit=%lld out of range 1..%lld "
                     "(lock.max_limit)", proto_verb_name(cmd->verb),
                     (long long)cmd->limit, (long long)ctx.conf->max_limit);
            session_error(s, PROTO_ERR_PROTO, text);
            return;
        }
        req.limit = (unsigned)cmd->limit;
    }
    if (command_delay(s, cmd, &req) != 0) {
        return;
    }
    if (cmd->nnames > 1 && command_names_fit(s, cmd) != 0) {
        return;
    }
    session_request_begin(s);
    if (cmd->nnames > 1) {
        command_names(cmd, names);
        lock_acquire_set(&c->lc, names, cmd->nnames, &req);
        return;
    }
    lock_acquire(&c->lc, cmd->name, cmd->name_len, &req);
}

/* UNLOCK and EXTEND, of one name or of a set; answered by command_done_cb. */
static void
command_unlock_extend(struct command *c, const struct proto_cmd *cmd)
{
    struct session *s = c->s;
    struct lock_name names[PROTO_SET_MAX];
    int64_t ttl = 0;

    /* The parser made sure of EXTEND's token= and ttl=. */
    if ((cmd->verb == PROTO_EXTEND && command_ttl(s, cmd, &ttl) != 0)
        || (cmd->nnames > 1 && command_names_fit(s, cmd) != 0)) {
        return;
    }
    session_request_begin(s);
    command_names(cmd, names);
    if (cmd->verb == PROTO_UNLOCK && cmd->nnames > 1) {
        lock_release_set(&c->lc, names, cmd->nnames, cmd->token);
    } else if (cmd->verb == PROTO_UNLOCK) {
        lock_release(&c->lc, cmd->name, cmd->name_len, cmd->token);
    } else if (cmd->nnames > 1) {
        lock_extend_set(&c->lc, names, cmd->nnames, cmd->token, ttl);
    } else {
        lock_extend(&c->lc, cmd->name, cmd->name_len, cmd->token, ttl);
    }
}

/* HELP: a line per verb, then END. */
static void
command_help(struct session *s)
{
    size_t i;

    for (i = 0; proto_help[i] != NULL; i++) {
        evbuffer_add_printf(session_output(s), "HELP %s\n", proto_help[i]);
    }
    evbuffer_add(session_output(s), "END\n", 4);
    session_wrote(s);
}

/* LIST [prefix]: its state, and its first step queued behind the other LISTs'. */
static void
command_list_begin(struct command *c, const struct proto_cmd *cmd)
{
    c->list = xcalloc(1, sizeof(*c->list));
    c->list->c = c;
    c->list->prefix_len = cmd->word != NULL ? cmd->word_len : 0;
    memcpy(c->list->prefix, cmd->word != NULL ? cmd->word : "", c->list->prefix_len);
    session_pace(c->s, true);
    command_list_later(c);  /* even the first step waits for its turn */
}

/*
 * WATCH name: within the session's read budget (a new watch is a read
 * and subscriptions; one already there costs nothing), answered "OK
 * name", or ERR LIMIT.
 */
static void
command_watch(struct command *c, const struct proto_cmd *cmd)
{
    struct proto_reply r;
    const char *err;
    int rc;

    if (command_read_budget(c) != 0) {
        return;
    }
    rc = watch_add(&c->wc, cmd->name, cmd->name_len, &err);
    if (rc < 0) {
        session_error(c->s, PROTO_ERR_LIMIT, err);
        return;
    }
    if (rc == 0) {
        command_read_taken(c);
    }
    proto_reply_start(&r, "OK");
    proto_reply_word(&r, cmd->name, cmd->name_len);
    proto_reply_end(&r);
    session_reply(c->s, &r);
}

/* BREAK name: only with the admin right; the audit line either way. */
static void
command_break(struct command *c, const struct proto_cmd *cmd)
{
    struct session *s = c->s;

    if (session_admin_by(s) == NULL) {
        log_warn("client %llu (%s, label %s): BREAK %.*s refused: not admin",
                 session_id(s), session_peer(s), c->label, (int)cmd->name_len,
                 cmd->name);
        session_error(s, PROTO_ERR_DENIED, "BREAK needs the admin right: AUTH with "
                      "auth.admin_password, or uid 0 on the Unix socket");
        return;
    }
    /* The audit line of who asked; lock.c logs what it ended, whatever comes of us. */
    log_warn("client %llu (%s, label %s, admin by %s): BREAK %.*s",
             session_id(s), session_peer(s), c->label, session_admin_by(s),
             (int)cmd->name_len, cmd->name);
    session_request_begin(s);
    lock_break(&c->lc, cmd->name, cmd->name_len);
}

/*
 * CHECK: a read of the masters in the session's turn, as STATUS's
 * (command_status), with what it reads copied when it has to wait.
 */
static void
command_check(struct command *c, const struct proto_cmd *cmd)
{
    int permit = cmd->has_permit ? (int)cmd->permit : -1;
    struct timeval tv;

    if (readq_ask(&c->reads, &c->status, command_status_start, c)) {
        lock_check(&c->lc, cmd->name, cmd->name_len, cmd->token, cmd->fence_value, permit);
        return;
    }
    memcpy(c->status_name, cmd->name, cmd->name_len);
    c->status_name_len = cmd->name_len;
    c->status_token[0] = '\0';
    if (cmd->token != NULL) {
        memcpy(c->status_token, cmd->token, PROTO_TOKEN_LEN);
        c->status_token[PROTO_TOKEN_LEN] = '\0';
    }
    c->check_fence = cmd->fence_value;
    c->check_permit = permit;
    tv.tv_sec = (time_t)(ctx.conf->read_wait_ms / 1000);
    tv.tv_usec = (suseconds_t)(ctx.conf->read_wait_ms % 1000 * 1000);
    event_add(&c->status_timer, &tv);
}

/* Run one parsed request (the session's line hook). */
static void
command_line(struct session *s, void *state, const struct proto_cmd *cmd)
{
    struct command *c = state;
    struct proto_reply r;

    if (!session_authed(s) && ctx.conf->auth_password[0] != '\0'
        && cmd->verb != PROTO_AUTH && cmd->verb != PROTO_QUIT) {
        session_error(s, PROTO_ERR_AUTH, "authentication required: send "
                      "AUTH <password> first");
        return;
    }
    if (session_stopping() && cmd->verb != PROTO_QUIT) {
        session_error(s, PROTO_ERR_SHUTDOWN, "the daemon is stopping");
        return;
    }
    c->verb = cmd->verb;
    switch (cmd->verb) {
    case PROTO_AUTH:
        command_auth(c, cmd->word, cmd->word_len);
        return;
    case PROTO_LOCK:
    case PROTO_TRYLOCK:
        command_lock(c, cmd);
        return;
    case PROTO_UNLOCK:
    case PROTO_EXTEND:
        command_unlock_extend(c, cmd);
        return;
    case PROTO_STATUS:
        if (command_read_budget(c) != 0) {
            return;
        }
        command_read_taken(c);
        session_request_begin(s);
        command_status(c, cmd->name, cmd->name_len, cmd->token);
        return;
    case PROTO_PING:
        proto_reply_start(&r, "PONG");
        if (cmd->word != NULL) {
            proto_reply_word(&r, cmd->word, cmd->word_len);
        }
        break;
    case PROTO_VERSION_VERB:
        proto_reply_start(&r, "VERSION");
        proto_reply_word(&r, REDLOCKD_VERSION, strlen(REDLOCKD_VERSION));
        proto_reply_int(&r, "layout", REDLOCKD_LAYOUT);
        break;
    case PROTO_HELP:
        command_help(s);
        return;
    case PROTO_STATS:
        command_stats(s);
        return;
    case PROTO_QUIT:
        evbuffer_add(session_output(s), "BYE\n", 4);
        session_wrote(s);
        session_quit(s);
        return;
    case PROTO_LIST:
        command_list_begin(c, cmd);
        return;
    case PROTO_WATCH:
        command_watch(c, cmd);
        return;
    case PROTO_UNWATCH:
        watch_remove(&c->wc, cmd->name, cmd->name_len);
        proto_reply_start(&r, "OK");
        proto_reply_word(&r, cmd->name, cmd->name_len);
        break;
    case PROTO_BREAK:
        command_break(c, cmd);
        return;
    case PROTO_CHECK:
        /* A read of the masters, within the session's budget, as STATUS. */
        if (command_read_budget(c) != 0) {
            return;
        }
        command_read_taken(c);
        session_request_begin(s);
        command_check(c, cmd);
        return;
    case PROTO_VERB_COUNT:
        return;
    }
    proto_reply_end(&r);
    session_reply(s, &r);
}


static void
command_open(struct session *s, void *state, const char *peer, bool is_unix, long uid,
             long pid)
{
    struct command *c = state;

    c->s = s;
    lock_client_init(&c->lc, &command_lock_hooks);
    readq_client_init(&c->reads);
    evtimer_assign(&c->status_timer, ctx.base, command_status_timeout, c);
    watch_client_init(&c->wc, command_watch_cb, &c->reads);
    command_default_label(c, peer, is_unix, uid, pid);
}

static void
command_writable(struct session *s, void *state)
{
    struct command *c = state;

    (void)s;
    if (c->list != NULL) {
        command_list_later(c);  /* the client read the last step: the next one */
    }
}

static void
command_input_end(void *state)
{
    struct command *c = state;

    lock_client_drain(&c->lc);
}

static void
command_release(void *state)
{
    struct command *c = state;

    lock_client_close(&c->lc);
}

static void
command_closed(void *state)
{
    struct command *c = state;

    watch_client_close(&c->wc);
    lock_client_close(&c->lc);
    if (c->auth_wait.queued) {
        /* Its AUTH waited in line: out of it, and the request ends. */
        authlimit_cancel(&c->auth_wait);
        command_auth_forget(c);
        (void)session_request_done(c->s);
    }
    if (c->status.waiting) {
        event_active(&c->status_timer, EV_TIMEOUT, 0);  /* ends the request, from the loop */
    }
}

static void
command_shutdown(void *state)
{
    struct command *c = state;

    lock_client_shutdown(&c->lc);
}

static void
command_free(void *state)
{
    struct command *c = state;

    readq_cancel(&c->status);
    readq_client_close(&c->reads);
    if (c->s != NULL) {
        event_del(&c->status_timer);
    }
    command_list_free(c->list);
    authlimit_cancel(&c->auth_wait);
    command_auth_forget(c);
}

static const struct session_hooks command_hooks = {
    .size = sizeof(struct command),
    .open = command_open,
    .line = command_line,
    .writable = command_writable,
    .input_end = command_input_end,
    .release = command_release,
    .closed = command_closed,
    .shutdown = command_shutdown,
    .free = command_free,
};

void
command_init(void)
{
    evtimer_assign(&command_list_turn, ctx.base, command_list_turn_cb, NULL);
    if (gethostname(command_host, sizeof(command_host)) != 0
        || !util_printable_word(command_host, strnlen(command_host, sizeof(command_host)))) {
        snprintf(command_host, sizeof(command_host), "localhost");
    }
    command_host[sizeof(command_host) - 1] = '\0';
    session_init(&command_hooks);
    authlimit_init(ctx.base);
}
