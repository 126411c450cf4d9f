#!/bin/bash
# check_devrun.sh: Ctrl-C on `make run` (tests/dev-run.sh) lets the daemon
# release the locks it holds.  Runs dev-run.sh in a session of its own,
# as a terminal would run it in the foreground, takes a lock, sends
# SIGINT to that whole process group (what Ctrl-C does) and checks that
# the holder got `! LOST <name> reason=shutdown`, that the daemon's
# compare-and-delete reached every master (their MONITOR streams) before
# the masters stopped, that the daemon did not take a second signal, and
# that nothing is left running.  Before that, it stops one master and
# starts it again with tests/dev-master.sh, runs a daemon of its own
# against the masters with the restart quarantine on, and runs docs/using.md's two
# shell scripts as written (the first one's job exits 7 and leaves a
# child in the background; the script must exit 7, and the lock must be
# free once it has ended, or been killed).
#
# First, with a config of its own on free ports, that dev-run.sh refuses
# a taken metrics port before it starts anything.  The rest runs
# conf/dev.yml, whose ports are fixed (7001..7005, 7379, 9379): it is
# skipped, saying so, when one of them is taken (a `make run` elsewhere).
#
# usage: tests/check_devrun.sh BUILD/redlockd      (from the repository root)
set -u
bin=${1:-build/redlockd}
name=devrun-check
ports="7001 7002 7003 7004 7005"
tmp=$(mktemp -d)
fail=0

say() { echo "check_devrun: $*"; }
bad() { say "FAIL: $*"; fail=1; }

# dev-run.sh checks every port of its config before it starts anything:
# with a config of free ports (its masters, listen.tcp) whose metrics port
# is taken, it fails at once, naming that port, its key and what holds it,
# and starts no master.  Ports of its own, so this part always runs.
free_port() {       # a port nothing listens on, below the ephemeral ports
    local p i
    for i in $(seq 1 50); do
        p=$((20000 + RANDOM % 12000))
        (exec 5<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    return 1
}
m1=$(free_port) && m2=$(free_port) && m3=$(free_port) && tcp_port=$(free_port) &&
    busy_port=$(free_port) || { say "FAIL: no free port found"; rm -rf "$tmp"; exit 1; }
# On ::1 where the host has it: a port taken on another address than
# 127.0.0.1 is taken all the same.
busy_host=127.0.0.1 busy_spec=127.0.0.1
if grep -qs '^0\{31\}1 ' /proc/net/if_inet6; then
    busy_host=::1 busy_spec='[::1]'
fi
nc -lk "$busy_host" "$busy_port" </dev/null >/dev/null 2>&1 &
busy_pid=$!
i=0
until (exec 5<>"/dev/tcp/$busy_host/$busy_port") 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then
        kill "$busy_pid" 2>/dev/null
        say "FAIL: nc did not listen on $busy_port"; rm -rf "$tmp"; exit 1
    fi
    sleep 0.05
done
cat > "$tmp/busy.yml" <<EOF2
listen:
  tcp: "127.0.0.1:$tcp_port"
  unix: ""
masters: ["127.0.0.1:$m1", "127.0.0.1:$m2", "127.0.0.1:$m3"]
metrics:
  listen: "$busy_spec:$busy_port"   # taken
EOF2
timeout -k 5 20 bash tests/dev-run.sh "$bin" "$tmp/busy.yml" >"$tmp/busy.log" 2>&1
rc=$?
for port in $m1 $m2 $m3 $tcp_port; do
    if (exec 5<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        bad "a taken metrics port: dev-run.sh started something on $port"
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
    fi
done
rm -rf "run/$m1" "run/$m2" "run/$m3"
kill "$busy_pid" 2>/dev/null
wait "$busy_pid" 2>/dev/null
[ "$rc" -eq 1 ] || bad "a taken metrics port: dev-run.sh exited $rc, not 1"
grep -q "port $busy_port (metrics.listen in $tmp/busy.yml) is already in use" "$tmp/busy.log" ||
    bad "a taken metrics port: dev-run.sh did not name it: $(cat "$tmp/busy.log")"
if command -v ss >/dev/null; then
    grep -q "in use by nc (pid $busy_pid)" "$tmp/busy.log" ||
        bad "a taken metrics port: dev-run.sh did not say nc (pid $busy_pid) holds it: $(cat "$tmp/busy.log")"
fi
grep -q "starting redlockd\|masters up" "$tmp/busy.log" &&
    bad "a taken metrics port: dev-run.sh started masters first"
if [ "$fail" -ne 0 ]; then
    rm -rf "$tmp"
    exit 1
fi
say "a taken metrics port ($busy_spec): refused before anything started ($(head -1 "$tmp/busy.log"))"

for port in $ports 7379 9379; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        say "skipped: 127.0.0.1:$port is in use (dev-run.sh needs its fixed ports)"
        rm -rf "$tmp"
        exit 0
    fi
done

cleanup() {
    # What a README script's test job may have left behind.
    kill $(cat "$tmp/child" "$tmp/fg" 2>/dev/null) ${own_pid:-} 2>/dev/null
    if [ "${finished:-false}" = true ]; then
        rm -rf "$tmp"
        return
    fi
    # Something went wrong: stop what the run left.
    if [ -n "${run_pid:-}" ] && kill -0 "$run_pid" 2>/dev/null; then
        kill -TERM "$run_pid" 2>/dev/null
        sleep 3
        kill -KILL -- "-$run_pid" 2>/dev/null
    fi
    for port in $ports; do
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# A background job of a script starts with SIGINT ignored; a terminal's
# foreground job does not: --default-signal gives dev-run.sh the latter.
env --default-signal=INT setsid bash tests/dev-run.sh "$bin" conf/dev.yml \
    >"$tmp/run.log" 2>&1 &
run_pid=$!

# The daemon is ready and a LOCK is granted (the masters are up).
i=0
until (exec 4<>/dev/tcp/127.0.0.1/7379 && echo PING >&4 && read -r -t 1 l <&4 \
        && [ "$l" = PONG ]) 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 200 ] || ! kill -0 "$run_pid" 2>/dev/null; then
        say "FAIL: dev-run.sh did not start the daemon:"
        cat "$tmp/run.log"
        exit 1
    fi
    sleep 0.05
done
# docs/using.md's way to stop and restart one master while `make run` runs;
# the daemon reconnects to it, and dev-run.sh stops it at the end.  First
# the daemon's link to it is up (said once in its log), so that the second
# "up" below can only be the reconnection.
i=0
until grep -q 'master 127.0.0.1:7003: up' "$tmp/run.log"; do
    i=$((i + 1))
    [ "$i" -gt 200 ] && { bad "the daemon's link to master 7003 never came up"; break; }
    sleep 0.05
done
redis-cli -p 7003 shutdown >/dev/null 2>&1
tests/dev-master.sh 7003 || bad "tests/dev-master.sh 7003 failed"
i=0
until [ "$(grep -c 'master 127.0.0.1:7003: up' "$tmp/run.log")" -ge 2 ]; do
    i=$((i + 1))
    [ "$i" -gt 200 ] && { bad "the daemon did not reconnect to the restarted master 7003"; break; }
    sleep 0.05
done
# A daemon of one's own against these masters, with the restart quarantine
# on (the default): the masters persist every write, so none of them, the
# restarted 7003 included, is held back, and a LOCK is granted at once.
cat > "$tmp/own.yml" <<EOF2
listen:
  tcp: ""
  unix: "$tmp/own.sock"
masters: ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"]
lock:
  key_prefix: "own:"
metrics:
  listen: ""
EOF2
setsid "$bin" -c "$tmp/own.yml" >"$tmp/own.log" 2>&1 &
own_pid=$!
own_stats=""
for i in $(seq 1 200); do
    own_stats=$(printf 'STATS\n' | nc -N -U "$tmp/own.sock" 2>/dev/null)
    case $own_stats in *"STAT masters_up 5"*) break ;; esac
    sleep 0.05
done
case $own_stats in
*"STAT masters_up 5"*"STAT masters_quarantined 0"*) ;;
*) bad "a daemon of one's own: not 5 masters up and 0 quarantined: $(printf '%s' "$own_stats" |
        grep -E 'masters_(up|quarantined)' | tr '\n' ' ')" ;;
