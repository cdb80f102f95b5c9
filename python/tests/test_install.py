"""pip install ./python, offline, into a venv made with --system-site-packages, builds the
didnmf command with the local Go toolchain into the package, which then uses it; without Go
the build says what is missing."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import PYTHON_DIR, REPO

GO = shutil.which("go")


def _missing_modules():
    import importlib.util

    return [m for m in ("ensurepip", "setuptools", "wheel") if importlib.util.find_spec(m) is None]


pytestmark = [
    pytest.mark.skipif(GO is None, reason="the Go toolchain (go) is not on PATH"),
    pytest.mark.skipif(
        bool(_missing_modules()),
        reason=f"no {', '.join(_missing_modules())} (apt-get install python3-venv python3-setuptools python3-wheel)",
    ),
]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A copy of python/ (so the in-tree build leaves the checkout as it is); the Go sources
    are found through DIDNMF_GO_SOURCE."""
    dst = tmp_path_factory.mktemp("src") / "python"
    shutil.copytree(
        PYTHON_DIR, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache", "bin")
    )
    return dst


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path)], check=True)
    return path


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DIDNMF_BIN", "PYTHONPATH", "PIP_INDEX_URL")}
    env.update(extra)
    return env


def pip_install(venv, source, env):
    return subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--no-cache-dir", str(source)],
        capture_output=True, text=True, env=env,
    )


def test_pip_install_builds_and_ships_the_command(venv, source):
    env = clean_env(DIDNMF_GO_SOURCE=REPO)
    proc = pip_install(venv, source, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script = textwrap.dedent(
        """
        import os, sys, numpy as np, didnmf
        from didnmf import _binary
        exe = didnmf.find_binary()
        assert exe.startswith(sys.prefix), (exe, sys.prefix)
        assert os.access(exe, os.X_OK)
        print(_binary.version_line(exe))
        est = didnmf.NMF(3, random_state=0).fit(np.random.default_rng(0).random((50, 8)))
        print(est.components_.shape, est.n_iter_)
        """
    )
    # PATH without any didnmf, DIDNMF_BIN unset, and run from elsewhere than the checkout.
    env = clean_env(PATH=os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, env=env, cwd=str(venv))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("didnmf "), run.stdout
    assert "(3, 8)" in run.stdout
    wheel_tags = list((venv / "lib").glob("python3*/site-packages/didnmf-*.dist-info/WHEEL"))
    assert wheel_tags and "Root-Is-Purelib: false" in wheel_tags[0].read_text()


def test_pip_install_without_go_says_so(tmp_path, source):
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = clean_env(PATH=os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]), DIDNMF_GO_SOURCE=REPO)
    if shutil.which("go", path=env["PATH"]):
        pytest.skip("go is in /usr/bin or /bin: cannot hide it")
    proc = pip_install(venv, source, env)
    assert proc.returncode != 0
    assert "needs the Go toolchain" in proc.stdout + proc.stderr
