/*
 * session.c: client connections and the line protocol's verbs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

#include <openssl/err.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/authlimit.h"
#include "daemon/flush.h"
#include "daemon/lock.h"
#include "daemon/log.h"
#include "daemon/master.h"
#include "daemon/report.h"
#include "daemon/session.h"
#include "daemon/stats.h"
#include "daemon/tls.h"
#include "daemon/util.h"
#include "daemon/watch.h"
#include "proto/proto.h"

#define SESSION_READ_HIGH   (64 * 1024)   /* input buffered while a LOCK waits */
#define SESSION_OUT_HIGH    (256 * 1024)  /* stop reading past this much unsent output */
#define SESSION_OUT_LOW     (64 * 1024)   /* ... and resume below this */
#define SESSION_PEER_MAX    64
#define SESSION_LINGER_MS   2000          /* longest wait at close for lease grants to be read */
#define SESSION_LINGER_TICK_MS 5          /* how often that wait looks */
#define SESSION_LIST_NAMES  1024          /* names per step of a LIST */

/*
 * A lease-mode grant whose OK the client may not have received yet.
 * Owned by its session; freed once the reply may have been read
 * (session_grants_confirm), or at close, after the token was released
 * on the masters when the reply provably never reached the client
 * (session_grants_settle; nobody else knows the token).
 */
struct session_grant {
    struct session_grant *next;     /* next younger grant, or NULL */
    uint64_t              end;      /* output offset just after its reply */
    char                  token[UTIL_TOKEN_HEX];  /* the lease's token */
    size_t                name_len; /* bytes in name */
    char                  name[];   /* the lock's name */
};

/* Where a LIST stands between its steps.  Owned by its session. */
struct session_list {
    bool    begun;                  /* after holds the last name listed */
    size_t  prefix_len;             /* bytes in prefix */
    char    prefix[PROTO_WORD_MAX]; /* LIST's prefix */
    size_t  after_len;              /* bytes in after */
    char    after[PROTO_NAME_MAX];  /* LIST goes on after this name */
};

/*
 * One client connection.  Owned by this module (the sessions list);
 * freed once it is closed and no lock operation is in flight.
 */
struct session {
    struct lock_client  lc;         /* the lock side: leases, pending LOCK */
    struct bufferevent *bev;        /* the socket, NULL once closed */
    TAILQ_ENTRY(session) link;      /* in sessions */
    uint64_t            id;         /* for logs, from 1 */
    char                peer[SESSION_PEER_MAX]; /* peer address, for logs */
    enum proto_verb     verb;       /* the request in flight */
    bool                busy;       /* a lock operation is in flight */
    bool                closing;    /* closed; freed when !busy */
    bool                in_close;   /* inside session_close() */
    bool                quitting;   /* QUIT or TOOLONG: close once flushed */
    bool                processing; /* inside session_process() */
    bool                out_blocked;/* reading paused: the client does not read */
    bool                authed;     /* AUTH done, or not needed */
    const char         *authed_by;  /* the setting whose password its AUTH gave
                                       ("auth.password", "auth.admin_password"),
                                       "tls.client_ca_file" for a certificate, NULL
                                       when it needed none: a reload that changes
                                       what it gave ends the session
                                       (session_reauth) */
    bool                overflow;   /* unsent output over limits.max_output_bytes */
    bool                input_ended;/* end of input: answer what came, then close */
    struct event        timer;      /* partial line deadline; overflow close; quit */
    struct session_grant *grants;   /* lease grants not confirmed delivered, oldest first */
    struct session_grant **grants_tail; /* where the next grant is linked */
    uint64_t            out_sent;   /* output bytes written to the socket
                                       (session_output_cb) */
    struct flush_entry  flush;      /* plain sockets: output waits in the flush list */
    bool                is_unix;    /* came in on the Unix socket */
    bool                is_tls;     /* came in on a TLS listener (bev is an OpenSSL one) */
    bool                tls_up;     /* is_tls: the handshake is done */
    bool                peer_reset; /* the peer reset the connection (ECONNRESET,
                                       EPIPE): it did not read everything */
    int64_t             linger_until_us; /* closing: wait for grants until then */
    struct watch_client wc;         /* its WATCHes */
    struct admit_slot   admit;      /* its client slot (daemon/admit.h) */
    int64_t             reads_tat_us; /* its STATUS and WATCH budget (util_gcra_wait) */
    const char         *admin_by;   /* may BREAK, and why ("auth.admin_password", "uid 0
                                       on the Unix socket"; static), else NULL */
    char                label[PROTO_LABEL_MAX + 1]; /* default holder label:
                                       "<host>:<peer>" */
    struct session_list *list;      /* a LIST being written, step by step, else NULL
                                       (malloc'd: an idle session keeps none) */
};

static struct event_base *session_base;
static const struct conf *session_conf;
static char               session_host[PROTO_LABEL_MAX + 1]; /* for default labels */
static TAILQ_HEAD(, session) sessions = TAILQ_HEAD_INITIALIZER(sessions);
static size_t             session_n;
static uint64_t           session_next_id = 1;
static bool               session_stopping;

static void session_process(struct session *s);
static void session_close(struct session *s, const char *why);
static void session_lost_cb(struct lock_client *c, const char *name, size_t name_len,
                            const char *reason);

/*
 * May s see the label of a hold that is not its own?  (auth.show_labels:
 * labels name hosts, users and processes.)
 */
static bool
session_sees_labels(const struct session *s)
{
    return session_conf->show_labels == CONF_LABELS_ALL || s->admin_by != NULL;
}

void
session_init(struct event_base *base, const struct conf *conf)
{
    session_base = base;
    session_conf = conf;
    if (gethostname(session_host, sizeof(session_host)) != 0
        || !util_printable_word(session_host, strnlen(session_host, sizeof(session_host)))) {
        snprintf(session_host, sizeof(session_host), "localhost");
    }
    session_host[sizeof(session_host) - 1] = '\0';
}

size_t
session_count(void)
{
    return session_n;
}

static void
session_free(struct session *s)
{
    log_debug("client %llu: freed", (unsigned long long)s->id);
    event_del(&s->timer);
    free(s->list);
    free(s);
}

/*
 * Bound the unsent output: past limits.max_output_bytes the client is
 * closed (its locks released) from the event loop, never from inside
 * the caller, which may still use s.
 */
static void
session_check_output(struct session *s)
{
    size_t out = evbuffer_get_length(bufferevent_get_output(s->bev));

    if (!s->overflow && out > (size_t)session_conf->max_output_bytes) {
        s->overflow = true;
        bufferevent_disable(s->bev, EV_READ);
        event_del(&s->timer);
        event_active(&s->timer, EV_TIMEOUT, 0);
    }
}

static void
session_send(struct session *s, const struct proto_reply *r)
{
    if (s->bev != NULL) {
        bufferevent_write(s->bev, r->buf, r->len);
        session_check_output(s);
    }
}

static void
session_send_error(struct session *s, enum proto_errcode code, const char *text)
{
    struct proto_reply r;

    proto_reply_error(&r, code, text);
    session_send(s, &r);
}

/*
 * Read (which clears) the socket's pending error; a reset by the peer
 * (ECONNRESET, EPIPE) is remembered in peer_reset.  Returns the error, 0
 * when none.
 */
