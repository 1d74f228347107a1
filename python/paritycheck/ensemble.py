"""paritycheck.ensemble: the honest envelope of a run, measured by Monte Carlo arithmetic
(docs/envelope.md, docs/python.md "The honest envelope").

The reference run A (usually the CPU in float32) is rerun K times with random rounding that
emulates candidate B's arithmetic; how far those K honest reruns land from A, per tensor and per
element, is written beside A as ``NAME.envelope.h5``.  The judge then asks only whether B's
distance to A is one more sample of that spread.

Stable API (the GPU bug zoo imports it):

    from paritycheck.ensemble import emulate, make_envelope, dump_model

    emulate(policy, generator, dry=False, narrow_ops=None)
        A context manager.  Every aten op run inside it (forward AND backward: it is a
        TorchDispatchMode, below autograd) is perturbed as ``policy``'s backend would round it,
        with random numbers drawn from ``generator`` (a torch.Generator) only: the global RNG,
        hence model init, inputs and dropout masks, are untouched.  dry=True draws the same
        random numbers and changes nothing (a check that the emulation is transparent).
        narrow_ops: the op families B runs narrow, a subset of {"matmul", "conv", "attention"}
        (default all three; e.g. {"matmul"} when B's cuDNN ran its convolutions without TF32).

    make_envelope(run, reference, policy, members=8, seed=0, keep_members=None,
                  narrow_ops=None)
        ``run(path)`` writes the dump(s) of the reference run to ``path``: a file, or a folder
        of step files for a training run; ``reference`` is what ``run(reference)`` wrote.  Calls
        ``run`` K times inside ``emulate(policy, generator(seed, k))`` into temporary paths and
        writes ``<stem>.envelope.h5`` beside every ``.h5`` dump under ``reference``.  ``run``
        must seed the model and its inputs itself (torch.manual_seed), as A's run did.
        keep_members=DIR keeps member k's dump(s) in DIR/member_k (debugging, tests).  Returns
        the envelope paths.

    dump_model(build, inputs, path, policy="fp32", device="cpu", grads=True)
        The standard run: build() (it seeds itself), forward under the policy, loss
        mean(out^2), backward, every leaf module's output and every parameter gradient dumped.

What the emulation does (policy of B -> arithmetic emulated at A's precision):

    bf16-autocast, fp16-autocast  matmul, convolution and attention ops (mm, addmm, bmm,
                                  baddbmm, convolution, convolution_backward, SDPA kernels...):
                                  every floating input (activations and weights) and every
                                  output stochastically rounded to B's grid; computed and
                                  accumulated in A's precision.  Autocast's dtype flow too:
                                  other ops whose floating inputs are all narrow (a GELU or
                                  BatchNorm after a Linear) have their outputs rounded, except
                                  those autocast runs in float32 (softmax, LayerNorm, losses).
                                  In the backward pass (no autocast there) every op follows
                                  the dtype flow, and a tensor a narrow op reads (a Linear's
                                  output gradient) is rounded once for all its readers
    tf32                          the same ops: inputs only (TF32 accumulates and writes fp32)
    bf16, fp16 (whole model)      every op that computes: inputs and outputs (in-place results
                                  too: parameters live on B's grid)
    fp32, fp64 (same precision)   inputs and outputs of reductions (matmul family, convolution,
                                  sum/mean/var/norms/softmax/losses/embedding_bag...) and
                                  outputs of transcendental ops (exp, tanh, gelu, pow, ...) moved
                                  by one ulp up or down at random; exact ops (+, *, relu, copies)
                                  are left alone: every backend rounds them alike

Stochastic rounding is unbiased: x between grid neighbours lo < x < hi becomes hi with
probability (x - lo)/(hi - lo).  bfloat16 drops 16 low bits of a float32, tf32 13 (both by adding
a uniform integer below 2^bits to the bits and truncating), float16 uses float16's own grid with
its subnormals; beyond float16's largest finite value it rounds to nearest (65504 or inf) as a
cast would.  Only float32 tensors are rounded to a narrow grid; NaN and inf pass unchanged.
"""

import os
import shutil
import tempfile
import time
import weakref

import h5py
import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["emulate", "make_envelope", "dump_model", "EMULATION", "stochastic_round",
           "ulp_perturb", "member_generator", "envelope_path"]

