package didnmf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
)

// TopFeatures is the number of features of each component that top_features.tsv lists.
const TopFeatures = 20

// Names are the names of a result's features (the rows of basis.tsv, the feature column of
// top_features.tsv) and samples (the rows of coef.tsv). A nil list numbers its rows from 0.
// A name holds no tab, newline or carriage return. matio.Names converts to it.
type Names struct {
	Features, Samples []string
}

// check returns an error when the names do not fit a result of m features and n samples or a
// name would break a TSV row.
func (nm Names) check(m, n int) error {
	for _, l := range []struct {
		what  string
		names []string
		want  int
	}{{"feature", nm.Features, m}, {"sample", nm.Samples, n}} {
		if l.names == nil {
			continue
		}
		if len(l.names) != l.want {
			return inputErr(fmt.Errorf("%d %s names for %d %ss", len(l.names), l.what, l.want, l.what))
		}
		for i, s := range l.names {
			if strings.ContainsAny(s, "\t\n\r") {
				return inputErr(fmt.Errorf("%s name %d (%q) holds a tab or a line break, which a TSV row cannot", l.what, i, s))
			}
			if r, bad := matio.ControlInName(s); bad {
				return inputErr(fmt.Errorf("%s name %d (%q) holds the control character %U (names go to .tsv files and the terminal)", l.what, i, s, r))
			}
		}
	}
	return nil
}

// SaveOptions say what Result.SaveWith writes. The zero value writes what Save(dir, nil)
// does.
type SaveOptions struct {
	// Report is report.json's content (nil: r.Report()).
	Report *report.Report
	// Names label the rows of the .tsv files (see Names).
	Names Names
	// CoefTSV also writes coef.tsv. It needs the coef in this process: a result whose shards
	// wrote the coef themselves (--out-shared) has none, and SaveWith refuses it.
	CoefTSV bool
}

// Save writes basis.npy (features x K), coef.npy (samples x K), report.json (rep; nil:
// r.Report()), basis.tsv and top_features.tsv into dir, a directory that exists: see
// SaveWith.
func (r *Result) Save(dir string, rep *report.Report) error {
	return r.SaveWith(dir, SaveOptions{Report: rep})
}

// SaveWith writes the result into dir, a directory that exists: each file to a temporary file
// first, then all renamed into place, so a failure leaves no partial file behind. coef.npy and
// coef.tsv are streamed to their files (at N = 1e8 coef.npy is 2.4 GB, which a buffer in
// memory would double). The files:
//
//   - basis.npy, features x K, and coef.npy, samples x K (float64);
//   - report.json (o.Report; nil: r.Report());
//   - basis.tsv: a header "feature", "component_1", ..., "component_K", then one row per
//     feature: its name (o.Names.Features; its 0-based index when there are none) and its K
//     weights;
//   - top_features.tsv: a header "component", "rank", "feature", "weight", then for each
//     component k = 1..K its TopFeatures largest features by weight (ties: the lower index
//     first), rank 1 the largest;
//   - coef.tsv, with o.CoefTSV only: a header "sample", "component_1", ..., then one row per
//     sample, named as basis.tsv's features are.
//
// The .tsv files are tab-separated, "\n"-ended, and print every value as
// strconv.FormatFloat(v, 'g', -1, 64), which parses back to the .npy's float64 exactly.
// A coef.npy or coef.tsv that dir holds and this call does not write (the shards wrote the
// coef elsewhere; no o.CoefTSV) is removed, as it would pass for this result's. report.json
// is put in place last: when it is there, the rest is. Names that
// do not fit the result are a *usererr.Error (ErrUser), and nothing is written.
func (r *Result) SaveWith(dir string, o SaveOptions) error {
	res := &r.Result
	rep := o.Report
	if rep == nil {
		rep = r.Report()
	}
	if err := o.Names.check(res.M, res.N); err != nil {
		return err
	}
	if o.CoefTSV && res.C == nil {
		return inputErr(errors.New("coef.tsv: the shards wrote the coef on the nodes (--out-shared), and this process does not hold it"))
	}
	var basis, js, top bytes.Buffer
	if err := matio.WriteNPY(&basis, res.M, res.K, kernels.Transpose(res.B, res.M, res.K)); err != nil {
		return err
	}
	if err := rep.Write(&js); err != nil {
		return err
	}
	writeTopFeaturesTSV(&top, res.B, res.M, res.K, o.Names.Features)
	bytesOf := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	buffered := func(write func(*bufio.Writer) error) func(io.Writer) error {
		return func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<20)
			if err := write(bw); err != nil {
				return err
			}
			return bw.Flush()
		}
	}
	type file struct {
		name  string
		write func(io.Writer) error
	}
	files := []file{{"basis.npy", bytesOf(basis.Bytes())},
		{"basis.tsv", buffered(func(w *bufio.Writer) error { return writeBasisTSV(w, res.B, res.M, res.K, o.Names.Features) })},
		{"top_features.tsv", bytesOf(top.Bytes())}}
	var stale []string
	if res.C != nil {
		files = append(files, file{"coef.npy", func(w io.Writer) error {
			// C is K x N column-major, which is the N x K row-major coef matrix. WriteNPY
			// writes it fastest to the file itself (see WriteNPY), and in chunks anyway.
			if t, ok := w.(*atomicfile.File); ok {
				w = t.OS()
			}
			return matio.WriteNPY(w, res.N, res.K, res.C)
		}})
	} else {
		// The shards wrote C elsewhere (--out-shared): a coef.npy left here by an earlier run
		// would pass for this run's.
		stale = append(stale, "coef.npy")
	}
	if o.CoefTSV {
		files = append(files, file{"coef.tsv", buffered(func(w *bufio.Writer) error {
			return writeCoefTSV(w, res.C, res.N, res.K, o.Names.Samples)
		})})
	} else {
		stale = append(stale, "coef.tsv")
	}
	// report.json is renamed into place last: once it is there, so is the rest.
	files = append(files, file{"report.json", bytesOf(js.Bytes())})
	var temps []*atomicfile.File
	defer func() {
		for _, t := range temps {
			t.Close() // removes a temporary file not put in place
		}
	}()
	for _, f := range files {
		t, err := atomicfile.Create(filepath.Join(dir, f.name), 0o644)
		if err != nil {
			return err
		}
		temps = append(temps, t)
		if err := f.write(t); err != nil {
			return fmt.Errorf("writing %s: %w", t.Path(), err)
		}
		if err := t.Sync(); err != nil {
			return err
		}
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, t := range temps {
		if err := t.Rename(); err != nil {
			return err
		}
	}
	return atomicfile.SyncDir(dir)
}

