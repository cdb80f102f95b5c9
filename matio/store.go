package matio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// The block store ("didnmf store") is a directory holding manifest.json:
//
//	{"format": "didnmf-blocks", "version": 1,
//	 "shape": [N, M],
//	 "blocks": [{"file": "block-000000.npz", "rows": 65536}, ...],
//	 "features": "features.tsv", "samples": "samples.tsv",
//	 "source": "pbmc.h5ad", "layer": "X", "dtype": "float32",
//	 "source_size": 123456789, "source_mtime_ns": 1700000000000000000}
//
// The blocks hold the samples in order, sum(rows) == N; each is a scipy CSR .npz
// (save_npz, compressed or not) or a dense (rows, M) .npy. features and samples, optional,
// name files of M and N lines (see [ReadNames]); source, layer, dtype, source_size and
// source_mtime_ns are informational (python -m didnmf convert writes them, and reuses a
// store whose source_size and source_mtime_ns still describe its source).

// storeManifest is the manifest's file name.
const storeManifest = "manifest.json"

// maxManifest bounds manifest.json: 1 MiB holds some 20,000 blocks (about 50 bytes each),
// which at 65,536 rows a block is over a billion samples.
const maxManifest = 1 << 20

// storeFormat and storeVersion are what a manifest's format and version must say.
const (
	storeFormat  = "didnmf-blocks"
	storeVersion = 1
)

// manifest is manifest.json. Unknown keys are refused.
type manifest struct {
	Format   string          `json:"format"`
	Version  *int            `json:"version"`
	Shape    []int64         `json:"shape"`
	Blocks   []manifestBlock `json:"blocks"`
	Features string          `json:"features,omitempty"`
	Samples  string          `json:"samples,omitempty"`
	Source   string          `json:"source,omitempty"`
	Layer    string          `json:"layer,omitempty"`
	// Informational, written by the Python converter: the blocks' dtype and the source
	// file's size and modification time when it was converted.
	DType         string `json:"dtype,omitempty"`
	SourceSize    int64  `json:"source_size,omitempty"`
	SourceMtimeNS int64  `json:"source_mtime_ns,omitempty"`
}

// manifestBlock is one block of a manifest.
type manifestBlock struct {
	File string `json:"file"`
	Rows int64  `json:"rows"`
}

