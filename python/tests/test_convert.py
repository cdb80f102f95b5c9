"""Tests of didnmf.convert (``python3 -m didnmf convert``): .h5ad and 10x .h5 into a block
store, checked block by block against the matrix in memory; bad files; out-of-core memory."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

PYDIR = Path(__file__).resolve().parents[1]
if str(PYDIR) not in sys.path:
    sys.path.insert(0, str(PYDIR))

h5py = pytest.importorskip("h5py")
anndata = pytest.importorskip("anndata")

from didnmf._convert import convert, read_store, store_manifest  # noqa: E402

N, M = 517, 83


def _counts(seed=0, n=N, m=M, density=0.07):
    """A counts matrix with empty rows and columns, values that float32 holds exactly."""
    rng = np.random.default_rng(seed)
    x = sp.random(n, m, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: rng.integers(1, 50, size=k)).astype(np.float32)
    x = x.tolil()
    x[5, :] = 0
    x[100:140, :] = 0  # a run of empty rows
    x[:, 7] = 0
    return x.tocsr()


def _names(prefix, n):
    return [f"{prefix}-{i}-é" for i in range(n)]  # non-ASCII: UTF-8 through and through


@pytest.fixture(scope="module")
def h5ad(tmp_path_factory):
    """An .h5ad written by anndata: X CSR float32 and layers in every on-disk layout."""
    x = _counts()
    a = anndata.AnnData(x)
    a.obs_names = _names("cell", N)
    a.var_names = _names("gene", M)
    a.layers["csc"] = x.tocsc()
    a.layers["dense"] = x.toarray().astype(np.float64)
    a.layers["counts"] = x.astype(np.int32)
    path = tmp_path_factory.mktemp("h5ad") / "small.h5ad"
    a.write_h5ad(path)
    return path, a


def _check_store(store, expected, obs, var, dtype):
    """The store holds ``expected`` (dense or sparse) block by block, with names and dtype."""
    m = store_manifest(store)
    assert m["format"] == "didnmf-blocks" and m["version"] == 1
    assert m["shape"] == list(expected.shape)
    assert sum(b["rows"] for b in m["blocks"]) == expected.shape[0]
    full = expected.toarray() if sp.issparse(expected) else np.asarray(expected)
    at = 0
    for b in m["blocks"]:
        path = store / b["file"]
        if b["file"].endswith(".npz"):
            blk = sp.load_npz(path)
            assert blk.format == "csr"
            assert blk.has_canonical_format
            with zipfile.ZipFile(path) as z:  # save_npz(compressed=False)
                assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
                assert sorted(z.namelist()) == ["data.npy", "format.npy", "indices.npy",
                                                "indptr.npy", "shape.npy"]
            dense = blk.toarray()
            assert blk.dtype == dtype
        else:
            dense = np.load(path, allow_pickle=False)
            assert dense.dtype == dtype
        assert dense.shape == (b["rows"], expected.shape[1])
        np.testing.assert_array_equal(dense, full[at:at + b["rows"]])
        at += b["rows"]
    if var is None:
        assert "features" not in m
    else:
        assert (store / m["features"]).read_text(encoding="utf-8").split("\n")[:-1] == list(var)
    if obs is None:
        assert "samples" not in m
    else:
        assert (store / m["samples"]).read_text(encoding="utf-8").split("\n")[:-1] == list(obs)
    return m


@pytest.mark.parametrize("layer,expect_ext,dtype", [
    (None, ".npz", np.float32),
    ("X", ".npz", np.float32),
    ("csc", ".npz", np.float32),
    ("dense", ".npy", np.float64),
    ("counts", ".npz", np.int32),
])
def test_h5ad_layouts(h5ad, tmp_path, layer, expect_ext, dtype):
    path, a = h5ad
    x = a.X if layer in (None, "X") else a.layers[layer]
    dst = tmp_path / "small.didnmf"
    m = convert(path, dst, layer=layer, block_rows=64)
    assert all(b["file"].endswith(expect_ext) for b in m["blocks"])
    assert [b["rows"] for b in m["blocks"]] == [64] * (N // 64) + [N % 64]
    assert m["layer"] == (layer or "X") and m["source"] == "small.h5ad"
    assert m["dtype"] == np.dtype(dtype).name
    _check_store(dst, x, a.obs_names, a.var_names, dtype)
    back = read_store(dst, rows=(60, 200))
    back = back.toarray() if sp.issparse(back) else back
    full = x.toarray() if sp.issparse(x) else x
    np.testing.assert_array_equal(back, full[60:200])
    assert json.loads((dst / "manifest.json").read_text()) == m
    assert sorted(os.listdir(tmp_path)) == ["small.didnmf"]  # no temporary left


@pytest.mark.parametrize("layer", [None, "csc", "dense"])
def test_default_blocks_follow_the_value_budget(h5ad, tmp_path, layer):
    """block_rows=None cuts blocks at block_nnz stored values (one row at least)."""
    path, a = h5ad
    x = a.X if layer is None else a.layers[layer]
    budget = 300
    m = convert(path, tmp_path / "s", layer=layer, block_nnz=budget)
    at = 0
    for b in m["blocks"]:
        rows = slice(at, at + b["rows"])
        held = b["rows"] * M if layer == "dense" else x[rows].nnz
        assert held <= budget or b["rows"] == 1
        if layer != "dense" and at + b["rows"] < N:  # the next row would overflow
            assert x[at:at + b["rows"] + 1].nnz > budget
        at += b["rows"]
    _check_store(tmp_path / "s", x, a.obs_names, a.var_names, x.dtype)
    # With the default budget the small matrix is one block.
    assert len(convert(path, tmp_path / "one", layer=layer)["blocks"]) == 1


def test_csc_with_duplicates_and_unsorted_rows(tmp_path):
    """A CSC X whose columns list rows out of order and twice: the store holds scipy's
    canonical CSR (duplicates summed), block by block, across scatter chunks."""
    rng = np.random.default_rng(3)
    n, m, nnz = 300, 40, 2500
    rows = rng.integers(0, n, nnz)
    cols = np.sort(rng.integers(0, m, nnz))
    vals = rng.integers(1, 9, nnz).astype(np.float32)
    indptr = np.searchsorted(cols, np.arange(m + 1)).astype(np.int64)
    path = tmp_path / "dup.h5ad"
    _write_h5ad_by_hand(path, "csc_matrix", (n, m), vals, rows, indptr)
    expect = sp.coo_matrix((vals, (rows, cols)), shape=(n, m)).tocsr()
    import didnmf._convert as conv
    old = conv.SCATTER_CHUNK
    conv.SCATTER_CHUNK = 97  # many scatter chunks
    try:
        convert(path, tmp_path / "s", block_rows=37)
    finally:
        conv.SCATTER_CHUNK = old
    _check_store(tmp_path / "s", expect, [f"o{i}" for i in range(n)],
                 [f"v{i}" for i in range(m)], np.float32)


def test_csr_unsorted_indices_are_sorted(tmp_path):
    data = np.array([1, 2, 3, 4], np.float32)
    indices = np.array([3, 0, 2, 2])  # row 0: columns 3, 0; row 2: column 2 twice
    indptr = np.array([0, 2, 2, 4])
    path = tmp_path / "u.h5ad"
    _write_h5ad_by_hand(path, "csr_matrix", (3, 4), data, indices, indptr)
    convert(path, tmp_path / "s")
    blk = sp.load_npz(tmp_path / "s" / "block-000000.npz")
    assert blk.indices.tolist() == [0, 3, 2] and blk.data.tolist() == [2, 1, 7]


def _write_10x(path, x_cells_by_genes, barcodes, ids, names, with_names=True):
    """A Cell Ranger v3 filtered_feature_bc_matrix.h5: genes x cells CSC in 'matrix'."""
    g_by_c = sp.csc_matrix(x_cells_by_genes.T)
    with h5py.File(path, "w") as f:
        g = f.create_group("matrix")
        g.create_dataset("data", data=g_by_c.data.astype(np.int32), compression="gzip",
                         chunks=(min(64, max(1, g_by_c.nnz)),))
        g.create_dataset("indices", data=g_by_c.indices.astype(np.int64))
        g.create_dataset("indptr", data=g_by_c.indptr.astype(np.int64))
        g.create_dataset("shape", data=np.array(g_by_c.shape, dtype=np.int32))
        g.create_dataset("barcodes", data=np.array(barcodes, dtype="S"))
        ft = g.create_group("features")
        ft.create_dataset("id", data=np.array(ids, dtype="S"))
        if with_names:
            ft.create_dataset("name", data=np.array(names, dtype="S"))
        ft.create_dataset("feature_type", data=np.array(["Gene Expression"] * len(ids), "S"))
        ft.create_dataset("genome", data=np.array(["GRCh38"] * len(ids), "S"))
        ft.create_dataset("_all_tag_keys", data=np.array(["genome"], "S"))


@pytest.mark.parametrize("with_names", [True, False])
def test_10x_h5(tmp_path, with_names):
    x = _counts(seed=5).astype(np.int32)
    barcodes = [f"AAAC{i:06d}-1" for i in range(N)]
    ids = [f"ENSG{i:011d}" for i in range(M)]
    names = [f"GENE{i}" for i in range(M)]
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    _write_10x(path, x, barcodes, ids, names, with_names)
    m = convert(path, tmp_path / "s", block_rows=100)
    assert m["shape"] == [N, M] and m["dtype"] == "int32"
    _check_store(tmp_path / "s", x, barcodes, names if with_names else ids, np.int32)


def test_cli(h5ad, tmp_path):
    path, a = h5ad
    dst = tmp_path / "cli.didnmf"
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    r = subprocess.run([sys.executable, "-m", "didnmf", "convert", str(path), str(dst),
                        "--layer", "csc", "--block-rows", "100"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert f"{N} samples x {M} features, float32, 6 CSR blocks" in r.stdout
    _check_store(dst, a.layers["csc"], a.obs_names, a.var_names, np.float32)
    r = subprocess.run([sys.executable, "-m", "didnmf", "convert", str(path), str(dst)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "exists" in r.stderr
    r = subprocess.run([sys.executable, "-m", "didnmf", "convert", str(path),
                        str(tmp_path / "x"), "--layer", "nope"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"didnmf convert: {path}: no layer 'nope' "
                                "(layers: counts, csc, dense)")


def test_compress_and_overwrite(h5ad, tmp_path):
    path, a = h5ad
    dst = tmp_path / "s"
    convert(path, dst, block_rows=200)
    with pytest.raises(FileExistsError, match="overwrite"):
        convert(path, dst)
    m = convert(path, dst, compress=True, overwrite=True)
    assert len(m["blocks"]) == 1
    with zipfile.ZipFile(dst / m["blocks"][0]["file"]) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    assert sorted(os.listdir(dst)) == ["block-000000.npz", "features.tsv", "manifest.json",
                                       "samples.tsv"]
    np.testing.assert_array_equal(read_store(dst).toarray(), a.X.toarray())
    # A directory that is not a store is never replaced.
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="not a didnmf store"):
        convert(path, other, overwrite=True)
    assert (other / "keep.txt").exists()


# ----------------------------------------------------------------------------------------
# Bad files: each a ValueError naming the file and what is wrong, and nothing written.


def _write_h5ad_by_hand(path, encoding, shape, data, indices, indptr, obs=None, var=None):
    """A minimal .h5ad in AnnData 0.8's layout, written with h5py."""
    n, m = shape
    str_dt = h5py.string_dtype("utf-8")
    with h5py.File(path, "w") as f:
        f.attrs["encoding-type"] = "anndata"
        f.attrs["encoding-version"] = "0.1.0"
        x = f.create_group("X")
        x.attrs["encoding-type"] = encoding
        x.attrs["encoding-version"] = "0.1.0"
        x.attrs["shape"] = np.array(shape)
        x.create_dataset("data", data=data)
        x.create_dataset("indices", data=indices)
        x.create_dataset("indptr", data=indptr)
        for key, names in (("obs", obs or [f"o{i}" for i in range(n)]),
                           ("var", var or [f"v{i}" for i in range(m)])):
            g = f.create_group(key)
            g.attrs["encoding-type"] = "dataframe"
            g.attrs["encoding-version"] = "0.2.0"
            g.attrs["_index"] = "_index"
            g.attrs["column-order"] = np.array([], dtype=str_dt)
            g.create_dataset("_index", data=np.array(names, dtype=object), dtype=str_dt)


