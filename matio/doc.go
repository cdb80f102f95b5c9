// Package matio reads and writes the matrix files didnmf takes as input: NumPy .npy,
// MatrixMarket .mtx, IDX (the MNIST format), any of them optionally gzip-compressed; scipy
// sparse .npz files (scipy.sparse.save_npz, CSR or CSC, compressed or not); 10x Genomics Cell
// Ranger directories (matrix.mtx[.gz], features.tsv[.gz] or genes.tsv[.gz],
// barcodes.tsv[.gz]); didnmf block stores (a directory of .npz or .npy row blocks with a
// manifest.json, which the Python package's `python3 -m didnmf convert` writes from an AnnData
// .h5ad or a 10x .h5); and synthetic matrices described by a spec string. HDF5 files (.h5ad,
// .h5) are not read: Open says how to convert them. [ReadNames] reads the feature and sample
// names that come with an input.
//
// A CSR .npz is read by sample ranges straight from the file (its stored members with ReadAt,
// its deflated ones streamed, one decompression shared by the concurrent Reads of a process),
// and a block store opens only the blocks a range overlaps, so that each shard reads only its
// own samples. With [ReadOptions] Storage, blocks of counts come stored as float32: a sparse
// input takes what its nonzeros take, never a dense copy.
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
// Every file is opened through an [Opener] that does not block ([OpenInput] by default, or a
// node's confined opener) and checked on the opened descriptor: a FIFO, a socket or a device
// in place of a file is refused, naming it, and a directory where a file is wanted too.
//
// Every error about the input wraps [usererr.ErrUser] and starts with the file path or the spec.
package matio
