/*
 * drift.c: a master's clock against CLOCK_MONOTONIC (see drift.h).
 */
#include "daemon/drift.h"

#define DRIFT_FIXED_US  2000    /* the fixed part of the drift allowance (daemon/redlock.h) */

bool
drift_check(struct drift_ref *ref, int64_t master_us, int64_t sent_us, int64_t read_us,
            double drift_factor, int64_t span_max_us, struct drift_step *out)
{
    int64_t least, most, span, slack;

    out->step_us = 0;
    out->elapsed_us = 0;
    out->since_us = 0;
    out->allowed_us = 0;
    if (ref->set) {
        /*
         * The first reading was taken in [ref->sent_us, ref->read_us],
         * this one in [sent_us, read_us]: the daemon's clock advanced by
         * at least sent_us - ref->read_us (which may be negative when
         * the two requests were in flight together) and at most
         * read_us - ref->sent_us between them.
         */
        least = sent_us - ref->read_us;
        most = read_us - ref->sent_us;
        /*
         * The drift allowed grows with the span, but never past the
         * drift of the shortest lease: a reference left idle for minutes
         * would otherwise hide a step of a hundredth of that.
         */
        span = most > 0 ? most : 0;
        if (span > span_max_us) {
            span = span_max_us > 0 ? span_max_us : 0;
        }
        slack = (int64_t)((double)span * drift_factor) + DRIFT_FIXED_US;
        out->elapsed_us = master_us - ref->master_us;
        out->since_us = read_us - ref->read_us;
        out->allowed_us = slack;
        if (out->elapsed_us > most + slack) {
            out->step_us = out->elapsed_us - most;
        } else if (out->elapsed_us < least - slack) {
            out->step_us = out->elapsed_us - least;
        }
    }
    ref->set = true;
    ref->master_us = master_us;
    ref->sent_us = sent_us;
    ref->read_us = read_us;
    return out->step_us != 0;
}

void
drift_forget(struct drift_ref *ref)
{
    ref->set = false;
}
