package didnmf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// countingJournal counts the calls of a journal: the runs it gave back (Done with a result)
// and the runs recorded (the runs that ran).
type countingJournal struct {
	didnmf.SweepJournal
	mu               sync.Mutex
	resumed, records int
}

func (c *countingJournal) Done(k, seed, fold int) (*didnmf.Result, error) {
	res, err := c.SweepJournal.Done(k, seed, fold)
	if res != nil {
		c.mu.Lock()
		c.resumed++
		c.mu.Unlock()
	}
	return res, err
}

func (c *countingJournal) Record(k, seed, fold int, res *didnmf.Result) error {
	c.mu.Lock()
	c.records++
	c.mu.Unlock()
	return c.SweepJournal.Record(k, seed, fold, res)
}

// comparableReport is a saved sweep's sweep.json without what depends on the clock (seconds,
// how busy the cores were) and on the runs' having been resumed.
func comparableReport(t *testing.T, dir string) didnmf.SweepReport {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep didnmf.SweepReport
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	rep.Seconds, rep.Busy = 0, nil
	for i := range rep.Runs {
		rep.Runs[i].Seconds, rep.Runs[i].Resumed = 0, false
	}
	for i := range rep.PerRank {
		rep.PerRank[i].MeanSeconds = 0
	}
	return rep
}

