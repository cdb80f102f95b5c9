package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Missing values and held-out entries (see "Missing values" and "Held-out entries" in doc.go).
//
// The mask is X itself: a NaN entry of a Dense block, or a NaN stored entry of a CSC block, is
// missing (not observed); every other entry is observed, the unstored entries of a CSC block
// being observed zeros (a stored 0 is an observed zero too). With Options.TestFraction the
// entries that HeldOut selects are unobserved for the fit as well and make up the test set.
// A masked shard (Options.Missing or TestFraction > 0) builds, once, a shardMask: the lists of
// its unobserved entries by column (and by row, for DID and MU), and X_o, its block with every unobserved entry
// zeroed (dense) or dropped (sparse), which the kernels read instead of X.

// maskAlgorithms are the algorithms that fit with missing values and held-out entries.
var maskAlgorithms = []Algorithm{DID, DBCD, BCD, HALS, MU}

// MaskAlgorithms lists the algorithms that take missing values and a test set.
func MaskAlgorithms() []Algorithm { return slices.Clone(maskAlgorithms) }

// Masked reports whether a run with these options treats X as masked: Missing is set or a
// test fraction is held out.
func (o Options) Masked() bool { return o.Missing || o.TestFraction > 0 }

// maskWhat names what makes the options masked, for error messages.
func (o Options) maskWhat() string {
	switch {
	case o.Missing && o.TestFraction > 0:
		return fmt.Sprintf("missing values and held-out entries (test fraction %v)", o.TestFraction)
	case o.Missing:
		return "missing values"
	}
	return fmt.Sprintf("held-out entries (test fraction %v)", o.TestFraction)
}

// ValidateMask checks the missing-value and held-out options for an algorithm and an
// initialisation: TestFraction in [0, 1), and with Missing or a test fraction an algorithm of
// MaskAlgorithms (did, dbcd, bcd, hals, mu) and an init that does not need every entry of X
// (random, whose scale is the mean of the observed entries, or custom; nndsvd, nndsvda and
// kmeans are refused). NewMachine (and so Run) calls it.
func (o Options) ValidateMask(algo Algorithm, init InitMethod) error {
	if !(o.TestFraction >= 0 && o.TestFraction < 1) {
		return fmt.Errorf("test_fraction must be a number in [0, 1), got %v", o.TestFraction)
	}
	if !o.Masked() {
		return nil
	}
	if _, err := LookupAlgorithm(algo); err != nil {
		return err
	}
	if !slices.Contains(maskAlgorithms, algo) {
		names := make([]string, len(maskAlgorithms))
		for i, a := range maskAlgorithms {
			names[i] = string(a)
		}
		return fmt.Errorf("algorithm %s cannot fit with %s: the algorithms that can are %s",
			algo, o.maskWhat(), strings.Join(names, ", "))
	}
	switch init {
	case InitNNDSVD, InitNNDSVDA, InitKMeans:
		return fmt.Errorf("init %s needs every entry of X and cannot start a fit with %s: use init random (scaled by the mean of the observed entries) or custom",
			init, o.maskWhat())
	}
	return nil
}

// HeldOut reports whether entry (sample j, feature i) of X, j and i global 0-based indices, is
// held out with test fraction frac and seed: whether feature i is in sample j's row pattern,
// the i-th uniform value (Float64, counting from 0) of the random stream (seed, DomainHeldOut,
// HeldOutPattern(seed, j)) below frac (see heldout.go). It depends on nothing else: not on the
// shard count, the layout or whether the entry is stored.
func HeldOut(seed uint64, sample, feature int, frac float64) bool {
	if !(frac > 0) || sample < 0 || feature < 0 {
		return false
	}
	r := NewRNG(seed, DomainHeldOut, uint64(HeldOutPattern(seed, sample)))
	r.state += uint64(feature) * 0x9e3779b97f4a7c15 // skip the first i draws
	return r.Float64() < frac
}

