package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
	"github.com/didnmf/didnmf/server"
)

// outputFlags are factorize's flags about what it writes and prints.
type outputFlags struct {
	out        *string
	quiet      *bool
	plots      *bool
	imageShape *string
}

// registerFactorize adds factorize's flags to fs (demo parses its arguments with them too).
func registerFactorize(fs *flag.FlagSet, jf *jobFlags) outputFlags {
	jf.register(fs)
	jf.registerCluster(fs)
	return outputFlags{
		out:        fs.String("out", "", "output `DIR` for basis.npy (features x K), coef.npy (samples x K) and report.json"),
		quiet:      fs.Bool("quiet", false, "print nothing but errors"),
		plots:      fs.Bool("plots", false, "also draw the result into --out as PNG and SVG (see node plot): convergence, and the basis as images or as each component's top features"),
		imageShape: fs.String("image-shape", "", "the features are the pixels of `HxW` images (IDX image files say so themselves): recorded in report.json, and --plots draws the basis as images"),
	}
}

func cmdFactorize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(fs, &jf)
	out, quiet := of.out, of.quiet
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: node factorize --input PATH --rank K --out DIR [flags]\n\n"+
			"factorizes a nonnegative matrix (samples as rows) into coef (samples x K) and basis (features x K),\n"+
			"and writes basis.npy, coef.npy and report.json into --out: in this process, on --nodes N actor\n"+
			"systems in it, or on a running cluster (--cluster IP:PORT, see node serve)\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	jf.errOut = stderr
	if jf.detach {
		if *out != "" {
			return badInput("--detach writes into --out-shared on the nodes; --out is not used")
		}
		j, err := jf.open()
		if err != nil {
			return err
		}
		return submitDetached(&jf, j, stdout)
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
	readStart := time.Now() // opening parses MatrixMarket and IDX files: reading starts here
	j, err := jf.open()
	if err != nil {
		return err
	}
	if shape[0] > 0 && j.src != nil {
		if err := figures.CheckImageShape(shape, j.m); err != nil {
			return badInput("--image-shape %s: %v (%s has %d features)", *of.imageShape, err, j.src.Name(), j.m)
		}
	}
	if j.src != nil {
		defer j.src.Close()
	}
	if err := checkLocalMemory(&jf, j); err != nil {
		return err
	}
	dir, cleanup, err := prepareOutDir(*out)
	if err != nil {
		return err
	}
	var blocks []kernels.Block
	readSec := 0.0
	if jf.nodes == 0 && jf.cluster == "" {
		if blocks, err = j.readBlocks(); err != nil {
			cleanup()
			return err
		}
		readSec = time.Since(readStart).Seconds()
	}

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
		if j.src != nil {
			fmt.Fprintf(stderr, "%s: %d samples x %d features, rank %d, %s on %d shard(s)%s\n",
				j.src.Name(), j.n, j.m, j.cfg.K, j.cfg.Algo, j.shards, where)
		} else {
			fmt.Fprintf(stderr, "%s: rank %d, %s on %d shard(s)%s\n", strings.Join(jf.inputs, " + "), j.cfg.K, j.cfg.Algo, j.shards, where)
		}
	}
	onProgress := func(p kernels.Progress) {
		if prog != nil {
			prog.update(p)
		}
	}
	var res *kernels.Result
	var ares *actors.Result
	var runErr error
	if jf.nodes > 0 || jf.cluster != "" {
		run := runOnNodes
		if jf.cluster != "" {
			run = runOnCluster
		}
		if ares, runErr = run(ctx, &jf, j, onProgress); ares != nil {
			res = &ares.Result
		}
	} else {
		res, runErr = kernels.Run(ctx, blocks, j.cfg, onProgress)
	}
	if prog != nil {
		prog.finish()
	}
	interrupted := runErr != nil && errors.Is(runErr, context.Canceled)
	if runErr != nil && !(interrupted && res != nil) {
		cleanup()
		if interrupted && (jf.nodes > 0 || jf.cluster != "") {
			fmt.Fprintln(stderr, "node: interrupted; the job was cancelled on its actors and nothing was written")
			return errInterrupted
		}
		if interrupted {
			fmt.Fprintln(stderr, "node: interrupted before the first iteration finished; nothing written")
			return errInterrupted
		}
		if errors.Is(runErr, kernels.ErrZeroMatrix) {
			return badInput("%s: %v", strings.Join(jf.inputs, " + "), runErr)
		}
		return runErr
	}
	threads := j.cfg.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	rep := report.New(res, j.cfg.Stop)
	rep.Algo, rep.Input, rep.Threads, rep.Init, rep.Seed, rep.ReadSeconds = string(j.cfg.Algo), jf.inputs, threads, string(j.cfg.Init.Method), j.cfg.Seed, readSec
	rep.Kernel, rep.Storage = kernels.ActiveKernelPath().String(), jf.storage
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
	if blocks != nil {
		rep.Storage, rep.XBytes = storedAs(blocks)
		blocks = nil // X is not needed for the outputs: let the collector have it back
	}
	if ares != nil {
		rep.Nodes = jf.nodes
		rep.ShardNodes = ares.ShardNodes
		rep.CheckpointEvery, rep.Checkpoints, rep.Recoveries = jf.checkpointFlag, ares.Checkpoints, ares.Recoveries
		if jf.cluster != "" {
			rep.Cluster, rep.Ingest = jf.cluster, jf.ingest
		}
		if jf.outShared != "" {
			rep.CoefShared = filepath.Join(jf.outShared, "coef.npy")
		}
		rep.MessagesPerIt, rep.BytesPerIt, rep.ReductionsPerIt = &ares.MessagesPerIteration, &ares.BytesPerIteration, &ares.ReductionsPerIteration
	}
	if err := writeOutputs(dir, res, rep); err != nil {
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
			warn = func(msg string) { fmt.Fprintf(stderr, "node: warning: plots: %s\n", msg) }
		}
		// The factors are written: a picture that cannot be drawn is news, not a failure.
		if pictures, err = figures.WriteResult(dir, dir, figures.Options{Warn: warn}); err != nil {
			fmt.Fprintf(stderr, "node: warning: plots: %v\n", err)
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
		fmt.Fprintf(stderr, "%s: %s\n%d iterations in %s (%s it/s; %s): rel_err2 %.4g, RMSE %.4g\nwrote %s, %s, %s\n",
			rep.Algo, rep.Stop, rep.Iterations, secondsText(rep.IterateSeconds), rateText(rate(rep.Iterations, rep.IterateSeconds)), took,
			rep.RelErr2, rep.RMSE, filepath.Join(dir, "basis.npy"), coef, filepath.Join(dir, "report.json"))
		if len(pictures) > 0 {
			fmt.Fprintf(stderr, "drew %s\n", strings.Join(pictures, ", "))
		}
	}
	if interrupted {
		return errInterrupted
	}
	return nil
}

