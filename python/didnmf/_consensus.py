"""``didnmf.consensus``: cNMF's consensus of a sweep's runs with ``didnmf consensus``.

Reads the spectra a ``didnmf sweep`` saved for one rank, drops the outliers by cNMF's local
density filter, clusters the rest into K programs (medians, scaled to sum 1), and refits the
usages of X against them by the distributed transform; returns a ``ConsensusResult``. X's
names (a DataFrame's columns and index, an AnnData's var_names and obs_names) name the rows
of the .tsv files, as the command's --feature-names and --sample-names do, and the result
carries them.
"""

import filecmp
import json
import numbers
import os
import tempfile
import warnings

import numpy as np

from . import _anndata
from . import _params
from ._binary import find_binary
from ._estimator import NMF
from ._inputs import as_paths, is_path, write_matrix, write_names
from ._plot import show_png
from ._run import run, shown

__all__ = ["consensus", "ConsensusResult"]


class ConsensusResult:
    """What ``didnmf consensus`` wrote.

    Attributes
    ----------
    basis : ndarray of shape (n_features, K)
        The consensus programs (``components_.T``), each column summing to 1.
    usages : ndarray of shape (n_samples, K)
        X's usages of the programs: the exact nonnegative least squares of every sample.
    feature_names : ndarray of str of shape (n_features,), or None
        The names of basis's rows, which name basis.tsv's and top_features.tsv's: a
        DataFrame's columns (when all are strings, as ``NMF``'s ``feature_names_in_``) or an
        AnnData's var_names; None for other input (the .tsv files then carry the names the
        input files carry, else numbers).
    sample_names : ndarray of str of shape (n_samples,), or None
        The names of usages' rows, which name coef.tsv's: a DataFrame's index or an
        AnnData's obs_names; None for other input.
    report : dict
        consensus.json: the filter's threshold and neighbours, the kept and dropped counts,
        the dropped spectra (run, seed, component, density), the silhouette and the cluster
        sizes.
    run_report : dict
        report.json of the refit (rel_err2 is its reconstruction error).
    png : bytes
        density_K.png: the histogram of the local densities with the threshold.
    """

    def __init__(self, basis, usages, report, run_report, png, feature_names=None, sample_names=None):
        self.basis = basis
        self.usages = usages
        self.feature_names = feature_names
        self.sample_names = sample_names
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

    X is what ``NMF.fit`` takes (the sweep's input). Its names name the outputs, as the
    command's --feature-names and --sample-names do: a DataFrame's columns (when all are
    strings, as ``NMF`` takes them for ``feature_names_in_``) the rows of basis.tsv and
    top_features.tsv and its index those of coef.tsv, an AnnData's var_names and obs_names
    likewise; the result carries them (``feature_names``, ``sample_names``), beside
    ``basis`` and ``usages`` as arrays. A name the command's names files cannot hold
    (empty, with a tab, a line break or another control character, not valid Unicode, over
    4096 bytes) is a ValueError. ``density_threshold`` and
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
    feature_names = sample_names = None
    if _anndata.is_anndata(X):
        inp = _anndata.prepare_anndata_input(X, layer=layer)
        feature_names, sample_names = inp.feature_names, inp.sample_names
        X = inp.path if inp.path is not None else inp.data
    elif _is_dataframe(X):
        sample_names = np.asarray([str(v) for v in X.index], dtype=object)
    in_memory = not is_path(X)
    binary = find_binary()
    as_given = {}  # the temporary file of an in-memory X, gone when a message is read: what it was
    with tempfile.TemporaryDirectory(prefix="didnmf-consensus-") as tmp:
        if in_memory:
            checked = est._check_X(X, reset=True)  # a DataFrame's str columns: feature_names_in_
            if feature_names is None:
                feature_names = getattr(est, "feature_names_in_", None)
            path = write_matrix(checked, tmp, binary, name="input")
            # A sweep of an in-memory X kept it in its directory (didnmf.sweep's out): the same
            # bytes, read from that file, are the sweep's input, which the command checks.
            kept = os.path.join(os.fspath(sweep_dir), os.path.basename(path))
            if os.path.isfile(kept) and filecmp.cmp(path, kept, shallow=False):
                path = kept
            else:
                as_given[path] = "X (in memory)"
            inputs = [path]
        else:
            inputs = as_paths(X)
        names_flags = []  # names files this process reads, whoever reads the input
        if feature_names is not None:
            names_flags += ["--feature-names", write_names(feature_names, tmp, "feature")]
        if sample_names is not None:
            names_flags += ["--sample-names", write_names(sample_names, tmp, "sample")]
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
        args += names_flags + _params.run_flags(p, in_memory, fit=False)  # a refit: nothing held out
        done = run(args, verbose=p["verbose"], binary=binary, names=as_given)
        for line in done.stderr.splitlines():  # the command's warnings, say that X is not the sweep's
            if line.startswith("didnmf: warning: "):
                warnings.warn(shown(line[len("didnmf: "):], as_given), UserWarning, stacklevel=2)
        basis = np.load(os.path.join(directory, "basis.npy"), allow_pickle=False)
        usages = np.load(os.path.join(directory, "coef.npy"), allow_pickle=False)
        with open(os.path.join(directory, "consensus.json"), encoding="utf-8") as f:
            report = json.load(f)
        with open(os.path.join(directory, "report.json"), encoding="utf-8") as f:
            run_report = json.load(f)
        with open(os.path.join(directory, f"density_{int(k)}.png"), "rb") as f:
            png = f.read()
    return ConsensusResult(basis, usages, report, run_report, png, feature_names, sample_names)


def _is_dataframe(X):
    """True for a pandas DataFrame (told by its type; pandas is not imported)."""
    t = type(X)
    return t.__module__.split(".")[0] == "pandas" and hasattr(X, "index") and hasattr(X, "columns")
