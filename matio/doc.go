// Package matio reads and writes the matrix files didnmf takes as input: NumPy .npy,
// MatrixMarket .mtx, IDX (the MNIST format), any of them optionally gzip-compressed, and
// synthetic matrices described by a spec string.
//
// Users give matrices with samples as rows, shape (N samples, M features). Internally the data
// matrix X is M x N: samples are the columns of X. A [Source] hands out column blocks of X as
// [kernels.Block] values (a column-major *kernels.Dense or a *kernels.CSC), one contiguous range
// of samples at a time, so that each shard can read only its own part.
//
// Every entry must be finite and nonnegative. With [ReadOptions] Missing (see
// [OpenAllWithOptions], [NewBlockBuilderWithOptions]) a NaN entry is a missing value instead:
// the blocks hold NaN there, as kernels.Options.Missing expects.
//
// Every error about the input wraps [ErrInput] and starts with the file path or the spec.
package matio