// parseManifest reads and checks a manifest from r (at most maxManifest bytes): its format
// and version, the shape, plain file names, blocks of positive rows summing to N. Errors name
// the manifest (name) and the block.
func parseManifest(name string, r io.Reader) (*manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	if err != nil {
		return nil, ioError(name, "read error", err)
	}
	if len(data) > maxManifest {
		return nil, inputErrorf(name, "larger than %d bytes: not a didnmf block store manifest", maxManifest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, inputErrorf(name, "bad manifest: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, inputErrorf(name, "bad manifest: data after the JSON object")
	}
	switch {
	case m.Format != storeFormat:
		return nil, inputErrorf(name, "format %q: expected %q", shortString(m.Format), storeFormat)
	case m.Version == nil:
		return nil, inputErrorf(name, "no version (expected %d)", storeVersion)
	case *m.Version != storeVersion:
		return nil, inputErrorf(name, "version %d: this didnmf reads version %d", *m.Version, storeVersion)
	case len(m.Shape) != 2:
		return nil, inputErrorf(name, "shape %s: expected [samples, features]", formatShape(m.Shape))
	case m.Shape[0] <= 0 || m.Shape[1] <= 0:
		return nil, inputErrorf(name, "empty or bad shape %s", formatShape(m.Shape))
	case m.Shape[1] > maxFeatures:
		return nil, inputErrorf(name, "shape %s: more than %d features", formatShape(m.Shape), maxFeatures)
	case m.Shape[0] > math.MaxInt32:
		return nil, inputErrorf(name, "shape %s: more than %d samples", formatShape(m.Shape), math.MaxInt32)
	case len(m.Blocks) == 0:
		return nil, inputErrorf(name, "no blocks")
	}
	seen := map[string]bool{}
	var sum int64
	for i, b := range m.Blocks {
		at := fmt.Sprintf("block %d", i)
		if err := plainName(b.File); err != "" {
			return nil, inputErrorf(name, "%s: file %q %s", at, shortString(b.File), err)
		}
		if ext := strings.ToLower(filepath.Ext(b.File)); ext != ".npz" && ext != ".npy" {
			return nil, inputErrorf(name, "%s: file %q: expected a .npz or .npy block", at, shortString(b.File))
		}
		if seen[b.File] {
			return nil, inputErrorf(name, "%s: file %q is listed twice", at, shortString(b.File))
		}
		seen[b.File] = true
		if b.Rows <= 0 {
			return nil, inputErrorf(name, "%s (%s): %d rows: expected at least 1", at, b.File, b.Rows)
		}
		if b.Rows > m.Shape[0]-sum {
			return nil, inputErrorf(name, "%s (%s): %d rows from sample %d go past the %d samples of the shape", at, b.File, b.Rows, sum, m.Shape[0])
		}
		sum += b.Rows
	}
	if sum != m.Shape[0] {
		return nil, inputErrorf(name, "the blocks hold %d rows but the shape says %d samples", sum, m.Shape[0])
	}
	for _, f := range []struct{ key, file string }{{"features", m.Features}, {"samples", m.Samples}} {
		if f.file == "" {
			continue
		}
		if err := plainName(f.file); err != "" {
			return nil, inputErrorf(name, "%s: file %q %s", f.key, shortString(f.file), err)
		}
	}
	return &m, nil
}

// plainName checks that a file name of a manifest names a file in its directory, and returns
// what is wrong with it, or "".
func plainName(s string) string {
	switch {
	case s == "":
		return "is empty"
	case s == "." || s == "..":
		return "is not a file name"
	case strings.ContainsAny(s, "/\\\x00"):
		return "is not a plain file name (no directories: the blocks lie beside manifest.json)"
	case s == storeManifest:
		return "is the manifest itself"
	case len(s) > 255:
		return "is too long"
	}
	return ""
}

// storeSource reads a block store. Open reads only the manifest; Read opens the blocks that
// overlap its range, reads their part and closes them, so a node touches only its own blocks.
// A block's shape is checked when it is opened.
type storeSource struct {
	name   string // the directory
	open   Opener
	man    *manifest
	n, m   int
	offs   []int // block i holds samples [offs[i], offs[i+1])
	opts   ReadOptions
	sparse bool // some block is an .npz
	sawNaN atomic.Bool
	closed atomic.Bool
}

// openStore opens the block store in dir from its manifest, opened as mpath.
func openStore(open Opener, dir, mpath string, f *os.File, opts ReadOptions) (Source, error) {
	defer f.Close() // openFirst checked that it is a regular file
	man, err := parseManifest(mpath, f)
	if err != nil {
		return nil, err
	}
	s := &storeSource{name: dir, open: open, man: man, n: int(man.Shape[0]), m: int(man.Shape[1]), opts: opts, offs: []int{0}}
	for _, b := range man.Blocks {
		s.offs = append(s.offs, s.offs[len(s.offs)-1]+int(b.Rows))
		s.sparse = s.sparse || strings.EqualFold(filepath.Ext(b.File), ".npz")
	}
	return s, nil
}

func (s *storeSource) Name() string  { return s.name }
func (s *storeSource) Samples() int  { return s.n }
func (s *storeSource) Features() int { return s.m }

func (s *storeSource) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *storeSource) missingSeen() bool { return s.sawNaN.Load() }

// naturalLayout is sparse when any block is an .npz.
func (s *storeSource) naturalLayout() Layout {
	if s.sparse {
		return LayoutSparse
	}
	return LayoutDense
}

// Read reads samples [lo, hi) from the blocks that hold them.
func (s *storeSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.name, s.n, lo, hi, layout); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ioError(s.name, "read error", os.ErrClosed)
	}
	if lo == hi {
		return shapeAny(s.name, &kernels.CSC{Rows: s.m, ColPtr: []int{0}, Val: []float64{}}, layout)
	}
	first := sort.Search(len(s.offs)-1, func(i int) bool { return s.offs[i+1] > lo })
	var parts []kernels.Block
	for i := first; i < len(s.man.Blocks) && s.offs[i] < hi; i++ {
		blk, err := s.readBlock(i, max(lo, s.offs[i])-s.offs[i], min(hi, s.offs[i+1])-s.offs[i], layout)
		if err != nil {
			return nil, err
		}
		parts = append(parts, blk)
	}
	return joinBlocks(s.name, s.m, hi-lo, parts, layout)
}

// readBlock reads rows [a, b) of block i.
func (s *storeSource) readBlock(i, a, b int, layout Layout) (kernels.Block, error) {
	mb := s.man.Blocks[i]
	path := filepath.Join(s.name, mb.File)
	src, err := openPath(s.open, path, s.opts, false)
	if err != nil {
		return nil, s.blockError(i, err)
	}
	defer src.Close()
	if src.Samples() != int(mb.Rows) || src.Features() != s.m {
		return nil, inputErrorf(path, "is %d x %d, but %s says block %d holds %d rows (samples [%d, %d)) of %d features",
			src.Samples(), src.Features(), filepath.Join(s.name, storeManifest), i, mb.Rows, s.offs[i], s.offs[i+1], s.m)
	}
	blk, err := src.Read(a, b, layout)
	if err != nil {
		return nil, s.blockError(i, err)
	}
	if MissingSeen(src) {
		s.sawNaN.Store(true)
	}
	return blk, nil
}

// blockError adds to an error about block i where its samples lie in the store: the block's
// own messages count its samples from its first.
func (s *storeSource) blockError(i int, err error) error {
	if !usererr.Is(err) {
		return err
	}
	return usererr.New(fmt.Sprintf("%v (block %d of the store %s: its sample 0 is the store's sample %d)", err, i, s.name, s.offs[i]), err)
}
