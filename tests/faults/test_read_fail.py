#!/usr/bin/python3
"""Read-error injection (issue 17; docs/robustness.md, "Faults"). Runs one real comparison that
writes every report (tests/faults/fault_run.py's inputs, without --reference, in blocks of 256
elements) once to count the
reads of its HDF5 files, then once for each K with the Kth read failing with EIO
(tests/faults/libpc_readfail.so, preloaded: it catches paritycheck's direct reads of contiguous
data and HDF5's own reads alike). Every run must:

  - exit 2 and name the file whose read failed;
  - when the failed read lay inside a dataset's stored data (its contiguous bytes or one of its
    chunks, found with h5py), name the file and that dataset on one line with the reason,
    "Input/output error";
  - not crash: no signal, no sanitizer report;
  - leave each report complete (it parses, or ends where its format ends, and tells an error)
    or none, and no temporary file ".NAME.XXXXXX".

    /usr/bin/python3 tests/faults/test_read_fail.py PATH/TO/paritycheck PATH/TO/libpc_readfail.so

Prints one line per failure and a last line "N passed, M failed"; the exit status is 1 when
anything failed.
"""

import concurrent.futures
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402
from fault_run import (REPORTS, SANITIZER_WORDS, arguments, make_baseline,  # noqa: E402
                       make_inputs, run_in_fresh_folder, sanitizer_env)

# Blocks of 256 elements: /x (1000 elements) is read in four, so that reads fail mid-dataset.
BLOCK = 256

BIN = None
SHIM = None
TMP = None


def environment(k, log):
    env = sanitizer_env(dict(os.environ))
    env['LD_PRELOAD'] = SHIM
    # The shim comes before ASan's runtime. HDF5 1.10 leaks what it was loading when a read of
    # metadata fails: tests/hostile/hdf5.lsan.supp (H5C_protect) says which; that needs whole
    # allocation stacks.
    env['ASAN_OPTIONS'] += ':verify_asan_link_order=0:fast_unwind_on_malloc=0'
    env['LSAN_OPTIONS'] += ':suppressions=' + os.path.join(HERE, '..', 'hostile', 'hdf5.lsan.supp')
    env['PC_FAIL_READ_MATCH'] = '.h5'
    env['PC_READ_LOG'] = log
    env.pop('PC_FAIL_READ', None)
    if k:
        env['PC_FAIL_READ'] = str(k)
    return env


def run_once(k):
    """Runs with the Kth read failing (0: none); returns the exit code, stdout, stderr, the
    files left, the reads counted and the failed read as (path, offset, size) or None."""
    log = os.path.join(TMP, 'k%d.log' % k)
    try:
        rc, out, err, files = run_in_fresh_folder([BIN, '--block-elems', str(BLOCK)] +
                                                  arguments(False), TMP,
                                                  environment(k, log), 'k%d' % k)
        with open(log) as fh:
            lines = [line.split() for line in fh if line.strip()]
    finally:
        if os.path.exists(log):
            os.remove(log)
    total = max(int(f[1]) for f in lines if f[0] != 'fail')
    failed = [(f[1], int(f[2]), int(f[3])) for f in lines if f[0] == 'fail']
    return rc, out, err, files, total, failed[0] if failed else None


def data_ranges(name):
    """(begin, end, dataset path) of every stored piece of data of the file: a contiguous
    dataset's bytes, each chunk of a chunked one."""
    ranges = []

    def visit(path, obj):
        if not isinstance(obj, h5py.Dataset):
            return
        ds = obj.id
        if obj.chunks is None:
            offset = ds.get_offset()
            if offset is not None:
                ranges.append((offset, offset + ds.get_storage_size(), '/' + path))
            return
        for i in range(ds.get_num_chunks()):
            info = ds.get_chunk_info(i)
            ranges.append((info.byte_offset, info.byte_offset + info.size, '/' + path))

    with h5py.File(os.path.join(TMP, name), 'r') as f:
        f.visititems(visit)
    return ranges


def dataset_of(ranges, offset, size):
    """The dataset whose stored data hold the read [offset, offset + size), or None."""
    for begin, end, path in ranges:
        if begin <= offset and offset + size <= end:
            return path
    return None


def complete(name, data):
    """A report that a failed read changed is still whole, and tells an error."""
    text = data.decode('utf-8', 'replace')
    try:
        if name == 'o.json':
            return json.loads(text)['verdict'] == 'error'
        if name == 'o.base.json':
            return isinstance(json.loads(text)['tensors'], list)
        if name == 'o.xml':
            return int(ET.fromstring(data).get('errors')) > 0
    except (ValueError, KeyError, TypeError, ET.ParseError):
        return False
    if name == 'o.html':
        return text.rstrip().endswith('</html>') and 'error' in text
    return text.startswith('## paritycheck: error') and text.endswith('\n')  # o.md


def judge_run(k, ranges, result):
    rc, out, err, files, _, failed = result
    label = 'read %d' % k
    detail = 'exit %s, failed %s, stderr %r, stdout %r' % (rc, failed, err[-800:], out[-800:])
    if not check(label + ': a read was failed', failed is not None, detail):
        return
    path, offset, size = failed
    name = os.path.basename(path)
    check(label + ': exit 2', rc == 2, detail)
    check(label + ': no crash, no sanitizer report',
          not any(w in err for w in SANITIZER_WORDS), detail)
    said = err + out
    check(label + ': names the file', name in said, detail)
    dataset = dataset_of(ranges[name], offset, size)
    if dataset:
        lines = [line for line in said.splitlines()
                 if name in line and dataset in line and 'Input/output error' in line]
        check(label + ': a read of %s data names the file, %s and the reason' % (name, dataset),
              lines != [], detail)
    stray = sorted(set(files) - set(REPORTS))
    check(label + ': no temporary or other file', not stray, stray)
    partial = sorted(f for f in files if f in REPORTS and not complete(f, files[f]))
    check(label + ': every report left is whole and tells the error', not partial, partial)


def test_every_read_fails_cleanly():
    check('baseline made', make_baseline(BIN, TMP, environment(0, os.path.join(TMP, 'b.log'))))
    rc0, _, err0, files0, total, failed0 = run_once(0)
    check('clean run: exit 1 (drift), no failed read', rc0 == 1 and failed0 is None, err0)
    check('clean run: every report written', sorted(files0) == sorted(REPORTS), sorted(files0))
    check('clean run: counts reads', total > 20, total)
    ranges = {name: data_ranges(name) for name in ('a.h5', 'b.h5')}
    ks = list(range(1, total + 1))
    data_reads = 0
    workers = max(1, min(4, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for k, result in zip(ks, pool.map(run_once, ks)):
            judge_run(k, ranges, result)
            failed = result[5]
            data_reads += bool(failed and dataset_of(ranges[os.path.basename(failed[0])],
                                                     failed[1], failed[2]))
    # On both sides: /x in four blocks, /i, /dt and /café in one each (contiguous: the workers'
    # pread), /grp/y's ten chunks (HDF5).
    check('data reads of every block were failed', data_reads == 2 * (4 + 3 + 10), data_reads)
    print('%d reads, %d of them of data' % (total, data_reads))


def main(argv):
    global BIN, SHIM, TMP
    if len(argv) != 2:
        print('usage: test_read_fail.py PARITYCHECK_BINARY LIBPC_READFAIL', file=sys.stderr)
        return 2
    BIN, SHIM = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    with tempfile.TemporaryDirectory(prefix='pc_readfail_') as tmp:
        TMP = tmp
        make_inputs(TMP)
        return run_tests([test_every_read_fails_cleanly])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
