package jobctl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func TestShardDriverUncommittedKept(t *testing.T) {
	for _, tc := range []struct {
		every int64
		want  int
	}{
		{every: -1, want: 3},  // automatic: checkpoints seconds apart, commits within milliseconds
		{every: 1, want: 20},  // fixed: shards may run that far ahead of stalled commits
		{every: 50, want: 20}, //
		{every: 0, want: 20},  // no checkpoints: only buddy copies of an older spec, if any
	} {
		if got := ShardDriverUncommittedKept(tc.every); got != tc.want {
			t.Errorf("ShardDriverUncommittedKept(%d) = %d, want %d", tc.every, got, tc.want)
		}
	}
}

// TestShardDriverRefusesWhatItCannotTake: an event it does not know, or one its runtime could
// not have sent in its state, is an error and changes nothing.
func TestShardDriverRefusesWhatItCannotTake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []any
		ev     any
	}{
		{name: "unknown event", ev: 42},
		{name: "a pointer to a known event", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}}, ev: &ShardDriverBuilt{}},
		{name: "a wire message", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}}, ev: &messages.Grant{JobId: "j", Epoch: 1, Granted: 5}},
		{name: "built before a load", ev: ShardDriverBuilt{}},
		{name: "a boundary before the start", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{}}, ev: ShardDriverBoundary{Iteration: 1}},
		{name: "a collective before the start", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{}}, ev: ShardDriverCollective{}},
		{name: "a result never awaited", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{}}, ev: ShardDriverReduced{}},
		{name: "a boundary while a result is awaited", before: []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{Rule: kernels.StopRule{MaxIter: 9}},
			ShardDriverStart{Job: "j", Epoch: 1, Granted: NoGrant}, ShardDriverCollective{Init: true}}, ev: ShardDriverBoundary{Iteration: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewShardDriver(ShardDriverConfig{Job: "j", Node: "n"})
			for _, ev := range tc.before {
				if err := d.Step(ev); err != nil {
					t.Fatalf("Step(%T): %v", ev, err)
				}
			}
			d.Ready()
			before := *d
			if err := d.Step(tc.ev); err == nil {
				t.Fatalf("Step(%T) took it", tc.ev)
			}
			if rd := d.Ready(); !rd.Empty() {
				t.Errorf("a refused event asked for %+v", rd)
			}
			if d.epoch != before.epoch || d.running != before.running || d.boundary != before.boundary || d.awaiting != before.awaiting ||
				d.built != before.built || d.loading != before.loading || d.seq != before.seq {
				t.Errorf("a refused event changed the driver")
			}
		})
	}
}

// shardDriverRig runs a job's shards as package actors does, each a ShardDriver around a real
// kernels.Machine, with the collectives computed as kernels.Run computes them: the bits must
// be those of kernels.Run.
type shardDriverRig struct {
	t      *testing.T
	spec   kernels.ShardSpec // of every shard but its own fields
	rule   kernels.StopRule
	every  int64
	blocks []kernels.Block
	shards []*shardDriverRigShard
	now    time.Time
}

type shardDriverRigShard struct {
	d       *ShardDriver
	m       *kernels.Machine
	pending *kernels.Step
	result  []float64
	advance bool
	end     *ShardDriverFinish
	snaps   map[int64]shardDriverRigSnap // checkpoints taken, by iteration
	// asked are the checkpoints the driver asked for, by iteration.
	asked []int64
}

type shardDriverRigSnap struct {
	snap    kernels.Snapshot
	history []float64
}

// step feeds a shard's driver an event and carries out what it asks (but stepping the
// machine, which run does).
func (r *shardDriverRig) step(s *shardDriverRigShard, i int, ev any) {
	r.t.Helper()
	if err := s.d.Step(ev); err != nil {
		r.t.Fatalf("shard %d: %v", i, err)
	}
	rd := s.d.Ready()
	if rd.Stale != 0 || rd.Superseded != 0 {
		r.t.Fatalf("shard %d: stale event %T", i, ev)
	}
	if rd.Load != nil {
		r.load(s, i, rd.Load.ResumeFrom)
	}
	if rd.Partial != nil && rd.Partial.Seq == 0 {
		r.t.Fatalf("shard %d: a partial numbered 0", i)
	}
	if rd.Deliver {
		s.m.Deliver(s.result)
		s.pending, s.result = nil, nil
	}
	for _, c := range rd.Checkpoints {
		snap, err := s.m.Snapshot()
		if err != nil {
			r.t.Fatal(err)
		}
		s.snaps[c.Iteration] = shardDriverRigSnap{snap: snap, history: slices.Clone(c.History)}
		s.asked = append(s.asked, c.Iteration)
	}
	if rd.Finish != nil {
		s.end = rd.Finish
	}
	s.advance = rd.Advance
}

