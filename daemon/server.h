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

#endif /* REDLOCKD_SERVER_H */
