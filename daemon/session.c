/*
 * session.c: one client connection: its socket and TLS, its AUTH state,
 * request lines, back-pressure, linger and close.  The delivery receipts
 * are daemon/session_receipt.c's, the connection's record
 * daemon/session_conn.h's; the verbs are daemon/command.c's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <openssl/err.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "conf/conf.h"
#include "daemon/admit.h"
#include "daemon/ctx.h"
#include "daemon/flush.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "daemon/session_conn.h"
#include "daemon/stats.h"
#include "daemon/tls.h"
#include "daemon/util.h"
#include "daemon/xmalloc.h"
#include "proto/proto.h"

#define SESSION_READ_HIGH   (64 * 1024)   /* input buffered while a LOCK waits */
#define SESSION_OUT_HIGH    (256 * 1024)  /* stop reading past this much unsent output */
#define SESSION_OUT_LOW     (64 * 1024)   /* ... and resume below this */
#define SESSION_LINGER_MS   2000          /* longest wait at close for tracked replies to be read */
#define SESSION_LINGER_TICK_MS 5          /* how often that wait looks */

#define SESSION_LINES_PER_TURN 16   /* requests of one session per turn of the loop */

static TAILQ_HEAD(, session) sessions = TAILQ_HEAD_INITIALIZER(sessions);
static size_t             session_n;
static uint64_t           session_next_id = 1;
static bool               session_is_stopping;
static const struct session_hooks *session_hooks;
/*
 * Sessions that had more complete lines than SESSION_LINES_PER_TURN:
 * the rest waits for the next turn of the loop (a zero timer, run after
 * the loop looked for I/O again), so a client that pipelines thousands
 * of requests delays another's by at most SESSION_LINES_PER_TURN of its
 * own (the requests-per-event budget of memcached's worker loop).
 */
static TAILQ_HEAD(, session) session_ready = TAILQ_HEAD_INITIALIZER(session_ready);
static size_t             session_nready;  /* entries in session_ready */
static struct event       session_turn;

static void session_process(struct session *s);
static void session_close(struct session *s, const char *why);

/*
 * The next turn: every session deferred before it handles its next
 * lines.  The list is walked in place, as many entries as it had when
 * the turn began (a session deferred again goes to its tail, for the
 * turn after), so that a session freed meanwhile by another's request
 * leaves the one list it is on.
 */
static void
session_turn_cb(evutil_socket_t fd, short what, void *arg)
{
    size_t n = session_nready;
    struct session *s;

    (void)fd;
    (void)what;
    (void)arg;
    while (n-- > 0 && (s = TAILQ_FIRST(&session_ready)) != NULL) {
        TAILQ_REMOVE(&session_ready, s, ready_link);
        session_nready--;
        s->deferred = false;
        if (!s->processing && s->phase == SESSION_OPEN && s->bev != NULL) {
            session_process(s);     /* may defer it again: to the turn after */
        }
    }
}

/* Leave s's further lines to the next turn of the loop. */
static void
session_defer(struct session *s)
{
    static const struct timeval zero = { 0, 0 };

    if (s->deferred) {
        return;
    }
    s->deferred = true;
    TAILQ_INSERT_TAIL(&session_ready, s, ready_link);
    session_nready++;
    if (!evtimer_pending(&session_turn, NULL)) {
        evtimer_add(&session_turn, &zero);
    }
}

void
session_init(const struct session_hooks *hooks)
{
    session_hooks = hooks;
    evtimer_assign(&session_turn, ctx.base, session_turn_cb, NULL);
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
    if (s->deferred) {
        TAILQ_REMOVE(&session_ready, s, ready_link);
        session_nready--;
    }
    session_hooks->free(s->state);
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

    if (!s->overflow && out > (size_t)ctx.conf->max_output_bytes) {
        s->overflow = true;
        bufferevent_disable(s->bev, EV_READ);
        event_del(&s->timer);
        event_active(&s->timer, EV_TIMEOUT, 0);
    }
}

