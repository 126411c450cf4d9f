#!/usr/bin/env python3
"""check_layers.py: the daemon's modules form no circle, and the picture of
them in docs/how-it-works.md names every one.

A module is a name under daemon/: its .c and .h, and the files that carry
its name and an underscore (daemon/redlock_acquire.c and the private header
daemon/redlock_op.h are the Redlock engine's; daemon/master_eval.c and
daemon/master_link.h the master module's).  Module A uses module B when a
file of A includes "daemon/B.h" (or a file of B).  A circle (A uses B, and
B, through any path, uses A) is an error, printed with its path.

The section "The modules" of docs/how-it-works.md draws the modules as
floors: lines "floor N  file file ..." (a line that does not begin with
"floor" and is indented goes on with the floor above; words after "->" or
"starts" are arrows, not files).  Every module must stand on exactly one
floor, every include must point to a lower floor, and the section may
name no file that does not exist.  Each finding is printed on a line; the
exit status is 1 when there is one.

usage: python3 tests/check_layers.py      (from the repository root;
       make check-docs)
"""
import os
import re
import sys

DAEMON = 'daemon'
DOC = 'docs/how-it-works.md'
SECTION = '## The modules'


def module_of(stem, stems):
    """The module a file stem belongs to: the longest prefix before an '_'
    that is itself a module (has a .c file), else the stem."""
    parts = stem.split('_')
    for n in range(1, len(parts)):
        prefix = '_'.join(parts[:n])
        if prefix in stems:
            return prefix
    return stem


def main():
    bad = []
    files = sorted(f for f in os.listdir(DAEMON) if f.endswith(('.c', '.h')))
    c_stems = {f[:-2] for f in files if f.endswith('.c')}
    modules = {}
    for f in files:
        modules.setdefault(module_of(f[:-2], c_stems), []).append(f)
    uses = {m: set() for m in modules}
    for m, fs in modules.items():
        for f in fs:
            with open(os.path.join(DAEMON, f), encoding='utf-8') as fh:
                for inc in re.findall(r'^#include "daemon/([a-z0-9_]+)\.h"', fh.read(), re.M):
                    other = module_of(inc, c_stems)
                    if other != m and other in uses:
                        uses[m].add(other)

    # Circles: a depth-first walk that meets a module on its own path.
    state, path = {}, []

    def walk(m):
        state[m] = 'open'
        path.append(m)
        for n in sorted(uses[m]):
            if state.get(n) == 'open':
                circle = path[path.index(n):] + [n]
                bad.append('circle: ' + ' -> '.join(circle))
            elif n not in state:
                walk(n)
        path.pop()
        state[m] = 'done'

    for m in sorted(uses):
        if m not in state:
            walk(m)

    # The picture in the docs.
    try:
        with open(DOC, encoding='utf-8') as fh:
            text = fh.read()
    except OSError as e:
        bad.append(f'{DOC}: {e.strerror}')
        text = ''
    start = text.find('\n' + SECTION + '\n')
    if start < 0:
        bad.append(f'{DOC}: no section "{SECTION}"')
    else:
        end = text.find('\n## ', start + 1)
        section = text[start:end if end > 0 else len(text)]
        named = set(re.findall(r'daemon/([a-z0-9_]+\.[ch])\b', section))
        floors = {}
        current = None
        for line in section.split('\n'):
            mo = re.match(r'^floor\s+(\d+)\s+(.*)$', line)
            if mo:
                current = int(mo.group(1))
                rest = mo.group(2)
            elif current is not None and line.startswith(' ') and line.strip():
                rest = line
            else:
                current = None if not line.strip() or line.startswith('```') else current
                continue
            rest = re.split(r'->|starts', rest)[0]
            for word in re.findall(r'\b([a-z0-9_]+\.[ch])\b', rest):
                if word not in files:
                    bad.append(f'{DOC}: floor {current} names daemon/{word}, which does not exist')
                    continue
                m = module_of(word[:-2], c_stems)
                if m in floors and floors[m] != current:
                    bad.append(f'{DOC}: module {m} stands on floors {floors[m]} and {current}')
                floors[m] = current
        for m, fs in sorted(modules.items()):
            if m not in floors:
                bad.append(f'{DOC}: no floor of "{SECTION}" holds module {m} '
                           f'({", ".join("daemon/" + f for f in fs)})')
        for m in sorted(uses):
            for n in sorted(uses[m]):
                if m in floors and n in floors and floors[n] >= floors[m]:
                    bad.append(f'{DOC}: {m} (floor {floors[m]}) uses {n} (floor {floors[n]}), '
                               f'which is not below it')
        for f in sorted(named):
            if f not in files:
                bad.append(f'{DOC}: "{SECTION}" names daemon/{f}, which does not exist')

    for line in bad:
        print('check-layers: ' + line)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
