#!/usr/bin/python3
"""Three-way mode (--reference R), end to end.

    /usr/bin/python3 tests/reference/test_reference.py PATH/TO/paritycheck WORK_DIR

On the committed real fixtures, for every family in fixtures/real that has the three files,
R = <family>_cpu_fp64.h5, A = <family>_cpu_fp32.h5, B = <family>_cuda_tf32.h5 (and, for the
bfloat16 and float16 grids, B = <family>_cuda_bf16.h5 and <family>_cuda_fp16.h5 as well):

1. every tensor's `vs_reference` in the JSON report equals an independent numpy computation
   written below from docs/metrics.md alone, R as the reference side: max_ulp exactly, mean_ulp
   to 1e-12 relative, max_abs, max_rel and rel_rms to 1e-12 relative; `closer` is the side numpy
   finds closer (smaller rel_rms, then smaller max_ulp), and "a" on the CPU-fp32-vs-TF32 triples
   wherever numpy says so;
2. the A-vs-B part of the report (figures, verdicts, summary) is identical with and without
   --reference;
3. a tensor that R lacks has no vs_reference, and the reports say which side is closer;
4. --reference with a missing or non-HDF5 file exits 2 naming the file.

Prints one line per failure and a last line "N passed, M failed"; exits 1 when anything failed.
"""

import json
import math
import os
import shutil
import subprocess
import sys
from fractions import Fraction

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, summary  # noqa: E402

REAL = os.path.join(ROOT, "fixtures", "real")
BIN = WORK = None
REL = 1e-12

# --------------------------------------------------------------------------------------------
# The figures of docs/metrics.md, from its definitions only
# --------------------------------------------------------------------------------------------

