package matio

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

// TestNaNNamesMissingField: a NaN entry read without Missing is the user's error whose advice
// names the job spec's field missing as {missing}, so that each front end names it its way
// (the CLI's --missing nan), in every format that checks entries as it reads.
func TestNaNNamesMissingField(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := WriteNPY(&buf, 2, 2, []float64{1, math.NaN(), 2, 3}); err != nil {
		t.Fatal(err)
	}
	npy := filepath.Join(dir, "x.npy")
	mtx := filepath.Join(dir, "x.mtx")
	if err := os.WriteFile(npy, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mtx, []byte("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 nan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{npy, mtx} {
		src, err := Open(path)
		if err == nil {
			_, err = src.Read(0, src.Samples(), LayoutDense)
			src.Close()
		}
		var ue *usererr.Error
		if !errors.As(err, &ue) {
			t.Fatalf("%s: %v, want a *usererr.Error", path, err)
		}
		flags := ue.Text(func(f string) string { return map[string]string{"missing": "--missing nan"}[f] })
		if !strings.HasSuffix(err.Error(), "to read NaN entries as missing values, give missing") ||
			!strings.HasSuffix(flags, "to read NaN entries as missing values, give --missing nan") || !strings.Contains(ue.Template(), "{missing}") {
			t.Errorf("%s: %q, with flags %q", path, err, flags)
		}
	}
}
