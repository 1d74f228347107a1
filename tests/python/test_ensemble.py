"""The honest envelope (python/paritycheck/ensemble.py, docs/envelope.md, issue 36): stochastic
rounding, the emulation context and make_envelope's sidecar, on the CPU with small models.

Expected values are derived here independently: grid neighbours from bit patterns and
np.nextafter, binomial bounds for the rounding frequencies, the envelope's figures recomputed in
numpy from the members' dumps (kept with keep_members)."""
import contextlib
import math
import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
import torch.nn as nn

from paritycheck.ensemble import (EMULATION, dump_model, emulate, envelope_path,
                                  make_envelope, member_generator, stochastic_round,
                                  ulp_perturb)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
Z = 5.5  # binomial bound in standard deviations: a false alarm has probability ~4e-8 per check


def gen(k=0, seed=0):
    return member_generator(seed, k)


# ---- stochastic rounding ---------------------------------------------------------------------
def _neighbours_bits(x, drop):
    """(lo, hi) of float32 x on the grid with ``drop`` fewer mantissa bits, from bit patterns
    (magnitudes: lo truncates, hi is one grid step above), with x's sign."""
    bits = np.abs(x).astype(np.float32).view(np.uint32)
    lo = (bits & ~np.uint32((1 << drop) - 1)).view(np.float32)
    hi = (lo.view(np.uint32) + np.uint32(1 << drop)).view(np.float32)
    return np.sign(x) * lo, np.sign(x) * hi


def _neighbours_fp16(x):
    """(lo, hi) of float32 x on float16's grid by np.nextafter in float16, with x's sign."""
    a = np.abs(x).astype(np.float32)
    near = a.astype(np.float16)
    up = near.astype(np.float32) > a
    lo = np.where(up, np.nextafter(near, np.float16(0)), near).astype(np.float32)
    hi = np.where(up, near, np.nextafter(near, np.float16(np.inf))).astype(np.float32)
    return np.sign(x) * lo, np.sign(x) * hi


def _check_unbiased(fmt, x, neighbours, draws=4000):
    """Every output of x's stochastic rounding is lo or hi, and hi comes with frequency
    (x - lo)/(hi - lo) within Z binomial standard deviations."""
    lo, hi = neighbours(x)
    rep = torch.from_numpy(np.repeat(x[None, :], draws, axis=0))
    y = stochastic_round(rep, fmt, gen()).numpy()
    assert np.all((y == lo) | (y == hi)), fmt
    p = ((x.astype(np.float64) - lo) / (hi.astype(np.float64) - lo))
    freq = (y == hi).mean(axis=0)
    sd = np.sqrt(p * (1 - p) / draws)
    assert np.all(np.abs(freq - p) <= Z * sd + 1e-12), (fmt, np.abs(freq - p).max())
    # and the mean is x: unbiased
    assert np.all(np.abs(y.astype(np.float64).mean(axis=0) - x) <= Z * sd * np.abs(hi - lo) + 1e-30)


def _between(rng, n, lo_exp, hi_exp):
    """n float32 values spread over binades 2^lo_exp .. 2^hi_exp, both signs, off every grid."""
    x = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(lo_exp, hi_exp, n)).astype(np.float32)
    return x * rng.choice([-1, 1], n).astype(np.float32)


def test_sr_bf16_tf32_unbiased():
    rng = np.random.default_rng(1)
    x = _between(rng, 40, -30, 30)
    x[:4] = [1 + 2.0 ** -9, 1 + 3 * 2.0 ** -10, -(1 + 2.0 ** -20), 3.0 + 2.0 ** -8]
    _check_unbiased("bfloat16", x, lambda v: _neighbours_bits(v, 16))
    _check_unbiased("tf32", x, lambda v: _neighbours_bits(v, 13))


def test_sr_fp16_unbiased_incl_subnormals():
    rng = np.random.default_rng(2)
    x = np.concatenate([_between(rng, 30, -14, 15),      # normal float16 range
                        _between(rng, 15, -24, -14)])    # float16 subnormals
    _check_unbiased("float16", x, _neighbours_fp16)


