package jobspec

import (
	"math"
	"slices"
	"strings"

	"github.com/didnmf/didnmf/messages"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
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
	return kernels.Options{Form: s.Form, Rho: s.Rho, Storage: s.Storage, AlphaCoef: s.AlphaCoef, AlphaBasis: s.AlphaBasis, L1Ratio: s.L1Ratio, Loss: s.Loss,
		Missing: s.Missing, TestFraction: s.TestFraction, TestSeed: s.TestSeed, Accel: s.Accel,
		TestOfSquares: s.Transform == matio.TransformSqrt}
}

// ReadOptions returns how the job's input is read: the one place a spec's knobs become the
// reader's, in this process and on every node (ReadOptionsOf).
func (s *Spec) ReadOptions() matio.ReadOptions {
	return matio.ReadOptions{Missing: s.Missing, Storage: s.Storage, Transform: s.Transform}
}

// ReadOptionsOf returns a wire spec's ReadOptions, what of them a node or a client that
// streams the input needs before the spec is parsed (missing values and the transform; the
// storage stays as is). A transform no enum defines is an error naming the field, as
// FromWire's.
func ReadOptionsOf(w *messages.JobSpec) (matio.ReadOptions, error) {
	tr, err := transforms.fromWire("transform", w.GetTransform())
	if err != nil {
		return matio.ReadOptions{}, err
	}
	return matio.ReadOptions{Missing: w.GetMissing(), Transform: tr}, nil
}

// New returns the spec of a job on inputs with every other field at the CLI's default: seed
// 1, init random, tol 1e-6, max-iter 1000, stall-tol DefaultStallTol, form, storage
// and layout auto, rho 1, the default fan-in, automatic checkpoints, shared ingest. Change
// what you need; didnmf.Open checks it.
func New(inputs []string, algo kernels.Algorithm, rank, shards int) *Spec {
	return &Spec{Inputs: inputs, Algo: algo, Rank: rank, Shards: shards, Seed: 1, Init: kernels.InitRandom,
		Stop: kernels.StopRule{Tol: kernels.DefaultStopRule.Tol, MaxIter: kernels.DefaultStopRule.MaxIter, StallTol: DefaultStallTol},
		Form: kernels.FormAuto, Storage: kernels.StorageAuto, Layout: matio.LayoutAuto, Rho: 1, FanIn: DefaultFanIn,
		CheckpointEvery: -1, Ingest: IngestShared, Accel: defaultAccel()}
}

// defaultAccel is DefaultAccel parsed (a test holds it to parse).
func defaultAccel() kernels.Accel {
	a, _ := kernels.ParseAccel(DefaultAccel)
	return a
}

// validateAccel checks the inner loops through kernels.ValidateAccel (the check every machine
// makes): sweep counts in range, eps in (0, 1) with extra sweeps, and an algorithm that has
// them. Its errors name the field accel.
func (s *Spec) validateAccel() error {
	err := s.Options().ValidateAccel(s.Algo)
	if err == nil {
		if e := s.Accel.Eps; !(e >= 0 && e < 1) { // harmless without extra sweeps, but not a setting
			return fieldErr("accel", "{accel}: eps must be a number in (0, 1), got %v", e)
		}
		return nil
	}
	if msg, ok := strings.CutPrefix(err.Error(), "accel: "); ok {
		return fieldErr("accel", "{accel} %s: %s", s.Accel, msg)
	}
	masked := s.Missing || s.TestFraction > 0
	switch {
	case s.Algo == kernels.Transform:
		// transform, consensus and --fix-basis, whose users gave no algorithm.
		return fieldErr("accel", "{accel} %s: a transform solves every sample's coefficients for a fixed basis exactly, in one pass: "+
			"there are no iterations to accelerate; leave out {accel}", s.Accel)
	case masked && (s.Algo == kernels.BCD || s.Algo == kernels.HALS):
		if s.Missing {
			return fieldErr("accel", "{algorithm} %s has no accelerated inner loops with missing values ({missing}; {accel} %s): use {accel} off, or {algorithm} did",
				s.Algo, s.Accel)
		}
		return fieldErr("accel", "{algorithm} %s has no accelerated inner loops with held-out entries ({test_fraction} %v; {accel} %s): use {accel} off, or {algorithm} did",
			s.Algo, s.TestFraction, s.Accel)
	case s.Accel.Extrapolate && strings.Contains(err.Error(), "extrapolate"):
		return fieldErr("accel", "{accel} %s: %s", s.Accel, err.Error())
	}
	var with []string
	for _, a := range kernels.AccelAlgorithms() {
		with = append(with, string(a))
	}
	return fieldErr("accel", "{algorithm} %s has no accelerated inner loops ({accel} %s): the algorithms that have are %s",
		s.Algo, s.Accel, strings.Join(with, ", "))
}

// accelOf reads the wire's accel fields, refusing sweep counts out of [0,
// kernels.MaxAccelSweeps] before they become ints (Check then checks the rest, eps included).
func accelOf(c, b int64, eps float64, extrapolate bool) (kernels.Accel, error) {
	if c < 0 || c > kernels.MaxAccelSweeps || b < 0 || b > kernels.MaxAccelSweeps {
		return kernels.Accel{}, fieldErr("accel", "{accel}: sweeps must be in 1..%d, got C %d and B %d on the wire", kernels.MaxAccelSweeps, c, b)
	}
	return kernels.Accel{CSweeps: int(c), BSweeps: int(b), Eps: eps, Extrapolate: extrapolate}, nil
}

