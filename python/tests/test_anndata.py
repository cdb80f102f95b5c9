"""Tests of the AnnData support (didnmf._anndata): the input for in-memory and backed AnnData
(the store next to the file, reused while the file is unchanged), the results written back
as scanpy writes PCA's, and fitting through the estimator."""

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

PYDIR = Path(__file__).resolve().parents[1]
if str(PYDIR) not in sys.path:
    sys.path.insert(0, str(PYDIR))

anndata = pytest.importorskip("anndata")
pytest.importorskip("h5py")

from didnmf import _anndata  # noqa: E402
from didnmf._anndata import (fit_anndata, prepare_anndata_input, store_path_for,  # noqa: E402
                             write_back)
from didnmf._convert import read_store, store_manifest  # noqa: E402

N, M, K = 60, 25, 3


def _adata(seed=0):
    rng = np.random.default_rng(seed)
    # A rank-3 nonnegative matrix with zeros: an NMF of it converges.
    x = (rng.random((N, K)) @ rng.random((K, M))).astype(np.float32)
    x[x < np.quantile(x, 0.3)] = 0
    a = anndata.AnnData(sp.csr_matrix(x))
    a.obs_names = [f"cell{i}" for i in range(N)]
    a.var_names = [f"gene{j}" for j in range(M)]
    a.layers["dense"] = x.astype(np.float64)
    a.layers["counts"] = sp.csc_matrix(np.round(x * 10).astype(np.int32))
    return a


@pytest.fixture
def h5ad(tmp_path):
    a = _adata()
    path = tmp_path / "pbmc.h5ad"
    a.write_h5ad(path)
    return path, a


# ----------------------------------------------------------------------------------------
# The input.


@pytest.mark.parametrize("layer", [None, "X", "dense", "counts"])
def test_in_memory_input_is_the_matrix(layer):
    a = _adata()
    inp = prepare_anndata_input(a, layer=layer)
    want = a.X if layer in (None, "X") else a.layers[layer]
    assert inp.path is None and inp.shape == (N, M) and inp.layer == (layer or "X")
    assert type(inp.data) is type(want)  # dense stays dense, CSR/CSC stay sparse
    got = inp.data.toarray() if sp.issparse(inp.data) else inp.data
    np.testing.assert_array_equal(got, want.toarray() if sp.issparse(want) else want)
    assert list(inp.feature_names) == list(a.var_names)
    assert list(inp.sample_names) == list(a.obs_names)
    inp.cleanup()


def test_in_memory_view():
    a = _adata()
    v = a[10:20, 5:]
    inp = prepare_anndata_input(v)
    assert inp.shape == (10, M - 5)
    np.testing.assert_array_equal(inp.data.toarray(), a.X[10:20, 5:].toarray())
    assert list(inp.feature_names) == list(a.var_names[5:])


def test_input_errors():
    a = _adata()
    with pytest.raises(ValueError, match=r"no layer 'raw' \(layers: dense, counts\)"):
        prepare_anndata_input(a, layer="raw")
    import pandas as pd

    b = anndata.AnnData(obs=pd.DataFrame(index=["a", "b"]), var=pd.DataFrame(index=["g"]))
    with pytest.raises(ValueError, match="the AnnData has no X$"):
        prepare_anndata_input(b)
    with pytest.raises(TypeError, match="expected an anndata.AnnData, got ndarray"):
        prepare_anndata_input(np.zeros((2, 2)))


def test_store_path_for():
    assert store_path_for("/d/pbmc.h5ad") == Path("/d/pbmc.didnmf")
    assert store_path_for("/d/pbmc.h5ad", "X") == Path("/d/pbmc.didnmf")
    assert store_path_for("/d/pbmc.h5ad", "counts") == Path("/d/pbmc.counts.didnmf")
    assert store_path_for("/d/m.h5", "a b/c") == Path("/d/m.a_b_c.didnmf")
    assert store_path_for("/d/data") == Path("/d/data.didnmf")


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_backed_is_converted_once_next_to_the_file(h5ad, mode):
    path, a = h5ad
    b = anndata.read_h5ad(path, backed=mode)
    inp = prepare_anndata_input(b)
    store = path.with_name("pbmc.didnmf")
    assert inp.data is None and inp.path == str(store.resolve()) and inp.shape == (N, M)
    np.testing.assert_array_equal(read_store(store).toarray(), a.X.toarray())
    m = store_manifest(store)
    assert m["source"] == "pbmc.h5ad" and m["layer"] == "X"
    assert (store / "features.tsv").read_text().split() == list(a.var_names)
    assert list(inp.feature_names) == list(a.var_names)
    first = (store / "manifest.json").stat().st_ino

    # Unchanged file: the same store, not rewritten.
    inp = prepare_anndata_input(b)
    assert (store / "manifest.json").stat().st_ino == first

    # A layer: its own store.
    inp = prepare_anndata_input(b, layer="counts")
    assert inp.path == str(path.with_name("pbmc.counts.didnmf").resolve())
    got = read_store(inp.path)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.toarray(), a.layers["counts"].toarray())
    assert (store / "manifest.json").stat().st_ino == first

    # The file changes (its modification time here): converted again.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    prepare_anndata_input(b)
    assert (store / "manifest.json").stat().st_ino != first
    assert store_manifest(store)["source_mtime_ns"] == st.st_mtime_ns + 10**9
    b.file.close()


