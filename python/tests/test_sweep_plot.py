"""didnmf.sweep against the sweep command, and the pictures of .plot()."""

import os
import re
import shutil
import sys
import types

import numpy as np
import pandas as pd
import pytest

import didnmf

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def fake_ipython(monkeypatch):
    """An IPython.display whose Image records what it was given (IPython is not a Debian
    dependency of the package; the notebook path is tested through this stand-in)."""

    class Image:
        def __init__(self, data=None, format=None):
            self.data, self.format = data, format

    display = types.ModuleType("IPython.display")
    display.Image = Image
    ipython = types.ModuleType("IPython")
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    return Image


def test_sweep_matches_the_command(counts, tmp_path, cli):
    # The defaults are the command's: cross-validated, one fold per seed.
    res = didnmf.sweep(counts, ranks=[3, 5, 7], seeds=2)
    assert isinstance(res.runs, pd.DataFrame) and len(res.runs) == 6
    assert list(res.runs["k"]) == [3, 3, 5, 5, 7, 7] and list(res.runs["seed"]) == [1, 2] * 3
    assert list(res.runs["fold"]) == [0, 1] * 3 and list(res.runs["test_seed"]) == [1, 2] * 3
    assert res.runs["test_rel_err2"].notna().all()
    assert list(res.ranks["k"]) == [3, 5, 7] and "stability_silhouette" in res.ranks
    assert list(res.ranks["folds"]) == [2, 2, 2] and res.folds == 2
    assert res.rule and res.rule_name == "cv-paired-one-se"
    assert (res.suggested_rank is None) == res.cannot_tell == bool(res.reason)
    assert res.suggested_rank in (None, 3, 5, 7) and isinstance(res.unreliable, str)
    assert res.png.startswith(PNG)
    np.save(tmp_path / "x.npy", counts)
    out = tmp_path / "cli"
    cli("sweep", "--input", tmp_path / "x.npy", "--ranks", "3,5,7", "--seeds", 2, "--out", out, "--quiet")
    for k in (3, 5, 7):
        want = np.load(out / f"consensus_basis_{k}.npy")
        assert res.consensus_bases[k].shape == (40, k)
        assert res.consensus_bases[k].tobytes() == want.tobytes()
    table = pd.read_csv(out / "sweep.tsv", sep="\t")
    np.testing.assert_allclose(res.runs["train_rel_err2"], table["train_rel_err2"], rtol=1e-6)
    assert list(res.runs["iterations"]) == list(table["iterations"])


def test_sweep_names(counts):
    """A DataFrame's columns name the consensus bases' rows; an array has none."""
    genes = [f"gene{i}" for i in range(counts.shape[1])]
    res = didnmf.sweep(pd.DataFrame(counts, columns=genes), ranks=[3], seeds=2, max_iter=50)
    assert list(res.feature_names) == genes
    frame = res.consensus_frame(3)
    assert list(frame.index) == genes and list(frame.columns) == ["component_1", "component_2", "component_3"]
    assert frame.to_numpy().tobytes() == res.consensus_bases[3].tobytes()
    assert res.ranks["poor_fits"].map(len).tolist() == [0]
    plain = didnmf.sweep(counts, ranks=[3], seeds=2, max_iter=50)
    assert plain.feature_names is None and list(plain.consensus_frame(3).index) == list(range(counts.shape[1]))
    with pytest.raises(ValueError, match="k must be a rank of the sweep"):
        plain.consensus_frame(4)


def test_sweep_out_files_carry_a_dataframes_names(counts, tmp_path):
    """The .tsv files in out are named by a DataFrame's columns, as the result is; a name
    the command's names files cannot hold is refused before anything is run or kept, as
    didnmf.consensus refuses it, with the same message."""
    genes = [f"gene{i}" for i in range(counts.shape[1])]
    df = pd.DataFrame(counts, columns=genes)
    out = tmp_path / "sw"
    res = didnmf.sweep(df, ranks=[3], seeds=2, max_iter=50, out=out)
    basis = pd.read_csv(out / "consensus_basis_3.tsv", sep="\t", index_col=0)
    assert list(basis.index) == genes == list(res.consensus_frame(3).index)
    np.testing.assert_allclose(basis.to_numpy(), res.consensus_bases[3], rtol=1e-12)
    top = pd.read_csv(out / "top_features_3.tsv", sep="\t")
    assert len(top) and set(top["feature"]) <= set(genes)
    bad = df.rename(columns={"gene3": "a\tb"})
    with pytest.raises(ValueError, match=r"feature name 3 \('a\\tb'\) holds a tab or a line break") as swept:
        didnmf.sweep(bad, ranks=[3], seeds=2, max_iter=50, out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError) as consensed:
        didnmf.consensus(bad, out, 3)
    assert str(swept.value) == str(consensed.value)
    with pytest.raises(ValueError, match=r"feature name 5 \('g\\nh'\) holds a tab or a line break"):
        didnmf.sweep(df.rename(columns={"gene5": "g\nh"}), ranks=[3], seeds=2, max_iter=50)
    # Other control characters and broken Unicode, which the command refuses too, are
    # refused here, before anything is kept in out (a recheck: an escape went through to the
    # command, whose error named a names file the user never saw).
    for name, why in [("g\x1b[31m", "holds the control character U+001B"), ("g\x85", "holds the control character U+0085"),
                      ("g\x7f", "holds the control character U+007F"), ("g\ud800", "is not valid Unicode")]:
        with pytest.raises(ValueError, match=r"feature name 4 .* " + re.escape(why)):
            didnmf.sweep(df.rename(columns={"gene4": name}), ranks=[3], seeds=2, max_iter=50, out=tmp_path / "ctl")
        assert not (tmp_path / "ctl").exists()