# policy of B -> (the arithmetic emulated, how): docs/envelope.md's `emulate` attribute
EMULATION = {
    "bf16-autocast": ("bfloat16", "autocast"),
    "fp16-autocast": ("float16", "autocast"),
    "tf32": ("tf32", "inputs"),
    "bf16": ("bfloat16", "all"),
    "fp16": ("float16", "all"),
    "fp32": ("float32", "ulp"),
    "fp64": ("float64", "ulp"),
}

NARROW_FAMILIES = ("matmul", "conv", "attention")

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "addr", "dot", "vdot",
           "matmul", "linear", "_addmm_activation", "inner", "outer", "ger", "tensordot"}

# reductions whose result depends on the order of accumulation (same-precision emulation)
_REDUCTIONS = {
    "sum", "mean", "nansum", "nanmean", "var", "std", "var_mean", "std_mean", "norm",
    "linalg_vector_norm", "frobenius_norm", "cumsum", "cumprod", "prod", "logsumexp", "logcumsumexp",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "native_batch_norm_backward", "batch_norm_backward",
    "native_layer_norm", "native_layer_norm_backward", "native_group_norm",
    "native_group_norm_backward", "_softmax", "_softmax_backward_data", "_log_softmax",
    "_log_softmax_backward_data", "_embedding_bag", "_embedding_bag_forward_only",
    "_embedding_bag_backward", "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward",
    "embedding_dense_backward", "index_add", "scatter_add", "scatter_reduce", "index_reduce",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "mse_loss", "mse_loss_backward", "l1_loss", "smooth_l1_loss", "smooth_l1_loss_backward",
    "huber_loss", "huber_loss_backward", "binary_cross_entropy",
    "binary_cross_entropy_backward", "binary_cross_entropy_with_logits", "kl_div",
    "_weight_norm_interface", "upsample_bilinear2d_backward", "avg_pool2d", "avg_pool2d_backward",
    "avg_pool3d", "avg_pool3d_backward", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool3d", "_adaptive_avg_pool3d_backward", "_cdist_forward", "_cdist_backward",
}

# elementwise ops whose implementations differ by about an ulp between backends (not correctly
# rounded: vectorised polynomials, fast intrinsics, FMA contraction)
_TRANSCENDENTAL = {
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sigmoid", "gelu", "erf",
    "erfc", "erfinv", "pow", "rsqrt", "sqrt", "silu", "softplus", "elu", "mish", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh",
    "reciprocal", "lgamma", "digamma", "logit", "xlogy", "sigmoid_backward", "tanh_backward",
    "gelu_backward", "silu_backward", "softplus_backward", "elu_backward", "mish_backward",
    "logit_backward", "addcmul", "addcdiv", "lerp", "_foreach_addcmul", "_foreach_addcdiv",
    "_foreach_sqrt", "_foreach_exp",
}

# ops that compute nothing: never rounded (views are recognised by their schema: a view must
# stay a view).  Copies (clone, _to_copy) are rounded under the whole-model policies bf16 and
# fp16, so that what B stores in its dtype (an input saved by the Dumper) is on B's grid.
_RUNNING_STATS = ("running_mean", "running_var")
_MOVEMENT = {"detach", "alias", "lift_fresh", "_unsafe_view", "set_", "resize_", "empty_like",
             "empty", "empty_strided", "new_empty", "new_empty_strided", "_local_scalar_dense",
             "item", "is_same_size", "_has_compatible_shallow_copy_type", "equal"}

# Under autocast, ops outside the narrow families run in their inputs' dtype: on narrow inputs
# they compute narrow (a GELU after a Linear runs in bf16), except those autocast casts to float32
# (torch's autocast fp32 lists; matched on the base name, backward variants included) ...
_AUTOCAST_FP32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d",
    "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d", "prod", "softmax",
    "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "linalg_matrix_norm", "sum", "norm",
}
# ... and those whose data input alone decides (BatchNorm: narrow input, float32 parameters,
# narrow output; its statistics and parameter gradients stay float32)
_FOLLOW_FIRST = {"native_batch_norm", "_native_batch_norm_legit",
                 "_native_batch_norm_legit_no_training", "native_batch_norm_backward",
                 "cudnn_batch_norm", "cudnn_batch_norm_backward"}

FP16_MAX = 65504.0


def _family(name):
    """'matmul', 'conv', 'attention' or None for an aten op's base name."""
    if name in _MATMUL:
        return "matmul"
    if "conv" in name and "convert" not in name:
        return "conv"
    if "attention" in name:
        return "attention"
    return None


