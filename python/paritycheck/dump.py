#!/usr/bin/python3
"""paritycheck.dump: dump a PyTorch model's per-module outputs (and chosen gradients) to HDF5
in the layout paritycheck compares (docs/python.md).

Works with torch >= 1.13, h5py and numpy.

Layout of one file
------------------
/                       file attributes: backend ("cpu"/"cuda"), device_name, policy,
                        allow_tf32_matmul, allow_tf32_cudnn, float32_matmul_precision,
                        torch_version, cuda_version, cudnn_version, ... (created with
                        track_order=True)
/activations/NNN_<module.path>          one dataset per tensor output of a hooked module
/activations/NNN_<module.path>/0, /1    tuple/list outputs: one dataset per tensor element
                                        (nested tuples nest further: .../1/0)
/gradients/<param name>                 after backward(), via Dumper.dump_gradients(); in
                                        the order backward produced them when
                                        Dumper.watch_gradients() was called before backward()
/activation_grads/NNN_<module.path>     with Dumper(..., module_grads=True): the gradient
                                        flowing out of each selected module during backward
                                        (grad_output[0] of a full backward hook); NNN counts
                                        these in backward order
/<anything>                             via Dumper.save(name, tensor) (e.g. inputs/x)

NNN is the zero-padded index of the module call (a module called twice gets two entries), so
creation order and name order agree.  Every group is created with track_order=True.

Execution order: every dataset has an integer attribute execution_index, taken from one
counter shared by Dumper.save(), the forward hooks (one value per module call, shared by the
elements of a tuple output), the gradient hooks armed by watch_gradients() and the module
backward hooks, each at the moment it happens.  Sorting all datasets by it gives execution
order: inputs saved before the forward, activations in call order, a loss saved before
backward(), then the gradients (and activation_grads) in the order backward produced them.
Gradients that no armed hook saw (watch_gradients() not called, or a .grad set by hand) are
numbered when dump_gradients() writes them, after the others, in parameter order.

dtypes: bfloat16 tensors are stored as float32 with string attribute dtype="bfloat16";
float16 natively (h5py's 16-bit float); float32/float64 natively; integers/bool natively.
Sparse tensors (the .grad of nn.Embedding(sparse=True)) are stored densified (to_dense(),
duplicates summed) with attribute layout="sparse_coo".

Policy fp64 means everything in float64: model, floating inputs, and the loss.  Compute the
loss in loss_dtype(policy) (float64 under fp64, float32 otherwise, also under autocast), e.g.
``loss = out.to(loss_dtype(policy)).pow(2).mean()``: a loss taken on ``out.float()`` would
send the fp64 run's backward through float32 and spoil it as a reference.

Dataset attributes: module, module_type, call_index, torch_dtype, and where known
reduction_length (K, the length of the longest inner reduction producing one output
element) and accumulation_dtype.  K is inferred for nn.Linear (in_features),
nn.Conv1d/2d/3d (in_channels / groups * prod(kernel_size)), nn.LayerNorm
(prod(normalized_shape)), nn.Softmax (input.shape[dim]), nn.ConvTranspose1d/2d/3d
(in_channels / groups * prod(ceil(kernel / stride))), nn.GroupNorm (C / groups * spatial) and
nn.BatchNorm1d/2d/3d in training mode (the batch statistics: N * spatial; none in eval mode,
where it is elementwise); a module attribute ``reduction_length`` or the user-supplied dict
``reduction_lengths={path: K}`` overrides.

Gradient datasets have attributes parameter, module, module_type, execution_index, and
reduction_length: given to dump_gradients(), else inferred from the forward calls of the
selected module owning the parameter (summed over its calls): the rows a weight gradient sums
over, i.e. input.numel() / in_features for nn.Linear, N * output spatial size for convolutions
(N * input spatial for a transposed convolution's weight), N * spatial for norm layers' affine
parameters.

The file is written when the Dumper closes, to a temporary file beside ``path`` renamed over it:
a forward or backward that raises inside ``with Dumper(...)`` leaves no file (and an existing one
as it was); paritycheck refuses a dump with a file attribute ``incomplete`` (exit 2).

Usage (docs/python.md has a complete example)
-----
    from paritycheck.dump import Dumper, apply_policy_to_model, cast_input
    model = apply_policy_to_model(model, "fp32", "cpu")   # dtype and device of the policy
    x = cast_input(x, "fp32", "cpu")
    with Dumper(model, "out.h5", policy="fp32") as d:
        d.save("inputs/x", x)
        with d.policy_context():          # sets TF32 flags / autocast for the policy
            y = model(x)
            loss = y.to(d.loss_dtype).pow(2).mean()
        d.save("outputs/loss", loss)      # before backward: execution order
        d.watch_gradients()               # record the order backward produces gradients in
        with d.backward_context():        # the policy's TF32 switches, no autocast
            loss.backward()
        d.dump_gradients(["fc.weight"])     # or None for all parameters with a grad

CLI: python3 -m paritycheck.dump --help
"""

