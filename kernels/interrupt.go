package kernels

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Interruption. Every long loop of a machine's kernels looks at the machine's interrupt flag
// (set by Machine.Interrupt) between blocks of columns (or rows, components, pivots) of about
// checkWork multiply-adds: one atomic load per block, which costs nothing measurable. At rank
// 3000 a block is a single column (a pair in DID's dense Gram kernel), and the kernels whose
// column is many blocks of work (DID's Gram and residual kernels, DADMM) also look between its
// phases, each about one pass over an M x K or K x K matrix: some 10-50 ms. A loop running on a
// pool lane returns early when it sees the flag; the machine's own goroutine polls it after
// every Pool.Run and in its own loops, and unwinds the shard's body with a panic that
// Machine.Next turns into ErrInterrupted. NNLS solves stop through nnls.Workspace.SetInterrupt.
// Blocks only group the same operations in the same order, so an uninterrupted run gives the
// same bits whatever their size.

// ErrInterrupted is the error Machine.Next returns, wrapped with the shard's id (test it with
// errors.Is), once Machine.Interrupt has stopped the machine.
var ErrInterrupted = errors.New("kernels: interrupted")

// checkWork is the work, in multiply-adds, between two looks at the interrupt flag: about
// 0.1-0.3 ms on one core.
const checkWork = 1 << 18

// interruptFlag is a machine's interrupt flag as its kernels see it. A nil *interruptFlag is
// never set (kernels run outside a machine).
type interruptFlag struct {
	set atomic.Bool
	// work overrides checkWork (tests check at every column with work = 1).
	work int
	// hook, when set (tests), is called at every look at the flag, from any goroutine.
	hook func()
}

// stopped reports whether the machine was interrupted. Safe on pool lanes.
func (f *interruptFlag) stopped() bool {
	if f == nil {
		return false
	}
	if f.hook != nil {
		f.hook()
	}
	return f.set.Load()
}

// poll unwinds the shard's body if the machine was interrupted. Only on the machine's own
// goroutine, never on a pool lane (a lane returns early instead, and its caller polls after
// Pool.Run).
func (f *interruptFlag) poll() {
	if f.stopped() {
		panic(ErrInterrupted)
	}
}

// span returns how many columns of about perCol multiply-adds each go between two looks at
// the flag: at least one, and a multiple of mult (for kernels that pair or batch columns).
func (f *interruptFlag) span(perCol, mult int) int {
	work := checkWork
	if f != nil && f.work > 0 {
		work = f.work
	}
	n := work / max(perCol, 1)
	return max((n+mult-1)/mult*mult, mult)
}

// big reports whether a column (or pair) of perCol multiply-adds is more than a few blocks of
// work (some 10 ms or more: rank in the thousands), so that a kernel should also look between
// the phases of a column. Kernels test it once per call, not per column.
func (f *interruptFlag) big(perCol int) bool {
	work := checkWork
	if f != nil && f.work > 0 {
		work = f.work
	}
	return f != nil && perCol > 16*work
}

// colWork returns about the number of multiply-adds of a pass over one column of x against
// k components: M·k for a dense block, the mean stored entries per column times k for a sparse
// one.
func colWork(x Block, k int) int {
	m, n := x.Dims()
	if s, ok := x.(*CSC); ok {
		m = (s.NNZ() + n - 1) / max(n, 1)
	}
	return max(m, 1) * k
}

// interruptedError is ErrInterrupted for one shard.
type interruptedError struct {
	shard int
	algo  Algorithm
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("kernels: shard %d (%s) interrupted", e.shard, e.algo)
}

func (e *interruptedError) Unwrap() error { return ErrInterrupted }
