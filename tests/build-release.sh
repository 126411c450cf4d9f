#!/bin/sh
# build-release.sh COMMIT DIR: the daemon and redlockctl of a past commit of
# this repository, built into DIR/redlockd and DIR/redlockctl (make:
# build/release-<commit>/, for the upgrade tests: tests/check_upgrade.c and
# the fault suite's upgrade schedules).
#
# The commit's own tree (git archive, into DIR/src) is built with its own
# Makefile into its own build directory (DIR/src/build): nothing of the
# current checkout, its build/ or its make flags is used.  It needs only
# the packages the current build needs (make deps).
#
# The build's output goes to DIR/build.log.  When both programs are in
# place, DIR/built is written (the commit's full name and how long the
# build took): make rebuilds only when that stamp is missing.  Exits
# non-zero with one line saying why: a commit that is not in this clone
# (a shallow clone fetches its history first, once: git fetch
# --unshallow), a failed build.
#
# usage: tests/build-release.sh COMMIT DIR
set -u
commit=${1:?usage: build-release.sh COMMIT DIR}
dir=${2:?usage: build-release.sh COMMIT DIR}

fail() {
    echo "build-release: $*" >&2
    exit 1
}

top=$(cd "$(dirname "$0")/.." && pwd -P) || exit 1
command -v git >/dev/null ||
    fail "git is not installed: it reads $commit from the repository's history"
if ! why=$(git -C "$top" rev-parse --git-dir 2>&1 >/dev/null); then
    # git's own reason first (not a repository; or one it refuses to read,
    # owned by another user).
    fail "git cannot read $top ($(printf '%s' "$why" | head -n 1)): $commit is built from the repository's history (git clone it)"
fi
if ! full=$(git -C "$top" rev-parse --verify --quiet "$commit^{commit}") &&
        [ "$(git -C "$top" rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
    # A shallow clone (a CI's, say): fetch the history once, saying so.
    echo "build-release: $commit is not in this shallow clone: git fetch --unshallow"
    git -C "$top" fetch --quiet --unshallow >&2 ||
        fail "commit $commit is not in this shallow clone and 'git fetch --unshallow' failed: fetch the history, then make again"
fi
if ! full=$(git -C "$top" rev-parse --verify --quiet "$commit^{commit}"); then
    fail "commit $commit is not in this clone: run 'git fetch origin', then make again"
fi

mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd -P) || exit 1
if [ -s "$dir/built" ] && [ -x "$dir/redlockd" ] && [ -x "$dir/redlockctl" ] &&
        [ "$(head -n 1 "$dir/built")" = "$full" ]; then
    exit 0
fi
rm -f "$dir/built" "$dir/redlockd" "$dir/redlockctl"
rm -rf "$dir/src" || exit 1
mkdir -p "$dir/src" || exit 1
log="$dir/build.log"

# The old build must not see this build's make state or flags (a
# SANITIZE=..., B=... or CFLAGS=... given to the current make).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES CFLAGS CPPFLAGS LDFLAGS B SANITIZE NO_SYSTEMD
jobs=$(nproc 2>/dev/null || echo 2)

start=$(date +%s)
echo "build-release: $commit ($(git -C "$top" log -1 --format=%cs "$full")) into $dir (log: $log)"
git -C "$top" archive --format=tar "$full" > "$dir/src.tar" 2> "$log" ||
    { cat "$log" >&2; fail "git archive $commit failed (see $log)"; }
tar -C "$dir/src" -xf "$dir/src.tar" >> "$log" 2>&1 ||
    { rm -f "$dir/src.tar"; fail "cannot unpack the tree of $commit into $dir/src (see $log)"; }
rm -f "$dir/src.tar"
if ! make -C "$dir/src" -j"$jobs" build/redlockd build/redlockctl >> "$log" 2>&1; then
    tail -n 15 "$log" >&2
    fail "the build of $commit failed (see $log)"
fi
cp "$dir/src/build/redlockd" "$dir/redlockd.tmp" && mv "$dir/redlockd.tmp" "$dir/redlockd" &&
    cp "$dir/src/build/redlockctl" "$dir/redlockctl.tmp" &&
    mv "$dir/redlockctl.tmp" "$dir/redlockctl" || fail "cannot copy the programs into $dir"
version=$("$dir/redlockd" -V 2>&1) || fail "$dir/redlockd -V failed: $version"
secs=$(( $(date +%s) - start ))
printf '%s\n%s\nbuilt in %s s\n' "$full" "$version" "$secs" > "$dir/built.tmp" &&
    mv "$dir/built.tmp" "$dir/built" || fail "cannot write $dir/built"
echo "build-release: $commit: $dir/redlockd ($version) and redlockctl in $secs s"
