"""What the folder, fail-closed and module-rule CLI tests share: the binary and the work folder
they run with (setup), running the binary, its JSON report read from stdout, a fresh folder of
the work folder and an HDF5 input written by the test."""

import json
import os
import shutil
import subprocess

import h5py

BIN = None
WORK = None


def setup(binary, work):
    global BIN, WORK
    BIN, WORK = binary, work


def run(args):
    return subprocess.run([BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, errors='replace', text=True)


def run_json(args):
    """(process, parsed JSON report or None)."""
    p = run(list(args) + ['--json', '-'])
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write_h5(path, datasets, attrs=None, track_order=True):
    """datasets: name -> value, created in that order; track_order=False writes the file as a
    plain h5py dump, which lists its datasets by name."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, 'w', track_order=track_order) as f:
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        for name, value in datasets.items():
            f.create_dataset(name, data=value)
