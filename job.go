package didnmf

import (
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// Job is a spec opened for a target: checked, and checked against the data where this
// process reads it. Open returns one; Runner.Run runs it; Close releases its input.
type Job struct {
	// Spec is the checked spec. It is not changed by running the job.
	Spec *Spec
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
// and seed of a sweep, say), checked against the data as Open does, without
// opening or reading the input again: the new job borrows this one's Source, which stays
// this job's to close (the derived job's Close leaves it open). The inputs must not change.
func (j *Job) Derive(edit func(*Spec)) (*Job, error) {
	s := *j.Spec
	edit(&s)
	if !slices.Equal(s.Inputs, j.Spec.Inputs) {
		return nil, errors.New("a derived job reads the same inputs")
	}
	s.Layout = matio.AutoFor(s.Algo, s.Layout)
	src := j.Source
	switch {
	case s.Transform.On() && !j.Spec.Transform.On():
		src = s.Transform.Apply(src) // the derived job reads the values through its transform
	case s.Transform.On() != j.Spec.Transform.On() || s.Transform.On() && s.Transform != j.Spec.Transform:
		return nil, errors.New("a derived job reads its input through its parent's transform, or adds one to a job without")
	}
	d := &Job{Spec: &s, Target: j.Target, Source: src, Samples: j.Samples, Features: j.Features,
		init: kernels.InitSpec{Method: s.Init}, borrowed: true}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// Open checks spec, and, when this process reads the input (every target but a cluster),
// opens it and checks the job against it: the rank against the shape, the shards against the
// samples, a custom initialisation's files, and the memory the job needs against the memory
// available (jobspec.Spec.CheckOn, the one check of a job). Every error that is the user's to
// fix is a *usererr.Error, naming the spec's field when it is about one. The caller closes
// the job.
func Open(spec *Spec, t Target) (*Job, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, usererr.Errorf("no job spec")
	}
	// The spec is copied: its layout auto becomes the one this kernel path reads fastest,
	// when the algorithm's bits allow (matio.AutoFor), and the caller's stays as given.
	s := *spec
	spec = &s
	spec.Layout = matio.AutoFor(spec.Algo, spec.Layout)
	j := &Job{Spec: spec, Target: t, init: kernels.InitSpec{Method: spec.Init}}
	if !t.readsInput() {
		return j, j.check()
	}
	// The spec first: a spec that breaks a rule opens no file.
	if err := spec.CheckBeforeData(j.cluster(false)); err != nil {
		return nil, err
	}
	start := time.Now()
	// Storage: the blocks come stored as ReadBlocks will store them, so a counts matrix never
	// has a float64 copy.
	src, err := matio.OpenAllWithOptions(matio.OpenInput, spec.Inputs, spec.ReadOptions())
	if err != nil {
		return nil, usererr.Wrap(err)
	}
	j.Source, j.Features, j.Samples = src, src.Features(), src.Samples()
	j.openSeconds = time.Since(start).Seconds()
	if err := j.check(); err != nil {
		src.Close()
		return nil, err
	}
	return j, nil
}

// cluster returns what the check knows of where the job runs; withData adds, for a job in
// this process, the memory available, which only the check against the data reads. That is
// read after this process has given back what earlier jobs freed (a sweep's or a benchmark's
// runs one after another): otherwise the freed heap it still holds counts as used, and at 1e8
// samples `bench --table2` refused every row after the first. Giving it back costs a
// collection, so the check before the data, which has no use for the figure, skips it.
func (j *Job) cluster(withData bool) jobspec.Cluster {
	if !j.Target.readsInput() {
		return jobspec.Cluster{Where: jobspec.Submitted}
	}
	c := jobspec.Cluster{Where: jobspec.InProcess}
	if withData {
		debug.FreeOSMemory()
		c.Memory = server.AvailableMemory()
	}
	return c
}

// check is the job's one check (jobspec.Spec.CheckOn): against its open input, after reading
// a custom initialisation's factors for the driver, when this process reads the input; the
// spec and where it runs otherwise.
func (j *Job) check() error {
	s := j.Spec
	if j.Source == nil {
		return s.CheckOn(nil, j.cluster(false))
	}
	d := &jobspec.Shape{Name: j.Source.Name(), Samples: j.Samples, Features: j.Features}
	if stored, ok := matio.StoredEntries(j.Source); ok {
		d.StoredEntries = stored
	}
	var b0, c0 []float64 // a transform's warm start (c0) is optional
	if s.Init == kernels.InitCustom {
		var err error
		if b0, d.InitBasis, err = readFactor(s.InitBasis, "init_basis"); err != nil {
			return err
		}
		if s.InitCoef != "" {
			if c0, d.InitCoef, err = readFactor(s.InitCoef, "init_coef"); err != nil {
				return err
			}
		}
	}
	if err := s.CheckOn(d, j.cluster(true)); err != nil {
		return err
	}
	if s.Init == kernels.InitCustom {
		// basis.npy is M x K row-major; kernels want B column-major. coef.npy (N x K
		// row-major) is C column-major already.
		j.init.B0, j.init.C0 = kernels.Transpose(b0, s.Rank, j.Features), c0
	}
	return nil
}

// readFactor reads an initial factor file, for the field that names it, and its shape.
func readFactor(path, field string) ([]float64, *[2]int, error) {
	r, c, data, err := matio.ReadNPYMatrix(path)
	if err != nil {
		return nil, nil, usererr.Field(field, "{"+field+"}: %w", err)
	}
	return data, &[2]int{r, c}, nil
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
			return nil, usererr.Wrap(err)
		}
		if b, err = kernels.ApplyStorage(b, j.Spec.Storage); err != nil {
			var ie *kernels.InexactError
			if errors.As(err, &ie) {
				return nil, usererr.Field("storage", "{storage} float32: %s: sample %d, feature %d: value %v is not exactly a float32 (use {storage} auto or float64)",
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
