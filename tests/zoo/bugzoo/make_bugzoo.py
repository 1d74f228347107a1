#!/usr/bin/python3
"""The bug zoo (issue 36, item 7): honest and buggy runs of small model families, dumped with
python/paritycheck/dump.py, for judging bugs of meaning against honest cross-backend drift.

Families and bugs: bugzoo_models.py (FAMILIES, BUGS).  Every run is a forward and a backward of
a fixed loss; the trajectory family (traj) runs 10 AdamW steps and dumps each to
step_NNNN.h5.  Same weights, inputs and targets for every backend and every bug.

Layout under --out (FAM = family; a run is FILE.h5, or a folder FILE/ of step files for traj):
    FAM/A.h5                       CPU fp32, honest: the reference A
    FAM/R.h5                       CPU fp64, honest: the reference R of three-way mode
    FAM/BACKEND/honest.h5          B, honest
    FAM/BACKEND/honest_b.h5        B, honest, run again (run-to-run noise of the backend)
    FAM/BACKEND/BUG.h5             B with one bug
    FAM/env_POLICY/A.h5 + A.envelope.h5   A and its envelope emulating POLICY (--envelopes)
    manifest.json                  what was made: families, bugs, backends, profiles, versions
    envelopes.json                 the envelopes made: K, policies, paths, versions, time

Backends (name: device, pcdump policy, paritycheck profile):
    cuda_fp32     CUDA fp32, TF32 off                  cpu-vs-cuda-fp32
    cuda_tf32     CUDA fp32, TF32 on                   tf32
    cuda_bf16     CUDA, autocast bfloat16              bf16-autocast
    cuda_fp16     CUDA, autocast float16, no scaling   fp16-autocast
    cuda_compile  CUDA fp32, torch.compile(model)      cpu-vs-cuda-fp32 (honest only; skipped
                  where torch.compile is missing or fails)

    python3 tests/zoo/bugzoo/make_bugzoo.py --out /tmp/bugzoo [--envelopes K]   # on a GPU
    /usr/bin/python3 tests/zoo/bugzoo/make_bugzoo.py --out /tmp/bz --fake-cuda   # CPU test:
        the cuda_* backends run on the CPU (bf16 autocast on the CPU; fp16 autocast is a no-op
        on torch 1.13's CPU), the layout and the counting stay the same

A run that fails is logged and skipped; the exit status is 1 if any failed.
"""

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
import traceback

import h5py
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
from paritycheck import dump as pcdump  # noqa: E402
import bugzoo_models as bm  # noqa: E402

# name -> (device, policy, compiled, profile)
BACKENDS = {
    "cpu_fp32": ("cpu", "fp32", False, None),
    "cpu_fp64": ("cpu", "fp64", False, None),
    "cuda_fp32": ("cuda", "fp32", False, "cpu-vs-cuda-fp32"),
    "cuda_tf32": ("cuda", "tf32", False, "tf32"),
    "cuda_bf16": ("cuda", "bf16-autocast", False, "bf16-autocast"),
    "cuda_fp16": ("cuda", "fp16-autocast", False, "fp16-autocast"),
    "cuda_compile": ("cuda", "fp32", True, "cpu-vs-cuda-fp32"),
}
B_BACKENDS = ["cuda_fp32", "cuda_tf32", "cuda_bf16", "cuda_fp16", "cuda_compile"]
BUG_BACKENDS = ["cuda_fp32", "cuda_tf32", "cuda_bf16", "cuda_fp16"]
ENVELOPE_POLICIES = ["fp32", "tf32", "bf16-autocast", "fp16-autocast"]
COMPILE_ORDER = ["mlp_ln", "dlrm", "bncnn", "gpt", "lstm", "traj"]
FAKE_CUDA = False


def run_suffix(family):
    """A run is a file NAME.h5, or for a trajectory a folder NAME/ of step files."""
    return "" if bm.build(family, 0).steps > 1 else ".h5"


def compute_loss(spec, out, target, ldtype):
    out = out.to(ldtype)
    if spec.loss == "bce":
        return F.binary_cross_entropy_with_logits(out, target.to(ldtype))
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def _modules(model):
    """Leaves, and the hand-written LSTM cell (its (h, c) is the state a bug changes)."""
    names = [n for n, m in model.named_modules() if next(m.children(), None) is None]
    return names + [n for n, _ in model.named_modules() if n.endswith("loop.cell")]


def _float_buffers(model):
    return [(n, b) for n, b in model.named_buffers() if b.is_floating_point()]


def dumper(model, path, policy, device, spec, attrs, compiled):
    """The run's Dumper.  Under torch.compile its hooks run eagerly (torch._dynamo.disable):
    traced, they would read the platform, files and numpy inside the graph (dynamo fails on
    platform.uname() in the first forward's attribute snapshot, torch 2.11)."""
    d = pcdump.Dumper(model, path, policy=policy, device=device, modules=_modules(model),
                      reduction_lengths=spec.ks, attrs=attrs)
    if compiled:
        import torch._dynamo
        make_hook = d._hook
        d._hook = lambda name: torch._dynamo.disable(make_hook(name))
        d._snapshot_attrs = torch._dynamo.disable(d._snapshot_attrs)
    return d