def _good(tmp_path):
    path = tmp_path / "bad.h5ad"
    x = sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 3], [4, 5, 0], [0, 6, 0]], np.float32))
    _write_h5ad_by_hand(path, "csr_matrix", x.shape, x.data, x.indices, x.indptr)
    return path


def _replace(path, name, value):
    with h5py.File(path, "r+") as f:
        del f[name]
        f[name] = value


def _bad_missing_x(p):
    with h5py.File(p, "r+") as f:
        del f["X"]


def _bad_indptr_length(p):
    _replace(p, "X/indptr", np.array([0, 2, 3, 5]))


def _bad_indptr_decreasing(p):
    _replace(p, "X/indptr", np.array([0, 3, 2, 5, 6]))


def _bad_indptr_end(p):
    _replace(p, "X/indptr", np.array([0, 2, 3, 5, 5]))


def _bad_index_range(p):
    _replace(p, "X/indices", np.array([0, 2, 2, 0, 3, 1]))


def _bad_indices_length(p):
    _replace(p, "X/indices", np.array([0, 2, 2, 0, 1]))


def _bad_tab_name(p):
    _replace(p, "obs/_index", np.array(["a", "b", "c\td", "e"], dtype=object).astype(
        h5py.string_dtype("utf-8")))


def _bad_newline_name(p):
    _replace(p, "var/_index", np.array(["g0", "g1\n", "g2"], dtype=object).astype(
        h5py.string_dtype("utf-8")))


