package kernels

import (
	"errors"
	"fmt"
	"iter"
	"time"
)

// StepKind tells what a shard machine stopped at.
type StepKind uint8

const (
	// StepCollective: the shard needs the result of a collective (Step.Op over Step.Data)
	// before it can go on; hand it over with Machine.Deliver.
	StepCollective StepKind = iota + 1
	// StepIterationDone: the shard finished an iteration and sits at an iteration boundary,
	// where its state is consistent and can be read out. Step.Objective and Step.Initial are
	// global values, identical on every shard.
	StepIterationDone
)

// Step is what a shard machine produces: a collective to run, or an iteration boundary.
type Step struct {
	Kind StepKind
	// Op, Data, Segments and Label describe a collective. Label names the step
	// ("did.partial", "init.mean", ...); all shards of a job reach the same labels in the same
	// order. Data belongs to the machine until the next call to Next.
	Op       Op
	Data     []float64
	Segments []int
	Label    string
	// Init is true for collectives of the initialisation, which come before iteration 1.
	Init bool
	// Iteration is the iteration in progress (collectives) or just finished.
	Iteration int
	// Objective is ||X - BC||_F^2 after the iteration; Initial is ||X - B0 C0||_F^2. With
	// penalties (Options.AlphaCoef, AlphaBasis) both include them ("Penalties" in the package
	// doc). In a masked run (Options.Missing, TestFraction) they are sums over the observed
	// entries only.
	Objective, Initial float64
	// Mask holds, at an iteration boundary of a masked run, the global counts and sums of X's
	// entries (zero in an unmasked run): the observed count is what the objective sums over.
	Mask MaskStats
	// TestSSE is the squared error sum (x_ij - (BC)_ij)^2 over the held-out entries
	// (Mask.Test of them) after the iteration, InitialTestSSE that of B0 C0 (both 0 without a
	// test set; see "Held-out entries" in the package doc).
	TestSSE, InitialTestSSE float64
}

// Machine is one shard of a job as a deterministic state machine: Next runs local work up to
// the next collective or iteration boundary; Deliver hands in a collective's result. Given the
// same spec and the same delivered results, a machine produces bitwise the same steps.
// A Machine is not safe for concurrent use, except for Interrupt.
type Machine struct {
	spec    ShardSpec
	env     *shardEnv
	next    func() (Step, bool)
	stop    func()
	pending bool // a collective was returned and awaits Deliver
	inbox   []float64
	failed  error
	// boundary is true while the step the last Next returned is a StepIterationDone, kept in
	// last: Snapshot is valid then.
	boundary bool
	last     Step
	// intr is set by Interrupt; the kernels look at it between blocks of columns.
	intr interruptFlag
	// mask is the machine's mask in a masked run (Options.Masked), nil otherwise.
	mask *maskState
}

// errStopped unwinds a shard body when its machine is closed while it waits on a collective.
var errStopped = errors.New("kernels: machine stopped")

// NewMachine builds the machine for one shard. It validates the spec; no work is done until Next.
// A spec.Resume snapshot is copied: the caller may reuse or change it afterwards.
func NewMachine(spec ShardSpec) (*Machine, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := spec.Options.ValidateMask(spec.Algo, spec.Init.Method); err != nil {
		return nil, err
	}
	if err := spec.Options.ValidateAccel(spec.Algo); err != nil {
		return nil, err
	}
	if spec.Resume != nil {
		spec.Resume = spec.Resume.clone()
	}
	x, err := ApplyStorage(spec.X, spec.Storage)
	if err != nil {
		var ie *InexactError
		if errors.As(err, &ie) {
			e := *ie
			e.Col += spec.ColOffset
			return nil, fmt.Errorf("shard %d: %w", spec.Shard, &e)
		}
		return nil, fmt.Errorf("shard %d: %w", spec.Shard, err)
	}
	spec.X = x
	info, _ := LookupAlgorithm(spec.Algo)
	m := &Machine{spec: spec}
	if spec.Options.Masked() {
		m.mask = &maskState{}
	}
	m.env = newShardEnv(m, spec)
	body := func(yield func(Step) bool) {
		m.env.yield = yield
		defer func() {
			if r := recover(); r != nil && r != errStopped {
				panic(r)
			}
		}()
		info.run(m.env)
	}
	m.next, m.stop = iter.Pull(body)
	return m, nil
}