def test_backed_store_elsewhere_and_views(h5ad, tmp_path):
    path, a = h5ad
    b = anndata.read_h5ad(path, backed="r")
    elsewhere = tmp_path / "shared" / "p.didnmf"
    elsewhere.parent.mkdir()
    inp = prepare_anndata_input(b, layer="dense", store=elsewhere)
    assert inp.path == str(elsewhere.resolve())
    assert not path.with_name("pbmc.didnmf").exists()
    np.testing.assert_array_equal(read_store(elsewhere), a.layers["dense"])
    with pytest.raises(ValueError, match="a view of a backed AnnData"):
        prepare_anndata_input(b[:10])
    # A directory in the way that is not a store is left alone.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="is not a didnmf store; not replacing it"):
        prepare_anndata_input(b, store=blocker)
    assert (blocker / "mine.txt").read_text() == "keep"
    b.file.close()


# ----------------------------------------------------------------------------------------
# Writing back.


def _report():
    return {"algo": "did", "iterations": 3, "stop_reason": "tol", "converged": True,
            "input": ["/data/pbmc.didnmf"], "seconds": 0.5, "recoveries": [],
            "shards_on": [{"shard": 0, "node": "a:1"}, {"shard": 1, "node": "b:2"}],
            "history": [{"iteration": i, "rel_err2": 1.0 / (i + 1), "rmse": 0.1}
                        for i in range(4)],
            "nested": [{"a": 1}, {"b": "x"}], "missing": None}


def test_write_back_and_h5ad_round_trip(tmp_path):
    a = _adata()
    W = np.arange(N * K, dtype=np.float64).reshape(N, K)
    H = np.arange(K * M, dtype=np.float32).reshape(K, M)
    params = {"n_components": K, "init": None, "random_state": np.random.RandomState(0),
              "alpha_W": 0.0, "solver": "cd", "cluster": None}
    write_back(a, W, H, params, _report(), seed=np.uint64(7))
    np.testing.assert_array_equal(a.obsm["X_nmf"], W)
    np.testing.assert_array_equal(a.varm["NMF_basis"], H.T)
    uns = a.uns["nmf"]
    assert uns["seed"] == 7
    assert uns["params"]["n_components"] == K and "init" not in uns["params"]
    assert uns["params"]["random_state"].startswith("RandomState")
    hist = uns["report"]["history"]
    np.testing.assert_array_equal(hist["iteration"], np.arange(4))
    assert uns["report"]["shards_on"]["node"].tolist() == ["a:1", "b:2"]
    assert uns["report"]["nested"] == {"0": {"a": 1}, "1": {"b": "x"}}
    # Storable: the .h5ad round trip keeps it all.
    a.write_h5ad(tmp_path / "out.h5ad")
    back = anndata.read_h5ad(tmp_path / "out.h5ad")
    np.testing.assert_array_equal(back.obsm["X_nmf"], W)
    np.testing.assert_array_equal(back.varm["NMF_basis"], H.T)
    r = back.uns["nmf"]["report"]
    assert r["stop_reason"] == "tol" and r["iterations"] == 3 and bool(r["converged"])
    np.testing.assert_array_equal(r["history"]["rel_err2"], hist["rel_err2"])
    assert list(r["input"]) == ["/data/pbmc.didnmf"]
    assert back.uns["nmf"]["params"]["solver"] == "cd"


