package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/kernels"
)

// table2Options are bench's flags for --table2.
type table2Options struct {
	sizes, algos, fashionMNIST string
	asJSON                     bool
	// timeCap is --time-cap: each run stops after it (0: none).
	timeCap time.Duration
	set     map[string]bool // flags given on the command line
}

// cmdTable2 runs bench --table2 (bench.RunTable2Set): every algorithm (or --algos) to the
// tolerance on the synthetic sizes and on Fashion-MNIST, one row each, printed as it ends.
func cmdTable2(jf *jobFlags, o table2Options, stdout, stderr io.Writer) error {
	for _, name := range []string{"input", "rank", "algo", "nodes", "procs", "iters", "detect", "checkpoint-overhead", "reps", "roofline-reps"} {
		if o.set[name] {
			return badInput("--%s is not for --table2, which chooses its inputs, ranks and algorithms (see --sizes, --algos, --fashion-mnist)", name)
		}
	}
	sizes, err := bench.ParseSizes(o.sizes)
	if err != nil {
		return badInput("--sizes: %v", err)
	}
	algos, err := bench.ParseAlgos(o.algos)
	if err != nil {
		return badInput("--algos: %v", err)
	}
	if o.timeCap < 0 {
		return badInput("--time-cap must be >= 0, got %v", o.timeCap)
	}
	var accels []kernels.Accel // each setting once, in the order given
	for _, a := range jf.accel.list {
		if !slices.Contains(accels, a) {
			accels = append(accels, a)
		}
	}
	if len(accels) == 0 {
		def, err := jf.accel.one()
		if err != nil {
			return err
		}
		accels = []kernels.Accel{def}
	}
	if !o.set["shards"] {
		jf.shards = bench.Table2Shards
	}
	var sets []bench.Table2Set
	for _, n := range sizes {
		sets = append(sets, bench.SyntheticSet(n, jf.seed))
	}
	note := stdout
	if o.asJSON {
		note = stderr
	}
	if o.fashionMNIST != "" {
		if set, missing := bench.FashionMNISTSet(o.fashionMNIST); len(missing) > 0 {
			fmt.Fprintf(note, "note: fashion-mnist skipped: %s not found (Debian's dataset-fashion-mnist; or --fashion-mnist DIR)\n", strings.Join(missing, ", "))
		} else {
			sets = append(sets, set)
		}
	}
	for i := range sets { // --max-iter and --init, when given, apply to every row
		if o.set["max-iter"] {
			sets[i].MaxIter = jf.maxIter
		}
		if o.set["init"] {
			sets[i].Init = kernels.InitMethod(jf.init)
		}
	}
	threads := jf.threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if !o.asJSON {
		bench.WriteTable2Header(stdout, jf.tol, jf.shards, threads)
	}
	// Each run's job is the flags' with the set's inputs, rank, initialisation and cap.
	open := func(set bench.Table2Set, a kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error) {
		f := *jf
		f.inputs, f.rank, f.algo, f.init = set.Inputs, set.K, string(a.Name), string(set.Init)
		f.accel = accelFlag{list: []kernels.Accel{accel}}
		f.shards, f.maxIter = shards, set.MaxIter
		j, err := f.open()
		if err != nil {
			return nil, err
		}
		return j.Job, nil
	}
	failed := 0
	for _, set := range sets {
		cfg := bench.Table2Config{Shards: jf.shards, Threads: threads, Accels: accels, TimeCap: o.timeCap}
		rows, err := bench.RunTable2Set(set, algos, cfg, open, func(r bench.Table2Row) {
			if o.asJSON {
				line, _ := json.Marshal(r)
				fmt.Fprintln(stdout, string(line))
				return
			}
			bench.WriteTable2Row(stdout, r)
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Error != "" {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d run(s) of the table failed (see their rows)", failed)
	}
	return nil
}

// registerTable2 adds bench's --table2 flags.
func registerTable2(fs *flag.FlagSet, o *table2Options) *bool {
	on := fs.Bool("table2", false, "run the paper's Table 2 on this machine: every algorithm to --tol on synthetic M=5, K=3 data of --sizes samples and on Fashion-MNIST (K=10, k-means init), one row each beside the paper's figures; --accel takes a list there (off,auto or 'off;2,5;auto', or repeat it): did, bcd and hals run once per setting, side by side")
	fs.StringVar(&o.sizes, "sizes", "1e5,1e6", "with --table2: synthetic sample counts, comma-separated, up to the paper's 1e7 and 1e8 (X is 4 GB at 1e8, DID's runs about 14 GB in all; the slow algorithms take hours there: see --time-cap)")
	durationFlag(fs, &o.timeCap, "time-cap", 0, "with --table2: stop each run after this `DURATION` (e.g. 10m), initialisation included; its row says \"capped at\" with the iterations it did (0: no cap)")
	fs.StringVar(&o.algos, "algos", "", "with --table2: algorithms to run, comma-separated (default all: "+algoNames()+")")
	fs.StringVar(&o.fashionMNIST, "fashion-mnist", bench.DefaultFashionMNIST, "with --table2: `DIR` of Fashion-MNIST's train- and t10k-images-idx3-ubyte.gz (empty: no real-data rows)")
	return on
}
