package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// TestMeasureRooflines: on a tiny dense block the floors count what kernels count (X's
// entries and C read and written; DID's flops), the times are positive, and NewResult names
// the layout and storage and fills the floors in.
func TestMeasureRooflines(t *testing.T) {
	x := kernels.NewDense(5, 40)
	for i := range x.Data {
		x.Data[i] = float64(i%7) + 1
	}
	blocks, err := kernels.Split(x, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := MeasureRooflines(blocks, 3, 1, 3)
	if r.Bytes != 40*(5*8+16*3) || r.Flops != kernels.DIDFlops(blocks[0], 3)+kernels.DIDFlops(blocks[1], 3) {
		t.Errorf("bytes %d, flops %v", r.Bytes, r.Flops)
	}
	if !(r.MemorySec > 0) || !(r.ComputeSec > 0) || len(r.Peak.Rates) == 0 {
		t.Errorf("rooflines %+v", r)
	}
	res, err := kernels.Run(t.Context(), blocks, kernels.Config{Algo: kernels.DID, K: 3, Seed: 1, Threads: 1, Init: kernels.InitSpec{Method: kernels.InitRandom},
		Stop: kernels.StopRule{MaxIter: 3}})
	if err != nil {
		t.Fatal(err)
	}
	out := NewResult("x", kernels.DID, res, blocks, 1, Median(res.IterSeconds), r)
	if out.Algo != "did" || out.Layout != "dense" || out.M != 5 || out.N != 40 || out.Shards != 2 || out.Iterations != 3 ||
		out.MemoryBytes != r.Bytes || out.XBytes <= 0 || out.Storage == "" || len(out.FMAPeaks) != len(r.Peak.Rates) {
		t.Errorf("result %+v", out)
	}
}

// TestFill: the bound is the larger floor, the ratio the time per iteration over it.
func TestFill(t *testing.T) {
	peak := kernels.FMAPeak{Rates: []kernels.FMARate{{Kind: "ymm", OneCore: 2e9, All: 4e9}, {Kind: "scalar", OneCore: 1e9, All: 2e9}}}
	for _, tc := range []struct {
		name          string
		mem, compute  float64
		bound         string
		roofline, rat float64
	}{
		{"memory", 2, 1, "memory", 2, 4},
		{"compute", 1, 4, "compute", 4, 2},
		{"a tie", 2, 2, "memory", 2, 4},
	} {
		out := Result{SecPerIter: 8}
		Rooflines{MemorySec: tc.mem, ComputeSec: tc.compute, Bytes: 4e9, Flops: 8e9, Peak: peak}.Fill(&out)
		if out.Bound != tc.bound || out.RooflineSec != tc.roofline || out.RooflineRatio != tc.rat {
			t.Errorf("%s: bound %s at %v, ratio %v; want %s at %v, %v", tc.name, out.Bound, out.RooflineSec, out.RooflineRatio, tc.bound, tc.roofline, tc.rat)
		}
		if out.MemoryGBps != 4/tc.mem || out.PeakFMA != "ymm" || out.PeakGFlops != 4 || out.PeakGFlopsOneThread != 2 ||
			len(out.FMAPeaks) != 2 || out.FMAPeaks[1] != (FMAPeak{"scalar", 1, 2}) {
			t.Errorf("%s: %+v", tc.name, out)
		}
	}
}

// TestReportText: the text form, line by line, of a run on actors with checkpoints, and of
// one on processes with a death detected.
func TestReportText(t *testing.T) {
	base := Result{Algo: "did", Input: "x.npy", M: 5, N: 100, K: 3, Shards: 2, Threads: 4, Layout: "dense", Iterations: 5, SecPerIter: 0.5,
		MemoryFloorSec: 0.25, MemoryBytes: 2e6, MemoryGBps: 8, ComputeFloorSec: 0.125, FlopsPerIter: 1e6, PeakFMA: "ymm", PeakGFlops: 8,
		PeakGFlopsOneThread: 2, FMAPeaks: []FMAPeak{{"ymm", 2, 8}}, Bound: "memory", RooflineSec: 0.25, RooflineRatio: 2, RelErr2: 0.01}
	head := []string{
		"did on x.npy (100 x 5, K=3, dense), 2 shard(s), 4 thread(s)",
		"  per iteration (median of 5): 0.5 s",
		"  memory floor: 0.25 s (2 MB: X's stored entries read, C read and written; 8 GB/s, median of 7)",
		"  compute floor: 0.125 s (DID's 1e+06 flop at the ymm FMA peak, 8 GFLOP/s on 4 thread(s), 2 on one)",
		"  FMA peaks (GFLOP/s, one thread / 4): ymm 2 / 8",
		"  bound: memory  ->  per iteration / memory floor = 2.00",
		"  rel_err2 after 5 iterations: 0.01",
	}
	actors := Report{Result: base, RooflineReps: 7, OnActors: true, Checkpoints: true}
	actors.SetActors(&ActorTiming{FanIn: 8, ActorSec: 1, Ratio: 2, Overhead: 0.5, Messages: 10, Bytes: 1000, Busy: 0.75}, 3, 2)
	actors.SetCheckpoints("auto", &CheckpointCost{Overhead: 0.05, Checkpoints: 2})
	procs := Report{Result: base, RooflineReps: 7, OnActors: true, Detect: true}
	pt := &ProcsTiming{ActorTiming: ActorTiming{FanIn: 8, ActorSec: 1, Ratio: 2, Overhead: 0.5, Messages: 10, Bytes: 1000, Busy: 0.5},
		JoinSec: 0.25, DetectSec: 3, Allreduce: AllreduceProbe{Sec: 1e-4, Input: "p", Iterations: 2000, Pairs: 2, PerIteration: 1, DriverSec: 1e-5, ActorSec: 2e-4, PayloadFloats: 20}}
	procs.SetProcs(2, pt)
	procs.SetActors(&pt.ActorTiming, 0, 2)
	procs.Allreduce = &pt.Allreduce
	for _, tc := range []struct {
		name string
		r    Report
		want []string
	}{
		{"driver", Report{Result: base, RooflineReps: 7}, head},
		{"actors", actors, append(head[:len(head):len(head)],
			"  on 3 actor systems over gRPC (fan-in 8): 1 s per iteration, 2.000x the driver (median of 2 pairs), +0.5 s per iteration",
			"  messages per iteration 10, bytes per iteration 1000",
			"  shards busy 75% of their iteration time, waiting for collectives' results the rest (median of 2)",
			"  checkpoints every auto iterations (2 a job): job time +5.00% against none (median of 2 pairs)")},
		{"processes", procs, append(head[:len(head):len(head)],
			"  on 2 node processes over gRPC (fan-in 8): 1 s per iteration, 2.000x the driver (median of 2 pairs), +0.5 s per iteration",
			"  messages per iteration 10, bytes per iteration 1000",
			"  shards busy 50% of their iteration time, waiting for collectives' results the rest (median of 2)",
			"  allreduce between the processes: 0.1 ms (p, 2000 iterations, 20 floats a shard, 1 collective(s) an iteration: 0.2 ms per iteration against the driver's 0.01; median of 2 pairs)",
			"  gossip: a joining node is listed by all 0.25 s after its process started (median); kill -9 of a node declared dead by all others after 3 s")},
	} {
		var w bytes.Buffer
		tc.r.WriteText(&w)
		if got := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: text\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	// JSON: one line, the result's fields; what was not measured is left out.
	var w bytes.Buffer
	if err := actors.WriteJSON(&w); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Bytes(), &m); err != nil || strings.Count(w.String(), "\n") != 1 {
		t.Fatalf("%v: %q", err, w.String())
	}
	if m["nodes"] != 3.0 || m["checkpoint_every"] != "auto" || m["shards_busy"] != 0.75 || m["procs"] != nil || m["allreduce_sec"] != nil {
		t.Errorf("JSON %s", w.String())
	}
}
