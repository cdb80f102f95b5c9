package didnmf_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/sweep"
	"github.com/didnmf/didnmf/usererr"
)

// consensusSweep sweeps K = 2, 3 with 6 seeds over a small planted-rank-3 input and saves
// it into a temp dir.
func consensusSweep(t *testing.T) (*didnmf.Runner, *didnmf.Job, *didnmf.SweepResult, string) {
	t.Helper()
	spec := jobspec.New([]string{"synthetic:m=12,n=300,k=3,seed=5"}, kernels.DID, 3, 2)
	spec.Stop.MaxIter = 150
	r, err := didnmf.NewRunner(didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	j, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); r.Close() })
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{2, 3}, Seeds: 6, FirstSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	return r, j, res, dir
}

func TestSweepSavesSpectra(t *testing.T) {
	_, _, res, dir := consensusSweep(t)
	var rep didnmf.SweepReport
	if data, err := os.ReadFile(filepath.Join(dir, "sweep.json")); err != nil || json.Unmarshal(data, &rep) != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	for _, rank := range rep.PerRank {
		if rank.Spectra != didnmf.SpectraFile(rank.K) {
			t.Fatalf("K=%d: spectra %q", rank.K, rank.Spectra)
		}
		rows, cols, data, err := matio.ReadNPYMatrix(filepath.Join(dir, rank.Spectra))
		if err != nil || rows != 12 || cols != rank.K*6 {
			t.Fatalf("%s: %d x %d, %v", rank.Spectra, rows, cols, err)
		}
		// Column r*K+p is column p of the r-th run of rank K, scaled to unit norm.
		r := 0
		for _, run := range res.Runs {
			if run.K != rank.K {
				continue
			}
			for p := 0; p < rank.K; p++ {
				col := run.Result.B[p*12 : (p+1)*12]
				var norm float64
				for _, v := range col {
					norm += v * v
				}
				norm = math.Sqrt(norm)
				for f, v := range col {
					if got := data[f*cols+r*rank.K+p]; math.Abs(got-v/norm) > 1e-14 {
						t.Fatalf("%s: feature %d, run %d, component %d: %v, want %v", rank.Spectra, f, r, p, got, v/norm)
					}
				}
			}
			r++
		}
	}
}

// TestConsensusRefitIsTransform: the Go API's refit is the transform of the input for the
// consensus basis, to the bit, and the consensus basis is FilteredConsensus's.
func TestConsensusRefitIsTransform(t *testing.T) {
	r, j, _, dir := consensusSweep(t)
	sp, err := didnmf.ReadSpectra(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if sp.K != 3 || sp.M != 12 || len(sp.Bases) != 6 || len(sp.Runs) != 6 {
		t.Fatalf("spectra: K=%d M=%d, %d bases, %d runs", sp.K, sp.M, len(sp.Bases), len(sp.Runs))
	}
	c, err := sp.Consensus(didnmf.ConsensusOptions{Seed: sweep.ConsensusSeed})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sweep.FilteredConsensus(sp.Bases, 12, 3, sweep.ConsensusSeed, sweep.DefaultFilter())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bitsOf(c.Filtered.Basis), bitsOf(want.Basis)) || c.Options.Filter != sweep.DefaultFilter() {
		t.Errorf("the consensus differs from FilteredConsensus with cNMF's defaults (options %+v)", c.Options)
	}
	out := t.TempDir()
	basisFile := filepath.Join(out, "basis.npy")
	res, err := r.Consensus(context.Background(), j, c, basisFile, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := jobspec.New([]string{"synthetic:m=12,n=300,k=3,seed=5"}, kernels.DID, 3, 2)
	didnmf.TransformSpec(basisFile, 3)(spec)
	tj, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tj.Close()
	tr, err := r.Run(context.Background(), tj, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bitsOf(res.C), bitsOf(tr.C)) || !slices.Equal(bitsOf(res.B), bitsOf(tr.B)) {
		t.Error("the consensus's refit differs from the transform for its basis")
	}
	if !slices.Equal(bitsOf(res.B), bitsOf(c.Filtered.Basis)) {
		t.Error("the refit's basis is not the consensus basis")
	}
	rep := c.Report()
	if rep.K != 3 || rep.Runs != 6 || rep.Kept+rep.FilteredCount != 18 || len(rep.FilteredSpectra) != rep.FilteredCount || rep.Neighbors != 1 {
		t.Errorf("report: %+v", rep)
	}
}

func bitsOf(v []float64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = math.Float64bits(x)
	}
	return out
}

