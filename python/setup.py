"""The build step pyproject.toml cannot state: record the source tree the package is installed
from (paritycheck/_install.py, SOURCE_TREE), where paritycheck.binary() looks for the binary of
README command 1 (SOURCE_TREE/build/paritycheck). Everything else is in pyproject.toml."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

# python/setup.py -> the repository root
SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BuildPy(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "paritycheck", "_install.py")
        with open(target, "w") as f:
            f.write('"""Written by setup.py at install time."""\nSOURCE_TREE = %r\n' % SOURCE_TREE)


setup(cmdclass={"build_py": BuildPy})
