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
 * module's hooks, on base with conf's settings (limits.*, lock.*,
 * auth.*); conf must outlive them or be replaced with
 * command_set_conf().  The host name for default labels is read here.
 */
void command_init(struct event_base *base, const struct conf *conf);

/* Use new settings from now on (reload): the sessions' too (session_set_conf). */
void command_set_conf(const struct conf *conf);

#endif /* REDLOCKD_COMMAND_H */
