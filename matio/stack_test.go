package matio

import (
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

func TestOpenAll(t *testing.T) {
	specs := []string{"testdata/c_f8.npy", "testdata/coo.mtx", "testdata/f_i2_be.npy.gz", "synthetic:m=5,n=4,k=2,seed=9"}
	src, err := OpenAll(specs)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Samples() != 3*fixN+4 || src.Features() != fixM {
		t.Fatalf("stacked %d x %d", src.Samples(), src.Features())
	}
	syn, _ := Open(specs[3])
	want := append(append(append(fixtureA(0.25), fixtureA(0.25)...), fixtureA(1)...), denseData(mustRead(t, syn, 0, 4, LayoutDense))...)
	for _, layout := range layouts {
		if got := denseData(mustRead(t, src, 0, src.Samples(), layout)); !sameData(got, want) {
			t.Errorf("layout %v: stacked data differs", layout)
		}
	}
	checkRanges(t, src)
	// A range across the boundary between an npy and an mtx source.
	got := denseData(mustRead(t, src, 5, 9, LayoutAuto))
	if !sameData(got, want[5*fixM:9*fixM]) {
		t.Errorf("Read(5, 9) across sources differs")
	}
}

func TestOpenAllOne(t *testing.T) {
	src, err := OpenAll([]string{"testdata/c_f8.npy"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ok := src.(*npySource); !ok {
		t.Errorf("OpenAll of one spec gave %T", src)
	}
}

func TestOpenAllErrors(t *testing.T) {
	_, err := OpenAll([]string{"testdata/c_f8.npy", "synthetic:m=6,n=4,k=2,seed=9"})
	wantInputError(t, err, "synthetic:m=6,n=4,k=2,seed=9: has 6 features (columns) but testdata/c_f8.npy has 5")
	_, err = OpenAll([]string{"testdata/c_f8.npy", "testdata/bad_c16.npy"})
	wantInputError(t, err, "testdata/bad_c16.npy: unsupported dtype")
	_, err = OpenAll(nil)
	wantInputError(t, err, "no input")
	// An entry error names the file and its own sample index.
	src, err := OpenAll([]string{"testdata/c_f8.npy", "testdata/bad_neg.npy"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Read(0, src.Samples(), LayoutAuto)
	wantInputError(t, err, "testdata/bad_neg.npy: sample 12, feature 3 (0-based)")
}

func TestLayouts(t *testing.T) {
	for _, s := range []string{"auto", "dense", "sparse"} {
		l, err := ParseLayout(s)
		if err != nil || l.String() != s {
			t.Errorf("ParseLayout(%q) = %v, %v", s, l, err)
		}
	}
	if _, err := ParseLayout("csr"); err == nil {
		t.Error("ParseLayout accepted csr")
	}
	// 2 of 6 nonzero: density 1/3.
	d := &kernels.Dense{Rows: 3, Cols: 2, Data: []float64{0, 1, 0, 0, 0, 2}}
	defer func(v float64) { SparseBelow = v }(SparseBelow)
	for _, tt := range []struct {
		below  float64
		sparse bool
	}{{0.25, false}, {0.34, true}, {0, false}, {1.01, true}} {
		SparseBelow = tt.below
		_, isCSC := shapeDense(d, LayoutAuto).(*kernels.CSC)
		if isCSC != tt.sparse {
			t.Errorf("SparseBelow %v: sparse = %v", tt.below, isCSC)
		}
		_, isCSC = shapeSparse(kernels.ToCSC(d), LayoutAuto).(*kernels.CSC)
		if isCSC != tt.sparse {
			t.Errorf("SparseBelow %v: sparse = %v from CSC", tt.below, isCSC)
		}
	}
}
