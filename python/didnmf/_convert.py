"""Converting ``.h5ad`` (AnnData) and 10x ``.h5`` files into a didnmf block store, out of core.

The didnmf nodes are written in Go and there is no pure-Go HDF5 reader to build them with, so
HDF5 inputs are converted once, here, into a *didnmf store*: a directory holding

- ``manifest.json``::

      {"format": "didnmf-blocks", "version": 1, "shape": [N, M],
       "blocks": [{"file": "block-000000.npz", "rows": 4096}, ...],
       "features": "features.tsv", "samples": "samples.tsv",
       "source": "pbmc.h5ad", "layer": "X", "dtype": "float32",
       "source_size": 123456789, "source_mtime_ns": 1700000000000000000}

  ``blocks`` are in sample order and their ``rows`` add up to N; ``features``/``samples`` are
  present when the input has names; ``source``, ``layer``, ``dtype``, ``source_size`` and
  ``source_mtime_ns`` are informational (the last two let :mod:`didnmf._anndata` reuse a store
  made from an unchanged file);
- the blocks: each a scipy CSR ``.npz`` (``scipy.sparse.save_npz``, uncompressed unless asked)
  of ``rows`` samples x M features, or, for a dense matrix, a ``(rows, M)`` ``.npy``. Values
  keep the file's dtype (float32 counts stay float32, int32 counts int32; float16 only is
  widened, exactly, to float32); within a row the column indices are sorted and duplicates
  summed (scipy's canonical form);
- ``features.tsv`` and ``samples.tsv``: one name per line, UTF-8, no header.

Samples are rows: an AnnData's obs (cells), a 10x matrix's barcodes (the file stores genes x
cells; its columns become the store's rows).

Memory: the conversion never holds the matrix. A CSR matrix (AnnData's usual sparse X, and a
10x matrix, whose genes x cells CSC arrays are the cells x genes CSR) is read block by block:
a slice of ``indptr``, then that block's range of ``indices``/``data``. A dense X is read by
row slices. A CSC X (``csc_matrix`` encoding; AnnData writes it when ``adata.X`` was CSC) has
its rows spread over the whole file, so it is transposed externally with bounded memory: one
pass over column chunks counts each row's entries (N integers), a second pass scatters each
chunk's entries into per-block scratch files inside the output's temporary directory, and each
block is then assembled from its scratch file alone. That costs a second read of the file and
scratch disk the size of the entries, instead of memory the size of the matrix; converting
the file to CSR first (``adata.X = adata.X.tocsr()``) makes the conversion a single pass.

The output is written to a temporary directory next to the destination and renamed into
place at the end, so a store either is complete or does not exist.
"""

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse

__all__ = ["convert", "read_store", "store_manifest", "DEFAULT_BLOCK_NNZ", "MANIFEST"]

MANIFEST = "manifest.json"
FORMAT = "didnmf-blocks"
VERSION = 1
FEATURES_FILE = "features.tsv"
SAMPLES_FILE = "samples.tsv"

# With block_rows=None a block holds at most this many stored values (nonzeros of a sparse
# matrix, entries of a dense one): 4 Mi float32 values and their int32 column indices are
# 32 MiB, so a conversion, and a node reading a block, hold a few tens of MiB at a time.
DEFAULT_BLOCK_NNZ = 1 << 22
# ... and at most this many rows (a block of empty rows still has an indptr entry per row).
MAX_BLOCK_ROWS = 1 << 16
# Names are read and written this many at a time.
NAME_CHUNK = 1 << 16
# Entries per chunk while scattering a CSC matrix (its arrays are several per entry).
SCATTER_CHUNK = 1 << 19

# Refusing hostile inputs before writing anything.
#
# Unwritten data: an HDF5 dataset may declare any shape and store nothing (chunks never
# written read as the fill value; a contiguous dataset never written stores 0 bytes), so an
# 8 KB file can declare a 400 GB matrix. The matrix's datasets must store at least
# 1/UNWRITTEN_RATIO of their declared bytes. Deflate (gzip, the only compressor HDF5 files
# commonly use besides lzf and szip, which compress less) cannot exceed about 1032:1: an
# all-zero float32 dataset written with gzip level 9 and shuffle measures 1026x, real counts
# 3-20x, a 0.1%-dense matrix a few hundred. 2000x therefore never refuses a fully written
# gzip/lzf/szip file, while an unwritten one is typically millions of times over. Datasets
# declaring less than UNWRITTEN_MIN_BYTES are not checked (the damage is bounded; the free
# space check still applies). allow_unwritten=True (--allow-unwritten) skips the check (for
# files written with plugin compressors such as zstd or blosc, which can exceed 2000x on
# constant data, or a deliberate fill-value matrix).
UNWRITTEN_RATIO = 2000
UNWRITTEN_MIN_BYTES = 256 << 20
# Free space: the output's estimated size must fit in the free space of DST's file system
# minus min(DISK_MARGIN_MAX, DISK_MARGIN_FRACTION of the file system), kept for everyone else.
DISK_MARGIN_MAX = 1 << 30
DISK_MARGIN_FRACTION = 0.05
# Bytes a name takes in features.tsv/samples.tsv, for the estimate (barcodes ~19, Ensembl
# ids 15, symbols fewer; generous).
NAME_BYTES = 32


