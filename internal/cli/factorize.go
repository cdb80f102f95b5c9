package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/didnmf/didnmf"

	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/matio"
)

// outputFlags are factorize's flags about what it writes and prints.
type outputFlags struct {
	out        *string
	quiet      *bool
	plots      *bool
	imageShape *string
	names      *namesFlags
	// outHeld says that this process holds --out's lock already (consensus, which writes
	// into it before its refit): runFactorize does not take it again.
	outHeld bool
}

// registerFactorize adds factorize's flags to fs (demo parses its arguments with them too).
func registerFactorize(fs *flag.FlagSet, jf *jobFlags) outputFlags {
	jf.register(fs)
	jf.registerCluster(fs)
	nf := new(namesFlags)
	nf.register(fs)
	return outputFlags{
		names:      nf,
		out:        fs.String("out", "", "output `DIR` for basis.npy (features x K), coef.npy (samples x K), report.json, basis.tsv and top_features.tsv (the basis as text, and each component's top features, named)"),
		quiet:      fs.Bool("quiet", false, "print nothing but errors"),
		plots:      fs.Bool("plots", false, "also draw the result into --out as PNG and SVG (see didnmf plot): convergence, and the basis as images or as each component's top features"),
		imageShape: fs.String("image-shape", "", "the features are the pixels of `HxW` images (IDX image files say so themselves): recorded in report.json, and --plots draws the basis as images"),
	}
}

func cmdFactorize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(fs, &jf)
	fs.StringVar(&jf.fixBasis, "fix-basis", "", "fit only the coef for this basis `FILE` (.npy, features x K, e.g. an earlier result's basis.npy), exactly: the same as didnmf transform")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf factorize --input PATH --rank K --out DIR [flags]\n\n"+
			"factorizes a nonnegative matrix (samples as rows) into coef (samples x K) and basis (features x K),\n"+
			"and writes basis.npy, coef.npy, report.json, basis.tsv and top_features.tsv into --out: in this\n"+
			"process, on --nodes N actor systems in it, or on a running cluster (--cluster IP:PORT, see didnmf\n"+
			"serve)\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if jf.fixBasis != "" {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, name := range []string{"algo", "init", "init-basis", "tol", "max-iter", "stall-tol", "form", "rho", "alpha-basis"} {
			if given[name] {
				return badInput("--fix-basis solves the coef exactly for the basis given (NNLS per sample, one pass): --%s does not apply", name)
			}
		}
		if err := jf.setTransform(jf.fixBasis, "--fix-basis"); err != nil {
			return err
		}
	}
	return runFactorize(&jf, of, stdout, stderr)
}

