package kernels

import (
	"math"
	"testing"
)

// TestTreeSumFanIn: a reduce tree whose nodes each cover an aligned block of fan-in^h shards
// and apply TreeSum to their children reproduces TreeSum over all shards bit for bit, for every
// power-of-two fan-in and any shard count.
func TestTreeSumFanIn(t *testing.T) {
	r := NewRNG(1, 1, 1)
	for p := 1; p <= 37; p++ {
		parts := make([][]float64, p)
		for s := range parts {
			parts[s] = make([]float64, 5)
			for i := range parts[s] {
				// wide dynamic range so that the order of additions shows in the bits
				parts[s][i] = (r.Float64() - 0.5) * math.Pow(10, float64(r.Uint64()%16))
			}
		}
		want := make([]float64, 5)
		TreeSum(want, parts)
		for _, fan := range []int{2, 4, 8, 16} {
			level := parts
			for len(level) > 1 {
				var next [][]float64
				for lo := 0; lo < len(level); lo += fan {
					hi := min(lo+fan, len(level))
					sum := make([]float64, 5)
					TreeSum(sum, level[lo:hi])
					next = append(next, sum)
				}
				level = next
			}
			if !sameBits(level[0], want) {
				t.Fatalf("p=%d fan-in %d: tree result differs from TreeSum", p, fan)
			}
		}
	}
}

func TestCollectiveOps(t *testing.T) {
	steps := []Step{
		{Kind: StepCollective, Op: OpReduceScatter, Label: "x", Data: []float64{1, 2, 3}, Segments: []int{2, 1}},
		{Kind: StepCollective, Op: OpReduceScatter, Label: "x", Data: []float64{10, 20, 30}, Segments: []int{2, 1}},
	}
	out, err := Collective(steps)
	if err != nil || len(out[0]) != 2 || out[0][1] != 22 || out[1][0] != 33 {
		t.Fatalf("reduce-scatter: %v %v", out, err)
	}
	for s := range steps {
		steps[s].Op = OpAllGather
	}
	out, _ = Collective(steps)
	if len(out[1]) != 6 || out[1][3] != 10 {
		t.Fatalf("allgather: %v", out)
	}
	steps[1].Label = "y"
	if _, err := Collective(steps); err == nil {
		t.Fatal("shards at different steps accepted")
	}
	steps[1].Label, steps[1].Op = "x", OpAllReduce
	steps[0].Op = OpAllReduce
	steps[1].Data = []float64{1}
	if _, err := Collective(steps); err == nil {
		t.Fatal("mismatched lengths accepted")
	}
}
