#!/usr/bin/env python3
"""check_alerts.py: the alerting rules, their unit tests and the Grafana
dashboard speak of the metrics a real daemon serves.

Reads a real daemon's exposition (GET the URL given) and checks, in
conf/prometheus/redlockd.rules.yml, tests/promtool/redlockd.rules.test.yml
and conf/grafana/redlockd.json:

  - every metric an expression, an input series or a template variable
    names is a series of the exposition (a histogram's _bucket, _sum and
    _count included), or a series Prometheus makes itself (up);
  - every label a matcher, a by/without/on/ignoring clause, an input
    series, an annotation ($labels.X) or a legend ({{X}}) names is a label
    of those metrics, or one Prometheus adds to every target (instance,
    job);
  - a label whose values the daemon fixes (reason, result, outcome, mode,
    class) is matched only to values the exposition shows;
  - every alert has a summary, a description and a runbook naming
    docs/operating.md's section "Alerts and dashboards", which lists it;
    and the unit tests expect it to fire at least once;
  - the dashboard is JSON, its datasource is the variable DS_PROMETHEUS,
    every panel has a target with an expression and is one of Grafana's
    own panel types.

Then, as a negative control, it checks the rules once more with one
metric renamed and fails unless that is found.  Each finding is printed;
the exit status is 1 when there is one.

usage: python3 tests/check_alerts.py METRICS_URL   (from the repository root;
       tests/check_alerts.sh starts the daemon and runs it)
"""
import json
import re
import sys
import urllib.request

import yaml

RULES = 'conf/prometheus/redlockd.rules.yml'
TESTS = 'tests/promtool/redlockd.rules.test.yml'
DASHBOARD = 'conf/grafana/redlockd.json'
DOC = 'docs/operating.md'
SECTION = '## Alerts and dashboards'

# Labels Prometheus adds to every series it scrapes; series it makes itself.
TARGET_LABELS = {'instance', 'job'}
SYNTHETIC = {'up': {'instance': set(), 'job': set()}}
# Labels whose values depend on the deployment (checked by name only).
OPEN_LABELS = {'master', 'addr', 'le', 'version', 'layout', 'layout_oldest'}
# PromQL's words that are not metric names.
PROMQL_WORDS = {
    'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile',
    'count_values', 'group', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right',
    'and', 'or', 'unless', 'bool', 'offset', 'rate', 'irate', 'increase', 'delta', 'idelta',
    'deriv', 'resets', 'changes', 'abs', 'absent', 'absent_over_time', 'ceil', 'floor', 'round',
    'clamp', 'clamp_min', 'clamp_max', 'histogram_quantile', 'label_replace', 'label_join',
    'vector', 'scalar', 'time', 'timestamp', 'sort', 'sort_desc', 'avg_over_time',
    'min_over_time', 'max_over_time', 'sum_over_time', 'count_over_time', 'last_over_time',
    'present_over_time', 'predict_linear', 'holt_winters', 'exp', 'ln', 'log2', 'log10', 'sqrt',
    'inf', 'nan', 'label_values',
}
GRAFANA_PANELS = {'timeseries', 'stat', 'gauge', 'bargauge', 'table', 'text', 'row',
                  'state-timeline', 'status-history', 'heatmap', 'piechart', 'alertlist'}

