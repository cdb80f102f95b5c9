package didnmf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// resumeInput is the small input the journal's tests sweep: 6 runs (K = 2, 3, 4, two seeds
// and two folds each) take a fraction of a second.
const resumeInput = "synthetic:m=30,n=40,k=3,seed=1"

// resumeOptions are the sweep the journal's tests run (OnRun and Journal set by each).
func resumeOptions() didnmf.SweepOptions {
	return didnmf.SweepOptions{Ranks: []int{2, 3, 4}, Seeds: 2, Folds: 2, FirstSeed: 1, Parallel: 1}
}

// resumeJob opens the job of resumeInput at the largest rank, 10% held out, in this process.
func resumeJob(t *testing.T) (*didnmf.Runner, *didnmf.Job) {
	t.Helper()
	spec := jobspec.New([]string{resumeInput}, kernels.DID, 4, 1)
	spec.TestFraction = 0.1
	spec.Stop.MaxIter = 300
	r, err := didnmf.NewRunner(didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	j, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return r, j
}

// sameBits tells whether two float64 slices hold the same bits.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// mapJournal is a journal in memory whose Done and Record can be made to fail.
type mapJournal struct {
	runs               map[string]*didnmf.Result
	doneErr, recordErr error
	dones              int
}

func (m *mapJournal) Done(k, seed, fold int) (*didnmf.Result, error) {
	m.dones++
	if m.doneErr != nil {
		return nil, m.doneErr
	}
	return m.runs[fmt.Sprint(k, seed, fold)], nil
}

func (m *mapJournal) Record(k, seed, fold int, res *didnmf.Result) error {
	if m.recordErr != nil {
		return m.recordErr
	}
	c := *res
	m.runs[fmt.Sprint(k, seed, fold)] = &c
	return nil
}

// TestSweepJournalErrors: a journal's Done error fails the sweep before anything runs; a
// Record error loses no run (the sweep ends with every result) and is told with the run; a
// journal that gives back a result of another rank fails the sweep.
func TestSweepJournalErrors(t *testing.T) {
	r, j := resumeJob(t)
	doneErr := usererr.Errorf("a record that cannot be trusted")
	for _, c := range []struct {
		name    string
		journal *mapJournal
		want    string // the sweep's error ("": none)
	}{
		{"done fails", &mapJournal{runs: map[string]*didnmf.Result{}, doneErr: doneErr}, "a record that cannot be trusted"},
		{"record fails", &mapJournal{runs: map[string]*didnmf.Result{}, recordErr: errors.New("disk full")}, ""},
		{"another rank", &mapJournal{runs: map[string]*didnmf.Result{
			fmt.Sprint(3, 2, 1): {Result: kernels.Result{M: 30, K: 2, B: make([]float64, 60)}}}}, "its run of K=3 seed 2 fold 1 has K=2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := resumeOptions()
			o.Journal = c.journal
			var events []didnmf.SweepEvent
			o.OnRun = func(e didnmf.SweepEvent) { events = append(events, e) }
			res, err := r.Sweep(context.Background(), j, o)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || len(events) != 0 {
					t.Errorf("sweep: %v after %d events; want %q before any run", err, len(events), c.want)
				}
				if c.journal.doneErr != nil && (!errors.Is(err, doneErr) || c.journal.dones != 1) {
					t.Errorf("the error %v is not the journal's, or Done was asked again (%d)", err, c.journal.dones)
				}
				return
			}
			if err != nil || len(res.Runs) != 6 || len(res.Failed()) != 0 || res.ResumedRuns() != 0 || len(events) != 6 {
				t.Fatalf("sweep: %v, %d events", err, len(events))
			}
			for _, e := range events {
				if !errors.Is(e.JournalErr, c.journal.recordErr) || e.Result == nil {
					t.Errorf("event %+v does not carry the journal's error", e)
				}
			}
		})
	}
}
