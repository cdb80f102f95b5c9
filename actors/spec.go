package actors

import (
	"fmt"
	"math"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// DefaultFanIn is the reduce tree's default fan-in. With at most 8 shards the tree is a single
// reducer. Measured on 3 actor systems with 8 shards (DID, tiny matrix, so an iteration is one
// allreduce): 0.39 ms per iteration at fan-in 2, 0.30 ms at 4, 0.17 ms at 8.
const DefaultFanIn = 8

// parsedSpec is a job spec checked and turned into the kernels' types.
type parsedSpec struct {
	algo   kernels.AlgorithmInfo
	init   kernels.InitMethod
	form   kernels.Form
	layout matio.Layout
	stop   kernels.StopRule
	fanIn  int
}

// parseSpec checks everything in a job spec that does not need the data, and names the field
// that is wrong.
func parseSpec(s *messages.JobSpec) (*parsedSpec, error) {
	if s == nil {
		return nil, fmt.Errorf("no job spec")
	}
	var p parsedSpec
	var err error
	if len(s.Inputs) == 0 {
		return nil, fmt.Errorf("input: no input given")
	}
	if p.algo, err = kernels.LookupAlgorithm(kernels.Algorithm(s.Algorithm)); err != nil {
		return nil, fmt.Errorf("algorithm: %v", err)
	}
	if s.Rank <= 0 {
		return nil, fmt.Errorf("rank must be >= 1, got %d", s.Rank)
	}
	if s.Shards <= 0 {
		return nil, fmt.Errorf("shards must be >= 1, got %d", s.Shards)
	}
	if !p.algo.Distributed && s.Shards != 1 {
		return nil, fmt.Errorf("algorithm %s runs on one shard; shards %d needs a distributed algorithm (did, dbcd, dadmm, hpc-anls)", s.Algorithm, s.Shards)
	}
	init := s.Init
	if init == "" {
		init = string(kernels.InitRandom)
	}
	if p.init, err = kernels.ParseInitMethod(init); err != nil {
		return nil, fmt.Errorf("init: %v", err)
	}
	if (p.init == kernels.InitCustom) != (s.InitBasis != "" && s.InitCoef != "") {
		return nil, fmt.Errorf("init custom needs both init_basis and init_coef, and they need init custom")
	}
	form := s.Form
	if form == "" {
		form = "auto"
	}
	if p.form, err = kernels.ParseForm(form); err != nil {
		return nil, fmt.Errorf("form: %v", err)
	}
	layout := s.Layout
	if layout == "" {
		layout = "auto"
	}
	if p.layout, err = matio.ParseLayout(layout); err != nil {
		return nil, fmt.Errorf("layout: %v", err)
	}
	if s.Rho < 0 || math.IsNaN(s.Rho) || math.IsInf(s.Rho, 0) {
		return nil, fmt.Errorf("rho must be a positive number, got %v", s.Rho)
	}
	st := s.Stop
	if st == nil {
		st = &messages.StopRule{Tol: kernels.DefaultStopRule.Tol, MaxIter: int64(kernels.DefaultStopRule.MaxIter)}
	}
	if math.IsNaN(st.TimeLimitSeconds) || st.TimeLimitSeconds < 0 || st.TimeLimitSeconds > math.MaxInt64/1e9 {
		return nil, fmt.Errorf("time limit must be >= 0 seconds, got %v", st.TimeLimitSeconds)
	}
	if st.MaxIter > math.MaxInt32 || st.StallWindow > math.MaxInt32 || st.StallWindow < 0 {
		return nil, fmt.Errorf("max-iter %d or stall window %d out of range", st.MaxIter, st.StallWindow)
	}
	p.stop = kernels.StopRule{Tol: st.Tol, MaxIter: int(st.MaxIter), StallTol: st.StallTol, StallWindow: int(st.StallWindow),
		TimeLimit: time.Duration(st.TimeLimitSeconds * float64(time.Second))}
	if err := p.stop.Validate(); err != nil {
		return nil, err
	}
	p.fanIn = int(s.FanIn)
	if p.fanIn == 0 {
		p.fanIn = DefaultFanIn
	}
	if p.fanIn < 2 || p.fanIn > 1<<16 || p.fanIn&(p.fanIn-1) != 0 {
		return nil, fmt.Errorf("fan-in must be a power of two >= 2, got %d", s.FanIn)
	}
	if s.CheckpointEvery < 0 {
		return nil, fmt.Errorf("checkpoint-every must be >= 0, got %d", s.CheckpointEvery)
	}
	return &p, nil
}

// deterministicRule is the part of a stop rule every shard applies on its own: everything but
// the time limit, which only the coordinator can judge.
func (p *parsedSpec) deterministicRule() kernels.StopRule {
	r := p.stop
	r.TimeLimit = 0
	return r
}

// StopRuleOf converts a kernels stop rule to the wire form.
func StopRuleOf(r kernels.StopRule) *messages.StopRule {
	return &messages.StopRule{Tol: r.Tol, MaxIter: int64(r.MaxIter), TimeLimitSeconds: r.TimeLimit.Seconds(),
		StallTol: r.StallTol, StallWindow: int64(r.StallWindow)}
}
