"""didnmf: distributed, fault-tolerant NMF behind a scikit-learn estimator.

``didnmf.NMF`` is scikit-learn's NMF (same parameters, attributes and methods) fitted by the
``didnmf`` command, in this process's machine or on a running cluster; ``didnmf.sweep``
chooses the rank; ``didnmf.consensus`` combines a sweep's runs at one rank as cNMF does; ``didnmf.fit_anndata`` fits an AnnData and writes the results back into it;
``didnmf.convert`` turns an ``.h5ad`` or 10x ``.h5`` into a store the command reads. numpy and
scipy (and scikit-learn for the estimator) are all this package imports; pandas only when a
sweep runs, h5py only when a file is converted.
"""

from ._anndata import fit_anndata
from ._binary import BinaryNotFoundError, find_binary
from ._consensus import ConsensusResult, consensus
from ._convert import convert
from ._estimator import NMF
from ._run import DidnmfError, DidnmfInputError
from ._sweep import SweepResult, sweep

__version__ = "0.1.0"

__all__ = [
    "NMF",
    "fit_anndata",
    "convert",
    "sweep",
    "SweepResult",
    "consensus",
    "ConsensusResult",
    "DidnmfError",
    "DidnmfInputError",
    "BinaryNotFoundError",
    "find_binary",
    "__version__",
]
