"""One matrix in every input form the nodes read gives the .npy's bits.

The same counts matrix is written as a dense .npy, as scipy .npz files (CSR and CSC,
compressed and not), as a 10x Cell Ranger directory, and as an .h5ad converted into a
multi-block store; the didnmf command factorizes each to the same basis and coef, and the
names an input carries land in basis.tsv's and coef.tsv's rows.
"""

import gzip
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import didnmf

N, M, K = 60, 9, 3


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(7)
    X = rng.poisson(rng.random((N, K)) @ (3 * rng.random((K, M)))).astype(np.float32)
    X[X.sum(axis=1) == 0, 0] = 1  # no empty sample
    return X


def _factorize(cli, tmp_path, name, inp, *extra):
    out = tmp_path / ("out_" + name)
    cli("factorize", "--input", inp, "--rank", K, "--max-iter", 25, "--tol", 0, "--shards", 3,
        "--quiet", "--coef-tsv", "--out", out, *extra)
    return np.load(out / "basis.npy"), np.load(out / "coef.npy"), out


def _write_10x(directory, X, genes, cells):
    os.makedirs(directory)
    with gzip.open(os.path.join(directory, "matrix.mtx.gz"), "wb") as f:
        scipy.io.mmwrite(f, sp.coo_matrix(X.T.astype(np.int64)), field="integer")
    with gzip.open(os.path.join(directory, "features.tsv.gz"), "wt") as f:
        f.writelines(f"ENSG{i:05d}\t{g}\tGene Expression\n" for i, g in enumerate(genes))
    with gzip.open(os.path.join(directory, "barcodes.tsv.gz"), "wt") as f:
        f.writelines(c + "\n" for c in cells)


def test_every_input_form_gives_the_npy_bits(counts, cli, tmp_path):
    anndata = pytest.importorskip("anndata")
    pd = pytest.importorskip("pandas")
    genes = [f"gene{j}" for j in range(M)]
    cells = [f"cell{i}-1" for i in range(N)]
    np.save(tmp_path / "x.npy", counts)
    B, C, _ = _factorize(cli, tmp_path, "npy", tmp_path / "x.npy")

    forms = {}
    for fmt in ("csr", "csc"):
        for compressed in (False, True):
            path = tmp_path / f"x_{fmt}_{'z' if compressed else 'stored'}.npz"
            sp.save_npz(path, sp.csr_matrix(counts).asformat(fmt), compressed=compressed)
            forms[path.name] = path
    _write_10x(tmp_path / "tenx", counts, genes, cells)
    forms["10x"] = tmp_path / "tenx"
    a = anndata.AnnData(sp.csr_matrix(counts), obs=pd.DataFrame(index=cells), var=pd.DataFrame(index=genes))
    a.write_h5ad(tmp_path / "x.h5ad")
    manifest = didnmf.convert(tmp_path / "x.h5ad", tmp_path / "x.didnmf", block_rows=16)
    assert len(manifest["blocks"]) == 4  # 16 + 16 + 16 + 12 samples
    forms["h5ad store"] = tmp_path / "x.didnmf"

    for name, path in forms.items():
        b, c, out = _factorize(cli, tmp_path, name.replace(" ", "_"), path)
        np.testing.assert_array_equal(b, B, err_msg=name)
        np.testing.assert_array_equal(c, C, err_msg=name)
        if name in ("10x", "h5ad store"):
            basis_rows = (out / "basis.tsv").read_text().splitlines()[1:]
            coef_rows = (out / "coef.tsv").read_text().splitlines()[1:]
            assert [r.split("\t")[0] for r in basis_rows] == genes, name
            assert [r.split("\t")[0] for r in coef_rows] == cells, name


def test_h5ad_given_to_the_command_says_how_to_convert(counts, binary, tmp_path):
    import subprocess

    anndata = pytest.importorskip("anndata")
    anndata.AnnData(counts).write_h5ad(tmp_path / "x.h5ad")
    proc = subprocess.run([binary, "factorize", "--input", str(tmp_path / "x.h5ad"), "--rank", "2",
                           "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "python3 -m didnmf convert" in proc.stderr and "x.h5ad" in proc.stderr
