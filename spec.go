package didnmf

import (
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// Spec is a job in typed form: its inputs, algorithm, rank, shards, stop rule (Spec.Stop),
// penalties, held-out set, checkpoints and where its input and outputs go. Its fields and
// their defaults are the CLI's flags (`didnmf factorize -h`); NewSpec makes one with every
// field at its default, and Open checks it (Spec.Check alone, Spec.CheckOn with the data).
type Spec = jobspec.Spec

// NewSpec returns the spec of a job on inputs (file paths, or synthetic:m=...,n=...,k=...
// matrices) with every other field at the CLI's default: seed 1, random initialisation, tol
// 1e-6, max-iter 1000, automatic checkpoints, shared ingest, accel DefaultAccel. Change what
// you need.
func NewSpec(inputs []string, algo Algorithm, rank, shards int) *Spec {
	return jobspec.New(inputs, algo, rank, shards)
}

// Algorithm names a factorization algorithm.
type Algorithm = kernels.Algorithm

// The algorithms: DID and the algorithms the paper compares it with, and Transform, which
// solves the coefficients for a fixed basis.
const (
	DID       = kernels.DID       // distributed incremental block coordinate descent: one allreduce per iteration
	DBCD      = kernels.DBCD      // distributed block coordinate descent: K allreduces per iteration
	BCD       = kernels.BCD       // sequential block coordinate descent (DBCD on one process)
	HALS      = kernels.HALS      // hierarchical ALS: rank-one pairs
	MU        = kernels.MU        // Lee-Seung multiplicative updates (every beta loss)
	ANLS      = kernels.ANLS      // alternating NNLS with block principal pivoting
	ADMM      = kernels.ADMM      // Zhang's ADMM with auxiliary W, H and penalty rho
	DADMM     = kernels.DADMM     // the paper's distributed ADMM
	HPCANLS   = kernels.HPCANLS   // Kannan et al.'s HPC-ANLS with a 1-D column partition
	Transform = kernels.Transform // the coefficients of every sample for a fixed basis (Spec.InitBasis), in one pass
)

// Accel is accelerated DID's inner loops (Spec.Accel): at most CSweeps coordinate sweeps over
// each column of C and BSweeps over B an iteration, each loop stopping once its step falls
// below Eps of its first, with no further allreduce. The zero value is the plain algorithm, bit
// for bit; did, bcd and hals have the loops, Open refuses extra sweeps for the others.
type Accel = kernels.Accel

// AccelAuto is the inner loops of --accel auto.
var AccelAuto = kernels.AccelAuto

// DefaultAccel is the accel NewSpec gives a job (ParseAccel's form), as the CLI's and the
// HTTP API's default.
const DefaultAccel = jobspec.DefaultAccel

// ParseAccel reads an accel as --accel does: "off", "auto", "C,B" or "C,B,eps".
func ParseAccel(s string) (Accel, error) { return kernels.ParseAccel(s) }

// How the nodes of a cluster get a job's input (Spec.Ingest).
const (
	// IngestShared: every node reads its shards' rows of the input files itself, from a
	// path that every node sees under its data roots.
	IngestShared = jobspec.IngestShared
	// IngestStream: this process reads the input and streams each shard its block.
	IngestStream = jobspec.IngestStream
)

// Progress is what a running job reports after each iteration (Options.Progress).
type Progress = kernels.Progress

// ErrUser is wrapped by every error that is the user's to fix: a bad input, a spec a rule
// refuses, a job a node refused for its input (errors.Is(err, ErrUser); IsInput). A
// *usererr.Error (errors.As) names the spec's field.
var ErrUser = usererr.ErrUser
