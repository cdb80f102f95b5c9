"""didnmf.NMF is a scikit-learn estimator: check_estimator's checks, the further API checks
scikit-learn runs on its own estimators, and use inside Pipeline and GridSearchCV."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.decomposition import NMF as SklearnNMF
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import didnmf

# Every check of check_estimator runs, none skipped or xfailed. As for scikit-learn's own NMF,
# the estimator is checked with max_iter=500: scikit-learn's test suite sets that for NMF
# (sklearn/utils/estimator_checks.py, _set_checking_parameters), because at the default 200
# iterations check_transformer_general's 30 x 3 blobs are not fitted closely enough for
# fit_transform and transform to agree to 1e-2 -- by scikit-learn's NMF either
# (test_sklearn_nmf_needs_500_iterations_too below).
CHECKED = didnmf.NMF(max_iter=500)


@parametrize_with_checks([CHECKED])
def test_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on the checks' tiny data
        check(estimator)


def test_sklearn_nmf_needs_500_iterations_too():
    """The reason for max_iter=500 above: at 200 iterations scikit-learn's own NMF fails the
    same check, and so does ours; at 500 both pass (test_check_estimator)."""
    for est in (SklearnNMF(), didnmf.NMF()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(AssertionError, match="fit_transform and transform outcomes not consistent"):
                estimator_checks.check_transformer_general(type(est).__name__, est)


# The checks scikit-learn 1.2 runs on its own estimators beyond check_estimator
# (sklearn/tests/test_common.py), all but check_param_validation: that one tests the
# _parameter_constraints dictionary of scikit-learn's private validation framework, which
# only scikit-learn's own estimators declare; didnmf checks its parameters itself, with
# messages in the same form (test_parameter_errors_read_as_scikit_learns).
EXTRA_CHECKS = [
    "check_n_features_in_after_fitting",
    "check_dataframe_column_names_consistency",
    "check_transformer_get_feature_names_out",
    "check_transformer_get_feature_names_out_pandas",
    "check_get_feature_names_out_error",
    "check_set_output_transform",
    "check_global_ouptut_transform_pandas",
]


@pytest.mark.parametrize("name", EXTRA_CHECKS)
def test_further_api_checks(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(estimator_checks, name)("NMF", clone(CHECKED))


@pytest.mark.parametrize(
    "params,message",
    [
        ({"n_components": 0}, "The 'n_components' parameter of NMF must be an int in the range [1, inf) or None. Got 0 instead."),
        ({"tol": -1}, "The 'tol' parameter of NMF must be a float in the range [0, inf). Got -1 instead."),
        ({"solver": "lbfgs"}, "The 'solver' parameter of NMF must be one of 'cd', 'mu'. Got 'lbfgs' instead."),
        ({"l1_ratio": 2}, "The 'l1_ratio' parameter of NMF must be a float in the range [0, 1]. Got 2 instead."),
        ({"init": "nndsvdar"}, "init='nndsvdar' is not offered by didnmf: use init='nndsvda'"),
        ({"beta_loss": "kullback-leibler"}, "Invalid beta_loss parameter: solver 'cd' does not handle beta_loss = 'kullback-leibler'"),
        ({"algo": "hals", "solver": "mu", "beta_loss": 1}, "algo 'hals' does not handle beta_loss = 1"),
        ({"algo": "svd"}, "The 'algo' parameter of NMF must be None or one of 'did'"),
        ({"missing": "zero"}, "The 'missing' parameter of NMF must be None or 'nan'. Got 'zero' instead."),
        ({"time_limit": -3}, "The 'time_limit' parameter of NMF must be None, a number of seconds > 0"),
    ],
)
def test_parameter_errors_read_as_scikit_learns(params, message):
    X = np.abs(np.random.default_rng(0).random((10, 4)))
    with pytest.raises(ValueError, match=re.escape(message)):
        didnmf.NMF(**params).fit(X)


def test_pipeline_and_grid_search_on_digits():
    X, y = load_digits(return_X_y=True)
    pipe = Pipeline(
        [("nmf", didnmf.NMF(random_state=0, max_iter=100)), ("clf", LogisticRegression(max_iter=2000))]
    )
    grid = GridSearchCV(pipe, {"nmf__n_components": [4, 16]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid.fit(X, y)
    assert grid.best_params_ == {"nmf__n_components": 16}
    scores = grid.cv_results_["mean_test_score"]
    # scikit-learn's NMF in the same pipeline and folds scores 0.659 and 0.750 (unshuffled
    # 3-fold digits is hard); ours 0.659 and 0.774.
    assert scores[0] > 0.6 and scores[1] > 0.72 and scores[1] > scores[0] + 0.05, scores
    assert grid.best_estimator_.named_steps["nmf"].components_.shape == (16, 64)
    assert grid.predict(X[:5]).shape == (5,)


def test_dataframe_names():
    X, _ = load_digits(return_X_y=True)
    df = pd.DataFrame(X[:, :16] + 0.0, columns=[f"px{i}" for i in range(16)])
    est = didnmf.NMF(n_components=3, random_state=0).fit(df)
    assert list(est.feature_names_in_) == list(df.columns)
    assert list(est.get_feature_names_out()) == ["nmf0", "nmf1", "nmf2"]
    est.set_output(transform="pandas")
    out = est.transform(df)
    assert list(out.columns) == ["nmf0", "nmf1", "nmf2"]
