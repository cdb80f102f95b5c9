package didnmf

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/sweep"
	"github.com/didnmf/didnmf/usererr"
)

// cNMF's consensus in full (Kotliar et al., eLife 2019), on a saved sweep: the spectra of
// one rank's runs (spectra_K.npy, which SweepResult.Save writes) are filtered by their local
// density, clustered, and each cluster's median is a consensus program (ReadSpectra,
// Spectra.Consensus); the usages are then refit against the consensus programs by the
// distributed transform (Runner.Consensus), so no samples x features dense matrix is ever
// formed.

// MaxSweepReportBytes bounds the sweep.json that ReadSpectra reads: a sweep of MaxSweepRuns
// runs writes about 10 MB.
const MaxSweepReportBytes = 32 << 20

// maxSweepReportObjects bounds the JSON objects of a sweep.json, and MaxSweepRuns the
// elements of any one of its arrays, before it is decoded: an object of a few bytes ("{}")
// decodes into a struct of hundreds, so the byte bound alone would let a small file take
// gigabytes. A sweep writes an object per run and per rank, one per poor fit (fewer than its
// runs) and a few more.
const maxSweepReportObjects = 3*MaxSweepRuns + 100

// maxSweepReportDepth bounds how deep a sweep.json nests (a sweep's nests 4 deep): the
// decoder keeps a frame a level, so "[[[[..." alone would take gigabytes.
const maxSweepReportDepth = 16

// checkJSONCounts scans data's tokens without keeping them and refuses more than maxObjects
// objects in all, an array of more than maxElems elements, or nesting deeper than
// maxSweepReportDepth.
func checkJSONCounts(data []byte, maxObjects, maxElems int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var elems []int // the elements counted in each open array; -1 for an open object
	objects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		// A token directly in an array, other than its end, begins an element (an object's
		// keys and values sit a level deeper, in the object).
		closing := tok == json.Delim(']') || tok == json.Delim('}')
		if n := len(elems); n > 0 && elems[n-1] >= 0 && !closing {
			if elems[n-1]++; elems[n-1] > maxElems {
				return fmt.Errorf("an array of more than %d elements", maxElems)
			}
		}
		if (tok == json.Delim('[') || tok == json.Delim('{')) && len(elems) >= maxSweepReportDepth {
			return fmt.Errorf("nested deeper than %d", maxSweepReportDepth)
		}
		switch tok {
		case json.Delim('['):
			elems = append(elems, 0)
		case json.Delim('{'):
			if objects++; objects > maxObjects {
				return fmt.Errorf("more than %d objects", maxObjects)
			}
			elems = append(elems, -1)
		case json.Delim(']'), json.Delim('}'):
			elems = elems[:len(elems)-1]
		}
	}
}

// Spectra are the spectra of one rank of a saved sweep: every run's basis, columns scaled to
// unit L2 norm.
type Spectra struct {
	// Dir is the sweep's directory; File the spectra's file in it.
	Dir, File string
	// K is the rank, M the number of features.
	K, M int
	// Runs are the runs whose bases these are, in the order of Bases (sweep.json's runs of
	// rank K).
	Runs []SweepReportRun
	// Bases are the runs' bases, each M x K column-major (column p of run r is
	// Bases[r][p*M:(p+1)*M]).
	Bases [][]float64
	// Transform is what the sweep fitted (sweep.json's transform; "" for none): with
	// TransformSqrt the spectra are of sqrt(X), and Runner.Consensus refits the usages on
	// sqrt(X) too.
	Transform SweepTransform
	// Input is the sweep's input as sweep.json names it (the paths the sweep was given).
	// Samples is its number of samples, as the records of the rank's runs in the sweep's
	// journal (Dir/runs) say, or else sweep.json; 0 when neither says (a sweep saved without
	// a journal by a didnmf before sweep.json said it): CheckInput then does not check the
	// samples.
	Input   []string
	Samples int
	// inputs are the sweep's inputs as its journal's fingerprint (Dir/runs/journal.json)
	// describes them, and journalTransform its transform; nil and "" when it cannot be read.
	inputs           []sweepInputPrint
	journalTransform string
}