def test_sweep_errors_name_an_in_memory_x(counts):
    """The command's errors name an in-memory X as what the user gave, not the temporary file
    it was written to."""
    with pytest.raises(didnmf.DidnmfInputError, match=r"--ranks: rank 3 out of range: .* for X \(in memory\) \(2 samples x 40 features\)") as e:
        didnmf.sweep(counts[:2], ranks=[3], seeds=2)
    assert "didnmf-sweep-" not in str(e.value)


def test_sweep_of_a_path_keeps_its_names(counts, tmp_path):
    """A path whose names sit beside it (FILE.features.tsv, as the command reads them) names
    the consensus bases' rows, as the command's consensus_basis_K.tsv does."""
    np.save(tmp_path / "x.npy", counts)
    genes = [f"g{i}" for i in range(counts.shape[1])]
    (tmp_path / "x.features.tsv").write_text("".join(g + "\n" for g in genes))
    res = didnmf.sweep(str(tmp_path / "x.npy"), ranks=[3], seeds=2, max_iter=50, out=tmp_path / "sw")
    assert list(res.feature_names) == genes and list(res.consensus_frame(3).index) == genes
    top = pd.read_csv(tmp_path / "sw" / "top_features_3.tsv", sep="\t")
    assert set(top["feature"]) <= set(genes)


def test_sweep_resume(counts, tmp_path):
    """An interrupted sweep of an in-memory X goes on with resume=True: X is kept in out, the
    kept runs are not run again, and the result is the uninterrupted sweep's, bit for bit."""
    out = tmp_path / "sw"
    whole = didnmf.sweep(counts, ranks=[3, 4], seeds=2, max_iter=60, out=out)
    kept = out / "input.npy"
    assert np.load(kept).tobytes() == counts.tobytes()
    # Lose two runs, as an interrupt would.
    for name in ("k4-seed2-fold1", "k3-seed1-fold0"):
        (out / "runs" / f"{name}.json").unlink()
    with pytest.raises(didnmf.DidnmfInputError, match=r"give --resume \(resume=True\)"):
        didnmf.sweep(counts, ranks=[3, 4], seeds=2, max_iter=60, out=out)
    assert np.load(kept).tobytes() == counts.tobytes()  # refused: nothing replaced
    again = didnmf.sweep(counts, ranks=[3, 4], seeds=2, max_iter=60, out=out, resume=True)
    assert list(again.runs["resumed"]) == [False, True, True, False]
    for k in (3, 4):
        assert again.consensus_bases[k].tobytes() == whole.consensus_bases[k].tobytes()
    assert list(again.runs["test_rel_err2"]) == list(whole.runs["test_rel_err2"])
    other = counts.copy()
    other[0, 0] += 1
    with pytest.raises(ValueError, match="X is not the matrix the sweep in .* was run on"):
        didnmf.sweep(other, ranks=[3, 4], seeds=2, max_iter=60, out=out, resume=True)
    with pytest.raises(ValueError, match="resume=True needs out"):
        didnmf.sweep(counts, ranks=[3], resume=True)
    with pytest.raises(ValueError, match="holds no input.npy"):
        didnmf.sweep(counts, ranks=[3], out=tmp_path / "empty", resume=True)
    # A symbolic link in place of the kept file is refused, and its target untouched.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "input.npy").symlink_to(victim)
    with pytest.raises(ValueError, match="is not a regular file"):
        didnmf.sweep(counts, ranks=[3], out=linked)
    assert victim.read_text() == "keep"
    # A sparse X against a dense sweep's directory names what that sweep kept.
    import scipy.sparse
    with pytest.raises(ValueError, match="that sweep kept input.npy \\(a dense X\\)"):
        didnmf.sweep(scipy.sparse.csr_matrix(counts), ranks=[3, 4], seeds=2, max_iter=60, out=out, resume=True)


def test_sweep_cannot_tell(tmp_path):
    """On noise the sweep cannot tell: suggested_rank None, with the reason."""
    rng = np.random.default_rng(3)
    res = didnmf.sweep(rng.random((300, 20)), ranks="1:4", seeds=3)
    assert res.cannot_tell and res.suggested_rank is None and "below the noise" in res.reason
    assert res.report["cannot_tell"] and res.report["suggested_k"] == 0


