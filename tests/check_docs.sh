#!/bin/sh
# check_docs.sh: the project speaks of itself alone.  Its documents
# (README.md, docs/*.md, proto/*.md, every README.md under tests/, the man pages) and
# its sources (C, shell, make fragments, configs, units; comments and
# strings alike) must
#   - name no path into a directory beside the repository (the shared
#     directory one level up that an earlier README linked),
#   - mention no issue numbers (the word issue or issues, then a number,
#     with or without a '#' before it),
#   - and every relative Markdown link must name a file that exists
#     inside the repository;
# and the index of the tests, tests/README.md, must name every suite.
# Each finding is printed as file:line: text; the exit status is 1 when
# there is one.  Fuzzing corpora and regression inputs are data, not
# prose, and are not read.
#
# usage: tests/check_docs.sh      (from the repository root; make check-docs)
set -u
LC_ALL=C
export LC_ALL
root=$(pwd -P)
bad=0

# The files, each once, without build output or data.
files=$(find . \( -path ./.git -o -path './build*' -o -path ./run \
                  -o -path ./tests/fuzz/corpus -o -path ./tests/fuzz/regress \) -prune \
             -o -type f \( -name README.md -o -path './proto/*.md' -o -path './docs/*.md' \
                  -o -name '*.[158]' -o -name '*.[ch]' -o -name '*.sh' -o -name '*.mk' \
                  -o -name Makefile -o -name '*.yml' -o -path './systemd/*' \
                  -o -path ./.ci/run \) -print | sed 's|^\./||' | sort)
mds=$(printf '%s\n' "$files" | grep '\.md$')

# The patterns are spelled so that this file does not match them itself.
if printf '%s\n' "$files" | tr '\n' '\0' | xargs -0 grep -n -E '\.\./shared' /dev/null; then
    echo "check-docs: the lines above point outside the repository"
    bad=1
fi
if printf '%s\n' "$files" | tr '\n' '\0' | \
        xargs -0 grep -n -i -E '(^|[^[:alnum:]_])issues?[[:space:]]*#?[0-9]' /dev/null; then
    echo "check-docs: the lines above mention issue numbers"
    bad=1
fi

# Relative Markdown links: [text](target) where target is not a URL or
# an anchor; the part before any '#' must exist inside the repository.
links=$(for md in $mds; do
    dir=$(dirname "$md")
    grep -n -o -E '\]\([^)[:space:]]+' "$md" | while IFS= read -r hit; do
        line=${hit%%:*}
        target=${hit#*:](}
        case $target in
            http:*|https:*|mailto:*|'#'*) continue ;;
        esac
        path=${target%%#*}
        full=$(realpath -m "$dir/$path")
        case $full in
            "$root"/*) [ -e "$full" ] && continue
                       echo "$md:$line: link to a missing file: $target" ;;
            *)         echo "$md:$line: link to a file outside the repository: $target" ;;
        esac
    done
done)
if [ -n "$links" ]; then
    printf '%s\n' "$links"
    bad=1
fi

# The index of the tests (tests/README.md) names every suite the Makefile
# builds (UNIT_TESTS and INTEG_TESTS) and every tests/check_*.c, and no
# suite that is gone.
suites=$(sed -n '/^UNIT_TESTS *:=/,/^TEST_BINS/p' Makefile | tr ' \\' '\n\n' | \
         grep -E '^check_[a-z_]+$')
for f in tests/check_*.c; do
    suites="$suites $(basename "$f" .c)"
done
for s in $(printf '%s\n' $suites | sort -u); do
    grep -q "\`$s\`" tests/README.md || {
        echo "tests/README.md: suite $s is not in the index"; bad=1; }
    [ -f "tests/$s.c" ] || { echo "Makefile: suite $s has no tests/$s.c"; bad=1; }
done
for s in $(grep -o -E '^\| `check_[a-z_]+`' tests/README.md | tr -d '|` '); do
    printf '%s\n' $suites | grep -qx "$s" || {
        echo "tests/README.md: $s is indexed but is no suite of the Makefile"; bad=1; }
done

n=$(printf '%s\n' "$files" | wc -l)
if [ $bad -eq 0 ]; then
    echo "check-docs: $n files name nothing outside the repository and no issue numbers"
fi
exit $bad
