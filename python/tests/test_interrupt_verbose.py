"""KeyboardInterrupt cancels the command's job and is re-raised; verbose shows the command's
progress, and silence is total without it."""

import glob
import os
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

import didnmf


class RecordingPopen(subprocess.Popen):
    """subprocess.Popen that remembers every process it started."""

    started = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        RecordingPopen.started.append(self)


@pytest.fixture
def recorded(monkeypatch):
    RecordingPopen.started = []
    monkeypatch.setattr(subprocess, "Popen", RecordingPopen)
    return RecordingPopen.started


def interrupt_when_running(started, after=0.7):
    """From a thread: once the factorize process has run ``after`` seconds, send this
    process SIGINT, as Ctrl-C in a notebook does (the kernel gets it, not the child)."""

    def go():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            jobs = [p for p in started if "factorize" in p.args]
            if jobs:
                time.sleep(after)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def long_job():
    return np.random.default_rng(0).random((3000, 300))


@pytest.mark.parametrize("nodes", [0, 2])
def test_keyboard_interrupt_cancels_the_job(recorded, capsys, nodes):
    X = long_job()
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "didnmf-*")))
    # tol=0: it would run 100000 iterations; time_limit keeps a broken test from hanging.
    est = didnmf.NMF(20, tol=0, max_iter=100000, time_limit=60, nodes=nodes, shards=max(nodes, 1), verbose=1)
    t = interrupt_when_running(recorded)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    took = time.monotonic() - start
    t.join()
    [proc] = [p for p in recorded if "factorize" in p.args]
    assert proc.poll() is not None, "the command is still running"
    assert proc.returncode == 130, "the command did not stop by its interrupt path"
    assert took < 20, took
    err = capsys.readouterr().err
    if nodes:
        assert "the job was cancelled on its actors" in err, err
    assert not hasattr(est, "components_")
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "didnmf-*")))
    assert after <= before, f"temporary files left: {after - before}"


def test_silent_without_verbose(capfd, counts):
    didnmf.NMF(3, random_state=0).fit(counts)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_progress_with_verbose(capsys, counts):
    didnmf.NMF(3, random_state=0, verbose=1).fit(counts)
    err = capsys.readouterr().err
    assert "300 samples x 40 features, rank 3, did" in err, err
    assert "iteration 1:" in err and "wrote" in err, err
