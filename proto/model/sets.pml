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
 *   FOUR        without LIVE: four clients (the single A of daemon 1 left
 *               out, as in the liveness run), to keep a run short
 *   ALL_CLIENTS with LIVE or FOUR: all five clients (the run takes longer)
 *   OUTAGE      master 2 may stop for good, at any moment (or never)
 *   CLAIM_GIVEN the wrong claims: a master scans a set's names, and claims
 *               those before the refusing one, in the order the client
 *               wrote them, not in the canonical order
 *   CLAIM_AFTER the wrong claims: a refused set claims every free name of
 *               it, those after the refusing one too
 *   TURNS       with LIVE: other clients, the set {A,B} of daemon 0 and
 *               single LOCKs of A (daemon 1) and B (daemon 2) that lock
 *               again and again, for ever, and the LTL claim that the set
 *               is granted; a first try waits for the waiters woken
 *               before it
 *   NO_CLAIMS   the protocol without claims (with TURNS: the set starves)
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
/* Clients: five, or four in the liveness run and with FOUR (without
 * ALL_CLIENTS: the single A of daemon 1 left out, to keep the run short). */
#if (defined(LIVE) || defined(FOUR) || defined(TURNS)) && !defined(ALL_CLIENTS)
#define NC      4
#else
#define NC      5
#endif
#define QL      NC              /* slots of one local queue */

/* Names as bits of a mask, in canonical (byte) order. */
#define A 1
#define B 2
#define C 4

/* A name's key on a master: 0 free, else the holder's token, or a waiting
 * set's claim.  A client's token is its number plus one (see the README: a
 * link delivers in order, so a late delete never meets a later try of the
 * same client); its set's claim ("claim <set id>") is its number plus 9. */
byte key[M * NN];
#define KEY(m, n)       key[(m) * NN + (n)]
#define CLAIM(c)        ((c) + 9)

/* What a daemon has in flight for each client, as masks over the masters:
 * acq, a try not yet served by that master; rel, a delete not yet served;
 * unc, an unclaim (the set's claims dropped) not yet served; yes, the
 * masters that granted the current try. */
byte acq[NC];
byte rel[NC];
byte unc[NC];
byte yes[NC];
byte want[NC];                  /* the names of the try (or release) sent */
byte held[NC];                  /* the names granted on a quorum */
byte blocker[NC];               /* what a sleeping waiter waits to go */
#ifdef TURNS
/* The turns model (with LIVE): once calm, a LOCK's first try waits for
 * the waiters that are awake and tried before (woken by a release, they
 * retry at once, ahead of a request that comes after), and for the fresh
 * ones of lower number (one order among first tries). */
byte wset[NC];                  /* the names a client waits for */
byte napping;                   /* the clients between a refused try and its retry */
byte fresh;                     /* the clients whose LOCK has not tried yet */
#define AWAKE(c) (BIT(napping, c) && WOKEN(wset[c], c) && RETRY(c))
#define BEFORE(o, c) ((o) != (c) && AWAKE(o) && (!BIT(fresh, o) || (o) < (c)))
#define FIRST(c) (!calm || !BIT(fresh, c) || !(BEFORE(0, c) || BEFORE(1, c) || BEFORE(2, c)))
#define NAP(c)  napping = napping | (1 << (c))
#define UNNAP(c)  napping = napping & (255 - (1 << (c))); fresh = fresh & (255 - (1 << (c)))
#define NEW(c)  fresh = fresh | (1 << (c))
#else
#define FIRST(c)   1
#define NAP(c)  skip
#define UNNAP(c)  skip
#define NEW(c)  skip
#endif
byte ended;                     /* clients that took and released all */

/* The masters that are down, as a mask: master 2 may stop for good (with
 * OUTAGE).  Its keys stay as they were; the daemons' links to it drop
 * what they had in flight (a try that found its deadline: not granted)
 * and drop what is sent to it from then on. */
byte down;

/* Each daemon's FIFO queue of each name: client number plus one, head in
 * slot 0. */
