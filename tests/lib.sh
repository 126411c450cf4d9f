# lib.sh: what the shell checks share.  Sourced (`. tests/lib.sh`) by a
# script that defines say() and bad(): bad prints a failure in the
# script's words (and may mark it failed without ending the script).

# A loopback port nothing listens on now (the kernel's choice, as the C
# harness's free ports are); prints it.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for SECONDS WHAT COMMAND...: runs COMMAND every 50 ms until it
# succeeds (0) or SECONDS pass: then bad "WHAT: not within SECONDS s" and 1.
wait_for() {
    local secs=$1 what=$2 _
    shift 2
    for _ in $(seq 1 $((secs * 20))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    bad "$what: not within $secs s"
    return 1
}

# start_masters N: N redis-server masters on free loopback ports, each
# persisting every write under $tmp/m<port>; their pids are added to the
# caller's pids array (its cleanup kills them) and masters gets their
# addresses as a YAML flow list's items ("127.0.0.1:P", ...).  1 when one
# did not answer PING within 5 s (bad said which).
start_masters() {
    local _ port
    masters=""
    for _ in $(seq 1 "$1"); do
        port=$(free_port)
        mkdir -p "$tmp/m$port"
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly yes \
            --appendfsync always --dir "$tmp/m$port" --logfile "$tmp/m$port/log" &
        pids+=($!)
        disown      # no "Killed" notice when the caller's cleanup kills it
        masters="$masters\"127.0.0.1:$port\", "
        wait_for 5 "master $port" redis-cli -p "$port" ping || return 1
    done
    masters=${masters%, }
}
