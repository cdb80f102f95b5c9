"""AnnData in and out of ``didnmf.NMF``: the matrix to fit, the names, the results written back.

For users
---------
``didnmf.fit_anndata(adata, n_components=..., layer=None, ...)`` (or
``didnmf.NMF(...).fit(adata)``, which fits ``adata.X``) factorizes ``adata.X`` or
``adata.layers[layer]`` (cells as samples, genes as features) and writes back, as scanpy's
``pp.pca`` does:

- ``adata.obsm["X_nmf"]``: W, the coef (n_obs x n_components);
- ``adata.varm["NMF_basis"]``: the basis, ``components_`` transposed (n_vars x n_components);
- ``adata.uns["nmf"]``: ``{"params": estimator.get_params(), "report": estimator.report_,
  "seed": the seed used}``, made storable in an ``.h5ad`` (None values are left out, as
  anndata leaves them out when writing; a list of records with the same keys, such as the
  report's history, becomes a dict of columns).

The estimator's ``feature_names_in_`` are ``adata.var_names``.

An in-memory AnnData's matrix (dense or scipy sparse) goes to the estimator's array path (a
temporary ``.npy``/``.npz`` the command reads). A *backed* AnnData (``anndata.read_h5ad(f,
backed="r")``) is never loaded: its file is converted once, out of core, into a didnmf store
next to it (``pbmc.h5ad`` -> ``pbmc.didnmf``; a layer ``counts`` -> ``pbmc.counts.didnmf``,
or the directory given as ``store=``), and the command's nodes read the store. The store is
reused while its manifest records the file's current size, modification time and layer;
otherwise it is converted again.

For the estimator (the interface ``didnmf._estimator.NMF`` calls)
-----------------------------------------------------------------
- ``fit_transform(est, adata, W=None, H=None, layer=None, key_added="X_nmf", store=None)``:
  fits ``est`` on the AnnData through ``est._fit_source(p, inputs, X, shape, W, H)`` (inputs:
  a list of paths, or None with X the validated in-memory matrix from ``est._check_X``; it
  sets the fitted attributes and returns W), sets ``est.feature_names_in_`` from var_names,
  writes back (``write_back``) and returns W. ``NMF.fit``/``fit_transform`` call it for an
  AnnData.
- ``transform(est, adata, layer=None, store=None)``: W for the AnnData's cells on a fitted
  ``est`` (var_names must equal ``feature_names_in_`` when both exist); writes nothing.
- The two building blocks, for other callers:
  ``prepare_anndata_input(adata, layer=None, store=None) -> AnnDataInput`` (fields ``data``:
  the in-memory matrix, or None; ``path``: the store's path for a backed AnnData, or None;
  ``shape``, ``feature_names``, ``sample_names``, ``layer``; ``cleanup()``: a no-op today, to
  call when done) and ``write_back(adata, W, components, params, report, key_added="X_nmf",
  basis_key="NMF_basis", uns_key="nmf", seed=None)``.

anndata itself is not imported here: an AnnData is recognised by its type's name and module.
"""

import os
import re
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._convert import convert, store_manifest

__all__ = [
    "fit_anndata",
    "fit_transform",
    "transform",
    "prepare_anndata_input",
    "write_back",
    "store_path_for",
    "is_anndata",
    "AnnDataInput",
]

DEFAULT_KEY = "X_nmf"
BASIS_KEY = "NMF_basis"
UNS_KEY = "nmf"


def is_anndata(X):
    """True for an ``anndata.AnnData`` (told by its type; anndata is not imported)."""
    t = type(X)
    return t.__name__ == "AnnData" and t.__module__.split(".")[0] == "anndata"


class AnnDataInput:
    """What to factorize for an AnnData: an in-memory matrix (``data``) or a store the nodes
    read (``path``), with its ``shape`` (n_obs, n_vars), ``feature_names`` (var_names) and
    ``sample_names`` (obs_names) as object arrays of str, and the ``layer`` ("X" or a name).
    Call ``cleanup()`` when done with it."""

    def __init__(self, data, path, shape, feature_names, sample_names, layer):
        self.data = data
        self.path = path
        self.shape = shape
        self.feature_names = feature_names
        self.sample_names = sample_names
        self.layer = layer

    def cleanup(self):
        """Release what the input holds. A backed AnnData's store is kept for reuse, and an
        in-memory matrix belongs to the AnnData: nothing to remove today."""


def _check_anndata(adata):
    if not is_anndata(adata):
        raise TypeError(f"expected an anndata.AnnData, got {type(adata).__name__}")


def _layer_name(layer):
    return "X" if layer is None else layer


def _names(index):
    return np.asarray([str(v) for v in index], dtype=object)