// MaskStats counts the entries of X (or of a block) that a masked run sees. A block's sums are
// Block.Sum's and Block.SqNorm's, in their order, with every unobserved entry taken as 0: so
// for a block without unobserved entries they are bitwise its Sum and SqNorm, and the totals of
// a masked run with nothing unobserved are an unmasked run's.
type MaskStats struct {
	// Observed entries are those the fit sees: neither missing nor held out (unstored entries
	// of a sparse block are observed zeros). Missing entries are NaN; Test entries are the
	// held-out ones that are not missing.
	Observed, Missing, Test int64
	// ObservedSum and ObservedSqNorm are the sum and the sum of squares of the observed
	// entries; TestSqNorm the sum of squares of the held-out ones.
	ObservedSum, ObservedSqNorm, TestSqNorm float64
}

// Add adds another block's counts and sums.
func (s *MaskStats) Add(o MaskStats) {
	s.Observed += o.Observed
	s.Missing += o.Missing
	s.Test += o.Test
	s.ObservedSum += o.ObservedSum
	s.ObservedSqNorm += o.ObservedSqNorm
	s.TestSqNorm += o.TestSqNorm
}

// Unobserved is the number of entries the fit does not see: Missing + Test.
func (s MaskStats) Unobserved() int64 { return s.Missing + s.Test }

// checkMissing refuses NaN entries unless o.Missing makes them missing values.
func (s MaskStats) checkMissing(o Options) error {
	if s.Missing > 0 && !o.Missing {
		return fmt.Errorf("X has %d NaN entries: set Missing (--missing nan) to fit them as missing values", s.Missing)
	}
	return nil
}

// maskSlotLen is the length of a masked machine's first Snapshot.State slice: the global
// MaskStats (6 values), the held-out error of the initial factors and heldOutScheme.
const maskSlotLen = 8

// heldOutScheme names how held-out sets are drawn: 2, row patterns (heldout.go); before it,
// entry by entry. A snapshot records it and the shards' "init.mask" allreduce sums it, so
// that a snapshot of the other scheme, or a shard running it, is refused instead of fitting
// with a held-out set that is not the one the totals describe.
const heldOutScheme = 2

func (s MaskStats) pack(dst []float64) {
	dst[0], dst[1], dst[2] = float64(s.Observed), float64(s.Missing), float64(s.Test)
	dst[3], dst[4], dst[5] = s.ObservedSum, s.ObservedSqNorm, s.TestSqNorm
}

func unpackMaskStats(v []float64) MaskStats {
	return MaskStats{Observed: int64(v[0]), Missing: int64(v[1]), Test: int64(v[2]),
		ObservedSum: v[3], ObservedSqNorm: v[4], TestSqNorm: v[5]}
}

// ObservedStats returns the counts and sums of a block whose first column is sample colOffset
// of X, under options o (TestFraction, TestSeed; NaN entries are counted as missing whether
// or not o.Missing is set). It reads the block once and, with a test fraction, draws the
// held-out patterns (M HeldOutPatterns draws) and one hash per sample.
func ObservedStats(x Block, colOffset int, o Options) MaskStats {
	return scanMask(x, colOffset, o, false, false, nil).local
}

// ObservedErrors returns rel_err2 = objective / sqNorm and RMSE = sqrt(objective / count) (0
// where sqNorm or count is 0; a negative objective counts as 0): Errors for a masked run, over
// its count observed entries (or for the held-out error, its held-out ones).
func ObservedErrors(objective, sqNorm float64, count int64) (relErr2, rmse float64) {
	objective = max(objective, 0)
	if sqNorm > 0 {
		relErr2 = objective / sqNorm
	}
	if count > 0 {
		rmse = math.Sqrt(objective / float64(count))
	}
	return relErr2, rmse
}

