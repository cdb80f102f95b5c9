package didnmf

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/sweep"
)

// SweepReport is sweep.json, what SweepResult.Save writes: the sweep's job, every run, each
// rank's summary and the suggested rank.
type SweepReport struct {
	Input []string `json:"input"`
	// Samples and Features are the input's shape, as the runs read it (0 when no run ended,
	// and in a sweep.json written before them): consensus refuses an input of another shape.
	Samples  int    `json:"samples,omitempty"`
	Features int    `json:"features,omitempty"`
	Algo     string `json:"algo"`
	// Accel is the runs' accelerated DID setting (kernels.Accel's String: "off", "auto", ...).
	Accel     string `json:"accel"`
	Ranks     []int  `json:"ranks"`
	Seeds     int    `json:"seeds"`
	FirstSeed uint64 `json:"first_seed"`
	// Folds is the number of held-out sets (folds): the run of seed index s holds out fold
	// s mod Folds.
	Folds int `json:"folds"`
	// Transform is what the runs fitted and held out (SweepOptions.Transform): "none", the
	// input's values, or "sqrt", their square roots; the errors and bases are of that.
	Transform string           `json:"transform"`
	Shards    int              `json:"shards"`
	Where     string           `json:"where"`
	Seconds   float64          `json:"seconds"`
	Busy      *SweepReportBusy `json:"cores_busy,omitempty"`
	// Suggested is the suggested rank, 0 when the sweep cannot tell (CannotTell, with the
	// Reason); Rule says how it was chosen, in words, and RuleName names the rule
	// (sweep.RuleCV, ...).
	Suggested  int    `json:"suggested_k"`
	Rule       string `json:"rule"`
	RuleName   string `json:"rule_name"`
	CannotTell bool   `json:"cannot_tell"`
	Reason     string `json:"reason,omitempty"`
	// Unreliable, when not empty, says why the suggestion may be wrong: the runs that
	// stopped at a cap.
	Unreliable string `json:"unreliable,omitempty"`
	// CappedRuns counts the runs that stopped at the iteration cap or the time limit, and
	// CappedRanks are their ranks (none: empty), as sweep.png says.
	CappedRuns  int               `json:"capped_runs"`
	CappedRanks []int             `json:"capped_ranks"`
	PerRank     []SweepReportRank `json:"ranks_summary"`
	Runs        []SweepReportRun  `json:"runs"`
	Failed      []string          `json:"failed,omitempty"`
	// Builds are the didnmf builds that made the runs (SweepResult.Builds); more than one
	// when the sweep was resumed by another build.
	Builds []string `json:"builds,omitempty"`
	// NamedFeatures says that the consensus bases' tables (consensus_basis_K.tsv,
	// top_features_K.tsv) name their rows by the features' names, not their numbers.
	NamedFeatures bool `json:"named_features,omitempty"`
}

// SweepReportBusy is how busy the target's cores were during the sweep (Busy): this
// process's CPU time on the driver and in-process nodes, the members' processes' on a
// cluster (members that did not answer are listed and not counted).
type SweepReportBusy struct {
	CPUSeconds float64  `json:"cpu_seconds"`
	Cores      int      `json:"cores"`
	Share      float64  `json:"share"`
	Missing    []string `json:"members_not_counted,omitempty"`
}

// SweepReportRun is one run of sweep.json and sweep.tsv.
type SweepReportRun struct {
	K            int      `json:"k"`
	Seed         int      `json:"seed"`
	Fold         int      `json:"fold"`
	TestSeed     uint64   `json:"test_seed"`
	TrainRelErr2 float64  `json:"train_rel_err2"`
	TestRelErr2  *float64 `json:"test_rel_err2,omitempty"`
	Iterations   int      `json:"iterations"`
	Seconds      float64  `json:"seconds"`
	StopReason   string   `json:"stop_reason"`
	// Resumed says that this sweep did not run the run but took it from its journal, where
	// an earlier sweep of the same job (killed or interrupted) had recorded it: Seconds are
	// that sweep's (SweepRun.Resumed).
	Resumed bool `json:"resumed,omitempty"`
}

// Capped tells whether the run stopped at a cap (the iteration cap or the time limit) rather
// than by converging, stalling or being cancelled.
func (r SweepReportRun) Capped() bool {
	return r.StopReason == string(kernels.StopMaxIter) || r.StopReason == string(kernels.StopTimeLimit)
}