def member_generator(seed, k, device="cpu"):
    """The perturbation generator of member k of an ensemble seeded with ``seed``: seeded from
    (seed, k) through numpy's SeedSequence, independent of torch's global RNG."""
    state = np.random.SeedSequence([int(seed), int(k)]).generate_state(2, dtype=np.uint32)
    return torch.Generator(device=device).manual_seed(int(state[0]) << 31 ^ int(state[1]))


# ---- rounding ---------------------------------------------------------------------------------
def _sr_bits(x, drop, gen):
    """Stochastic rounding of float32 x to a grid with ``drop`` fewer mantissa bits (bfloat16:
    16, tf32: 13): a uniform integer in [0, 2^drop) is added to the bit pattern, then the low
    bits are cleared.  The magnitude rounds up with probability (distance to the lower
    neighbour) / spacing, so the value is unbiased; inf stays inf, NaN is kept."""
    x = x.contiguous()
    r = torch.randint(0, 1 << drop, x.shape, generator=gen, dtype=torch.int32, device=x.device)
    y = ((x.view(torch.int32) + r) & ~((1 << drop) - 1)).view(torch.float32)
    return torch.where(torch.isnan(x), x, y)


def _sr_fp16(x, gen):
    """Stochastic rounding of float32 x to float16's grid (normal and subnormal), returned as
    float32.  |x| above float16's largest finite value rounds to nearest (65504, or inf from
    65520 on), as a cast does."""
    x = x.contiguous()
    u = torch.rand(x.shape, generator=gen, dtype=torch.float32, device=x.device)
    a = x.abs()
    near = a.half()                       # round to nearest: one of the two neighbours
    bits = near.view(torch.int16).to(torch.int32)
    above = near.float() > a              # near is the upper neighbour
    lo_bits = torch.where(above, bits - 1, bits)
    hi_bits = torch.where(above, bits, bits + 1)
    lo = lo_bits.to(torch.int16).view(torch.float16).float()
    hi = hi_bits.to(torch.int16).view(torch.float16).float()
    p = (a - lo) / (hi - lo)              # exact: Sterbenz, and a power-of-two spacing
    mag = torch.where(u < p, hi, lo)
    keep = (near.float() == a) | torch.isnan(x) | (a > FP16_MAX)
    mag = torch.where(keep, near.float(), mag)
    y = torch.where(x < 0, -mag, mag)
    return torch.where(torch.isnan(x) | (x == 0), x, y)


def stochastic_round(x, fmt, gen):
    """x (float32) stochastically rounded to ``fmt``'s grid ("bfloat16", "float16", "tf32"),
    as float32.  Other dtypes are returned unchanged."""
    if x.dtype != torch.float32 or x.numel() == 0:
        return x
    if fmt == "bfloat16":
        return _sr_bits(x, 16, gen)
    if fmt == "tf32":
        return _sr_bits(x, 13, gen)
    if fmt == "float16":
        return _sr_fp16(x, gen)
    raise ValueError("no stochastic rounding to %r" % fmt)


def ulp_perturb(x, gen):
    """x (float32 or float64) with every finite nonzero element moved one ulp up or down in
    magnitude, each direction with probability 1/2 (zeros, inf and NaN unchanged)."""
    itype = {torch.float32: torch.int32, torch.float64: torch.int64}.get(x.dtype)
    if itype is None or x.numel() == 0:
        return x
    x = x.contiguous()
    step = torch.randint(0, 2, x.shape, generator=gen, dtype=itype, device=x.device) * 2 - 1
    y = (x.view(itype) + step).view(x.dtype)
    return torch.where((x == 0) | ~torch.isfinite(x) | ~torch.isfinite(y), x, y)


# ---- the emulation context -------------------------------------------------------------------
def _base(name):
    """An op's name without its leading '_', 'native_' and backward or forward suffix."""
    for suffix in ("_backward_data", "_backward", "_forward"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    name = name.lstrip("_")
    return name[len("native_"):] if name.startswith("native_") else name


def _leaves(obj):
    """The tensors in (nested) args."""
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _leaves(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)


def _tree_map(fn, obj):
    if torch.is_tensor(obj):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tree_map(fn, v) for v in obj)
    if isinstance(obj, dict):
        return {k: _tree_map(fn, v) for k, v in obj.items()}
    return obj


