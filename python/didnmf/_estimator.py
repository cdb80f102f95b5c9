"""``didnmf.NMF``: scikit-learn's NMF estimator, fitted by the didnmf command.

The parameters are scikit-learn 1.2's ``sklearn.decomposition.NMF`` ones, with their names,
defaults and meanings where didnmf has the same thing, and didnmf's own after them (the
algorithm, shards, in-process nodes or a running cluster and its security options, missing
values, held-out entries, threads, a time limit). ``fit`` writes an in-memory X into a
temporary file (a path is passed through for the nodes to read), runs ``didnmf factorize``
and reads back ``basis.npy`` (``components_`` is its transpose), ``coef.npy`` (W) and
``report.json`` (``report_``).
"""

import json
import os
import tempfile
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted, check_non_negative

from . import _anndata, _params
from ._binary import find_binary
from ._inputs import as_paths, is_path, peek_shape, write_factor, write_matrix
from ._report import reconstruction_err
from ._run import run

__all__ = ["NMF"]

try:  # scikit-learn >= 1.6 (not Debian's 1.2, which the tests run)
    from sklearn.utils.validation import validate_data as _sk_validate_data

    def _validate_data(est, X, allow_nan, **kw):
        return _sk_validate_data(est, X, ensure_all_finite="allow-nan" if allow_nan else True, **kw)

except ImportError:  # scikit-learn 1.2 .. 1.5

    def _validate_data(est, X, allow_nan, **kw):
        return est._validate_data(X, force_all_finite="allow-nan" if allow_nan else True, **kw)


