"""The estimator gives the command's bits: the same job through didnmf.NMF and through the
didnmf command line (flags written out here by hand, not by the package) gives bitwise equal
basis and coef, in this process and on in-process nodes; transform equals didnmf transform;
inverse_transform is W @ components_; reconstruction_err_ is scikit-learn's."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition._nmf import _beta_divergence

import didnmf
from conftest import load_result

# scikit-learn's defaults as the command's flags: init None -> nndsvda (K <= min(N, M)),
# solver 'cd' -> did, tol 1e-4 -> --stall-tol, max_iter 200.
DEFAULTS = ["--init", "nndsvda", "--algo", "did", "--max-iter", "200", "--stall-tol", "0.0001"]


def assert_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes(), f"max difference {np.abs(a - b).max()}"


@pytest.fixture
def x_file(counts, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, counts)
    return path


@pytest.mark.parametrize(
    "params,flags",
    [
        ({}, DEFAULTS),
        ({"nodes": 2, "shards": 2}, DEFAULTS + ["--nodes", "2", "--shards", "2"]),
        (
            {"solver": "mu", "beta_loss": "kullback-leibler", "init": "random", "tol": 0, "max_iter": 30},
            ["--init", "random", "--algo", "mu", "--loss", "kl", "--max-iter", "30", "--tol", "0", "--stall-tol", "0"],
        ),
        (
            {"algo": "hals", "alpha_W": 0.01, "alpha_H": 0.02, "l1_ratio": 0.5, "max_iter": 50},
            ["--init", "nndsvda", "--algo", "hals", "--max-iter", "50", "--stall-tol", "0.0001",
             "--alpha-coef", "0.01", "--alpha-basis", "0.02", "--l1-ratio", "0.5"],
        ),
    ],
    ids=["defaults", "nodes2", "mu-kl", "hals-penalties"],
)
def test_fit_same_bits_as_command(counts, x_file, tmp_path, cli, params, flags):
    est = didnmf.NMF(n_components=5, random_state=7, **params)
    W = est.fit_transform(counts)
    out = tmp_path / "cli"
    cli("factorize", "--input", x_file, "--rank", 5, "--seed", 7, "--out", out, "--quiet", *flags)
    basis, coef = load_result(out)
    assert_bits(est.components_, np.ascontiguousarray(basis.T))
    assert_bits(W, coef)
    assert est.seed_ == 7 and est.report_["seed"] == 7
    assert est.n_iter_ == est.report_["iterations"] >= 1
    assert est.n_components_ == 5 and est.n_features_in_ == 40


def test_fit_on_a_path_same_bits(counts, x_file, tmp_path, cli):
    est = didnmf.NMF(n_components=4, random_state=3).fit(str(x_file))
    cli("factorize", "--input", x_file, "--rank", 4, "--seed", 3, "--out", tmp_path / "cli", "--quiet", *DEFAULTS)
    basis, _ = load_result(tmp_path / "cli")
    assert_bits(est.components_, np.ascontiguousarray(basis.T))
    assert est.n_features_in_ == 40 and not hasattr(est, "feature_names_in_")
    assert est.report_["input"] == [str(x_file)]


def test_sparse_input_same_bits_as_dense_file(counts, x_file, tmp_path, cli, monkeypatch, binary):
    written = []
    real = didnmf._estimator.write_matrix

    def spy(X, directory, binary, name="X"):
        path = real(X, directory, binary, name)
        written.append(path)
        return path

    monkeypatch.setattr(didnmf._estimator, "write_matrix", spy)
    for layout in (sp.csr_matrix, sp.csc_matrix):
        est = didnmf.NMF(n_components=5, random_state=7).fit(layout(counts))
        cli("factorize", "--input", x_file, "--rank", 5, "--seed", 7, "--out", tmp_path / "cli", "--quiet", *DEFAULTS)
        basis, _ = load_result(tmp_path / "cli")
        assert_bits(est.components_, np.ascontiguousarray(basis.T))
    # kept sparse on its way to the command: .npz when it reads them, else MatrixMarket
    suffix = ".npz" if didnmf._inputs.reads_npz(binary) else ".mtx"
    assert len(written) == 2 and all(p.endswith(suffix) for p in written), written
    assert all(not os.path.exists(p) for p in written), "temporary input files are removed"


def test_custom_init_same_bits(counts, tmp_path, x_file, cli):
    rng = np.random.default_rng(5)
    W0, H0 = rng.random((300, 3)), rng.random((3, 40))
    est = didnmf.NMF(n_components=3, init="custom", random_state=0, max_iter=20)
    W = est.fit_transform(counts, W=W0, H=H0)
    np.save(tmp_path / "b0.npy", H0.T)
    np.save(tmp_path / "c0.npy", W0)
    cli("factorize", "--input", x_file, "--rank", 3, "--seed", 0, "--out", tmp_path / "cli", "--quiet",
        "--init", "custom", "--init-basis", tmp_path / "b0.npy", "--init-coef", tmp_path / "c0.npy",
        "--algo", "did", "--max-iter", 20, "--stall-tol", "0.0001")
    basis, coef = load_result(tmp_path / "cli")
    assert_bits(est.components_, np.ascontiguousarray(basis.T))
    assert_bits(W, coef)


def test_transform_equals_command(counts, tmp_path, cli):
    est = didnmf.NMF(n_components=5, random_state=1).fit(counts[:200])
    new = counts[200:]
    np.save(tmp_path / "new.npy", new)
    np.save(tmp_path / "basis.npy", est.components_.T)
    cli("transform", "--basis", tmp_path / "basis.npy", "--input", tmp_path / "new.npy", "--out", tmp_path / "t", "--quiet")
    _, coef = load_result(tmp_path / "t")
    assert_bits(est.transform(new), coef)
    assert_bits(est.transform(str(tmp_path / "new.npy")), coef)


def test_inverse_transform_is_w_times_components(counts):
    est = didnmf.NMF(n_components=5, random_state=1)
    W = est.fit_transform(counts)
    assert_bits(est.inverse_transform(W), W @ est.components_)
    Ws = sp.csr_matrix(W)
    np.testing.assert_array_equal(est.inverse_transform(Ws), Ws @ est.components_)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"alpha_W": 0.01, "l1_ratio": 0.3},
        {"solver": "mu", "beta_loss": "kullback-leibler"},
        {"solver": "mu", "beta_loss": 1.5, "alpha_W": 0.01, "alpha_H": 0.005, "l1_ratio": 0.5},
        {"solver": "mu", "beta_loss": "itakura-saito", "max_iter": 40},
    ],
)
def test_reconstruction_err_is_scikit_learns(counts, params):
    X = counts + 1.0  # Itakura-Saito wants X > 0
    est = didnmf.NMF(n_components=5, random_state=2, **params)
    W = est.fit_transform(X)
    want = _beta_divergence(X, W, est.components_, est.beta_loss, square_root=True)
    assert est.reconstruction_err_ == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("rows", [1, 3])
def test_transform_of_fewer_samples_than_components(counts, tmp_path, rows):
    """Fewer samples than n_components are projected as any others (each sample's W is
    solved on its own): the bits each gets in a transform of all of them."""
    est = didnmf.NMF(n_components=8, random_state=1).fit(counts)
    full = est.transform(counts)
    assert_bits(est.transform(counts[:rows]), np.ascontiguousarray(full[:rows]))
    assert_bits(est.transform(sp.csr_matrix(counts[:rows])), np.ascontiguousarray(full[:rows]))
    np.save(tmp_path / "few.npy", counts[:rows])
    assert_bits(est.transform(tmp_path / "few.npy"), np.ascontiguousarray(full[:rows]))


def test_small_integers_go_as_float32_with_the_same_bits(counts, monkeypatch):
    """uint8 pixels or int16 counts are written as float32 (half the file, every value
    exact): the factors are those of the same values as float64."""
    dtypes = []
    real = didnmf._estimator.write_matrix

    def spy(X, directory, binary, name="X"):
        dtypes.append(X.dtype)
        return real(X, directory, binary, name)

    monkeypatch.setattr(didnmf._estimator, "write_matrix", spy)
    want = didnmf.NMF(n_components=4, random_state=2).fit(counts)
    for dtype in (np.uint8, np.int16):
        got = didnmf.NMF(n_components=4, random_state=2).fit(counts.astype(dtype))
        assert_bits(got.components_, want.components_)
    assert dtypes == [np.float64, np.float32, np.float32]
    didnmf.NMF(n_components=4, random_state=2).fit(counts.astype(np.int64))
    assert dtypes[-1] == np.float64  # as scikit-learn converts it (not every int64 fits float32)
