#!/bin/sh
# busy.sh: run a command on a busy machine.
#
#   tests/busy.sh N CMD [ARG...]
#
# Starts N busy loops at normal priority (each keeps one core busy, as
# another build or a browser test beside the suites would), then becomes
# CMD (exec: a signal sent to this process reaches CMD itself) and exits
# with its status.  The loops watch this process id between rounds of
# work and stop within about a tenth of a second once it is gone, however
# it ended (its normal end, a signal, kill -9), so none is left spinning.
#
# make check BUSY=N and make check-busy use it (tests/README.md).
set -u

[ $# -ge 2 ] && [ "$1" -ge 0 ] 2>/dev/null ||
    { echo "usage: tests/busy.sh N CMD [ARG...]" >&2; exit 2; }
n=$1
shift
me=$$
i=0
while [ "$i" -lt "$n" ]; do
    sh -c 'while kill -0 "$1" 2>/dev/null; do
               j=0; while [ "$j" -lt 20000 ]; do j=$((j + 1)); done
           done' busy-loop "$me" &
    i=$((i + 1))
done
[ "$n" -gt 0 ] && echo "busy.sh: $n busy loops beside: $*"
exec "$@"
