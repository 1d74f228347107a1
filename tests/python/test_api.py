"""The Python package (python/paritycheck): compare, assert_parity and the dumper's convert,
run with pytest on Debian's /usr/bin/python3 against the paritycheck binary in
$PARITYCHECK_BIN. Expected figures are numpy's, not the binary's."""
import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

import paritycheck
from paritycheck import dump

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "real")
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))


def test_paths_and_profile():
    """A real CPU vs CUDA TF32 pair passes its profile and fails the strict defaults."""
    a = os.path.join(FIXTURES, "attention_cpu_fp32.h5")
    b = os.path.join(FIXTURES, "attention_cuda_tf32.h5")
    assert paritycheck.compare(a, b, profile="tf32")["verdict"] == "pass"
    with pytest.raises(AssertionError) as e:
        paritycheck.assert_parity(a, b)
    assert "tensors fail" in str(e.value)


def test_in_memory_figures():
    """Tensors in memory: the max abs error and the mismatch count are numpy's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(np.float32)
    y = (x * np.float32(1.001)).astype(np.float32)
    report = paritycheck.compare({"x": x}, {"x": y})
    t = report["tensors"][0]
    assert t["path"] == "/x"
    assert t["max_abs"] == float(np.max(np.abs(y.astype(np.float64) - x.astype(np.float64))))
    assert t["verdict"] == "drift"


def test_assert_parity_names_the_tensor_and_reason():
    a = {"good": np.ones(8, np.float32), "bad": np.zeros(8, np.float32)}
    b = {"good": np.ones(8, np.float32), "bad": np.full(8, 0.5, np.float32)}
    with pytest.raises(AssertionError) as e:
        paritycheck.assert_parity(a, b)
    msg = str(e.value)
    assert "1 of 2 tensors fail" in msg
    assert "/bad (drift)" in msg and "/good" not in msg


def test_assert_parity_rounds_its_figures():
    """Failure messages give figures at 3 significant digits: rel_rms from numpy, against the
    tf32 profile's limit 2 u = 2 * 2^-11 (docs/tolerance-model.md)."""
    x = np.linspace(0.1, 1, 100).astype(np.float32)
    y = (x * np.float32(1.001)).astype(np.float32)
    d = y.astype(np.float64) - x.astype(np.float64)
    rel_rms = np.sqrt(np.sum(d * d) / np.sum(x.astype(np.float64) ** 2))
    with pytest.raises(AssertionError) as e:
        paritycheck.assert_parity({"x": x}, {"x": y}, profile="tf32")
    msg = str(e.value)
    assert "rel_rms %.3g > limit 0.000977" % rel_rms in msg
    # the criteria's figures (the diagnosis, "scaled by 1.001", is the judge's own text)
    figures = [float(f) for f in re.findall(r"(?:rel_rms|scale_error|limit) (\d+\.\d+(?:e[-+]?\d+)?)",
                                            msg)]
    assert figures and all(float("%.3g" % f) == f for f in figures), msg


def test_bfloat16_tensors_compare_in_bfloat16():
    """A torch bfloat16 tensor is written as the dumper writes it and judged in bfloat16: one
    bfloat16 step (2^-7 at 1.0) is 1 ULP."""
    a = {"w": torch.ones(4, dtype=torch.bfloat16)}
    b = {"w": torch.full((4,), 1 + 2 ** -7, dtype=torch.bfloat16)}
    t = paritycheck.compare(a, b)["tensors"][0]
    assert t["dtype_a"] == "bfloat16" and t["compare_dtype"] == "bfloat16"
    assert t["max_ulp"] == 1


def test_unreadable_input_raises_parity_error(tmp_path):
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not a dump at all")
    with pytest.raises(paritycheck.ParityError) as e:
        paritycheck.compare(str(junk), str(junk), extra_args=["--allow-same"])
    assert "not a tensor dump" in str(e.value)


@pytest.mark.parametrize("zipped", [True, False])
def test_torch_save_file_gets_the_convert_hint(tmp_path, zipped):
    """A torch.save file, of the zip format or the legacy one, is refused (exit 2) with the
    convert command; convert reads both."""
    src, out = tmp_path / "ckpt.pt", tmp_path / "ckpt.h5"
    torch.save({"w": torch.arange(4.0)}, src, _use_new_zipfile_serialization=zipped)
    with pytest.raises(paritycheck.ParityError) as e:
        paritycheck.compare(str(src), str(src), extra_args=["--allow-same"])
    assert "torch.save file" in str(e.value)
    assert "python3 -m paritycheck.dump convert FILE OUT.h5" in str(e.value)
    assert dump.main(["convert", str(src), str(out)]) == 0
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["w"][()], np.arange(4.0, dtype=np.float32))


def test_assert_parity_of_nothing_fails():
    """Two empty dicts compare nothing: that is an error (exit 2, issue 30), never a pass,
    unless --allow-empty says an empty run is expected."""
    with pytest.raises(paritycheck.ParityError) as e:
        paritycheck.assert_parity({}, {})
    assert "nothing was compared" in str(e.value)
    report = paritycheck.assert_parity({}, {}, extra_args=["--allow-empty"])
    assert report["tensors"] == []