def test_sr_on_grid_unchanged_exhaustive():
    """Every finite bfloat16 and float16 value, and a sample of tf32 values, is its own
    rounding; NaN stays NaN, inf stays inf."""
    pats = np.arange(1 << 16, dtype=np.uint32)
    bf = (pats << 16).view(np.float32)
    fin = bf[np.isfinite(bf)]
    y = stochastic_round(torch.from_numpy(fin.copy()), "bfloat16", gen()).numpy()
    assert np.array_equal(y.view(np.uint32), fin.view(np.uint32))
    h = pats.astype(np.uint16).view(np.float16).astype(np.float32)
    fin = h[np.isfinite(h)]
    y = stochastic_round(torch.from_numpy(fin.copy()), "float16", gen()).numpy()
    assert np.array_equal(y, fin) and np.array_equal(np.signbit(y), np.signbit(fin))
    t = (np.random.default_rng(3).integers(0, 1 << 19, 100000, dtype=np.uint32) << 13)
    t = t.view(np.float32)
    t = t[np.isfinite(t)]
    y = stochastic_round(torch.from_numpy(t.copy()), "tf32", gen()).numpy()
    assert np.array_equal(y.view(np.uint32), t.view(np.uint32))
    special = torch.tensor([float("nan"), float("inf"), -float("inf")])
    for fmt in ("bfloat16", "tf32", "float16"):
        y = stochastic_round(special, fmt, gen())
        assert torch.isnan(y[0]) and y[1] == float("inf") and y[2] == -float("inf")


def test_sr_lands_on_grid():
    x = torch.from_numpy(np.random.default_rng(4).standard_normal(200000).astype(np.float32)
                         * 100)
    y = stochastic_round(x, "bfloat16", gen())
    assert torch.equal(y.bfloat16().float(), y)
    y = stochastic_round(x, "float16", gen()).numpy()
    assert np.array_equal(y.astype(np.float16).astype(np.float32), y)
    y = stochastic_round(x, "tf32", gen()).numpy()
    assert np.all(y.view(np.uint32) & 0x1FFF == 0)


def test_fp16_overflow_rounds_to_nearest():
    x = torch.tensor([65504.0, 65510.0, 65519.0, 65520.0, 1e6, -70000.0])
    y = stochastic_round(x, "float16", gen())
    assert y.tolist() == [65504.0, 65504.0, 65504.0, float("inf"), float("inf"), -float("inf")]


def test_ulp_perturb_one_ulp_either_way():
    x = np.random.default_rng(5).standard_normal(100000).astype(np.float32)
    x[:3] = [0.0, np.inf, -1.5]
    y = ulp_perturb(torch.from_numpy(x.copy()), gen()).numpy()
    up, down = np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))
    body = slice(3, None)
    assert np.all((y[body] == up[body]) | (y[body] == down[body]))
    n = y[body].size
    assert abs((y[body] == up[body]).mean() - 0.5) <= Z * math.sqrt(0.25 / n)
    assert y[0] == 0 and y[1] == np.inf and y[2] in (up[2], down[2])
    d = torch.tensor([1.0, -2.0], dtype=torch.float64)
    yd = ulp_perturb(d, gen()).numpy()
    assert all(v in (np.nextafter(a, np.inf), np.nextafter(a, -np.inf))
               for v, a in zip(yd, d.numpy()))


# ---- the emulation context -------------------------------------------------------------------
def build_dropout():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4))


X = torch.randn(6, 16, generator=torch.Generator().manual_seed(1))


def _read(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                     else None)
    return out


def test_generator_leaves_global_rng_alone(tmp_path):
    """A dry member (same draws, no change) is A bit for bit; a real bf16 member leaves the
    global RNG where A's run leaves it and keeps A's dropout mask."""
    a = _read(dump_model(build_dropout, X, str(tmp_path / "a.h5")))
    state_a = torch.get_rng_state()
    g = gen()
    with emulate("bf16-autocast", g, dry=True):
        dry = _read(dump_model(build_dropout, X, str(tmp_path / "dry.h5")))
    assert g.get_state().ne(gen().get_state()).any(), "the dry member drew numbers"
    assert a.keys() == dry.keys()
    for k in a:
        assert np.array_equal(a[k], dry[k], equal_nan=True), k
    with emulate("bf16-autocast", gen(1)):
        m = _read(dump_model(build_dropout, X, str(tmp_path / "m.h5")))
    assert torch.equal(torch.get_rng_state(), state_a)
    drop_a, drop_m = a["activations/002_2"], m["activations/002_2"]
    live = (a["activations/001_1"] != 0) & (m["activations/001_1"] != 0)  # ReLU let through
    assert ((drop_a == 0) & live).any() and ((drop_a != 0) & live).any()
    assert np.array_equal((drop_m == 0)[live], (drop_a == 0)[live])       # the same mask
    assert not np.array_equal(drop_m, drop_a)


