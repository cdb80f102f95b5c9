package actors

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func TestFaultsWithoutMessageFaultsHaveNoMiddleware(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults *Faults
		want   bool
	}{
		{"no faults", nil, false},
		{"actor faults only", &Faults{IterationDelay: time.Millisecond, PanicAtIteration: 3, SetupDelay: time.Second,
			Panics: func(int64, int64) bool { return true }}, false},
		{"duplicate", &Faults{DuplicatePartials: true}, true},
		{"replay", &Faults{ReplayPartials: true}, true},
		{"corrupt", &Faults{CorruptChunks: true}, true},
	} {
		if got := tc.faults.partialMiddleware() != nil; got != tc.want {
			t.Errorf("%s: middleware %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, ok := (*Faults)(nil).hooks().(noHooks); !ok {
		t.Errorf("a node without faults has hooks %T, want noHooks", (*Faults)(nil).hooks())
	}
}

// TestPartialMiddleware sends a shard's collectives through the faults' middleware, as a
// shard actor does, and offers what comes out to a reducer's gather with a second child: the
// trace is what went out (epoch/collective:chunk, "!" for a chunk whose checksum fails), the
// counts what the receiver made of it. Chunks hold 2 values.
func TestPartialMiddleware(t *testing.T) {
	for _, tc := range []struct {
		name              string
		faults            *Faults
		epochs            []uint64 // each collective's epoch; collectives count from 1 in each
		values            int      // values of each partial
		trace             string
		dups, stale, crpt int
	}{
		{"duplicate", &Faults{DuplicatePartials: true}, []uint64{1, 1}, 4,
			"1/1:0 1/1:0 1/1:1 1/1:1 1/2:0 1/2:0 1/2:1 1/2:1", 4, 0, 0},
		{"replay", &Faults{ReplayPartials: true}, []uint64{1, 1}, 4,
			"1/1:0 1/1:1 1/2:0 1/2:1 1/1:0 1/1:1", 0, 2, 0},
		{"duplicate and replay", &Faults{DuplicatePartials: true, ReplayPartials: true}, []uint64{1, 1}, 4,
			"1/1:0 1/1:0 1/1:1 1/1:1 1/2:0 1/2:0 1/2:1 1/2:1 1/1:0 1/1:1", 4, 2, 0},
		{"replay of one-chunk partials", &Faults{ReplayPartials: true}, []uint64{1, 1, 1}, 2,
			"1/1:0 1/2:0 1/1:0 1/3:0 1/2:0", 0, 2, 0},
		{"no replay across a recovery", &Faults{ReplayPartials: true}, []uint64{1, 2, 2}, 4,
			"1/1:0 1/1:1 2/1:0 2/1:1 2/2:0 2/2:1 2/1:0 2/1:1", 0, 2, 0},
		{"corrupt", &Faults{CorruptChunks: true}, []uint64{1}, 4, "1/1:0! 1/1:1", 0, 0, 1},
		{"corrupt spares a one-chunk partial", &Faults{CorruptChunks: true}, []uint64{1, 1}, 2, "1/1:0 1/2:0", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []any
			send := tc.faults.partialMiddleware()(func(_ actor.SenderContext, _ *actor.PID, env *actor.MessageEnvelope) {
				out = append(out, env.Message)
			})
			reducer := actor.NewPID("nonhost", "reducer")
			send(nil, reducer, actor.WrapEnvelope(&messages.IterationDone{JobId: "j"}))
			if len(out) != 1 || !isIterationDone(out[0]) {
				t.Fatalf("another message came out as %v", out)
			}
			out = nil

			var trace []string
			var g *jobctl.Gather
			var gEpoch uint64
			dups, stale, crpt := 0, 0, 0
			seq := uint64(0)
			for k, epoch := range tc.epochs {
				if g == nil || epoch != gEpoch {
					g, gEpoch, seq = jobctl.NewGather(epoch, [][2]int64{{0, 1}, {1, 2}}), epoch, 0 // a recovery: a new reducer
				}
				seq++
				data := make([]float64, tc.values)
				for i := range data {
					data[i] = float64(k+1) + float64(i)/3
				}
				pristine := slices.Clone(data)
				for _, c := range chunked.Split(data, 2) {
					send(nil, reducer, actor.WrapEnvelope(&messages.Partial{JobId: "j", Epoch: epoch, Seq: seq,
						Op: int32(kernels.OpAllReduce), Label: "x", Lo: 0, Hi: 1, Chunk: c}))
				}
				if !slices.Equal(data, pristine) {
					t.Fatalf("the middleware changed the shard's data: %v, was %v", data, pristine)
				}
				corrupt := false
				for _, m := range out {
					p := m.(*messages.Partial)
					mark := ""
					if chunked.Verify(p.Chunk) != nil {
						mark = "!"
					}
					trace = append(trace, fmt.Sprintf("%d/%d:%d%s", p.Epoch, p.Seq, p.Chunk.Seq, mark))
					switch st, err := g.Offer(p); {
					case err != nil && isCorruption(err):
						crpt++
						corrupt = true
					case err != nil:
						t.Fatalf("offer %v: %v", p, err)
					case st == jobctl.OfferDuplicate:
						dups++
					case st == jobctl.OfferStale:
						stale++
					}
				}
				out = nil
				if corrupt {
					continue
				}
				// The other child's contribution completes the collective: the sum is the
				// shard's data plus the other's, as without faults.
				other := make([]float64, tc.values)
				for i := range other {
					other[i] = 0.1
				}
				if st, err := g.Offer(&messages.Partial{JobId: "j", Epoch: epoch, Seq: seq, Op: int32(kernels.OpAllReduce), Label: "x",
					Lo: 1, Hi: 2, Chunk: chunked.Split(other, tc.values)[0]}); st != jobctl.OfferComplete || err != nil {
					t.Fatalf("collective %d/%d: the other child's partial: %v, %v", epoch, seq, st, err)
				}
				_, sum, err := g.Combine()
				if err != nil {
					t.Fatal(err)
				}
				for i := range sum {
					if want := pristine[i] + other[i]; math.Float64bits(sum[i]) != math.Float64bits(want) {
						t.Fatalf("collective %d/%d: value %d is %v, want %v", epoch, seq, i, sum[i], want)
					}
				}
			}
			if got := strings.Join(trace, " "); got != tc.trace {
				t.Errorf("sent %q, want %q", got, tc.trace)
			}
			if dups != tc.dups || stale != tc.stale || crpt != tc.crpt {
				t.Errorf("receiver counted %d duplicates, %d stale, %d corrupt; want %d, %d, %d", dups, stale, crpt, tc.dups, tc.stale, tc.crpt)
			}
		})
	}
}