// MaskEntryBytes bounds the bytes a masked shard keeps per unobserved entry (held out or
// missing; a held-out zero of a sparse block counts like any other), whatever the algorithm
// (but DID without missing values: see HeldEntryBytes):
// its column lists (a row index and a value, 12 bytes, plus up to a quarter more of slack from
// growing them while the block is scanned), the row lists of DID and MU (12 more) and the
// per-entry list of the algorithm's masked code (DID's column index, 4; DBCD's, BCD's and HALS's
// residual of each held-out entry, 8, without the row lists). X_o, the block without its
// unobserved entries, is not counted: it is a copy of the block when some stored entry is
// unobserved. TestShardMaskBytes measures it.
const MaskEntryBytes = 32

// shardMask is a masked shard's view of its block.
type shardMask struct {
	m, n int
	// x is X_o: the block with its unobserved entries zeroed (dense) or dropped (CSC), in the
	// block's storage; the block itself when none of its entries is unobserved.
	x Block
	// The unobserved entries by column: column j's are uptr[j] <= t < uptr[j+1], in row urow[t]
	// (increasing), with uval[t] the held-out value or NaN for a missing entry.
	uptr []int
	urow []int32
	uval []float64
	// The same entries by row, built (by byRow) only for the algorithms that read them (DID
	// and MU; see rowView), nil otherwise: row i's are rptr[i] <= t < rptr[i+1], in column
	// rcol[t] (increasing), with rval[t] the value of that entry in the column lists. 12 bytes
	// an entry (the column lists' 12 again), so a bcd, dbcd or hals shard keeps 12 bytes per
	// unobserved entry and a did or mu shard 24.
	rptr []int
	rcol []int32
	rval []float64
	// colSq[j] is ||x_o,j||^2, summed in row order.
	colSq []float64
	// local are the block's counts and sums.
	local MaskStats
	// test: the options hold entries out (TestFraction > 0), so the payloads carry the
	// held-out sums (even when this block has no held-out entry).
	test bool
	// held, when set, makes the held-out entries implicit (masked DID without missing
	// values, didheld.go): column j's held-out rows are held.rows[pat[j]], and the column
	// lists hold only the stored held-out entries (of a dense block, all of them), so that
	// the held-out zeros of a sparse block take no memory.
	held *heldOutSet
	pat  []uint8
}

// heldRows returns the held-out rows of column j of a mask with implicit held-out entries.
func (s *shardMask) heldRows(j int) []int32 { return s.held.rows[s.pat[j]] }

// eachHeldOut calls f for each held-out entry of column j that is not missing, rows in order,
// with its value (0 for an unstored one).
func (s *shardMask) eachHeldOut(j int, f func(i int32, v float64)) {
	lo, hi := s.uptr[j], s.uptr[j+1]
	if s.held == nil {
		for t := lo; t < hi; t++ {
			if v := s.uval[t]; v == v {
				f(s.urow[t], v)
			}
		}
		return
	}
	t := lo
	for _, i := range s.heldRows(j) {
		for t < hi && s.urow[t] < i {
			t++
		}
		v := 0.0
		if t < hi && s.urow[t] == i {
			v = s.uval[t]
		}
		if v == v {
			f(i, v)
		}
	}
}

// unobserved returns the range of column j's unobserved entries.
func (s *shardMask) unobserved(j int) (lo, hi int) { return s.uptr[j], s.uptr[j+1] }

// zeroUnobserved sets the unobserved rows of column j in e (length M) to 0.
func (s *shardMask) zeroUnobserved(e []float64, j int) {
	for _, i := range s.urow[s.uptr[j]:s.uptr[j+1]] {
		e[i] = 0
	}
	if s.held != nil {
		for _, i := range s.heldRows(j) {
			e[i] = 0
		}
	}
}

