#!/bin/bash
# check_deb.sh: the Debian package as an operator meets it.  As root, on a
# machine it may change (CI's): installs build/deb's redlockd_*.deb with
# apt-get, checks what landed (the binaries hardened, the user and group,
# /etc/redlockd/redlockd.yml 0640 root:redlockd, the units enabled but the
# TLS socket), runs `redlockd -t` on the installed configuration as the
# service's user, starts the installed daemon against five real masters
# and takes a lock with the installed redlockctl, then purges the package
# and checks that nothing of it is left but the user and group, which
# Debian's policy keeps.
#
# Where systemd is not PID 1 (a container), the units cannot run: it tests
# /etc/init.d/redlockd instead.  The install runs with a policy-rc.d that
# forbids starts (postinst must say so); then, with the installed
# configuration pointed at the test's masters and free ports, a reinstall
# lets postinst start the daemon through the init script (it must say so);
# a lock through the installed redlockctl, reload (logged; a bad file fails
# it and the daemon runs on; a daemon stopped by SIGSTOP gives no verdict
# and fails it, one killed during it fails it, log.level warn is said to
# hide the verdict), a start refused on a bad file, stop (the process gone,
# the lock released on the masters); zombies (a daemon adopted by a parent
# that never reaps, python3's PR_SET_CHILD_SUBREAPER): status, start,
# restart and stop take a zombie for stopped; an upgrade whose restart
# redlockd -t refuses (postinst says the previous version runs), remove
# stopping the daemon, and a purge that policy-rc.d forbids to stop it
# (it says so, with the pid), leaving no init links, log or pid file.
# The machine's own policy-rc.d is put back on exit.
#
# usage: tests/check_deb.sh DEB_DIR     (from the repository root)
set -u
debdir=$1
fail=0
say() { echo "check-deb: $*"; }
bad() { say "FAIL: $*"; fail=1; }

if [ "$(id -u)" -ne 0 ]; then
    say "skipped: installs a package, so it runs as root only"
    exit 0
fi
if dpkg-query -W -f='${Status}' redlockd 2>/dev/null | grep -q 'ok installed'; then
    say "FAIL: redlockd is installed already; this check installs and purges it: remove it first"
    exit 1
fi
deb=$(find "$debdir" -maxdepth 1 -name 'redlockd_*.deb' | head -1)
[ -n "$deb" ] || { say "FAIL: no redlockd_*.deb in $debdir (make deb)"; exit 1; }

tmp=$(mktemp -d)
chmod 0755 "$tmp"
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    start-stop-daemon --stop --quiet --pidfile /run/redlockd.pid --name redlockd \
        --user redlockd --retry=TERM/5/KILL/5 2>/dev/null
    if dpkg-query -W -f='${Status}' redlockd 2>/dev/null | grep -q installed; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq redlockd >/dev/null 2>&1
    fi
    restore_policy
    rm -rf "$tmp"
}
trap cleanup EXIT

# invoke-rc.d asks /usr/sbin/policy-rc.d whether a maintainer script may
# start or stop a service (101: no).  The machine's own is kept in $tmp and
# put back on exit.
policy=/usr/sbin/policy-rc.d
had_policy=0
if [ -e "$policy" ]; then
    cp -p "$policy" "$tmp/policy-rc.d.orig" && had_policy=1
fi
set_policy() {      # EXIT_STATUS
    printf '#!/bin/sh\n# check_deb.sh, for the test only\nexit %s\n' "$1" >"$policy"
    chmod 0755 "$policy"
}
# shellcheck disable=SC2317  # run by cleanup
restore_policy() {
    if [ "$had_policy" -eq 1 ]; then
        cp -p "$tmp/policy-rc.d.orig" "$policy"
    else
        rm -f "$policy"
    fi
}
if [ -d /run/systemd/system ]; then
    init=systemd
    say "systemd is PID 1: testing the package under systemd"
