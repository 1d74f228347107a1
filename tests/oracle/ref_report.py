"""The numpy reference (pc_reference.py) against a paritycheck JSON report: numbers as the
report spells them, exact float and integer equality, a report tensor's tolerance, and the
differences between reference figures and a report tensor."""

import math

# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def to_json_number(x):
    """A float as the report writes it: non-finite values are the strings inf, -inf, nan."""
    if isinstance(x, float):
        if math.isnan(x):
            return 'nan'
        if math.isinf(x):
            return 'inf' if x > 0 else '-inf'
    return x


def from_json_number(x):
    if isinstance(x, str):
        return float(x)  # 'inf', '-inf', 'nan'
    return x


def same_float(x, y):
    """Exact equality with NaN == NaN (any non-finite JSON spelling accepted)."""
    x, y = from_json_number(x), from_json_number(y)
    if x is None or y is None:
        return x is y
    try:
        x, y = float(x), float(y)
    except (TypeError, ValueError):
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y


def same_int(x, y):
    """Exact integer equality; a decimal string stands for its integer (for values >= 2^63)."""
    def conv(v):
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, str) and v.isdigit():
            return int(v)
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
            return int(v)
        return None
    # docs/report-json.md: a count above 2^63 - 1 is written as a double (the nearest one).
    for big, other in ((x, y), (y, x)):
        if isinstance(big, int) and not isinstance(big, bool) and big > (1 << 63) - 1 and \
                isinstance(other, float):
            return float(big) == other
    cx, cy = conv(x), conv(y)
    return cx is not None and cx == cy


def tol_from_report(t):
    """The tolerance dict of a report tensor (missing or null keys: unset)."""
    raw = t.get('tolerance') or {}
    tol = {}
    for k in ('atol', 'rtol', 'max_ulp', 'max_mismatch_fraction'):
        v = raw.get(k)
        if v is not None:
            tol[k] = int(v) if k == 'max_ulp' and not isinstance(v, float) else from_json_number(v)
    return tol


def compare_figures(path, fig, t, mean_slack=1e-15):
    """Differences (list of strings) between reference figures and one report tensor."""
    diffs = []

    def d(field, want, got):
        diffs.append('%s: %s: reference %r, report %r' % (path, field, want, got))

    if fig.get('verdict') != t.get('verdict'):
        d('verdict', fig.get('verdict'), t.get('verdict'))
    if 'count' not in fig:
        return diffs
    for k in ('count', 'mismatches', 'nan_mismatches', 'inf_mismatches', 'max_ulp'):
        if not same_int(fig[k], t.get(k)):
            d(k, fig[k], t.get(k))
    for k in ('not_representable_a', 'not_representable_b'):
        if k in fig and not same_int(fig[k], t.get(k, 0)):
            d(k, fig[k], t.get(k))
    for k in ('max_abs', 'max_rel'):
        if not same_float(fig[k], t.get(k)):
            d(k, fig[k], t.get(k))
    got = from_json_number(t.get('mean_ulp'))
    want = fig['mean_ulp']
    if not isinstance(got, (int, float)) or isinstance(got, bool) or \
            abs(float(got) - want) > mean_slack * abs(want):
        d('mean_ulp', want, got)
    if fig.get('compare_dtype') and t.get('compare_dtype') != fig['compare_dtype']:
        d('compare_dtype', fig['compare_dtype'], t.get('compare_dtype'))
    fw, tw = fig.get('worst'), t.get('worst')
    if fw is None or not isinstance(tw, dict):
        if bool(fw) != bool(tw):
            d('worst', fw, tw)
        return diffs
    if list(tw.get('index', [None])) != fw['index']:
        d('worst.index', fw['index'], tw.get('index'))
    for k in ('a', 'b'):
        want, got = fw[k], tw.get(k)
        if isinstance(want, list):
            ok = isinstance(got, list) and len(got) == 2 and all(
                same_float(x, y) for x, y in zip(want, got))
        else:
            ok = same_float(want, got)
        if not ok:
            d('worst.' + k, want, got)
    for k in ('abs', 'rel'):
        if not same_float(fw[k], tw.get(k)):
            d('worst.' + k, fw[k], tw.get(k))
    if not same_int(fw['ulp'], tw.get('ulp')):
        d('worst.ulp', fw['ulp'], tw.get('ulp'))
    return diffs