// maskAccum accumulates a block's counts and sums. The observed sums follow sum's and dot's
// order over the block's stored values (see Dense.Sum, CSC.SqNorm): the value at position q
// (from the block's first stored value) goes to partial sum q mod 4, except the last len mod 4,
// which go to partial sum 0, and the partial sums are combined as (s0 + s1) + (s2 + s3).
type maskAccum struct {
	st     MaskStats
	sum    [4]float64
	sq     [4]float64
	stored int     // the block's stored values
	csq    float64 // the current column's sum of squares, in row order
}

func (a *maskAccum) observed(q int, v float64) {
	l := q & 3
	if q >= a.stored&^3 {
		l = 0
	}
	sq := float64(v * v)
	a.sum[l] += v
	a.sq[l] += sq
	a.csq += sq
}

func (a *maskAccum) heldOut(v float64) {
	a.st.Test++
	a.st.TestSqNorm += float64(v * v)
}

func (a *maskAccum) finish() {
	a.st.ObservedSum = (a.sum[0] + a.sum[1]) + (a.sum[2] + a.sum[3])
	a.st.ObservedSqNorm = (a.sq[0] + a.sq[1]) + (a.sq[2] + a.sq[3])
}

// scanMask classifies the entries of a block (first column colOffset of X) and returns their
// counts; with keep it also builds the lists and X_o, and with implicit as well the lists
// hold only the stored held-out entries (see shardMask.held). It looks at flag between
// columns.
func scanMask(x Block, colOffset int, o Options, keep, implicit bool, flag *interruptFlag) *shardMask {
	m, n := x.Dims()
	s := &shardMask{m: m, n: n, test: o.TestFraction > 0}
	frac := o.TestFraction
	test := frac > 0
	var set *heldOutSet
	if test {
		set = newHeldOutSet(o.TestSeed, frac, m)
		if implicit {
			s.held = set
			s.pat = make([]uint8, n)
		}
	}
	var acc maskAccum
	base := 0 // the position of the block's first stored value
	switch xb := x.(type) {
	case *Dense:
		acc.stored = m * n
	case *CSC:
		base = xb.ColPtr[0]
		acc.stored = xb.ColPtr[n] - base
	}
	if keep {
		s.uptr = make([]int, n+1)
		s.colSq = make([]float64, n)
	}
	unobs := func(i int, v float64) {
		if keep {
			s.urow = append(s.urow, int32(i))
			s.uval = append(s.uval, v)
		}
	}
	dropped := false // a stored entry of a CSC block is unobserved
	// classify counts an entry of a CSC column in row i, stored with value v at position q
	// (from the block's first stored value) or a held-out zero (v 0, not stored): missing
	// (NaN), held out, or observed. A held-out zero is listed only without implicit.
	classify := func(i int, v float64, q int, held, stored bool) {
		switch {
		case v != v:
			acc.st.Missing++
			unobs(i, math.NaN())
			dropped = true
		case held:
			acc.heldOut(v)
			if stored || !implicit {
				unobs(i, v)
			}
			dropped = dropped || stored
		case stored:
			acc.observed(q, v)
		}
	}
	col := make([]float64, 0)
	span := flag.span(max(m, 1)*4, 1)
	for j := 0; j < n; j++ {
		if j%span == 0 {
			flag.poll()
		}
		var hrows []int32 // the column's held-out rows, those of pattern pat
		pat := 0
		if test {
			pat = HeldOutPattern(o.TestSeed, colOffset+j)
			hrows = set.rows[pat]
			if s.pat != nil {
				s.pat[j] = uint8(pat)
			}
		}
		acc.csq = 0
		switch xb := x.(type) {
		case *Dense:
			if xb.Data != nil {
				col = xb.Data[j*m : (j+1)*m]
			} else {
				col = slices.Grow(col[:0], m)[:m]
				widen(col, xb.Data32[j*m:(j+1)*m])
			}
			h := 0
			for i, v := range col {
				held := h < len(hrows) && int(hrows[h]) == i
				if held {
					h++
				}
				switch {
				case v != v:
					acc.st.Missing++
					unobs(i, math.NaN())
				case held:
					acc.heldOut(v)
					unobs(i, v)
				default:
					acc.observed(j*m+i, v)
				}
			}
		case *CSC:
			lo, hi := xb.ColPtr[j], xb.ColPtr[j+1]
			if !test {
				for t := lo; t < hi; t++ {
					if v := xb.value(t); v != v {
						acc.st.Missing++
						unobs(int(xb.RowIdx[t]), math.NaN())
						dropped = true
					} else {
						acc.observed(t-base, v)
					}
				}
				break
			}
			if implicit || !keep {
				// Only the stored entries are listed: each looks its row up in the
				// pattern's set, and the held-out zeros are counted, not visited (a zero
				// adds nothing to the sums).
				storedHeld := 0
				for t := lo; t < hi; t++ {
					i, v := int(xb.RowIdx[t]), xb.value(t)
					held := set.holds(pat, i)
					if held {
						storedHeld++
					}
					classify(i, v, t-base, held, true)
				}
				acc.st.Test += int64(len(hrows) - storedHeld)
				break
			}
			// The stored entries and the held-out rows, merged in row order.
			t, h := lo, 0
			for t < hi || h < len(hrows) {
				i := m
				if t < hi {
					i = int(xb.RowIdx[t])
				}
				if h < len(hrows) {
					i = min(i, int(hrows[h]))
				}
				held := h < len(hrows) && int(hrows[h]) == i
				if held {
					h++
				}
				stored := t < hi && int(xb.RowIdx[t]) == i
				var v float64
				q := t - base
				if stored {
					v = xb.value(t)
					t++
				}
				classify(i, v, q, held, stored)
			}
		default:
			panic(fmt.Sprintf("kernels: unknown block type %T", x))
		}
		if keep {
			s.uptr[j+1] = len(s.urow)
			s.colSq[j] = acc.csq
		}
	}
	acc.finish()
	acc.st.Observed = int64(m)*int64(n) - acc.st.Missing - acc.st.Test
	s.local = acc.st
	if !keep {
		return s
	}
	s.x = x
	if len(s.urow) > 0 {
		s.x = observedBlock(x, s, dropped)
	}
	return s
}

