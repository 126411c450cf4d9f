#!/bin/bash
# Start the local redis-server masters of CONFIG (conf/dev.yml: five, on
# 127.0.0.1:7001..7005; each persisting every write, data under run/, see
# tests/dev-master.sh) and redlockd in the foreground.  Ctrl-C or SIGTERM stops the daemon and then the
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
# The ports come from CONFIG: the masters' (started here, one
# tests/dev-master.sh each), and every other "HOST:PORT" it names
# (listen.tcp, metrics.listen, tls.listen): each must be free before
# anything starts.
#
# usage: tests/dev-run.sh BUILD/redlockd CONFIG
set -u
bin=$1
config=$2
here=$(dirname "$0")

# CONFIG's "HOST:PORT" strings, one "KEY PORT" line each: KEY is
# "masters" for an item of the masters list (block or [flow] style),
# else the key the address is given to (listen.tcp, metrics.listen);
# comments skipped.
config_ports() {
    awk '{ sub(/#.*/, "") }
        /^[A-Za-z_]+:/ { top = $1; sub(/:$/, "", top) }
        { line = $0
          key = line; sub(/^[ \t-]*/, "", key); sub(/:.*/, "", key)
          while (match(line, /"[^"]*:[0-9]+"/)) {
              addr = substr(line, RSTART + 1, RLENGTH - 2)
              port = addr; sub(/.*:/, "", port)
              print (top == "masters" ? "masters" : top == key ? key : top "." key), port
              line = substr(line, RSTART + RLENGTH)
          } }' "$1"
}
ports=$(config_ports "$config" | awk '$1 == "masters" { print $2 }' | xargs)
tcp_port=$(config_ports "$config" | awk '$1 == "listen.tcp" { print $2 }')
# Only the keys that listen: a quoted "x:123" elsewhere (a password) is no port.
listens=$(config_ports "$config" |
          awk '$1 == "listen.tcp" || $1 == "metrics.listen" || $1 == "tls.listen"' | tr '\n' ' ')
if [ -z "$ports" ]; then
    echo "dev-run: $config names no master HOST:PORT" >&2
    exit 1
fi
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
    echo "dev-run: stopped redlockd and the masters" >&2
}
trap stop EXIT
trap 'exit 0' INT TERM

# Whether something listens on TCP port $1, on any address (0.0.0.0, ::,
# ::1 or another): ss sees them all; without ss, a connect to 127.0.0.1.
port_taken() {
    if command -v ss >/dev/null; then
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# Refuse to borrow somebody else's Redis or redlockd on our ports, and
# to start masters that a daemon unable to bind would then leave: every
# port of CONFIG is checked before anything starts.
taken=0
set -- $(for port in $ports; do echo "masters $port"; done) $listens
while [ $# -ge 2 ]; do
    what=$1 port=$2
    shift 2
    if port_taken "$port"; then
        by=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o '(("[^"]*",pid=[0-9]*' |
             head -1 | sed 's/(("\(.*\)",pid=\(.*\)/ by \1 (pid \2)/')
        echo "dev-run: port $port ($what in $config) is already in use${by}; stop what" \
             "listens there first (nothing was started)" >&2
        taken=1
    fi
done
[ "$taken" -eq 0 ] || exit 1

mkdir -p run
started=true
for port in $ports; do
    "$here/dev-master.sh" "$port" || exit 1
done
echo "dev-run: masters up on ports $ports; starting redlockd" >&2
echo "dev-run: clients: nc -N 127.0.0.1 ${tcp_port:-7379}, or nc -U run/redlockd.sock; for" \
     "redlockctl in another shell: export REDLOCKD_SOCKET=$PWD/run/redlockd.sock" >&2
setsid "$bin" -c "$config" &
daemon_pid=$!
wait "$daemon_pid"
