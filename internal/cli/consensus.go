package cli

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/sweep"
)

// notForConsensus are the flags of factorize that consensus does not take: those a transform
// does not (notForTransform), the seed (the k-means has its own, --kmeans-seed), --detach
// (consensus.json and the figure are written by this client) and --coef-tsv (coef.tsv is
// always written, but with --out-shared).
var notForConsensus = map[string]bool{"seed": true, "detach": true, "coef-tsv": true}

func cmdConsensus(args []string, stdout, stderr io.Writer) error {
	all := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(all, &jf)
	fs := flag.NewFlagSet("consensus", flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		if !notForTransform[f.Name] && !notForConsensus[f.Name] {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	sweepDir := fs.String("sweep", "", "the `DIR` of a didnmf sweep (its --out): sweep.json and spectra_K.npy are read from it")
	k := fs.Int("k", 0, "the rank `K` whose runs' spectra are combined (one of the sweep's ranks)")
	threshold := fs.Float64("density-threshold", sweep.DefaultDensityThreshold, "drop a spectrum whose local density is this `VALUE` or more (cNMF's density_threshold; 2 keeps every one)")
	neighborhood := fs.Float64("local-neighborhood-size", sweep.DefaultNeighborhoodSize, "the local density is the mean distance to the nearest int(`FRACTION` x runs) spectra (cNMF's local_neighborhood_size)")
	kmSeed := fs.Uint64("kmeans-seed", sweep.ConsensusSeed, "the `SEED` of the k-means++ starts (the sweep's stability uses the default)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf consensus --sweep DIR --k K --input PATH --out OUT [flags]\n\n"+
			"cNMF's consensus (Kotliar et al., eLife 2019) of the runs of rank K of a sweep: the spectra of every run\n"+
			"(DIR/spectra_K.npy, unit-norm basis columns) whose local density is at or above --density-threshold are\n"+
			"dropped as outliers, the rest are clustered into K programs by k-means, and each program is its cluster's\n"+
			"median, scaled to sum 1. The usages of --input are then refit against the programs exactly (nonnegative\n"+
			"least squares per sample, the job of didnmf transform --basis: distributed over --nodes or a --cluster, no\n"+
			"samples x features dense matrix is formed). --input is the sweep's: an input of other features, or of other\n"+
			"samples than the sweep's runs recorded (DIR/runs), is refused, and one of the same shape that is not the\n"+
			"file the sweep read, or changed since, is warned of; for other samples of the same features, run didnmf\n"+
			"transform --basis OUT/basis.npy on them afterwards. The refit reads the input as the sweep did (its\n"+
			"--transform): leave --transform out, or give the sweep's; another is refused. Writes into OUT basis.npy\n"+
			"(features x K; the same matrix as OUT/consensus_basis_K.npy, the file the transform reads), coef.npy\n"+
			"(samples x K), basis.tsv, coef.tsv and top_features.tsv (named by the input's names, or --feature-names\n"+
			"and --sample-names), report.json, consensus.json (the filter's counts, the dropped spectra, the\n"+
			"silhouette and the cluster sizes) and density_K.png/.svg (the histogram of the local densities with the\n"+
			"threshold). On a --cluster with --ingest shared the nodes read consensus_basis_K.npy from OUT, as\n"+
			"transform's --basis: give an OUT they can read, or --ingest stream. OUT/basis.npy has columns summing\n"+
			"to 1 (cNMF's spectra); the sweep's DIR/consensus_basis_K.npy, its stability's, has unit-norm columns.\n"+
			"--local-neighborhood-size x runs must make at least one neighbour: with the default 0.3, 4 runs or more.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	switch {
	case *sweepDir == "":
		return badInput("--sweep is required: the --out of a didnmf sweep")
	case *k < 1:
		return badInput("--k is required: one of the sweep's ranks (>= 1), got %d", *k)
	case *of.out == "":
		return badInput("--out is required")
	case !(*threshold > 0) || math.IsInf(*threshold, 0):
		return badInput("--density-threshold must be a number > 0 (2 keeps every spectrum), got %v", *threshold)
	case !(*neighborhood > 0 && *neighborhood <= 1):
		return badInput("--local-neighborhood-size must be a number in (0, 1], got %v", *neighborhood)
	}
	if same, err := sameDir(*of.out, *sweepDir); err == nil && same {
		return badInput("--out %s is the --sweep directory: consensus would overwrite the sweep's consensus_basis_%d.npy; give another --out", *of.out, *k)
	}
	// A sweep still writing its --out holds it (prepareOutDir): its sweep.json and spectra
	// come at its end.
	if unlock, busy, err := lockOutDir(*sweepDir); err == nil && busy {
		return badInput("--sweep %s: a didnmf command (its sweep?) is still writing into it: its sweep.json and spectra are written at "+
			"the sweep's end; wait for it to end", *sweepDir)
	} else if err == nil {
		unlock()
	}
	of.names.coefTSV = jf.outShared == ""
	if a, err := jf.accel.one(); err != nil {
		return err
	} else if a.On() {
		return badInput("--accel %s: consensus refits the usages by one exact solve for the consensus basis (a transform): there are no iterations to accelerate; leave out --accel", a)
	}
	// The refit's own refusals (jobspec's), before the spectra are read and clustered.
	for _, f := range []struct {
		given bool
		flag  string
	}{{jf.missing != "", "--missing " + jf.missing}, {flagGiven(fs, "test-fraction") && jf.testFraction != 0, "--test-fraction"}} {
		if f.given {
			return badInput("%s: a transform solves every sample's coefficients from all of its entries; it takes no missing or held-out entries; leave out %s",
				f.flag, f.flag)
		}
	}
	if jf.loss != kernels.LossFrobenius {
		return badInput("--loss %s: consensus refits the usages by nonnegative least squares for the consensus basis (a transform), "+
			"for the Frobenius loss only; leave out --loss", jf.loss)
	}
	sp, err := didnmf.ReadSpectra(*sweepDir, *k)
	if err != nil {
		return err
	}
	// The refit is of the sweep's own input, read as the sweep read it: checked before
	// anything is computed or written. --transform left out is the sweep's; given, it must
	// be the sweep's.
	asked := didnmf.SweepTransform("")
	if flagGiven(fs, "transform") {
		asked = didnmf.SweepTransform(jf.transform)
	}
	tr, err := sp.RefitTransform(asked)
	if err != nil {
		return err
	}
	// The input is opened once, now: its shape is checked against the sweep's before the
	// clustering, and the refit's job is derived from this one (jobFlags.parent). Its rank is
	// the sweep's K (the refit's, as the consensus basis has K columns).
	jf.transform = string(cmp.Or(tr, didnmf.TransformNone))
	jf.rank, jf.rankSet, jf.errOut = *k, true, stderr
	input, err := jf.open()
	if err != nil {
		return &withFlags{err, map[string]string{"rank": "--k"}}
	}
	defer input.Close()
	features, samples := input.m, input.n
	if input.Source == nil && jf.ingest == jobspec.IngestStream {
		// A --cluster's job: with --ingest stream this process reads the input (and streams
		// it to the nodes), so its shape is checked here too; else the nodes read it.
		features, samples = streamedShape(&jf)
	}
	warning, err := sp.CheckInput(jf.inputs, features, samples)
	if err != nil {
		return err
	}
	if warning != nil {
		fmt.Fprintf(stderr, "didnmf: warning: %s\n", flagText(warning))
	}
	if features > 0 && samples > 0 {
		// The names files are checked now, not after the clustering (the refit reads them
		// again, and warns of what they hold).
		if _, err := namesFor(of.names, jf.inputs, "", *k, features, samples, func(string) {}); err != nil {
			return err
		}
	}
	c, err := sp.Consensus(didnmf.ConsensusOptions{Filter: sweep.Filter{Threshold: *threshold, NeighborhoodSize: *neighborhood}, Seed: *kmSeed})
	if err != nil {
		return badInput("--sweep %s --k %d: %w", *sweepDir, *k, err)
	}
	rep := c.Report()
	if !*of.quiet {
		sil := "not defined"
		if rep.Silhouette != nil {
			sil = fmt.Sprintf("%.4f", *rep.Silhouette)
		}
		neighbours := fmt.Sprintf("%d neighbours", rep.Neighbors)
		if rep.Neighbors == 1 {
			neighbours = "1 neighbour"
		}
		fmt.Fprintf(stderr, "consensus of K=%d over %d runs: kept %d of %d spectra (local density over %s < %g), dropped %d; silhouette %s, cluster sizes %v\n",
			rep.K, rep.Runs, rep.Kept, rep.Components, neighbours, rep.DensityThreshold, rep.FilteredCount, sil, rep.ClusterSizes)
	}
	// The figure is drawn before anything is written, so that it cannot fail after the refit.
	fig, err := figures.Density(fmt.Sprintf("local density of the %d spectra of K=%d (%s)", rep.Components, rep.K, *sweepDir), c.Filtered.Density)
	if err != nil {
		return err
	}
	dir, cleanup, release, err := prepareOutDir(*of.out, false)
	if err != nil {
		return err
	}
	defer release()
	of.outHeld = true // the refit writes into it too
	// The transform reads the consensus basis from a file in OUT (by its absolute path: a
	// cluster's nodes read it), consensus_basis_K.npy; the result's basis.npy is the same
	// matrix. Nothing else in OUT is touched before the refit succeeds.
	basisFile, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("consensus_basis_%d.npy", *k)))
	if err != nil {
		cleanup()
		return badInput("--out: %v", err)
	}
	if err := c.WriteBasis(basisFile); err != nil {
		cleanup()
		return err
	}
	failed := func(err error) error {
		_ = os.Remove(basisFile)
		cleanup()
		return err
	}
	// Spectra of sqrt(X) (a sweep with --transform sqrt) are refitted on sqrt(X), the input
	// opened above read through it.
	jf.parent = input.Job
	if err := jf.setTransform(basisFile, fmt.Sprintf("--sweep %s --k %d: the consensus basis", *sweepDir, *k)); err != nil {
		return failed(err)
	}
	if err := runFactorize(&jf, of, stdout, stderr); err != nil {
		return failed(err)
	}
	if err := c.WriteReport(dir); err != nil {
		return failed(err)
	}
	base := fmt.Sprintf("density_%d", rep.K)
	if _, err := fig.Save(dir, base); err != nil {
		return failed(err)
	}
	if !*of.quiet {
		fmt.Fprintf(stderr, "wrote %s, %s.png, %s.svg\n", filepath.Join(dir, "consensus.json"), filepath.Join(dir, base), filepath.Join(dir, base))
	}
	return nil
}

// streamedShape opens the inputs of a --cluster job with --ingest stream, which this process
// reads, only to read their shape: features and samples, 0 and 0 when it cannot open them
// (the refit's stream then says why).
func streamedShape(jf *jobFlags) (features, samples int) {
	src, err := matio.OpenAllWithOptions(matio.OpenInput, jf.inputs, matio.ReadOptions{Missing: jf.missing == "nan"})
	if err != nil {
		return 0, 0
	}
	defer src.Close()
	return src.Features(), src.Samples()
}

// sameDir tells whether the paths a and b name one directory (b must exist; a need not).
func sameDir(a, b string) (bool, error) {
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
