#!/bin/sh
# The masters' scripts pass luacheck as the daemon sends them: each
# daemon/scripts/<name>.lua after the clock wrapper's local
# (daemon/master.c) and, when the script has the line "-- uses
# prelude.lua", after the prelude; the prelude itself on its own.  Lines
# keep their numbers in each script's own file: luacheck's findings are
# printed as daemon/scripts/<name>.lua:LINE.  Exit status 1 on any finding.
set -eu

dir=daemon/scripts
out=${TMPDIR:-/tmp}/check-lua.$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
if ! command -v luacheck >/dev/null; then
    echo "check-lua: luacheck not found (Debian package lua-check; make deps installs it)"
    exit 1
fi
pre_lines=$(wc -l <"$dir/prelude.lua")
bad=0
for f in "$dir"/*.lua; do
    name=$(basename "$f")
    {
        echo "local rl_clock_us = false"
        if [ "$name" != prelude.lua ] && grep -qx -- '-- uses prelude.lua' "$f"; then
            cat "$dir/prelude.lua"
            skip=$((pre_lines + 1))
        else
            skip=1
        fi
        cat "$f"
    } >"$out/$name"
    if ! luacheck --config "$dir/.luacheckrc" --formatter plain --codes "$out/$name" \
            >"$out/$name.txt" 2>&1; then
        # Back to the file's own line numbers (the prelude's lines are its own).
        awk -F: -v skip="$skip" -v f="$f" -v pre="$dir/prelude.lua" -v pl="$pre_lines" '
            NF >= 3 && $2 ~ /^[0-9]+$/ {
                n = $2 - skip; file = f
                if (n < 1 && skip > 1) { n = $2 - 1; file = pre }
                rest = $0; sub(/^[^:]*:[0-9]+:/, "", rest)
                print file ":" n ":" rest; next
            }
            { print }' "$out/$name.txt" >>"$out/findings"
        bad=1
    fi
done
if [ $bad -ne 0 ]; then
    awk '!seen[$0]++' "$out/findings"    # the prelude's, once
    echo "check-lua: luacheck found the above"
    exit 1
fi
echo "check-lua: $(ls "$dir"/*.lua | wc -l) scripts pass luacheck"