import argparse
import contextlib
import datetime
import importlib
import math
import os
import pickle
import platform
import sys
import tempfile
import traceback
import warnings

import h5py
import numpy as np
import torch
import torch.nn as nn

__all__ = ["Dumper", "POLICIES", "policy_context", "policy_device", "apply_policy_to_model",
           "backend_attrs", "infer_reduction_length", "infer_grad_reduction_lengths",
           "loss_dtype"]

# policy -> (module/input dtype, autocast dtype or None, tf32 on?)
POLICIES = {
    "fp64": (torch.float64, None, False),
    "fp32": (torch.float32, None, False),
    "tf32": (torch.float32, None, True),
    "bf16-autocast": (torch.float32, torch.bfloat16, False),
    "fp16-autocast": (torch.float32, torch.float16, False),
    "bf16": (torch.bfloat16, None, False),
    "fp16": (torch.float16, None, False),
}

_NP_NAMES = {torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
             torch.bfloat16: "bfloat16"}


def _check_policy(policy):
    if policy not in POLICIES:
        raise ValueError("unknown policy %r (known: %s)" % (policy, ", ".join(POLICIES)))


def loss_dtype(policy):
    """The dtype to compute the loss in under ``policy``: float64 for fp64 (so that the whole
    run, backward included, stays float64), float32 for every other policy."""
    _check_policy(policy)
    return torch.float64 if policy == "fp64" else torch.float32


def _set_tf32(on):
    """Set the TF32 switches through the pre-2.9 API (works on 1.13 and 2.x; torch >= 2.9
    maps it onto its fp32_precision settings and warns that it is deprecated)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = bool(on)
        torch.backends.cudnn.allow_tf32 = bool(on)
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("high" if on else "highest")


@contextlib.contextmanager
def policy_context(policy, device, autocast=True):
    """Context in which a forward (and backward) runs under ``policy`` on ``device``:
    sets the TF32 switches (restored on exit) and enters autocast for *-autocast.
    autocast=False: only the switches, for the backward pass (torch recommends running
    backward outside autocast; it reuses the dtypes the forward chose, but the TF32
    switches it reads when it runs)."""
    _check_policy(policy)
    _, ac_dtype, tf32 = POLICIES[policy]
    if not autocast:
        ac_dtype = None
    dev_type = torch.device(device).type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                 torch.get_float32_matmul_precision()
                 if hasattr(torch, "get_float32_matmul_precision") else None)
    _set_tf32(tf32)
    try:
        if ac_dtype is not None:
            with torch.autocast(device_type=dev_type, dtype=ac_dtype):
                yield
        else:
            yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = saved[0]
            torch.backends.cudnn.allow_tf32 = saved[1]
            if saved[2] is not None:
                torch.set_float32_matmul_precision(saved[2])


def apply_policy_to_model(model, policy, device):
    """Move the model to ``device`` (policy_device: fp64 on MPS goes to the CPU) and cast it to
    the policy's parameter dtype."""
    return model.to(device=policy_device(policy, device), dtype=POLICIES[policy][0])