// load builds shard i's machine, from the start or its checkpoint at resume, and tells the
// driver.
func (r *shardDriverRig) load(s *shardDriverRigShard, i int, resume int64) {
	if s.m != nil {
		s.m.Close()
	}
	spec := r.spec
	spec.Shard, spec.Shards, spec.X = i, len(r.blocks), r.blocks[i]
	for _, b := range r.blocks[:i] {
		_, n := b.Dims()
		spec.ColOffset += n
	}
	built := ShardDriverBuilt{Rule: r.rule, CheckpointEvery: r.every}
	if resume > 0 {
		c, ok := s.snaps[resume]
		if !ok {
			r.t.Fatalf("shard %d: no checkpoint at %d", i, resume)
		}
		spec.Resume, built.History = &c.snap, c.history
	}
	m, err := kernels.NewMachine(spec)
	if err != nil {
		r.t.Fatal(err)
	}
	s.m, s.pending, s.result, s.end = m, nil, nil, nil
	if err := s.d.Step(built); err != nil {
		r.t.Fatal(err)
	}
}

// assign gives every shard an assignment of epoch, resuming from resume, and starts them.
func (r *shardDriverRig) assign(epoch uint64, resume int64) {
	for i, s := range r.shards {
		r.step(s, i, ShardDriverAssign{Job: "j", Shard: int64(i), Epoch: epoch, ResumeFrom: resume})
	}
	for i, s := range r.shards {
		r.step(s, i, ShardDriverStart{Job: "j", Epoch: epoch, Granted: NoGrant, At: r.now})
	}
}

// run steps the machines while their drivers say so, computing each collective once every
// shard reached it, until every shard finished, or every shard ended iteration holdAt.
func (r *shardDriverRig) run(holdAt int64) {
	for {
		held := 0
		for i, s := range r.shards {
			for s.advance {
				st, err := s.m.Next()
				if err != nil {
					r.t.Fatal(err)
				}
				if st.Kind == kernels.StepCollective {
					s.pending = &st
					r.step(s, i, ShardDriverCollective{Iteration: int64(st.Iteration), Init: st.Init})
					continue
				}
				r.now = r.now.Add(time.Millisecond)
				r.step(s, i, ShardDriverBoundary{Iteration: int64(st.Iteration), Objective: st.Objective, Initial: st.Initial, At: r.now})
				if int64(st.Iteration) == holdAt {
					s.advance = false
					held++
				}
			}
		}
		if held == len(r.shards) {
			return
		}
		steps := make([]kernels.Step, len(r.shards))
		ended := 0
		for i, s := range r.shards {
			switch {
			case s.end != nil:
				ended++
			case s.pending != nil:
				steps[i] = *s.pending
			default:
				r.t.Fatalf("shard %d neither finished nor awaits a collective", i)
			}
		}
		if ended == len(r.shards) {
			return
		}
		if ended > 0 {
			r.t.Fatalf("%d of %d shards finished, the others await a collective", ended, len(r.shards))
		}
		results, err := kernels.Collective(steps)
		if err != nil {
			r.t.Fatal(err)
		}
		for i, s := range r.shards {
			ep := s.d.Epoch()
			r.step(s, i, ShardDriverResultChunk{Job: "j", Epoch: ep, Seq: s.d.seq, Lo: int64(i), Hi: int64(i) + 1})
			s.result = results[i]
			r.step(s, i, ShardDriverReduced{At: r.now})
		}
	}
}

// factors are the job's B (shard 0's replica) and C (the shards' in order).
func (r *shardDriverRig) factors() (b, c []float64) {
	b = slices.Clone(r.shards[0].m.Basis())
	for _, s := range r.shards {
		c = append(c, s.m.Coef()...)
	}
	return b, c
}

