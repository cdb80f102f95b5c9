#!/usr/bin/env python3
"""Sparse peer for BENCHMARKS.md: makes a random sparse count matrix and times scikit-learn's
NMF (solver "cd") on it, so that `didnmf bench` can time didnmf on the same bytes.
Needs Debian's python3-sklearn; run with /usr/bin/python3.

  make  OUT.mtx SAMPLES FEATURES DENSITY SEED   writes a MatrixMarket file (samples as rows),
                                                values small integer counts 1..9
  time  IN.mtx K ITERS                          prints one JSON line: sec_per_iter of
                                                sklearn.decomposition.NMF(solver="cd"),
                                                random custom init, tol 0
"""
import json, sys, time, warnings
import numpy as np
import scipy.io, scipy.sparse

if sys.argv[1] == "make":
    out, n, m, density, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    rng = np.random.default_rng(seed)
    a = scipy.sparse.random(n, m, density=density, format="coo", random_state=rng,
                            data_rvs=lambda k: rng.integers(1, 10, k).astype(np.float64))
    scipy.io.mmwrite(out, a, field="integer")
    print(json.dumps({"wrote": out, "samples": n, "features": m, "nnz": int(a.nnz)}))
elif sys.argv[1] == "time":
    from sklearn.decomposition import NMF
    a = scipy.io.mmread(sys.argv[2]).tocsr().astype(np.float64)
    k, iters = int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(0)
    scale = np.sqrt(a.mean() / k)
    w0 = rng.random((a.shape[0], k)) * scale
    h0 = rng.random((k, a.shape[1])) * scale
    warnings.simplefilter("ignore")
    m = NMF(n_components=k, init="custom", solver="cd", max_iter=iters, tol=0.0)
    t = time.perf_counter(); w = m.fit_transform(a, W=w0, H=h0); dt = time.perf_counter() - t
    print(json.dumps({"peer": "sklearn-cd", "samples": a.shape[0], "features": a.shape[1], "nnz": int(a.nnz),
                      "K": k, "iters": int(m.n_iter_), "seconds": dt, "sec_per_iter": dt / max(1, m.n_iter_)}))
else:
    sys.exit(__doc__)
