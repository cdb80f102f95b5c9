package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/didnmf/didnmf"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// durationValue is a time.Duration flag whose error says what a duration looks like (the flag
// package only says "parse error").
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration: give a number with a unit, e.g. 90s, 10m or 2h")
	}
	*v.d = d
	return nil
}

// durationFlag defines a duration flag as fs.DurationVar does, with durationValue's errors.
func durationFlag(fs *flag.FlagSet, d *time.Duration, name string, value time.Duration, usage string) {
	*d = value
	fs.Var(durationValue{d}, name, usage)
}

// setInt is an int flag that records whether it was given.
type setInt struct {
	v   *int
	set *bool
}

func (f *setInt) String() string {
	if f == nil || f.v == nil || *f.v == 0 {
		return "" // no default to print
	}
	return strconv.Itoa(*f.v)
}

func (f *setInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	*f.v, *f.set = v, true
	return nil
}

// setFloat is a float64 flag that records whether it was given.
type setFloat struct {
	v   *float64
	set *bool
}

func (f *setFloat) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f *setFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	*f.v, *f.set = v, true
	return nil
}

// stringList is a repeatable string flag of paths (or specs): an empty one is refused.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	if v == "" {
		return errors.New("an empty path")
	}
	*s = append(*s, v)
	return nil
}

// accelFlag is --accel: the settings given, in order (kernels.ParseAccel's forms). A fit
// takes one (none given: jobspec.DefaultAccel); bench --table2 runs each, so a value may list
// several, separated by ';' (a setting holds commas), or by commas when each is a name
// ("off,auto"), and the flag may be repeated.
type accelFlag struct {
	list []kernels.Accel
}

func (a *accelFlag) String() string {
	if a == nil || len(a.list) == 0 {
		return ""
	}
	names := make([]string, len(a.list))
	for i, v := range a.list {
		names[i] = v.String()
	}
	return strings.Join(names, ";")
}

func (a *accelFlag) Set(s string) error {
	for _, part := range strings.Split(s, ";") {
		v, err := kernels.ParseAccel(part)
		if err == nil {
			a.list = append(a.list, v)
			continue
		}
		names := strings.Split(part, ",")
		for _, n := range names {
			if _, named := accelNames[strings.TrimSpace(n)]; !named {
				return err
			}
		}
		for _, n := range names {
			v, _ := kernels.ParseAccel(n)
			a.list = append(a.list, v)
		}
	}
	return nil
}

// accelNames are the settings kernels.ParseAccel reads by name.
var accelNames = map[string]bool{"off": true, "auto": true, "x": true}

// one returns the one setting of a fit: the default when none was given, an error when
// several were.
func (a *accelFlag) one() (kernels.Accel, error) {
	switch len(a.list) {
	case 0:
		v, err := kernels.ParseAccel(jobspec.DefaultAccel)
		if err != nil {
			return kernels.Accel{}, fmt.Errorf("jobspec.DefaultAccel: %v", err)
		}
		return v, nil
	case 1:
		return a.list[0], nil
	}
	return kernels.Accel{}, badInput("--accel %s: a fit takes one setting (bench --table2 takes several)", a)
}

// accelUsage is --accel's help.
var accelUsage = fmt.Sprintf("accelerated DID, a `SETTING`: off (plain DID), auto (%d,%d,%g,x), x (extrapolation alone), C,B or C,B,eps, optionally followed by ,x: at most C coordinate sweeps over each column of C and B over B an iteration, each loop stopping once its step is below eps (default %g) of its first, and with x extrapolation with restarts (did without --missing or --test-fraction; a run whose last iteration overshoots takes up to %d more, past --max-iter or the stall rule, to end at its lowest error); no further allreduce (sweeps: did, bcd, hals; default %s)",
	kernels.AccelAuto.CSweeps, kernels.AccelAuto.BSweeps, kernels.AccelAuto.Eps, kernels.AccelAuto.Eps, kernels.SettleIterations, jobspec.DefaultAccel)

