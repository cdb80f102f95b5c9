#!/usr/bin/env python3
"""Regenerates the NumPy / SciPy fixtures of the matio tests (run from any directory).

Every good fixture holds the same 7 x 5 matrix A, A[i, j] = ((5*i + j) * 7) % 11 (integers 0..10,
with some zeros), in some dtype and order: integer files hold A, float files A / 4, the bool
file A % 2. matio's tests rebuild A the same way. Bad fixtures hold what their names say.
"""
import gzip
import os

import numpy as np
import scipy.io
import scipy.sparse

HERE = os.path.dirname(os.path.abspath(__file__))
N, M = 7, 5
A = ((np.arange(N * M).reshape(N, M) * 7) % 11).astype(np.int64)


def path(name):
    return os.path.join(HERE, name)


def save(name, arr, fortran=False, version=None):
    arr = np.asfortranarray(arr) if fortran else np.ascontiguousarray(arr)
    with open(path(name), "wb") as f:
        if version is None:
            np.save(f, arr, allow_pickle=arr.dtype == object)
        else:
            np.lib.format.write_array(f, arr, version=version)


def gz(name):
    with open(path(name), "rb") as f:
        data = f.read()
    with open(path(name + ".gz"), "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(data)


# Good .npy files.
save("c_f8.npy", (A / 4).astype("<f8"))
save("f_f8.npy", (A / 4).astype("<f8"), fortran=True)
save("c_f4_be.npy", (A / 4).astype(">f4"))
save("f_f4.npy", (A / 4).astype("<f4"), fortran=True)
save("f_f8_be.npy", (A / 4).astype(">f8"), fortran=True)
save("c_i4.npy", A.astype("<i4"))
save("f_i2_be.npy", A.astype(">i2"), fortran=True)
save("c_i1.npy", A.astype("i1"))
save("c_u1.npy", A.astype("u1"))
save("f_u1.npy", A.astype("u1"), fortran=True)
save("c_u2.npy", A.astype("<u2"))
save("c_u4_be.npy", A.astype(">u4"))
save("c_i8_be.npy", A.astype(">i8"))
save("c_u8.npy", A.astype("<u8"))
save("c_b1.npy", (A % 2).astype(bool))
save("v2_f8.npy", (A / 4).astype("<f8"), version=(2, 0))
save("v3_f8.npy", (A / 4).astype("<f8"), version=(3, 0))
gz("c_f8.npy")
gz("f_i2_be.npy")

# Bad .npy files.
save("bad_1d.npy", np.arange(100, dtype="<f8"))
save("bad_3d.npy", np.zeros((2, 3, 4)))
save("bad_empty.npy", np.zeros((0, 5)))
save("bad_c16.npy", np.ones((3, 2), dtype="<c16"))
save("bad_f2.npy", np.ones((3, 2), dtype="<f2"))
save("bad_str.npy", np.array([["a", "b"]], dtype="<U3"))
save("bad_struct.npy", np.zeros((3, 2), dtype=[("x", "<f8"), ("y", "<i4")]))
save("bad_object.npy", np.array([[1, None]], dtype=object))
neg = np.ones((20, 5))
neg[12, 3] = -0.5
save("bad_neg.npy", neg)
save("bad_neg_f.npy", neg, fortran=True)
nan = np.ones((4, 3), dtype="<f4")
nan[2, 1] = np.nan
save("bad_nan.npy", nan)
inf = np.ones((4, 3), dtype=">f8")
inf[3, 2] = np.inf
save("bad_inf.npy", inf)
negint = np.ones((3, 4), dtype="<i2")
negint[1, 2] = -7
save("bad_negint.npy", negint)

# MatrixMarket files written by SciPy.
scipy.io.mmwrite(path("coo.mtx"), scipy.sparse.coo_matrix(A / 4))
scipy.io.mmwrite(path("array.mtx"), A / 4)
scipy.io.mmwrite(path("int.mtx"), scipy.sparse.coo_matrix(A), field="integer")
scipy.io.mmwrite(path("pattern.mtx"), scipy.sparse.coo_matrix(A), field="pattern")
S = A[:5, :5] + A[:5, :5].T
scipy.io.mmwrite(path("sym.mtx"), scipy.sparse.coo_matrix(S), symmetry="symmetric")
scipy.io.mmwrite(path("sym_array.mtx"), S.astype(float), symmetry="symmetric")
gz("coo.mtx")
