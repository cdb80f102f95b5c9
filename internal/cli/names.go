package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// maxNameBytes bounds one name of a names file (--feature-names, --sample-names): a line
// without its newline.
const maxNameBytes = 4096

// namesFlags are factorize's and transform's flags about the names in the .tsv outputs.
type namesFlags struct {
	features, samples string // --feature-names, --sample-names: files, one name a line
	coefTSV           bool   // --coef-tsv
}

func (nf *namesFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&nf.features, "feature-names", "", "name the features (the rows of basis.tsv and top_features.tsv, or a sweep's consensus_basis_K.tsv and top_features_K.tsv) by the lines of `FILE`: one name a line, UTF-8, no tabs, as many as the input has features; over the names the input carries")
	fs.StringVar(&nf.samples, "sample-names", "", "name the samples (coef.tsv's rows, with --coef-tsv) by the lines of `FILE`, as --feature-names does the features")
	fs.BoolVar(&nf.coefTSV, "coef-tsv", false, "also write coef.tsv into --out: coef as text, a row per sample under its name (or 0-based index), a column per component (not with --out-shared, where the nodes write the coef)")
}

// check refuses the names flags where the outputs they are for are not written by this
// client: a detached job's nodes write only the .npy files, and with --out-shared they write
// the coef.
func (nf *namesFlags) check(jf *jobFlags) error {
	if jf.detach {
		for _, f := range []struct {
			given bool
			flag  string
		}{{nf.features != "", "--feature-names"}, {nf.samples != "", "--sample-names"}, {nf.coefTSV, "--coef-tsv"}} {
			if f.given {
				return badInput("%s is for the .tsv outputs this client writes into --out: a detached job's nodes write only coef.npy, basis.npy and report.json", f.flag)
			}
		}
	}
	if nf.coefTSV && jf.outShared != "" {
		return badInput("--coef-tsv: with --out-shared the shards write the coef into %s on the nodes, and this client, which would write coef.tsv, never holds it: drop --out-shared, or read %s", jf.outShared, filepath.Join(jf.outShared, "coef.npy"))
	}
	if nf.samples != "" && !nf.coefTSV {
		return badInput("--sample-names names the rows of coef.tsv: it needs --coef-tsv")
	}
	return nil
}

// outputNames are the names the outputs carry, with the file each list came from, to check
// them against the result when the shape was not known before the run.
type outputNames struct {
	didnmf.Names
	// featuresFile and samplesFile are the files the lists were read from ("": none).
	featuresFile, samplesFile string
}

// namesFor returns the names of the outputs of a job on inputs with m features and n
// samples (0: not known before the run; the files are then checked here and read by fit
// after it), in this order, each over the one before:
//
//  1. for a transform (basis: its basis file, of k columns), the names in the basis.tsv
//     that factorize wrote beside a basis.npy (figures.ReadBasisTSVNames; a basis.tsv that
//     does not fit is told to warn and left out);
//  2. the names the inputs carry (matio.ReadNames: a 10x directory's features and barcodes, a
//     block store's, the FILE.features.tsv and FILE.samples.tsv beside a file), when this
//     process can read the inputs: a cluster's nodes may read a path this client does not
//     see, and the outputs are then numbered, with a warning;
//  3. the files of --feature-names and --sample-names (the samples' only with --coef-tsv).
//
// It is the one place where names enter the outputs.
func namesFor(nf *namesFlags, inputs []string, basis string, k, m, n int, warn func(string)) (*outputNames, error) {
	o := &outputNames{}
	if basis != "" && m > 0 && nf.features == "" && filepath.Base(basis) == figures.BasisFile {
		names, err := figures.ReadBasisTSVNames(filepath.Join(filepath.Dir(basis), figures.BasisTSVFile), m, k)
		if err != nil {
			warn(fmt.Sprintf("%v: the features are numbered", err))
		}
		o.Features = names
	}
	in, err := inputNames(inputs, nf, warn)
	if err != nil {
		return nil, err
	}
	if in.Features != nil {
		o.Features = in.Features
	}
	if nf.coefTSV {
		o.Samples = in.Samples
	}
	if nf.features != "" {
		if o.Features, err = readNamesFile("--feature-names", nf.features, m, "features"); err != nil {
			return nil, err
		}
		o.featuresFile = nf.features
	}
	if nf.samples != "" && nf.coefTSV {
		if o.Samples, err = readNamesFile("--sample-names", nf.samples, n, "samples"); err != nil {
			return nil, err
		}
		o.samplesFile = nf.samples
	}
	for _, l := range []struct {
		what, rows string
		names      []string
	}{{"feature", "basis.tsv and top_features.tsv", o.Features}, {"sample", "coef.tsv", o.Samples}} {
		if w := duplicateNames(l.what, l.rows, l.names); w != "" {
			warn(w)
		}
	}
	return o, nil
}

// duplicateNames says which names of a list are not unique ("" when all are): the first one
// repeated, with its two positions (1-based, as the lines of a names file), and how many
// names are repeats. Duplicates are allowed (gene symbols repeat in many annotations), but the
// rows they name cannot be told apart.
func duplicateNames(what, rows string, names []string) string {
	first := make(map[string]int, len(names))
	repeats, dupName, at1, at2 := 0, "", 0, 0
	for i, nm := range names {
		if j, ok := first[nm]; ok {
			if repeats == 0 {
				dupName, at1, at2 = nm, j+1, i+1
			}
			repeats++
			continue
		}
		first[nm] = i
	}
	if repeats == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s name(s) repeat an earlier one (the first: %q, names %d and %d): those rows of %s cannot be told apart by name",
		repeats, what, dupName, at1, at2, rows)
}