// defaultStallTol is --stall-tol's default (see jobspec.DefaultStallTol for how it was chosen).
const defaultStallTol = jobspec.DefaultStallTol

// jobFlags are the flags factorize and bench share: the input and the job.
type jobFlags struct {
	// parent, when set, is an open job of the same inputs (and transform) that open derives
	// the job from (didnmf.Job.Derive) instead of opening the inputs again: consensus reads
	// its input once, for the shape check before the clustering and for the refit.
	parent    *didnmf.Job
	inputs    stringList
	rank      int
	algo      string
	shards    int
	tol       float64
	maxIter   int
	timeLimit time.Duration
	stallTol  float64
	// rankSet is set when --rank was given (so that --rank 0 is not taken for a missing rank).
	rankSet bool
	// stallSet is set when --stall-tol was given: without it, --tol 0 (run exactly
	// --max-iter iterations) turns the stall rule off too.
	stallSet  bool
	seed      uint64
	init      string
	initBasis string
	initCoef  string
	threads   int
	kernel    *string
	layout    string
	form      string
	storage   string
	rho       float64
	// Penalties (scikit-learn's alpha_W, alpha_H, l1_ratio); alphaBasis is "same" (as
	// alpha_W) or a number.
	alphaCoef  float64
	alphaBasis string
	l1Ratio    float64
	loss       kernels.Loss
	// Missing values and the held-out test set.
	missing      string
	testFraction float64
	transform    string
	testSeed     uint64
	// accel is --accel (see accelFlag).
	accel accelFlag
	nodes int
	fanIn int
	// checkpointEvery is the checkpoint interval of runs on actors (0: none, -1: automatic),
	// parsed from checkpointFlag.
	checkpointEvery int
	checkpointFlag  string
	// warn shows news about a running job that does not end it (nil: dropped).
	warn func(string)
	// errOut receives the client's notes about its credentials (nil: dropped).
	errOut io.Writer
	// Running on a cluster (factorize --cluster).
	cluster   string
	ingest    string
	outShared string
	overwrite bool
	detach    bool
	// fixBasis is factorize --fix-basis: the job becomes a transform for that basis.
	fixBasis string
	// basisRows is the number of features of a transform's basis (0: not a transform),
	// basisFlag the flag that gave the basis.
	basisRows  int
	basisFlag  string
	clientBind string
	sec        securityFlags
}

