package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/didnmf/didnmf/figures"
)

// cmdPlot draws the pictures of a result directory (figures.WriteResult): convergence.png/.svg
// and basis.png/.svg, into --out, and prints the paths written, one a line.
func cmdPlot(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	result := fs.String("result", "", "result `DIR` written by didnmf factorize --out (report.json and basis.npy; coef.npy is not read)")
	shape := fs.String("image-shape", "", "the features are the pixels of `HxW` images, row-major (e.g. 28x28; H*W must be the number of features); default: the report's image_shape, if any")
	out := fs.String("out", "", "output `DIR`, made if missing (default: the result directory)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf plot --result DIR [--image-shape HxW] [--out DIR]\n\n"+
			"draws a factorization result as PNG and SVG files: convergence.png/.svg, the error against the\n"+
			"iteration and against time (log scale), rollbacks after failures marked; basis.png/.svg, the basis\n"+
			"vectors as grayscale images when the features are HxW pixels, else the top 10 features of each\n"+
			"component as bar charts, named as DIR/basis.tsv names its rows (else by DIR/features.txt, one name\n"+
			"a line, if there is one; long names cut with an ellipsis); prints the paths written\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *result == "" {
		return badInput("--result is required: a directory written by didnmf factorize --out")
	}
	if st, err := os.Stat(*result); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return badInput("--result %s: no such directory", *result)
		}
		return fmt.Errorf("--result %s: %w", *result, err)
	} else if !st.IsDir() {
		return badInput("--result %s: not a directory", *result)
	}
	rep, err := figures.ReadReport(filepath.Join(*result, figures.ReportFile))
	_, jerr := os.Stat(filepath.Join(*result, "runs", "journal.json")) // a sweep's runs kept
	if _, serr := os.Stat(filepath.Join(*result, "sweep.json")); err != nil && errors.Is(err, os.ErrNotExist) && serr == nil {
		fig := fmt.Sprintf("its figure is %s and sweep.svg, which didnmf sweep draws", filepath.Join(*result, "sweep.png"))
		if _, perr := os.Stat(filepath.Join(*result, "sweep.png")); perr != nil && jerr == nil {
			fig = fmt.Sprintf("its figure, sweep.png, is not there: the same didnmf sweep command with --resume draws it again from the "+
				"runs kept in %s, without running them", filepath.Join(*result, "runs"))
		} else if perr != nil {
			fig = "its figure, sweep.png, is not there, and the runs that would draw it again were removed (only the sweep draws it)"
		}
		return badInput("--result %s is a sweep's --out (sweep.json, no %s): %s; "+
			"plot draws a factorize or consensus --out (didnmf consensus --sweep %s --k K --input ... --out DIR for a rank's programs)",
			*result, figures.ReportFile, fig, *result)
	}
	if err != nil && errors.Is(err, os.ErrNotExist) && jerr == nil {
		return badInput("--result %s is a sweep's --out without its sweep.json: the sweep is still running, or was stopped (go on with didnmf sweep --resume); "+
			"its figure, sweep.png, comes at its end", *result)
	}
	if err != nil {
		return err
	}
	opts := figures.Options{Warn: func(msg string) { fmt.Fprintf(stderr, "didnmf: warning: %s\n", msg) }}
	if *shape != "" {
		s, err := figures.ParseImageShape(*shape)
		if err != nil {
			return badInput("--image-shape %q: want HxW with integers H, W >= 1, e.g. 28x28", *shape)
		}
		if int64(s[0])*int64(s[1]) != int64(rep.M) {
			return badInput("--image-shape %s: %d pixels, but the basis of %s has %d features", *shape,
				int64(s[0])*int64(s[1]), *result, rep.M)
		}
		opts.ImageShape = s
	}
	if err := checkNotDanglingLink(*out); err != nil {
		return err
	}
	written, err := figures.WriteResult(*result, *out, opts)
	for _, p := range written {
		fmt.Fprintln(stdout, p)
	}
	return err
}
