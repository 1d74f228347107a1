#!/usr/bin/python3
"""The zoo: real cross-backend dumps of many small model families, for calibrating tolerance
profiles.  Writes <out>/<family>_<backend>.h5 with python/paritycheck/dump.py.

Every family is small but real and deterministic: weights are built seeded on the CPU in fp32,
then cast and moved per backend; every backend gets the same inputs and targets.  Each run is a
forward and a backward of a fixed loss (cross-entropy against fixed targets, or mean(out^2)),
computed in float64 under cpu_fp64 and in float32 otherwise (also under autocast).  A file
holds inputs/<i> (and inputs/target), activations/NNN_<module> of the dumped modules,
outputs/loss, and gradients/<param> of every parameter in the order backward produced them;
every dataset carries execution_index (one counter: inputs, activations, loss, gradients).

Backends (name, device, pcdump policy):
    cpu_fp64     CPU, model, inputs and loss in float64 (the reference)
    cpu_fp32     CPU, float32, --threads threads (default 4)
    cpu_fp32_t1  CPU, float32, 1 thread (restored afterwards)
    cuda_fp32    CUDA, float32, TF32 off (matmul and cuDNN), precision "highest"
    cuda_fp32_b  the same again (a second run in the same process: run-to-run noise)
    cuda_tf32    CUDA, float32, TF32 on
    cuda_bf16    CUDA, torch.autocast(bfloat16), TF32 off
    cuda_fp16    CUDA, torch.autocast(float16), TF32 off; no loss scaling (loss_scale = 1):
                 parameter gradients are float32 (the parameters are), only the activation
                 gradients inside backward are float16
The backward runs outside autocast under the policy's TF32 switches (Dumper.backward_context).

Families (batch): resnet (8), mobilenet (2), cnn_eval (64), convbias_bn (4), lstm (4),
gru (1), gpt_explicit (2), gpt_sdpa (2), encoder (16), unet (3), embedding_sparse (32),
moe (64 tokens), mlp_b1 (1).  See build() for each.

    python3 tests/zoo/make_zoo.py --out /tmp/zoo                   # all (CUDA ones need a GPU)
    /usr/bin/python3 tests/zoo/make_zoo.py --out /tmp/z --cpu-only --tiny   # quick local test
    python3 tests/zoo/make_zoo.py --summarize /tmp/zoo [--ref cpu_fp64]     # drift table

The model classes live in zoo_models.py; this file builds each family's inputs, runs the
backends and writes the dumps. A family or backend that fails is logged and skipped; the exit
status is 1 if any failed.
"""

import argparse
import copy
import glob
import os
import sys
import time
import traceback

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
from paritycheck import dump as pcdump  # noqa: E402
from zoo_models import (HAVE_SDPA, CNNEval, ConvBiasBN, DeepMLP, EmbeddingModel,  # noqa: E402
                        Encoder, GPTExplicit, GPTSDPA, GRUTagger, LSTMTagger, MobileNetV2, MoE,
                        ResNet, UNet)

BACKENDS = [  # (name, device, policy, threads: None = --threads)
    ("cpu_fp64", "cpu", "fp64", None),
    ("cpu_fp32", "cpu", "fp32", None),
    ("cpu_fp32_t1", "cpu", "fp32", 1),
    ("cuda_fp32", "cuda", "fp32", None),
    ("cuda_fp32_b", "cuda", "fp32", None),
    ("cuda_tf32", "cuda", "tf32", None),
    ("cuda_bf16", "cuda", "bf16-autocast", None),
    ("cuda_fp16", "cuda", "fp16-autocast", None),
]

TINY = False


def cfg(full, tiny):
    return tiny if TINY else full


# ============================================================================ families
FAMILIES = ["resnet", "mobilenet", "cnn_eval", "convbias_bn", "lstm", "gru", "gpt_explicit",
            "gpt_sdpa", "encoder", "unet", "embedding_sparse", "moe", "mlp_b1"]


class Spec:
    """What one family needs: model (fp32, CPU), inputs (tuple), target, loss kind."""

    def __init__(self, model, inputs, target, loss="ce", ks=None, modules="leaves",
                 train=True, notes=""):
        self.model, self.inputs, self.target, self.loss = model, inputs, target, loss
        self.ks, self.modules, self.train, self.notes = ks or {}, modules, train, notes


