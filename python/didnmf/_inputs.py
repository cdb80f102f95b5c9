"""Inputs as the didnmf command takes them: paths passed through, arrays through temporary files.

A ``str`` or ``os.PathLike`` (or a list of them, stacked as more samples) is given to the
command untouched, so a file on shared storage is read by the nodes, never by this process.
An in-memory array is written into a temporary directory the caller owns: a dense array as
``.npy`` (its float32 or float64 values as they are), a scipy sparse matrix in its sparse
layout, as a CSR ``.npz`` (``scipy.sparse.save_npz``, uncompressed) when the command reads
``.npz``, else as MatrixMarket with every digit of its values: never a dense copy. Names
(a DataFrame's, an AnnData's) go to it as names files, one name a line (``write_names``).
"""

import gzip
import json
import os
import struct
import subprocess
import tempfile
import zipfile

import numpy as np
import scipy.sparse as sp

__all__ = ["is_path", "as_paths", "write_matrix", "write_factor", "write_names", "peek_shape", "reads_npz"]

# The longest name a names file may hold, in UTF-8 bytes (the command's maxNameBytes).
MAX_NAME_BYTES = 4096

# Binaries asked whether they read .npz: path -> bool.
_npz_support = {}


def is_path(X):
    """True when X names input files (a str, an os.PathLike, or a non-empty list/tuple of
    them) rather than holding data."""
    if isinstance(X, (str, os.PathLike)):
        return True
    if isinstance(X, (list, tuple)) and X and all(isinstance(p, (str, os.PathLike)) for p in X):
        return True
    return False


def as_paths(X):
    """The input paths of X (one or several), as strings, absolute (the nodes of a cluster
    resolve only absolute paths; a synthetic spec is kept as it is)."""
    items = [X] if isinstance(X, (str, os.PathLike)) else list(X)
    out = []
    for p in items:
        s = os.fspath(p)
        if s.lower().endswith((".h5ad", ".h5")):
            stem = os.path.splitext(s)[0]
            raise ValueError(
                f"{s}: an HDF5 file (AnnData .h5ad or 10x .h5), which the didnmf command does not "
                f"read: fit anndata.read_h5ad({s!r}, backed='r') (converted once, out of core, into "
                f"a store next to it), or didnmf.convert({s!r}, {stem + '.didnmf'!r}) and fit "
                f"{stem + '.didnmf'!r}"
            )
        out.append(s if s.startswith("synthetic:") else os.path.abspath(s))
    return out


def reads_npz(binary):
    """True when the didnmf command at ``binary`` reads scipy's sparse ``.npz``, so sparse
    matrices go to it in that layout: asked once per binary, by converting a 1 x 1 CSR
    ``.npz`` with ``didnmf convert`` (a command that reads no .npz refuses it)."""
    hit = _npz_support.get(binary)
    if hit is None:
        with tempfile.TemporaryDirectory(prefix="didnmf-probe-") as tmp:
            probe = os.path.join(tmp, "probe.npz")
            sp.save_npz(probe, sp.csr_matrix(np.ones((1, 1))), compressed=False)
            proc = subprocess.run(
                [binary, "convert", "--input", probe, "--out", os.path.join(tmp, "probe.npy")],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
            )
        hit = proc.returncode == 0
        _npz_support[binary] = hit
    return hit


def write_matrix(X, directory, binary, name="X"):
    """Write X (a validated numpy array or scipy sparse matrix, samples as rows) into
    ``directory`` for the command at ``binary``, and return the file's path."""
    if sp.issparse(X):
        X = X.tocsr()
        if reads_npz(binary):
            path = os.path.join(directory, name + ".npz")
            sp.save_npz(path, X, compressed=False)
            return path
        # MatrixMarket until the command reads .npz: sparse, and exact (17 significant
        # digits give every float64 back).
        from scipy.io import mmwrite

        path = os.path.join(directory, name + ".mtx")
        mmwrite(path, X, precision=17, symmetry="general")
        return path
    path = os.path.join(directory, name + ".npy")
    np.save(path, np.ascontiguousarray(X), allow_pickle=False)
    return path


def write_factor(A, directory, name):
    """Write a factor (an initial or fixed basis or coef) as a float64 ``.npy`` file."""
    path = os.path.join(directory, name + ".npy")
    np.save(path, np.ascontiguousarray(A, dtype=np.float64), allow_pickle=False)
    return path