func (f *jobFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.inputs, "input", "input `PATH`, samples as rows: .npy, scipy sparse .npz (CSR or CSC), .mtx[.gz], IDX[.gz], a 10x Cell Ranger directory (matrix.mtx, features.tsv, barcodes.tsv: cells as samples), a block store directory (python3 -m didnmf convert makes one from .h5ad or 10x .h5), or synthetic:m=,n=,k=,seed=[,noise=]; repeat to stack files as more samples")
	fs.Var(&setInt{v: &f.rank, set: &f.rankSet}, "rank", "rank `K` of the factorization (1 <= K <= min(samples, features))")
	fs.StringVar(&f.algo, "algo", string(kernels.DID), "algorithm: "+algoNames())
	fs.IntVar(&f.shards, "shards", 1, "number of shards P (distributed algorithms only)")
	fs.Float64Var(&f.tol, "tol", 1e-6, "stop when ||X-BC||^2 <= tol * ||X-B0C0||^2; 0 runs exactly max-iter iterations")
	fs.IntVar(&f.maxIter, "max-iter", 1000, "maximum number of iterations")
	durationFlag(fs, &f.timeLimit, "time-limit", 0, "stop after this `DURATION` of running (e.g. 90s, 10m, 2h), reading the input left out; 0 means no limit")
	f.stallTol = defaultStallTol
	fs.Var(&setFloat{v: &f.stallTol, set: &f.stallSet}, "stall-tol", "also stop (converged) when the error fell by less than this `FRACTION` over the last 10 iterations, as scikit-learn's tol does: real data never reach --tol; 0 turns it off, and so does --tol 0 unless --stall-tol is given")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed (init and synthetic data)")
	fs.StringVar(&f.init, "init", string(kernels.InitRandom), "initialisation: random, nndsvd, nndsvda, kmeans, custom")
	fs.StringVar(&f.initBasis, "init-basis", "", "initial basis `FILE` (.npy, features x K) for --init custom")
	fs.StringVar(&f.initCoef, "init-coef", "", "initial coefficients `FILE` (.npy, samples x K) for --init custom")
	fs.IntVar(&f.threads, "threads", 0, "worker threads (0: all cores)")
	f.kernel = addKernelFlag(fs)
	fs.StringVar(&f.layout, "layout", "auto", "in-memory form of the data: auto, dense, sparse")
	fs.StringVar(&f.form, "form", "auto", "DID kernel form: auto, gram, residual")
	fs.StringVar(&f.storage, "storage", "auto", "how X's values are stored: float32 (half the memory and bandwidth; refused when a value is not exactly a float32), float64, or auto (float32 when every value allows: counts, pixels); the factors are the same bits")
	fs.Float64Var(&f.rho, "rho", 1, "ADMM/DADMM penalty")
	fs.Float64Var(&f.alphaCoef, "alpha-coef", 0, "L1/L2 penalty on coef, scikit-learn's alpha_W (scaled as it does, by the number of features): 0 is none; for did, dbcd, bcd, hals, mu, anls, hpc-anls")
	fs.StringVar(&f.alphaBasis, "alpha-basis", "same", "L1/L2 penalty on basis, scikit-learn's alpha_H (scaled by the number of samples): a number, or same as --alpha-coef, as scikit-learn's default")
	fs.Var(&f.loss, "loss", "the divergence to minimise, scikit-learn's beta_loss: frobenius, kl (Kullback-Leibler: counts), is (Itakura-Saito: spectra, X > 0), or a number beta; all but frobenius need --algo mu (default frobenius)")
	fs.StringVar(&f.missing, "missing", "", "nan: read NaN entries as not observed (missing values, fitted around: did, dbcd, bcd, hals, and mu with every --loss) instead of refusing them")
	fs.Float64Var(&f.testFraction, "test-fraction", 0, "hold this `FRACTION` of the entries out of the fit (each sample holds out the features of one of 256 row patterns chosen by a hash of --test-seed and the sample, so the same whatever the sharding) and report their error every iteration: RcppML's cross-validation of the rank (did, dbcd, bcd, hals, mu)")
	fs.StringVar(&f.transform, "transform", "none", "what the job fits: none (the input's values) or sqrt (their square roots, for counts, whose noise grows with "+
		"their mean: the factors, train errors and objective are then of sqrt(X), and a held-out error is the model's square's against X); applied by "+
		"whoever reads the input: this process, or the nodes of --nodes or --cluster")
	fs.Uint64Var(&f.testSeed, "test-seed", 1, "seed of the held-out entries (the same test set for every --seed and --rank)")
	fs.Var(&f.accel, "accel", accelUsage)
	fs.Float64Var(&f.l1Ratio, "l1-ratio", 0, "share of L1 in the penalties, scikit-learn's l1_ratio: 0 is L2 only, 1 is L1 only (sparser factors)")
	fs.IntVar(&f.nodes, "nodes", 0, "run on an in-process cluster of `N` actor systems on loopback, talking over gRPC (0: the in-process driver, no actors)")
	fs.IntVar(&f.fanIn, "fan-in", 0, "fan-in of the reduce tree with --nodes or --cluster (a power of two; 0: the default)")
	fs.StringVar(&f.checkpointFlag, "checkpoint-every", "auto", "with --nodes or --cluster, checkpoint the shards every `N` iterations (on each node and on a buddy node), so that a failure rolls the job back only to the last checkpoint; auto: as often as costs about 4% of the job's time (see BENCHMARKS.md); 0: no checkpoints (a failure restarts the job from its initialisation)")
}

