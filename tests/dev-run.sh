#!/bin/bash
# Start five local redis-server masters on 127.0.0.1:7001..7005 (no
# persistence, data under run/) and redlockd in the foreground.  Ctrl-C
# or SIGTERM stops the daemon and the masters; nothing is left running.
#
# usage: tests/dev-run.sh BUILD/redlockd CONFIG
set -u
bin=$1
config=$2
top=$(pwd)
mkdir -p run
pids=""

stop() {
    trap - INT TERM EXIT
    [ -n "${daemon_pid:-}" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    rm -f run/redlockd.sock
    [ -n "$pids" ] && echo "dev-run: stopped redlockd and the five masters" >&2
}
trap stop EXIT
trap 'exit 0' INT TERM

# Refuse to borrow somebody else's Redis or redlockd on our ports.
for port in 7001 7002 7003 7004 7005 7379; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "dev-run: 127.0.0.1:$port is already in use; stop what listens there first" >&2
        exit 1
    fi
done

for port in 7001 7002 7003 7004 7005; do
    mkdir -p "run/$port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$top/run/$port" --logfile "$top/run/$port/redis.log" --daemonize no &
    pids="$pids $!"
done
# Wait (with a deadline) until every master answers.
for port in 7001 7002 7003 7004 7005; do
    i=0
    until redis-cli -p "$port" ping >/dev/null 2>&1; do
        i=$((i + 1))
        if [ "$i" -gt 100 ]; then echo "dev-run: master $port did not start (run/$port/redis.log)" >&2; exit 1; fi
        sleep 0.05
    done
done
echo "dev-run: masters up on 127.0.0.1:7001..7005; starting redlockd" >&2
"$bin" -c "$config" &
daemon_pid=$!
wait "$daemon_pid"