def test_convert_state_dict(tmp_path):
    """convert: a torch.save state dict (nested, with a bfloat16 entry) becomes an HDF5 dump
    with one dataset per tensor, values exact."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    state = {"model": model.state_dict(), "extra": [torch.arange(3), torch.ones(2).bfloat16()]}
    src, out = tmp_path / "ckpt.pt", tmp_path / "ckpt.h5"
    torch.save(state, src)
    assert dump.main(["convert", str(src), str(out)]) == 0
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["model/0.weight"][()], model[0].weight.detach().numpy())
        np.testing.assert_array_equal(f["extra/0"][()], np.arange(3))
        assert f["extra/1"].attrs["dtype"] == "bfloat16"
    # the converted checkpoint compares with itself through the binary: two Linear layers'
    # weight and bias, and the two extras
    same = ["--allow-same"]  # one file on both sides, on purpose
    assert paritycheck.compare(str(out), str(out), extra_args=same)["summary"]["tensors"] == 6


def test_assert_parity_on_a_torch_model():
    """The pytest helper on a real torch model (Debian's CPU torch): the same small MLP in
    float64 and in float32, every layer's output, judged by the CPU-vs-CUDA float32 profile,
    which allows float32 rounding; a bug (a layer skipped) fails and is named."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)

    def run(m, inp, skip=False):
        outs, h = {}, inp
        for i, layer in enumerate(m):
            h = h if (skip and i == 1) else layer(h)
            outs["layer%d" % i] = h.detach()
        return outs

    ref = {k: v.double().numpy().astype(np.float32) for k, v in
           run(model.double(), x.double()).items()}
    model = model.float()
    paritycheck.assert_parity(ref, run(model, x), profile="cpu-vs-cuda-fp32")
    with pytest.raises(AssertionError) as e:
        paritycheck.assert_parity(ref, run(model, x, skip=True), profile="cpu-vs-cuda-fp32")
    # Skipping a layer takes layer1 far beyond the float32 profile's allowance, which is far
    # below half the value: drift, "N x the honest bound", not indeterminate (issue 36).
    assert "/layer1 (drift)" in str(e.value) and "x the honest bound" in str(e.value)


class _WritesAMarker:
    """A pickle that opens a file when loaded: what a crafted checkpoint can do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_convert_runs_no_pickled_code(tmp_path):
    """convert loads with weights_only=True: a checkpoint that carries code is refused and its
    code never runs; a whole pickled module needs --allow-pickle, whose help warns (issue 38)."""
    marker = tmp_path / "marker"
    src, out = tmp_path / "evil.pt", tmp_path / "evil.h5"
    torch.save({"w": torch.ones(2), "x": _WritesAMarker(str(marker))}, src)
    assert dump.main(["convert", str(src), str(out)]) == 2
    assert not marker.exists() and not out.exists()
    whole = tmp_path / "whole.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 2)), whole)
    assert dump.main(["convert", str(whole), str(out)]) == 2
    assert not out.exists()
    assert dump.main(["convert", "--allow-pickle", str(whole), str(out)]) == 0
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["0.bias", "0.weight"]
    helptext = subprocess.run([sys.executable, "-m", "paritycheck.dump", "convert", "--help"],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=PYTHON_DIR)).stdout
    assert "--allow-pickle" in helptext and "WARNING" in helptext


def test_failure_message_roots_first():
    """assert_parity's message (docs/python.md, "The pytest helper's message"): the first root
    cause with its diagnosis and figures, then the counts, then each root with its follow-on
    tensors folded under it. The run: a tanh chain whose second layer B scales by 0.9 (its two
    downstream layers follow from it), and an independent gradient with its first 100 of 1000
    elements zeroed."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    a, b = {}, {}
    ha, hb = x, x.copy()
    for k in range(4):
        w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
        ha, hb = np.tanh(ha @ w), np.tanh(hb @ w)
        if k == 1:
            hb = (hb * np.float32(0.9)).astype(np.float32)
        a["l%d" % k], b["l%d" % k] = ha, hb
    g = rng.standard_normal(1000).astype(np.float32)
    gz = g.copy()
    gz[:100] = 0
    a["grad"], b["grad"] = g, gz
    with pytest.raises(AssertionError) as e:
        paritycheck.assert_parity(a, b)
    lines = str(e.value).splitlines()
    # the scale B applied, and the zeroed share (100 of the 1000 nonzero elements)
    assert re.match(r"paritycheck: first divergence /l1 \(drift\): scaled by 0\.900 \("
                    r"mismatch_fraction 1 > limit 0\)$", lines[0]), lines
    assert lines[1] == "4 of 5 tensors fail (4 drift): 2 root causes, 2 follow-on tensors", lines
    assert lines[2].startswith("  /l1 (drift): scaled by 0.900"), lines
    assert lines[3] == "    follow-on (2): /l2, /l3", lines
    assert lines[4].startswith("  /grad (drift): 10.0 % of elements zeroed (mismatch_fraction "
                               "0.1 > limit 0; structure "), lines
    assert len(lines) == 5, lines
