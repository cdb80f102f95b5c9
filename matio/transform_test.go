package matio

import (
	"math"
	"os"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

func TestParseTransform(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Transform
		ok   bool
	}{
		{"", TransformNone, true},
		{"none", TransformNone, true},
		{"sqrt", TransformSqrt, true},
		{"log", "", false},
		{"SQRT", "", false},
	} {
		got, err := ParseTransform(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("ParseTransform(%q) = %q, %v", c.in, got, err)
		}
	}
}

// TestTransformSqrt: a source opened with TransformSqrt hands out the square roots of the
// values the plain source hands out, in float64 in either layout and whatever the storage
// (auto stores these counts as float32), a missing value staying NaN, and keeps what the source says of itself (layout, stored entries, missing values met),
// under the name sqrt(name).
func TestTransformSqrt(t *testing.T) {
	const m, n = 4, 5
	x := []float64{0, 1, 2, 0, 9, 0, 0, 3, 16, 0.5, 0, 0, 7, 0, 1e10, 25, 0, math.NaN(), 4, 0}
	coord := writeMTXCoord(t, "x.mtx", m, n, x)
	array := writeMTXArray(t, "a.mtx", m, n, x)
	for _, path := range []string{coord, array} {
		for _, st := range []kernels.Storage{kernels.StorageAsIs, kernels.StorageAuto} {
			for _, layout := range []Layout{LayoutDense, LayoutSparse} {
				opts := ReadOptions{Missing: true, Storage: st}
				plain, err := OpenAllWithOptions(os.Open, []string{path}, opts)
				if err != nil {
					t.Fatal(err)
				}
				opts.Transform = TransformSqrt
				sq, err := OpenAllWithOptions(os.Open, []string{path}, opts)
				if err != nil {
					t.Fatal(err)
				}
				if sq.Name() != "sqrt("+plain.Name()+")" || NaturalLayout(sq) != NaturalLayout(plain) {
					t.Errorf("%s: named %q, natural layout %v; plain %q, %v", path, sq.Name(), NaturalLayout(sq), plain.Name(), NaturalLayout(plain))
				}
				pn, pok := StoredEntries(plain)
				if sn, sok := StoredEntries(sq); sn != pn || sok != pok {
					t.Errorf("%s: stored entries %d, %v; plain %d, %v", path, sn, sok, pn, pok)
				}
				pb, err := plain.Read(0, n, layout)
				if err != nil {
					t.Fatal(err)
				}
				sb, err := sq.Read(0, n, layout)
				if err != nil {
					t.Fatal(err)
				}
				if MissingSeen(sq) != MissingSeen(plain) || !MissingSeen(sq) {
					t.Errorf("%s: missing seen %v, plain %v", path, MissingSeen(sq), MissingSeen(plain))
				}
				for j := range n {
					for i := range m {
						p, s := kernels.ToDense(pb).At(i, j), kernels.ToDense(sb).At(i, j)
						want := math.Sqrt(p)
						if stored32(sb) {
							t.Fatalf("%s, %v: the square roots were stored as float32", path, st)
						}
						if !(s == want || math.IsNaN(p) && math.IsNaN(s)) {
							t.Errorf("%s, %v, layout %v: entry (%d, %d) %v, the square root of %v is %v", path, st, layout, i, j, s, p, want)
						}
					}
				}
				plain.Close()
				sq.Close()
			}
		}
	}
	if src := TransformSqrt.Apply(nil); src != nil {
		t.Errorf("Apply(nil) = %v", src)
	}
}

// stored32 reports whether a block holds float32 values.
func stored32(b kernels.Block) bool {
	switch b := b.(type) {
	case *kernels.Dense:
		return b.Data32 != nil
	case *kernels.CSC:
		return b.Val32 != nil
	}
	return false
}