def one_step(spec, model, fwd, xs, target, path, policy, device, attrs, opt=None,
             held_out=None, compiled=False):
    """Forward, loss, backward of one step dumped to ``path``; with ``opt`` also the
    optimizer step, the parameters after it and eval-mode logits on ``held_out``."""
    with dumper(model, path, policy, device, spec, attrs, compiled) as d:
        for i, x in enumerate(xs):
            d.save("inputs/%d" % i, x)
        d.save("inputs/target", target)
        with d.policy_context():
            out = fwd(*xs)
            loss = compute_loss(spec, out, target, d.loss_dtype)
        d.enabled = False
        if spec.buffers:  # running statistics after the forward that updated them
            for n, b in _float_buffers(model):
                d.save("buffers/" + n, b)
        d.save("outputs/loss", loss)
        d.watch_gradients()
        with d.backward_context():
            loss.backward()
        d.dump_gradients()
        if opt is not None:
            with d.backward_context():
                opt.step()
            for n, p in model.named_parameters():
                d.save("params/" + n, p.detach())
            model.eval()
            with torch.no_grad(), d.policy_context():
                d.save("eval/logits", fwd(held_out).float())
            model.train()
            opt.zero_grad()
        if device == "cuda":
            torch.cuda.synchronize()


def run_one(family, backend, bug, path, seed):
    """One run of ``family`` on ``backend`` with ``bug`` (None: honest), dumped to ``path``
    (a file, or a folder of step files)."""
    device, policy, compiled, _ = BACKENDS[backend]
    threads = None
    if FAKE_CUDA and device == "cuda":
        # torch 1.13's CPU autocast lacks float16 and casts too little for bfloat16, so a fake
        # backend runs fp32 on 1 thread (another reduction order than A's threads)
        device, policy, threads = "cpu", "fp32", 1
    saved_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        _run(family, backend, bug, path, seed, device, policy, compiled)
    finally:
        torch.set_num_threads(saved_threads)


def _run(family, backend, bug, path, seed, device, policy, compiled):
    spec = bm.build(family, seed, bug)
    model = pcdump.apply_policy_to_model(spec.model, policy, device)
    model.train(spec.train)
    fwd = torch.compile(model) if compiled else model
    attrs = {"family": family, "backend_name": backend, "bug": bug or "", "seed": seed,
             "generator": "tests/zoo/bugzoo/make_bugzoo.py", "family_notes": spec.notes,
             "bug_note": bm.BUGS[family][bug] if bug else "", "fake_cuda": int(FAKE_CUDA),
             "compiled": int(compiled), "training_mode": int(spec.train)}
    torch.manual_seed(seed)  # dropout's generator (the dropout_on bug)
    if device == "cuda":
        torch.cuda.manual_seed(seed)
    if spec.steps == 1:
        xs = pcdump.cast_input(tuple(spec.inputs), policy, device)
        one_step(spec, model, fwd, xs, spec.target.to(device), path, policy, device, attrs,
                 compiled=compiled)
        return
    os.makedirs(path, exist_ok=True)
    opt = spec.optimizer(list(model.parameters()))
    held = pcdump.cast_input(spec.held_out, policy, device)
    for t, (x, y) in enumerate(spec.batches):
        step_path = os.path.join(path, "step_%04d.h5" % t)
        one_step(spec, model, fwd, (pcdump.cast_input(x, policy, device),), y.to(device),
                 step_path, policy, device, dict(attrs, step=t), opt=opt, held_out=held,
                 compiled=compiled)


# ============================================================================ the envelopes
def make_envelopes(out, families, seed, K, jobs):
    """FAM/env_POLICY/A(.h5 | /) and its envelope for every family and ENVELOPE_POLICIES, via
    paritycheck.ensemble.make_envelope on the CPU; returns (made, failed) lists."""
    if importlib.util.find_spec("paritycheck.ensemble") is None:
        print("no envelopes: python/paritycheck has no ensemble module", flush=True)
        return [], ["envelopes (no paritycheck.ensemble)"]
    import envelopes as envmod
    return envmod.make_all(out, families, seed, K, jobs, ENVELOPE_POLICIES, run_one,
                           run_suffix)  # A's thread count: see envelopes.py


# ============================================================================ main
def versions():
    have_cuda = torch.cuda.is_available()
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if have_cuda else None,
            "gpu": torch.cuda.get_device_name(0) if have_cuda else None,
            "numpy": np.__version__, "h5py": h5py.__version__, "python": sys.version.split()[0],
            "fake_cuda": FAKE_CUDA}


