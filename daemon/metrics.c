/*
 * metrics.c: Prometheus /metrics (not served yet: a placeholder that
 * keeps the start-up order in server.c).
 */
#include "conf/conf.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

int
metrics_start(struct event_base *base, const struct conf *conf)
{
    (void)base;
    if (conf->metrics.spec[0] != '\0') {
        log_warn("metrics.listen %s: metrics are not served yet", conf->metrics.spec);
    }
    return 0;
}

void
metrics_stop(void)
{
}