def _is_control(c):
    """Whether ``c`` is a control character as Go's unicode.IsControl says (C0, DEL, C1),
    the characters the command refuses in a name."""
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F


def write_names(names, directory, kind):
    """Write ``names`` (the ``kind`` names, "feature" or "sample") as the names file the
    command's --feature-names and --sample-names read (one name a line, UTF-8) into
    ``directory``, and return its path. A name that file cannot hold (empty, with a tab, a
    line break or another control character, not valid Unicode, or longer than 4096 bytes)
    is a ``ValueError`` naming it and its position."""
    lines = []
    for i, name in enumerate(names):
        s = str(name)
        why = None
        if not s:
            why = "is empty"
        elif any(c in s for c in "\t\n\r"):
            why = "holds a tab or a line break"
        elif (control := next((c for c in s if _is_control(c)), None)) is not None:
            # The command refuses these too (matio.ControlInName: names go to .tsv files
            # and the terminal); said here, before anything is written.
            why = f"holds the control character U+{ord(control):04X}"
        else:
            try:
                n = len(s.encode("utf-8"))
            except UnicodeEncodeError:
                why = "is not valid Unicode (it holds a lone surrogate)"
            else:
                if n > MAX_NAME_BYTES:
                    why = f"is longer than {MAX_NAME_BYTES} bytes"
        if why:
            raise ValueError(
                f"{kind} name {i} ({s!r}) {why}: didnmf's names files hold one name a line, "
                f"not empty, at most {MAX_NAME_BYTES} bytes of UTF-8, without tabs, line breaks "
                f"or other control characters; rename it"
            )
        lines.append(s + "\n")
    path = os.path.join(directory, kind + "s.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(lines))
    return path


def peek_shape(paths):
    """The (samples, features) of input files, read from their headers only (never their
    values), or None when one of them is of a kind whose header is not read here."""
    n, m = 0, None
    for p in paths:
        if p.startswith("synthetic:"):
            return None
        shape = _peek_one(p)
        if shape is None:
            return None
        if m is not None and shape[1] != m:
            return None  # the command says what is wrong
        n, m = n + shape[0], shape[1]
    return (n, m) if m is not None else None


def _peek_one(path):
    try:
        if os.path.isdir(path):
            return _peek_dir(path)
        lower = path.lower()
        base = lower[:-3] if lower.endswith(".gz") else lower
        if base.endswith(".npy"):
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            return (arr.shape[0], int(np.prod(arr.shape[1:]))) if arr.ndim >= 2 else None
        if base.endswith(".npz"):
            with zipfile.ZipFile(path) as z, z.open("shape.npy") as f:
                shape = np.lib.format.read_array(f, allow_pickle=False)
                fmt = b"csr"
                if "format.npy" in z.namelist():
                    with z.open("format.npy") as g:
                        fmt = np.lib.format.read_array(g, allow_pickle=False).item()
                return (int(shape[0]), int(shape[1])) if fmt in (b"csr", b"csc", "csr", "csc") else None
        if base.endswith(".mtx"):
            rows, cols = _mtx_shape(path)
            return rows, cols
        if base.endswith(".idx") or "-idx" in os.path.basename(base):
            return _idx_shape(path)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, struct.error):
        return None
    return None


def _open(path):
    return gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")


def _mtx_shape(path):
    with _open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(b"%"):
                continue
            fields = line.split()
            return int(fields[0]), int(fields[1])
    raise ValueError("no size line")


def _idx_shape(path):
    with _open(path) as f:
        magic = f.read(4)
        ndim = magic[3]
        dims = struct.unpack(">" + "i" * ndim, f.read(4 * ndim))
    if ndim < 1:
        return None
    return dims[0], int(np.prod(dims[1:])) if ndim > 1 else 1


def _peek_dir(path):
    manifest = os.path.join(path, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            shape = json.load(f)["shape"]
        return int(shape[0]), int(shape[1])
    for name in ("matrix.mtx", "matrix.mtx.gz"):
        mtx = os.path.join(path, name)
        if os.path.exists(mtx):
            genes, cells = _mtx_shape(mtx)
            return cells, genes  # a 10x matrix is genes x cells; cells are the samples
    return None
