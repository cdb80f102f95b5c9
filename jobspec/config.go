package jobspec

import (
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
)

// Config returns the kernels' configuration of the job, run with threads worker threads (0:
// all cores). A custom initialisation's factors are not read here: the caller that reads the
// data fills in Init.B0 and Init.C0.
func (s *Spec) Config(threads int) kernels.Config {
	return kernels.Config{Algo: s.Algo, K: s.Rank, Seed: s.Seed, Stop: s.Stop, Threads: threads,
		Init: kernels.InitSpec{Method: s.Init}, Options: s.Options()}
}

// Options returns the algorithms' options of the job: the one place a spec's knobs become
// the kernels', for the driver and for every shard alike.
func (s *Spec) Options() kernels.Options {
	return kernels.Options{Form: s.Form, Rho: s.Rho, Storage: s.Storage}
}

// Errorf returns the FieldError of a rule that needs the data (the rank against the input's
// shape, an initial factor's shape): field is one of the spec's fields as Validate names them
// ("input", "rank", "shards", "init_basis", "init_coef", "storage", ...), and format may
// name fields as {rank}, {init_basis}, ..., which read as wire names in Error and as flag
// names in FlagMsg.
func Errorf(field, format string, args ...any) *FieldError {
	return fieldErr(field, format, args...)
}

// New returns the spec of a job on inputs with every other field at the CLI's default: seed
// 1, init random, tol 1e-6, max-iter 1000, stall-tol report.DefaultStallTol, form, storage
// and layout auto, rho 1, the default fan-in, automatic checkpoints, shared ingest. Change
// what you need; didnmf.Open validates it.
func New(inputs []string, algo kernels.Algorithm, rank, shards int) *Spec {
	return &Spec{Inputs: inputs, Algo: algo, Rank: rank, Shards: shards, Seed: 1, Init: kernels.InitRandom,
		Stop: kernels.StopRule{Tol: kernels.DefaultStopRule.Tol, MaxIter: kernels.DefaultStopRule.MaxIter, StallTol: report.DefaultStallTol},
		Form: kernels.FormAuto, Storage: kernels.StorageAuto, Layout: matio.LayoutAuto, Rho: 1, FanIn: DefaultFanIn,
		CheckpointEvery: -1, Ingest: IngestShared}
}