// SweepReportRank is one rank's summary in sweep.json.
type SweepReportRank struct {
	K         int      `json:"k"`
	Runs      int      `json:"runs"`
	TrainMean float64  `json:"train_rel_err2_mean"`
	TrainSE   *float64 `json:"train_rel_err2_se,omitempty"`
	TestMean  *float64 `json:"test_rel_err2_mean,omitempty"`
	TestSE    *float64 `json:"test_rel_err2_se,omitempty"`
	Folds     int      `json:"folds"`
	// PoorFits are the folds left out of the rank's test error: their fit is a poor local
	// optimum (sweep.PoorFit), so Folds counts the others.
	PoorFits       []SweepReportPoorFit `json:"poor_fits"`
	Capped         int                  `json:"capped_runs"`
	Silhouette     *float64             `json:"stability_silhouette,omitempty"`
	Agreement      *float64             `json:"stability_agreement,omitempty"`
	MeanIterations float64              `json:"mean_iterations"`
	MeanSeconds    float64              `json:"mean_seconds"`
	ConsensusBasis string               `json:"consensus_basis"`
	// Spectra is the file of every run's basis with unit-norm columns (spectra_K.npy,
	// features x (K*runs)), which didnmf consensus reads.
	Spectra string `json:"spectra,omitempty"`
}

// SweepReportPoorFit is a fold left out of a rank's test error (sweep.PoorFit): its fit, the
// run of Seed, fitted the training entries far worse than the rank's other folds' fits.
type SweepReportPoorFit struct {
	Fold               int     `json:"fold"`
	Seed               int     `json:"seed"`
	TrainRelErr2       float64 `json:"train_rel_err2"`
	MedianTrainRelErr2 float64 `json:"median_train_rel_err2"`
	// Capped is set when the fit stopped at the iteration cap or the time limit: a fit
	// still on its way, not a poor optimum, left out as its test error is not a fitted
	// model's.
	Capped bool `json:"capped,omitempty"`
}

// Report is the sweep's sweep.json (without the consensus bases' file names, which Save
// fills in as it writes them).
func (s *SweepResult) Report() SweepReport {
	rep := SweepReport{Input: s.Inputs, Algo: s.Algo, Accel: s.Accel.String(), Ranks: s.Ranks, Seeds: s.Seeds, FirstSeed: s.FirstSeed, Folds: max(s.Folds, 1),
		Transform: string(cmp.Or(s.Transform, TransformNone)), Shards: s.Shards, Where: s.Where, Suggested: s.Suggested, Rule: s.Rule, RuleName: s.Suggestion.Name,
		CannotTell: s.Suggestion.CannotTell, Reason: s.Suggestion.Reason, Unreliable: s.Suggestion.Unreliable, Seconds: s.Seconds, CappedRanks: []int{},
		Builds: s.Builds}
	if b := s.Busy; b != nil {
		rep.Busy = &SweepReportBusy{CPUSeconds: b.CPUSeconds, Cores: b.Cores, Share: b.Share, Missing: s.BusyMissing}
	}
	for _, run := range s.Runs {
		if run.Err != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("K=%d seed %d fold %d: %v", run.K, run.Seed, run.Fold, run.Err))
			continue
		}
		res := run.Result
		if rep.Samples == 0 {
			rep.Samples, rep.Features = res.N, res.M
		}
		var test *float64
		if res.TestCount > 0 {
			test = jsonNumber(res.TestRelErr2())
		}
		var testSeed uint64
		if res.Job != nil {
			testSeed = res.Job.Spec.TestSeed
		}
		rep.Runs = append(rep.Runs, SweepReportRun{K: run.K, Seed: run.Seed, Fold: run.Fold, TestSeed: testSeed,
			TrainRelErr2: res.RelErr2(), TestRelErr2: test, Iterations: res.Iterations, Seconds: res.Seconds, StopReason: string(res.StopReason), Resumed: run.Resumed})
	}
	for _, r := range s.Summary {
		rep.PerRank = append(rep.PerRank, rankRow(r))
	}
	capped := rep.CappedByRank()
	for k, n := range capped {
		rep.CappedRuns += n
		rep.CappedRanks = append(rep.CappedRanks, k)
	}
	slices.Sort(rep.CappedRanks)
	return rep
}

// CappedByRank counts, for each rank, the runs that hit a cap (SweepReportRun.Capped).
func (r SweepReport) CappedByRank() map[int]int {
	capped := map[int]int{}
	for _, run := range r.Runs {
		if run.Capped() {
			capped[run.K]++
		}
	}
	return capped
}

