// Command sweepscale writes the matrix of issue 34's sweep at scale: a samples x features
// sparse count matrix (200,000 x 20,000 at 2% density, 80 million nonzeros, by default) with
// planted programs, as a scipy CSR .npz (stored, not compressed: float32 counts, int32
// indices), the input the nodes read fastest (BENCHMARKS.md, "Reading a scipy .npz"), beside
// the planted programs (FILE.planted_basis.npy, features x K, unit columns) and what made it
// (FILE.planted.json). bench/sweep_scale.sh runs it before the sweep.
//
//	go run ./bench/sweepscale -out /tmp/scale/x.npz        # the matrix, about a minute
//	go run ./bench/sweepscale -rows 20000 -cols 2000 -out /tmp/small.npz
//
// The model (cNMF's simulation in spirit: identity and activity programs, Kotliar et al.
// 2019): K programs over the features, each a mixture of its own program (Gamma(0.5) weights
// on a random tenth of the features) and a shared background (Gamma(0.4) weights on every
// feature, -background of the program's mass). The first K-3 programs are identities, the
// last 3 activities (K >= 4): a sample has one identity (uniform), and with probability 0.4
// also an activity, with a usage uniform in [0.1, 0.7]. A sample's counts are reads drawn
// from its mixture of programs (multinomial: Poisson given the library size) until it has
// its number of distinct features, uniform in [d/2, 3d/2] for d = density x features: so the
// expected matrix is of rank K up to the library sizes, and the nonzeros are density x
// samples x features give or take a few in a million.
//
// The file is the same bits for the same flags whatever the machine and -threads: every
// program is drawn from -seed, every sample from (-seed, its index).
package main

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/didnmf/didnmf/matio"
)

// params are the generator's flags, also written to FILE.planted.json.
type params struct {
	Rows       int     `json:"samples"`
	Cols       int     `json:"features"`
	Density    float64 `json:"density"`
	K          int     `json:"k"`
	Seed       uint64  `json:"seed"`
	Support    float64 `json:"support"`
	Background float64 `json:"background"`
	Nonzeros   int64   `json:"nonzeros"`
	Counts     float64 `json:"counts"`
	MaxCount   float32 `json:"max_count"`
	Seconds    float64 `json:"seconds"`
}

func main() {
	var p params
	flag.IntVar(&p.Rows, "rows", 200000, "samples (rows)")
	flag.IntVar(&p.Cols, "cols", 20000, "features (columns)")
	flag.Float64Var(&p.Density, "density", 0.02, "share of nonzero entries")
	flag.IntVar(&p.K, "k", 15, "planted programs (at least 4: the last 3 are activities)")
	flag.Uint64Var(&p.Seed, "seed", 1, "seed")
	flag.Float64Var(&p.Support, "support", 0.1, "share of the features a program weighs")
	flag.Float64Var(&p.Background, "background", 0.2, "share of a program's mass on the shared background")
	threads := flag.Int("threads", runtime.GOMAXPROCS(0), "worker threads")
	out := flag.String("out", "", "the .npz to write (FILE.planted_basis.npy and FILE.planted.json beside it)")
	flag.Parse()
	if err := p.check(*out); err != nil {
		fmt.Fprintln(os.Stderr, "sweepscale:", err)
		os.Exit(2)
	}
	start := time.Now()
	progs := makePrograms(p)
	m := sample(p, progs, max(1, *threads))
	p.Nonzeros = int64(len(m.indices))
	for _, v := range m.data {
		p.Counts += float64(v)
		p.MaxCount = max(p.MaxCount, v)
	}
	check(writeCSR(*out, p.Rows, p.Cols, m))
	check(writeBasis(strings.TrimSuffix(*out, ".npz")+".planted_basis.npy", p, progs))
	p.Seconds = time.Since(start).Seconds()
	js, err := json.MarshalIndent(p, "", "  ")
	check(err)
	check(os.WriteFile(strings.TrimSuffix(*out, ".npz")+".planted.json", append(js, '\n'), 0o644))
	fmt.Printf("%s: %d x %d, %d nonzeros (%.3f%%), %.0f counts (max %g), K=%d planted, %.1f s\n",
		*out, p.Rows, p.Cols, p.Nonzeros, 100*float64(p.Nonzeros)/float64(p.Rows)/float64(p.Cols), p.Counts, p.MaxCount, p.K, p.Seconds)
}

