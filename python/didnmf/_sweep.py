"""``didnmf.sweep``: choose the rank with ``didnmf sweep``.

Factorizes X at every rank of ``ranks`` with ``seeds`` seeds each (concurrently on in-process
nodes or a cluster) and returns a ``SweepResult``: every run as a pandas DataFrame, the
per-rank summary (error, spread, stability across seeds), the suggested rank with its rule,
and the consensus basis of every rank; a ``ConvergenceWarning`` when the suggestion is
unreliable (runs stopped at a cap). pandas is imported only here, when a sweep runs.
"""

import filecmp
import json
import numbers
import os
import shutil
import tempfile
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import _params
from ._binary import find_binary
from ._estimator import NMF
from . import _anndata
from ._inputs import as_paths, is_path, write_matrix, write_names
from ._plot import show_png
from ._run import DidnmfInputError, run, shown

__all__ = ["sweep", "SweepResult"]


class SweepResult:
    """What ``didnmf sweep`` found.

    Attributes
    ----------
    runs : pandas.DataFrame
        One row per run: k, seed, fold and test_seed (its held-out set), train_rel_err2 (and
        test_rel_err2 with a test set), iterations, seconds, stop_reason ("max-iter" or
        "time-limit": the run hit a cap and did not converge).
    ranks : pandas.DataFrame
        One row per rank: runs, folds, capped_runs, mean train (and test) error and its
        standard error (the test error's over the folds: each fold's best start), poor_fits
        (the folds left out of the test error because their fit is a poor local optimum,
        its train error far above the rank's other folds': a list of dicts of fold, seed,
        train_rel_err2 and median_train_rel_err2), stability_silhouette and
        stability_agreement across the runs, mean iterations and seconds.
    suggested_rank : int or None
        The rank the sweep suggests; ``rule`` says why, and ``rule_name`` names the rule.
        None when the sweep cannot tell (``cannot_tell``; ``reason`` says why: no rank fits
        the held-out entries better than the smallest tried by more than the spread over
        the folds, as when the signal is below the noise).
    cannot_tell : bool
    reason : str
        Why the sweep cannot tell ('' when it can).
    unreliable : str
        When not '', why the suggestion may be wrong: which runs stopped at a cap (max_iter
        or time_limit) before converging. ``sweep`` then also warns (a
        ``sklearn.exceptions.ConvergenceWarning``, a UserWarning), whether or not there is a
        ``suggested_rank``.
    folds : int
        The number of held-out sets (folds).
    consensus_bases : dict of int to ndarray
        The consensus basis of every rank (n_features x K, as ``components_.T``).
    feature_names : ndarray of str or None
        The names of the consensus bases' rows: a DataFrame's columns (when all are strings,
        as ``NMF`` takes them for ``feature_names_in_``), an AnnData's var_names, or a path's
        names as the command reads them (a 10x directory's features, FILE.features.tsv beside
        FILE); None when X has none. The .tsv files the command writes (``out``) are named
        by the same names.
    report : dict
        sweep.json as the command wrote it.
    png : bytes
        sweep.png (error and stability against the rank).
    """

    def __init__(self, report, runs, ranks, consensus_bases, png, feature_names=None):
        self.report = report
        self.runs = runs
        self.ranks = ranks
        self.cannot_tell = bool(report.get("cannot_tell", False))
        self.suggested_rank = None if self.cannot_tell else int(report["suggested_k"])
        self.rule = report["rule"]
        self.rule_name = report.get("rule_name", "")
        self.reason = report.get("reason", "")
        self.unreliable = report.get("unreliable", "")
        self.folds = int(report.get("folds", 1))
        self.consensus_bases = consensus_bases
        self.feature_names = feature_names
        self.png = png

    def consensus_frame(self, k):
        """The consensus basis of rank ``k`` as a pandas DataFrame: a row per feature, named
        by ``feature_names`` when X had names, a column per component (component_1 ..
        component_K)."""
        if k not in self.consensus_bases:
            raise ValueError(f"k must be a rank of the sweep with a consensus basis, one of {sorted(self.consensus_bases)}. Got {k!r} instead.")
        import pandas as pd

        basis = self.consensus_bases[k]
        index = pd.Index(self.feature_names, name="feature") if self.feature_names is not None else None
        return pd.DataFrame(basis, index=index, columns=[f"component_{p + 1}" for p in range(basis.shape[1])])

    def __repr__(self):
        return (
            f"SweepResult(ranks={list(self.ranks['k'])}, runs={len(self.runs)}, "
            f"suggested_rank={self.suggested_rank}, cannot_tell={self.cannot_tell})"
        )

    def plot(self, out=None):
        """The sweep's picture (sweep.png, drawn by the sweep command: train and test error and
        the stability against the rank, the suggestion marked): an IPython.display.Image when
        IPython is importable, else the path of a PNG written into ``out`` (a directory, made
        if missing; default: a new temporary directory)."""
        try:
            from IPython.display import Image
        except ImportError:
            Image = None
        if Image is not None and out is None:
            return Image(data=self.png, format="png")
        directory = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="didnmf-sweep-")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "sweep.png")
        with open(path, "wb") as f:
            f.write(self.png)
        return show_png(path)