// TestReadSpectraHostile: a sweep directory that is not what sweep.json says is the user's
// error, naming the file.
func TestReadSpectraHostile(t *testing.T) {
	_, _, _, good := consensusSweep(t)
	type edit func(t *testing.T, dir string)
	writeSpectra := func(rows, cols int, bad float64) edit {
		return func(t *testing.T, dir string) {
			data := make([]float64, rows*cols)
			for i := range data {
				data[i] = 0.5
			}
			data[len(data)-1] = bad
			f, err := os.Create(filepath.Join(dir, "spectra_3.npy"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := matio.WriteNPY(f, rows, cols, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	editJSON := func(fn func(*didnmf.SweepReport)) edit {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, "sweep.json")
			data, _ := os.ReadFile(p)
			var rep didnmf.SweepReport
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			fn(&rep)
			data, _ = json.Marshal(rep)
			os.WriteFile(p, data, 0o644)
		}
	}
	writeJSON := func(text string) edit {
		return func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "sweep.json"), []byte(text), 0o644) }
	}
	// fifo and directory put a FIFO (with no writer: a blocking open would hang) or a
	// directory in place of a file.
	fifo := func(name string) edit {
		return func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, name))
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		}
	}
	directory := func(name string) edit {
		return func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, name))
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name string
		k    int
		edit edit
		file string // the file the error names
		want string
	}{
		{"no sweep.json", 3, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "sweep.json")) }, "sweep.json", "cannot read the sweep's report"},
		{"sweep.json not JSON", 3, func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "sweep.json"), []byte("{"), 0o644) }, "sweep.json", "not a sweep report"},
		{"K not swept", 7, nil, "sweep.json", "no rank K = 7 (the sweep summarized K = 2, 3)"},
		{"no spectra file", 3, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "spectra_3.npy")) }, "spectra_3.npy", "no such file"},
		{"spectra not named", 3, editJSON(func(r *didnmf.SweepReport) { r.PerRank[1].Spectra = "" }), "sweep.json", "names no spectra file"},
		{"spectra outside", 3, editJSON(func(r *didnmf.SweepReport) { r.PerRank[1].Spectra = "../x.npy" }), "sweep.json", "ranks_summary[1].spectra"},
		{"fewer runs than columns", 3, editJSON(func(r *didnmf.SweepReport) { r.Runs = r.Runs[:len(r.Runs)-1] }), "spectra_3.npy", "shape 12 x 18; want features x (K x runs) = features x (3 x 5)"},
		{"wrong shape", 3, writeSpectra(12, 17, 0.5), "spectra_3.npy", "shape 12 x 17"},
		// sweep.json says 12 features: a spectra file of other rows is the odd one out (a
		// fresh-eye review: the refit's check called the sweep's input one of 10 features).
		{"other rows than sweep.json's features", 3, writeSpectra(10, 18, 0.5), "spectra_3.npy", "10 rows, but "},
		{"NaN", 3, writeSpectra(12, 18, math.NaN()), "spectra_3.npy", "NaN"},
		{"negative", 3, writeSpectra(12, 18, -1), "spectra_3.npy", "-1"},
		{"sweep.json a FIFO", 3, fifo("sweep.json"), "sweep.json", "not a regular file: it is a FIFO"},
		{"spectra a FIFO", 3, fifo("spectra_3.npy"), "spectra_3.npy", "not a regular file: it is a FIFO"},
		{"sweep.json a directory", 3, directory("sweep.json"), "sweep.json", "is a directory"},
		// A few bytes an object would decode into a struct of hundreds: counted before decoding.
		{"sweep.json of many ranks", 3, writeJSON(`{"ranks_summary":[` + strings.Repeat("{},", didnmf.MaxSweepRuns) + `{}]}`), "sweep.json",
			"not a sweep report: an array of more than 10000 elements"},
		{"sweep.json of many objects", 3, writeJSON(`{"ranks_summary":[` + strings.Repeat(`{"poor_fits":[{},{},{},{}]},`, 7000) + `{}]}`), "sweep.json",
			"not a sweep report: more than 30100 objects"},
		{"sweep.json of many values", 3, writeJSON(`{"builds":[` + strings.Repeat("0,", didnmf.MaxSweepRuns) + `0]}`), "sweep.json",
			"an array of more than 10000 elements"},
		{"sweep.json nested deep", 3, writeJSON(strings.Repeat("[", 1<<20)), "sweep.json", "not a sweep report: nested deeper than 16"},
		{"sweep.json too large", 3, writeJSON(`{"x":"` + strings.Repeat("a", didnmf.MaxSweepReportBytes) + `"}`), "sweep.json",
			"more than a sweep's report may be"},
		{"K not swept among many", 200, editJSON(func(r *didnmf.SweepReport) {
			for k := 4; k < 100; k++ {
				r.PerRank = append(r.PerRank, didnmf.SweepReportRank{K: k})
			}
		}), "sweep.json", "no rank K = 200 (the sweep summarized K = 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, ... (98 ranks))"},
		{"spectra a directory", 3, directory("spectra_3.npy"), "spectra_3.npy", "is a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{"sweep.json", "spectra_2.npy", "spectra_3.npy"} {
				data, err := os.ReadFile(filepath.Join(good, name))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
			if c.edit != nil {
				c.edit(t, dir)
			}
			_, err := didnmf.ReadSpectra(dir, c.k)
			if err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Join(dir, c.file)) {
				t.Errorf("error %v; want a user's error naming %s and saying %q", err, c.file, c.want)
			}
		})
	}
}