// inputNames returns the names the inputs carry, as matio.ReadNames reads them, unless the
// flags name both lists. An input this process cannot open (a path only the nodes see) gives
// a warning and no names; a names file that does not fit its input is the user's error.
func inputNames(inputs []string, nf *namesFlags, warn func(string)) (matio.Names, error) {
	if len(inputs) == 0 || (nf.features != "" && (nf.samples != "" || !nf.coefTSV)) {
		return matio.Names{}, nil
	}
	names, err := matio.ReadNames(matio.OpenInput, inputs)
	switch {
	case err == nil:
		return names, nil
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		warn(fmt.Sprintf("the input's names are not read here (%v): the outputs number the features", err))
		return matio.Names{}, nil
	}
	return matio.Names{}, usererr.Wrap(err)
}

// fit checks the names against a result of m features and n samples, reading the files
// whose count was not known before the run: an error naming the file, the line and both
// counts when one does not fit.
func (o *outputNames) fit(m, n int) error {
	var err error
	if o.featuresFile != "" && o.Features == nil {
		if o.Features, err = readNamesFile("--feature-names", o.featuresFile, m, "features"); err != nil {
			return err
		}
	}
	if o.samplesFile != "" && o.Samples == nil {
		if o.Samples, err = readNamesFile("--sample-names", o.samplesFile, n, "samples"); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		flag, file, what string
		names            []string
		want             int
	}{{"--feature-names", o.featuresFile, "features", o.Features, m}, {"--sample-names", o.samplesFile, "samples", o.Samples, n}} {
		if l.names == nil || len(l.names) == l.want {
			continue
		}
		if l.file == "" { // names from the inputs or the basis, whose readers check them
			return badInput("%d names of %s for the result's %d", len(l.names), l.what, l.want)
		}
		return countErr(l.flag, l.file, len(l.names), l.want, l.what)
	}
	return nil
}

// countErr is the error of a names file of got names where the input has want.
func countErr(flagName, path string, got, want int, what string) error {
	if got < want {
		return badInput("%s %s:%d: the file ends after %d names, but the input has %d %s (want one name a line)", flagName, path, got+1, got, want, what)
	}
	return badInput("%s %s:%d: %d names, but the input has %d %s (want one name a line)", flagName, path, want+1, got, want, what)
}

// readNamesFile reads a names file given as flagName: one name a line ("\n" or "\r\n"; the
// last line may lack its newline), UTF-8 (a byte order mark is skipped), no tabs, none empty,
// each at most maxNameBytes, and exactly want of them. With want 0 (the count is not known
// yet) it checks the file and returns no names: fit reads it again once the count is known.
// Errors are input errors naming the flag, the file and the line. It keeps no more than want
// names in memory: past them it only counts the lines, for the error.
func readNamesFile(flagName, path string, want int, what string) ([]string, error) {
	f, err := matio.OpenInput(path) // never blocks: a FIFO or a device is refused, by name
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, badInput("%s %s: no such file", flagName, path)
		case usererr.Is(err):
			return nil, badInput("%s %v", flagName, err)
		}
		return nil, badInput("%s %s: %v", flagName, path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, badInput("%s %s: %v", flagName, path, err)
	} else if !st.Mode().IsRegular() {
		return nil, badInput("%s %s: not a regular file", flagName, path)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxNameBytes+2) // the name, "\r\n"
	var names []string
	line := 0
	for sc.Scan() {
		line++
		at := func(format string, args ...any) error {
			return badInput("%s %s:%d: "+format, append([]any{flagName, path, line}, args...)...)
		}
		b := sc.Bytes()
		if line == 1 {
			b = trimBOM(b)
		}
		switch {
		case len(b) == 0:
			return nil, at("an empty name (want one name a line, as many as the input has %s)", what)
		case len(b) > maxNameBytes:
			return nil, at("a name longer than %d bytes", maxNameBytes)
		case !utf8.Valid(b):
			return nil, at("not UTF-8")
		case strings.ContainsAny(string(b), "\t\r"):
			return nil, at("a tab or carriage return in the name: the .tsv outputs separate their columns by tabs")
		}
		if r, bad := matio.ControlInName(string(b)); bad {
			return nil, at("the name %q holds the control character %U (names go to .tsv files and the terminal)", string(b), r)
		}
		if len(names) < want {
			names = append(names, string(b))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, badInput("%s %s:%d: a name longer than %d bytes", flagName, path, line+1, maxNameBytes)
		}
		return nil, badInput("%s %s: %v", flagName, path, err)
	}
	if line == 0 {
		if want > 0 {
			return nil, badInput("%s %s:1: the file is empty, but the input has %d %s (want one name a line)", flagName, path, want, what)
		}
		return nil, badInput("%s %s:1: the file is empty (want one name a line)", flagName, path)
	}
	if want > 0 && line != want {
		return nil, countErr(flagName, path, line, want, what)
	}
	return names, nil
}

// trimBOM drops a UTF-8 byte order mark at the start of b.
func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}