else
    init=sysv
    say "systemd is not PID 1 here ($(cat /proc/1/comm)): testing /etc/init.d/redlockd; the units cannot run here"
    set_policy 101
fi

. tests/lib.sh     # free_port, wait_for, start_masters

# Whether a live (not zombie) redlockd of user redlockd runs, from /proc
# (procps may be missing in a container).
daemon_runs() {
    local d
    for d in /proc/[0-9]*; do
        [ "$(stat -c %U "$d" 2>/dev/null)" = redlockd ] &&
            grep -qs '^[0-9]* (redlockd) [^Z]' "$d/stat" && return 0
    done
    return 1
}

# ---- install ----
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(realpath "$deb")" \
        >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    say "FAIL: apt-get install $deb failed"
    exit 1
fi
say "installed $(basename "$deb")"
if [ "$init" = sysv ]; then
    # postinst says that it started nothing, and why.
    if grep -q '^redlockd: systemd is not running here and /etc/init.d/redlockd did not start redlockd (policy-rc.d forbade it)' \
            "$tmp/install.log"; then
        say "postinst: $(grep -A1 '^redlockd: ' "$tmp/install.log" | tr -s ' \n' ' ')"
    else
        bad "postinst did not say that policy-rc.d forbade the start: $(cat "$tmp/install.log")"
    fi
    daemon_runs && bad "a redlockd runs although policy-rc.d forbade it"
elif grep -q '^redlockd: .*systemctl status redlockd' "$tmp/install.log"; then
    say "postinst: $(grep '^redlockd: ' "$tmp/install.log")"
else
    bad "postinst did not say what systemd started: $(cat "$tmp/install.log")"
fi
dpkg -L redlockd | sort >"$tmp/files"

# The package's version is the release the daemon says it is (debian/changelog
# and the Makefile's VERSION agree), with its layout.
pkgver=$(dpkg-query -W -f '${Version}' redlockd)
case "$(/usr/bin/redlockd -V)" in
"redlockd $pkgver (layout "*) say "redlockd -V: $(/usr/bin/redlockd -V)" ;;
*) bad "package $pkgver, but redlockd -V says '$(/usr/bin/redlockd -V)'" ;;
esac

for f in /usr/bin/redlockd /usr/bin/redlockctl /etc/init.d/redlockd /lib/systemd/system/redlockd.service \
         /lib/systemd/system/redlockd.socket /lib/systemd/system/redlockd-tls.socket \
         /usr/lib/sysusers.d/redlockd.conf /usr/share/man/man8/redlockd.8.gz \
         /usr/share/redlockd/redlockd.rules.yml /usr/share/redlockd/redlockd.json \
         /usr/share/man/man5/redlockd.yml.5.gz /usr/share/man/man1/redlockctl.1.gz; do
    [ -e "$f" ] || bad "$f was not installed"
done
getent passwd redlockd >/dev/null || bad "no user redlockd"
getent group redlockd >/dev/null || bad "no group redlockd"
perm=$(stat -c '%a %U:%G' /etc/redlockd/redlockd.yml 2>/dev/null)
[ "$perm" = "640 root:redlockd" ] || bad "/etc/redlockd/redlockd.yml is '$perm', not '640 root:redlockd'"
grep -qx '/etc/redlockd/redlockd.yml' /var/lib/dpkg/info/redlockd.conffiles ||
    bad "/etc/redlockd/redlockd.yml is no conffile"
