#!/usr/bin/python3
"""Installation end to end (docs/install.md): cmake --install into a prefix, the prefix moved
elsewhere, then from there: --profile finds the installed profiles, a C client builds with
pkg-config against the installed library and runs, the man page renders, and Debian's python3
imports the installed package, which finds the installed binary.
Usage: test_install.py BUILD_DIR SOURCE_DIR [--sanitized]   (--sanitized: the build has ASan and
UBSan, so the C client is built with them too)"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
from checks import check, run_tests  # noqa: E402

BUILD = SRC = TMP = None
SANITIZED = False
CLIENT = r'''
#include <paritycheck/paritycheck.h>
#include <stdio.h>
int main(int argc, char **argv) {
  pc_error err;
  pc_tolset *tols = pc_tolset_new();
  pc_options opts = PC_OPTIONS_INIT;
  pc_run *run = NULL;
  opts.tols = tols;
  if (argc != 3 || pc_tolset_load_builtin(tols, &err) < 0 ||
      pc_compare_files(&run, argv[1], argv[2], &opts, &err) < 0) {
    fprintf(stderr, "client: %s\n", err.message);
    return 2;
  }
  printf("%zu %s\n", run->ntensors, pc_run_verdict_name(run->verdict));
  pc_run_free(run);
  pc_tolset_free(tols);
  return 0;
}
'''


def sh(args, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def prefix():
    return os.path.join(TMP, 'moved')


def fixture(name):
    return os.path.join(SRC, 'fixtures', 'real', name)


def env_without_overrides():
    e = dict(os.environ)
    for k in ('PARITYCHECK_TOLERANCES', 'PARITYCHECK_BIN', 'PYTHONPATH'):
        e.pop(k, None)
    return e


def install_and_move():
    p = sh(['cmake', '--install', BUILD, '--prefix', os.path.join(TMP, 'p')])
    check('cmake --install: exit 0', p.returncode == 0, p.stderr[-500:])
    shutil.move(os.path.join(TMP, 'p'), prefix())  # the install must not need its first path


def test_profile_from_moved_install():
    exe = os.path.join(prefix(), 'bin', 'paritycheck')
    p = sh([exe, '--profile', 'tf32', fixture('attention_cpu_fp32.h5'),
            fixture('attention_cuda_tf32.h5')], env=env_without_overrides(), cwd=TMP)
    check('moved install: --profile tf32 passes the TF32 pair (exit 0)', p.returncode == 0,
          p.stdout[-300:] + p.stderr[-300:])
    p = sh([exe, '--profile', 'nope', fixture('attention_cpu_fp32.h5'),
            fixture('attention_cpu_fp32.h5')], env=env_without_overrides(), cwd=TMP)
    check('unknown profile: exit 2, lists the installed folder, hints PARITYCHECK_TOLERANCES',
          p.returncode == 2 and 'share/paritycheck/tolerances' in p.stderr and
          'PARITYCHECK_TOLERANCES' in p.stderr and 'tf32' in p.stderr, p.stderr)


def test_c_client_with_pkg_config():
    src = os.path.join(TMP, 'client.c')
    with open(src, 'w') as fh:
        fh.write(CLIENT)
    env = env_without_overrides()
    env['PKG_CONFIG_PATH'] = os.path.join(prefix(), 'lib', 'pkgconfig')
    # no --define-prefix: the .pc file must say where it is by itself
    flags = sh(['pkg-config', '--cflags', '--libs', 'paritycheck'], env=env)
    check('pkg-config knows paritycheck', flags.returncode == 0, flags.stderr)
    dirs = [os.path.realpath(f[2:]) for f in flags.stdout.split() if f[:2] in ('-I', '-L')]
    real = os.path.realpath(prefix())
    check('the .pc file finds the moved prefix by itself: -I and -L in it',
          dirs == [os.path.join(real, 'include'), os.path.join(real, 'lib')], flags.stdout)
    exe = os.path.join(TMP, 'client')
    sanitize = ['-fsanitize=address,undefined'] if SANITIZED else []
    cc = sh(['cc', '-std=c11'] + sanitize + [src, '-o', exe] + flags.stdout.split(), env=env)
    check('a C client builds against the installed library', cc.returncode == 0, cc.stderr)
    env['LD_LIBRARY_PATH'] = os.path.join(prefix(), 'lib')
    a = fixture('attention_cpu_fp32.h5')
    with h5py.File(a, 'r') as f:
        datasets = []
        f.visititems(lambda n, o: datasets.append(n) if isinstance(o, h5py.Dataset) else None)
    run = sh([exe, a, a], env=env)
    check('the client compares a file with itself: every dataset, pass',
          run.returncode == 0 and run.stdout.split() == [str(len(datasets)), 'pass'],
          run.stdout + run.stderr)
    ldd = sh(['ldd', exe], env=env)
    check('the client uses the shared library', 'libparitycheck.so' in ldd.stdout, ldd.stdout)


def install_doc_block(lang):
    """docs/install.md's one code block in lang ("cmake", "sh") under "Building a program
    against the installed library": what a user copies, run here as written."""
    import re
    with open(os.path.join(SRC, 'docs', 'install.md')) as fh:
        text = fh.read()
    section = text.split('## Building a program against the installed library', 1)[-1]
    section = section.split('\n## ', 1)[0]
    blocks = re.findall(r'```%s\n(.*?)```' % lang, section, re.S)
    check('docs/install.md: one %s block for building a program' % lang, len(blocks) == 1, blocks)
    return blocks[0] if blocks else ''