void
session_reply(struct session *s, const struct proto_reply *r)
{
    if (s->bev != NULL) {
        if (bufferevent_write(s->bev, r->buf, r->len) != 0) {
            xmalloc_fail("a client's reply");
        }
        session_check_output(s);
    }
}

void
session_error(struct session *s, enum proto_errcode code, const char *text)
{
    struct proto_reply r;

    proto_reply_error(&r, code, text);
    session_reply(s, &r);
}

struct evbuffer *
session_output(struct session *s)
{
    return bufferevent_get_output(s->bev);
}

void
session_wrote(struct session *s)
{
    if (s->bev != NULL) {
        session_check_output(s);
    }
}

bool
session_output_low(const struct session *s)
{
    return s->bev != NULL
           && evbuffer_get_length(bufferevent_get_output(s->bev)) < SESSION_OUT_LOW;
}

void
session_request_begin(struct session *s)
{
    s->turn = SESSION_REQUEST;
}

bool
session_request_done(struct session *s)
{
    s->turn = SESSION_READY;
    if (s->phase == SESSION_CLOSED) {
        if (!s->in_close) {
            session_free(s);
        }
        return false;
    }
    return true;
}

void
session_pace(struct session *s, bool on)
{
    s->turn = on ? SESSION_PACED : SESSION_READY;
}

void
session_next(struct session *s)
{
    if (!s->processing) {
        session_process(s);
    }
}

unsigned long long
session_id(const struct session *s)
{
    return (unsigned long long)s->id;
}

const char *
session_peer(const struct session *s)
{
    return s->peer;
}

const char *
session_admin_by(const struct session *s)
{
    return s->admin_by;
}

bool
session_authed(const struct session *s)
{
    return s->auth != SESSION_AUTH_WAITING;
}

bool
session_stopping(void)
{
    return session_is_stopping;
}

/*
 * The output buffer changed.  Bytes added: a plain socket joins the
 * flush list (session_flush writes them at the end of the loop
 * iteration); a TLS one is written by its bufferevent.  Bytes left (to
 * the socket): count them, confirm receipts.
 */
