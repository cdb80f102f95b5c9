"""KeyboardInterrupt cancels the command's job and is re-raised; verbose shows the command's
progress, and silence is total without it."""

import os
import signal
import subprocess
import sys
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


class Progress:
    """A sys.stderr that keeps what is written and tells when the job iterates."""

    def __init__(self):
        self.text = []
        self.iterating = threading.Event()

    def write(self, s):
        self.text.append(s)
        if s.startswith("iteration "):
            self.iterating.set()
        return len(s)

    def flush(self):
        pass


def interrupt_when_iterating(progress):
    """From a thread: once the command prints its first iteration (it has installed its
    SIGINT handler and runs the job), send this process SIGINT, as Ctrl-C in a notebook does
    (the kernel gets it, not the child)."""

    def go():
        if progress.iterating.wait(30):
            os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def long_job():
    return np.random.default_rng(0).random((3000, 300))


@pytest.mark.parametrize("nodes", [0, 2])
def test_keyboard_interrupt_cancels_the_job(recorded, monkeypatch, tmp_path, nodes):
    X = long_job()
    scratch = tmp_path / "tmp"  # the temporary files go here, and must be gone after
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # tol=0: it would run 100000 iterations; time_limit keeps a broken test from hanging.
    est = didnmf.NMF(20, tol=0, max_iter=100000, time_limit=60, nodes=nodes, shards=max(nodes, 1), verbose=1)
    progress = Progress()
    monkeypatch.setattr(sys, "stderr", progress)
    t = interrupt_when_iterating(progress)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    took = time.monotonic() - start
    t.join()
    [proc] = [p for p in recorded if "factorize" in p.args]
    assert proc.poll() is not None, "the command is still running"
    assert proc.returncode == 130, f"the command did not stop by its interrupt path: {proc.returncode}"
    assert took < 20, took
    err = "".join(progress.text)
    if nodes:
        assert "the job was cancelled on its actors" in err, err
    assert not hasattr(est, "components_")
    assert not os.listdir(scratch), f"temporary files left: {os.listdir(scratch)}"


def test_silent_without_verbose(capfd, counts):
    didnmf.NMF(3, random_state=0).fit(counts)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_progress_with_verbose(capsys, counts):
    didnmf.NMF(3, random_state=0, verbose=1).fit(counts)
    err = capsys.readouterr().err
    assert "300 samples x 40 features, rank 3, did" in err, err
    assert "iteration 1:" in err and "wrote" in err, err
