package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// Table 2 of Gao & Chu, "Distributed Incremental Block Coordinate Descent for Nonnegative
// Matrix Factorization" (AAAI 2018; ../shared/paper/did-nmf-aaai2018.tex, table tab:result):
// iterations and seconds to reach ||E_t||^2 <= 1e-6 ||E_0||^2 with P=16 computing nodes, one
// core each (16-core SuperMicro servers, QDR InfiniBand; C with GSL 2.4 and OpenMPI 2.1). The
// synthetic rows are M=5, K=3, uniform [0,1) data from Matlab's rand with "well scaled" initial
// points; the real rows start from k-means, with at most 1000 iterations. The paper's MNIST is
// the handwritten digits (70000 x 784), not Fashion-MNIST, and it does not state K.

// PaperColumns are the table's algorithm columns, in its order.
var PaperColumns = [8]kernels.Algorithm{kernels.HALS, kernels.ANLS, kernels.ADMM, kernels.BCD, kernels.HPCANLS, kernels.DADMM, kernels.DBCD, kernels.DID}

// paperRows are the table's rows, transcribed: iterations, then seconds, per PaperColumns.
var paperRows = []struct {
	name  string
	iters [8]int
	secs  [8]float64
}{
	{"1e5", [8]int{1281, 141, 170, 549, 141, 170, 549, 549}, [8]float64{16.88, 56.59, 45.88, 10.61, 4.31, 3.46, 1.42, 1.17}},
	{"1e6", [8]int{225, 238, 115, 396, 238, 115, 396, 396}, [8]float64{36.86, 630.43, 476.83, 95.24, 50.47, 37.06, 14.04, 8.61}},
	{"1e7", [8]int{596, 1120, 1191, 654, 1120, 1191, 654, 654}, [8]float64{587.47, 29234.61, 31798.51, 909.76, 2372.47, 2563.47, 126.01, 106.60}},
	{"1e8", [8]int{339, 163, 97, 302, 163, 97, 302, 302}, [8]float64{3779.11, 43197.12, 27590.16, 8808.92, 10172.55, 5742.37, 785.57, 610.09}},
	{"MNIST", [8]int{495, 197, 199, 492, 197, 199, 492, 492}, [8]float64{705.32, 395.61, 610.65, 942.68, 31.84, 46.17, 170.65, 133.50}},
	{"20News", [8]int{302, 169, 169, 231, 169, 169, 231, 231}, [8]float64{2550.02, 745.28, 714.61, 2681.49, 131.12, 172.69, 651.52, 559.70}},
	{"UMist", [8]int{677, 1001, 953, 622, 1001, 953, 622, 622}, [8]float64{314.72, 657.14, 836.76, 422.11, 492.72, 471.01, 92.49, 82.34}},
	{"YaleB", [8]int{1001, 352, 224, 765, 352, 224, 765, 765}, [8]float64{223.58, 201.22, 149.35, 236.13, 50.69, 40.61, 44.08, 36.45}},
}

// PaperFigure returns the paper's iterations and seconds for a row and algorithm (ok false when
// the table has none: rows it did not run, and MU, which it did not compare).
func PaperFigure(row string, algo kernels.Algorithm) (iters int, secs float64, ok bool) {
	c := slices.Index(PaperColumns[:], algo)
	for _, r := range paperRows {
		if r.name == row && c >= 0 {
			return r.iters[c], r.secs[c], true
		}
	}
	return 0, 0, false
}

// Table 2's settings on this machine.
const (
	// Table2Shards is P, as in the paper (unless the caller gives another).
	Table2Shards = 16
	// Table2RealMaxIter is the paper's cap for real data.
	Table2RealMaxIter = 1000
	// Table2SyntheticMaxIter caps the synthetic rows, which the paper capped only by 24 hours
	// (its largest count there is 1281). Here HALS needs about 2300 iterations at 1e5 and MU
	// does not reach 1e-6 in 20000, so 5000 lets every paper algorithm converge and bounds MU.
	Table2SyntheticMaxIter = 5000
	// Table2SyntheticK and Table2RealK are the ranks of the synthetic and the real rows.
	Table2SyntheticK = 3
	Table2RealK      = 10
	// DefaultFashionMNIST is where Debian's dataset-fashion-mnist puts Fashion-MNIST.
	DefaultFashionMNIST = "/usr/share/datasets/fashion-mnist"
)