static void
session_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct session *s = arg;

    (void)buf;
    if (info->n_added > 0 && !SESSION_IS_TLS(s) && s->bev != NULL) {
        flush_join(&s->flush);
    }
    s->out_sent += info->n_deleted;
    if (info->n_deleted > 0) {
        session_receipts_confirm(s);
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
 * A quitting session's output is all written to the socket: close now,
 * unless tracked replies are not confirmed delivered yet; then look
 * again every SESSION_LINGER_TICK_MS, for at most SESSION_LINGER_MS, so
 * that a reply the client read gets its receipt as delivered and one it
 * never read (it closed without reading) as lost, at once.
 */
static void
session_quit_flushed(struct session *s)
{
    struct timeval tv = { 0, SESSION_LINGER_TICK_MS * 1000 };
    int64_t now = util_now_us();

    session_receipts_confirm(s);
    /* A reset or a pending error (remembered for the settling) ends the wait. */
    if (s->receipts != NULL && !s->peer_reset && session_take_error(s) == 0) {
        if (s->linger_until_us == 0) {
            s->linger_until_us = now + SESSION_LINGER_MS * 1000;
            session_hooks->release(s->state);   /* its session-mode locks go now */
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
void
session_quit(struct session *s)
{
    s->phase = SESSION_QUITTING;
    bufferevent_disable(s->bev, EV_READ);
    if (!s->overflow) {
        event_del(&s->timer);   /* no later ERR TIMEOUT after the last reply */
        if (evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
            event_active(&s->timer, EV_TIMEOUT, 0);     /* nothing to flush: close */
        }
    }
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
    if (s->kind != SESSION_TLS_HANDSHAKE) {
        admit_authed(&s->admit);
        event_del(&s->timer);
    }
}

void
session_let_in(struct session *s, enum session_auth by)
{
    if (by == SESSION_AUTH_ADMIN_PASSWORD) {
        s->admin_by = "auth.admin_password";
        s->auth = by;
    } else if (s->auth == SESSION_AUTH_WAITING || s->auth == SESSION_AUTH_NOT_NEEDED) {
        s->auth = by;
    }
    session_authenticated(s);
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
    bool needs = next->auth_password[0] != '\0'
                 && !(s->kind == SESSION_UNIX && next->auth_unix_exempt);

    if (s->admin_by != NULL && strcmp(s->admin_by, "auth.admin_password") == 0
        && admin_changed) {
        s->admin_by = NULL;
    }
    if (s->bev == NULL || s->phase == SESSION_CLOSED) {
        return;
    }
    if (!needs && s->auth == SESSION_AUTH_WAITING) {
        s->auth = SESSION_AUTH_NOT_NEEDED;  /* waiting for an AUTH no longer needed */
        session_authenticated(s);
        return;
    }
    if (needs && s->auth == SESSION_AUTH_NOT_NEEDED) {
        /* Let in when nothing was asked, and something is now. */
        if (s->kind == SESSION_TLS_HANDSHAKE) {
            /* It AUTHs after its handshake, by the same deadline. */
            s->auth = SESSION_AUTH_WAITING;
            return;
        }
        log_warn("client %llu (%s): a reload requires AUTH (auth.password, "
                 "auth.unix_exempt) of a session that gave none; closing",
                 (unsigned long long)s->id, s->peer);
        session_error(s, PROTO_ERR_AUTH, "a reload requires AUTH of this session, "
                      "which gave none; closing");
        session_quit(s);
        return;
    }
    if ((s->auth != SESSION_AUTH_PASSWORD && s->auth != SESSION_AUTH_ADMIN_PASSWORD)
        || !(s->auth == SESSION_AUTH_ADMIN_PASSWORD ? admin_changed : pass_changed)) {
        return;
    }
    if (next->auth_password[0] == '\0') {
        s->auth = SESSION_AUTH_NOT_NEEDED;  /* nothing is needed now */
        return;
    }
    log_warn("client %llu (%s): %s changed by a reload; closing the session it "
             "authenticated", (unsigned long long)s->id, s->peer,
             s->auth == SESSION_AUTH_ADMIN_PASSWORD ? "auth.admin_password" : "auth.password");
    session_error(s, PROTO_ERR_AUTH, "the password this session gave was changed by a "
                  "reload; closing");
    session_quit(s);
}

void
session_apply(const struct conf *prev)
{
    const struct conf *conf = ctx.conf;
    struct session *s;

    /*
     * Open sessions end if their password changed (session_reauth), and
     * take a new limits.max_line_bytes at once.
     */
    TAILQ_FOREACH(s, &sessions, link) {
        session_reauth(s, prev, conf);
        if (s->bev != NULL) {
            bufferevent_setwatermark(s->bev, EV_READ, 0,
                                     SESSION_READ_HIGH + 2 * (size_t)conf->max_line_bytes);
        }
    }
}

/* Reading pauses past this much unsent output (and resumes below SESSION_OUT_LOW). */
static size_t
session_out_high(void)
{
    size_t half = (size_t)ctx.conf->max_output_bytes / 2;

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

    if (s->bev == NULL || s->phase != SESSION_OPEN || s->overflow
        || s->auth == SESSION_AUTH_WAITING) {
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
        tv.tv_sec = (time_t)(ctx.conf->idle_timeout_ms / 1000);
        tv.tv_usec = (suseconds_t)((ctx.conf->idle_timeout_ms % 1000) * 1000);
        evtimer_add(&s->timer, &tv);
    }
}

/*
 * Close s at once after its last line, not once the replies are read: a
 * stranger who sends lines and reads none must not keep its slot.  A
 * plain socket gets what it will take of the output at once.
 */
static void
session_close_now(struct session *s, const char *why)
{
    int err;

    if (!SESSION_IS_TLS(s)) {
        (void)session_write_out(s, &err);
    }
    session_close(s, why);
}

/*
 * admit.c closes slot's connection, not authenticated yet, to make room
 * for a newer one: "ERR LIMIT <why>" when it can be read (not before a
 * TLS handshake), then closed.
 */
static void
session_evict(struct admit_slot *slot, const char *why)
{
    struct session *s = (struct session *)((char *)slot - offsetof(struct session, admit));

    log_debug("client %llu (%s): %s", (unsigned long long)s->id, s->peer, why);
    if (s->kind != SESSION_TLS_HANDSHAKE) {
        session_error(s, PROTO_ERR_LIMIT, why);
    }
    session_close_now(s, "closed to make room");
}

/* The session's timer: output overflow, or a line not finished in time. */
static void
session_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    char text[128];

    (void)fd;
    (void)what;
    if (s->phase == SESSION_CLOSED || s->bev == NULL) {
        return;
    }
    if (s->kind == SESSION_TLS_HANDSHAKE) {
        stats.tls_handshake_failures++;
        log_info("client %llu (%s): TLS handshake not done within %lld ms "
                 "(limits.auth_timeout_ms), closing", (unsigned long long)s->id, s->peer,
                 (long long)ctx.conf->auth_timeout_ms);
        session_close(s, "TLS handshake timed out");
        return;
    }
    if (s->phase == SESSION_QUITTING && !s->overflow) {
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
                 (long long)ctx.conf->max_output_bytes);
        session_close(s, "output over limits.max_output_bytes");
        return;
    }
    stats.clients_timed_out++;
    if (s->auth == SESSION_AUTH_WAITING) {
        log_info("client %llu (%s): no AUTH within %lld ms, closing",
                 (unsigned long long)s->id, s->peer, (long long)ctx.conf->auth_timeout_ms);
        snprintf(text, sizeof(text), "no AUTH within %lld ms (limits.auth_timeout_ms)",
                 (long long)ctx.conf->auth_timeout_ms);
        session_error(s, PROTO_ERR_AUTH, text);
        session_close_now(s, "no AUTH in time");
        return;
    }
    log_info("client %llu (%s): request line not completed within %lld ms, closing",
             (unsigned long long)s->id, s->peer, (long long)ctx.conf->idle_timeout_ms);
    snprintf(text, sizeof(text), "request line not completed within %lld ms "
             "(limits.idle_timeout_ms)", (long long)ctx.conf->idle_timeout_ms);
    session_error(s, PROTO_ERR_TIMEOUT, text);
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
    size_t eol_len, max = (size_t)ctx.conf->max_line_bytes;
    char text[96];
    unsigned char *line;
    unsigned lines = 0;

    s->processing = true;
    while (s->turn == SESSION_READY && s->phase == SESSION_OPEN && s->bev != NULL) {
        if (lines++ == SESSION_LINES_PER_TURN) {
            session_defer(s);   /* the others' turn first */
            break;
        }
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
            session_hooks->line(s, s->state, &cmd);
        } else {
            log_debug("client %llu (%s): ERR %s %s", (unsigned long long)s->id, s->peer,
                      proto_errcode_name(err.code), err.text);
            session_error(s, err.code, err.text);
        }
        evbuffer_drain(in, (size_t)eol.pos + 1);
        if (!s->overflow && s->auth != SESSION_AUTH_WAITING) {
            event_del(&s->timer);   /* a new line begins: a new deadline */
        } else if (s->auth == SESSION_AUTH_WAITING && s->turn == SESSION_REQUEST
                   && s->phase == SESSION_OPEN) {
            /*
             * Its AUTH waits for its turn to be checked (authlimit.h): the
             * client did its part in time, the wait is the daemon's.
             */
            event_del(&s->timer);
            admit_in_line(&s->admit);
        }
    }
    s->processing = false;
    if (s->input_ended && s->turn == SESSION_READY && s->phase == SESSION_OPEN
        && !s->out_blocked && !s->deferred && s->bev != NULL) {
        /* Every complete request is answered; what is left is no request. */
        session_quit(s);
        return;
    }
    session_watch_partial(s);
    return;

toolong:
    snprintf(text, sizeof(text), "line exceeds %zu bytes (limits.max_line_bytes)", max);
    log_info("client %llu (%s): line too long, closing", (unsigned long long)s->id, s->peer);
    session_error(s, PROTO_ERR_TOOLONG, text);
    s->processing = false;
    session_quit(s);
}

static void
session_read_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    session_receipts_confirm(arg);    /* more from the client: it likely read them */
    session_process(arg);
}

