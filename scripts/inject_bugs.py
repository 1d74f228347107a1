#!/usr/bin/env python3
"""Inject known bugs into one tensor of an honest dump, for paritycheck's bug-detection matrix.

The honest dumps are fixtures/real/<family>_<backend>.h5 (scripts/gen_real_fixtures.py). A case
is (family, backend, bug, target): the B file <family>_<backend>.h5 is copied and only the
dataset `target` is rewritten with `bug` applied to its honest values; every other tensor stays
honest. So the first tensor in run order that paritycheck flags must be `target`.

Bugs (BUGS below; each keeps shape and dtype, and rounds the result to the dataset's logical
dtype, so that a bf16 tensor stays bf16 values as a buggy bf16 kernel would write them):

    roll         values shifted by one along the last axis (an off-by-one index)
    dropout      dropout left on at inference: ~10% of elements zeroed, the rest scaled 1/0.9
    nan          one NaN (the middle element)
    grad_x2      a gradient doubled (loss counted twice); gradient targets only
    scale_1pct   every value times 1.01
    chan_zero    the last channel (last axis) zeroed (an off-by-one slice)
    bf16_round   the tensor silently computed in bfloat16: rounded to bf16, ties to even
    ln_eps_1e-3  LayerNorm eps 1e-5 -> 1e-3 (Keras' default): LayerNorm targets only
    ln_eps_1e-6  LayerNorm eps 1e-5 -> 1e-6: LayerNorm targets only

The eps bugs are recomputed, not emulated: the injector reads the LayerNorm's input from the
same B file (its own honest upstream tensor) and applies the exact effect of the eps change,
b * sqrt((var + eps) / (var + eps')) per normalised row, with var the row's biased variance of
that input in float64. This needs an affine-free LayerNorm (weight 1, bias 0: the fixtures'
models are untrained) and the injector checks that: it recomputes the honest output from the
input and refuses when it does not match B's dataset (EPS_CHECK_REL).

Usage:
    inject_bugs.py --list                            # every case: family bug target
    inject_bugs.py SRC.h5 DST.h5 BUG TARGET [--seed N]
"""

import argparse
import os
import shutil
import sys

import h5py
import numpy as np

# Tensors that bugs are injected into, per family: mid-network, of every kind the fixtures
# have (matmul with short and long K, conv, LayerNorm, softmax, GELU, cuDNN GRU/LSTM output,
# a weight gradient), never the first tensor of a run unless it is the only place for the bug.
TARGETS = {
    "attention": ["activations/003_softmax", "activations/005_proj", "gradients/fc1.weight",
                  "gradients/ln2.bias"],
    "mixer": ["activations/008_blocks.0.ch_fc2", "activations/015_blocks.1.ch_act"],
    "rnn": ["activations/001_gru/0", "activations/003_head"],
    "reductions": ["activations/001_matmul_x", "activations/008_softmax_h"],
}

# LayerNorm targets whose input is in the file: target -> (input dataset, how to reshape it so
# that the normalised axis is the last one, as the LayerNorm saw it).
LN_TARGETS = {
    "attention": {"activations/000_ln1": ("inputs/0", None)},
    "mixer": {"activations/001_blocks.0.ln1": ("activations/000_stem", "flatten2_transpose12")},
    "reductions": {"activations/003_layernorm_x": ("inputs/0", None)},
}

LN_EPS = 1e-5  # torch.nn.LayerNorm's default, which the fixtures' models use
# The honest output recomputed from its input in float64 must match B's dataset to this
# relative accuracy (of the row scale); far above fp32 LayerNorm rounding, far below any eps
# effect tested.
EPS_CHECK_REL = 1e-5

DROPOUT_P = 0.1
SCALE_1PCT = 1.01


