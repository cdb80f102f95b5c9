package figures

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/didnmf/didnmf/matio"
)

// Files of a result directory.
const (
	ReportFile = "report.json"
	BasisFile  = "basis.npy"
	NamesFile  = "features.txt"
	// BasisTSVFile is the basis as text, whose first column names the features.
	BasisTSVFile = "basis.tsv"
)

// Pictures are the files WriteResult may write into a directory, which describe the result
// that was there when they were drawn.
var Pictures = []string{"convergence.png", "convergence.svg", "basis.png", "basis.svg"}

// Options tune WriteResult. The zero value is the default.
type Options struct {
	// ImageShape, {H, W}, says the features are the pixels of H x W images, row-major
	// (H*W must be the number of features); zero: the report's image_shape, if any.
	ImageShape [2]int
	// Top is the number of features in each bar chart of a basis that is not images
	// (0: 10; at most 50).
	Top int
	// Warn, if set, is told about what was left out, in one line without a newline: a
	// basis.tsv or features.txt that does not fit, a history too short to plot.
	Warn func(msg string)
}

// WriteResult draws the pictures of the result directory resultDir, written by
// `node factorize --out DIR`, into outDir ("" means resultDir; made if missing), and returns
// the paths of the files written, in this order:
//
//   - convergence.png and convergence.svg: Convergence of the report's history, with its
//     recoveries marked; left out (with a warning) when the history is empty.
//   - basis.png and basis.svg: BasisGrid of basis.npy when the features are images
//     (opts.ImageShape or the report's image_shape), else TopFeatures, labelled with the
//     names of basis.tsv's rows (ReadBasisTSVNames) when it names them, else with those in
//     features.txt when resultDir has one of exactly m lines.
//
// It reads report.json (see ReadReport) and basis.npy, whose shape must be the report's
// m x k; never coef.npy. Errors about the input (a missing or malformed file, a shape that
// does not fit) name the file and wrap ErrInput; other errors are failures to write. Each
// file is written whole or not at all (see Figure.Save), and the same input gives the same
// bytes.
func WriteResult(resultDir, outDir string, opts Options) (written []string, err error) {
	if outDir == "" {
		outDir = resultDir
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(string) {}
	}
	rep, err := ReadReport(filepath.Join(resultDir, ReportFile))
	if err != nil {
		return nil, err
	}
	shape := rep.ImageShape
	if opts.ImageShape != [2]int{} {
		if err := CheckImageShape(opts.ImageShape, rep.M); err != nil {
			return nil, err
		}
		shape = opts.ImageShape
	}
	basis, err := readBasis(filepath.Join(resultDir, BasisFile), rep)
	if err != nil {
		return nil, err
	}
	var figs []named
	if len(rep.History) == 0 {
		warn(fmt.Sprintf("%s has no history: no convergence figure", filepath.Join(resultDir, ReportFile)))
	} else {
		f, err := Convergence(describe(rep, "convergence"), rep.History, rep.Recoveries)
		if err != nil {
			return nil, err
		}
		figs = append(figs, named{"convergence", f})
	}
	var f *Figure
	if shape != [2]int{} {
		f, err = BasisGrid(describe(rep, "basis"), basis, rep.M, rep.K, shape[0], shape[1])
	} else {
		names, nerr := ReadBasisTSVNames(filepath.Join(resultDir, BasisTSVFile), rep.M, rep.K)
		if nerr != nil {
			if !errors.Is(nerr, ErrInput) {
				return nil, nerr
			}
			warn(nerr.Error() + ": its names are not used")
		}
		if names == nil {
			names, nerr = ReadFeatureNames(filepath.Join(resultDir, NamesFile), rep.M)
			if nerr != nil {
				if !errors.Is(nerr, ErrInput) {
					return nil, nerr
				}
				warn(nerr.Error() + ": features are numbered instead")
			}
		}
		f, err = TopFeatures(describe(rep, "basis"), basis, rep.M, rep.K, opts.Top, names)
	}
	if err != nil {
		return nil, err
	}
	figs = append(figs, named{"basis", f})
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", outDir, err)
	}
	for _, nf := range figs {
		paths, err := nf.fig.Save(outDir, nf.name)
		written = append(written, paths...)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

type named struct {
	name string
	fig  *Figure
}

// describe is a figure title: what, the algorithm and the sizes.
func describe(r *Report, what string) string {
	var parts []string
	if r.Algo != "" {
		parts = append(parts, truncate(r.Algo, 20))
	}
	parts = append(parts, fmt.Sprintf("K=%d", r.K))
	if r.N > 0 {
		parts = append(parts, fmt.Sprintf("%d samples x %d features", r.N, r.M))
	} else {
		parts = append(parts, fmt.Sprintf("%d features", r.M))
	}
	return what + " — " + strings.Join(parts, ", ")
}

// readBasis reads basis.npy after checking, from its header, that it is the report's m x k.
func readBasis(path string, rep *Report) ([]float64, error) {
	if matio.IsSynthetic(path) { // a directory of that name, not a spec
		path = "." + string(filepath.Separator) + path
	}
	src, err := matio.Open(path)
	if err != nil {
		return nil, wrapInput(err)
	}
	rows, cols := src.Samples(), src.Features()
	src.Close()
	if rows != rep.M || cols != rep.K {
		return nil, inputErrorf("%s: shape (%d, %d), but the report says m=%d features x k=%d components", path, rows, cols, rep.M, rep.K)
	}
	rows, cols, data, err := matio.ReadNPYMatrix(path)
	if err != nil {
		return nil, wrapInput(err)
	}
	if rows != rep.M || cols != rep.K || len(data) != rows*cols {
		return nil, inputErrorf("%s: shape changed while read", path)
	}
	return data, nil
}
