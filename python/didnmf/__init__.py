"""didnmf: distributed, fault-tolerant NMF behind a scikit-learn estimator.

``didnmf.NMF`` is scikit-learn's NMF (same parameters, attributes and methods) fitted by the
``didnmf`` command, in this process's machine or on a running cluster; ``didnmf.sweep``
chooses the rank. numpy and scipy (and scikit-learn for the estimator) are all this package
imports; pandas only when a sweep runs.
"""

from ._binary import BinaryNotFoundError, find_binary
from ._estimator import NMF
from ._run import DidnmfError, DidnmfInputError
from ._sweep import SweepResult, sweep

__version__ = "0.1.0"

__all__ = [
    "NMF",
    "sweep",
    "SweepResult",
    "DidnmfError",
    "DidnmfInputError",
    "BinaryNotFoundError",
    "find_binary",
    "__version__",
]