def _bad_names_length(p):
    _replace(p, "var/_index", np.array(["g0", "g1"], dtype=object).astype(
        h5py.string_dtype("utf-8")))


def _bad_encoding(p):
    with h5py.File(p, "r+") as f:
        f["X"].attrs["encoding-type"] = "awkward-array"


def _bad_dtype(p):
    _replace(p, "X/data", np.array([1, 2, 3, 4, 5, 6], dtype=np.complex64))


def _bad_no_obs(p):
    with h5py.File(p, "r+") as f:
        del f["obs"]


@pytest.mark.parametrize("damage,layer,message", [
    (_bad_missing_x, None, r"the AnnData has no X matrix and no layers"),
    (_bad_indptr_length, None, r"X/indptr has 4 entries; a CSR matrix of shape \(4, 3\) has 4 "
                               r"rows and needs 5"),
    (_bad_indptr_decreasing, None, r"X/indptr decreases at entry 2 \(3 then 2\)"),
    (_bad_indptr_end, None, r"X/indptr runs from 0 to 5; it must run from 0 to the number of "
                            r"stored values, 6"),
    (_bad_index_range, None, r"X/indices\[4\] = 3 is out of range for 3 columns"),
    (_bad_indices_length, None, r"X/indices has 5 entries, X/data has 6"),
    (_bad_tab_name, None, r"obs/_index: name at row 2 \('c\\td'\) contains a tab"),
    (_bad_newline_name, None, r"var/_index: name at row 1 \('g1\\n'\) contains a newline"),
    (_bad_names_length, None, r"var/_index has 2 names, the matrix X has 3 columns"),
    (_bad_encoding, None, r"X is a group of encoding 'awkward-array', not a matrix"),
    (_bad_dtype, None, r"X has values of dtype complex64"),
    (_bad_no_obs, None, r"no 'obs'"),
    (None, "counts", r"no layer 'counts' \(layers: none\)"),
])
def test_bad_h5ad(tmp_path, damage, layer, message):
    path = _good(tmp_path)
    if damage is not None:
        damage(path)
    with pytest.raises(ValueError, match=f"^{path}: " + message):
        convert(path, tmp_path / "out", layer=layer, block_rows=2)
    assert sorted(os.listdir(tmp_path)) == ["bad.h5ad"]  # nothing left behind


