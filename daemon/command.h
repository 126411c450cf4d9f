/*
 * command.h: the line protocol's verbs (proto/PROTOCOL.md), run for
 * each session.
 *
 * A session (daemon/session.h) reads and parses request lines and hands
 * each one here; this module runs it (LOCK, UNLOCK, STATUS, EXTEND,
 * WATCH, LIST, BREAK, AUTH, STATS, ...), keeps what each session needs
 * for that (its locks through daemon/lock.h, its watches through
 * daemon/watch.h, a LIST's place, its read budget, its default label),
 * and answers through the session's output calls: one reply line per
 * request, in order, and the pushed lines (! LOST, ! HELD, ! FREE).
 * It sits above daemon/session.c, which reaches it only through the
 * hooks it registers at command_init().
 */
#ifndef REDLOCKD_COMMAND_H
#define REDLOCKD_COMMAND_H

struct conf;
struct event_base;

/*
 * Start the sessions (daemon/session.h, session_init) with this
 * module's hooks.  The settings (limits.*, lock.*, auth.*) are read from
 * ctx.conf when used and timers run on ctx.base (daemon/ctx.h).  The
 * host name for default labels is read here.
 */
void command_init(void);

#endif /* REDLOCKD_COMMAND_H */
