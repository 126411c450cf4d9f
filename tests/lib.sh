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