// Table2Row is one line of bench --table2: one algorithm on one data set.
type Table2Row struct {
	Data   string `json:"data"` // "synthetic 1e5" or "fashion-mnist"
	Input  string `json:"input"`
	M      int    `json:"m"`
	N      int    `json:"n"`
	K      int    `json:"k"`
	Layout string `json:"layout"`
	Algo   string `json:"algo"`
	// Accel is the inner loops the run had (kernels.Accel's form: "off", "auto", "C,B,eps"),
	// for the algorithms that have them (did, bcd, hals); "" for the others.
	Accel      string  `json:"accel,omitempty"`
	Shards     int     `json:"shards"`
	Threads    int     `json:"threads"`
	Init       string  `json:"init"`
	Tol        float64 `json:"tol"`
	MaxIter    int     `json:"max_iter"`
	Iterations int     `json:"iterations"`
	// Seconds is the time of the iterations (all algorithms start from the same point);
	// InitSeconds the time of the initialisation before them.
	Seconds     float64 `json:"seconds"`
	InitSeconds float64 `json:"init_seconds"`
	SecPerIter  float64 `json:"sec_per_iter"`
	StopReason  string  `json:"stop_reason"`
	// Capped is the time cap that stopped the run (Table2Config.TimeCap, as "10m0s"), when it
	// did: StopReason is then "capped", and the row's figures are those of the iterations done.
	Capped         string  `json:"capped,omitempty"`
	ObjectiveRatio float64 `json:"objective_ratio"`
	// Error is set when the run failed (the other rows still run).
	Error string `json:"error,omitempty"`
	// The paper's figures for this row and algorithm (16 nodes), when it has them.
	PaperRow        string  `json:"paper_row,omitempty"`
	PaperIterations int     `json:"paper_iterations,omitempty"`
	PaperSeconds    float64 `json:"paper_seconds,omitempty"`
	GoVersion       string  `json:"go"`
}

// Label names the row's run in the text table: the algorithm, and its accel when not off
// ("did", "did accel auto", "bcd accel 2,5,0.1").
func (r Table2Row) Label() string {
	if r.Accel == "" || r.Accel == "off" {
		return r.Algo
	}
	return r.Algo + " accel " + r.Accel
}

// StopCapped is a row's StopReason when Table2Config.TimeCap stopped it.
const StopCapped = "capped"

// Table2Config are the settings of the table's runs beyond their data and algorithms.
type Table2Config struct {
	// Shards is P for the distributed algorithms (the others run on one shard); Threads the
	// worker threads.
	Shards, Threads int
	// Accels are the inner-loop settings (kernels.Accel) each algorithm that has them
	// (kernels.AccelAlgorithms) runs with, a row each, in order (nil: off only); the other
	// algorithms run once, plain.
	Accels []kernels.Accel
	// TimeCap stops each run after this long, initialisation included (0: none); its row says
	// so (Table2Row.Capped).
	TimeCap time.Duration
}

// Table2Set is one data set of the table.
type Table2Set struct {
	// Data names the set in the rows ("synthetic 1e5", "fashion-mnist"); PaperRow is the
	// paper's row beside it ("": none).
	Data, PaperRow string
	// Inputs are the set's inputs (as didnmf.Open reads them), K the rank, Init the
	// initialisation, MaxIter the cap on iterations.
	Inputs  []string
	K       int
	Init    kernels.InitMethod
	MaxIter int
}

// SyntheticSet is the table's synthetic set of n samples: M=5, K=3, uniform data of the seed,
// from a random start, beside the paper's row of that size when it has one.
func SyntheticSet(n int, seed uint64) Table2Set {
	s := Table2Set{Data: "synthetic " + SizeName(n), Inputs: []string{fmt.Sprintf("synthetic:m=5,n=%d,k=%d,seed=%d", n, Table2SyntheticK, seed)},
		K: Table2SyntheticK, Init: kernels.InitRandom, MaxIter: Table2SyntheticMaxIter}
	if _, _, ok := PaperFigure(SizeName(n), kernels.DID); ok {
		s.PaperRow = SizeName(n)
	}
	return s
}

