package nnls

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// This file keeps the alternative that was measured against the column-by-column solver:
// Kim & Park's multiple right-hand-side organisation, in which every round sorts the
// unfinished columns by passive set so that one Cholesky factorization serves each group of
// columns sharing a set. It runs the same per-column pivoting rules on the same
// factorizations, so its results are bitwise identical to Solve's (TestGroupedMatchesSolve);
// BenchmarkSolveGrouped measures it. Once the column-by-column form caches factorizations by
// passive set, the two are close (see the package documentation); the package uses the
// column-by-column form, which needs no per-column state and so no memory proportional to n.

// grouped is the per-column state of the grouped solver.
type grouped struct {
	words  int
	bits   []uint64 // passive set of column j: bits[j*words : (j+1)*words]
	ninf   []int32
	p      []int8
	def    []bool
	active []int32
	tmp    []int32 // radix sort scratch
}

func newGrouped(k, n int) *grouped {
	words := (k + 63) / 64
	return &grouped{
		words:  words,
		bits:   make([]uint64, n*words),
		ninf:   make([]int32, n),
		p:      make([]int8, n),
		def:    make([]bool, n),
		active: make([]int32, 0, n),
		tmp:    make([]int32, n),
	}
}

func (gs *grouped) set(j int) []uint64 { return gs.bits[j*gs.words : (j+1)*gs.words] }

func (gs *grouped) cmp(a, b int32) int {
	sa, sb := gs.set(int(a)), gs.set(int(b))
	for i := range sa {
		if sa[i] != sb[i] {
			if sa[i] < sb[i] {
				return -1
			}
			return 1
		}
	}
	return int(a - b)
}

// solveGrouped has the semantics of Workspace.Solve.
func (w *Workspace) solveGrouped(gs *grouped, G, F, X []float64, n int, warm bool) (capped int) {
	k := w.k
	if k == 0 {
		return 0
	}
	w.prepare(G)
	gs.active = gs.active[:0]
	for j := 0; j < n; j++ {
		set := gs.set(j)
		clear(set)
		x := X[j*k : (j+1)*k]
		for i := 0; i < k; i++ {
			if warm && !w.dead[i] && x[i] > 0 {
				set[i/64] |= 1 << (i % 64)
			}
		}
		gs.ninf[j], gs.p[j], gs.def[j] = int32(k+1), pbar, false
		gs.active = append(gs.active, int32(j))
	}
	for round := 1; len(gs.active) > 0; round++ {
		gs.sortActive(k)
		keep := 0
		for lo := 0; lo < len(gs.active); {
			hi := lo + 1
			for hi < len(gs.active) && slices.Equal(gs.set(int(gs.active[lo])), gs.set(int(gs.active[hi]))) {
				hi++
			}
			s, nb := w.loadGroup(gs, G, int(gs.active[lo]))
			for _, j32 := range gs.active[lo:hi] {
				j := int(j32)
				f, x := F[j*k:(j+1)*k], X[j*k:(j+1)*k]
				if s > 0 {
					w.substitute(f, nb)
				}
				gs.def[j] = gs.def[j] || nb < s
				nv := w.check(G, f, nb)
				done, restore := false, false
				switch {
				case nv == 0:
					w.store(x, nb)
					done = true
				case round >= w.maxIter:
					w.fallback(G, f, x, nb)
					capped++
					done, restore = true, true
				case int32(nv) < gs.ninf[j]:
					gs.ninf[j], gs.p[j] = int32(nv), pbar
					gs.flip(j, w.viol[:nv])
				case gs.p[j] > 0:
					gs.p[j]--
					gs.flip(j, w.viol[:nv])
				case gs.def[j]:
					if !w.fallback(G, f, x, nb) {
						capped++
					}
					done, restore = true, true
				default:
					gs.flip(j, w.viol[nv-1:nv])
				}
				if restore { // the fallback used the scratch state
					s, nb = w.loadGroup(gs, G, int(gs.active[lo]))
				}
				if !done {
					gs.active[keep] = j32
					keep++
				}
			}
			lo = hi
		}
		gs.active = gs.active[:keep]
	}
	return capped
}

// loadGroup sets the workspace's passive set to column j's and factorizes it.
func (w *Workspace) loadGroup(gs *grouped, G []float64, j int) (s, nb int) {
	set := gs.set(j)
	for i := 0; i < w.k; i++ {
		w.passive[i] = set[i/64]&(1<<(i%64)) != 0
		if w.passive[i] {
			w.idx[s] = i
			s++
		}
	}
	if s > 0 {
		nb = w.factor(G, s)
	}
	return s, nb
}

// sortActive sorts the unfinished columns by passive set: LSD radix sort on 8-bit digits when
// the set fits in one word, a comparison sort otherwise.
func (gs *grouped) sortActive(k int) {
	if gs.words > 1 {
		slices.SortFunc(gs.active, gs.cmp)
		return
	}
	n := len(gs.active)
	src, dst := gs.active, gs.tmp[:n]
	for shift := 0; shift < k; shift += 8 {
		var count [257]int
		for _, j := range src {
			count[(gs.bits[j]>>shift)&255+1]++
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for _, j := range src {
			d := (gs.bits[j] >> shift) & 255
			dst[count[d]] = j
			count[d]++
		}
		src, dst = dst, src
	}
	if n > 0 && &src[0] != &gs.active[0] {
		copy(gs.active, src)
	}
}

func (gs *grouped) flip(j int, vars []int) {
	set := gs.set(j)
	for _, i := range vars {
		set[i/64] ^= 1 << (i % 64)
	}
}

func TestGroupedMatchesSolve(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 37))
	for _, tc := range []struct{ k, m int }{{1, 5}, {3, 3}, {3, 40}, {10, 10}, {10, 60}, {50, 200}, {70, 80}, {20, 8}} {
		p := nmfProblem(r, tc.k, tc.m, 300, 0.4, 0.2)
		for _, warm := range []bool{false, true} {
			init := make([]float64, tc.k*p.n)
			if warm {
				for i := range init {
					init[i] = r.NormFloat64()
				}
			}
			a := append([]float64(nil), init...)
			b := append([]float64(nil), init...)
			w := NewWorkspace(tc.k)
			ca := w.Solve(p.G, p.F, a, p.n, warm)
			cb := w.solveGrouped(newGrouped(tc.k, p.n), p.G, p.F, b, p.n, warm)
			if ca != cb {
				t.Errorf("k=%d m=%d warm=%v: capped %d vs %d", tc.k, tc.m, warm, ca, cb)
			}
			for i := range a {
				if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
					t.Fatalf("k=%d m=%d warm=%v: differ at %d: %v vs %v", tc.k, tc.m, warm, i, a[i], b[i])
				}
			}
		}
	}
}
