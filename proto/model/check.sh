#!/bin/sh
# make check-model: SPIN on the set protocol's model (sets.pml beside this
# script), each run compiled with gcc ($PAN_CC) into BUILD_DIR/<run>/
# (first argument).  The protocol must pass the safety run (exclusion per
# name, no invalid end state; four clients with a master that may go
# down, and five without) and the liveness run (every client ends, under
# weak fairness and the retry-delay assumption; the run with a master
# that may go down takes too long for CI, see README.md); each mutation
# must fail, with a trail.  Prints one
# line per run: its verdict, the commands, SPIN's states and time.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: check.sh BUILD_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
command -v spin >/dev/null || { echo "check-model: spin is not installed"; exit 1; }
cc=${PAN_CC:-gcc}
command -v "$cc" >/dev/null || { echo "check-model: no $cc to compile pan with"; exit 1; }

# run NAME EXPECT SPIN_FLAGS -- CC_FLAGS -- PAN_FLAGS: writes
# BUILD_DIR/NAME/verdict.  EXPECT: pass, or the words of the error SPIN
# must report.
run() {
    name=$1 expect=$2; shift 2
    sflags=; while [ "$1" != -- ]; do sflags="$sflags $1"; shift; done; shift
    cflags=; while [ "$1" != -- ]; do cflags="$cflags $1"; shift; done; shift
    dir=$out/$name
    rm -rf "$dir" && mkdir -p "$dir" && cp "$here/sets.pml" "$dir/"
    verdict=$dir/verdict
    # -w: pan.c is SPIN's generated code, not ours
    if ! (cd "$dir" && spin $sflags -a sets.pml >spin.log 2>&1 &&
          "$cc" -O2 -w -DMEMLIM=2048 $cflags -o pan pan.c >cc.log 2>&1); then
        { echo "check-model: $name: FAILED: spin or $cc failed ($dir):"
          cat "$dir/spin.log" "$dir/cc.log"; } >"$verdict"
        return
    fi
    (cd "$dir" && ./pan "$@" >pan.log 2>&1)
    log=$dir/pan.log
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log")
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds/\1/p' "$log")
    figures="spin$sflags -a; $cc$cflags; pan $*: ${states:-?} states, ${secs:-0} s"
    if grep -q 'max search depth too small\|out of memory\|error: too many' "$log"; then
        echo "check-model: $name: FAILED: the search was cut short ($log)"
    elif [ "$expect" = pass ]; then
        if grep -q 'errors: 0$' "$log"; then
            echo "check-model: $name: passes ($figures)"
        else
            echo "check-model: $name: FAILED ($log, trail: $dir/sets.pml.trail):"
            grep '^pan' "$log"
        fi
    elif grep -q "^pan:1: $expect" "$log" && [ -s "$dir/sets.pml.trail" ]; then
        echo "check-model: $name: fails as it must:" \
            "$(grep -m1 '^pan:1:' "$log" | cut -c8-) ($figures)"
    else
        echo "check-model: $name: FAILED: SPIN did not find \"$expect\" ($log)"
    fi >"$verdict"
}

# Two lanes (two cores): the liveness run and the safety run with the
# outage, beside the safety run of five clients and then the mutations.
{ run liveness pass -DLIVE -- -DNFAIR=4 -- -a -f -m40000
  run safety pass -DOUTAGE -DFOUR -- -DSAFETY -- -m20000; } &
run safety-five pass -- -DSAFETY -- -m20000
run unfair 'acceptance cycle' -DLIVE -DUNFAIR -- -DNFAIR=4 -- -a -f -m20000
run one-by-one 'invalid end state' -DONE_BY_ONE -- -DSAFETY -- -m20000
run one-by-one-liveness 'acceptance cycle' -DONE_BY_ONE -DLIVE -- -DNFAIR=4 -- -a -f -m20000
run partial-set 'assertion violated' -DPARTIAL -- -DSAFETY -- -m20000
run quorum-of-one 'assertion violated' -DQUORUM=1 -- -DSAFETY -- -m20000
run claims-given-order 'invalid end state' -DCLAIM_GIVEN -- -DSAFETY -- -m20000
run claims-after 'invalid end state' -DCLAIM_AFTER -- -DSAFETY -- -m20000
run turns pass -DLIVE -DTURNS -- -DNFAIR=4 -- -a -f -m1000000
run turns-no-claims 'acceptance cycle' -DLIVE -DTURNS -DNO_CLAIMS -- -DNFAIR=4 -- -a -f -m20000
wait

# The verdicts in order; the last line names the runs that failed, which
# is what tests/step.sh quotes.
failed=
for r in safety safety-five liveness unfair one-by-one one-by-one-liveness partial-set \
         quorum-of-one claims-given-order claims-after turns turns-no-claims; do
    if [ -s "$out/$r/verdict" ]; then cat "$out/$r/verdict"; else
        echo "check-model: $r: FAILED: no verdict"; failed="$failed $r"; continue; fi
    grep -q '^check-model: [a-z-]*: FAILED' "$out/$r/verdict" && failed="$failed $r"
done
[ -z "$failed" ] || { echo "check-model: FAILED:$failed"; exit 1; }
echo "check-model: every run as expected"