class NMF(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Non-negative matrix factorization X ~ W H by the didnmf command, locally or on a cluster.

    scikit-learn's objective and names: X (n_samples x n_features) is approximated by W
    (n_samples x n_components, what ``transform`` returns) times H (``components_``,
    n_components x n_features); didnmf calls W the coef and H transposed the basis.
    scikit-learn's ``shuffle`` (the order of cd's coordinates) has no counterpart: didnmf's
    algorithms update in a fixed order, which is what makes every run's bits the same.

    Parameters
    ----------
    n_components : int or None, default=None
        The rank; None takes n_features (which didnmf accepts only when
        n_features <= n_samples: it needs n_components <= min(n_samples, n_features)).
    init : {None, 'random', 'nndsvd', 'nndsvda', 'kmeans', 'custom'}, default=None
        The initialisation. None is scikit-learn's rule: 'nndsvda' when n_components <=
        min(n_samples, n_features) (always, as didnmf needs it; but 'random' with
        missing='nan', as the SVD needs every entry), else 'random'. 'custom'
        takes ``W`` and ``H`` given to ``fit``. 'nndsvdar' is not offered (a ValueError says
        what to use). 'kmeans' is didnmf's own.
    solver : {'cd', 'mu'}, default='cd'
        'cd' is DID's coordinate descent (--algo did), 'mu' multiplicative updates.
    beta_loss : float or {'frobenius', 'kullback-leibler', 'itakura-saito'}, default='frobenius'
        The beta-divergence minimised (--loss); other than Frobenius only with 'mu'.
    tol : float, default=1e-4
        Stop when the error fell by less than this fraction over the last 10 iterations
        (--stall-tol, scikit-learn's tol rule); 0 runs exactly max_iter iterations.
    max_iter : int, default=200
        Maximum number of iterations.
    random_state : int, RandomState instance or None, default=None
        The seed (--seed). None draws a fresh one; a RandomState draws one from it. The seed
        used is kept in ``seed_``.
    alpha_W, alpha_H, l1_ratio : as scikit-learn's
        The penalties on W (--alpha-coef) and H (--alpha-basis; 'same' takes alpha_W), scaled
        by n_features and n_samples as scikit-learn does, and their L1 share.
    verbose : int, default=0
        > 0 shows the command's progress on stderr; 0 is silent.
    algo : str or None, default=None
        Any of didnmf's algorithms ('did', 'dbcd', 'bcd', 'hals', 'mu', 'anls', 'admm',
        'dadmm', 'hpc-anls'); overrides solver.
    shards : int, default=1
        Number of shards (distributed algorithms).
    nodes : int, default=0
        Run on this many in-process actor systems talking over loopback (0: not).
    threads : int or None, default=None
        Worker threads of the command (None or 0: all cores).
    time_limit : float, str or None, default=None
        Stop after this many seconds (or a duration such as '10m').
    missing : {None, 'nan'}, default=None
        'nan' reads NaN entries as missing values, fitted around; None refuses NaN.
    test_fraction : float, default=0.0
        Hold this fraction of the entries out of the fit and report their error
        (``report_['test_rel_err2']``).
    value_transform : {'none', 'sqrt'}, default='none'
        What is fitted (--transform): 'none' the values of X, 'sqrt' their square roots, for
        counts, whose noise grows with their mean. W, H, ``reconstruction_err_`` and the
        history are then of sqrt(X), and ``report_['test_rel_err2']`` (with a test_fraction)
        the model's square's against X; ``transform`` reads new data through the same square
        root. (Named so because ``transform`` is the estimator's method.)
    accel : str or tuple, default='off'
        Accelerated DID's inner loops (--accel): 'off' is the plain algorithm; 'auto' the
        command's choice (3,20,0.1 with extrapolation); 'x' extrapolation alone; 'C,B' or 'C,B,eps' (or a tuple) makes at most C coordinate
        sweeps over each row of W and B over H an iteration, each loop stopping once its step
        is below eps (default 0.1) of its first, with no further pass over X. For algo 'did',
        'bcd' and 'hals' ('cd' is 'did'); ``report_['accel']`` says what ran. With
        extrapolation the error can rise for an iteration (an overshoot, undone by a restart):
        a fit that would end on one, at max_iter or by tol, takes up to 5 more iterations to end
        at its lowest error, so ``n_iter_`` can exceed max_iter by that much.
    cluster : str or None, default=None
        'HOST:PORT' of a running cluster's member (comma-separated for several): the job runs
        there. An in-memory X is streamed to the shards; a path is read by the nodes.
    ingest : {None, 'shared', 'stream'}, default=None
        How the cluster's shards get the data; None: 'stream' for in-memory data, 'shared'
        for a path.
    secret_file, tls_ca, tls_cert, tls_key : path or None
        The cluster's secret file, or the mutual-TLS CA, client certificate and key.
    insecure : bool, default=False
        Talk to a cluster run without authentication (--insecure).
    client_bind : str or None
        The IP this client listens on for results from the cluster.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        H, the basis transposed.
    n_components_ : int
    reconstruction_err_ : float
        scikit-learn's: ||X - W H||_F for Frobenius, sqrt(2 D_beta(X | W H)) otherwise; from
        report.json (see didnmf._report), so X is not read again.
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str (when X had column names)
    report_ : dict
        didnmf's report.json: iterations, the stop rule, timings, recoveries, where shards ran.
    seed_ : int
        The seed the fit used.
    """

    def __init__(
        self,
        n_components=None,
        *,
        init=None,
        solver="cd",
        beta_loss="frobenius",
        tol=1e-4,
        max_iter=200,
        random_state=None,
        alpha_W=0.0,
        alpha_H="same",
        l1_ratio=0.0,
        verbose=0,
        algo=None,
        shards=1,
        nodes=0,
        threads=None,
        time_limit=None,
        missing=None,
        test_fraction=0.0,
        value_transform="none",
        accel=_params.DEFAULT_ACCEL,
        cluster=None,
        ingest=None,
        secret_file=None,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        insecure=False,
        client_bind=None,
    ):
        self.n_components = n_components
        self.init = init
        self.solver = solver
        self.beta_loss = beta_loss
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.l1_ratio = l1_ratio
        self.verbose = verbose
        self.algo = algo
        self.shards = shards
        self.nodes = nodes
        self.threads = threads
        self.time_limit = time_limit
        self.missing = missing
        self.test_fraction = test_fraction
        self.value_transform = value_transform
        self.accel = accel
        self.cluster = cluster
        self.ingest = ingest
        self.secret_file = secret_file
        self.tls_ca = tls_ca
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.insecure = insecure
        self.client_bind = client_bind

    # ---- input checks -------------------------------------------------------------------

    def _check_X(self, X, reset):
        """X as scikit-learn's NMF checks it (2-d, float64 or float32, finite unless
        missing='nan', CSR/CSC kept sparse, at least one sample and feature, nonnegative).
        Small integers (bool, 8- and 16-bit: pixels, small counts) become float32, exact, so
        the file the command reads is half the size; other types float64, as in
        scikit-learn."""
        try:
            X = _validate_data(
                self,
                X,
                accept_sparse=("csr", "csc"),
                dtype=_float_dtypes(X),
                allow_nan=self.missing == "nan",
                reset=reset,
            )
        except ValueError as e:
            if "contains NaN" in str(e) and self.missing != "nan":
                raise ValueError(f"{e}\ndidnmf fits around NaN entries as missing values with missing='nan'.") from None
            raise
        if self.missing == "nan":
            data = X.data if sp.issparse(X) else X
            if data.size and np.nanmin(data, initial=np.inf) < 0:
                raise ValueError("Negative values in data passed to NMF (input X)")
        else:
            check_non_negative(X, "NMF (input X)")
        return X

    def _forget_input_names(self, n_features):
        """For a path input: no column names; n_features_in_ from the command's report."""
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_features_in_ = n_features

    # ---- fitting ------------------------------------------------------------------------

    def fit(self, X, y=None, W=None, H=None):
        """Learn an NMF model of X (see ``fit_transform``); return self."""
        self.fit_transform(X, W=W, H=H)
        return self

    def fit_transform(self, X, y=None, W=None, H=None):
        """Learn an NMF model of X and return W (n_samples x n_components).

        X : array-like or scipy sparse matrix (n_samples x n_features), a pandas DataFrame
            (its columns become ``feature_names_in_``), a path (str or PathLike) or a list of
            paths to input files the command reads (stacked as more samples), or an AnnData
            (its X; var_names become ``feature_names_in_``, and the results are written back
            into it: see ``didnmf.fit_anndata`` for a layer and the keys).
        W, H : initial W (n_samples x n_components) and H (n_components x n_features), used
            with init='custom'.
        """
        p = _params.check_params(self)
        if _anndata.is_anndata(X):
            return _anndata.fit_transform(self, X, W=W, H=H)
        if is_path(X):
            paths = as_paths(X)
            return self._fit_source(p, inputs=paths, X=None, shape=peek_shape(paths), W=W, H=H)
        X = self._check_X(X, reset=True)
        return self._fit_source(p, inputs=None, X=X, shape=X.shape, W=W, H=H)

    def _fit_source(self, p, inputs, X, shape, W=None, H=None):
        """Fit on ``inputs`` (paths the command reads) or on X (written to a temporary file). shape is
        (n_samples, n_features) when known before the run. Sets the fitted attributes and
        returns W. (The AnnData support calls this too.)"""
        K = p["n_components"]
        if K is None:
            if shape is None:
                raise ValueError(
                    f"n_components=None takes the number of features, which is not read here from "
                    f"{', '.join(inputs)}: give n_components"
                )
            K = shape[1]
        if shape is not None and K > min(shape):
            raise ValueError(
                f"n_components={K} must be at most min(n_samples, n_features) = "
                f"min({shape[0]}, {shape[1]}) = {min(shape)}: didnmf factorizes at ranks up to that"
            )
        init = _params.resolve_init(p["init"], p["missing"], p["test_fraction"])
        if init == "custom":
            W, H = self._check_custom(W, H, K, shape)
        algo = _params.algo_of(p)
        if algo == "mu" and init == "nndsvd":
            warnings.warn(
                "The multiplicative update ('mu') solver cannot update zeros present in the "
                "initialization, and so leads to poorer results when used jointly with "
                "init='nndsvd'. You may try init='nndsvda' instead.",
                UserWarning,
            )
        seed = _params.resolve_seed(p["random_state"])
        binary = find_binary()
        with tempfile.TemporaryDirectory(prefix="didnmf-") as tmp:
            in_memory = inputs is None
            if in_memory:
                inputs = [write_matrix(X, tmp, binary)]
            out = os.path.join(tmp, "out")
            args = ["factorize"]
            for path in inputs:
                args += ["--input", path]
            args += ["--rank", K, "--out", out, "--seed", seed, "--init", init]
            if init == "custom":
                args += ["--init-basis", write_factor(H.T, tmp, "init_basis")]
                args += ["--init-coef", write_factor(W, tmp, "init_coef")]
            args += _params.model_flags(p) + _params.run_flags(p, in_memory)
            run(args, verbose=p["verbose"], binary=binary)
            basis, coef, report = _read_result(out)
        self.components_ = np.ascontiguousarray(basis.T)
        self.n_components_ = basis.shape[1]
        self.n_iter_ = int(report["iterations"])
        self.report_ = report
        self.seed_ = seed
        if not in_memory:
            self._forget_input_names(int(report["m"]))
        self.reconstruction_err_ = reconstruction_err(report, coef, self.components_)
        if report.get("stop_reason") == "max-iter" and p["tol"] > 0:
            warnings.warn(
                "Maximum number of iterations %d reached. Increase it to improve convergence."
                % p["max_iter"],
                ConvergenceWarning,
            )
        return coef

    def _check_custom(self, W, H, K, shape):
        """W and H for init='custom', checked as scikit-learn checks them."""
        if W is None or H is None:
            raise ValueError("init='custom' needs both W and H given to fit")
        checked = []
        for A, name, want in (
            (H, "NMF (input H)", (K, shape[1]) if shape else None),
            (W, "NMF (input W)", (shape[0], K) if shape else None),
        ):
            A = check_array(A, dtype=[np.float64, np.float32])
            if want is not None and A.shape != want:
                raise ValueError(
                    f"Array with wrong shape passed to {name}. Expected {want}, but got {A.shape} "
                )
            check_non_negative(A, name)
            if np.max(A) == 0:
                raise ValueError(f"Array passed to {name} is full of zeros.")
            checked.append(A)
        H, W = checked
        if W.shape[1] != H.shape[0]:
            raise ValueError(f"W has {W.shape[1]} columns and H {H.shape[0]} rows: they must both be n_components")
        return W, H

    # ---- using the model ----------------------------------------------------------------

    def transform(self, X):
        """W for new samples X (n_samples x n_features, or a path), by ``didnmf transform``:
        the exact nonnegative least squares of every sample on components_ (scikit-learn
        approximates it by its solver), with alpha_W's penalty. Frobenius loss only."""
        check_is_fitted(self)
        p = _params.check_params(self)
        if _params.beta_value(p["beta_loss"]) != 2:
            raise ValueError(
                f"transform with beta_loss={p['beta_loss']!r}: didnmf transform solves W by "
                "nonnegative least squares (the Frobenius loss) only"
            )
        if _anndata.is_anndata(X):
            return _anndata.transform(self, X)
        if is_path(X):
            inputs, X = as_paths(X), None
        else:
            inputs, X = None, self._check_X(X, reset=False)
        return self._transform_source(p, inputs, X)

    def _transform_source(self, p, inputs, X):
        """Run didnmf transform on ``inputs`` (paths) or X (written to a temporary file).
        Each sample's W is solved on its own, so any number of samples works, one included."""
        binary = find_binary()
        with tempfile.TemporaryDirectory(prefix="didnmf-") as tmp:
            in_memory = inputs is None
            if in_memory:
                inputs = [write_matrix(X, tmp, binary)]
            out = os.path.join(tmp, "out")
            args = ["transform", "--basis", write_factor(self.components_.T, tmp, "basis")]
            for path in inputs:
                args += ["--input", path]
            args += ["--out", out] + _params.transform_flags(p) + _params.run_flags(p, in_memory, fit=False)
            run(args, verbose=p["verbose"], binary=binary)
            return np.load(os.path.join(out, "coef.npy"), allow_pickle=False)

    def inverse_transform(self, W):
        """X reconstructed from W: ``W @ components_``."""
        check_is_fitted(self)
        return W @ self.components_

    @property
    def _n_features_out(self):
        """Number of transformed output features (for get_feature_names_out)."""
        return self.components_.shape[0]

    def plot(self, kind="basis", out=None):
        """Draw the fitted model with ``didnmf plot``: kind='basis' (the basis as images when
        the features are pixels, else each component's top features, named by
        feature_names_in_) or 'convergence' (the error against iteration and time).

        Returns an IPython.display.Image when IPython is importable (shown inline in a
        notebook), else the PNG's path. ``out``: a directory to keep the pictures (PNG and
        SVG) in; by default they are drawn in a temporary directory (kept when the path is
        returned)."""
        check_is_fitted(self)
        from ._plot import plot_model

        names = getattr(self, "feature_names_in_", None)
        return plot_model(self.report_, self.components_, names, kind=kind, out=out, verbose=self.verbose)

    def _more_tags(self):
        # W is float64 whatever X's dtype (the command's factors are float64).
        return {"requires_positive_X": True, "preserves_dtype": [np.float64]}

    def __sklearn_tags__(self):  # scikit-learn >= 1.6's form of _more_tags
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


def _float_dtypes(X):
    """check_array's dtype list for X: float32 first for small integer types (every value
    exact in float32, and the command stores them as float32 anyway), float64 first
    otherwise (a float32 X stays float32 either way)."""
    dtype = getattr(X, "dtype", None)
    try:
        small = dtype is not None and np.dtype(dtype).kind in "biu" and np.dtype(dtype).itemsize <= 2
    except TypeError:  # pandas extension dtypes and the like
        small = False
    return [np.float32, np.float64] if small else [np.float64, np.float32]


def _read_result(out):
    """basis.npy, coef.npy and report.json of a result directory."""
    basis = np.load(os.path.join(out, "basis.npy"), allow_pickle=False)
    coef = np.load(os.path.join(out, "coef.npy"), allow_pickle=False)
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    return basis, coef, report
