"""Failures read as scikit-learn's: bad input raises ValueError naming the problem (found by
the estimator for in-memory data, by the command for files: its exit status 2 and its
message), other failures RuntimeError with the command's message; a missing command says how
to get one."""

import os
import stat

import numpy as np
import pytest
import scipy.sparse as sp

import didnmf
from didnmf import _binary, _run


@pytest.fixture
def small():
    return np.random.default_rng(0).random((30, 6))


def test_negative_values_in_memory(small):
    X = small.copy()
    X[4, 2] = -1.0
    for data in (X, sp.csr_matrix(X)):
        with pytest.raises(ValueError, match="Negative values in data passed to NMF"):
            didnmf.NMF(2).fit(data)


def test_nan_without_missing(small):
    X = small.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN(.|\n)*missing='nan'"):
        didnmf.NMF(2).fit(X)
    # with missing='nan' the NaN are missing values, fitted around
    est = didnmf.NMF(2, missing="nan", random_state=0).fit(X)
    assert est.report_["missing"] == 1 and np.isfinite(est.components_).all()
    assert est.report_["observed"] == X.size - 1


def test_an_h5ad_path_says_how_to_fit_it(tmp_path):
    with pytest.raises(ValueError, match=r"x\.h5ad: an HDF5 file .*backed='r'.*didnmf\.convert"):
        didnmf.NMF(2).fit(str(tmp_path / "x.h5ad"))


def test_too_many_components_names_the_parameter(small):
    with pytest.raises(ValueError, match=r"n_components=7 must be at most min\(n_samples, n_features\) = min\(30, 6\) = 6"):
        didnmf.NMF(7).fit(small)


def test_default_init_with_a_test_set(small):
    """init=None with test_fraction is 'random', as with missing values (the SVD of nndsvda
    would need the held-out entries): it fits, and reports the test error."""
    est = didnmf.NMF(2, test_fraction=0.1, random_state=0).fit(small)
    assert est.report_["init"] == "random" and est.report_["test_count"] > 0


def test_bad_files_are_the_commands_value_errors(small, tmp_path):
    neg = small.copy()
    neg[7, 3] = -2.5
    np.save(tmp_path / "neg.npy", neg)
    with pytest.raises(didnmf.DidnmfInputError) as info:
        didnmf.NMF(2).fit(str(tmp_path / "neg.npy"))
    assert isinstance(info.value, ValueError) and info.value.returncode == 2
    msg = str(info.value)
    assert msg.startswith("didnmf: ") and "neg.npy" in msg and "negative" in msg.lower(), msg

    nan = small.copy()
    nan[2, 5] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    with pytest.raises(ValueError, match=r"nan\.npy.*NaN|NaN.*nan\.npy") as info:
        didnmf.NMF(2).fit(tmp_path / "nan.npy")
    assert "sample 2, feature 5" in str(info.value)  # the command names the place

    (tmp_path / "junk.npy").write_bytes(b"not an npy file at all")
    with pytest.raises(ValueError, match="junk.npy"):
        didnmf.NMF(2).fit(tmp_path / "junk.npy")


def test_rank_larger_than_the_data_is_the_commands_value_error():
    """A shape not read here (a synthetic spec): the command's refusal, as a ValueError."""
    with pytest.raises(ValueError, match=r"rank 7 out of range"):
        didnmf.NMF(7).fit("synthetic:m=6,n=30,k=2,seed=1")


def test_n_components_none_needs_a_readable_shape(tmp_path):
    with pytest.raises(ValueError, match="give n_components"):
        didnmf.NMF().fit("synthetic:m=5,n=100,k=2,seed=1")


def fake_binary(tmp_path, script):
    path = tmp_path / "didnmf"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_exit_status_mapping(tmp_path):
    binary = fake_binary(
        tmp_path,
        'echo "iteration 1: progress" >&2\necho "didnmf: warning: a warning" >&2\n'
        'echo "didnmf: the cluster at 10.0.0.1:7946 went away" >&2\nexit 1\n',
    )
    with pytest.raises(didnmf.DidnmfError) as info:
        _run.run(["factorize"], binary=binary)
    assert isinstance(info.value, RuntimeError) and not isinstance(info.value, ValueError)
    assert str(info.value) == "didnmf: the cluster at 10.0.0.1:7946 went away"
    assert info.value.returncode == 1

    binary = fake_binary(tmp_path, 'echo "didnmf: --input x.npy: no such file" >&2\nexit 2\n')
    with pytest.raises(ValueError, match=r"^didnmf: --input x.npy: no such file$"):
        _run.run(["factorize"], binary=binary)


def test_binary_lookup_refuses_other_programs(tmp_path, monkeypatch):
    monkeypatch.setattr(_binary, "BUNDLED", tmp_path / "absent" / "didnmf")
    impostor = fake_binary(tmp_path, 'echo "v20.11.1"\n')  # what Node.js's node --version prints
    monkeypatch.setenv("DIDNMF_BIN", impostor)
    with pytest.raises(didnmf.BinaryNotFoundError) as info:
        didnmf.find_binary()
    msg = str(info.value)
    assert "DIDNMF_BIN" in msg and "'didnmf '" in msg and "v20.11.1" in msg
    assert "go install github.com/didnmf/didnmf/cmd/didnmf@latest" in msg


def test_binary_lookup_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setattr(_binary, "BUNDLED", tmp_path / "absent" / "didnmf")
    monkeypatch.delenv("DIDNMF_BIN")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(didnmf.BinaryNotFoundError) as info:
        didnmf.NMF(2).fit(np.ones((4, 3)))
    msg = str(info.value)
    for how in ("pip install ./python", "go install github.com/didnmf/didnmf/cmd/didnmf@latest", "DIDNMF_BIN"):
        assert how in msg, msg


def test_binary_lookup_order(tmp_path, monkeypatch, binary):
    """The package's own binary first, then DIDNMF_BIN, then PATH."""
    on_path = tmp_path / "path"
    on_path.mkdir()
    os.symlink(binary, on_path / "didnmf")
    monkeypatch.setattr(_binary, "BUNDLED", tmp_path / "absent" / "didnmf")
    monkeypatch.delenv("DIDNMF_BIN")
    monkeypatch.setenv("PATH", str(on_path))
    assert didnmf.find_binary() == str(on_path / "didnmf")
    monkeypatch.setenv("DIDNMF_BIN", binary)
    assert didnmf.find_binary() == binary
    bundled = tmp_path / "pkg" / "bin" / "didnmf"
    bundled.parent.mkdir(parents=True)
    os.symlink(binary, bundled)
    monkeypatch.setattr(_binary, "BUNDLED", bundled)
    assert didnmf.find_binary() == str(bundled)