def _is_view(func):
    """True for an aten op whose result aliases an input without writing it: a view must stay a
    view (never rounded into a copy)."""
    return any(r.alias_info is not None and not r.alias_info.is_write
               for r in func._schema.returns)


class _PythonCalls(TorchFunctionMode):
    """Counts the torch calls made from Python that are running (a module's forward, an
    optimizer's step): an aten op seen while none runs comes from autograd's engine, that is
    from a backward pass (``Tensor.backward`` itself is not counted)."""

    def __init__(self, emulation):
        super().__init__()
        self.emulation = emulation

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.backward:
            return func(*args, **kwargs)
        self.emulation._python_calls += 1
        try:
            return func(*args, **kwargs)
        finally:
            self.emulation._python_calls -= 1


class _Emulation(TorchDispatchMode):
    """Perturbs the aten ops of a run as B's backend would round them (see the module
    docstring).  Sits below autograd, so backward ops pass through it too."""

    def __init__(self, policy, generator, dry=False, narrow_ops=None):
        super().__init__()
        if policy not in EMULATION:
            raise ValueError("no emulation for policy %r (known: %s)"
                             % (policy, ", ".join(EMULATION)))
        self.fmt, self.how = EMULATION[policy]
        self.gen = generator
        self.dry = dry
        self.families = set(NARROW_FAMILIES if narrow_ops is None else narrow_ops)
        unknown = self.families - set(NARROW_FAMILIES)
        if unknown:
            raise ValueError("unknown op families %s (known: %s)"
                             % (sorted(unknown), ", ".join(NARROW_FAMILIES)))
        self._gens = {generator.device: generator}
        self._rules = {}
        self._narrow = {}  # autocast: id(tensor) -> weakref of tensors B would hold narrow
        self._python_calls = 0  # autocast: torch calls from Python running (_PythonCalls)
        self._calls_mode = _PythonCalls(self) if self.how == "autocast" else None
        # autocast, in a backward pass: id(tensor) -> (weakref, version, its narrow copy), and
        # id(view) -> (weakref, weakref of its base, the view op, its other arguments)
        self._held = {}
        self._views = {}

    def __enter__(self):
        if self._calls_mode is not None:
            self._calls_mode.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._calls_mode is not None:
                self._calls_mode.__exit__(*exc)

    # which generator draws for a tensor: the given one on its device, else one seeded from it
    def _gen(self, device):
        g = self._gens.get(device)
        if g is None:
            g = torch.Generator(device=device).manual_seed(self.gen.initial_seed() ^ 0x5EED)
            self._gens[device] = g
        return g

    def _perturb(self, t):
        if not (torch.is_tensor(t) and t.is_floating_point()):
            return t
        if self.how == "ulp":
            y = ulp_perturb(t, self._gen(t.device))
        else:
            y = stochastic_round(t, self.fmt, self._gen(t.device))
        return t if self.dry else y

    def _rule(self, func):
        """(perturb inputs, perturb outputs) for an op, or None to run it untouched."""
        rule = self._rules.get(func, False)
        if rule is not False:
            return rule
        name = func.overloadpacket.__name__
        view = _is_view(func)
        rule = None
        if not view and name not in _MOVEMENT:
            fam = _family(name)
            if self.how in ("autocast", "inputs"):
                if fam in self.families:
                    rule = (True, self.how == "autocast")
            elif self.how == "all":
                rule = (True, True)
            elif fam is not None or name in _REDUCTIONS or name.rstrip("_") in _REDUCTIONS:
                rule = (True, True)
            elif name.rstrip("_") in _TRANSCENDENTAL:
                rule = (False, True)
        self._rules[func] = rule
        return rule

    @staticmethod
    def _written(func, running=False):
        """Positions and names of the arguments an op writes (in-place self, out=); with
        running, also a batch norm's running statistics, which native_batch_norm updates in
        place without saying so in its schema before torch 2: never perturbed (rounded into
        copies, the model's would never move), and not the op's result either."""
        pos, names = set(), set()
        for i, a in enumerate(func._schema.arguments):
            if (a.alias_info is not None and a.alias_info.is_write) or \
                    (running and a.name in _RUNNING_STATS):
                (names if a.kwarg_only else pos).add(i)
                names.add(a.name)
        return pos, names

    def _mark(self, t):
        if torch.is_tensor(t) and t.is_floating_point():
            k = id(t)
            self._narrow[k] = weakref.ref(t, lambda _, k=k: self._narrow.pop(k, None))
        return t

    def _is_narrow(self, t):
        r = self._narrow.get(id(t))
        return r is not None and r() is t

    def _held_narrow(self, t):
        """In a backward pass: the narrow copy of t that B holds, rounded once and shared by
        every op that reads t, or t itself where none was made (or t changed since)."""
        h = self._held.get(id(t)) if torch.is_tensor(t) else None
        if h is None or h[0]() is not t or h[1] != t._version:
            return t
        return h[2]

    def _hold_narrow(self, t):
        """In a backward pass, t read by a narrow op: B holds it narrow (autograd gives a
        gradient its tensor's dtype, and the tensor was narrow), so every reader of t sees the
        same rounding, the bias gradient's sum as the weight gradient's matmul. A view (the
        matmul reads g^T) is taken again from its base's narrow copy, so that the base's other
        readers share that rounding."""
        if not (torch.is_tensor(t) and t.is_floating_point()) or self._is_narrow(t):
            return t
        held = self._held_narrow(t)
        if held is not t:
            return held
        v = self._views.get(id(t))
        base = v[1]() if v is not None and v[0]() is t else None
        if base is not None:
            held = self._mark(v[2](self._hold_narrow(base), *v[3], **v[4]))
        else:
            held = self._mark(self._perturb(t))
        if held is t:  # dry: nothing rounded, nothing to share (and no reference to keep)
            return t
        k = id(t)
        self._held[k] = (weakref.ref(t, lambda _, k=k: self._held.pop(k, None)), t._version, held)
        return held

    def _autocast_backward(self, func, args, kwargs):
        """Autocast does not reach a backward pass: every op follows the dtype flow, a tensor
        a narrow op reads is rounded once for all its readers (_hold_narrow), and views are
        remembered so that a view's rounding is its base's."""
        name = func.overloadpacket.__name__
        fn = self._hold_narrow if _family(name) in self.families else self._held_narrow
        pos, names = self._written(func)
        args = tuple(a if i in pos else _tree_map(fn, a) for i, a in enumerate(args))
        kwargs = {k: v if k in names else _tree_map(fn, v) for k, v in kwargs.items()}
        out = self._autocast_flow(func, args, kwargs, name)
        if _is_view(func) and torch.is_tensor(out) and args and torch.is_tensor(args[0]):
            k = id(out)
            self._views[k] = (weakref.ref(out, lambda _, k=k: self._views.pop(k, None)),
                              weakref.ref(args[0]), func, args[1:], kwargs)
        return out

    def _autocast(self, func, args, kwargs):
        """Autocast's dtype flow: narrow ops round inputs and outputs; other ops compute narrow
        (their floating outputs rounded) when all their floating inputs of one or more
        dimensions are narrow, or, in place, when the tensor they write is; views of narrow
        tensors are narrow; autocast's float32 ops are left alone. In a backward pass (aten ops
        while no torch call from Python runs): _autocast_backward."""
        if self._python_calls == 0:
            return self._autocast_backward(func, args, kwargs)
        name = func.overloadpacket.__name__
        if _family(name) not in self.families and _base(name) in _AUTOCAST_FP32:
            return func(*args, **kwargs)
        return self._autocast_flow(func, args, kwargs, name)

    def _autocast_flow(self, func, args, kwargs, name):
        """The dtype flow of one op (_autocast), autocast's float32 list aside."""
        if _family(name) in self.families:
            out = self._apply(func, args, kwargs, (True, True))
        else:
            pos, names = self._written(func)
            if pos or names:
                flo = [args[i] for i in pos if i < len(args)] + [kwargs[n] for n in names
                                                                 if n in kwargs]
            else:
                flo = [t for t in _leaves((args, kwargs)) if t.is_floating_point() and t.dim()]
                flo = flo[:1] if name in _FOLLOW_FIRST else flo
            if not flo or not all(self._is_narrow(t) for t in flo):
                return func(*args, **kwargs)
            if _is_view(func) or name in _MOVEMENT or name in ("clone", "_to_copy", "copy_"):
                out = func(*args, **kwargs)
            else:
                out = self._apply(func, args, kwargs, (False, True))
        if isinstance(out, tuple) and (name in _FOLLOW_FIRST or _family(name) == "attention"):
            self._mark(out[0])
        else:
            _tree_map(self._mark, out)
        return out

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.how == "autocast":
            return self._autocast(func, args, kwargs)
        rule = self._rule(func)
        if rule is None:
            return func(*args, **kwargs)
        return self._apply(func, args, kwargs, rule)

    def _apply(self, func, args, kwargs, rule):
        """Run func with its inputs and/or outputs perturbed, as rule = (inputs, outputs)."""
        rin, rout = rule
        if rin:
            keep, keep_names = self._written(func, running=True)
            args = tuple(a if i in keep else _tree_map(self._perturb, a)
                         for i, a in enumerate(args))
            kwargs = {k: v if k in keep_names else _tree_map(self._perturb, v)
                      for k, v in kwargs.items()}
        pos, names = self._written(func)
        out = func(*args, **kwargs)
        if not rout:
            return out
        if pos or names:  # in place or out=: round what was written, where it lives
            for t in [args[i] for i in pos if i < len(args)] + [kwargs[n] for n in names
                                                                  if n in kwargs]:
                if torch.is_tensor(t) and t.is_floating_point():
                    t.copy_(self._perturb(t))
            return out
        name = func.overloadpacket.__name__
        if isinstance(out, tuple) and (name in _FOLLOW_FIRST or (_family(name) == "attention"
                                                                 and "backward" not in name)):
            # the attention or BatchNorm output is narrow; logsumexp, statistics, RNG state and
            # parameter gradients are not
            return (self._perturb(out[0]),) + tuple(out[1:])
        return _tree_map(self._perturb, out)