def test_write_back_other_keys_and_bad_shapes():
    a = _adata()
    W, H = np.ones((N, K)), np.ones((K, M))
    write_back(a, W, H, {}, {}, key_added="X_nmf_k3", basis_key="B", uns_key="nmf_k3")
    assert "X_nmf_k3" in a.obsm and "B" in a.varm and "nmf_k3" in a.uns
    for W_, H_, msg in ((np.ones((N - 1, K)), H, "observations"),
                        (W, np.ones((K, M + 1)), "variables"),
                        (np.ones((N, K + 1)), H, "components")):
        b = _adata()
        with pytest.raises(ValueError, match=msg):
            write_back(b, W_, H_, {}, {})
        assert "X_nmf" not in b.obsm and "NMF_basis" not in b.varm and "nmf" not in b.uns


# ----------------------------------------------------------------------------------------
# Fitting through an estimator. First with a stand-in for didnmf.NMF's side of the
# interface (_check_X, _fit_source, transform, get_params), fitted by scikit-learn's NMF, so
# that the glue is tested on its own; then with didnmf.NMF and the command when both exist.


class StandIn:
    """didnmf.NMF's interface to _anndata, fitted by scikit-learn; records what it got."""

    def __init__(self, n_components=K):
        self.n_components = n_components
        self.got = []

    def get_params(self, deep=True):
        return {"n_components": self.n_components, "init": None}

    def _check_X(self, X, reset):
        self.n_features_in_ = X.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return X

    def _fit_source(self, p, inputs, X, shape, W=None, H=None):
        from sklearn.decomposition import NMF

        self.got.append(("path", inputs[0]) if inputs else ("matrix", X))
        if inputs:
            X = read_store(inputs[0])
            self.n_features_in_ = X.shape[1]
        model = NMF(n_components=p["n_components"], init="nndsvda", max_iter=500,
                    random_state=0)
        coef = model.fit_transform(X)
        self.components_ = model.components_
        self.report_ = {"iterations": int(model.n_iter_), "history": [{"iteration": 0}]}
        self.seed_ = 5
        return coef

    def transform(self, X):
        self.got.append(("transform", X))
        return np.zeros((X.shape[0] if not isinstance(X, str) else N, self.n_components))


@pytest.fixture
def stand_in_params(monkeypatch):
    monkeypatch.setattr(_anndata, "_checked_params", lambda est: est.get_params())


@pytest.mark.parametrize("backed", [False, True])
def test_fit_transform_glue(stand_in_params, h5ad, backed):
    path, a = h5ad
    target = anndata.read_h5ad(path, backed="r") if backed else a
    est = StandIn()
    W = _anndata.fit_transform(est, target, key_added="X_nmf")
    kind, what = est.got[0]
    if backed:
        assert kind == "path" and what == str(path.with_name("pbmc.didnmf").resolve())
    else:
        assert kind == "matrix" and sp.issparse(what)
        np.testing.assert_array_equal(what.toarray(), a.X.toarray())
    assert list(est.feature_names_in_) == list(a.var_names) and est.n_features_in_ == M
    np.testing.assert_array_equal(target.obsm["X_nmf"], W)
    np.testing.assert_array_equal(target.varm["NMF_basis"], est.components_.T)
    assert target.uns["nmf"]["seed"] == 5 and target.uns["nmf"]["params"]["n_components"] == K
    # The same fit as scikit-learn's on the matrix itself.
    from sklearn.decomposition import NMF

    ref = NMF(n_components=K, init="nndsvda", max_iter=500, random_state=0)
    np.testing.assert_array_equal(W, ref.fit_transform(a.X))


def test_fit_anndata_with_a_layer_and_transform(stand_in_params):
    a = _adata()
    est = fit_anndata(a, StandIn(), layer="dense")
    assert isinstance(est.got[0][1], np.ndarray)
    _anndata.transform(est, a)
    assert est.got[-1][0] == "transform"
    other = a[:, ::-1].copy()
    with pytest.raises(ValueError, match="var_names differ from the feature names seen in fit "
                                         r"\(first at position 0; 25 names here, 25 in fit\)"):
        _anndata.transform(est, other)
    with pytest.raises(ValueError, match=r"position 20; 20 names here, 25 in fit"):
        _anndata.transform(est, a[:, :20].copy())


def _real_estimator():
    """didnmf.NMF and a didnmf command, or a skip saying which is missing."""
    try:
        from didnmf._estimator import NMF
        from didnmf._binary import find_binary
    except ImportError as e:
        pytest.skip(f"didnmf.NMF is not in this checkout ({e})")
    try:
        find_binary()
    except Exception as e:  # BinaryNotFoundError
        pytest.skip(f"no didnmf command: {e}")
    return NMF


