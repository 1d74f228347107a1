"""How the Python package is installed and which paritycheck binary it runs (docs/python.md,
"Installing" and "Which binary"): `pip install ./python` offline in a fresh venv that sees
Debian's packages, and binary()'s order: $PARITYCHECK_BIN, the source tree's build/paritycheck
(the tree pip installed from, or the checkout imported through PYTHONPATH), then PATH.

Each test lays out a source tree of its own in tmp_path (a copy of python/ and a build/ holding
a link to the binary under test, as README command 1 leaves it), so no binary of the real
checkout is found by accident."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("PARITYCHECK_BIN")
# a PATH without any paritycheck: the system's own folders
BARE_PATH = "/usr/bin:/bin"


def make_tree(tmp_path, with_build=True):
    """tmp_path/tree: python/ copied from the checkout, build/paritycheck a link to BIN."""
    tree = tmp_path / "tree"
    shutil.copytree(os.path.join(ROOT, "python"), tree / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info",
                                                  "_install.py"))
    if with_build:
        (tree / "build").mkdir()
        os.symlink(BIN, tree / "build" / "paritycheck")
    return tree


def bare_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PARITYCHECK_BIN", "PYTHONPATH")}
    env["PATH"] = BARE_PATH
    env.update(extra)
    return env


def which_binary(python, env, cwd):
    p = subprocess.run([python, "-c", "import paritycheck; print(paritycheck.binary())"],
                       env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv with Debian's packages visible, paritycheck pip-installed into it offline
    from a source tree with a build/paritycheck."""
    tmp = tmp_path_factory.mktemp("pip")
    tree = make_tree(tmp)
    env = bare_env()
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages",
                    str(tmp / "venv")], check=True, env=env)
    p = subprocess.run([str(tmp / "venv" / "bin" / "pip"), "install", "--no-build-isolation",
                        "--no-index", str(tree / "python")], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    return tmp, tree


def test_pip_install_offline(venv):
    """The venv imports the installed copy (not the tree's), with every module, and runs the
    binary of the tree it was installed from, though that is not on PATH."""
    tmp, tree = venv
    py = str(tmp / "venv" / "bin" / "python")
    p = subprocess.run([py, "-c", "import paritycheck, paritycheck.dump, paritycheck.calibrate;"
                        "print(paritycheck.__file__)"], env=bare_env(), cwd=str(tmp),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(str(tmp / "venv")), p.stdout
    assert which_binary(py, bare_env(), str(tmp)) == str(tree / "build" / "paritycheck")


def test_pip_installed_compares(venv):
    """compare() through the found binary: a real pair judged as the CLI judges it."""
    tmp, _ = venv
    a = os.path.join(ROOT, "fixtures", "real", "attention_cpu_fp32.h5")
    b = os.path.join(ROOT, "fixtures", "real", "attention_cuda_tf32.h5")
    code = ("import paritycheck; print(paritycheck.compare(%r, %r, profile='tf32')['verdict'])"
            % (a, b))
    p = subprocess.run([str(tmp / "venv" / "bin" / "python"), "-c", code], env=bare_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "pass", p.stderr


def test_order_env_first(venv):
    """$PARITYCHECK_BIN wins over the build tree."""
    tmp, _ = venv
    other = tmp / "other-paritycheck"
    if not other.exists():
        os.symlink(BIN, other)
    got = which_binary(str(tmp / "venv" / "bin" / "python"),
                       bare_env(PARITYCHECK_BIN=str(other)), str(tmp))
    assert got == str(other)


def test_order_path_last(tmp_path):
    """A checkout without build/: the binary on PATH; with build/: the tree's, PATH or not."""
    tree = make_tree(tmp_path, with_build=False)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(BIN, bindir / "paritycheck")
    env = bare_env(PYTHONPATH=str(tree / "python"), PATH=str(bindir) + ":" + BARE_PATH)
    assert which_binary(sys.executable, env, str(tmp_path)) == str(bindir / "paritycheck")
    (tree / "build").mkdir()
    os.symlink(BIN, tree / "build" / "paritycheck")
    assert which_binary(sys.executable, env, str(tmp_path)) == str(tree / "build" / "paritycheck")