def _ranks_flag(ranks):
    """--ranks for ranks: 'FROM:TO[:STEP]', a comma-separated string, or ints (a range)."""
    if isinstance(ranks, str):
        if not ranks.strip():
            raise ValueError("ranks must name at least one rank, e.g. '2:10' or [2, 4, 8]")
        return ranks.strip()
    if isinstance(ranks, numbers.Integral):
        ranks = [ranks]
    try:
        items = [int(k) for k in ranks if isinstance(k, numbers.Integral) and not isinstance(k, bool)]
        if len(items) != len(list(ranks)) or not items:
            raise TypeError
    except TypeError:
        raise ValueError(
            f"ranks must be 'FROM:TO[:STEP]', a comma-separated string or a list of ints. Got {ranks!r} instead."
        ) from None
    if min(items) < 1:
        raise ValueError(f"ranks must be >= 1. Got {ranks!r} instead.")
    return ",".join(str(k) for k in items)


def sweep(
    X,
    ranks,
    seeds=5,
    test_fraction=0.1,
    *,
    folds=None,
    transform="none",
    seed=1,
    out=None,
    resume=False,
    parallel=0,
    init=None,
    solver="cd",
    algo=None,
    beta_loss="frobenius",
    tol=1e-5,
    max_iter=2000,
    alpha_W=0.0,
    alpha_H="same",
    l1_ratio=0.0,
    accel=_params.DEFAULT_ACCEL,
    verbose=0,
    shards=1,
    nodes=0,
    threads=None,
    time_limit=None,
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
    """Factorize X at every rank of ``ranks`` with ``seeds`` seeds each (``didnmf sweep``)
    and return a ``SweepResult`` (runs and per-rank summary as DataFrames, the suggested rank,
    the consensus bases).

    X is what ``NMF.fit`` takes (array, sparse matrix, DataFrame, path or list of paths, or an
    AnnData: its X, or ``layer``; a backed AnnData's file is converted once into a store next
    to it, which the nodes read). X's feature names (a DataFrame's columns, when all are
    strings, as ``NMF`` takes them for ``feature_names_in_``, or an AnnData's var_names) name
    the result's ``feature_names`` and the rows of the .tsv files in ``out``
    (consensus_basis_K.tsv, top_features_K.tsv), as the command's --feature-names does; a
    name the command's names files cannot hold (empty, with a tab, a line break or another
    control character, not valid Unicode, over 4096 bytes) is a ValueError, as in
    ``didnmf.consensus``. The command's warnings (a held-out set too large for the ranks, ...)
    are UserWarnings.
    ``ranks``: 'FROM:TO[:STEP]', e.g. '2:10', or a list of ints; ``seeds``: runs per rank
    (seeds ``seed``, ``seed``+1, ...); ``test_fraction``: hold this fraction of the entries out
    (the default, 0.1, cross-validates: the test error then guides the suggestion; 0 turns it
    off, and the most stable rank is suggested); ``folds``: the held-out sets, at most
    ``seeds`` (None: one per seed, each run its own; the run of seed index s holds out fold
    s mod folds), over which the test error's standard error is taken. ``transform``:
    'none' fits X; 'sqrt' fits sqrt(X) and compares ranks by the held-out squared error of the
    model's square against X, which finds more of count data's weak programs, those under
    the noise's edge (see ``didnmf sweep -h``); whoever reads the input applies it (this process, or the nodes of
    ``nodes`` or ``cluster``). ``out``: a directory
    to keep the command's files in (sweep.json, sweep.tsv, the figures, consensus_basis_K.npy
    and spectra_K.npy, which ``didnmf.consensus(X, out, k)`` reads, and runs/, every run as it
    ended: an ``out`` whose runs/ holds runs is refused, as the command refuses it without
    ``--resume``); default: a temporary one, removed. With ``out``, an in-memory X is kept in
    it as input.npy (input.npz when sparse), the file the runs were of: an interrupted sweep
    goes on from its runs with ``resume=True`` and the same X and parameters, and
    ``didnmf.consensus`` can check that its X is the sweep's. ``resume``: go on from the runs
    ``out``/runs holds (``didnmf sweep --resume``): only the runs it lacks are run, and the
    result is what one uninterrupted sweep gives. ``parallel``: jobs at
    once (0: one here, one per node with nodes or cluster). ``init``: None is the command's
    'random' (the seeds must give different runs; 'nndsvd' and 'nndsvda' need seeds=1 and
    test_fraction=0). The other parameters are ``NMF``'s (accel among them: every run's inner
    loops); tol (the stall tolerance) and
    max_iter default to the command's for a sweep (1e-5 and 2000), which let the masked fits
    converge before their test errors are compared: a run that hits max_iter (or
    time_limit) makes the suggestion unreliable: ``suggested_rank`` is still set (or None
    when the sweep cannot tell), ``unreliable`` says why, and a
    ``sklearn.exceptions.ConvergenceWarning`` (a UserWarning, as ``NMF`` warns on max_iter)
    says what the command's console says: "the suggestion is unreliable: " and the reason.
    """
    import pandas as pd

    if not (isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool) and seeds >= 1):
        raise ValueError(f"seeds must be an int >= 1. Got {seeds!r} instead.")
    if not (isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and 0 <= seed and seed + seeds - 1 < 2**63):
        raise ValueError(f"seed must be an int >= 0 whose {seeds} seeds stay below 2**63. Got {seed!r} instead.")
    if not (isinstance(parallel, numbers.Integral) and parallel >= 0):
        raise ValueError(f"parallel must be an int >= 0. Got {parallel!r} instead.")
    if folds is not None and not (
        isinstance(folds, numbers.Integral) and not isinstance(folds, bool) and 1 <= folds <= seeds
    ):
        raise ValueError(f"folds must be None or an int between 1 and seeds ({seeds}). Got {folds!r} instead.")
    if not isinstance(resume, bool):
        raise ValueError(f"resume must be a bool. Got {resume!r} instead.")
    if resume and out is None:
        raise ValueError("resume=True needs out: the directory of the sweep to go on with.")
    if transform not in ("none", "sqrt"):
        raise ValueError(f"transform must be 'none' or 'sqrt'. Got {transform!r} instead.")
    ranks_flag = _ranks_flag(ranks)
    est = NMF(
        init=init,
        solver=solver,
        algo=algo,
        beta_loss=beta_loss,
        tol=tol,
        max_iter=max_iter,
        alpha_W=alpha_W,
        alpha_H=alpha_H,
        l1_ratio=l1_ratio,
        accel=accel,
        verbose=verbose,
        shards=shards,
        nodes=nodes,
        threads=threads,
        time_limit=time_limit,
        missing=missing,
        test_fraction=test_fraction,
        cluster=cluster,
        ingest=ingest,
        secret_file=secret_file,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        insecure=insecure,
        client_bind=client_bind,
    )
    p = _params.check_params(est, owner="sweep")
    feature_names = None
    if _anndata.is_anndata(X):  # its X: in memory, or a backed file's store the nodes read
        X = _anndata.prepare_anndata_input(X, layer=layer)
        feature_names = X.feature_names
        X = X.path if X.path is not None else X.data
    in_memory = not is_path(X)
    binary = find_binary()
    as_given = {}  # the temporary file of an in-memory X, gone when a message is read: what it was
    with tempfile.TemporaryDirectory(prefix="didnmf-sweep-") as tmp:
        if in_memory:
            checked = est._check_X(X, reset=True)
            if feature_names is None:  # a DataFrame's str columns
                feature_names = getattr(est, "feature_names_in_", None)
        # X's names name the rows of consensus_basis_K.tsv and top_features_K.tsv, as they
        # name the result's; a name the names file cannot hold is refused (as by
        # didnmf.consensus) before X is kept in out.
        names_flags = []
        if feature_names is not None:
            names_flags = ["--feature-names", write_names(feature_names, tmp, "feature")]
        if in_memory:
            path = write_matrix(checked, tmp, binary, name="input")
            if out is not None:
                path = _kept_input(path, os.fspath(out), resume)
            else:
                as_given[path] = "X (in memory)"
            inputs = [path]
        else:
            inputs = as_paths(X)
        out = os.fspath(out) if out is not None else os.path.join(tmp, "out")
        args = ["sweep"]
        if resume:
            args += ["--resume"]
        for path in inputs:
            args += ["--input", path]
        args += names_flags
        args += ["--ranks", ranks_flag, "--seeds", seeds, "--seed", seed, "--out", out]
        if p["init"] is not None:  # None: the command's default, random (seeds must differ)
            args += ["--init", p["init"]]
        if parallel:
            args += ["--parallel", parallel]
        if folds is not None:
            args += ["--folds", folds]
        if transform != "none":
            args += ["--transform", transform]
        if not test_fraction:  # the command cross-validates unless told not to
            args += ["--test-fraction", "0"]
        args += _params.model_flags(p) + _params.run_flags(p, in_memory)
        try:
            done = run(args, verbose=p["verbose"], binary=binary, names=as_given)
        except DidnmfInputError as e:
            if "give --resume" in str(e):  # the command's words, in this function's
                e.args = (str(e).replace("give --resume", "give --resume (resume=True)"),) + e.args[1:]
            raise
        for line in done.stderr.splitlines():  # the command's warnings (a held-out set too large, ...)
            for prefix in ("sweep: warning: ", "didnmf: warning: "):
                # The unreliable suggestion is warned of below, as a ConvergenceWarning.
                if line.startswith(prefix) and not line.startswith(prefix + "the suggestion is unreliable"):
                    warnings.warn(shown(line[len(prefix):], as_given), UserWarning, stacklevel=2)
        with open(os.path.join(out, "sweep.json"), encoding="utf-8") as f:
            report = json.load(f)
        bases = {}
        for summary in report["ranks_summary"]:
            name = summary.get("consensus_basis")
            if name:
                bases[int(summary["k"])] = np.load(os.path.join(out, name), allow_pickle=False)
        if feature_names is None and report.get("named_features") and bases:
            # A path's names (a 10x directory's, a store's, FILE.features.tsv beside it): the
            # command named the consensus bases' rows by them.
            with open(os.path.join(out, f"consensus_basis_{min(bases)}.tsv"), encoding="utf-8") as f:
                next(f)  # the header
                feature_names = np.asarray([line.rstrip("\n").split("\t", 1)[0] for line in f], dtype=object)
        with open(os.path.join(out, "sweep.png"), "rb") as f:
            png = f.read()
    runs = pd.DataFrame(report["runs"])
    # sweep.json leaves "resumed" out of a run that was run: a column of bools, not NaN.
    runs["resumed"] = runs["resumed"].fillna(False).astype(bool) if "resumed" in runs else False
    ranks_df = pd.DataFrame([{k: v for k, v in s.items() if k != "consensus_basis"} for s in report["ranks_summary"]])
    res = SweepResult(report, runs, ranks_df, bases, png, feature_names)
    if res.unreliable:
        warnings.warn("the suggestion is unreliable: " + res.unreliable, ConvergenceWarning, stacklevel=2)
    return res


