package matio

import (
	"sync"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// TestConcurrentReads reads disjoint ranges of every kind of source from several goroutines
// (run with -race) and checks them against one full read.
func TestConcurrentReads(t *testing.T) {
	for _, spec := range []string{
		"testdata/c_f8.npy", "testdata/f_f8.npy", "testdata/c_f8.npy.gz", "testdata/coo.mtx",
		"testdata/array.mtx", "synthetic:m=7,n=50,k=3,seed=5,noise=0.1",
	} {
		src, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		n, m := src.Samples(), src.Features()
		full := denseData(mustRead(t, src, 0, n, LayoutDense))
		ranges := kernels.ColumnRanges(n, 4)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		blocks := make([]kernels.Block, 4)
		for s := 0; s < 4; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				blocks[s], errs[s] = src.Read(ranges[s], ranges[s+1], layouts[s%3])
			}()
		}
		wg.Wait()
		for s := 0; s < 4; s++ {
			if errs[s] != nil {
				t.Fatalf("%s: %v", spec, errs[s])
			}
			checkBlock(t, blocks[s], m, ranges[s+1]-ranges[s], layouts[s%3])
			if !sameData(denseData(blocks[s]), full[ranges[s]*m:ranges[s+1]*m]) {
				t.Errorf("%s: concurrent Read of shard %d differs", spec, s)
			}
		}
		src.Close()
	}
}