func newShardDriverRig(t *testing.T, algo kernels.Algorithm, shards int, rule kernels.StopRule, every int64) *shardDriverRig {
	const m, n, k = 9, 24, 3
	x := kernels.NewDense(m, n)
	for i := range x.Data {
		x.Data[i] = float64((i*7919)%23+1) / 7
	}
	r := &shardDriverRig{t: t, rule: rule, every: every, now: t0,
		spec: kernels.ShardSpec{Algo: algo, TotalCols: n, K: k, Seed: 11, Init: kernels.InitSpec{Method: kernels.InitRandom}, Pool: kernels.NewPool(1)}}
	t.Cleanup(r.spec.Pool.Close)
	cols := kernels.ColumnRanges(n, shards)
	for s := range shards {
		blk := kernels.NewDense(m, cols[s+1]-cols[s])
		copy(blk.Data, x.Data[cols[s]*m:cols[s+1]*m])
		r.blocks = append(r.blocks, blk)
		r.shards = append(r.shards, &shardDriverRigShard{d: NewShardDriver(ShardDriverConfig{Job: "j", Shard: int64(s), Node: "n"}),
			snaps: map[int64]shardDriverRigSnap{}})
	}
	t.Cleanup(func() {
		for _, s := range r.shards {
			if s.m != nil {
				s.m.Close()
			}
		}
	})
	return r
}

