#!/usr/bin/python3
"""Generate real cross-backend HDF5 dumps for paritycheck: fixtures/real/<family>_<backend>.h5

Small deterministic models (weights built seeded on the CPU in fp32, same inputs for every
backend) are run under each backend/policy and dumped with python/paritycheck/dump.py:

    cpu_fp64   CPU, model and inputs cast to float64 (the reference)
    cpu_fp32   CPU, float32
    cuda_fp32  CUDA, float32, TF32 off (matmul.allow_tf32 = cudnn.allow_tf32 = False,
               float32_matmul_precision = "highest")
    cuda_tf32  CUDA, float32, TF32 on (both True, float32_matmul_precision = "high")
    cuda_bf16  CUDA, torch.autocast(bfloat16), TF32 off
    cuda_fp16  CUDA, torch.autocast(float16), TF32 off

CUDA backends are skipped when no GPU is present.

Families: mixer (conv patch stem + 2 MLP-mixer blocks), rnn (GRU + LSTM), attention (causal
multi-head self-attention block with softmax, LayerNorm, MLP; gradients of all parameters after
backward of mean(out^2)), reductions (sum over K=4096, matmul K=2048, softmax/LayerNorm/RMSNorm/
logsumexp over 4096, and the same after a Linear projection).

    /usr/bin/python3 tests/gen/gen_real_fixtures.py --out fixtures/real
    /usr/bin/python3 tests/gen/gen_real_fixtures.py --summarize fixtures/real   # drift table
"""

import argparse
import copy
import glob
import os
import sys
import traceback

import h5py
import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'python'))
from paritycheck import dump as pcdump  # noqa: E402

BACKENDS = [  # (name, device, policy)
    ("cpu_fp64", "cpu", "fp64"),
    ("cpu_fp32", "cpu", "fp32"),
    ("cuda_fp32", "cuda", "fp32"),
    ("cuda_tf32", "cuda", "tf32"),
    ("cuda_bf16", "cuda", "bf16-autocast"),
    ("cuda_fp16", "cuda", "fp16-autocast"),
]


# ---------------------------------------------------------------------------- models
class MixerBlock(nn.Module):
    def __init__(self, tokens, channels, tok_hidden, ch_hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(channels)
        self.tok_fc1 = nn.Linear(tokens, tok_hidden)
        self.tok_act = nn.GELU()
        self.tok_fc2 = nn.Linear(tok_hidden, tokens)
        self.ln2 = nn.LayerNorm(channels)
        self.ch_fc1 = nn.Linear(channels, ch_hidden)
        self.ch_act = nn.GELU()
        self.ch_fc2 = nn.Linear(ch_hidden, channels)

    def forward(self, x):  # x: B, T, C
        y = self.ln1(x).transpose(1, 2)
        y = self.tok_fc2(self.tok_act(self.tok_fc1(y))).transpose(1, 2)
        x = x + y
        return x + self.ch_fc2(self.ch_act(self.ch_fc1(self.ln2(x))))


class Mixer(nn.Module):
    def __init__(self, img=32, patch=8, channels=64, tok_hidden=64, ch_hidden=256, depth=2,
                 classes=10):
        super().__init__()
        tokens = (img // patch) ** 2
        self.stem = nn.Conv2d(3, channels, patch, stride=patch)  # K = 3*8*8 = 192
        self.blocks = nn.Sequential(*[MixerBlock(tokens, channels, tok_hidden, ch_hidden)
                                      for _ in range(depth)])
        self.ln_f = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, img):
        x = self.stem(img).flatten(2).transpose(1, 2)  # B, T, C
        x = self.ln_f(self.blocks(x))
        return self.head(x.mean(dim=1))


class RNN(nn.Module):
    def __init__(self, feat=32, emb=64, gru_hidden=128, lstm_hidden=64, out=8):
        super().__init__()
        self.embed = nn.Linear(feat, emb)
        self.gru = nn.GRU(emb, gru_hidden, batch_first=True)
        self.lstm = nn.LSTM(gru_hidden, lstm_hidden, batch_first=True)
        self.head = nn.Linear(lstm_hidden, out)

    def forward(self, x):  # B, S, F
        h, _ = self.gru(self.embed(x))
        h, _ = self.lstm(h)
        return self.head(h[:, -1])


class Scores(nn.Module):
    """q @ k^T / sqrt(d) with a causal mask; K = head_dim."""

    def __init__(self, head_dim):
        super().__init__()
        self.reduction_length = head_dim
        self.scale = head_dim ** -0.5

    def forward(self, q, k):
        s = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        T = s.shape[-1]
        mask = torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1)
        return s.masked_fill(mask, float("-inf"))