// runFactorize runs the job of parsed flags (factorize's, or transform's) and writes its
// result.
func runFactorize(jf *jobFlags, of outputFlags, stdout, stderr io.Writer) error {
	out, quiet := of.out, of.quiet
	jf.errOut = stderr
	if err := of.names.check(jf); err != nil {
		return err
	}
	if jf.detach {
		if *out != "" {
			return badInput("--detach writes into --out-shared on the nodes; --out is not used")
		}
		if *of.plots || *of.imageShape != "" {
			return badInput("--detach writes coef.npy, basis.npy and report.json into --out-shared and draws nothing: " +
				"leave out --plots and --image-shape, and draw the result afterwards with didnmf plot --result DIR (an IDX input's image shape is in its report)")
		}
		j, err := jf.open()
		if err != nil {
			return err
		}
		return submitDetached(jf, j, stdout)
	}
	if *out == "" {
		return badInput("--out is required")
	}
	var shape [2]int
	if *of.imageShape != "" {
		s, err := figures.ParseImageShape(*of.imageShape)
		if err != nil {
			return badInput("--image-shape: %v", err)
		}
		shape = s
	}
	j, err := jf.open()
	if err != nil {
		return err
	}
	defer j.Close()
	if shape[0] > 0 && j.src != nil {
		if err := figures.CheckImageShape(shape, j.m); err != nil {
			return badInput("--image-shape %s: %v (%s has %d features)", *of.imageShape, err, j.src.Name(), j.m)
		}
	}
	// The names files are read before the run, and checked against the input when its shape
	// is known here (else after the run, by fit).
	basis := ""
	if jf.basisRows > 0 {
		basis = jf.initBasis // a transform's
	}
	warnNames := func(msg string) {
		if !*quiet {
			fmt.Fprintf(stderr, "didnmf: warning: %s\n", msg)
		}
	}
	names, err := namesFor(of.names, jf.inputs, basis, jf.rank, cmp.Or(j.m, jf.basisRows), j.n, warnNames)
	if err != nil {
		return err
	}
	dir, cleanup, release, err := prepareOutDir(*out, of.outHeld)
	if err != nil {
		return err
	}
	defer release()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var prog *progressPrinter
	if !*quiet {
		prog = newProgressPrinter(stderr, j.cfg.Stop)
		jf.warn = func(w string) { prog.warn(w) }
		where := ""
		if jf.nodes > 0 {
			where = fmt.Sprintf(" over %d actor systems", jf.nodes)
		}
		if jf.cluster != "" {
			where = fmt.Sprintf(" on the cluster at %s (%s ingest)", jf.cluster, jf.ingest)
		}
		algo := string(j.cfg.Algo)
		if a := j.cfg.Options.Accel; a.On() {
			algo += fmt.Sprintf(" (--accel %s)", a)
		}
		if j.src != nil {
			fmt.Fprintf(stderr, "%s: %d samples x %d features, rank %d, %s on %d shard(s)%s\n",
				j.src.Name(), j.n, j.m, j.cfg.K, algo, j.shards, where)
		} else {
			fmt.Fprintf(stderr, "%s: rank %d, %s on %d shard(s)%s\n", j.Name(), j.cfg.K, algo, j.shards, where)
		}
	}
	runner, err := didnmf.NewRunner(j.Target)
	if err != nil {
		cleanup()
		if jf.cluster != "" {
			return clusterErr(jf.cluster, err)
		}
		return err
	}
	defer runner.Close()
	opts := didnmf.Options{Warn: jf.warn}
	if prog != nil {
		opts.Progress = prog.update
	}
	res, runErr := runner.Run(ctx, j.Job, opts)
	if prog != nil {
		prog.finish()
	}
	interrupted := runErr != nil && errors.Is(runErr, context.Canceled)
	if runErr != nil && !(interrupted && res != nil) {
		cleanup()
		if interrupted && j.Target.OnActors() {
			fmt.Fprintln(stderr, "didnmf: interrupted; the job was cancelled on its actors and nothing was written")
			return errInterrupted
		}
		if interrupted {
			fmt.Fprintln(stderr, "didnmf: interrupted before the first iteration finished; nothing written")
			return errInterrupted
		}
		return runErr
	}
	rep := res.Report()
	switch {
	case shape[0] > 0:
		if err := figures.CheckImageShape(shape, res.M); err != nil {
			cleanup()
			return badInput("--image-shape %s: %v (the input has %d features)", *of.imageShape, err, res.M)
		}
		rep.ImageShape = []int{shape[0], shape[1]}
	case j.src != nil:
		if h, w, ok := matio.ImageShape(j.src); ok {
			rep.ImageShape = []int{h, w}
		}
	default:
		if h, w, ok := matio.PeekImageShape(jf.inputs); ok && h*w == res.M {
			rep.ImageShape = []int{h, w}
		}
	}
	// A names file that does not fit a shape learnt only now does not cost the run: the
	// outputs are written with the rows numbered, and the error said.
	namesErr := names.fit(res.M, res.N)
	saveNames := names.Names
	if namesErr != nil {
		saveNames = didnmf.Names{}
	}
	if err := res.SaveWith(dir, didnmf.SaveOptions{Report: rep, Names: saveNames, CoefTSV: of.names.coefTSV}); err != nil {
		cleanup()
		return err
	}
	var pictures []string
	if !*of.plots {
		// Pictures of an earlier result in this directory would pass for this one's.
		for _, name := range figures.Pictures {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
	if *of.plots {
		warn := func(string) {}
		if !*quiet {
			warn = func(msg string) { fmt.Fprintf(stderr, "didnmf: warning: plots: %s\n", msg) }
		}
		// The factors are written: a picture that cannot be drawn is news, not a failure.
		if pictures, err = figures.WriteResult(dir, dir, figures.Options{Warn: warn}); err != nil {
			fmt.Fprintf(stderr, "didnmf: warning: plots: %v\n", err)
		}
	}
	if !*quiet {
		coef := filepath.Join(dir, "coef.npy")
		if rep.CoefShared != "" {
			coef = rep.CoefShared + " (written by the shards)"
		}
		took := "initialisation " + secondsText(rep.InitSeconds)
		if rep.ReadSeconds > 0 {
			took += ", reading " + secondsText(rep.ReadSeconds)
		}
		tsv := "basis.tsv, top_features.tsv"
		if of.names.coefTSV {
			tsv += ", coef.tsv"
		}
		fmt.Fprintf(stderr, "%s: %s\n%d iterations in %s (%s it/s; %s): rel_err2 %.4g, RMSE %.4g\nwrote %s, %s, %s (and %s)\n",
			rep.Algo, rep.Stop, rep.Iterations, secondsText(rep.IterateSeconds), rateText(rate(rep.Iterations, rep.IterateSeconds)), took,
			rep.RelErr2, rep.RMSE, filepath.Join(dir, "basis.npy"), coef, filepath.Join(dir, "report.json"), tsv)
		if len(pictures) > 0 {
			fmt.Fprintf(stderr, "drew %s\n", strings.Join(pictures, ", "))
		}
	}
	if namesErr != nil {
		return badInput("%w; the outputs in %s are written with their rows numbered instead", namesErr, dir)
	}
	if interrupted {
		return errInterrupted
	}
	return nil
}

// checkNotDanglingLink refuses an --out dir that is a symbolic link to nothing, naming it
// (MkdirAll would say "file exists"); nil for anything else.
func checkNotDanglingLink(dir string) error {
	target, err := os.Readlink(dir)
	if err != nil {
		return nil // not a link
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return badInput("--out %s is a symbolic link to %s, which does not exist: make that directory, or give another --out", dir, target)
	}
	return nil
}

// prepareOutDir makes sure dir exists and is writable before the run, and takes its lock
// (lockOutDir: factorize, sweep and consensus each hold their --out until they end, so that
// two commands never write into one directory at once) unless held says this process holds
// it already (consensus's refit). cleanup removes dir again if this call created it (when
// still empty) and lets the lock go; release lets the lock go and keeps dir. Either may be
// called more than once, and after the other.
func prepareOutDir(dir string, held bool) (path string, cleanup, release func(), err error) {
	created := false
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return "", nil, nil, badInput("--out %s exists and is not a directory", dir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		if err := checkNotDanglingLink(dir); err != nil {
			return "", nil, nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, nil, badInput("--out: %v", err)
		}
		created = true
	} else {
		return "", nil, nil, badInput("--out: %v", err)
	}
	removeCreated := func() {
		if created {
			os.Remove(dir) // only removes it if still empty
		}
	}
	unlock := func() {}
	if !held {
		u, busy, err := lockOutDir(dir)
		switch {
		case err != nil:
			removeCreated()
			return "", nil, nil, badInput("--out %s: %v", dir, err)
		case busy:
			removeCreated()
			return "", nil, nil, badInput("--out %s: another didnmf command is writing into it (factorize, sweep and consensus hold their --out until they end): "+
				"wait for it to end, or use another --out", dir)
		}
		unlock = u
	}
	var once sync.Once
	release = func() { once.Do(unlock) }
	probe, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		removeCreated()
		release()
		return "", nil, nil, badInput("--out %s is not writable: %v", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	cleanup = func() {
		removeCreated()
		release()
	}
	return dir, cleanup, release, nil
}
