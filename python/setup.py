"""Build of the didnmf Python package: the package, plus the didnmf command built from this
repository with the local Go toolchain and shipped inside it (didnmf/bin/didnmf), so that
the wheel is a platform wheel, as Python packages with a compiled core are.

    pip install --no-build-isolation ./python      # from the repository's root

The Go sources are found relative to this file (its parent directory holds go.mod of
github.com/didnmf/didnmf), or in the directory named by DIDNMF_GO_SOURCE.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # without wheel, pip builds no wheel; setup.py install needs no tag
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_LINE = "module github.com/didnmf/didnmf"


def go_source():
    """The root of the Go module github.com/didnmf/didnmf to build the command from."""
    root = os.environ.get("DIDNMF_GO_SOURCE") or os.path.dirname(HERE)
    gomod = os.path.join(root, "go.mod")
    try:
        with open(gomod, encoding="utf-8") as f:
            first = f.readline().strip()
    except OSError:
        first = ""
    if first != MODULE_LINE:
        raise SystemExit(
            f"didnmf: the Go sources of the didnmf command are not at {root} (no go.mod of "
            "github.com/didnmf/didnmf there): build the package from a checkout of the "
            "repository (pip install ./python from its root), or set DIDNMF_GO_SOURCE to one"
        )
    return root


class build_py_with_go(build_py):
    """build_py, then ``go build -o BUILD_LIB/didnmf/bin/didnmf ./cmd/didnmf``."""

    def run(self):
        super().run()
        go = shutil.which("go")
        if go is None:
            raise SystemExit(
                "didnmf: building the Python package builds the didnmf command, which needs the "
                "Go toolchain: install Go (https://go.dev/dl/, the version go.mod names or later) "
                "and put 'go' on PATH"
            )
        root = go_source()
        target = os.path.join(os.path.abspath(self.build_lib), "didnmf", "bin", "didnmf")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # -s -w: no symbol table or DWARF (half the size; panics still print their stacks).
        cmd = [go, "build", "-ldflags=-s -w", "-o", target, "./cmd/didnmf"]
        self.announce("running " + " ".join(cmd) + " in " + root, level=2)
        try:
            subprocess.run(cmd, cwd=root, check=True)
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"didnmf: 'go build ./cmd/didnmf' failed in {root} (exit status {e.returncode})")


cmdclass = {"build_py": build_py_with_go}

if bdist_wheel is not None:

    class bdist_wheel_platform(bdist_wheel):
        """A platform wheel (it holds a native binary) for any Python 3: py3-none-PLATFORM."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_wheel_platform

setup(cmdclass=cmdclass)