byte q[ND * NN * QL];
#define QI(d, n, s)     q[((d) * NN + (n)) * QL + (s)]

#define BIT(x, i)       (((x) >> (i)) & 1)
#define COUNT(x)        (BIT(x, 0) + BIT(x, 1) + BIT(x, 2))

/* On master m, name n is free for client c (unset, c's own token, or its
 * own claim: a claim refuses everyone else, as a holder does). */
#define FREE_FOR(m, n, c) \
    (KEY(m, n) == 0 || KEY(m, n) == (c) + 1 || KEY(m, n) == CLAIM(c))
#define IN(w, n)            BIT(w, n)
/* On master m, every name of w is free for c. */
#define ALL_FREE(m, w, c) \
    ((!IN(w, 0) || FREE_FOR(m, 0, c)) && (!IN(w, 1) || FREE_FOR(m, 1, c)) \
     && (!IN(w, 2) || FREE_FOR(m, 2, c)))
/* What refuses w for c on master m: the key of the first name of w (in the
 * canonical order) that is not free for c, a token or a claim; 0 when
 * every name is free for c. */
#define REFUSER(m, w, c) \
    ((IN(w, 0) && !FREE_FOR(m, 0, c)) -> KEY(m, 0) : \
     ((IN(w, 1) && !FREE_FOR(m, 1, c)) -> KEY(m, 1) : \
      ((IN(w, 2) && !FREE_FOR(m, 2, c)) -> KEY(m, 2) : 0)))
#define UP_REFUSED_BY(m, v, w, c) \
    ((!BIT(down, m) && REFUSER(m, w, c) == (v)) -> 1 : 0)
/* The token or claim v refuses w for c on a quorum of the masters up. */
#define REFUSED_BY(v, w, c) \
    (UP_REFUSED_BY(0, v, w, c) + UP_REFUSED_BY(1, v, w, c) \
     + UP_REFUSED_BY(2, v, w, c) >= QUORUM)
/* What refuses w for c on master m refuses it on a quorum. */
#define REFUSES(m, w, c) \
    (!BIT(down, m) && REFUSER(m, w, c) != 0 && REFUSED_BY(REFUSER(m, w, c), w, c))
/* The one holder (a token or a claim) that refuses w for c on a quorum, or
 * 0 when there is none (a split vote, or free on a quorum). */
#define BLOCKER(w, c) \
    (REFUSES(0, w, c) -> REFUSER(0, w, c) : \
     (REFUSES(1, w, c) -> REFUSER(1, w, c) : \
      (REFUSES(2, w, c) -> REFUSER(2, w, c) : 0)))
/* What wakes a refused waiter, as the daemon's retry rule (PROTOCOL.md,
 * section 6): when one holder or claim refused it on a quorum (its
 * blocker), that one's going (its release or unclaim is announced, or its
 * ttl runs out), even when another refuses a later name; otherwise (a
 * split vote) a retry after a random delay, at once here. */
#define WOKEN(w, c) \
    (blocker[c] == 0 || !REFUSED_BY(blocker[c], w, c))

/* Client c is at the head of every queue of its daemon d named in w. */
#define HEAD_OF(d, n, w, c) (!IN(w, n) || QI(d, n, 0) == (c) + 1)
#define AT_HEAD(d, w, c) \
    (HEAD_OF(d, 0, w, c) && HEAD_OF(d, 1, w, c) && HEAD_OF(d, 2, w, c))

/* The masters where a key holds c's claim, as a mask. */
#define HAS_CLAIM(m, c) \
    ((KEY(m, 0) == CLAIM(c) || KEY(m, 1) == CLAIM(c) || KEY(m, 2) == CLAIM(c)) -> (1 << (m)) : 0)
#define CLAIMED_ON(c)   (HAS_CLAIM(0, c) | HAS_CLAIM(1, c) | HAS_CLAIM(2, c))