def build(family, seed):
    """Spec of ``family``: weights and data seeded (torch.manual_seed for the weights, a
    separate generator for the data), all on the CPU in fp32."""
    fseed = seed * 1000 + FAMILIES.index(family) + 1
    torch.manual_seed(fseed)
    g = torch.Generator().manual_seed(10000 + fseed)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    def randint(n, *shape):
        return torch.randint(0, n, shape, generator=g)

    if family == "resnet":
        B, H = cfg(8, 2), 16
        return Spec(ResNet(), (randn(B, 3, H, H),), randint(10, B),
                    notes="19 convs, BatchNorm train mode")
    if family == "mobilenet":
        B, H = 2, 16
        return Spec(MobileNetV2(), (randn(B, 3, H, H),), randint(10, B),
                    notes="inverted residuals, depthwise convs, BatchNorm train mode; "
                          "8x8 -> 4x4 -> 2x2")
    if family == "cnn_eval":
        B = cfg(64, 4)
        m = CNNEval()
        for bn in (m.bn1, m.bn2, m.bn3):
            c = bn.num_features
            bn.running_mean.copy_(0.5 * torch.randn(c, generator=g))
            bn.running_var.copy_(0.5 + 1.5 * torch.rand(c, generator=g))
            with torch.no_grad():
                bn.weight.copy_(1.0 + 0.2 * torch.randn(c, generator=g))
                bn.bias.copy_(0.2 * torch.randn(c, generator=g))
        return Spec(m, (randn(B, 3, 8, 8),), randint(10, B), train=False,
                    notes="eval mode: BatchNorm with seeded running stats, Dropout identity")
    if family == "convbias_bn":
        B = cfg(4, 2)
        return Spec(ConvBiasBN(), (randn(B, 3, 8, 8),), randint(10, B),
                    notes="conv biases before train-mode BatchNorm: their gradients are 0 "
                          "mathematically, the dumped values are rounding noise")
    if family == "lstm":
        B, S = cfg(4, 2), cfg(24, 6)
        return Spec(LSTMTagger(), (randn(B, S, 16),), randint(10, B, S),
                    notes="2-layer LSTM, per-step cross-entropy")
    if family == "gru":
        S = cfg(32, 6)
        return Spec(GRUTagger(), (randn(1, S, 16),), randint(10, 1, S),
                    notes="bidirectional GRU, batch 1, per-step cross-entropy")
    if family in ("gpt_explicit", "gpt_sdpa"):
        B, T, V = 2, cfg(32, 8), 256
        m = GPTExplicit(seq=T) if family == "gpt_explicit" else GPTSDPA(seq=T)
        with torch.no_grad():  # GPT-like small embeddings (N(0, 1) would make the tied
            m.wte.weight.mul_(0.3)  # head's logits huge)
            m.wpe.weight.mul_(0.3)
        tok = randint(V, B, T)
        return Spec(m, (tok,), randint(V, B, T),
                    notes="causal decoder, 2 blocks; %s" % (
                        "explicit attention, LayerNorm, GELU, tied head"
                        if family == "gpt_explicit" else
                        "attention via %s, RMSNorm, SiLU-gated MLP, untied head" % (
                            "F.scaled_dot_product_attention(is_causal=True)" if HAVE_SDPA
                            else "explicit fallback (torch without SDPA)")))
    if family == "encoder":
        B, S = cfg(16, 2), cfg(20, 6)
        m = Encoder()
        named = dict(m.named_modules())
        mods = [n for n, mod in named.items()
                if next(mod.children(), None) is None and not isinstance(mod, nn.Dropout)
                and not n.endswith("out_proj")]  # out_proj's weights are used, it is not called
        mods += [n for n, mod in named.items() if isinstance(mod, nn.MultiheadAttention)]
        ks = {n: max(S, 16) for n, mod in named.items() if isinstance(mod, nn.MultiheadAttention)}
        return Spec(m, (randn(B, S, 8),), randint(5, B), ks=ks, modules=mods,
                    notes="nn.TransformerEncoder, post-LN, dropout 0; self_attn outputs "
                          "dumped, Dropout modules not")
    if family == "unet":
        B, H = cfg(3, 1), cfg(16, 8)
        return Spec(UNet(), (randn(B, 3, H, H),), randint(4, B, H, H),
                    notes="GroupNorm, ConvTranspose2d up path, skip concat, per-pixel CE")
    if family == "embedding_sparse":
        B = cfg(32, 4)
        tok = randint(1000, B, 6)
        sizes = torch.randint(1, 6, (B,), generator=g)
        off = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]])
        bag_idx = randint(500, int(sizes.sum()))
        return Spec(EmbeddingModel(), (tok, bag_idx, off, randn(B, 8)), randint(5, B),
                    notes="nn.Embedding(sparse=True) (gradient stored densified) + "
                          "nn.EmbeddingBag(mean) + MLP")
    if family == "moe":
        N = cfg(64, 16)
        m = MoE()
        for attempt in range(1000):
            x = randn(N, 32)
            gap = m.router_gap(x)
            if gap >= MoE.MIN_GAP:
                break
        else:
            raise RuntimeError("no input with a router gap >= %g" % MoE.MIN_GAP)
        m.router_min_gap = gap
        return Spec(m, (x,), randint(10, N),
                    notes="top-2 of 4 experts, index_add combine; router min gap %.3f "
                          "(input attempt %d)" % (gap, attempt))
    if family == "mlp_b1":
        return Spec(DeepMLP(), (randn(1, 48),), randint(10, 1),
                    notes="8 Linear + Tanh, batch 1")
    raise KeyError(family)


