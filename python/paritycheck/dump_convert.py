"""paritycheck.dump's convert: a torch.save file (a state dict, or any dict/list/tuple of
tensors) as an HDF5 dump, loaded with torch.load(weights_only=True), which runs no code; and
the ``convert`` subcommand of ``python3 -m paritycheck.dump``.  Import convert from
paritycheck.dump."""

import argparse
import pickle
import sys

import torch
import torch.nn as nn

from .dump_write import write_tensors


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


def main(argv, prog):
    """The convert subcommand: ``argv`` its arguments (SRC OUT [--allow-pickle]), ``prog`` its
    name in usage and messages. Returns the exit status: 0 written, 2 refused."""
    ap = argparse.ArgumentParser(prog=prog,
                                 description="Convert a torch.save file to an HDF5 dump.")
    ap.add_argument("src", help="a file written by torch.save (state dict or tensors)")
    ap.add_argument("out", help="the HDF5 file to write")
    ap.add_argument("--allow-pickle", action="store_true",
                    help="also load a whole pickled module (torch.save(model)). WARNING: "
                         + PICKLE_WARNING + ". Without it the file is loaded with "
                         "weights_only=True, which runs no code")
    a = ap.parse_args(argv)
    try:
        n = convert(a.src, a.out, allow_pickle=a.allow_pickle)
    except ValueError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 2
    print("wrote %s (%d tensors)" % (a.out, n))
    return 0