def convert(src, dst, layer=None, block_rows=None, compress=False, overwrite=False,
            block_nnz=DEFAULT_BLOCK_NNZ, allow_unwritten=False):
    """Convert an ``.h5ad`` or a 10x ``.h5`` file into a didnmf block store, out of core.

    Parameters
    ----------
    src : str or path
        An AnnData ``.h5ad`` (its ``X``, or the layer ``layer``; dense, CSR or CSC on disk) or
        a 10x Genomics Cell Ranger v3 ``.h5`` (its ``matrix`` group). The kind is recognised
        from the file's contents, not its name.
    dst : str or path
        The store directory to create (conventionally ``NAME.didnmf``).
    layer : str, optional
        An ``.h5ad``'s layer to convert instead of ``X`` (``"X"`` names ``X`` itself).
        Not allowed for a 10x file.
    block_rows : int, optional
        Rows (samples) per block. By default blocks are cut so that each holds at most
        ``block_nnz`` stored values and at most 65536 rows.
    compress : bool
        Write the sparse blocks with ``save_npz(compressed=True)`` (smaller, slower to read).
        Dense ``.npy`` blocks are never compressed.
    overwrite : bool
        Replace ``dst`` if it exists (it must then be a didnmf store holding only its own
        files -- manifest.json, the blocks and names files it lists, leftover ``*.tmp-*``
        entries -- or an empty directory); otherwise an existing ``dst`` is an error.
    block_nnz : int
        The per-block budget of stored values used when ``block_rows`` is None.
    allow_unwritten : bool
        Convert a matrix whose HDF5 datasets store far less than they declare (more than
        ``UNWRITTEN_RATIO`` times less: regions never written, read as the fill value).
        By default such a file is refused, as is an output larger than the free space.

    Returns
    -------
    dict
        The manifest written to ``dst/manifest.json``.

    Raises
    ------
    ValueError
        The input is not a readable ``.h5ad``/10x file, or is inconsistent (no X, unknown
        layer, arrays of the wrong length, indices out of range, names with a tab or a
        newline, ...); the message names the file and the place. Also: the matrix is mostly
        unwritten (see ``allow_unwritten``), the output would not fit in the free space of
        ``dst``'s file system, or ``dst`` holds files that are not its store's.
    FileExistsError
        ``dst`` exists and ``overwrite`` is false.
    """
    h5py = _import_h5py()
    src = Path(src)
    dst = Path(dst)
    if block_rows is not None:
        block_rows = _positive_int(block_rows, "block_rows")
    block_nnz = _positive_int(block_nnz, "block_nnz")
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file")
    if dst.exists() and not overwrite:
        raise FileExistsError(f"{dst} exists; remove it, or pass overwrite=True (--overwrite)")
    if dst.exists():
        why = _not_replaceable(dst)
        if why:
            raise ValueError(f"{dst} exists and is not a didnmf store; not replacing it "
                             f"({why})")
    try:
        f = h5py.File(src, "r")
    except OSError as e:
        raise ValueError(f"{src}: not a readable HDF5 file (.h5ad or 10x .h5): {e}") from None
    stat = src.stat()
    with f:
        source = _open_source(f, src, layer)
        if not allow_unwritten:
            _check_written(source)
        parent = dst.resolve().parent
        _check_space(source, dst, parent, block_rows, block_nnz)
        tmp = Path(tempfile.mkdtemp(prefix=dst.name + ".tmp-", dir=parent))
        try:
            blocks = source.write_blocks(tmp, block_rows, block_nnz, compress)
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "shape": [int(source.n_rows), int(source.n_cols)],
                "blocks": blocks,
            }
            if source.write_names(tmp / FEATURES_FILE, "features"):
                manifest["features"] = FEATURES_FILE
            if source.write_names(tmp / SAMPLES_FILE, "samples"):
                manifest["samples"] = SAMPLES_FILE
            manifest["source"] = src.name
            manifest["layer"] = source.layer_name
            manifest["dtype"] = str(source.out_dtype)
            manifest["source_size"] = int(stat.st_size)
            manifest["source_mtime_ns"] = int(stat.st_mtime_ns)
            with open(tmp / MANIFEST, "w", encoding="utf-8") as out:
                json.dump(manifest, out, indent=1)
                out.write("\n")
            os.chmod(tmp, 0o755)
            _move_into_place(tmp, dst)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return manifest