// prepareOutDir makes sure dir exists and is writable before the run; cleanup removes it again
// if this call created it.
func prepareOutDir(dir string) (string, func(), error) {
	created := false
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return "", nil, badInput("--out %s exists and is not a directory", dir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, badInput("--out: %v", err)
		}
		created = true
	} else {
		return "", nil, badInput("--out: %v", err)
	}
	probe, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		if created {
			os.Remove(dir)
		}
		return "", nil, badInput("--out %s is not writable: %v", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	cleanup := func() {
		if created {
			os.Remove(dir) // only removes it if still empty
		}
	}
	return dir, cleanup, nil
}

// writeOutputs writes basis.npy, coef.npy and report.json into dir: each to a temporary file
// first, then all renamed into place, so a failure leaves no partial file behind. coef.npy is
// streamed to its file (at N = 1e8 it is 2.4 GB, which a buffer in memory would double).
func writeOutputs(dir string, res *kernels.Result, rep *report.Report) error {
	var basis, js bytes.Buffer
	if err := matio.WriteNPY(&basis, res.M, res.K, kernels.Transpose(res.B, res.M, res.K)); err != nil {
		return err
	}
	if err := rep.Write(&js); err != nil {
		return err
	}
	bytesOf := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{{"basis.npy", bytesOf(basis.Bytes())}, {"coef.npy", func(w io.Writer) error {
		// C is K x N column-major, which is the N x K row-major coef matrix.
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := matio.WriteNPY(bw, res.N, res.K, res.C); err != nil {
			return err
		}
		return bw.Flush()
	}}, {"report.json", bytesOf(js.Bytes())}}
	if res.C == nil { // with --out-shared the shards wrote it and the client has none
		files = append(files[:1], files[2])
	}
	var temps []string
	removeTemps := func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}
	for _, f := range files {
		tmp, err := os.CreateTemp(dir, "."+f.name+".tmp-*")
		if err != nil {
			removeTemps()
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, f.name), err)
		}
		temps = append(temps, tmp.Name())
		werr := f.write(tmp)
		merr := tmp.Chmod(0o644)
		serr := tmp.Sync()
		cerr := tmp.Close()
		if err := errors.Join(werr, merr, serr, cerr); err != nil {
			removeTemps()
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, f.name), err)
		}
	}
	for i, f := range files {
		if err := os.Rename(temps[i], filepath.Join(dir, f.name)); err != nil {
			removeTemps()
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, f.name), err)
		}
	}
	if res.C == nil {
		// The shards wrote C elsewhere (--out-shared): a coef.npy left here by an earlier run
		// would pass for this run's.
		if err := os.Remove(filepath.Join(dir, "coef.npy")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// checkLocalMemory refuses, before any work, a run in this process (the driver or --nodes)
// whose data and factors will not fit in the memory available.
func checkLocalMemory(jf *jobFlags, j *job) error {
	if jf.cluster != "" || j.src == nil {
		return nil
	}
	density := 0.0
	if stored, ok := matio.StoredEntries(j.src); ok {
		density = float64(stored) / (float64(j.m) * float64(j.n))
	}
	need := actors.JobFootprint(int64(j.m), int64(j.n), int64(j.cfg.K), j.shards, density, j.spec.Layout)
	if avail := server.AvailableMemory(); need > avail {
		return badInput("%s (%d samples x %d features, rank %d) needs about %s of memory for its data and factors; this machine has %s available: use a cluster (--cluster), fewer samples, or --layout sparse for sparse data",
			j.src.Name(), j.n, j.m, j.cfg.K, cluster.FormatBytes(need), cluster.FormatBytes(avail))
	}
	return nil
}

// storedAs describes how blocks store X: float32, float64 or mixed (auto storage narrows each
// block on its own), and the bytes their values and indices take.
func storedAs(blocks []kernels.Block) (string, int64) {
	narrow, bytes := 0, int64(0)
	for _, b := range blocks {
		if kernels.IsNarrow(b) {
			narrow++
		}
		bytes += int64(kernels.ValueBytes(b)) * int64(b.NNZ())
		if _, sparse := b.(*kernels.CSC); sparse {
			_, cols := b.Dims()
			bytes += 4*int64(b.NNZ()) + 8*int64(cols+1)
		}
	}
	switch narrow {
	case 0:
		return "float64", bytes
	case len(blocks):
		return "float32", bytes
	}
	return "mixed", bytes
}