func isIterationDone(m any) bool {
	_, ok := m.(*messages.IterationDone)
	return ok
}

// TestFaultHooks calls the hooks of some faults at the points the actors call them, in order,
// and checks which calls panic, with what.
func TestFaultHooks(t *testing.T) {
	type call struct {
		do    func(h hooks)
		panic string // "" for none
	}
	boundary := func(shard, shards, it int64, panics string) call {
		return call{func(h hooks) { h.shardBoundary(shard, shards, it) }, panics}
	}
	combined := func(lo, hi, it int64, init bool, panics string) call {
		return call{func(h hooks) { h.reducerCombined(lo, hi, it, init) }, panics}
	}
	setup := call{func(h hooks) { h.setupBegins("j") }, ""}
	for _, tc := range []struct {
		name   string
		faults *Faults
		calls  []call
	}{
		{"no faults", nil, []call{boundary(1, 3, 3, ""), combined(0, 4, 7, false, ""), setup}},
		{"delays only", &Faults{IterationDelay: time.Microsecond, SetupDelay: time.Microsecond},
			[]call{boundary(1, 3, 3, ""), setup}},
		{"panic at an iteration", &Faults{PanicAtIteration: 3}, []call{
			boundary(1, 3, 2, ""),
			boundary(0, 3, 3, ""),
			boundary(1, 3, 3, "injected fault: shard 1 panics at iteration 3"),
			boundary(1, 3, 3, "injected fault: shard 1 panics at iteration 3"), // every time
		}},
		{"panic at an iteration of one shard", &Faults{PanicAtIteration: 3}, []call{
			boundary(0, 1, 3, "injected fault: shard 0 panics at iteration 3"),
		}},
		{"scheduled panics fire once", &Faults{Panics: func(shard, it int64) bool { return shard == 2 && it%5 == 0 }}, []call{
			boundary(2, 4, 4, ""),
			boundary(1, 4, 5, ""),
			boundary(2, 4, 5, "injected fault: shard 2 panics at iteration 5"),
			boundary(2, 4, 5, ""), // the replay after the recovery goes through
			boundary(2, 4, 10, "injected fault: shard 2 panics at iteration 10"),
			combined(2, 4, 5, false, ""), // a reducer's panics are counted apart
		}},
		{"reducer panics", &Faults{ReducerPanics: func(lo, it int64) bool { return lo == 0 && it == 7 }}, []call{
			combined(0, 4, 7, true, ""), // never in the initialisation
			combined(4, 8, 7, false, ""),
			combined(0, 4, 7, false, "injected fault: reducer [0, 4) panics at iteration 7"),
			combined(0, 4, 7, false, ""),
			boundary(0, 4, 7, ""),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.faults.hooks()
			for i, c := range tc.calls {
				got := panicOf(func() { c.do(h) })
				if got != c.panic {
					t.Fatalf("call %d: panic %q, want %q", i, got, c.panic)
				}
			}
		})
	}
}

