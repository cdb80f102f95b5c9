"""value_transform: the estimator fits sqrt(X) of counts (the command's --transform sqrt): the
same bits as a fit of np.sqrt(X), new data read through the same square root, the test error
on the counts' scale, and a bad value is a ValueError naming the parameter. (transform of an
estimator with a test_fraction used to pass --test-fraction to the transform job, which
refused it.)"""

import numpy as np
import pytest

import didnmf


@pytest.fixture
def counts():
    return np.random.default_rng(5).poisson(3.0, size=(200, 12)).astype(np.float64)


def test_sqrt_is_the_fit_of_the_square_roots(counts):
    kw = dict(n_components=3, test_fraction=0.1, random_state=1, max_iter=50)
    a = didnmf.NMF(value_transform="sqrt", **kw)
    Wa = a.fit_transform(counts)
    b = didnmf.NMF(**kw)
    Wb = b.fit_transform(np.sqrt(counts))
    assert a.report_["transform"] == "sqrt" and "transform" not in b.report_
    assert np.array_equal(a.components_, b.components_) and np.array_equal(Wa, Wb)
    # The held-out error is the model's square's against the counts, not sqrt(X)'s.
    assert a.report_["test_rel_err2"] != b.report_["test_rel_err2"]
    assert np.array_equal(a.transform(counts[:20]), b.transform(np.sqrt(counts[:20])))


@pytest.mark.parametrize("value", ["log", "", None, 1])
def test_bad_value_transform_names_the_parameter(counts, value):
    with pytest.raises(ValueError, match="The 'value_transform' parameter of NMF must be 'none' or 'sqrt'"):
        didnmf.NMF(2, value_transform=value).fit(counts)
