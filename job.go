package didnmf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/server"
)

// Job is a spec opened for a target: validated, and checked against the data where this
// process reads it. Open returns one; Runner.Run runs it; Close releases its input.
type Job struct {
	// Spec is the validated spec. It is not changed by running the job.
	Spec *jobspec.Spec
	// Target is where the job runs.
	Target Target
	// Source is the input, open, when this process reads it (the driver and in-process
	// nodes); nil on a cluster, whose nodes read it or to which the client streams it.
	Source matio.Source
	// Samples and Features are the input's shape, when Source is open (else 0).
	Samples, Features int
	// init holds a custom initialisation's factors, read here for the driver.
	init kernels.InitSpec
	// openSeconds is the time opening the input took (MatrixMarket and IDX files are parsed
	// there).
	openSeconds float64
	// borrowed is set on a job made by Derive: its Source is its parent's, which closes it.
	borrowed bool
}

// Derive returns a job of the same input and target with the spec changed by edit (the rank
// and seed of a sweep, say), validated and checked against the data as Open does, without
// opening or reading the input again: the new job borrows this one's Source, which stays
// this job's to close (the derived job's Close leaves it open). The inputs must not change.
func (j *Job) Derive(edit func(*jobspec.Spec)) (*Job, error) {
	s := *j.Spec
	edit(&s)
	if !slices.Equal(s.Inputs, j.Spec.Inputs) {
		return nil, errors.New("a derived job reads the same inputs")
	}
	s.Layout = matio.AutoFor(s.Algo, s.Layout)
	if err := s.Validate(); err != nil {
		var fe *jobspec.FieldError
		if !errors.As(err, &fe) || fe.Field != "rank" || j.Source == nil {
			return nil, err
		}
	}
	d := &Job{Spec: &s, Target: j.Target, Source: j.Source, Samples: j.Samples, Features: j.Features,
		init: kernels.InitSpec{Method: s.Init}, borrowed: true}
	if d.Source != nil {
		if err := d.checkData(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Open validates spec, and, when this process reads the input (every target but a cluster),
// opens it and checks the job against it: the rank against the shape, the shards against the
// samples, a custom initialisation's files, and the memory the job needs against the memory
// available. Every error is an *InputError or a *jobspec.FieldError naming the field. The
// caller closes the job.
func Open(spec *jobspec.Spec, t Target) (*Job, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, &InputError{errors.New("no job spec")}
	}
	// The spec is copied: its layout auto becomes the one this kernel path reads fastest,
	// when the algorithm's bits allow (matio.AutoFor), and the caller's stays as given.
	s := *spec
	spec = &s
	spec.Layout = matio.AutoFor(spec.Algo, spec.Layout)
	if err := spec.Validate(); err != nil {
		var fe *jobspec.FieldError
		// Where the data is read here, the rank is checked against it below, with the range.
		if !errors.As(err, &fe) || fe.Field != "rank" || !t.readsInput() {
			return nil, err
		}
	}
	if err := checkPlacement(spec, t); err != nil {
		return nil, err
	}
	j := &Job{Spec: spec, Target: t, init: kernels.InitSpec{Method: spec.Init}}
	if !t.readsInput() {
		return j, nil
	}
	start := time.Now()
	// Storage: the blocks come stored as ReadBlocks will store them, so a counts matrix never
	// has a float64 copy.
	src, err := matio.OpenAllWithOptions(os.Open, spec.Inputs, matio.ReadOptions{Missing: spec.Missing, Storage: spec.Storage})
	if err != nil {
		return nil, inputErr(err)
	}
	j.Source, j.Features, j.Samples = src, src.Features(), src.Samples()
	j.openSeconds = time.Since(start).Seconds()
	if err := j.checkData(); err != nil {
		src.Close()
		return nil, err
	}
	return j, nil
}

// checkPlacement checks the rules of where the job runs.
func checkPlacement(spec *jobspec.Spec, t Target) error {
	if t.Cluster == nil {
		if spec.Ingest != jobspec.IngestShared || spec.OutShared != "" || spec.Detached {
			return &InputError{errors.New("ingest, out_shared and detached are for jobs on a cluster")}
		}
		return nil
	}
	if spec.Detached && spec.OutShared == "" {
		return &InputError{errors.New("a detached job writes its factors on the nodes: it needs out_shared")}
	}
	if spec.OutShared != "" && !filepath.IsAbs(spec.OutShared) {
		return &InputError{fmt.Errorf("out_shared %s: give an absolute path (the nodes' working directories differ)", spec.OutShared)}
	}
	if spec.Ingest == jobspec.IngestShared {
		for _, in := range spec.Inputs {
			if !strings.HasPrefix(in, "synthetic:") && !filepath.IsAbs(in) {
				return jobspec.Errorf("input", "{input} %s: give an absolute path with {ingest} shared (the nodes' working directories differ), or {ingest} stream", in)
			}
		}
		for _, f := range []struct{ field, path string }{{"init_basis", spec.InitBasis}, {"init_coef", spec.InitCoef}} {
			if f.path != "" && !filepath.IsAbs(f.path) {
				return jobspec.Errorf(f.field, "{"+f.field+"} %s: give an absolute path with {ingest} shared (the nodes read it), or {ingest} stream (this process reads it and streams it to them)", f.path)
			}
		}
	}
	return nil
}

// checkData checks the job against its open input.
func (j *Job) checkData() error {
	s, name := j.Spec, j.Source.Name()
	if err := kernels.CheckRankOf(s.Algo, s.Rank, j.Features, j.Samples); err != nil {
		return jobspec.Errorf("rank", "{rank}: %v for %s (%d samples x %d features)", err, name, j.Samples, j.Features)
	}
	if s.Shards > j.Samples {
		return jobspec.Errorf("shards", "{shards} %d is more than the %d samples of %s", s.Shards, j.Samples, name)
	}
	if s.Algo == kernels.Transform {
		if rows, k, _, err := matio.ReadNPYMatrix(s.InitBasis); err == nil && (rows != j.Features || k != s.Rank) {
			return jobspec.Errorf("init_basis", "the basis %s is %d x %d, but %s has %d features (want features x K = %d x %d)",
				s.InitBasis, rows, k, name, j.Features, j.Features, s.Rank)
		}
	}
	if s.Init == kernels.InitCustom {
		b0, err := readFactor(s.InitBasis, "init_basis", j.Features, s.Rank, "features x K")
		if err != nil {
			return err
		}
		var c0 []float64 // a transform's warm start is optional
		if s.InitCoef != "" {
			if c0, err = readFactor(s.InitCoef, "init_coef", j.Samples, s.Rank, "samples x K"); err != nil {
				return err
			}
		}
		// basis.npy is M x K row-major; kernels want B column-major. coef.npy (N x K
		// row-major) is C column-major already.
		j.init.B0, j.init.C0 = kernels.Transpose(b0, s.Rank, j.Features), c0
	}
	density := 0.0
	if stored, ok := matio.StoredEntries(j.Source); ok {
		density = float64(stored) / (float64(j.Features) * float64(j.Samples))
	}
	need := actors.JobFootprint(int64(j.Features), int64(j.Samples), int64(s.Rank), s.Shards, density, s.Layout)
	if avail := server.AvailableMemory(); need > avail {
		return jobspec.Errorf("input", "%s (%d samples x %d features, rank %d) needs about %s of memory for its data and factors; this machine has %s available: use a cluster, fewer samples, or {layout} sparse for sparse data",
			name, j.Samples, j.Features, s.Rank, cluster.FormatBytes(need), cluster.FormatBytes(avail))
	}
	return nil
}

// readFactor reads an initial factor file and checks its shape.
func readFactor(path, field string, rows, k int, what string) ([]float64, error) {
	r, c, data, err := matio.ReadNPYMatrix(path)
	if err != nil {
		return nil, jobspec.Errorf(field, "{"+field+"}: %v", err)
	}
	if r != rows || c != k {
		return nil, jobspec.Errorf(field, "{"+field+"} %s: shape (%d, %d), want %s = (%d, %d)", path, r, c, what, rows, k)
	}
	return data, nil
}

// Config returns the kernels' configuration of the job on its target's threads, a custom
// initialisation's factors included when this process read them.
func (j *Job) Config() kernels.Config {
	cfg := j.Spec.Config(j.Target.Threads)
	cfg.Init = j.init
	return cfg
}

// Name names the input: the source's name, or the inputs joined by " + " when this process
// does not read them.
func (j *Job) Name() string {
	if j.Source != nil {
		return j.Source.Name()
	}
	return strings.Join(j.Spec.Inputs, " + ")
}

// ReadBlocks reads the job's shard blocks from its open input, each stored as the spec's
// storage asks (narrowed as it is read, so the float64 copy of X is never all held).
func (j *Job) ReadBlocks() ([]kernels.Block, error) {
	if j.Source == nil {
		return nil, errors.New("the input is not read in this process")
	}
	r := kernels.ColumnRanges(j.Samples, j.Spec.Shards)
	blocks := make([]kernels.Block, j.Spec.Shards)
	for s := range blocks {
		b, err := j.Source.Read(r[s], r[s+1], j.Spec.Layout)
		if err != nil {
			return nil, inputErr(err)
		}
		if b, err = kernels.ApplyStorage(b, j.Spec.Storage); err != nil {
			var ie *kernels.InexactError
			if errors.As(err, &ie) {
				return nil, jobspec.Errorf("storage", "{storage} float32: %s: sample %d, feature %d: value %v is not exactly a float32 (use {storage} auto or float64)",
					j.Source.Name(), r[s]+ie.Col, ie.Row, ie.Value)
			}
			return nil, err
		}
		blocks[s] = b
	}
	return blocks, nil
}

// Close closes the job's input.
func (j *Job) Close() error {
	if j == nil || j.Source == nil || j.borrowed {
		return nil
	}
	return j.Source.Close()
}
