package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Algorithm names an NMF algorithm.
type Algorithm string

// The algorithms of the DID paper. The distributed ones run on any number of shards; the others
// run on one shard holding all of X.
const (
	DID     Algorithm = "did"      // distributed incremental block coordinate descent: one allreduce per iteration
	DBCD    Algorithm = "dbcd"     // distributed block coordinate descent: K allreduces per iteration
	BCD     Algorithm = "bcd"      // sequential block coordinate descent (DBCD on one process)
	HALS    Algorithm = "hals"     // hierarchical ALS: rank-one pairs b_1, c_1, b_2, c_2, ...
	MU      Algorithm = "mu"       // Lee-Seung multiplicative updates
	ANLS    Algorithm = "anls"     // alternating NNLS with block principal pivoting
	ADMM    Algorithm = "admm"     // Zhang's ADMM with auxiliary W, H and penalty rho
	DADMM   Algorithm = "dadmm"    // the paper's distributed ADMM (section 3), BPP for B
	HPCANLS Algorithm = "hpc-anls" // Kannan et al.'s HPC-ANLS with a 1-D column partition
	// Transform is not a factorization: the coefficients for a fixed basis (Init.B0), by
	// exact NNLS per sample (see transform.go).
	Transform Algorithm = "transform"
)

// AlgorithmInfo describes an algorithm.
type AlgorithmInfo struct {
	Name Algorithm
	// Distributed algorithms run on P shards through collectives.
	Distributed bool
	// Monotone algorithms never increase the objective.
	Monotone bool
	// Summary is a one-line description.
	Summary string
	// LayoutInvariant algorithms give the same bits on a dense block and on its CSC form
	// (TestLayoutSameBits), so the layout may follow the machine; the others round
	// differently on the two.
	LayoutInvariant bool
	// Penalties: the algorithm implements the L1/L2 penalties of Options (AlphaCoef,
	// AlphaBasis, L1Ratio); the others refuse them.
	Penalties bool
	run       func(*shardEnv)
	// state gives the layout of Snapshot.State for a spec (nil: no extra state).
	state func(*ShardSpec) []stateSlot
}

var algorithms = []AlgorithmInfo{
	{DID, true, true, "distributed incremental BCD, one allreduce per iteration (the paper's algorithm)", true, true, runDID, didState},
	{DBCD, true, true, "distributed BCD, K allreduces per iteration", true, true, runDBCD, residualBCDState},
	{BCD, false, true, "sequential block coordinate descent", true, true, runBCD, residualBCDState},
	{HALS, false, true, "hierarchical ALS, rank-one pairs (b_k, c_k)", false, true, runHALS, nil},
	{MU, true, true, "Lee-Seung multiplicative updates, any beta-divergence loss, one allreduce per iteration", false, true, runMU, muState},
	{ANLS, false, true, "alternating NNLS, block principal pivoting", false, true, runANLS, nil},
	{ADMM, false, false, "ADMM (Zhang 2010) with auxiliary variables, penalty rho", false, false, runADMM, admmState},
	{DADMM, true, false, "distributed ADMM of the paper's section 3, BPP for B", true, false, runDADMM, dadmmState},
	{HPCANLS, true, true, "HPC-ANLS (Kannan et al.), 1-D column partition", true, true, runHPCANLS, hpcanlsState},
}

// transformInfo describes Transform, which is not a factorization: LookupAlgorithm finds it,
// Algorithms does not list it.
var transformInfo = AlgorithmInfo{Transform, true, true, "coef for a fixed basis: exact NNLS per sample (BPP), one pass", false, true, runTransform, nil}

// Algorithms lists every factorization algorithm (Transform, which fits no basis, is left out).
func Algorithms() []AlgorithmInfo { return slices.Clone(algorithms) }

// LookupAlgorithm returns the algorithm of that name.
func LookupAlgorithm(name Algorithm) (AlgorithmInfo, error) {
	for _, a := range algorithms {
		if a.Name == name {
			return a, nil
		}
	}
	if name == Transform {
		return transformInfo, nil
	}
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = string(a.Name)
	}
	return AlgorithmInfo{}, fmt.Errorf("unknown algorithm %q (known: %s)", string(name), strings.Join(names, ", "))
}