# ============================================================================ running
def matmul_probe(device):
    """Max-abs error of a 512^3 fp32 matmul vs float64 over max |ref|, under the current
    switches/autocast (confirms the policy took effect)."""
    g = torch.Generator().manual_seed(7)
    a = torch.randn(512, 512, generator=g)
    b = torch.randn(512, 512, generator=g)
    ref = a.double() @ b.double()
    got = (a.to(device) @ b.to(device)).double().cpu()
    return float(((got - ref).abs().max() / ref.abs().max()).item())


def compute_loss(spec, out, target, ldtype):
    out = out.to(ldtype)
    if spec.loss == "ce":
        if out.dim() == 4:  # per-pixel: B, C, H, W
            return F.cross_entropy(out, target)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return out.pow(2).mean()


def run_one(family, backend, device, policy, threads, out_dir, seed, module_grads=False):
    spec = build(family, seed)
    model = pcdump.apply_policy_to_model(copy.deepcopy(spec.model), policy, device)
    model.train(spec.train)
    xs = pcdump.cast_input(tuple(spec.inputs), policy, device)
    target = spec.target.to(device)
    path = os.path.join(out_dir, "%s_%s.h5" % (family, backend))
    attrs = {"family": family, "backend_name": backend, "seed": seed,
             "generator": "tests/zoo/make_zoo.py", "model_repr": repr(model),
             "family_notes": spec.notes, "training_mode": int(spec.train),
             "batch_size": int(spec.inputs[0].shape[0]),
             "loss": "cross_entropy" if spec.loss == "ce" else "mean_square",
             "loss_dtype": str(pcdump.loss_dtype(policy)).replace("torch.", ""),
             "loss_scale": 1, "tiny": int(TINY),
             "cudnn_benchmark": int(torch.backends.cudnn.benchmark),
             "cudnn_deterministic": int(torch.backends.cudnn.deterministic),
             "num_threads": torch.get_num_threads()}
    if family == "gpt_sdpa":
        attrs["attention_impl"] = "sdpa" if HAVE_SDPA else "explicit_fallback"
    if family == "moe":
        attrs["router_min_gap"] = spec.model.router_min_gap
    t0 = time.time()
    with pcdump.Dumper(model, path, policy=policy, device=device, modules=spec.modules,
                       reduction_lengths=spec.ks, attrs=attrs, module_grads=module_grads) as d:
        for i, x in enumerate(xs):
            d.save("inputs/%d" % i, x)
        d.save("inputs/target", target)
        with d.policy_context():
            d.extra_attrs["probe_matmul_relerr"] = matmul_probe(device)
            out = model(*xs)
            loss = compute_loss(spec, out, target, d.loss_dtype)
        d.enabled = False
        d.save("outputs/loss", loss)
        d.watch_gradients()
        with d.backward_context():
            loss.backward()
        missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        if missing:
            d.extra_attrs["params_without_grad"] = ",".join(missing)
        d.dump_gradients()
        if device == "cuda":
            torch.cuda.synchronize()
        d.extra_attrs["run_seconds"] = round(time.time() - t0, 3)
    return path, d._calls


# ============================================================================ summary
def _datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
        f.visititems(visit)
    return out