// TestConsensusPlantedOutliers: a sweep directory of 10 runs of 6 planted programs (5%
// noise), two of whose spectra are outliers that no other run found: cNMF's filter drops
// exactly those two, consensus.json says which run, seed and column each was, and the
// consensus recovers every program (cosine > 0.99), its columns summing to 1.
func TestConsensusPlantedOutliers(t *testing.T) {
	const m, k, runs = 120, 6, 10
	bump := func(centre float64) []float64 {
		v := make([]float64, m)
		for f := range v {
			d := (float64(f) - centre) / 4
			v[f] = math.Exp(-d*d/2) + 0.01
		}
		return v
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cols := k * runs
	data := make([]float64, m*cols) // features x (K*runs), row-major
	rep := didnmf.SweepReport{Ranks: []int{k}, PerRank: []didnmf.SweepReportRank{{K: k, Runs: runs, Spectra: didnmf.SpectraFile(k)}}}
	for r := 0; r < runs; r++ {
		rep.Runs = append(rep.Runs, didnmf.SweepReportRun{K: k, Seed: 11 + r})
		for p, src := range rng.Perm(k) {
			v := bump((float64(src) + 0.5) * m / k)
			if (r == 2 || r == 7) && p == 3 {
				v = bump(float64(2+2*(r/7)) * m / k) // at 40 or 80, between two programs: an outlier
			}
			for f, x := range v {
				data[f*cols+r*k+p] = x * (1 + 0.05*rng.NormFloat64()) * (1 + float64(p))
			}
		}
	}
	dir := t.TempDir()
	js, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, didnmf.SpectraFile(k)))
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, m, cols, data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sp, err := didnmf.ReadSpectra(dir, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		filter  sweep.Filter
		dropped []didnmf.FilteredSpectrum
	}{
		{"cNMF's defaults", sweep.Filter{}, []didnmf.FilteredSpectrum{{Column: 2*k + 3, Run: 2, Seed: 13, Component: 3}, {Column: 7*k + 3, Run: 7, Seed: 18, Component: 3}}},
		{"threshold 2", sweep.Filter{Threshold: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sp.Consensus(didnmf.ConsensusOptions{Filter: tc.filter, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := c.Report()
			if len(got.FilteredSpectra) != len(tc.dropped) || got.FilteredCount != len(tc.dropped) || got.Kept != cols-len(tc.dropped) {
				t.Fatalf("dropped %+v, want %+v", got.FilteredSpectra, tc.dropped)
			}
			for i, d := range got.FilteredSpectra {
				d.Density = 0
				if d != tc.dropped[i] {
					t.Errorf("dropped %+v, want %+v", d, tc.dropped[i])
				}
			}
			basis := c.Basis() // features x K, row-major
			for p := 0; p < k; p++ {
				want := bump((float64(p) + 0.5) * m / k)
				best := 0.0
				for q := 0; q < k; q++ {
					var ab, aa, bb float64
					for f := 0; f < m; f++ {
						ab += want[f] * basis[f*k+q]
						aa += want[f] * want[f]
						bb += basis[f*k+q] * basis[f*k+q]
					}
					best = max(best, ab/math.Sqrt(aa*bb))
				}
				if !(best > 0.99) {
					t.Errorf("program %d: best cosine %.5f", p, best)
				}
			}
			for q := 0; q < k; q++ {
				var s float64
				for f := 0; f < m; f++ {
					s += basis[f*k+q]
				}
				if math.Abs(s-1) > 1e-12 {
					t.Errorf("column %d sums to %v", q, s)
				}
			}
		})
	}
}

// TestRefitTransform: the refit reads the input as the sweep did; no transform asked ("")
// takes the sweep's, and an asked one that is not the sweep's is refused either way (an
// explicit none against a sqrt sweep was taken for "not asked" and silently overridden),
// naming both and the field transform.
func TestRefitTransform(t *testing.T) {
	for _, tc := range []struct {
		sweep, asked didnmf.SweepTransform
		want         didnmf.SweepTransform
		err          []string
	}{
		{sweep: "", asked: "", want: ""},
		{sweep: "", asked: didnmf.TransformNone, want: ""},
		{sweep: didnmf.TransformSqrt, asked: "", want: didnmf.TransformSqrt},
		{sweep: didnmf.TransformSqrt, asked: didnmf.TransformSqrt, want: didnmf.TransformSqrt},
		{sweep: didnmf.TransformSqrt, asked: didnmf.TransformNone, err: []string{"transform none: the sweep sw fitted transform sqrt", "sw/spectra_3.npy", "sqrt(X)"}},
		{sweep: "", asked: didnmf.TransformSqrt, err: []string{"transform sqrt: the sweep sw fitted transform none", "sw/spectra_3.npy", "the input's values"}},
	} {
		sp := &didnmf.Spectra{Dir: "sw", File: "spectra_3.npy", K: 3, Transform: tc.sweep}
		got, err := sp.RefitTransform(tc.asked)
		if tc.err == nil {
			if err != nil || got != tc.want {
				t.Errorf("sweep %q, asked %q: %q, %v; want %q", tc.sweep, tc.asked, got, err, tc.want)
			}
			continue
		}
		var ue *usererr.Error
		if err == nil || !errors.As(err, &ue) || ue.Field != "transform" {
			t.Errorf("sweep %q, asked %q: %q, %v; want the user's error of the field transform", tc.sweep, tc.asked, got, err)
			continue
		}
		for _, w := range tc.err {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("sweep %q, asked %q: %q does not say %q", tc.sweep, tc.asked, err, w)
			}
		}
	}
}

