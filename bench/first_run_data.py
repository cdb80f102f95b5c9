#!/usr/bin/env python3
"""Writes the matrices of BENCHMARKS.md "Stopping" into DIR: counts.npy (20000 x 300 Poisson
counts of planted rank 8) and sparse.mtx (50000 x 2000 Poisson counts of planted rank 10, 4.3%
nonzero). Run with /usr/bin/python3 (Debian python3-numpy, python3-scipy).
usage: first_run_data.py DIR"""
import sys
import numpy as np, scipy.io, scipy.sparse as sp
out = sys.argv[1]
rng = np.random.default_rng(7)
W = rng.gamma(0.5, 1.0, (20000, 8)); H = rng.gamma(0.5, 1.0, (8, 300))
np.save(out + '/counts.npy', rng.poisson(W @ H * 2).astype(np.float64))
W = rng.gamma(0.3, 1.0, (50000, 10)); H = rng.gamma(0.3, 1.0, (10, 2000))
scipy.io.mmwrite(out + '/sparse.mtx', sp.csr_matrix(rng.poisson(W @ H * 0.05).astype(np.float64)))
