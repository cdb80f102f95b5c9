package kernels

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/didnmf/didnmf/usererr"
)

// Config describes a factorization job for the in-process driver.
type Config struct {
	Algo Algorithm
	K    int
	Seed uint64
	// Init chooses B0 and C0. For InitCustom, Init.C0 holds all of C0 (K x N, column-major);
	// the driver hands each shard its columns.
	Init    InitSpec
	Options Options
	Stop    StopRule
	// Threads is the number of worker goroutines (0: GOMAXPROCS).
	Threads int
}

// ErrZeroMatrix is returned by Run for an X without a nonzero value: its only factorization
// is zero, and no error can be relative to it. It is the user's to fix (usererr.ErrUser).
var ErrZeroMatrix error = usererr.New("X has no nonzero value (every entry is 0): there is nothing to factorize", nil)

// Progress is reported after every iteration.
type Progress struct {
	Iteration int
	Seconds   float64 // since the start of Run, including initialisation
	// InitSeconds is how long the initialisation took (the Seconds of iteration 0): rates
	// over iterations leave it out.
	InitSeconds float64
	Ratio       float64 // ||E_t||^2 / ||E_0||^2
	Objective   float64 // ||E_t||^2
	// RelErr2 is ||E_t||^2 / ||X||^2 and RMSE sqrt(||E_t||^2 / (M N)): the figures users
	// compare across tools and initialisations (0 when ||X|| is not known). In a masked run
	// both are over the observed entries: ||X_o||^2 and their count.
	RelErr2, RMSE float64
	// TestSSE is the squared error over the TestCount held-out entries, TestRelErr2 it over
	// their squared norm and TestRMSE sqrt(TestSSE / TestCount) (all 0 without a test set).
	TestSSE, TestRelErr2, TestRMSE float64
	TestCount                      int64
}

// HistoryPoint is one entry of a run's history (iteration 0 is the initial point).
type HistoryPoint struct {
	Iteration int     `json:"iteration"`
	Seconds   float64 `json:"seconds"`
	Ratio     float64 `json:"objective_ratio"`
	// RelErr2 is ||X - BC||^2 / ||X||^2, RMSE sqrt(||X - BC||^2 / (M N)), from the tracked
	// objective.
	RelErr2 float64 `json:"rel_err2"`
	RMSE    float64 `json:"rmse"`
	// With a test set (Options.TestFraction): the held-out entries' squared error, its ratio to
	// their squared norm, their RMSE and their count (absent without one).
	TestSSE     float64 `json:"test_sse,omitempty"`
	TestRelErr2 float64 `json:"test_rel_err2,omitempty"`
	TestRMSE    float64 `json:"test_rmse,omitempty"`
	TestCount   int64   `json:"test_count,omitempty"`
}

// Errors returns rel_err2 = objective / ||X||^2 and RMSE = sqrt(objective / (m n)) (0 where
// ||X||^2 or m n is 0; a negative objective, from rounding of the Gram form near 0, counts
// as 0).
func Errors(objective, sqNormX float64, m, n int) (relErr2, rmse float64) {
	objective = max(objective, 0)
	if sqNormX > 0 {
		relErr2 = objective / sqNormX
	}
	if m > 0 && n > 0 {
		rmse = math.Sqrt(objective / (float64(m) * float64(n)))
	}
	return relErr2, rmse
}

// CommStats counts the collectives of a run, as the driver executed them.
type CommStats struct {
	// InitCollectives were run before iteration 1.
	InitCollectives int
	// Collectives were run by iterations; PerIteration is their mean per iteration.
	Collectives  int
	PerIteration float64
	// FloatsPerIteration is the mean number of float64 values all shards contributed per
	// iteration.
	FloatsPerIteration float64
}

