// Package kernels holds the numerics of didnmf: data blocks, the per-shard steps of DID and of
// every algorithm the DID paper compares, the B updates, NNLS, initialisation, stopping and an
// in-process driver. It is pure and deterministic: no actors, no network, no files.
//
// Notation follows Gao & Chu (AAAI 2018): X is M x N with samples as columns, B is M x K (the
// basis), C is K x N (the coefficients), and the objective is 1/2 ||X - BC||_F^2. A shard owns a
// contiguous range of columns of X and C and a replica of B.
//
// Storage:
//   - X blocks are [Dense] (column-major, each sample contiguous) or [CSC] (compressed sparse
//     columns);
//   - B is column-major M x K: column k is B[k*M : (k+1)*M];
//   - C is column-major K x n: sample j's coefficients are C[j*K : (j+1)*K].
//
// A user's (N, M) row-major array, samples as rows, is exactly X in column-major order.
//
// # Pinned arithmetic
//
// A factorization is bitwise the same in every build of didnmf, GOAMD64=v1 or v3 alike, so the
// arithmetic of this package and of package nnls is written out exactly:
//
//   - No implicit fusion. Go lets the compiler fuse x*y + z into one fused multiply-add (an
//     FMA, rounded once); the amd64 compiler does so when GOAMD64 is v3 or later and never for
//     v1. Every product that feeds an addition or subtraction is therefore written with an
//     explicit conversion, float64(x*y) + z, which forbids fusion: it is rounded on its own,
//     as a v1 build rounds it. A kernel that wants an FMA calls math.FMA (always fused and
//     correctly rounded, in every build) and says so in its comment.
//   - Fixed order. Sums are accumulated in the order of the loops as written (an unrolled loop
//     keeps its separate partial sums and combines them in the written order); the partial
//     results of a shard's lanes are combined in lane order, and those of the shards by the
//     canonical reduce tree of [TreeSum]; never in order of completion.
//   - No build-dependent library arithmetic. The standard library is compiled with the same
//     GOAMD64, so its pure-Go functions fuse too: Norm uses this package's unfused copy of
//     math.Cos; math.Sqrt (exact) and math.Log (assembly on amd64) are the same in every
//     build. The one exception is NNDSVD initialisation, whose eigendecomposition is gonum's
//     (mat.EigenSym) and is not pinned.
//
// TestNoImplicitFusion (fusion_test.go) enforces the first rule: it compiles both packages for
// GOAMD64=v3, reads the compiler's listing and fails for every source line that produced a
// fused instruction without calling math.FMA, and for every call to a function of package math
// whose code is fused. TestBitsDoNotDependOnBuildFlags checks the result: the sha256 of B and C
// after 30 iterations of every algorithm, dense and sparse, against testdata/bits.golden; CI
// runs both under the default build and under GOAMD64=v3.
package kernels
