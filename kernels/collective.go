package kernels

import "fmt"

// Op is a collective operation over all shards of a job.
type Op uint8

// The collectives the distributed algorithms use. Every one sums (or concatenates) in a fixed
// order of shard ids, never in arrival order, so any transport that follows TreeSum gives
// bitwise-identical results.
const (
	// OpAllReduce sums equal-length contributions element-wise; every shard gets the sum.
	OpAllReduce Op = iota + 1
	// OpAllGather concatenates the contributions in shard order; every shard gets the whole.
	OpAllGather
	// OpReduceScatter sums like OpAllReduce; shard s gets only segment s of the sum, the
	// segments' lengths being given by Step.Segments.
	OpReduceScatter
)

func (o Op) String() string {
	switch o {
	case OpAllReduce:
		return "allreduce"
	case OpAllGather:
		return "allgather"
	case OpReduceScatter:
		return "reducescatter"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// TreeSum writes into dst the element-wise sum of parts in the canonical order of didnmf's
// reduce tree: the aligned binary tree over part indices, where the node covering
// [i*2^L, (i+1)*2^L) adds its left child's sum and its right child's sum (when the right child
// covers any part). dst may not alias any part unless it is parts[0].
//
// A reduce tree of actors whose nodes each cover an aligned block of fan-in^h shards, with
// fan-in a power of two, reproduces this order exactly by applying TreeSum to its children's
// sums: the result is bitwise independent of the fan-in.
func TreeSum(dst []float64, parts [][]float64) {
	n := len(parts)
	if n == 0 {
		return
	}
	size := 1
	for size < n {
		size <<= 1
	}
	treeSum(dst, parts, 0, size)
}

// treeSum writes the canonical sum of parts[lo : min(lo+size, n)] into dst.
func treeSum(dst []float64, parts [][]float64, lo, size int) {
	if size == 1 || lo+size/2 >= len(parts) {
		if size == 1 {
			copy(dst, parts[lo])
			return
		}
		treeSum(dst, parts, lo, size/2)
		return
	}
	half := size / 2
	treeSum(dst, parts, lo, half)
	right := make([]float64, len(dst))
	treeSum(right, parts, lo+half, half)
	for i, v := range right {
		dst[i] += v
	}
}

// Collective runs one collective step over the contributions of all shards (in shard order)
// and returns what each shard receives. It checks that the shards agree on the step.
func Collective(steps []Step) ([][]float64, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("collective: no shards")
	}
	first := steps[0]
	for s, st := range steps {
		if st.Kind != StepCollective || st.Op != first.Op || st.Label != first.Label {
			return nil, fmt.Errorf("collective: shard %d is at %s/%s, shard 0 at %s/%s", s, st.Op, st.Label, first.Op, first.Label)
		}
	}
	out := make([][]float64, len(steps))
	switch first.Op {
	case OpAllReduce, OpReduceScatter:
		parts := make([][]float64, len(steps))
		for s, st := range steps {
			if len(st.Data) != len(first.Data) {
				return nil, fmt.Errorf("collective %s: shard %d sent %d values, shard 0 sent %d", first.Label, s, len(st.Data), len(first.Data))
			}
			parts[s] = st.Data
		}
		total := make([]float64, len(first.Data))
		TreeSum(total, parts)
		if first.Op == OpAllReduce {
			for s := range out {
				out[s] = total
			}
			return out, nil
		}
		if len(first.Segments) != len(steps) {
			return nil, fmt.Errorf("collective %s: %d segments for %d shards", first.Label, len(first.Segments), len(steps))
		}
		off := 0
		for s, n := range first.Segments {
			if n < 0 || off+n > len(total) {
				return nil, fmt.Errorf("collective %s: segments exceed the %d values", first.Label, len(total))
			}
			out[s] = total[off : off+n]
			off += n
		}
	case OpAllGather:
		var all []float64
		for _, st := range steps {
			all = append(all, st.Data...)
		}
		for s := range out {
			out[s] = all
		}
	default:
		return nil, fmt.Errorf("collective: unknown op %d", first.Op)
	}
	return out, nil
}
