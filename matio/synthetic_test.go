package matio

import (
	"math"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

func TestSyntheticReproducible(t *testing.T) {
	for _, spec := range []string{
		"synthetic:m=5,n=40,k=3,seed=1",
		"synthetic:seed=7,k=2,n=33,m=9,noise=0.01",
		"synthetic: m=1, n=1, k=1, seed=18446744073709551615, noise=0",
	} {
		a, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		if a.Name() != spec {
			t.Errorf("Name() = %q", a.Name())
		}
		n := a.Samples()
		if !sameData(denseData(mustRead(t, a, 0, n, LayoutDense)), denseData(mustRead(t, b, 0, n, LayoutDense))) {
			t.Errorf("%s: two opens differ", spec)
		}
		checkRanges(t, a)
		// Reading a far range first must not change anything.
		c, _ := Open(spec)
		late := denseData(mustRead(t, c, n-1, n, LayoutDense))
		if !sameData(late, denseData(mustRead(t, a, n-1, n, LayoutDense))) {
			t.Errorf("%s: the last column depends on what was read before", spec)
		}
	}
}

func TestSyntheticMatchesFactors(t *testing.T) {
	for _, spec := range []string{"synthetic:m=6,n=20,k=3,seed=42", "synthetic:m=6,n=20,k=3,seed=42,noise=0.5"} {
		m, n, k, b, c, err := SyntheticFactors(spec)
		if err != nil {
			t.Fatal(err)
		}
		if m != 6 || n != 20 || k != 3 || len(b) != m*k {
			t.Fatalf("SyntheticFactors: %d %d %d %d", m, n, k, len(b))
		}
		// B* is one stream drawn in column-major order.
		rng := kernels.NewRNG(42, kernels.DomainSyntheticB, 0)
		for p := range b {
			if v := rng.Float64(); b[p] != v {
				t.Fatalf("B[%d] = %v, want %v", p, b[p], v)
			}
		}
		src, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		x := kernels.ToDense(mustRead(t, src, 0, n, LayoutDense))
		noisy := spec[len(spec)-3:] == "0.5"
		cj := make([]float64, k)
		maxDiff := 0.0
		for j := 0; j < n; j++ {
			c(j, cj)
			crng := kernels.NewRNG(42, kernels.DomainSyntheticC, uint64(j))
			nrng := kernels.NewRNG(42, kernels.DomainSyntheticNoise, uint64(j))
			for kk := 0; kk < k; kk++ {
				if v := crng.Float64(); cj[kk] != v {
					t.Fatalf("C[%d, %d] = %v, want %v", kk, j, cj[kk], v)
				}
			}
			for i := 0; i < m; i++ {
				want := 0.0
				for kk := 0; kk < k; kk++ {
					want += float64(b[kk*m+i] * cj[kk])
				}
				if noisy {
					want += float64(0.5 * nrng.Float64())
				}
				if x.At(i, j) != want {
					t.Fatalf("%s: X[%d, %d] = %v, want %v", spec, i, j, x.At(i, j), want)
				}
				maxDiff = max(maxDiff, math.Abs(x.At(i, j)-want))
			}
		}
		if maxDiff != 0 {
			t.Errorf("max difference %v", maxDiff)
		}
	}
}

func TestSyntheticBadSpec(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"synthetic:m=5,n=0,k=3", "synthetic:m=5,n=0,k=3: n must be >= 1"},
		{"synthetic:m=0,n=5,k=3,seed=1", "m must be >= 1"},
		{"synthetic:m=5,n=5,k=0,seed=1", "k must be >= 1"},
		{"synthetic:m=5,n=10,k=6,seed=1", "k must be <= min(m, n) = 5"},
		{"synthetic:m=5,n=10,k=3", "missing seed"},
		{"synthetic:", "missing m"},
		{"synthetic:m=5,n=10,k=3,seed=1,color=red", "unknown key \"color\""},
		{"synthetic:m=5,n=10,k=3,seed=1,m=4", "m given twice"},
		{"synthetic:m=five,n=10,k=3,seed=1", "m=\"five\" is not an integer (e.g. 1000000 or 1e6)"},
		{"synthetic:m=5,n=1.5e0,k=3,seed=1", "n=\"1.5e0\" is not an integer"},
		{"synthetic:m=5,n=1e300,k=3,seed=1", "n=\"1e300\" is not an integer"},
		{"synthetic:m=5,n=1e-3,k=3,seed=1", "n=\"1e-3\" is not an integer"},
		{"synthetic:m=5,n=-1e3,k=3,seed=1", "n must be >= 1"},
		{"synthetic:m=5,n=NaNe,k=3,seed=1", "n=\"NaNe\" is not an integer"},
		{"synthetic:m=5,n=1.00000000000000001e3,k=3,seed=1", "n=\"1.00000000000000001e3\" is not an integer"},
		{"synthetic:m=5,n=1000.00000000000001e0,k=3,seed=1", "is not an integer"},
		{"synthetic:m=5,n=1e19,k=3,seed=1", "n=\"1e19\" is too large"},
		{"synthetic:m=5,n=99999999999999999999,k=3,seed=1", "n=\"99999999999999999999\" is too large"},
		{"synthetic:m=5,n=1e,k=3,seed=1", "n=\"1e\" is not an integer"},
		{"synthetic:m=5,n=e5,k=3,seed=1", "n=\"e5\" is not an integer"},
		{"synthetic:m=5,n=1e3.5,k=3,seed=1", "n=\"1e3.5\" is not an integer"},
		{"synthetic:m=5,n=10,k=3,seed=-1", "seed=\"-1\" is not an unsigned integer"},
		{"synthetic:m=5,n=10,k=3,seed=1,noise=-0.1", "noise must be finite and >= 0"},
		{"synthetic:m=5,n=10,k=3,seed=1,noise=NaN", "noise must be finite and >= 0"},
		{"synthetic:m=5,n=10,k=3,seed=1,noise=inf", "noise must be finite and >= 0"},
		{"synthetic:m=5,n=10,k=3,seed=1,noise=x", "noise=\"x\" is not a number"},
		{"synthetic:m=5,n=10,k=3,seed=1,", "\"\" is not key=value"},
		{"synthetic:m=3000000000,n=3000000000,k=1,seed=1", "m must be <= 2147483647"},
		{"synthetic:m=100000000,n=100000000,k=100,seed=1", "m*k must be <= 268435456"},
	}
	for _, tt := range tests {
		_, err := Open(tt.spec)
		wantInputError(t, err, tt.want)
		if err != nil && tt.spec != "synthetic:" && err.Error()[:len(tt.spec)] != tt.spec {
			t.Errorf("error %q does not start with the spec", err)
		}
	}
}