def plan(families, backends, bug_backends, with_bugs):
    """The runs to make: (family, backend, bug or None, relative path without suffix)."""
    runs = []
    for fam in families:
        runs += [(fam, "cpu_fp32", None, "A"), (fam, "cpu_fp64", None, "R")]
        for be in backends:
            runs.append((fam, be, None, be + "/honest"))
            if not BACKENDS[be][2]:  # a compiled run again would compile again
                runs.append((fam, be, None, be + "/honest_b"))
        if with_bugs:
            for bug in bm.BUGS[fam]:
                runs += [(fam, be, bug, be + "/" + bug) for be in bug_backends]
    # torch.compile's runs last, the quickest to compile first: its compile time is the least
    # predictable (--compile-budget), and a trajectory compiles again at every step's hooks
    return sorted(runs, key=lambda r: (BACKENDS[r[1]][2], COMPILE_ORDER.index(r[0])
                                       if BACKENDS[r[1]][2] else 0))


def main():
    global FAKE_CUDA
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--families", default=",".join(bm.FAMILIES))
    ap.add_argument("--backends", default=",".join(B_BACKENDS))
    ap.add_argument("--bug-backends", default=",".join(BUG_BACKENDS))
    ap.add_argument("--no-bugs", action="store_true")
    ap.add_argument("--fake-cuda", action="store_true",
                    help="run the cuda_* backends on the CPU (a quick local test)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--envelopes", type=int, default=0, metavar="K",
                    help="also make A's envelopes with K members (paritycheck.ensemble)")
    ap.add_argument("--envelopes-only", action="store_true",
                    help="only make the envelopes of an existing zoo")
    ap.add_argument("--skip-existing", action="store_true", help="keep runs already made")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the envelopes")
    ap.add_argument("--compile-budget", type=float, default=240.0,
                    help="seconds of torch.compile runs at most; the rest are skipped")
    a = ap.parse_args()
    FAKE_CUDA = a.fake_cuda
    fams = [f for f in a.families.split(",") if f]
    for f in fams:
        if f not in bm.FAMILIES:
            ap.error("unknown family %r" % f)
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.benchmark = False
    have_cuda = torch.cuda.is_available() or FAKE_CUDA
    have_compile = hasattr(torch, "compile") and not FAKE_CUDA
    os.makedirs(a.out, exist_ok=True)
    print(json.dumps(versions()), flush=True)
    failed, skipped, t_all, t_compile = [], [], time.time(), 0.0
    backends = [b for b in a.backends.split(",") if b]
    for b in backends + [b for b in a.bug_backends.split(",") if b]:
        if b not in B_BACKENDS:
            ap.error("unknown backend %r (known: %s)" % (b, ", ".join(B_BACKENDS)))
    if not a.envelopes_only:
        bug_backends = [b for b in a.bug_backends.split(",") if b]
        for fam, be, bug, rel in plan(fams, backends, bug_backends, not a.no_bugs):
            path = os.path.join(a.out, fam, rel + run_suffix(fam))
            device, _, compiled, _ = BACKENDS[be]
            if device == "cuda" and not have_cuda:
                skipped.append("%s/%s (no CUDA)" % (fam, rel))
                continue
            if compiled and (not have_compile or t_compile > a.compile_budget):
                skipped.append("%s/%s (torch.compile %s)" % (
                    fam, rel, "missing" if not have_compile else "over budget"))
                continue
            if a.skip_existing and os.path.exists(path):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            t0 = time.time()
            try:
                run_one(fam, be, bug, path, a.seed)
            except Exception:  # noqa: BLE001 - log, go on with the others
                traceback.print_exc()
                failed.append("%s/%s" % (fam, rel))
                if os.path.isdir(path):
                    shutil.rmtree(path)
                continue
            finally:
                if compiled:
                    t_compile += time.time() - t0
            print("wrote %s/%s (%.2f s)" % (fam, rel, time.time() - t0), flush=True)
    if a.envelopes:
        env_made, env_failed = make_envelopes(a.out, fams, a.seed, a.envelopes, a.jobs)
        failed += env_failed
        with open(os.path.join(a.out, "envelopes.json"), "w") as f:
            json.dump({"members": a.envelopes, "policies": ENVELOPE_POLICIES, "made": env_made,
                       "failed": env_failed, "versions": versions(),
                       "seconds": round(time.time() - t_all, 1)}, f, indent=1)
    if not a.envelopes_only:
        manifest = {
            "families": {f: {"bugs": bm.BUGS[f], "suffix": run_suffix(f),
                             "notes": bm.build(f, a.seed).notes} for f in fams},
            "backends": {b: {"device": BACKENDS[b][0], "policy": BACKENDS[b][1],
                             "compiled": BACKENDS[b][2], "profile": BACKENDS[b][3]}
                         for b in BACKENDS},
            "seed": a.seed, "versions": versions(), "skipped": skipped, "failed": failed,
            "command": " ".join(sys.argv), "seconds": round(time.time() - t_all, 1)}
        with open(os.path.join(a.out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    print("skipped: %s" % (", ".join(skipped) or "none"))
    print("done in %.1f s; %d failed%s" % (time.time() - t_all, len(failed),
                                            (": " + " ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