// validatePenalties checks the penalties: finite alphas >= 0, an L1 ratio in [0, 1], and an
// algorithm that has them when an alpha is not 0.
func (s *Spec) validatePenalties() error {
	for _, f := range []struct {
		field string
		v     float64
	}{{"alpha_coef", s.AlphaCoef}, {"alpha_basis", s.AlphaBasis}} {
		if !(f.v >= 0) || math.IsInf(f.v, 1) {
			return fieldErr(f.field, "{"+f.field+"} must be a finite number >= 0, got %v", f.v)
		}
	}
	if !(s.L1Ratio >= 0 && s.L1Ratio <= 1) {
		return fieldErr("l1_ratio", "{l1_ratio} must be a number between 0 and 1, got %v", s.L1Ratio)
	}
	if s.AlphaCoef == 0 && s.AlphaBasis == 0 {
		return nil
	}
	var with []string
	for _, a := range kernels.Algorithms() {
		if a.Penalties {
			with = append(with, string(a.Name))
		}
	}
	if info, err := kernels.LookupAlgorithm(s.Algo); err == nil && !info.Penalties {
		return fieldErr("algorithm", "{algorithm} %s has no L1/L2 penalties ({alpha_coef} %v, {alpha_basis} %v): the algorithms that have them are %s",
			s.Algo, s.AlphaCoef, s.AlphaBasis, strings.Join(with, ", "))
	}
	return nil
}

// validateLoss checks the loss: a finite beta, and algorithm mu for any loss but Frobenius.
func (s *Spec) validateLoss() error {
	if b := s.Loss.Beta(); math.IsNaN(b) || math.IsInf(b, 0) {
		return fieldErr("loss", "{loss}: beta must be a finite number, got %v", b)
	}
	if s.Loss == kernels.LossFrobenius || s.Algo == kernels.MU {
		return nil
	}
	if s.Algo == kernels.Transform { // transform, consensus and --fix-basis, whose users gave no algorithm
		return fieldErr("loss", "{loss} %s: a transform solves every sample's coefficients by nonnegative least squares, for the Frobenius loss only; leave out {loss}", s.Loss)
	}
	var others []string
	for _, a := range kernels.Algorithms() {
		if a.Name != kernels.MU {
			others = append(others, string(a.Name))
		}
	}
	return fieldErr("loss", "{loss} %s needs {algorithm} mu (multiplicative updates); %s minimise the Frobenius loss", s.Loss, strings.Join(others, ", "))
}

// wireLoss and wireBeta give a loss's wire form: an enum, and beta for the losses without
// a name.
func wireLoss(l kernels.Loss) messages.Loss {
	switch l {
	case kernels.LossFrobenius:
		return messages.Loss_LOSS_FROBENIUS
	case kernels.LossKL:
		return messages.Loss_LOSS_KL
	case kernels.LossIS:
		return messages.Loss_LOSS_IS
	}
	return messages.Loss_LOSS_BETA
}

func wireBeta(l kernels.Loss) float64 {
	if wireLoss(l) == messages.Loss_LOSS_BETA {
		return l.Beta()
	}
	return 0
}

// lossOf reads a wire loss; a value no enum defines is a *usererr.Error.
func lossOf(l messages.Loss, beta float64) (kernels.Loss, error) {
	switch l {
	case messages.Loss_LOSS_FROBENIUS:
		return kernels.LossFrobenius, nil
	case messages.Loss_LOSS_KL:
		return kernels.LossKL, nil
	case messages.Loss_LOSS_IS:
		return kernels.LossIS, nil
	case messages.Loss_LOSS_BETA:
		if math.IsNaN(beta) || math.IsInf(beta, 0) {
			return 0, fieldErr("loss", "{loss}: beta must be a finite number, got %v", beta)
		}
		return kernels.BetaLoss(beta), nil
	}
	return 0, fieldErr("loss", "{loss}: unknown value %d on the wire (known: frobenius, kl, is, beta)", int32(l))
}

// validateMask checks the missing-value and held-out options: a test fraction in [0, 1),
// and with either an algorithm and an initialisation that can fit a mask.
func (s *Spec) validateMask() error {
	if !(s.TestFraction >= 0 && s.TestFraction < 1) {
		return fieldErr("test_fraction", "{test_fraction} must be a number in [0, 1), got %v", s.TestFraction)
	}
	o := s.Options()
	if !o.Masked() {
		return nil
	}
	what := "{missing}"
	if !s.Missing {
		what = "{test_fraction}"
	}
	var names []string
	for _, a := range kernels.MaskAlgorithms() {
		names = append(names, string(a))
	}
	if s.Algo == kernels.Transform { // transform, consensus and --fix-basis, whose users gave no algorithm
		return fieldErr(strings.Trim(what, "{}"), what+": a transform solves every sample's coefficients from all of its entries; it takes no "+
			"missing or held-out entries; leave out "+what)
	}
	if !slices.Contains(kernels.MaskAlgorithms(), s.Algo) {
		return fieldErr("algorithm", "{algorithm} %s cannot fit with "+what+": the algorithms that can are %s", s.Algo, strings.Join(names, ", "))
	}
	switch s.Init {
	case kernels.InitNNDSVD, kernels.InitNNDSVDA, kernels.InitKMeans:
		return fieldErr("init", "{init} %s needs every entry of X: with "+what+" use {init} random (scaled by the mean of the observed entries) or custom", s.Init)
	}
	return nil
}