// Next runs the shard up to its next step. After a StepCollective, Deliver must be called
// before Next. A panic in the shard's code is returned as an error and ends the machine. Once
// Interrupt was called (before or during Next) Next returns an error that wraps
// ErrInterrupted, mid-step, within one block of columns of the kernel it was running, and
// so does every later call.
func (m *Machine) Next() (st Step, err error) {
	if m.failed != nil {
		return Step{}, m.failed
	}
	if m.intr.set.Load() {
		m.failed = &interruptedError{m.spec.Shard, m.spec.Algo}
		return Step{}, m.failed
	}
	if m.pending {
		return Step{}, fmt.Errorf("kernels: shard %d: Next called before Deliver", m.spec.Shard)
	}
	defer func() {
		if r := recover(); r != nil {
			if r == ErrInterrupted {
				m.failed = &interruptedError{m.spec.Shard, m.spec.Algo}
			} else {
				m.failed = fmt.Errorf("kernels: shard %d (%s) failed: %v", m.spec.Shard, m.spec.Algo, r)
			}
			err = m.failed
		}
	}()
	m.boundary = false
	st, ok := m.next()
	if !ok {
		m.failed = fmt.Errorf("kernels: shard %d ended", m.spec.Shard)
		return Step{}, m.failed
	}
	m.pending = st.Kind == StepCollective
	if m.boundary = st.Kind == StepIterationDone; m.boundary {
		if ms := m.mask; ms != nil {
			st.Mask, st.TestSSE, st.InitialTestSSE = ms.totals, ms.test, ms.initialTest
		}
		m.last = st
	}
	return st, nil
}

// Deliver hands the shard the result of the collective it asked for. The machine reads but does
// not keep or modify result after the following Next returns.
func (m *Machine) Deliver(result []float64) {
	m.inbox = result
	m.pending = false
}

// Close ends the machine and releases its coroutine.
func (m *Machine) Close() { m.stop() }

// Interrupt stops the machine as soon as possible. Unlike the other methods it may be called
// from any goroutine, at any time (also before the first Next or after Close) and any number
// of times; it is meant to be called while another goroutine is inside Next, e.g. by
// context.AfterFunc(ctx, m.Interrupt) or by whatever handles a job's cancellation while the
// shard's own goroutine is busy stepping. The running step's kernels see it within one block of
// work (a fraction of a millisecond at small ranks; at rank 3000, where one column of DID's
// kernel is 50 ms or more, they also look between the phases of a column: some 10-50 ms), and
// Next then returns an error wrapping ErrInterrupted; a machine that is not inside Next returns
// it from its next call. The one step that cannot be cut short is the eigendecomposition of
// NNDSVD's (K+10) x (K+10) sketch: from K = 246 on it runs aside, so Next still returns at once,
// but it goes on in the background until it is done (up to half a minute at K = 3000).
//
// An interrupted machine is finished, its step left half done: Next and, once Next has
// returned the error, Snapshot refuse to go on (a snapshot taken at the boundary before that is
// valid). Basis and Coef then hold the last boundary's factors as far as the interrupted step
// had updated them in place: nonnegative, a mix of two iterates. Close it as usual.
func (m *Machine) Interrupt() { m.intr.set.Store(true) }

// InitEnded returns when the machine had its initial B and C (drawn, computed or resumed):
// the end of its initialisation's local work, which comes after the initialisation's last
// collective (random draws, NNDSVD's last products). Zero before. Like Basis, read it between
// calls to Next.
func (m *Machine) InitEnded() time.Time { return m.env.initEnded }

// Basis returns the shard's replica of B (M x K, column-major). Valid at iteration boundaries;
// the slice is the machine's own and changes with the next iteration.
func (m *Machine) Basis() []float64 { return m.env.basis() }

// Coef returns the shard's coefficients C_i (K x n_i, column-major). Valid at iteration
// boundaries; the slice is the machine's own.
func (m *Machine) Coef() []float64 { return m.env.coef() }

// LocalResidual returns ||X_i - B C_i||_F^2 for this shard, computed from the residuals, not
// from the iterations' Gram identities: directly on the block's nonzero entries, and for its
// zeros by an identity guarded against cancellation, a column directly where the guard fails
// (residual_sparse.go: within about 1e-12 of itself of a compensated sum; the same bits for a
// dense and a sparse block of the same values). Valid at iteration boundaries.
//
// In a masked run it sums over the shard's observed entries only.
func (m *Machine) LocalResidual() float64 {
	var sm *shardMask
	if m.env.masked() {
		sm = m.mask.sm
	}
	return reportedResidualSq(m.spec.X, sm, m.env.basis(), m.env.coef(), m.spec.K, m.spec.Pool)
}

// HeldOutOfSquares returns, over the shard's held-out entries v (missing ones left out), the
// squared error of the model's square against v^2, sum (v^2 - max(b_i . c_j, 0)^2)^2, and the
// sum of (v^2)^2 (0, 0 without a test set): the test error of Options.TestOfSquares, on the
// shard's pool, the same bits on any number of threads. Valid at iteration boundaries.
func (m *Machine) HeldOutOfSquares() (sse, sqNorm float64) {
	if !m.env.masked() || !m.mask.sm.test {
		return 0, 0
	}
	return heldOutOfSquares(m.mask.sm, m.env.basis(), m.env.coef(), m.spec.K, m.spec.Pool)
}

// LocalTestSSE returns the squared error over the shard's held-out entries, computed
// directly from B and C_i (0 without a test set). Valid at iteration boundaries.
func (m *Machine) LocalTestSSE() float64 {
	if !m.env.masked() || !m.mask.sm.test {
		return 0
	}
	return heldOutSq(m.mask.sm, m.env.basis(), m.env.coef(), m.spec.K, 0, m.mask.sm.n)
}
