package matio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/didnmf/didnmf/usererr"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names are the names of an input's features and samples, in order; a field is nil when the
// input has no such names.
type Names struct {
	Features []string
	Samples  []string
}

// maxNameLine bounds one line of a names file.
const maxNameLine = 64 << 10

// nameColumn says which part of a line is the name.
type nameColumn int

const (
	// wholeLine: the line is the name; a tab in it is an error.
	wholeLine nameColumn = iota
	// tenxColumn: a 10x file's tab-separated line; the name is its second field when there
	// is one (the gene symbol of features.tsv), else its first (a barcode).
	tenxColumn
)

// makeUnique makes gene symbols unique as scanpy's read_10x_mtx does (anndata's
// make_index_unique): the second and later occurrences of a name get "-1", "-2", ... (the
// first suffix not already a name). names is changed in place and returned.
func makeUnique(names []string) []string {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		seen[n] = true
	}
	first := make(map[string]bool, len(names))
	next := map[string]int{}
	for i, n := range names {
		if !first[n] {
			first[n] = true
			continue
		}
		for {
			next[n]++
			cand := fmt.Sprintf("%s-%d", n, next[n])
			if !seen[cand] {
				seen[cand] = true
				names[i] = cand
				break
			}
		}
	}
	return names
}

// readNames reads the names in f, opened as path: one a line, exactly want lines (the file may
// or may not end with a newline). what says what the lines name, for the count's message
// ("features (...)"). With keep false it only checks them. Names must be valid UTF-8, not
// empty, and hold no tab (wholeLine) nor carriage return; reading stops at the first line
// beyond want, so a huge file costs no more than the matrix's names.
func readNames(path string, f *os.File, want int, what string, col nameColumn, keep bool) ([]string, error) {
	r, done, err := plainReader(path, f)
	if err != nil {
		return nil, err
	}
	defer done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxNameLine)
	var names []string
	if keep {
		names = make([]string, 0, min(want, 1<<16))
	}
	line := 0
	for sc.Scan() {
		line++
		if line > want {
			return nil, inputErrorf(path, "more than %d lines, but the matrix has %d %s (one name a line)", want, want, what)
		}
		t := sc.Bytes()
		t = bytes.TrimSuffix(t, []byte{'\r'})
		name := t
		if col == tenxColumn {
			fields := bytes.Split(t, []byte{'\t'})
			name = fields[0]
			if len(fields) > 1 {
				name = fields[1]
			}
		} else if bytes.IndexByte(t, '\t') >= 0 {
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line), "the name %q holds a tab (one name a line, no tabs)", short(t))
		}
		switch {
		case len(name) == 0:
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line), "empty name")
		case !utf8.Valid(name):
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line), "the name %q is not UTF-8", short(name))
		case bytes.IndexByte(name, '\r') >= 0:
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line), "the name %q holds a carriage return", short(name))
		}
		if r, bad := ControlInName(string(name)); bad {
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line), "the name %q holds the control character %U (names go to .tsv files and the terminal)", short(name), r)
		}
		if keep {
			names = append(names, string(name))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, inputErrorf(fmt.Sprintf("%s:%d", path, line+1), "line longer than %d bytes", maxNameLine)
		}
		return nil, ioError(path, "read error", err)
	}
	if line != want {
		return nil, inputErrorf(path, "%d lines, but the matrix has %d %s (one name a line)", line, want, what)
	}
	return names, nil
}

// namesStem returns the path of FILE without .gz and its format's extension, to which
// ".features.tsv" and ".samples.tsv" are added.
func namesStem(path string) string {
	p := strings.TrimSuffix(path, ".gz")
	if ext := strings.ToLower(filepath.Ext(p)); ext == ".npz" || ext == ".npy" || ext == ".mtx" {
		p = p[:len(p)-len(ext)]
	}
	return p
}

// ReadNames returns the names of the inputs specs, as [OpenAllWith] would stack them: the
// features of a 10x directory (the gene symbols of features.tsv, column 2, when present; else
// column 1) and its barcodes; the features and samples files named by a block store's
// manifest; for a file FILE.npz, .npy or .mtx[.gz], the files FILE.features.tsv and
// FILE.samples.tsv beside it when they exist (one name a line). Stacked inputs concatenate
// their samples' names, which are nil unless every input has them; the features are those of
// the inputs that have them, which must all agree. Synthetic specs and IDX files have no
// names.
//
// Every names file must have exactly as many lines as the matrix has features or samples
// (the error names the file and both counts); names must be nonempty UTF-8 without tabs (the
// name column of a 10x file excepted) or carriage returns. To know the counts it opens every
// input (a .mtx file is parsed again) and closes it. Errors wrap [usererr.ErrUser].
func ReadNames(open Opener, specs []string) (Names, error) {
	if open == nil {
		return Names{}, errors.New("matio: ReadNames: nil Opener")
	}
	if len(specs) == 0 {
		return Names{}, usererr.New("matio: no input given", nil)
	}
	var out Names
	var featFrom string
	allSamples := true
	for _, spec := range specs {
		nm, err := readNamesOne(open, spec)
		if err != nil {
			return Names{}, err
		}
		if nm.Features != nil {
			if out.Features == nil {
				out.Features, featFrom = nm.Features, spec
			} else if i := firstDiff(out.Features, nm.Features); i >= 0 {
				return Names{}, inputErrorf(spec, "feature %d (0-based) is named %q, but %s names it %q: stacked inputs must name their features alike",
					i, nameAt(nm.Features, i), featFrom, nameAt(out.Features, i))
			}
		}
		if nm.Samples == nil {
			allSamples = false
		}
		if allSamples {
			out.Samples = append(out.Samples, nm.Samples...)
		}
	}
	if !allSamples {
		out.Samples = nil
	}
	return out, nil
}