// Form selects how DID's shard step is computed. Both forms give the same iterates in exact
// arithmetic and agree to round-off.
type Form uint8

const (
	// FormAuto picks by shape and storage (see ChooseForm).
	FormAuto Form = iota
	// FormResidual is the paper's form: e_j = x_j - B c_j kept and updated per coordinate.
	FormResidual
	// FormGram works from h_j = B^T x_j and G = B^T B, and W_i = X_i C_i^T - B C_i C_i^T.
	FormGram
)

func (f Form) String() string {
	switch f {
	case FormResidual:
		return "residual"
	case FormGram:
		return "gram"
	}
	return "auto"
}

// ParseForm parses "auto", "residual" or "gram".
func ParseForm(s string) (Form, error) {
	switch s {
	case "auto", "":
		return FormAuto, nil
	case "residual":
		return FormResidual, nil
	case "gram":
		return FormGram, nil
	}
	return FormAuto, fmt.Errorf("unknown kernel form %q (known: auto, residual, gram)", s)
}

// Options are the algorithms' tuning knobs.
type Options struct {
	// Form is DID's kernel form.
	Form Form
	// Rho is the ADMM and DADMM penalty (default 1, as in the paper).
	Rho float64
	// Storage is how the shard stores its block (NewMachine applies it; see Storage). The
	// factors do not depend on it.
	Storage Storage
	// AlphaCoef, AlphaBasis and L1Ratio are scikit-learn 1.2's NMF penalties, so that its
	// settings carry over (see "Penalties" in the package doc). AlphaCoef is alpha_W, the
	// penalty on C (scikit-learn's W, samples x K); AlphaBasis is alpha_H, on B (its H^T);
	// L1Ratio is l1_ratio in [0, 1], the L1 share. The alphas must be finite and >= 0. With M
	// features and N samples (all of X) the objective becomes
	//
	//	||X - BC||^2 + 2 l1C ||C||_1 + l2C ||C||^2 + 2 l1B ||B||_1 + l2B ||B||^2,
	//	l1C = M AlphaCoef L1Ratio,   l2C = M AlphaCoef (1 - L1Ratio),
	//	l1B = N AlphaBasis L1Ratio,  l2B = N AlphaBasis (1 - L1Ratio),
	//
	// twice scikit-learn's, as the unpenalized objective is twice its 0.5 ||X - WH||^2. Both
	// alphas 0 (the default) is the unpenalized problem, bit for bit. scikit-learn's default
	// alpha_H = "same" is AlphaBasis = AlphaCoef here. admm and dadmm refuse a penalty.
	AlphaCoef, AlphaBasis, L1Ratio float64
	// Loss is the divergence D(X | BC) to minimise, scikit-learn's beta_loss (see "Losses" in
	// the package doc): LossFrobenius (the zero value: ||X - BC||^2, bit for bit as without
	// the field), LossKL, LossIS or any finite beta (BetaLoss, ParseLoss). Only mu takes
	// another loss than the Frobenius one (ValidateLoss), with scikit-learn's solver="mu"
	// updates; the objective is then 2 D plus the penalties above, twice scikit-learn's
	// _beta_divergence as ||X - BC||^2 is twice its 0.5 ||X - WH||^2. IS (beta <= 0) needs
	// X > 0 everywhere (Loss.CheckData).
	Loss Loss
	// Missing makes X's NaN entries missing values: the fit minimizes the residual over the
	// observed entries only (see "Missing values" in the package doc and mask.go). Without
	// it X must hold no NaN.
	Missing bool
	// TestFraction in [0, 1) holds out the entries (sample j, feature i) whose hash of
	// (TestSeed, j, i) falls below it (HeldOut): they are missing for the fit and their error
	// is reported every iteration ("Held-out entries" in the package doc). 0: no test set.
	TestFraction float64
	TestSeed     uint64
	// TestOfSquares says X's values are the square roots of the input's (a sqrt transform):
	// the held-out error a run ends with (Result.TestSSE and TestSqNorm) is then that of the
	// model's square against the values' squares, the input's scale: the sum of
	// (v^2 - max(b_i . c_j, 0)^2)^2 and of (v^2)^2 over the held-out values v
	// (Machine.HeldOutOfSquares). The iterations' test errors stay those of the values.
	TestOfSquares bool
	// Kernel is the kernel path this run's kernels use; KernelAuto (the zero value) takes the
	// process's (SetKernelPath). Every path computes the same bits, so only the speed
	// depends on it; naming one lets runs on different paths go side by side in one process
	// (the tests that compare paths do).
	Kernel KernelPath
	// Accel sets accelerated DID's adaptive inner loops (accel.go, "Accelerated DID" in
	// doc.go): further sweeps over each column of C and over B within an iteration, with no
	// further allreduce. The zero value is the plain algorithm, bit for bit. did, bcd and hals
	// take it (ValidateAccel).
	Accel Accel
	// maskTuning, when set, replaces masked DID's internal choices (didMaskDefaults): tests
	// move them to check that every choice gives the same bits.
	maskTuning *didMaskTuning
}