def summarize(dir_, ref):
    """Per family and backend: median and max over the activations and gradients of
    max|b - a| / max|a| (inputs excluded); A = the ref backend."""
    print("| family | B (A = %s) | tensors | median abs/max\\|a\\| | max abs/max\\|a\\| | worst |"
          % ref)
    print("|---|---|---:|---:|---:|---|")
    for fam in FAMILIES:
        rp = os.path.join(dir_, "%s_%s.h5" % (fam, ref))
        if not os.path.exists(rp):
            continue
        A = _datasets(rp)
        for bname, _, _, _ in BACKENDS:
            bp = os.path.join(dir_, "%s_%s.h5" % (fam, bname))
            if bname == ref or not os.path.exists(bp):
                continue
            B = _datasets(bp)
            vals = []
            for n, a in A.items():
                if n.startswith("inputs/") or n not in B or B[n].shape != a.shape:
                    continue
                a64 = np.asarray(a, np.float64)
                b64 = np.asarray(B[n], np.float64)
                fin = np.isfinite(a64) & np.isfinite(b64)
                if not fin.any():
                    continue
                scale = np.abs(a64[fin]).max()
                err = np.abs(b64[fin] - a64[fin]).max()
                vals.append((err / scale if scale else (0.0 if err == 0 else np.inf), n))
            if vals:
                v = sorted(vals)
                print("| %s | %s | %d | %.2g | %.2g | %s |" % (
                    fam, bname, len(v), float(np.median([x for x, _ in v])), v[-1][0], v[-1][1]))


# ============================================================================ main
def main():
    global TINY
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="zoo", help="output folder")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--backends", default=",".join(b[0] for b in BACKENDS))
    ap.add_argument("--cpu-only", action="store_true", help="only the cpu_* backends")
    ap.add_argument("--tiny", action="store_true", help="small shapes for a quick test")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4, help="CPU threads (default 4)")
    ap.add_argument("--module-grads", action="store_true",
                    help="also dump activation_grads/ (module output gradients)")
    ap.add_argument("--summarize", metavar="DIR", help="only print a drift table of DIR")
    ap.add_argument("--ref", default="cpu_fp64", help="reference backend of --summarize")
    a = ap.parse_args()
    if a.summarize:
        summarize(a.summarize, a.ref)
        return 0
    TINY = a.tiny
    fams = [f for f in a.families.split(",") if f]
    for f in fams:
        if f not in FAMILIES:
            ap.error("unknown family %r (known: %s)" % (f, ", ".join(FAMILIES)))
    wanted = [b for b in BACKENDS if b[0] in a.backends.split(",")]
    if a.cpu_only:
        wanted = [b for b in wanted if b[1] == "cpu"]
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.benchmark = False
    have_cuda = torch.cuda.is_available()
    print("torch %s, cuda %s, cudnn %s, numpy %s, h5py %s, gpu %s, threads %d, sdpa %s" % (
        torch.__version__, torch.version.cuda,
        torch.backends.cudnn.version() if have_cuda else None, np.__version__, h5py.__version__,
        torch.cuda.get_device_name(0) if have_cuda else "none", torch.get_num_threads(),
        HAVE_SDPA), flush=True)
    os.makedirs(a.out, exist_ok=True)
    failed, t_all = [], time.time()
    for fam in fams:
        for bname, device, policy, threads in wanted:
            if device == "cuda" and not have_cuda:
                print("skip %s_%s (no CUDA)" % (fam, bname))
                continue
            saved_threads = torch.get_num_threads()
            if threads is not None:
                torch.set_num_threads(threads)
            t0 = time.time()
            try:
                path, n = run_one(fam, bname, device, policy, threads, a.out, a.seed,
                                  a.module_grads)
            except Exception:  # noqa: BLE001 - log, go on with the others
                traceback.print_exc()
                failed.append("%s_%s" % (fam, bname))
                continue
            finally:
                torch.set_num_threads(saved_threads)
            with h5py.File(path, "r") as f:
                probe = f.attrs.get("probe_matmul_relerr", float("nan"))
                loss = float(f["outputs/loss"][()])
            print("wrote %s (%d module calls, %d bytes, loss %.6g, probe %.2g, %.2f s)" % (
                path, n, os.path.getsize(path), loss, probe, time.time() - t0), flush=True)
    files = glob.glob(os.path.join(a.out, "*.h5"))
    print("total %d files, %d bytes, %.1f s" % (
        len(files), sum(os.path.getsize(p) for p in files), time.time() - t_all))
    if failed:
        print("FAILED: %s" % " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
