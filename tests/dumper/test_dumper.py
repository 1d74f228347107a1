#!/usr/bin/python3
"""Tests of the PyTorch dumper python/paritycheck/dump.py on the CPU (Debian's python3-torch).

    /usr/bin/python3 tests/dumper/test_dumper.py PATH/TO/paritycheck WORK_DIR

A missing torch is a failure, not a skip: CI installs python3-torch (scripts/install-deps.sh),
and a test that quietly skips would hide a broken install.

Expected values are computed here by calling the same modules directly, outside the dumper, and
reading back what it wrote with h5py; K values are worked out by hand from the module shapes.
Prints one line per failure and a last line "N passed, M failed"; exits 1 when anything failed.
"""

import contextlib
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, summary  # noqa: E402

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # a failure: see the docstring
    print("FAIL torch is not importable (%s): install python3-torch (scripts/install-deps.sh)" % e)
    print("0 passed, 1 failed")
    sys.exit(1)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

from paritycheck import dump as pcdump  # noqa: E402

BIN = WORK = None




class ToHalf(nn.Module):
    def forward(self, x):
        return x.half()


class ToBf16(nn.Module):
    def forward(self, x):
        return x.bfloat16()


class Dot(nn.Module):
    """A matmul-like module that states its own K."""

    def __init__(self, k):
        super().__init__()
        self.reduction_length = k

    def forward(self, x):
        return x @ x.transpose(-1, -2)


