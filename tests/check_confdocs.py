#!/usr/bin/env python3
"""check_confdocs.py: the configuration's documents agree with its code.

conf/conf.c's directive table (conf_directives[]) is the one source of each
setting's default, whether a reload can change it, and the range of a
number.  The three places people read them must say the same:

  - conf/redlockd.yml: the comment above each key says "Default X." (a
    string quoted, as YAML writes it) and "Restart." exactly for the
    settings a reload cannot change;
  - conf/redlockd.yml.5: each setting's entry gives "default X" (a string
    as \\(dqX\\(dq), "Restart" exactly for those settings, and a number's
    range "MIN to MAX";
  - docs/operating.md: the settings table's Default column.

Every setting of the table must appear in each, and each must name no
setting the table lacks.  Prints every disagreement as file:line: text and
exits 1 when there is one.

usage: tests/check_confdocs.py      (from the repository root)
"""
import re
import sys

ENTRY = re.compile(
    r'\{\s*"(\w+)",\s*(NULL|"(\w+)"),\s*(CONF_T_\w+),\s*offsetof\([^)]*\),\s*'
    r'([^,]+),\s*([^,]+),\s*([^,]+),\s*(NULL|"((?:[^"\\]|\\.)*)")', re.S)
STRINGISH = {"CONF_T_ADDR", "CONF_T_STRING", "CONF_T_MODE"}
NUMBER = {"CONF_T_INT", "CONF_T_MS", "CONF_T_DOUBLE"}

problems = []


def bad(path, line, text):
    problems.append(f"{path}:{line}: {text}")


def table():
    src = open("conf/conf.c").read()
    body = src[src.index("conf_directives[] = {"):]
    body = body[:body.index("\n};")]
    out = []
    for m in ENTRY.finditer(body):
        section, key, ctype, lo, hi, flags, default = (
            m.group(1), m.group(3), m.group(4), m.group(5).strip(), m.group(6).strip(),
            m.group(7).strip(), m.group(9))
        out.append({
            "name": section + ("." + key if key else ""),
            "section": section, "key": key or section, "type": ctype,
            "min": lo, "max": hi, "restart": "CONF_NO_RELOAD" in flags,
            "default": default,     # None: required
        })
    if len(out) < 50:
        bad("conf/conf.c", 1, f"only {len(out)} directives parsed: the table's shape changed")
    return out


def yml_rep(d):
    if d["default"] is None:
        return None
    if d["type"] in STRINGISH:
        return '"' + d["default"] + '"'
    if d["type"] == "CONF_T_LIST" and d["default"] == "":
        return "[]"
    return d["default"]


def number_range(d):
    lo, hi = d["min"], d["max"]
    if d["type"] == "CONF_T_DOUBLE":
        lo, hi = f"{float(lo):g}", f"{float(hi):g}"
    return lo, hi


def check_yml(dirs):
    path = "conf/redlockd.yml"
    lines = open(path).read().split("\n")
    section = None
    seen = set()
    for i, line in enumerate(lines):
        m = re.match(r"^(\w+):", line)
        if m:
            section = m.group(1)
            key = None
            comment_end = i
        else:
            m = re.match(r"^  #?(\w+):", line)     # "#key:" is a key left at its default
            if not m or section is None:
                continue
            key = m.group(1)
            comment_end = i
        name = section if key is None else section + "." + key
        d = next((x for x in dirs if x["name"] == name), None)
        if d is None:
            if key is not None or not any(x["section"] == section for x in dirs):
                bad(path, i + 1, f"{name}: no such setting in conf/conf.c")
            continue
        seen.add(name)
        # The comment lines right above the key, or above the keys before
        # it that the same comment covers.
        j = comment_end - 1
        while j >= 0 and re.match(r"^  \w+:", lines[j]):
            j -= 1
        comment = []
        while j >= 0 and re.match(r"^\s*#", lines[j]):
            comment.insert(0, re.sub(r"^\s*#\s?", "", lines[j]))
            j -= 1
        text = " ".join(comment)
        rep = yml_rep(d)
        if rep is not None and f"default {rep}".lower() not in text.lower():
            bad(path, i + 1, f"{name}: the comment does not say 'Default {rep}'")
        if d["type"] in NUMBER and re.fullmatch(r"-?[0-9.]+", d["min"]) \
                and re.fullmatch(r"[0-9.]+", d["max"]):
            lo, hi = number_range(d)
            if f"range {lo}..{hi}" not in text.lower():
                bad(path, i + 1, f"{name}: the comment does not give 'Range {lo}..{hi}'")
        if d["restart"] != ("Restart." in text):
            bad(path, i + 1, f"{name}: the comment {'lacks' if d['restart'] else 'has'} 'Restart.'"
                f" (a reload {'cannot' if d['restart'] else 'can'} change it)")
    for d in dirs:
        if d["name"] not in seen and "." in d["name"]:
            bad(path, 1, f"{d['name']}: not in the file")


