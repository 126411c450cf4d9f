/*
 * delay_proxy.c: a TCP proxy that delays what it forwards, for the fault
 * suite's delay-jitter scenario (tests/faults/README.md).  This kernel
 * has no `tc netem`, so the delay of a link is made here: the daemons
 * are pointed at the proxy instead of a master.
 *
 *     delay-proxy -l ADDR:PORT -t ADDR:PORT -d MIN-MAX [-o] [-s]
 *
 * Every connection accepted on -l is paired with a new connection to -t
 * and the bytes are copied both ways.  While the delay is on, each
 * chunk read from one side is handed to the other side at
 * max(the previous chunk's delivery, now + a delay drawn uniformly from
 * MIN..MAX ms), so the order of the bytes on a connection never
 * changes; both directions are delayed, as on a link with the delay on
 * both of its ends.  Each direction of each connection draws its delays
 * from a generator of its own (seeded from the proxy's, which is seeded
 * from the clock and the pid), so the delays of two connections, or of
 * the two directions of one, are independent: two daemons' requests
 * reach a master in either order, and one daemon's requests reach the
 * masters in different orders.  While it is off, a chunk goes at once (after the
 * chunks still waiting).  The delay starts off (-o: on); SIGUSR1 turns
 * it on, SIGUSR2 off; SIGTERM or SIGINT ends the proxy.  When either
 * side of a pair closes or fails, both are closed.
 *
 * -s delays only subscriber connections: a pair is one from the chunk in
 * which its client sends a SUBSCRIBE command (the RESP bulk string
 * "SUBSCRIBE", as a daemon's subscriber link sends it first thing), and
 * the bytes of every other pair (a daemon's command link) go at once.
 * So a daemon's subscriptions can be made slower than its commands to
 * the same master, both links pointed at one proxy.
 *
 * A line goes to stdout when it listens and at each switch.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define DPROXY_EXIT_USAGE   2
#define DPROXY_EXIT_SETUP   3
#define DPROXY_SUBSCRIBE    "\r\nSUBSCRIBE\r\n" /* -s: what a subscriber's client sends */
#define DPROXY_TAIL         16                  /* >= strlen(DPROXY_SUBSCRIBE) */

/* One chunk read and not yet delivered: its size and when it is due. */
struct dproxy_chunk {
    TAILQ_ENTRY(dproxy_chunk) link; /* in its direction's queue, oldest first */
    size_t  len;                    /* bytes of it at the front of held */
    int64_t due_us;                 /* CLOCK_MONOTONIC delivery time */
};

TAILQ_HEAD(dproxy_queue, dproxy_chunk);

struct dproxy_pair;

/* One direction of a pair: what is read from one side waits here for the other. */
struct dproxy_dir {
    struct dproxy_pair  *pair;      /* the pair it belongs to */
    struct bufferevent  *from;      /* the side it reads */
    struct bufferevent  *to;        /* the side it writes */
    struct evbuffer     *held;      /* bytes read, not delivered, in order */
    struct dproxy_queue  chunks;    /* the chunks of held, oldest first */
    struct event        *timer;     /* fires when the oldest chunk is due */
    int64_t              last_due_us; /* delivery time of the newest chunk */
    uint64_t             rng;       /* xorshift64 state of this direction's delays */
};

/* An accepted connection and its connection to the target; freed by dproxy_close. */
struct dproxy_pair {
    struct bufferevent *client;     /* accepted on -l */
    struct bufferevent *server;     /* made to -t */
    struct dproxy_dir   up;         /* client to server */
    struct dproxy_dir   down;       /* server to client */
    bool                subscriber; /* -s: its client sent SUBSCRIBE (it is delayed) */
    char                tail[DPROXY_TAIL]; /* -s: the client's last bytes, so that a
                                       command cut between two reads is seen */
    size_t              tail_len;   /* bytes in tail */
};