class Net(nn.Module):
    """x (2, 3, 8, 8) -> conv (K = 3*3*3 = 27, grouped conv K = 8/2*1 = 4) -> flatten per
    position -> Linear 8->16 (K = 8) -> LayerNorm(16) (K = 16) -> Softmax(-1) (K = 16) -> GRU
    (tuple output) -> Dot (K from its attribute) -> the same Linear again (a second call) ->
    fp16 and bf16 copies."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gconv = nn.Conv2d(8, 8, 1, groups=2)
        self.fc = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        self.sm = nn.Softmax(dim=-1)
        self.gru = nn.GRU(16, 8, batch_first=True)
        self.dot = Dot(8)
        self.to_half = ToHalf()
        self.to_bf16 = ToBf16()

    def forward(self, x):
        h = self.gconv(self.conv(x))                 # (2, 8, 8, 8)
        h = h.flatten(2).transpose(1, 2)             # (2, 64, 8)
        s = self.sm(self.ln(self.fc(h)))             # (2, 64, 16)
        g, _ = self.gru(s)                           # (2, 64, 8)
        d = self.dot(g)                              # (2, 64, 64)
        again = self.fc(g)                           # (2, 64, 16), fc's second call
        return d.sum() + again.sum() + self.to_half(again).float().sum() + \
            self.to_bf16(again).float().sum()


def creation_order(group):
    names = []
    group.id.links.iterate(lambda n: names.append(n.decode()), idx_type=h5py.h5.INDEX_CRT_ORDER)
    return names


def expected_outputs(model, x):
    """The module outputs in call order, computed without hooks."""
    h = model.conv(x)
    h2 = model.gconv(h)
    hf = h2.flatten(2).transpose(1, 2)
    f1 = model.fc(hf)
    ln = model.ln(f1)
    sm = model.sm(ln)
    g = model.gru(sm)
    d = model.dot(g[0])
    f2 = model.fc(g[0])
    return [("conv", h), ("gconv", h2), ("fc", f1), ("ln", ln), ("sm", sm), ("gru", g),
            ("dot", d), ("fc", f2), ("to_half", f2.half()), ("to_bf16", f2.bfloat16())]


def test_forward_dump():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(2, 3, 8, 8)
    path = os.path.join(WORK, "net_fp32.h5")
    with pcdump.Dumper(model, path, policy="fp32", reduction_lengths={"gconv": 5}) as d:
        d.save("inputs/x", x)
        with d.policy_context():
            loss = model(x)
        loss.backward()
        d.enabled = False
        d.dump_gradients(["fc.weight"], reduction_lengths={"fc.weight": 128})
    with torch.no_grad():
        expected = expected_outputs(model, x)
    names = ["%03d_%s" % (i, n) for i, (n, _) in enumerate(expected)]
    with h5py.File(path, "r") as f:
        act = f["activations"]
        check("one entry per call, in creation order", creation_order(act) == names,
              str(creation_order(act)))
        check("top-level groups in creation order",
              creation_order(f) == ["activations", "inputs", "gradients"], str(creation_order(f)))
        for i, (name, value) in enumerate(expected):
            key = names[i]
            if name == "gru":
                check("tuple output is a group of 0, 1", creation_order(act[key]) == ["0", "1"])
                for j in range(2):
                    check("gru/%d values" % j, np.array_equal(act[key][str(j)][()],
                                                               value[j].numpy()))
                continue
            ds = act[key]
            check("%s call_index" % key, ds.attrs["call_index"] == i)
            if name == "to_bf16":
                check("bf16 saved as float32", ds.dtype == np.float32, str(ds.dtype))
                check("bf16 has dtype attribute", ds.attrs.get("dtype") == "bfloat16")
                check("bf16 values exact", np.array_equal(ds[()], value.float().numpy()))
            elif name == "to_half":
                check("fp16 saved natively", ds.dtype == np.float16, str(ds.dtype))
                check("fp16 has no dtype attribute", "dtype" not in ds.attrs)
                check("fp16 values", np.array_equal(ds[()], value.numpy()))
            else:
                check("%s values" % key, np.array_equal(ds[()], value.numpy()))
        # K by hand: conv 3 in-channels * 3*3 kernel; gconv from reduction_lengths (its own
        # would be 8/2 * 1); fc in_features; LayerNorm and Softmax the normalised length 16;
        # Dot its attribute; GRU and the dtype casts none.
        ks = {"000_conv": 27, "001_gconv": 5, "002_fc": 8, "003_ln": 16, "004_sm": 16,
              "006_dot": 8, "007_fc": 8}
        for key in names:
            obj = act[key]
            got = None if isinstance(obj, h5py.Group) else obj.attrs.get("reduction_length")
            check("%s reduction_length %s" % (key, ks.get(key)), got == ks.get(key), str(got))
            if key in ks:
                check("%s accumulation_dtype float32" % key,
                      obj.attrs.get("accumulation_dtype") == "float32")
        check("inputs saved", np.array_equal(f["inputs/x"][()], x.numpy()))
        g = f["gradients/fc.weight"]
        check("gradient values", np.array_equal(g[()], model.fc.weight.grad.numpy()))
        check("gradient K", g.attrs.get("reduction_length") == 128)
        attrs = dict(f.attrs)
        for k, v in (("backend", "cpu"), ("policy", "fp32"), ("torch_version", torch.__version__),
                     ("allow_tf32_matmul", 0), ("allow_tf32_cudnn", 0)):
            check("file attribute %s = %r" % (k, v), attrs.get(k) == v, repr(attrs.get(k)))
        check("file attribute device_name", bool(attrs.get("device_name")))
    check("own K inference: grouped conv",
          pcdump.infer_reduction_length(model.gconv, (torch.zeros(1, 8, 2, 2),)) == 4)
    check("own K inference: LogSoftmax over dim 1",
          pcdump.infer_reduction_length(nn.LogSoftmax(dim=1), (torch.zeros(2, 7, 3),)) == 7)
    check("own K inference: Conv1d",
          pcdump.infer_reduction_length(nn.Conv1d(4, 2, 5), (torch.zeros(1, 4, 9),)) == 20)
    check("own K inference: none for GELU",
          pcdump.infer_reduction_length(nn.GELU(), (torch.zeros(3),)) is None)
    return path


def test_policies(fp32_path):
    """A fp64 dump records float64 accumulation, and it and the fp32 dump of the same model pass
    paritycheck's fp32 profile (the dumper's files work end to end, K attributes included); bf16
    autocast on the CPU writes bf16 tensors and no accumulation dtype."""
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(2, 3, 8, 8)
    path64 = os.path.join(WORK, "net_fp64.h5")
    m64 = pcdump.apply_policy_to_model(model, "fp64", "cpu")
    with pcdump.Dumper(m64, path64, policy="fp64") as d:
        d.save("inputs/x", pcdump.cast_input(x, "fp64", "cpu"))
        with d.policy_context():
            loss = m64(pcdump.cast_input(x, "fp64", "cpu"))
        loss.backward()
        d.enabled = False
        d.dump_gradients(["fc.weight"], reduction_lengths={"fc.weight": 128})
    with h5py.File(path64, "r") as f:
        check("fp64 dump is float64", f["activations/002_fc"].dtype == np.float64)
        check("fp64 accumulation", f["activations/002_fc"].attrs["accumulation_dtype"] == "float64")
    p = subprocess.run([BIN, "-q", "--profile", "cpu-vs-cuda-fp32", fp32_path, path64],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check("paritycheck: fp32 vs fp64 dumps pass the fp32 profile", p.returncode == 0,
          p.stdout[-500:] + p.stderr)

    # torch 1.13's CPU autocast has no float32 rule for LayerNorm, so this model has none.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    path_bf = os.path.join(WORK, "net_bf16.h5")
    with pcdump.Dumper(model, path_bf, policy="bf16-autocast") as d:
        with d.policy_context():
            model(torch.randn(3, 8))
    with h5py.File(path_bf, "r") as f:
        fc = f["activations/000_0"]
        check("bf16 autocast: Linear output is bf16", fc.attrs.get("dtype") == "bfloat16",
              str(dict(fc.attrs)))
        check("bf16 autocast on the CPU: accumulation unknown",
              "accumulation_dtype" not in fc.attrs)
        check("autocast recorded", f.attrs.get("autocast_dtype") == "bfloat16")


class Tagger(nn.Module):
    """Sparse embedding -> Linear -> Tanh -> Linear, and a parameter the loss never uses."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, sparse=True)
        self.fc1 = nn.Linear(4, 6)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(6, 3)
        self.unused = nn.Parameter(torch.ones(2))

    def forward(self, tok):
        return self.fc2(self.act(self.fc1(self.emb(tok))))