// registerCluster adds the flags of runs on a running cluster (factorize only).
func (f *jobFlags) registerCluster(fs *flag.FlagSet) {
	fs.StringVar(&f.cluster, "cluster", "", "submit to the running cluster at gossip address `IP:PORT` of any member (comma-separated for several); see didnmf serve")
	fs.StringVar(&f.ingest, "ingest", "shared", "with --cluster, how shards get the data: shared (each node reads its rows of the input path, which every node must see; synthetic: inputs are generated on the nodes) or stream (this client reads the input, and a custom initialisation's files, and streams each shard its block)")
	fs.StringVar(&f.outShared, "out-shared", "", "with --cluster, a `DIR` every node can write (made if absent): the shards write coef.npy there themselves, and C never passes through this client")
	fs.BoolVar(&f.overwrite, "overwrite", false, "with --out-shared, replace a coef.npy that is there (otherwise the job is refused)")
	fs.BoolVar(&f.detach, "detach", false, "with --cluster and --out-shared, submit the job and exit: it runs on without this client (which otherwise keeps it alive: a job whose client is gone is canceled), and writes coef.npy, basis.npy and report.json into --out-shared; see didnmf jobs and didnmf cancel")
	fs.StringVar(&f.clientBind, "client-bind", "", "with --cluster, the `IP` this client listens on for results (default: the address that routes to the cluster)")
	f.sec.register(fs)
}

func algoNames() string {
	var names []string
	for _, a := range kernels.Algorithms() {
		names = append(names, string(a.Name))
	}
	return strings.Join(names, ", ")
}

// parseFlags parses args into fs, turning flag errors into usage errors and refusing
// positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	_, err := parseFlagsArgs(fs, args, 0, stderr)
	return err
}

// parseFlagsArgs parses flags and up to max arguments, which may stand before, between or
// after the flags; it returns the arguments. A flag error (unknown flag, bad or missing
// value, extra argument, malformed --cluster) is a one-line *flagError; -h, -help or --help
// is a helpError holding fs.Usage's text, which run prints on stdout. Nothing is written to
// stderr (kept for the callers).
func parseFlagsArgs(fs *flag.FlagSet, args []string, max int, stderr io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard) // the flag package prints the whole usage on an error
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpOf(fs)
			}
			if strings.HasSuffix(err.Error(), "provided but not defined: -gossip-key") {
				err = errGossipKeyFlag(fs)
			}
			return nil, &flagError{cmd: fs.Name(), err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
		if len(rest) > max {
			return nil, &flagError{cmd: fs.Name(), err: fmt.Errorf("unexpected argument %q (flags start with -)", rest[len(rest)-1])}
		}
	}
	if err := checkClusterFlag(fs); err != nil {
		return nil, err
	}
	return rest, nil
}

// errGossipKeyFlag is the error of the --gossip-key flag, which took the key on the command
// line (where every local user can read it) and is no more: a member takes the key from a
// file or the environment, a client takes none.
func errGossipKeyFlag(fs *flag.FlagSet) error {
	if fs.Lookup("gossip-key-file") != nil {
		return fmt.Errorf("--gossip-key KEY was removed, as every local user can read a command line: put the key in a file only you may read (chmod 600) and give --gossip-key-file FILE, or set $%s", gossipKeyEnv)
	}
	return errors.New("--gossip-key: a client takes no gossip key any more (it asks a member's front door for the cluster, with its certificate or the cluster secret): drop the flag")
}

// job is a validated jobFlags: the job opened for its target (the input open when this
// process reads it), with the kernels' configuration and the input's shape at hand.
type job struct {
	*didnmf.Job
	src    matio.Source
	spec   *jobspec.Spec
	cfg    kernels.Config
	shards int
	m, n   int
}

