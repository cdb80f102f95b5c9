package jobspec

import (
	"errors"
	"path/filepath"
	"slices"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// Where says what checks a job, for CheckOn: what runs it and who reads the files it names.
type Where int

const (
	// InProcess: this process runs the job (the driver, or actor systems in this process)
	// and reads its files; ingest, out_shared and detached are for jobs on a cluster.
	InProcess Where = iota
	// Submitted: this process submits the job to a cluster, whose nodes read the files a
	// shared ingest names in their own working directories (so the paths are absolute).
	Submitted
	// OnNode: a node of the cluster checks a job submitted to it.
	OnNode
)

// Cluster is what CheckOn knows of where the job runs.
type Cluster struct {
	// Where says what checks the job.
	Where Where
	// Members are the actor addresses of the cluster's workers; the spec's Nodes must be
	// among them (nil: not a cluster, or not known here: not checked).
	Members []string
	// Memory is the memory, in bytes, this machine offers a job it runs in process (0: not
	// checked; on a cluster the placement weighs each node's offer against Footprint).
	Memory int64
}

// Shape is what CheckOn knows of the job's data.
type Shape struct {
	// Name names the input in messages.
	Name string
	// Samples and Features are the input's N and M.
	Samples, Features int
	// StoredEntries is the number of entries a sparse input stores (0: not known, or dense).
	StoredEntries int64
	// InitBasis and InitCoef are the shapes (rows, columns) of a custom initialisation's
	// files, when they were read (nil: not read here, or not given).
	InitBasis, InitCoef *[2]int
}

// Density returns the stored entries over M x N when known, else 0 (dense).
func (d *Shape) Density() float64 {
	if d.StoredEntries <= 0 || d.Samples <= 0 || d.Features <= 0 {
		return 0
	}
	return float64(d.StoredEntries) / (float64(d.Features) * float64(d.Samples))
}

// CheckOn is the one check of a job: the spec alone (Check), the spec against its data (d;
// nil when this process does not know the data: a cluster's nodes check it), and the spec
// against where it runs (c). Every entry point calls it: the CLI, the Go API, a node's
// submit and setup. It returns a *usererr.Error naming the first field that breaks a rule,
// the value, and the rule. With the data, a rank below 1 is refused with the range the data
// allow (as a rank above it).
func (s *Spec) CheckOn(d *Shape, c Cluster) error {
	return s.checkOn(d, c, d != nil)
}

// CheckBeforeData is CheckOn for a process about to read the data (so as not to read it for
// a spec that breaks a rule): every rule but the rank's, which CheckOn checks with the data.
func (s *Spec) CheckBeforeData(c Cluster) error {
	return s.checkOn(nil, c, true)
}

// checkOn is CheckOn; withData leaves the rank to the check against the data.
func (s *Spec) checkOn(d *Shape, c Cluster, withData bool) error {
	if err := s.Check(); err != nil {
		// With the data, the rank is checked against it below: the message gives the range.
		var ue *usererr.Error
		if !withData || !errors.As(err, &ue) || ue.Field != "rank" {
			return err
		}
		r := *s // the spec's other rules
		r.Rank = 1
		if err := r.Check(); err != nil {
			return err
		}
	}
	if err := s.checkPlace(c); err != nil {
		return err
	}
	if d != nil {
		return s.checkData(d, c)
	}
	return nil
}

// checkPlace checks the rules of where the job runs.
func (s *Spec) checkPlace(c Cluster) error {
	switch {
	case c.Where == InProcess && s.Ingest != IngestShared:
		return fieldErr("ingest", "{ingest} %s is for jobs on a cluster (this process runs the job and reads its input)", s.Ingest)
	case c.Where == InProcess && s.OutShared != "":
		return fieldErr("out_shared", "{out_shared} %s is for jobs on a cluster (this process runs the job and writes its factors)", s.OutShared)
	case s.Detached && c.Where == InProcess:
		return fieldErr("detached", "{detached} is for jobs on a cluster, with {out_shared}: a detached job writes its factors on the nodes")
	case s.Detached && s.OutShared == "":
		return fieldErr("detached", "{detached} needs {out_shared}: a detached job writes its factors on the nodes")
	}
	if c.Where == Submitted {
		if s.OutShared != "" && !filepath.IsAbs(s.OutShared) {
			return fieldErr("out_shared", "{out_shared} %s: give an absolute path (the nodes' working directories differ)", s.OutShared)
		}
		if s.Ingest == IngestShared {
			for _, in := range s.Inputs {
				if !matio.IsSynthetic(in) && !filepath.IsAbs(in) {
					return fieldErr("input", "{input} %s: give an absolute path with {ingest} shared (the nodes' working directories differ), or {ingest} stream", in)
				}
			}
			for _, f := range []struct{ field, path string }{{"init_basis", s.InitBasis}, {"init_coef", s.InitCoef}} {
				if f.path != "" && !filepath.IsAbs(f.path) {
					return fieldErr(f.field, "{"+f.field+"} %s: give an absolute path with {ingest} shared (the nodes read it), or {ingest} stream (this process reads it and streams it to them)", f.path)
				}
			}
		}
	}
	if c.Members != nil {
		for _, a := range s.Nodes {
			if !slices.Contains(c.Members, a) {
				return fieldErr("nodes", "{nodes}: %s is not a member of the cluster", a)
			}
		}
	}
	return nil
}

// checkData checks the spec against its data: the rank against the shape (a transform
// needs only K <= M: see kernels.CheckRankOf), the shards against the samples, a custom
// initialisation's shapes, and the memory the job needs against what this machine offers.
func (s *Spec) checkData(d *Shape, c Cluster) error {
	if err := kernels.CheckRankOf(s.Algo, s.Rank, d.Features, d.Samples); err != nil {
		return fieldErr("rank", "{rank}: %v for %s (%d samples x %d features)", err, d.Name, d.Samples, d.Features)
	}
	if s.Shards > d.Samples {
		return fieldErr("shards", "{shards} %d is more than the %d samples of %s", s.Shards, d.Samples, d.Name)
	}
	if got := d.InitBasis; got != nil && (got[0] != d.Features || got[1] != s.Rank) {
		return fieldErr("init_basis", "{init_basis} %s: shape (%d, %d), but %s has %d features and {rank} is %d: want features x K = (%d, %d)",
			s.InitBasis, got[0], got[1], d.Name, d.Features, s.Rank, d.Features, s.Rank)
	}
	if got := d.InitCoef; got != nil && (got[0] != d.Samples || got[1] != s.Rank) {
		return fieldErr("init_coef", "{init_coef} %s: shape (%d, %d), but %s has %d samples and {rank} is %d: want samples x K = (%d, %d)",
			s.InitCoef, got[0], got[1], d.Name, d.Samples, s.Rank, d.Samples, s.Rank)
	}
	if c.Memory > 0 {
		var need int64
		for _, n := range s.Footprint(d) {
			need += n
		}
		if need > c.Memory {
			return fieldErr("input", "%s (%d samples x %d features, {rank} %d) needs about %s of memory for its data and factors; this machine has %s available: use a cluster, fewer samples, or {layout} sparse for sparse data",
				d.Name, d.Samples, d.Features, s.Rank, cluster.FormatBytes(need), cluster.FormatBytes(c.Memory))
		}
	}
	return nil
}

// ShardOverhead is the memory a shard takes beyond its data: the actor, its mailbox, its
// machine's buffers and bookkeeping, its reducer's share, and what the node keeps for it.
// Measured on one `node serve` process running 5,000 shards of one sample each (m=5, K=2):
// RSS 23 MB idle, 314 MB running, about 58 KiB a shard. It is counted in every shard's
// estimate, so that a job of very many small shards is refused like a job of a few big ones.
const ShardOverhead = 64 << 10

// Footprint estimates the memory each shard of the job holds on the data d (see
// ShardFootprint): what placement reserves for it, and what a job in process needs in all.
func (s *Spec) Footprint(d *Shape) []int64 {
	cols := kernels.ColumnRanges(d.Samples, s.Shards)
	need := make([]int64, s.Shards)
	for i := range need {
		m, n := int64(d.Features), int64(cols[i+1]-cols[i])
		need[i] = ShardFootprint(m, n, int64(s.Rank), d.Density(), s.Layout) + HeldOutFootprint(s.Algo, m, n, int64(s.Rank), d.Density(), s.TestFraction, s.Layout, s.Missing) +
			AccelFootprint(n, int64(s.Rank), s.Accel) + AlgoFootprint(s.Algo, m, n, s.Missing || s.TestFraction > 0)
	}
	return need
}

// HeldOutFootprint estimates the bytes a shard of m features and cols samples at rank k holds
// for a test set of fraction frac (0: none), and the copy of the block without its held-out
// entries that the masked fit reads. DID without missing values keeps only the stored
// held-out entries and a work space fixed by m and k (kernels.HeldOutBytes, measured by
// kernels' TestHeldOutBytes). Every other masked fit keeps every held-out entry, zeros of a
// sparse block included, at most kernels.MaskEntryBytes (32 bytes) each (about 30 for did
// with missing values, 24 for bcd, dbcd and hals, 27 for mu, measured by kernels'
// TestShardMaskBytes): on a large sparse matrix that is most of a shard's memory (10% of
// 200,000 x 20,000 is 12.8 GB), so placement reserves it and a job that cannot have it is
// refused before any shard allocates it. Missing values (NaN) are not counted: their number
// is unknown before the data is read.
func HeldOutFootprint(algo kernels.Algorithm, m, cols, k int64, density, frac float64, layout matio.Layout, missing bool) int64 {
	if !(frac > 0) {
		return 0
	}
	if algo == kernels.DID && !missing {
		stored := m * cols
		if isSparse(density, layout) {
			stored = int64(density * float64(m*cols))
		}
		return kernels.HeldOutBytes(m, cols, stored, int(k), frac) + blockBytes(m, cols, density, layout)
	}
	return int64(kernels.MaskEntryBytes*frac*float64(m)*float64(cols)) + blockBytes(m, cols, density, layout)
}

// AccelFootprint estimates the bytes a shard of cols samples and rank k holds beyond
// ShardFootprint for accel: with extrapolation, the previous plain coefficients (K x n).
func AccelFootprint(cols, k int64, a kernels.Accel) int64 {
	if !a.Extrapolate {
		return 0
	}
	return 8 * cols * k
}

// AlgoFootprint estimates the bytes a shard of m features and cols samples holds beyond
// ShardFootprint for the dense M x n arrays of its algorithm, whatever the density of X:
// bcd and dbcd keep the residual X - BC (kernels' residualShard), so does hals on a masked
// block (maskedResidual), and dadmm keeps its Y and U. On a sparse matrix these dwarf the
// block (bcd on 25,000 x 20,000 at 2% density: 4 GB of its 6.3 GB), so placement must reserve
// them. masked is true when the job may hide entries (missing values or a test fraction).
func AlgoFootprint(algo kernels.Algorithm, m, cols int64, masked bool) int64 {
	switch {
	case algo == kernels.BCD || algo == kernels.DBCD || algo == kernels.HALS && masked:
		return 8 * m * cols
	case algo == kernels.DADMM:
		return 16 * m * cols
	}
	return 0
}

// ShardFootprint estimates the bytes a shard of m features, cols samples and rank k holds:
// its block of X (dense, or CSC when the input's density is known and the layout makes it
// sparse), C and its work copies, and the replicas of B and the products the algorithms keep.
func ShardFootprint(m, cols, k int64, density float64, layout matio.Layout) int64 {
	return ShardOverhead + blockBytes(m, cols, density, layout) + 8*4*cols*k + 8*8*m*k + 8*4*k*k
}

// isSparse reports whether a shard's block is CSC: a density below the layout's crossing, or
// the sparse layout.
func isSparse(density float64, layout matio.Layout) bool {
	sparse := layout == matio.LayoutSparse || (layout != matio.LayoutDense && density < layout.Crossing())
	return density > 0 && density < 1 && sparse
}

// blockBytes estimates the bytes of a shard's block of X: dense, or CSC when the input's
// density is known and the layout makes it sparse.
func blockBytes(m, cols int64, density float64, layout matio.Layout) int64 {
	if isSparse(density, layout) {
		return int64(12*density*float64(m*cols)) + 8*(cols+1)
	}
	return 8 * m * cols
}
