"""paritycheck.dump's file writing: tensors as numpy arrays with their logical dtype, HDF5
attributes in the plain types C readers expect, the Dumper's records in the layout of
paritycheck.dump's docstring ("Layout of one file"), a file written whole or not at all, and
write_tensors for (name, tensor) pairs.  Import these from paritycheck.dump."""

import os
import tempfile

import h5py
import numpy as np
import torch


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


def _create(parent, name, arr, attrs, compression, compress_min):
    kw = {}
    if compression and arr.size >= compress_min and arr.ndim > 0:
        kw = {"compression": compression, "shuffle": True}
        if compression == "gzip":
            kw["compression_opts"] = 6
    ds = parent.create_dataset(name, data=arr, **kw)
    _set_attrs(ds, attrs)
    return ds


def _group(root, parts):
    g = root
    for p in parts:
        g = g[p] if p in g else g.create_group(p, track_order=True)
    return g


def write_layout(path, file_attrs, records, other, agrads, calls, index_width=None,
                 compression="gzip", compress_min=1024):
    """Write a Dumper's records to the HDF5 file ``path``: the dicts ``file_attrs`` on the root,
    in order; ``records`` (call index, module path, suffix, array, attrs) as
    /activations/NNN_<path>[/suffix...], NNN ``index_width`` digits (default: enough for
    ``calls`` module calls, at least 3); ``other`` (name, array, attrs) at its name;
    ``agrads`` (module path, array, attrs) as /activation_grads/NNN_<path> in their order.
    Datasets of at least ``compress_min`` elements are compressed with ``compression`` (gzip
    at level 6) and shuffled."""
    n = max(calls, 1)
    width = index_width or max(3, len(str(n - 1)))
    with h5py.File(path, "w", track_order=True) as f:
        for attrs in file_attrs:
            _set_attrs(f, attrs)
        if records:
            act = f.create_group("activations", track_order=True)
            for idx, name, suffix, arr, at in records:
                base = "%0*d_%s" % (width, idx, name)
                if suffix:
                    g = _group(act, (base,) + suffix[:-1])
                    _create(g, suffix[-1], arr, at, compression, compress_min)
                else:
                    _create(act, base, arr, at, compression, compress_min)
        for name, arr, at in other:
            parts = [p for p in name.split("/") if p]
            g = _group(f, parts[:-1])
            _create(g, parts[-1], arr, at, compression, compress_min)
        if agrads:
            ag = _group(f, ("activation_grads",))
            w = index_width or max(3, len(str(len(agrads) - 1)))
            for i, (name, arr, at) in enumerate(agrads):
                _create(ag, "%0*d_%s" % (w, i, name), arr, at, compression, compress_min)


def write_atomically(path, write):
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``:
    the file is whole or not there (when ``write`` raises, ``path`` stays as it was)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # as a file made by open() would be, not 0600
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
