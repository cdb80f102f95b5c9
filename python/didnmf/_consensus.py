"""``didnmf.consensus``: cNMF's consensus of a sweep's runs with ``didnmf consensus``.

Reads the spectra a ``didnmf sweep`` saved for one rank, drops the outliers by cNMF's local
density filter, clusters the rest into K programs (medians, scaled to sum 1), and refits the
usages of X against them by the distributed transform; returns a ``ConsensusResult``.
"""

import json
import numbers
import os
import tempfile

import numpy as np

from . import _anndata
from . import _params
from ._binary import find_binary
from ._estimator import NMF
from ._inputs import as_paths, is_path, write_matrix
from ._plot import show_png
from ._run import run

__all__ = ["consensus", "ConsensusResult"]


class ConsensusResult:
    """What ``didnmf consensus`` wrote.

    Attributes
    ----------
    basis : ndarray of shape (n_features, K)
        The consensus programs (``components_.T``), each column summing to 1.
    usages : ndarray of shape (n_samples, K)
        X's usages of the programs: the exact nonnegative least squares of every sample.
    report : dict
        consensus.json: the filter's threshold and neighbours, the kept and dropped counts,
        the dropped spectra (run, seed, component, density), the silhouette and the cluster
        sizes.
    run_report : dict
        report.json of the refit (rel_err2 is its reconstruction error).
    png : bytes
        density_K.png: the histogram of the local densities with the threshold.
    """

    def __init__(self, basis, usages, report, run_report, png):
        self.basis = basis
        self.usages = usages
        self.report = report
        self.run_report = run_report
        self.png = png

    def __repr__(self):
        r = self.report
        return f"ConsensusResult(k={r['k']}, kept={r['kept']}, filtered={r['filtered']}, silhouette={r['silhouette']})"

    def plot(self, out=None):
        """The density histogram (density_K.png): an IPython.display.Image when IPython is
        importable, else the path of a PNG written into ``out`` (a directory, made if
        missing; default: a new temporary directory)."""
        try:
            from IPython.display import Image
        except ImportError:
            Image = None
        if Image is not None and out is None:
            return Image(data=self.png, format="png")
        directory = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="didnmf-consensus-")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"density_{self.report['k']}.png")
        with open(path, "wb") as f:
            f.write(self.png)
        return show_png(path)


def consensus(
    X,
    sweep_dir,
    k,
    *,
    density_threshold=0.5,
    local_neighborhood_size=0.3,
    kmeans_seed=1,
    out=None,
    verbose=0,
    shards=1,
    nodes=0,
    threads=None,
    missing=None,
    cluster=None,
    ingest=None,
    secret_file=None,
    tls_ca=None,
    tls_cert=None,
    tls_key=None,
    insecure=False,
    client_bind=None,
    layer=None,
):
    """cNMF's consensus of the runs of rank ``k`` of the sweep saved in ``sweep_dir`` (the
    ``--out`` of ``didnmf sweep``), with X's usages refit against it (``didnmf consensus``).

    X is what ``NMF.fit`` takes (the sweep's input). ``density_threshold`` and
    ``local_neighborhood_size`` are cNMF's (2 keeps every spectrum); ``kmeans_seed`` seeds the
    clustering. ``out``: a directory to keep the command's files in (basis.npy, coef.npy,
    the .tsv files, consensus.json, density_K.png/.svg); default: a temporary one, removed.
    The other parameters are ``NMF``'s, for where the refit runs.
    """
    if not (isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1):
        raise ValueError(f"k must be an int >= 1. Got {k!r} instead.")
    for name, value in (("density_threshold", density_threshold), ("local_neighborhood_size", local_neighborhood_size)):
        if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0):
            raise ValueError(f"{name} must be a number > 0. Got {value!r} instead.")
    if not (isinstance(kmeans_seed, numbers.Integral) and 0 <= kmeans_seed < 2**64):
        raise ValueError(f"kmeans_seed must be an int in [0, 2**64). Got {kmeans_seed!r} instead.")
    est = NMF(
        verbose=verbose,
        shards=shards,
        nodes=nodes,
        threads=threads,
        missing=missing,
        cluster=cluster,
        ingest=ingest,
        secret_file=secret_file,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        insecure=insecure,
        client_bind=client_bind,
    )
    p = _params.check_params(est, owner="consensus")
    if _anndata.is_anndata(X):
        X = _anndata.prepare_anndata_input(X, layer=layer)
        X = X.path if X.path is not None else X.data
    in_memory = not is_path(X)
    binary = find_binary()
    with tempfile.TemporaryDirectory(prefix="didnmf-consensus-") as tmp:
        if in_memory:
            inputs = [write_matrix(est._check_X(X, reset=True), tmp, binary)]
        else:
            inputs = as_paths(X)
        directory = os.fspath(out) if out is not None else os.path.join(tmp, "out")
        args = ["consensus", "--sweep", os.fspath(sweep_dir), "--k", int(k)]
        for path in inputs:
            args += ["--input", path]
        args += [
            "--density-threshold", repr(float(density_threshold)),
            "--local-neighborhood-size", repr(float(local_neighborhood_size)),
            "--kmeans-seed", int(kmeans_seed),
            "--out", directory,
        ]
        args += _params.run_flags(p, in_memory, fit=False)  # a refit: nothing held out
        run(args, verbose=p["verbose"], binary=binary)
        basis = np.load(os.path.join(directory, "basis.npy"), allow_pickle=False)
        usages = np.load(os.path.join(directory, "coef.npy"), allow_pickle=False)
        with open(os.path.join(directory, "consensus.json"), encoding="utf-8") as f:
            report = json.load(f)
        with open(os.path.join(directory, "report.json"), encoding="utf-8") as f:
            run_report = json.load(f)
        with open(os.path.join(directory, f"density_{int(k)}.png"), "rb") as f:
            png = f.read()
    return ConsensusResult(basis, usages, report, run_report, png)