// FashionMNISTSet is the table's real set: Fashion-MNIST's train and t10k images in dir as
// one input, K=10 from k-means, capped at the paper's 1000 iterations, beside the paper's
// MNIST row. missing lists the files that are not there (the set is then not to be run).
func FashionMNISTSet(dir string) (set Table2Set, missing []string) {
	files := []string{filepath.Join(dir, "train-images-idx3-ubyte.gz"), filepath.Join(dir, "t10k-images-idx3-ubyte.gz")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	return Table2Set{Data: "fashion-mnist", PaperRow: "MNIST", Inputs: files, K: Table2RealK, Init: kernels.InitKMeans, MaxIter: Table2RealMaxIter}, missing
}

// Opener opens the job of one run of the table: set's inputs at its rank, initialisation and
// cap, algo with accel on shards shards, in this process. RunTable2Set closes it.
type Opener func(set Table2Set, algo kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error)

// table2Run is one run of a set: an algorithm with an accel ("" for an algorithm without
// inner loops).
type table2Run struct {
	algo  kernels.AlgorithmInfo
	accel kernels.Accel
	name  string
}

// table2Runs lists the runs of algos under cfg: each algorithm that has inner loops once per
// accel of cfg, the others once. bcd and hals, which do not extrapolate, run a setting's
// sweeps alone (named so), and a setting that is then one they already run is not repeated.
func table2Runs(algos []kernels.AlgorithmInfo, cfg Table2Config) []table2Run {
	accels := cfg.Accels
	if len(accels) == 0 {
		accels = []kernels.Accel{{}}
	}
	var runs []table2Run
	for _, a := range algos {
		if !slices.Contains(kernels.AccelAlgorithms(), a.Name) {
			runs = append(runs, table2Run{algo: a})
			continue
		}
		var seen []kernels.Accel
		for _, acc := range accels {
			if a.Name != kernels.DID {
				acc.Extrapolate = false // only did extrapolates: the others run the setting's sweeps
				if !acc.On() {
					acc = kernels.Accel{}
				}
			}
			if slices.Contains(seen, acc) {
				continue
			}
			seen = append(seen, acc)
			runs = append(runs, table2Run{algo: a, accel: acc, name: acc.String()})
		}
	}
	return runs
}

// RunTable2Set reads a data set once (the first algorithm's job on one shard) and runs every
// algorithm on it with the driver, once per accel of cfg for the algorithms that have inner
// loops, on cfg.Shards shards (one for an algorithm that is not distributed) and cfg.Threads
// threads, each run stopped after cfg.TimeCap, calling emit after each. A run that fails, or
// whose job this machine refuses (memory), is a row with its Error; an error is returned only
// when the data set cannot be read, a block cannot be split, or --shards does not fit it.
func RunTable2Set(set Table2Set, algos []kernels.AlgorithmInfo, cfg Table2Config, open Opener, emit func(Table2Row)) ([]Table2Row, error) {
	shards, threads := cfg.Shards, cfg.Threads
	shardsOf := func(a kernels.AlgorithmInfo) int {
		if !a.Distributed {
			return 1
		}
		return shards
	}
	j, err := open(set, algos[0], kernels.Accel{}, 1)
	if err != nil {
		return nil, err
	}
	whole, err := j.ReadBlocks()
	j.Close()
	if err != nil {
		return nil, err
	}
	layout := LayoutOf(whole)
	var rows []Table2Row
	for _, run := range table2Runs(algos, cfg) {
		a := run.algo
		p := shardsOf(a)
		row := Table2Row{Data: set.Data, Input: strings.Join(set.Inputs, " + "), K: set.K, Layout: layout,
			Algo: string(a.Name), Accel: run.name, Shards: p, Threads: threads, Init: string(set.Init), GoVersion: runtime.Version()}
		if it, s, ok := PaperFigure(set.PaperRow, a.Name); ok {
			row.PaperRow, row.PaperIterations, row.PaperSeconds = set.PaperRow, it, s
		}
		j, err := open(set, a, run.accel, p)
		var ue *usererr.Error
		if errors.As(err, &ue) && ue.Field == "shards" {
			return nil, err // --shards is the user's to fix, for every distributed row
		}
		if err != nil {
			// A row this machine cannot run (dadmm's Y and U at N=1e8 need more memory than
			// it has) is a row of the table that says why; the others still run.
			row.Error = err.Error()
			emit(row)
			rows = append(rows, row)
			continue
		}
		j.Close()
		row.M, row.N, row.Tol, row.MaxIter = j.Features, j.Samples, j.Spec.Stop.Tol, j.Spec.Stop.MaxIter
		blocks, err := kernels.Split(whole[0], p)
		if err != nil {
			return nil, usererr.Field("shards", "{shards}: %v", err)
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if cfg.TimeCap > 0 {
			ctx, cancel = context.WithTimeout(ctx, cfg.TimeCap)
		}
		res, err := kernels.Run(ctx, blocks, j.Config())
		cancel()
		capped := err != nil && errors.Is(err, context.DeadlineExceeded)
		if capped {
			row.Capped, row.StopReason = cfg.TimeCap.String(), StopCapped
		}
		switch {
		case capped && res == nil: // within the initialisation: no iteration to show
		case err != nil && !capped:
			row.Error = err.Error()
		default:
			var iterSec float64
			for _, s := range res.IterSeconds {
				iterSec += s
			}
			row.Iterations, row.Seconds, row.InitSeconds = res.Iterations, iterSec, math.Max(res.Seconds-iterSec, 0)
			if res.Iterations > 0 {
				row.SecPerIter = iterSec / float64(res.Iterations)
			}
			row.StopReason, row.ObjectiveRatio = string(res.StopReason), kernels.Ratio(res.Objective, res.Initial)
			if capped {
				row.StopReason = StopCapped
			}
		}
		emit(row)
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteTable2Header writes the text table's header: the settings (tol, shards, threads) and
// the columns.
func WriteTable2Header(w io.Writer, tol float64, shards, threads int) {
	fmt.Fprintf(w, "Table 2 of Gao & Chu (AAAI 2018) on this machine: tol %g, distributed algorithms on P=%d shards, %d thread(s);\n", tol, shards, threads)
	fmt.Fprintf(w, "paper: P=16 nodes of one core each; its real-data row is MNIST digits (Fashion-MNIST here has the same shape). seconds: the iterations, without the initialisation.\n")
	fmt.Fprintf(w, "%-18s %-20s %6s %7s %7s %10s %10s %11s  %s\n", "data", "algo", "shards", "iters", "paper", "seconds", "paper s", "s/iter", "stop")
}

// WriteTable2Row writes a row of the text table, beside the paper's figures ("-": none).
func WriteTable2Row(w io.Writer, r Table2Row) {
	paperIt, paperS := "-", "-"
	if r.PaperRow != "" {
		paperIt, paperS = strconv.Itoa(r.PaperIterations), strconv.FormatFloat(r.PaperSeconds, 'f', 2, 64)
	}
	switch {
	case r.Error != "":
		fmt.Fprintf(w, "%-18s %-20s %6d %7s %7s %10s %10s %11s  error: %s\n", r.Data, r.Label(), r.Shards, "-", paperIt, "-", paperS, "-", r.Error)
		return
	case r.Capped != "" && r.Iterations == 0:
		fmt.Fprintf(w, "%-18s %-20s %6d %7s %7s %10s %10s %11s  capped at %s in the initialisation\n", r.Data, r.Label(), r.Shards, "-", paperIt, "-", paperS, "-", r.Capped)
		return
	}
	stop := r.StopReason
	if r.Capped != "" {
		stop = "capped at " + r.Capped
	}
	fmt.Fprintf(w, "%-18s %-20s %6d %7d %7s %10.3f %10s %11.4g  %s (ratio %.3g)\n", r.Data, r.Label(), r.Shards, r.Iterations, paperIt,
		r.Seconds, paperS, r.SecPerIter, stop, r.ObjectiveRatio)
}

// ParseSizes parses a list of synthetic sizes: comma-separated sample counts, as integers or
// powers like 1e6 (empty entries skipped).
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := matio.ParseCount(f)
		if err != nil || v < 1 || v > 1e9 {
			return nil, fmt.Errorf("%q is not a number of samples between 1 and 1e9", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// SizeName writes n as the paper does (1e5) when it is a power of ten.
func SizeName(n int) string {
	for e, p := 0, 1; p <= n; e, p = e+1, p*10 {
		if p == n && e > 0 {
			return fmt.Sprintf("1e%d", e)
		}
	}
	return strconv.Itoa(n)
}

// ParseAlgos parses a comma-separated list of algorithms (empty: every algorithm, in
// kernels.Algorithms order).
func ParseAlgos(s string) ([]kernels.AlgorithmInfo, error) {
	if strings.TrimSpace(s) == "" {
		return kernels.Algorithms(), nil
	}
	var out []kernels.AlgorithmInfo
	for _, name := range strings.Split(s, ",") {
		a, err := kernels.LookupAlgorithm(kernels.Algorithm(strings.TrimSpace(name)))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
