/*
 * metrics.h: Prometheus text exposition over HTTP (libevent's evhttp).
 *
 * GET (or HEAD) /metrics on metrics.listen answers the daemon's counters
 * in the Prometheus text format, version 0.0.4: the values STATS shows,
 * read when the request arrives; GET (or HEAD) / answers the status
 * page (daemon/status_page.h), read the same way.  Any other path
 * answers 404, another
 * method 405 (one evhttp does not know, such as PROPFIND: 501; CONNECT,
 * whose target is no path: 404).  A connection idle for 10 s (reading
 * or writing) is closed; request headers are limited to 8 KiB, bodies
 * to 1 KiB.  At most metrics.max_connections connections are open at
 * once, and half of them (rounded up) from one address group (an IPv4
 * /24, all of 127/8, an IPv6 /64): a new connection past either closes
 * the slowest connection in its way (the request under way longest,
 * else the one idle longest; metrics_evicted), and is answered 503 and
 * closed only when every one in its way came in the same turn of the
 * loop (metrics_rejected).  A request not answered within
 * metrics.request_timeout_ms of its first byte (of the accept, for a
 * connection's first request) has its connection closed
 * (metrics_timed_out).  All three are logged at most once per 10 s.
 */
#ifndef REDLOCKD_METRICS_H
#define REDLOCKD_METRICS_H


/*
 * Start serving on metrics.listen of ctx.conf on ctx.base (daemon/ctx.h;
 * nothing when metrics.listen is "").  Returns 0, or -1 with the reason
 * logged, naming metrics.listen (the host does not resolve, or the
 * address cannot be bound: in use, not local, no permission).
 * metrics.max_connections and metrics.request_timeout_ms are read from
 * ctx.conf when used, so a reload reaches them at once; open connections
 * stay, and a request keeps the deadline it began with.
 */
int metrics_start(void);

/*
 * Stop serving: close the socket and every connection, free the server.
 * Call before the event base is freed; nothing happens when not started.
 */
void metrics_stop(void);

#endif /* REDLOCKD_METRICS_H */