// Result is the outcome of a run.
type Result struct {
	M, N, K, Shards int
	// B is M x K column-major; C is K x N column-major (sample j's coefficients contiguous).
	B, C       []float64
	Iterations int
	Converged  bool
	StopReason StopReason
	// Initial and Objective are ||X - B0 C0||^2 and the tracked ||X - B C||^2 at the end,
	// both plus the penalties when Options sets them ("Penalties" in the package doc).
	Initial, Objective float64
	// Residual is ||X - B C||^2 computed directly at the end; SqNormX is ||X||^2. In a masked
	// run (Options.Missing, TestFraction) both are over the observed entries.
	Residual, SqNormX float64
	// Observed is the number of entries the fit sees (M N in an unmasked run); Missing the
	// NaN entries and TestCount the held-out ones of a masked run.
	Observed, Missing, TestCount int64
	// TestSSE is the tracked squared error over the held-out entries at the end and
	// TestSqNorm their squared norm (both 0 without a test set).
	TestSSE, TestSqNorm float64
	// Seconds is the wall time of the run; IterSeconds the time of each iteration.
	Seconds     float64
	IterSeconds []float64
	History     []HistoryPoint
	Comm        CommStats
}

// RelErr2 returns ||X - BC||^2 / ||X||^2.
func (r *Result) RelErr2() float64 {
	if r.SqNormX == 0 {
		return 0
	}
	return r.Residual / r.SqNormX
}

// TestRelErr2 returns the held-out error relative to the held-out entries' squared norm.
func (r *Result) TestRelErr2() float64 {
	re, _ := ObservedErrors(r.TestSSE, r.TestSqNorm, r.TestCount)
	return re
}

// TestRMSE returns sqrt(TestSSE / TestCount).
func (r *Result) TestRMSE() float64 {
	_, rmse := ObservedErrors(r.TestSSE, r.TestSqNorm, r.TestCount)
	return rmse
}

// Split cuts X into p column blocks of near-equal size (sharing storage).
func Split(x Block, p int) ([]Block, error) {
	_, n := x.Dims()
	if p < 1 || p > n {
		return nil, fmt.Errorf("shards must be between 1 and the number of samples %d, got %d", n, p)
	}
	r := ColumnRanges(n, p)
	blocks := make([]Block, p)
	for s := range blocks {
		blocks[s] = x.ColSlice(r[s], r[s+1])
	}
	return blocks, nil
}

