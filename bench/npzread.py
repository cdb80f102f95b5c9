#!/usr/bin/env python3
"""Reading a scipy sparse .npz: didnmf's nodes (4 shards, by sample ranges, GOMAXPROCS=2)
against scipy.sparse.load_npz, in the same run, on the same files (warm in the page cache).

    /usr/bin/python3 bench/npzread.py [--dir /tmp/npzread] [--rows 200000] [--cols 20000] [--density 0.02]

Makes (once) CSR files of small-integer counts: float32 and float64 data, each stored
(save_npz(compressed=False)) and compressed; then for each file: scipy.sparse.load_npz 3 times
(median; peak RSS of a fresh process), and `go run ./bench/npzread` (built once) with
GOMAXPROCS=2, 4 shards, 3 runs. Prints one line a measurement and a table.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def make(path, n, m, density, dtype, compressed, seed=1):
    if os.path.exists(path):
        return
    rng = np.random.default_rng(seed)
    indptr = np.zeros(n + 1, dtype=np.int64)
    idx, pos = [], 0
    step = 1000
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        mask = rng.random((hi - lo, m), dtype=np.float32) < density
        r, c = np.nonzero(mask)
        idx.append(c.astype(np.int32))
        counts = np.bincount(r, minlength=hi - lo)
        indptr[lo + 1:hi + 1] = pos + np.cumsum(counts)
        pos += len(c)
    indices = np.concatenate(idx)
    data = rng.integers(1, 16, size=len(indices)).astype(dtype)
    x = sp.csr_matrix((data, indices, indptr), shape=(n, m))
    sp.save_npz(path + ".tmp.npz", x, compressed=compressed)
    os.rename(path + ".tmp.npz", path)


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


SCIPY = """
import resource, sys, time
import scipy.sparse as sp
times = []
for _ in range(3):
    t = time.perf_counter()
    x = sp.load_npz(sys.argv[1])
    times.append(time.perf_counter() - t)
    nnz = x.nnz
    del x
times.sort()
print("scipy\\t%s\\tmedian=%.3fs\\truns=%s\\tnnz=%d\\tpeak_rss=%d" % (sys.argv[1], times[1], ",".join("%.3f" % t for t in times), nnz,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/npzread")
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--cols", type=int, default=20000)
    ap.add_argument("--density", type=float, default=0.02)
    ap.add_argument("--shards", type=int, default=4)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    exe = os.path.join(a.dir, "npzread")
    subprocess.run(["go", "build", "-o", exe, "./bench/npzread"], cwd=ROOT, check=True)
    rows = []
    for dtype in ("float32", "float64"):
        for compressed in (False, True):
            name = "csr_%dx%d_%s_%s.npz" % (a.rows, a.cols, dtype, "deflate" if compressed else "stored")
            path = os.path.join(a.dir, name)
            t = time.perf_counter()
            make(path, a.rows, a.cols, a.density, dtype, compressed)
            warm(path)
            out = subprocess.run([sys.executable, "-c", SCIPY, path], check=True, capture_output=True, text=True).stdout.strip()
            print(out, flush=True)
            scipy_t = float(out.split("median=")[1].split("s")[0])
            storage = "auto"
            env = dict(os.environ, GOMAXPROCS="2")
            g = subprocess.run([exe, "-shards", str(a.shards), "-reps", "3", "-storage", storage, path],
                               check=True, capture_output=True, text=True, env=env).stdout.strip()
            print(g, flush=True)
            f = dict(kv.split("=", 1) for kv in g.split("\t") if "=" in kv)
            go_t = float(f["median"].rstrip("s"))
            rows.append((name, os.path.getsize(path), scipy_t, go_t, int(f["nnz_bytes"]), int(f["peak_rss"])))
    print("\n| file | size | scipy load_npz | didnmf 4 shards | ratio | nonzeros' bytes | peak RSS | RSS / nonzeros |")
    print("|---|---|---|---|---|---|---|---|")
    for name, size, s, g, nb, rss in rows:
        print("| %s | %.0f MB | %.2f s | %.2f s | %.2fx | %.0f MB | %.0f MB | %.2f |" % (
            name, size / 1e6, s, g, g / s, nb / 1e6, rss / 1e6, rss / nb))


if __name__ == "__main__":
    main()
