"""python3 -m paritycheck.dump: the command line of the dumper. Builds the model of --model,
runs it under --policy (three times with --trio) and dumps it with the Dumper; --envelope hands
A's run to the ensemble (ensemble.py); ``convert`` goes to dump_convert. main() is re-exported
by paritycheck.dump."""

import argparse
import importlib
import os
import sys
import traceback
import warnings

import torch

from .dump_convert import main as convert_main
from .dump_hooks import Dumper, _flatten
from .dump_policy import POLICIES, apply_policy_to_model, cast_input, policy_device

PROG = "python3 -m paritycheck.dump"


class _BadModel(Exception):
    """--model names no factory: a usage error (exit 2), said in one line."""


def _load_factory(spec):
    mod, _, fn = spec.partition(":")
    if not mod or not fn:
        raise _BadModel("--model wants MODULE:FUNCTION (e.g. mymodels:build), got %r" % spec)
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name != mod and not mod.startswith((e.name or "") + "."):
            raise _BadModel("--model %s: importing %s failed: %s" % (spec, mod, e)) from e
        raise _BadModel("--model %s: no module %r on the path (the current directory and "
                        "PYTHONPATH)" % (spec, mod)) from e
    except Exception as e:  # the module's own code failed: say so in one line
        raise _BadModel("--model %s: importing %s failed: %s: %s"
                        % (spec, mod, type(e).__name__, e)) from e
    factory = getattr(module, fn, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise _BadModel("--model %s: %s (%s) has no function %r%s"
                        % (spec, mod, getattr(module, "__file__", "?"), fn,
                           "; it has: " + ", ".join(found[:10]) if found else ""))
    return factory


def _parser():
    """The dumper's argument parser, without the ensemble's options (ensemble.add_cli_options
    adds them)."""
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Dump every leaf module's output of a PyTorch model to HDF5 for paritycheck "
                    "(docs/python.md). '%s convert SRC OUT' turns a torch.save file into a "
                    "dump." % PROG,
        epilog="The factory is called with no arguments and returns a model, or (model, inputs) "
               "where inputs is a tensor or a tuple of tensors; with a bare model, --input-shape "
               "gives a standard-normal input. The model is built on the CPU in fp32 after "
               "torch.manual_seed(--seed), then moved and cast for --policy. --trio DIR runs it "
               "three times, from the same seed: DIR/a.h5 on the CPU in fp32, DIR/b.h5 on "
               "--device with --policy, DIR/ref.h5 on the CPU in fp64, for 'paritycheck "
               "--reference DIR/ref.h5 DIR/a.h5 DIR/b.h5'. Exit status: 0 written; 1 the model "
               "raised (nothing written: OUT, if it exists, is left as it was); 2 bad usage, "
               "--model naming no factory.")
    ap.add_argument("--model", required=True, help="factory as module:function (module importable "
                    "from the current directory or PYTHONPATH)")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="output .h5 file")
    where.add_argument("--trio", metavar="DIR", help="write DIR/a.h5 (cpu fp32), DIR/b.h5 "
                       "(--device, --policy) and DIR/ref.h5 (cpu fp64)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps ... (default cpu; "
                    "MPS has no float64: --policy fp64 on mps runs on the CPU, and says so)")
    ap.add_argument("--policy", default="fp32", choices=list(POLICIES))
    ap.add_argument("--input-shape", help="comma-separated shape of a randn input, e.g. 2,3,32,32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modules", default="leaves",
                    help="'leaves' (default), 'all', or comma-separated module paths")
    ap.add_argument("--k", action="append", default=[], metavar="PATH=K",
                    help="reduction length of a module (repeatable)")
    ap.add_argument("--grad", nargs="?", const="all", metavar="P1,P2",
                    help="backward of mean(output^2) and dump gradients (all, or the named params)")
    ap.add_argument("--no-compress", action="store_true", help="store datasets uncompressed")
    ap.add_argument("--eval", action="store_true", help="model.eval() before the forward")
    ap.add_argument("--module-grads", action="store_true",
                    help="with --grad: also dump each module's output gradient (activation_grads/)")
    ap.add_argument("--threads", type=int, metavar="N",
                    help="CPU threads of torch (torch.set_num_threads; recorded as num_threads); "
                         "default torch's own")
    return ap


