package matio

import (
	"bufio"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// A directory given as an input is a didnmf block store when it holds manifest.json (see
// [openStore]), else a 10x Cell Ranger directory when it holds matrix.mtx[.gz]. Every file in
// it is opened with the Opener, as filepath.Join(dir, name) with a fixed name or a plain name
// from the manifest (no separator, no ..), so a confining opener (package fsroot) confines
// them as it does the directory.

// openDir opens a directory input.
func openDir(open Opener, dir string, opts ReadOptions) (Source, error) {
	mpath, f, err := openFirst(open, dir, storeManifest)
	if err != nil {
		return nil, err
	}
	if f != nil {
		return openStore(open, dir, mpath, f, opts)
	}
	return openTenX(open, dir, opts)
}

// openFirst opens the first of names that exists in dir, and returns its path and file; both
// are zero when none does. Any other error than a missing file is returned.
func openFirst(open Opener, dir string, names ...string) (string, *os.File, error) {
	for _, name := range names {
		p := filepath.Join(dir, name)
		f, err := openInput(open, p, false)
		if err == nil {
			return p, f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, err
		}
	}
	return "", nil, nil
}

// plainReader returns a buffered reader of f's content, decompressed when it is gzip data.
func plainReader(path string, f *os.File) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(f, 1<<16)
	head, _ := br.Peek(2)
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, ioError(path, "bad gzip data", err)
		}
		return bufio.NewReaderSize(zr, 1<<16), func() { zr.Close() }, nil
	}
	return br, func() {}, nil
}

// 10x Cell Ranger file names, in the order they are looked for.
var (
	tenxMatrix   = []string{"matrix.mtx.gz", "matrix.mtx"}
	tenxFeatures = []string{"features.tsv.gz", "features.tsv", "genes.tsv.gz", "genes.tsv"}
	tenxBarcodes = []string{"barcodes.tsv.gz", "barcodes.tsv"}
)

// tenxFiles opens the three files of a 10x directory, failing when one is missing.
func tenxFiles(open Opener, dir string) (paths [3]string, files [3]*os.File, err error) {
	for i, names := range [][]string{tenxMatrix, tenxFeatures, tenxBarcodes} {
		p, f, err := openFirst(open, dir, names...)
		if err == nil && f == nil {
			if i == 0 {
				err = inputErrorf(dir, "is a directory, but neither a didnmf block store (no %s) nor a 10x Cell Ranger directory (no matrix.mtx or matrix.mtx.gz)", storeManifest)
			} else {
				err = inputErrorf(dir, "a 10x Cell Ranger directory needs %s beside its matrix, and has none", orList(names))
			}
		}
		if err != nil {
			for _, f := range files[:i] {
				f.Close()
			}
			return paths, files, err
		}
		paths[i], files[i] = p, f
	}
	return paths, files, nil
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	s := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			s += " or "
		default:
			s += ", "
		}
		s += n
	}
	return s
}

// openTenX opens a 10x Cell Ranger directory: matrix.mtx[.gz] holds genes x cells, read with
// the cells as the samples; features.tsv[.gz] (or genes.tsv[.gz]) must have a line for every
// gene and barcodes.tsv[.gz] one for every cell. The matrix is read whole into memory, as a
// .mtx file is.
func openTenX(open Opener, dir string, opts ReadOptions) (Source, error) {
	paths, files, err := tenxFiles(open, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	r, done, err := plainReader(paths[0], files[0])
	if err != nil {
		return nil, err
	}
	src, err := parseMTXAs(paths[0], r, opts, true)
	done()
	if err != nil {
		return nil, err
	}
	checks := []struct {
		want int
		what string
	}{{src.Features(), "features (genes, the rows of " + filepath.Base(paths[0]) + ")"},
		{src.Samples(), "samples (cells, the columns of " + filepath.Base(paths[0]) + ")"}}
	for i, c := range checks {
		if _, err := readNames(paths[i+1], files[i+1], c.want, c.what, tenxColumn, false); err != nil {
			src.Close()
			return nil, err
		}
	}
	return src, nil
}
