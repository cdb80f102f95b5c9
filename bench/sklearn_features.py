#!/usr/bin/env python3
"""scikit-learn peer for the features of BENCHMARKS.md ("What NMF users ask for"), on the bytes
`didnmf convert --format npy` writes (samples x features). Needs Debian's python3-sklearn; run with
/usr/bin/python3. Each command prints one JSON line.

  mu    X.npy K LOSS        seconds per iteration of NMF(solver="mu", beta_loss=LOSS), random
                            init, tol 0: the difference of 60 and 10 iterations over 50
  transform X.npy BASIS.npy COEF.npy
                            seconds of NMF.transform(X) with components_ = BASIS^T (median of
                            3), its relative error, and that of COEF (didnmf's transform)
"""
import json, sys, time, warnings
import numpy as np
from sklearn.decomposition import NMF

warnings.filterwarnings("ignore")
cmd = sys.argv[1]
if cmd == "mu":
    x = np.load(sys.argv[2])
    k, loss = int(sys.argv[3]), sys.argv[4]
    loss = {"kl": "kullback-leibler", "is": "itakura-saito", "frobenius": "frobenius"}.get(loss) or float(loss)
    ts = []
    for iters in (10, 60):
        m = NMF(n_components=k, init="random", solver="mu", beta_loss=loss, max_iter=iters, tol=0, random_state=0)
        t = time.perf_counter()
        m.fit_transform(x)
        ts.append(time.perf_counter() - t)
    print(json.dumps({"peer": "scikit-learn", "solver": "mu", "beta_loss": loss, "sec_per_iter": (ts[1] - ts[0]) / 50}))
elif cmd == "transform":
    x = np.load(sys.argv[2])
    b = np.load(sys.argv[3])  # features x K
    ours = np.load(sys.argv[4])
    k = b.shape[1]
    m = NMF(n_components=k, init="custom", solver="cd", max_iter=200)
    m.components_ = np.ascontiguousarray(b.T)
    m.n_components_, m.n_features_in_, m._n_components = k, b.shape[0], k
    ts = []
    for _ in range(3):
        t = time.perf_counter()
        w = m.transform(x)
        ts.append(time.perf_counter() - t)
    sq = (x ** 2).sum()
    print(json.dumps({"peer": "scikit-learn", "transform_sec": sorted(ts)[1],
                      "rel_err2": float(((x - w @ b.T) ** 2).sum() / sq),
                      "didnmf_rel_err2": float(((x - ours @ b.T) ** 2).sum() / sq)}))
else:
    sys.exit(__doc__)