// TestSweepResumeBitIdentical: a sweep cancelled after 2 of its 6 runs ended, then resumed
// from its journal, runs only the runs missing and gives the uninterrupted sweep's result bit
// for bit: every run's numbers and basis, the summaries, the suggestion, sweep.json (but for
// seconds), the consensus bases and the spectra.
func TestSweepResumeBitIdentical(t *testing.T) {
	r, j := resumeJob(t)
	// Uninterrupted, without a journal.
	whole, err := r.Sweep(context.Background(), j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	wholeDir := t.TempDir()
	if err := whole.Save(wholeDir); err != nil {
		t.Fatal(err)
	}
	// Cancelled after 2 runs.
	dir := t.TempDir()
	jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := resumeOptions()
	first := &countingJournal{SweepJournal: jn}
	o.Journal = first
	ended := 0
	o.OnRun = func(e didnmf.SweepEvent) {
		if e.Resumed || e.JournalErr != nil {
			t.Errorf("a first sweep: event %+v", e)
		}
		if ended++; ended == 2 {
			cancel()
		}
	}
	if _, err := r.Sweep(ctx, j, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled sweep returned %v", err)
	}
	kept, err := jn.Runs()
	if err != nil || kept < 2 || kept >= 6 || kept != first.records {
		t.Fatalf("%d runs kept after 2 ended (%d recorded, %v); want 2..5", kept, first.records, err)
	}
	// Resumed: a journal opened again, as a new process would.
	jn2, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	second := &countingJournal{SweepJournal: jn2}
	o = resumeOptions()
	o.Journal = second
	var events []didnmf.SweepEvent
	o.OnRun = func(e didnmf.SweepEvent) { events = append(events, e) }
	res, err := r.Sweep(context.Background(), j, o)
	if err != nil {
		t.Fatal(err)
	}
	if second.resumed != kept || second.records != 6-kept || res.ResumedRuns() != kept || len(events) != 6 {
		t.Errorf("resumed %d runs and ran %d (%d resumed in the result, %d events); want %d and %d", second.resumed, second.records,
			res.ResumedRuns(), len(events), kept, 6-kept)
	}
	for i, e := range events {
		if e.Resumed != (i < kept) || e.Done != i+1 || e.Total != 6 || e.Result == nil || e.Err != nil || e.JournalErr != nil {
			t.Errorf("event %d: %+v (resumed %v); want the %d resumed runs told first", i, e, e.Resumed, kept)
		}
	}
	if n, err := jn2.Runs(); n != 6 || err != nil {
		t.Errorf("the journal holds %d runs (%v), want 6", n, err)
	}
	for i, run := range res.Runs {
		w := whole.Runs[i]
		a, b := run.Result, w.Result
		if run.K != w.K || run.Seed != w.Seed || run.Fold != w.Fold || run.Err != nil || a.M != b.M || a.N != b.N || a.Iterations != b.Iterations ||
			a.StopReason != b.StopReason || a.Converged != b.Converged || !sameBits(a.B, b.B) ||
			!sameBits([]float64{a.Residual, a.SqNormX, a.TestSSE, a.TestSqNorm, a.Initial, a.Objective}, []float64{b.Residual, b.SqNormX, b.TestSSE, b.TestSqNorm, b.Initial, b.Objective}) ||
			a.Observed != b.Observed || a.Missing != b.Missing || a.TestCount != b.TestCount || a.Job.Spec.TestSeed != b.Job.Spec.TestSeed {
			t.Errorf("run %d (K=%d seed %d, resumed %v) differs from the uninterrupted sweep's", i, run.K, run.Seed, run.Resumed)
		}
		if run.Resumed != (i < kept) { // one at a time: the first runs ended
			t.Errorf("run %d: resumed %v with %d runs kept", i, run.Resumed, kept)
		}
	}
	for i := range res.Summary {
		a, b := res.Summary[i], whole.Summary[i]
		a.MeanSeconds, b.MeanSeconds = 0, 0
		if fmt.Sprintf("%v", a) != fmt.Sprintf("%v", b) {
			t.Errorf("K=%d: the summary differs:\n%v\n%v", a.K, a, b)
		}
	}
	if fmt.Sprintf("%+v", res.Suggestion) != fmt.Sprintf("%+v", whole.Suggestion) {
		t.Errorf("suggestion %+v, uninterrupted %+v", res.Suggestion, whole.Suggestion)
	}
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	// JSON numbers are the floats' shortest exact forms: equal text, equal bits.
	a, errA := json.Marshal(comparableReport(t, dir))
	b, errB := json.Marshal(comparableReport(t, wholeDir))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("sweep.json differs from the uninterrupted sweep's (%v, %v):\n%s\n%s", errA, errB, a, b)
	}
	var resumedRows int
	rep := res.Report()
	for _, run := range rep.Runs {
		if run.Resumed {
			resumedRows++
		}
	}
	if resumedRows != kept {
		t.Errorf("sweep.json marks %d runs resumed, want %d", resumedRows, kept)
	}
	for _, k := range []int{2, 3, 4} {
		for _, name := range []string{fmt.Sprintf("consensus_basis_%d.npy", k), didnmf.SpectraFile(k)} {
			a, err1 := os.ReadFile(filepath.Join(dir, name))
			b, err2 := os.ReadFile(filepath.Join(wholeDir, name))
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs from the uninterrupted sweep's (%v, %v)", name, err1, err2)
			}
		}
	}
	// Resumed again: nothing runs, the same result.
	jn3, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	third := &countingJournal{SweepJournal: jn3}
	o = resumeOptions()
	o.Journal = third
	again, err := r.Sweep(context.Background(), j, o)
	if err != nil || third.records != 0 || again.ResumedRuns() != 6 || again.Suggested != whole.Suggested {
		t.Errorf("a sweep all of whose runs are kept: %v, %d runs recorded, %d resumed", err, third.records, again.ResumedRuns())
	}
}

// fakeRun is a result of rank k over m features and n samples, for a journal's Record.
func fakeRun(m, n, k int) *didnmf.Result {
	b := make([]float64, m*k)
	for i := range b {
		b[i] = float64(i%7) / 3
	}
	return &didnmf.Result{Result: kernels.Result{M: m, N: n, K: k, B: b, Iterations: 5, StopReason: kernels.StopConverged, Residual: 1.5,
		SqNormX: 10, Observed: int64(m * n), Seconds: 0.25, Initial: math.Inf(1), Objective: math.NaN()}}
}