def test_fit_anndata_same_bits_as_the_estimator_on_the_matrix():
    NMF = _real_estimator()
    a = _adata()
    params = dict(n_components=K, random_state=3, max_iter=30, tol=0)
    est = fit_anndata(a, layer="dense", **params)
    ref = NMF(**params)
    W = ref.fit_transform(a.layers["dense"])
    np.testing.assert_array_equal(a.obsm["X_nmf"], W)
    np.testing.assert_array_equal(a.varm["NMF_basis"], ref.components_.T)
    assert list(est.feature_names_in_) == list(a.var_names)
    assert list(est.get_feature_names_out()) == [f"nmf{i}" for i in range(K)]
    assert a.uns["nmf"]["report"]["iterations"] == ref.report_["iterations"]
    # NMF.fit(adata) fits X and writes back too.
    b = _adata()
    NMF(**params).fit(b)
    W2 = NMF(**params).fit_transform(b.X)
    np.testing.assert_array_equal(b.obsm["X_nmf"], W2)
    fitted = NMF(**params).fit(b)
    with warnings.catch_warnings():  # the bare reference matrix has no names: expected
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        bare = fitted.transform(b.X)
    np.testing.assert_array_equal(fitted.transform(b), bare)


def test_backed_fit_reads_the_store(tmp_path):
    NMF = _real_estimator()

    a = _adata()
    path = tmp_path / "pbmc.h5ad"
    a.write_h5ad(path)
    b = anndata.read_h5ad(path, backed="r")
    params = dict(n_components=K, random_state=3, max_iter=30, tol=0)
    est = fit_anndata(b, **params)
    ref = NMF(**params)
    W = ref.fit_transform(a.X)
    np.testing.assert_array_equal(b.obsm["X_nmf"], W)
    np.testing.assert_array_equal(b.varm["NMF_basis"], ref.components_.T)
    assert list(est.feature_names_in_) == list(a.var_names)
    np.testing.assert_array_equal(est.transform(b), ref.transform(a.X))
    b.file.close()


def test_sweep_takes_an_anndata(tmp_path):
    """didnmf.sweep on an AnnData (in memory, and backed: through its store) runs the sweep of
    its matrix: the same runs as on the matrix itself, the files in out named by var_names."""
    _real_estimator()
    import didnmf
    import pandas as pd

    a = _adata()
    kw = dict(ranks="2:3", seeds=1, max_iter=20, tol=0)
    want = didnmf.sweep(a.X, **kw)
    got = didnmf.sweep(a, out=tmp_path / "mem", **kw)
    np.testing.assert_array_equal(got.consensus_bases[2], want.consensus_bases[2])
    assert want.feature_names is None and list(got.feature_names) == list(a.var_names)
    assert list(got.consensus_frame(2).index) == list(a.var_names)
    path = tmp_path / "s.h5ad"
    a.write_h5ad(path)
    b = anndata.read_h5ad(path, backed="r")
    backed = didnmf.sweep(b, out=tmp_path / "backed", **kw)
    np.testing.assert_array_equal(backed.consensus_bases[3], want.consensus_bases[3])
    assert list(backed.feature_names) == list(a.var_names)
    b.file.close()
    # The files in out are named by var_names too, as the results are.
    for out in ("mem", "backed"):
        tsv = pd.read_csv(tmp_path / out / "consensus_basis_2.tsv", sep="\t", index_col=0)
        assert list(tsv.index) == list(a.var_names)


def test_consensus_keeps_the_anndatas_names(tmp_path):
    """didnmf.consensus on an AnnData (in memory, and backed: through its store) names
    basis.tsv's rows by var_names and coef.tsv's by obs_names, and the result carries them."""
    _real_estimator()
    import didnmf
    import pandas as pd

    a = _adata()
    sweep_dir = tmp_path / "sweep"
    didnmf.sweep(a.X, ranks=[K], seeds=4, max_iter=30, test_fraction=0, out=sweep_dir)
    path = tmp_path / "s.h5ad"
    a.write_h5ad(path)
    b = anndata.read_h5ad(path, backed="r")
    for i, target in enumerate((a, b)):
        out = tmp_path / f"out{i}"
        res = didnmf.consensus(target, sweep_dir, K, density_threshold=2, out=out)
        assert list(pd.read_csv(out / "basis.tsv", sep="\t", index_col=0).index) == list(a.var_names)
        assert list(pd.read_csv(out / "coef.tsv", sep="\t", index_col=0).index) == list(a.obs_names)
        assert list(res.feature_names) == list(a.var_names)
        assert list(res.sample_names) == list(a.obs_names)
    b.file.close()