// RefitTransform returns the transform a refit against sp's consensus reads the input with:
// the sweep's, so that the usages are on the spectra's scale. asked is the job's own: ""
// takes the sweep's; any other (none included) must be the sweep's, else it is the user's
// error naming the field transform, what was asked and what the sweep fitted.
func (sp *Spectra) RefitTransform(asked SweepTransform) (SweepTransform, error) {
	if asked == "" || cmp.Or(asked, TransformNone) == cmp.Or(sp.Transform, TransformNone) {
		return sp.Transform, nil
	}
	fitted, scale := TransformNone, "the input's values"
	if sp.Transform.On() {
		fitted, scale = sp.Transform, string(sp.Transform)+"(X)"
	}
	return "", usererr.Field("transform", "{transform} %s: the sweep %s fitted {transform} %s (its spectra %s are of %s); give {transform} %s or leave it out, and the refit reads the input as the sweep did",
		asked, sp.Dir, fitted, filepath.Join(sp.Dir, sp.File), scale, fitted)
}

// CheckInput checks the input of a refit against sp's consensus, inputs (as the job names
// them) of features x samples (0: not known here, not checked), against the sweep's: a
// consensus refits the usages of the sweep's own input. Other features than the spectra's,
// or other samples than the sweep's runs recorded, are the user's error naming the field
// input, the input, the sweep and its input, and what differs; the usages of other samples
// with the same features are those of a transform for the consensus basis (didnmf transform
// --basis). An input of the sweep's shape is not refused; warning (a *usererr.Error naming the
// field input, for the caller to show) is then not nil when the sweep's journal says that it
// is not the file the sweep read, or that this file changed since.
func (sp *Spectra) CheckInput(inputs []string, features, samples int) (warning, err error) {
	name := strings.Join(inputs, " + ")
	var got, want []string
	if samples > 0 && sp.Samples > 0 && samples != sp.Samples {
		got, want = append(got, fmt.Sprintf("%d samples", samples)), append(want, fmt.Sprintf("%d samples", sp.Samples))
	}
	if features > 0 && features != sp.M {
		got, want = append(got, fmt.Sprintf("%d features", features)), append(want, fmt.Sprintf("%d features", sp.M))
	}
	if len(got) > 0 {
		advice := ""
		if len(got) == 1 && samples != sp.Samples {
			advice = fmt.Sprintf("; the usages of other samples of the same features are a transform for the consensus basis: after this consensus, didnmf transform --basis OUT/basis.npy --input %s", name)
		}
		return nil, usererr.Field("input", "{input} %s has %s; the sweep %s was of %s, %s (its spectra %s are features x spectra = %d x %d): a consensus refits the usages of the sweep's own input%s",
			name, strings.Join(got, " and "), sp.Dir, sp.inputName(), strings.Join(want, " and "), filepath.Join(sp.Dir, sp.File), sp.M, sp.K*len(sp.Runs), advice)
	}
	if len(sp.inputs) != len(inputs) {
		return nil, nil
	}
	var warns []string
	for i, in := range inputs {
		theirs, ours := sp.inputs[i], inputPrint(in)
		if matio.IsSynthetic(theirs.Path) || matio.IsSynthetic(in) { // specs: what they say is the matrix
			if !matio.SameSynthetic(theirs.Path, in) {
				warns = append(warns, fmt.Sprintf("%s is not the input the sweep %s read, %s", in, sp.Dir, theirs.Path))
			}
			continue
		}
		if !theirs.Stat || !ours.Stat {
			continue // a path only a cluster's nodes see
		}
		now := inputPrint(theirs.Abs)
		if !now.Stat {
			warns = append(warns, fmt.Sprintf("%s cannot be checked against the file the sweep %s read, %s, which is gone", in, sp.Dir, theirs.Abs))
			continue
		}
		same := false
		if a, err := os.Stat(theirs.Abs); err == nil {
			if b, err := os.Stat(ours.Abs); err == nil {
				same = os.SameFile(a, b)
			}
		}
		switch {
		case same && (now.Size != theirs.Size || now.ModTime != theirs.ModTime):
			warns = append(warns, fmt.Sprintf("%s changed since the sweep %s read it (%d bytes, modified %s; now %d bytes, modified %s)",
				in, sp.Dir, theirs.Size, theirs.ModTime, now.Size, now.ModTime))
		case !same && (now.Stat || ours.Size != theirs.Size):
			warns = append(warns, fmt.Sprintf("%s is not the file the sweep %s read, %s (%d bytes, modified %s)", in, sp.Dir, theirs.Abs, theirs.Size, theirs.ModTime))
		}
	}
	if len(warns) == 0 {
		return nil, nil
	}
	return usererr.Field("input", "{input} %s: it has the sweep's shape, and its usages are refit; check that it holds the matrix the sweep factorized", strings.Join(warns, "; ")), nil
}