/* Command-line settings and the run's state; one per process. */
struct dproxy_state {
    struct event_base  *base;       /* the event loop */
    struct sockaddr_storage target; /* -t */
    int                 target_len; /* its length */
    char                listen_spec[64]; /* -l as given */
    char                target_spec[64]; /* -t as given */
    long                min_ms;     /* -d: the delay's lower bound */
    long                max_ms;     /* -d: its upper bound */
    bool                on;         /* the delay is on */
    bool                subscribers_only; /* -s: only subscriber pairs are delayed */
    uint64_t            rng;        /* seeds the directions' generators */
    unsigned long       pairs;      /* connections accepted */
};

static struct dproxy_state dproxy;  /* the settings and state */

static int64_t
dproxy_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A delay in microseconds, uniform in min..max ms, from the generator at rng. */
static int64_t
dproxy_delay_us(uint64_t *rng)
{
    uint64_t span = (uint64_t)(dproxy.max_ms - dproxy.min_ms) * 1000 + 1;

    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return dproxy.min_ms * 1000 + (int64_t)(*rng % span);
}

/* A seed for a direction's generator (splitmix64 over the proxy's own). */
static uint64_t
dproxy_seed(void)
{
    uint64_t z = (dproxy.rng += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z != 0 ? z : 1;
}

static void
dproxy_usage(void)
{
    fprintf(stderr, "usage: delay-proxy -l ADDR:PORT -t ADDR:PORT -d MIN_MS-MAX_MS [-o] [-s]\n");
    exit(DPROXY_EXIT_USAGE);
}

/* ---- a pair ---- */

static void
dproxy_dir_free(struct dproxy_dir *d)
{
    struct dproxy_chunk *c;

    while ((c = TAILQ_FIRST(&d->chunks)) != NULL) {
        TAILQ_REMOVE(&d->chunks, c, link);
        free(c);
    }
    if (d->timer != NULL) {
        event_free(d->timer);
    }
    if (d->held != NULL) {
        evbuffer_free(d->held);
    }
}

/* Close both sides and free the pair; what is still held is dropped. */
static void
dproxy_close(struct dproxy_pair *p)
{
    dproxy_dir_free(&p->up);
    dproxy_dir_free(&p->down);
    if (p->client != NULL) {
        bufferevent_free(p->client);
    }
    if (p->server != NULL) {
        bufferevent_free(p->server);
    }
    free(p);
}

/* Arm d's timer for its oldest chunk. */
static void
dproxy_arm(struct dproxy_dir *d, int64_t now_us)
{
    struct dproxy_chunk *c = TAILQ_FIRST(&d->chunks);
    int64_t wait_us;
    struct timeval tv;

    if (c == NULL) {
        return;
    }
    wait_us = c->due_us > now_us ? c->due_us - now_us : 0;
    tv.tv_sec = (time_t)(wait_us / 1000000);
    tv.tv_usec = (suseconds_t)(wait_us % 1000000);
    evtimer_add(d->timer, &tv);
}

/* Hand every chunk that is due to the other side. */
static void
dproxy_deliver(struct dproxy_dir *d)
{
    int64_t now = dproxy_now_us();
    struct dproxy_chunk *c;

    while ((c = TAILQ_FIRST(&d->chunks)) != NULL && c->due_us <= now) {
        evbuffer_remove_buffer(d->held, bufferevent_get_output(d->to), c->len);
        TAILQ_REMOVE(&d->chunks, c, link);
        free(c);
    }
    dproxy_arm(d, now);
}

static void
dproxy_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    dproxy_deliver(arg);
}

/*
 * -s: whether the client of p has sent SUBSCRIBE, in the len bytes at
 * the front of in or across them and the bytes read before (p->tail).
 */