static int
session_take_error(struct session *s)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt((int)bufferevent_getfd(s->bev), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        return 0;
    }
    if (err == ECONNRESET || err == EPIPE) {
        s->peer_reset = true;
    }
    return err;
}

/*
 * Free the grants whose replies cannot be proved lost any more.  On TCP
 * and TLS: every grant whose reply was written to the socket (the peer
 * may have read it, and nothing the socket tells proves it did not: a
 * peer that read the reply and reset the connection may have delayed
 * the ACK that would have said so).  On a Unix socket: more output was
 * written after it, or the peer read everything (SIOCOUTQ 0).  What
 * remains is judged at close by session_grants_settle().
 */
static void
session_grants_confirm(struct session *s)
{
    struct session_grant *g;
    int queued = 0;
    uint64_t done;

    if (s->grants == NULL || s->bev == NULL) {
        return;
    }
    if (!s->is_unix) {
        done = s->out_sent;
    } else {
        if (ioctl((int)bufferevent_getfd(s->bev), SIOCOUTQ, &queued) != 0) {
            return;     /* cannot tell: keep them until it can */
        }
        done = queued == 0 ? s->out_sent : s->out_sent - (s->out_sent > 0);
    }
    while ((g = s->grants) != NULL && g->end <= done) {
        s->grants = g->next;
        free(g);
    }
    if (s->grants == NULL) {
        s->grants_tail = &s->grants;
    }
}

/*
 * The session closes: release the lease grants whose replies provably
 * never reached the client, and free the list.  A reply is lost when it
 * was never written to the socket, or, on a Unix socket, when the peer
 * reset the connection and the reply was the last bytes written: a Unix
 * peer resets only when it closes with unread data, and unread data
 * always includes the end of the stream, so the reply's last line was
 * not read whole.  On TCP a reset proves nothing (an abortive close
 * resets after reading everything, and the ACK of what was read may
 * still be delayed), and on TLS the socket's bytes are records, not
 * replies: there a reply written to the socket is kept until its ttl.
 * A reply that may have been read is never released: the client would
 * use a lock it no longer holds.
 */
static void
session_grants_settle(struct session *s)
{
    struct session_grant *g;
    bool lost;

    if (s->grants == NULL) {
        return;
    }
    session_take_error(s);
    while ((g = s->grants) != NULL) {
        s->grants = g->next;
        lost = g->end > s->out_sent
               || (s->is_unix && s->peer_reset && g->end == s->out_sent);
        if (lost) {
            log_info("client %llu (%s): the OK of lease %.*s never reached the client; "
                     "releasing it", (unsigned long long)s->id, s->peer, (int)g->name_len,
                     g->name);
            lock_abandon(g->name, g->name_len, g->token);
        }
        free(g);
    }
    s->grants_tail = &s->grants;
}

/*
 * The output buffer changed.  Bytes added: a plain socket joins the
 * flush list (session_flush writes them at the end of the loop
 * iteration); a TLS one is written by its bufferevent.  Bytes left (to
 * the socket): count them, confirm grants.
 */
static void
session_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct session *s = arg;

    (void)buf;
    if (info->n_added > 0 && !s->is_tls && s->bev != NULL) {
        flush_join(&s->flush);
    }
    s->out_sent += info->n_deleted;
    if (info->n_deleted > 0) {
        session_grants_confirm(s);
    }
}

static void session_write_cb(struct bufferevent *bev, void *arg);
static void session_event_cb(struct bufferevent *bev, short what, void *arg);

/*
 * Write what the plain socket of s takes of its output now, without
 * waiting.  Returns evbuffer_write()'s result, with the socket error in
 * *err.
 */
static int
session_write_out(struct session *s, int *err)
{
    struct evbuffer *out = bufferevent_get_output(s->bev);
    int n;

    /* The bufferevent keeps its output's start frozen; it thaws it to write, as here. */
    evbuffer_unfreeze(out, 1);
    n = evbuffer_write(out, bufferevent_getfd(s->bev));
    *err = EVUTIL_SOCKET_ERROR();
    evbuffer_freeze(out, 1);
    return n;
}

/*
 * Write a plain session's output now (from the flush list, once per
 * loop iteration).  What the socket does not take is left to the
 * bufferevent, whose write event (and idle_timeout_ms) is armed only
 * then; a failed write is reported as the bufferevent would report it.
 * When everything left, the drained-output logic (session_write_cb) runs.
 */
static void
session_flush(struct flush_entry *e)
{
    struct session *s = (struct session *)((char *)e - offsetof(struct session, flush));
    struct evbuffer *out;
    int n, err;

    if (s->bev == NULL) {
        return;
    }
    out = bufferevent_get_output(s->bev);
    if (evbuffer_get_length(out) == 0) {
        return;
    }
    n = session_write_out(s, &err);
    if (n < 0) {
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            session_event_cb(s->bev, BEV_EVENT_ERROR | BEV_EVENT_WRITING, s);
            return;
        }
    }
    if (evbuffer_get_length(out) > 0) {
        bufferevent_enable(s->bev, EV_WRITE);
    } else {
        session_write_cb(s->bev, s);
    }
}

/*
 * A lease-mode OK was just written to the output buffer: keep its token
 * until the reply is confirmed delivered (session_close releases what
 * is still here).  Out of memory: the token cannot be kept, so the
 * grant is released at once and the client learns it as LOST.
 */
static void
session_track_grant(struct session *s, const struct lock_result *res)
{
    struct evbuffer *out;
    struct session_grant *g;

    if (s->bev == NULL) {
        return;
    }
    out = bufferevent_get_output(s->bev);
    g = malloc(sizeof(*g) + res->name_len);
    if (g == NULL) {
        goto fail;
    }
    g->next = NULL;
    g->end = s->out_sent + evbuffer_get_length(out);
    memcpy(g->token, res->token, UTIL_TOKEN_HEX);
    g->name_len = res->name_len;
    memcpy(g->name, res->name, res->name_len);
    *s->grants_tail = g;
    s->grants_tail = &g->next;
    return;

fail:
    log_error("client %llu (%s): out of memory tracking a lease grant; releasing it",
              (unsigned long long)s->id, s->peer);
    lock_abandon(res->name, res->name_len, res->token);
    session_lost_cb(&s->lc, res->name, res->name_len, "gone");
}

/* The kind= word of each kind of hold, in replies and LIST lines. */
static const char *const session_kind_words[] = {
    [LOCK_KIND_EXCLUSIVE] = "exclusive",
    [LOCK_KIND_SHARED] = "shared",
    [LOCK_KIND_COUNTED] = "counted",
};

/*
 * The kind words of an OK to LOCK (only for a shared or counted hold:
 * "kind=shared", "permit=I limit=N") or of HELD (always: "kind=...
 * holders=N", a counted name's "limit=N", this client's "permit=I").
 */
static void
session_reply_kind(struct proto_reply *r, const struct lock_result *res, bool status)
{
    if (status || res->kind != LOCK_KIND_EXCLUSIVE) {
        proto_reply_str(r, "kind", session_kind_words[res->kind]);
    }
    if (status) {
        proto_reply_int(r, "holders", (int64_t)res->holders);
    }
    if (res->kind == LOCK_KIND_COUNTED) {
        proto_reply_int(r, "limit", res->limit);
        if (res->permit >= 0) {
            proto_reply_int(r, "permit", res->permit);
        }
    }
}

