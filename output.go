package didnmf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
)

// Save writes basis.npy (features x K), coef.npy (samples x K) and report.json (rep; nil:
// r.Report()) into dir, a directory that exists: each to a temporary file
// first, then all renamed into place, so a failure leaves no partial file behind. coef.npy is
// streamed to its file (at N = 1e8 it is 2.4 GB, which a buffer in memory would double).
func (r *Result) Save(dir string, rep *report.Report) error {
	res := &r.Result
	if rep == nil {
		rep = r.Report()
	}
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