static bool
dproxy_sees_subscribe(struct dproxy_pair *p, struct evbuffer *in, size_t len)
{
    static const char word[] = DPROXY_SUBSCRIBE;
    char buf[2 * DPROXY_TAIL];
    size_t keep = p->tail_len, take = len < DPROXY_TAIL ? len : DPROXY_TAIL, n, drop;
    struct evbuffer_ptr from;

    if (evbuffer_search(in, word, sizeof(word) - 1, NULL).pos >= 0) {
        return true;
    }
    memcpy(buf, p->tail, keep);
    evbuffer_copyout(in, buf + keep, take);
    if (memmem(buf, keep + take, word, sizeof(word) - 1) != NULL) {
        return true;
    }
    /* The new tail: the last DPROXY_TAIL bytes the client sent. */
    if (len >= DPROXY_TAIL) {
        evbuffer_ptr_set(in, &from, len - DPROXY_TAIL, EVBUFFER_PTR_SET);
        evbuffer_copyout_from(in, &from, p->tail, DPROXY_TAIL);
        p->tail_len = DPROXY_TAIL;
    } else {
        n = keep + len;     /* buf holds the old tail and all of this read */
        drop = n > DPROXY_TAIL ? n - DPROXY_TAIL : 0;
        memcpy(p->tail, buf + drop, n - drop);
        p->tail_len = n - drop;
    }
    return false;
}

/* Bytes arrived on d->from: one chunk, due after the previous one. */
static void
dproxy_read_cb(struct bufferevent *bev, void *arg)
{
    struct dproxy_pair *p = arg;
    struct dproxy_dir *d = bev == p->client ? &p->up : &p->down;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len = evbuffer_get_length(in);
    struct dproxy_chunk *c;
    int64_t now = dproxy_now_us(), due;

    if (len == 0) {
        return;
    }
    if (dproxy.subscribers_only && d == &p->up && !p->subscriber) {
        p->subscriber = dproxy_sees_subscribe(p, in, len);
    }
    c = malloc(sizeof(*c));
    if (c == NULL || evbuffer_add_buffer(d->held, in) != 0) {
        free(c);
        dproxy_close(p);
        return;
    }
    due = now + (dproxy.on && (!dproxy.subscribers_only || p->subscriber)
                 ? dproxy_delay_us(&d->rng) : 0);
    if (due < d->last_due_us) {
        due = d->last_due_us;
    }
    d->last_due_us = due;
    c->len = len;
    c->due_us = due;
    TAILQ_INSERT_TAIL(&d->chunks, c, link);
    if (TAILQ_FIRST(&d->chunks) == c) {
        if (due <= now) {
            dproxy_deliver(d);
        } else {
            dproxy_arm(d, now);
        }
    }
}

/* End of stream or an error on either side: close the pair. */
static void
dproxy_event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        dproxy_close(arg);
    }
}

static int
dproxy_dir_init(struct dproxy_pair *p, struct dproxy_dir *d, struct bufferevent *from,
                struct bufferevent *to)
{
    d->pair = p;
    d->from = from;
    d->to = to;
    TAILQ_INIT(&d->chunks);
    d->rng = dproxy_seed();
    d->held = evbuffer_new();
    d->timer = evtimer_new(dproxy.base, dproxy_timer_cb, d);
    return d->held != NULL && d->timer != NULL ? 0 : -1;
}

/* A new connection on -l: connect to -t and pair them. */
static void
dproxy_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                 void *arg)
{
    struct dproxy_pair *p = calloc(1, sizeof(*p));
    int one = 1, sfd;

    (void)l;
    (void)sa;
    (void)len;
    (void)arg;
    if (p == NULL) {
        evutil_closesocket(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p->client = bufferevent_socket_new(dproxy.base, fd, BEV_OPT_CLOSE_ON_FREE);
    sfd = socket(dproxy.target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sfd >= 0) {
        setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        p->server = bufferevent_socket_new(dproxy.base, sfd, BEV_OPT_CLOSE_ON_FREE);
        if (p->server == NULL) {
            evutil_closesocket(sfd);
        }
    }
    if (p->client == NULL || p->server == NULL
        || dproxy_dir_init(p, &p->up, p->client, p->server) != 0
        || dproxy_dir_init(p, &p->down, p->server, p->client) != 0
        || bufferevent_socket_connect(p->server, (struct sockaddr *)&dproxy.target,
                                      dproxy.target_len) != 0) {
        if (p->client == NULL) {
            evutil_closesocket(fd);
        }
        dproxy_close(p);
        return;
    }
    dproxy.pairs++;
    bufferevent_setcb(p->client, dproxy_read_cb, NULL, dproxy_event_cb, p);
    bufferevent_setcb(p->server, dproxy_read_cb, NULL, dproxy_event_cb, p);
    bufferevent_enable(p->client, EV_READ | EV_WRITE);
    bufferevent_enable(p->server, EV_READ | EV_WRITE);
}

/* ---- signals, main ---- */

static void
dproxy_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        dproxy.on = sig == SIGUSR1;
        printf("delay-proxy %s: delay %s (%ld-%ld ms), %lu connections so far\n",
               dproxy.listen_spec, dproxy.on ? "on" : "off", dproxy.min_ms, dproxy.max_ms,
               dproxy.pairs);
        return;
    }
    event_base_loopbreak(dproxy.base);
}

