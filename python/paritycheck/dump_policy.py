"""paritycheck.dump's policies and the backend they run on: the dtype policies (POLICIES), the
context a forward and a backward run in under one (TF32 switches, autocast), the model and
inputs moved and cast for it, and the file attributes that record the backend (backend_attrs).
Import these from paritycheck.dump, whose docstring describes the whole dumper."""

import contextlib
import datetime
import os
import platform
import warnings

import h5py
import numpy as np
import torch

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
