/*
 * The set protocol of LOCK n1 .. nk (proto/PROTOCOL.md, section 9, "The
 * model"), as a Promela model for SPIN.  proto/model/README.md says what is
 * modelled, what is left out, and how to run it; `make check-model` runs
 * every check below and every mutation.
 *
 * Switches (spin -DNAME):
 *   LIVE        the liveness model: the retry-delay fairness (process
 *               separate) and the LTL claim that every client ends
 *   ONE_BY_ONE  the wrong protocol: a set takes its names one Redlock
 *               round at a time, in the order the client wrote them,
 *               keeping the names it has while it waits for the next
 *   PARTIAL     the wrong script: a master sets each name of the set that
 *               is free and answers granted when it set any (a partial set)
 *   QUORUM=1    the wrong quorum
 *   UNFAIR      with LIVE: the retry delays never separate the tries
 *   ALL_CLIENTS with LIVE: all five clients (the run takes longer)
 *   OUTAGE      master 2 may stop for good, at any moment (or never)
 */

#define M       3               /* masters */
#define NN      3               /* names: A, B, C */
#define ALLM    7               /* every master, as a mask */
#ifndef QUORUM
#define QUORUM  2               /* Redlock's majority of M */
#endif
#ifndef DEMAND
#define DEMAND  1               /* how many times each client locks */
#endif
#define ND      3               /* daemons */
/* Clients: five, or four in the liveness run (LIVE without ALL_CLIENTS
 * leaves out the single A of daemon 1, to keep the run short). */
#if defined(LIVE) && !defined(ALL_CLIENTS)
#define NC      4
#else
#define NC      5
#endif
#define QL      NC              /* slots of one local queue */

/* Names as bits of a mask, in canonical (byte) order. */
#define A 1
#define B 2
#define C 4

/* A name's key on a master: 0 free, else the holder's token.  A client's
 * token is its number plus one (see the README: a link delivers in order,
 * so a late delete never meets a later try of the same client). */
byte key[M * NN];
#define KEY(m, n)       key[(m) * NN + (n)]

/* What a daemon has in flight for each client, as masks over the masters:
 * acq, a try not yet served by that master; rel, a delete not yet served;
 * yes, the masters that granted the current try. */
byte acq[NC];
byte rel[NC];
byte yes[NC];
byte want[NC];                  /* the names of the try (or release) sent */
byte held[NC];                  /* the names granted on a quorum */
byte ended;                     /* clients that took and released all */

/* The masters that are down, as a mask: master 2 may stop for good (with
 * OUTAGE).  Its keys stay as they were; the daemons' links to it drop
 * what they had in flight (a try that found its deadline: not granted)
 * and drop what is sent to it from then on. */
byte down;

#ifdef OUTAGE
#define DROP(c)     acq[c] = acq[c] & (ALLM - 4); rel[c] = rel[c] & (ALLM - 4)
active proctype outage()
{
    if
    :: d_step {
        down = 4;
        DROP(0); DROP(1); DROP(2); DROP(3);
#if NC > 4
        DROP(4)
#endif
    }
    :: skip                     /* or never */
    fi
}
#endif

/* Each daemon's FIFO queue of each name: client number plus one, head in
 * slot 0. */
byte q[ND * NN * QL];
#define QI(d, n, s)     q[((d) * NN + (n)) * QL + (s)]

#define BIT(x, i)       (((x) >> (i)) & 1)
#define COUNT(x)        (BIT(x, 0) + BIT(x, 1) + BIT(x, 2))

/* On master m, name n is free for client c (unset, or c's own token). */
#define FREE_FOR(m, n, c)   (KEY(m, n) == 0 || KEY(m, n) == (c) + 1)
#define IN(w, n)            BIT(w, n)
/* On master m, every name of w is free for c. */
#define ALL_FREE(m, w, c) \
    ((!IN(w, 0) || FREE_FOR(m, 0, c)) && (!IN(w, 1) || FREE_FOR(m, 1, c)) \
     && (!IN(w, 2) || FREE_FOR(m, 2, c)))
/* Every name of w is free for c on a quorum of the masters that are up:
 * what wakes a refused waiter (the release announced on a name's channel,
 * or its retry timer). */
