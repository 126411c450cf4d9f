/*
 * ctx.c: the daemon's context and counters (see ctx.h).
 */
#include "daemon/ctx.h"
#include "daemon/stats.h"

struct stats      stats;
struct daemon_ctx ctx = { NULL, NULL, &stats };