# name -> (exponent bits, mantissa bits); every one is an IEEE-style format with inf.
FORMATS = {"float64": (11, 52), "float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7)}
# Coarseness: the compare dtype is the coarser of the two; float16 vs bfloat16 have no common
# grid and compare in float32 ULPs.
RANK = {"float64": 3, "float32": 2, "float16": 1, "bfloat16": 1}


def logical_dtype(ds):
    """The stored float dtype, or the `dtype` attribute's bfloat16/float16 on a float32 or
    float64 dataset (metrics.md, "Dtypes")."""
    stored = {np.dtype("<f8"): "float64", np.dtype("<f4"): "float32",
              np.dtype("<f2"): "float16"}.get(ds.dtype.newbyteorder("<"))
    if stored is None:
        raise ValueError("%s: %s is not a float dtype this test knows" % (ds.name, ds.dtype))
    attr = ds.attrs.get("dtype")
    if isinstance(attr, bytes):
        attr = attr.decode()
    if stored in ("float32", "float64") and attr in ("bfloat16", "float16"):
        return attr
    return stored


def compare_dtype(x, y):
    if {x, y} == {"float16", "bfloat16"}:
        return "float32"
    return x if RANK[x] <= RANK[y] else y


def ordinals(x, fmt):
    """ord(round(x)) in `fmt` (int64 array) for a float64 array without NaN: round to nearest,
    ties to even, directly from the double; +0 and -0 are 0, the smallest subnormal 1, ...;
    beyond the range and +-inf one past the largest finite value; negative values mirror
    positive ones."""
    ebits, mbits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    over = ((1 << ebits) - 1) << mbits  # the pattern of inf: largest finite + 1
    x = np.asarray(x, dtype=np.float64)
    av = np.abs(x)
    finite = np.isfinite(av) & (av != 0)
    safe = np.where(finite, av, 1.0)
    e = np.frexp(safe)[1].astype(np.int64) - 1     # 2^e <= |x| < 2^(e+1)
    q = np.maximum(e, emin) - mbits                 # the quantum of that binade
    # |x| / 2^q is exact (a power-of-two scaling to at most 2^(mbits+1)); rint: half to even
    n = np.rint(np.ldexp(safe, (-q).astype(np.int32))).astype(np.int64)
    carry = n >= (2 << mbits)                       # rounded up into the next binade
    n = np.where(carry, n >> 1, n)
    q = np.where(carry, q + 1, q)
    o = np.where(n < (1 << mbits), n, ((q + mbits - emin + 1) << mbits) + (n - (1 << mbits)))
    o = np.minimum(o, over)
    o = np.where(finite, o, np.where(av == 0, 0, over))
    return np.where(x < 0, -o, o)


def side_figures(r, s, fmt):
    """max_abs, max_rel, rel_rms, max_ulp, mean_ulp of s (candidate) against r (reference),
    float64 arrays of the stored values, ULPs in `fmt`."""
    r = r.ravel().astype(np.float64)
    s = s.ravel().astype(np.float64)
    nr, ns = np.isnan(r), np.isnan(s)
    nan_mismatch = nr != ns
    both_nan = nr & ns
    keep = ~nan_mismatch                      # the elements of the maxima and of mean_ulp
    compared = keep & ~both_nan               # both sides numbers (inf allowed)
    rr, ss = r[compared], s[compared]
    inf_any = np.isinf(rr) | np.isinf(ss)
    same = rr == ss                           # equal values, matching infinities included
    with np.errstate(invalid="ignore", divide="ignore"):
        ab = np.where(same, 0.0, np.where(inf_any, np.inf, np.abs(ss - rr)))
        rel = np.where(rr == 0, np.where(ss == 0, 0.0, np.inf),
                       np.where(same, 0.0, np.where(inf_any, np.inf, ab / np.abs(rr))))
    # Python integers: a float64 distance can reach 2^64 - 2
    ulp = np.abs(ordinals(rr, fmt).astype(object) - ordinals(ss, fmt).astype(object))
    nterms = int(keep.sum())                  # both-NaN pairs count, with ulp 0
    usum = int(sum(ulp.tolist())) if ulp.size else 0
    finite = np.isfinite(r) & np.isfinite(s)
    d = s[finite] - r[finite]
    sdd, saa = math.fsum((d * d).tolist()), math.fsum((r[finite] ** 2).tolist())
    rel_rms = (0.0 if sdd == 0 else math.inf) if saa == 0 else math.sqrt(sdd / saa)
    return {"max_abs": float(ab.max()) if ab.size else 0.0,
            "max_rel": float(rel.max()) if rel.size else 0.0,
            "rel_rms": rel_rms,
            "max_ulp": int(max(ulp.tolist())) if ulp.size else 0,
            "mean_ulp": float(Fraction(usum, nterms)) if nterms else 0.0}


def closer(fa, fb):
    if fa["rel_rms"] != fb["rel_rms"]:
        return "a" if fa["rel_rms"] < fb["rel_rms"] else "b"
    if fa["max_ulp"] != fb["max_ulp"]:
        return "a" if fa["max_ulp"] < fb["max_ulp"] else "b"
    return "tie"


def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out["/" + name] = (obj[()], logical_dtype(obj))
        f.visititems(visit)
    return out


def close(x, y):
    """x (from the JSON, where non-finite doubles are "inf", "-inf", "nan") within REL of y."""
    x = float(x) if isinstance(x, str) else x
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= REL * abs(y)


# --------------------------------------------------------------------------------------------
# Running the CLI
# --------------------------------------------------------------------------------------------


def run(args):
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300)


def run_json(args):
    p = run(["--json", "-"] + list(args))
    return p, (json.loads(p.stdout) if p.returncode in (0, 1) else None)


def without_reference(report):
    """The report with the three-way additions taken out."""
    rep = json.loads(json.dumps(report))
    rep.pop("reference", None)
    for t in rep["tensors"]:
        t.pop("vs_reference", None)
    return rep


UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8}
JUDGED = ("verdict", "reasons", "caused_by", "diagnosis")


def reduction_length(a, b, path):
    """The dataset's reduction_length attribute, A's else B's; 0 when neither has one."""
    for f in (a, b):
        with h5py.File(f, "r") as h:
            if path in h and "reduction_length" in h[path].attrs:
                return int(h[path].attrs["reduction_length"])
    return 0