// panicOf runs f and returns what it panicked with, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

func TestCorruptCheckpointsHook(t *testing.T) {
	corrupt := &Faults{CorruptCheckpoints: func(kind string, shard, it int64) bool { return kind == "own" && shard == 1 && it >= 20 }}
	for _, tc := range []struct {
		name    string
		faults  *Faults
		kind    checkpoint.Kind
		shard   int
		it      int64
		flipped bool
	}{
		{"no faults", nil, checkpoint.Own, 1, 20, false},
		{"other faults", &Faults{IterationDelay: time.Millisecond}, checkpoint.Own, 1, 20, false},
		{"due", corrupt, checkpoint.Own, 1, 20, true},
		{"buddy copy", corrupt, checkpoint.Buddy, 1, 20, false},
		{"other shard", corrupt, checkpoint.Own, 0, 20, false},
		{"earlier", corrupt, checkpoint.Own, 1, 15, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "iter.ckpt")
			want := []byte("0123456789")
			if err := os.WriteFile(path, want, 0o600); err != nil {
				t.Fatal(err)
			}
			tc.faults.hooks().checkpointWritten(tc.kind, tc.shard, tc.it, path)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.flipped {
				want = slices.Clone(want)
				want[len(want)/2] ^= 0x40
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file holds %q, want %q", got, want)
			}
		})
	}
}

// TestKeepCheckpointCallsTheHook: the node's checkpoint write path hands every file it
// wrote to the hooks, with its path in the store.
func TestKeepCheckpointCallsTheHook(t *testing.T) {
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingHooks{}
	n := &Node{store: store, hooks: rec, committed: map[string]int64{}, ended: map[string]time.Time{}}
	data, err := (&checkpoint.Record{Job: "j", Shard: 2, Shards: 3, Epoch: 1, Iteration: 5, B: []float64{1}, C: []float64{2}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []checkpoint.Kind{checkpoint.Own, checkpoint.Buddy} {
		if err := n.keepCheckpoint(kind, "j", 2, 5, data, 3); err != nil {
			t.Fatal(err)
		}
	}
	own, _ := store.Path(checkpoint.Own, "j", 2, 5)
	buddy, _ := store.Path(checkpoint.Buddy, "j", 2, 5)
	want := []string{"own 2 5 " + own, "buddy 2 5 " + buddy}
	if !slices.Equal(rec.written, want) {
		t.Fatalf("hooks saw %q, want %q", rec.written, want)
	}
}

// recordingHooks records the checkpoints written.
type recordingHooks struct {
	noHooks
	written []string
}

func (r *recordingHooks) checkpointWritten(kind checkpoint.Kind, shard int, iteration int64, path string) {
	r.written = append(r.written, fmt.Sprintf("%s %d %d %s", kind, shard, iteration, path))
}
