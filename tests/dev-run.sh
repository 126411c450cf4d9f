#!/bin/bash
# Start five local redis-server masters on 127.0.0.1:7001..7005 (each
# persisting every write, data under run/, see tests/dev-master.sh) and redlockd in
# the foreground.  Ctrl-C or SIGTERM stops the daemon and then the
# masters; nothing is left running.
#
# The daemon and the masters run in sessions of their own, so the
# terminal's Ctrl-C (SIGINT to the whole foreground process group)
# reaches this script alone.  The script then sends the daemon one
# SIGTERM and waits while it pushes `! LOST <name> reason=shutdown` and
# deletes its locks' keys on the masters, which are stopped only after
# the daemon has exited.  (Were the daemon to get the terminal's SIGINT
# and a SIGTERM from here, it would take the second signal as "exit now"
# and leave its keys; the masters, stopped at the same moment, could not
# take the deletes anyway.)  A second Ctrl-C during that stop is passed
# on: the daemon then exits at once.
#
# usage: tests/dev-run.sh BUILD/redlockd CONFIG
set -u
bin=$1
config=$2
here=$(dirname "$0")
ports="7001 7002 7003 7004 7005"
mkdir -p run
started=false

stop() {
    trap - EXIT
    trap '[ -n "${daemon_pid:-}" ] && kill -TERM "$daemon_pid" 2>/dev/null' INT TERM
    if [ -n "${daemon_pid:-}" ]; then
        kill -TERM "$daemon_pid" 2>/dev/null
        # wait returns early when a trap runs: wait until the daemon is gone.
        while kill -0 "$daemon_pid" 2>/dev/null; do
            wait "$daemon_pid" 2>/dev/null
        done
    fi
    "$started" || return 0
    # By port, so that a master restarted with tests/dev-master.sh stops too.
    for port in $ports; do
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
    done
    for port in $ports; do
        pid=$(cat "run/$port/redis.pid" 2>/dev/null) || continue
        i=0
        while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
            i=$((i + 1))
            sleep 0.05
        done
        kill -KILL "$pid" 2>/dev/null
        rm -f "run/$port/redis.pid"
    done
    rm -f run/redlockd.sock
    echo "dev-run: stopped redlockd and the five masters" >&2
}
trap stop EXIT
trap 'exit 0' INT TERM

# Refuse to borrow somebody else's Redis or redlockd on our ports.
for port in $ports 7379; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "dev-run: 127.0.0.1:$port is already in use; stop what listens there first" >&2
        exit 1
    fi
done

started=true
for port in $ports; do
    "$here/dev-master.sh" "$port" || exit 1
done
echo "dev-run: masters up on 127.0.0.1:7001..7005; starting redlockd" >&2
echo "dev-run: clients: nc -N 127.0.0.1 7379, or nc -U run/redlockd.sock; for" \
     "redlockctl in another shell: export REDLOCKD_SOCKET=$PWD/run/redlockd.sock" >&2
setsid "$bin" -c "$config" &
daemon_pid=$!
wait "$daemon_pid"