IDENT = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
MATCHER = re.compile(r'(' + IDENT + r')\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def scrape(url):
    """The exposition at url as {name: {label: set of values}}."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read().decode('utf-8')
    series = {}
    for line in body.splitlines():
        if not line or line.startswith('#'):
            continue
        m = re.match(r'(' + IDENT + r')(\{(.*)\})?\s', line)
        if m is None:
            continue
        labels = series.setdefault(m.group(1), {})
        for name, _, value in MATCHER.findall(m.group(3) or ''):
            labels.setdefault(name, set()).add(value)
    for name, labels in SYNTHETIC.items():
        series.setdefault(name, labels)
    return series


def grafana_plain(expr):
    """expr with Grafana's variables replaced by what PromQL accepts."""
    expr = expr.replace('$__rate_interval', '5m').replace('$__interval', '1m')
    return re.sub(r'\$\{?(\w+)\}?', r'\1', expr)


def check_matchers(where, name, body, exposition, bad):
    """The matchers {body} of metric name."""
    known = exposition.get(name, {})
    for label, op, value in MATCHER.findall(body):
        if label in TARGET_LABELS:
            continue
        if label not in known:
            bad.append(f'{where}: {name} has no label {label}')
            continue
        if label in OPEN_LABELS or '$' in value or op in ('!=', '!~'):
            continue
        values = value.split('|') if op == '=~' else [value]
        for v in values:
            if re.fullmatch(r'[\w.:-]+', v) and v not in known[label]:
                bad.append(f'{where}: {name}{{{label}="{v}"}}: the daemon shows {label} only as '
                           + ', '.join(sorted(known[label])))


def check_expr(where, expr, exposition, bad):
    """One PromQL expression; returns the labels its metrics carry."""
    expr = grafana_plain(expr)
    labels = set(TARGET_LABELS)
    # Strings and the matchers in braces first, then what is left.
    for m in re.finditer(r'(' + IDENT + r')?\s*\{([^}]*)\}', expr):
        if m.group(1) is None or m.group(1) in PROMQL_WORDS:
            bad.append(f'{where}: a selector without a metric name: {m.group(0)}')
            continue
        check_matchers(where, m.group(1), m.group(2), exposition, bad)
    bare = re.sub(r'\{[^}]*\}', ' ', re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr))
    grouping = re.findall(r'\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)',
                          bare)
    bare = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', bare)
    bare = re.sub(r'\[[^\]]*\]', ' ', bare)
    for token in re.findall(r'(?<![\w.])' + IDENT, bare):
        if token in PROMQL_WORDS:
            continue
        if token not in exposition:
            bad.append(f'{where}: no metric {token} in the daemon\'s /metrics')
            continue
        labels |= set(exposition[token])
    for group in grouping:
        for label in re.findall(IDENT, group):
            if label not in labels:
                bad.append(f'{where}: label {label} is on none of the expression\'s metrics')
    return labels


def check_rules(rules, tests, doc, exposition, bad):
    """The rules file (parsed), its unit tests (parsed) and the doc's text."""
    fired = set()
    for case in tests.get('tests', []):
        for ev in case.get('alert_rule_test', []):
            if ev.get('exp_alerts'):
                fired.add(ev['alertname'])
        for s in case.get('input_series', []):
            m = re.fullmatch(r'(' + IDENT + r')(\{(.*)\})?', s['series'].strip())
            where = f'{TESTS}: test {case.get("name")}: series {s["series"]}'
            if m is None:
                bad.append(f'{where}: not a series')
            elif m.group(1) not in exposition:
                bad.append(f'{where}: no metric {m.group(1)} in the daemon\'s /metrics')
            else:
                check_matchers(where, m.group(1), m.group(3) or '', exposition, bad)
    section = doc.split(SECTION, 1)[1].split('\n## ', 1)[0] if SECTION in doc else ''
    if not section:
        bad.append(f'{DOC}: no section "{SECTION[3:]}"')
    for group in rules['groups']:
        for rule in group['rules']:
            alert = rule.get('alert', rule.get('record'))
            where = f'{RULES}: {alert}'
            labels = check_expr(where, str(rule['expr']), exposition, bad)
            ann = rule.get('annotations', {})
            for key in ('summary', 'description', 'runbook'):
                if not ann.get(key):
                    bad.append(f'{where}: no {key} annotation')
            for text in ann.values():
                for label in re.findall(r'\$labels\.(\w+)', text):
                    if label not in labels:
                        bad.append(f'{where}: $labels.{label} is on none of its metrics')
            if 'alert' not in rule:
                continue
            if f'{DOC}, section Alerts and dashboards' not in ann.get('runbook', ''):
                bad.append(f'{where}: its runbook does not name {DOC}, section Alerts and dashboards')
            if f'`{alert}`' not in section:
                bad.append(f'{DOC}: section "{SECTION[3:]}" does not list {alert}')
            if alert not in fired:
                bad.append(f'{TESTS}: no test expects {alert} to fire')


