#!/bin/bash
# Start one of the local masters of `make run` (tests/dev-run.sh) on
# 127.0.0.1:PORT, persisting every write as a production master should
# (appendonly yes, appendfsync always: the daemon then never quarantines it
# after a restart), with its data and log under run/PORT/.  The server detaches (its own session, so the terminal's
# Ctrl-C does not reach it) and writes run/PORT/redis.pid; this script
# returns once it answers PING.  dev-run.sh starts the five masters with
# it, and it restarts one that was stopped while `make run` runs:
#
#   redis-cli -p 7003 shutdown            # stop master 7003
#   tests/dev-master.sh 7003              # start it again, with its keys
#
# usage: tests/dev-master.sh PORT
set -u
if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: tests/dev-master.sh PORT" >&2
    exit 64
fi
port=$1
top=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/run/$port"
mkdir -p "$dir"
if ! redis-server --port "$port" --bind 127.0.0.1 --save "" \
        --appendonly yes --appendfsync always --appenddirname appendonly \
        --dir "$dir" --logfile "$dir/redis.log" \
        --daemonize yes --pidfile "$dir/redis.pid"; then
    echo "dev-master: redis-server did not start on port $port ($dir/redis.log)" >&2
    exit 1
fi
# Wait (with a deadline of 5 s) until it answers.
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then
        echo "dev-master: master $port did not answer ($dir/redis.log)" >&2
        exit 1
    fi
    sleep 0.05
done