// appendRowName appends row i's name: names[i], or i when names is nil.
func appendRowName(b []byte, names []string, i int) []byte {
	if names == nil {
		return strconv.AppendInt(b, int64(i), 10)
	}
	return append(b, names[i]...)
}

// appendComponentHeader appends the header of a rows x K table: first, then component_1 ...
// component_k, and the newline.
func appendComponentHeader(b []byte, first string, k int) []byte {
	b = append(b, first...)
	for p := 1; p <= k; p++ {
		b = append(b, "\tcomponent_"...)
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return append(b, '\n')
}

// writeBasisTSV writes basis.tsv for the basis b (m x k, column-major).
func writeBasisTSV(w *bufio.Writer, b []float64, m, k int, names []string) error {
	if _, err := w.Write(appendComponentHeader(nil, "feature", k)); err != nil {
		return err
	}
	var line []byte
	for i := 0; i < m; i++ {
		line = appendRowName(line[:0], names, i)
		for p := 0; p < k; p++ {
			line = append(line, '\t')
			line = strconv.AppendFloat(line, b[p*m+i], 'g', -1, 64)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writeTopFeaturesTSV writes top_features.tsv for the basis b (m x k, column-major).
func writeTopFeaturesTSV(w *bytes.Buffer, b []float64, m, k int, names []string) {
	w.WriteString("component\trank\tfeature\tweight\n")
	var line []byte
	for p := 0; p < k; p++ {
		col := b[p*m : (p+1)*m]
		for rank, i := range kernels.TopIndices(m, TopFeatures, func(i int) float64 { return col[i] }) {
			line = strconv.AppendInt(line[:0], int64(p+1), 10)
			line = append(line, '\t')
			line = strconv.AppendInt(line, int64(rank+1), 10)
			line = append(line, '\t')
			line = appendRowName(line, names, i)
			line = append(line, '\t')
			line = strconv.AppendFloat(line, col[i], 'g', -1, 64)
			w.Write(append(line, '\n'))
		}
	}
}

// writeCoefTSV writes coef.tsv for the coef c (k x n, column-major: sample j's k values are
// c[j*k:(j+1)*k]).
func writeCoefTSV(w *bufio.Writer, c []float64, n, k int, names []string) error {
	if _, err := w.Write(appendComponentHeader(nil, "sample", k)); err != nil {
		return err
	}
	var line []byte
	for j := 0; j < n; j++ {
		line = appendRowName(line[:0], names, j)
		for _, v := range c[j*k : (j+1)*k] {
			line = append(line, '\t')
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}