def test_execution_order():
    """One execution counter: inputs, activations, the loss, then the gradients in the order
    backward produced them (creation order too); activation_grads; sparse grads densified; K of
    weight gradients; a gradient no armed hook saw comes last."""
    torch.manual_seed(0)
    model = Tagger()
    tok = torch.tensor([[1, 2, 2], [3, 1, 9]])
    path = os.path.join(WORK, "order.h5")
    with pcdump.Dumper(model, path, policy="fp32", module_grads=True) as d:
        d.save("inputs/tok", tok)
        with d.policy_context():
            out = model(tok)
            loss = out.to(d.loss_dtype).pow(2).mean()
        d.save("outputs/loss", loss)
        d.watch_gradients()
        loss.backward()
        model.unused.grad = torch.full((2,), 3.0)  # a grad no hook saw
        d.dump_gradients()
    # expected values, without the dumper
    model.zero_grad(set_to_none=True)
    h = model.fc1(model.emb(tok))
    a = model.act(h)
    y = model.fc2(a)
    for t in (h, a, y):
        t.retain_grad()
    y.pow(2).mean().backward()
    with h5py.File(path, "r") as f:
        ex = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                ex[name] = obj.attrs.get("execution_index")
        f.visititems(visit)
        check("every dataset has execution_index", all(v is not None for v in ex.values()), str(ex))
        # module_type (issue 32: tolerance rules match on it) on every dataset a module made:
        # activations, activation gradients and parameter gradients; the owner's class.
        mt = {}
        f.visititems(lambda n, o: mt.__setitem__(n, o.attrs.get("module_type"))
                     if isinstance(o, h5py.Dataset) else None)
        want_mt = {"activations/000_emb": "Embedding", "activations/001_fc1": "Linear",
                   "activations/002_act": "Tanh", "activations/003_fc2": "Linear",
                   "gradients/fc1.weight": "Linear", "gradients/emb.weight": "Embedding",
                   "activation_grads/001_act": "Tanh"}
        check("module_type on every module's dataset",
              all(mt[n] is not None for n in mt if not n.startswith(("inputs/", "outputs/"))),
              str(mt))
        check("module_type is the module's class", all(mt.get(n) == v for n, v in
                                                       want_mt.items()), str(mt))
        check("execution_index values distinct", len(set(ex.values())) == len(ex), str(ex))
        fwd = ["inputs/tok", "activations/000_emb", "activations/001_fc1", "activations/002_act",
               "activations/003_fc2", "outputs/loss"]
        check("forward execution order", [ex[n] for n in fwd] == list(range(6)),
              str([ex[n] for n in fwd]))
        grads = creation_order(f["gradients"])
        idx = [ex["gradients/" + n] for n in grads]
        check("gradients in creation order = execution order", idx == sorted(idx), str(idx))
        check("gradients after the loss", min(idx) > ex["outputs/loss"], str(idx))
        pos = {n: i for i, n in enumerate(grads)}
        check("backward order: fc2 before fc1 before emb",
              max(pos["fc2.weight"], pos["fc2.bias"]) < min(pos["fc1.weight"], pos["fc1.bias"])
              and max(pos["fc1.weight"], pos["fc1.bias"]) < pos["emb.weight"], str(grads))
        check("unwatched gradient last", grads[-1] == "unused", str(grads))
        ew = f["gradients/emb.weight"]
        check("sparse grad densified", np.array_equal(ew[()], model.emb.weight.grad.to_dense().numpy()))
        check("sparse grad layout attribute", ew.attrs.get("layout") == "sparse_coo")
        check("gradient module attribute", f["gradients/fc1.weight"].attrs.get("module") == "fc1")
        check("gradient K inferred: rows of fc1's input",
              f["gradients/fc1.weight"].attrs.get("reduction_length") == 6)
        check("gradient values", np.array_equal(f["gradients/fc1.weight"][()],
                                                model.fc1.weight.grad.numpy()))
        ag = f["activation_grads"]
        names = creation_order(ag)
        check("activation_grads in backward order",
              names[:3] == ["000_fc2", "001_act", "002_fc1"], str(names))
        for key, t in (("000_fc2", y), ("001_act", a), ("002_fc1", h)):
            check("activation grad %s" % key, np.allclose(ag[key][()], t.grad.numpy(), rtol=0,
                                                         atol=0), key)
        check("activation_grads forward_call_index",
              ag["002_fc1"].attrs.get("forward_call_index") == 1)
        gi = [ex["activation_grads/" + n] for n in names]
        check("activation_grads indices after the loss, increasing",
              gi == sorted(gi) and gi[0] > ex["outputs/loss"], str(gi))


