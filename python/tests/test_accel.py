"""accel: accelerated DID's inner loops, from the estimator and sweep to the command's --accel,
recorded in report_; a bad setting is a ValueError naming the parameter (here, or from the
command's exit status 2)."""

import os

import numpy as np
import pytest

import didnmf
from didnmf import _params, _sweep

# The command's table of --accel forms (kernels' TestAccelForms reads it too).
FORMS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "kernels", "testdata", "accel_forms.tsv")


def _forms():
    with open(FORMS, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if not line.startswith("#")]


@pytest.mark.parametrize("form, setting", _forms())
def test_accel_forms_agree_with_the_command(form, setting):
    """A form the command reads, accel_flag passes on; one it refuses, accel_flag refuses."""
    if setting == "-":
        with pytest.raises(ValueError, match="The 'accel' parameter of NMF must be"):
            _params.accel_flag(form)
    else:
        assert _params.accel_flag(form)


@pytest.fixture
def small():
    return np.random.default_rng(3).random((60, 8))


def test_default_is_off_and_passed(small):
    est = didnmf.NMF(2)
    assert est.get_params()["accel"] == "off" == _params.DEFAULT_ACCEL
    flags = _params.model_flags(_params.check_params(est))
    i = flags.index("--accel")
    assert flags[i + 1] == "off"


@pytest.mark.parametrize(
    "accel, flag",
    [("off", "off"), ("auto", "auto"), ("2,4", "2,4"), (" 3, 5, 0.1 ", "3,5,0.1"), ((2, 4), "2,4"), ((2, 4, 0.25), "2,4,0.25"), (["3", "5", "0.5"], "3,5,0.5"), ("x", "x"), ("3,5,x", "3,5,x"), ((2, 4, 0.25, "x"), "2,4,0.25,x")],
)
def test_accel_flag_forms(accel, flag):
    assert _params.accel_flag(accel) == flag


@pytest.mark.parametrize("accel", ["fast", "", "3", "3,5,0.1,2", "0,5", "101,5", "3,5,1", "3,5,nan", (3.5, 5), (3, 5, True), 5, None,
                                   # the command's grammar: no other names, ASCII digits, no underscores, a decimal eps
                                   "on", "none", "\uff13,5", "1_0,5", "3,5,0_1", "3,5,0x1p-3", ("\uff13", 5), (3, 5, "1e-1_0")])
def test_bad_accel_names_the_parameter(small, accel):
    with pytest.raises(ValueError, match="The 'accel' parameter of NMF must be"):
        didnmf.NMF(2, accel=accel).fit(small)


@pytest.mark.parametrize("accel, recorded", [("off", "off"), ("auto", "auto"), ((2, 4, 0.25), "2,4,0.25"), ("3,20,0.1,x", "auto"), ("x", "x")])
def test_report_records_the_accel(small, accel, recorded):
    est = didnmf.NMF(2, accel=accel, random_state=0, max_iter=5, tol=0).fit(small)
    assert est.report_["accel"] == recorded
    # An extrapolating run whose 5th iteration overshoots takes up to 5 more, to end at its
    # lowest error (the command's --accel help).
    extrapolates = recorded in ("auto", "x")
    assert (5 <= est.n_iter_ <= 10 if extrapolates else est.n_iter_ == 5) and np.isfinite(est.components_).all()


def test_hals_and_bcd_take_accel(small):
    for algo in ("hals", "bcd"):
        est = didnmf.NMF(2, algo=algo, accel="3,5", random_state=0, max_iter=3, tol=0).fit(small)
        assert est.report_["algo"] == algo and est.report_["accel"] == "3,5,0.1"


def test_an_algorithm_without_inner_loops_is_refused(small):
    with pytest.raises(ValueError, match=r"--algo mu has no accelerated inner loops \(--accel auto\): the algorithms that have are did, bcd, hals"):
        didnmf.NMF(2, solver="mu", accel="auto").fit(small)


def test_sweep_passes_accel(small, monkeypatch):
    seen = []

    class Stop(Exception):
        pass

    def fake_run(args, **kw):
        seen.append([str(a) for a in args])
        raise Stop

    monkeypatch.setattr(_sweep, "run", fake_run)
    with pytest.raises(Stop):
        didnmf.sweep(small, ranks=[2], seeds=1, accel=(2, 5))
    args = seen[0]
    assert args[0] == "sweep" and args[args.index("--accel") + 1] == "2,5"
    with pytest.raises(ValueError, match="The 'accel' parameter of sweep must be"):
        didnmf.sweep(small, ranks=[2], seeds=1, accel="sometimes")
