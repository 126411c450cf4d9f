#!/bin/sh
# Reads the built binaries the way Debian's hardening-check does, with
# readelf only: a position-independent executable, full RELRO (GNU_RELRO and
# BIND_NOW), the stack protector and fortified libc calls in use.  For an
# object file (NAME.o) it checks the CET notes of -fcf-protection (x86-64):
# an executable drops them when any part lacks them, and Debian 12's C
# start files do.
#
# usage: tests/check_hardening.sh BINARY|OBJECT.o...
set -u
fail=0
for bin in "$@"; do
    bad=""
    case $bin in
    *.o)
        if [ "$(uname -m)" = x86_64 ] && ! readelf -n "$bin" | grep -q 'IBT, SHSTK'; then
            echo "check-hardening: $bin: no CET notes (-fcf-protection)" >&2
            fail=1
        else
            echo "check-hardening: $bin: CET notes"
        fi
        continue
    esac
    hdr=$(readelf -h "$bin") || { echo "check-hardening: $bin: not readable" >&2; exit 1; }
    dyn=$(readelf -d "$bin")
    syms=$(readelf --dyn-syms -W "$bin")
    echo "$hdr" | grep -q 'Type:[[:space:]]*DYN' || bad="$bad not-PIE(type)"
    echo "$dyn" | grep -q 'FLAGS_1.*PIE' || bad="$bad not-PIE(flags)"
    readelf -l -W "$bin" | grep -q GNU_RELRO || bad="$bad no-RELRO"
    echo "$dyn" | grep -Eq 'BIND_NOW|FLAGS_1.*NOW' || bad="$bad no-BIND_NOW"
    echo "$syms" | grep -q ' __stack_chk_fail' || bad="$bad no-stack-protector"
    echo "$syms" | grep -Eq ' __[a-z0-9_]+_chk(@|$)' || bad="$bad no-fortify"
    if [ -n "$bad" ]; then
        echo "check-hardening: $bin:$bad" >&2
        fail=1
    else
        echo "check-hardening: $bin: PIE, full RELRO, stack protector, fortify"
    fi
done
exit $fail
