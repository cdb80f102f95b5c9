// Command npzread measures how fast didnmf's nodes read a scipy sparse .npz: the file is read
// as -shards sample ranges in parallel, each by its own Source as a node's shards do
// (matio.OpenAllWithOptions, then Read of the shard's range, in the sparse layout, with the
// storage asked), -reps times; it prints the median wall time, the peak resident memory
// (VmHWM) and the bytes the blocks' nonzeros take. bench/npzread.py drives it against
// scipy.sparse.load_npz on the same file.
//
//	GOMAXPROCS=2 go run ./bench/npzread -shards 4 -reps 3 -storage auto /tmp/x.npz
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

func main() {
	shards := flag.Int("shards", 4, "sample ranges read in parallel")
	reps := flag.Int("reps", 3, "repetitions (the median is reported)")
	storage := flag.String("storage", "auto", "auto, float32 or float64")
	layout := flag.String("layout", "sparse", "auto, dense or sparse")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: npzread [flags] FILE")
		os.Exit(2)
	}
	st, err := kernels.ParseStorage(*storage)
	check(err)
	lay, err := matio.ParseLayout(*layout)
	check(err)
	path := flag.Arg(0)
	var times []float64
	var nnz, valBytes int64
	for r := 0; r < *reps; r++ {
		blocks := make([]kernels.Block, *shards)
		start := time.Now()
		probe, err := matio.OpenAllWithOptions(os.Open, []string{path}, matio.ReadOptions{Storage: st})
		check(err)
		n := probe.Samples()
		probe.Close()
		ranges := kernels.ColumnRanges(n, *shards)
		var wg sync.WaitGroup
		errs := make([]error, *shards)
		for s := range blocks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				src, err := matio.OpenAllWithOptions(os.Open, []string{path}, matio.ReadOptions{Storage: st})
				if err != nil {
					errs[s] = err
					return
				}
				defer src.Close()
				b, err := src.Read(ranges[s], ranges[s+1], lay)
				if err == nil {
					b, err = kernels.ApplyStorage(b, st)
				}
				blocks[s], errs[s] = b, err
			}()
		}
		wg.Wait()
		times = append(times, time.Since(start).Seconds())
		for _, err := range errs {
			check(err)
		}
		nnz, valBytes = 0, 0
		for _, b := range blocks {
			nnz += int64(b.NNZ())
			valBytes += int64(b.NNZ()) * int64(kernels.ValueBytes(b)+4)
		}
		blocks = nil
		runtime.GC()
		debug.FreeOSMemory()
	}
	slices.Sort(times)
	fmt.Printf("go\t%s\tshards=%d\tGOMAXPROCS=%d\tstorage=%s\tmedian=%.3fs\truns=%s\tnnz=%d\tnnz_bytes=%d\tpeak_rss=%d\n",
		path, *shards, runtime.GOMAXPROCS(0), *storage, times[len(times)/2], fmtTimes(times), nnz, valBytes, vmHWM())
}

func fmtTimes(t []float64) string {
	s := make([]string, len(t))
	for i, v := range t {
		s[i] = fmt.Sprintf("%.3f", v)
	}
	return strings.Join(s, ",")
}

// vmHWM returns the process's peak resident set size in bytes.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	check(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "VmHWM: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return -1
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "npzread:", err)
		os.Exit(1)
	}
}