def store_manifest(path):
    """Read and check a store's ``manifest.json``; return it as a dict.

    Raises ``ValueError`` naming the file and what is wrong when it is not a didnmf store.
    """
    path = Path(path)
    mpath = path / MANIFEST
    try:
        with open(mpath, encoding="utf-8") as f:
            m = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: not a didnmf store (no {MANIFEST})") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{mpath}: unreadable: {e}") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ValueError(f"{mpath}: format is not {FORMAT!r}")
    if m.get("version") != VERSION:
        raise ValueError(f"{mpath}: version {m.get('version')!r} (this package reads {VERSION})")
    shape = m.get("shape")
    if (not isinstance(shape, list) or len(shape) != 2
            or not all(isinstance(v, int) and v >= 0 for v in shape)):
        raise ValueError(f"{mpath}: shape must be [N, M] of non-negative integers, got {shape!r}")
    total = 0
    for i, b in enumerate(m.get("blocks") or []):
        name = b.get("file") if isinstance(b, dict) else None
        rows = b.get("rows") if isinstance(b, dict) else None
        if (not isinstance(name, str) or not _plain_name(name)
                or not isinstance(rows, int) or rows <= 0):
            raise ValueError(f"{mpath}: blocks[{i}] must be {{\"file\": plain name, "
                             f"\"rows\": positive integer}}, got {b!r}")
        total += rows
    if total != shape[0]:
        raise ValueError(f"{mpath}: the blocks hold {total} rows, shape says {shape[0]}")
    return m


def read_store(path, rows=None):
    """Read a didnmf store (or a row range of it) back into memory.

    Parameters
    ----------
    path : str or path
        The store directory.
    rows : (int, int), optional
        A half-open row range ``(start, stop)``; only the blocks overlapping it are read.

    Returns
    -------
    scipy.sparse.csr_matrix or numpy.ndarray
        The rows, sparse when the blocks are ``.npz``, dense when they are ``.npy``.
    """
    path = Path(path)
    m = store_manifest(path)
    n, ncols = m["shape"]
    start, stop = (0, n) if rows is None else (int(rows[0]), int(rows[1]))
    if not 0 <= start <= stop <= n:
        raise ValueError(f"{path}: rows {start}:{stop} outside 0:{n}")
    parts = []
    dense = None
    at = 0
    for b in m["blocks"]:
        lo, hi = at, at + b["rows"]
        at = hi
        if hi <= start or lo >= stop:
            continue
        fname = path / b["file"]
        if b["file"].endswith(".npz"):
            part = scipy.sparse.load_npz(fname).tocsr()
            dense = False if dense is None else dense
        else:
            part = np.load(fname, allow_pickle=False)
            dense = True if dense is None else dense
        if part.shape != (b["rows"], ncols):
            raise ValueError(f"{fname}: shape {part.shape}, the manifest says "
                             f"({b['rows']}, {ncols})")
        parts.append(part[max(start, lo) - lo:min(stop, hi) - lo])
    if not parts:
        return scipy.sparse.csr_matrix((stop - start, ncols), dtype=np.float32)
    if dense:
        return np.concatenate([np.asarray(p.toarray() if scipy.sparse.issparse(p) else p)
                               for p in parts])
    return scipy.sparse.vstack([scipy.sparse.csr_matrix(p) for p in parts], format="csr")


# ---------------------------------------------------------------------------------------
# Sources: where the matrix and the names are in an .h5ad or a 10x .h5.