def test_fp64_loss():
    """Under policy fp64 the CLI computes the loss in float64, so the gradients are float64
    results of a float64 backward."""
    with open(os.path.join(WORK, "tiny_factory64.py"), "w") as f:
        f.write(FACTORY)
    out = os.path.join(WORK, "cli64.h5")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "python", "paritycheck", "dump.py"),
                        "--model", "tiny_factory64:build", "--out", out, "--input-shape", "5,6",
                        "--grad", "all", "--policy", "fp64"],
                       cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not check("CLI fp64 runs", p.returncode == 0, p.stderr[-800:]):
        return
    with h5py.File(out, "r") as f:
        check("fp64 loss is float64", f["outputs/loss"].dtype == np.float64)
        check("fp64 gradients are float64", f["gradients/0.weight"].dtype == np.float64)
    check("loss_dtype", pcdump.loss_dtype("fp64") == torch.float64 and
          pcdump.loss_dtype("bf16-autocast") == torch.float32)


FACTORY = '''
import torch, torch.nn as nn
def build():
    return nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
'''


def test_cli():
    with open(os.path.join(WORK, "tiny_factory.py"), "w") as f:
        f.write(FACTORY)
    out = os.path.join(WORK, "cli.h5")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "python", "paritycheck", "dump.py"),
                        "--model", "tiny_factory:build", "--out", out, "--input-shape", "5,6",
                        "--grad", "all", "--k", "2=40"],
                       cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not check("CLI runs", p.returncode == 0, p.stderr[-800:]):
        return
    with h5py.File(out, "r") as f:
        check("CLI: activations", creation_order(f["activations"]) == ["000_0", "001_1", "002_2"],
              str(creation_order(f["activations"])))
        check("CLI: --k overrides K", f["activations/002_2"].attrs["reduction_length"] == 40)
        check("CLI: inferred K", f["activations/000_0"].attrs["reduction_length"] == 6)
        check("CLI: gradients of every parameter",
              sorted(f["gradients"]) == ["0.bias", "0.weight", "2.bias", "2.weight"],
              str(list(f["gradients"])))
        check("CLI: loss", f["outputs/loss"].shape == ())
    p = subprocess.run([BIN, "--allow-same", out, out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    check("paritycheck: a dump equals itself", p.returncode == 0)


BROKEN_FACTORY = '''
import torch, torch.nn as nn
class Boom(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in forward")
def build():
    return nn.Sequential(nn.Linear(6, 4), Boom(), nn.Linear(4, 3)), torch.randn(2, 6)
'''


def dump_cli(*args):
    """python3 -m paritycheck.dump ARGS in WORK, the package from the source tree."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "paritycheck.dump"] + list(args), cwd=WORK,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cli_messages():
    """--help names the real entry; a --model naming no factory is one line and exit 2."""
    p = dump_cli("--help")
    check("--help: usage: python3 -m paritycheck.dump", p.returncode == 0 and
          p.stdout.startswith("usage: python3 -m paritycheck.dump ") and "--threads" in p.stdout,
          p.stdout[:300])
    p = dump_cli("convert", "--help")
    check("convert --help: its own prog", p.stdout.startswith(
        "usage: python3 -m paritycheck.dump convert "), p.stdout[:200])
    with open(os.path.join(WORK, "tiny_factory.py"), "w") as f:
        f.write(FACTORY)
    for spec, says in (("no_such_models:build", "no module 'no_such_models' on the path"),
                       ("tiny_factory:biuld", "has no function 'biuld'; it has: build"),
                       ("tiny_factory", "--model wants MODULE:FUNCTION")):
        p = dump_cli("--model", spec, "--out", "never.h5", "--input-shape", "5,6")
        check("--model %s: exit 2, %r, no traceback" % (spec, says), p.returncode == 2 and
              says in p.stderr and "Traceback" not in p.stderr, p.stderr[-600:])
    check("a bad --model writes nothing", not os.path.exists(os.path.join(WORK, "never.h5")))


def test_threads():
    """--threads N sets torch's CPU threads, recorded as the file attribute num_threads."""
    for n in (1, 3):
        out = os.path.join(WORK, "threads%d.h5" % n)
        p = dump_cli("--model", "tiny_factory:build", "--out", out, "--input-shape", "5,6",
                     "--threads", str(n))
        check("--threads %d: exit 0" % n, p.returncode == 0, p.stderr[-500:])
        if p.returncode == 0:
            with h5py.File(out, "r") as f:
                check("--threads %d: num_threads %d" % (n, n), f.attrs["num_threads"] == n,
                      f.attrs.get("num_threads"))
    p = dump_cli("--model", "tiny_factory:build", "--out", "t0.h5", "--input-shape", "5,6",
                 "--threads", "0")
    check("--threads 0: exit 2", p.returncode == 2 and "--threads" in p.stderr, p.stderr[-300:])


def test_failed_forward_writes_nothing():
    """A forward that raises: exit 1 with its traceback; an existing OUT is left byte for byte,
    no temporary file stays; in Python, a with-block that raises writes no file."""
    with open(os.path.join(WORK, "broken_factory.py"), "w") as f:
        f.write(BROKEN_FACTORY)
    folder = os.path.join(WORK, "failed")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "out.h5")
    with open(out, "wb") as f:
        f.write(b"an earlier dump")
    p = dump_cli("--model", "broken_factory:build", "--out", out)
    check("raising forward: exit 1, traceback, nothing written", p.returncode == 1 and
          "RuntimeError: boom in forward" in p.stderr and
          "nothing written to %s" % out in p.stderr, p.stderr[-600:])
    check("raising forward: OUT unchanged, no temporary file",
          open(out, "rb").read() == b"an earlier dump" and os.listdir(folder) == ["out.h5"],
          os.listdir(folder))
    model = nn.Sequential(nn.Linear(3, 2))
    path = os.path.join(folder, "api.h5")
    try:
        with pcdump.Dumper(model, path) as d:
            model(torch.ones(1, 3))
            d.save("inputs/x", torch.ones(1, 3))
            raise ValueError("stop")
    except ValueError:
        pass
    check("Dumper: a raising block writes no file", os.listdir(folder) == ["out.h5"],
          os.listdir(folder))


def test_incomplete_dump_refused():
    """paritycheck refuses a dump with the attribute incomplete (older dumpers wrote one when
    the forward raised): exit 2, naming the file and why."""
    bad = os.path.join(WORK, "incomplete.h5")
    good = os.path.join(WORK, "complete.h5")
    for path in (bad, good):
        with h5py.File(path, "w") as f:
            f["x"] = np.arange(4.0)
            if path == bad:
                f.attrs["incomplete"] = "RuntimeError: boom"
    for args in ((good, bad), (bad, good)):
        p = subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        check("incomplete dump as %s: exit 2 naming it" % ("B" if args[1] == bad else "A"),
              p.returncode == 2 and "%s: an incomplete dump (attribute incomplete: "
              "RuntimeError: boom)" % bad in p.stderr, p.stderr)


def test_trio():
    """--trio DIR: a.h5 on the CPU in fp32, b.h5 with --device/--policy, ref.h5 in fp64, from
    the same weights; the printed command runs."""
    folder = os.path.join(WORK, "trio")
    p = dump_cli("--model", "tiny_factory:build", "--trio", folder, "--policy", "bf16-autocast",
                 "--input-shape", "5,6")
    check("--trio: exit 0", p.returncode == 0, p.stderr[-500:])
    if p.returncode != 0:
        return
    want = {"a.h5": ("cpu", "fp32", np.float32), "b.h5": ("cpu", "bf16-autocast", np.float32),
            "ref.h5": ("cpu", "fp64", np.float64)}
    inputs = {}
    for name, (backend, policy, dtype) in want.items():
        with h5py.File(os.path.join(folder, name), "r") as f:
            check("--trio %s: %s %s" % (name, backend, policy), f.attrs["backend"] == backend and
                  f.attrs["policy"] == policy and f["inputs/0"].dtype == dtype,
                  dict(f.attrs))
            inputs[name] = f["inputs/0"][()].astype(np.float64)
    check("--trio: one seed, the same input in every run (fp32 values)",
          np.array_equal(inputs["a.h5"], inputs["ref.h5"]) and
          np.array_equal(inputs["a.h5"], inputs["b.h5"]))
    cmd = p.stdout.strip().splitlines()[-1]
    check("--trio prints the comparison", cmd == "compare: paritycheck --profile bf16-autocast "
          "--reference %s %s %s" % (os.path.join(folder, "ref.h5"), os.path.join(folder, "a.h5"),
                                    os.path.join(folder, "b.h5")), cmd)
    q = subprocess.run([BIN] + cmd.split()[2:], stdout=subprocess.PIPE, text=True)
    check("the printed comparison runs: three-way line", q.returncode in (0, 1) and
          "REFERENCE %s" % os.path.join(folder, "ref.h5") in q.stdout, q.stdout[-400:])


MLP_FACTORY = '''
import torch.nn as nn
def build():
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                         nn.Linear(128, 10))
'''


def test_trio_next_step_passes():
    """The command --trio prints passes an honest run of what it just dumped (issue 39): it
    names the profile calibrated for B's policy (tolerances/NAME.yaml), which the defaults are
    not; an MLP with gradients, as a new user would dump it, for each policy the CPU runs."""
    with open(os.path.join(WORK, "mlp_factory.py"), "w") as f:
        f.write(MLP_FACTORY)
    for policy, profile in (("bf16-autocast", "bf16-autocast"), ("tf32", "tf32"),
                            ("fp32", "cpu-vs-cuda-fp32")):
        folder = os.path.join(WORK, "trio_" + policy)
        p = dump_cli("--model", "mlp_factory:build", "--trio", folder, "--policy", policy,
                     "--input-shape", "8,64", "--grad")
        if not check("--trio %s: exit 0" % policy, p.returncode == 0, p.stderr[-500:]):
            continue
        cmd = p.stdout.strip().splitlines()[-1].split()
        check("--trio %s: the printed command names --profile %s" % (policy, profile),
              cmd[:4] == ["compare:", "paritycheck", "--profile", profile], cmd)
        q = subprocess.run([BIN] + cmd[2:], stdout=subprocess.PIPE, text=True)
        check("--trio %s: the printed command passes the honest run (exit 0)" % policy,
              q.returncode == 0, q.stdout[-1500:])


def test_docs_example():
    """docs/python.md's complete example, run as written after README command 1: from the top of
    a checkout (a copy of python/ and build/paritycheck, a link to the binary under test), with
    PYTHONPATH=python and no paritycheck on the PATH; paritycheck.binary() finds build/."""
    import re
    import shutil
    text = open(os.path.join(ROOT, "docs", "python.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    check("docs/python.md has the example", len(blocks) >= 2)
    folder = os.path.join(WORK, "docs_example")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "python"), os.path.join(folder, "python"),
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info",
                                                  "_install.py"))
    os.makedirs(os.path.join(folder, "build"))
    os.symlink(BIN, os.path.join(folder, "build", "paritycheck"))
    with open(os.path.join(folder, "example.py"), "w") as f:
        f.write(blocks[-1])
    env = {k: v for k, v in os.environ.items() if k != "PARITYCHECK_BIN"}
    env.update(PYTHONPATH="python", PATH="/usr/bin:/bin")
    p = subprocess.run([sys.executable, "example.py"], cwd=folder, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check("docs example runs after README command 1, and its paritycheck passes (exit 0)",
          p.returncode == 0 and "paritycheck exit status 0" in p.stdout,
          p.stdout[-800:] + p.stderr[-800:])
    with h5py.File(os.path.join(folder, "ref.h5"), "r") as f:
        check("docs example: ref.h5 in float64, with gradients",
              f["activations/000_0"].dtype == np.float64 and "0.weight" in f["gradients"],
              list(f))


def test_torch113_layernorm_doc():
    """docs/python.md's torch 1.13 note: on this torch a LayerNorm after a Linear under CPU bf16
    autocast fails with the message the page quotes (checked on torch 1.x only), and the page's
    Float32LayerNorm block runs as written."""
    import re
    text = open(os.path.join(ROOT, "docs", "python.md")).read()
    block = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "Float32LayerNorm" in b]
    if not check("docs/python.md has the Float32LayerNorm block", len(block) == 1):
        return
    m = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16))
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            m(torch.randn(4, 16))
        failed = None
    except RuntimeError as e:
        failed = str(e)
    if torch.__version__.startswith("1."):
        check("torch 1.x: Linear -> LayerNorm under CPU bf16 autocast fails as the page says",
              failed is not None and "expected scalar type BFloat16 but found Float" in failed
              and "expected scalar type BFloat16 but found Float" in text, failed)
    p = subprocess.run([sys.executable, "-c", block[0]], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check("docs/python.md: the Float32LayerNorm block runs", p.returncode == 0 and
          p.stdout.strip() == "torch.float32", p.stdout + p.stderr[-500:])


def test_mps_fp64_runs_on_cpu():
    """--device mps --policy fp64: MPS has no float64, so the run is on the CPU (for real, here),
    the CLI says so once, and the file records the device asked for."""
    out = os.path.join(WORK, "mps_fp64.h5")
    p = dump_cli("--model", "tiny_factory:build", "--out", out, "--device", "mps",
                 "--policy", "fp64", "--input-shape", "5,6")
    check("mps fp64: exit 0, said once", p.returncode == 0 and p.stderr.count(
        "MPS has no float64: policy fp64 runs on the CPU") == 1, p.stderr[-600:])
    if p.returncode == 0:
        with h5py.File(out, "r") as f:
            check("mps fp64: backend cpu, requested_device mps, float64",
                  f.attrs["backend"] == "cpu" and f.attrs["requested_device"] == "mps" and
                  f["activations/000_0"].dtype == np.float64, dict(f.attrs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = pcdump.apply_policy_to_model(nn.Linear(2, 2), "fp64", "mps")
    check("API: apply_policy_to_model fp64 on mps: the CPU, in float64, with a warning",
          model.weight.device.type == "cpu" and model.weight.dtype == torch.float64 and
          len(caught) == 1 and "MPS has no float64" in str(caught[0].message))


def test_mps_mocked():
    """What cannot run here without a Mac is mocked, and the checks say so: autocast is entered
    with device_type="mps" for the autocast policies; the provenance of an MPS run records
    macOS's version, torch.backends.mps.is_available()/is_built() and the MPS environment."""
    from unittest import mock
    entered = []

    @contextlib.contextmanager
    def fake_autocast(device_type, dtype):
        entered.append((device_type, dtype))
        yield

    with mock.patch.object(torch, "autocast", fake_autocast):
        for policy, dtype in (("bf16-autocast", torch.bfloat16), ("fp16-autocast", torch.float16)):
            with pcdump.policy_context(policy, "mps"):
                pass
    check("mocked MPS: autocast with device_type mps, bf16 and fp16",
          entered == [("mps", torch.bfloat16), ("mps", torch.float16)], entered)
    env = {"PYTORCH_ENABLE_MPS_FALLBACK": "1"}
    with mock.patch.object(torch.backends.mps, "is_available", return_value=True), \
            mock.patch.object(torch.backends.mps, "is_built", return_value=True), \
            mock.patch.object(pcdump.platform, "system", return_value="Darwin"), \
            mock.patch.object(pcdump.platform, "mac_ver", return_value=("14.5", ("", "", ""), "arm64")), \
            mock.patch.dict(os.environ, env):
        os.environ.pop("PYTORCH_MPS_HIGH_WATERMARK_RATIO", None)
        a = pcdump.backend_attrs("mps", "bf16-autocast")
    want = {"backend": "mps", "macos_version": "14.5", "mps_available": True, "mps_built": True,
            "PYTORCH_ENABLE_MPS_FALLBACK": "1", "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "unset",
            "torch_version": torch.__version__, "autocast_dtype": "bfloat16"}
    check("mocked MPS: provenance", {k: a.get(k) for k in want} == want, a)


def test_training_runs_doc():
    """docs/training-runs.md as written: train.py and training.yaml from its blocks, then each
    command with the exit code its comment gives; the loss drift it explains grows with the step
    (step 19's loss rel_rms more than 100 times step 0's, as the page says "more than 300")."""
    import json
    import re
    text = open(os.path.join(ROOT, "docs", "training-runs.md")).read()
    py = re.findall(r"```python\n(.*?)```", text, re.S)
    yml = re.findall(r"```yaml\n(.*?)```", text, re.S)
    sh = [l for b in re.findall(r"```sh\n(.*?)```", text, re.S) for l in b.splitlines() if l]
    if not check("training-runs.md: one script, one tolerance file, commands",
                 len(py) == 1 and len(yml) == 1 and len(sh) == 4, (len(py), len(yml), sh)):
        return
    folder = os.path.join(WORK, "training")
    os.makedirs(os.path.join(folder, "bin"), exist_ok=True)
    for name, target in (("paritycheck", BIN), ("python3", sys.executable)):
        link = os.path.join(folder, "bin", name)
        if not os.path.lexists(link):
            os.symlink(target, link)
    for name, body in (("train.py", py[0]), ("training.yaml", yml[0])):
        with open(os.path.join(folder, name), "w") as f:
            f.write(body)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               PATH=os.path.join(folder, "bin") + os.pathsep + os.environ["PATH"])
    for cmd in sh:
        want = re.search(r"# exit (\d+)\s*$", cmd)
        p = subprocess.run(["bash", "-c", cmd], cwd=folder, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        check("training-runs.md: %s" % cmd[:70], want and p.returncode == int(want.group(1)),
              (p.returncode, p.stdout[-600:], p.stderr[-600:]))
    p = subprocess.run([BIN, "--json", "-", "runs/a", "runs/b"], cwd=folder,
                       stdout=subprocess.PIPE, text=True)
    loss = {t["path"][:8]: t["rel_rms"] for t in json.loads(p.stdout)["tensors"]
            if t["path"].endswith(":/outputs/loss")}
    check("training-runs.md: the loss drift grows, step 19 > 100 x step 0",
          len(loss) == 20 and loss["step_019"] > 100 * loss["step_000"] > 0, loss)

    def summary(*args):
        r = json.loads(subprocess.run([BIN, "--json", "-"] + list(args), cwd=folder,
                                      stdout=subprocess.PIPE, text=True).stdout)
        return r["summary"], r["first_divergence"]
    # section 2's figures: 167 tensors, all pass three-way; 69 fail the profile alone, from
    # step 0's weight gradient; 165 the defaults, the first step's first activation first
    three, _ = summary("--profile", "bf16-autocast", "--reference", "runs/ref", "runs/a", "runs/b")
    alone, first_alone = summary("--profile", "bf16-autocast", "runs/a", "runs/b")
    plain, first_plain = summary("runs/a", "runs/b")
    check("training-runs.md: 167 tensors pass three-way, 69 fail the profile alone, 165 the "
          "defaults; first divergences at step 0",
          three["tensors"] == 167 and three["pass"] == 167 and alone["failures"] == 69 and
          first_alone == "step_000/train.h5:/gradients/0.weight" and plain["failures"] == 165 and
          first_plain == "step_000/train.h5:/activations/000_0",
          (three, alone, first_alone, plain, first_plain))
    md = open(os.path.join(folder, "report.md")).read()
    rows = re.findall(r"^\| `step_(\d{3})/train\.h5:/outputs/loss`", md, re.M)
    check("training-runs.md: the Markdown trajectory, one row per step in step order",
          rows == ["%03d" % k for k in range(20)], rows)
    check("training-runs.md: the HTML trajectory plot",
          '<svg class="trajectory"' in open(os.path.join(folder, "report.html")).read())


def test_convert_module_types():
    """convert of a whole pickled module knows whose each parameter and buffer is: module and
    module_type attributes, as the Dumper writes on gradients; a plain state dict has none."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 2))
    src = os.path.join(WORK, "whole.pt")
    torch.save(model, src)
    out = os.path.join(WORK, "whole.h5")
    pcdump.convert(src, out, allow_pickle=True)  # a whole module is code: only on request
    with h5py.File(out, "r") as f:
        got = {n: (f[n].attrs.get("module"), f[n].attrs.get("module_type")) for n in f}
    want = {"0.weight": ("0", "Conv2d"), "0.bias": ("0", "Conv2d"),
            "1.weight": ("1", "BatchNorm2d"), "1.bias": ("1", "BatchNorm2d"),
            "1.running_mean": ("1", "BatchNorm2d"),
            "1.running_var": ("1", "BatchNorm2d"), "1.num_batches_tracked": ("1", "BatchNorm2d"),
            "3.weight": ("3", "Linear"), "3.bias": ("3", "Linear")}
    check("convert: module and module_type of each parameter and buffer", got == want, str(got))
    sd = os.path.join(WORK, "sd.pt")
    torch.save(model.state_dict(), sd)
    pcdump.convert(sd, out)
    with h5py.File(out, "r") as f:
        check("convert: a state dict has no module_type",
              all("module_type" not in f[n].attrs for n in f))


def main():
    global BIN, WORK
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    BIN, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(WORK, exist_ok=True)
    torch.set_num_threads(1)
    print("torch %s" % torch.__version__)
    fp32 = test_forward_dump()
    test_policies(fp32)
    test_execution_order()
    test_cli()
    test_fp64_loss()
    test_cli_messages()
    test_threads()
    test_failed_forward_writes_nothing()
    test_incomplete_dump_refused()
    test_trio()
    test_trio_next_step_passes()
    test_docs_example()
    test_torch113_layernorm_doc()
    test_mps_fp64_runs_on_cpu()
    test_mps_mocked()
    test_training_runs_doc()
    test_convert_module_types()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