// rowView reports whether algo's masked code reads the shard mask's by-row lists (rptr, rcol,
// rval): DID's B step and MU's do; the masked residual of DBCD, BCD and HALS reads only the
// column lists, so their shards do not build them.
func rowView(algo Algorithm) bool { return algo == DID || algo == MU }

// observedBlock returns X_o for a block with unobserved entries.
func observedBlock(x Block, s *shardMask, dropped bool) Block {
	switch xb := x.(type) {
	case *Dense:
		m := xb.Rows
		if xb.Data != nil {
			d := &Dense{Rows: xb.Rows, Cols: xb.Cols, Data: slices.Clone(xb.Data)}
			for j := 0; j < xb.Cols; j++ {
				s.zeroUnobserved(d.Data[j*m:(j+1)*m], j)
			}
			return d
		}
		d := &Dense{Rows: xb.Rows, Cols: xb.Cols, Data32: slices.Clone(xb.Data32)}
		for j := 0; j < xb.Cols; j++ {
			for _, i := range s.urow[s.uptr[j]:s.uptr[j+1]] {
				d.Data32[j*m+int(i)] = 0
			}
		}
		return d
	case *CSC:
		if !dropped {
			return x // only unstored zeros are held out: X_o is X
		}
		narrow := IsNarrow(xb)
		o := &CSC{Rows: xb.Rows, Cols: xb.Cols, ColPtr: make([]int, xb.Cols+1)}
		// Sized for every stored entry up front: growing by append copied X_o over and over
		// (a third of a 200,000 x 20,000 job's initialisation).
		stored := xb.ColPtr[xb.Cols] - xb.ColPtr[0]
		o.RowIdx = make([]int32, 0, stored)
		if narrow {
			o.Val32 = make([]float32, 0, stored)
		} else {
			o.Val = make([]float64, 0, stored)
		}
		for j := 0; j < xb.Cols; j++ {
			u, uhi := s.uptr[j], s.uptr[j+1]
			for t := xb.ColPtr[j]; t < xb.ColPtr[j+1]; t++ {
				i := xb.RowIdx[t]
				for u < uhi && s.urow[u] < i {
					u++
				}
				if u < uhi && s.urow[u] == i {
					continue
				}
				o.RowIdx = append(o.RowIdx, i)
				if narrow {
					o.Val32 = append(o.Val32, xb.Val32[t])
				} else {
					o.Val = append(o.Val, xb.Val[t])
				}
			}
			o.ColPtr[j+1] = len(o.RowIdx)
		}
		if narrow && o.Val32 == nil {
			o.Val32 = []float32{}
		}
		if !narrow && o.Val == nil {
			o.Val = []float64{}
		}
		return o
	}
	panic(fmt.Sprintf("kernels: unknown block type %T", x))
}