#define UP_FREE(m, w, c)    ((!BIT(down, m) && ALL_FREE(m, w, c)) -> 1 : 0)
#define FREE_ON_QUORUM(w, c) \
    (UP_FREE(0, w, c) + UP_FREE(1, w, c) + UP_FREE(2, w, c) >= QUORUM)

/* Client c is at the head of every queue of its daemon d named in w. */
#define HEAD_OF(d, n, w, c) (!IN(w, n) || QI(d, n, 0) == (c) + 1)
#define AT_HEAD(d, w, c) \
    (HEAD_OF(d, 0, w, c) && HEAD_OF(d, 1, w, c) && HEAD_OF(d, 2, w, c))

#ifdef LIVE
/* The fairness random retry delays give: from some moment on (the
 * process separate has run), a try starts only while no other try is in
 * flight.  Weak fairness (pan -f) makes that moment come. */
bool calm;
byte inflight;                  /* tries sent and not yet drained */

#ifndef UNFAIR
active proctype separate()
{
    calm = true
}
#endif

ltl every_client_ends { <> (ended == NC) }
#endif

/* ---- A master: one script call is one atomic step on its own keys. ---- */

/* Take name n for c on master m, as the script's SET of one key. */
#define TAKE(m, n, c)   if :: IN(want[c], n) -> KEY(m, n) = (c) + 1 :: else fi

#ifdef PARTIAL
/* The wrong script: SET NX on each name of the set, and a grant when any
 * of them was set: a partial set granted. */
#define STEP(m, n, c, ok) \
    if \
    :: IN(want[c], n) && FREE_FOR(m, n, c) -> KEY(m, n) = (c) + 1; ok = true \
    :: else \
    fi
#define ACQUIRE_SET(m, c, ok) \
    ok = false; STEP(m, 0, c, ok); STEP(m, 1, c, ok); STEP(m, 2, c, ok)
#else
/* acquire_set: every name free (or ours) on this master, so every name
 * set; otherwise nothing changes. */
#define ACQUIRE_SET(m, c, ok) \
    ok = ALL_FREE(m, want[c], c); \
    if \
    :: ok -> TAKE(m, 0, c); TAKE(m, 1, c); TAKE(m, 2, c) \
    :: else \
    fi
#endif

/* Compare-and-delete of each name of want[c] on master m, when it is up. */
#define DELETE(m, n, c) \
    if \
    :: IN(want[c], n) && KEY(m, n) == (c) + 1 && !BIT(down, m) -> KEY(m, n) = 0 \
    :: else \
    fi

/* The deletes of a hold's release on every master in one step (see the
 * README: a late delete is the same to others as a longer hold there). */
#define RELEASE_ALL(c) \
    DELETE(0, 0, c); DELETE(0, 1, c); DELETE(0, 2, c); \
    DELETE(1, 0, c); DELETE(1, 1, c); DELETE(1, 2, c); \
    DELETE(2, 0, c); DELETE(2, 1, c); DELETE(2, 2, c); \
    want[c] = 0

/* Serve client c's request on master m: its try, or (after the try, the
 * link being in order) its delete. */
#define SERVE(c) \
    :: d_step { \
        BIT(acq[c], m) -> \
        ACQUIRE_SET(m, c, ok); \
        if \
        :: ok -> yes[c] = yes[c] | (1 << m) \
        :: else \
        fi; \
        acq[c] = acq[c] & (ALLM - (1 << m)); \
        ok = false \
    } \
    :: d_step { \
        BIT(rel[c], m) && !BIT(acq[c], m) -> \
        DELETE(m, 0, c); DELETE(m, 1, c); DELETE(m, 2, c); \
        rel[c] = rel[c] & (ALLM - (1 << m)) \
    }

proctype master(byte m)
{
    bool ok;
end:
    do
    SERVE(0)
    SERVE(1)
    SERVE(2)
    SERVE(3)
#if NC > 4
    SERVE(4)
#endif
    od
}

/* ---- A daemon's handling of one client's LOCK. ---- */

/* Queue c at the tail of each queue of its daemon named in w, in one step
 * (the daemon is single-threaded). */