// inputName names the sweep's input: its journal's absolute paths when it recorded them, else
// sweep.json's.
func (sp *Spectra) inputName() string {
	var names []string
	for _, in := range sp.inputs {
		names = append(names, cmp.Or(in.Abs, in.Path))
	}
	if len(names) == 0 {
		names = sp.Input
	}
	if len(names) == 0 {
		return "an input sweep.json does not name"
	}
	return strings.Join(names, " + ")
}

// readSweepInput reads what the sweep's journal (dir/runs) says of its input: the fingerprint
// of its inputs, and the samples of the first of runs that has a record. The journal is
// optional (a sweep saved by SweepResult.Save keeps none): what cannot be read is left out.
func (sp *Spectra) readSweepInput(dir string, runs []SweepReportRun) {
	jdir := filepath.Join(dir, SweepJournalDir)
	if fp, err := readFingerprint(filepath.Join(jdir, sweepJournalFile), jdir, len(runs)); err == nil {
		sp.inputs = fp.Inputs
		sp.journalTransform = fp.Spec["transform"]
	}
	for _, r := range runs {
		path := filepath.Join(jdir, runFileBase(r.K, r.Seed, r.Fold)+".json")
		data, err := readBounded(path, MaxSweepRecordBytes, "a run's record")
		if err != nil {
			continue
		}
		if rec, err := decodeSweepRecord(path, r.K, r.Seed, r.Fold, data); err == nil && rec.M == sp.M {
			sp.Samples = rec.N
			return
		}
	}
}

