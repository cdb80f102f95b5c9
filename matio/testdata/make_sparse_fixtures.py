#!/usr/bin/env python3
"""Regenerates the sparse fixtures of the matio tests under testdata/sparse (run once; the
files are committed). numpy 1.24, scipy 1.10.

Every good fixture holds the same 40 x 7 matrix S (samples x features): S[i, j] =
((3*i + 5*j) * 7) % 13 where that is below 6, else 0 (integers 0..5, about 45% zeros), read
by matio's tests from sp_f8.npy, the dense reference. Names: features f0..f6, samples s0..s39.
"""
import gzip
import io
import json
import os

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sparse")
N, M = 40, 7
I, J = np.meshgrid(np.arange(N), np.arange(M), indexing="ij")
S = ((3 * I + 5 * J) * 7) % 13
S[S >= 6] = 0
S = S.astype(np.float64)
FEAT = ["f%d" % j for j in range(M)]
SAMP = ["s%d" % i for i in range(N)]


def path(*names):
    return os.path.join(HERE, *names)


def gz_write(name, data):
    with open(name, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(data)


os.makedirs(HERE, exist_ok=True)
np.save(path("sp_f8.npy"), S)
csr = sp.csr_matrix(S)
sp.save_npz(path("csr_f4.npz"), csr.astype(np.float32), compressed=True)
sp.save_npz(path("csr_f8_stored.npz"), csr, compressed=False)
c64 = csr.astype(np.int64)
c64.indices = c64.indices.astype(np.int64)
c64.indptr = c64.indptr.astype(np.int64)
sp.save_npz(path("csr_i8_stored.npz"), c64, compressed=False)
sp.save_npz(path("csc_f4.npz"), sp.csc_matrix(S.astype(np.float32)), compressed=True)
sp.save_npz(path("csc_f8_stored.npz"), sp.csc_matrix(S), compressed=False)
with open(path("csr_f4.features.tsv"), "w") as f:
    f.write("\n".join(FEAT) + "\n")
with open(path("csr_f4.samples.tsv"), "w") as f:
    f.write("\n".join(SAMP) + "\n")

# Unsorted indices and duplicates that sum to S: every stored value v > 1 of a row is split
# into 1 and v-1, stored in reverse order.
rows, cols, vals = [], [], []
for i in range(N):
    for j in reversed(range(M)):
        v = S[i, j]
        if v > 1:
            rows += [i, i]
            cols += [j, j]
            vals += [1.0, v - 1]
        elif v == 1:
            rows.append(i)
            cols.append(j)
            vals.append(v)
indptr = np.zeros(N + 1, dtype=np.int32)
np.add.at(indptr, np.array(rows) + 1, 1)
indptr = np.cumsum(indptr).astype(np.int32)
u = sp.csr_matrix((np.array(vals, dtype=np.float32), np.array(cols, dtype=np.int32), indptr), shape=(N, M))
u.has_sorted_indices = False
assert not u.has_canonical_format
sp.save_npz(path("csr_unsorted.npz"), u, compressed=False)
assert (sp.load_npz(path("csr_unsorted.npz")).toarray() == S).all()

# 10x Cell Ranger v3 (gzip) and v2 (plain, genes.tsv) directories: genes x cells.
for d, gzipped in (("tenx_v3", True), ("tenx_v2", False)):
    os.makedirs(path(d), exist_ok=True)

    buf = io.BytesIO()
    scipy.io.mmwrite(buf, sp.coo_matrix(S.T.astype(np.int64)), field="integer")
    mtx = buf.getvalue()
    feats = "".join("ENSG%05d\t%s\tGene Expression\n" % (j, FEAT[j]) for j in range(M))
    if not gzipped:
        feats = "".join("ENSG%05d\t%s\n" % (j, FEAT[j]) for j in range(M))
    bars = "".join("%s\n" % s for s in SAMP)
    if gzipped:
        gz_write(path(d, "matrix.mtx.gz"), mtx)
        gz_write(path(d, "features.tsv.gz"), feats.encode())
        gz_write(path(d, "barcodes.tsv.gz"), bars.encode())
    else:
        with open(path(d, "matrix.mtx"), "wb") as f:
            f.write(mtx)
        with open(path(d, "genes.tsv"), "w") as f:
            f.write(feats)
        with open(path(d, "barcodes.tsv"), "w") as f:
            f.write(bars)

# A block store of three blocks: a stored CSR .npz, a dense .npy, a compressed CSR .npz.
st = path("store")
os.makedirs(st, exist_ok=True)
cuts = [0, 13, 30, 40]
blocks = []
for b, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
    if b == 1:
        name = "block-%06d.npy" % b
        np.save(os.path.join(st, name), S[lo:hi].astype(np.float32))
    else:
        name = "block-%06d.npz" % b
        sp.save_npz(os.path.join(st, name), sp.csr_matrix(S[lo:hi].astype(np.float32)), compressed=(b == 2))
    blocks.append({"file": name, "rows": hi - lo})
with open(os.path.join(st, "features.tsv"), "w") as f:
    f.write("\n".join(FEAT) + "\n")
with open(os.path.join(st, "samples.tsv"), "w") as f:
    f.write("\n".join(SAMP) + "\n")
with open(os.path.join(st, "manifest.json"), "w") as f:
    json.dump({"format": "didnmf-blocks", "version": 1, "shape": [N, M], "blocks": blocks,
               "features": "features.tsv", "samples": "samples.tsv", "source": "made by make_sparse_fixtures.py"}, f, indent=1)

# Bad files.
bad = sp.csr_matrix(S)
bad.data[5] = -2.0
sp.save_npz(path("bad_negative.npz"), bad, compressed=False)
bad = sp.csr_matrix(S)
bad.data[7] = np.nan
sp.save_npz(path("bad_nan.npz"), bad, compressed=False)
bad = sp.csr_matrix(S)
bad.indices[3] = 9
sp.save_npz(path("bad_index.npz"), bad, compressed=False)
with open(path("bad_h5ad.h5ad"), "wb") as f:
    f.write(b"\x89HDF\r\n\x1a\n" + b"\0" * 56)
