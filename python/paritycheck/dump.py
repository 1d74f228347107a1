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

import os
import platform  # noqa: F401  backend_attrs reads it; tests patch paritycheck.dump.platform
import sys

if __name__ == "__main__" and not __package__:
    # run as a script (python3 python/paritycheck/dump.py): import the modules beside it as the
    # package they are (PEP 366), from the folder above
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "paritycheck"

# The dumper's jobs, one module each; their public names are this module's.
from .dump_cli import PROG, TRIO_PROFILES, main  # noqa: E402,F401
from .dump_convert import PICKLE_WARNING, convert  # noqa: E402,F401
from .dump_hooks import (Dumper, infer_grad_reduction_lengths,  # noqa: E402,F401
                         infer_reduction_length)
from .dump_policy import (MPS_ENV, POLICIES, apply_policy_to_model,  # noqa: E402,F401
                          backend_attrs, cast_input, loss_dtype, policy_context, policy_device)
from .dump_write import write_tensors  # noqa: E402,F401

__all__ = ["Dumper", "POLICIES", "policy_context", "policy_device", "apply_policy_to_model",
           "backend_attrs", "infer_reduction_length", "infer_grad_reduction_lengths",
           "loss_dtype"]

if __name__ == "__main__":
    sys.exit(main())
