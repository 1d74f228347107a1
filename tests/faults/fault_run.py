"""What the fault-injection tests of tests/faults/ share: one set of inputs that reaches every
stage of a comparison, the command line that writes every report, and one run in a fresh
folder."""

import json
import os
import shutil
import struct
import subprocess
import tempfile

import h5py
import numpy as np

REPORTS = ['o.json', 'o.md', 'o.xml', 'o.html', 'o.base.json']
# Text that only a crash or a sanitizer report puts on stderr.
SANITIZER_WORDS = ('Sanitizer', 'runtime error', 'crashed', 'Segmentation', 'Aborted')


def make_inputs(tmp):
    """A and B hold a contiguous dataset (read by the workers with pread) that drifts in every
    7th element, a chunked deflated one in a group (read by HDF5), integers, one dataset only in
    A, a shape and a dtype mismatch, a dataset never written (its fill values are compared), a
    name beyond ASCII; R is A again in float64 (a reference must be finer than A and B), as the
    reference. tol.yaml sets a rule for the group."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    for name, side in (('a.h5', 'a'), ('b.h5', 'b'), ('r.h5', 'r')):
        fl = np.float64 if side == 'r' else np.float32
        with h5py.File(os.path.join(tmp, name), 'w') as f:
            xx = x.copy()
            if side == 'b':
                xx[::7] *= np.float32(1.01)
            f['x'] = xx.astype(fl)
            f.create_dataset('grp/y', data=y.astype(fl), chunks=(100,), compression='gzip')
            f['i'] = np.arange(50, dtype=np.int32)
            if side != 'b':
                f['only_a'] = x[:10].astype(fl)
            f['shape'] = x[:11] if side == 'b' else x[:10].astype(fl)
            f['dt'] = x[:10].astype(np.float64) if side != 'a' else x[:10]
            f.create_dataset('fill', (100,), 'f8' if side == 'r' else 'f4',
                             fillvalue=0.5)  # never written
            f['caf\u00e9'] = y[:20].astype(fl)
    with open(os.path.join(tmp, 'tol.yaml'), 'w') as fh:
        fh.write('version: 1\nrules:\n  - match: "/grp/*"\n    float32: {atol: 1.0e-6}\n')


def make_flat_inputs(tmp):
    """a.npz (compressed) and b.safetensors, the loaders that are not HDF5: B drifts in x, y is
    2-D, i integer, only_a only in A."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal(300).astype(np.float32)
    y = rng.standard_normal((6, 5)).astype(np.float32)
    i = np.arange(40, dtype=np.int32)
    np.savez_compressed(os.path.join(tmp, 'a.npz'), x=x, y=y, i=i, only_a=x[:7])
    xb = x.copy()
    xb[::5] *= np.float32(1.01)
    tensors, blobs, off = {}, [], 0
    for name, arr, code in (('x', xb, 'F32'), ('y', y, 'F32'), ('i', i, 'I32')):
        raw = arr.astype(arr.dtype.newbyteorder('<')).tobytes()
        tensors[name] = {'dtype': code, 'shape': list(arr.shape),
                         'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(tensors).encode()
    text += b' ' * (-len(text) % 8)
    with open(os.path.join(tmp, 'b.safetensors'), 'wb') as fh:
        fh.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def make_baseline(binary, tmp, env):
    """base.json: A against itself, where every tensor that A and B share passes, so that the
    gate sees /x drift further than the baseline allows; under tol.yaml, as the gated runs, since
    a gate refuses a baseline of another tolerance set. True when it was made."""
    a = os.path.join(tmp, 'a.h5')
    p = subprocess.run([binary, '--allow-same', '-j', '1', '-t', os.path.join(tmp, 'tol.yaml'),
                        '--save-baseline',
                        os.path.join(tmp, 'base.json'), a, a], capture_output=True, env=env)
    return p.returncode == 0


def arguments(reference):
    """Every report file, the tolerance file and the baseline, from a folder inside tmp; -j 1:
    one worker thread, so that the Nth allocation or read of the comparison is the same one on
    every run (the report files are written side by side, so among their allocations the order
    may vary: each run is judged by its outcome alone)."""
    ref = ['--reference', '../r.h5'] if reference else []
    return ['-j', '1', '-t', '../tol.yaml', '--baseline', '../base.json'] + ref + [
        '--json', 'o.json', '--markdown', 'o.md', '--junit', 'o.xml', '--html', 'o.html',
        '--save-baseline', 'o.base.json', '../a.h5', '../b.h5']


def sanitizer_env(env):
    """A sanitizer report is told apart from paritycheck's exit 2 by its exit status and text."""
    env['ASAN_OPTIONS'] = 'detect_leaks=1:exitcode=99'
    env['LSAN_OPTIONS'] = 'exitcode=98'
    env['UBSAN_OPTIONS'] = 'halt_on_error=1:print_stacktrace=1'
    return env


def run_in_fresh_folder(command, tmp, env, name):
    """Runs command in a new folder inside tmp; returns the exit code, stdout and stderr (text)
    and the files it left there (name -> bytes); the folder is removed."""
    d = tempfile.mkdtemp(prefix=name + '_', dir=tmp)
    try:
        p = subprocess.run(command, cwd=d, env=env, capture_output=True, timeout=120)
        files = {}
        for f in os.listdir(d):
            with open(os.path.join(d, f), 'rb') as fh:
                files[f] = fh.read()
        return (p.returncode, p.stdout.decode('utf-8', 'replace'),
                p.stderr.decode('utf-8', 'replace'), files)
    finally:
        shutil.rmtree(d)