def test_bad_files_of_other_kinds(tmp_path):
    p = tmp_path / "text.h5ad"
    p.write_text("not hdf5")
    with pytest.raises(ValueError, match=f"^{p}: not a readable HDF5 file"):
        convert(p, tmp_path / "o")
    p = tmp_path / "other.h5"
    with h5py.File(p, "w") as f:
        f["stuff"] = np.zeros(3)
    with pytest.raises(ValueError, match=f"^{p}: neither an .h5ad .* holds stuff"):
        convert(p, tmp_path / "o")
    p = tmp_path / "10x.h5"
    x = sp.csr_matrix(np.eye(3, dtype=np.float32))
    _write_10x(p, x, ["a", "b", "c"], ["i", "j", "k"], ["n", "m", "o"])
    with pytest.raises(ValueError, match=f"^{p}: a 10x .h5 file has no layers"):
        convert(p, tmp_path / "o", layer="counts")
    _replace(p, "matrix/barcodes", np.array(["a", "b"], dtype="S"))
    with pytest.raises(ValueError, match=f"^{p}: matrix/barcodes has 2 names, the matrix "
                                         "matrix has 3 rows"):
        convert(p, tmp_path / "o")
    with pytest.raises(FileNotFoundError):
        convert(tmp_path / "absent.h5ad", tmp_path / "o")
    with pytest.raises(ValueError, match="block_rows must be a positive integer"):
        convert(p, tmp_path / "o", block_rows=0)
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------
# Out of core.