static void
session_write_cb(struct bufferevent *bev, void *arg)
{
    struct session *s = arg;

    if (!SESSION_IS_TLS(s) && (bufferevent_get_enabled(bev) & EV_WRITE)
        && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        bufferevent_disable(bev, EV_WRITE);     /* session_flush arms it when needed */
    }
    if (s->phase == SESSION_QUITTING && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        session_quit_flushed(s);
        return;
    }
    if (s->turn == SESSION_PACED && s->phase != SESSION_CLOSED) {
        session_hooks->writable(s, s->state);     /* the client read the last step */
        return;
    }
    if (s->out_blocked && s->phase == SESSION_OPEN) {
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
    if (s->input_ended || s->phase == SESSION_CLOSED) {
        return;
    }
    log_debug("client %llu (%s): end of input", (unsigned long long)s->id, s->peer);
    s->input_ended = true;
    bufferevent_disable(s->bev, EV_READ);
    if (SESSION_IS_TLS(s)) {
        /* The OpenSSL bufferevent stops writing at the end of input: go on. */
        bufferevent_disable(s->bev, EV_WRITE);
        bufferevent_enable(s->bev, EV_WRITE);
    }
    if (!s->overflow) {
        event_del(&s->timer);   /* no partial-line or AUTH deadline any more */
    }
    session_hooks->input_end(s->state);
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

    s->kind = SESSION_TLS;
    if (s->auth == SESSION_AUTH_WAITING && tls_peer_verified(ssl)) {
        s->auth = SESSION_AUTH_CERTIFICATE;
    }
    if (s->auth != SESSION_AUTH_WAITING) {
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
    if (s->kind == SESSION_TLS_HANDSHAKE && (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))) {
        session_tls_failed(s, what);
        return;
    }
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING)) {
        /* No byte of the pending output was taken for idle_timeout_ms. */
        stats.clients_closed_output++;
        log_warn("client %llu (%s): read none of %zu bytes of replies for %lld ms "
                 "(limits.idle_timeout_ms): closing", (unsigned long long)s->id, s->peer,
                 evbuffer_get_length(bufferevent_get_output(s->bev)),
                 (long long)ctx.conf->idle_timeout_ms);
        session_close(s, "replies not read");
    } else if (what & BEV_EVENT_EOF) {
        session_input_end(s);
    } else if (what & BEV_EVENT_ERROR) {
        int err = EVUTIL_SOCKET_ERROR();
        char reason[512] = "";

        s->peer_reset = err == ECONNRESET || err == EPIPE;
        if (SESSION_IS_TLS(s)) {
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
    if (s->phase == SESSION_CLOSED) {
        return;
    }
    log_debug("client %llu (%s): %s", (unsigned long long)s->id, s->peer, why);
    s->phase = SESSION_CLOSED;
    TAILQ_REMOVE(&sessions, s, link);
    session_n--;
    stats.connections--;
    admit_leave(&s->admit);
    /* The receipts left: a reply that never reached the client says so now. */
    session_receipts_settle(s);
    if (s->kind == SESSION_TLS && !s->peer_reset
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
    if (!SESSION_IS_TLS(s)) {
        /*
         * The descriptor goes now, not when the loop finalizes the
         * bufferevent: connections closed to make room by the hundred in
         * one accept callback must not run the daemon out of descriptors.
         */
        evutil_socket_t fd = bufferevent_getfd(s->bev);

        bufferevent_setfd(s->bev, -1);
        if (fd >= 0) {
            evutil_closesocket(fd);
        }
    }
    bufferevent_free(s->bev);
    s->bev = NULL;
    s->in_close = true;
    session_hooks->closed(s->state);
    s->in_close = false;
    if (s->turn != SESSION_REQUEST) {
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

    if (is_tls && (ssl = tls_session_new()) == NULL) {
        admit_leave(slot);
        evutil_closesocket(fd);
        return -1;
    }
    s = xcalloc(1, sizeof(*s) + session_hooks->size);
    if (is_tls) {
        /* Freeing the bufferevent frees ssl and closes fd. */
        s->bev = bufferevent_openssl_socket_new(ctx.base, fd, ssl,
                                                BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE
                                                | BEV_OPT_DEFER_CALLBACKS);
    } else {
        s->bev = bufferevent_socket_new(ctx.base, fd,
                                        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    }
    if (s->bev == NULL
        || evbuffer_add_cb(bufferevent_get_output(s->bev), session_output_cb, s) == NULL) {
        xmalloc_fail("a client's connection");
    }
    if (is_tls) {
        bufferevent_openssl_set_allow_dirty_shutdown(s->bev, 1);
    }
    flush_entry_init(&s->flush, session_flush);
    s->receipts_tail = &s->receipts;
    if (is_unix && uid == 0) {
        s->admin_by = "uid 0 on the Unix socket";
    }
    evtimer_assign(&s->timer, ctx.base, session_timer_cb, s);
    s->admit = *slot;           /* the session gives the slot back at close */
    admit_settle(&s->admit, session_evict);
    s->auth = admit_needs_auth(is_unix) ? SESSION_AUTH_WAITING : SESSION_AUTH_NOT_NEEDED;
    s->id = session_next_id++;
    s->kind = is_tls ? SESSION_TLS_HANDSHAKE : is_unix ? SESSION_UNIX : SESSION_TCP;
    snprintf(s->peer, sizeof(s->peer), "%s", peer);
    session_hooks->open(s, s->state, peer, is_unix, uid, pid);
    TAILQ_INSERT_TAIL(&sessions, s, link);
    session_n++;
    stats.connections++;
    stats.connections_total++;
    bufferevent_setcb(s->bev, session_read_cb, session_write_cb, session_event_cb, s);
    /* Stop reading while a LOCK waits and this much is buffered. */
    bufferevent_setwatermark(s->bev, EV_READ, 0,
                             SESSION_READ_HIGH + 2 * (size_t)ctx.conf->max_line_bytes);
    /* The write callback runs once the output drains below this. */
    bufferevent_setwatermark(s->bev, EV_WRITE, SESSION_OUT_LOW, 0);
    /* Pending output that makes no progress this long: the client does not read. */
    tv.tv_sec = (time_t)(ctx.conf->idle_timeout_ms / 1000);
    tv.tv_usec = (suseconds_t)((ctx.conf->idle_timeout_ms % 1000) * 1000);
    bufferevent_set_timeouts(s->bev, NULL, &tv);
    if (s->auth == SESSION_AUTH_WAITING || is_tls) {
        /* A session that never authenticates (or never finishes its TLS
           handshake) must not keep a client slot. */
        tv.tv_sec = (time_t)(ctx.conf->auth_timeout_ms / 1000);
        tv.tv_usec = (suseconds_t)((ctx.conf->auth_timeout_ms % 1000) * 1000);
        evtimer_add(&s->timer, &tv);
    }
    /*
     * A plain socket is written by session_flush; its write event (on by
     * default in a new bufferevent) is armed only while the socket is full.
     */
    if (is_tls) {
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

    session_is_stopping = true;
    TAILQ_FOREACH(s, &sessions, link) {
        session_hooks->shutdown(s->state);
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
