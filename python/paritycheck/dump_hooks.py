"""paritycheck.dump's hooks: the Dumper records what a model computes (each selected module's
output on forward, the gradient flowing out of it on backward, the order backward produces the
parameters' gradients in) with the attributes the tolerance model reads (execution_index,
reduction_length K, accumulation_dtype), and hands the records to dump_write at close.
Import these from paritycheck.dump, whose docstring describes the layout, K and the order."""

import math

import torch
import torch.nn as nn

from .dump_policy import _check_policy, _safe, backend_attrs, loss_dtype, policy_context
from .dump_write import _to_numpy, write_atomically, write_layout


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

    def close(self):
        """Write the file: whole, or not at all (a temporary file renamed over ``path``)."""
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        if self._file_attrs is None:
            self._file_attrs = backend_attrs(self.device, self.policy)
        try:
            write_atomically(self.path, self._write)
        finally:
            self._records, self._other, self._agrads = [], [], []

    def _write(self, path):
        write_layout(path, (self._file_attrs, self.extra_attrs), self._records, self._other,
                     self._agrads, self._calls, index_width=self.index_width,
                     compression=self.compression, compress_min=self.compress_min)