def store_path_for(filename, layer=None):
    """The store a backed AnnData's file is converted into: next to it, the file's name
    without ``.h5ad`` (or ``.h5``) plus ``.didnmf``, with ``.LAYER`` before that for a layer
    (characters other than letters, digits, '.', '_' and '-' become '_')."""
    p = Path(filename)
    stem = p.name
    for ext in (".h5ad", ".h5"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    if layer not in (None, "X"):
        stem += "." + re.sub(r"[^A-Za-z0-9._-]", "_", str(layer))
    return p.with_name(stem + ".didnmf")


def _store_is_current(store, src, layer):
    """True when ``store`` is a didnmf store made from ``src``'s current contents and layer."""
    try:
        m = store_manifest(store)
    except ValueError:
        return False
    st = os.stat(src)
    return (m.get("source") == Path(src).name and m.get("layer") == _layer_name(layer)
            and m.get("source_size") == st.st_size
            and m.get("source_mtime_ns") == st.st_mtime_ns)


def prepare_anndata_input(adata, layer=None, store=None):
    """What the estimator should factorize for ``adata`` (see the module's docstring).

    Parameters
    ----------
    adata : anndata.AnnData
        In memory, or backed (``read_h5ad(..., backed="r")``; a view of a backed AnnData is
        refused: its subset exists only in memory).
    layer : str, optional
        ``adata.layers[layer]`` instead of ``adata.X``.
    store : str or path, optional
        For a backed AnnData, where to put the store (default: ``store_path_for(file,
        layer)``, next to the file, so that the nodes of a cluster that see the file see it).

    Returns
    -------
    AnnDataInput

    Raises
    ------
    ValueError
        No such layer, no X, a view of a backed AnnData, or (from the conversion) a bad file.
    """
    _check_anndata(adata)
    if layer is not None and layer != "X" and layer not in adata.layers:
        have = ", ".join(adata.layers.keys()) or "none"
        raise ValueError(f"the AnnData has no layer {layer!r} (layers: {have})")
    shape = (int(adata.n_obs), int(adata.n_vars))
    features = _names(adata.var_names)
    samples = _names(adata.obs_names)
    if adata.isbacked:
        if adata.is_view:
            raise ValueError(
                "a view of a backed AnnData: the subset exists only in memory; load it "
                "(adata[...].to_memory()) or fit the whole backed AnnData")
        src = Path(adata.filename)
        dst = Path(store) if store is not None else store_path_for(src, layer)
        if not _store_is_current(dst, src, layer):
            try:
                convert(src, dst, layer=layer, overwrite=True)
            except PermissionError as e:
                raise PermissionError(
                    f"cannot write the didnmf store {dst} next to {src} ({e}); give "
                    "store=PATH, a directory on storage the nodes see") from None
        m = store_manifest(dst)
        if tuple(m["shape"]) != shape:
            raise ValueError(f"{dst}: the store holds {tuple(m['shape'])}, the AnnData is "
                             f"{shape[0]} x {shape[1]}")
        return AnnDataInput(None, str(dst.resolve()), shape, features, samples,
                            _layer_name(layer))
    if layer in (None, "X"):
        X = adata.X
        if X is None:
            have = ", ".join(adata.layers.keys())
            raise ValueError("the AnnData has no X" + (f"; give layer= (layers: {have})"
                                                       if have else ""))
    else:
        X = adata.layers[layer]
    if sp.issparse(X):
        X = X.tocsr() if X.format not in ("csr", "csc") else X
    else:
        X = np.asarray(X)
    if X.shape != shape:
        raise ValueError(f"the AnnData's {_layer_name(layer)} is {X.shape}, the AnnData is "
                         f"{shape[0]} x {shape[1]}")
    return AnnDataInput(X, None, shape, features, samples, _layer_name(layer))


def _storable(v):
    """v made writable into an .h5ad's uns (see the module's docstring); None for "leave it
    out"."""
    if v is None:
        return None
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = _storable(x)
            if x is not None:
                out[str(k)] = x
        return out
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, dict) for x in v):
            keys = list(v[0].keys())
            if all(list(x.keys()) == keys for x in v) and all(
                    _scalar(x[k]) for x in v for k in keys):
                cols = {}
                for k in keys:
                    col = [x[k] for x in v]
                    if all(c is not None for c in col):
                        cols[str(k)] = np.asarray(col)
                return cols
            return {str(i): _storable(x) for i, x in enumerate(v)}
        items = [_storable(x) for x in v]
        if all(isinstance(x, str) for x in items):
            return np.asarray(items, dtype=object)
        if all(_scalar(x) and not isinstance(x, str) for x in items):
            return np.asarray(items)
        return {str(i): x for i, x in enumerate(items) if x is not None}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, bool, int, float, np.ndarray)):
        return v
    return repr(v)


def _scalar(x):
    return isinstance(x, (str, bool, int, float, np.generic))


