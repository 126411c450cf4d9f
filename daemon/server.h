/*
 * server.h: the daemon's life: start-up order, the event loop, signals
 * and the graceful shutdown.
 */
#ifndef REDLOCKD_SERVER_H
#define REDLOCKD_SERVER_H

struct conf;

/*
 * Run the daemon with a checked configuration until SIGTERM or SIGINT.
 * Order: event base, modules, listeners (failure here ends the run),
 * masters (connected in the background), signals, loop.  On the first
 * SIGTERM/SIGINT: stop accepting, push LOST reason=shutdown and release
 * every held lock on the masters, answer pending and later requests
 * with ERR SHUTDOWN, wait for the releases and the client output (at
 * most SERVER_DRAIN_MS), then exit.  A second signal exits at once.
 *
 * Returns the process exit status: 0 after a shutdown, 1 when the
 * listeners or the event loop could not be set up (logged).
 */
int server_run(struct conf *conf);

/*
 * redlockd --reach: connect to every master of conf as the daemon would
 * (TLS, AUTH, the handshake), read each one's layout registry adding no
 * member of its own, print one line per master (up and counted, or why not:
 * down, quarantined, a layout this build cannot serve beside) and a
 * summary, and close.  Masters not decided within
 * redis.connect_timeout_ms plus one second are shown as they are then.
 * Returns the exit status: 0 when a quorum counts, 69 (EX_UNAVAILABLE)
 * when not, 1 when the event loop could not be set up.
 */
int server_reach(struct conf *conf);

#endif /* REDLOCKD_SERVER_H */