#define ENQ(d, n, w, c) \
    if \
    :: IN(w, n) -> \
        s = 0; \
        do \
        :: QI(d, n, s) != 0 -> s++ \
        :: else -> break \
        od; \
        QI(d, n, s) = (c) + 1; \
        s = 0 \
    :: else \
    fi

/* Take c off the head of each queue of its daemon named in w. */
#define DEQ(d, n, w, c) \
    if \
    :: IN(w, n) -> \
        assert(QI(d, n, 0) == (c) + 1); \
        s = 0; \
        do \
        :: s < QL - 1 -> QI(d, n, s) = QI(d, n, s + 1); s++ \
        :: else -> break \
        od; \
        QI(d, n, QL - 1) = 0; \
        s = 0 \
    :: else \
    fi

/* Nobody else holds a name of w: exclusion per name, checked at every
 * grant (the only step that can break it). */
#define NOT_HELD(o, w, c)   assert((o) == (c) || (held[o] & (w)) == 0)
#if NC > 4
#define NOT_HELD_4(w, c)    NOT_HELD(4, w, c)
#else
#define NOT_HELD_4(w, c)    skip
#endif
#define EXCLUSIVE(w, c) \
    NOT_HELD(0, w, c); NOT_HELD(1, w, c); NOT_HELD(2, w, c); NOT_HELD(3, w, c); \
    NOT_HELD_4(w, c)

/* Lock the names w for client c of daemon d: queue, wait to be the head
 * of each queue, then try on every master until a quorum grants. */
inline lock(d, w, c)
{
    d_step { ENQ(d, 0, w, c); ENQ(d, 1, w, c); ENQ(d, 2, w, c) };
    AT_HEAD(d, w, c);
    do
    :: atomic {
#ifdef LIVE
        (!calm || inflight == 0) && acq[c] == 0 && rel[c] == 0 ->
        inflight++;
#else
        acq[c] == 0 && rel[c] == 0 ->
#endif
        want[c] = w; acq[c] = ALLM - down
    };
        /* every master that is up answers (a down one's link dropped
         * the try: the deadline); then decide */
        if
        :: d_step {
            acq[c] == 0 && COUNT(yes[c]) >= QUORUM ->
            EXCLUSIVE(w, c);
            held[c] = held[c] | w;
            yes[c] = 0
#ifdef LIVE
            ; inflight--
#endif
        };
            break
        :: d_step {
            acq[c] == 0 && COUNT(yes[c]) < QUORUM ->
            /* delete where it was granted */
            rel[c] = yes[c] & (ALLM - down); yes[c] = 0
        };
            /* the deletes answered, the try is over; sleep until the
             * names are free */
            d_step {
                rel[c] == 0 -> want[c] = 0
#ifdef LIVE
                ; inflight--
#endif
            };
            FREE_ON_QUORUM(w, c)
        fi
    od
}

proctype client(byte c; byte d; byte first; byte second)
{
    byte s;                     /* scratch, zero between steps */
    byte round;
    do
    :: round < DEMAND ->
#ifdef ONE_BY_ONE
        lock(d, first, c);
        if
        :: second != 0 -> lock(d, second, c)
        :: else
        fi;
#else
        lock(d, first | second, c);
#endif
        /* hold, then release: delete on every master, leave the queues
         * (atomic, not d_step: lock() ends with a jump here) */
        atomic {
            want[c] = held[c];
            RELEASE_ALL(c);
            DEQ(d, 0, held[c], c); DEQ(d, 1, held[c], c);
            DEQ(d, 2, held[c], c);
            held[c] = 0
        };
        round++
    :: else -> break
    od;
    ended++
}

init
{
    atomic {
        run master(0); run master(1); run master(2);
        /* daemon 0: the set {A,B}, written A B, and a single B behind it */
        run client(0, 0, A, B);
        run client(1, 0, B, 0);
        /* daemon 1: the set {A,B}, written B A */
        run client(2, 1, B, A);
        /* daemon 2: the set {B,C} */
        run client(3, 2, B, C);
#if NC > 4
        /* daemon 1: a single A behind the set */
        run client(4, 1, A, 0)
#endif
    }
}