def _round_bf16(x):
    """Round float64 values to bfloat16 (ties to even), returned as float64. NaN stays NaN."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, out)


def _to_logical(values, ds):
    """values (float64) rounded to what dataset ds holds: its logical dtype, then its storage."""
    if ds.attrs.get("dtype", None) in ("bfloat16", b"bfloat16"):
        values = _round_bf16(values)
    return values.astype(ds.dtype)


def _ln_input(f, family, target):
    src, how = LN_TARGETS[family][target]
    x = f[src][()].astype(np.float64)
    if how == "flatten2_transpose12":  # conv output (B, C, H, W) -> tokens (B, H*W, C)
        x = x.reshape(x.shape[0], x.shape[1], -1).transpose(0, 2, 1)
    return x


def _ln_eps_effect(new_eps):
    def apply(b, ctx):
        x = _ln_input(ctx["file"], ctx["family"], ctx["target"])
        var = x.var(axis=-1, keepdims=True)
        honest = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(var + LN_EPS)
        err = np.abs(honest.reshape(b.shape) - b).max() / np.abs(honest).max()
        if not err <= EPS_CHECK_REL:
            raise ValueError("%s is not an affine-free LayerNorm of its input (rel. diff %.3g)"
                             % (ctx["target"], err))
        return b * np.sqrt((var + LN_EPS) / (var + new_eps)).reshape(b.shape[:-1] + (1,))
    return apply


def _roll(b, ctx):
    return np.roll(b, 1, axis=-1)


def _dropout(b, ctx):
    keep = ctx["rng"].random(b.shape) >= DROPOUT_P
    return np.where(keep, b / (1 - DROPOUT_P), 0.0)


def _nan(b, ctx):
    out = b.copy()
    out.flat[out.size // 2] = np.nan
    return out


def _chan_zero(b, ctx):
    out = b.copy()
    out[..., -1] = 0.0
    return out


def _is_gradient(family, target):
    return target.startswith("gradients/")


def _is_ln(family, target):
    return target in LN_TARGETS.get(family, {})


def _any(family, target):
    return not _is_ln(family, target)


# name -> (function(b float64 array, ctx) -> float64 array, applies(family, target))
BUGS = {
    "roll": (_roll, _any),
    "dropout": (_dropout, _any),
    "nan": (_nan, _any),
    "grad_x2": (lambda b, ctx: 2.0 * b, _is_gradient),
    "scale_1pct": (lambda b, ctx: SCALE_1PCT * b, _any),
    "chan_zero": (_chan_zero, _any),
    "bf16_round": (lambda b, ctx: _round_bf16(b), _any),
    "ln_eps_1e-3": (_ln_eps_effect(1e-3), _is_ln),
    "ln_eps_1e-6": (_ln_eps_effect(1e-6), _is_ln),
}


def cases(families=None):
    """Every (family, bug, target) of the matrix, in a fixed order."""
    out = []
    for family in families or list(TARGETS):
        targets = TARGETS[family] + list(LN_TARGETS.get(family, {}))
        for bug, (_, applies) in BUGS.items():
            out += [(family, bug, t) for t in targets if applies(family, t)]
    return out


def buggy_values(path, family, bug, target, seed=0):
    """(honest, buggy) values of `target` in the dump at `path`, both as stored (numpy)."""
    fn, applies = BUGS[bug]
    if not applies(family, target):
        raise ValueError("bug %s does not apply to %s/%s" % (bug, family, target))
    with h5py.File(path, "r") as f:
        ds = f[target]
        honest = ds[()]
        ctx = {"file": f, "family": family, "target": target,
               "rng": np.random.default_rng(seed)}
        return honest, _to_logical(fn(honest.astype(np.float64), ctx), ds)


def family_of(path):
    """The family of a fixture file name <family>_<backend>.h5."""
    return os.path.basename(path).split("_", 1)[0]


def inject(src, dst, bug, target, seed=0):
    """Copy src to dst and rewrite dataset `target` of the copy with `bug` applied."""
    _, values = buggy_values(src, family_of(src), bug, target, seed)
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        f[target][...] = values


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print every case and exit")
    ap.add_argument("src", nargs="?")
    ap.add_argument("dst", nargs="?")
    ap.add_argument("bug", nargs="?", choices=list(BUGS))
    ap.add_argument("target", nargs="?")
    ap.add_argument("--seed", type=int, default=0, help="seed of the dropout mask")
    a = ap.parse_args(argv)
    if a.list:
        for c in cases():
            print(*c)
        return 0
    if not (a.src and a.dst and a.bug and a.target):
        ap.error("give SRC DST BUG TARGET, or --list")
    inject(a.src, a.dst, a.bug, a.target, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