// Run factorizes the matrix whose column blocks are given (one shard per block, in column
// order) in this process, running the shards as machines and the collectives in TreeSum order.
// Each progress function (nil ones are skipped) is called after every iteration.
//
// Cancelling ctx interrupts the shards within their current step (Machine.Interrupt), so Run
// returns promptly (within a second even at rank 3000) with ctx.Err(): a nil Result if no
// iteration had completed, otherwise the factors the shards hold, which are those of the last
// completed iteration as far as the interrupted one had already updated them in place
// (nonnegative; for the monotone algorithms no worse in exact arithmetic). Iterations,
// Objective, History and StopReason (StopCanceled) describe the last completed iteration.
// Residual is computed directly from the returned factors, unless that iteration took half a
// second or more (the direct computation costs about as much as an iteration): it is then the
// tracked Objective.
func Run(ctx context.Context, blocks []Block, cfg Config, progress ...func(Progress)) (*Result, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no data blocks")
	}
	if err := cfg.Stop.Validate(); err != nil {
		return nil, err
	}
	m, _ := blocks[0].Dims()
	n := 0
	for s, b := range blocks {
		bm, bn := b.Dims()
		if bm != m {
			return nil, fmt.Errorf("block %d has %d rows, block 0 has %d", s, bm, m)
		}
		n += bn
	}
	if m < 1 || n < 1 {
		return nil, fmt.Errorf("empty matrix (%d x %d)", m, n)
	}
	if err := CheckRankOf(cfg.Algo, cfg.K, m, n); err != nil {
		return nil, err
	}
	if cfg.Init.Method == InitCustom && len(cfg.Init.C0) != cfg.K*n && !(cfg.Algo == Transform && cfg.Init.C0 == nil) {
		return nil, fmt.Errorf("initial coefficients have %d values, want N x K = %d x %d", len(cfg.Init.C0), n, cfg.K)
	}
	pool := NewPool(cfg.Threads)
	defer pool.Close()

	p := len(blocks)
	machines := make([]*Machine, p)
	defer func() {
		for _, mc := range machines {
			if mc != nil {
				mc.Close()
			}
		}
	}()
	off := 0
	for s, b := range blocks {
		_, bn := b.Dims()
		init := cfg.Init
		if init.Method == InitCustom && cfg.Init.C0 != nil {
			init.C0 = cfg.Init.C0[off*cfg.K : (off+bn)*cfg.K]
		}
		mc, err := NewMachine(ShardSpec{Algo: cfg.Algo, Shard: s, Shards: p, ColOffset: off, TotalCols: n,
			X: b, K: cfg.K, Seed: cfg.Seed, Init: init, Options: cfg.Options, Pool: pool})
		if err != nil {
			return nil, err
		}
		machines[s] = mc
		off += bn
	}
	// A cancellation interrupts the shards wherever they are; the loop below then sees
	// ErrInterrupted (or ctx.Err() between steps).
	stopInterrupt := context.AfterFunc(ctx, func() {
		for _, mc := range machines {
			mc.Interrupt()
		}
	})
	defer stopInterrupt()

	res := &Result{M: m, N: n, K: cfg.K, Shards: p}
	masked := cfg.Options.Masked()
	if masked {
		var st MaskStats
		off := 0
		for _, b := range blocks {
			st.Add(ObservedStats(b, off, cfg.Options))
			_, bn := b.Dims()
			off += bn
		}
		res.SqNormX, res.Observed, res.Missing, res.TestCount, res.TestSqNorm = st.ObservedSqNorm, st.Observed, st.Missing, st.Test, st.TestSqNorm
		if err := st.checkMissing(cfg.Options); err != nil {
			return nil, err
		}
		if res.SqNormX == 0 {
			return nil, fmt.Errorf("%w (among its observed entries)", ErrZeroMatrix)
		}
	} else {
		for _, b := range blocks {
			res.SqNormX += b.SqNorm()
		}
		res.Observed = int64(m) * int64(n)
	}
	if res.SqNormX == 0 {
		return nil, ErrZeroMatrix
	}
	errs2 := func(objective float64) (float64, float64) {
		if masked {
			return ObservedErrors(objective, res.SqNormX, res.Observed)
		}
		return Errors(objective, res.SqNormX, m, n)
	}
	testSet := masked && cfg.Options.TestFraction > 0
	testPoint := func(pt *HistoryPoint, sse float64) {
		if testSet && res.TestCount > 0 {
			pt.TestSSE, pt.TestCount = sse, res.TestCount
			pt.TestRelErr2, pt.TestRMSE = ObservedErrors(sse, res.TestSqNorm, res.TestCount)
		}
	}
	stopper := NewStopper(cfg.Stop.For(cfg.Options.Accel)) // an extrapolating run settles (StopRule.Settle)
	start := time.Now()
	iterStart := start
	steps := make([]Step, p)
	errs := make([]error, p)
	floats := 0
	initSec := 0.0
	var runErr error
	for {
		if err := ctx.Err(); err != nil {
			res.StopReason = StopCanceled
			runErr = err
			break
		}
		if err := nextAll(machines, steps, errs); err != nil {
			if errors.Is(err, ErrInterrupted) && ctx.Err() != nil {
				res.StopReason = StopCanceled
				runErr = ctx.Err()
				break
			}
			return nil, err
		}
		first := steps[0]
		if first.Kind == StepIterationDone {
			for s, st := range steps {
				if st.Kind != StepIterationDone || st.Iteration != first.Iteration ||
					math.Float64bits(st.Objective) != math.Float64bits(first.Objective) {
					return nil, fmt.Errorf("shard %d disagrees with shard 0 at iteration %d", s, first.Iteration)
				}
			}
			now := time.Now()
			elapsed := now.Sub(start)
			if first.Iteration == 1 {
				// The initialisation ends when the last machine has its B and C, which may be
				// well after its last collective (a random C of 10^7 columns: a second).
				for _, mc := range machines {
					if t := mc.InitEnded(); t.After(iterStart) && t.Before(now) {
						iterStart = t
					}
				}
				initSec = iterStart.Sub(start).Seconds()
				re, rmse := errs2(first.Initial)
				pt := HistoryPoint{Iteration: 0, Seconds: initSec, Ratio: 1, RelErr2: re, RMSE: rmse}
				testPoint(&pt, first.InitialTestSSE)
				res.History = append(res.History, pt)
			}
			res.Iterations = first.Iteration
			res.Initial, res.Objective = first.Initial, first.Objective
			ratio := Ratio(first.Objective, first.Initial)
			res.TestSSE = first.TestSSE
			re, rmse := errs2(first.Objective)
			pt := HistoryPoint{Iteration: first.Iteration, Seconds: elapsed.Seconds(), Ratio: ratio, RelErr2: re, RMSE: rmse}
			testPoint(&pt, first.TestSSE)
			res.History = append(res.History, pt)
			res.IterSeconds = append(res.IterSeconds, now.Sub(iterStart).Seconds())
			iterStart = now
			for _, fn := range progress {
				if fn == nil {
					continue
				}
				fn(Progress{Iteration: first.Iteration, Seconds: elapsed.Seconds(), InitSeconds: initSec, Ratio: ratio, Objective: first.Objective, RelErr2: re, RMSE: rmse,
					TestSSE: pt.TestSSE, TestRelErr2: pt.TestRelErr2, TestRMSE: pt.TestRMSE, TestCount: pt.TestCount})
			}
			if stop, why := stopper.Observe(first.Iteration, first.Objective, first.Initial, elapsed); stop {
				res.StopReason = why
				res.Converged = why == StopConverged
				break
			}
			continue
		}
		results, err := Collective(steps)
		if err != nil {
			return nil, err
		}
		if first.Init {
			res.Comm.InitCollectives++
			iterStart = time.Now()
		} else {
			res.Comm.Collectives++
			for _, st := range steps {
				floats += len(st.Data)
			}
		}
		for s, mc := range machines {
			mc.Deliver(results[s])
		}
	}
	if res.Iterations == 0 {
		return nil, runErr
	}
	res.Seconds = time.Since(start).Seconds()
	res.Comm.PerIteration = float64(res.Comm.Collectives) / float64(res.Iterations)
	res.Comm.FloatsPerIteration = float64(floats) / float64(res.Iterations)
	res.B = append([]float64(nil), machines[0].Basis()...)
	direct := runErr == nil || res.IterSeconds[len(res.IterSeconds)-1] < cancelResidualMax.Seconds()
	if len(machines) == 1 {
		// The machine ends here: its C becomes the result's as it is. Copying it cost a
		// write of K x N floats into fresh pages (1.8 s of the paper's N=1e7 job).
		c := machines[0].Coef()
		res.C = c[:len(c):len(c)]
	} else {
		res.C = makeFloats(cfg.K * n)[:0]
		for _, mc := range machines {
			res.C = append(res.C, mc.Coef()...)
		}
	}
	for _, mc := range machines {
		if direct {
			res.Residual += mc.LocalResidual()
		}
	}
	if cfg.Options.TestOfSquares && res.TestCount > 0 {
		res.TestSSE, res.TestSqNorm = 0, 0
		for _, mc := range machines {
			sse, sq := mc.HeldOutOfSquares()
			res.TestSSE += sse
			res.TestSqNorm += sq
		}
	}
	if !direct {
		res.Residual = res.Objective
	}
	return res, runErr
}

// cancelResidualMax: a cancelled Run whose last iteration took longer reports the tracked
// objective as its Residual rather than spend about another iteration computing it.
const cancelResidualMax = 500 * time.Millisecond

// nextAll advances every machine to its next step, concurrently.
func nextAll(machines []*Machine, steps []Step, errs []error) error {
	if len(machines) == 1 {
		var err error
		steps[0], err = machines[0].Next()
		return err
	}
	var wg sync.WaitGroup
	for s, mc := range machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			steps[s], errs[s] = mc.Next()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
