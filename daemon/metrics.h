/*
 * metrics.h: Prometheus text exposition over HTTP (libevent's evhttp).
 *
 * GET /metrics on metrics.listen answers the daemon's counters in the
 * Prometheus text format, version 0.0.4; any other path answers 404.
 */
#ifndef REDLOCKD_METRICS_H
#define REDLOCKD_METRICS_H

struct event_base;
struct conf;

/*
 * Start serving on conf->metrics (nothing when metrics.listen is "").
 * Returns 0, or -1 with the reason logged (the address cannot be bound).
 */
int metrics_start(struct event_base *base, const struct conf *conf);

/* Stop serving and free the server (at exit). */
void metrics_stop(void);

#endif /* REDLOCKD_METRICS_H */
