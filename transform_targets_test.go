package didnmf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// writeCountsMTX writes an n x m MatrixMarket array of integer counts, which storage auto
// keeps as float32.
func writeCountsMTX(t *testing.T, m, n int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%%%%MatrixMarket matrix array integer general\n%d %d\n", n, m)
	r := kernels.NewRNG(3, 0, 0)
	for range m * n {
		fmt.Fprintf(&b, "%d\n", int(r.Float64()*r.Float64()*20))
	}
	p := filepath.Join(t.TempDir(), "counts.mtx")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTransformSameBitsOnEveryTarget: a sqrt job on integer counts gives the same bits (basis,
// held-out error of the squares and its norm) in this process, on 2 in-process nodes and on a
// cluster, whether the nodes read the file (ingest shared) or the client streams it: the
// square roots are float64 whoever reads the counts and however they were stored. Storage
// float32, which would have to round them, is refused before anything runs.
func TestTransformSameBitsOnEveryTarget(t *testing.T) {
	path := writeCountsMTX(t, 10, 400)
	spec := func() *jobspec.Spec {
		s := jobspec.New([]string{path}, kernels.DID, 3, 2)
		s.TestFraction, s.Stop.MaxIter, s.Transform = 0.1, 30, matio.TransformSqrt
		return s
	}
	want, err := Run(context.Background(), spec(), Local(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want.TestCount == 0 || !(want.TestSSE > 0) {
		t.Fatalf("in this process: %d held out, test SSE %v", want.TestCount, want.TestSSE)
	}
	cluster := startCluster(t, 2, filepath.Dir(path))
	stream := spec()
	stream.Ingest = jobspec.IngestStream
	for _, c := range []struct {
		name   string
		spec   *jobspec.Spec
		target Target
	}{
		{"2 nodes", spec(), InProcess(2, 0)},
		{"a cluster, shared", spec(), cluster},
		{"a cluster, streamed", stream, cluster},
	} {
		got, err := Run(context.Background(), c.spec, c.target, Options{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(got.B, want.B) || got.TestSSE != want.TestSSE || got.TestSqNorm != want.TestSqNorm {
			t.Errorf("%s: test SSE %v of %v; in this process %v of %v (or the basis differs)", c.name, got.TestSSE, got.TestSqNorm, want.TestSSE, want.TestSqNorm)
		}
	}
	f32 := spec()
	f32.Storage = kernels.StorageFloat32
	_, err = Run(context.Background(), f32, Local(0), Options{})
	var ue *usererr.Error
	if !errors.As(err, &ue) || ue.Field != "storage" || !strings.Contains(err.Error(), "cannot hold the square roots") {
		t.Errorf("storage float32 with sqrt: %v", err)
	}
}