def test_backward_ops_are_perturbed(tmp_path):
    """loss = sum(c * (x W^T)): dL/dW = c^T x does not depend on the forward's values, so only
    a perturbed backward matmul can make it differ from A's."""
    torch.manual_seed(0)
    lin = nn.Linear(16, 8, bias=False)
    c = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    grads = []
    for k in range(3):
        lin.zero_grad()
        with emulate("bf16-autocast", gen(k)) if k else contextlib.nullcontext():
            (lin(X) * c).sum().backward()
        grads.append(lin.weight.grad.clone())
    exact = c.double().t() @ X.double()
    assert torch.allclose(grads[0].double(), exact, rtol=1e-5, atol=1e-5)
    spread = (grads[1] - grads[0]).abs().max().item()
    assert spread > 0 and not torch.equal(grads[1], grads[2])
    # each input within one bf16 step (2^-7 relative) of its value, the output too
    assert spread < 2.0 ** -5 * (c.abs().t() @ X.abs()).max().item()


def test_backward_rounds_a_gradient_once_for_all_its_readers():
    """Under fp16-autocast B holds the gradient of a Linear's (narrow) output in float16, and
    its weight-gradient matmul and its bias-gradient sum both read that one rounding. With
    x = ones, dL/dW[j, k] = sum_i g[i, j] = dL/db[j] exactly when the rounding is shared: g is
    +-(1 + 2^-13) 2^-8 in alternate rows, off float16's grid, so each g[i, j] rounds up or down
    at random, yet the sums (multiples of 2^-18) are exact in float32 and on float16's grid.
    Unrounded, the bias gradient would be exactly 0."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    x = torch.ones(512, 4)
    c = torch.full((512, 3), (1 + 2.0 ** -13) * 2.0 ** -8)
    c[1::2] *= -1
    with emulate("fp16-autocast", gen(1)):
        (lin(x) * c).sum().backward()
    gw, gb = lin.weight.grad, lin.bias.grad
    assert gb.abs().sum().item() > 0
    assert torch.equal(gw, gb[:, None].expand_as(gw))
    assert torch.equal(gb.half().float(), gb)


def test_autocast_dtype_flow(tmp_path):
    """Under bf16-autocast emulation a member's tensors are on bfloat16's grid where B holds
    them in bfloat16: a Linear's output and the GELU and BatchNorm after it (they run in their
    input's dtype); not where autocast computes in float32 (LayerNorm) or a float32 tensor
    joins (the residual sum)."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act, self.bn = nn.Linear(32, 32), nn.GELU(), nn.BatchNorm1d(32)
            self.ln = nn.LayerNorm(32)

        def forward(self, x):
            h = self.bn(self.act(self.fc(x)))
            return self.ln(h), x + h

    def build():
        torch.manual_seed(0)
        return M()

    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(5))
    with emulate("bf16-autocast", gen()):
        d = _read(dump_model(build, x, str(tmp_path / "m.h5"), modules="all"))

    def on_grid(v):
        return np.array_equal(torch.from_numpy(v).bfloat16().float().numpy(), v)
    for n in ("000_fc", "001_act", "002_bn"):
        assert on_grid(d["activations/" + n]), n
    assert not on_grid(d["activations/003_ln"])
    assert not on_grid(d["activations/004_root/1"])


# ---- the envelope file -----------------------------------------------------------------------
def build_conv():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 5))


XC = torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(3))