def cast_input(x, policy, device):
    """Move a floating input to the device (policy_device) and the policy's input dtype (others:
    device only)."""
    device = policy_device(policy, device)
    if torch.is_tensor(x):
        if x.is_floating_point():
            return x.to(device=device, dtype=POLICIES[policy][0])
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(cast_input(v, policy, device) for v in x)
    return x


def _safe(fn, default=None):
    try:
        return fn()
    except Exception:  # noqa: BLE001 - attribute collection must never fail the dump
        return default


def backend_attrs(device, policy):
    """File attributes describing the backend, as plain str/int/bool/float values."""
    dev = torch.device(device)
    a = {
        "backend": dev.type,
        "policy": policy,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "h5py_version": h5py.__version__,
        "python_version": platform.python_version(),
        "host_machine": platform.machine(),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "created_by": "python/paritycheck/dump.py",
    }
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        a["device_name"] = _safe(lambda: torch.cuda.get_device_name(idx), "unknown")
        cap = _safe(lambda: torch.cuda.get_device_capability(idx))
        if cap:
            a["device_capability"] = "%d.%d" % cap
        a["cuda_version"] = str(torch.version.cuda)
        a["cudnn_version"] = str(_safe(torch.backends.cudnn.version, "none"))
    elif dev.type == "mps":
        a.update(_mps_attrs())
    else:
        a["device_name"] = platform.processor() or platform.machine()
        a["num_threads"] = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a["allow_tf32_matmul"] = bool(_safe(lambda: torch.backends.cuda.matmul.allow_tf32, False))
        a["allow_tf32_cudnn"] = bool(_safe(lambda: torch.backends.cudnn.allow_tf32, False))
        # torch >= 2.9: the fp32_precision settings the switches above resolved to
        for key, get in (("fp32_precision_matmul", lambda: torch.backends.cuda.matmul.fp32_precision),
                         ("fp32_precision_cudnn_conv", lambda: torch.backends.cudnn.conv.fp32_precision),
                         ("fp32_precision_cudnn_rnn", lambda: torch.backends.cudnn.rnn.fp32_precision)):
            v = _safe(get)
            if isinstance(v, str):
                a[key] = v
    p = _safe(torch.get_float32_matmul_precision) if hasattr(torch, "get_float32_matmul_precision") else None
    if p is not None:
        a["float32_matmul_precision"] = str(p)
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if dev.type != "cuda":
            break
        v = _safe(lambda f=flag: getattr(torch.backends.cuda.matmul, f))
        if v is not None:
            a[flag] = bool(v)
    ac = POLICIES.get(policy, (None, None, None))[1]
    if ac is not None:
        a["autocast_dtype"] = _NP_NAMES[ac]
    if platform.system() == "Darwin":
        a["macos_version"] = platform.mac_ver()[0] or "unknown"
    return a


# The MPS settings that change what a run computes or whether it runs: the fallback sends ops
# MPS lacks to the CPU, the watermark bounds the memory MPS may take.
MPS_ENV = ("PYTORCH_ENABLE_MPS_FALLBACK", "PYTORCH_MPS_HIGH_WATERMARK_RATIO")


def _mps_attrs():
    mps = getattr(torch.backends, "mps", None)
    a = {"device_name": "mps (%s)" % (platform.processor() or platform.machine()),
         "mps_available": bool(_safe(mps.is_available, False)) if mps else False,
         "mps_built": bool(_safe(mps.is_built, False)) if mps else False}
    for name in MPS_ENV:
        a[name] = os.environ.get(name, "unset")
    return a


def policy_device(policy, device):
    """The device a run of ``policy`` on ``device`` can use: the CPU for fp64 on MPS, which has
    no float64 (a warning says so); else ``device``."""
    _check_policy(policy)
    dev = torch.device(device)
    if dev.type == "mps" and POLICIES[policy][0] == torch.float64:
        warnings.warn("MPS has no float64: policy %s runs on the CPU" % policy, stacklevel=2)
        return torch.device("cpu")
    return dev