def emulate(policy, generator, dry=False, narrow_ops=None):
    """Context manager: inside it, every aten op (forward and backward) is perturbed as B's
    ``policy`` rounds it, drawing only from ``generator``.  See the module docstring."""
    return _Emulation(policy, generator, dry=dry, narrow_ops=narrow_ops)


# ---- the standard run -------------------------------------------------------------------------
def dump_model(build, inputs, path, policy="fp32", device="cpu", grads=True, modules="leaves"):
    """Dump one run of ``build()`` on ``inputs`` (a tensor or a tuple of them) to ``path``:
    every selected module's output, inputs/N, outputs/loss = mean(first output^2) and, with
    grads, every parameter gradient.  build() must seed itself (torch.manual_seed) so that
    every run of it has the same weights."""
    from .dump_hooks import Dumper, _flatten
    from .dump_policy import apply_policy_to_model, cast_input
    model = apply_policy_to_model(build(), policy, device)
    inputs = cast_input(tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,),
                        policy, device)
    with Dumper(model, path, policy=policy, modules=modules) as d:
        for i, x in enumerate(inputs):
            d.save("inputs/%d" % i, x)
        with d.policy_context():
            out = model(*inputs)
            loss = next(t for _, t in _flatten(out)).to(d.loss_dtype).pow(2).mean()
        d.enabled = False
        d.save("outputs/loss", loss)
        if grads:
            d.watch_gradients()
            with d.backward_context():
                loss.backward()
            d.dump_gradients()
    return path