def _recompute(a, members):
    """docs/envelope.md's figures of one tensor, from A's and the members' values."""
    a = a.astype(np.float64)
    ms = [m.astype(np.float64) for m in members]
    fa = np.isfinite(a)
    ok = [fa & np.isfinite(m) for m in ms]
    diffs = [np.where(o, m - a, 0.0) for o, m in zip(ok, ms)]
    cnt = sum(o.astype(int) for o in ok)
    sq = sum(d * d for d in diffs)
    r = np.where(cnt > 0, np.sqrt(sq / np.maximum(cnt, 1)), 0.0)
    fin = a[fa]
    return {"r": r, "scale": r.max() if r.size else 0.0,
            "member_rms_err": [math.sqrt((d * d).sum() / max(o.sum(), 1))
                               for d, o in zip(diffs, ok)],
            "member_max_abs": [np.abs(d).max() for d in diffs],
            # rank ceil(n/2) of the sorted |m - a| over finite pairs (n odd: the median)
            "member_median_err": [np.sort(np.abs(d[o]))[math.ceil(o.sum() / 2) - 1]
                                  if o.sum() else 0.0 for d, o in zip(diffs, ok)],
            "a_rms": math.sqrt((fin * fin).mean()) if fin.size else 0.0, "count": a.size,
            "nonfinite": int(sum((fa != np.isfinite(m)) for m in ms).astype(bool).sum())}


def _check_envelope(env_path, a_path, member_paths, policy, k):
    a = _read(a_path)
    members = [_read(p) for p in member_paths]
    floating = [n for n, v in a.items() if np.asarray(v).dtype.kind == "f"]
    with h5py.File(env_path, "r") as f:
        at = dict(f.attrs)
        assert at["paritycheck_envelope"] == 1 and at["members"] == k
        assert at["emulate"] == EMULATION[policy][0] and at["policy"] == policy
        assert at["seed"] == 0 and at["torch_version"] == torch.__version__
        assert at["reference"] == os.path.basename(a_path)
        assert at["tensors"] == len(floating)
        assert at["scale_test"] == 1 and at["median_test"] == 1
        got = {}
        f.visititems(lambda n, o: got.__setitem__(n, o) if isinstance(o, h5py.Dataset)
                     else None)
        assert sorted(got) == sorted(floating)
        for n in floating:
            ds, want = got[n], _recompute(a[n], [m[n] for m in members])
            e = ds[()]
            assert ds.dtype == np.float16 and e.shape == np.shape(a[n]), n
            s = ds.attrs["scale"]
            assert s == want["scale"], n
            np.testing.assert_allclose(ds.attrs["member_rms_err"], want["member_rms_err"],
                                       rtol=1e-12, atol=0)
            np.testing.assert_array_equal(ds.attrs["member_max_abs"], want["member_max_abs"])
            np.testing.assert_array_equal(ds.attrs["member_median_err"],
                                          want["member_median_err"])
            assert ds.attrs["a_rms"] == pytest.approx(want["a_rms"], rel=1e-12)
            assert ds.attrs["count"] == want["count"]
            assert ds.attrs["nonfinite"] == want["nonfinite"]
            r, e64 = want["r"], e.astype(np.float64)
            assert np.all(e64 * s >= r), n                        # rounded up, always
            below = np.nextafter(e, np.float16(-np.inf)).astype(np.float64)
            pos = r > 0
            assert np.all(below[pos] * s < r[pos]), n               # and by no more than needed
            assert np.all(e[r == 0] == 0), n
    return got


def test_envelope_matches_the_format(tmp_path):
    a_path = str(tmp_path / "a.h5")
    run = lambda p: dump_model(build_conv, XC, p)  # noqa: E731
    run(a_path)
    keep = str(tmp_path / "members")
    out = make_envelope(run, a_path, "bf16-autocast", members=4, keep_members=keep)
    assert out == [envelope_path(a_path)] == [str(tmp_path / "a.envelope.h5")]
    mpaths = [os.path.join(keep, "member_%d" % k, "a.h5") for k in range(4)]
    _check_envelope(out[0], a_path, mpaths, "bf16-autocast", 4)
    with h5py.File(out[0], "r") as f:
        assert f["gradients/0.weight"].attrs["scale"] > 0          # backward perturbed
        assert f["inputs/0"].attrs["scale"] == 0                   # autocast keeps fp32 inputs
        rms = [f[n].attrs["member_rms_err"] for n in ("activations/000_0",
                                                       "gradients/4.weight")]
    for v in rms:  # members differ from A and from each other
        assert np.all(v > 0) and len(set(v.tolist())) == len(v)


