#!/bin/sh
# check_runner.sh: tests/step.sh and tests/busy.sh, the pieces that let
# make check go on past a failure and run beside busy loops.
#   - a loop of steps, as make check runs them, goes on after a failed
#     step and lists each failed case once, in each runner's words (Check,
#     unittest, node, go, the fault suite), a step that names none by its
#     exit status, and a nested run's cases only once;
#   - --summary says "all passed" or "FAILED" with the list, exit 0 or 1;
#   - busy.sh runs its command with its exit status, and leaves no loop
#     behind, whether the command ends or is killed with SIGTERM.
# usage: tests/check_runner.sh        (from the repository root; make check-runner)
set -u

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
bad=0
fail() { echo "check_runner: FAIL: $*"; bad=1; }

f=$tmp/failed
: >"$f"
for step in check unittest node go faults silent nested ok; do
    case $step in
    check) cmd='echo "tests/check_x.c:12:F:tc:case_one:0: expected 1, got 2"; echo "tests/check_x.c:40:E:tc:case_two:0: (after this point) Test timeout expired"; exit 1' ;;
    unittest) cmd='echo "FAIL: test_lock (test_client.T)"; echo "ERROR: test_tls (test_client.T)"; exit 1' ;;
    node) cmd='echo "    not ok 3 - unlock frees"; exit 1' ;;
    go) cmd='echo "check-go: --- FAIL: TestLockUnlock (0.21s)"; exit 1' ;;
    faults) cmd='echo "failed: kill-masters: judged, 2 violations (expected: no violation)"; exit 2' ;;
    silent) cmd='echo "something broke"; exit 7' ;;
    nested) cmd="sh tests/step.sh \"\$REDLOCKD_FAILED\" inner sh -c 'echo \"tests/check_y.c:5:F:tc:inner_case:0: boom\"; exit 1'" ;;
    ok) cmd='echo "tests/check_z.c:1:F:tc:not_a_failure:0: a passing step is not read"; exit 0' ;;
    esac
    sh tests/step.sh "$f" "$step" sh -c "$cmd" >/dev/null 2>&1
done

expect() {
    grep -qxF "$1" "$f" || fail "the list lacks '$1'"
}
expect "check case_one (tests/check_x.c:12): expected 1, got 2"
expect "check case_two (tests/check_x.c:40): (after this point) Test timeout expired"
expect "unittest FAIL: test_lock (test_client.T)"
expect "unittest ERROR: test_tls (test_client.T)"
expect "node not ok: unlock frees"
expect "go FAIL: TestLockUnlock (0.21s)"
expect "faults kill-masters: judged, 2 violations (expected: no violation)"
expect "silent: exited 7, no test case named; its last line: something broke"
expect "inner inner_case (tests/check_y.c:5): boom"
n=$(wc -l <"$f")
[ "$n" -eq 9 ] || { fail "the list has $n lines, expected 9:"; cat "$f"; }

out=$(sh tests/step.sh --summary "$f" "make check" "$(date +%s)")
rc=$?
[ "$rc" -eq 1 ] || fail "--summary with failures exited $rc, expected 1"
case $out in "make check: FAILED after "*) ;; *) fail "--summary said '$out'" ;; esac
: >"$tmp/none"
out=$(sh tests/step.sh --summary "$tmp/none" "make check" "$(date +%s)")
rc=$?
[ "$rc" -eq 0 ] || fail "--summary without failures exited $rc, expected 0"
case $out in "make check: all passed in "*) ;; *) fail "--summary said '$out'" ;; esac

loops() { ps -eo args | grep -c "^sh -c while kill -0 \"\$1\" .*busy-loop $1\$"; }
sh tests/busy.sh 2 sh -c 'echo $$ >"$1"; sleep 0.3; exit 3' x "$tmp/pid" >/dev/null
rc=$?
[ "$rc" -eq 3 ] || fail "busy.sh exited $rc, expected the command's 3"
pid=$(cat "$tmp/pid")
i=0
while [ "$(loops "$pid")" -gt 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(loops "$pid")" -eq 0 ] || fail "busy loops left running after the command ended"

sh tests/busy.sh 2 sleep 30 >/dev/null &
pid=$!
i=0
while [ "$(loops "$pid")" -lt 2 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(loops "$pid")" -eq 2 ] || fail "busy.sh 2 started $(loops "$pid") loops"
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$pid" 2>/dev/null && { fail "busy.sh still ran 5 s after SIGTERM"; kill -KILL "$pid"; }
wait "$pid" 2>/dev/null
rc=$?
[ "$rc" -eq 143 ] || fail "busy.sh killed with SIGTERM exited $rc, expected 143 (the command's)"
i=0
while [ "$(loops "$pid")" -gt 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(loops "$pid")" -eq 0 ] || fail "busy loops left running after SIGTERM"

[ $bad -eq 0 ] && echo "check-runner: step.sh lists every failed case once, in six runners' words; busy.sh keeps its command's status and leaves no loop"
exit $bad