// byRow builds the row lists from the column lists (see rowView).
func (s *shardMask) byRow() {
	s.rptr = make([]int, s.m+1)
	for _, i := range s.urow {
		s.rptr[i+1]++
	}
	for i := 0; i < s.m; i++ {
		s.rptr[i+1] += s.rptr[i]
	}
	s.rcol = make([]int32, len(s.urow))
	s.rval = make([]float64, len(s.urow))
	next := slices.Clone(s.rptr[:s.m])
	for j := 0; j < s.n; j++ {
		for t := s.uptr[j]; t < s.uptr[j+1]; t++ {
			i := s.urow[t]
			s.rcol[next[i]] = int32(j)
			s.rval[next[i]] = s.uval[t]
			next[i]++
		}
	}
}

// maskState is a masked machine's mask: the shard's view, the global counts and the held-out
// errors of the last boundary.
type maskState struct {
	sm     *shardMask
	totals MaskStats
	// on: some entry of X is unobserved, so the masked algorithms run; otherwise the machine
	// runs the unmasked code on X, bit for bit.
	on bool
	// initialTest and test are the held-out squared errors of the initial factors and of
	// those after the last iteration.
	initialTest, test float64
}

// slot returns the first Snapshot.State slice of a masked machine.
func (ms *maskState) slot() []float64 {
	v := make([]float64, maskSlotLen)
	ms.totals.pack(v)
	v[6] = ms.initialTest
	v[7] = heldOutScheme
	return v
}

// maskSlotOn reports whether a snapshot's mask slot describes a run with unobserved entries.
func maskSlotOn(v []float64) bool { return v[1]+v[2] > 0 }

// beginMask builds the shard's mask and gets the global counts: from the allreduce
// "init.mask" (the first collective of a fresh masked shard) or, resuming, from the
// snapshot's first State slice, which it strips from the returned state.
func (e *shardEnv) beginMask(resume bool, state [][]float64) [][]float64 {
	ms := e.m.mask
	if sp, ok := e.spec.X.(*CSC); ok && e.spec.Options.TestFraction > 0 {
		// The scan merges each column's rows with its held-out rows: they must increase.
		if err := sp.Validate(); err != nil {
			panic(fmt.Errorf("cannot hold entries of shard %d's sparse block out: %w", e.spec.Shard, err))
		}
	}
	ms.sm = scanMask(e.spec.X, e.spec.ColOffset, e.spec.Options, true, heldImplicit(e.spec), e.flag)
	if rowView(e.spec.Algo) && ms.sm.held == nil {
		ms.sm.byRow()
	}
	if err := ms.sm.local.checkMissing(e.spec.Options); err != nil {
		panic(err)
	}
	if resume {
		ms.totals = unpackMaskStats(state[0])
		ms.initialTest = state[0][6]
		state = state[1:]
	} else {
		local := make([]float64, 7)
		ms.sm.local.pack(local)
		local[6] = heldOutScheme
		sum := e.allReduce("init.mask", 0, local)
		if want := float64(heldOutScheme * e.spec.Shards); sum[6] != want {
			panic(fmt.Errorf("the shards draw held-out sets by different schemes (sum %v, want %v): every node must run the same version of didnmf", sum[6], want))
		}
		ms.totals = unpackMaskStats(sum)
	}
	ms.on = ms.totals.Unobserved() > 0
	if ms.on && ms.totals.Observed == 0 {
		panic(fmt.Errorf("every entry of X is missing or held out: there is nothing to fit"))
	}
	// X_o is X when no entry of the block is unobserved: the unmasked code reads it as before.
	e.spec.X = ms.sm.x
	return state
}