// open parses the flags into a spec and a target and opens the job (didnmf.Open, whose
// check, jobspec.Spec.CheckOn, holds every rule of the job: its errors name fields, which
// exitStatus names as flags). open keeps only the rules of the flags (what is required, what
// a value must look like, a flag that has no effect without another). The caller closes the
// job.
func (f *jobFlags) open() (*job, error) {
	if len(f.inputs) == 0 {
		return nil, badInput("--input is required")
	}
	for i, in := range f.inputs {
		f.inputs[i] = matio.DefaultSeed(in, f.seed) // --seed also seeds synthetic data
	}
	if f.rank == 0 && !f.rankSet {
		return nil, badInput("--rank is required")
	}
	layout, err := matio.ParseLayout(f.layout)
	if err != nil {
		return nil, badInput("--layout: %v", err)
	}
	form, err := kernels.ParseForm(f.form)
	if err != nil {
		return nil, badInput("--form: %v", err)
	}
	storage, err := kernels.ParseStorage(f.storage)
	if err != nil {
		return nil, badInput("--storage: %v", err)
	}
	if f.kernel != nil {
		if err := applyKernel(*f.kernel); err != nil {
			return nil, err
		}
	}
	if f.tol == 0 && !f.stallSet {
		f.stallTol = 0 // --tol 0 runs exactly --max-iter iterations
	}
	switch f.checkpointFlag {
	case "auto", "":
		f.checkpointEvery = -1
	default:
		n, err := strconv.Atoi(f.checkpointFlag)
		if err != nil || n < 0 {
			return nil, badInput("--checkpoint-every must be auto or a number of iterations >= 0, got %q", f.checkpointFlag)
		}
		f.checkpointEvery = n
	}
	if f.ingest == "" {
		f.ingest = jobspec.IngestShared // bench has no --ingest
	}
	if f.missing != "" && f.missing != "nan" {
		return nil, badInput("--missing %q: the only marker of a missing value is nan", f.missing)
	}
	alphaBasis := f.alphaCoef
	if f.alphaBasis != "same" && f.alphaBasis != "" {
		if alphaBasis, err = strconv.ParseFloat(f.alphaBasis, 64); err != nil {
			return nil, badInput("--alpha-basis must be a number or same (as --alpha-coef), got %q", f.alphaBasis)
		}
	}
	if f.fanIn != 0 && f.nodes == 0 && f.cluster == "" {
		return nil, badInput("--fan-in shapes the reduce tree of actors: it needs --nodes N or --cluster")
	}
	accel, err := f.accel.one()
	if err != nil {
		return nil, err
	}
	if f.overwrite && f.outShared == "" {
		return nil, badInput("--overwrite is for --out-shared")
	}
	transform, err := matio.ParseTransform(f.transform)
	if err != nil {
		return nil, badInput("--transform %q: want none or sqrt", f.transform)
	}
	if !transform.On() {
		transform = ""
	}
	spec := &jobspec.Spec{Inputs: f.inputs, Algo: kernels.Algorithm(f.algo), Rank: f.rank, Shards: f.shards, Seed: f.seed,
		Init: kernels.InitMethod(cmp.Or(f.init, string(kernels.InitRandom))), InitBasis: f.initBasis, InitCoef: f.initCoef, Form: form, Storage: storage, Layout: layout,
		Stop: kernels.StopRule{Tol: f.tol, MaxIter: f.maxIter, TimeLimit: f.timeLimit, StallTol: f.stallTol},
		Rho:  f.rho, AlphaCoef: f.alphaCoef, AlphaBasis: alphaBasis, L1Ratio: f.l1Ratio, Loss: f.loss,
		Missing: f.missing == "nan", TestFraction: f.testFraction, TestSeed: f.testSeed, Accel: accel, FanIn: cmp.Or(f.fanIn, jobspec.DefaultFanIn), CheckpointEvery: int64(f.checkpointEvery),
		Ingest: f.ingest, OutShared: f.outShared, Overwrite: f.overwrite, Detached: f.detach, Transform: transform}
	if f.parent != nil {
		dj, err := f.parent.Derive(func(s *didnmf.Spec) { *s = *spec })
		if err != nil {
			return nil, err
		}
		return &job{Job: dj, src: dj.Source, spec: dj.Spec, cfg: dj.Config(), shards: f.shards, m: dj.Features, n: dj.Samples}, nil
	}
	target := didnmf.InProcess(f.nodes, f.threads)
	if f.cluster != "" {
		cfg, err := clientConfig(f.cluster, &f.sec, f.clientBind, cmp.Or[io.Writer](f.errOut, io.Discard))
		if err != nil {
			return nil, err
		}
		target = didnmf.Target{Nodes: f.nodes, Cluster: &cfg} // the check refuses --nodes with --cluster
	}
	dj, err := didnmf.Open(spec, target) // the one check of the job: its messages name fields, flagText the flags
	if err != nil && f.basisFlag != "" {
		return nil, &withFlags{err, map[string]string{"init_basis": f.basisFlag, "rank": "the basis's K"}}
	}
	if err != nil {
		return nil, err
	}
	return &job{Job: dj, src: dj.Source, spec: dj.Spec, cfg: dj.Config(), shards: f.shards, m: dj.Features, n: dj.Samples}, nil
}