def _runs_kept(out):
    """Whether ``out``/runs holds a run's record (the command's journal)."""
    runs = os.path.join(out, "runs")
    return os.path.isdir(runs) and any(n.endswith(".json") and n != "journal.json" for n in os.listdir(runs))


def _kept_input(path, out, resume):
    """Keep the in-memory X written at ``path`` in ``out`` (as input.npy or input.npz) and
    return the kept file's path. A kept file of the same bytes stays as it is: the sweep's
    journal knows its input by path, size and time, so a resumed sweep must read that file.
    Another matrix in its place is refused when runs were made of it (with resume, or
    without: the command would refuse those runs' directory), else replaced."""
    kept = os.path.join(out, os.path.basename(path))
    if os.path.islink(kept) or os.path.lexists(kept) and not os.path.isfile(kept):
        raise ValueError(f"{kept} is not a regular file (a symbolic link, a directory, ...): the sweep keeps X there; remove it, or use another out.")
    others = [n for n in ("input.npy", "input.npz", "input.mtx") if n != os.path.basename(path) and os.path.lexists(os.path.join(out, n))]
    if others and (resume or _runs_kept(out)):
        raise ValueError(
            f"X is not the matrix the sweep in {out} was run on: that sweep kept {others[0]} (a "
            f"{'sparse' if others[0] != 'input.npy' else 'dense'} X); pass the same X, or another out."
        )
    if os.path.isfile(kept):
        if filecmp.cmp(path, kept, shallow=False):
            return kept
        if resume or _runs_kept(out):
            raise ValueError(
                f"X is not the matrix the sweep in {out} was run on ({kept} holds that one): "
                "pass the same X, or another out."
            )
    elif resume:
        raise ValueError(
            f"resume=True: {out} holds no {os.path.basename(kept)}, the matrix a sweep of an "
            "in-memory X keeps there: is out the directory of such a sweep?"
        )
    os.makedirs(out, exist_ok=True)
    # Copied beside it, then renamed over it: a rename replaces a name, never writes through it.
    fd, staging = tempfile.mkstemp(prefix=".input-", dir=out)
    os.close(fd)
    try:
        shutil.copyfile(path, staging)
        os.replace(staging, kept)
    except BaseException:
        if os.path.lexists(staging):
            os.remove(staging)
        raise
    return kept