# ---- the envelope -----------------------------------------------------------------------------
def envelope_path(dump):
    """The sidecar of a dump: run/a.h5 -> run/a.envelope.h5."""
    stem = dump[:-3] if dump.endswith(".h5") else dump
    return stem + ".envelope.h5"


def _dump_files(reference):
    """Relative paths of the dumps a reference run wrote: the file itself, or every .h5 under
    the folder (envelopes excluded), sorted."""
    if os.path.isfile(reference):
        return [os.path.basename(reference)]
    if not os.path.isdir(reference):
        raise FileNotFoundError("reference %s: no such file or folder (run(reference) first)"
                                % reference)
    found = []
    for root, _, files in os.walk(reference):
        for f in files:
            if f.endswith(".h5") and not f.endswith(".envelope.h5"):
                found.append(os.path.relpath(os.path.join(root, f), reference))
    if not found:
        raise ValueError("reference %s holds no .h5 dump" % reference)
    return sorted(found)


def _floating_datasets(f):
    """Paths of the floating datasets of an open HDF5 file, in creation order."""
    out = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
            out.append(name)
    f.visititems(visit)
    return out


def _round_up_f16(r, s):
    """e = r/s as float16, rounded up so that float64(e) * s >= r everywhere."""
    if s == 0:
        return np.zeros(r.shape, np.float16)
    e = (r / s).astype(np.float16)
    low = e.astype(np.float64) * s < r
    while low.any():
        e[low] = np.nextafter(e[low], np.float16(np.inf))
        low = e.astype(np.float64) * s < r
    return e