static void
session_done_cb(struct lock_client *c, const struct lock_result *res)
{
    struct session *s = (struct session *)c;    /* lc is the first member */
    struct proto_reply r;

    s->busy = false;
    if (s->closing) {
        if (res->outcome == LOCK_OK && res->token != NULL) {
            /* A lease-mode grant nobody will read: release it now. */
            lock_abandon(res->name, res->name_len, res->token);
        }
        if (!s->in_close) {
            session_free(s);
        }
        return;
    }
    switch (res->outcome) {
    case LOCK_OK:
        proto_reply_start(&r, "OK");
        proto_reply_word(&r, res->name, res->name_len);
        if (s->verb == PROTO_BREAK) {
            proto_reply_int(&r, "holders", (int64_t)res->holders);
            proto_reply_int(&r, "fence", res->fence);
            break;
        }
        if (res->token != NULL) {
            proto_reply_str(&r, "token", res->token);
        }
        if (s->verb == PROTO_LOCK || s->verb == PROTO_TRYLOCK || s->verb == PROTO_EXTEND) {
            proto_reply_int(&r, "validity", res->validity_ms);
        }
        if (res->mode != LOCK_MODE_LEASE) {
            proto_reply_int(&r, "holds", res->holds);
        }
        if (res->fence > 0) {
            proto_reply_int(&r, "fence", res->fence);
        }
        if (s->verb == PROTO_LOCK || s->verb == PROTO_TRYLOCK) {
            session_reply_kind(&r, res, false);
        }
        break;
    case LOCK_BUSY:
        proto_reply_start(&r, "BUSY");
        proto_reply_word(&r, res->name, res->name_len);
        proto_reply_int(&r, "ttl", res->ttl_ms);
        break;
    case LOCK_TIMEOUT:
        proto_reply_start(&r, "TIMEOUT");
        proto_reply_word(&r, res->name, res->name_len);
        break;
    case LOCK_NOTHELD:
        proto_reply_start(&r, "NOTHELD");
        proto_reply_word(&r, res->name, res->name_len);
        break;
    case LOCK_HELD:
        proto_reply_start(&r, "HELD");
        proto_reply_word(&r, res->name, res->name_len);
        proto_reply_int(&r, "ttl", res->ttl_ms);
        proto_reply_str(&r, "owner", res->owner_self ? "self" : "other");
        if (res->mode != LOCK_MODE_UNKNOWN) {
            proto_reply_str(&r, "mode", res->mode == LOCK_MODE_LEASE ? "lease" : "session");
        }
        if (res->fence > 0) {
            proto_reply_int(&r, "fence", res->fence);
        }
        session_reply_kind(&r, res, true);
        if (res->label != NULL && (res->owner_self || session_sees_labels(s))) {
            proto_reply_str(&r, "label", res->label);
            proto_reply_int(&r, "held_ms", res->held_ms);
        }
        if (res->waiters > 0) {
            proto_reply_int(&r, "waiters", (int64_t)res->waiters);
        }
        break;
    case LOCK_FREE:
        proto_reply_start(&r, "FREE");
        proto_reply_word(&r, res->name, res->name_len);
        if (res->waiters > 0) {
            proto_reply_int(&r, "waiters", (int64_t)res->waiters);
        }
        break;
    case LOCK_NOQUORUM:
        proto_reply_error(&r, PROTO_ERR_NOQUORUM, res->error);
        break;
    case LOCK_CONFLICT:
        proto_reply_error(&r, PROTO_ERR_PROTO, res->error);
        break;
    case LOCK_SHUTDOWN:
        proto_reply_error(&r, PROTO_ERR_SHUTDOWN, res->error);
        break;
    case LOCK_LIMIT:
    case LOCK_FAILED:
        proto_reply_error(&r, PROTO_ERR_LIMIT, res->error);
        break;
    case LOCK_WRONG_KIND:
        proto_reply_error(&r, PROTO_ERR_KIND, res->error);
        break;
    case LOCK_CANCELLED:
        return;
    }
    proto_reply_end(&r);        /* a no-op for the error replies, already ended */
    session_send(s, &r);
    if (res->outcome == LOCK_OK && res->token != NULL) {
        session_track_grant(s, res);
    }
    if (!s->processing) {
        session_process(s);
    }
}

/* A held lock is gone: push "! LOST <name> reason=<why>". */
static void
session_lost_cb(struct lock_client *c, const char *name, size_t name_len,
                const char *reason)
{
    struct session *s = (struct session *)c;
    struct proto_reply r;

    proto_reply_start(&r, "!");
    proto_reply_word(&r, "LOST", 4);
    proto_reply_word(&r, name, name_len);
    proto_reply_str(&r, "reason", reason);
    proto_reply_end(&r);
    session_send(s, &r);
}