// TestConsensusCheckInput: the input of a refit has the sweep's features and, when the
// sweep's runs recorded them, its samples; else the user's error of the field input names
// the input, the sweep and its input, and what differs. Runner.Consensus checks its job so.
func TestConsensusCheckInput(t *testing.T) {
	sp := &didnmf.Spectra{Dir: "sw", File: "spectra_3.npy", K: 3, M: 400, Input: []string{"x.npz"}, Samples: 3000}
	for _, tc := range []struct {
		name              string
		features, samples int
		unknownSamples    bool
		err               string
	}{
		{name: "the same shape", features: 400, samples: 3000},
		{name: "shape not known here", features: 0, samples: 0},
		{name: "more samples", features: 400, samples: 20000, err: "input y.npz has 20000 samples; the sweep sw was of x.npz, 3000 samples"},
		{name: "other features", features: 300, samples: 3000, err: "input y.npz has 300 features; the sweep sw was of x.npz, 400 features"},
		{name: "both", features: 300, samples: 20000, err: "input y.npz has 20000 samples and 300 features; the sweep sw was of x.npz, 3000 samples and 400 features"},
		{name: "samples not recorded", features: 400, samples: 20000, unknownSamples: true},
		{name: "samples not recorded, other features", features: 300, samples: 20000, unknownSamples: true, err: "input y.npz has 300 features; the sweep sw was of x.npz, 400 features"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *sp
			if tc.unknownSamples {
				s.Samples = 0
			}
			_, err := s.CheckInput([]string{"y.npz"}, tc.features, tc.samples)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ue *usererr.Error
			if err == nil || !errors.As(err, &ue) || ue.Field != "input" || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%v; want the user's error of the field input saying %q", err, tc.err)
			}
		})
	}
	// Runner.Consensus: a job of 500 samples against a sweep of 300.
	r, _, _, dir := consensusSweep(t)
	rsp, err := didnmf.ReadSpectra(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	rsp.Samples = 300 // a library sweep keeps no journal: say what the CLI's records say
	c, err := rsp.Consensus(didnmf.ConsensusOptions{Seed: sweep.ConsensusSeed})
	if err != nil {
		t.Fatal(err)
	}
	j, err := didnmf.Open(jobspec.New([]string{"synthetic:m=12,n=500,k=3,seed=5"}, kernels.DID, 3, 1), didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	basisFile := filepath.Join(t.TempDir(), "basis.npy")
	if _, err := r.Consensus(context.Background(), j, c, basisFile, didnmf.Options{}); !usererr.Is(err) || !strings.Contains(err.Error(), "has 500 samples") {
		t.Errorf("a refit of 500 samples against a sweep of 300: %v", err)
	}
	if _, err := os.Stat(basisFile); err == nil {
		t.Error("the basis was written for a refit refused")
	}
}
