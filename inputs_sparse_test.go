package didnmf

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// TestSparseInputsSameFactors: the same matrix as a .npy, a CSR and a CSC .npz, a 10x
// directory and a block store gives the same factors, bit for bit, with every storage, on the
// driver and on in-process nodes (whose shards read only their ranges, stored as float32 as
// they read them under auto and float32).
func TestSparseInputsSameFactors(t *testing.T) {
	dir := filepath.Join("matio", "testdata", "sparse")
	spec := func(input string, algo kernels.Algorithm, st kernels.Storage) *jobspec.Spec {
		s := jobspec.New([]string{filepath.Join(dir, input)}, algo, 2, 3)
		s.Stop = kernels.StopRule{MaxIter: 10}
		s.Storage = st
		return s
	}
	for _, algo := range []kernels.Algorithm{kernels.DID, kernels.DADMM} {
		for _, st := range []kernels.Storage{kernels.StorageAuto, kernels.StorageFloat32, kernels.StorageFloat64} {
			want, err := Run(context.Background(), spec("sp_f8.npy", algo, st), Local(0), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, input := range []string{"csr_f4.npz", "csr_f8_stored.npz", "csc_f4.npz", "tenx_v3", "store"} {
				for name, target := range map[string]Target{"driver": Local(0), "2 in-process nodes": InProcess(2, 0)} {
					got, err := Run(context.Background(), spec(input, algo, st), target, Options{})
					if err != nil {
						t.Fatalf("%s %s %v on %s: %v", input, algo, st, name, err)
					}
					if !slices.Equal(got.B, want.B) || !slices.Equal(got.C, want.C) {
						t.Errorf("%s %s %v on %s: factors differ from the .npy's", input, algo, st, name)
					}
				}
			}
		}
	}
}