def main(argv=None):
    """python3 -m paritycheck.dump ARGV (default sys.argv[1:]). Returns the exit status: 0
    written, 1 the model raised, 2 convert refused its file; bad usage exits 2 (argparse)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["convert"]:
        return convert_main(argv[1:], PROG + " convert")
    ap = _parser()
    from . import ensemble  # --envelope: the honest envelope of A (docs/envelope.md)
    ensemble.add_cli_options(ap)
    a = ap.parse_args(argv)
    ensemble.check_cli(a, ap.error)
    if a.threads is not None and a.threads < 1:
        ap.error("--threads wants a whole number >= 1, got %d" % a.threads)
    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        factory = _load_factory(a.model)
    except _BadModel as e:
        ap.error(str(e))
    runs = [a]
    if a.trio:
        runs = [argparse.Namespace(**dict(vars(a), out=os.path.join(a.trio, name), device=dev,
                                          policy=pol))
                for name, dev, pol in (("a.h5", "cpu", "fp32"), ("b.h5", a.device, a.policy),
                                       ("ref.h5", "cpu", "fp64"))]
    for r in runs:
        try:
            _run(r, factory, ap)
        except Exception as e:  # the model's own code: its traceback, and what became of OUT
            traceback.print_exc()
            print("%s: %s: %s; nothing written to %s" % (PROG, type(e).__name__, e, r.out),
                  file=sys.stderr)
            return 1
    env = None
    if a.envelope:
        try:
            env = ensemble.run_cli(a, runs[0], lambda r: _run(r, factory, ap))
        except Exception as e:  # as above: the model raised under emulation
            traceback.print_exc()
            print("%s: %s: %s; no envelope written for %s" % (PROG, type(e).__name__, e,
                                                               runs[0].out), file=sys.stderr)
            return 1
    if a.trio:
        # the shipped profile calibrated for B's policy (tolerances/*.yaml): without one the
        # defaults judge B as another fp32 run, and an honest low-precision run fails; with an
        # envelope, the envelope judges every tensor it holds
        profile = "mps" if a.device.startswith("mps") and a.policy in ("fp32", "fp64") else \
            TRIO_PROFILES[a.policy]
        print("compare: paritycheck --profile %s %s--reference %s %s %s"
              % ((profile, ("--envelope %s " % env) if env else "")
                 + tuple(os.path.join(a.trio, n) for n in ("ref.h5", "a.h5", "b.h5"))))
    return 0


# --trio's printed comparison: B's policy -> the profile calibrated for it. A whole-model bf16
# or fp16 cast has none of its own; the autocast profile of its dtype is the nearest.
TRIO_PROFILES = {"fp64": "cpu-vs-cuda-fp32", "fp32": "cpu-vs-cuda-fp32", "tf32": "tf32",
                 "bf16-autocast": "bf16-autocast", "fp16-autocast": "fp16-autocast",
                 "bf16": "bf16-autocast", "fp16": "fp16-autocast"}


def _run(a, factory, ap):
    """Build, run and dump the model of the parsed arguments a."""
    torch.manual_seed(a.seed)
    built = factory()
    model, inputs = (built if isinstance(built, tuple) else (built, None))
    if inputs is None:
        if not a.input_shape:
            ap.error("the factory returned no inputs: give --input-shape")
        inputs = torch.randn(*[int(s) for s in a.input_shape.split(",")])
    if torch.is_tensor(inputs):
        inputs = (inputs,)
    if a.eval:
        model.eval()
    with warnings.catch_warnings(record=True) as caught:  # said once, as the CLI's own note
        warnings.simplefilter("always")
        device = policy_device(a.policy, a.device)
    for w in caught:
        print("%s: %s" % (PROG, w.message), file=sys.stderr)
    moved = {} if str(device) == a.device else {"requested_device": a.device}
    model = apply_policy_to_model(model, a.policy, device)
    inputs = cast_input(tuple(inputs), a.policy, device)
    ks = {}
    for kv in a.k:
        p, _, v = kv.rpartition("=")
        ks[p] = int(v)
    modules = a.modules if a.modules in ("leaves", "all") else a.modules.split(",")
    with Dumper(model, a.out, policy=a.policy, device=device, modules=modules,
                reduction_lengths=ks, compression=None if a.no_compress else "gzip",
                module_grads=bool(a.grad and a.module_grads), attrs=moved) as d:
        for i, x in enumerate(inputs):
            if torch.is_tensor(x):
                d.save("inputs/%d" % i, x)
        with d.policy_context():
            out = model(*inputs)
            if a.grad:
                first = next(t for _, t in _flatten(out))
                loss = first.to(d.loss_dtype).pow(2).mean()
        if a.grad:
            d.enabled = False
            d.save("outputs/loss", loss)
            d.watch_gradients()
            with d.backward_context():
                loss.backward()
            d.dump_gradients(None if a.grad == "all" else a.grad.split(","))
    print("wrote %s (%d module calls)" % (a.out, d._calls))