def finite_pairs(a, b, path):
    """Elements finite on both sides (the pairs kappa and B's distance are measured on)."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        x = np.asarray(fa[path][()], dtype=np.float64)
        y = np.asarray(fb[path][()], dtype=np.float64)
    return int(np.sum(np.isfinite(x) & np.isfinite(y)))


_RATIO = {}
_NODES = []  # Gauss-Legendre nodes and weights, computed once (an eigenproblem of size 4000)


def rms_ratio_bound(n, alpha=1e-6):
    """sqrt of the F(n, n) quantile at 1 - alpha, n clamped to [2, 4096], found here by bisection
    on the tail of Beta(n/2, n/2) integrated by 4000-point Gauss-Legendre quadrature (the
    program inverts GSL's F law): P(F > f) = P(X < 1 / (1 + f)), X ~ Beta(n/2, n/2)."""
    n = min(max(n, 2), 4096)
    if n not in _RATIO:
        h = n / 2.0
        if not _NODES:
            _NODES.extend(np.polynomial.legendre.leggauss(4000))
        xs, ws = _NODES
        log_beta = 2 * math.lgamma(h) - math.lgamma(2 * h)

        def tail(f):
            top = 1.0 / (1.0 + f)
            t = (xs + 1) * top / 2
            return float(np.sum(ws * np.exp((h - 1) * (np.log(t) + np.log1p(-t)) - log_beta))) \
                * top / 2
        lo, hi = 0.0, 20.0  # log f
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if tail(math.exp(mid)) > alpha else (lo, mid)
        _RATIO[n] = math.sqrt(math.exp((lo + hi) / 2))
    return _RATIO[n]


EXACT = ("nan_injected", "inf_injected", "zeroed", "constant", "shifted")


def figures_only(report):
    """The report without what the judge decides (verdicts, reasons, cascades, tallies)."""
    rep = json.loads(json.dumps(report))
    for k in ("verdict", "first_divergence", "summary"):
        rep.pop(k, None)
    for t in rep["tensors"]:
        for k in JUDGED:
            t.pop(k, None)
        t.get("context", {}).pop("reference_limit", None)
    return rep


def triples():
    """(family, R, A, B, label) for every family with the files."""
    fams = sorted(f[:-len("_cpu_fp64.h5")] for f in os.listdir(REAL) if f.endswith("_cpu_fp64.h5"))
    for fam in fams:
        r, a = (os.path.join(REAL, "%s_%s.h5" % (fam, k)) for k in ("cpu_fp64", "cpu_fp32"))
        for b in ("cuda_tf32", "cuda_bf16", "cuda_fp16"):
            pb = os.path.join(REAL, "%s_%s.h5" % (fam, b))
            if os.path.exists(a) and os.path.exists(pb):
                yield fam, r, a, pb, "%s cpu_fp32 vs %s" % (fam, b)


def test_triple(fam, r, a, b, label):
    p, rep = run_json(["--reference", r, a, b])
    if not check(label + ": exit 0 or 1", rep is not None, p.stderr):
        return
    check(label + ": top-level reference", rep.get("reference") == r, rep.get("reference"))
    dr, da, db = datasets(r), datasets(a), datasets(b)
    nchecked = 0
    for t in rep["tensors"]:
        path = t["path"]
        name = "%s %s" % (label, path)
        want = path in dr and path in da and path in db and t["verdict"] in ("pass", "drift")
        if not check(name + ": vs_reference present as expected", ("vs_reference" in t) == want,
                     t.get("vs_reference")):
            continue
        if not want:
            continue
        (rv, rd), (av, ad), (bv, bd) = dr[path], da[path], db[path]
        fa = side_figures(rv, av, compare_dtype(rd, ad))
        fb = side_figures(rv, bv, compare_dtype(rd, bd))
        got = t["vs_reference"]
        for side, exp in (("a", fa), ("b", fb)):
            for key in ("max_abs", "max_rel", "rel_rms", "mean_ulp"):
                check("%s: %s.%s" % (name, side, key), close(got[side][key], exp[key]),
                      "paritycheck %r, numpy %r" % (got[side][key], exp[key]))
            check("%s: %s.max_ulp exact" % (name, side), got[side]["max_ulp"] == exp["max_ulp"],
                  "paritycheck %r, numpy %r" % (got[side]["max_ulp"], exp["max_ulp"]))
        want_closer = closer(fa, fb)
        check(name + ": closer", got["closer"] == want_closer,
              "paritycheck %r, numpy %r (rel_rms %r vs %r)" % (got["closer"], want_closer,
                                                                fa["rel_rms"], fb["rel_rms"]))
        if b.endswith("_cuda_tf32.h5") and want_closer == "a":
            check(name + ": CPU fp32 closer to fp64 than TF32", got["closer"] == "a")
        nchecked += 1
    check(label + ": some tensors checked", nchecked > 0)
    # The A-vs-B figures are untouched by --reference; the judge may only turn a drift or an
    # indeterminate tensor without a structure rounding cannot produce into a pass, where B's
    # distance to R is within what the tensor's conditioning explains: m kappa u times the
    # bound on two RMS of N terms (rms_ratio_bound, N the finite pairs), kappa =
    # rel_rms(R, A) / u_A, m = G = 1 without a trend when B's u is coarser than A's, else
    # sqrt(K / log2 K) G, K the reduction_length or 4096 (docs/tolerance-model.md, "With a
    # reference"); a tensor where kappa u or B's distance to R reaches 0.5 is indeterminate,
    # else it passes within the allowance and drifts beyond it. A structure short of exact
    # becomes indeterminate where that allowance reaches 0.5.
    p0, rep0 = run_json([a, b])
    check(label + ": A-vs-B figures unchanged", rep0 is not None and
          figures_only(without_reference(rep)) == figures_only(rep0))
    by0 = {t["path"]: t for t in rep0["tensors"]}
    bad = []
    for t in rep["tensors"]:
        t0, v = by0[t["path"]], t.get("vs_reference")
        explained = False
        diag = t0.get("diagnosis") or {}
        structural = diag.get("structural", False)
        want = t0["verdict"]
        if v and t0["verdict"] in ("drift", "indeterminate") and diag.get("kind") not in EXACT \
                and t.get("compare_dtype") in UNIT:
            u, u_a = UNIT[t["compare_dtype"]], UNIT[t["dtype_a"]]
            k = reduction_length(a, b, t["path"])
            k = k if k > 2 else 4096
            m = 1.0 if u > u_a else math.sqrt(k / math.log2(k))
            kappa_u = (v["a"]["rel_rms"] / u_a) * u
            limit = m * kappa_u * rms_ratio_bound(finite_pairs(a, b, t["path"]))
            got = t.get("context", {}).get("reference_limit")
            if got is None or abs(got - limit) > 1e-7 * limit:
                bad.append("%s: reference_limit %s, numpy %s" % (t["path"], got, limit))
            no_digits = kappa_u >= 0.5 or v["b"]["rel_rms"] >= 0.5
            explained = v["b"]["rel_rms"] <= limit and not no_digits
            want = "pass" if explained else ("indeterminate" if no_digits else "drift")
            if structural:
                want = "indeterminate" if limit >= 0.5 else t0["verdict"]
        if t["verdict"] != want:
            bad.append("%s: %s, expected %s" % (t["path"], t["verdict"], want))
    check(label + ": verdicts as the reference explains them", not bad, "; ".join(bad[:3]))
    want_code = 1 if any(t["verdict"] not in ("pass", "skipped") for t in rep["tensors"]) else 0
    check(label + ": exit code follows the verdicts", p.returncode == want_code)


def test_ordinals():
    """The ordinal helper on hand-worked values."""
    cases = [(1.0, "float32", 0x3F800000), (-1.0, "float32", -0x3F800000), (-0.0, "float32", 0),
             (2.0 ** -149, "float32", 1), (2.0 ** -150, "float32", 0),  # tie to even: 0
             (3 * 2.0 ** -150, "float32", 2),                            # tie to even: 2
             (1 + 2.0 ** -24, "float32", 0x3F800000),                     # tie to even
             (1 + 3 * 2.0 ** -24, "float32", 0x3F800002),
             (math.inf, "float16", 0x7C00), (65520.0, "float16", 0x7C00),  # rounds past max
             (65519.0, "float16", 0x7BFF), (1.0, "bfloat16", 0x3F80),
             (1 + 2.0 ** -8, "bfloat16", 0x3F80), (1 + 3 * 2.0 ** -8, "bfloat16", 0x3F82),
             (3.3895313892515355e38, "bfloat16", 0x7F7F), (3.40e38, "bfloat16", 0x7F80),
             (5e-324, "float64", 1), (1.0, "float64", 0x3FF0000000000000)]
    for v, fmt, want in cases:
        got = ordinals(np.array([v]), fmt)[0]
        check("ordinal(%r, %s)" % (v, fmt), got == want, "%#x, want %#x" % (got, want))


def test_absent_from_reference():
    """A tensor that R lacks has no vs_reference; the text, Markdown, HTML and JUnit reports say
    which side is closer."""
    fam = "rnn"
    r, a, b = (os.path.join(REAL, "%s_%s.h5" % (fam, k)) for k in ("cpu_fp64", "cpu_fp32",
                                                                    "cuda_tf32"))
    cut = os.path.join(WORK, "rnn_fp64_cut.h5")
    shutil.copyfile(r, cut)
    with h5py.File(cut, "r+") as f:
        gone = sorted(k for k in f["activations"])[0]
        del f["activations/" + gone]
    p, rep = run_json(["--reference", cut, a, b])
    if not check("cut R: exit 0 or 1", rep is not None, p.stderr):
        return
    byp = {t["path"]: t for t in rep["tensors"]}
    check("cut R: the missing tensor has no vs_reference",
          "vs_reference" not in byp["/activations/" + gone])
    check("cut R: the others have one",
          all("vs_reference" in t for pth, t in byp.items() if pth != "/activations/" + gone))
    md, xml, html = (os.path.join(WORK, "r." + e) for e in ("md", "xml", "html"))
    p = run(["--reference", r, "--markdown", md, "--junit", xml, "--html", html, a, b])
    check("text: closer line", "closer to R: a (rel_rms " in p.stdout, p.stdout[:2000])
    check("text: reference summary", "REFERENCE %s: a closer on " % r in p.stdout, p.stdout[-500:])
    with open(md) as f:
        text = f.read()
    check("markdown: R line and column", "- **R** (reference of the three-way mode): `%s`" % r in
          text and "| closer to R |" in text and "| a (rel_rms " in text, text[:1500])
    with open(xml) as f:
        text = f.read()
    check("junit: reference property", '<property name="reference" value="%s"/>' % r in text)
    check("junit: failure bodies carry the figures", "vs R, a: max_abs " in text)
    with open(html) as f:
        text = f.read()
    check("html: closer column", ">closer to R</th>" in text and '<td class="closer">a (' in text)
    p = run([a, b])
    check("without --reference: no closer line", "closer to R" not in p.stdout
          and "REFERENCE" not in p.stdout)


def test_errors():
    a, b = (os.path.join(REAL, "rnn_%s.h5" % k) for k in ("cpu_fp32", "cuda_tf32"))
    missing = os.path.join(WORK, "missing.h5")
    p = run(["--reference", missing, a, b])
    check("missing R: exit 2", p.returncode == 2, p.returncode)
    check("missing R: message names it", missing in p.stderr, p.stderr)
    check("missing R: nothing on stdout", p.stdout == "", p.stdout[:300])
    bad = os.path.join(WORK, "not_hdf5.h5")
    with open(bad, "w") as f:
        f.write("not HDF5\n")
    p = run(["--reference", bad, a, b])
    check("non-HDF5 R: exit 2", p.returncode == 2, p.returncode)
    check("non-HDF5 R: message names it", bad in p.stderr, p.stderr)
    p = run([a, b, "--reference"])
    check("--reference without a value: exit 2", p.returncode == 2, p.returncode)
    p = run(["--help"])
    check("--help documents --reference", "--reference" in p.stdout)


def main():
    global BIN, WORK
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    BIN, WORK = sys.argv[1], sys.argv[2]
    os.makedirs(WORK, exist_ok=True)
    test_ordinals()
    found = list(triples())
    families = {t[0] for t in found}
    check("fixtures: every family has a tf32 triple",
          {t[0] for t in found if t[3].endswith("_cuda_tf32.h5")} == families, found)
    check("fixtures: some triples", len(found) >= 4, found)
    for tr in found:
        test_triple(*tr)
    test_absent_from_reference()
    test_errors()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