def _lower_median(x):
    """The value of rank ceil(n/2) among the n values of x (0 for none): the median test's
    statistic, as the judge counts it (docs/envelope.md)."""
    if x.size == 0:
        return 0.0
    k = (x.size + 1) // 2 - 1
    return float(np.partition(x.ravel(), k)[k])


def _tensor_envelope(a, members):
    """(e, attributes) of one tensor: ``a`` is A's values (float64), ``members`` yields each
    member's values (float64) one at a time, so memory holds about three tensors."""
    fa = np.isfinite(a)
    sumsq = np.zeros(a.shape, np.float64)
    count = np.zeros(a.shape, np.int64)
    mismatch = np.zeros(a.shape, bool)
    rms, mx, sc, med = [], [], [], []
    for m in members:
        if m.shape != a.shape:
            raise ValueError("a member's shape %s differs from A's %s" % (m.shape, a.shape))
        fm = np.isfinite(m)
        ok = fa & fm
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.where(ok, m - a, 0.0)
        sumsq += d * d
        count += ok
        mismatch |= fa != fm
        n = int(ok.sum())
        rms.append(float(np.sqrt((d * d).sum() / n)) if n else 0.0)
        mx.append(float(np.abs(d).max()) if d.size else 0.0)
        # the member's least-squares scale on A, minus 1 (A's finite elements, the member's too)
        aa = np.where(ok, a, 0.0)
        e2 = float((aa * aa).sum())
        sc.append(float((d * aa).sum()) / e2 if e2 > 0 else 0.0)
        med.append(_lower_median(np.abs(d[ok])))
    r = np.sqrt(np.divide(sumsq, count, out=np.zeros_like(sumsq), where=count > 0))
    s = float(r.max()) if r.size else 0.0
    fin = a[fa]
    attrs = {"member_rms_err": np.array(rms, np.float64),
             "member_max_abs": np.array(mx, np.float64),
             "member_scale_err": np.array(sc, np.float64),
             "member_median_err": np.array(med, np.float64), "scale": s,
             "a_rms": float(np.sqrt((fin * fin).mean())) if fin.size else 0.0,
             "count": np.int64(a.size), "nonfinite": np.int64(mismatch.sum())}
    return _round_up_f16(r, s), attrs


def _write_envelope(a_path, member_paths, out, root_attrs):
    """Write the envelope of dump a_path (members: the same dump of each member) to ``out``,
    atomically (a temporary file renamed over it).  Returns the number of tensors."""
    d = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(out) + ".")
    os.close(fd)
    try:
        with h5py.File(a_path, "r") as fa, h5py.File(tmp, "w", track_order=True) as fo:
            mfiles = [h5py.File(p, "r") for p in member_paths]
            try:
                names = _floating_datasets(fa)
                for name in names:
                    a = fa[name][()].astype(np.float64)
                    for mf, p in zip(mfiles, member_paths):
                        if name not in mf:
                            raise ValueError("%s: member dump %s has no %s: the run is not the "
                                             "same under emulation" % (a_path, p, name))
                    e, at = _tensor_envelope(a, (mf[name][()].astype(np.float64)
                                                 for mf in mfiles))
                    g = fo
                    for part in name.split("/")[:-1]:
                        g = g[part] if part in g else g.create_group(part, track_order=True)
                    kw = {"compression": "gzip", "shuffle": True} if e.size >= 1024 else {}
                    ds = g.create_dataset(name.split("/")[-1], data=e, **kw)
                    for k, v in at.items():
                        ds.attrs[k] = v
            finally:
                for mf in mfiles:
                    mf.close()
            for k, v in dict(root_attrs, tensors=np.int64(len(names))).items():
                fo.attrs[k] = v
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return len(names)