// maskedState is the Snapshot.State layout (after the mask slot) of an algorithm's masked
// code.
func maskedState(s *ShardSpec) []stateSlot {
	switch s.Algo {
	case DBCD, BCD, HALS:
		m, n := s.X.Dims()
		return []stateSlot{{"E = X_i - B C_i on the observed entries, 0 elsewhere (M x n_i)", m * n}}
	case MU:
		return muMaskedState(s) // mumask.go
	}
	return nil
}

// maskedResidualSq returns ||X_o - B C||^2 over the observed entries, lanes added in order.
func maskedResidualSq(sm *shardMask, b, c []float64, k int, pool *Pool) float64 {
	m := sm.m
	lanes := laneBounds(sm.x, k)
	sums := make([]float64, len(lanes)-1)
	run := func(l int) {
		e := make([]float64, m)
		var s float64
		for j := lanes[l]; j < lanes[l+1]; j++ {
			s += sm.residualSq(j, b, c[j*k:(j+1)*k], e)
		}
		sums[l] = s
	}
	if pool == nil {
		for l := range sums {
			run(l)
		}
	} else {
		pool.Run(len(sums), run)
	}
	var total float64
	for _, s := range sums {
		total += s
	}
	return total
}

// residualSq returns ||x_o,j - B c_j||^2 over the observed rows of column j (B column-major,
// e scratch of length M): the column's residual by axpy over the nonzero coefficients, its
// unobserved rows zeroed, then its dot with itself.
func (s *shardMask) residualSq(j int, b, cj, e []float64) float64 {
	m := s.m
	columnInto(s.x, j, e)
	for p, cp := range cj {
		if cp != 0 {
			axpy(e, -cp, b[p*m:(p+1)*m])
		}
	}
	s.zeroUnobserved(e, j)
	return dot(e, e)
}

// heldOutSq returns the squared error of the held-out entries of columns [lo, hi):
// sum (x_ij - b_i . c_j)^2 over them, columns and rows in order, b_i.c_j summed over the
// components in order. B is column-major (M x K).
func heldOutSq(sm *shardMask, b, c []float64, k, lo, hi int) float64 {
	return addHeldOutSq(0, sm, b, c, k, lo, hi)
}

// addHeldOutSq returns s plus heldOutSq's squared errors of the columns [lo, hi), added one by
// one in its order (so that a lane's sum does not depend on how its columns are batched).
func addHeldOutSq(s float64, sm *shardMask, b, c []float64, k, lo, hi int) float64 {
	m := sm.m
	if sm.held != nil {
		for j := lo; j < hi; j++ {
			cj := c[j*k : (j+1)*k]
			sm.eachHeldOut(j, func(i int32, v float64) {
				r := v - rowDot(b, int(i), m, cj)
				s += float64(r * r)
			})
		}
		return s
	}
	for j := lo; j < hi; j++ {
		cj := c[j*k : (j+1)*k]
		for t := sm.uptr[j]; t < sm.uptr[j+1]; t++ {
			v := sm.uval[t]
			if v != v {
				continue
			}
			r := v - rowDot(b, int(sm.urow[t]), m, cj)
			s += float64(r * r)
		}
	}
	return s
}