/* STATS' lines of the acquire latency histogram row: cumulative, as in /metrics. */
static void
session_stats_latency(struct evbuffer *out, const char *stat)
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
session_stats(struct session *s)
{
    struct evbuffer *out = bufferevent_get_output(s->bev);
    const struct report_row *row;
    struct report_snap snap;
    struct master_stats ms;
    char v[32];
    size_t i, k;

    report_snapshot(&snap);
    evbuffer_add_printf(out, "STAT version %s\n", REDLOCKD_VERSION);
    for (k = 0; k < report_nrows; k++) {
        row = &report_rows[k];
        if (row->type == REPORT_HISTOGRAM) {
            session_stats_latency(out, row->stat);
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
    session_check_output(s);
}

/*
 * A quitting session's output is all written to the socket: close now,
 * unless lease grants are not confirmed delivered yet; then look again
 * every SESSION_LINGER_TICK_MS, for at most SESSION_LINGER_MS, so that a
 * token the client received is not released and one it never got (it
 * closed without reading) is released at once.
 */
static void
session_quit_flushed(struct session *s)
{
    struct timeval tv = { 0, SESSION_LINGER_TICK_MS * 1000 };
    int64_t now = util_now_us();

    session_grants_confirm(s);
    /* A pending error (remembered for the settling) ends the wait. */
    if (s->grants != NULL && session_take_error(s) == 0) {
        if (s->linger_until_us == 0) {
            s->linger_until_us = now + SESSION_LINGER_MS * 1000;
            lock_client_close(&s->lc);  /* its session-mode locks go now */
        }
        if (now < s->linger_until_us) {
            evtimer_add(&s->timer, &tv);
            return;
        }
    }
    session_close(s, s->input_ended ? "end of input, every request answered" : "quit");
}

/*
 * Close once the output is flushed (QUIT, TOOLONG).  Callers have just
 * written a reply, so the write callback will run and close; never
 * closing here keeps the session valid for the caller.
 */
static void
session_quit(struct session *s)
{
    s->quitting = true;
    bufferevent_disable(s->bev, EV_READ);
    if (!s->overflow) {
        event_del(&s->timer);   /* no later ERR TIMEOUT after the last reply */
        if (evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
            event_active(&s->timer, EV_TIMEOUT, 0);     /* nothing to flush: close */
        }
    }
}

/* Check ttl= against the config; 0 or -1 with an ERR PROTO sent. */
static int
session_ttl(struct session *s, const struct proto_cmd *cmd, int64_t *ttl)
{
    char text[160];

    *ttl = cmd->has_ttl ? cmd->ttl_ms : session_conf->default_ttl_ms;
    if (*ttl < session_conf->min_ttl_ms || *ttl > session_conf->max_ttl_ms) {
        snprintf(text, sizeof(text), "%s: ttl=%lld out of range %lld..%lld",
                 proto_verb_name(cmd->verb), (long long)*ttl,
                 (long long)session_conf->min_ttl_ms, (long long)session_conf->max_ttl_ms);
        session_send_error(s, PROTO_ERR_PROTO, text);
        return -1;
    }
    return 0;
}

/*
 * s needs no AUTH any more.  Once its TLS handshake (if any) is done too,
 * it leaves the unauthenticated connections (daemon/admit.h) and the
 * deadline set at accept ends; until then that deadline holds for the
 * handshake.
 */
static void
session_authenticated(struct session *s)
{
    s->authed = true;
    if (!s->is_tls || s->tls_up) {
        admit_authed(&s->admit);
        event_del(&s->timer);
    }
}

/*
 * AUTH <password>: compared in constant time with auth.password.  A
 * wrong password closes the connection, so that guessing costs a
 * connection per try, and takes a token of its source (authlimit.h):
 * a source without one is refused unchecked.
 */
static void
session_auth(struct session *s, const char *word, size_t len)
{
    const char *pass = session_conf->auth_password;
    const char *admin = session_conf->auth_admin_password;
    char source[AUTHLIMIT_SOURCE_MAX], text[AUTHLIMIT_SOURCE_MAX + 128];
    struct proto_reply r;
    int64_t now = util_now_us(), wait_ms;

    authlimit_source(s->peer, source, sizeof(source));
    if ((wait_ms = authlimit_check(source, now, (unsigned long long)s->id, s->peer)) > 0) {
        stats.auth_refused++;
        snprintf(text, sizeof(text), "too many wrong passwords from %s; AUTH is not checked "
                 "for %lld ms", source, (long long)wait_ms);
        session_send_error(s, PROTO_ERR_AUTH, text);
        session_quit(s);
        return;
    }
    if (admin[0] != '\0' && util_equal_secret(word, len, admin, strlen(admin))) {
        s->admin_by = "auth.admin_password";
        s->authed_by = "auth.admin_password";
        pass = admin;       /* the admin password lets the session in as well */
    } else if (pass[0] == '\0' && admin[0] == '\0') {
        session_send_error(s, PROTO_ERR_AUTH, "no password is configured (auth.password)");
        return;
    }
    if (!util_equal_secret(word, len, pass, strlen(pass))) {
        stats.auth_failures++;
        authlimit_failed(source, now);
        log_warn("client %llu (%s): wrong AUTH password, closing",
                 (unsigned long long)s->id, s->peer);
        session_send_error(s, PROTO_ERR_AUTH, "wrong password");
        session_quit(s);
        return;
    }
    if (s->authed_by == NULL) {
        s->authed_by = "auth.password";
    }
    session_authenticated(s);
    proto_reply_start(&r, "OK");
    proto_reply_end(&r);
    session_send(s, &r);
}

/*
 * A reload may change what a session needs to be let in.  A session
 * whose password changed ends (the secret it showed is no longer one;
 * its locks are released, as at any close), unless no password is
 * needed any more, in which case it stays (an admin password that
 * changed takes the admin right away).  A session let in without AUTH
 * (none was needed) that now needs one ends too, unless it is still in
 * its TLS handshake: it must then AUTH by the deadline set at accept.
 * One waiting for an AUTH that is no longer needed is let in.  Sessions
 * a client certificate let in stay.
 */
static void
session_reauth(struct session *s, const struct conf *old, const struct conf *next)
{
    bool admin_changed = strcmp(old->auth_admin_password, next->auth_admin_password) != 0;
    bool pass_changed = strcmp(old->auth_password, next->auth_password) != 0;
    bool needs = next->auth_password[0] != '\0' && !(s->is_unix && next->auth_unix_exempt);

    if (s->admin_by != NULL && strcmp(s->admin_by, "auth.admin_password") == 0
        && admin_changed) {
        s->admin_by = NULL;
    }
    if (s->bev == NULL || s->closing) {
        return;
    }
    if (!needs && !s->authed) {
        session_authenticated(s);   /* waiting for an AUTH no longer needed */
        return;
    }
    if (needs && s->authed && s->authed_by == NULL) {
        /* Let in when nothing was asked, and something is now. */
        if (s->is_tls && !s->tls_up) {
            s->authed = false;  /* it AUTHs after its handshake, by the same deadline */
            return;
        }
        log_warn("client %llu (%s): a reload requires AUTH (auth.password, "
                 "auth.unix_exempt) of a session that gave none; closing",
                 (unsigned long long)s->id, s->peer);
        session_send_error(s, PROTO_ERR_AUTH, "a reload requires AUTH of this session, "
                           "which gave none; closing");
        session_quit(s);
        return;
    }
    if (s->authed_by == NULL || strcmp(s->authed_by, "tls.client_ca_file") == 0
        || !(strcmp(s->authed_by, "auth.admin_password") == 0 ? admin_changed : pass_changed)) {
        return;
    }
    if (next->auth_password[0] == '\0') {
        s->authed_by = NULL;    /* nothing is needed now */
        return;
    }
    log_warn("client %llu (%s): %s changed by a reload; closing the session it "
             "authenticated", (unsigned long long)s->id, s->peer, s->authed_by);
    session_send_error(s, PROTO_ERR_AUTH, "the password this session gave was changed by a "
                       "reload; closing");
    session_quit(s);
}

void
session_set_conf(const struct conf *conf)
{
    struct session *s;

    /*
     * Open sessions end if their password changed (session_reauth), and
     * take a new limits.max_line_bytes at once.
     */
    TAILQ_FOREACH(s, &sessions, link) {
        session_reauth(s, session_conf, conf);
        if (s->bev != NULL) {
            bufferevent_setwatermark(s->bev, EV_READ, 0,
                                     SESSION_READ_HIGH + 2 * (size_t)conf->max_line_bytes);
        }
    }
    session_conf = conf;
}

/*
 * The label a LOCK without label= gets: "<host>:<peer>", the peer being
 * uid=N,pid=N on the Unix socket and the address on TCP, cut to
 * PROTO_LABEL_MAX bytes (counted); bytes a label may not hold become '_'.
 */
static void
session_default_label(struct session *s, const char *peer, bool is_unix, long uid, long pid)
{
    char full[PROTO_LABEL_MAX + SESSION_PEER_MAX + 32];
    size_t i, len;

    if (is_unix && uid >= 0) {
        snprintf(full, sizeof(full), "%s:uid=%ld,pid=%ld", session_host, uid, pid);
    } else {
        snprintf(full, sizeof(full), "%s:%s", session_host, peer);
    }
    len = strlen(full);
    if (len > PROTO_LABEL_MAX) {
        stats.labels_truncated++;
        len = PROTO_LABEL_MAX;
    }
    for (i = 0; i < len; i++) {
        s->label[i] = util_printable_word(&full[i], 1) ? full[i] : '_';
    }
    s->label[len] = '\0';
}

/* A watched name's state: "! HELD <name> ..." or "! FREE <name>". */
static void
session_watch_cb(struct watch_client *c, const struct watch_state *st)
{
    struct session *s = (struct session *)(void *)((char *)c - offsetof(struct session, wc));
    struct proto_reply r;

    proto_reply_start(&r, "!");
    proto_reply_word(&r, st->held ? "HELD" : "FREE", 4);
    proto_reply_word(&r, st->name, st->name_len);
    if (st->held) {
        if (st->label != NULL && session_sees_labels(s)) {
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
    session_send(s, &r);
}

/* One line of LIST, written straight to the output (steps pace it). */
static void
session_list_cb(const struct lock_listing *e, void *arg)
{
    struct session *s = arg;
    struct proto_reply r;

    proto_reply_start(&r, e->held ? "HELD" : "WAIT");
    proto_reply_word(&r, e->name, e->name_len);
    if (e->client == &s->lc || session_sees_labels(s)) {
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
    proto_reply_str(&r, "kind", session_kind_words[e->kind]);
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
    bufferevent_write(s->bev, r.buf, r.len);
}

/* The LIST is written whole (or failed): its state goes. */
static void
session_list_end(struct session *s)
{
    free(s->list);
    s->list = NULL;
}

/*
 * Write the next step of a LIST: up to SESSION_LIST_NAMES names, and
 * more while the client keeps up (unsent output below SESSION_OUT_LOW),
 * then END.  Otherwise the write callback brings the next step once the
 * client has read this one, so a listing of any size holds at most one
 * step of unread output here.
 */
static void
session_list_step(struct session *s)
{
    struct evbuffer *out = bufferevent_get_output(s->bev);
    struct session_list *l;
    size_t n;

    while ((l = s->list) != NULL) {
        if (evbuffer_get_length(out) >= SESSION_OUT_LOW) {
            return;             /* the write callback goes on */
        }
        n = lock_list(l->prefix_len > 0 ? l->prefix : NULL, l->prefix_len,
                      l->begun ? l->after : NULL, l->after_len,
                      SESSION_LIST_NAMES, session_list_cb, s, l->after, &l->after_len);
        if (n == SIZE_MAX) {
            session_list_end(s);
            session_send_error(s, PROTO_ERR_LIMIT, "out of memory listing");
            break;
        }
        l->begun = l->begun || n > 0;
        if (n < SESSION_LIST_NAMES) {
            session_list_end(s);
            bufferevent_write(s->bev, "END\n", 4);
        }
    }
    if (!s->processing) {
        session_process(s);
    }
}

/* us between two reads of a session's budget, limits.reads_per_second. */
static int64_t
session_read_every_us(void)
{
    return 1000000 / session_conf->reads_per_second;
}

/*
 * STATUS and WATCH read the masters (a quorum read, a subscription);
 * a session may send limits.reads_per_second of them a second, as many
 * at once.  Returns 0 when this one may go, or -1 after answering ERR
 * LIMIT with the wait.  The read is counted by session_read_taken().
 */
static int
session_read_budget(struct session *s)
{
    int64_t wait = util_gcra_wait(s->reads_tat_us, util_now_us(), session_read_every_us(),
                                  session_conf->reads_per_second);
    char text[160];

    if (wait > 0) {
        stats.reads_refused++;
        snprintf(text, sizeof(text), "more than %lld STATUS and WATCH a second "
                 "(limits.reads_per_second): try again in %lld ms",
                 (long long)session_conf->reads_per_second, (long long)(wait + 999) / 1000);
        session_send_error(s, PROTO_ERR_LIMIT, text);
        return -1;
    }
    return 0;
}

/* A read session_read_budget() let go was made: count it. */
static void
session_read_taken(struct session *s)
{
    util_gcra_take(&s->reads_tat_us, util_now_us(), session_read_every_us());
}

/* Run one parsed request. */
static void
session_dispatch(struct session *s, const struct proto_cmd *cmd)
{
    struct proto_reply r;
    struct lock_request req;
    char text[160];
    const char *err;
    int64_t ttl;
    size_t i;
    int rc;

    if (!s->authed && session_conf->auth_password[0] != '\0'
        && cmd->verb != PROTO_AUTH && cmd->verb != PROTO_QUIT) {
        session_send_error(s, PROTO_ERR_AUTH, "authentication required: send "
                           "AUTH <password> first");
        return;
    }
    if (session_stopping && cmd->verb != PROTO_QUIT) {
        session_send_error(s, PROTO_ERR_SHUTDOWN, "the daemon is stopping");
        return;
    }
    s->verb = cmd->verb;
    switch (cmd->verb) {
    case PROTO_AUTH:
        session_auth(s, cmd->word, cmd->word_len);
        return;
    case PROTO_LOCK:
    case PROTO_TRYLOCK:
        if (cmd->mode == PROTO_MODE_LEASE && !cmd->has_ttl) {
            snprintf(text, sizeof(text), "%s: mode=lease needs ttl= (nothing renews a lease)",
                     proto_verb_name(cmd->verb));
            session_send_error(s, PROTO_ERR_PROTO, text);
            return;
        }
        if (session_ttl(s, cmd, &req.ttl_ms) != 0) {
            return;
        }
        req.wait_ms = cmd->verb == PROTO_TRYLOCK ? 0
                      : cmd->has_wait ? cmd->wait_ms : PROTO_WAIT_INF;
        req.trylock = cmd->verb == PROTO_TRYLOCK;
        req.lease_mode = cmd->mode == PROTO_MODE_LEASE;
        req.fence = cmd->fence;
        req.kind = cmd->shared ? LOCK_KIND_SHARED
                   : cmd->has_limit ? LOCK_KIND_COUNTED : LOCK_KIND_EXCLUSIVE;
        req.label = cmd->has_label ? cmd->label : s->label;
        req.label_len = cmd->has_label ? cmd->label_len : strlen(s->label);
        req.label_asked = cmd->has_label;
        req.limit = 0;
        if (cmd->has_limit) {
            if (cmd->limit > session_conf->max_limit) {
                snprintf(text, sizeof(text), "%s: limit=%lld out of range 1..%lld "
                         "(lock.max_limit)", proto_verb_name(cmd->verb),
                         (long long)cmd->limit, (long long)session_conf->max_limit);
                session_send_error(s, PROTO_ERR_PROTO, text);
                return;
            }
            req.limit = (unsigned)cmd->limit;
        }
        s->busy = true;
        lock_acquire(&s->lc, cmd->name, cmd->name_len, &req);
        return;
    case PROTO_UNLOCK:
        s->busy = true;
        lock_release(&s->lc, cmd->name, cmd->name_len, cmd->token);
        return;
    case PROTO_STATUS:
        if (session_read_budget(s) != 0) {
            return;
        }
        session_read_taken(s);
        s->busy = true;
        lock_status(&s->lc, cmd->name, cmd->name_len, cmd->token);
        return;
    case PROTO_EXTEND:
        /* The parser made sure of token= and ttl=. */
        if (session_ttl(s, cmd, &ttl) != 0) {
            return;
        }
        s->busy = true;
        lock_extend(&s->lc, cmd->name, cmd->name_len, cmd->token, ttl);
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
        break;
    case PROTO_HELP:
        for (i = 0; proto_help[i] != NULL; i++) {
            evbuffer_add_printf(bufferevent_get_output(s->bev), "HELP %s\n", proto_help[i]);
        }
        bufferevent_write(s->bev, "END\n", 4);
        session_check_output(s);
        return;
    case PROTO_STATS:
        session_stats(s);
        return;
    case PROTO_QUIT:
        bufferevent_write(s->bev, "BYE\n", 4);
        session_quit(s);
        return;
    case PROTO_LIST:
        if ((s->list = calloc(1, sizeof(*s->list))) == NULL) {
            session_send_error(s, PROTO_ERR_LIMIT, "out of memory listing");
            return;
        }
        s->list->prefix_len = cmd->word != NULL ? cmd->word_len : 0;
        memcpy(s->list->prefix, cmd->word != NULL ? cmd->word : "", s->list->prefix_len);
        session_list_step(s);
        return;
    case PROTO_WATCH:
        if (session_read_budget(s) != 0) {
            return;
        }
        rc = watch_add(&s->wc, cmd->name, cmd->name_len, &err);
        if (rc < 0) {
            session_send_error(s, PROTO_ERR_LIMIT, err);
            return;
        }
        if (rc == 0) {
            session_read_taken(s);  /* a new watch: a read and subscriptions */
        }
        proto_reply_start(&r, "OK");
        proto_reply_word(&r, cmd->name, cmd->name_len);
        break;
    case PROTO_UNWATCH:
        watch_remove(&s->wc, cmd->name, cmd->name_len);
        proto_reply_start(&r, "OK");
        proto_reply_word(&r, cmd->name, cmd->name_len);
        break;
    case PROTO_BREAK:
        if (s->admin_by == NULL) {
            log_warn("client %llu (%s, label %s): BREAK %.*s refused: not admin",
                     (unsigned long long)s->id, s->peer, s->label, (int)cmd->name_len,
                     cmd->name);
            session_send_error(s, PROTO_ERR_DENIED, "BREAK needs the admin right: AUTH with "
                               "auth.admin_password, or uid 0 on the Unix socket");
            return;
        }
        /* The audit line of who asked; lock.c logs what it ended, whatever comes of us. */
        log_warn("client %llu (%s, label %s, admin by %s): BREAK %.*s",
                 (unsigned long long)s->id, s->peer, s->label, s->admin_by,
                 (int)cmd->name_len, cmd->name);
        s->busy = true;
        lock_break(&s->lc, cmd->name, cmd->name_len);
        return;
    case PROTO_VERB_COUNT:
        return;
    }
    proto_reply_end(&r);
    session_send(s, &r);
}

/* Reading pauses past this much unsent output (and resumes below SESSION_OUT_LOW). */
static size_t
session_out_high(void)
{
    size_t half = (size_t)session_conf->max_output_bytes / 2;

    return half < SESSION_OUT_HIGH ? half : SESSION_OUT_HIGH;
}

/*
 * Slowloris: a request line must be complete within idle_timeout_ms of
 * its first byte.  The deadline is set when buffered input holds no
 * complete line (only the start of one) and kept while more bytes of
 * that line trickle in; a consumed line clears it.  Lines waiting
 * behind a blocked LOCK are complete and have no deadline.
 */
static void
session_watch_partial(struct session *s)
{
    struct evbuffer *in;
    struct evbuffer_ptr eol;
    struct timeval tv;
    size_t eol_len;

    if (s->bev == NULL || s->closing || s->quitting || s->overflow || !s->authed) {
        return;     /* (before AUTH the timer holds the AUTH deadline) */
    }
    in = bufferevent_get_input(s->bev);
    if (evbuffer_get_length(in) == 0) {
        event_del(&s->timer);
        return;
    }
    eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
    if (eol.pos >= 0) {
        event_del(&s->timer);
    } else if (!evtimer_pending(&s->timer, NULL)) {
        tv.tv_sec = (time_t)(session_conf->idle_timeout_ms / 1000);
        tv.tv_usec = (suseconds_t)((session_conf->idle_timeout_ms % 1000) * 1000);
        evtimer_add(&s->timer, &tv);
    }
}

/* The session's timer: output overflow, or a line not finished in time. */
static void
session_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    char text[128];
    int err;

    (void)fd;
    (void)what;
    if (s->closing || s->bev == NULL) {
        return;
    }
    if (s->is_tls && !s->tls_up) {
        stats.tls_handshake_failures++;
        log_info("client %llu (%s): TLS handshake not done within %lld ms "
                 "(limits.idle_timeout_ms), closing", (unsigned long long)s->id, s->peer,
                 (long long)session_conf->idle_timeout_ms);
        session_close(s, "TLS handshake timed out");
        return;
    }
    if (s->quitting && !s->overflow) {
        if (evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
            session_quit_flushed(s);
        }
        return;     /* otherwise the write callback closes once flushed */
    }
    if (s->overflow) {
        stats.clients_closed_output++;
        log_warn("client %llu (%s): %zu bytes of replies unread, over "
                 "limits.max_output_bytes (%lld): closing",
                 (unsigned long long)s->id, s->peer,
                 evbuffer_get_length(bufferevent_get_output(s->bev)),
                 (long long)session_conf->max_output_bytes);
        session_close(s, "output over limits.max_output_bytes");
        return;
    }
    stats.clients_timed_out++;
    if (!s->authed) {
        log_info("client %llu (%s): no AUTH within %lld ms, closing",
                 (unsigned long long)s->id, s->peer, (long long)session_conf->idle_timeout_ms);
        snprintf(text, sizeof(text), "no AUTH within %lld ms (limits.idle_timeout_ms)",
                 (long long)session_conf->idle_timeout_ms);
        session_send_error(s, PROTO_ERR_AUTH, text);
        /*
         * Close now, not once the replies are read: a stranger who sends
         * lines and reads none must not keep its slot past the deadline.
         * A plain socket gets what it will take of the output at once.
         */
        if (!s->is_tls) {
            (void)session_write_out(s, &err);
        }
        session_close(s, "no AUTH in time");
        return;
    }
    log_info("client %llu (%s): request line not completed within %lld ms, closing",
             (unsigned long long)s->id, s->peer, (long long)session_conf->idle_timeout_ms);
    snprintf(text, sizeof(text), "request line not completed within %lld ms "
             "(limits.idle_timeout_ms)", (long long)session_conf->idle_timeout_ms);
    session_send_error(s, PROTO_ERR_TIMEOUT, text);
    session_quit(s);
}

/* Handle every complete line buffered, one request at a time. */
static void
session_process(struct session *s)
{
    struct evbuffer *in;
    struct evbuffer_ptr eol;
    struct proto_cmd cmd;
    struct proto_error err;
    size_t eol_len, max = (size_t)session_conf->max_line_bytes;
    char text[96];
    unsigned char *line;

    s->processing = true;
    while (!s->busy && s->list == NULL && !s->closing && !s->quitting && s->bev != NULL) {
        if (evbuffer_get_length(bufferevent_get_output(s->bev)) >= session_out_high()) {
            /* A client that does not read its replies gets no more of them. */
            s->out_blocked = true;
            bufferevent_disable(s->bev, EV_READ);
            break;
        }
        in = bufferevent_get_input(s->bev);
        eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
        if (eol.pos < 0) {
            if (evbuffer_get_length(in) > max) {
                goto toolong;
            }
            break;
        }
        if ((size_t)eol.pos > max) {
            goto toolong;
        }
        line = evbuffer_pullup(in, eol.pos + 1);
        if (proto_parse((const char *)line, (size_t)eol.pos, &cmd, &err) == 0) {
            session_dispatch(s, &cmd);
        } else {
            log_debug("client %llu (%s): ERR %s %s", (unsigned long long)s->id, s->peer,
                      proto_errcode_name(err.code), err.text);
            session_send_error(s, err.code, err.text);
        }
        evbuffer_drain(in, (size_t)eol.pos + 1);
        if (!s->overflow && s->authed) {
            event_del(&s->timer);   /* a new line begins: a new deadline */
        }
    }
    s->processing = false;
    if (s->input_ended && !s->busy && s->list == NULL && !s->closing && !s->quitting
        && !s->out_blocked && s->bev != NULL) {
        /* Every complete request is answered; what is left is no request. */
        session_quit(s);
        return;
    }
    session_watch_partial(s);
    return;

toolong:
    snprintf(text, sizeof(text), "line exceeds %zu bytes (limits.max_line_bytes)", max);
    log_info("client %llu (%s): line too long, closing", (unsigned long long)s->id, s->peer);
    session_send_error(s, PROTO_ERR_TOOLONG, text);
    s->processing = false;
    session_quit(s);
}

static void
session_read_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    session_grants_confirm(arg);    /* more from the client: it likely read them */
    session_process(arg);
}

static void
session_write_cb(struct bufferevent *bev, void *arg)
{
    struct session *s = arg;

    if (!s->is_tls && (bufferevent_get_enabled(bev) & EV_WRITE)
        && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        bufferevent_disable(bev, EV_WRITE);     /* session_flush arms it when needed */
    }
    if (s->quitting && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        session_quit_flushed(s);
        return;
    }
    if (s->list != NULL && !s->closing) {
        session_list_step(s);     /* the client read the last step: the next one */
        return;
    }
    if (s->out_blocked && !s->quitting) {
        s->out_blocked = false;
        if (!s->input_ended) {
            bufferevent_enable(bev, EV_READ);
        }
        if (!s->processing) {
            session_process(s);
        }
    }
}

/*
 * End of input (the client half-closed or closed): as memcached and
 * Redis do, answer every complete request received, in order, then close
 * (releasing the session's locks) once the replies are written.  A LOCK
 * cannot wait for a client that sends nothing more: lock_client_drain().
 * Bytes after the last LF are not a request.
 */
static void
session_input_end(struct session *s)
{
    if (s->input_ended || s->closing) {
        return;
    }
    log_debug("client %llu (%s): end of input", (unsigned long long)s->id, s->peer);
    s->input_ended = true;
    bufferevent_disable(s->bev, EV_READ);
    if (s->is_tls) {
        /* The OpenSSL bufferevent stops writing at the end of input: go on. */
        bufferevent_disable(s->bev, EV_WRITE);
        bufferevent_enable(s->bev, EV_WRITE);
    }
    if (!s->overflow) {
        event_del(&s->timer);   /* no partial-line or AUTH deadline any more */
    }
    lock_client_drain(&s->lc);
    if (!s->processing) {
        session_process(s);
    }
}

/*
 * OpenSSL's reasons queued on the connection, "; "-joined, into buf.
 * libevent queues SSL_get_error()'s value (SSL_ERROR_SSL,
 * SSL_ERROR_SYSCALL) among OpenSSL's error codes; those have no library
 * (ERR_GET_LIB 0) and are left out.  An SSL_ERROR_SYSCALL with no other
 * reason is the socket's error, when there is one.  buf is "" when
 * nothing is known.  *plain (when not NULL) tells whether a reason says
 * the client sent no TLS at all (plain text, an HTTP request).
 */
static const char *
session_tls_errors(struct session *s, char *buf, size_t size, bool *plain)
{
    char one[256];
    unsigned long err;
    size_t used = 0;
    bool syscall = false;
    int sockerr = EVUTIL_SOCKET_ERROR();

    buf[0] = '\0';
    while ((err = bufferevent_get_openssl_error(s->bev)) != 0) {
        if (ERR_GET_LIB(err) == 0) {
            syscall = syscall || err == SSL_ERROR_SYSCALL;
            continue;
        }
        if (plain != NULL && ERR_GET_LIB(err) == ERR_LIB_SSL
            && (ERR_GET_REASON(err) == SSL_R_WRONG_VERSION_NUMBER
                || ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST)) {
            *plain = true;
        }
        tls_reason(err, one, sizeof(one));
        if (used < size) {
            int w = snprintf(buf + used, size - used, "%s%s", used > 0 ? "; " : "", one);

            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (buf[0] == '\0' && syscall && sockerr != 0) {
        snprintf(buf, size, "%s", evutil_socket_error_to_string(sockerr));
    }
    return buf;
}

/*
 * The TLS handshake is done: a client certificate verified against
 * tls.client_ca_file stands for AUTH.  Otherwise AUTH must come before
 * the deadline set at accept, which the handshake's time counts against.
 */
static void
session_tls_connected(struct session *s)
{
    SSL *ssl = bufferevent_openssl_get_ssl(s->bev);

    s->tls_up = true;
    if (!s->authed && tls_peer_verified(ssl)) {
        s->authed_by = "tls.client_ca_file";
        s->authed = true;
    }
    if (s->authed) {
        session_authenticated(s);   /* counted as in now that the handshake is done */
    }
    log_debug("client %llu (%s): TLS handshake done (%s%s)", (unsigned long long)s->id,
              s->peer, ssl != NULL ? SSL_get_version(ssl) : "?",
              tls_peer_verified(ssl) ? ", client certificate verified" : "");
    /* Otherwise the deadline set at accept now waits for AUTH: one deadline, not two. */
}

/* The connection ended before its TLS handshake did: log and count it, close. */
static void
session_tls_failed(struct session *s, short what)
{
    char reason[512];
    const char *refusal = tls_refusal(bufferevent_openssl_get_ssl(s->bev));
    int err = EVUTIL_SOCKET_ERROR();
    bool plain = false;

    session_tls_errors(s, reason, sizeof(reason), &plain);
    if (reason[0] == '\0') {
        snprintf(reason, sizeof(reason), "%s",
                 (what & BEV_EVENT_EOF) || err == 0 ? "the client closed the connection"
                                                    : evutil_socket_error_to_string(err));
    }
    stats.tls_handshake_failures++;
    /* One line: the certificate refused and why, then OpenSSL's reasons. */
    log_info("client %llu (%s): TLS handshake failed: %s%s%s%s%s", (unsigned long long)s->id,
             s->peer, refusal[0] != '\0' ? "client certificate refused: " : "", refusal,
             refusal[0] != '\0' ? "; " : "", reason,
             plain ? " (the client spoke no TLS: the plain listen.tcp port is another one)"
                   : "");
    session_close(s, "TLS handshake failed");
}

static void
session_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct session *s = arg;

    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        session_tls_connected(s);
        return;
    }
    if (s->is_tls && !s->tls_up && (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))) {
        session_tls_failed(s, what);
        return;
    }
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING)) {
        /* No byte of the pending output was taken for idle_timeout_ms. */
        stats.clients_closed_output++;
        log_warn("client %llu (%s): read none of %zu bytes of replies for %lld ms "
                 "(limits.idle_timeout_ms): closing", (unsigned long long)s->id, s->peer,
                 evbuffer_get_length(bufferevent_get_output(s->bev)),
                 (long long)session_conf->idle_timeout_ms);
        session_close(s, "replies not read");
    } else if (what & BEV_EVENT_EOF) {
        session_input_end(s);
    } else if (what & BEV_EVENT_ERROR) {
        int err = EVUTIL_SOCKET_ERROR();
        char reason[512] = "";

        s->peer_reset = err == ECONNRESET || err == EPIPE;
        if (s->is_tls) {
            session_tls_errors(s, reason, sizeof(reason), NULL);
        }
        session_close(s, reason[0] != '\0' ? reason : evutil_socket_error_to_string(err));
    }
}

