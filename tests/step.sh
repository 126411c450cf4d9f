#!/bin/sh
# step.sh: run one step of make test or make check, and keep going.
#
#   tests/step.sh FAILED NAME CMD [ARG...]
#       Runs CMD (its output goes to the terminal as it comes) and exits
#       with its status.  When it fails, FAILED (a file) gets a line for
#       each failed test case it printed, in its test runner's words, so
#       that the run can list them all at its end:
#         - Check's (the suites, tests/runner.c):
#           "file:line:F:tcase:test:0: message" (E for an error: a crash,
#           a signal, a timeout), listed as "NAME test (file:line): message";
#         - Python's unittest ("FAIL: test_x (...)", "ERROR: ..."), Node's
#           test runner ("not ok N - name"), Go's ("--- FAIL: TestX") and
#           the fault suite's ("failed: <scenario>: ...", tests/faults);
#         - when it named no case, one line: NAME, its exit status, and the
#           last line it printed.
#       A step that runs steps itself (make test under make check) passes
#       FAILED on in $REDLOCKD_FAILED; when the inner steps added lines,
#       the outer one adds none.

#   tests/step.sh --summary FAILED TITLE START
#       Prints "TITLE: all passed in N s" when FAILED is empty, or
#       "TITLE: FAILED after N s" and every line of FAILED, and exits 0 or
#       1 to match (START: when the run began, in seconds since the epoch).
#
# POSIX sh; FAILED must be a path the steps can reach from their own
# directories (make passes an absolute one).
set -u

if [ "${1:-}" = --summary ]; then
    failed=$2 title=$3 start=$4
    secs=$(( $(date +%s) - start ))
    if [ ! -s "$failed" ]; then
        echo "$title: all passed in $secs s"
        exit 0
    fi
    echo "$title: FAILED after $secs s; what failed (listed in $failed too):"
    sed 's/^/    /' "$failed"
    exit 1
fi

[ $# -ge 3 ] || { echo "usage: tests/step.sh FAILED NAME CMD [ARG...]" >&2; exit 2; }
failed=$1 name=$2
shift 2
touch "$failed" || exit 2
before=$(wc -l <"$failed")
log=$(mktemp) || exit 2
rcfile=$(mktemp) || { rm -f "$log"; exit 2; }
trap 'rm -f "$log" "$rcfile"' EXIT
# A signal ends this script by the same signal, so that a shell running a
# loop of steps (bash too, which goes on when its child merely exits)
# stops as well.
trap 'rm -f "$log" "$rcfile"; trap - INT; kill -INT $$' INT
trap 'rm -f "$log" "$rcfile"; trap - TERM; kill -TERM $$' TERM

REDLOCKD_FAILED=$failed
export REDLOCKD_FAILED
{ "$@" 2>&1; echo $? >"$rcfile"; } | tee "$log"
rc=$(cat "$rcfile")
[ -n "$rc" ] || rc=1
[ "$rc" -eq 0 ] && exit 0

# Lines were appended while it ran: the step (or a step inside it) has
# named what failed.
[ "$(wc -l <"$failed")" -gt "$before" ] && exit "$rc"

cases=$(sed -n -E \
    -e 's/^([^: ]+):([0-9]+):[FE]:[^:]*:([^:]*):[0-9]+: (.*)$/\3 (\1:\2): \4/p' \
    -e 's/^(FAIL|ERROR): (.*)$/\1: \2/p' \
    -e 's/^ *not ok [0-9]+ - (.*)$/not ok: \1/p' \
    -e 's/^(check-go: )? *--- FAIL: (.*)$/FAIL: \2/p' \
    -e 's/^failed: (.*)$/\1/p' "$log")
if [ -n "$cases" ]; then
    printf '%s\n' "$cases" | sed "s|^|$name |" >>"$failed"
else
    last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c 1-200)
    echo "$name: exited $rc, no test case named; its last line: $last" >>"$failed"
fi
exit "$rc"