// firstDiff returns the first index where a and b differ (the shorter's length when one is a
// prefix of the other), or -1.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func nameAt(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// readNamesOne reads the names of one input.
func readNamesOne(open Opener, spec string) (Names, error) {
	if strings.HasPrefix(spec, syntheticPrefix) {
		return Names{}, nil
	}
	dir, err := statPath(open, spec)
	if err != nil {
		return Names{}, err
	}
	if !dir {
		return readBesideNames(open, spec)
	}
	src, err := openSpec(open, spec, ReadOptions{Missing: true})
	if err != nil {
		return Names{}, err
	}
	n, m := src.Samples(), src.Features()
	src.Close()
	if s, ok := src.(*storeSource); ok {
		var out Names
		if s.man.Features != "" {
			if out.Features, err = readNamesAt(open, filepath.Join(spec, s.man.Features), m, "features", wholeLine); err != nil {
				return Names{}, err
			}
		}
		if s.man.Samples != "" {
			if out.Samples, err = readNamesAt(open, filepath.Join(spec, s.man.Samples), n, "samples", wholeLine); err != nil {
				return Names{}, err
			}
		}
		return out, nil
	}
	// A 10x directory.
	paths, files, err := tenxFiles(open, spec)
	if err != nil {
		return Names{}, err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var out Names
	if out.Features, err = readNames(paths[1], files[1], m, "features (genes)", tenxColumn, true); err != nil {
		return Names{}, err
	}
	out.Features = makeUnique(out.Features)
	if out.Samples, err = readNames(paths[2], files[2], n, "samples (cells)", tenxColumn, true); err != nil {
		return Names{}, err
	}
	return out, nil
}

// readBesideNames returns the names in FILE.features.tsv and FILE.samples.tsv beside the file
// spec (an .npz, .npy or .mtx[.gz]). The matrix is opened, for the counts the names must
// match, only when one of them exists: a file without names is not read again (a .mtx would
// be parsed whole).
func readBesideNames(open Opener, spec string) (Names, error) {
	if ext := strings.ToLower(filepath.Ext(strings.TrimSuffix(spec, ".gz"))); ext != ".npz" && ext != ".npy" && ext != ".mtx" {
		return Names{}, nil
	}
	stem := namesStem(spec)
	var files [2]*os.File
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	paths := [2]string{stem + ".features.tsv", stem + ".samples.tsv"}
	for i, p := range paths {
		_, f, err := openFirst(open, filepath.Dir(p), filepath.Base(p))
		if err != nil {
			return Names{}, err
		}
		files[i] = f
	}
	if files[0] == nil && files[1] == nil {
		return Names{}, nil
	}
	src, err := openSpec(open, spec, ReadOptions{Missing: true})
	if err != nil {
		return Names{}, err
	}
	want := [2]int{src.Features(), src.Samples()}
	src.Close()
	var out Names
	dst := [2]*[]string{&out.Features, &out.Samples}
	for i, what := range [2]string{"features", "samples"} {
		if files[i] == nil {
			continue
		}
		f := files[i]
		files[i] = nil // readNamesOpened closes it
		if *dst[i], err = readNamesOpened(paths[i], f, want[i], what, wholeLine); err != nil {
			return Names{}, err
		}
	}
	return out, nil
}

// statPath reports whether path is a directory, opening it with open; anything but a
// directory or a regular file is refused.
func statPath(open Opener, path string) (bool, error) {
	f, err := openInput(open, path, true)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}

// readNamesAt opens path, which must exist, and reads its names.
func readNamesAt(open Opener, path string, want int, what string, col nameColumn) ([]string, error) {
	f, err := openInput(open, path, false)
	if err != nil {
		return nil, err
	}
	return readNamesOpened(path, f, want, what, col)
}

// readNamesOpened reads the names of f, a regular file opened as path, and closes it.
func readNamesOpened(path string, f *os.File, want int, what string, col nameColumn) ([]string, error) {
	defer f.Close()
	return readNames(path, f, want, what, col, true)
}

// ControlInName returns the first control character of a name (a C0 or C1 code, DEL), and
// whether it has one. Names go to .tsv files and to the terminal, so every reader of names
// refuses one with a control character: a tab or a line break would break a row, an escape
// sequence would reach whoever looks at the file.
func ControlInName(name string) (rune, bool) {
	for _, r := range name {
		if unicode.IsControl(r) {
			return r, true
		}
	}
	return 0, false
}