# The matrix: 100,000 rows x 20,000 columns, 250 nonzeros a row: 25M float32 values and int32
# indices, 200 MB of X on disk. Blocks of 4096 rows hold 1M values (8 MB).
OOC_ROWS, OOC_COLS, OOC_PER_ROW, OOC_BLOCK = 100_000, 20_000, 250, 4096


def _write_big_h5ad(path, encoding):
    """Write the big .h5ad out of core too: row chunks of the formula appended to the datasets.

    The arrays are those of the CSR of a 100,000 x 20,000 matrix T with 250 nonzeros a row:
    T[r, 80 k + r % 80] = (r + 80 k) % 97 + 1 for k < 250. Declared "csc_matrix", the same
    arrays are the CSC of T's transpose, a 20,000 x 100,000 matrix."""
    n, m, k = OOC_ROWS, OOC_COLS, OOC_PER_ROW
    shape = (n, m) if encoding == "csr_matrix" else (m, n)
    str_dt = h5py.string_dtype("utf-8")
    stride = m // k
    with h5py.File(path, "w") as f:
        f.attrs["encoding-type"] = "anndata"
        f.attrs["encoding-version"] = "0.1.0"
        x = f.create_group("X")
        x.attrs.update({"encoding-type": encoding, "encoding-version": "0.1.0",
                        "shape": np.array(shape)})
        data = x.create_dataset("data", (n * k,), dtype=np.float32)
        indices = x.create_dataset("indices", (n * k,), dtype=np.int32)
        x.create_dataset("indptr", data=np.arange(n + 1, dtype=np.int64) * k)
        step = 10_000
        base = np.arange(k, dtype=np.int32) * stride
        for lo in range(0, n, step):
            r = np.arange(lo, lo + step, dtype=np.int32)[:, None]
            indices[lo * k:(lo + step) * k] = (base[None, :] + r % stride).ravel()
            data[lo * k:(lo + step) * k] = ((r + base[None, :]) % 97 + 1).astype(
                np.float32).ravel()
        for key, n_names, prefix in (("obs", shape[0], "c"), ("var", shape[1], "g")):
            g = f.create_group(key)
            g.attrs.update({"encoding-type": "dataframe", "encoding-version": "0.2.0",
                            "_index": "_index"})
            g.attrs["column-order"] = np.array([], dtype=str_dt)
            g.create_dataset("_index", data=np.array([f"{prefix}{i}" for i in range(n_names)],
                                                     dtype=object), dtype=str_dt)
    return shape


def _formula_rows(lo, hi):
    """Rows lo:hi of T (see _write_big_h5ad) as a CSR matrix."""
    k, stride = OOC_PER_ROW, OOC_COLS // OOC_PER_ROW
    r = np.arange(lo, hi)[:, None]
    base = np.arange(k) * stride
    return sp.csr_matrix((((r + base[None, :]) % 97 + 1).astype(np.float32).ravel(),
                          (base[None, :] + r % stride).ravel(), np.arange(hi - lo + 1) * k),
                         shape=(hi - lo, OOC_COLS))