#ifdef LIVE
/* No unclaim is in flight. */
#if NC > 4
#define NO_UNCLAIM  ((unc[0] | unc[1] | unc[2] | unc[3] | unc[4]) == 0)
#else
#define NO_UNCLAIM  ((unc[0] | unc[1] | unc[2] | unc[3]) == 0)
#endif
/* The fairness random retry delays give: from some moment on (the
 * process separate has run), a try starts only while no other try is in
 * flight, nor the unclaim of a set granted before.  Weak fairness (pan
 * -f) makes that moment come. */
bool calm;
byte inflight;                  /* tries sent and not yet drained */
/* Once calm: the client that started the last try, as a mask, until
 * something else changes the masters' keys (a grant, a release, an
 * unclaim, the outage).  When its try is refused, a retry would meet the
 * keys its try left and end the same way (the try was alone, and from the
 * keys it leaves, the same masters grant and the same names refuse); the
 * random delays let the others try first, which the model says by keeping
 * it asleep until something changes.  (Weak fairness alone lets a client
 * that retries in vain, again and again, keep another that is awake from
 * ever trying.) */
byte same;
#define CHANGED(c)  if :: calm -> same = (c) :: else fi

#ifndef UNFAIR
active proctype separate()
{
    calm = true
}
#endif

#ifdef TURNS
ltl the_set_ends { <> (ended == 1) }
#else
ltl every_client_ends { <> (ended == NC) }
#endif
#define RETRY(c)    (!calm || !BIT(same, c))
#else
#define RETRY(c)    1
#define CHANGED(c)  skip
#endif

#ifdef OUTAGE
#define DROP(c) \
    acq[c] = acq[c] & (ALLM - 4); rel[c] = rel[c] & (ALLM - 4); \
    unc[c] = unc[c] & (ALLM - 4)
active proctype outage()
{
    if
    :: d_step {
        down = 4;
        CHANGED(0);
        DROP(0); DROP(1); DROP(2); DROP(3);
#if NC > 4
        DROP(4)
#endif
    }
    :: skip                     /* or never */
    fi
}
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
/* acquire_set: every name free (or ours, or claimed by this set) on this
 * master, so every name set, over the set's claims; otherwise no name is
 * set, and the set claims the names before the first one that refused it,
 * in the canonical order (CLAIM_BEFORE), that are free here.  (A
 * single-name request claims nothing: no name comes before its one.) */
#define ACQUIRE_SET(m, c, ok) \
    ok = ALL_FREE(m, want[c], c); \
    if \
    :: ok -> TAKE(m, 0, c); TAKE(m, 1, c); TAKE(m, 2, c) \
    :: else -> CLAIM_BEFORE(m, c) \
    fi
#endif

/* Claim name n for c on master m when it is free there. */
#define CLAIM_FREE(m, n, c) \
    if :: KEY(m, n) == 0 -> KEY(m, n) = CLAIM(c) :: else fi
#ifdef CLAIM_GIVEN
/* The wrong claims: in the order the client wrote the names.  Client 2
 * wrote B A: refused at A with B free, it claims B (refused at B, it
 * claims nothing); every other client wrote its names in the canonical
 * order. */
#define CLAIM_BEFORE(m, c) \
    if \
    :: (c) == 2 -> if :: FREE_FOR(m, 1, c) -> CLAIM_FREE(m, 1, c) :: else fi \
    :: else -> CLAIM_CANONICAL(m, c) \
    fi
#elif defined(CLAIM_AFTER)
/* The wrong claims: every name of the set that is free here, after the
 * refusing one as well as before it. */
#define CLAIM_BEFORE(m, c) \
    if :: IN(want[c], 0) -> CLAIM_FREE(m, 0, c) :: else fi; \
    if :: IN(want[c], 1) -> CLAIM_FREE(m, 1, c) :: else fi; \
    if :: IN(want[c], 2) -> CLAIM_FREE(m, 2, c) :: else fi
#elif defined(NO_CLAIMS)
#define CLAIM_BEFORE(m, c)  skip
#else
#define CLAIM_BEFORE(m, c)  CLAIM_CANONICAL(m, c)
#endif
/* The names of the set before the first that refused it, in the
 * canonical order, which are free: A when B or C refused, B when C did. */
