package nodeview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// TestNewer: of two members' records of one job, the higher epoch wins; at one epoch an
// ended record beats a running one, and otherwise the one further on.
func TestNewer(t *testing.T) {
	run := func(epoch uint64, it int64) *messages.JobInfo {
		return &messages.JobInfo{JobId: "j", Epoch: epoch, Iteration: it, State: messages.JobPhase_JOB_PHASE_RUNNING}
	}
	end := func(epoch uint64, it int64, phase messages.JobPhase) *messages.JobInfo {
		return &messages.JobInfo{JobId: "j", Epoch: epoch, Iteration: it, State: phase, EndedUnixMs: 5}
	}
	for _, c := range []struct {
		name string
		a, b *messages.JobInfo
		want bool
	}{
		{"first record", run(1, 1), nil, true},
		{"higher epoch, running", run(2, 1), run(1, 9), true},
		{"lower epoch, running", run(1, 9), run(2, 1), false},
		{"running over ended only if newer", run(2, 1), end(1, 9, messages.JobPhase_JOB_PHASE_DONE), true},
		{"running at the ended record's epoch", run(1, 9), end(1, 3, messages.JobPhase_JOB_PHASE_FAILED), false},
		{"ended over running at one epoch", end(1, 3, messages.JobPhase_JOB_PHASE_CANCELED), run(1, 9), true},
		{"ended over a newer running", end(1, 3, messages.JobPhase_JOB_PHASE_DONE), run(2, 1), false},
		{"further on", run(1, 5), run(1, 4), true},
		{"not further on", run(1, 4), run(1, 4), false},
		{"ended without a phase", &messages.JobInfo{Epoch: 1, EndedUnixMs: 9}, run(1, 9), true},
	} {
		if got := newer(c.a, c.b); got != c.want {
			t.Errorf("%s: newer %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJobView: a job's record as the API shows it, running and ended.
func TestJobView(t *testing.T) {
	info := &messages.JobInfo{JobId: "j1", Owner: "alice", Coordinator: "10.0.0.1:5000", Algorithm: messages.Algorithm_ALGORITHM_DID,
		Rank: 4, Shards: 2, Samples: 100, Features: 20, State: messages.JobPhase_JOB_PHASE_RECOVERING, Iteration: 10, MaxIter: 110,
		Rate: 20, StopRule: "max 110 iterations", ShardNodes: []string{"a", "b"}, Recoveries: 1, Checkpoints: 3, Epoch: 2,
		SubmittedUnixMs: 1000, History: []*messages.HistoryPoint{{Iteration: 1, Seconds: 0.5, RelErr2: 0.25, TestRelErr2: 0.3}},
		Events: []*messages.JobEvent{{UnixMs: 1200, Kind: messages.JobEventKind_JOB_EVENT_KIND_TAKEOVER, Iteration: 7, Text: "b took over"}}}
	jv := jobView(info)
	if jv.ID != "j1" || jv.Owner != "alice" || jv.Algorithm != string(kernels.DID) || jv.State != "recovering" || jv.ETASeconds != 5 ||
		jv.Samples != 100 || jv.Features != 20 || !slices.Equal(jv.ShardNodes, []string{"a", "b"}) || jv.Epoch != 2 || jv.Error != nil ||
		len(jv.History) != 1 || jv.History[0] != (httpapi.PointView{Iteration: 1, Seconds: 0.5, RelErr2: 0.25, TestRelErr2: 0.3}) ||
		len(jv.Events) != 1 || jv.Events[0] != (httpapi.EventView{UnixMs: 1200, Kind: "takeover", Iteration: 7, Text: "b took over"}) {
		t.Errorf("running: %+v", jv)
	}
	info.State, info.EndedUnixMs, info.Stop = messages.JobPhase_JOB_PHASE_FAILED, 3000, "error"
	info.ErrorKind, info.Error, info.ErrorField = messages.ErrorKind_ERROR_KIND_INPUT, "rank 40 > features 20", "rank"
	jv = jobView(info)
	if jv.State != "failed" || jv.ETASeconds != 0 || jv.EndedUnixMs != 3000 || jv.Error == nil ||
		*jv.Error != (httpapi.ErrorView{Kind: "user", Field: "rank", Message: "rank 40 > features 20"}) {
		t.Errorf("ended: %+v (error %+v)", jv, jv.Error)
	}
	// A coordinator that publishes no phase yet: running, and once ended by its error.
	for _, c := range []struct {
		kind messages.ErrorKind
		want string
	}{{messages.ErrorKind_ERROR_KIND_UNSPECIFIED, "done"}, {messages.ErrorKind_ERROR_KIND_CANCELED, "canceled"}, {messages.ErrorKind_ERROR_KIND_FAILURE, "failed"}} {
		if got := phaseName(&messages.JobInfo{EndedUnixMs: 1, ErrorKind: c.kind}); got != c.want {
			t.Errorf("ended with %v: %s, want %s", c.kind, got, c.want)
		}
	}
	if got := phaseName(&messages.JobInfo{}); got != "running" {
		t.Errorf("no phase: %s", got)
	}
}

// TestHistoryOf: a result's history is thinned evenly to maxHistory points, the first and
// the last kept.
func TestHistoryOf(t *testing.T) {
	if historyOf(nil) != nil {
		t.Error("no history")
	}
	h := make([]kernels.HistoryPoint, 1000)
	for i := range h {
		h[i] = kernels.HistoryPoint{Iteration: i + 1, RelErr2: 1 / float64(i+1)}
	}
	got := historyOf(h)
	if len(got) != maxHistory || got[0].Iteration != 1 || got[len(got)-1].Iteration != 1000 {
		t.Fatalf("%d points, %v ... %v", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Iteration <= got[i-1].Iteration {
			t.Fatalf("point %d: %d after %d", i, got[i].Iteration, got[i-1].Iteration)
		}
	}
	if got := historyOf(h[:1]); len(got) != 1 || got[0].Iteration != 1 {
		t.Errorf("one point: %v", got)
	}
	if got := historyOf(h[:10]); len(got) != 10 || got[9].Iteration != 10 {
		t.Errorf("ten points: %v", got)
	}
}

// TestOutputsKept: the outputs found at start are served, the oldest beyond the bound
// removed, and only the fixed names of a listed job reach a file.
func TestOutputsKept(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "http-jobs")
	for i, id := range []string{"old", "mid", "new"} {
		d := filepath.Join(base, id)
		if err := os.MkdirAll(filepath.Join(d, "figures"), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"report.json", "coef.npy", "figures/convergence.png", "secret.txt"} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(id+" "+f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		at := time.Now().Add(time.Duration(i-3) * time.Hour)
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(base, "not a job"), 0o700); err != nil {
		t.Fatal(err)
	}
	o, err := openOutputs(dir, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the oldest job's outputs are still there: %v", err)
	}
	v := &View{outputs: o}
	if got := v.outputNames("new"); !slices.Equal(got, []string{"report.json", "coef.npy", "figures/convergence.png"}) {
		t.Errorf("outputs of new: %v", got)
	}
	r, err := v.Output(context.Background(), "mid", "figures/convergence.png")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "mid figures/convergence.png" {
		t.Errorf("read %q", b)
	}
	for _, c := range []struct{ id, name string }{{"old", "report.json"}, {"mid", "secret.txt"}, {"mid", "basis.npy"},
		{"..", "http-jobs/mid/report.json"}, {"not a job", "report.json"}, {"mid", "figures/../report.json"}} {
		if r, err := v.Output(context.Background(), c.id, c.name); !errors.Is(err, httpapi.ErrNotFound) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Output(%q, %q): %v, want not found", c.id, c.name, err)
		}
	}
	if (&View{}).outputNames("new") != nil {
		t.Error("a view without outputs lists some")
	}
}

// TestStateWarnings: suspect and dead members and mixed versions are warned of; left
// members and one version are not.
func TestStateWarnings(t *testing.T) {
	got := stateWarnings([]httpapi.MemberView{{Name: "a", State: "alive", Version: "1.0"}, {Name: "b", State: "suspect", Version: "1.0"},
		{Name: "c", State: "dead", Version: "0.9"}, {Name: "d", State: "left"}, {Name: "e", State: "alive", Version: "1.1"}})
	want := []string{"member b", "member c", "1.0 on a, b; 1.1 on e"}
	if len(got) != len(want) {
		t.Fatalf("warnings %q", got)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d: %q, want it to say %q", i, got[i], w)
		}
	}
	if got := stateWarnings([]httpapi.MemberView{{Name: "a", State: "alive", Version: "1"}, {Name: "d", State: "left", Version: "0"}}); len(got) != 0 {
		t.Errorf("warnings %q", got)
	}
}

// TestDivergedJobStaysEncodable: a job whose loss diverged (NaN and infinite errors, as a beta
// loss of -1e308 gives) is shown with 0 in their place, so that the lists that carry it stay
// JSON; the reviewer's 500 on every member's job list for a day.
func TestDivergedJobStaysEncodable(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	jv := jobView(&messages.JobInfo{JobId: "j1", State: messages.JobPhase_JOB_PHASE_RUNNING, RelErr2: nan, Rate: inf, Seconds: 1, Iteration: 3, MaxIter: 10,
		History: []*messages.HistoryPoint{{Iteration: 1, RelErr2: nan, TestRelErr2: inf}, {Iteration: 2, RelErr2: 0.5}}})
	if _, err := json.Marshal(jv); err != nil {
		t.Fatalf("a diverged job is not JSON: %v", err)
	}
	if jv.RelErr2 != 0 || jv.Rate != 0 || jv.History[0].RelErr2 != 0 || jv.History[1].RelErr2 != 0.5 || jv.Seconds != 1 {
		t.Errorf("diverged job %+v", jv)
	}
}

// TestOutputsFloodEvictsTheFlooder: one client's many attached jobs push out only its own
// outputs and ended jobs, not the operator's older ones: past the bound the oldest of the
// owner holding the most goes, on disk (found at start, by the owner each directory names)
// and in the view.
func TestOutputsFloodEvictsTheFlooder(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "http-jobs")
	start := time.Now().Add(-time.Hour)
	mk := func(i int, id, owner string) {
		d := filepath.Join(base, id)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "report.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
		at := start.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
	}
	mk(0, "op-1", "operator")
	mk(1, "op-2", "operator")
	for i := range 34 {
		mk(2+i, fmt.Sprintf("m-%02d", i), "mallory")
	}
	o, err := openOutputs(dir, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := &View{outputs: o}
	for _, id := range []string{"op-1", "op-2", "m-04", "m-33"} {
		if v.outputNames(id) == nil {
			t.Errorf("the outputs of %s were removed", id)
		}
	}
	for _, id := range []string{"m-00", "m-01", "m-02", "m-03"} {
		if _, err := os.Stat(filepath.Join(base, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the flooder's oldest outputs %s stay: %v", id, err)
		}
	}
	if r, err := v.Output(context.Background(), "op-1", ownerFile); !errors.Is(err, httpapi.ErrNotFound) {
		if r != nil {
			r.Close()
		}
		t.Errorf("the owner file is served: %v", err)
	}

	// The view's ended jobs: the same rule.
	v = &View{cfg: Config{KeepOutputs: 32}, attached: map[string]*attachedJob{}}
	end := func(id, owner string, at int64) {
		v.attached[id] = &attachedJob{last: httpapi.JobView{ID: id, Owner: owner}, end: &httpapi.JobView{ID: id, Owner: owner, EndedUnixMs: at}}
	}
	end("op-1", "operator", 1)
	for i := range 34 {
		end(fmt.Sprintf("m-%02d", i), "mallory", int64(2+i))
		v.forgetEnded()
	}
	if len(v.attached) != 32 || v.attached["op-1"] == nil || v.attached["m-02"] != nil || v.attached["m-03"] == nil {
		t.Errorf("after the flood the view keeps %d jobs; the operator's: %v", len(v.attached), v.attached["op-1"] != nil)
	}
}

// TestUnwrittenOutputsFailTheJob: a job the members list as done whose outputs this view could
// not write (a diverged job's report cannot hold its NaN) is shown failed with the reason, not
// done with outputs that 404.
func TestUnwrittenOutputsFailTheJob(t *testing.T) {
	why := &httpapi.ErrorView{Kind: "failure", Message: "the job ended, but its outputs could not be written on node a: json: unsupported value: NaN"}
	a := &attachedJob{end: &httpapi.JobView{ID: "j", State: "failed", Error: why, EndedUnixMs: 7}}
	jobs := map[string]httpapi.JobView{"j": {ID: "j", State: "done", EndedUnixMs: 5, Iteration: 20, Outputs: []string{"coef.npy"}}}
	a.merge(jobs, "j")
	if j := jobs["j"]; j.State != "failed" || j.Error != why || j.Outputs != nil || j.Iteration != 20 {
		t.Errorf("merged %+v, want the members' record failed with the view's reason", j)
	}
}