def make_envelope(run, reference, policy, members=8, seed=0, keep_members=None,
                  narrow_ops=None):
    """Rerun ``run`` K = ``members`` times under ``emulate(policy, member_generator(seed, k))``
    and write ``<stem>.envelope.h5`` beside every dump under ``reference`` (docs/envelope.md).
    Returns the list of envelope paths.  See the module docstring."""
    if members < 2:
        raise ValueError("an envelope needs at least 2 members, got %d" % members)
    reference = os.fspath(reference).rstrip(os.sep) or os.sep
    files = _dump_files(reference)
    is_file = os.path.isfile(reference)
    if keep_members:
        os.makedirs(keep_members, exist_ok=True)
        work = keep_members
    else:
        work = tempfile.mkdtemp(prefix="paritycheck-ensemble-")
    fmt = EMULATION[policy][0] if policy in EMULATION else None
    if fmt is None:
        raise ValueError("no emulation for policy %r (known: %s)" % (policy, ", ".join(EMULATION)))
    try:
        roots, seconds = [], []
        for k in range(members):
            mdir = os.path.join(work, "member_%d" % k)
            if os.path.exists(mdir):
                shutil.rmtree(mdir)
            os.makedirs(mdir)
            target = os.path.join(mdir, os.path.basename(reference))
            if not is_file:
                os.makedirs(target)
            t0 = time.perf_counter()
            with torch.random.fork_rng(devices=[]), \
                    emulate(policy, member_generator(seed, k), narrow_ops=narrow_ops):
                run(target)
            seconds.append(time.perf_counter() - t0)
            roots.append(target)
        written = []
        for rel in files:
            a_path = reference if is_file else os.path.join(reference, rel)
            mpaths = [r if is_file else os.path.join(r, rel) for r in roots]
            for p in mpaths:
                if not os.path.isfile(p):
                    raise ValueError("the member run wrote no %s (A has %s)" % (p, a_path))
            attrs = {"paritycheck_envelope": np.int64(1), "members": np.int64(members),
                     "scale_test": np.int64(1), "median_test": np.int64(1),
                     "emulate": fmt, "policy": policy,
                     "seed": np.int64(seed),
                     "torch_version": str(torch.__version__),
                     "reference": os.path.basename(a_path),
                     "narrow_ops": ",".join(sorted(narrow_ops or NARROW_FAMILIES)),
                     "member_seconds": float(np.mean(seconds)),
                     "created_by": "python/paritycheck/ensemble.py"}
            out = envelope_path(a_path)
            _write_envelope(a_path, mpaths, out, attrs)
            written.append(out)
        return written
    finally:
        if not keep_members:
            shutil.rmtree(work, ignore_errors=True)


# ---- python3 -m paritycheck.dump --envelope ----------------------------------------------------
def add_cli_options(ap):
    """The dumper CLI's ensemble options (python3 -m paritycheck.dump --help)."""
    ap.add_argument("--envelope", nargs="?", const="", metavar="POLICY",
                    choices=list(EMULATION) + [""],
                    help="after writing A, rerun it --members times with random rounding that "
                         "emulates B's POLICY and write A's honest envelope beside it "
                         "(NAME.envelope.h5, docs/envelope.md); with --trio, POLICY defaults to "
                         "--policy (the policy of b.h5) and a.h5 gets the envelope")
    ap.add_argument("--members", type=int, default=8, metavar="K",
                    help="members of the --envelope ensemble (default 8, at least 2)")
    ap.add_argument("--envelope-seed", type=int, default=0, metavar="N",
                    help="seed of the ensemble's perturbation generator (default 0)")


def check_cli(a, error):
    """Resolve --envelope's policy (with --trio: --policy, the policy of b.h5) into a.envelope,
    or call error(message) on bad usage, before anything runs."""
    if a.envelope is None:
        return
    a.envelope = a.envelope or (a.policy if a.trio else "")
    if not a.envelope:
        error("--envelope wants B's policy with --out (e.g. --envelope bf16-autocast)")
    if a.members < 2:
        error("--members wants at least 2, got %d" % a.members)


def run_cli(a, a_args, run_one):
    """Make the envelope of the A run whose parsed arguments are ``a_args`` (run again by
    ``run_one(args)``) for the options ``a`` (check_cli'd).  Prints what was written and
    returns the envelope's path."""
    import argparse
    import contextlib
    import io

    def run(path):
        with contextlib.redirect_stdout(io.StringIO()):  # each member's "wrote ..." line
            run_one(argparse.Namespace(**dict(vars(a_args), out=path)))

    t0 = time.perf_counter()
    out = make_envelope(run, a_args.out, a.envelope, members=a.members, seed=a.envelope_seed)[0]
    print("wrote %s (%d members emulating %s: %.1f s, %d bytes)"
          % (out, a.members, a.envelope, time.perf_counter() - t0, os.path.getsize(out)))
    return out
