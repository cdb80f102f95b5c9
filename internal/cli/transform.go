package cli

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

// notForTransform are the flags of factorize that a transform does not take: the algorithm,
// the rank (the basis's), the initialisation, the stop rule, checkpoints and the basis
// penalty do not apply to an exact one-pass solve.
var notForTransform = map[string]bool{"rank": true, "algo": true, "tol": true, "max-iter": true, "stall-tol": true,
	"init": true, "init-basis": true, "init-coef": true, "form": true, "rho": true, "alpha-basis": true, "checkpoint-every": true}

func cmdTransform(args []string, stdout, stderr io.Writer) error {
	all := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(all, &jf)
	fs := flag.NewFlagSet("transform", flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		if !notForTransform[f.Name] {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	basis := fs.String("basis", "", "the basis `FILE` (.npy, features x K), e.g. a factorization's basis.npy")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf transform --basis basis.npy --input PATH --out DIR [flags]\n\n"+
			"projects samples onto a fixed basis: the coef (samples x K) of every sample of --input for the basis\n"+
			"(features x K), exactly (nonnegative least squares per sample, block principal pivoting, one pass;\n"+
			"with --alpha-coef, scikit-learn's alpha_W penalty), as scikit-learn's NMF.transform approximates it.\n"+
			"Writes coef.npy, report.json (with rel_err2, the reconstruction error), a copy of basis.npy, and\n"+
			"basis.tsv and top_features.tsv as factorize does, into --out: in this process, on --nodes N actor\n"+
			"systems, or on a running cluster (--cluster IP:PORT).\n"+
			"The same as factorize --fix-basis.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *basis == "" {
		return badInput("--basis is required")
	}
	if err := jf.setTransform(*basis, "--basis"); err != nil {
		return err
	}
	return runFactorize(&jf, of, stdout, stderr)
}

// setTransform makes the job a transform for the basis in path (given as flagName): the rank
// is the basis's number of columns, read here; the shards read the basis themselves.
func (f *jobFlags) setTransform(path, flagName string) error {
	rows, k, _, err := matio.ReadNPYMatrix(path)
	if err != nil {
		return badInput("%s: %w", flagName, err)
	}
	if f.rankSet && f.rank != k {
		return badInput("--rank %d: the basis %s has %d columns (features x K = %d x %d)", f.rank, path, k, rows, k)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // the nodes of a cluster resolve only absolute paths
	}
	f.algo, f.init, f.initBasis, f.initCoef = string(kernels.Transform), string(kernels.InitCustom), path, ""
	f.rank, f.rankSet, f.basisRows, f.basisFlag = k, true, rows, flagName
	f.tol, f.maxIter, f.stallTol, f.stallSet = 0, 1, 0, true
	return nil
}
