#!/bin/sh
# The masters' scripts pass luacheck as the daemon sends them: each
# daemon/scripts/<name>.lua as daemon/scripts/embed.sh --lua assembles
# it (the prelude and the batched scripts where its lines ask for them),
# after the clock wrapper's local (daemon/master.c).  The assembled texts
# stay in build/check-lua/ (line numbers of a finding are theirs), the
# findings are printed with the script's name.  Exit status 1 on any.
set -eu

dir=daemon/scripts
out=${B:-build}/check-lua
if ! command -v luacheck >/dev/null; then
    echo "check-lua: luacheck not found (Debian package lua-check; make deps installs it)"
    exit 1
fi
rm -rf "$out"
mkdir -p "$out"
bad=0
n=0
for f in "$dir"/*.lua; do
    name=$(basename "$f")
    n=$((n + 1))
    {
        echo "local rl_clock_us = false"
        sh "$dir/embed.sh" --lua "$f"
    } >"$out/$name"
    if ! luacheck --config "$dir/.luacheckrc" --formatter plain --codes "$out/$name" \
            >"$out/$name.txt" 2>&1; then
        echo "$f, as sent ($out/$name):"
        sed 's/^/    /' "$out/$name.txt"
        bad=1
    fi
done
if [ $bad -ne 0 ]; then
    echo "check-lua: luacheck found the above"
    exit 1
fi
echo "check-lua: $n scripts pass luacheck, as the daemon sends them"