class ApplyAttn(nn.Module):
    """probs @ v; K = sequence length (given to the Dumper in reduction_lengths)."""

    def forward(self, p, v):
        return torch.matmul(p, v)


class AttentionBlock(nn.Module):
    def __init__(self, dim=64, heads=4, mlp=256):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scores = Scores(dim // heads)
        self.softmax = nn.Softmax(dim=-1)
        self.apply_attn = ApplyAttn()
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):  # B, T, D
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(B, T, 3, self.heads, D // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        p = self.softmax(self.scores(q, k))
        a = self.apply_attn(p, v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(a)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class SumReduce(nn.Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.sum(dim=self.dim)


class LogSumExp(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


class MatMul(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / k ** 0.5)

    def forward(self, x):
        return torch.matmul(x[..., :self.weight.shape[0]], self.weight)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Reductions(nn.Module):
    """Long reductions on the raw fp32 input x (B, 4096), and on h = Linear(64 -> 4096)(u)
    (which autocast computes in bf16/fp16)."""

    def __init__(self, n=4096, k_mm=2048, n_mm=32, d_in=64):
        super().__init__()
        self.sum_x = SumReduce()
        self.matmul_x = MatMul(k_mm, n_mm)
        self.softmax_x = nn.Softmax(dim=-1)
        self.layernorm_x = nn.LayerNorm(n)
        self.rmsnorm_x = RMSNorm(n)
        self.logsumexp_x = LogSumExp()
        self.proj = nn.Linear(d_in, n)
        self.sum_h = SumReduce()
        self.softmax_h = nn.Softmax(dim=-1)
        self.rmsnorm_h = RMSNorm(n)

    def forward(self, x, u):
        outs = [self.sum_x(x), self.matmul_x(x), self.softmax_x(4.0 * x), self.layernorm_x(x),
                self.rmsnorm_x(x), self.logsumexp_x(x)]
        h = self.proj(u)
        outs += [self.sum_h(h), self.softmax_h(h), self.rmsnorm_h(h)]
        return outs


def build(family):
    """(model fp32 on CPU, tuple of fp32 CPU inputs, reduction_lengths, grads?) for a family."""
    seed = {"mixer": 1, "rnn": 2, "attention": 3, "reductions": 4}[family]
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(1000 + seed)
    if family == "mixer":
        m = Mixer()
        return m, (torch.randn(1, 3, 32, 32, generator=g),), {}, False
    if family == "rnn":
        m = RNN()
        return m, (torch.randn(2, 32, 32, generator=g),), {}, False
    if family == "attention":
        m = AttentionBlock()
        T = 32
        return m, (torch.randn(1, T, 64, generator=g),), {"apply_attn": T}, True
    if family == "reductions":
        m = Reductions()
        x = torch.randn(2, 4096, generator=g)
        u = torch.randn(2, 64, generator=g)
        ks = {"sum_x": 4096, "matmul_x": 2048, "softmax_x": 4096, "rmsnorm_x": 4096,
              "logsumexp_x": 4096, "sum_h": 4096, "softmax_h": 4096, "rmsnorm_h": 4096}
        return m, (x, u), ks, False
    raise KeyError(family)


FAMILIES = ["mixer", "rnn", "attention", "reductions"]


def matmul_probe(device):
    """Relative error of a 512^3 fp32 matmul vs float64 under the current switches/autocast:
    ~1e-7 for fp32, ~1e-4..1e-3 for TF32, larger for bf16/fp16 autocast."""
    g = torch.Generator().manual_seed(7)
    a = torch.randn(512, 512, generator=g)
    b = torch.randn(512, 512, generator=g)
    ref = (a.double() @ b.double())
    got = (a.to(device) @ b.to(device)).double().cpu()
    return float(((got - ref).abs().max() / ref.abs().max()).item())


def run_one(family, backend, device, policy, out_dir):
    model, inputs, ks, grads = build(family)
    model = pcdump.apply_policy_to_model(copy.deepcopy(model), policy, device)
    model.train()  # no dropout/batchnorm anywhere, train() only matters for autograd
    xs = pcdump.cast_input(inputs, policy, device)
    path = os.path.join(out_dir, "%s_%s.h5" % (family, backend))
    attrs = {"family": family, "backend_name": backend, "generator": "tests/gen/gen_real_fixtures.py",
             "model_repr": repr(model)}
    with pcdump.Dumper(model, path, policy=policy, device=device, reduction_lengths=ks,
                       attrs=attrs) as d:
        for i, x in enumerate(xs):
            d.save("inputs/%d" % i, x)
        with d.policy_context():
            d.extra_attrs["probe_matmul_relerr"] = matmul_probe(device)
            out = model(*xs)
            if grads:
                loss = out.float().pow(2).mean()
        if grads:
            d.enabled = False
            loss.backward()
            d.save("outputs/loss", loss)
            # weight gradients reduce over batch*tokens rows
            rows = int(np.prod(inputs[0].shape[:-1]))
            d.dump_gradients(None, reduction_lengths={
                n: rows for n, p in model.named_parameters() if p.dim() == 2})
        if device == "cuda":
            torch.cuda.synchronize()
    return path, d._calls


# ---------------------------------------------------------------------------- summary
def _datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = (obj[()], obj.attrs.get("dtype", None))
        f.visititems(visit)
    return out


def _stats(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    eq = (a == b) | both_nan
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(eq, 0.0, np.abs(b - a))
        rel = np.where(eq, 0.0, np.where(a == 0, np.inf, d / np.abs(a)))
    finite = np.isfinite(a)
    scale = np.abs(a[finite]).max() if finite.any() else 0.0
    mabs = float(d.max()) if d.size else 0.0
    return mabs, float(rel.max()) if rel.size else 0.0, (mabs / scale if scale else 0.0)


def summarize(dir_, ref="cpu_fp32", write=None):
    lines = []
    summary = []
    for fam in FAMILIES:
        rp = os.path.join(dir_, "%s_%s.h5" % (fam, ref))
        if not os.path.exists(rp):
            continue
        A = _datasets(rp)
        others = [b for b, _, _ in BACKENDS if b != ref]
        for bname in others:
            bp = os.path.join(dir_, "%s_%s.h5" % (fam, bname))
            if not os.path.exists(bp):
                continue
            B = _datasets(bp)
            miss = sorted(set(A) ^ set(B))
            lines.append("## %s: %s (A) vs %s (B)%s" % (fam, ref, bname,
                         ("  names only on one side: %s" % miss) if miss else ""))
            lines.append("%-44s %7s %10s %10s %10s" % ("tensor", "K", "max_abs", "max_rel",
                                                          "abs/max|a|"))
            agg_abs, agg_rel, agg_n = 0.0, 0.0, []
            for name in A:
                if name not in B:
                    continue
                if A[name][0].shape != B[name][0].shape:
                    lines.append("%-44s shape %s vs %s" % (name, A[name][0].shape, B[name][0].shape))
                    continue
                mabs, mrel, nrm = _stats(A[name][0], B[name][0])
                with h5py.File(rp, "r") as f:
                    K = f[name].attrs.get("reduction_length", "")
                lines.append("%-44s %7s %10.3g %10.3g %10.3g" % (name, K, mabs, mrel, nrm))
                if name.startswith("inputs/"):
                    continue
                agg_abs = max(agg_abs, mabs)
                agg_rel = max(agg_rel, mrel)
                agg_n.append(nrm)
            lines.append("")
            if agg_n:
                summary.append((fam, bname, len(agg_n), float(np.median(agg_n)), max(agg_n),
                                agg_abs, agg_rel))
    head = ["| family | B (A = %s) | tensors | median abs/max\\|a\\| | max abs/max\\|a\\| | max abs | max rel |" % ref,
            "|---|---|---:|---:|---:|---:|---:|"]
    for fam, b, n, med, mx, ma, mr in summary:
        head.append("| %s | %s | %d | %.2g | %.2g | %.2g | %.2g |" % (fam, b, n, med, mx, ma, mr))
    text = "\n".join(head) + "\n"
    if write:
        with open(write, "w") as f:
            f.write("# Per-tensor drift, A = %s, generated by gen_real_fixtures.py --summarize\n\n" % ref)
            f.write("max_abs = max |b-a|; max_rel = max |b-a|/|a| (inf where a == 0 != b); "
                    "abs/max|a| = max_abs / max |a| over the tensor.\n\n")
            f.write(text + "\n")
            f.write("\n".join(lines) + "\n")
    return text, "\n".join(lines)


def same_bits(dir1, dir2):
    """Bitwise comparison of every dataset of the .h5 files present in both folders
    (run-to-run determinism check)."""
    for p2 in sorted(glob.glob(os.path.join(dir2, "*.h5"))):
        p1 = os.path.join(dir1, os.path.basename(p2))
        if not os.path.exists(p1):
            continue
        A, B = _datasets(p1), _datasets(p2)
        diff = [n for n in A if n in B and A[n][0].tobytes() != B[n][0].tobytes()]
        print("repeat %s: %d/%d datasets differ bitwise%s" % (
            os.path.basename(p2), len(diff), len(A), (" " + ",".join(diff[:4])) if diff else ""))


# ---------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="fixtures/real", help="output folder (default fixtures/real)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--backends", default=",".join(b for b, _, _ in BACKENDS))
    ap.add_argument("--threads", type=int, default=4, help="torch CPU threads (default 4)")
    ap.add_argument("--summarize", metavar="DIR", help="only print the drift table of DIR")
    ap.add_argument("--ref", default="cpu_fp32", help="reference backend for --summarize")
    ap.add_argument("--write", metavar="FILE", help="with --summarize: write the per-tensor table")
    ap.add_argument("--same-bits", nargs=2, metavar=("DIR1", "DIR2"),
                    help="only compare the files of DIR2 bitwise with those of DIR1")
    a = ap.parse_args()
    if a.same_bits:
        same_bits(*a.same_bits)
        return 0
    if a.summarize:
        table, detail = summarize(a.summarize, a.ref, a.write)
        print(table)
        if not a.write:
            print(detail)
        return 0

    torch.set_num_threads(a.threads)
    have_cuda = torch.cuda.is_available()
    print("torch %s, cuda %s, cudnn %s, numpy %s, gpu %s, threads %d" % (
        torch.__version__, torch.version.cuda,
        torch.backends.cudnn.version() if have_cuda else None, np.__version__,
        torch.cuda.get_device_name(0) if have_cuda else "none", torch.get_num_threads()))
    os.makedirs(a.out, exist_ok=True)
    wanted = set(a.backends.split(","))
    failed = []
    for fam in a.families.split(","):
        for bname, device, policy in BACKENDS:
            if bname not in wanted:
                continue
            if device == "cuda" and not have_cuda:
                print("skip %s_%s (no CUDA)" % (fam, bname))
                continue
            try:
                path, n = run_one(fam, bname, device, policy, a.out)
            except Exception:  # noqa: BLE001 - keep going, report at the end
                traceback.print_exc()
                failed.append("%s_%s" % (fam, bname))
                continue
            with h5py.File(path, "r") as f:
                probe = f.attrs.get("probe_matmul_relerr", float("nan"))
            print("wrote %s (%d module calls, %d bytes, matmul probe rel err %.2g)" % (
                path, n, os.path.getsize(path), probe))
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(a.out, "*.h5")))
    print("total %d bytes" % total)
    if failed:
        print("FAILED: %s" % " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
