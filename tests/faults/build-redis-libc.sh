#!/bin/sh
# build-redis-libc.sh DIR: a redis-server whose wall clock libfaketime can
# step, built into DIR/redis-server (make: build/redis-libc/redis-server).
#
# Debian's packaged redis-server is linked with jemalloc, and under
# libfaketime it dies at start-up ("libfaketime: Cannot recover from
# unexpected recursive calls to clock_gettime()"): no libfaketime setting
# avoids that.  The same source built with the C library's malloc runs
# under libfaketime.  So this script builds Debian's own source package of
# the installed redis-server (the same upstream version and Debian's
# patches), with MALLOC=libc BUILD_TLS=no, the server only.
#
# Steps, each skipped when its result is already there (run it again after
# a failure and it goes on where it stopped):
#   1. DIR/apt: a private apt setup (its own sources list with deb-src
#      entries for deb.debian.org, its own lists and cache directories;
#      nothing of the system's apt configuration, lists or cache changes)
#      and `apt-get update` with it;
#   2. DIR/dl: `apt-get source --download-only redis` (the .dsc, the
#      upstream tarball and Debian's tarball), the installed package's
#      version when the archive still has it, else the newest one;
#   3. DIR/src: dpkg-source -x of the .dsc (the upstream tarball with
#      Debian's patches applied); the upstream tarball alone when
#      dpkg-source is missing;
#   4. make -C src redis-server MALLOC=libc BUILD_TLS=no (about 20 s on two
#      cores), its output in DIR/build.log; the binary is copied to
#      DIR/redis-server when `redis-server --version` says malloc=libc.
# Exits non-zero with one line naming the step that failed (no network,
# no deb-src entry for redis, a failed build) and where its output is.
#
# usage: tests/faults/build-redis-libc.sh DIR
set -u
dir=${1:?usage: build-redis-libc.sh DIR}
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd -P) || exit 1
apt="$dir/apt"
dl="$dir/dl"
src="$dir/src"
log="$dir/build.log"

fail() {
    echo "build-redis-libc: $*" >&2
    exit 1
}

# The redis build must not see this project's make state or flags, nor
# take this repository's commit for its own (its release.h asks git).
unset MAKEFLAGS MFLAGS MAKELEVEL CFLAGS CPPFLAGS LDFLAGS
GIT_CEILING_DIRECTORIES=$dir
export GIT_CEILING_DIRECTORIES
jobs=$(nproc 2>/dev/null || echo 2)

for tool in apt-get make cc tar; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (make deps installs build-essential)"
done

# 1 and 2: the source package, fetched once.
dsc=$(ls "$dl"/redis_*.dsc 2>/dev/null | head -n 1)
if [ -z "$dsc" ]; then
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$dl" ||
        exit 1
    cat > "$apt/redis.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # Read after the system's configuration (-c), so it wins; the hooks
    # that the system runs after its own updates are not run for this one.
    # The downloads stay with the user who runs this (as root, apt would
    # hand them to its _apt user, who cannot write into a checkout under a
    # private directory, and warn, which the check below takes for a
    # failed download).
    cat > "$apt/apt.conf" <<EOF
APT::Sandbox::User "$(id -un)";
Dir::Etc::SourceList "$apt/redis.sources";
Dir::Etc::SourceParts "$apt/sources.list.d";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
EOF
    [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
        fail "/usr/share/keyrings/debian-archive-keyring.gpg is missing (package debian-archive-keyring)"
    echo "build-redis-libc: apt-get update with deb-src entries of its own (in $apt)"
    if ! apt-get -q -c "$apt/apt.conf" update > "$apt/update.log" 2>&1 ||
            grep -q '^\(W\|E\): ' "$apt/update.log"; then
        sed -n 's/^\(W\|E\): /    /p' "$apt/update.log" | head -n 5 >&2
        fail "apt-get update failed: no network, or deb.debian.org cannot be reached (see $apt/update.log)"
    fi
    # The installed redis-server's source version, when the archive still has it.
    want=$(dpkg-query -W -f '${source:Version}' redis-server 2>/dev/null || true)
    got=""
    if [ -n "$want" ]; then
        echo "build-redis-libc: downloading the source of redis $want"
        (cd "$dl" && apt-get -q -c "$apt/apt.conf" source --download-only "redis=$want") \
            > "$dl/source.log" 2>&1 && got=$want
    fi
    if [ -z "$got" ]; then
        echo "build-redis-libc: downloading the source of redis (newest in bookworm)"
        (cd "$dl" && apt-get -q -c "$apt/apt.conf" source --download-only redis) \
            >> "$dl/source.log" 2>&1 ||
            fail "apt-get source redis failed: no deb-src entry for redis in bookworm, or the download failed (see $dl/source.log)"
    fi
    dsc=$(ls "$dl"/redis_*.dsc 2>/dev/null | head -n 1)
    [ -n "$dsc" ] || fail "apt-get source redis left no .dsc in $dl (see $dl/source.log)"
fi

# 3: the source tree, unpacked once.
tree=$(ls -d "$src"/redis-*/ 2>/dev/null | head -n 1)
if [ -z "$tree" ]; then
    mkdir -p "$src" || exit 1
    if command -v dpkg-source >/dev/null; then
        # Its warning that the .dsc's signature cannot be checked (no
        # Debian developer keyring) is expected: apt-get checked every
        # file against the archive's signed index.
        echo "build-redis-libc: dpkg-source -x $(basename "$dsc")"
        (cd "$src" && dpkg-source -x "$dsc") > "$src/unpack.log" 2>&1 ||
            fail "dpkg-source -x $dsc failed (see $src/unpack.log)"
    else
        orig=$(ls "$dl"/redis_*.orig.tar.* 2>/dev/null | head -n 1)
        [ -n "$orig" ] || fail "no upstream tarball in $dl"
        echo "build-redis-libc: dpkg-source is missing (package dpkg-dev): unpacking" \
             "$(basename "$orig") without Debian's patches"
        tar -C "$src" -xf "$orig" > "$src/unpack.log" 2>&1 ||
            fail "tar -xf $orig failed (see $src/unpack.log)"
    fi
    tree=$(ls -d "$src"/redis-*/ 2>/dev/null | head -n 1)
    [ -n "$tree" ] || fail "nothing was unpacked into $src (see $src/unpack.log)"
fi

# 4: the server, with the C library's malloc (make does nothing when it is up to date).
echo "build-redis-libc: make redis-server MALLOC=libc BUILD_TLS=no in $tree (log: $log)"
start=$(date +%s)
if ! make -C "$tree/src" -j"$jobs" MALLOC=libc BUILD_TLS=no redis-server > "$log" 2>&1; then
    tail -n 15 "$log" >&2
    fail "the build of redis-server failed (see $log)"
fi
version=$("$tree/src/redis-server" --version 2>&1)
case $version in
    *malloc=libc*) ;;
    *) fail "the built redis-server does not use the C library's malloc: $version" ;;
esac
cp "$tree/src/redis-server" "$dir/redis-server.tmp" && mv "$dir/redis-server.tmp" "$dir/redis-server" ||
    fail "cannot copy redis-server into $dir"
echo "build-redis-libc: $dir/redis-server ($version) in $(( $(date +%s) - start )) s"