class _Source:
    """A matrix in an HDF5 file, read by row blocks, with its names."""

    def __init__(self, f, src, layer_name, where, n_rows, n_cols):
        self.f = f
        self.src = src
        self.layer_name = layer_name
        self.where = where  # the matrix's HDF5 path, for messages
        self.n_rows = n_rows
        self.n_cols = n_cols
        self.out_dtype = None
        self.names = {}  # "features"/"samples" -> (dataset, description) or None

    def err(self, what):
        return ValueError(f"{self.src}: {what}")

    def write_names(self, path, kind):
        """Write the ``kind`` names ("features" or "samples") to ``path``, one per line, in
        chunks; return False when the input has none."""
        entry = self.names.get(kind)
        if entry is None:
            return False
        read, n, desc = entry
        expect = self.n_cols if kind == "features" else self.n_rows
        if n != expect:
            raise self.err(f"{desc} has {n} names, the matrix {self.where} has {expect} "
                           f"{'columns' if kind == 'features' else 'rows'}")
        with open(path, "w", encoding="utf-8", newline="\n") as out:
            for lo in range(0, n, NAME_CHUNK):
                hi = min(n, lo + NAME_CHUNK)
                names = read(lo, hi)
                lines = []
                for i, name in enumerate(names):
                    if isinstance(name, bytes):
                        try:
                            name = name.decode("utf-8")
                        except UnicodeDecodeError:
                            raise self.err(f"{desc}: name at row {lo + i} is not UTF-8: "
                                           f"{name!r}") from None
                    elif not isinstance(name, str):
                        name = str(name)
                    for ch, label in (("\t", "a tab"), ("\n", "a newline"),
                                      ("\r", "a carriage return")):
                        if ch in name:
                            raise self.err(
                                f"{desc}: name at row {lo + i} ({name!r}) contains {label}; "
                                "didnmf's names files hold one name per line, without tabs "
                                "or newlines: rename it (e.g. adata.obs_names / "
                                "adata.var_names) and save the file again")
                    lines.append(name)
                out.write("\n".join(lines))
                out.write("\n")
        return True

    def _dtype(self, dt):
        dt = np.dtype(dt)
        if dt.kind == "f" and dt.itemsize == 2:
            return np.dtype(np.float32)  # float16: widened exactly
        if dt.kind not in "fiub" or (dt.kind == "f" and dt.itemsize not in (4, 8)):
            raise self.err(f"{self.where} has values of dtype {dt}; a didnmf store holds "
                           "float32, float64, integers or bool")
        return dt.newbyteorder("=")

    def _cast(self, a):
        return np.ascontiguousarray(a, dtype=self.out_dtype)

    def datasets(self):
        """The HDF5 datasets holding the matrix."""
        raise NotImplementedError

    def names_bytes(self):
        return sum(entry[1] * NAME_BYTES for entry in self.names.values() if entry)


