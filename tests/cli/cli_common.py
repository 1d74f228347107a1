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


def same_file_ok(args):
    """--allow-same before a run that compares a file with itself on purpose: A and B one file
    is otherwise exit 2 (issue 38, docs/robustness.md "Trust model")."""
    args = list(args)
    return ['--allow-same'] + args if len(args) >= 2 and args[-1] == args[-2] else args


def run(args):
    return subprocess.run([BIN] + same_file_ok(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120, errors='replace', text=True)


def run_json(args):
    """(process, parsed JSON report or None)."""
    p = run(same_file_ok(args) + ['--json', '-'])
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
