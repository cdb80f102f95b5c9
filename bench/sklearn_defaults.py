#!/usr/bin/env python3
"""scikit-learn NMF with its defaults (solver cd, tol 1e-4, max_iter 200, init None: nndsvda) on
samples-as-rows data, for BENCHMARKS.md "Stopping". Run with /usr/bin/python3 (Debian python3-sklearn).
usage: sklearn_defaults.py DATA K [INIT]   (DATA: .npy, .mtx, or fashion for the Debian Fashion-MNIST files)"""
import json, sys, time, warnings, gzip
import numpy as np, scipy.io, scipy.sparse as sp
from sklearn.decomposition import NMF
path, K = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
if path.endswith('.npy'):
    A = np.load(path)
elif path.endswith('.mtx'):
    A = sp.csr_matrix(scipy.io.mmread(path))
elif path == 'fashion':
    parts = []
    for f in ['train-images-idx3-ubyte.gz', 't10k-images-idx3-ubyte.gz']:
        with gzip.open('/usr/share/datasets/fashion-mnist/' + f) as fh:
            b = fh.read()
        parts.append(np.frombuffer(b, np.uint8, offset=16).reshape(-1, 784).astype(np.float64))
    A = np.vstack(parts)
else:
    raise SystemExit('unknown data')
read = time.perf_counter() - t0
warnings.simplefilter("ignore")
m = NMF(n_components=K, init=sys.argv[3] if len(sys.argv) > 3 else None, random_state=0)
t = time.perf_counter(); W = m.fit_transform(A); dt = time.perf_counter() - t
H = m.components_
if sp.issparse(A):
    nx = sp.linalg.norm(A) ** 2
    err = nx - 2 * np.sum((A @ H.T) * W) + np.sum((W.T @ W) * (H @ H.T))
else:
    nx = np.linalg.norm(A) ** 2
    err = np.linalg.norm(A - W @ H) ** 2
print(json.dumps({"peer": "sklearn-defaults", "init": m.init or "None", "data": path, "K": K, "iters": int(m.n_iter_),
                  "seconds": round(dt, 3), "read_seconds": round(read, 2), "rel_err2": err / nx}))