def test_sweep_folds_and_no_test_set(counts):
    res = didnmf.sweep(counts, ranks=[2, 3], seeds=4, folds=2, max_iter=50)
    assert list(res.runs["fold"]) == [0, 1, 0, 1] * 2 and res.folds == 2
    plain = didnmf.sweep(counts, ranks=[2, 3], seeds=2, test_fraction=0)
    assert plain.folds == 1 and "test_rel_err2" not in plain.runs and plain.rule_name == "stability"
    with pytest.raises(ValueError, match="folds must be None or an int between 1 and seeds"):
        didnmf.sweep(counts, ranks=[2], seeds=2, folds=3)


def test_sweep_ranks_forms(counts):
    assert len(didnmf.sweep(counts, ranks="2:4", seeds=1).ranks) == 3
    with pytest.raises(ValueError, match="ranks must be"):
        didnmf.sweep(counts, ranks=[2, "x"])
    with pytest.raises(ValueError, match="seeds must be an int >= 1"):
        didnmf.sweep(counts, ranks=[2], seeds=0)
    with pytest.raises(ValueError, match="seeds must be an int >= 1"):
        didnmf.sweep(counts, ranks=[2], seeds=True)
    with pytest.raises(ValueError, match="seed must be an int >= 0 whose 2 seeds stay below 2"):
        didnmf.sweep(counts, ranks=[2], seeds=2, seed=2**63 - 1)


def test_sweep_plot(counts, tmp_path, fake_ipython):
    res = didnmf.sweep(counts, ranks=[2, 3], seeds=2)
    img = res.plot()
    assert isinstance(img, fake_ipython) and img.data == res.png
    path = res.plot(out=tmp_path / "pics")  # a directory asked for: written there too
    assert isinstance(path, fake_ipython) and (tmp_path / "pics" / "sweep.png").read_bytes() == res.png


def test_sweep_plot_without_ipython(counts, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)  # import IPython raises ImportError
    res = didnmf.sweep(counts, ranks=[2, 3], seeds=2)
    path = res.plot(out=tmp_path)
    assert path == str(tmp_path / "sweep.png")
    with open(path, "rb") as f:
        assert f.read() == res.png


def test_estimator_plot(counts, tmp_path, monkeypatch, fake_ipython):
    df = pd.DataFrame(counts, columns=[f"gene{i}" for i in range(40)])
    est = didnmf.NMF(4, random_state=0).fit(df)
    img = est.plot()
    assert isinstance(img, fake_ipython) and img.data.startswith(PNG)
    conv = est.plot(kind="convergence", out=tmp_path)
    assert conv.data.startswith(PNG) and (tmp_path / "convergence.png").exists() and (tmp_path / "basis.svg").exists()
    svg = (tmp_path / "basis.svg").read_text()
    assert "gene" in svg, "the top features are labelled with the DataFrame's column names"
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    path = est.plot()
    with open(path, "rb") as f:
        assert f.read().startswith(PNG)
    shutil.rmtree(os.path.dirname(path))  # a returned path is the caller's to remove
    with pytest.raises(ValueError, match="kind must be one of"):
        est.plot(kind="heatmap")


def test_sweep_parameter_errors_name_sweep(counts):
    with pytest.raises(ValueError, match=r"The 'max_iter' parameter of sweep must be an int in the range \[1, inf\)"):
        didnmf.sweep(counts, ranks=[2], max_iter=0)


def test_sweep_transform(counts):
    raw = didnmf.sweep(counts, ranks=[2, 3], seeds=2, max_iter=50)
    sq = didnmf.sweep(counts, ranks=[2, 3], seeds=2, max_iter=50, transform="sqrt")
    assert raw.report["transform"] == "none" and sq.report["transform"] == "sqrt"
    assert not np.allclose(raw.runs["test_rel_err2"], sq.runs["test_rel_err2"])
    with pytest.raises(ValueError, match="transform must be 'none' or 'sqrt'"):
        didnmf.sweep(counts, ranks=[2], transform="log")


def test_sweep_warns_when_the_suggestion_is_unreliable(counts):
    # Every run stops at max_iter=5: the suggestion stands (suggested_rank is set unless the
    # sweep cannot tell), and a ConvergenceWarning (a UserWarning) says of it what the
    # command's console says.
    from sklearn.exceptions import ConvergenceWarning

    unreliable = r"^the suggestion is unreliable: \d+ of 4 runs .* stopped at the iteration cap"
    with pytest.warns(ConvergenceWarning, match=unreliable) as caught:
        res = didnmf.sweep(counts, ranks=[2, 3], seeds=2, max_iter=5)
    assert res.unreliable and res.unreliable in str(caught[0].message)
    assert issubclass(caught[0].category, UserWarning)
    assert caught[0].filename == __file__, "the warning points at the caller's line"


def test_sweep_warns_of_a_held_out_set_too_large(counts):
    """The command's warnings reach Python as UserWarnings (a recheck: test_fraction=0.99
    warned on the command line only, and Python suggested a rank in silence)."""
    with pytest.warns(UserWarning, match=r"--test-fraction 0.99 leaves each sample about"):
        didnmf.sweep(counts, ranks="2:3", seeds=2, max_iter=30, test_fraction=0.99)
