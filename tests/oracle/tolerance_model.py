#!/usr/bin/python3
"""The per-tensor tolerance model of docs/tolerances.md and docs/tolerance-model.md in numpy,
independent of the C code: how a tolerance file's layers (defaults, then matching rules) resolve
for one tensor, how a profile's keys turn into atol and rtol (its K, accumulation dtype and
RMS(A)) and the tensor-level limits (max_rel_rms, max_scale), and the element test (the
aggregate figures are pc_reference.py's). With pc_reference.py (element figures, ULPs, dtypes) it is the
one Python reference of the tests: the fixture generator, the report and CLI tests use it. The
run-level allowances (trend, noise floor, reference) are the judge's, tested by hand in
tests/unit/test_judge.c.
"""

import fnmatch
import math
import os
import sys

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import pc_reference as ref  # noqa: E402

TOLERANCES = os.path.join(ROOT, "tolerances")
TF32_MANTISSA_BITS = 10


def unit_roundoff(name):
    """u = 2^-p of a format name (p = stored mantissa bits + 1); 0 for non-floats."""
    if name == "tf32":
        return 2.0 ** -(TF32_MANTISSA_BITS + 1)
    fmt = ref.FORMATS.get(name)
    return 2.0 ** -(fmt.mbits + 1) if fmt else 0.0


def load_layers(profile=None):
    """The `defaults` layers that apply: tolerances/default.yaml, then the profile's, if any.
    Shipped profiles have no rules (asserted)."""
    paths = [os.path.join(TOLERANCES, "default.yaml")]
    if profile:
        paths.append(os.path.join(TOLERANCES, profile + ".yaml"))
    layers = []
    for p in paths:
        with open(p) as f:
            doc = yaml.safe_load(f)
        assert not doc.get("rules"), "%s: the numpy model reads defaults only" % p
        layers.append(doc.get("defaults") or {})
    return layers


def spec_layers(spec, path):
    """The layers of one tolerance document (a parsed YAML file) that apply to `path`: its
    defaults, then each rule whose glob matches, in order (docs/tolerances.md)."""
    return [spec.get("defaults") or {}] + [
        rule for rule in spec.get("rules") or [] if fnmatch.fnmatchcase(path, rule["match"])]


def _dtype_key(compare):
    return compare if compare in ref.FORMATS else "integer"


def resolve_raw(layers, compare):
    """The keys the layers set for a compare dtype: each layer's "all", then its dtype key, a
    later one winning; a key set to None (YAML null) is unset again."""
    raw = {}
    for layer in layers:
        for key in ("all", _dtype_key(compare)):
            raw.update(layer.get(key) or {})
    return raw


def resolve(layers, compare, K=None, acc=None, rms=None):
    """The tolerance of one tensor (docs/tolerances.md, docs/tolerance-model.md) as a dict:
    atol, rtol, max_ulp (None = unset), fraction, max_rel_rms, max_scale, max_scale_sqrt_n (None
    = unset)."""
    raw = resolve_raw(layers, compare)
    tol = {k: raw.get(k) for k in ("atol", "rtol", "max_ulp")}
    tol["fraction"] = raw.get("max_mismatch_fraction") or 0.0
    tol.update(max_rel_rms=None, max_scale=None, max_scale_sqrt_n=None)
    if compare not in ref.FORMATS:
        return tol
    u = max(unit_roundoff(compare), unit_roundoff(raw.get("precision") or ""))
    if acc:
        u_acc = unit_roundoff(acc)
    else:
        u_acc = unit_roundoff(raw.get("accumulation") or compare)

    def widen(key, v):
        tol[key] = v if tol[key] is None else max(tol[key], v)

    if raw.get("atol_rms") is not None and rms is not None:
        widen("atol", raw["atol_rms"] * u * rms)
    if raw.get("rtol_u") is not None:
        widen("rtol", raw["rtol_u"] * u)
    if raw.get("rtol_sqrt_k") is not None and K:
        widen("rtol", raw["rtol_sqrt_k"] * math.sqrt(K) * u_acc)
    if raw.get("max_rel_rms_u") is not None:
        tol["max_rel_rms"] = raw["max_rel_rms_u"] * u
    c1, c2 = raw.get("max_scale_u"), raw.get("max_scale_u_sqrt_n")
    if c1 is not None or c2 is not None:
        tol["max_scale"] = (c1 or 0) * u
        tol["max_scale_sqrt_n"] = (c2 or 0) * u
    return tol


def element_mismatches(a, b, atol, rtol):
    """(mismatches, nan or inf mismatch present) under abs <= atol OR abs <= rtol |a|."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    equal = (a == b) | (nan_a & nan_b)
    with np.errstate(invalid="ignore"):
        e = np.abs(b - a)
        ok = np.zeros(a.shape, dtype=bool)
        if atol is not None:
            ok |= e <= atol
        if rtol is not None:
            ok |= e <= rtol * np.abs(a)
    special = (nan_a ^ nan_b) | ((np.isinf(a) | np.isinf(b)) & ~equal)
    bad = ~equal & (special | ~ok)
    return int(bad.sum()), bool(special.any())


def magnitude_rms(a):
    fin = a[np.isfinite(a)]
    return float(np.sqrt(np.mean(fin * fin))) if fin.size else 0.0


def datasets_in_order(path):
    """Dataset paths (no leading '/') in creation order, as paritycheck runs them."""
    out = []

    def walk(g, prefix):
        names = []
        g.id.links.iterate(lambda n: names.append(n.decode()), idx_type=h5py.h5.INDEX_CRT_ORDER)
        for n in names:
            o = g[n]
            if isinstance(o, h5py.Dataset):
                out.append(prefix + n)
            else:
                walk(o, prefix + n + "/")
    with h5py.File(path, "r") as f:
        walk(f, "")
    return out


class Dump:
    """Every dataset of a fixture as (float64 values, logical dtype, K, accumulation)."""

    def __init__(self, path):
        self.order = datasets_in_order(path)
        self.t = {}
        with h5py.File(path, "r") as f:
            for n in self.order:
                ds = f[n]
                t = ref.read_tensor(ds)
                assert t.kind == "float", (path, n, t.kind)
                acc = ds.attrs.get("accumulation_dtype")
                self.t[n] = (np.asarray(t.values, dtype=np.float64).ravel(), t.logical,
                             int(ds.attrs.get("reduction_length", 0)) or None,
                             acc.decode() if isinstance(acc, bytes) else acc)

    def replaced(self, name, values):
        """A copy whose dataset `name` holds `values` instead."""
        d = Dump.__new__(Dump)
        d.order, d.t = self.order, dict(self.t)
        v, la, K, acc = self.t[name]
        d.t[name] = (np.asarray(values, dtype=np.float64).ravel(), la, K, acc)
        return d
