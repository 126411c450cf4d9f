/*
 * reach.c: what to say of the masters the daemon cannot count on
 * (daemon/reach.h): the decision alone, pure, so that
 * tests/check_reach.c checks it without Redis, libevent or a clock.
 * daemon/reach_watch.c looks at the masters and writes the lines.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "daemon/reach.h"

struct reach_verdict
reach_decide(struct reach_memo *memo, const bool *counts, const bool *decided, size_t n,
             size_t quorum, bool late)
{
    struct reach_verdict v = { .say = REACH_QUIET };
    bool changed = false;
    size_t i;

    for (i = 0; i < n; i++) {
        v.counting += counts[i];
        changed |= memo->told && counts[i] != memo->counted[i];
    }
    v.quorum = v.counting >= quorum;
    if (!memo->told) {
        for (i = 0; i < n && decided[i]; i++) {
        }
        if (i < n && !late) {
            return v;
        }
        v.first = true;
    } else if (!changed) {
        return v;
    }
    v.say = v.counting == n ? REACH_ALL : REACH_MISSING;
    v.regained = memo->told && !memo->quorum && v.quorum;
    memo->told = true;
    memo->quorum = v.quorum;
    memcpy(memo->counted, counts, n * sizeof(*counts));
    return v;
}