// TestSweepJournalFingerprint: a journal's runs are given back only to a sweep of the same
// job: another algorithm, stop rule, test seed, transform, input path or input file (its size
// or time) is refused, naming what differs; where and how the job runs (nodes, ingest,
// checkpoints) and the rank and seed it was opened at are not the job's bits.
func TestSweepJournalFingerprint(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "x.npy")
	x := make([]float64, 40*30)
	for i := range x {
		x[i] = float64(i%11) + 1
	}
	var buf bytes.Buffer
	if err := matio.WriteNPY(&buf, 40, 30, x); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(edit, after func(*didnmf.Spec)) *didnmf.Job {
		spec := jobspec.New([]string{input}, kernels.DID, 4, 1)
		spec.TestFraction = 0.1
		if edit != nil {
			edit(spec)
		}
		j, err := didnmf.Open(spec, didnmf.Local(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		if after != nil { // what only a job on a cluster may be
			after(j.Spec)
		}
		return j
	}
	out := filepath.Join(dir, "out")
	jn, err := didnmf.OpenSweepJournal(out, open(nil, nil), resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, didnmf.SweepJournalDir)); !os.IsNotExist(err) {
		t.Fatalf("opening a journal wrote %s (%v)", didnmf.SweepJournalDir, err)
	}
	if err := jn.Record(2, 1, 0, fakeRun(30, 40, 2)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		edit, after func(*didnmf.Spec)
		o           func(*didnmf.SweepOptions)
		want        string // "": the same job
	}{
		{"the same job", nil, nil, nil, ""},
		{"another rank and seed, checkpoints, ingest, nodes", func(s *didnmf.Spec) { s.Rank, s.Seed, s.CheckpointEvery = 3, 9, 10 },
			func(s *didnmf.Spec) { s.Ingest, s.Nodes = jobspec.IngestStream, []string{"10.0.0.1:7946"} }, nil, ""},
		{"more ranks and seeds", nil, nil, func(o *didnmf.SweepOptions) { o.Ranks, o.Seeds = []int{2, 3, 4, 5}, 2 }, ""},
		{"another algorithm", func(s *didnmf.Spec) { s.Algo = kernels.HALS }, nil, nil, "its algorithm was did, this one's is hals"},
		{"another cap", func(s *didnmf.Spec) { s.Stop.MaxIter = 50 }, nil, nil, "its max_iter was 1000, this one's is 50"},
		{"another test seed", func(s *didnmf.Spec) { s.TestSeed = 5 }, nil, nil, "its test_seed was 0, this one's is 5"},
		{"another test fraction", func(s *didnmf.Spec) { s.TestFraction = 0.2 }, nil, nil, "its test_fraction was 0.1, this one's is 0.2"},
		// The setting whole, not the one of its keys that differs (accel_b_sweeps: "was 0, ... is 5").
		{"another accel", func(s *didnmf.Spec) { s.Accel = kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1} }, nil, nil, "its accel was off, this one's is 3,5,0.1"},
		{"the sweep's transform", nil, nil, func(o *didnmf.SweepOptions) { o.Transform = didnmf.TransformSqrt }, "its transform was none, this one's is sqrt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := resumeOptions()
			if c.o != nil {
				c.o(&o)
			}
			jn, err := didnmf.OpenSweepJournal(out, open(c.edit, c.after), o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if res, err := jn.Done(2, 1, 0); err != nil || res == nil || res.K != 2 || res.Residual != 1.5 || !math.IsNaN(res.Objective) {
					t.Errorf("Done: %+v, %v", res, err)
				}
				return
			}
			if err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), c.want) ||
				!strings.HasPrefix(err.Error(), filepath.Join(out, "runs")+" holds runs of another job: ") {
				t.Errorf("%v; want the user's error saying %q", err, c.want)
			}
		})
	}
	// The input rewritten (another size and time), or another file.
	var more bytes.Buffer
	if err := matio.WriteNPY(&more, 41, 30, append(x, x[:30]...)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, more.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(input, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := didnmf.OpenSweepJournal(out, open(nil, nil), resumeOptions()); err == nil ||
		!strings.Contains(err.Error(), "its input "+input+" was "+fmt.Sprint(buf.Len())+" bytes modified ") {
		t.Errorf("an input changed since: %v", err)
	}
	other := filepath.Join(dir, "y.npy")
	if err := os.WriteFile(other, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := jobspec.New([]string{other}, kernels.DID, 4, 1)
	spec.TestFraction = 0.1
	if _, err := didnmf.OpenSweepJournal(out, &didnmf.Job{Spec: spec}, resumeOptions()); err == nil || !strings.Contains(err.Error(), "its input was "+input) {
		t.Errorf("another input: %v", err)
	}
	// Values read from a hostile journal.json reach the message quoted, escapes and all.
	fpPath := filepath.Join(out, didnmf.SweepJournalDir, "journal.json")
	data, err := os.ReadFile(fpPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"algorithm": "did"`, `"algorithm": "\u001b[31mhals"`, `its algorithm was "\x1b[31mhals", this one's is did`},
		{`"algorithm": "did"`, `"algorithm": "did", "\u001b[2Jkey": "1"`, `its "\x1b[2Jkey" was "1", which this didnmf's jobs do not have`},
		{`"abs": "` + input + `"`, `"abs": "` + input + `\r"`, `its input was ` + input + ` ("` + input + `\r")`},
	} {
		edited := strings.Replace(string(data), c.from, c.to, 1)
		if edited == string(data) {
			t.Fatalf("journal.json has no %s:\n%s", c.from, data)
		}
		if err := os.WriteFile(fpPath, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := didnmf.OpenSweepJournal(out, open(nil, nil), resumeOptions())
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.ContainsAny(err.Error(), "\x1b\r") {
			t.Errorf("journal.json with %s: %v; want %q, and no control character", c.to, err, c.want)
		}
	}
}

// TestSweepJournalRecord: Record writes a run's basis and record and journal.json, refuses a
// run Done would refuse (a NaN residual) without writing it, and Done gives back nothing for a
// run with no record (a basis alone, as a kill between the two writes leaves, does not count).
func TestSweepJournalRecord(t *testing.T) {
	_, j := resumeJob(t)
	dir := t.TempDir()
	jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	bad := fakeRun(30, 40, 2)
	bad.Residual = math.NaN()
	if err := jn.Record(2, 1, 0, bad); err == nil || !strings.Contains(err.Error(), "residual NaN") {
		t.Errorf("Record of a NaN residual: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote %v", err)
	}
	if err := jn.Record(2, 1, 0, fakeRun(30, 40, 3)); err == nil {
		t.Error("Record took a result of rank 3 as the run of rank 2")
	}
	good := fakeRun(30, 40, 2)
	if err := jn.Record(2, 1, 0, good); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	want := []string{"journal.json", "k2-seed1-fold0.basis.npy", "k2-seed1-fold0.json"}
	if len(names) != len(want) {
		t.Fatalf("runs holds %v, want %v", names, want)
	}
	for i, n := range names {
		if filepath.Base(n) != want[i] {
			t.Errorf("runs holds %v, want %v", names, want)
		}
	}
	// The basis is features x K, as sweep.go writes consensus bases.
	rows, cols, b, err := matio.ReadNPYMatrix(filepath.Join(dir, "runs", "k2-seed1-fold0.basis.npy"))
	if err != nil || rows != 30 || cols != 2 || b[1] != good.B[30] || b[2] != good.B[1] {
		t.Errorf("the basis file: %d x %d, %v", rows, cols, err)
	}
	// A basis without its record: no run.
	data, _ := os.ReadFile(filepath.Join(dir, "runs", "k2-seed1-fold0.basis.npy"))
	if err := os.WriteFile(filepath.Join(dir, "runs", "k3-seed1-fold0.basis.npy"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	jn2, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := jn2.Runs(); n != 1 || err != nil {
		t.Errorf("%d runs (%v), want 1", n, err)
	}
	if res, err := jn2.Done(3, 1, 0); res != nil || err != nil {
		t.Errorf("a basis without a record: %v, %v", res, err)
	}
	res, err := jn2.Done(2, 1, 0)
	if err != nil || res == nil || !sameBits(res.B, good.B) || res.N != 40 || res.Seconds != 0.25 || !math.IsInf(res.Initial, 1) {
		t.Errorf("Done gave back %+v, %v", res, err)
	}
}

// TestSweepJournalBuilds: journal.json names the builds that recorded its runs. A journal
// reopened by the same build says so and is not written again; one recorded by another build
// (or by a didnmf from before builds were recorded, whose journal.json has none) opens, names
// the builds that made its runs, and adds this one at its next Record.
func TestSweepJournalBuilds(t *testing.T) {
	_, j := resumeJob(t)
	dir := t.TempDir()
	path := filepath.Join(dir, didnmf.SweepJournalDir, "journal.json")
	builds := func() []string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var fp struct {
			Builds []string `json:"builds"`
		}
		if err := json.Unmarshal(data, &fp); err != nil {
			t.Fatal(err)
		}
		return fp.Builds
	}
	setBuilds := func(b []string) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var fp map[string]any
		if err := json.Unmarshal(data, &fp); err != nil {
			t.Fatal(err)
		}
		if b == nil {
			delete(fp, "builds")
		} else {
			fp["builds"] = b
		}
		if data, err = json.Marshal(fp); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	if kept, this := jn.Builds(); kept != nil || this == "" || !strings.Contains(this, " go") {
		t.Fatalf("a fresh journal: builds %q, this build %q", kept, this)
	}
	if err := jn.Record(2, 1, 0, fakeRun(30, 40, 2)); err != nil {
		t.Fatal(err)
	}
	_, this := jn.Builds()
	if got := builds(); !slices.Equal(got, []string{this}) {
		t.Fatalf("journal.json names builds %q, want this one's, %q", got, this)
	}
	for _, c := range []struct {
		name   string
		before []string // journal.json's builds (nil: none recorded)
		kept   []string // what Builds gives
		after  []string // journal.json's builds after a Record
	}{
		{"the same build", []string{this}, []string{this}, []string{this}},
		{"another build", []string{"v0.9.0 go1.22.0"}, []string{"v0.9.0 go1.22.0"}, []string{"v0.9.0 go1.22.0", this}},
		{"two before, this one among them", []string{"v0.9.0 go1.22.0", this}, []string{"v0.9.0 go1.22.0", this}, []string{"v0.9.0 go1.22.0", this}},
		{"a journal from before builds were recorded", nil, nil, []string{this}},
	} {
		setBuilds(c.before)
		jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if kept, _ := jn.Builds(); !slices.Equal(kept, c.kept) {
			t.Errorf("%s: Builds gives %q, want %q", c.name, kept, c.kept)
		}
		if err := jn.Record(3, 1, 0, fakeRun(30, 40, 3)); err != nil {
			t.Fatal(err)
		}
		if got := builds(); !slices.Equal(got, c.after) {
			t.Errorf("%s: after a Record journal.json names builds %q, want %q", c.name, got, c.after)
		}
	}
}

// TestSweepJournalSameFold: a record whose held-out figures are not its fold's (another run of
// the fold says otherwise) or do not add up (observed + missing + test_count != m x n) is
// refused, naming it, what it says and what the other record says.
func TestSweepJournalSameFold(t *testing.T) {
	_, j := resumeJob(t)
	dir := t.TempDir()
	jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	run := func(k int) *didnmf.Result {
		r := fakeRun(30, 40, k)
		r.Observed, r.TestCount, r.SqNormX, r.TestSqNorm, r.TestSSE = 1100, 100, 10, 1, 0.5
		return r
	}
	for _, k := range []int{2, 3} {
		if err := jn.Record(k, 1, 0, run(k)); err != nil {
			t.Fatal(err)
		}
	}
	rec3 := filepath.Join(dir, didnmf.SweepJournalDir, "k3-seed1-fold0.json")
	orig, err := os.ReadFile(rec3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"the same figures", "", "", ""},
		{"a held-out norm of 1e308", `"test_sq_norm": 1`, `"test_sq_norm": 1e308`, "sq_norm_x 10, test_sq_norm 1e+308; " + filepath.Join(dir, didnmf.SweepJournalDir, "k2-seed1-fold0.json") + ", of the same held-out set (test seed"},
		{"a norm off in its 12th digit", `"sq_norm_x": 10`, `"sq_norm_x": 10.00000000001`, ""},
		{"a norm off in its 8th digit", `"sq_norm_x": 10`, `"sq_norm_x": 10.0000001`, "sq_norm_x 10.0000001"},
		{"no held-out entries", `"test_count": 100`, `"test_count": 0`, "observed 1100 + missing 0 + test_count 0 = 1100 entries; the job's m x n is 1200"},
		{"the counts moved", `"observed": 1100,
  "missing": 0,
  "test_count": 100`, `"observed": 1000,
  "missing": 100,
  "test_count": 100`, "observed 1000, missing 100, test_count 100"},
	} {
		edited := strings.Replace(string(orig), c.from, c.to, 1)
		if c.from != "" && edited == string(orig) {
			t.Fatalf("%s: the record has no %q:\n%s", c.name, c.from, orig)
		}
		if err := os.WriteFile(rec3, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		jn, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jn.Done(2, 1, 0); err != nil {
			t.Fatalf("%s: the untouched record: %v", c.name, err)
		}
		_, err = jn.Done(3, 1, 0)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), rec3+": ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want the user's error naming %s and saying %q", c.name, err, rec3, c.want)
		}
	}
}

// TestSweepResumeRaisedCap: a sweep resumed with a higher --max-iter keeps the runs that
// stopped before the old cap (their bits do not depend on it) and runs again those that hit
// it, and gives the sweep run with the higher cap from the start, bit for bit; journal.json
// then holds the new cap, and a lower cap than the journal's is refused.
func TestSweepResumeRaisedCap(t *testing.T) {
	r, j := resumeJob(t) // its cap: 300
	whole, err := r.Sweep(context.Background(), j, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	// The old cap: between the runs' iteration counts, so that some hit it and some not.
	var iters []int
	for _, run := range whole.Runs {
		iters = append(iters, run.Result.Iterations)
	}
	slices.Sort(iters)
	low := iters[len(iters)/2]
	if low == iters[0] || low >= 300 {
		t.Fatalf("iterations %v: the case needs runs that stop before and after a cap below 300", iters)
	}
	lowSpec := *j.Spec
	lowSpec.Stop.MaxIter = low
	jLow, err := didnmf.Open(&lowSpec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer jLow.Close()
	dir := t.TempDir()
	jn, err := didnmf.OpenSweepJournal(dir, jLow, resumeOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := resumeOptions()
	o.Journal = jn
	first, err := r.Sweep(context.Background(), jLow, o)
	if err != nil {
		t.Fatal(err)
	}
	capped := 0
	for _, run := range first.Runs {
		if run.Capped() {
			capped++
		}
	}
	if capped == 0 || capped == len(first.Runs) {
		t.Fatalf("%d of %d runs capped at %d: the case needs some of each", capped, len(first.Runs), low)
	}
	// Again with the cap of 300, stopped after one run ended: journal.json then says 300,
	// and the runs capped at the old cap still there must not pass for runs of 300.
	jn2, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatalf("a higher cap: %v", err)
	}
	if jn2.RaisedFrom() != low {
		t.Errorf("RaisedFrom %d, want %d", jn2.RaisedFrom(), low)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o = resumeOptions()
	o.Journal = jn2
	o.OnRun = func(e didnmf.SweepEvent) {
		if !e.Resumed {
			cancel()
		}
	}
	if _, err := r.Sweep(ctx, j, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped sweep returned %v", err)
	}
	jn3, err := didnmf.OpenSweepJournal(dir, j, resumeOptions())
	if err != nil {
		t.Fatalf("resumed again at 300: %v", err)
	}
	counted := &countingJournal{SweepJournal: jn3}
	o = resumeOptions()
	o.Journal = counted
	res, err := r.Sweep(context.Background(), j, o)
	if err != nil {
		t.Fatal(err)
	}
	if counted.resumed+counted.records != len(first.Runs) || counted.records >= capped || counted.resumed < len(first.Runs)-capped {
		t.Errorf("ran %d and resumed %d; want fewer than the %d capped at %d run (one ran before the stop), the rest kept", counted.records, counted.resumed, capped, low)
	}
	for i, run := range res.Runs {
		if a, b := run.Result, whole.Runs[i].Result; a.Iterations != b.Iterations || !sameBits(a.B, b.B) || a.TestSSE != b.TestSSE {
			t.Errorf("run %d (K=%d seed %d): %d iterations; the sweep capped at 300 from the start took %d, or its bits differ", i, run.K, run.Seed, a.Iterations, b.Iterations)
		}
	}
	if res.Suggested != whole.Suggested || res.Rule != whole.Rule {
		t.Errorf("suggested %d (%s); the sweep at 300 from the start %d (%s)", res.Suggested, res.Rule, whole.Suggested, whole.Rule)
	}
	// journal.json now holds 300: the old cap is another job.
	if _, err := didnmf.OpenSweepJournal(dir, jLow, resumeOptions()); err == nil || !usererr.Is(err) ||
		!strings.Contains(err.Error(), fmt.Sprintf("was 300, this one's is %d", low)) {
		t.Errorf("a lower cap than the journal's: %v", err)
	}
}