// heldOutOfSquares returns Machine.HeldOutOfSquares' sums for the shard's mask: over spans of
// heldOutSpan columns on the pool, each span's sums in column and row order, the spans' added
// in order, so the bits do not depend on the threads.
func heldOutOfSquares(sm *shardMask, b, c []float64, k int, pool *Pool) (sse, sqNorm float64) {
	spans := (sm.n + heldOutSpan - 1) / heldOutSpan
	parts := make([][2]float64, spans)
	run := func(q int) {
		parts[q][0], parts[q][1] = heldOutOfSquaresCols(sm, b, c, k, q*heldOutSpan, min(sm.n, (q+1)*heldOutSpan))
	}
	if pool == nil {
		for q := range parts {
			run(q)
		}
	} else {
		pool.Run(spans, run)
	}
	for _, p := range parts {
		sse += p[0]
		sqNorm += p[1]
	}
	return sse, sqNorm
}

// heldOutSpan is the columns of one of heldOutOfSquares' spans.
const heldOutSpan = 1024

// heldOutOfSquaresCols returns heldOutOfSquares' sums over the columns [lo, hi).
func heldOutOfSquaresCols(sm *shardMask, b, c []float64, k, lo, hi int) (sse, sqNorm float64) {
	m := sm.m
	for j := lo; j < hi; j++ {
		cj := c[j*k : (j+1)*k]
		sm.eachHeldOut(j, func(i int32, v float64) {
			x := float64(v * v)
			y := max(rowDot(b, int(i), m, cj), 0)
			r := x - float64(y*y)
			sse += float64(r * r)
			sqNorm += float64(x * x)
		})
	}
	return sse, sqNorm
}

// rowDot returns b_i . c = sum_p B[i, p] c_p for a column-major B with m rows.
func rowDot(b []float64, i, m int, c []float64) float64 {
	var s float64
	for p, cp := range c {
		s += float64(b[p*m+i] * cp)
	}
	return s
}

// maskCancel bounds the cancellation of a Gram matrix restricted to observed entries: it is
// the full Gram matrix minus the unobserved rows' (columns') outer products when those are at
// most half, unless a diagonal entry falls below maskCancel times its full value (more than
// 6 bits lost), when it is summed directly over the observed ones, as it is when the
// unobserved are the majority.
const maskCancel = 1.0 / 64

// maskedDiag sets d[p] to sum over the rows i of B (column-major, M x K) outside skip
// (increasing) of B[i, p]^2, given gd[p] = ||b_p||^2; the same rule as maskedGram, component
// by component.
func maskedDiag(d, gd, b []float64, skip []int32, m, k int) {
	for p := 0; p < k; p++ {
		d[p] = maskedSqNorm(gd[p], b[p*m:(p+1)*m], skip)
	}
}

// maskedSqNorm returns the sum of squares of bp outside the rows skip, given full = ||bp||^2.
func maskedSqNorm(full float64, bp []float64, skip []int32) float64 {
	if len(skip) == 0 {
		return full
	}
	if 2*len(skip) <= len(bp) {
		s := full
		for _, i := range skip {
			v := bp[i]
			s -= float64(v * v)
		}
		if s >= full*maskCancel {
			return s
		}
	}
	var s float64
	t := 0
	for i, v := range bp {
		if t < len(skip) && int(skip[t]) == i {
			t++
			continue
		}
		s += float64(v * v)
	}
	return s
}

// rowLaneBounds cuts m rows into lanes for the per-row passes (a function of m alone; every
// row's result is its own, so the lanes do not change any bits).
func rowLaneBounds(m int) []int {
	return ColumnRanges(m, max(1, min(maxLanes, m/64)))
}
