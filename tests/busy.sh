#!/bin/sh
# busy.sh: run a command on a busy machine.
#
#   tests/busy.sh N CMD [ARG...]
#
# Starts N busy loops at normal priority (each keeps one core busy, as
# another build or a browser test beside the suites would), runs CMD,
# stops the loops and exits with CMD's status.  The loops also stop by
# themselves within about a tenth of a second once this script is gone,
# whatever ended it (they check that it is alive between rounds of work),
# so none is left spinning after a kill -9 or a lost terminal.
#
# make check BUSY=N and make check-busy use it (tests/README.md).
set -u

[ $# -ge 2 ] && [ "$1" -ge 0 ] 2>/dev/null ||
    { echo "usage: tests/busy.sh N CMD [ARG...]" >&2; exit 2; }
n=$1
shift
me=$$
pids=
i=0
while [ "$i" -lt "$n" ]; do
    sh -c 'while kill -0 "$1" 2>/dev/null; do
               j=0; while [ "$j" -lt 20000 ]; do j=$((j + 1)); done
           done' busy-loop "$me" &
    pids="$pids $!"
    i=$((i + 1))
done
trap 'kill $pids 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[ "$n" -gt 0 ] && echo "busy.sh: $n busy loops beside: $*"
"$@"