def test_pkg_config_rpath_doc():
    """docs/install.md's pkg-config line with its rpath: the program runs from the moved prefix
    without LD_LIBRARY_PATH (the loader does not know the prefix)."""
    line = install_doc_block('sh').strip()
    folder = os.path.join(TMP, 'rpath_client')
    os.makedirs(folder)
    with open(os.path.join(folder, 'app.c'), 'w') as fh:
        fh.write(CLIENT)
    env = env_without_overrides()
    env.pop('LD_LIBRARY_PATH', None)
    env['PKG_CONFIG_PATH'] = os.path.join(prefix(), 'lib', 'pkgconfig')
    if SANITIZED:
        env['CFLAGS'] = '-fsanitize=address,undefined'
        line = line.replace('cc app.c', 'cc $CFLAGS app.c')
    cc = sh(['bash', '-c', line], env=env, cwd=folder)
    check('install.md: the pkg-config line builds', cc.returncode == 0, cc.stderr[-500:])
    run = sh([os.path.join(folder, 'app'), fixture('attention_cpu_fp32.h5'),
              fixture('attention_cpu_fp32.h5')], env=env)
    check('install.md: the program runs without LD_LIBRARY_PATH (rpath): pass',
          run.returncode == 0 and run.stdout.split()[1:] == ['pass'], run.stdout + run.stderr)


def test_c_client_with_find_package():
    """A CMake project finds the moved install with find_package(paritycheck): docs/install.md's
    CMakeLists.txt, as written."""
    proj = os.path.join(TMP, 'cmake_client')
    os.makedirs(proj)
    with open(os.path.join(proj, 'app.c'), 'w') as fh:
        fh.write(CLIENT)
    with open(os.path.join(proj, 'CMakeLists.txt'), 'w') as fh:
        fh.write(install_doc_block('cmake'))
    flags = '-fsanitize=address,undefined' if SANITIZED else ''
    env = env_without_overrides()
    conf = sh(['cmake', '-S', proj, '-B', os.path.join(proj, 'b'), '-DCMAKE_PREFIX_PATH=' + prefix(),
               '-DCMAKE_C_FLAGS=' + flags], env=env)
    check('find_package(paritycheck) configures against the moved prefix', conf.returncode == 0,
          conf.stdout[-300:] + conf.stderr[-500:])
    build = sh(['cmake', '--build', os.path.join(proj, 'b')], env=env)
    check('the find_package client builds', build.returncode == 0, build.stderr[-500:])
    a = fixture('attention_cpu_fp32.h5')
    run = sh([os.path.join(proj, 'b', 'app'), a, a], env=env)
    check('the find_package client runs (the library found by its RPATH): pass',
          run.returncode == 0 and run.stdout.split()[1:] == ['pass'], run.stdout + run.stderr)


def test_man_page():
    page = os.path.join(prefix(), 'share', 'man', 'man1', 'paritycheck.1')
    check('man page installed', os.path.exists(page), page)
    if os.path.exists(page):
        p = sh(['man', '-l', page], env=dict(env_without_overrides(), MANPAGER='cat', PAGER='cat'))
        check('man -l renders it, with the options', p.returncode == 0 and '--profile' in p.stdout,
              p.stderr[-300:])


def test_python_package():
    site = os.path.join(prefix(), 'lib', 'python3', 'dist-packages')
    code = ('import sys; sys.path.insert(0, %r); import paritycheck; '
            'r = paritycheck.compare(%r, %r, profile="tf32"); '
            'print(paritycheck.binary()); print(r["verdict"])'
            % (site, fixture('attention_cpu_fp32.h5'), fixture('attention_cuda_tf32.h5')))
    p = sh(['/usr/bin/python3', '-c', code], env=env_without_overrides(), cwd=TMP)
    lines = p.stdout.split()
    check('installed package runs the installed binary and passes the TF32 pair',
          p.returncode == 0 and lines == [os.path.join(prefix(), 'bin', 'paritycheck'), 'pass'],
          p.stdout + p.stderr[-500:])


def main(argv):
    global BUILD, SRC, TMP, SANITIZED
    BUILD, SRC = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    SANITIZED = '--sanitized' in argv[3:]
    with tempfile.TemporaryDirectory(prefix='pc_install_') as tmp:
        TMP = tmp
        install_and_move()
        return run_tests([test_profile_from_moved_install, test_c_client_with_pkg_config,
                          test_pkg_config_rpath_doc,
                          test_c_client_with_find_package, test_man_page, test_python_package])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
