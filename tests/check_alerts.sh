#!/bin/bash
# check_alerts.sh: the Prometheus rules and the Grafana dashboard under
# conf/ are checked against the daemon they are about.  promtool check
# rules reads the rules; promtool test rules runs their unit tests
# (tests/promtool/); then three real masters (redis-server on free ports)
# and the real daemon start, with metrics.listen on a free port, and
# tests/check_alerts.py checks every metric and label name that the rules,
# their tests' series and the dashboard use against its /metrics.
#
# promtool comes from Debian's prometheus package (make deps installs it).
# Missing, the check fails; only a user who is not root (and so cannot
# install it) is told it is skipped.
#
# usage: tests/check_alerts.sh DAEMON     (from the repository root;
#        make check-alerts)
set -u
daemon=$1
say() { echo "check-alerts: $*"; }
bad() { say "FAIL: $*"; }

if ! command -v promtool >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        say "skipped: promtool is missing (apt-get install prometheus, as root)"
        exit 0
    fi
    say "FAIL: promtool is missing: make deps installs it (Debian's prometheus package)"
    exit 1
fi
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { say "FAIL: $tool is missing (make deps)"; exit 1; }
done
python3 -c 'import yaml' 2>/dev/null || { say "FAIL: python3-yaml is missing (make deps)"; exit 1; }

promtool check rules conf/prometheus/redlockd.rules.yml || { say "FAIL: promtool check rules"; exit 1; }
promtool test rules tests/promtool/redlockd.rules.test.yml || { say "FAIL: promtool test rules"; exit 1; }

tmp=$(mktemp -d)
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT

. tests/lib.sh     # free_port, wait_for, start_masters

start_masters 3 || exit 1
port=$(free_port)
mport=$(free_port)
cat >"$tmp/redlockd.yml" <<EOF
listen:
  tcp: "127.0.0.1:$port"
  unix: "$tmp/redlockd.sock"
masters: [$masters]
metrics:
  listen: "127.0.0.1:$mport"
EOF
"$daemon" -c "$tmp/redlockd.yml" 2>"$tmp/daemon.log" &
pids+=($!)
up() {
    python3 -c 'import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=2).read().decode()
sys.exit(0 if "\nredlockd_masters_up 3\n" in body else 1)' "http://127.0.0.1:$mport/metrics"
}
if ! wait_for 10 "the daemon's /metrics with 3 masters up" up; then
    cat "$tmp/daemon.log"
    exit 1
fi
python3 tests/check_alerts.py "http://127.0.0.1:$mport/metrics"