// TestShardDriverRunsARealMachineBitwise: shards driven by ShardDriver around real kernels
// machines stop where kernels.Run stops, for the same reason, with the same bits; and shards
// rolled back in place to a checkpoint mid-run (a recovery) end with those bits too.
func TestShardDriverRunsARealMachineBitwise(t *testing.T) {
	for _, tc := range []struct {
		name   string
		algo   kernels.Algorithm
		shards int
		rule   kernels.StopRule
	}{
		{name: "did max-iter", algo: kernels.DID, shards: 3, rule: kernels.StopRule{MaxIter: 14}},
		{name: "did stalled", algo: kernels.DID, shards: 2, rule: kernels.StopRule{MaxIter: 500, StallTol: 0.01, StallWindow: 3}},
		{name: "dbcd converged", algo: kernels.DBCD, shards: 2, rule: kernels.StopRule{MaxIter: 500, Tol: 0.2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := newShardDriverRig(t, tc.algo, tc.shards, tc.rule, 0)
			want, err := kernels.Run(context.Background(), ref.blocks, kernels.Config{Algo: tc.algo, K: ref.spec.K, Seed: ref.spec.Seed,
				Init: ref.spec.Init, Stop: tc.rule, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("kernels.Run: %d iterations, %s", want.Iterations, want.StopReason)
			if want.Iterations < 6 {
				t.Fatalf("kernels.Run stopped at %d: too early for a rollback to mean anything", want.Iterations)
			}

			plain := newShardDriverRig(t, tc.algo, tc.shards, tc.rule, 0)
			plain.assign(1, 0)
			plain.run(-1)
			plain.check(want, "run")

			// Checkpoints every 2 iterations; all shards stop the iteration before the end, the
			// job rolls back to the last checkpoint and runs again to its end: the stop rule
			// decides the last iterations from the history the checkpoint saved.
			rb := newShardDriverRig(t, tc.algo, tc.shards, tc.rule, 2)
			rb.assign(1, 0)
			hold := int64(want.Iterations - 1)
			rb.run(hold)
			var asked []int64
			for it := int64(2); it <= hold; it += 2 {
				asked = append(asked, it)
			}
			if got := rb.shards[0].asked; !slices.Equal(got, asked) {
				t.Fatalf("checkpoints asked at %v, want %v", got, asked)
			}
			resume := asked[len(asked)-1]
			rb.assign(2, resume)
			rb.run(-1)
			rb.check(want, fmt.Sprintf("rolled back from %d to %d", hold, resume))
		})
	}
}

// check compares the shards' end with kernels.Run's result.
func (r *shardDriverRig) check(want *kernels.Result, what string) {
	r.t.Helper()
	for i, s := range r.shards {
		if s.end == nil {
			r.t.Fatalf("%s: shard %d did not finish", what, i)
		}
		if s.end.Iteration != int64(want.Iterations) || s.end.Reason != want.StopReason {
			r.t.Fatalf("%s: shard %d finished at %d (%s), kernels.Run at %d (%s)", what, i, s.end.Iteration, s.end.Reason, want.Iterations, want.StopReason)
		}
	}
	b, c := r.factors()
	for name, pair := range map[string][2][]float64{"B": {b, want.B}, "C": {c, want.C}} {
		got, exp := pair[0], pair[1]
		if len(got) != len(exp) {
			r.t.Fatalf("%s: %s has %d values, want %d", what, name, len(got), len(exp))
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(exp[i]) {
				r.t.Fatalf("%s: %s[%d] = %v, kernels.Run has %v: not the same bits", what, name, i, got[i], exp[i])
			}
		}
	}
}

// TestShardDriverReportsEveryIterationOnce: whatever the cadence of bursts, shard 0 reports
// every iteration exactly once, in order, the stop last, and the report's seconds are those
// of the iteration's end.
func TestShardDriverReportsEveryIterationOnce(t *testing.T) {
	for _, iter := range []time.Duration{0, time.Microsecond, 3 * time.Millisecond, 20 * time.Millisecond} {
		for _, granted := range []int64{NoGrant, 1000} {
			d := NewShardDriver(ShardDriverConfig{Job: "j", Node: "n"})
			steps := []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{Rule: kernels.StopRule{MaxIter: 300}},
				ShardDriverStart{Job: "j", Epoch: 1, Granted: granted, At: t0}}
			for _, ev := range steps {
				if err := d.Step(ev); err != nil {
					t.Fatal(err)
				}
			}
			var got []*messages.IterationDone
			now := t0
			for it := int64(1); it <= 300; it++ {
				if err := d.Step(ShardDriverCollective{Iteration: it}); err != nil {
					t.Fatal(err)
				}
				d.Ready()
				if err := d.Step(ShardDriverResultChunk{Job: "j", Epoch: 1, Seq: d.seq, Lo: 0, Hi: 1}); err != nil {
					t.Fatal(err)
				}
				if err := d.Step(ShardDriverReduced{At: now}); err != nil {
					t.Fatal(err)
				}
				d.Ready()
				now = now.Add(iter)
				if err := d.Step(ShardDriverBoundary{Iteration: it, Objective: 1, Initial: 2, At: now}); err != nil {
					t.Fatal(err)
				}
				rd := d.Ready()
				for _, m := range rd.Sends {
					got = append(got, m.(*messages.IterationDone))
				}
				if granted != NoGrant && len(rd.Sends) != 1 {
					t.Fatalf("iter %v, granted: iteration %d sent %d reports, want 1 at once", iter, it, len(rd.Sends))
				}
				if (rd.Finish != nil) != (it == 300) || (it < 300) != rd.Advance {
					t.Fatalf("iter %v: iteration %d: finish %v advance %v", iter, it, rd.Finish, rd.Advance)
				}
			}
			if len(got) != 300 {
				t.Fatalf("iter %v: %d reports, want 300", iter, len(got))
			}
			for i, r := range got {
				it := int64(i + 1)
				if r.Iteration != it || r.Epoch != 1 || r.JobId != "j" {
					t.Fatalf("iter %v: report %d is of iteration %d", iter, i, r.Iteration)
				}
				if want := (time.Duration(it) * iter).Seconds(); r.Seconds != want {
					t.Fatalf("iter %v: iteration %d reports %v seconds, want %v", iter, it, r.Seconds, want)
				}
				if (r.Stop != "") != (it == 300) {
					t.Fatalf("iter %v: iteration %d reports stop %q", iter, it, r.Stop)
				}
			}
		}
	}
}

// TestShardDriverCheckpointErrors: a checkpoint the node could not write, or the buddy could
// not keep, reaches the coordinator as an error naming the shard, the node and the iteration.
func TestShardDriverCheckpointErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   any
		want string
	}{
		{name: "write", ev: ShardDriverCheckpointWritten{Epoch: 1, Iteration: 2, Err: errors.New("disk full")},
			want: "shard 3 on node n7: checkpoint at iteration 2: disk full"},
		{name: "buddy", ev: ShardDriverCheckpointStored{Job: "j", Shard: 3, Iteration: 2, Err: errors.New("buddy b: quota")},
			want: "shard 3 on node n7: checkpoint at iteration 2: buddy b: quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewShardDriver(ShardDriverConfig{Job: "j", Shard: 3, Node: "n7"})
			for _, ev := range []any{ShardDriverAssign{Job: "j", Shard: 3, Epoch: 1, Buddy: true}, ShardDriverBuilt{Rule: kernels.StopRule{MaxIter: 9}, CheckpointEvery: 2},
				ShardDriverStart{Job: "j", Epoch: 1, Granted: NoGrant, At: t0}, ShardDriverCollective{Iteration: 1}, ShardDriverReduced{At: t0},
				ShardDriverBoundary{Iteration: 1, Objective: 1, Initial: 2, At: t0}, ShardDriverCollective{Iteration: 2}, ShardDriverReduced{At: t0},
				ShardDriverBoundary{Iteration: 2, Objective: 1, Initial: 2, At: t0}} {
				if err := d.Step(ev); err != nil {
					t.Fatal(err)
				}
			}
			if rd := d.Ready(); len(rd.Checkpoints) != 1 || rd.Checkpoints[0].Iteration != 2 {
				t.Fatalf("checkpoints asked: %+v, want one at 2", rd.Checkpoints)
			}
			if tc.name == "buddy" {
				if err := d.Step(ShardDriverCheckpointWritten{Epoch: 1, Iteration: 2, Data: []byte{1}, At: t0}); err != nil {
					t.Fatal(err)
				}
				if rd := d.Ready(); len(rd.Copies) != 1 || len(rd.Sends) != 0 {
					t.Fatalf("a written checkpoint with a buddy: %+v, want a copy and no report", rd)
				}
			}
			if err := d.Step(tc.ev); err != nil {
				t.Fatal(err)
			}
			rd := d.Ready()
			if len(rd.Sends) != 1 {
				t.Fatalf("sends %v, want one CheckpointDone", rd.Sends)
			}
			done := rd.Sends[0].(*messages.CheckpointDone)
			if done.Error != tc.want || done.Iteration != 2 || done.Shard != 3 || done.Epoch != 1 {
				t.Fatalf("CheckpointDone %v, want error %q", done, tc.want)
			}
		})
	}
}

