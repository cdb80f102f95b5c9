package didnmf

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// fuzzRecordPath is the name FuzzSweepJournalRecord decodes its inputs under: the run of
// K=3, seed 7, fold 1.
const fuzzRecordPath = "out/runs/k3-seed7-fold1.json"

// FuzzSweepJournalRecord feeds decodeSweepRecord, the reader of a sweep journal's run
// records (k{K}-seed{S}-fold{F}.json), arbitrary bytes. It must not panic; an error is the
// user's (usererr) and names the file; a record it accepts is of the run its name says and
// keeps every promise Done relies on (sizes in range, numbers finite where they must be,
// counts in [0, m n], a stop reason of a run that ended, the basis file's name and a SHA-256),
// and reads back, written again as Record writes it, to the same record, bit for bit. The
// seeds are in testdata/fuzz/FuzzSweepJournalRecord.
func FuzzSweepJournalRecord(f *testing.F) {
	good := sweepRecord{Format: sweepJournalFormat, K: 3, Seed: 7, Fold: 1, TestSeed: 2, M: 30, N: 40, Iterations: 120, Converged: true,
		StopReason: "converged", Initial: 3854.0943777779794, Objective: 47.357715906277555, Residual: 47.357715906276475, SqNormX: 7826.662271523186,
		Observed: 1085, TestCount: 115, TestSqNorm: 751.46, TestSSE: 5.5445, Seconds: 0.054, Basis: "k3-seed7-fold1.basis.npy",
		BasisSHA256: strings.Repeat("5a", 32)}
	data, err := json.MarshalIndent(good, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	good.Initial, good.Objective = jsonFloat(math.NaN()), jsonFloat(math.Inf(1))
	if data, err = json.Marshal(good); err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeSweepRecord(fuzzRecordPath, 3, 7, 1, data)
		if err != nil {
			if !usererr.Is(err) || !strings.HasPrefix(err.Error(), fuzzRecordPath+": ") {
				t.Fatalf("error %q is not the user's or does not name the file", err)
			}
			return
		}
		checkAcceptedRecord(t, rec)
		again, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			t.Fatalf("an accepted record does not marshal: %v", err)
		}
		back, err := decodeSweepRecord(fuzzRecordPath, 3, 7, 1, again)
		if err != nil {
			t.Fatalf("an accepted record, written again, is refused: %v\n%s", err, again)
		}
		if !sameRecord(rec, back) {
			t.Fatalf("an accepted record reads back otherwise:\n%+v\n%+v", rec, back)
		}
	})
}

// checkAcceptedRecord fails unless rec keeps the promises of decodeSweepRecord.
func checkAcceptedRecord(t *testing.T, rec *sweepRecord) {
	t.Helper()
	if rec.Format != sweepJournalFormat || rec.K != 3 || rec.Seed != 7 || rec.Fold != 1 {
		t.Fatalf("accepted format %d, K=%d seed %d fold %d for the run of K=3 seed 7 fold 1", rec.Format, rec.K, rec.Seed, rec.Fold)
	}
	if rec.M < 1 || rec.M > maxRecordDim || rec.N < 1 || rec.N > maxRecordDim || rec.Iterations < 0 {
		t.Fatalf("accepted m %d, n %d, %d iterations", rec.M, rec.N, rec.Iterations)
	}
	switch kernels.StopReason(rec.StopReason) {
	case kernels.StopConverged, kernels.StopMaxIter, kernels.StopTimeLimit, kernels.StopStalled:
	default:
		t.Fatalf("accepted stop reason %q", rec.StopReason)
	}
	for _, v := range []jsonFloat{rec.Residual, rec.SqNormX, rec.TestSqNorm, rec.TestSSE, rec.Seconds} {
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			t.Fatalf("accepted %v where a finite number >= 0 is due", v)
		}
	}
	entries := int64(rec.M) * int64(rec.N)
	for _, c := range []int64{rec.Observed, rec.Missing, rec.TestCount} {
		if c < 0 || c > entries {
			t.Fatalf("accepted count %d of %d entries", c, entries)
		}
	}
	if rec.Basis != "k3-seed7-fold1.basis.npy" || len(rec.BasisSHA256) != 64 || strings.Trim(rec.BasisSHA256, "0123456789abcdef") != "" {
		t.Fatalf("accepted basis %q, SHA-256 %q", rec.Basis, rec.BasisSHA256)
	}
}

// sameRecord tells whether two records are the same, their floats bit for bit.
func sameRecord(a, b *sweepRecord) bool {
	fa, fb := a.floats(), b.floats()
	for i := range fa {
		if math.Float64bits(float64(fa[i])) != math.Float64bits(float64(fb[i])) {
			return false
		}
	}
	x, y := *a, *b
	x.Initial, x.Objective, x.Residual, x.SqNormX, x.TestSqNorm, x.TestSSE, x.Seconds = 0, 0, 0, 0, 0, 0, 0
	y.Initial, y.Objective, y.Residual, y.SqNormX, y.TestSqNorm, y.TestSSE, y.Seconds = 0, 0, 0, 0, 0, 0, 0
	return x == y
}