// fieldFlags names the flag of each field a check names (jobspec's spec, didnmf.Target): the
// check reports the field, the CLI names the flag.
var fieldFlags = map[string]string{
	"input": "--input", "algorithm": "--algo", "rank": "--rank", "shards": "--shards", "init": "--init",
	"init_basis": "--init-basis", "init_coef": "--init-coef", "form": "--form", "storage": "--storage",
	"layout": "--layout", "rho": "--rho", "alpha_coef": "--alpha-coef", "alpha_basis": "--alpha-basis",
	"l1_ratio": "--l1-ratio", "loss": "--loss", "missing": "--missing nan", "test_fraction": "--test-fraction", "accel": "--accel", "transform": "--transform",
	"fan-in": "--fan-in", "ingest": "--ingest", "out_shared": "--out-shared", "detached": "--detach",
	"natural_layout": "--input", "stop": "--tol, --max-iter, --time-limit or --stall-tol",
	"nodes": "--nodes", "threads": "--threads", "cluster": "--cluster", "overwrite": "--overwrite",
	"tol": "--tol", "max_iter": "--max-iter", "time_limit": "--time-limit", "stall_tol": "--stall-tol",
	"ranks": "--ranks", "seeds": "--seeds", "folds": "--folds", "parallel": "--parallel",
	"test_seed": "--test-seed", "first_seed": "--seed", "out": "--out",
}

// flagOf returns the flag of a field (the field itself when no flag sets it).
func flagOf(field string) string {
	if f, ok := fieldFlags[field]; ok {
		return f
	}
	return field
}

// withFlags names some fields, for flagText, by other flags than fieldFlags gives (a
// transform's basis is --basis or --fix-basis, its rank the basis's).
type withFlags struct {
	err   error
	flags map[string]string
}

func (w *withFlags) Error() string { return w.err.Error() }
func (w *withFlags) Unwrap() error { return w.err }

// flagText returns err's message with the fields its *usererr.Error names as flags.
func flagText(err error) string {
	msg := err.Error()
	var ue *usererr.Error
	if !errors.As(err, &ue) {
		return msg
	}
	name := flagOf
	if wf := (*withFlags)(nil); errors.As(err, &wf) {
		name = func(field string) string { return cmp.Or(wf.flags[field], flagOf(field)) }
	}
	return strings.Replace(msg, ue.Error(), ue.Text(name), 1)
}

// readBlocks reads the shard blocks of the job.
func (j *job) readBlocks() ([]kernels.Block, error) {
	return j.ReadBlocks()
}

// flagGiven tells whether the flag name was given on fs's command line (not its default).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}