// TestShardDriverInitSecondsRunToInitEnded: the initialisation's time reported with the
// first iteration runs to the machine's InitEnded when that comes after the last
// initialisation collective (a random C drawn after the mean's allreduce), and stays at the
// collective when InitEnded is unknown, earlier, or after the boundary itself.
func TestShardDriverInitSecondsRunToInitEnded(t *testing.T) {
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name      string
		initEnded time.Time
		want      float64
	}{
		{"unknown", time.Time{}, 0.5},
		{"after the collective", sec(1.75), 1.75},
		{"before the collective", sec(0.25), 0.5},
		{"after the boundary", sec(3), 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewShardDriver(ShardDriverConfig{Job: "j", Shard: 0, Node: "n"})
			for _, ev := range []any{ShardDriverAssign{Job: "j", Epoch: 1}, ShardDriverBuilt{Rule: kernels.StopRule{MaxIter: 1}},
				ShardDriverStart{Job: "j", Epoch: 1, Granted: NoGrant, At: t0}, ShardDriverCollective{Iteration: 0, Init: true},
				ShardDriverReduced{At: sec(0.5)}, ShardDriverCollective{Iteration: 1}, ShardDriverReduced{At: sec(1.9)},
				ShardDriverBoundary{Iteration: 1, Objective: 1, Initial: 2, At: sec(2), InitEnded: tc.initEnded}} {
				if err := d.Step(ev); err != nil {
					t.Fatal(err)
				}
			}
			var got []float64
			for _, m := range d.Ready().Sends {
				if done, ok := m.(*messages.IterationDone); ok {
					got = append(got, done.InitSeconds)
				}
			}
			if len(got) != 1 || math.Abs(got[0]-tc.want) > 1e-9 {
				t.Errorf("reported init seconds %v, want [%v]", got, tc.want)
			}
		})
	}
}