// check tells what is wrong with the flags.
func (p params) check(out string) error {
	switch {
	case out == "" || !strings.HasSuffix(out, ".npz"):
		return fmt.Errorf("-out FILE.npz is required, got %q", out)
	case p.Rows < 1 || p.Cols < 2 || p.Rows > math.MaxInt32:
		return fmt.Errorf("-rows %d -cols %d: need 1 <= rows < 2^31 and cols >= 2", p.Rows, p.Cols)
	case p.K < 4 || p.K > p.Cols:
		return fmt.Errorf("-k %d: need 4 <= k <= cols", p.K)
	case !(p.Density > 0) || p.Density*float64(p.Cols) < 2 || p.Density > 0.5:
		return fmt.Errorf("-density %g: need at least 2 nonzeros a sample and at most half the features", p.Density)
	case !(p.Support > 0 && p.Support <= 1) || !(p.Background >= 0 && p.Background < 1):
		return fmt.Errorf("-support %g -background %g: need 0 < support <= 1 and 0 <= background < 1", p.Support, p.Background)
	}
	return nil
}

// programs are the planted programs: each one's cumulative weights over its support, the
// shared background's over every feature, and the mixed profiles (K x features, each
// summing to 1) that are the planted basis.
type programs struct {
	support    [][]int32
	cum        [][]float64
	background []float64
	profile    [][]float64
}

// makePrograms draws the programs from p.Seed.
func makePrograms(p params) *programs {
	rng := rand.New(rand.NewPCG(p.Seed, 0x5eed))
	g := &programs{profile: make([][]float64, p.K)}
	bg := weights(distuv.Gamma{Alpha: 0.4, Beta: 1, Src: rng}, p.Cols)
	g.background = cumulative(bg)
	size := max(1, int(math.Round(p.Support*float64(p.Cols))))
	perm := make([]int32, p.Cols)
	for k := range p.K {
		for j := range perm {
			perm[j] = int32(j)
		}
		for j := range size { // a partial Fisher-Yates shuffle: the first size are the support
			r := j + rng.IntN(p.Cols-j)
			perm[j], perm[r] = perm[r], perm[j]
		}
		sup := slices.Clone(perm[:size])
		slices.Sort(sup)
		w := weights(distuv.Gamma{Alpha: 0.5, Beta: 1, Src: rng}, size)
		g.support = append(g.support, sup)
		g.cum = append(g.cum, cumulative(w))
		prof := make([]float64, p.Cols)
		for j, b := range bg {
			prof[j] = p.Background * b
		}
		for i, j := range sup {
			prof[j] += (1 - p.Background) * w[i]
		}
		g.profile[k] = prof
	}
	return g
}

// weights draws n weights from d, normalized to sum 1.
func weights(d distuv.Gamma, n int) []float64 {
	w := make([]float64, n)
	sum := 0.0
	for i := range w {
		w[i] = d.Rand()
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// cumulative returns the running sums of w, the last set to exactly 1.
func cumulative(w []float64) []float64 {
	c := make([]float64, len(w))
	s := 0.0
	for i, v := range w {
		s += v
		c[i] = s
	}
	c[len(c)-1] = 1
	return c
}

// draw picks an index with the weights whose running sums are cum.
func draw(rng *rand.Rand, cum []float64) int {
	return min(sort.SearchFloat64s(cum, rng.Float64()), len(cum)-1)
}

// csr is a CSR matrix's arrays.
type csr struct {
	indptr  []int64
	indices []int32
	data    []float32
}

// sample draws every sample's counts, threads samples at a time, each from its own seed.
func sample(p params, g *programs, threads int) *csr {
	const block = 1024
	blocks := (p.Rows + block - 1) / block
	parts := make([]csr, blocks)
	next := make(chan int)
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := make([]float32, p.Cols)
			var touched []int32
			for b := range next {
				part := &parts[b]
				for i := b * block; i < min(p.Rows, (b+1)*block); i++ {
					touched = sampleRow(p, g, i, count, touched[:0])
					slices.Sort(touched)
					for _, j := range touched {
						part.indices = append(part.indices, j)
						part.data = append(part.data, count[j])
						count[j] = 0
					}
					part.indptr = append(part.indptr, int64(len(touched)))
				}
			}
		}()
	}
	for b := range blocks {
		next <- b
	}
	close(next)
	wg.Wait()
	m := &csr{indptr: make([]int64, 1, p.Rows+1)}
	for _, part := range parts {
		for _, n := range part.indptr {
			m.indptr = append(m.indptr, m.indptr[len(m.indptr)-1]+n)
		}
		m.indices = append(m.indices, part.indices...)
		m.data = append(m.data, part.data...)
	}
	return m
}

