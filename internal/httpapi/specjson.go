package httpapi

import (
	"github.com/didnmf/didnmf/internal/jobspec"
)

// EncodeSpec is the JSON job spec of s, with the keys DecodeSpec reads, every field given: a
// job's spec as the API shows it (an ended job's record among them), which submitted again
// is the same job (DecodeSpec(EncodeSpec(s)) is s, for a spec DecodeSpec made). The fields
// a node fills in (a streamed input's shape, ingest) are left out.
func EncodeSpec(s *jobspec.Spec) map[string]any {
	if s == nil {
		return nil
	}
	out := map[string]any{
		"input": s.Inputs, "algorithm": string(s.Algo), "rank": s.Rank, "shards": s.Shards, "seed": s.Seed,
		"init": string(s.Init), "form": s.Form.String(), "storage": s.Storage.String(), "layout": s.Layout.String(),
		"rho": s.Rho, "alpha_coef": s.AlphaCoef, "alpha_basis": s.AlphaBasis, "l1_ratio": s.L1Ratio,
		"loss": s.Loss.String(), "missing": s.Missing, "test_fraction": s.TestFraction, "test_seed": s.TestSeed, "accel": s.Accel.String(),
		"fan_in": s.FanIn, "checkpoint_every": s.CheckpointEvery, "max_iter": s.Stop.MaxIter, "tol": s.Stop.Tol,
		"time_limit": s.Stop.TimeLimit.String(), "stall_tol": s.Stop.StallTol,
	}
	if s.CheckpointEvery < 0 {
		out["checkpoint_every"] = "auto"
	}
	if s.Transform.On() {
		out["transform"] = string(s.Transform)
	}
	if s.InitBasis != "" || s.InitCoef != "" {
		out["init_basis"], out["init_coef"] = s.InitBasis, s.InitCoef
	}
	if s.OutShared != "" {
		out["out_shared"], out["overwrite"] = s.OutShared, s.Overwrite
	}
	if len(s.Nodes) > 0 {
		out["nodes"] = s.Nodes
	}
	return out
}