esac
own_lock=$(printf 'TRYLOCK own-check\n' | nc -N -U "$tmp/own.sock" 2>/dev/null)
case $own_lock in OK*) ;; *) bad "a daemon of one's own: TRYLOCK answered '$own_lock'" ;; esac
kill -TERM "$own_pid" 2>/dev/null
wait "$own_pid" 2>/dev/null
# The front page's lines, as written: the netcat session's LOCK and
# UNLOCK, and redlockctl with make run's socket.
front_lock=$(printf 'LOCK nightly-backup\nUNLOCK nightly-backup\n' | nc -N 127.0.0.1 7379)
case $front_lock in
"OK nightly-backup validity="*" holds=1"*"OK nightly-backup holds=0") ;;
*) bad "README's netcat session answered '$front_lock'" ;;
esac
grep -q '^    OK nightly-backup holds=0$' README.md || bad "README.md's netcat session changed"
front_cmd=$(grep '^    build/redlockctl ' README.md | head -1)
front_export=$(grep '^    export REDLOCKD_SOCKET=' README.md | head -1 | sed 's/#.*//')
[ -n "$front_cmd" ] && [ -n "$front_export" ] || bad "README.md: the redlockctl lines were not found"
front_out=$(bash -c "${front_export} && ${front_cmd}" 2>&1)
[ "$front_out" = "only one of us runs this" ] ||
    bad "README's redlockctl line printed '$front_out'"