// floats are the record's floats.
func (r *sweepRecord) floats() []jsonFloat {
	return []jsonFloat{r.Initial, r.Objective, r.Residual, r.SqNormX, r.TestSqNorm, r.TestSSE, r.Seconds}
}

// TestDecodeSweepRecord: decodeSweepRecord accepts the record Record writes and refuses each
// damage with an error that names the file and what is wrong.
func TestDecodeSweepRecord(t *testing.T) {
	good := map[string]any{"format": 1, "k": 3, "seed": 7, "fold": 1, "test_seed": 2, "m": 30, "n": 40, "iterations": 120, "converged": true,
		"stop_reason": "stalled", "initial": 3854.09, "objective": 47.35, "residual": 47.35, "sq_norm_x": 7826.66, "observed": 1085, "missing": 0,
		"test_count": 115, "test_sq_norm": 751.46, "test_sse": 5.54, "seconds": 0.054, "basis": "k3-seed7-fold1.basis.npy",
		"basis_sha256": strings.Repeat("5a", 32)}
	with := func(key string, v any) []byte {
		m := map[string]any{}
		for k, x := range good {
			m[k] = x
		}
		if v == nil {
			delete(m, key)
		} else {
			m[key] = v
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	valid := with("k", 3)
	for _, c := range []struct {
		name string
		data []byte
		want string // "": accepted
	}{
		{"valid", valid, ""},
		{"objective infinite", with("objective", "+Inf"), ""},
		{"truncated", valid[:len(valid)/2], "not a run's record"},
		{"empty", nil, "not a run's record"},
		{"null", []byte("null"), "not a run's record"},
		{"an array", []byte("[1]"), "not a run's record"},
		{"trailing data", append(append([]byte{}, valid...), '{', '}'), "not a run's record"},
		{"oversized", append(append([]byte{}, valid...), make([]byte, MaxSweepRecordBytes)...), "more than a run's record may be"},
		{"wrong k", with("k", 4), "holds the run of K=4 seed 7 fold 1, not the K=3 seed 7 fold 1 its name says"},
		{"wrong seed", with("seed", 8), "not the K=3 seed 7 fold 1"},
		{"no residual", with("residual", nil), `has no field "residual"`},
		{"unknown field", with("residuals", 1), `has an unknown field "residuals"`},
		{"a key in capitals", with("K", 3), `has an unknown field "K"`},
		{"k a float", with("k", 3.5), "not a run's record"},
		{"k a string", with("k", "3"), "not a run's record"},
		{"format 2", with("format", 2), "format 2; this didnmf reads format 1"},
		{"m 0", with("m", 0), "m 0 and n 40"},
		{"n too large", with("n", int64(1)<<33), "want features and samples in [1,"},
		{"iterations negative", with("iterations", -1), "iterations -1 < 0"},
		{"cancelled", with("stop_reason", "canceled"), `stop_reason "canceled"`},
		{"residual NaN", with("residual", "NaN"), "residual NaN: want a finite number >= 0"},
		{"seconds infinite", with("seconds", "+Inf"), "seconds +Inf: want a finite number >= 0"},
		{"test_sse negative", with("test_sse", -1), "test_sse -1: want a finite number >= 0"},
		{"residual a word", with("residual", "many"), "not a run's record"},
		{"residual out of range", []byte(strings.Replace(string(valid), `"residual":47.35`, `"residual":1e999`, 1)), "not a run's record"},
		{"observed negative", with("observed", -1), "observed -1: want a count in [0, m x n = 1200]"},
		{"test_count above the entries", with("test_count", 1201), "test_count 1201"},
		{"another basis", with("basis", "../x.npy"), `basis "../x.npy": want "k3-seed7-fold1.basis.npy"`},
		{"sha short", with("basis_sha256", "5a5a"), "want 64 lowercase hexadecimal digits"},
		{"sha not hex", with("basis_sha256", strings.Repeat("zz", 32)), "want 64 lowercase hexadecimal digits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, err := decodeSweepRecord(fuzzRecordPath, 3, 7, 1, c.data)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
				checkAcceptedRecord(t, rec)
			case err == nil:
				t.Fatalf("accepted, want an error saying %q", c.want)
			case !usererr.Is(err) || !strings.HasPrefix(err.Error(), fuzzRecordPath+": ") || !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q; want the user's, naming %s and saying %q", err, fuzzRecordPath, c.want)
			}
		})
	}
}
