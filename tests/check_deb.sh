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
    if dpkg-query -W -f='${Status}' redlockd 2>/dev/null | grep -q installed; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq redlockd >/dev/null 2>&1
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_for() {        # SECONDS WHAT COMMAND...: until COMMAND succeeds
    local secs=$1 what=$2 _
    shift 2
    for _ in $(seq 1 $((secs * 20))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    bad "$what: not within $secs s"
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
dpkg -L redlockd | sort >"$tmp/files"

# The package's version is the release the daemon says it is (debian/changelog
# and the Makefile's VERSION agree), with its layout.
pkgver=$(dpkg-query -W -f '${Version}' redlockd)
case "$(/usr/bin/redlockd -V)" in
"redlockd $pkgver (layout "*) say "redlockd -V: $(/usr/bin/redlockd -V)" ;;
*) bad "package $pkgver, but redlockd -V says '$(/usr/bin/redlockd -V)'" ;;
esac

for f in /usr/bin/redlockd /usr/bin/redlockctl /lib/systemd/system/redlockd.service \
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
masters=""
for _ in 1 2 3 4 5; do
    port=$(free_port)
    mkdir -p "$tmp/m$port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly yes \
        --appendfsync always --dir "$tmp/m$port" --logfile "$tmp/m$port/log" &
    pids+=($!)
    disown
    masters="$masters\"127.0.0.1:$port\", "
    wait_for 5 "master $port" redis-cli -p "$port" ping
done
port=$(free_port)
cat >"$tmp/redlockd.yml" <<EOF2
listen:
  tcp: "127.0.0.1:$port"
  unix: ""
masters: [${masters%, }]
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

# ---- purge: nothing left but the user and group ----
if ! DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq redlockd >"$tmp/purge.log" 2>&1; then
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
         /var/lib/systemd/deb-systemd-helper-masked/*redlockd*; do
    [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
dpkg-statoverride --list /etc/redlockd/redlockd.yml >/dev/null && left="$left (a dpkg-statoverride)"
if [ -n "$left" ]; then
    bad "left after purge:$left"
else
    say "purged: no file of it left; the user and group redlockd stay (Debian policy)"
fi
exit $fail