// sampleRow draws sample i's reads into count (all zero on entry) until it has its number of
// distinct features, and returns them (appended to touched).
func sampleRow(p params, g *programs, i int, count []float32, touched []int32) []int32 {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(i)+1<<32))
	identities := p.K - 3
	id := rng.IntN(identities)
	act, usage := -1, 0.0
	if rng.Float64() < 0.4 {
		act, usage = identities+rng.IntN(3), 0.1+0.6*rng.Float64()
	}
	d := p.Density * float64(p.Cols)
	lo, hi := max(1, int(math.Round(d/2))), int(math.Round(1.5*d))
	want := lo + rng.IntN(hi-lo+1)
	for len(touched) < want {
		k := id
		if act >= 0 && rng.Float64() < usage {
			k = act
		}
		var j int32
		if rng.Float64() < p.Background {
			j = int32(draw(rng, g.background))
		} else {
			j = g.support[k][draw(rng, g.cum[k])]
		}
		if count[j] == 0 {
			touched = append(touched, j)
		}
		count[j]++
	}
	return touched
}

// writeCSR writes m as scipy.sparse.save_npz(path, m, compressed=False) would (int32 index
// arrays when they fit, as scipy makes them), through a temporary file renamed into place.
func writeCSR(path string, rows, cols int, m *csr) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	z := zip.NewWriter(bw)
	nnz := int64(len(m.indices))
	indptrDescr, indptrSize := "<i4", 4
	if nnz > math.MaxInt32 {
		indptrDescr, indptrSize = "<i8", 8
	}
	members := []struct {
		name, descr string
		shape       string
		n           int64
		size        int
		put         func(b []byte, i int64)
	}{
		{"indices.npy", "<i4", fmt.Sprintf("(%d,)", nnz), nnz, 4, func(b []byte, i int64) { binary.LittleEndian.PutUint32(b, uint32(m.indices[i])) }},
		{"indptr.npy", indptrDescr, fmt.Sprintf("(%d,)", rows+1), int64(rows + 1), indptrSize, func(b []byte, i int64) {
			if indptrSize == 4 {
				binary.LittleEndian.PutUint32(b, uint32(m.indptr[i]))
			} else {
				binary.LittleEndian.PutUint64(b, uint64(m.indptr[i]))
			}
		}},
		{"format.npy", "<U3", "()", 3, 4, func(b []byte, i int64) { binary.LittleEndian.PutUint32(b, uint32("csr"[i])) }},
		{"shape.npy", "<i8", "(2,)", 2, 8, func(b []byte, i int64) { binary.LittleEndian.PutUint64(b, uint64([]int{rows, cols}[i])) }},
		{"data.npy", "<f4", fmt.Sprintf("(%d,)", nnz), nnz, 4, func(b []byte, i int64) { binary.LittleEndian.PutUint32(b, math.Float32bits(m.data[i])) }},
	}
	for _, mem := range members {
		header := npyHeader(mem.descr, mem.shape)
		body := func(w io.Writer) error {
			if _, err := w.Write(header); err != nil {
				return err
			}
			buf := make([]byte, 0, 1<<16)
			for i := int64(0); i < mem.n; i++ {
				buf = buf[:len(buf)+mem.size]
				mem.put(buf[len(buf)-mem.size:], i)
				if len(buf)+mem.size > cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
			_, err := w.Write(buf)
			return err
		}
		crc := crc32.NewIEEE()
		if err := body(crc); err != nil {
			return err
		}
		size := uint64(len(header)) + uint64(mem.n)*uint64(mem.size)
		w, err := z.CreateRaw(&zip.FileHeader{Name: mem.name, Method: zip.Store, CRC32: crc.Sum32(),
			CompressedSize64: size, UncompressedSize64: size, Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return err
		}
		if err := body(w); err != nil {
			return err
		}
	}
	if err := z.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// npyHeader is a version 1.0 .npy header for a C-order array of descr and shape, padded so
// that the data starts at a multiple of 64 bytes, as numpy writes it.
func npyHeader(descr, shape string) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	pad := 63 - (10+len(dict)+1+63)%64
	h := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(h[8:], uint16(len(dict)+pad+1))
	h = append(h, dict...)
	h = append(h, strings.Repeat(" ", pad)...)
	return append(h, '\n')
}

// writeBasis writes the planted programs as a features x K .npy, each column of unit L2 norm
// (as the sweep's spectra are compared).
func writeBasis(path string, p params, g *programs) error {
	b := make([]float64, p.Cols*p.K)
	for k, prof := range g.profile {
		norm := 0.0
		for _, v := range prof {
			norm += v * v
		}
		norm = math.Sqrt(norm)
		for j, v := range prof {
			b[j*p.K+k] = v / norm
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := matio.WriteNPY(bw, p.Cols, p.K, b); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweepscale:", err)
		os.Exit(1)
	}
}
