"""didnmf.consensus against the consensus and transform commands."""

import warnings

import numpy as np
import pytest

import didnmf


def test_consensus_matches_the_command(counts, tmp_path, cli):
    np.save(tmp_path / "x.npy", counts)
    sweep_dir = tmp_path / "sweep"
    cli("sweep", "--input", tmp_path / "x.npy", "--ranks", "4,5", "--seeds", 6, "--max-iter", 100,
        "--out", sweep_dir, "--quiet")
    res = didnmf.consensus(counts, sweep_dir, 5)
    assert res.basis.shape == (40, 5) and res.usages.shape == (300, 5)
    np.testing.assert_allclose(res.basis.sum(axis=0), 1, rtol=1e-12)
    assert res.report["k"] == 5 and res.report["runs"] == 6
    assert res.report["kept"] + res.report["filtered"] == 30
    assert res.run_report["algo"] == "transform"
    assert res.png.startswith(b"\x89PNG\r\n\x1a\n")
    # The command itself, and the transform of its basis: the same bits.
    out = tmp_path / "cli"
    cli("consensus", "--sweep", sweep_dir, "--k", 5, "--input", tmp_path / "x.npy", "--out", out, "--quiet")
    assert res.basis.tobytes() == np.load(out / "basis.npy").tobytes()
    assert res.usages.tobytes() == np.load(out / "coef.npy").tobytes()
    tr = tmp_path / "tr"
    cli("transform", "--basis", out / "basis.npy", "--input", tmp_path / "x.npy", "--out", tr, "--quiet")
    assert res.usages.tobytes() == np.load(tr / "coef.npy").tobytes()
    # Threshold 2 keeps every spectrum; out keeps the files.
    kept = didnmf.consensus(tmp_path / "x.npy", sweep_dir, 5, density_threshold=2, out=tmp_path / "keep")
    assert kept.report["filtered"] == 0 and (tmp_path / "keep" / "density_5.svg").exists()


def test_consensus_errors(counts, tmp_path):
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        didnmf.consensus(counts, tmp_path, 0)
    with pytest.raises(ValueError, match="density_threshold must be a number > 0"):
        didnmf.consensus(counts, tmp_path, 3, density_threshold=-1)
    with pytest.raises(didnmf.DidnmfInputError, match="sweep.json"):
        didnmf.consensus(counts, tmp_path, 3)


def test_sweep_out_feeds_consensus(counts, tmp_path):
    # didnmf.sweep keeps its files with out=, and didnmf.consensus reads them: the notebook's
    # cNMF workflow, with no command line.
    sw = didnmf.sweep(counts, [4, 5], seeds=4, max_iter=60, test_fraction=0, out=tmp_path / "sweep")
    assert (tmp_path / "sweep" / "spectra_5.npy").exists()
    assert set(sw.consensus_bases) == {4, 5}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the sweep's own X: no warning
        res = didnmf.consensus(counts, tmp_path / "sweep", 5, density_threshold=2)
    assert res.basis.shape == (40, 5) and res.usages.shape == (300, 5)
    assert res.report["runs"] == 4 and res.report["filtered"] == 0
    # Another matrix of the sweep's shape is refit, with the command's warning as Python's.
    other = counts[::-1].copy()
    with pytest.warns(UserWarning, match=r"warning: --input X \(in memory\) is not the file the sweep .* read, .*input.npy"):
        didnmf.consensus(other, tmp_path / "sweep", 5, density_threshold=2)
    # A matrix of another shape is refused, naming it as the warning does, not the
    # temporary file it was written to.
    with pytest.raises(didnmf.DidnmfInputError, match=r"^didnmf: --input X \(in memory\) has 39 features; the sweep .* was of .*input.npy, 40 features") as e:
        didnmf.consensus(counts[:, :39], tmp_path / "sweep", 5)
    assert "didnmf-consensus-" not in str(e.value)


def test_consensus_keeps_a_dataframes_names(counts, tmp_path, cli):
    # A DataFrame's names reach the outputs as they reach NMF's (feature_names_in_): the rows
    # of basis.tsv and top_features.tsv are its columns, coef.tsv's its index, and the result
    # carries both beside the same bits as the bare matrix's.
    pd = pytest.importorskip("pandas")
    genes = [f"gene{j}" for j in range(40)]
    cells = [f"cell{i}" for i in range(300)]
    df = pd.DataFrame(counts, index=cells, columns=genes)
    np.save(tmp_path / "x.npy", counts)
    sweep_dir = tmp_path / "sweep"
    cli("sweep", "--input", tmp_path / "x.npy", "--ranks", 4, "--seeds", 4, "--max-iter", 60,
        "--test-fraction", 0, "--out", sweep_dir, "--quiet")
    out = tmp_path / "out"
    res = didnmf.consensus(df, sweep_dir, 4, density_threshold=2, out=out)
    assert list(pd.read_csv(out / "basis.tsv", sep="\t", index_col=0).index) == genes
    assert list(pd.read_csv(out / "coef.tsv", sep="\t", index_col=0).index) == cells
    assert set(pd.read_csv(out / "top_features.tsv", sep="\t")["feature"]) <= set(genes)
    assert list(res.feature_names) == genes and list(res.sample_names) == cells
    bare = didnmf.consensus(counts, sweep_dir, 4, density_threshold=2)
    assert bare.feature_names is None and bare.sample_names is None
    assert res.basis.tobytes() == bare.basis.tobytes() and res.usages.tobytes() == bare.usages.tobytes()
    # Names the command's names files cannot hold are refused here, saying which.
    with pytest.raises(ValueError, match=r"feature name 3 \('a\\tb'\)"):
        didnmf.consensus(df.rename(columns={"gene3": "a\tb"}), sweep_dir, 4, density_threshold=2)
