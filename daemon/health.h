/*
 * health.h: what each master says about itself, and whether its
 * answers count.
 *
 * The link module (daemon/master.h) asks every new command link the
 * questions of this module (INFO server, INFO persistence, CONFIG GET
 * appendfsync, INFO memory) in its handshake, hands each answer over
 * here, and tells this module when a command link comes up or goes
 * down.  From those this module works out:
 *
 *   - restarts (a new run_id) and the restart quarantine: with
 *     lock.restart_quarantine, a master up for less than the time set
 *     with health_set_quarantine_ms() counts toward no quorum until
 *     then, unless it persists every write before answering
 *     (aof_enabled:1 and appendfsync always).  The delayed restart of
 *     the Redis distributed-locks page, "Performance, crash recovery
 *     and fsync";
 *   - the clock quarantine: with lock.clock_check, every reading of a
 *     master's TIME (a script's answer, or the clock keeper's TIME) is
 *     compared with the previous one (daemon/drift.h); a step keeps the
 *     master out of quorums for the same time;
 *   - duplicates: two config entries whose command links are up and
 *     report one run_id are one server; the one listed first counts;
 *   - eviction: a maxmemory with an evicting policy may drop lock keys
 *     (a warning at every connect).
 *
 * Masters are named by their index in the config (0 <= i < nmasters).
 * This module includes hiredis only to read the answers it is handed;
 * it sends nothing and knows nothing of the links.  Every time is
 * CLOCK_MONOTONIC microseconds (daemon/util.h, util_now_us) unless
 * said otherwise.
 */
#ifndef REDLOCKD_HEALTH_H
#define REDLOCKD_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct redisReply;

/* The questions a command link's handshake asks, in this order. */
enum health_ask {
    HEALTH_INFO_SERVER,         /* run_id, uptime: restarts, duplicates, quarantine */
    HEALTH_INFO_PERSISTENCE,    /* aof_enabled */
    HEALTH_APPENDFSYNC,         /* CONFIG GET appendfsync */
    HEALTH_INFO_MEMORY,         /* maxmemory and its policy */
    HEALTH_NASKS
};

#define HEALTH_ASK_WORDS    3   /* words in a question, at most */

/* What this module counts per master (copied into STATS by master_get_stats()). */
struct health_counts {
    uint64_t  restarts;         /* restarts seen (a new run_id on reconnect) */
    uint64_t  clock_steps;      /* steps of its clock seen (lock.clock_check) */
    uint64_t  clock_readings;   /* readings of its clock taken (daemon/drift.h): the
                                   TIME of every answer and of the keeper; all but
                                   the first after a start, restart or reload are
                                   compared with the one before */
    int       duplicate_of;     /* index of the master it is the same server as, or -1 */
    bool      evicting;         /* at its last connect: maxmemory set and a
                                   maxmemory-policy other than noeviction */
    long long maxmemory;        /* INFO memory maxmemory at the last connect,
                                   bytes; 0 when none or unknown */
};

/*
 * Prepare the state of ctx.conf's masters, with their timers on ctx.base
 * (daemon/ctx.h).  The settings (lock.restart_quarantine,
 * lock.clock_check, drift_factor, min_ttl_ms) are read from ctx.conf
 * when used.  Out of memory aborts (daemon/xmalloc.h).
 */
void health_start(void);

/*
 * After a reload (ctx.conf is the new settings, prev the old ones; the
 * same masters, in the same order): a lock.restart_quarantine or
 * lock.clock_check turned off ends those quarantines at once (logged);
 * a clock check turned on forgets old readings (daemon/drift.h).
 */
void health_apply(const struct conf *prev);

/*
 * How long a restarted master, or one whose clock stepped, stays out of
 * quorums, ms: the largest lock.max_ttl_ms applied since start plus its
 * drift allowance, computed by the caller (server.c).  Call before
 * health_start() and on every reload; it applies to quarantines that
 * begin from then on.
 */
void health_set_quarantine_ms(int64_t ms);

/* Free everything (the timers). */
void health_stop(void);

/*
 * The words of handshake question ask, into argv and lens (room for
 * HEALTH_ASK_WORDS; the words are constants).  Returns their count.
 */
size_t health_ask_argv(enum health_ask ask, const char **argv, size_t *lens);

/* Master i's command link is connecting: what its last one said is unread now. */
void health_connecting(size_t i);

/*
 * The answer to question ask on master i's new command link (error
 * replies included).  Returns 0, or -1 when the link must not come up
 * (a malformed INFO server, or one refused while the restart
 * quarantine needs it), with the reason in why (size bytes).
 */
int health_answer(size_t i, enum health_ask ask, const struct redisReply *reply, char *why,
                  size_t size);

/* Master i's command link came up (the handshake is complete): the quarantine
 * decision and the duplicates. */
void health_link_up(size_t i);

/* Master i's command link went down: its restart quarantine says nothing until
 * its next connect; a clock quarantine goes on (it is about the keys it holds). */
void health_link_down(size_t i);

/*
 * A script's answer with the master's clock in front (daemon/master_eval.c's
 * wrapper: {us, answer}), from a request sent at sent_us and read at
 * now: the clock is checked, and with lock.clock_check a step starts
 * the clock quarantine before the caller sees the answer, so that this
 * very answer is not counted.  Returns the body's answer (pointing into
 * reply, or a static nil), or NULL when reply is not a wrapped answer
 * (logged once per connection).
 */
const struct redisReply *health_clock_read(size_t i, const struct redisReply *reply,
                                           int64_t sent_us, int64_t now);

/* The answer to a TIME sent at sent_us and read at now ({seconds,
 * microseconds}); a malformed one is logged once per connection. */
void health_clock_time(size_t i, const struct redisReply *reply, int64_t sent_us,
                       int64_t now);

/* Master i's clock was read less than fresh_ms ago (the clock keeper asks). */
bool health_clock_fresh(size_t i, int64_t now, int64_t fresh_ms);

/* Restart quarantine of master i left at now, ms; 0 when none. */
int64_t health_quarantine_left_ms(size_t i, int64_t now);

/* Clock quarantine of master i left at now, ms; 0 when none.  It
 * outlasts a reconnect. */
int64_t health_clock_quarantine_left_ms(size_t i, int64_t now);

/* The longer of the two, ms; 0: master i's answers count. */
int64_t health_any_quarantine_left_ms(size_t i, int64_t now);

/* The index of the master that master i is the same server as, or -1.
 * Worked out again when a command link comes up or goes down; O(1). */
int health_duplicate_of(size_t i);

/* The INFO server run_id read at master i's last connect; "" before any. */
const char *health_run_id(size_t i);

/* Copy master i's counts into *c. */
void health_get_counts(size_t i, struct health_counts *c);

#endif /* REDLOCKD_HEALTH_H */