/*
 * Close the connection now and release the session's locks.  The
 * struct stays until the operation in flight, if any, has called back.
 */
static void
session_close(struct session *s, const char *why)
{
    if (s->closing) {
        return;
    }
    log_debug("client %llu (%s): %s", (unsigned long long)s->id, s->peer, why);
    s->closing = true;
    TAILQ_REMOVE(&sessions, s, link);
    session_n--;
    stats.connections--;
    admit_leave(&s->admit);
    /* Lease grants whose OK never reached the client: nobody knows their tokens. */
    session_grants_settle(s);
    if (s->is_tls && s->tls_up && !s->peer_reset
        && evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
        /* close_notify, so that the client knows it read everything. */
        SSL *ssl = bufferevent_openssl_get_ssl(s->bev);

        if (ssl != NULL) {
            (void)SSL_shutdown(ssl);
            ERR_clear_error();
        }
    }
    flush_leave(&s->flush);
    /* The bufferevent may outlive s a little (deferred callbacks): s's hook goes now. */
    evbuffer_remove_cb(bufferevent_get_output(s->bev), session_output_cb, s);
    bufferevent_free(s->bev);
    s->bev = NULL;
    s->in_close = true;
    watch_client_close(&s->wc);
    lock_client_close(&s->lc);
    s->in_close = false;
    if (!s->busy) {
        session_free(s);
    }
}