#define CLAIM_CANONICAL(m, c) \
    if \
    :: IN(want[c], 0) && FREE_FOR(m, 0, c) -> \
        CLAIM_FREE(m, 0, c); \
        if \
        :: IN(want[c], 1) && FREE_FOR(m, 1, c) -> CLAIM_FREE(m, 1, c) \
        :: else \
        fi \
    :: !IN(want[c], 0) && IN(want[c], 1) && FREE_FOR(m, 1, c) -> CLAIM_FREE(m, 1, c) \
    :: else \
    fi

/* Unclaim: delete name n on master m where it still holds c's claim. */
#define UNCLAIM(m, n, c) \
    if :: KEY(m, n) == CLAIM(c) -> KEY(m, n) = 0 :: else fi

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

/* Serve client c's request on master m: its try (after an unclaim sent
 * before it, the link being in order), or (after the try) its delete, or
 * its unclaim. */
#define SERVE(c) \
    :: d_step { \
        BIT(acq[c], m) && !BIT(unc[c], m) -> \
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
    } \
    :: d_step { \
        BIT(unc[c], m) -> \
        UNCLAIM(m, 0, c); UNCLAIM(m, 1, c); UNCLAIM(m, 2, c); \
        unc[c] = unc[c] & (ALLM - (1 << m)); \
        CHANGED(0) \
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
    d_step { ENQ(d, 0, w, c); ENQ(d, 1, w, c); ENQ(d, 2, w, c); NAP(c); NEW(c) };
    AT_HEAD(d, w, c);
    do
    :: atomic {
#ifdef LIVE
        (!calm || (inflight == 0 && NO_UNCLAIM && FIRST(c))) && acq[c] == 0 && rel[c] == 0 ->
        inflight++;
        CHANGED(1 << (c));
#else
        acq[c] == 0 && rel[c] == 0 ->
#endif
        want[c] = w; acq[c] = ALLM - down;
        UNNAP(c)
    };
        /* every master that is up answers (a down one's link dropped
         * the try: the deadline); then decide */
        if
        :: d_step {
            acq[c] == 0 && COUNT(yes[c]) >= QUORUM ->
            EXCLUSIVE(w, c);
            held[c] = held[c] | w;
            yes[c] = 0;
            /* granted: the set's claims go (a master that refused it may
             * keep some); sent where there are some, as the daemon sends
             * it when a master answered that it claimed */
            unc[c] = CLAIMED_ON(c) & (ALLM - down);
            CHANGED(0)
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
            /* the deletes answered, the try is over; sleep until woken
             * (its claims stay) */
            d_step {
                rel[c] == 0 -> want[c] = 0;
                blocker[c] = BLOCKER(w, c);
                NAP(c)
#ifdef LIVE
                ; inflight--
#endif
            };
            WOKEN(w, c) && RETRY(c);
            blocker[c] = 0
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
#ifdef TURNS
        wset[c] = first | second;
#endif
        lock(d, first | second, c);
#endif
        /* hold, then release: delete on every master, leave the queues
         * (atomic, not d_step: lock() ends with a jump here) */
        atomic {
            unc[c] == 0 ->      /* the link sent the unclaim first */
            want[c] = held[c];
            RELEASE_ALL(c);
            CHANGED(0);
            DEQ(d, 0, held[c], c); DEQ(d, 1, held[c], c);
            DEQ(d, 2, held[c], c);
            held[c] = 0
        };
#ifdef TURNS
        if :: c == 0 -> round++ :: else fi   /* the singles lock for ever */
#else
        round++
#endif
    :: else -> break
    od;
    ended++
}

init
{
    atomic {
        run master(0); run master(1); run master(2);
#ifdef TURNS
        run client(0, 0, A, B);
        run client(1, 1, A, 0);
        run client(2, 2, B, 0)
#else
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
#endif
    }
}
