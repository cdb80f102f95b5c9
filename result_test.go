package didnmf

import (
	"context"
	"math"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func TestTrafficBusy(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Traffic
		want float64
	}{
		{"no time", Traffic{}, 0},
		{"never waited", Traffic{ComputeSeconds: 2}, 1},
		{"three quarters", Traffic{ComputeSeconds: 3, WaitSeconds: 1}, 0.75},
		{"negative wait", Traffic{ComputeSeconds: 3, WaitSeconds: -1}, 0},
		{"NaN compute", Traffic{ComputeSeconds: math.NaN(), WaitSeconds: 1}, 0},
		{"infinite wait", Traffic{ComputeSeconds: 1, WaitSeconds: math.Inf(1)}, 0},
	} {
		if got := tc.c.Busy(); got != tc.want {
			t.Errorf("%s: Busy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTrafficOf: every counter of the wire lands in its field, and no counters give zero.
func TestTrafficOf(t *testing.T) {
	got := trafficOf(&messages.Counters{Messages: 1, Bytes: 2, InitMessages: 3, InitBytes: 4, Reductions: 5, InitReductions: 6,
		Duplicates: 7, Stale: 8, ComputeSeconds: 9, WaitSeconds: 10})
	want := Traffic{Messages: 1, Bytes: 2, InitMessages: 3, InitBytes: 4, Reductions: 5, InitReductions: 6, Duplicates: 7, Stale: 8,
		ComputeSeconds: 9, WaitSeconds: 10}
	if got != want {
		t.Errorf("trafficOf = %+v, want %+v", got, want)
	}
	if got := trafficOf(nil); got != (Traffic{}) {
		t.Errorf("trafficOf(nil) = %+v", got)
	}
}

// TestResultMatrices: Basis and Coef give every entry of B and C at its (feature or sample,
// component), and a result without factors gives empty matrices.
func TestResultMatrices(t *testing.T) {
	spec := jobspec.New([]string{"synthetic:m=7,n=40,k=3,seed=2"}, kernels.DID, 3, 2)
	spec.Stop.MaxIter = 5
	res, err := Run(context.Background(), spec, Local(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, c := res.Basis(), res.Coef()
	if r, k := b.Dims(); r != 7 || k != 3 {
		t.Fatalf("basis is %d x %d, want 7 x 3", r, k)
	}
	if r, k := c.Dims(); r != 40 || k != 3 {
		t.Fatalf("coef is %d x %d, want 40 x 3", r, k)
	}
	for k := range 3 {
		for i := range 7 {
			if b.At(i, k) != res.B[k*7+i] {
				t.Fatalf("basis(%d, %d) = %v, want B[%d] = %v", i, k, b.At(i, k), k*7+i, res.B[k*7+i])
			}
		}
		for j := range 40 {
			if c.At(j, k) != res.C[j*3+k] {
				t.Fatalf("coef(%d, %d) = %v, want C[%d] = %v", j, k, c.At(j, k), j*3+k, res.C[j*3+k])
			}
		}
	}
	b.Set(0, 0, -1)
	if res.B[0] == -1 {
		t.Error("Basis shares B's memory: it must be a copy")
	}
	var none Result
	if !none.Basis().IsEmpty() || !none.Coef().IsEmpty() {
		t.Error("a result without factors gives non-empty matrices")
	}
}