int
session_accept(evutil_socket_t fd, const char *peer, bool is_unix, bool is_tls, long uid,
               long pid, struct admit_slot *slot)
{
    struct session *s;
    struct timeval tv;
    SSL *ssl = NULL;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        admit_leave(slot);
        evutil_closesocket(fd);
        return -1;
    }
    if (is_tls) {
        ssl = tls_session_new();
        if (ssl == NULL) {
            admit_leave(slot);
            evutil_closesocket(fd);
            free(s);
            return -1;
        }
        /* Freeing the bufferevent frees ssl and closes fd. */
        s->bev = bufferevent_openssl_socket_new(session_base, fd, ssl,
                                                BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE
                                                | BEV_OPT_DEFER_CALLBACKS);
        if (s->bev != NULL) {
            bufferevent_openssl_set_allow_dirty_shutdown(s->bev, 1);
        }
    } else {
        s->bev = bufferevent_socket_new(session_base, fd,
                                        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    }
    if (s->bev == NULL) {
        admit_leave(slot);
        SSL_free(ssl);
        evutil_closesocket(fd);
        free(s);
        return -1;
    }
    flush_entry_init(&s->flush, session_flush);
    s->grants_tail = &s->grants;
    if (evbuffer_add_cb(bufferevent_get_output(s->bev), session_output_cb, s) == NULL) {
        admit_leave(slot);
        bufferevent_free(s->bev);   /* closes fd (and frees ssl) */
        free(s);
        return -1;
    }
    lock_client_init(&s->lc, session_done_cb, session_lost_cb);
    watch_client_init(&s->wc, session_watch_cb);
    session_default_label(s, peer, is_unix, uid, pid);
    if (is_unix && uid == 0) {
        s->admin_by = "uid 0 on the Unix socket";
    }
    evtimer_assign(&s->timer, session_base, session_timer_cb, s);
    s->admit = *slot;           /* the session gives the slot back at close */
    s->authed = !admit_needs_auth(is_unix);
    s->id = session_next_id++;
    s->is_unix = is_unix;
    s->is_tls = is_tls;
    snprintf(s->peer, sizeof(s->peer), "%s", peer);
    TAILQ_INSERT_TAIL(&sessions, s, link);
    session_n++;
    stats.connections++;
    stats.connections_total++;
    bufferevent_setcb(s->bev, session_read_cb, session_write_cb, session_event_cb, s);
    /* Stop reading while a LOCK waits and this much is buffered. */
    bufferevent_setwatermark(s->bev, EV_READ, 0,
                             SESSION_READ_HIGH + 2 * (size_t)session_conf->max_line_bytes);
    /* The write callback runs once the output drains below this. */
    bufferevent_setwatermark(s->bev, EV_WRITE, SESSION_OUT_LOW, 0);
    /* Pending output that makes no progress this long: the client does not read. */
    tv.tv_sec = (time_t)(session_conf->idle_timeout_ms / 1000);
    tv.tv_usec = (suseconds_t)((session_conf->idle_timeout_ms % 1000) * 1000);
    bufferevent_set_timeouts(s->bev, NULL, &tv);
    if (!s->authed || is_tls) {
        /* A session that never authenticates (or never finishes its TLS
           handshake) must not keep a client slot. */
        evtimer_add(&s->timer, &tv);
    }
    /*
     * A plain socket is written by session_flush; its write event (on by
     * default in a new bufferevent) is armed only while the socket is full.
     */
    if (s->is_tls) {
        bufferevent_enable(s->bev, EV_READ | EV_WRITE);
    } else {
        bufferevent_disable(s->bev, EV_WRITE);
        bufferevent_enable(s->bev, EV_READ);
    }
    log_debug("client %llu (%s): connected", (unsigned long long)s->id, peer);
    return 0;
}

void
session_shutdown_all(void)
{
    struct session *s;

    session_stopping = true;
    TAILQ_FOREACH(s, &sessions, link) {
        lock_client_shutdown(&s->lc);
    }
}

bool
session_all_flushed(void)
{
    struct session *s;

    TAILQ_FOREACH(s, &sessions, link) {
        if (s->bev != NULL && evbuffer_get_length(bufferevent_get_output(s->bev)) > 0) {
            return false;
        }
    }
    return true;
}

void
session_close_all(void)
{
    struct session *s;

    while ((s = TAILQ_FIRST(&sessions)) != NULL) {
        session_close(s, "daemon stopping");
    }
}