// ShardSpec is everything one shard needs to run its part of a job.
type ShardSpec struct {
	Algo Algorithm
	// Shard is this shard's id in [0, Shards).
	Shard, Shards int
	// ColOffset is the global index of the block's first column; TotalCols is N.
	ColOffset, TotalCols int
	// X is the shard's block of the data, M x n_i.
	X Block
	// K is the rank.
	K    int
	Seed uint64
	Init InitSpec
	Options
	// Pool runs the shard's lanes; shards of one process may share it.
	Pool *Pool
	// Resume, when set, makes the shard continue from a snapshot (taken by Machine.Snapshot of
	// a machine with the same spec) instead of initialising: no init collectives, and the
	// steps from iteration Resume.Iteration+1 on are bitwise those of the original machine.
	Resume *Snapshot
}

func (s *ShardSpec) validate() error {
	info, err := LookupAlgorithm(s.Algo)
	if err != nil {
		return err
	}
	if s.Shards < 1 {
		return fmt.Errorf("shards must be >= 1, got %d", s.Shards)
	}
	if !info.Distributed && s.Shards != 1 {
		return fmt.Errorf("algorithm %s is not distributed: it runs on 1 shard, not %d", s.Algo, s.Shards)
	}
	if s.Shard < 0 || s.Shard >= s.Shards {
		return fmt.Errorf("shard id %d out of range [0, %d)", s.Shard, s.Shards)
	}
	if s.X == nil {
		return fmt.Errorf("shard %d has no data", s.Shard)
	}
	m, n := s.X.Dims()
	if m < 1 || n < 1 {
		return fmt.Errorf("shard %d has an empty block (%d x %d): more shards than samples?", s.Shard, m, n)
	}
	if s.TotalCols < n || s.ColOffset < 0 || s.ColOffset+n > s.TotalCols {
		return fmt.Errorf("shard %d: columns [%d, %d) outside the %d columns of X", s.Shard, s.ColOffset, s.ColOffset+n, s.TotalCols)
	}
	if err := CheckRankOf(s.Algo, s.K, m, s.TotalCols); err != nil {
		return err
	}
	if s.Rho < 0 || math.IsNaN(s.Rho) || math.IsInf(s.Rho, 0) {
		return fmt.Errorf("rho must be a positive number, got %v", s.Rho)
	}
	if err := s.Options.ValidatePenalties(s.Algo); err != nil {
		return err
	}
	if err := s.Options.ValidateLoss(s.Algo); err != nil {
		return err
	}
	if err := s.Options.validatePenaltyScale(m, s.TotalCols); err != nil {
		return err
	}
	if s.Pool == nil {
		return fmt.Errorf("shard %d has no worker pool", s.Shard)
	}
	if err := CheckKernelPath(s.Kernel); err != nil {
		return err
	}
	if s.Algo == Transform {
		if s.Init.Method != InitCustom || len(s.Init.B0) == 0 {
			return fmt.Errorf("transform needs the basis: init custom with B0 (M x K)")
		}
		if s.Init.C0 == nil {
			s.Init.C0 = make([]float64, s.K*n) // the solve starts from C = 0
		}
	}
	if err := s.Init.validate(m, n, s.K); err != nil {
		return err
	}
	if s.Resume != nil {
		return s.validateResume(info)
	}
	return nil
}