// ReadSpectra reads the spectra of rank k from the sweep saved in dir: dir/sweep.json and
// the spectra file its summary of rank k names. Both are checked as hostile: a file that
// cannot be read, a rank the sweep did not run, a spectra file that is not a plain name in
// dir, of the wrong shape (features x (K x runs), runs those of rank k in sweep.json), or
// with a NaN, an infinite or a negative value or fewer than k columns that are not zero, or
// a FIFO or device in place of a file, is the user's error (usererr), naming the
// file and the field or entry.
func ReadSpectra(dir string, k int) (*Spectra, error) {
	jsonPath := filepath.Join(dir, "sweep.json")
	// Bounded before it is read; a FIFO or a device (which would never end) is refused.
	data, err := readBounded(jsonPath, MaxSweepReportBytes, "a sweep's report")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usererr.At(jsonPath, "cannot read the sweep's report (is %s the --out of a didnmf sweep?): no such file", dir)
	}
	if err != nil {
		return nil, err
	}
	if err := checkJSONCounts(data, maxSweepReportObjects, MaxSweepRuns); err != nil {
		return nil, usererr.At(jsonPath, "not a sweep report: %v", err)
	}
	var rep SweepReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, usererr.At(jsonPath, "not a sweep report: %v", err)
	}
	tr, err := matio.ParseTransform(rep.Transform)
	if err != nil {
		return nil, usererr.At(jsonPath, "%v", err)
	}
	ri := slices.IndexFunc(rep.PerRank, func(r SweepReportRank) bool { return r.K == k })
	if ri < 0 {
		var ks []string
		for _, r := range rep.PerRank {
			if len(ks) == 20 {
				ks = append(ks, fmt.Sprintf("... (%d ranks)", len(rep.PerRank)))
				break
			}
			ks = append(ks, fmt.Sprint(r.K))
		}
		return nil, usererr.At(jsonPath, "ranks_summary has no rank K = %d (the sweep summarized K = %s)", k, strings.Join(ks, ", "))
	}
	name := rep.PerRank[ri].Spectra
	switch {
	case name == "":
		return nil, usererr.At(jsonPath, "ranks_summary[%d] (K = %d) names no spectra file: the sweep was saved by a didnmf that did not write them; run the sweep again", ri, k)
	case name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `/\`):
		return nil, usererr.At(jsonPath, "ranks_summary[%d].spectra %q is not a file name in the sweep's directory", ri, name)
	}
	var runs []SweepReportRun
	for _, r := range rep.Runs {
		if r.K == k {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil, usererr.At(jsonPath, "runs holds no run of rank K = %d, yet ranks_summary does", k)
	}
	if k < 1 || len(runs) > sweep.MaxPoints/k {
		return nil, usererr.At(jsonPath, "%d runs of rank %d make more than %d spectra", len(runs), k, sweep.MaxPoints)
	}
	path := filepath.Join(dir, name)
	rows, cols, vals, err := matio.ReadNPYMatrix(path)
	if err != nil {
		if strings.Contains(err.Error(), path) { // matio's and os's errors name the file
			return nil, usererr.Wrap(err)
		}
		return nil, usererr.At(path, "%v", err)
	}
	if rows < 1 || cols != k*len(runs) {
		return nil, usererr.At(path, "shape %d x %d; want features x (K x runs) = features x (%d x %d) = features x %d, as %s says",
			rows, cols, k, len(runs), k*len(runs), jsonPath)
	}
	if rep.Features > 0 && rows != rep.Features {
		// One of the two files is not this sweep's: say so, rather than let the input's
		// check call the sweep's input one of another shape.
		return nil, usererr.At(path, "shape %d x %d: %d rows, but %s says the sweep's input had %d features (a row each): the files disagree "+
			"(one was changed, or comes from another sweep)", rows, cols, rows, jsonPath, rep.Features)
	}
	sp := &Spectra{Dir: dir, File: name, K: k, M: rows, Runs: runs, Bases: make([][]float64, len(runs)), Input: rep.Input}
	sp.readSweepInput(dir, runs)
	if j := sp.journalTransform; j != "" && j != cmp.Or(rep.Transform, string(TransformNone)) {
		return nil, usererr.At(jsonPath, "transform %q, but the runs' journal %s says %s: the files disagree on what the runs fitted",
			rep.Transform, filepath.Join(dir, SweepJournalDir, sweepJournalFile), shownValue(j))
	}
	if sp.Samples == 0 && rep.Features == rows && rep.Samples > 0 {
		sp.Samples = rep.Samples // the runs' records, which say it too, have been removed
	}
	if tr.On() {
		sp.Transform = tr
	}
	for r := range sp.Bases {
		b := make([]float64, rows*k)
		for p := 0; p < k; p++ {
			c := r*k + p
			for f := 0; f < rows; f++ {
				v := vals[f*cols+c]
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return nil, usererr.At(path, "value %v at row (feature) %d, column %d (run %d, component %d): spectra are finite and nonnegative", v, f, c, r, p)
				}
				b[p*rows+f] = v
			}
		}
		sp.Bases[r] = b
	}
	// A column is a run's component (scaled to unit L2 norm by the sweep; the consensus
	// scales it again, so its scale does not matter) or zero, a component the run switched
	// off. A consensus needs K components that are not zero.
	nonzero := 0
	for _, b := range sp.Bases {
		for p := 0; p < k; p++ {
			if slices.ContainsFunc(b[p*rows:(p+1)*rows], func(v float64) bool { return v != 0 }) {
				nonzero++
			}
		}
	}
	if nonzero < k {
		return nil, usererr.At(path, "%d of its %d columns are zero: a consensus of K = %d needs at least %d components the runs did not switch off", k*len(runs)-nonzero, k*len(runs), k, k)
	}
	return sp, nil
}

// ConsensusOptions are the options of Spectra.Consensus.
type ConsensusOptions struct {
	// Filter is cNMF's density filter; a zero Threshold or NeighborhoodSize is cNMF's
	// default (sweep.DefaultFilter).
	Filter sweep.Filter
	// Seed seeds the k-means++ starts (sweep.ConsensusSeed is what the sweep's summary
	// uses).
	Seed uint64
}

// Consensus is the consensus of one rank of a sweep: Spectra.Consensus's result.
type Consensus struct {
	// Spectra are the spectra it was made from.
	Spectra *Spectra
	// Options are the options it was made with (the filter's defaults filled in).
	Options ConsensusOptions
	// Filtered is the filter's and the clustering's outcome (sweep.FilteredConsensus):
	// densities, labels, cluster sizes, silhouette and the consensus basis, column-major.
	Filtered sweep.Filtered
}

// Consensus filters the spectra by their local density, clusters the kept ones into K
// programs and takes each cluster's median (scaled to sum 1, as cNMF does): see
// sweep.FilteredConsensus. Errors are the user's (usererr).
func (sp *Spectra) Consensus(o ConsensusOptions) (*Consensus, error) {
	d := sweep.DefaultFilter()
	if o.Filter.Threshold == 0 {
		o.Filter.Threshold = d.Threshold
	}
	if o.Filter.NeighborhoodSize == 0 {
		o.Filter.NeighborhoodSize = d.NeighborhoodSize
	}
	fc, err := sweep.FilteredConsensus(sp.Bases, sp.M, sp.K, o.Seed, o.Filter)
	if err != nil {
		return nil, err
	}
	return &Consensus{Spectra: sp, Options: o, Filtered: fc}, nil
}

// Basis is the consensus basis as basis.npy holds it: M x K row-major.
func (c *Consensus) Basis() []float64 {
	return kernels.Transpose(c.Filtered.Basis, c.Filtered.M, c.Filtered.K)
}

// WriteBasis writes the consensus basis to path as .npy (features x K), whole or not at
// all: the file a transform reads.
func (c *Consensus) WriteBasis(path string) error {
	return writeNPYFile(path, c.Filtered.M, c.Filtered.K, c.Basis())
}

// ConsensusReport is consensus.json: what the filter and the clustering did.
type ConsensusReport struct {
	Sweep   string `json:"sweep"`
	Spectra string `json:"spectra"`
	// Transform is what the sweep fitted and the refit reads ("sqrt"; absent: the input's
	// values).
	Transform string `json:"transform,omitempty"`
	K         int    `json:"k"`
	// Runs is the number of runs, Spectra K x Runs of them.
	Runs       int `json:"runs"`
	Components int `json:"components"`
	// DensityThreshold and LocalNeighborhoodSize are the filter's (cNMF's names), Neighbors
	// the nearest components each density is over.
	DensityThreshold      float64 `json:"density_threshold"`
	LocalNeighborhoodSize float64 `json:"local_neighborhood_size"`
	Neighbors             int     `json:"neighbors"`
	KMeansSeed            uint64  `json:"kmeans_seed"`
	Kept                  int     `json:"kept"`
	FilteredCount         int     `json:"filtered"`
	// Silhouette is the mean silhouette of the kept spectra in their clusters (null when not
	// defined), ClusterSilhouettes each cluster's, ClusterSizes each cluster's kept spectra,
	// in the order of the basis's columns.
	Silhouette         *float64   `json:"silhouette"`
	ClusterSilhouettes []*float64 `json:"cluster_silhouettes"`
	ClusterSizes       []int      `json:"cluster_sizes"`
	// Density sums up the local densities of all the spectra.
	Density ConsensusDensity `json:"density"`
	// FilteredSpectra are the spectra the filter dropped.
	FilteredSpectra []FilteredSpectrum `json:"filtered_spectra"`
	// Basis normalization, in words.
	BasisScale string `json:"basis_scale"`
}

// ConsensusDensity sums up the local densities.
type ConsensusDensity struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// FilteredSpectrum is a spectrum the density filter dropped: column Column of the spectra
// file, component Component of run Run (0-based among the rank's runs in sweep.json) of
// seed Seed and fold Fold.
type FilteredSpectrum struct {
	Column    int     `json:"column"`
	Run       int     `json:"run"`
	Seed      int     `json:"seed"`
	Fold      int     `json:"fold"`
	Component int     `json:"component"`
	Density   float64 `json:"density"`
}

// Report is consensus.json's content.
func (c *Consensus) Report() ConsensusReport {
	fc, sp := c.Filtered, c.Spectra
	rep := ConsensusReport{Sweep: sp.Dir, Spectra: sp.File, Transform: string(sp.Transform), K: fc.K, Runs: fc.Runs, Components: fc.K * fc.Runs,
		DensityThreshold: c.Options.Filter.Threshold, LocalNeighborhoodSize: c.Options.Filter.NeighborhoodSize,
		Neighbors: fc.Density.Neighbors, KMeansSeed: c.Options.Seed, Kept: fc.Density.NumKept,
		FilteredCount: fc.K*fc.Runs - fc.Density.NumKept, Silhouette: jsonNumber(fc.Silhouette),
		ClusterSizes: fc.ClusterSizes, FilteredSpectra: []FilteredSpectrum{},
		BasisScale: "each column is the median of its cluster's unit-norm spectra, scaled to sum 1 (cNMF's)"}
	for _, s := range fc.ClusterSilhouettes {
		rep.ClusterSilhouettes = append(rep.ClusterSilhouettes, jsonNumber(s))
	}
	for i, ok := range fc.Density.Kept {
		if !ok {
			r := i / fc.K
			rep.FilteredSpectra = append(rep.FilteredSpectra, FilteredSpectrum{Column: i, Run: r, Seed: sp.Runs[r].Seed,
				Fold: sp.Runs[r].Fold, Component: i % fc.K, Density: fc.Density.Values[i]})
		}
	}
	v := slices.Sorted(slices.Values(fc.Density.Values))
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	rep.Density = ConsensusDensity{Min: v[0], Median: med, Max: v[len(v)-1]}
	return rep
}

// WriteReport writes consensus.json into dir, whole or not at all.
func (c *Consensus) WriteReport(dir string) error {
	js, err := json.MarshalIndent(c.Report(), "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "consensus.json"), append(js, '\n'), 0o644)
}

// TransformSpec edits a job's spec into the transform of its input for the basis in the
// file basisFile (features x k): what `didnmf transform --basis` runs. basisFile should be
// absolute on a cluster, whose nodes read it.
func TransformSpec(basisFile string, k int) func(*Spec) {
	return func(s *Spec) {
		s.Algo, s.Init, s.InitBasis, s.InitCoef, s.Rank = Transform, kernels.InitCustom, basisFile, "", k
		s.Stop.Tol, s.Stop.MaxIter, s.Stop.StallTol = 0, 1, 0
		if s.Layout == matio.LayoutAutoPath { // an opened job's auto, for an algorithm whose bits do not depend on it
			s.Layout = matio.LayoutAuto
		}
	}
}

// Consensus refits the usages of c's consensus programs on j's input: it writes the
// consensus basis to basisFile (.npy, features x K; made absolute, and on a cluster a path
// its nodes can read) and runs the transform of j's input for it on r's target (the job `didnmf transform
// --basis basisFile` runs: nonnegative least squares per sample, distributed over the
// shards; no samples x features dense matrix is formed). The result's basis is the
// consensus basis and its coef the usages. j must have been opened on r's target; it is not
// changed. Spectra of a sweep that fitted sqrt(X) (Spectra.Transform) are refitted on sqrt(X):
// the usages are then of sqrt(X), as the spectra are.
func (r *Runner) Consensus(ctx context.Context, j *Job, c *Consensus, basisFile string, opts Options) (*Result, error) {
	if c == nil || j == nil {
		return nil, errors.New("consensus: no job or no consensus")
	}
	if _, err := c.Spectra.CheckInput(j.Spec.Inputs, j.Features, j.Samples); err != nil {
		return nil, err
	}
	tr, err := c.Spectra.RefitTransform(j.Spec.Transform)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(basisFile); err == nil {
		basisFile = abs // a cluster's nodes resolve only absolute paths
	}
	if err := c.WriteBasis(basisFile); err != nil {
		return nil, err
	}
	t, err := j.Derive(func(s *Spec) {
		TransformSpec(basisFile, c.Filtered.K)(s)
		s.Transform = tr // spectra of sqrt(X): the usages are of sqrt(X)
	})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return r.Run(ctx, t, opts)
}