for u in redlockd.service redlockd.socket; do
    ls /etc/systemd/system/*.wants/"$u" >/dev/null 2>&1 || bad "$u is not enabled"
done
# The init script, for hosts without systemd: started in 2-5, stopped in 0, 1, 6.
for r in 2 3 4 5; do ls /etc/rc$r.d/S??redlockd >/dev/null 2>&1 || bad "no /etc/rc$r.d/S??redlockd"; done
for r in 0 1 6; do ls /etc/rc$r.d/K??redlockd >/dev/null 2>&1 || bad "no /etc/rc$r.d/K??redlockd"; done
ls /etc/systemd/system/*.wants/redlockd-tls.socket >/dev/null 2>&1 &&
    bad "redlockd-tls.socket is enabled (it needs certificates first)"
sh tests/check_hardening.sh /usr/bin/redlockd /usr/bin/redlockctl | sed 's/^/  /' ||
    bad "the installed binaries are not hardened"

# ---- the installed configuration, checked as the service's user ----
if runuser -u redlockd -- /usr/bin/redlockd -t -c /etc/redlockd/redlockd.yml \
        >"$tmp/t.out" 2>"$tmp/t.err"; then
    say "redlockd -t on /etc/redlockd/redlockd.yml as user redlockd: $(cat "$tmp/t.out")"
else
    bad "redlockd -t -c /etc/redlockd/redlockd.yml: $(cat "$tmp/t.out" "$tmp/t.err")"
fi

# ---- the installed daemon against five masters, a lock by redlockctl ----
start_masters 5
port=$(free_port)
cat >"$tmp/redlockd.yml" <<EOF2
listen:
  tcp: "127.0.0.1:$port"
  unix: ""
masters: [$masters]
metrics:
  listen: ""
EOF2
chmod 0644 "$tmp/redlockd.yml"
runuser -u redlockd -- /usr/bin/redlockd -c "$tmp/redlockd.yml" >"$tmp/daemon.log" 2>&1 &
pids+=($!)
daemon_pid=$!
# shellcheck disable=SC2317  # run by wait_for
up() { printf 'STATS\n' | nc -N 127.0.0.1 "$port" | grep -q '^STAT masters_up 5'; }
wait_for 10 "the installed redlockd with 5 masters up" up
out=$(/usr/bin/redlockctl -H "127.0.0.1:$port" -n deb-check -c \
      '/usr/bin/redlockctl -H "127.0.0.1:'"$port"'" status deb-check')
case $out in
*"deb-check: held by"*) say "the installed redlockctl held deb-check through the installed daemon" ;;
*) bad "redlockctl deb-check: '$out' ($(tail -5 "$tmp/daemon.log"))" ;;
esac
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null

# ---- without systemd: /etc/init.d/redlockd ----
# shellcheck disable=SC2317  # run by wait_for
held_on() {        # N: the lock key is on at least N masters
    local n=0 m
    for m in "${mports[@]}"; do
        [ "$(redis-cli -p "$m" exists redlock:deb-init)" = 1 ] && n=$((n + 1))
    done
    [ "$n" -ge "$1" ]
}
# shellcheck disable=SC2317  # run by wait_for
gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:.*Z' "/proc/$1/status"; }
init_d() {          # ACTION: /etc/init.d/redlockd ACTION, its output in $tmp/init.out
    /etc/init.d/redlockd "$1" >"$tmp/init.out" 2>&1
}
if [ "$init" = sysv ]; then
    conf=/etc/redlockd/redlockd.yml
    cp -p "$conf" "$tmp/conf.orig"
    iport=$(free_port)
    mport=$(free_port)
    # The installed conffile (root:redlockd 0640, kept by cat's truncation),
    # pointed at the test's masters and free ports.
    cat >"$conf" <<EOF2
listen:
  tcp: "127.0.0.1:$iport"
  unix: "/run/redlockd/redlockd.sock"
masters: [$masters]
metrics:
  listen: "127.0.0.1:$mport"
EOF2
    cp -p "$conf" "$tmp/conf.good"
    # A reinstall (the edited conffile kept) lets postinst start it.
    set_policy 0
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall \
            -o Dpkg::Options::=--force-confold "$(realpath "$deb")" >"$tmp/reinstall.log" 2>&1 &&
       grep -q '^redlockd: systemd is not running here: started by /etc/init.d/redlockd' "$tmp/reinstall.log"; then
        say "postinst: $(grep -A1 '^redlockd: ' "$tmp/reinstall.log" | tr -s ' \n' ' ')"
    else
        bad "postinst did not start redlockd through /etc/init.d/redlockd: $(cat "$tmp/reinstall.log")"
    fi
    ipid=$(cat /run/redlockd.pid 2>/dev/null)
    [ -n "$ipid" ] && pids+=("$ipid")     # killed on exit, whatever user it runs as
    if [ -n "$ipid" ] && [ "$(stat -c %U "/proc/$ipid" 2>/dev/null) $(cat "/proc/$ipid/comm" 2>/dev/null)" = "redlockd redlockd" ]; then
        say "the init script's daemon runs as user redlockd (pid $ipid)"
    else
        bad "no redlockd of user redlockd in /run/redlockd.pid ('$ipid')"
    fi
    perm=$(stat -c '%a %U:%G' /run/redlockd 2>/dev/null)
    [ "$perm" = "755 redlockd:redlockd" ] || bad "/run/redlockd is '$perm', not '755 redlockd:redlockd'"
    log=/var/log/redlockd/redlockd.log
    grep -q ' ready: 5 masters' "$log" 2>/dev/null || bad "$log has no 'ready: 5 masters' line"
    if init_d status && grep -q "redlockd is running (pid $ipid)" "$tmp/init.out"; then
        say "status: $(cat "$tmp/init.out")"
    else
        bad "/etc/init.d/redlockd status: $(cat "$tmp/init.out")"
    fi
    # shellcheck disable=SC2317  # run by wait_for
    iup() { printf 'STATS\n' | nc -N 127.0.0.1 "$iport" | grep -q '^STAT masters_up 5'; }
    wait_for 10 "the init script's redlockd with 5 masters up" iup

    # A lock through the Unix socket, held by a client while the daemon runs.
    mports=()
    for m in $masters; do m=${m##*:}; mports+=("${m%%\"*}"); done
    /usr/bin/redlockctl -S /run/redlockd/redlockd.sock -n deb-init -c 'sleep 60' \
        >"$tmp/holder.out" 2>&1 &
    holder=$!
    pids+=("$holder")
    wait_for 10 "deb-init held on a quorum of the masters" held_on 3 &&
        say "the installed redlockctl holds deb-init through /run/redlockd/redlockd.sock"
    out=$(/usr/bin/redlockctl -S /run/redlockd/redlockd.sock status deb-init 2>&1)
    case $out in
    *"deb-init: held by"*) ;;
    *) bad "redlockctl status deb-init: '$out'" ;;
    esac

    # reload: checked, sent, logged.
    from=$(stat -c %s "$log")
    if init_d reload && tail -c +$((from + 1)) "$log" | grep -q 'SIGHUP: reloading' &&
       tail -c +$((from + 1)) "$log" | grep -q 'reload: done'; then
        say "reload: $(tr -s '\n' ' ' <"$tmp/init.out")(the log: $(tail -c +$((from + 1)) "$log" | grep -m1 'reload: done' | cut -c1-40)...)"
    else
        bad "reload: $(cat "$tmp/init.out"); the log: $(tail -c +$((from + 1)) "$log")"
    fi
    # A bad file: reload fails, visibly, and the daemon runs on with its lock.
    printf 'masters: 42\n' >>"$conf"
    from=$(stat -c %s "$log")
    if init_d reload; then
        bad "reload of a bad file succeeded: $(cat "$tmp/init.out")"
    elif grep -q 'redlockd: not reloaded: the daemon runs on as it was (redlockd -t refused' "$tmp/init.out"; then
        say "reload of a bad file refused: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "reload of a bad file failed without saying why: $(cat "$tmp/init.out")"
    fi
    tail -c +$((from + 1)) "$log" | grep -q 'SIGHUP' && bad "a bad file was sent to the daemon (SIGHUP)"
    gone "$ipid" && bad "the daemon is gone after a refused reload"
    held_on 3 || bad "deb-init is no longer held after a refused reload"

    # A file -t accepts but the daemon refuses (a listener changed needs a
    # restart): reload fails with the daemon's words; the daemon runs on.
    sed "s/127.0.0.1:$iport/127.0.0.1:$(free_port)/" "$tmp/conf.good" >"$conf"
    if init_d reload; then
        bad "reload of a changed listener succeeded: $(cat "$tmp/init.out")"
    elif grep -q '^error reload: .*listen.tcp' "$tmp/init.out"; then
        say "reload of a changed listener refused: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "reload of a changed listener failed without the daemon's words: $(cat "$tmp/init.out")"
    fi
    gone "$ipid" && bad "the daemon is gone after a refused reload"
    cp -p "$tmp/conf.good" "$conf"
    printf 'masters: 42\n' >>"$conf"

    # start refuses a bad file (with the daemon stopped, below) and says why.
    # stop: TERM; the process is gone, its lock released on every master.
    if init_d stop && gone "$ipid" && [ ! -e /run/redlockd.pid ]; then
        say "stop: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "stop: $(cat "$tmp/init.out"); pid $ipid gone: $(gone "$ipid" && echo yes || echo no)"
    fi
    held_on 1 && bad "deb-init is still on a master after stop"
    init_d status
    [ $? -eq 3 ] || bad "status of a stopped daemon: $(cat "$tmp/init.out") (exit 3 expected)"
    if init_d start; then
        bad "start with a bad file succeeded: $(cat "$tmp/init.out")"
    elif grep -q 'redlockd: not started (redlockd -t refused' "$tmp/init.out"; then
        say "start with a bad file refused: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "start with a bad file failed without saying why: $(cat "$tmp/init.out")"
    fi
    daemon_runs && bad "a redlockd runs after a refused start"
    # A file -t accepts, but a listener the daemon cannot bind (a master's
    # port): start waits for it to say ready, sees it exit, and says why.
    sed "s/127.0.0.1:$iport/127.0.0.1:${mports[0]}/" "$tmp/conf.good" >"$conf"
    if init_d start; then
        bad "start on a port in use succeeded: $(cat "$tmp/init.out")"
    elif grep -q "redlockd: not started; see /var/log/redlockd/redlockd.log" "$tmp/init.out" &&
         grep -q "${mports[0]}" "$tmp/init.out"; then
        say "start on a port in use failed: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "start on a port in use failed without saying why: $(cat "$tmp/init.out")"
    fi
    [ -e /run/redlockd.pid ] && bad "/run/redlockd.pid left by a failed start"

    # start again (service(8)).
    cp -p "$tmp/conf.good" "$conf"
    service redlockd start >"$tmp/init.out" 2>&1 || bad "service redlockd start: $(cat "$tmp/init.out")"
    ipid=$(cat /run/redlockd.pid 2>/dev/null)
    [ -n "$ipid" ] && pids+=("$ipid")
    wait_for 10 "the started redlockd with 5 masters up" iup
    # restart: a new process, the old one gone.
    if init_d restart && npid=$(cat /run/redlockd.pid) && [ "$npid" != "$ipid" ] && gone "$ipid"; then
        say "restart: $(tr -s '\n' ' ' <"$tmp/init.out")(pid $ipid, then $npid)"
        ipid=$npid
        pids+=("$ipid")
    else
        bad "restart: $(cat "$tmp/init.out")"
    fi
    wait_for 10 "the restarted redlockd with 5 masters up" iup

    # reload's verdict is the daemon's.  A daemon that cannot answer
    # (stopped by SIGSTOP: the SIGHUP waits) gives none in 5 s: a failure.
    kill -STOP "$ipid"
    from=$(stat -c %s "$log")
    if init_d reload; then
        bad "reload of a stopped daemon succeeded: $(cat "$tmp/init.out")"
    elif grep -q 'redlockd: no reload verdict in 5 s; see /var/log/redlockd/redlockd.log' "$tmp/init.out"; then
        say "reload without a verdict: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "reload of a stopped daemon failed without saying why: $(cat "$tmp/init.out")"
    fi
    kill -CONT "$ipid"
    # shellcheck disable=SC2317  # run by wait_for
    logged() { tail -c +$((from + 1)) "$log" | grep -q "$1"; }
    wait_for 10 "the pending SIGHUP's reload: done" logged 'reload: done'
    # log.level warn hides "reload: done": no refusal in 2 s is success, said so.
    printf 'log:\n  level: warn\n' >>"$conf"
    if init_d reload && grep -q '(no refusal logged; log.level warn hides the verdict)' "$tmp/init.out"; then
        say "reload at log.level warn: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "reload at log.level warn: $(cat "$tmp/init.out")"
    fi
    cp -p "$tmp/conf.good" "$conf"
    init_d reload || bad "reload back to log.level info: $(cat "$tmp/init.out")"
    # A daemon that dies during the reload: a failure, with its last lines.
    # (the SIGHUP waits in a stopped daemon, which is then killed)
    kill -STOP "$ipid"
    init_d reload &
    rpid=$!
    # shellcheck disable=SC2317  # run by wait_for
    hup_pending() { [ $((0x$(awk '/^ShdPnd:/ { print $2 }' "/proc/$ipid/status") & 1)) -ne 0 ]; }  # bit 0: signal 1
    wait_for 10 "the reload's SIGHUP pending" hup_pending
    kill -KILL "$ipid"
    if wait "$rpid"; then
        bad "reload of a daemon that died succeeded: $(cat "$tmp/init.out")"
    elif grep -q 'redlockd: the daemon exited during the reload; see /var/log/redlockd/redlockd.log' "$tmp/init.out"; then
        say "reload of a daemon that died: $(tr -s '\n' ' ' <"$tmp/init.out")"
    else
        bad "reload of a daemon that died failed without saying so: $(cat "$tmp/init.out")"
    fi
    wait_for 5 "the killed daemon gone" gone "$ipid"

    # Zombies: a daemon that exited, not reaped by its parent (a container's
    # PID 1 that does not reap) is not running.  noreap_init_d runs the init
    # script under a parent that adopts the orphans (the daemon
    # start-stop-daemon put in the background) and never reaps them.
    zombie() { grep -qs "^$1 (redlockd) Z" "/proc/$1/stat"; }
    noreap_init_d() {   # ACTION
        rm -f "$tmp/noreap.rc"
        python3 -c '
import ctypes, os, signal, subprocess, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl: " + os.strerror(ctypes.get_errno()))
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1] + ".new", "w") as f:
    f.write("%d\n" % rc)
os.rename(sys.argv[1] + ".new", sys.argv[1])
while True:
    signal.pause()
' "$tmp/noreap.rc" /etc/init.d/redlockd "$1" >"$tmp/init.out" 2>&1 &
        noreap=$!
        pids+=("$noreap")
        disown
        wait_for 30 "/etc/init.d/redlockd $1 under a parent that does not reap" test -s "$tmp/noreap.rc" ||
            return 1
        return "$(cat "$tmp/noreap.rc")"
    }
    # start after a daemon killed: its pid file is stale.
    if noreap_init_d start && zpid=$(cat /run/redlockd.pid) && [ "$zpid" != "$ipid" ] &&
       [ "$(awk '{ print $4 }' "/proc/$zpid/stat")" = "$noreap" ]; then
        pids+=("$zpid")
        wait_for 10 "the redlockd adopted by a parent that does not reap, 5 masters up" iup
    else
        bad "start under a parent that does not reap: $(cat "$tmp/init.out") (pid $(cat /run/redlockd.pid 2>/dev/null), parent $noreap)"
    fi
    # It dies (TERM, not from the script): a zombie; status: not running.
    kill -TERM "$zpid"
    if wait_for 10 "pid $zpid a zombie" zombie "$zpid"; then
        init_d status
        rc=$?
        if [ $rc -eq 1 ] && grep -q "redlockd is not running (pid $zpid exited: a zombie" "$tmp/init.out"; then
            say "status of a zombie: $(cat "$tmp/init.out")"
        else
            bad "status of a zombie (pid $zpid): exit $rc, $(cat "$tmp/init.out")"
        fi
    fi
    # start: the zombie is no daemon.
    if noreap_init_d start && npid=$(cat /run/redlockd.pid) && [ "$npid" != "$zpid" ] &&
       ! grep -q 'already running' "$tmp/init.out" && daemon_runs; then
        say "start over a zombie: $(tr -s '\n' ' ' <"$tmp/init.out")(pid $npid)"
        zpid=$npid
        pids+=("$zpid")
        wait_for 10 "the redlockd started over a zombie, 5 masters up" iup
    else
        bad "start over a zombie (pid $zpid): $(cat "$tmp/init.out")"
    fi
    # restart and stop: the stopped daemon stays a zombie; both succeed at once.
    t0=$SECONDS
    if noreap_init_d restart && npid=$(cat /run/redlockd.pid) && [ "$npid" != "$zpid" ] &&
       zombie "$zpid" && daemon_runs; then
        say "restart leaving a zombie: $(tr -s '\n' ' ' <"$tmp/init.out")(pid $zpid, then $npid; $((SECONDS - t0)) s)"
        zpid=$npid
        pids+=("$zpid")
        wait_for 10 "the redlockd restarted over a zombie, 5 masters up" iup
    else
        bad "restart leaving a zombie (pid $zpid): $(cat "$tmp/init.out"); zombie: $(zombie "$zpid" && echo yes || echo no)"
    fi
    t0=$SECONDS
    if init_d stop && zombie "$zpid" && [ ! -e /run/redlockd.pid ]; then
        say "stop leaving a zombie: $(tr -s '\n' ' ' <"$tmp/init.out")(pid $zpid; $((SECONDS - t0)) s)"
    else
        bad "stop leaving a zombie (pid $zpid): $(cat "$tmp/init.out"); zombie: $(zombie "$zpid" && echo yes || echo no)"
    fi
    init_d status
    [ $? -eq 3 ] || bad "status after stop, a zombie left: $(cat "$tmp/init.out") (exit 3 expected)"
    daemon_runs && bad "a redlockd runs after stop"
    init_d start || bad "start: $(cat "$tmp/init.out")"
    ipid=$(cat /run/redlockd.pid 2>/dev/null)
    [ -n "$ipid" ] && pids+=("$ipid")
    wait_for 10 "the started redlockd with 5 masters up" iup
    # An upgrade (a reinstall: /usr/bin/redlockd replaced) restarts the
    # daemon that runs the replaced binary.
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall \
            -o Dpkg::Options::=--force-confold "$(realpath "$deb")" >"$tmp/reinstall.log" 2>&1 &&
       npid=$(cat /run/redlockd.pid) && [ "$npid" != "$ipid" ] && gone "$ipid" &&
       grep -q '^redlockd: systemd is not running here: started by /etc/init.d/redlockd' "$tmp/reinstall.log"; then
        say "upgrade: the running daemon (pid $ipid) restarted (pid $npid)"
        ipid=$npid
        pids+=("$ipid")
    else
        bad "upgrade did not restart the running daemon (pid $ipid): $(cat "$tmp/reinstall.log")"
    fi
    wait_for 10 "the upgraded redlockd with 5 masters up" iup
    # An upgrade whose restart redlockd -t refuses: the previous daemon runs
    # on its deleted binary, and postinst says so (not "started").
    printf 'masters: 42\n' >>"$conf"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall \
            -o Dpkg::Options::=--force-confold "$(realpath "$deb")" >"$tmp/reinstall.log" 2>&1 &&
       grep -q "^redlockd: the running redlockd (pid $ipid) is the previous version: its restart failed" "$tmp/reinstall.log" &&
       ! grep -q 'started by /etc/init.d/redlockd' "$tmp/reinstall.log"; then
        say "upgrade refused by redlockd -t: $(grep -A1 '^redlockd: ' "$tmp/reinstall.log" | tr -s ' \n' ' ')"
    else
        bad "upgrade refused by redlockd -t (pid $ipid): $(cat "$tmp/reinstall.log")"
    fi
    cp -p "$tmp/conf.good" "$conf"
    init_d restart || bad "restart after the refused upgrade: $(cat "$tmp/init.out")"
    ipid=$(cat /run/redlockd.pid 2>/dev/null)
    [ -n "$ipid" ] && pids+=("$ipid")
    wait_for 10 "the restarted redlockd with 5 masters up" iup

    # remove stops it; a reinstall starts it again.
    if DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq redlockd >"$tmp/remove.log" 2>&1 &&
       gone "$ipid" && [ ! -e /run/redlockd.pid ]; then
        say "remove stopped the daemon (pid $ipid)"
    else
        bad "remove did not stop the daemon (pid $ipid): $(cat "$tmp/remove.log")"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold \
        "$(realpath "$deb")" >"$tmp/reinstall.log" 2>&1 ||
        bad "install after remove: $(cat "$tmp/reinstall.log")"
    ipid=$(cat /run/redlockd.pid 2>/dev/null)
    [ -n "$ipid" ] && pids+=("$ipid")
    wait_for 10 "the reinstalled redlockd with 5 masters up" iup
    # A purge that policy-rc.d forbids to stop it: the daemon runs on, and
    # the purge says so with its pid before removing its pid file.
    set_policy 101
    if DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq redlockd >"$tmp/purge.log" 2>&1 &&
       grep -q "^redlockd: redlockd (pid $ipid) still runs: policy-rc.d forbade stopping it; stop it with: kill -TERM $ipid" "$tmp/purge.log" &&
       ! gone "$ipid"; then
        say "purge forbidden to stop: $(grep '^redlockd: ' "$tmp/purge.log" | tr -s ' \n' ' ')"
    else
        bad "purge forbidden to stop the daemon (pid $ipid) did not say so: $(cat "$tmp/purge.log")"
    fi
    kill -TERM "$ipid"
    wait_for 10 "the daemon left by the purge stopped" gone "$ipid"
fi

# ---- purge: nothing left but the user and group ----
# (without systemd, the purge above forbidden to stop the daemon was the last)
if dpkg-query -W -f='${Status}' redlockd 2>/dev/null | grep -q installed &&
   ! DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq redlockd >"$tmp/purge.log" 2>&1; then
    cat "$tmp/purge.log"
    bad "apt-get purge redlockd failed"
fi
left=""
while read -r f; do
    [ -d "$f" ] && continue     # directories (and /lib's link) other packages share
    [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done <"$tmp/files"
[ -e /etc/redlockd ] && left="$left /etc/redlockd"
for f in /etc/systemd/system/*.wants/redlockd* /var/lib/systemd/deb-systemd-helper-enabled/*redlockd* \
         /etc/rc?.d/*redlockd /var/log/redlockd /run/redlockd.pid /run/redlockd \
         /var/lib/systemd/deb-systemd-helper-masked/*redlockd*; do
    [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
dpkg-statoverride --list /etc/redlockd/redlockd.yml >/dev/null && left="$left (a dpkg-statoverride)"
if [ "$init" = sysv ] && daemon_runs; then
    left="$left (a redlockd of user redlockd, still running)"
fi
if [ -n "$left" ]; then
    bad "left after purge:$left"
else
    say "purged: no file of it left; the user and group redlockd stay (Debian policy)"
fi
exit $fail