// CheckRank returns an error unless 1 <= k <= min(m, n).
func CheckRank(k, m, n int) error {
	if k < 1 || k > min(m, n) {
		return fmt.Errorf("rank %d out of range: it must be between 1 and min(M, N) = min(%d, %d) = %d", k, m, n, min(m, n))
	}
	return nil
}

// CheckRankOf is [CheckRank] for algorithm a: a [Transform] solves each sample's coef against
// a fixed basis on its own, so any number of samples is fine and only 1 <= k <= m is required
// (scikit-learn's transform takes a single sample too).
func CheckRankOf(a Algorithm, k, m, n int) error {
	if a != Transform {
		return CheckRank(k, m, n)
	}
	if k < 1 || k > m {
		return fmt.Errorf("rank %d out of range: projecting onto a basis needs 1 <= K <= M = %d (the basis' features)", k, m)
	}
	return nil
}

// shardEnv is what an algorithm's body sees: the spec, its factors and the collectives.
type shardEnv struct {
	m     *Machine
	spec  ShardSpec
	rows  int // M
	cols  int // n_i
	k     int
	yield func(Step) bool
	// B and C are the factors the machine reports (M x K and K x n_i, column-major).
	B, C []float64
	// initEnded is when begin had B and C: the initialisation's local work done.
	initEnded time.Time
	// state, set by the body, returns deep copies of its Snapshot.State at a boundary.
	state func() [][]float64
	// flag is the machine's interrupt flag (see interrupt.go).
	flag *interruptFlag
}

func newShardEnv(m *Machine, spec ShardSpec) *shardEnv {
	rows, cols := spec.X.Dims()
	return &shardEnv{m: m, spec: spec, rows: rows, cols: cols, k: spec.K, flag: &m.intr}
}

func (e *shardEnv) basis() []float64 { return e.B }
func (e *shardEnv) coef() []float64  { return e.C }

// penalty returns the job's scaled penalties: M features, N = TotalCols samples.
func (e *shardEnv) penalty() penalty { return newPenalty(e.spec.Options, e.rows, e.spec.TotalCols) }

// gram returns the Gram lane kernels of the run's kernel path (Options.Kernel).
func (e *shardEnv) gram() *gramKernels { return gramKernelsOf(e.spec.Kernel) }

func (e *shardEnv) rho() float64 {
	if e.spec.Rho == 0 {
		return 1
	}
	return e.spec.Rho
}

// collective yields a collective step and returns its result.
func (e *shardEnv) collective(st Step) []float64 {
	st.Kind = StepCollective
	if !e.yield(st) {
		panic(errStopped)
	}
	res := e.m.inbox
	e.m.inbox = nil
	return res
}

func (e *shardEnv) allReduce(label string, iter int, data []float64) []float64 {
	return e.collective(Step{Op: OpAllReduce, Label: label, Iteration: iter, Data: data, Init: iter == 0})
}

func (e *shardEnv) allGather(label string, iter int, data []float64) []float64 {
	return e.collective(Step{Op: OpAllGather, Label: label, Iteration: iter, Data: data, Init: iter == 0})
}

func (e *shardEnv) reduceScatter(label string, iter int, data []float64, segments []int) []float64 {
	return e.collective(Step{Op: OpReduceScatter, Label: label, Iteration: iter, Data: data, Segments: segments, Init: iter == 0})
}

// iterationDone yields an iteration boundary.
func (e *shardEnv) iterationDone(iter int, objective, initial float64) {
	if objective < 0 {
		objective = 0
	}
	if !e.yield(Step{Kind: StepIterationDone, Iteration: iter, Objective: objective, Initial: initial}) {
		panic(errStopped)
	}
}