# The child reports its own VmHWM (peak resident set of its address space). Not ru_maxrss:
# Linux carries a process's maxrss across exec, so a child started from a big pytest process
# would report at least the parent's size (measured here: 118 MiB for an interpreter whose
# own peak is 58 MiB).
_PEAK = """
import sys
sys.path.insert(0, {pydir!r})
import json, numpy, scipy.sparse, h5py
import didnmf._convert as c
{action}
with open("/proc/self/status") as f:
    print([line.split()[1] for line in f if line.startswith("VmHWM:")][0])
"""


def _peak_kib(action):
    """Run ``action`` in a fresh interpreter; return its peak RSS (KiB, VmHWM)."""
    code = _PEAK.format(pydir=str(PYDIR), action=action)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.mark.parametrize("encoding,block_rows", [("csr_matrix", 4096), ("csc_matrix", 800)])
def test_out_of_core_peak_memory(tmp_path, encoding, block_rows):
    """Converting a 200 MB X holds a few blocks, not the matrix: CSR read by row blocks, CSC
    by the external transpose. Blocks hold about 1M values (8 MB with their indices).

    The cap: the peak of an interpreter that imported the same modules (numpy, scipy.sparse,
    h5py, didnmf._convert) and did nothing else, plus 48 MiB: six 8 MB blocks, room for the
    block read from the file, its checked and cast copies, scipy's canonical-form check and
    save_npz's buffers (for CSC: a 1M-entry scatter chunk with its sort, then a block built
    from its scratch file). Loading X whole takes 191 MiB above the baseline, 4x the margin;
    the test checks that its harness sees such a load.
    """
    path = tmp_path / "big.h5ad"
    shape = _write_big_h5ad(path, encoding)
    x_bytes = OOC_ROWS * OOC_PER_ROW * 8
    assert x_bytes == 200_000_000
    baseline = _peak_kib("pass")
    cap = baseline + 48 * 1024
    assert (cap - baseline) * 1024 < x_bytes // 3  # the margin is well under a whole load
    dst = tmp_path / "big.didnmf"
    peak = _peak_kib(f"c.convert({str(path)!r}, {str(dst)!r}, block_rows={block_rows})")
    print(f"\n{encoding}: baseline {baseline / 1024:.0f} MiB, conversion peak "
          f"{peak / 1024:.0f} MiB, cap {cap / 1024:.0f} MiB, X {x_bytes / 2**20:.0f} MiB")
    assert peak < cap, f"peak {peak} KiB over the cap {cap} KiB (baseline {baseline} KiB)"
    m = store_manifest(dst)
    assert m["shape"] == list(shape)
    nblocks = -(-shape[0] // block_rows)
    assert [b["rows"] for b in m["blocks"]] == [block_rows] * (nblocks - 1) + [
        shape[0] - block_rows * (nblocks - 1)]
    # Spot-check a middle block and the last one against the formula.
    for i in (nblocks // 2, nblocks - 1):
        blk = sp.load_npz(dst / m["blocks"][i]["file"])
        lo = i * block_rows
        hi = lo + blk.shape[0]
        if encoding == "csr_matrix":
            expect = _formula_rows(lo, hi)
        else:  # rows lo:hi of T's transpose: T's columns lo:hi, from all of T's rows
            expect = sp.vstack([_formula_rows(r, min(OOC_ROWS, r + 20_000))[:, lo:hi]
                                for r in range(0, OOC_ROWS, 20_000)]).T.tocsr()
        assert blk.shape == expect.shape and blk.has_canonical_format
        np.testing.assert_array_equal(blk.indptr, expect.indptr)
        np.testing.assert_array_equal(blk.indices, expect.indices)
        np.testing.assert_array_equal(blk.data, expect.data)
    if encoding == "csr_matrix":
        # A whole load in the same harness is over the cap: the measurement sees one.
        whole = _peak_kib(f"f = h5py.File({str(path)!r}, 'r'); d = f['X/data'][:]; "
                          f"i = f['X/indices'][:]")
        assert whole > cap


def test_h5ad_of_old_anndata(tmp_path):
    """AnnData < 0.7 wrote obs/var as compound tables with an 'index' field and marked CSR
    with h5sparse_format/h5sparse_shape."""
    x = sp.csr_matrix(np.array([[0, 1.5], [2, 0], [0, 0]], np.float32))
    path = tmp_path / "old.h5ad"
    with h5py.File(path, "w") as f:
        g = f.create_group("X")
        g.attrs["h5sparse_format"] = "csr"
        g.attrs["h5sparse_shape"] = np.array(x.shape)
        for key in ("data", "indices", "indptr"):
            g[key] = getattr(x, key)
        f["obs"] = np.array([(b"a", 1), (b"b", 2), (b"c", 3)],
                            dtype=[("index", "S1"), ("n", "i4")])
        f["var"] = np.array([(b"g1",), (b"g2",)], dtype=[("index", "S2")])
    convert(path, tmp_path / "s")
    _check_store(tmp_path / "s", x, ["a", "b", "c"], ["g1", "g2"], np.float32)


# ----------------------------------------------------------------------------------------
# Hostile inputs and destinations: refused before anything is written; signals clean up.


def _declared_dense(path, shape, dtype=np.float32, chunked=True, names=False):
    """An .h5ad whose dense X declares ``shape`` and stores nothing (fill value only)."""
    str_dt = h5py.string_dtype("utf-8")
    with h5py.File(path, "w") as f:
        f.attrs["encoding-type"] = "anndata"
        f.create_dataset("X", shape=shape, dtype=dtype,
                         chunks=tuple(min(1000, s) for s in shape) if chunked else None,
                         fillvalue=1)
        for key, n in (("obs", shape[0]), ("var", shape[1])):
            g = f.create_group(key)
            g.attrs["_index"] = "_index"
            g.create_dataset("_index", data=np.array([f"{key}{i}" for i in range(
                n if names else 1)], dtype=object), dtype=str_dt)


def _no_writing(monkeypatch):
    import didnmf._convert as conv

    def refuse(*a, **k):
        raise AssertionError("started writing blocks")
    monkeypatch.setattr(conv._DenseSource, "write_blocks", refuse)
    monkeypatch.setattr(conv._CompressedSource, "write_blocks", refuse)


@pytest.mark.parametrize("chunked", [True, False])
def test_unwritten_dense_is_refused(tmp_path, monkeypatch, chunked):
    """The review's file: 8 KB declaring a 1e6 x 1e5 float32 X (400 GB) of fill value."""
    path = tmp_path / "bomb.h5ad"
    _declared_dense(path, (1_000_000, 100_000), chunked=chunked)
    assert path.stat().st_size < 64 * 1024
    _no_writing(monkeypatch)
    with pytest.raises(ValueError, match=f"^{path}: X declares a 1000000 x 100000 matrix of "
                       r"400000000000 bytes .* but the file stores \d+ bytes .*never written"
                       r".*allow_unwritten=True \(--allow-unwritten\)"):
        convert(path, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["bomb.h5ad"]


def test_unwritten_allowed_when_asked(tmp_path, monkeypatch):
    """Under the threshold (here lowered) nothing is refused; allow_unwritten converts it."""
    import didnmf._convert as conv
    monkeypatch.setattr(conv, "UNWRITTEN_MIN_BYTES", 1 << 20)
    path = tmp_path / "fill.h5ad"
    _declared_dense(path, (2000, 1000), names=True)  # 8 MB declared, nothing stored
    with pytest.raises(ValueError, match="never written"):
        convert(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    m = convert(path, tmp_path / "out", allow_unwritten=True)
    assert m["shape"] == [2000, 1000]
    assert (read_store(tmp_path / "out") == 1).all()


def test_honest_compressed_dense_is_not_refused(tmp_path, monkeypatch):
    """An all-zero dense X written with gzip (deflate's best case, ~1026x) passes."""
    import didnmf._convert as conv
    monkeypatch.setattr(conv, "UNWRITTEN_MIN_BYTES", 1 << 20)
    path = tmp_path / "zeros.h5ad"
    _declared_dense(path, (512, 4096), chunked=True)
    with h5py.File(path, "r+") as f:
        del f["X"]
        f.create_dataset("X", data=np.zeros((512, 4096), np.float32), chunks=(512, 512),
                         compression="gzip", compression_opts=9, shuffle=True)
    with h5py.File(path, "r") as f:
        assert 1000 < 512 * 4096 * 4 / f["X"].id.get_storage_size() < conv.UNWRITTEN_RATIO
    conv._check_written(conv._DenseSource(None, path, "X", "X", h5py.File(path, "r")["X"]))


def test_output_larger_than_free_space_is_refused(tmp_path, monkeypatch, h5ad):
    _no_writing(monkeypatch)
    path = tmp_path / "huge.h5ad"
    _declared_dense(path, (100_000_000, 10_000_000), dtype=np.float64)  # 8 PB
    with pytest.raises(ValueError, match=f"^{path}: converting X .* into {tmp_path / 'o'} "
                       r"needs about 8000\d{12} bytes .* but .* bytes .* free"):
        convert(path, tmp_path / "o", allow_unwritten=True)
    # An honest sparse file, on a nearly full disk.
    import didnmf._convert as conv
    import collections
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(conv.shutil, "disk_usage",
                        lambda p: usage(10 << 30, (10 << 30) - 1000, 1000))
    with pytest.raises(ValueError, match=r"needs about \d+ bytes .* has 1000 bytes "
                                         r"\(1000 bytes\) free"):
        convert(h5ad[0], tmp_path / "o2")
    assert sorted(os.listdir(tmp_path)) == ["huge.h5ad"]


def _fake_store(d, extra=(), blocks=()):
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(
        {"format": "didnmf-blocks", "version": 1, "shape": [len(blocks), 1],
         "blocks": [{"file": b, "rows": 1} for b in blocks]}))
    for name in list(extra) + list(blocks):
        (d / name).write_text("precious")


@pytest.mark.parametrize("extra,blocks,first", [
    (["thesis.tex", "zz.txt"], [], "thesis.tex"),
    ([], ["thesis.tex"], "thesis.tex"),  # a manifest "listing" it does not make it a block
])
def test_overwrite_never_deletes_other_files(h5ad, tmp_path, extra, blocks, first):
    victim = tmp_path / "victim"
    _fake_store(victim, extra, blocks)
    with pytest.raises(ValueError, match=f"^{victim} exists and is not a didnmf store; not "
                       f"replacing it \\(it holds '{first}', which is not one of the store's "
                       "files\\)$"):
        convert(h5ad[0], victim, overwrite=True)
    assert (victim / "thesis.tex").read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["victim"]


def test_overwrite_replaces_a_store_with_leftovers(h5ad, tmp_path):
    dst = tmp_path / "s"
    convert(h5ad[0], dst, block_rows=100)
    (dst / "s.tmp-abc123").mkdir()
    convert(h5ad[0], dst, overwrite=True)
    assert sorted(os.listdir(dst)) == ["block-000000.npz", "features.tsv", "manifest.json",
                                       "samples.tsv"]


def _write_many_rows(path, n=30_000, m=50):
    x = sp.random(n, m, density=0.05, format="csr", random_state=1, dtype=np.float32)
    _write_h5ad_by_hand(path, "csr_matrix", x.shape, x.data, x.indices, x.indptr)


@pytest.mark.parametrize("sig,status", [(15, 143), (1, 129)])
def test_cli_signal_removes_the_partial_output(tmp_path, sig, status):
    """SIGTERM/SIGHUP mid-conversion: the DST.tmp-* directory is removed, status 128+sig."""
    import signal
    import time
    path = tmp_path / "many.h5ad"
    _write_many_rows(path)
    work = tmp_path / "out"
    work.mkdir()
    dst = work / "many.didnmf"
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    p = subprocess.Popen([sys.executable, "-m", "didnmf", "convert", str(path), str(dst),
                          "--block-rows", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env,
                         # the signal's default disposition, whatever this test inherited (under
                         # nohup SIGHUP is ignored, and the converter rightly keeps ignoring it)
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            tmps = [d for d in work.iterdir() if ".tmp-" in d.name]
            if tmps and len(list(tmps[0].glob("block-*"))) >= 20:
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.02)
        else:
            pytest.fail("no temporary directory appeared")
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status, err
    assert signal.Signals(sig).name in err
    assert sorted(os.listdir(work)) == []