def infer_reduction_length(module, inputs):
    """K for one output element of ``module``, or None when not known."""
    K = getattr(module, "reduction_length", None)
    if isinstance(K, int):
        return K
    if isinstance(module, nn.Linear):
        return int(module.in_features)
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        return int(module.in_channels // module.groups * math.prod(module.kernel_size))
    if isinstance(module, nn.LayerNorm):
        return int(math.prod(module.normalized_shape))
    if isinstance(module, (nn.Softmax, nn.LogSoftmax)) and inputs and torch.is_tensor(inputs[0]):
        dim = module.dim if module.dim is not None else -1
        return int(inputs[0].shape[dim])
    if isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        taps = 1
        for k, s, dl in zip(module.kernel_size, module.stride, module.dilation):
            taps *= -(-k // s) if dl == 1 else k
        return int(module.in_channels // module.groups * taps)
    x = inputs[0] if inputs and torch.is_tensor(inputs[0]) else None
    if x is not None and isinstance(module, nn.GroupNorm) and x.dim() >= 2:
        return int(x.numel() // x.shape[0] // module.num_groups)
    if x is not None and isinstance(module, nn.modules.batchnorm._BatchNorm) and x.dim() >= 2:
        if module.training or not module.track_running_stats:
            return int(x.numel() // x.shape[1])
        return None
    return None


def infer_grad_reduction_lengths(module, inputs, output):
    """{local parameter name: K} for the parameters ``module`` owns directly: how many terms
    one element of their gradient sums over in this call (see the module docstring)."""
    x = inputs[0] if inputs and torch.is_tensor(inputs[0]) else None
    y = output if torch.is_tensor(output) else None
    out = {}
    if x is None or y is None:
        return out
    if isinstance(module, nn.Linear):
        rows = x.numel() // max(int(module.in_features), 1)
        out = {"weight": rows, "bias": rows}
    elif isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        nd = len(module.kernel_size)
        n = y.shape[0] if y.dim() == nd + 2 else 1
        rows = n * math.prod(y.shape[-nd:])
        out = {"weight": rows, "bias": rows}
    elif isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        nd = len(module.kernel_size)
        n = y.shape[0] if y.dim() == nd + 2 else 1
        out = {"weight": n * math.prod(x.shape[-nd:]), "bias": n * math.prod(y.shape[-nd:])}
    elif isinstance(module, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm,
                             nn.modules.instancenorm._InstanceNorm)) and y.dim() >= 2:
        rows = y.numel() // y.shape[1]
        out = {"weight": rows, "bias": rows}
    elif isinstance(module, nn.LayerNorm):
        rows = y.numel() // max(math.prod(module.normalized_shape), 1)
        out = {"weight": rows, "bias": rows}
    return {k: int(v) for k, v in out.items()
            if isinstance(getattr(module, k, None), nn.Parameter)}


def _to_numpy(t):
    """(numpy array, logical dtype name or None) of a tensor, copied to the CPU (a sparse
    tensor densified)."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_complex() or t.dtype in (torch.float64, torch.float32, torch.float16) or \
            not t.is_floating_point():
        t = t.cpu() if t.device.type != "cpu" else t.clone()
        return t.numpy(), None
    if t.dtype == torch.bfloat16:
        return t.float().cpu().numpy(), "bfloat16"
    # other floats (e.g. float8): stored as float32 with the logical dtype as attribute
    return t.float().cpu().numpy(), str(t.dtype).replace("torch.", "")


def _set_attrs(obj, attrs):
    """Set HDF5 attributes; str subclasses (torch.__version__) become plain UTF-8 strings,
    booleans 0/1 integers."""
    for k, v in attrs.items():
        if isinstance(v, str):
            v = str.__str__(v)
        elif isinstance(v, (bool, np.bool_)):
            v = int(v)  # 0/1: easier for C readers than h5py's boolean enum
        obj.attrs[k] = v


def _flatten(out, prefix=()):
    """Yield (suffix tuple, tensor) for every tensor in a (nested) output."""
    if torch.is_tensor(out):
        yield prefix, out
    elif isinstance(out, (tuple, list)):
        for i, v in enumerate(out):
            yield from _flatten(v, prefix + (str(i),))
    elif isinstance(out, dict):
        for k, v in out.items():
            yield from _flatten(v, prefix + (str(k).replace("/", "_"),))
    elif hasattr(out, "data") and torch.is_tensor(getattr(out, "data")):  # PackedSequence
        yield prefix, out.data


class Dumper:
    """Record module outputs of ``model`` during forward passes into an HDF5 file.

    model              the nn.Module
    path               output .h5 file (overwritten)
    policy             dtype policy name (see POLICIES); recorded as attribute
    device             device the model runs on (default: that of its first parameter)
    modules            "leaves" (default: modules without children), "all", or an iterable
                       of module paths ("" is the root module)
    reduction_lengths  {module_path: K} overriding inferred K
    accumulation_dtypes {module_path: dtype name} overriding the policy's nominal one
    compression        None or "gzip" (with shuffle; used for datasets >= compress_min elements)
    attrs              extra file attributes
    index_width        digits of the execution index (default: as many as needed, at least 3)
    module_grads       also record the gradient flowing out of each selected module during
                       backward (full backward hooks; default off) under /activation_grads.
                       Full backward hooks forbid in-place changes of a hooked module's output
                       (e.g. a following nn.ReLU(inplace=True)).
    """

    def __init__(self, model, path, policy="fp32", device=None, modules="leaves",
                 reduction_lengths=None, accumulation_dtypes=None, compression="gzip",
                 compress_min=1024, attrs=None, index_width=None, module_grads=False):
        _check_policy(policy)
        self.model = model
        self.path = path
        self.policy = policy
        if device is None:
            p = next(model.parameters(), None)
            device = p.device if p is not None else torch.device("cpu")
        self.device = torch.device(device)
        self.modules = modules
        self.reduction_lengths = dict(reduction_lengths or {})
        self.accumulation_dtypes = dict(accumulation_dtypes or {})
        self.compression = compression
        self.compress_min = compress_min
        self.extra_attrs = dict(attrs or {})
        self.index_width = index_width
        self._records = []  # (index, path, suffix, array, attrs)
        self._other = []    # (name, array, attrs) written as is
        self._handles = []
        self._calls = 0
        self._exec = 0          # the execution counter shared by everything recorded
        self._grad_handles = []
        self._grad_order = {}   # param name -> execution index when backward produced it
        self._grad_k = {}       # param name -> K inferred from the forward calls
        self._param_owner = {}  # param name -> (module path, module type)
        self._fwd_calls = {}    # module path -> call indices not yet matched by a backward
        self.module_grads = module_grads
        self._agrads = []       # (module path, array, attrs) in backward order
        self._file_attrs = None
        self.enabled = True

    @property
    def loss_dtype(self):
        """float64 under policy fp64, else float32 (see loss_dtype())."""
        return loss_dtype(self.policy)

    def _next_exec(self):
        i = self._exec
        self._exec += 1
        return i

    # ---- hooks -------------------------------------------------------------------
    def _selected(self):
        named = list(self.model.named_modules())
        if self.modules == "leaves":
            return [(n, m) for n, m in named if next(m.children(), None) is None]
        if self.modules == "all":
            return named
        wanted = set(self.modules)
        sel = [(n, m) for n, m in named if n in wanted]
        missing = wanted - {n for n, _ in sel}
        if missing:
            raise KeyError("no such module(s): %s" % ", ".join(sorted(missing)))
        return sel

    def _nominal_accumulation(self):
        if self.policy == "fp64":
            return "float64"
        if self.policy in ("fp32", "tf32"):
            return "float32"
        if self.device.type != "cuda":
            return None
        # autocast / pure low precision: cuBLAS computes in fp32 unless reduced-precision
        # reductions are allowed (the default), then it is not known
        flag = "allow_bf16_reduced_precision_reduction" if "bf16" in self.policy else \
            "allow_fp16_reduced_precision_reduction"
        v = _safe(lambda: getattr(torch.backends.cuda.matmul, flag))
        return "float32" if v is False else None

    def _hook(self, name):
        def hook(module, inputs, output):
            if not self.enabled:
                return
            idx = self._calls
            self._calls += 1
            ex = self._next_exec()
            self._fwd_calls.setdefault(name, []).append(idx)
            for pn, k in _safe(lambda: infer_grad_reduction_lengths(module, inputs, output),
                               {}).items():
                full = name + "." + pn if name else pn
                self._grad_k[full] = self._grad_k.get(full, 0) + k
            K = self.reduction_lengths.get(name)
            if K is None:
                K = infer_reduction_length(module, inputs)
            acc = self.accumulation_dtypes.get(name)
            if acc is None and K is not None:
                acc = self._nominal_accumulation()
            for suffix, t in _flatten(output):
                arr, logical = _to_numpy(t)
                at = {"module": name or "root", "module_type": type(module).__name__,
                      "call_index": idx, "execution_index": ex,
                      "torch_dtype": str(t.dtype).replace("torch.", "")}
                if logical is not None:
                    at["dtype"] = logical
                if K is not None:
                    at["reduction_length"] = int(K)
                if acc is not None:
                    at["accumulation_dtype"] = acc
                self._records.append((idx, name or "root", suffix, arr, at))
        return hook

    def _backward_hook(self, name):
        def hook(module, grad_input, grad_output):
            g = grad_output[0] if grad_output else None
            if g is None or not torch.is_tensor(g):
                return None
            arr, logical = _to_numpy(g)
            at = {"module": name or "root", "module_type": type(module).__name__,
                  "execution_index": self._next_exec(),
                  "torch_dtype": str(g.dtype).replace("torch.", "")}
            calls = self._fwd_calls.get(name)
            if calls:  # backward meets a module's calls in reverse order (best effort)
                at["forward_call_index"] = calls.pop()
            if logical is not None:
                at["dtype"] = logical
            self._agrads.append((name or "root", arr, at))
            return None
        return hook

    def watch_gradients(self, names=None):
        """Arm hooks that note when backward produces each parameter's gradient (all
        parameters that require grad, or the named ones); call it before loss.backward().
        dump_gradients() then writes the gradients in that order.  Re-arming forgets the
        order recorded so far."""
        for h in self._grad_handles:
            h.remove()
        self._grad_handles = []
        self._grad_order = {}
        params = dict(self.model.named_parameters())
        for n in (names if names is not None else list(params)):
            p = params[n]
            if not p.requires_grad:
                continue

            def hook(grad, n=n):
                if n not in self._grad_order:
                    self._grad_order[n] = self._next_exec()
                return None
            self._grad_handles.append(p.register_hook(hook))
        return self

    def __enter__(self):
        # backend attributes are read now (flags may be changed by policy_context later;
        # they are re-read on the first forward call under policy_context, see below)
        for name, m in self._selected():
            self._handles.append(m.register_forward_hook(self._hook(name)))
            if self.module_grads:
                self._handles.append(m.register_full_backward_hook(self._backward_hook(name)))
        for mname, m in self.model.named_modules():
            for pn, _ in m.named_parameters(recurse=False):
                full = mname + "." + pn if mname else pn
                self._param_owner.setdefault(full, (mname or "root", type(m).__name__))
        self._handles.append(self.model.register_forward_pre_hook(self._snapshot_attrs))
        return self

    def _snapshot_attrs(self, module, inputs):
        if self._file_attrs is None:
            self._file_attrs = backend_attrs(self.device, self.policy)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:  # a part of a run would read as drift of the missing tensors
            self.discard()
        else:
            self.close()
        return False

    def discard(self):
        """Remove the hooks and drop what was recorded; nothing is written."""
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        self._records, self._other, self._agrads = [], [], []

    # ---- helpers -------------------------------------------------------------------
    def policy_context(self):
        """The forward's context: TF32 switches and autocast of the policy."""
        return policy_context(self.policy, self.device)

    def backward_context(self):
        """The backward's context: the policy's TF32 switches, no autocast.  Without it a
        backward outside policy_context() runs under whatever switches are set then (torch's
        defaults: cuDNN TF32 on, matmul TF32 off)."""
        return policy_context(self.policy, self.device, autocast=False)

    def save(self, name, tensor, **attrs):
        """Store any tensor under ``name`` (e.g. "inputs/x", "outputs/loss"); its
        execution_index is the counter's value now unless ``attrs`` gives one."""
        arr, logical = _to_numpy(tensor)
        at = {"torch_dtype": str(tensor.dtype).replace("torch.", "")}
        if logical is not None:
            at["dtype"] = logical
        if tensor.layout != torch.strided:
            at["layout"] = str(tensor.layout).replace("torch.", "")
        at.update(attrs)
        if "execution_index" not in at:
            at["execution_index"] = self._next_exec()
        self._other.append((name, arr, at))

    def dump_gradients(self, names=None, reduction_lengths=None, infer_k=True):
        """Store .grad of the named parameters (all with a grad if None) under /gradients,
        in the order backward produced them (as recorded by watch_gradients()), then those
        no armed hook saw in the given (default: parameter) order.  reduction_lengths
        {param: K} overrides the K inferred from the forward (infer_k=False: none)."""
        reduction_lengths = reduction_lengths or {}
        params = dict(self.model.named_parameters())
        if names is None:
            names = [n for n, p in params.items() if p.grad is not None]
        names = list(names)
        seen = sorted((n for n in names if n in self._grad_order), key=self._grad_order.get)
        names = seen + [n for n in names if n not in self._grad_order]
        for n in names:
            g = params[n].grad
            if g is None:
                raise ValueError("parameter %s has no gradient" % n)
            at = {"parameter": n}
            owner = self._param_owner.get(n)
            if owner:
                at["module"], at["module_type"] = owner
            if n in reduction_lengths:
                at["reduction_length"] = int(reduction_lengths[n])
            elif infer_k and self._grad_k.get(n):
                at["reduction_length"] = int(self._grad_k[n])
            if n in self._grad_order:
                at["execution_index"] = self._grad_order[n]
            self.save("gradients/" + n, g, **at)

    def _create(self, parent, name, arr, attrs):
        kw = {}
        if self.compression and arr.size >= self.compress_min and arr.ndim > 0:
            kw = {"compression": self.compression, "shuffle": True}
            if self.compression == "gzip":
                kw["compression_opts"] = 6
        ds = parent.create_dataset(name, data=arr, **kw)
        _set_attrs(ds, attrs)
        return ds

    @staticmethod
    def _group(root, parts):
        g = root
        for p in parts:
            g = g[p] if p in g else g.create_group(p, track_order=True)
        return g

    def close(self):
        """Write the file: whole, or not at all (a temporary file renamed over ``path``)."""
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        if self._file_attrs is None:
            self._file_attrs = backend_attrs(self.device, self.policy)
        d = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(self.path) + ".")
        os.close(fd)
        try:
            os.chmod(tmp, 0o666 & ~_umask())  # as a file made by open() would be, not 0600
            self._write(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            self._records, self._other, self._agrads = [], [], []

    def _write(self, path):
        n = max(self._calls, 1)
        width = self.index_width or max(3, len(str(n - 1)))
        with h5py.File(path, "w", track_order=True) as f:
            _set_attrs(f, self._file_attrs)
            _set_attrs(f, self.extra_attrs)
            if self._records:
                act = f.create_group("activations", track_order=True)
                for idx, name, suffix, arr, at in self._records:
                    base = "%0*d_%s" % (width, idx, name)
                    if suffix:
                        g = self._group(act, (base,) + suffix[:-1])
                        self._create(g, suffix[-1], arr, at)
                    else:
                        self._create(act, base, arr, at)
            for name, arr, at in self._other:
                parts = [p for p in name.split("/") if p]
                g = self._group(f, parts[:-1])
                self._create(g, parts[-1], arr, at)
            if self._agrads:
                ag = self._group(f, ("activation_grads",))
                w = self.index_width or max(3, len(str(len(self._agrads) - 1)))
                for i, (name, arr, at) in enumerate(self._agrads):
                    self._create(ag, "%0*d_%s" % (w, i, name), arr, at)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- CLI ----------------------------------------------------------------------------
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


def _flat_tensors(obj, prefix=""):
    """(name, tensor) of every tensor in a torch.save object: a tensor, or dicts and
    lists/tuples of them, nested names joined with '/' (a list's items by index)."""
    if torch.is_tensor(obj):
        yield prefix or "tensor", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flat_tensors(v, "%s/%s" % (prefix, k) if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flat_tensors(v, "%s/%d" % (prefix, i) if prefix else str(i))


def write_tensors(tensors, out, attrs=None):
    """Write (name, tensor or array) pairs to the HDF5 file `out` in the layout paritycheck
    reads: one dataset per name ('/' makes groups), bfloat16 and other narrow floats as
    float32 with the logical dtype in attribute "dtype", in the given order
    (execution_index 0, 1, ...), with attrs.get(name) (a dict) as more attributes. Returns the
    number written."""
    n = 0
    attrs = attrs or {}
    with h5py.File(out, "w", track_order=True) as f:
        for name, t in tensors:
            arr, logical = _to_numpy(t) if torch.is_tensor(t) else (np.asarray(t), None)
            d = f.create_dataset(name, data=arr)
            if logical:
                d.attrs["dtype"] = logical
            d.attrs["execution_index"] = n
            _set_attrs(d, attrs.get(name, {}))
            n += 1
    return n


def _state_owners(module):
    """{state dict key: {module, module_type}} for the parameters and buffers of ``module``:
    the module that holds each, as the Dumper names the owner of a gradient."""
    owners = {}
    for mname, m in module.named_modules():
        for pn, _ in list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False)):
            owners.setdefault(mname + "." + pn if mname else pn,
                              {"module": mname or "root", "module_type": type(m).__name__})
    return owners


PICKLE_WARNING = ("a whole pickled module is Python code: loading it runs whatever the file's "
                  "author put in it. Only for files you would execute")


def convert(src, out, allow_pickle=False):
    """A torch.save file (a state dict, or any dict/list/tuple of tensors) as an HDF5 dump.
    It is loaded with torch.load(weights_only=True), which reads tensors and containers and
    runs no code. allow_pickle=True loads any pickle, a whole pickled module too (which also
    gives each tensor its owner's module and module_type): that runs the file's code
    (PICKLE_WARNING)."""
    try:
        obj = torch.load(src, map_location="cpu", weights_only=not allow_pickle)
    except pickle.UnpicklingError:
        raise ValueError("%s: holds more than tensors and containers (torch.load with "
                         "weights_only=True refused it); a whole pickled module needs "
                         "--allow-pickle: %s" % (src, PICKLE_WARNING)) from None
    owners = None
    if hasattr(obj, "state_dict") and not isinstance(obj, dict):
        owners = _state_owners(obj) if isinstance(obj, nn.Module) else None
        obj = obj.state_dict()  # a whole pickled module
    n = write_tensors(_flat_tensors(obj), out, owners)
    if n == 0:
        raise ValueError("%s holds no tensors" % src)
    return n


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["convert"]:
        ap = argparse.ArgumentParser(prog=PROG + " convert",
                                     description="Convert a torch.save file to an HDF5 dump.")
        ap.add_argument("src", help="a file written by torch.save (state dict or tensors)")
        ap.add_argument("out", help="the HDF5 file to write")
        ap.add_argument("--allow-pickle", action="store_true",
                        help="also load a whole pickled module (torch.save(model)). WARNING: "
                             + PICKLE_WARNING + ". Without it the file is loaded with "
                             "weights_only=True, which runs no code")
        a = ap.parse_args(argv[1:])
        try:
            n = convert(a.src, a.out, allow_pickle=a.allow_pickle)
        except ValueError as e:
            print("%s convert: %s" % (PROG, e), file=sys.stderr)
            return 2
        print("wrote %s (%d tensors)" % (a.out, n))
        return 0
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
    try:  # --envelope: the honest envelope of A (docs/envelope.md)
        from . import ensemble
    except ImportError:  # run as a script, python3 python/paritycheck/dump.py
        import ensemble
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


if __name__ == "__main__":
    sys.exit(main())
