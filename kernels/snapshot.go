package kernels

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Snapshot is a shard's state at an iteration boundary: enough to build a fresh machine (with
// ShardSpec.Resume) that continues from that boundary and produces bitwise the same steps and
// factors as the machine it was taken from. Take it with Machine.Snapshot.
type Snapshot struct {
	// Iteration is the iteration just finished (>= 1); a resumed machine runs Iteration+1 next.
	Iteration int
	// Initial is ||X - B0 C0||_F^2 and Objective the objective after Iteration, as in Step
	// (with the penalties, if any).
	Initial, Objective float64
	// B is the shard's replica of the basis (M x K, column-major) and C its coefficients
	// (K x n_i, column-major), as Machine.Basis and Machine.Coef.
	B, C []float64
	// State is the algorithm's extra state that is carried across iterations and is not a
	// bitwise function of (X, B, C), in this order (n = n_i, all matrices column-major):
	//
	//	did, gram form:   A = X_i C_i^T as accumulated by the last C update (M x K),
	//	                  V = C_i C_i^T (K x K); they give the next iteration's objective
	//	did, residual:    none
	//	dbcd, bcd:        E_i = X_i - B C_i, the maintained residual (M x n)
	//	admm:             H (K x n), Phi (M x K), Psi (K x n); W is recomputed before use
	//	dadmm:            U_i (M x n), Y_i (M x n)
	//	hpc-anls:         [||X||^2] (1 value: the global norm from the init allreduce)
	//	hals, mu, anls:   none
	//
	// A masked run (Options.Missing or TestFraction) puts first the mask's global counts
	// (MaskStats: observed, missing, held-out, observed sum, observed squared norm, held-out
	// squared norm) and the held-out error of B0 C0, 7 values; then, when X has unobserved
	// entries, the masked code's state (did: none; dbcd, bcd, hals: the masked residual
	// E_i, M x n; mu, every loss: B_next, M x K), and otherwise the state above.
	State [][]float64
}

// stateSlot names one slice of a Snapshot's State and gives its length.
type stateSlot struct {
	name string
	n    int
}

// Snapshot returns a deep copy of the shard's state. It is valid only at an iteration
// boundary, right after Next returned StepIterationDone; otherwise it returns an error.
func (m *Machine) Snapshot() (Snapshot, error) {
	if m.failed != nil {
		return Snapshot{}, m.failed
	}
	if !m.boundary {
		return Snapshot{}, fmt.Errorf("kernels: shard %d: Snapshot outside an iteration boundary (take it right after Next returns StepIterationDone)", m.spec.Shard)
	}
	s := Snapshot{Iteration: m.last.Iteration, Initial: m.last.Initial, Objective: m.last.Objective,
		B: slices.Clone(m.env.B), C: slices.Clone(m.env.C)}
	if m.env.state != nil {
		s.State = m.env.state()
	}
	if m.mask != nil {
		s.State = append([][]float64{m.mask.slot()}, s.State...)
	}
	return s, nil
}

// validateResume checks a snapshot's shape against the spec.
func (s *ShardSpec) validateResume(info AlgorithmInfo) error {
	r := s.Resume
	m, n := s.X.Dims()
	if r.Iteration < 1 {
		return fmt.Errorf("resume: snapshot iteration is %d, want >= 1 (snapshots are taken at iteration boundaries)", r.Iteration)
	}
	if len(r.B) != m*s.K {
		return fmt.Errorf("resume: snapshot basis B has %d values, want M x K = %d x %d = %d", len(r.B), m, s.K, m*s.K)
	}
	if len(r.C) != s.K*n {
		return fmt.Errorf("resume: snapshot coefficients C of shard %d have %d values, want K x n = %d x %d = %d", s.Shard, len(r.C), s.K, n, s.K*n)
	}
	var slots []stateSlot
	switch {
	case s.Options.Masked():
		// A masked machine's first slice holds the mask's global counts (see maskState.slot);
		// the rest is the masked code's state when X has unobserved entries, the unmasked
		// code's otherwise.
		if len(r.State) < 1 || len(r.State[0]) != maskSlotLen {
			if len(r.State) >= 1 && len(r.State[0]) == maskSlotLen-1 {
				return fmt.Errorf("resume: the snapshot's held-out set was drawn entry by entry, by an older version of didnmf; this one draws row patterns, so the run cannot go on from it: start the job again")
			}
			return fmt.Errorf("resume: a snapshot of a run with %s starts its state with the %d mask totals", s.Options.maskWhat(), maskSlotLen)
		}
		if v := r.State[0][maskSlotLen-1]; v != heldOutScheme {
			return fmt.Errorf("resume: the snapshot's held-out set was drawn by scheme %v, this version draws scheme %d (row patterns): start the job again", v, heldOutScheme)
		}
		slots = append(slots, stateSlot{"mask totals", maskSlotLen})
		if maskSlotOn(r.State[0]) {
			slots = append(slots, maskedState(s)...)
		} else if info.state != nil {
			slots = append(slots, info.state(s)...)
		}
	case info.state != nil:
		slots = info.state(s)
	}
	if len(r.State) != len(slots) {
		what := "no extra state"
		if len(slots) > 0 {
			names := make([]string, len(slots))
			for i, sl := range slots {
				names[i] = sl.name
			}
			what = strings.Join(names, ", ")
		}
		return fmt.Errorf("resume: snapshot state has %d slices, want %d for %s (%s)", len(r.State), len(slots), s.Algo, what)
	}
	for i, sl := range slots {
		if len(r.State[i]) != sl.n {
			return fmt.Errorf("resume: snapshot state %d, %s of %s, has %d values, want %d", i, sl.name, s.Algo, len(r.State[i]), sl.n)
		}
	}
	return nil
}

// clone returns a deep copy of s.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.B, c.C, c.State = slices.Clone(s.B), slices.Clone(s.C), cloneAll(s.State...)
	return &c
}

// begin sets the shard's factors and returns the first iteration to run, the initial objective
// and the algorithm's extra state: for a fresh shard B0 and C0 from the initialisation,
// iteration 1, initial 0 (the body computes it) and nil; for a resumed one the snapshot's B, C
// and State (the machine's own copy, see NewMachine), its Iteration+1 and its Initial, with no
// collective.
//
// A masked shard (Options.Masked) first builds its mask and gets the global counts, from the
// allreduce "init.mask" when fresh or from the snapshot's first State slice when resumed
// (stripped from the returned state); see beginMask.
func (e *shardEnv) begin() (first int, initial float64, state [][]float64) {
	r := e.spec.Resume
	if r != nil {
		state = r.State
	}
	if e.m != nil && e.m.mask != nil {
		state = e.beginMask(r != nil, state)
	}
	defer func() { e.initEnded = time.Now() }()
	if r == nil {
		e.B, e.C = e.initialize()
		return 1, 0, nil
	}
	e.B, e.C = r.B, r.C
	return r.Iteration + 1, r.Initial, state
}

// masked reports whether the shard runs an algorithm's masked code: it is masked and some
// entry of X is unobserved.
func (e *shardEnv) masked() bool { return e.m != nil && e.m.mask != nil && e.m.mask.on }

// cloneAll returns deep copies of the slices.
func cloneAll(xs ...[]float64) [][]float64 {
	out := make([][]float64, len(xs))
	for i, x := range xs {
		out[i] = slices.Clone(x)
	}
	return out
}