# The shell scripts of docs/using.md ("Using it from a shell script"), as written,
# against this daemon; the job of the first one is a function put after
# its #! line.
readme_script() {   # N: the Nth ```sh block of that section
    awk -v n="$1" '/^## Using it from a shell script/ { in_sec = 1; next }
        in_sec && /^## / { exit }
        in_sec && /^```sh$/ { k++; if (k == n) { on = 1 }; next }
        on && /^```$/ { exit }
        on { print }' docs/using.md
}
trylock() {         # NAME: TRYLOCK on a connection of its own, closed at once
    (exec 4<>/dev/tcp/127.0.0.1/7379 && echo "TRYLOCK $1" >&4 && read -r -t 2 l <&4 &&
        echo "$l") 2>/dev/null
}
free_within() {     # NAME: the name can be taken within 2 s
    local i
    for i in $(seq 1 40); do
        case $(trylock "$1") in OK*) return 0 ;; esac
        sleep 0.05
    done
    return 1
}
script1=$(readme_script 1)
script2=$(readme_script 2)
[ -n "$script1" ] && [ -n "$script2" ] || bad "docs/using.md: the shell scripts were not found"
# A job that leaves a child in the background and returns 7, or (hang)
# also waits in the foreground until the script is killed.
{
    echo '#!/bin/bash'
    echo 'run-the-backup() {'
    echo '    sleep 60 & echo "$!" > "$JOB_DIR/child"'
    echo '    if [ "$JOB_MODE" = hang ]; then sleep 60 & echo "$!" > "$JOB_DIR/fg"; wait "$!"; fi'
    echo '    return 7'
    echo '}'
    printf '%s\n' "$script1" | sed 1d
} > "$tmp/script1.sh"
printf '%s\n' "$script2" > "$tmp/script2.sh"
job_kill() {
    kill "$(cat "$tmp/child" 2>/dev/null)" "$(cat "$tmp/fg" 2>/dev/null)" 2>/dev/null
    rm -f "$tmp/child" "$tmp/fg"
}

JOB_DIR=$tmp JOB_MODE=return bash "$tmp/script1.sh"
rc=$?
[ "$rc" -eq 7 ] || bad "README script 1 exited $rc, not the job's 7"
free_within nightly-backup ||
    bad "README script 1: nightly-backup still held after the script ended (a background child kept it)"
job_kill

# In a subshell of its own, so that this shell has no job to report as
# "Killed".
(JOB_DIR=$tmp JOB_MODE=hang exec bash "$tmp/script1.sh") &
script_pid=$!
i=0
until [ -s "$tmp/fg" ]; do
    i=$((i + 1))
    [ "$i" -gt 100 ] && { bad "README script 1 did not start its job"; break; }
    sleep 0.05
done
case $(trylock nightly-backup) in
BUSY*) ;;
*) bad "README script 1 does not hold nightly-backup while its job runs" ;;
esac
kill -KILL "$script_pid"
wait "$script_pid" 2>/dev/null
free_within nightly-backup ||
    bad "README script 1 killed: nightly-backup still held by its job's processes"
job_kill

out=$(bash "$tmp/script2.sh")
rc=$?
case $out in
"OK nightly validity="*$'\n'"OK nightly") ;;
*) bad "README script 2 exited $rc and printed '$out'" ;;
esac
free_within nightly || bad "README script 2: nightly still held"

for port in $ports; do
    redis-cli -p "$port" monitor >"$tmp/monitor.$port" 2>&1 &
done
sleep 0.2
exec 3<>/dev/tcp/127.0.0.1/7379
reply=
for i in 1 2 3 4 5 6 7 8 9 10; do
    echo "LOCK $name wait=2000" >&3
    read -r -t 5 reply <&3
    case $reply in OK*) break ;; esac
    sleep 0.2
done
case $reply in
OK*) ;;
*) bad "LOCK $name: '$reply'"; cat "$tmp/run.log"; exit 1 ;;
esac
for port in $ports; do
    [ -n "$(redis-cli -p "$port" get "redlock:$name")" ] || bad "no key redlock:$name on master $port"
done

# Ctrl-C: SIGINT to the foreground process group, which is the session.
kill -INT -- "-$run_pid"

read -r -t 5 pushed <&3
[ "${pushed:-}" = "! LOST $name reason=shutdown" ] ||
    bad "the holder read '${pushed:-nothing}', not '! LOST $name reason=shutdown'"
exec 3<&-
i=0
while kill -0 "$run_pid" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt 200 ] && { bad "dev-run.sh still running 10 s after SIGINT"; break; }
    sleep 0.05
done
wait "$run_pid" 2>/dev/null
wait
finished=true
for port in $ports; do
    grep -qi "lua\] \"del\" \"redlock:$name\"" "$tmp/monitor.$port" ||
        bad "master $port never saw the release (DEL redlock:$name) before it stopped"
done
grep -q "shutdown: every lock released" "$tmp/run.log" ||
    bad "the daemon did not say 'shutdown: every lock released'"
grep -q "second SIG" "$tmp/run.log" && bad "the daemon got a second signal"
grep -q "dev-run: stopped redlockd and the masters" "$tmp/run.log" ||
    bad "dev-run.sh did not say it stopped everything"
for port in $ports 7379; do
    (exec 4<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && bad "127.0.0.1:$port still listening"
done
if [ "$fail" -ne 0 ]; then
    say "dev-run.sh said:"
    cat "$tmp/run.log"
    exit 1
fi
say "Ctrl-C: LOST reason=shutdown pushed, the key deleted on all 5 masters, all stopped"
