package kernels

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// countsBlock returns a dense block of small integer counts (exact in float32) with about a
// third of zeros.
func countsBlock(m, n int, seed uint64) *Dense {
	d := synthDense(m, n, 4, seed, 0.05)
	for i, v := range d.Data {
		d.Data[i] = math.Floor(v * 7)
	}
	return d
}

// TestNarrowStorageSameBits: a block stored as float32 gives bitwise the factors of the same
// block stored as float64, for every algorithm, dense and sparse, on every kernel path.
func TestNarrowStorageSameBits(t *testing.T) {
	t.Parallel()
	dense := countsBlock(14, 400, 51)
	wide := map[string]Block{"dense": dense, "sparse": ToCSC(dense)}
	for _, info := range Algorithms() {
		for name, x := range wide {
			narrow, err := Narrow(x)
			if err != nil {
				t.Fatal(err)
			}
			if !IsNarrow(narrow) || IsNarrow(x) {
				t.Fatalf("%s: IsNarrow wrong", name)
			}
			if narrow.SqNorm() != x.SqNorm() || narrow.Sum() != x.Sum() {
				t.Fatalf("%s: SqNorm/Sum differ between storages", name)
			}
			shards := 1
			if info.Distributed {
				shards = 3
			}
			for _, p := range AvailableKernelPaths() {
				cfg := baseConfig(info.Name, 4, StopRule{MaxIter: 10})
				cfg.Options.Kernel = p
				a := mustRun(t, x, shards, cfg)
				b := mustRun(t, narrow, shards, cfg)
				if !sameBits(a.B, b.B) || !sameBits(a.C, b.C) || a.Objective != b.Objective {
					t.Errorf("%s %s on %s: float32 storage differs (B %.3g, C %.3g)", info.Name, name, p,
						maxRelDiff(a.B, b.B), maxRelDiff(a.C, b.C))
				}
			}
		}
	}
}

func TestNarrowRefusesInexact(t *testing.T) {
	d := countsBlock(5, 6, 3)
	d.Data[2*5+3] = 0.1 // sample 2, feature 3
	for name, x := range map[string]Block{"dense": d, "sparse": ToCSC(d)} {
		_, err := Narrow(x)
		var ie *InexactError
		if !errors.As(err, &ie) || ie.Col != 2 || ie.Row != 3 || ie.Value != 0.1 {
			t.Errorf("%s: %v, want sample 2, feature 3, value 0.1", name, err)
		}
		auto, err := ApplyStorage(x, StorageAuto)
		if err != nil || IsNarrow(auto) {
			t.Errorf("%s: auto storage of inexact data: %v, narrow %v", name, err, IsNarrow(auto))
		}
	}
	if _, err := ParseStorage("float16"); err == nil {
		t.Error("ParseStorage accepted float16")
	}
}

// TestWidenRoundTrip: widening a narrowed block restores every value, column slices of a
// narrow block stay narrow, and a CSC slice keeps its offset.
func TestWidenRoundTrip(t *testing.T) {
	d := countsBlock(7, 30, 9)
	for name, x := range map[string]Block{"dense": d, "sparse": ToCSC(d)} {
		n, err := Narrow(x.ColSlice(4, 19))
		if err != nil {
			t.Fatal(err)
		}
		back := ToDense(Widen(n))
		want := ToDense(x.ColSlice(4, 19))
		if !sameBits(back.Data, want.Data) {
			t.Errorf("%s: round trip changed values", name)
		}
		if !IsNarrow(n.ColSlice(2, 5)) {
			t.Errorf("%s: a slice of a narrow block is not narrow", name)
		}
		col := make([]float64, 7)
		columnInto(n, 3, col)
		if !sameBits(col, want.Col(3)) {
			t.Errorf("%s: columnInto of a narrow block: %v, want %v", name, col, want.Col(3))
		}
	}
}

// withNaNs returns a copy of d with every 7th entry NaN.
func withNaNs(d *Dense) *Dense {
	c := &Dense{Rows: d.Rows, Cols: d.Cols, Data: slices.Clone(d.Data)}
	for i := 0; i < len(c.Data); i += 7 {
		c.Data[i] = math.NaN()
	}
	return c
}

// TestLayoutSameBits: for the algorithms whose products skip zeros exactly (DID and the other
// Gram-lane algorithms), a block held dense gives bitwise the factors of the same block held as
// CSC, on every kernel path, on shapes that reach the column-lane kernels with one lane and with
// several lanes a shard (the lanes are cut alike on both layouts: a CSC cut at stored-entry
// counts grouped the partial sums differently), with and without a held-out set. HALS, MU,
// ANLS and ADMM form some products differently on the two layouts and round differently (which
// is why the layout depends on the data only, see matio.SparseBelow).
func TestLayoutSameBits(t *testing.T) {
	t.Parallel()
	wide := countsBlock(40, 3000, 53)
	// Skew the stored entries towards the first columns, so that a cut at equal stored-entry
	// counts would differ from a cut at equal column counts.
	for j := 0; j < 600; j++ {
		for i := 0; i < 40; i++ {
			if c := wide.Col(j); c[i] == 0 {
				c[i] = float64(1 + (i+j)%3)
			}
		}
	}
	cases := []struct {
		name     string
		dense    *Dense
		shards   int // for the distributed algorithms; 1 for the others
		lanes    int // a shard's lanes
		fraction float64
		missing  bool // NaN entries, fit as missing (Options.Missing)
	}{
		{"one lane", countsBlock(40, 300, 53), 3, 1, 0, false},
		{"several lanes, 3 shards", wide, 3, 4, 0, false},
		{"several lanes, 1 shard", wide, 1, 12, 0, false},
		{"several lanes, held out", wide, 3, 4, 0.1, false},
		{"several lanes, missing values", withNaNs(wide), 3, 4, 0, true},
	}
	for _, tc := range cases {
		sparse := ToCSC(tc.dense)
		if got := len(laneBounds(sparse.ColSlice(0, tc.dense.Cols/tc.shards), 5)) - 1; got != tc.lanes {
			t.Fatalf("%s: %d lanes a shard, want %d", tc.name, got, tc.lanes)
		}
		// The algorithms that claim it (AlgorithmInfo.LayoutInvariant, which lets the layout
		// follow the machine) give the same bits on both layouts.
		for _, info := range Algorithms() {
			if !info.LayoutInvariant || (tc.fraction > 0 || tc.missing) && !slices.Contains(maskAlgorithms, info.Name) {
				continue
			}
			shards := 1
			if info.Distributed {
				shards = tc.shards
			}
			for _, p := range AvailableKernelPaths() {
				cfg := baseConfig(info.Name, 5, StopRule{MaxIter: 6})
				cfg.Options.Kernel = p
				cfg.Options.TestFraction = tc.fraction
				cfg.Options.Missing = tc.missing
				a := mustRun(t, tc.dense, shards, cfg)
				b := mustRun(t, sparse, shards, cfg)
				if !sameBits(a.B, b.B) || !sameBits(a.C, b.C) {
					t.Errorf("%s, %s on %s: CSC differs from dense (B %.3g, C %.3g)", tc.name, info.Name, p,
						maxRelDiff(a.B, b.B), maxRelDiff(a.C, b.C))
				}
			}
		}
	}
}