def test_nonfinite_members_counted(tmp_path):
    """x just above bfloat16's largest finite value rounds up to inf with probability 1/2:
    those elements leave r and are counted in nonfinite; A's NaN is no mismatch."""
    big = float(np.float32(3.3895314e38) + np.float32(2.0 ** 119))  # bf16 max + half a step
    x = torch.tensor([big, big, big, float("nan"), 1.0 + 2.0 ** -10, 2.0])

    def run(path):
        from paritycheck.dump import write_tensors
        y = torch.mm(x.view(-1, 1), torch.ones(1, 1))  # x itself, through a narrow op
        write_tensors([("y", y.view(-1))], path)

    a_path = str(tmp_path / "a.h5")
    run(a_path)
    keep = str(tmp_path / "m")
    make_envelope(run, a_path, "bf16-autocast", members=8, keep_members=keep)
    mpaths = [os.path.join(keep, "member_%d" % k, "a.h5") for k in range(8)]
    got = _check_envelope(envelope_path(a_path), a_path, mpaths, "bf16-autocast", 8)
    with h5py.File(envelope_path(a_path), "r") as f:
        assert 1 <= f["y"].attrs["nonfinite"] <= 3
        assert f["y"][4] > 0 and f["y"][5] == 0 and f["y"][3] == 0
    assert got


def _median_rel(path):
    with h5py.File(path, "r") as f:
        return {n: np.median(f[n].attrs["member_rms_err"]) / f[n].attrs["a_rms"]
                for n in ("activations/000_0", "activations/002_2", "activations/004_4")}


def test_bf16_spread_dwarfs_fp32(tmp_path):
    """Member spread scales with the unit roundoff: bfloat16's 2^-8 against float32's 2^-24.
    One stochastic rounding to a grid of spacing D has rms error D/sqrt(6) (variance f(1-f)D^2,
    f uniform); a random ulp has rms error 1 ulp.  bfloat16's spacing is 2^16 float32 ulps, so
    one rounding each gives 2^16/sqrt(6) = 2^14.7; fp32 emulation rounds at a few more places
    (tanh's outputs), bf16 autocast at both inputs and the output of each Linear: the ratio is
    within 2^14.7 / 2^3.7 .. 2^14.7 * 2^3.3 = 2^11 .. 2^18 (orders of magnitude either way)."""
    torch.set_num_threads(1)
    a_path = str(tmp_path / "a.h5")
    run = lambda p: dump_model(build_mlp, XM, p)  # noqa: E731
    run(a_path)
    make_envelope(run, a_path, "bf16-autocast", members=4)
    bf = _median_rel(envelope_path(a_path))
    make_envelope(run, a_path, "fp32", members=4)
    fp = _median_rel(envelope_path(a_path))
    for n in bf:
        ratio = bf[n] / fp[n]
        print("bf16/fp32 spread", n, ratio, math.log2(ratio))
        assert 2.0 ** 11 <= ratio <= 2.0 ** 18, (n, ratio)


def build_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 8))


XM = torch.randn(16, 64, generator=torch.Generator().manual_seed(4))


def test_trajectory_one_sidecar_per_step(tmp_path):
    """A three-step SGD loop dumped per step, with its weights before each step: one envelope
    beside every file; the weights' spread is 0 before the first update (same init in every
    member) and grows once perturbed updates have accumulated."""
    from paritycheck.dump import write_tensors

    def run(out_dir):
        torch.manual_seed(0)
        model = build_mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(1, 4):
            write_tensors(model.named_parameters(), os.path.join(out_dir, "w_%04d.h5" % step))
            dump_model(lambda: model, XM, os.path.join(out_dir, "step_%04d.h5" % step))
            opt.step()
            opt.zero_grad()

    ref = tmp_path / "A"
    ref.mkdir()
    run(str(ref))
    out = make_envelope(run, str(ref), "bf16-autocast", members=3)
    names = ["step_%04d" % s for s in (1, 2, 3)] + ["w_%04d" % s for s in (1, 2, 3)]
    assert out == [str(ref / (n + ".envelope.h5")) for n in names]
    w = []
    for n, p in zip(names, out):
        with h5py.File(p, "r") as f:
            assert f.attrs["reference"] == n + ".h5"
            if n.startswith("w_"):
                w.append(f["0.weight"].attrs["scale"])
            else:
                assert f["activations/000_0"].attrs["scale"] > 0
    assert w[0] == 0 and 0 < w[1] < w[2]
    # envelopes are never taken for dumps: a second run sees the same step files
    assert make_envelope(run, str(ref), "fp32", members=2) == out