def check_man(dirs):
    path = "conf/redlockd.yml.5"
    lines = open(path).read().split("\n")
    names = {d["name"] for d in dirs}
    for i, line in enumerate(lines):
        m = re.match(r"^\.B ([a-z_]+\.[a-z_]+|masters)$", line)
        if m and i > 0 and lines[i - 1] == ".TP" and m.group(1) not in names:
            bad(path, i + 1, f"{m.group(1)}: no such setting in conf/conf.c")
    for d in dirs:
        at = next((i for i, l in enumerate(lines)
                   if l == ".B " + d["name"] and i > 0 and lines[i - 1] == ".TP"), None)
        if at is None:
            bad(path, 1, f"{d['name']}: no entry (.TP, then .B {d['name']})")
            continue
        head = []
        for l in lines[at + 1:at + 8]:
            if l.startswith(".br") or l.startswith(".TP") or l.startswith(".S"):
                break
            head.append(re.sub(r"^\.[A-Z]+ ?", "", l))
        # roff's non-printing break (\:) aside; "empty" stands for "".
        text = " ".join(head).replace("\\:", "").replace("default empty", "default \\(dq\\(dq")
        if d["default"] is not None:
            rep = ('\\(dq' + d["default"] + '\\(dq') if d["type"] in STRINGISH else yml_rep(d)
            if "default " + rep not in text.replace("default\n", "default "):
                bad(path, at + 1, f"{d['name']}: the entry does not say 'default {rep}' ({text})")
        if d["restart"] != ("Restart" in text):
            bad(path, at + 1, f"{d['name']}: the entry {'lacks' if d['restart'] else 'has'} "
                "'Restart'")
        if d["type"] in NUMBER and re.fullmatch(r"-?[0-9.]+", d["min"]) \
                and re.fullmatch(r"[0-9.]+", d["max"]):
            lo, hi = number_range(d)
            if f"{lo} to {hi}" not in text:
                bad(path, at + 1, f"{d['name']}: the entry does not give the range "
                    f"'{lo} to {hi}' ({text})")


def check_table(dirs):
    path = "docs/operating.md"
    lines = open(path).read().split("\n")
    rows = {}
    for i, line in enumerate(lines):
        m = re.match(r"^\| `([a-z_]+(?:\.[a-z_]+)?)` \| ([^|]+) \|", line)
        if m and ("." in m.group(1) or m.group(1) == "masters"):
            rows[m.group(1)] = (i + 1, m.group(2).strip())
    for d in dirs:
        if d["name"] not in rows:
            bad(path, 1, f"{d['name']}: not in the settings table")
            continue
        line, cell = rows[d["name"]]
        want = "(required)" if d["default"] is None else "`" + yml_rep(d) + "`"
        if cell != want and not cell.startswith(want + " ("):
            bad(path, line, f"{d['name']}: Default is {cell}, the code's is {want}")
    for name, (line, _) in rows.items():
        if name not in {d["name"] for d in dirs}:
            bad(path, line, f"{name}: no such setting in conf/conf.c")


dirs = table()
check_yml(dirs)
check_man(dirs)
check_table(dirs)
for p in problems:
    print(p)
if problems:
    print(f"check-confdocs: {len(problems)} disagreements with conf/conf.c's table")
    sys.exit(1)
print(f"check-confdocs: {len(dirs)} settings: conf/redlockd.yml, conf/redlockd.yml.5 and "
      "docs/operating.md agree with conf/conf.c")