def check_dashboard(dash, exposition, bad):
    """The dashboard (parsed)."""
    ds = '${DS_PROMETHEUS}'
    variables = {v.get('name'): v for v in dash.get('templating', {}).get('list', [])}
    if variables.get('DS_PROMETHEUS', {}).get('type') != 'datasource':
        bad.append(f'{DASHBOARD}: no datasource variable DS_PROMETHEUS')
    for name, v in variables.items():
        if v.get('type') == 'query':
            q = v['query']['query'] if isinstance(v.get('query'), dict) else v.get('query', '')
            m = re.fullmatch(r'label_values\((' + IDENT + r'),\s*(' + IDENT + r')\)', q)
            if m is None:
                bad.append(f'{DASHBOARD}: variable {name}: not label_values(metric, label): {q}')
            elif m.group(1) not in exposition:
                bad.append(f'{DASHBOARD}: variable {name}: no metric {m.group(1)}')
            elif m.group(2) not in TARGET_LABELS | set(exposition[m.group(1)]):
                bad.append(f'{DASHBOARD}: variable {name}: {m.group(1)} has no label {m.group(2)}')
            if v.get('datasource', {}).get('uid') != ds:
                bad.append(f'{DASHBOARD}: variable {name}: datasource is not {ds}')
    panels = dash.get('panels', [])
    if not panels:
        bad.append(f'{DASHBOARD}: no panels')
    for p in panels:
        where = f'{DASHBOARD}: panel "{p.get("title")}"'
        if p.get('type') not in GRAFANA_PANELS:
            bad.append(f'{where}: type {p.get("type")} is not one of Grafana\'s own panels')
        if p.get('type') == 'row':
            continue
        targets = [t for t in p.get('targets', []) if t.get('expr', '').strip()]
        if not targets:
            bad.append(f'{where}: no target with an expression')
        for t in [p] + targets:
            if t.get('datasource', {}).get('uid') != ds:
                bad.append(f'{where}: datasource is not {ds}')
        for t in targets:
            labels = check_expr(f'{where}, {t.get("refId")}', t['expr'], exposition, bad)
            for label in re.findall(r'\{\{\s*(\w+)\s*\}\}', t.get('legendFormat', '')):
                if label not in labels:
                    bad.append(f'{where}, {t.get("refId")}: legend {{{{{label}}}}} is on none '
                               'of its metrics')


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    exposition = scrape(sys.argv[1])
    with open(RULES, encoding='utf-8') as f:
        rules_text = f.read()
    with open(TESTS, encoding='utf-8') as f:
        tests = yaml.safe_load(f)
    with open(DOC, encoding='utf-8') as f:
        doc = f.read()
    bad = []
    try:
        with open(DASHBOARD, encoding='utf-8') as f:
            dash = json.load(f)
    except ValueError as e:
        bad.append(f'{DASHBOARD}: not JSON: {e}')
        dash = None
    check_rules(yaml.safe_load(rules_text), tests, doc, exposition, bad)
    if dash is not None:
        check_dashboard(dash, exposition, bad)
    for line in bad:
        print(f'check-alerts: {line}')

    # The negative control: a metric renamed in the rules must be found.
    control = []
    check_rules(yaml.safe_load(rules_text.replace('redlockd_masters_counted',
                                                  'redlockd_masters_counting')),
                tests, doc, exposition, control)
    if not any('redlockd_masters_counting' in line for line in control):
        print('check-alerts: the negative control failed: a metric renamed in the rules '
              '(redlockd_masters_counted) was not found')
        bad.append('control')
    if bad:
        return 1
    nrules = sum(len(g['rules']) for g in yaml.safe_load(rules_text)['groups'])
    print(f'check-alerts: {nrules} rules, their tests\' series and '
          f'{len(dash["panels"])} dashboard panels use only the {len(exposition)} series names '
          'and their labels of a real daemon\'s /metrics')
    return 0


if __name__ == '__main__':
    sys.exit(main())