# ---- the CLI and the docs --------------------------------------------------------------------
FACTORY = "import torch.nn as nn\ndef build():\n    return nn.Sequential(nn.Linear(6, 8), " \
          "nn.GELU(), nn.Linear(8, 3))\n"


def _cli(tmp_path, *args):
    (tmp_path / "tinyf.py").write_text(FACTORY)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "paritycheck.dump", "--model", "tinyf:build",
                           "--input-shape", "5,6"] + list(args), cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cli_trio_envelope(tmp_path):
    d = str(tmp_path / "runs")
    p = _cli(tmp_path, "--trio", d, "--policy", "tf32", "--grad", "--envelope", "--members", "3")
    assert p.returncode == 0, p.stderr
    env = os.path.join(d, "a.envelope.h5")
    with h5py.File(env, "r") as f:
        assert f.attrs["policy"] == "tf32" and f.attrs["members"] == 3
        assert f.attrs["emulate"] == "tf32" and f.attrs["reference"] == "a.h5"
        assert f["gradients/0.weight"].attrs["scale"] > 0
    last = p.stdout.strip().splitlines()[-1]
    assert last == "compare: paritycheck --profile tf32 --envelope %s --reference %s %s %s" % (
        env, os.path.join(d, "ref.h5"), os.path.join(d, "a.h5"), os.path.join(d, "b.h5"))
    assert re.search(r"wrote .*a\.envelope\.h5 \(3 members emulating tf32: "
                     r"[0-9.]+ s, [0-9]+ bytes\)", p.stdout)


def test_cli_usage_errors(tmp_path):
    p = _cli(tmp_path, "--out", "o.h5", "--envelope")
    assert p.returncode == 2 and "--envelope wants B's policy with --out" in p.stderr
    assert not (tmp_path / "o.h5").exists()
    p = _cli(tmp_path, "--out", "o.h5", "--envelope", "tf32", "--members", "1")
    assert p.returncode == 2 and "--members wants at least 2" in p.stderr


def test_docs_example(tmp_path):
    """docs/python.md's envelope example (the ```py block of "The honest envelope"), run as
    written, makes A, R and A's envelope."""
    text = open(os.path.join(ROOT, "docs", "python.md")).read()
    section = text[text.index("## The honest envelope"):]
    code = re.search(r"```py\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 16
    (tmp_path / "example.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "example.py"], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    with h5py.File(str(tmp_path / "ref.h5"), "r") as f:
        assert f["activations/000_0"].dtype == np.float64
    with h5py.File(str(tmp_path / "a.envelope.h5"), "r") as f:
        assert f.attrs["members"] == 8 and f.attrs["policy"] == "bf16-autocast"
        assert f["gradients/0.weight"].attrs["scale"] > 0


@pytest.mark.parametrize("policy", ["fp32", "tf32", "bf16-autocast"])
def test_batchnorm_running_stats_move(policy):
    """A train-mode BatchNorm's running statistics are updated in place by native_batch_norm,
    whose schema does not mark them written before torch 2: under emulation they must move as in
    A's run (running_mean = momentum x the batch mean from 0; num_batches_tracked 1), not stay
    at 0 in a rounded copy (the bug zoo's bn_momentum bug passed its envelope that way)."""
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(4)
    x = torch.randn(2, 4, 5, 5)
    want = 0.1 * x.mean((0, 2, 3))  # momentum 0.1, running_mean starts at 0
    with emulate(policy, torch.Generator().manual_seed(1)):
        bn(x)
    assert int(bn.num_batches_tracked) == 1
    assert torch.allclose(bn.running_mean, want, rtol=1e-2, atol=1e-6)
