"""Envelope sidecars written with numpy exactly as docs/envelope.md specifies, for the tests:
independent of the dumper's ensemble (python/paritycheck/ensemble.py)."""
import math

import h5py
import numpy as np


def f16_up(x):
    """x >= 0 (an array of any rank, a scalar's too) rounded up to float16."""
    x = np.asarray(x, np.float64)
    flat = x.reshape(-1)
    h = flat.astype(np.float16)
    low = h.astype(np.float64) < flat
    h[low] = np.nextafter(h[low], np.float16(np.inf))
    return h.reshape(x.shape)


def lower_median(x):
    """The value of rank ceil(n/2) among the n values of x, by a full sort."""
    x = np.sort(np.asarray(x, np.float64).reshape(-1))
    return float(x[math.ceil(x.size / 2) - 1]) if x.size else 0.0


def write_envelope(path, a, members, tensors=None, version=1, emulate="float32",
                   scale_test=False, median_test=False):
    """The sidecar of docs/envelope.md for A's datasets `a` (name -> array) and K member dumps;
    with scale_test, the members' scales on A too (root scale_test 1, member_scale_err); with
    median_test, their median element errors (root median_test 1, member_median_err)."""
    k = len(members)
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs["paritycheck_envelope"] = version
        f.attrs["members"] = k
        f.attrs["emulate"] = emulate
        f.attrs["policy"] = "fp32"
        f.attrs["seed"] = 0
        f.attrs["torch_version"] = "none"
        f.attrs["reference"] = "a.h5"
        f.attrs["tensors"] = tensors or len(a)
        if scale_test:
            f.attrs["scale_test"] = 1
        if median_test:
            f.attrs["median_test"] = 1
        for name, av in a.items():
            av = av.astype(np.float64)
            diffs = [m[name].astype(np.float64) - av for m in members]
            r = np.sqrt(np.mean([d * d for d in diffs], axis=0))
            s = float(r.max())
            e = f16_up(r / s) if s > 0 else np.zeros(r.shape, np.float16)
            ds = f.create_dataset(name, data=e)
            ds.attrs["member_rms_err"] = np.array([math.sqrt(np.mean(d * d)) for d in diffs])
            ds.attrs["member_max_abs"] = np.array([float(np.abs(d).max()) for d in diffs])
            ds.attrs["scale"] = s
            ds.attrs["a_rms"] = math.sqrt(np.mean(av * av))
            ds.attrs["count"] = av.size
            ds.attrs["nonfinite"] = 0
            if scale_test:
                ds.attrs["member_scale_err"] = np.array([(d * av).sum() / (av * av).sum()
                                                         for d in diffs])
            if median_test:
                ds.attrs["member_median_err"] = np.array([lower_median(np.abs(d)) for d in diffs])