def write_back(adata, W, components, params, report, key_added=DEFAULT_KEY,
               basis_key=BASIS_KEY, uns_key=UNS_KEY, seed=None):
    """Write a fit's results into ``adata``, as scanpy's tools do.

    ``adata.obsm[key_added] = W`` (n_obs x K), ``adata.varm[basis_key] = components.T``
    (n_vars x K) and ``adata.uns[uns_key] = {"params": params, "report": report, "seed":
    seed}`` (made storable in an .h5ad; see the module's docstring). Raises ``ValueError``
    when the shapes do not fit the AnnData (nothing is written then).
    """
    _check_anndata(adata)
    W = np.asarray(W)
    components = np.asarray(components)
    if W.ndim != 2 or W.shape[0] != adata.n_obs:
        raise ValueError(f"W is {W.shape}; the AnnData has {adata.n_obs} observations")
    if components.ndim != 2 or components.shape[1] != adata.n_vars:
        raise ValueError(f"components is {components.shape}; the AnnData has "
                         f"{adata.n_vars} variables")
    if components.shape[0] != W.shape[1]:
        raise ValueError(f"W has {W.shape[1]} components, components {components.shape[0]}")
    uns = {"params": _storable(dict(params or {})), "report": _storable(dict(report or {}))}
    if seed is not None:
        uns["seed"] = _storable(seed)
    adata.obsm[key_added] = W
    adata.varm[basis_key] = np.ascontiguousarray(components.T)
    adata.uns[uns_key] = uns


def _checked_params(est):
    """The estimator's parameters, checked as ``NMF.fit`` checks them."""
    from . import _params

    return _params.check_params(est)


def fit_transform(est, adata, W=None, H=None, layer=None, key_added=DEFAULT_KEY, store=None):
    """Fit ``est`` (a ``didnmf.NMF``) on ``adata`` and write the results back; return W.

    ``W``/``H``: the initial factors for ``init='custom'``. See the module's docstring for
    what is read and written."""
    p = _checked_params(est)
    inp = prepare_anndata_input(adata, layer=layer, store=store)
    try:
        if inp.path is not None:
            coef = est._fit_source(p, inputs=[inp.path], X=None, shape=inp.shape, W=W, H=H)
        else:
            X = est._check_X(inp.data, reset=True)
            coef = est._fit_source(p, inputs=None, X=X, shape=X.shape, W=W, H=H)
    finally:
        inp.cleanup()
    est.n_features_in_ = inp.shape[1]
    est.feature_names_in_ = inp.feature_names
    write_back(adata, coef, est.components_, est.get_params(), getattr(est, "report_", None),
               key_added=key_added, seed=getattr(est, "seed_", None))
    return coef


def transform(est, adata, layer=None, store=None):
    """W for ``adata``'s observations on the fitted ``est``; nothing is written back.

    Raises ``ValueError`` when ``adata.var_names`` differ from ``est.feature_names_in_``."""
    names = getattr(est, "feature_names_in_", None)
    inp = prepare_anndata_input(adata, layer=layer, store=store)
    try:
        if names is not None and (len(names) != len(inp.feature_names)
                                  or not np.array_equal(names, inp.feature_names)):
            diff = next((i for i, (a, b) in enumerate(zip(names, inp.feature_names)) if a != b),
                        min(len(names), len(inp.feature_names)))
            raise ValueError(
                "the AnnData's var_names differ from the feature names seen in fit "
                f"(first at position {diff}; {len(inp.feature_names)} names here, "
                f"{len(names)} in fit)")
        if inp.path is not None:
            return est.transform(inp.path)
        with warnings.catch_warnings():
            # The names were compared above; the bare matrix has none of its own.
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            return est.transform(inp.data)
    finally:
        inp.cleanup()


def fit_anndata(adata, estimator=None, *, layer=None, key_added=DEFAULT_KEY, store=None,
                **params):
    """Factorize an AnnData with didnmf and write the results into it.

    Parameters
    ----------
    adata : anndata.AnnData
        In memory or backed; cells (obs) are the samples, genes (var) the features.
    estimator : didnmf.NMF, optional
        The estimator to fit (its parameters, updated by ``params``); by default a new
        ``didnmf.NMF(**params)``.
    layer : str, optional
        Factorize ``adata.layers[layer]`` instead of ``adata.X``.
    key_added : str
        The ``obsm`` key for W (default ``"X_nmf"``); the basis goes to
        ``varm["NMF_basis"]`` and the parameters and report to ``uns["nmf"]``.
    store : str or path, optional
        For a backed AnnData: the directory of the didnmf store its file is converted into
        (default: next to the file).
    **params
        ``didnmf.NMF`` parameters (``n_components``, ``init``, ``max_iter``, ``cluster``, ...).

    Returns
    -------
    didnmf.NMF
        The fitted estimator (``components_``, ``feature_names_in_`` from var_names,
        ``report_``, ...); use its ``transform`` on other AnnData with the same var_names.
    """
    _check_anndata(adata)
    if estimator is None:
        from ._estimator import NMF

        estimator = NMF(**params)
    elif params:
        estimator.set_params(**params)
    fit_transform(estimator, adata, layer=layer, key_added=key_added, store=store)
    return estimator