class _DenseSource(_Source):
    """A 2-D HDF5 dataset, read by row slices into ``.npy`` blocks."""

    def __init__(self, f, src, layer_name, where, ds):
        if ds.ndim != 2:
            raise ValueError(f"{src}: {where} is a {ds.ndim}-D array, not a matrix")
        super().__init__(f, src, layer_name, where, ds.shape[0], ds.shape[1])
        self.ds = ds
        self.out_dtype = self._dtype(ds.dtype)

    def datasets(self):
        return [self.ds]

    def estimate_bytes(self, block_rows, block_nnz):
        """Bytes the blocks take: the values, plus a .npy header per block."""
        rows = block_rows or max(1, min(MAX_BLOCK_ROWS, block_nnz // max(1, self.n_cols)))
        nblocks = -(-self.n_rows // rows)
        return self.n_rows * self.n_cols * self.out_dtype.itemsize + nblocks * 128

    def write_blocks(self, tmp, block_rows, block_nnz, compress):
        rows = block_rows or max(1, min(MAX_BLOCK_ROWS, block_nnz // max(1, self.n_cols)))
        blocks = []
        for lo in range(0, self.n_rows, rows):
            hi = min(self.n_rows, lo + rows)
            name = f"block-{len(blocks):06d}.npy"
            np.save(tmp / name, self._cast(self.ds[lo:hi]), allow_pickle=False)
            blocks.append({"file": name, "rows": hi - lo})
        return blocks


class _CompressedSource(_Source):
    """A compressed sparse matrix on disk: data/indices/indptr datasets.

    ``major`` is "row" for CSR (and a 10x matrix's cells), "col" for CSC.
    """

    def __init__(self, f, src, layer_name, where, g, shape, major):
        super().__init__(f, src, layer_name, where, int(shape[0]), int(shape[1]))
        self.major = major
        for key in ("data", "indices", "indptr"):
            if key not in g or not isinstance(g[key], _import_h5py().Dataset):
                raise self.err(f"{where} is a sparse matrix without its '{key}' array")
            if g[key].ndim != 1:
                raise self.err(f"{where}/{key} is {g[key].ndim}-D, not a 1-D array")
        self.data, self.indices, self.indptr = g["data"], g["indices"], g["indptr"]
        for key in ("indices", "indptr"):
            if g[key].dtype.kind not in "iu":
                raise self.err(f"{where}/{key} has dtype {g[key].dtype}, not integers")
        self.out_dtype = self._dtype(self.data.dtype)
        n_major = self.n_rows if major == "row" else self.n_cols
        kind = "CSR" if major == "row" else "CSC"
        count = "rows" if major == "row" else "columns"
        if self.indptr.shape[0] != n_major + 1:
            raise self.err(f"{where}/indptr has {self.indptr.shape[0]} entries; a {kind} "
                           f"matrix of shape ({self.n_rows}, {self.n_cols}) has {n_major} "
                           f"{count} and needs {n_major + 1}")
        nnz = self.data.shape[0]
        if self.indices.shape[0] != nnz:
            raise self.err(f"{where}/indices has {self.indices.shape[0]} entries, "
                           f"{where}/data has {nnz}; they must be the same length")
        first, last = int(self.indptr[0]), int(self.indptr[n_major])
        if first != 0 or last != nnz:
            raise self.err(f"{where}/indptr runs from {first} to {last}; it must run from 0 "
                           f"to the number of stored values, {nnz}")
        self.nnz = nnz

    def datasets(self):
        return [self.data, self.indices, self.indptr]

    def estimate_bytes(self, block_rows, block_nnz):
        """Bytes the blocks take (uncompressed): values, int32 column indices, indptr (int64
        at worst) and some zip overhead per block. A CSC matrix's scratch files (int32 row
        and column per entry, and the value) peak above that: the scratch of a block is
        removed as the block is written."""
        it = self.out_dtype.itemsize
        nblocks = (-(-self.n_rows // block_rows) if block_rows
                   else self.nnz // block_nnz + self.n_rows // MAX_BLOCK_ROWS + 1)
        per_entry = it + 4 if self.major == "row" else it + 8
        return self.nnz * per_entry + (self.n_rows + nblocks) * 8 + nblocks * 1024

    # --- helpers -----------------------------------------------------------------------

    def _read_indptr(self, lo, hi):
        """indptr[lo:hi+1] as int64, checked to be non-decreasing."""
        ip = np.asarray(self.indptr[lo:hi + 1], dtype=np.int64)
        bad = np.flatnonzero(np.diff(ip) < 0)
        if bad.size:
            raise self.err(f"{self.where}/indptr decreases at entry {lo + int(bad[0]) + 1} "
                           f"({ip[bad[0]]} then {ip[bad[0] + 1]})")
        return ip

    def _check_indices(self, idx, bound, lo_entry, what):
        if idx.size == 0:
            return
        bad = np.flatnonzero((idx < 0) | (idx >= bound))
        if bad.size:
            k = int(bad[0])
            raise self.err(f"{self.where}/indices[{lo_entry + k}] = {int(idx[k])} is out of "
                           f"range for {bound} {what}")

    def _cuts(self, n_major, block_rows, block_nnz, counts=None):
        """Yield (lo, hi) row ranges: block_rows each, or cut by the nnz budget.

        ``counts`` gives the per-row counts when rows are not this matrix's major axis."""
        if block_rows:
            for lo in range(0, n_major, block_rows):
                yield lo, min(n_major, lo + block_rows)
            return
        lo = 0
        while lo < n_major:
            hi_max = min(n_major, lo + MAX_BLOCK_ROWS)
            if counts is None:
                ip = self._read_indptr(lo, hi_max)
                cum = ip[1:] - ip[0]
            else:
                cum = np.cumsum(counts[lo:hi_max])
            k = int(np.searchsorted(cum, block_nnz, side="right"))
            hi = lo + max(1, k)
            yield lo, hi
            lo = hi

    def _save(self, tmp, blocks, m, compress):
        if not m.has_canonical_format:
            m.sum_duplicates()
        name = f"block-{len(blocks):06d}.npz"
        scipy.sparse.save_npz(tmp / name, m, compressed=compress)
        blocks.append({"file": name, "rows": int(m.shape[0])})

    # --- writing -----------------------------------------------------------------------

    def write_blocks(self, tmp, block_rows, block_nnz, compress):
        if self.major == "row":
            return self._write_rows(tmp, block_rows, block_nnz, compress)
        return self._write_transposed(tmp, block_rows, block_nnz, compress)

    def _write_rows(self, tmp, block_rows, block_nnz, compress):
        blocks = []
        for lo, hi in self._cuts(self.n_rows, block_rows, block_nnz):
            ip = self._read_indptr(lo, hi)
            a, b = int(ip[0]), int(ip[-1])
            idx = np.asarray(self.indices[a:b])
            self._check_indices(idx, self.n_cols, a, "columns")
            vals = self._cast(self.data[a:b])
            m = scipy.sparse.csr_matrix((vals, idx, ip - a), shape=(hi - lo, self.n_cols))
            self._save(tmp, blocks, m, compress)
        return blocks

    def _column_chunks(self, budget):
        """Yield (c0, c1, entry_lo, entry_hi) column ranges holding about ``budget`` entries."""
        c0 = 0
        while c0 < self.n_cols:
            c_max = min(self.n_cols, c0 + MAX_BLOCK_ROWS)
            ip = self._read_indptr(c0, c_max)
            k = int(np.searchsorted(ip[1:] - ip[0], budget, side="right"))
            c1 = c0 + max(1, k)
            yield c0, c1, ip[:c1 - c0 + 1]
            c0 = c1

    def _write_transposed(self, tmp, block_rows, block_nnz, compress):
        n = self.n_rows
        chunk = min(block_nnz, SCATTER_CHUNK)
        # Pass 1: entries per row.
        counts = np.zeros(n, dtype=np.int64)
        for c0, c1, ip in self._column_chunks(chunk):
            a, b = int(ip[0]), int(ip[-1])
            idx = np.asarray(self.indices[a:b])
            self._check_indices(idx, n, a, "rows")
            counts += np.bincount(idx, minlength=n)
        cuts = list(self._cuts(n, block_rows, block_nnz, counts=counts))
        del counts
        starts = np.array([lo for lo, _ in cuts], dtype=np.int64)
        scratch = tmp / ".scatter"
        scratch.mkdir()
        # Pass 2: scatter each column chunk's entries into the scratch files of their blocks.
        # Entries reach a block's file in column order (chunks in order, a stable sort inside
        # each), so each block's file is its entries sorted by column.
        for c0, c1, ip in self._column_chunks(chunk):
            a, b = int(ip[0]), int(ip[-1])
            if a == b:
                continue
            rows = np.asarray(self.indices[a:b])
            vals = self._cast(self.data[a:b])
            cols = np.repeat(np.arange(c0, c1, dtype=np.int32), np.diff(ip))
            blk = np.searchsorted(starts, rows, side="right") - 1
            order = np.argsort(blk, kind="stable")
            blk = blk[order]
            edges = np.flatnonzero(np.diff(blk)) + 1
            for first, seg in zip(np.concatenate([[0], edges]), np.split(order, edges)):
                k = int(blk[first])
                base = scratch / f"{k:06d}"
                with open(str(base) + ".r", "ab") as fr:
                    (rows[seg] - starts[k]).astype(np.int32).tofile(fr)
                with open(str(base) + ".c", "ab") as fc:
                    cols[seg].tofile(fc)
                with open(str(base) + ".v", "ab") as fv:
                    vals[seg].tofile(fv)
            del rows, vals, cols, blk, order
        # Pass 3: each block from its own scratch file.
        blocks = []
        for k, (lo, hi) in enumerate(cuts):
            base = scratch / f"{k:06d}"
            if os.path.exists(str(base) + ".r"):
                r = np.fromfile(str(base) + ".r", dtype=np.int32)
                c = np.fromfile(str(base) + ".c", dtype=np.int32)
                v = np.fromfile(str(base) + ".v", dtype=self.out_dtype)
                for ext in (".r", ".c", ".v"):
                    os.remove(str(base) + ext)
            else:
                r = c = np.zeros(0, dtype=np.int32)
                v = np.zeros(0, dtype=self.out_dtype)
            # The scratch entries are in column order: the block's CSC, which scipy's C
            # transpose (csc_tocsr, a counting sort) turns into its CSR with sorted indices.
            colptr = np.zeros(self.n_cols + 1, dtype=np.int64)
            np.cumsum(np.bincount(c, minlength=self.n_cols), out=colptr[1:])
            del c
            m = scipy.sparse.csc_matrix((v, r, colptr), shape=(hi - lo, self.n_cols)).tocsr()
            del r, v, colptr
            self._save(tmp, blocks, m, compress)
        shutil.rmtree(scratch)
        return blocks


def _attr_str(obj, key):
    v = obj.attrs.get(key)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v if isinstance(v, str) else None


def _open_source(f, src, layer):
    """Recognise the file's kind and locate the matrix and its names."""
    if "matrix" in f and not ("X" in f or "obs" in f):
        if layer not in (None, "X"):
            raise ValueError(f"{src}: a 10x .h5 file has no layers (asked for {layer!r})")
        return _open_10x(f, src)
    if "X" in f or "obs" in f or "var" in f or _attr_str(f, "encoding-type") == "anndata":
        return _open_h5ad(f, src, layer)
    keys = ", ".join(sorted(f.keys())) or "nothing"
    raise ValueError(f"{src}: neither an .h5ad (AnnData: X, obs, var) nor a 10x Cell Ranger v3 "
                     f".h5 (a 'matrix' group); its top level holds {keys}")


def _open_10x(f, src):
    h5py = _import_h5py()
    g = f["matrix"]
    if not isinstance(g, h5py.Group):
        raise ValueError(f"{src}: 'matrix' is not a group (a 10x Cell Ranger v3 .h5 has a "
                         "'matrix' group with data, indices, indptr, shape, features, barcodes)")
    if "shape" not in g:
        raise ValueError(f"{src}: matrix/shape is missing (a 10x .h5 stores it as "
                         "[genes, cells])")
    shape = np.asarray(g["shape"][()]).ravel()
    if shape.size != 2:
        raise ValueError(f"{src}: matrix/shape is {shape.tolist()}, not [genes, cells]")
    genes, cells = int(shape[0]), int(shape[1])
    # The file's arrays are the CSC of genes x cells: the CSR of cells x genes, as stored.
    s = _CompressedSource(f, src, "X", "matrix", g, (cells, genes), "row")
    feat = g.get("features")
    if isinstance(feat, h5py.Group):
        for key in ("name", "id"):
            if key in feat:
                s.names["features"] = _names_reader(feat[key], f"matrix/features/{key}", src)
                break
    if "barcodes" in g:
        s.names["samples"] = _names_reader(g["barcodes"], "matrix/barcodes", src)
    return s


def _open_h5ad(f, src, layer):
    h5py = _import_h5py()
    if layer in (None, "X"):
        where, layer_name = "X", "X"
        if "X" not in f:
            layers = sorted(f["layers"].keys()) if isinstance(f.get("layers"), h5py.Group) else []
            hint = (f"; convert a layer instead (layers: {', '.join(layers)})" if layers
                    else " and no layers")
            raise ValueError(f"{src}: the AnnData has no X matrix{hint}")
    else:
        layers = f.get("layers")
        names = sorted(layers.keys()) if isinstance(layers, h5py.Group) else []
        if layer not in names:
            raise ValueError(f"{src}: no layer {layer!r} (layers: "
                             f"{', '.join(names) if names else 'none'})")
        where, layer_name = f"layers/{layer}", layer
    x = f[where]
    if isinstance(x, h5py.Dataset):
        s = _DenseSource(f, src, layer_name, where, x)
    else:
        enc = _attr_str(x, "encoding-type") or ""
        old = _attr_str(x, "h5sparse_format") or ""
        if enc in ("csr_matrix", "csc_matrix") or old in ("csr", "csc"):
            major = "row" if (enc == "csr_matrix" or old == "csr") else "col"
            shape = x.attrs.get("shape", x.attrs.get("h5sparse_shape"))
            if shape is None or np.asarray(shape).size != 2:
                raise ValueError(f"{src}: {where} is a sparse matrix without a 2-element "
                                 "'shape' attribute")
            shape = np.asarray(shape).ravel()
            s = _CompressedSource(f, src, layer_name, where, x, shape, major)
        else:
            raise ValueError(f"{src}: {where} is a group of encoding {enc or old or 'unknown'!r}"
                             ", not a matrix (dense, csr_matrix or csc_matrix)")
    for kind, group in (("samples", "obs"), ("features", "var")):
        s.names[kind] = _anndata_index(f, src, group)
    return s


def _anndata_index(f, src, group):
    """A reader for obs_names/var_names: the dataframe's index column (AnnData >= 0.7 writes
    a group with an '_index' attribute naming it; older files a compound dataset with an
    'index' field)."""
    h5py = _import_h5py()
    if group not in f:
        raise ValueError(f"{src}: no '{group}' (the AnnData's {group}_names are needed)")
    g = f[group]
    if isinstance(g, h5py.Group):
        col = _attr_str(g, "_index") or "_index"
        if col not in g or not isinstance(g[col], h5py.Dataset):
            raise ValueError(f"{src}: {group} has no index column {col!r}")
        return _names_reader(g[col], f"{group}/{col}", src)
    if g.dtype.names and "index" in g.dtype.names:
        n = g.shape[0]
        return (lambda lo, hi: g[lo:hi]["index"]), n, f"{group}['index']"
    raise ValueError(f"{src}: {group} is neither a dataframe group nor a table with an 'index'")


def _names_reader(ds, desc, src):
    h5py = _import_h5py()
    if not isinstance(ds, h5py.Dataset) or ds.ndim != 1:
        raise ValueError(f"{src}: {desc} is not a 1-D array of names")
    if ds.dtype.kind in "SUO":
        return (lambda lo, hi: ds[lo:hi]), ds.shape[0], desc
    return (lambda lo, hi: [str(v) for v in ds[lo:hi]]), ds.shape[0], desc


# ---------------------------------------------------------------------------------------
# Files.


def _plain_name(name):
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name


_TMP_ENTRY = re.compile(r".*\.tmp-[^/]*")


def _not_replaceable(dst):
    """Why an existing destination may not be replaced (None when it may): it must be an
    empty directory or a didnmf store holding only its own files: manifest.json, the blocks
    it lists (.npz/.npy files), its names files (.tsv files, as listed), and leftover
    ``*.tmp-*`` entries of an interrupted conversion. Anything else is somebody's file."""
    if not dst.is_dir() or dst.is_symlink():
        return "not a directory"
    entries = sorted(os.listdir(dst))
    if not entries:
        return None
    if MANIFEST not in entries:
        return f"no {MANIFEST}; it holds {entries[0]!r}"
    try:
        m = store_manifest(dst)
    except ValueError as e:
        return str(e)
    own = {MANIFEST}
    for b in m["blocks"]:
        if b["file"].endswith((".npz", ".npy")):
            own.add(b["file"])
    for key in ("features", "samples"):
        name = m.get(key)
        if isinstance(name, str) and _plain_name(name) and name.endswith(".tsv"):
            own.add(name)
    for name in entries:
        if _TMP_ENTRY.fullmatch(name):
            continue
        path = dst / name
        if name not in own or path.is_symlink() or not path.is_file():
            return f"it holds {name!r}, which is not one of the store's files"
    return None


def _size(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def _check_written(source):
    """Refuse a matrix whose datasets store far less than they declare (see UNWRITTEN_RATIO)."""
    declared = stored = 0
    for ds in source.datasets():
        declared += int(np.prod(ds.shape, dtype=object)) * ds.dtype.itemsize
        stored += int(ds.id.get_storage_size())
    if declared < UNWRITTEN_MIN_BYTES or declared <= stored * UNWRITTEN_RATIO:
        return
    ratio = "nothing" if stored == 0 else f"1/{declared // stored}"
    raise source.err(
        f"{source.where} declares a {source.n_rows} x {source.n_cols} matrix of "
        f"{declared} bytes ({_size(declared)}) but the file stores {stored} bytes "
        f"({_size(stored)}) of it, {ratio} (written, compressed data stores at least "
        f"1/{UNWRITTEN_RATIO}): most of it was never written and would read as the fill "
        "value. Not converting it; pass allow_unwritten=True (--allow-unwritten) if that "
        "is meant")


def _check_space(source, dst, parent, block_rows, block_nnz):
    """Refuse an output larger than the free space of ``parent``'s file system."""
    need = source.estimate_bytes(block_rows, block_nnz) + source.names_bytes() + 4096
    usage = shutil.disk_usage(parent)
    margin = int(min(DISK_MARGIN_MAX, usage.total * DISK_MARGIN_FRACTION))
    if need > usage.free - margin:
        raise source.err(
            f"converting {source.where} ({source.n_rows} x {source.n_cols}) into {dst} "
            f"needs about {need} bytes ({_size(need)}), but {parent} has {usage.free} bytes "
            f"({_size(usage.free)}) free, of which {_size(margin)} are kept spare; free some "
            "space or write the store elsewhere")


def _move_into_place(tmp, dst):
    """Rename the finished ``tmp`` onto ``dst``; an old ``dst`` is moved aside first and
    removed after, so ``dst`` is never a half-written store."""
    old = None
    if dst.exists():
        old = Path(tempfile.mkdtemp(prefix=dst.name + ".old-", dir=tmp.parent))
        os.rename(dst, old / "store")
    try:
        os.rename(tmp, dst)
    except BaseException:
        if old is not None:
            os.rename(old / "store", dst)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _positive_int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def _import_h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError("reading .h5ad and 10x .h5 files needs h5py (Debian: apt-get "
                          "install python3-h5py)") from None
    return h5py