/* "MIN-MAX" into the bounds, or usage. */
static void
dproxy_parse_delay(const char *s)
{
    char *end;

    errno = 0;
    dproxy.min_ms = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '-' || dproxy.min_ms < 0) {
        dproxy_usage();
    }
    s = end + 1;
    dproxy.max_ms = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || dproxy.max_ms < dproxy.min_ms) {
        dproxy_usage();
    }
}

int
main(int argc, char **argv)
{
    static const int sigs[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGINT };
    struct sockaddr_storage listen_sa;
    int listen_len = sizeof(listen_sa), opt;
    struct evconnlistener *l;
    struct event *ev[4];
    size_t i;

    dproxy.target_len = sizeof(dproxy.target);
    dproxy.min_ms = -1;
    while ((opt = getopt(argc, argv, "l:t:d:os")) != -1) {
        switch (opt) {
        case 'l':
            snprintf(dproxy.listen_spec, sizeof(dproxy.listen_spec), "%s", optarg);
            break;
        case 't':
            snprintf(dproxy.target_spec, sizeof(dproxy.target_spec), "%s", optarg);
            break;
        case 'd':
            dproxy_parse_delay(optarg);
            break;
        case 'o':
            dproxy.on = true;
            break;
        case 's':
            dproxy.subscribers_only = true;
            break;
        default:
            dproxy_usage();
        }
    }
    memset(&listen_sa, 0, sizeof(listen_sa));
    if (optind != argc || dproxy.min_ms < 0
        || evutil_parse_sockaddr_port(dproxy.listen_spec, (struct sockaddr *)&listen_sa,
                                      &listen_len) != 0
        || evutil_parse_sockaddr_port(dproxy.target_spec, (struct sockaddr *)&dproxy.target,
                                      &dproxy.target_len) != 0) {
        dproxy_usage();
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    dproxy.rng = ((uint64_t)dproxy_now_us() * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)getpid();
    dproxy.rng |= 1;
    dproxy.base = event_base_new();
    if (dproxy.base == NULL) {
        fprintf(stderr, "delay-proxy: no event base\n");
        return DPROXY_EXIT_SETUP;
    }
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        ev[i] = evsignal_new(dproxy.base, sigs[i], dproxy_signal_cb, NULL);
        if (ev[i] == NULL || evsignal_add(ev[i], NULL) != 0) {
            fprintf(stderr, "delay-proxy: cannot watch signal %d\n", sigs[i]);
            return DPROXY_EXIT_SETUP;
        }
    }
    l = evconnlistener_new_bind(dproxy.base, dproxy_accept_cb, NULL,
                                LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                -1, (struct sockaddr *)&listen_sa, listen_len);
    if (l == NULL) {
        fprintf(stderr, "delay-proxy: cannot listen on %s: %s\n", dproxy.listen_spec,
                strerror(errno));
        return DPROXY_EXIT_SETUP;
    }
    printf("delay-proxy %s: listening, to %s, delay %ld-%ld ms%s, %s\n", dproxy.listen_spec,
           dproxy.target_spec, dproxy.min_ms, dproxy.max_ms,
           dproxy.subscribers_only ? " on subscriber connections" : "",
           dproxy.on ? "on" : "off");
    event_base_dispatch(dproxy.base);
    printf("delay-proxy %s: stopped after %lu connections\n", dproxy.listen_spec,
           dproxy.pairs);
    evconnlistener_free(l);
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        event_free(ev[i]);
    }
    event_base_free(dproxy.base);
    return 0;
}
