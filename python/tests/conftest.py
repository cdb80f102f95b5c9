"""Shared set-up of the didnmf Python tests.

The package under test is this checkout's (python/didnmf), not an installed one. The didnmf
command is $DIDNMF_BIN when set (the Go test python/pytest_test.go builds it and sets it);
otherwise it is built here once, from this repository, into a temporary directory.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PYTHON_DIR)
sys.path.insert(0, PYTHON_DIR)

_built = []


def pytest_configure(config):
    """Make sure DIDNMF_BIN names a didnmf command before any test runs."""
    if os.environ.get("DIDNMF_BIN"):
        return
    go = shutil.which("go")
    if go is None:
        raise pytest.UsageError("set DIDNMF_BIN to a didnmf binary, or put the Go toolchain on PATH to build one")
    tmp = tempfile.mkdtemp(prefix="didnmf-pytest-bin-")
    target = os.path.join(tmp, "didnmf")
    subprocess.run([go, "build", "-o", target, "./cmd/didnmf"], cwd=REPO, check=True)
    os.environ["DIDNMF_BIN"] = target
    _built.append(tmp)


def pytest_unconfigure(config):
    for tmp in _built:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def binary():
    """The path of the didnmf command the package finds (checked by its --version)."""
    import didnmf

    return didnmf.find_binary()


@pytest.fixture
def cli(binary):
    """Run the didnmf command itself (not through the package); fail on a non-zero status."""

    def run(*args):
        proc = subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True)
        assert proc.returncode == 0, f"didnmf {' '.join(map(str, args))}: {proc.returncode}\n{proc.stderr}"
        return proc

    return run


@pytest.fixture(scope="session")
def counts():
    """A 300 x 40 nonnegative matrix of planted rank 5, Poisson counts (about 13% zeros)."""
    rng = np.random.default_rng(31)
    W = rng.gamma(0.6, 1.0, size=(300, 5))
    H = rng.gamma(0.6, 1.0, size=(5, 40))
    X = rng.poisson(3 * W @ H).astype(np.float64)
    return X


def load_result(directory):
    """basis.npy and coef.npy of a result directory the command wrote."""
    return (
        np.load(os.path.join(directory, "basis.npy")),
        np.load(os.path.join(directory, "coef.npy")),
    )