func TestSyntheticHugeLazy(t *testing.T) {
	// Opening a huge synthetic matrix costs nothing; reading a few columns is cheap.
	src, err := Open("synthetic:m=10,n=1000000000000,k=2,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	b := mustRead(t, src, 999999999990, 1000000000000, LayoutAuto)
	if _, ok := b.(*kernels.Dense); !ok {
		t.Errorf("a positive block read sparse under LayoutAuto")
	}
}

func TestDefaultSeed(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"synthetic:m=5,n=10,k=3", "synthetic:m=5,n=10,k=3,seed=7"},
		{"synthetic:m=5,n=10,k=3,seed=2", "synthetic:m=5,n=10,k=3,seed=2"},
		{"synthetic:seed=2,m=5,n=10,k=3", "synthetic:seed=2,m=5,n=10,k=3"},
		{"synthetic:", "synthetic:seed=7"},
		{"/data/x.npy", "/data/x.npy"},
		{"synthetic:m=5,n=10,k=3,noise=0.1", "synthetic:m=5,n=10,k=3,noise=0.1,seed=7"},
	}
	for _, tt := range tests {
		if got := DefaultSeed(tt.spec, 7); got != tt.want {
			t.Errorf("DefaultSeed(%q, 7) = %q, want %q", tt.spec, got, tt.want)
		}
	}
	// The seeded spec opens, and is the data of the spec that names the seed.
	a, err := Open(DefaultSeed("synthetic:m=4,n=6,k=2", 7))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open("synthetic:m=4,n=6,k=2,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	if !sameData(denseData(mustRead(t, a, 0, 6, LayoutDense)), denseData(mustRead(t, b, 0, 6, LayoutDense))) {
		t.Error("the default seed gives other data than the same seed given")
	}
}

// TestSyntheticSizesWithExponents: sizes may be written as the paper writes them (n=1e7).
func TestSyntheticSizesWithExponents(t *testing.T) {
	for _, tc := range []struct {
		spec string
		m, n int
	}{
		{"synthetic:m=5,n=1e7,k=3,seed=1", 5, 10000000},
		{"synthetic:m=5,n=2.5E6,k=3,seed=1", 5, 2500000},
		{"synthetic:m=5e0,n=100,k=3,seed=1", 5, 100},
		{"synthetic:m=5,n=12345.0e0,k=3,seed=1", 5, 12345},
		{"synthetic:m=5,n=0.5e1,k=3,seed=1", 5, 5},
		{"synthetic:m=5,n=+1E3,k=3,seed=1", 5, 1000},
	} {
		src, err := Open(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if src.Features() != tc.m || src.Samples() != tc.n {
			t.Errorf("%s: %d x %d, want %d features x %d samples", tc.spec, src.Features(), src.Samples(), tc.m, tc.n)
		}
		src.Close()
	}
}

func TestSameSynthetic(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"synthetic:m=5,n=1000,k=2,seed=1", "synthetic:seed=1,k=2,n=1e3,m=5", true},
		{"synthetic:m=5,n=10,k=2,seed=1,noise=0", "synthetic:m=5,n=10,k=2,seed=1", true},
		{"synthetic:m=5,n=10,k=2,seed=1", "synthetic:m=5,n=10,k=2,seed=2", false},
		{"synthetic:m=5,n=10,k=2,seed=1,noise=0.1", "synthetic:m=5,n=10,k=2,seed=1", false},
		{"synthetic:m=5,n=10,k=2,seed=1", "x.npy", false},
		{"synthetic:m=5", "synthetic:m=5", false}, // not a spec: nothing to compare
	} {
		if got := SameSynthetic(c.a, c.b); got != c.same {
			t.Errorf("SameSynthetic(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}

func TestIsSynthetic(t *testing.T) {
	for _, c := range []struct {
		input string
		want  bool
	}{
		{"synthetic:m=5,n=10,k=2,seed=1", true},
		{"synthetic:m=5", true}, // malformed, but meant as a spec: its reader says what is wrong
		{"synthetic:", true},
		{"./synthetic:m=5", false}, // a file of that name
		{"Synthetic:m=5", false},
		{"x.npy", false},
		{"", false},
	} {
		if got := IsSynthetic(c.input); got != c.want {
			t.Errorf("IsSynthetic(%q) = %v, want %v", c.input, got, c.want)
		}
	}
}