// Save writes into dir sweep.json (Report), sweep.tsv (a run a line), the consensus basis of
// every rank (consensus_basis_K.npy, features x K; as text with its rows named by
// FeatureNames, or numbered, consensus_basis_K.tsv, and each component's top features,
// top_features_K.tsv), every rank's runs' bases with unit-norm
// columns (spectra_K.npy, features x (K*runs), for didnmf consensus) and sweep.png and sweep.svg (error and
// stability against the rank, the suggested rank and the capped runs marked).
func (s *SweepResult) Save(dir string) error {
	rep := s.Report()
	for i, r := range s.Summary {
		if r.Stability.Basis == nil {
			continue
		}
		m := r.Stability.M
		name := fmt.Sprintf("consensus_basis_%d.npy", r.K)
		if err := writeNPYFile(filepath.Join(dir, name), m, r.K, kernels.Transpose(r.Stability.Basis, m, r.K)); err != nil {
			return err
		}
		rep.PerRank[i].ConsensusBasis = name
		names := s.FeatureNames
		if len(names) != m {
			names = nil
		}
		rep.NamedFeatures = names != nil
		err := atomicfile.Write(filepath.Join(dir, fmt.Sprintf("consensus_basis_%d.tsv", r.K)), 0o644, func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			if err := writeBasisTSV(bw, r.Stability.Basis, m, r.K, names); err != nil {
				return err
			}
			return bw.Flush()
		})
		if err != nil {
			return err
		}
		var top bytes.Buffer
		writeTopFeaturesTSV(&top, r.Stability.Basis, m, r.K, names)
		if err := atomicfile.Write(filepath.Join(dir, fmt.Sprintf("top_features_%d.tsv", r.K)), 0o644, func(w io.Writer) error {
			_, err := w.Write(top.Bytes())
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.saveSpectra(dir, &rep); err != nil {
		return err
	}
	// Every file is written whole or not at all (atomicfile), sweep.json last: when it is
	// there, so is the rest.
	err := atomicfile.Write(filepath.Join(dir, "sweep.tsv"), 0o644, func(tw io.Writer) error {
		if _, err := fmt.Fprintln(tw, "k\tseed\tfold\ttrain_rel_err2\ttest_rel_err2\titerations\tseconds\tstop_reason"); err != nil {
			return err
		}
		for _, r := range rep.Runs {
			test := "NA"
			if r.TestRelErr2 != nil {
				test = strconv.FormatFloat(*r.TestRelErr2, 'g', 8, 64)
			}
			if _, err := fmt.Fprintf(tw, "%d\t%d\t%d\t%.8g\t%s\t%d\t%.4g\t%s\n", r.K, r.Seed, r.Fold, r.TrainRelErr2, test, r.Iterations, r.Seconds, r.StopReason); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	note := figures.SweepNote{Suggested: rep.Suggested, Rule: rep.Rule, Capped: rep.CappedByRank(), CannotTell: rep.CannotTell, Unreliable: rep.Unreliable}
	fig, err := figures.Sweep(fmt.Sprintf("%s: error and stability against the rank", strings.Join(rep.Input, " + ")), s.Summary, note)
	if err != nil {
		return err
	}
	if _, err = fig.Save(dir, "sweep"); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "sweep.json"), append(js, '\n'), 0o644)
}

// writeNPYFile writes a rows x cols row-major matrix as .npy, whole or not at all.
func writeNPYFile(path string, rows, cols int, data []float64) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return matio.WriteNPY(w, rows, cols, data) })
}

// rankRow is one rank's summary for sweep.json.
func rankRow(s sweep.RankSummary) SweepReportRank {
	r := SweepReportRank{K: s.K, Runs: s.Runs, Folds: len(s.Folds), Capped: s.Capped, TrainMean: s.Train.Mean, MeanIterations: s.MeanIterations, MeanSeconds: s.MeanSeconds,
		Silhouette: jsonNumber(s.Stability.Silhouette), Agreement: jsonNumber(s.Stability.Agreement), PoorFits: []SweepReportPoorFit{}}
	for _, p := range s.PoorFits {
		r.PoorFits = append(r.PoorFits, SweepReportPoorFit{Fold: p.Fold, Seed: p.Seed, TrainRelErr2: p.Train, MedianTrainRelErr2: p.Median, Capped: p.Capped})
	}
	if s.Runs > 1 {
		r.TrainSE = jsonNumber(s.Train.SE)
	}
	if s.Test.N > 0 {
		r.TestMean = jsonNumber(s.Test.Mean)
		if s.Test.N > 1 {
			r.TestSE = jsonNumber(s.Test.SE)
		}
	}
	return r
}

// jsonNumber is v for JSON, nil for NaN or an infinity (no value).
func jsonNumber(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
